#!/usr/bin/env bash
# BenchBase side by side (issue 21), until `hayate-lab benchbase` drives it: each sample
# configuration of BenchBase (cmu-db/benchbase at 65322e95, built with `mvn -P postgres
# -DskipTests package` and unpacked from target/benchbase-postgres.tgz) runs against
# `hayate serve` and against the local PostgreSQL 15, one after the other, with only the URL's
# port changed and <time> set to $SECONDS_PER_RUN. Run as root from the repository root after
# `cargo build --release -p hayate`; PostgreSQL needs the role admin/password and may lose its
# database `benchbase`. Usage: scripts/benchbase.sh BENCHBASE_DIR [benchmark ...]
set -u
H=$(realpath "${HAYATE:-target/release/hayate}")
BB=$(realpath "$1"); shift
BENCHMARKS=${*:-tpcc tatp smallbank ycsb voter twitter epinions seats auctionmark}
TIME=${SECONDS_PER_RUN:-10}
WORK=$(realpath -m "${WORK:-benchbase-runs}"); mkdir -p "$WORK"
su postgres -c "psql -q -c \"CREATE ROLE admin LOGIN SUPERUSER PASSWORD 'password'\"" 2>/dev/null
cd "$BB"
for b in $BENCHMARKS; do
  for target in hayate postgres; do
    if [ "$target" = hayate ]; then
      rm -rf "$WORK/data"
      $H serve --data-dir "$WORK/data" --port 5433 --unix-socket-dir "" >"$WORK/server-$b.log" 2>&1 &
      SERVER=$!; port=5433; sleep 1
      psql -h 127.0.0.1 -p 5433 -U admin -d postgres -q -c 'CREATE DATABASE benchbase'
    else
      su postgres -c "psql -q -c 'DROP DATABASE IF EXISTS benchbase'"
      su postgres -c "psql -q -c 'CREATE DATABASE benchbase OWNER admin'"
      port=5432
    fi
    sed -e "s#localhost:5432#127.0.0.1:$port#" -e "s#<time>[0-9]*</time>#<time>$TIME</time>#" \
      "config/postgres/sample_${b}_config.xml" >"$WORK/$b-$target.xml"
    timeout 600 java -jar benchbase.jar -b "$b" -c "$WORK/$b-$target.xml" \
      --create=true --load=true --execute=true >"$WORK/$b-$target.log" 2>&1
    rc=$?
    tput=$(grep -o "= [0-9.]* requests/sec (throughput)" "$WORK/$b-$target.log" | head -1)
    echo "$b $target exit=$rc ${tput:-no result}"
    if [ "$target" = hayate ]; then kill -TERM $SERVER; wait $SERVER 2>/dev/null; fi
  done
done

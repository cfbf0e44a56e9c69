#!/usr/bin/env bash
# HA overhead by hand (issue 20, setting (a)): pgbench simple-update through hayate serve, alone vs with
# a synchronous standby, both on this machine. Run from the repository root after
# `cargo build --release -p hayate`; data goes to $WORK (default ./ha-bench), ports 5533/5534/6533.
H=$(realpath "${HAYATE:-target/release/hayate}")
WORK=${WORK:-ha-bench}; rm -rf "$WORK/a" "$WORK/b"; mkdir -p "$WORK"; cd "$WORK"
set -u
PG="host=127.0.0.1 user=postgres dbname=postgres"
start() { $H serve --data-dir "$1" --port "$2" --unix-socket-dir "" --buffer-size 1GB "${@:3}" >/dev/null 2>&1 & echo $!; }
wait_up() { for i in $(seq 1 200); do psql "$PG port=$1" -Atc "select 1" >/dev/null 2>&1 && return; sleep 0.1; done; echo "not up $1"; }
stopit() { kill -TERM "$1"; while kill -0 "$1" 2>/dev/null; do sleep 0.1; done; }
P=$(start a 5533); wait_up 5533
pgbench -h 127.0.0.1 -p 5533 -U postgres -i -s 10 -q postgres >/dev/null 2>&1
stopit $P
for round in 1 2; do
  P=$(start a 5533); wait_up 5533
  echo "round $round alone: $(pgbench -h 127.0.0.1 -p 5533 -U postgres -N -c 16 -j 2 -T 20 -M prepared postgres 2>/dev/null | grep -E '^tps' )"
  stopit $P
  rm -rf b; cp -r a b
  P=$(start a 5533 --ha-replication-listen 127.0.0.1:6533); S=$(start b 5534 --ha-follow 127.0.0.1:6533); wait_up 5533; wait_up 5534
  echo "round $round with standby: $(pgbench -h 127.0.0.1 -p 5533 -U postgres -N -c 16 -j 2 -T 20 -M prepared postgres 2>/dev/null | grep -E '^tps')"
  echo "  primary count: $(psql "$PG port=5533" -Atc 'select sum(abalance) from pgbench_accounts') standby: $(sleep 1; psql "$PG port=5534" -Atc 'select sum(abalance) from pgbench_accounts')"
  stopit $S; stopit $P
done

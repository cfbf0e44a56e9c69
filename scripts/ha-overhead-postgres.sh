#!/usr/bin/env bash
# The PostgreSQL 15 peer of ha-overhead.sh: pgbench simple-update alone (standby streaming asynchronously)
# vs with a synchronous streaming standby. Run as root (the servers run as user postgres).
set -u
B=/usr/lib/postgresql/15/bin
D=$(realpath "${WORK:-ha-bench}")/pg
rm -rf $D; mkdir -p $D; chown postgres $D
as_pg() { su postgres -c "$*"; }
as_pg "$B/initdb -D $D/p1 -A trust -U postgres" >/dev/null
cat >> $D/p1/postgresql.conf <<CONF
port = 5633
listen_addresses = '127.0.0.1'
unix_socket_directories = '$D'
shared_buffers = 1GB
wal_level = replica
max_wal_senders = 4
synchronous_commit = on
CONF
echo "host replication all 127.0.0.1/32 trust" >> $D/p1/pg_hba.conf
as_pg "$B/pg_ctl -D $D/p1 -l $D/p1.log -w start" >/dev/null
pgbench -h 127.0.0.1 -p 5633 -U postgres -i -s 10 -q postgres >/dev/null 2>&1
as_pg "$B/pg_basebackup -h 127.0.0.1 -p 5633 -U postgres -D $D/p2 -R -X stream" >/dev/null
sed -i 's/^port = 5633/port = 5634/' $D/p2/postgresql.conf

as_pg "$B/pg_ctl -D $D/p2 -l $D/p2.log -w start" >/dev/null
sync_on() { psql -h 127.0.0.1 -p 5633 -U postgres -qc "ALTER SYSTEM SET synchronous_standby_names = '$1'" -c "SELECT pg_reload_conf()" >/dev/null; sleep 1; }
for round in 1 2; do
  sync_on ""
  echo "round $round alone: $(pgbench -h 127.0.0.1 -p 5633 -U postgres -N -c 16 -j 2 -T 20 -M prepared postgres 2>/dev/null | grep -E '^tps')"
  sync_on "*"
  echo "round $round sync standby: $(pgbench -h 127.0.0.1 -p 5633 -U postgres -N -c 16 -j 2 -T 20 -M prepared postgres 2>/dev/null | grep -E '^tps')"
  psql -h 127.0.0.1 -p 5633 -U postgres -Atc "select application_name, sync_state from pg_stat_replication"
done
as_pg "$B/pg_ctl -D $D/p2 -w stop" >/dev/null; as_pg "$B/pg_ctl -D $D/p1 -w stop" >/dev/null

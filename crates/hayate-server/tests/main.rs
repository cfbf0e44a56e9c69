//! hayate-server's integration tests, one module per file (described in the README's test table).

mod bad_input;
mod cancel_auth;
mod common;
mod copy;
mod databases;
mod drivers;
mod event_loop;
mod extended_protocol;
mod fuzz;
mod pg_dump;
mod pgbench;
mod psql;
mod queries;
mod replication_policy;
mod restart;
mod session_sql;
mod sysbench;
mod tls;
mod types;

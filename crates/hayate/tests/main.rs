//! hayate's integration tests, one module per file (described in the README's test table).

mod cli;
mod common;
mod ha;
mod ha_etcd;
mod serve;

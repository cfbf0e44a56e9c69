//! PostgreSQL as a peer: `instance` (the private server, connections, settings, errors and
//! the base `Driver`), `primitive` and `tpcc` (the two workloads over it).

mod instance;
pub(crate) mod primitive;
pub(crate) mod tpcc;

pub(crate) use instance::postgres_error;
pub use instance::{find_binaries, PostgresDriver, PostgresStandby, DATABASE, LAB_USER};

//! MariaDB with InnoDB as a peer: `instance` (the private server, connections, settings,
//! errors and the base `Driver`), `primitive` and `tpcc` (the two workloads over it).

mod instance;
mod primitive;
mod tpcc;

pub use instance::{check_installed, MariadbDriver, DATABASE, USER};

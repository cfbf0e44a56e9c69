//! SQLite as a peer: `instance` (the database file, connections, settings, errors and the
//! base `Driver`), `primitive` and `tpcc` (the two workloads over it).

mod instance;
mod primitive;
mod tpcc;

pub use instance::SqliteDriver;

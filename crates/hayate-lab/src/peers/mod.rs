//! The databases Hayate is measured against, behind the lab's driver interfaces
//! (`crate::driver`, `PrimitiveDriver`, `TpccDriver`): PostgreSQL, MariaDB with InnoDB, SQLite,
//! and Hayate itself as a server (`hayate_wire`).
//!
//! Every peer runs the same schema and transactions as Hayate with durable commits, and
//! records every durability and caching setting in `Driver::settings`. The lab starts and stops
//! PostgreSQL and MariaDB itself, each in a private temporary directory under `--dir`
//! (`server`), when their Debian packages are installed; SQLite is built in.
//!
//! Use:
//! 1. `available()` says which peers can run here (and how to install the others; `open`).
//! 2. `open_peer(name, base_dir, buffer_bytes)` makes an empty database (starting its server).
//! 3. The runner drives it like Hayate; `Driver::shutdown` (or dropping it) stops the server
//!    and removes the directory.
//!
//! Layout, from the bottom up:
//! - `server`: server processes and their private directories.
//! - `sql`: what every SQL peer shares: the primitive workload's session and loader threads,
//!   and TPC-C's schema, rows as SQL values, parallel loader and five transactions.
//! - one folder per peer (`postgres`, `mariadb`, `sqlite`): `instance` (the server or file,
//!   its connections, settings and errors; the base `Driver`), `primitive` and `tpcc` (the two
//!   workloads' drivers over that instance).
//! - `hayate_wire`: `hayate serve` behind the PostgreSQL peer's client code.
//! - `open`: the list of peers and `open_peer`.

pub mod hayate_wire;
pub mod mariadb;
mod open;
pub mod postgres;
pub mod server;
mod sql;
pub mod sqlite;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tpcc_tests;

pub use open::{available, open_peer, PEERS};

//! Which peers there are, whether each can run here, and opening one.
//!
//! 1. `available()` says which peers can run here (and how to install the others).
//! 2. `open_peer(name, base_dir, buffer_bytes)` makes an empty database (starting its server)
//!    and hands it back as a `Peer`: a driver of both workloads, which the runners take as
//!    `&dyn PrimitiveDriver` or `&dyn TpccDriver`.

use std::path::Path;

use super::{hayate_wire, mariadb, postgres, sqlite};
use crate::driver::{DriverError, DriverResult};
use crate::primitive::driver::PrimitiveDriver;
use crate::tpcc::driver::TpccDriver;

/// A peer runs both workloads.
pub trait Peer: PrimitiveDriver + TpccDriver {}

impl<T: PrimitiveDriver + TpccDriver> Peer for T {}

/// The peers' engine names, as `Driver::engine` reports them.
pub const PEERS: &[&str] = &["postgresql", "mariadb", "sqlite", "hayate-wire"];

/// Starts the peer `name` with an empty database in a new directory under `base_dir`, its
/// buffer (shared_buffers, innodb_buffer_pool_size, cache_size) set to `buffer_bytes`.
pub fn open_peer(name: &str, base_dir: &Path, buffer_bytes: u64) -> DriverResult<Box<dyn Peer>> {
    match name {
        "postgresql" => Ok(Box::new(postgres::PostgresDriver::open(
            base_dir,
            buffer_bytes,
        )?)),
        "mariadb" => Ok(Box::new(mariadb::MariadbDriver::open(
            base_dir,
            buffer_bytes,
        )?)),
        "sqlite" => Ok(Box::new(sqlite::SqliteDriver::open(
            base_dir,
            buffer_bytes,
        )?)),
        "hayate-wire" => Ok(Box::new(hayate_wire::HayateWireDriver::open(
            base_dir,
            buffer_bytes,
        )?)),
        other => Err(DriverError::fatal(format!(
            "unknown peer {other:?}: the peers are {}",
            PEERS.join(", ")
        ))),
    }
}

/// Whether each peer can run on this machine; the error says which package to install.
pub fn available() -> Vec<(&'static str, Result<(), String>)> {
    PEERS
        .iter()
        .map(|&name| {
            let installed = match name {
                "postgresql" => postgres::find_binaries().map(|_| ()),
                "mariadb" => mariadb::check_installed(),
                _ => Ok(()),
            };
            (name, installed)
        })
        .collect()
}

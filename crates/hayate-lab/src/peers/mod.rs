//! The databases Hayate is measured against, behind the lab's one driver interface
//! (`crate::driver`): PostgreSQL, MariaDB with InnoDB, and SQLite.
//!
//! Every peer runs the same schema and transactions as Hayate with durable commits, and
//! records every durability and caching setting in `Driver::settings`. The lab starts and stops
//! PostgreSQL and MariaDB itself, each in a private temporary directory under `--dir`
//! (`server`), when their Debian packages are installed; SQLite is built in.
//!
//! Use:
//! 1. `available()` says which peers can run here (and how to install the others).
//! 2. `open_peer(name, base_dir, buffer_bytes)` makes an empty database (starting its server).
//! 3. The runner drives it like Hayate; `Driver::shutdown` (or dropping it) stops the server
//!    and removes the directory.
//!
//! TPC-C on the peers: `tpcc_sql` (schema, rows as SQL values, parallel loading) and
//! `tpcc_transactions` (the five transactions and the check's snapshot read, written once over
//! `SqlConnection`), implemented per peer by `tpcc_postgres`, `tpcc_mariadb`, `tpcc_sqlite`.
//!
//! `hayate_wire` is Hayate itself as a server (`hayate serve`) behind the PostgreSQL peer's
//! client code: the primitive workload through the wire protocol (no TPC-C yet).

pub mod hayate_wire;
pub mod mariadb;
pub mod postgres;
pub mod server;
pub mod sqlite;
mod tpcc_mariadb;
mod tpcc_postgres;
mod tpcc_sql;
mod tpcc_sqlite;
mod tpcc_transactions;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tpcc_tests;

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use crate::driver::{Driver, DriverError, DriverResult, PrimitiveSpec, DATA1_BYTES};

/// Tables a server peer loads at once, each on its own connection.
const LOAD_THREADS_MAX: usize = 4;

/// The peers' engine names, as `Driver::engine` reports them.
pub const PEERS: &[&str] = &["postgresql", "mariadb", "sqlite", "hayate-wire"];

/// Starts the peer `name` with an empty database in a new directory under `base_dir`, its
/// buffer (shared_buffers, innodb_buffer_pool_size, cache_size) set to `buffer_bytes`.
pub fn open_peer(name: &str, base_dir: &Path, buffer_bytes: u64) -> DriverResult<Box<dyn Driver>> {
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

/// SID and C1 are SQL `integer` columns (32 bits) in every peer.
fn sql_integer(value: i64) -> DriverResult<i32> {
    i32::try_from(value)
        .map_err(|_| DriverError::fatal(format!("{value} does not fit an SQL integer column")))
}

/// A row read back must carry its whole Data1.
fn check_data1_length(table: u32, sid: i64, length: usize) -> DriverResult<()> {
    if length == DATA1_BYTES {
        return Ok(());
    }
    Err(DriverError::fatal(format!(
        "row {sid} of {} has {length} bytes of Data1, not {DATA1_BYTES}",
        PrimitiveSpec::table_name(table)
    )))
}

/// Loads the tables of `spec` on one thread per core (at most `LOAD_THREADS_MAX`), each taking
/// the next table not yet loaded; `load_table(table, loaded)` adds the rows it loads to
/// `loaded`. Progress is reported from the calling thread. The first error stops the others.
fn load_tables_in_parallel(
    spec: &PrimitiveSpec,
    progress: &(dyn Fn(u64) + Sync),
    load_table: &(dyn Fn(u32, &AtomicU64) -> DriverResult<()> + Sync),
) -> DriverResult<()> {
    let cores = thread::available_parallelism().map_or(1, |cores| cores.get());
    let threads = cores.min(LOAD_THREADS_MAX).min(spec.tables as usize).max(1);
    let next_table = AtomicU32::new(0);
    let loaded = AtomicU64::new(0);
    thread::scope(|scope| {
        let loaders: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| loop {
                    let table = next_table.fetch_add(1, Ordering::Relaxed);
                    if table >= spec.tables {
                        return Ok(());
                    }
                    if let Err(error) = load_table(table, &loaded) {
                        next_table.store(spec.tables, Ordering::Relaxed);
                        return Err(error);
                    }
                })
            })
            .collect();
        while !loaders.iter().all(|loader| loader.is_finished()) {
            progress(loaded.load(Ordering::Relaxed));
            thread::sleep(Duration::from_millis(100));
        }
        progress(loaded.load(Ordering::Relaxed));
        loaders
            .into_iter()
            .map(|loader| {
                let panicked = || Err(DriverError::fatal("a loader thread panicked"));
                loader.join().unwrap_or_else(|_| panicked())
            })
            .collect::<DriverResult<Vec<()>>>()
            .map(|_| ())
    })
}

/// The prepared statement of `table` in `cache` (one slot per table), made on first use by
/// `prepare` from the table's name.
pub(super) fn cached_statement<S: Clone>(
    cache: &mut Vec<Option<S>>,
    table: u32,
    prepare: impl FnOnce(&str) -> DriverResult<S>,
) -> DriverResult<S> {
    let index = table as usize;
    if cache.len() <= index {
        cache.resize(index + 1, None);
    }
    if let Some(statement) = &cache[index] {
        return Ok(statement.clone());
    }
    let statement = prepare(&crate::driver::PrimitiveSpec::table_name(table))?;
    cache[index] = Some(statement.clone());
    Ok(statement)
}

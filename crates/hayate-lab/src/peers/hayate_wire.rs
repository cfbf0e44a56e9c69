//! Hayate over the wire ("hayate-wire"): `hayate serve` started by the lab, driven through
//! PostgreSQL's protocol by the same client code as the PostgreSQL peer (the `postgres`
//! crate, prepared statements, autocommit), so the primitive workload compares Hayate
//! embedded, Hayate as a server and the peers.
//!
//! Lifecycle:
//! 1. `HayateWireDriver::open` starts `hayate serve` from this executable on a free port of
//!    127.0.0.1 with a new database under `--dir` (`lab::server::engines::start_hayate`).
//! 2. `load_primitive` creates each table (`sid integer PRIMARY KEY, c1 integer, data1
//!    varchar(4096)`) and inserts its rows with multi-row INSERTs, 1,000 rows per transaction,
//!    one connection per core.
//! 3. Sessions are the PostgreSQL peer's (`postgres::primitive::session`), and TPC-C runs the
//!    PostgreSQL peer's loader and transactions (`tpcc_postgres`: COPY, primary keys and
//!    indexes added after loading, READ COMMITTED with SELECT ... FOR UPDATE).
//! 4. `shutdown` (or drop) stops the server (SIGTERM: a clean shutdown with a checkpoint) and
//!    removes the directory.
//!
//! `set_buffer_bytes` restarts `hayate serve` on the same database with `--buffer-size`, so
//! Hayate caches exactly as much as the other engines are given.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use postgres::Client;

use super::postgres::primitive::session;
use super::postgres::{postgres_error, tpcc};
use super::server::LabServer;
use super::sql::primitive::{load_tables_in_parallel, sql_integer};
use crate::driver::{Driver, DriverError, DriverResult};
use crate::primitive::driver::{PrimitiveDriver, PrimitiveSpec, Session, DATA1_BYTES};
use crate::server::engines;
use crate::tpcc::check::CheckData;
use crate::tpcc::driver::TpccDriver;
use crate::tpcc::spec::Scale;
use crate::tpcc::txn::TpccSession;

/// Rows per INSERT statement and per transaction while loading.
const INSERT_ROWS: u64 = 50;
const COMMIT_ROWS: u64 = 1000;

pub struct HayateWireDriver {
    port: u16,
    state: Mutex<State>,
}

struct State {
    /// The server and its directory.
    lab: LabServer,
    settings: BTreeMap<String, String>,
    /// The buffer the server runs with (`set_buffer_bytes`; None: `hayate serve`'s default).
    buffer_bytes: Option<u64>,
    /// More arguments of `hayate serve` (`restart_with`).
    extra_args: Vec<String>,
}

impl HayateWireDriver {
    pub fn open(base_dir: &Path, buffer_bytes: u64) -> DriverResult<HayateWireDriver> {
        let port = engines::free_port()?;
        let (process, directory, _) = engines::start_hayate(base_dir, port)?;
        let mut settings = engines::hayate_settings(None);
        settings.insert(
            "client".into(),
            "postgres crate over TCP on 127.0.0.1, prepared statements, autocommit".into(),
        );
        let mut lab = LabServer::new(directory);
        lab.set_process(process);
        let driver = HayateWireDriver {
            port,
            state: Mutex::new(State {
                lab,
                settings,
                buffer_bytes: None,
                extra_args: Vec::new(),
            }),
        };
        (driver.state().settings).insert("buffer_bytes_requested".into(), buffer_bytes.to_string());
        Ok(driver)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn connect_client(&self) -> DriverResult<Client> {
        engines::hayate_client(self.port)
    }

    fn load_table(&self, spec: &PrimitiveSpec, table: u32, loaded: &AtomicU64) -> DriverResult<()> {
        let mut client = self.connect_client()?;
        let name = PrimitiveSpec::table_name(table);
        client
            .batch_execute(&format!(
                "CREATE TABLE {name} (sid integer PRIMARY KEY, c1 integer NOT NULL, \
                 data1 varchar({DATA1_BYTES}) NOT NULL)"
            ))
            .map_err(|error| renamed(postgres_error(error)))?;
        let rows = spec.rows_per_table;
        let mut statement = String::with_capacity(INSERT_ROWS as usize * (DATA1_BYTES + 32));
        let mut first = 1;
        while first <= rows {
            let last = (first + COMMIT_ROWS - 1).min(rows);
            let mut transaction = client
                .transaction()
                .map_err(|error| renamed(postgres_error(error)))?;
            let mut batch_first = first;
            while batch_first <= last {
                let batch_last = (batch_first + INSERT_ROWS - 1).min(last);
                statement.clear();
                let _ = write!(statement, "INSERT INTO {name} (sid, c1, data1) VALUES ");
                for sid in batch_first..=batch_last {
                    let separator = if sid == batch_first { "" } else { "," };
                    // Data1 holds only letters, digits, '-' and '|': a plain string literal.
                    let data1 = PrimitiveSpec::data1(table, sid as i64);
                    let sid = sql_integer(sid as i64)?;
                    let _ = write!(statement, "{separator}({sid},0,'{data1}')");
                }
                transaction
                    .batch_execute(&statement)
                    .map_err(|error| renamed(postgres_error(error)))?;
                loaded.fetch_add(batch_last - batch_first + 1, Ordering::Relaxed);
                batch_first = batch_last + 1;
            }
            transaction
                .commit()
                .map_err(|error| renamed(postgres_error(error)))?;
            first = last + 1;
        }
        Ok(())
    }

    fn stop_and_remove(&self) -> DriverResult<()> {
        self.state().lab.stop_and_remove()
    }

    /// Stops the server (a clean shutdown), runs `while_stopped` on its data directory, and
    /// starts it again with `extra_args` for `hayate serve` from now on (e.g. a primary's
    /// `--ha-replication-listen`, after its directory was copied for a standby).
    pub fn restart_with(
        &self,
        extra_args: Vec<String>,
        while_stopped: &mut dyn FnMut(&Path) -> DriverResult<()>,
    ) -> DriverResult<()> {
        let mut state = self.state();
        state.extra_args = extra_args;
        self.restart(&mut state, while_stopped)
    }

    fn restart(
        &self,
        state: &mut State,
        while_stopped: &mut dyn FnMut(&Path) -> DriverResult<()>,
    ) -> DriverResult<()> {
        state.lab.stop()?;
        let directory = state
            .lab
            .directory()
            .ok_or_else(|| DriverError::fatal("hayate-wire: the server's directory is gone"))?
            .path()
            .to_path_buf();
        while_stopped(&directory.join("data"))?;
        let process = engines::spawn_hayate_with(
            &directory,
            self.port,
            state.buffer_bytes,
            None,
            &state.extra_args,
        )?;
        state.lab.set_process(process);
        Ok(())
    }
}

impl Driver for HayateWireDriver {
    fn engine(&self) -> &str {
        "hayate-wire"
    }

    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    fn settings(&self) -> BTreeMap<String, String> {
        self.state().settings.clone()
    }

    fn page_size(&self) -> u64 {
        hayate_engine::DatabaseConfig::default().store.page_size as u64
    }

    fn write_policy(&self) -> String {
        "out-of-place (hayate serve's default)".to_string()
    }

    /// Restarts `hayate serve` on the same database with a buffer of `bytes` (`--buffer-size`).
    fn set_buffer_bytes(&self, bytes: u64) -> DriverResult<()> {
        let mut state = self.state();
        if state.buffer_bytes == Some(bytes) {
            return Ok(());
        }
        state.buffer_bytes = Some(bytes);
        self.restart(&mut state, &mut |_| Ok(()))?;
        state
            .settings
            .insert("buffer_bytes".into(), bytes.to_string());
        Ok(())
    }

    fn server_pids(&self) -> Vec<u32> {
        self.state().lab.pids()
    }

    fn shutdown(&self) -> DriverResult<()> {
        self.stop_and_remove()
    }
}

impl PrimitiveDriver for HayateWireDriver {
    fn load_primitive(
        &self,
        spec: &PrimitiveSpec,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        load_tables_in_parallel(spec, progress, &|table, loaded| {
            self.load_table(spec, table, loaded)
        })
    }

    fn connect(&self) -> DriverResult<Box<dyn Session>> {
        Ok(session(self.connect_client()?))
    }
}

impl TpccDriver for HayateWireDriver {
    fn load_tpcc(
        &self,
        scale: &Scale,
        seed: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        // Hayate checkpoints by itself; CHECKPOINT is PostgreSQL's.
        let connect = || self.connect_client();
        tpcc::load(&connect, scale, seed, progress, "ANALYZE").map_err(renamed)
    }

    fn connect_tpcc(&self) -> DriverResult<Box<dyn TpccSession>> {
        tpcc::connect(&|| self.connect_client())
    }

    fn tpcc_check_data(&self) -> DriverResult<CheckData> {
        tpcc::check_data(&|| self.connect_client()).map_err(renamed)
    }
}

/// An error of the shared PostgreSQL client code, named after the server it came from.
fn renamed(mut error: DriverError) -> DriverError {
    if let Some(rest) = error.message.strip_prefix("PostgreSQL: ") {
        error.message = format!("Hayate server: {rest}");
    }
    error
}

impl Drop for HayateWireDriver {
    fn drop(&mut self) {
        if let Err(error) = self.stop_and_remove() {
            log::warn!("{error}");
        }
    }
}

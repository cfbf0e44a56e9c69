//! The primitive workload over SQL, what is the same for every SQL peer: the parallel loader's
//! threads, and one session (`SqlSession`) over a small interface each peer's client
//! implements (`PrimitiveConnection`).
//!
//! A session's life:
//! 1. The peer opens a client connection and wraps it: `SqlSession::new(connection)`.
//! 2. The first select or update of a table prepares its statement (`SELECT sid, c1, data1
//!    FROM primitive_N WHERE sid = ?`, `UPDATE primitive_N SET c1 = ? WHERE sid = ?`, with the
//!    client's placeholders), kept per table for the session's life.
//! 3. Each call runs one statement as its own durable transaction (autocommit, or the peer's
//!    own BEGIN/COMMIT) and checks what comes back: Data1 whole, one row matched.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use crate::driver::{DriverError, DriverResult};
use crate::primitive::driver::{PrimitiveSpec, Session, DATA1_BYTES};

/// Tables a server peer loads at once, each on its own connection.
const LOAD_THREADS_MAX: usize = 4;

/// How a client numbers the parameters of a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placeholders {
    /// `$1`, `$2` (PostgreSQL's protocol).
    Numbered,
    /// `?`, `?` (MariaDB, SQLite).
    QuestionMarks,
}

/// What the primitive workload needs of one SQL connection.
pub(crate) trait PrimitiveConnection: Send {
    /// A prepared statement (or whatever the client prepares by).
    type Prepared: Clone + Send;
    const PLACEHOLDERS: Placeholders;
    fn prepare(&mut self, text: &str) -> DriverResult<Self::Prepared>;
    /// Runs the select with `sid`, committed; Data1's length, `None` when there is no row.
    fn select_data1_length(
        &mut self,
        statement: &Self::Prepared,
        sid: i32,
    ) -> DriverResult<Option<usize>>;
    /// Runs the update with (`c1`, `sid`), committed durably; the rows it matched.
    fn update_c1(&mut self, statement: &Self::Prepared, c1: i32, sid: i32) -> DriverResult<u64>;
}

/// The primitive workload's session on any SQL peer (see the module docs).
pub(crate) struct SqlSession<C: PrimitiveConnection> {
    connection: C,
    /// Prepared statements per table, made on first use.
    select: Vec<Option<C::Prepared>>,
    update: Vec<Option<C::Prepared>>,
}

impl<C: PrimitiveConnection> SqlSession<C> {
    pub(crate) fn new(connection: C) -> SqlSession<C> {
        SqlSession {
            connection,
            select: Vec::new(),
            update: Vec::new(),
        }
    }
}

impl<C: PrimitiveConnection> Session for SqlSession<C> {
    fn select(&mut self, table: u32, sid: i64) -> DriverResult<bool> {
        let connection = &mut self.connection;
        let statement = cached_statement(&mut self.select, table, |name| {
            let text = match C::PLACEHOLDERS {
                Placeholders::Numbered => {
                    format!("SELECT sid, c1, data1 FROM {name} WHERE sid = $1")
                }
                Placeholders::QuestionMarks => {
                    format!("SELECT sid, c1, data1 FROM {name} WHERE sid = ?")
                }
            };
            connection.prepare(&text)
        })?;
        let Some(length) = connection.select_data1_length(&statement, sql_integer(sid)?)? else {
            return Ok(false);
        };
        check_data1_length(table, sid, length)?;
        Ok(true)
    }

    fn update(&mut self, table: u32, sid: i64, c1: i64) -> DriverResult<bool> {
        let connection = &mut self.connection;
        let statement = cached_statement(&mut self.update, table, |name| {
            let text = match C::PLACEHOLDERS {
                Placeholders::Numbered => format!("UPDATE {name} SET c1 = $1 WHERE sid = $2"),
                Placeholders::QuestionMarks => format!("UPDATE {name} SET c1 = ? WHERE sid = ?"),
            };
            connection.prepare(&text)
        })?;
        let rows = connection.update_c1(&statement, sql_integer(c1)?, sql_integer(sid)?)?;
        Ok(rows == 1)
    }
}

/// SID and C1 are SQL `integer` columns (32 bits) in every peer.
pub(crate) fn sql_integer(value: i64) -> DriverResult<i32> {
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
pub(crate) fn load_tables_in_parallel(
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
fn cached_statement<S: Clone>(
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
    let statement = prepare(&PrimitiveSpec::table_name(table))?;
    cache[index] = Some(statement.clone());
    Ok(statement)
}

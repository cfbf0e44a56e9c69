//! The primitive workload on SQLite: prepared INSERTs in large transactions, and the shared
//! SQL session over `rusqlite`.
//!
//! 1. `load_primitive` inserts each table in transactions of 10,000 rows, then ANALYZE and a
//!    truncating WAL checkpoint.
//! 2. Sessions are `SqlSession`s over a `Connection`: selects run in autocommit; updates run in
//!    `BEGIN IMMEDIATE ... COMMIT` (writers take turns on SQLite's one write lock; a deferred
//!    transaction could deadlock on upgrade). SQLITE_BUSY after the timeout is retryable.

use rusqlite::{params, Connection, OptionalExtension};

use super::instance::{sqlite_error, SqliteDriver};
use crate::driver::DriverResult;
use crate::peers::sql::primitive::{Placeholders, PrimitiveConnection, SqlSession};
use crate::primitive::driver::{PrimitiveDriver, PrimitiveSpec, Session, DATA1_BYTES};

const COMMIT_ROWS: u64 = 10_000;
const PROGRESS_ROWS: u64 = 1000;

fn load_table(
    connection: &mut Connection,
    spec: &PrimitiveSpec,
    table: u32,
    loaded: &mut u64,
    progress: &(dyn Fn(u64) + Sync),
) -> rusqlite::Result<()> {
    let name = PrimitiveSpec::table_name(table);
    connection.execute_batch(&format!(
        "DROP TABLE IF EXISTS {name};
         CREATE TABLE {name} (sid integer primary key, c1 integer not null,
                              data1 char({DATA1_BYTES}) not null);"
    ))?;
    let rows = spec.rows_per_table as i64;
    let mut first = 1;
    while first <= rows {
        let last = (first + COMMIT_ROWS as i64 - 1).min(rows);
        let transaction = connection.transaction()?;
        {
            let mut insert = transaction.prepare_cached(&format!(
                "INSERT INTO {name} (sid, c1, data1) VALUES (?, 0, ?)"
            ))?;
            for sid in first..=last {
                insert.execute(params![sid, PrimitiveSpec::data1(table, sid)])?;
                *loaded += 1;
                if loaded.is_multiple_of(PROGRESS_ROWS) {
                    progress(*loaded);
                }
            }
        }
        transaction.commit()?;
        first = last + 1;
    }
    Ok(())
}

impl PrimitiveDriver for SqliteDriver {
    fn load_primitive(
        &self,
        spec: &PrimitiveSpec,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        let mut connection = self.open_connection().map_err(sqlite_error)?;
        let mut loaded = 0;
        for table in 0..spec.tables {
            load_table(&mut connection, spec, table, &mut loaded, progress)
                .map_err(sqlite_error)?;
        }
        progress(loaded);
        connection
            .execute_batch("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(sqlite_error)
    }

    fn connect(&self) -> DriverResult<Box<dyn Session>> {
        let connection = self.open_connection().map_err(sqlite_error)?;
        Ok(Box::new(SqlSession::new(connection)))
    }
}

/// rusqlite caches prepared statements by their text, so a statement is its text.
impl PrimitiveConnection for Connection {
    type Prepared = String;
    const PLACEHOLDERS: Placeholders = Placeholders::QuestionMarks;

    fn prepare(&mut self, text: &str) -> DriverResult<String> {
        Ok(text.to_string())
    }

    fn select_data1_length(&mut self, statement: &String, sid: i32) -> DriverResult<Option<usize>> {
        let mut select = self.prepare_cached(statement).map_err(sqlite_error)?;
        select
            .query_row([sid], |row| Ok(row.get_ref(2)?.as_str()?.len()))
            .optional()
            .map_err(sqlite_error)
    }

    fn update_c1(&mut self, statement: &String, c1: i32, sid: i32) -> DriverResult<u64> {
        // Take the write lock first: a deferred transaction could deadlock on upgrade.
        self.execute_batch("BEGIN IMMEDIATE")
            .map_err(sqlite_error)?;
        let result = update_in_transaction(self, statement, c1, sid);
        if result.is_err() && !self.is_autocommit() {
            let _ = self.execute_batch("ROLLBACK");
        }
        result
    }
}

fn update_in_transaction(
    connection: &Connection,
    statement: &str,
    c1: i32,
    sid: i32,
) -> DriverResult<u64> {
    let rows = connection
        .prepare_cached(statement)
        .and_then(|mut update| update.execute(params![c1, sid]))
        .map_err(sqlite_error)?;
    connection.execute_batch("COMMIT").map_err(sqlite_error)?;
    Ok(rows as u64)
}

#[cfg(test)]
impl SqliteDriver {
    /// C1 of a row, read through a new connection.
    pub(crate) fn read_c1(&self, table: u32, sid: i64) -> DriverResult<Option<i64>> {
        let connection = self.open_connection().map_err(sqlite_error)?;
        let name = PrimitiveSpec::table_name(table);
        connection
            .query_row(
                &format!("SELECT c1 FROM {name} WHERE sid = ?"),
                [sid],
                |row| row.get(0),
            )
            .optional()
            .map_err(sqlite_error)
    }
}

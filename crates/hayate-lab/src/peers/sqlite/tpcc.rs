//! TPC-C on SQLite: the shared SQL transactions (`sql::tpcc_transactions`) over `rusqlite`.
//!
//! Loading: the nine tables are created with their keys (clustered `WITHOUT ROWID` tables
//! but HISTORY), then ITEM and each warehouse are inserted with prepared statements, one
//! transaction per job, on one connection (SQLite has one writer), then ANALYZE and a
//! truncating WAL checkpoint.
//!
//! Sessions begin the writing transactions (New-Order, Payment, Delivery) with
//! `BEGIN IMMEDIATE`, taking SQLite's one write lock before reading anything, and the reading
//! ones with a deferred `BEGIN` (a WAL snapshot). Money is integer cents, rates integer
//! ten-thousandths, timestamps integer microseconds: SQLite has no exact decimal type.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use super::instance::{sqlite_error, SqliteDriver};
use crate::driver::{DriverError, DriverResult};
use crate::peers::sql::tpcc_schema::{
    create_table_statements, generate_job, row_values, Dialect, LoadJob, Value, TABLES,
};
use crate::peers::sql::tpcc_transactions::{
    read_check_data, Begin, SqlConnection, SqlTpccSession, Statement,
};
use crate::tpcc::check::CheckData;
use crate::tpcc::driver::TpccDriver;
use crate::tpcc::rows::Row;
use crate::tpcc::spec::{now_micros, Scale};
use crate::tpcc::txn::TpccSession;

/// Rows between progress reports while loading.
const PROGRESS_ROWS: u64 = 10_000;

impl TpccDriver for SqliteDriver {
    fn load_tpcc(
        &self,
        scale: &Scale,
        seed: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        load(self, scale, seed, progress)
    }

    fn connect_tpcc(&self) -> DriverResult<Box<dyn TpccSession>> {
        connect(self)
    }

    fn tpcc_check_data(&self) -> DriverResult<CheckData> {
        check_data(self)
    }
}

pub(crate) fn load(
    driver: &SqliteDriver,
    scale: &Scale,
    seed: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> DriverResult<()> {
    let mut connection = driver.open_connection().map_err(sqlite_error)?;
    connection
        .execute_batch(&create_table_statements(Dialect::Sqlite, true).join(";\n"))
        .map_err(sqlite_error)?;
    let inserts: Vec<(&str, String)> = TABLES
        .iter()
        .map(|table| {
            let placeholders = vec!["?"; table.columns.len()].join(", ");
            let insert = format!(
                "INSERT INTO {} ({}) VALUES ({placeholders})",
                table.name,
                table.column_list()
            );
            (table.name, insert)
        })
        .collect();
    let now = now_micros();
    let mut loaded = 0u64;
    let jobs =
        std::iter::once(LoadJob::Items).chain((1..=scale.warehouses).map(LoadJob::Warehouse));
    for job in jobs {
        let transaction = connection.transaction().map_err(sqlite_error)?;
        generate_job(job, scale, seed, now, &mut |row: Row| {
            let (table, values) = row_values(row, Dialect::Sqlite);
            let (_, insert) = inserts
                .iter()
                .find(|(name, _)| *name == table.name)
                .expect("every table has an insert");
            let mut statement = transaction.prepare_cached(insert).map_err(sqlite_error)?;
            let params: Vec<Param<'_>> = values.iter().map(Param).collect();
            statement
                .execute(rusqlite::params_from_iter(params))
                .map_err(sqlite_error)?;
            loaded += 1;
            if loaded.is_multiple_of(PROGRESS_ROWS) {
                progress(loaded);
            }
            Ok(())
        })?;
        transaction.commit().map_err(sqlite_error)?;
    }
    progress(loaded);
    connection
        .execute_batch("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);")
        .map_err(sqlite_error)
}

/// A value bound to a statement without copying it.
struct Param<'a>(&'a Value);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Value::Int(value) => ValueRef::Integer(*value),
            Value::Text(text) => ValueRef::Text(text.as_bytes()),
            Value::Null | Value::Other => ValueRef::Null,
        }))
    }
}

pub(crate) fn connect(driver: &SqliteDriver) -> DriverResult<Box<dyn TpccSession>> {
    let connection = SqliteConnection::new(driver)?;
    Ok(Box::new(SqlTpccSession::new(connection, Dialect::Sqlite)))
}

pub(crate) fn check_data(driver: &SqliteDriver) -> DriverResult<CheckData> {
    read_check_data(&mut SqliteConnection::new(driver)?)
}

struct SqliteConnection {
    connection: Connection,
    /// Statement texts by `Statement as usize`, made on first use (rusqlite caches the
    /// prepared statements by text).
    texts: Vec<Option<String>>,
}

impl SqliteConnection {
    fn new(driver: &SqliteDriver) -> DriverResult<SqliteConnection> {
        Ok(SqliteConnection {
            connection: driver.open_connection().map_err(sqlite_error)?,
            texts: vec![None; Statement::COUNT],
        })
    }
}

fn decode(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(value) => Value::Int(value),
        ValueRef::Text(text) => Value::Text(String::from_utf8_lossy(text).into_owned()),
        ValueRef::Real(_) | ValueRef::Blob(_) => Value::Other,
    }
}

impl SqlConnection for SqliteConnection {
    fn begin(&mut self, kind: Begin) -> DriverResult<()> {
        let begin = match kind {
            Begin::Write => "BEGIN IMMEDIATE",
            Begin::Read | Begin::Snapshot => "BEGIN",
        };
        self.connection.execute_batch(begin).map_err(sqlite_error)
    }

    fn commit(&mut self) -> DriverResult<()> {
        self.connection
            .execute_batch("COMMIT")
            .map_err(sqlite_error)
    }

    fn rollback(&mut self) -> DriverResult<()> {
        if self.connection.is_autocommit() {
            return Ok(());
        }
        self.connection
            .execute_batch("ROLLBACK")
            .map_err(sqlite_error)
    }

    fn for_each_row(
        &mut self,
        statement: Statement,
        values: &[Value],
        each: &mut dyn FnMut(&[Value]) -> DriverResult<()>,
    ) -> DriverResult<()> {
        let text =
            self.texts[statement as usize].get_or_insert_with(|| statement.text(Dialect::Sqlite));
        let mut prepared = self.connection.prepare_cached(text).map_err(sqlite_error)?;
        let columns = prepared.column_count();
        let params: Vec<Param<'_>> = values.iter().map(Param).collect();
        let mut rows = prepared
            .query(rusqlite::params_from_iter(params))
            .map_err(sqlite_error)?;
        let mut values = Vec::with_capacity(columns);
        while let Some(row) = rows.next().map_err(sqlite_error)? {
            values.clear();
            for index in 0..columns {
                values.push(decode(row.get_ref(index).map_err(sqlite_error)?));
            }
            each(&values)?;
        }
        Ok(())
    }

    fn execute(&mut self, statement: Statement, values: &[Value]) -> DriverResult<u64> {
        let text =
            self.texts[statement as usize].get_or_insert_with(|| statement.text(Dialect::Sqlite));
        let mut prepared = self.connection.prepare_cached(text).map_err(sqlite_error)?;
        let params: Vec<Param<'_>> = values.iter().map(Param).collect();
        let rows = prepared
            .execute(rusqlite::params_from_iter(params))
            .map_err(sqlite_error)?;
        u64::try_from(rows).map_err(|_| DriverError::fatal("a negative row count"))
    }
}

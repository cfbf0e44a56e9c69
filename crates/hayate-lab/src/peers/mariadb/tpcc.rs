//! TPC-C on MariaDB/InnoDB: the shared SQL transactions (`sql::tpcc_transactions`) over the
//! `mysql` crate.
//!
//! Loading:
//! 1. The nine tables are created with their primary keys and secondary indexes (InnoDB
//!    clusters rows on the primary key, which cannot be added cheaply afterwards).
//! 2. ITEM and each warehouse load in parallel on their own connections, each job in one
//!    transaction of multi-row INSERTs (about 1 MB each, per table).
//! 3. ANALYZE TABLE on every table; the driver then restarts the server so that the run
//!    starts with every page flushed, as for the primitive workload.
//!
//! Sessions run at READ COMMITTED with `SELECT ... FOR UPDATE` on rows read then written,
//! with server-side prepared statements made once per connection.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use mysql::prelude::Queryable;
use mysql::{Conn, Params, Statement as Prepared, Value as MysqlValue};

use super::instance::{mariadb_error, MariadbDriver};
use crate::driver::{DriverError, DriverResult};
use crate::peers::sql::tpcc_schema::{
    create_table_statements, generate_job, load_in_parallel, row_values, Dialect, LoadJob,
    TableSpec, Value, TABLES,
};
use crate::peers::sql::tpcc_transactions::{
    read_check_data, Begin, SqlConnection, SqlTpccSession, Statement,
};
use crate::tpcc::check::CheckData;
use crate::tpcc::driver::TpccDriver;
use crate::tpcc::rows::Row;
use crate::tpcc::spec::{now_micros, Scale};
use crate::tpcc::txn::TpccSession;

/// Bytes of VALUES per INSERT statement (max_allowed_packet is 16 MiB by default).
const INSERT_BYTES: usize = 1 << 20;

impl TpccDriver for MariadbDriver {
    fn load_tpcc(
        &self,
        scale: &Scale,
        seed: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        load(self, scale, seed, progress)?;
        // A clean shutdown writes every dirty page, as after the primitive load.
        self.restart()
    }

    fn connect_tpcc(&self) -> DriverResult<Box<dyn TpccSession>> {
        connect(self)
    }

    fn tpcc_check_data(&self) -> DriverResult<CheckData> {
        check_data(self)
    }
}

pub(crate) fn load(
    driver: &MariadbDriver,
    scale: &Scale,
    seed: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> DriverResult<()> {
    let mut conn = driver.connect_lab().map_err(mariadb_error)?;
    for statement in create_table_statements(Dialect::Mariadb, true) {
        conn.query_drop(statement).map_err(mariadb_error)?;
    }
    let now = now_micros();
    load_in_parallel(scale, progress, &|job, loaded| {
        load_job(driver, scale, seed, now, job, loaded)
    })?;
    for table in TABLES {
        conn.query_drop(format!("ANALYZE TABLE {}", table.name))
            .map_err(mariadb_error)?;
    }
    Ok(())
}

fn load_job(
    driver: &MariadbDriver,
    scale: &Scale,
    seed: u64,
    now: i64,
    job: LoadJob,
    loaded: &AtomicU64,
) -> DriverResult<()> {
    let conn = driver.connect_lab().map_err(mariadb_error)?;
    let mut batches = InsertBatches {
        conn,
        tables: TABLES.map(|table| (table, String::new(), 0)),
        loaded,
    };
    batches
        .conn
        .query_drop("START TRANSACTION")
        .map_err(mariadb_error)?;
    generate_job(job, scale, seed, now, &mut |row| batches.add(row))?;
    for index in 0..batches.tables.len() {
        batches.flush(index)?;
    }
    batches.conn.query_drop("COMMIT").map_err(mariadb_error)
}

/// The VALUES of a multi-row INSERT per table, sent when they grow past `INSERT_BYTES`.
struct InsertBatches<'a> {
    conn: Conn,
    /// Per table: its VALUES text and rows not yet sent.
    tables: [(&'static TableSpec, String, u64); 9],
    loaded: &'a AtomicU64,
}

impl InsertBatches<'_> {
    fn add(&mut self, row: Row) -> DriverResult<()> {
        let (table, values) = row_values(row, Dialect::Mariadb);
        let index = self
            .tables
            .iter()
            .position(|(spec, _, _)| spec.name == table.name)
            .expect("every table has a batch");
        let (_, text, rows) = &mut self.tables[index];
        text.push_str(if *rows == 0 { "(" } else { ",(" });
        for (column, value) in values.iter().enumerate() {
            if column > 0 {
                text.push(',');
            }
            push_literal(text, value);
        }
        text.push(')');
        *rows += 1;
        if text.len() >= INSERT_BYTES {
            self.flush(index)?;
        }
        Ok(())
    }

    fn flush(&mut self, index: usize) -> DriverResult<()> {
        let (table, text, rows) = &mut self.tables[index];
        if *rows == 0 {
            return Ok(());
        }
        let insert = format!(
            "INSERT INTO {} ({}) VALUES {text}",
            table.name,
            table.column_list()
        );
        self.conn.query_drop(insert).map_err(mariadb_error)?;
        self.loaded.fetch_add(*rows, Ordering::Relaxed);
        text.clear();
        *rows = 0;
        Ok(())
    }
}

/// A value as an SQL literal (decimal and datetime columns convert their text exactly).
fn push_literal(text: &mut String, value: &Value) {
    match value {
        Value::Int(value) => {
            let _ = write!(text, "{value}");
        }
        Value::Text(value) => {
            text.push('\'');
            for character in value.chars() {
                match character {
                    '\\' => text.push_str("\\\\"),
                    '\'' => text.push_str("''"),
                    other => text.push(other),
                }
            }
            text.push('\'');
        }
        Value::Null | Value::Other => text.push_str("NULL"),
    }
}

pub(crate) fn connect(driver: &MariadbDriver) -> DriverResult<Box<dyn TpccSession>> {
    let connection = MariadbConnection::new(driver)?;
    Ok(Box::new(SqlTpccSession::new(connection, Dialect::Mariadb)))
}

pub(crate) fn check_data(driver: &MariadbDriver) -> DriverResult<CheckData> {
    read_check_data(&mut MariadbConnection::new(driver)?)
}

struct MariadbConnection {
    conn: Conn,
    /// Indexed by `Statement as usize`, prepared on first use.
    prepared: Vec<Option<Prepared>>,
}

impl MariadbConnection {
    fn new(driver: &MariadbDriver) -> DriverResult<MariadbConnection> {
        let mut conn = driver.connect_lab().map_err(mariadb_error)?;
        conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .map_err(mariadb_error)?;
        Ok(MariadbConnection {
            conn,
            prepared: vec![None; Statement::COUNT],
        })
    }

    fn prepared(&mut self, statement: Statement) -> DriverResult<Prepared> {
        let slot = &mut self.prepared[statement as usize];
        if let Some(prepared) = slot {
            return Ok(prepared.clone());
        }
        let prepared = self
            .conn
            .prep(statement.text(Dialect::Mariadb))
            .map_err(mariadb_error)?;
        *slot = Some(prepared.clone());
        Ok(prepared)
    }
}

fn params(values: &[Value]) -> DriverResult<Params> {
    if values.is_empty() {
        return Ok(Params::Empty);
    }
    let values = values
        .iter()
        .map(|value| match value {
            Value::Int(value) => Ok(MysqlValue::Int(*value)),
            Value::Text(text) => Ok(MysqlValue::Bytes(text.as_bytes().to_vec())),
            Value::Null => Ok(MysqlValue::NULL),
            Value::Other => Err(DriverError::fatal("cannot send an unknown value")),
        })
        .collect::<DriverResult<Vec<_>>>()?;
    Ok(Params::Positional(values))
}

fn decode(value: MysqlValue) -> DriverResult<Value> {
    Ok(match value {
        MysqlValue::NULL => Value::Null,
        MysqlValue::Int(value) => Value::Int(value),
        MysqlValue::UInt(value) => Value::Int(
            i64::try_from(value)
                .map_err(|_| DriverError::fatal(format!("{value} does not fit 64 bits")))?,
        ),
        MysqlValue::Bytes(bytes) => Value::Text(String::from_utf8_lossy(&bytes).into_owned()),
        MysqlValue::Float(_) | MysqlValue::Double(_) | MysqlValue::Date(..) => Value::Other,
        MysqlValue::Time(..) => Value::Other,
    })
}

impl SqlConnection for MariadbConnection {
    fn begin(&mut self, kind: Begin) -> DriverResult<()> {
        let begin = match kind {
            Begin::Write => "START TRANSACTION",
            Begin::Read => "START TRANSACTION READ ONLY",
            Begin::Snapshot => {
                // For the next transaction only; the session stays at READ COMMITTED.
                self.conn
                    .query_drop("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    .map_err(mariadb_error)?;
                "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"
            }
        };
        self.conn.query_drop(begin).map_err(mariadb_error)
    }

    fn commit(&mut self) -> DriverResult<()> {
        self.conn.query_drop("COMMIT").map_err(mariadb_error)
    }

    fn rollback(&mut self) -> DriverResult<()> {
        self.conn.query_drop("ROLLBACK").map_err(mariadb_error)
    }

    fn for_each_row(
        &mut self,
        statement: Statement,
        values: &[Value],
        each: &mut dyn FnMut(&[Value]) -> DriverResult<()>,
    ) -> DriverResult<()> {
        let prepared = self.prepared(statement)?;
        let rows = self
            .conn
            .exec_iter(&prepared, params(values)?)
            .map_err(mariadb_error)?;
        // Rows left unread when `each` fails are drained when `rows` is dropped.
        for row in rows {
            let row = row.map_err(mariadb_error)?;
            let values = row
                .unwrap()
                .into_iter()
                .map(decode)
                .collect::<DriverResult<Vec<Value>>>()?;
            each(&values)?;
        }
        Ok(())
    }

    fn execute(&mut self, statement: Statement, values: &[Value]) -> DriverResult<u64> {
        let prepared = self.prepared(statement)?;
        self.conn
            .exec_drop(&prepared, params(values)?)
            .map_err(mariadb_error)?;
        Ok(self.conn.affected_rows())
    }
}

//! TPC-C on PostgreSQL (and on Hayate's server, `hayate_wire`): the shared SQL transactions
//! (`sql::tpcc_transactions`) over the `postgres` crate.
//!
//! Loading:
//! 1. The nine tables are created without keys.
//! 2. ITEM and each warehouse load in parallel on their own connections, each job in one
//!    transaction of COPY statements (rows are batched per table, about 1 MB per COPY).
//! 3. Primary keys and secondary indexes are built, then ANALYZE and CHECKPOINT.
//!
//! Sessions run each transaction in READ COMMITTED with `SELECT ... FOR UPDATE` on rows read
//! then written, statements prepared once per connection.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{ToSql, Type};
use postgres::{Client, Row as PostgresRow, Statement as Prepared};

use super::instance::{postgres_error, PostgresDriver};
use crate::driver::{DriverError, DriverResult};
use crate::peers::sql::tpcc_schema::{
    create_table_statements, generate_job, key_statements, load_in_parallel, row_values, Dialect,
    LoadJob, TableSpec, Value, TABLES,
};
use crate::peers::sql::tpcc_transactions::{
    read_check_data, Begin, SqlConnection, SqlTpccSession, Statement,
};
use crate::tpcc::check::CheckData;
use crate::tpcc::driver::TpccDriver;
use crate::tpcc::rows::Row;
use crate::tpcc::spec::{now_micros, Scale};
use crate::tpcc::txn::TpccSession;

/// Bytes of COPY text gathered per table before it is sent.
const COPY_BYTES: usize = 1 << 20;

impl TpccDriver for PostgresDriver {
    fn load_tpcc(
        &self,
        scale: &Scale,
        seed: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        let connect = || self.connect_client().map_err(postgres_error);
        load(&connect, scale, seed, progress, "ANALYZE; CHECKPOINT;")
    }

    fn connect_tpcc(&self) -> DriverResult<Box<dyn TpccSession>> {
        connect(&|| self.connect_client().map_err(postgres_error))
    }

    fn tpcc_check_data(&self) -> DriverResult<CheckData> {
        check_data(&|| self.connect_client().map_err(postgres_error))
    }
}

/// Opens a connection to the server being loaded or measured (PostgreSQL, or Hayate's server
/// for `hayate_wire`).
pub(crate) type Connect<'a> = &'a (dyn Fn() -> DriverResult<Client> + Sync);

/// Loads the database; `finish` runs last (PostgreSQL: "ANALYZE; CHECKPOINT").
pub(crate) fn load(
    connect: Connect<'_>,
    scale: &Scale,
    seed: u64,
    progress: &(dyn Fn(u64) + Sync),
    finish: &str,
) -> DriverResult<()> {
    let mut client = connect()?;
    let tables = create_table_statements(Dialect::Postgres, false).join(";\n");
    client.batch_execute(&tables).map_err(postgres_error)?;
    let now = now_micros();
    load_in_parallel(scale, progress, &|job, loaded| {
        load_job(connect, scale, seed, now, job, loaded)
    })?;
    client
        .batch_execute(&key_statements().join(";\n"))
        .map_err(postgres_error)?;
    client.batch_execute(finish).map_err(postgres_error)
}

fn load_job(
    connect: Connect<'_>,
    scale: &Scale,
    seed: u64,
    now: i64,
    job: LoadJob,
    loaded: &AtomicU64,
) -> DriverResult<()> {
    let client = connect()?;
    let mut batches = CopyBatches {
        client,
        tables: TABLES.map(|table| (table, String::new(), 0)),
        loaded,
    };
    batches
        .client
        .batch_execute("BEGIN")
        .map_err(postgres_error)?;
    generate_job(job, scale, seed, now, &mut |row| batches.add(row))?;
    for index in 0..batches.tables.len() {
        batches.flush(index)?;
    }
    batches
        .client
        .batch_execute("COMMIT")
        .map_err(postgres_error)
}

/// COPY text per table, sent when it grows past `COPY_BYTES`.
struct CopyBatches<'a> {
    client: Client,
    /// Per table: its text and rows not yet sent.
    tables: [(&'static TableSpec, String, u64); 9],
    loaded: &'a AtomicU64,
}

impl CopyBatches<'_> {
    fn add(&mut self, row: Row) -> DriverResult<()> {
        let (table, values) = row_values(row, Dialect::Postgres);
        let index = self
            .tables
            .iter()
            .position(|(spec, _, _)| spec.name == table.name)
            .expect("every table has a batch");
        let (_, text, rows) = &mut self.tables[index];
        for (column, value) in values.iter().enumerate() {
            if column > 0 {
                text.push('\t');
            }
            push_copy_value(text, value);
        }
        text.push('\n');
        *rows += 1;
        if text.len() >= COPY_BYTES {
            self.flush(index)?;
        }
        Ok(())
    }

    fn flush(&mut self, index: usize) -> DriverResult<()> {
        let (table, text, rows) = &mut self.tables[index];
        if *rows == 0 {
            return Ok(());
        }
        let copy = format!("COPY {} ({}) FROM STDIN", table.name, table.column_list());
        let mut writer = self.client.copy_in(&copy).map_err(postgres_error)?;
        writer
            .write_all(text.as_bytes())
            .map_err(|error| DriverError::fatal(format!("COPY into {}: {error}", table.name)))?;
        writer.finish().map_err(postgres_error)?;
        self.loaded.fetch_add(*rows, Ordering::Relaxed);
        text.clear();
        *rows = 0;
        Ok(())
    }
}

/// A value in COPY's text format.
fn push_copy_value(text: &mut String, value: &Value) {
    match value {
        Value::Int(value) => text.push_str(&value.to_string()),
        Value::Text(value) => {
            for character in value.chars() {
                match character {
                    '\\' => text.push_str("\\\\"),
                    '\t' => text.push_str("\\t"),
                    '\n' => text.push_str("\\n"),
                    '\r' => text.push_str("\\r"),
                    other => text.push(other),
                }
            }
        }
        Value::Null | Value::Other => text.push_str("\\N"),
    }
}

pub(crate) fn connect(connect: Connect<'_>) -> DriverResult<Box<dyn TpccSession>> {
    let connection = PostgresConnection::new(connect)?;
    Ok(Box::new(SqlTpccSession::new(connection, Dialect::Postgres)))
}

pub(crate) fn check_data(connect: Connect<'_>) -> DriverResult<CheckData> {
    read_check_data(&mut PostgresConnection::new(connect)?)
}

struct PostgresConnection {
    client: Client,
    /// Indexed by `Statement as usize`, prepared on first use.
    prepared: Vec<Option<Prepared>>,
}

impl PostgresConnection {
    fn new(connect: Connect<'_>) -> DriverResult<PostgresConnection> {
        Ok(PostgresConnection {
            client: connect()?,
            prepared: vec![None; Statement::COUNT],
        })
    }

    fn prepared(&mut self, statement: Statement) -> DriverResult<Prepared> {
        let slot = &mut self.prepared[statement as usize];
        if let Some(prepared) = slot {
            return Ok(prepared.clone());
        }
        let prepared = self
            .client
            .prepare(&statement.text(Dialect::Postgres))
            .map_err(postgres_error)?;
        *slot = Some(prepared.clone());
        Ok(prepared)
    }
}

/// The parameters as the types PostgreSQL inferred for them.
fn bind<'a>(
    prepared: &Prepared,
    values: &'a [Value],
) -> DriverResult<Vec<Box<dyn ToSql + Sync + 'a>>> {
    if prepared.params().len() != values.len() {
        return Err(DriverError::fatal(format!(
            "{} parameters for a statement taking {}",
            values.len(),
            prepared.params().len()
        )));
    }
    let out_of_range = |value: i64, ty: &Type| {
        DriverError::fatal(format!("{value} does not fit a parameter of type {ty}"))
    };
    prepared
        .params()
        .iter()
        .zip(values)
        .map(|(ty, value)| -> DriverResult<Box<dyn ToSql + Sync + 'a>> {
            match value {
                Value::Int(value) if *ty == Type::INT8 => Ok(Box::new(*value)),
                Value::Int(value) if *ty == Type::INT4 => Ok(Box::new(
                    i32::try_from(*value).map_err(|_| out_of_range(*value, ty))?,
                )),
                Value::Int(value) if *ty == Type::INT2 => Ok(Box::new(
                    i16::try_from(*value).map_err(|_| out_of_range(*value, ty))?,
                )),
                Value::Text(text) => Ok(Box::new(text.as_str())),
                other => Err(DriverError::fatal(format!(
                    "cannot send {other:?} as a parameter of type {ty}"
                ))),
            }
        })
        .collect()
}

fn decode(row: &PostgresRow) -> DriverResult<Vec<Value>> {
    (0..row.len())
        .map(|index| {
            let ty = row.columns()[index].type_();
            let value = if *ty == Type::INT4 {
                let value: Option<i32> = row.try_get(index).map_err(postgres_error)?;
                value.map(|value| Value::Int(value as i64))
            } else if *ty == Type::INT8 {
                let value: Option<i64> = row.try_get(index).map_err(postgres_error)?;
                value.map(Value::Int)
            } else if *ty == Type::INT2 {
                let value: Option<i16> = row.try_get(index).map_err(postgres_error)?;
                value.map(|value| Value::Int(value as i64))
            } else if [Type::TEXT, Type::VARCHAR, Type::BPCHAR].contains(ty) {
                let value: Option<String> = row.try_get(index).map_err(postgres_error)?;
                value.map(Value::Text)
            } else if *ty == Type::TIMESTAMP {
                let value: Option<SystemTime> = row.try_get(index).map_err(postgres_error)?;
                value.map(|time| match time.duration_since(UNIX_EPOCH) {
                    Ok(since) => Value::Int(since.as_micros() as i64),
                    Err(_) => Value::Other,
                })
            } else {
                Some(Value::Other)
            };
            Ok(value.unwrap_or(Value::Null))
        })
        .collect()
}

impl SqlConnection for PostgresConnection {
    fn begin(&mut self, kind: Begin) -> DriverResult<()> {
        let begin = match kind {
            Begin::Write => "BEGIN ISOLATION LEVEL READ COMMITTED",
            Begin::Read => "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY",
            Begin::Snapshot => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        };
        self.client.batch_execute(begin).map_err(postgres_error)
    }

    fn commit(&mut self) -> DriverResult<()> {
        self.client.batch_execute("COMMIT").map_err(postgres_error)
    }

    fn rollback(&mut self) -> DriverResult<()> {
        self.client
            .batch_execute("ROLLBACK")
            .map_err(postgres_error)
    }

    fn for_each_row(
        &mut self,
        statement: Statement,
        params: &[Value],
        each: &mut dyn FnMut(&[Value]) -> DriverResult<()>,
    ) -> DriverResult<()> {
        let prepared = self.prepared(statement)?;
        let bound = bind(&prepared, params)?;
        let mut rows = self
            .client
            .query_raw(&prepared, bound)
            .map_err(postgres_error)?;
        while let Some(row) = rows.next().map_err(postgres_error)? {
            each(&decode(&row)?)?;
        }
        Ok(())
    }

    fn execute(&mut self, statement: Statement, params: &[Value]) -> DriverResult<u64> {
        let prepared = self.prepared(statement)?;
        let bound = bind(&prepared, params)?;
        let references: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|param| &**param).collect();
        self.client
            .execute(&prepared, &references)
            .map_err(postgres_error)
    }
}

//! The primitive workload on PostgreSQL (and on any server speaking its protocol, for
//! `hayate_wire`): COPY loading and the shared SQL session over the `postgres` crate.
//!
//! 1. `load_primitive` creates each table without a key (Data1 stored PLAIN: uncompressed,
//!    in the heap page), COPYs its rows, one connection per core, then adds the primary key;
//!    then ANALYZE and CHECKPOINT.
//! 2. Sessions are `SqlSession`s over a `Client`: prepared statements in autocommit mode.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use postgres::{Client, Statement};

use super::instance::{postgres_error, PostgresDriver};
use crate::driver::{DriverError, DriverResult};
use crate::peers::sql::primitive::{
    load_tables_in_parallel, Placeholders, PrimitiveConnection, SqlSession,
};
use crate::primitive::driver::{PrimitiveDriver, PrimitiveSpec, Session, DATA1_BYTES};

/// Rows per progress report while loading.
const PROGRESS_ROWS: i64 = 1000;

impl PostgresDriver {
    fn load_table(&self, spec: &PrimitiveSpec, table: u32, loaded: &AtomicU64) -> DriverResult<()> {
        let mut client = self.connect_client().map_err(postgres_error)?;
        let name = PrimitiveSpec::table_name(table);
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {name};
                 CREATE TABLE {name} (sid integer NOT NULL, c1 integer NOT NULL,
                                      data1 char({DATA1_BYTES}) NOT NULL);
                 ALTER TABLE {name} ALTER COLUMN data1 SET STORAGE PLAIN;"
            ))
            .map_err(postgres_error)?;
        let mut writer = client
            .copy_in(&format!("COPY {name} (sid, c1, data1) FROM STDIN"))
            .map_err(postgres_error)?;
        let mut line = String::with_capacity(DATA1_BYTES + 32);
        for sid in 1..=spec.rows_per_table as i64 {
            line.clear();
            // Data1 holds only letters, digits, '-' and '|': nothing to escape in COPY text.
            line.push_str(&format!("{sid}\t0\t{}\n", PrimitiveSpec::data1(table, sid)));
            writer
                .write_all(line.as_bytes())
                .map_err(|error| DriverError::fatal(format!("COPY into {name}: {error}")))?;
            if sid % PROGRESS_ROWS == 0 {
                loaded.fetch_add(PROGRESS_ROWS as u64, Ordering::Relaxed);
            }
        }
        writer.finish().map_err(postgres_error)?;
        loaded.fetch_add(
            spec.rows_per_table % PROGRESS_ROWS as u64,
            Ordering::Relaxed,
        );
        client
            .batch_execute(&format!("ALTER TABLE {name} ADD PRIMARY KEY (sid)"))
            .map_err(postgres_error)?;
        Ok(())
    }
}

impl PrimitiveDriver for PostgresDriver {
    fn load_primitive(
        &self,
        spec: &PrimitiveSpec,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        load_tables_in_parallel(spec, progress, &|table, loaded| {
            self.load_table(spec, table, loaded)
        })?;
        let mut client = self.connect_client().map_err(postgres_error)?;
        client
            .batch_execute("ANALYZE; CHECKPOINT;")
            .map_err(postgres_error)
    }

    fn connect(&self) -> DriverResult<Box<dyn Session>> {
        Ok(session(self.connect_client().map_err(postgres_error)?))
    }
}

/// A primitive-workload session on `client` (any server speaking PostgreSQL's protocol).
pub(crate) fn session(client: Client) -> Box<dyn Session> {
    Box::new(SqlSession::new(client))
}

impl PrimitiveConnection for Client {
    type Prepared = Statement;
    const PLACEHOLDERS: Placeholders = Placeholders::Numbered;

    fn prepare(&mut self, text: &str) -> DriverResult<Statement> {
        Client::prepare(self, text).map_err(postgres_error)
    }

    fn select_data1_length(
        &mut self,
        statement: &Statement,
        sid: i32,
    ) -> DriverResult<Option<usize>> {
        let row = self.query_opt(statement, &[&sid]).map_err(postgres_error)?;
        let Some(row) = row else { return Ok(None) };
        let data1: &str = row.try_get(2).map_err(postgres_error)?;
        Ok(Some(data1.len()))
    }

    fn update_c1(&mut self, statement: &Statement, c1: i32, sid: i32) -> DriverResult<u64> {
        self.execute(statement, &[&c1, &sid])
            .map_err(postgres_error)
    }
}

#[cfg(test)]
impl PostgresDriver {
    /// C1 of a row, read through a new connection.
    pub(crate) fn read_c1(&self, table: u32, sid: i64) -> DriverResult<Option<i64>> {
        let mut client = self.connect_client().map_err(postgres_error)?;
        let name = PrimitiveSpec::table_name(table);
        let row = client
            .query_opt(
                &format!("SELECT c1 FROM {name} WHERE sid = $1"),
                &[&crate::peers::sql::primitive::sql_integer(sid)?],
            )
            .map_err(postgres_error)?;
        Ok(row.map(|row| row.get::<_, i32>(0) as i64))
    }
}

//! The primitive workload on MariaDB: multi-row INSERT loading and the shared SQL session over
//! the `mysql` crate.
//!
//! 1. `load_primitive` loads the tables with multi-row INSERTs in large transactions, one
//!    connection per core, runs ANALYZE TABLE on each, then restarts the server so the run
//!    starts with every page flushed.
//! 2. Sessions are `SqlSession`s over a `Conn`: server-side prepared statements in autocommit
//!    mode.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use mysql::prelude::Queryable;
use mysql::{Conn, Statement};

use super::instance::{mariadb_error, MariadbDriver};
use crate::driver::DriverResult;
use crate::peers::sql::primitive::{
    load_tables_in_parallel, Placeholders, PrimitiveConnection, SqlSession,
};
use crate::primitive::driver::{PrimitiveDriver, PrimitiveSpec, Session, DATA1_BYTES};

/// Rows per INSERT statement (about 420 KB, well under max_allowed_packet) and per commit.
const INSERT_ROWS: u64 = 100;
const COMMIT_ROWS: u64 = 10_000;

impl MariadbDriver {
    fn load_table(&self, spec: &PrimitiveSpec, table: u32, loaded: &AtomicU64) -> DriverResult<()> {
        let mut conn = self.connect_lab().map_err(mariadb_error)?;
        let name = PrimitiveSpec::table_name(table);
        conn.query_drop(format!("DROP TABLE IF EXISTS {name}"))
            .map_err(mariadb_error)?;
        conn.query_drop(format!(
            "CREATE TABLE {name} (sid integer NOT NULL PRIMARY KEY, c1 integer NOT NULL, \
             data1 varchar({DATA1_BYTES}) CHARACTER SET ascii NOT NULL) ENGINE=InnoDB"
        ))
        .map_err(mariadb_error)?;
        let rows = spec.rows_per_table;
        let mut statement = String::with_capacity(INSERT_ROWS as usize * (DATA1_BYTES + 32));
        let mut first = 1;
        while first <= rows {
            let last = (first + COMMIT_ROWS - 1).min(rows);
            conn.query_drop("START TRANSACTION")
                .map_err(mariadb_error)?;
            let mut batch_first = first;
            while batch_first <= last {
                let batch_last = (batch_first + INSERT_ROWS - 1).min(last);
                statement.clear();
                let _ = write!(statement, "INSERT INTO {name} (sid, c1, data1) VALUES ");
                for sid in batch_first..=batch_last {
                    let separator = if sid == batch_first { "" } else { "," };
                    // Data1 holds only letters, digits, '-' and '|': a plain string literal.
                    let data1 = PrimitiveSpec::data1(table, sid as i64);
                    let _ = write!(statement, "{separator}({sid},0,'{data1}')");
                }
                conn.query_drop(&statement).map_err(mariadb_error)?;
                loaded.fetch_add(batch_last - batch_first + 1, Ordering::Relaxed);
                batch_first = batch_last + 1;
            }
            conn.query_drop("COMMIT").map_err(mariadb_error)?;
            first = last + 1;
        }
        conn.query_drop(format!("ANALYZE TABLE {name}"))
            .map_err(mariadb_error)
    }
}

impl PrimitiveDriver for MariadbDriver {
    fn load_primitive(
        &self,
        spec: &PrimitiveSpec,
        progress: &(dyn Fn(u64) + Sync),
    ) -> DriverResult<()> {
        load_tables_in_parallel(spec, progress, &|table, loaded| {
            self.load_table(spec, table, loaded)
        })?;
        self.restart()
    }

    fn connect(&self) -> DriverResult<Box<dyn Session>> {
        let conn = self.connect_lab().map_err(mariadb_error)?;
        Ok(Box::new(SqlSession::new(conn)))
    }
}

impl PrimitiveConnection for Conn {
    type Prepared = Statement;
    const PLACEHOLDERS: Placeholders = Placeholders::QuestionMarks;

    fn prepare(&mut self, text: &str) -> DriverResult<Statement> {
        self.prep(text).map_err(mariadb_error)
    }

    fn select_data1_length(
        &mut self,
        statement: &Statement,
        sid: i32,
    ) -> DriverResult<Option<usize>> {
        let row: Option<(i32, i32, Vec<u8>)> =
            self.exec_first(statement, (sid,)).map_err(mariadb_error)?;
        Ok(row.map(|(_, _, data1)| data1.len()))
    }

    fn update_c1(&mut self, statement: &Statement, c1: i32, sid: i32) -> DriverResult<u64> {
        self.exec_drop(statement, (c1, sid))
            .map_err(mariadb_error)?;
        Ok(self.affected_rows())
    }
}

#[cfg(test)]
impl MariadbDriver {
    /// C1 of a row, read through a new connection.
    pub(crate) fn read_c1(&self, table: u32, sid: i64) -> DriverResult<Option<i64>> {
        let mut conn = self.connect_lab().map_err(mariadb_error)?;
        let name = PrimitiveSpec::table_name(table);
        conn.exec_first(
            format!("SELECT c1 FROM {name} WHERE sid = ?"),
            (crate::peers::sql::primitive::sql_integer(sid)?,),
        )
        .map_err(mariadb_error)
    }
}

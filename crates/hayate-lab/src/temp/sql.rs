//! `hayate-lab temp`, SQL part: the same spill paths seen from SQL, through
//! `hayate_sql::Session` on a real database (the engine's I/O on the device under --dir).
//!
//! 1. Load t (--sql-rows rows: id, k = id mod rows/10, s = a unique ~80-byte text) and u
//!    (a tenth as many rows: id, k, label).
//! 2. For each query (an ORDER BY, a hash join with t as its build side, a sort-merge join, a
//!    GROUP BY over s and a DISTINCT s; each reduced to one row so that the client's share of
//!    the time is nothing) and each work_mem, the baseline first: `SET work_mem`, run, time it,
//!    count the temporary bytes and files, check the answer equals the baseline's.
//! 3. Each point's slowdown is its time over the baseline's (a work_mem that holds it all).

use std::time::Instant;

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, Value};
use serde::{Deserialize, Serialize};

use super::args::TempArgs;
use hayate::error::{CliError, CliResult, Context};
use hayate::report::{format_bytes, table};

/// The work memory everything fits in (the in-memory baseline).
pub const BASELINE_WORK_MEM: &str = "2GB";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SqlPoint {
    /// "order by", "hash join", "merge join", "group by" or "distinct".
    pub query: String,
    pub sql: String,
    /// As given to SET work_mem.
    pub work_mem: String,
    pub seconds: f64,
    pub temp_bytes_written: u64,
    pub temp_bytes_read: u64,
    pub temp_files: u64,
    /// This point's time over the baseline's (work_mem = BASELINE_WORK_MEM).
    pub slowdown: f64,
}

fn queries(rows: u64) -> Vec<(&'static str, String)> {
    vec![
        (
            "order by",
            format!("SELECT id, s FROM t ORDER BY s OFFSET {}", rows - 1),
        ),
        (
            "hash join",
            "SELECT count(*), sum(t.id) FROM u JOIN t ON u.k = t.k".into(),
        ),
        (
            "merge join",
            "SELECT count(*), sum(u.k) FROM t JOIN u ON t.id = u.id".into(),
        ),
        (
            "group by",
            "SELECT count(*), sum(c) FROM (SELECT s, count(*) AS c FROM t GROUP BY s) g".into(),
        ),
        (
            "distinct",
            "SELECT count(*) FROM (SELECT DISTINCT s FROM t) d".into(),
        ),
    ]
}

fn execute(session: &mut Session, sql: &str) -> CliResult<Vec<Vec<Value>>> {
    let outcome = session
        .execute_sql(sql)
        .pop()
        .ok_or_else(|| CliError::new(format!("{sql}: no result")))?;
    match outcome.map_err(|error| CliError::new(format!("{sql}: {error}")))? {
        Outcome::Rows { rows, .. } => Ok(rows),
        Outcome::Command { .. } => Ok(Vec::new()),
    }
}

/// Runs the SQL part on a new database under `base`; the points in run order.
pub fn run(args: &TempArgs, base: &std::path::Path) -> CliResult<Vec<SqlPoint>> {
    let rows = args.sql_rows;
    let mut work_mems = vec![BASELINE_WORK_MEM.to_string()];
    for work_mem in &args.sql_work_mem {
        hayate_sql::exec::parse_work_mem(work_mem)
            .map_err(|error| CliError::new(format!("--sql-work-mem: {error}")))?;
        if !work_mems.contains(work_mem) {
            work_mems.push(work_mem.clone());
        }
    }
    let dir = tempfile::Builder::new()
        .prefix("hayate-lab-temp-sql-")
        .tempdir_in(base)
        .context(|| format!("cannot make a directory under {}", base.display()))?;
    let db = Database::open(dir.path(), DatabaseConfig::default())
        .context(|| "cannot open the database".into())?;
    let catalog = Catalog::open(db.clone()).map_err(|error| CliError::new(error.to_string()))?;
    let mut session = Session::new(catalog, "lab");

    let queries = queries(rows);
    let bar = crate::progress::progress_bar((1 + queries.len() * work_mems.len()) as u64, "sql");
    bar.set_message(format!("sql: loading {rows} rows"));
    load(&mut session, rows)?;
    bar.inc(1);

    let mut points = Vec::new();
    for (query, sql) in &queries {
        let mut baseline: Option<(f64, Vec<Vec<Value>>)> = None;
        for work_mem in &work_mems {
            bar.set_message(format!("sql: {query}, work_mem {work_mem}"));
            execute(&mut session, &format!("SET work_mem = '{work_mem}'"))?;
            let before = db.temp().stats();
            let started = Instant::now();
            let answer = execute(&mut session, sql)?;
            let seconds = started.elapsed().as_secs_f64();
            let after = db.temp().stats();
            let (baseline_seconds, expected) = baseline.get_or_insert((seconds, answer.clone()));
            if answer != *expected {
                return Err(CliError::new(format!(
                    "{query}: work_mem {work_mem} answered {answer:?}, the baseline {expected:?}"
                )));
            }
            points.push(SqlPoint {
                query: query.to_string(),
                sql: sql.clone(),
                work_mem: work_mem.clone(),
                seconds,
                temp_bytes_written: after.bytes_written - before.bytes_written,
                temp_bytes_read: after.bytes_read - before.bytes_read,
                temp_files: after.files_created - before.files_created,
                slowdown: seconds / *baseline_seconds,
            });
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(points)
}

/// Rows loaded per statement (one transaction's writes must stay under the engine's limit).
const LOAD_BATCH_ROWS: u64 = 50_000;

/// Creates and fills t and u (module doc, 1), then reads them once so that the baseline
/// does not pay for the first reads.
fn load(session: &mut Session, rows: u64) -> CliResult<()> {
    let groups = (rows / 10).max(1);
    let filler = "x".repeat(64);
    execute(
        session,
        "CREATE TABLE t (id int8 PRIMARY KEY, k int8, s text)",
    )?;
    execute(
        session,
        "CREATE TABLE u (id int8 PRIMARY KEY, k int8, label text)",
    )?;
    let mut first = 1;
    while first <= rows {
        let last = (first + LOAD_BATCH_ROWS - 1).min(rows);
        execute(
            session,
            &format!(
                "INSERT INTO t SELECT i, i % {groups}, \
                 'row ' || CAST((CAST(i AS int8) * 7919) % {rows} AS text) || ' {filler}' \
                 FROM generate_series({first}, {last}) i"
            ),
        )?;
        if first <= groups {
            execute(
                session,
                &format!(
                    "INSERT INTO u SELECT i, i, 'label ' || CAST(i AS text) \
                     FROM generate_series({first}, {}) i",
                    last.min(groups)
                ),
            )?;
        }
        first = last + 1;
    }
    execute(session, "SELECT count(*), max(s) FROM t")?;
    execute(session, "SELECT count(*), max(label) FROM u")?;
    Ok(())
}

pub fn print_table(points: &[SqlPoint]) {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|point| {
            vec![
                point.query.clone(),
                point.work_mem.clone(),
                format!("{:.3}", point.seconds),
                point.temp_files.to_string(),
                format_bytes(point.temp_bytes_written),
                format_bytes(point.temp_bytes_read),
                format!("{:.2}x", point.slowdown),
            ]
        })
        .collect();
    println!(
        "{}",
        table(
            &[
                "sql query",
                "work_mem",
                "seconds",
                "temp files",
                "temp written",
                "temp read",
                "vs in memory",
            ],
            &rows,
        )
    );
}

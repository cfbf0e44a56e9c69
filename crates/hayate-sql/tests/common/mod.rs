//! Helpers the SQL test files share: run a query string on a session and take its last
//! outcome or rows.

#![allow(dead_code)] // each test file uses a part of it

use hayate_sql::{Outcome, Session, SqlError, Value};

/// Runs every statement of `sql`; the last one's outcome, or the first error.
pub fn try_run(session: &mut Session, sql: &str) -> Result<Outcome, SqlError> {
    let outcomes = session.execute_sql(sql);
    assert!(!outcomes.is_empty(), "{sql}");
    let mut last = None;
    for outcome in outcomes {
        last = Some(outcome?);
    }
    Ok(last.expect("checked above"))
}

/// `try_run`, panicking with the statement on an error.
pub fn run(session: &mut Session, sql: &str) -> Outcome {
    try_run(session, sql).unwrap_or_else(|error| panic!("{sql}: {error}"))
}

/// The rows of the last statement of `sql` (a query).
pub fn rows(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match run(session, sql) {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

/// The SQLSTATE of the error `sql` gives (panics if it succeeds).
pub fn error_code(session: &mut Session, sql: &str) -> &'static str {
    try_run(session, sql)
        .map(|outcome| panic!("{sql} succeeded: {outcome:?}"))
        .unwrap_err()
        .code
}

/// The plan EXPLAIN gives for `sql`, one operator a line.
pub fn explain(session: &mut Session, sql: &str) -> String {
    rows(session, &format!("EXPLAIN {sql}"))
        .into_iter()
        .map(|row| match &row[0] {
            Value::Text(line) => line.clone(),
            other => panic!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The access path of `sql` (a SELECT's first table read, an UPDATE's or DELETE's read)
/// prepared with parameters of `declared` types.
pub fn prepared_access(
    session: &Session,
    sql: &str,
    declared: &[hayate_sql::DataType],
) -> hayate_sql::plan::Access {
    use hayate_sql::plan::Plan;
    let statement = hayate_sql::parse(sql).unwrap().pop().unwrap();
    match session.prepare(statement, declared).unwrap().plan() {
        Plan::Select(select) => select.table_reads()[0].access.clone(),
        Plan::Update { read, .. } | Plan::Delete { read, .. } => read.access.clone(),
        other => panic!("not a read: {other:?}"),
    }
}

/// A database in `dir` (opened, or made) and a session on its default catalog.
pub fn open(dir: &std::path::Path) -> (hayate_engine::Database, Session) {
    let db = hayate_engine::Database::open(dir, hayate_engine::DatabaseConfig::default()).unwrap();
    let catalog = hayate_sql::Catalog::open(db.clone()).unwrap();
    (db, Session::new(catalog, "tester"))
}

/// The first column of each row of `sql`, as text ("NULL" for NULL).
pub fn texts(session: &mut Session, sql: &str) -> Vec<String> {
    rows(session, sql)
        .into_iter()
        .map(|row| row[0].to_text().unwrap_or_else(|| "NULL".into()))
        .collect()
}

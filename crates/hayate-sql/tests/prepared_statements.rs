//! SQL-level PREPARE / EXECUTE / DEALLOCATE, sharing one namespace with the protocol-level
//! statements the server reports (`protocol_statement_parsed`), as in PostgreSQL: psycopg
//! prepares through Parse and drops through `DEALLOCATE name` / `DEALLOCATE ALL`.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, SqlError, Value};

fn session() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let session = Session::new(Catalog::open(db).unwrap(), "tester");
    (dir, session)
}

fn try_run(session: &mut Session, sql: &str) -> Result<Outcome, SqlError> {
    let mut outcomes = session.execute_sql(sql);
    assert_eq!(outcomes.len(), 1, "{sql}");
    outcomes.pop().unwrap()
}

fn run(session: &mut Session, sql: &str) -> Outcome {
    try_run(session, sql).unwrap_or_else(|error| panic!("{sql}: {error}"))
}

fn tag(session: &mut Session, sql: &str) -> String {
    match run(session, sql) {
        Outcome::Command { tag } => tag,
        Outcome::Rows { command, .. } => command,
    }
}

fn rows(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match run(session, sql) {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

fn code(session: &mut Session, sql: &str) -> String {
    try_run(session, sql).expect_err(sql).code.to_string()
}

#[test]
fn prepare_execute_deallocate() {
    let (_dir, mut s) = session();
    tag(&mut s, "CREATE TABLE t (id int4 PRIMARY KEY, name text)");
    assert_eq!(
        tag(
            &mut s,
            "PREPARE ins (int4, text) AS INSERT INTO t VALUES ($1, $2)"
        ),
        "PREPARE"
    );
    assert_eq!(tag(&mut s, "EXECUTE ins (1, 'one')"), "INSERT 0 1");
    tag(&mut s, "EXECUTE ins(2, 'tw' || 'o')");
    // Parameter types inferred from the statement.
    tag(&mut s, "PREPARE get AS SELECT name FROM t WHERE id = $1");
    assert_eq!(
        rows(&mut s, "EXECUTE get(2)"),
        vec![vec![Value::Text("two".into())]]
    );
    assert_eq!(code(&mut s, "PREPARE get AS SELECT 1"), "42P05");
    assert_eq!(code(&mut s, "EXECUTE nosuch"), "26000");
    assert_eq!(code(&mut s, "EXECUTE get(1, 2)"), "42601");
    assert_eq!(code(&mut s, "EXECUTE get('x')"), "22P02");
    // A table change binds the statement again.
    tag(&mut s, "ALTER TABLE t ADD COLUMN extra int4 DEFAULT 5");
    assert_eq!(
        rows(&mut s, "EXECUTE get(1)"),
        vec![vec![Value::Text("one".into())]]
    );
    assert_eq!(tag(&mut s, "DEALLOCATE get"), "DEALLOCATE");
    assert_eq!(code(&mut s, "EXECUTE get(1)"), "26000");
    assert_eq!(code(&mut s, "DEALLOCATE get"), "26000");
    assert_eq!(tag(&mut s, "DEALLOCATE PREPARE ALL"), "DEALLOCATE ALL");
    assert_eq!(code(&mut s, "EXECUTE ins(3, 'x')"), "26000");
    // Inside a block, a failed EXECUTE aborts it like any statement.
    tag(&mut s, "BEGIN");
    assert_eq!(code(&mut s, "EXECUTE ins(3, 'x')"), "26000");
    assert_eq!(code(&mut s, "PREPARE p AS SELECT 1"), "25P02");
    tag(&mut s, "ROLLBACK");
}

#[test]
fn deallocate_drops_protocol_level_statements() {
    let (_dir, mut s) = session();
    s.protocol_statement_parsed("_pg3_0");
    s.protocol_statement_parsed("_pg3_1");
    s.protocol_statement_parsed(""); // the unnamed statement has no name to deallocate
    assert_eq!(code(&mut s, "PREPARE _pg3_0 AS SELECT 1"), "42P05");
    assert_eq!(tag(&mut s, "DEALLOCATE _pg3_1"), "DEALLOCATE");
    assert_eq!(s.take_deallocated(), vec!["_pg3_1".to_string()]);
    assert_eq!(code(&mut s, "DEALLOCATE _pg3_1"), "26000");
    tag(&mut s, "PREPARE mine AS SELECT 1");
    s.protocol_statement_parsed("_pg3_2");
    assert_eq!(tag(&mut s, "DEALLOCATE ALL"), "DEALLOCATE ALL");
    let mut dropped = s.take_deallocated();
    dropped.sort();
    assert_eq!(dropped, vec!["_pg3_0".to_string(), "_pg3_2".to_string()]);
    assert!(s.take_deallocated().is_empty());
    assert_eq!(code(&mut s, "EXECUTE mine"), "26000");
    s.protocol_statement_parsed("_pg3_3");
    s.protocol_statement_closed("_pg3_3");
    assert_eq!(code(&mut s, "DEALLOCATE _pg3_3"), "26000");
}

/// DECLARE ... CURSOR / FETCH / CLOSE as Django's QuerySet.iterator() sends them: a WITH
/// HOLD cursor outside a block, fetched in pieces; a cursor without HOLD only in a block
/// and gone with it; 34000 for an unknown cursor, 42P03 for a second one of a name.
#[test]
fn cursors_declare_fetch_close() {
    let (_dir, mut s) = session();
    run(&mut s, "CREATE TABLE t (id int PRIMARY KEY)");
    run(&mut s, "INSERT INTO t VALUES (1), (2), (3)");
    let ints = |rows: Vec<Vec<Value>>| -> Vec<i64> {
        rows.into_iter()
            .map(|row| match row[0] {
                Value::Int(v) => v,
                ref other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(
        tag(
            &mut s,
            "DECLARE \"_django_curs_1\" NO SCROLL CURSOR WITH HOLD FOR SELECT id FROM t ORDER BY id"
        ),
        "DECLARE CURSOR"
    );
    // Rows written after DECLARE are not seen by the cursor.
    run(&mut s, "INSERT INTO t VALUES (4)");
    assert_eq!(
        ints(rows(&mut s, "FETCH FORWARD 2 FROM \"_django_curs_1\"")),
        vec![1, 2]
    );
    assert_eq!(
        ints(rows(&mut s, "FETCH FORWARD 2 FROM \"_django_curs_1\"")),
        vec![3]
    );
    assert!(rows(&mut s, "FETCH FORWARD 2 FROM \"_django_curs_1\"").is_empty());
    assert_eq!(
        code(
            &mut s,
            "DECLARE \"_django_curs_1\" CURSOR WITH HOLD FOR SELECT 1"
        ),
        "42P03"
    );
    assert_eq!(tag(&mut s, "CLOSE \"_django_curs_1\""), "CLOSE CURSOR");
    assert_eq!(code(&mut s, "FETCH 1 FROM \"_django_curs_1\""), "34000");
    assert_eq!(code(&mut s, "DECLARE c CURSOR FOR SELECT 1"), "25P01");
    run(&mut s, "BEGIN");
    run(
        &mut s,
        "DECLARE c CURSOR FOR SELECT id FROM t ORDER BY id DESC",
    );
    assert_eq!(ints(rows(&mut s, "FETCH NEXT FROM c")), vec![4]);
    assert_eq!(ints(rows(&mut s, "FETCH ALL IN c")), vec![3, 2, 1]);
    run(&mut s, "COMMIT");
    assert_eq!(code(&mut s, "FETCH 1 FROM c"), "34000");
    assert_eq!(code(&mut s, "FETCH BACKWARD 1 FROM c"), "0A000");
    // A WITH HOLD cursor of a block that rolls back is gone with it.
    run(&mut s, "BEGIN");
    run(&mut s, "DECLARE h CURSOR WITH HOLD FOR SELECT id FROM t");
    run(&mut s, "ROLLBACK");
    assert_eq!(code(&mut s, "FETCH 1 FROM h"), "34000");
    run(&mut s, "BEGIN");
    run(
        &mut s,
        "DECLARE h CURSOR WITH HOLD FOR SELECT id FROM t ORDER BY id",
    );
    run(&mut s, "COMMIT");
    assert_eq!(ints(rows(&mut s, "FETCH 1 FROM h")), vec![1]);
    run(&mut s, "DECLARE a CURSOR WITH HOLD FOR SELECT 1");
    run(&mut s, "DECLARE b CURSOR WITH HOLD FOR SELECT 2");
    run(&mut s, "CLOSE ALL");
    assert_eq!(code(&mut s, "FETCH 1 FROM b"), "34000");
}

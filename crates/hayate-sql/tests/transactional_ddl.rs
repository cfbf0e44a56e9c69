//! DDL inside transaction blocks (psycopg's default runs CREATE TABLE in an implicit BEGIN):
//! the catalog change commits or rolls back with the block, is seen by the block's later
//! statements at once, and a rollback, a client gone mid-block or a crash leaves no trace of
//! it (its engine trees included).

use std::sync::Arc;

use hayate_engine::{Database, DatabaseConfig, SimConfig, SimIo};
use hayate_sql::{Catalog, Outcome, Session, SqlError, Value};

fn open(dir: &std::path::Path) -> (Database, Arc<Catalog>) {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db.clone()).unwrap();
    (db, catalog)
}

fn session(catalog: &Arc<Catalog>) -> Session {
    Session::new(catalog.clone(), "tester")
}

fn try_run(session: &mut Session, sql: &str) -> Result<Outcome, SqlError> {
    let mut outcomes = session.execute_sql(sql);
    assert_eq!(outcomes.len(), 1, "{sql}");
    outcomes.pop().unwrap()
}

fn run(session: &mut Session, sql: &str) {
    try_run(session, sql).unwrap_or_else(|error| panic!("{sql}: {error}"));
}

fn code(session: &mut Session, sql: &str) -> String {
    try_run(session, sql).expect_err(sql).code.to_string()
}

fn ints(session: &mut Session, sql: &str) -> Vec<i64> {
    match try_run(session, sql).unwrap_or_else(|error| panic!("{sql}: {error}")) {
        Outcome::Rows { rows, .. } => rows
            .into_iter()
            .map(|row| match row[0] {
                Value::Int(v) => v,
                ref other => panic!("{sql}: {other:?}"),
            })
            .collect(),
        other => panic!("{sql}: {other:?}"),
    }
}

/// The engine trees the SQL layer made (tables and indexes).
fn sql_trees(db: &Database) -> Vec<String> {
    let mut names: Vec<String> = db
        .tables()
        .into_iter()
        .map(|info| info.name)
        .filter(|name| name.starts_with("sql.table.") || name.starts_with("sql.index."))
        .collect();
    names.sort();
    names
}

#[test]
fn create_table_commits_with_the_block() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_db, catalog) = open(dir.path());
        let mut s = session(&catalog);
        run(&mut s, "BEGIN");
        run(
            &mut s,
            "CREATE TABLE t (id serial PRIMARY KEY, v int4 NOT NULL)",
        );
        run(&mut s, "CREATE INDEX t_v ON t (v)");
        run(&mut s, "INSERT INTO t (v) VALUES (10), (20)");
        assert_eq!(ints(&mut s, "SELECT id FROM t WHERE v = 20"), vec![2]);
        run(&mut s, "COMMIT");
        let mut other = session(&catalog);
        assert_eq!(ints(&mut other, "SELECT id FROM t ORDER BY id"), vec![1, 2]);
    }
    let (_db, catalog) = open(dir.path());
    let mut s = session(&catalog);
    assert_eq!(ints(&mut s, "SELECT id FROM t WHERE v = 10"), vec![1]);
    // The sequence goes on past the values handed out (a restart skips the rest of a batch).
    run(&mut s, "INSERT INTO t (v) VALUES (30)");
    assert!(ints(&mut s, "SELECT id FROM t WHERE v = 30")[0] > 2);
}

#[test]
fn rollback_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (db, catalog) = open(dir.path());
    let mut s = session(&catalog);
    run(&mut s, "CREATE TABLE keep (id int4 PRIMARY KEY, v int4)");
    run(&mut s, "INSERT INTO keep VALUES (1, 1), (2, 2)");
    let trees_before = sql_trees(&db);

    run(&mut s, "BEGIN");
    run(&mut s, "CREATE TABLE t (id int4 PRIMARY KEY)");
    run(&mut s, "INSERT INTO t VALUES (1)");
    run(&mut s, "INSERT INTO keep VALUES (3, 3)");
    // The index reads the block's own rows.
    run(&mut s, "CREATE UNIQUE INDEX keep_v ON keep (v)");
    assert_eq!(code(&mut s, "INSERT INTO keep VALUES (4, 3)"), "23505");
    run(&mut s, "ROLLBACK");
    assert_eq!(code(&mut s, "SELECT * FROM t"), "42P01");
    assert_eq!(ints(&mut s, "SELECT id FROM keep ORDER BY id"), vec![1, 2]);
    run(&mut s, "INSERT INTO keep VALUES (4, 2)"); // no unique index any more
    assert_eq!(sql_trees(&db), trees_before);

    run(&mut s, "BEGIN");
    run(&mut s, "DROP TABLE keep");
    assert_eq!(code(&mut s, "SELECT * FROM keep"), "42P01");
    run(&mut s, "ROLLBACK");
    assert_eq!(
        ints(&mut s, "SELECT id FROM keep ORDER BY id"),
        vec![1, 2, 4]
    );

    run(&mut s, "BEGIN");
    run(&mut s, "ALTER TABLE keep ADD COLUMN w int4 DEFAULT 7");
    assert_eq!(ints(&mut s, "SELECT w FROM keep WHERE id = 1"), vec![7]);
    run(&mut s, "ROLLBACK");
    assert_eq!(code(&mut s, "SELECT w FROM keep"), "42703");
    assert_eq!(sql_trees(&db), trees_before);

    run(&mut s, "CREATE INDEX keep_w ON keep (v)");
    run(&mut s, "BEGIN");
    run(&mut s, "DROP INDEX keep_w");
    run(&mut s, "ROLLBACK");
    assert_eq!(code(&mut s, "CREATE INDEX keep_w ON keep (v)"), "42P07");
}

#[test]
fn drop_and_alter_commit_with_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let (db, catalog) = open(dir.path());
    let mut s = session(&catalog);
    run(&mut s, "CREATE TABLE a (id int4 PRIMARY KEY)");
    run(&mut s, "CREATE TABLE b (id int4 PRIMARY KEY)");
    run(&mut s, "INSERT INTO b VALUES (1)");
    run(&mut s, "BEGIN");
    run(&mut s, "DROP TABLE a");
    run(&mut s, "ALTER TABLE b ADD COLUMN note text DEFAULT 'x'");
    run(&mut s, "COMMIT");
    assert_eq!(code(&mut s, "SELECT * FROM a"), "42P01");
    assert_eq!(
        ints(&mut s, "SELECT count(*) FROM b WHERE note = 'x'"),
        vec![1]
    );
    // Only b's new tree remains.
    assert_eq!(sql_trees(&db).len(), 1, "{:?}", sql_trees(&db));
}

#[test]
fn an_error_after_ddl_aborts_it_with_the_block() {
    let dir = tempfile::tempdir().unwrap();
    let (db, catalog) = open(dir.path());
    let mut s = session(&catalog);
    run(&mut s, "BEGIN");
    run(&mut s, "CREATE TABLE t (id int4 PRIMARY KEY)");
    assert_eq!(code(&mut s, "SELECT * FROM nosuch"), "42P01");
    // Rolled back at the error: the table is gone for everybody at once.
    let mut other = session(&catalog);
    assert_eq!(code(&mut other, "SELECT * FROM t"), "42P01");
    assert_eq!(code(&mut s, "SELECT 1"), "25P02");
    run(&mut s, "COMMIT");
    assert_eq!(code(&mut s, "SELECT * FROM t"), "42P01");
    assert!(sql_trees(&db).is_empty());
}

#[test]
fn a_client_gone_mid_block_or_a_crash_rolls_ddl_back() {
    let io = Arc::new(SimIo::new(SimConfig::with_seed(7)));
    let db = Database::open_with_io(io.clone(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db.clone()).unwrap();
    let mut s = session(&catalog);
    run(&mut s, "BEGIN");
    run(&mut s, "CREATE TABLE t (id int4 PRIMARY KEY)");
    drop(s);
    let mut other = session(&catalog);
    assert_eq!(code(&mut other, "SELECT * FROM t"), "42P01");
    assert!(sql_trees(&db).is_empty());

    // A crash with the block open: the table's engine tree exists, its definition does not.
    run(&mut other, "CREATE TABLE kept (id int4 PRIMARY KEY)");
    let mut s = session(&catalog);
    run(&mut s, "BEGIN");
    run(&mut s, "CREATE TABLE u (id int4 PRIMARY KEY)");
    run(&mut s, "INSERT INTO u VALUES (1)");
    let image = Arc::new(io.crash());
    drop((s, other, catalog, db));
    let db = Database::open_with_io(image, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db.clone()).unwrap();
    let mut s = session(&catalog);
    assert_eq!(code(&mut s, "SELECT * FROM u"), "42P01");
    assert_eq!(ints(&mut s, "SELECT count(*) FROM kept"), vec![0]);
    assert_eq!(sql_trees(&db), vec!["sql.table.kept".to_string()]);
}

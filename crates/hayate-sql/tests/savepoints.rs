//! SAVEPOINT, RELEASE [SAVEPOINT] and ROLLBACK TO [SAVEPOINT] as in PostgreSQL: a failed
//! statement aborts the block (25P02) until ROLLBACK TO a savepoint taken before it, which
//! undoes the writes (and DDL) after the savepoint and lets the block go on.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, SqlError, TransactionStatus, Value};

fn open(dir: &std::path::Path) -> Session {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    Session::new(Catalog::open(db).unwrap(), "tester")
}

fn try_run(session: &mut Session, sql: &str) -> Result<Outcome, SqlError> {
    let mut outcomes = session.execute_sql(sql);
    assert_eq!(outcomes.len(), 1, "{sql}");
    outcomes.pop().unwrap()
}

fn run(session: &mut Session, sql: &str) -> String {
    match try_run(session, sql).unwrap_or_else(|error| panic!("{sql}: {error}")) {
        Outcome::Command { tag } => tag,
        Outcome::Rows { command, .. } => command,
    }
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

fn with_table() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let mut session = open(dir.path());
    run(&mut session, "CREATE TABLE t (id int4 PRIMARY KEY, v int4)");
    (dir, session)
}

#[test]
fn rollback_to_undoes_the_writes_after_the_savepoint() {
    let (_dir, mut s) = with_table();
    run(&mut s, "BEGIN");
    run(&mut s, "INSERT INTO t VALUES (1, 1)");
    assert_eq!(run(&mut s, "SAVEPOINT a"), "SAVEPOINT");
    run(&mut s, "INSERT INTO t VALUES (2, 2)");
    run(&mut s, "UPDATE t SET v = 10 WHERE id = 1");
    run(&mut s, "savepoint B");
    run(&mut s, "DELETE FROM t");
    assert_eq!(run(&mut s, "ROLLBACK TO SAVEPOINT b"), "ROLLBACK");
    assert_eq!(ints(&mut s, "SELECT v FROM t ORDER BY id"), vec![10, 2]);
    run(&mut s, "ROLLBACK TO a");
    assert_eq!(ints(&mut s, "SELECT v FROM t ORDER BY id"), vec![1]);
    // The savepoint stays after ROLLBACK TO: it can be rolled back to again.
    run(&mut s, "INSERT INTO t VALUES (3, 3)");
    run(&mut s, "ROLLBACK TO a");
    run(&mut s, "INSERT INTO t VALUES (4, 4)");
    assert_eq!(run(&mut s, "COMMIT"), "COMMIT");
    assert_eq!(ints(&mut s, "SELECT id FROM t ORDER BY id"), vec![1, 4]);
}

#[test]
fn a_failed_statement_is_recovered_by_rollback_to() {
    let (_dir, mut s) = with_table();
    run(&mut s, "BEGIN");
    run(&mut s, "INSERT INTO t VALUES (1, 1)");
    run(&mut s, "SAVEPOINT a");
    // A multi-row insert failing at its second row: the first row's write is undone too.
    assert_eq!(code(&mut s, "INSERT INTO t VALUES (2, 2), (1, 1)"), "23505");
    assert_eq!(s.status(), TransactionStatus::Failed);
    assert_eq!(code(&mut s, "SELECT id FROM t"), "25P02");
    assert_eq!(code(&mut s, "RELEASE a"), "25P02");
    run(&mut s, "ROLLBACK TO a");
    assert_eq!(s.status(), TransactionStatus::InBlock);
    assert_eq!(ints(&mut s, "SELECT id FROM t ORDER BY id"), vec![1]);
    run(&mut s, "INSERT INTO t VALUES (2, 2)");
    assert_eq!(run(&mut s, "COMMIT"), "COMMIT");
    assert_eq!(ints(&mut s, "SELECT id FROM t ORDER BY id"), vec![1, 2]);
}

#[test]
fn release_forgets_the_savepoint_and_the_later_ones() {
    let (_dir, mut s) = with_table();
    run(&mut s, "BEGIN");
    run(&mut s, "SAVEPOINT a");
    run(&mut s, "INSERT INTO t VALUES (1, 1)");
    run(&mut s, "SAVEPOINT b");
    run(&mut s, "INSERT INTO t VALUES (2, 2)");
    assert_eq!(run(&mut s, "RELEASE SAVEPOINT a"), "RELEASE");
    assert_eq!(code(&mut s, "ROLLBACK TO b"), "3B001");
    // That error aborted the block; COMMIT then rolls it back, as in PostgreSQL.
    assert_eq!(run(&mut s, "COMMIT"), "ROLLBACK");
    assert_eq!(ints(&mut s, "SELECT count(*) FROM t"), vec![0]);

    run(&mut s, "BEGIN");
    run(&mut s, "SAVEPOINT a");
    run(&mut s, "INSERT INTO t VALUES (1, 1)");
    run(&mut s, "RELEASE a");
    run(&mut s, "COMMIT");
    assert_eq!(ints(&mut s, "SELECT count(*) FROM t"), vec![1]);
}

#[test]
fn a_name_used_twice_means_the_newest() {
    let (_dir, mut s) = with_table();
    run(&mut s, "BEGIN");
    run(&mut s, "SAVEPOINT a");
    run(&mut s, "INSERT INTO t VALUES (1, 1)");
    run(&mut s, "SAVEPOINT a");
    run(&mut s, "INSERT INTO t VALUES (2, 2)");
    run(&mut s, "ROLLBACK TO a");
    assert_eq!(ints(&mut s, "SELECT id FROM t"), vec![1]);
    run(&mut s, "RELEASE a");
    run(&mut s, "ROLLBACK TO a");
    assert_eq!(ints(&mut s, "SELECT count(*) FROM t"), vec![0]);
    run(&mut s, "COMMIT");
}

#[test]
fn savepoint_errors() {
    let (_dir, mut s) = with_table();
    assert_eq!(code(&mut s, "SAVEPOINT a"), "25P01");
    assert_eq!(code(&mut s, "RELEASE a"), "25P01");
    assert_eq!(code(&mut s, "ROLLBACK TO a"), "25P01");
    run(&mut s, "BEGIN");
    assert_eq!(code(&mut s, "ROLLBACK TO nosuch"), "3B001");
    // Aborted without a savepoint: ROLLBACK TO cannot help, ROLLBACK ends the block.
    assert_eq!(code(&mut s, "ROLLBACK TO nosuch"), "3B001");
    assert_eq!(s.status(), TransactionStatus::Failed);
    assert_eq!(run(&mut s, "ROLLBACK"), "ROLLBACK");
    assert_eq!(s.status(), TransactionStatus::Idle);
}

#[test]
fn rollback_to_undoes_ddl_after_the_savepoint() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = open(dir.path());
        run(&mut s, "BEGIN");
        run(&mut s, "CREATE TABLE kept (id int4 PRIMARY KEY)");
        run(&mut s, "INSERT INTO kept VALUES (1)");
        run(&mut s, "SAVEPOINT a");
        run(&mut s, "CREATE TABLE gone (id int4 PRIMARY KEY)");
        run(&mut s, "INSERT INTO gone VALUES (1)");
        run(&mut s, "CREATE INDEX kept_idx ON kept (id)");
        run(&mut s, "ROLLBACK TO a");
        assert_eq!(code(&mut s, "SELECT * FROM gone"), "42P01");
        run(&mut s, "ROLLBACK TO a");
        // The name is free again.
        run(&mut s, "CREATE TABLE gone (x int4)");
        run(&mut s, "DROP TABLE gone");
        run(&mut s, "COMMIT");
        assert_eq!(ints(&mut s, "SELECT id FROM kept"), vec![1]);
    }
    let mut s = open(dir.path());
    assert_eq!(ints(&mut s, "SELECT id FROM kept"), vec![1]);
    assert_eq!(code(&mut s, "SELECT * FROM gone"), "42P01");
    run(&mut s, "CREATE INDEX kept_idx ON kept (id)");
}

/// As PostgreSQL (which aborts the innermost subtransaction at an error): rows locked since
/// the newest savepoint are free for others as soon as a statement fails, before ROLLBACK
/// TO; rows locked before it stay locked until the block ends.
#[test]
fn an_error_lets_go_of_the_locks_taken_since_the_newest_savepoint() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut s1 = Session::new(catalog.clone(), "one");
    let mut s2 = Session::new(catalog, "two");
    run(&mut s1, "CREATE TABLE t (id int4 PRIMARY KEY, v int4)");
    run(&mut s1, "INSERT INTO t VALUES (1, 10), (2, 20)");
    run(&mut s1, "BEGIN");
    assert_eq!(
        ints(&mut s1, "SELECT id FROM t WHERE id = 1 FOR UPDATE"),
        [1]
    );
    run(&mut s1, "SAVEPOINT a");
    assert_eq!(
        ints(&mut s1, "SELECT id FROM t WHERE id = 2 FOR UPDATE"),
        [2]
    );
    assert_eq!(code(&mut s1, "SELECT 1 / 0"), "22012");
    assert_eq!(s1.status(), TransactionStatus::Failed);
    // Row 2 (locked after the savepoint) is free, row 1 is not.
    assert_eq!(
        ints(&mut s2, "SELECT id FROM t WHERE id = 2 FOR UPDATE NOWAIT"),
        [2]
    );
    assert_eq!(
        code(&mut s2, "SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT"),
        "55P03"
    );
    assert_eq!(code(&mut s1, "SELECT 1"), "25P02");
    // ROLLBACK TO still takes the block back; the first lock is still the block's.
    run(&mut s1, "ROLLBACK TO a");
    assert_eq!(ints(&mut s1, "SELECT v FROM t WHERE id = 1"), [10]);
    assert_eq!(
        code(&mut s2, "SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT"),
        "55P03"
    );
    run(&mut s1, "COMMIT");
    run(&mut s2, "UPDATE t SET v = 11 WHERE id = 1");
    assert_eq!(ints(&mut s2, "SELECT v FROM t WHERE id = 1"), [11]);
}

/// What an error undoes at once (as PostgreSQL's abort of the innermost subtransaction) is
/// all that was done since the newest savepoint, its DDL too: another session no longer
/// finds a view the failed part of the block made, may make its own, and a later ROLLBACK
/// TO does not take that one away.
#[test]
fn an_error_undoes_the_ddl_since_the_newest_savepoint() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut s1 = Session::new(catalog.clone(), "one");
    let mut s2 = Session::new(catalog, "two");
    run(&mut s1, "BEGIN");
    run(&mut s1, "CREATE VIEW kept AS SELECT 1 AS x");
    run(&mut s1, "SAVEPOINT a");
    run(&mut s1, "CREATE VIEW v AS SELECT 1 AS x");
    assert_eq!(code(&mut s1, "SELECT 1 / 0"), "22012");
    assert_eq!(code(&mut s2, "SELECT x FROM v"), "42P01");
    run(&mut s2, "CREATE VIEW v AS SELECT 2 AS x");
    run(&mut s1, "ROLLBACK TO a");
    assert_eq!(ints(&mut s1, "SELECT x FROM kept"), [1]);
    run(&mut s1, "COMMIT");
    assert_eq!(ints(&mut s2, "SELECT x FROM v"), [2]);
    assert_eq!(ints(&mut s2, "SELECT x FROM kept"), [1]);
}

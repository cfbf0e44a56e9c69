//! Isolation levels through SQL: the level BEGIN, SET TRANSACTION, SET SESSION
//! CHARACTERISTICS and default_transaction_isolation name is the level that runs, and
//! Hermitage's cases (github.com/ept/hermitage, its PostgreSQL outcomes) end as in PostgreSQL
//! at each level; SERIALIZABLE refuses write skew and phantoms.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, Value};

/// Three sessions on one database.
fn sessions(dir: &std::path::Path) -> (Session, Session, Session) {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut setup = Session::new(catalog.clone(), "setup");
    ok(
        &mut setup,
        "CREATE TABLE test (id int PRIMARY KEY, value int); \
         INSERT INTO test VALUES (1, 10), (2, 20)",
    );
    (
        Session::new(catalog.clone(), "t1"),
        Session::new(catalog, "t2"),
        setup,
    )
}

fn ok(session: &mut Session, sql: &str) {
    for outcome in session.execute_sql(sql) {
        outcome.unwrap_or_else(|error| panic!("{sql}: {error}"));
    }
}

fn rows(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(Outcome::Rows { rows, .. }) => rows,
        other => panic!("{sql}: {other:?}"),
    }
}

fn ints(session: &mut Session, sql: &str) -> Vec<i64> {
    rows(session, sql)
        .into_iter()
        .map(|row| match row[0] {
            Value::Int(v) => v,
            ref other => panic!("{sql}: {other:?}"),
        })
        .collect()
}

fn text(session: &mut Session, sql: &str) -> String {
    match &rows(session, sql)[0][0] {
        Value::Text(text) => text.clone(),
        other => panic!("{sql}: {other:?}"),
    }
}

/// The SQLSTATE of a statement that must fail.
fn code(session: &mut Session, sql: &str) -> &'static str {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(outcome) => panic!("{sql}: expected an error, got {outcome:?}"),
        Err(error) => error.code,
    }
}

/// COMMIT's outcome: Ok(tag) or the SQLSTATE.
fn commit(session: &mut Session) -> Result<String, &'static str> {
    match session.execute_sql("COMMIT").pop().unwrap() {
        Ok(Outcome::Command { tag }) => Ok(tag),
        Ok(other) => panic!("{other:?}"),
        Err(error) => Err(error.code),
    }
}

const LEVELS: [&str; 3] = ["READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"];

#[test]
fn the_level_set_is_the_level_used() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t1, mut t2, _) = sessions(dir.path());
    // SET TRANSACTION inside the block, as pgJDBC sends it.
    ok(&mut t1, "BEGIN");
    ok(&mut t1, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(
        text(&mut t1, "SHOW transaction_isolation"),
        "repeatable read"
    );
    assert_eq!(ints(&mut t1, "SELECT value FROM test WHERE id = 1"), [10]);
    ok(&mut t2, "UPDATE test SET value = 11 WHERE id = 1");
    assert_eq!(ints(&mut t1, "SELECT value FROM test WHERE id = 1"), [10]);
    // Too late to change it now.
    assert_eq!(
        code(&mut t1, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        "25001"
    );
    ok(&mut t1, "ROLLBACK");
    assert_eq!(
        text(&mut t1, "SHOW transaction_isolation"),
        "read committed"
    );

    // The session's default, both ways of setting it.
    ok(
        &mut t1,
        "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    );
    assert_eq!(
        text(&mut t1, "SHOW default_transaction_isolation"),
        "repeatable read"
    );
    ok(&mut t1, "BEGIN");
    assert_eq!(ints(&mut t1, "SELECT value FROM test WHERE id = 1"), [11]);
    ok(&mut t2, "UPDATE test SET value = 12 WHERE id = 1");
    assert_eq!(ints(&mut t1, "SELECT value FROM test WHERE id = 1"), [11]);
    ok(&mut t1, "COMMIT");
    ok(
        &mut t1,
        "SET default_transaction_isolation = 'read committed'",
    );
    ok(&mut t1, "BEGIN");
    assert_eq!(ints(&mut t1, "SELECT value FROM test WHERE id = 1"), [12]);
    ok(&mut t2, "UPDATE test SET value = 13 WHERE id = 1");
    assert_eq!(ints(&mut t1, "SELECT value FROM test WHERE id = 1"), [13]);
    ok(&mut t1, "COMMIT");
    assert_eq!(
        code(&mut t1, "SET default_transaction_isolation = 'sometimes'"),
        "22023"
    );
    ok(
        &mut t1,
        "SET default_transaction_isolation TO 'serializable'",
    );
    ok(&mut t1, "BEGIN");
    assert_eq!(text(&mut t1, "SHOW transaction_isolation"), "serializable");
    ok(&mut t1, "COMMIT");
    // BEGIN names its own level over the default.
    ok(&mut t1, "BEGIN ISOLATION LEVEL READ COMMITTED");
    assert_eq!(
        text(&mut t1, "SHOW transaction_isolation"),
        "read committed"
    );
    ok(&mut t1, "COMMIT");
}

/// Hermitage G2-item (write skew): each reads both rows and updates one. PostgreSQL commits
/// both at READ COMMITTED and REPEATABLE READ; SERIALIZABLE fails the second commit.
#[test]
fn write_skew_is_refused_only_at_serializable() {
    for level in LEVELS {
        let dir = tempfile::tempdir().unwrap();
        let (mut t1, mut t2, mut setup) = sessions(dir.path());
        ok(&mut t1, &format!("BEGIN ISOLATION LEVEL {level}"));
        ok(&mut t2, &format!("BEGIN ISOLATION LEVEL {level}"));
        assert_eq!(
            ints(&mut t1, "SELECT value FROM test WHERE id IN (1, 2)"),
            [10, 20]
        );
        assert_eq!(
            ints(&mut t2, "SELECT value FROM test WHERE id IN (1, 2)"),
            [10, 20]
        );
        ok(&mut t1, "UPDATE test SET value = 11 WHERE id = 1");
        ok(&mut t2, "UPDATE test SET value = 21 WHERE id = 2");
        assert_eq!(commit(&mut t1), Ok("COMMIT".into()), "{level}");
        let second = commit(&mut t2);
        let total: i64 = ints(&mut setup, "SELECT value FROM test").iter().sum();
        if level == "SERIALIZABLE" {
            assert_eq!(second, Err("40001"), "{level}");
            assert_eq!(total, 31);
        } else {
            assert_eq!(second, Ok("COMMIT".into()), "{level}");
            assert_eq!(total, 32);
        }
    }
}

/// Hermitage G-single (read skew): T1 reads row 1, T2 changes both rows and commits, T1 reads
/// row 2. READ COMMITTED sees the new row 2 (skew); REPEATABLE READ and SERIALIZABLE do not.
#[test]
fn read_skew_only_at_read_committed() {
    for level in LEVELS {
        let dir = tempfile::tempdir().unwrap();
        let (mut t1, mut t2, _) = sessions(dir.path());
        ok(&mut t1, &format!("BEGIN ISOLATION LEVEL {level}"));
        ok(&mut t2, &format!("BEGIN ISOLATION LEVEL {level}"));
        assert_eq!(ints(&mut t1, "SELECT value FROM test WHERE id = 1"), [10]);
        ok(&mut t2, "UPDATE test SET value = 12 WHERE id = 1");
        ok(&mut t2, "UPDATE test SET value = 18 WHERE id = 2");
        assert_eq!(commit(&mut t2), Ok("COMMIT".into()));
        let row2 = ints(&mut t1, "SELECT value FROM test WHERE id = 2");
        let expected = if level == "READ COMMITTED" { 18 } else { 20 };
        assert_eq!(row2, [expected], "{level}");
        // A read-only transaction never fails validation.
        assert_eq!(commit(&mut t1), Ok("COMMIT".into()), "{level}");
    }
}

/// A phantom (Hermitage PMP's write form): T1 sums a predicate's rows and writes the sum
/// elsewhere; T2 inserts a row matching the predicate and commits first. SERIALIZABLE fails
/// T1; REPEATABLE READ lets it commit a sum that misses the row.
#[test]
fn phantoms_fail_serializable_writers() {
    for level in &LEVELS[1..] {
        let dir = tempfile::tempdir().unwrap();
        let (mut t1, mut t2, mut setup) = sessions(dir.path());
        ok(
            &mut setup,
            "CREATE TABLE totals (name text PRIMARY KEY, total int)",
        );
        ok(&mut t1, &format!("BEGIN ISOLATION LEVEL {level}"));
        ok(&mut t2, &format!("BEGIN ISOLATION LEVEL {level}"));
        assert_eq!(
            ints(
                &mut t1,
                "SELECT sum(value) FROM test WHERE id BETWEEN 1 AND 10"
            ),
            [30]
        );
        ok(&mut t2, "INSERT INTO test VALUES (5, 50)");
        assert_eq!(commit(&mut t2), Ok("COMMIT".into()));
        ok(&mut t1, "INSERT INTO totals VALUES ('low', 30)");
        let first = commit(&mut t1);
        if *level == "SERIALIZABLE" {
            assert_eq!(first, Err("40001"));
            assert!(rows(&mut setup, "SELECT * FROM totals").is_empty());
        } else {
            assert_eq!(first, Ok("COMMIT".into()));
        }
    }
}

/// Hermitage G2 (anti-dependency cycle over predicates): each inserts a row after checking
/// that no matching row exists. At SERIALIZABLE one fails; the other levels keep both.
#[test]
fn predicate_anti_dependency_cycles_fail_serializable() {
    for level in LEVELS {
        let dir = tempfile::tempdir().unwrap();
        let (mut t1, mut t2, mut setup) = sessions(dir.path());
        ok(&mut t1, &format!("BEGIN ISOLATION LEVEL {level}"));
        ok(&mut t2, &format!("BEGIN ISOLATION LEVEL {level}"));
        assert!(rows(&mut t1, "SELECT * FROM test WHERE value % 3 = 0").is_empty());
        assert!(rows(&mut t2, "SELECT * FROM test WHERE value % 3 = 0").is_empty());
        ok(&mut t1, "INSERT INTO test VALUES (3, 30)");
        ok(&mut t2, "INSERT INTO test VALUES (4, 42)");
        assert_eq!(commit(&mut t1), Ok("COMMIT".into()));
        let second = commit(&mut t2);
        let count = ints(&mut setup, "SELECT count(*) FROM test")[0];
        if level == "SERIALIZABLE" {
            assert_eq!(second, Err("40001"), "{level}");
            assert_eq!(count, 3);
        } else {
            assert_eq!(second, Ok("COMMIT".into()), "{level}");
            assert_eq!(count, 4);
        }
    }
}

/// Serializable transactions that read and write disjoint rows by key both commit, and a
/// retry after 40001 succeeds.
#[test]
fn disjoint_serializable_writers_commit_and_retries_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut t1, mut t2, mut setup) = sessions(dir.path());
    ok(&mut setup, "INSERT INTO test VALUES (3, 30), (4, 40)");
    ok(&mut t1, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    ok(&mut t2, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    assert_eq!(ints(&mut t1, "SELECT value FROM test WHERE id = 1"), [10]);
    assert_eq!(ints(&mut t2, "SELECT value FROM test WHERE id = 3"), [30]);
    ok(&mut t1, "UPDATE test SET value = value + 1 WHERE id = 2");
    ok(&mut t2, "UPDATE test SET value = value + 1 WHERE id = 4");
    assert_eq!(commit(&mut t1), Ok("COMMIT".into()));
    assert_eq!(commit(&mut t2), Ok("COMMIT".into()));

    // Autocommit statements at SERIALIZABLE (the default here) run and retry by themselves.
    ok(
        &mut t1,
        "SET default_transaction_isolation = 'serializable'",
    );
    ok(&mut t1, "UPDATE test SET value = value + 100 WHERE id = 1");
    ok(&mut t2, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    assert_eq!(ints(&mut t2, "SELECT value FROM test WHERE id = 1"), [110]);
    ok(&mut t1, "UPDATE test SET value = value + 100 WHERE id = 1");
    ok(&mut t2, "UPDATE test SET value = 0 WHERE id = 2");
    assert_eq!(commit(&mut t2), Err("40001"));
    ok(&mut t2, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    assert_eq!(ints(&mut t2, "SELECT value FROM test WHERE id = 1"), [210]);
    ok(&mut t2, "UPDATE test SET value = 0 WHERE id = 2");
    assert_eq!(commit(&mut t2), Ok("COMMIT".into()));
}

//! CHECK and FOREIGN KEY constraints: the rows they refuse (23514, 23503) with PostgreSQL's
//! messages, the referential actions, ALTER TABLE ADD/DROP CONSTRAINT over existing rows,
//! DROP/TRUNCATE of a referenced table, persistence across a restart, and concurrent deletes
//! that never leave a referencing row without its referenced row.

use std::sync::Arc;
use std::time::Duration;

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, Value};

use crate::common;

fn catalog(dir: &std::path::Path) -> Arc<Catalog> {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    Catalog::open(db).unwrap()
}

fn ok(session: &mut Session, sql: &str) {
    for outcome in session.execute_sql(sql) {
        outcome.unwrap_or_else(|error| panic!("{sql}: {error}"));
    }
}

fn ints(session: &mut Session, sql: &str) -> Vec<Vec<Option<i64>>> {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(Outcome::Rows { rows, .. }) => rows
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|value| match value {
                        Value::Int(v) => Some(v),
                        Value::Null => None,
                        other => panic!("{sql}: {other:?}"),
                    })
                    .collect()
            })
            .collect(),
        other => panic!("{sql}: {other:?}"),
    }
}

/// The error of a statement that must fail: (SQLSTATE, message).
fn error(session: &mut Session, sql: &str) -> (&'static str, String) {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(outcome) => panic!("{sql}: expected an error, got {outcome:?}"),
        Err(error) => (error.code, error.message),
    }
}

#[test]
fn checks_refuse_rows_and_null_passes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(catalog(dir.path()), "t");
    ok(
        &mut s,
        "CREATE TABLE items (id int PRIMARY KEY, price int CHECK (price > 0), \
         discount int, CONSTRAINT sane CHECK (discount < price))",
    );
    ok(
        &mut s,
        "INSERT INTO items VALUES (1, 10, 5), (2, NULL, 7), (3, 4, NULL)",
    );
    assert_eq!(
        error(&mut s, "INSERT INTO items VALUES (4, 0, NULL)"),
        (
            "23514",
            "new row for relation \"items\" violates check constraint \"items_price_check\"".into()
        )
    );
    assert_eq!(
        error(&mut s, "UPDATE items SET discount = 20 WHERE id = 1"),
        (
            "23514",
            "new row for relation \"items\" violates check constraint \"sane\"".into()
        )
    );
    assert_eq!(
        ints(&mut s, "SELECT discount FROM items WHERE id = 1"),
        [[Some(5)]]
    );
    // Added over existing rows: checked first.
    let (code, message) = error(
        &mut s,
        "ALTER TABLE items ADD CONSTRAINT small CHECK (id < 3)",
    );
    assert_eq!(code, "23514");
    assert!(message.contains("is violated by some row"), "{message}");
    ok(&mut s, "ALTER TABLE items ADD CHECK (id < 100)");
    assert_eq!(
        error(&mut s, "INSERT INTO items VALUES (100, 1, 0)").0,
        "23514"
    );
    ok(&mut s, "ALTER TABLE items DROP CONSTRAINT items_id_check");
    ok(&mut s, "INSERT INTO items VALUES (100, 1, 0)");
    assert_eq!(
        error(&mut s, "ALTER TABLE items DROP CONSTRAINT nothing").0,
        "42704"
    );
    ok(
        &mut s,
        "ALTER TABLE items DROP CONSTRAINT IF EXISTS nothing",
    );
    // The constraints outlive a restart.
    drop(s);
    let mut s = Session::new(catalog(dir.path()), "t");
    assert_eq!(
        error(&mut s, "INSERT INTO items VALUES (5, -1, NULL)").0,
        "23514"
    );
    assert_eq!(
        error(&mut s, "INSERT INTO items VALUES (6, 5, 6)").0,
        "23514"
    );
}

#[test]
fn foreign_keys_need_their_referenced_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(catalog(dir.path()), "t");
    ok(
        &mut s,
        "CREATE TABLE authors (id int PRIMARY KEY, email text UNIQUE); \
         CREATE TABLE books (id int PRIMARY KEY, author int REFERENCES authors, \
         editor text REFERENCES authors (email))",
    );
    let (code, message) = error(&mut s, "INSERT INTO books VALUES (1, 7, NULL)");
    assert_eq!(code, "23503");
    assert_eq!(
        message,
        "insert or update on table \"books\" violates foreign key constraint \"books_author_fkey\""
    );
    ok(&mut s, "INSERT INTO books VALUES (1, NULL, NULL)"); // NULL references nothing
    ok(&mut s, "INSERT INTO authors VALUES (7, 'a@x'), (8, 'b@x')");
    ok(&mut s, "INSERT INTO books VALUES (2, 7, 'b@x')");
    assert_eq!(
        error(&mut s, "INSERT INTO books VALUES (3, 8, 'c@x')").1,
        "insert or update on table \"books\" violates foreign key constraint \"books_editor_fkey\""
    );
    assert_eq!(
        error(&mut s, "UPDATE books SET author = 9 WHERE id = 2").0,
        "23503"
    );
    // NO ACTION (the default): the referenced row stays while referenced.
    let (code, message) = error(&mut s, "DELETE FROM authors WHERE id = 7");
    assert_eq!(code, "23503");
    assert_eq!(
        message,
        "update or delete on table \"authors\" violates foreign key constraint \
         \"books_author_fkey\" on table \"books\""
    );
    assert_eq!(
        error(&mut s, "UPDATE authors SET email = 'z' WHERE id = 8").0,
        "23503"
    );
    ok(&mut s, "UPDATE authors SET email = 'z' WHERE id = 7"); // not referenced
    ok(&mut s, "DELETE FROM books WHERE id = 2");
    ok(&mut s, "DELETE FROM authors WHERE id = 7");
    // A key on columns that are not unique is refused.
    assert_eq!(
        error(&mut s, "CREATE TABLE bad (x int REFERENCES books (author))").0,
        "42830"
    );
    // Within a block, the row inserted earlier counts; a self-reference works.
    ok(
        &mut s,
        "CREATE TABLE tree (id int PRIMARY KEY, parent int REFERENCES tree (id))",
    );
    ok(
        &mut s,
        "BEGIN; INSERT INTO tree VALUES (1, NULL); INSERT INTO tree VALUES (2, 1); COMMIT",
    );
    assert_eq!(error(&mut s, "INSERT INTO tree VALUES (3, 4)").0, "23503");
    ok(&mut s, "INSERT INTO tree VALUES (4, 4)");
}

#[test]
fn referential_actions_cascade_set_null_and_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(catalog(dir.path()), "t");
    ok(
        &mut s,
        "CREATE TABLE a (id int PRIMARY KEY); \
         CREATE TABLE b (id int PRIMARY KEY, a_id int REFERENCES a ON DELETE CASCADE ON UPDATE CASCADE); \
         CREATE TABLE c (id int PRIMARY KEY, b_id int, \
            FOREIGN KEY (b_id) REFERENCES b (id) ON DELETE CASCADE); \
         CREATE TABLE d (id int PRIMARY KEY, a_id int DEFAULT 0 REFERENCES a ON DELETE SET DEFAULT, \
            b_id int REFERENCES b ON DELETE SET NULL)",
    );
    ok(
        &mut s,
        "INSERT INTO a VALUES (0), (1), (2); \
         INSERT INTO b VALUES (10, 1), (11, 1), (12, 2); \
         INSERT INTO c VALUES (100, 10), (101, 11), (102, 12); \
         INSERT INTO d VALUES (1000, 1, 10), (1001, 2, 12)",
    );
    // Deleting a=1 cascades to b 10 and 11, then to c 100 and 101; d's rows of them get
    // their defaults and NULLs.
    ok(&mut s, "DELETE FROM a WHERE id = 1");
    assert_eq!(ints(&mut s, "SELECT id FROM b ORDER BY id"), [[Some(12)]]);
    assert_eq!(ints(&mut s, "SELECT id FROM c ORDER BY id"), [[Some(102)]]);
    assert_eq!(
        ints(&mut s, "SELECT id, a_id, b_id FROM d ORDER BY id"),
        [[Some(1000), Some(0), None], [Some(1001), Some(2), Some(12)]]
    );
    // ON UPDATE CASCADE carries the new key to b; d's NO ACTION on update refuses.
    assert_eq!(error(&mut s, "UPDATE a SET id = 5 WHERE id = 2").0, "23503");
    ok(&mut s, "UPDATE d SET a_id = 0 WHERE id = 1001");
    ok(&mut s, "UPDATE a SET id = 5 WHERE id = 2");
    assert_eq!(
        ints(&mut s, "SELECT id, a_id FROM b"),
        [[Some(12), Some(5)]]
    );
    // SET DEFAULT to a value that references nothing fails.
    ok(&mut s, "DELETE FROM d WHERE id = 1000");
    ok(&mut s, "INSERT INTO d VALUES (1002, 5, NULL)");
    ok(&mut s, "DELETE FROM a WHERE id = 0");
    assert_eq!(error(&mut s, "DELETE FROM a WHERE id = 5").0, "23503");
}

#[test]
fn alter_drop_and_truncate_respect_references() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(catalog(dir.path()), "t");
    ok(
        &mut s,
        "CREATE TABLE p (id int PRIMARY KEY); CREATE TABLE q (id int PRIMARY KEY, p_id int); \
         INSERT INTO p VALUES (1); INSERT INTO q VALUES (1, 1), (2, 9)",
    );
    let (code, message) = error(
        &mut s,
        "ALTER TABLE q ADD CONSTRAINT q_p FOREIGN KEY (p_id) REFERENCES p (id)",
    );
    assert_eq!(
        (code, message.as_str()),
        (
            "23503",
            "insert or update on table \"q\" violates foreign key constraint \"q_p\""
        )
    );
    ok(&mut s, "DELETE FROM q WHERE id = 2");
    ok(
        &mut s,
        "ALTER TABLE q ADD CONSTRAINT q_p FOREIGN KEY (p_id) REFERENCES p (id)",
    );
    assert_eq!(error(&mut s, "INSERT INTO q VALUES (3, 9)").0, "23503");
    assert_eq!(error(&mut s, "TRUNCATE p").0, "0A000");
    ok(&mut s, "TRUNCATE p, q");
    ok(
        &mut s,
        "INSERT INTO p VALUES (1); INSERT INTO q VALUES (1, 1)",
    );
    let (code, message) = error(&mut s, "DROP TABLE p");
    assert_eq!(code, "2BP01");
    assert_eq!(
        message,
        "cannot drop table p because other objects depend on it"
    );
    // A rolled-back CASCADE keeps the key.
    ok(&mut s, "BEGIN; DROP TABLE p CASCADE; ROLLBACK");
    assert_eq!(error(&mut s, "INSERT INTO q VALUES (2, 9)").0, "23503");
    ok(&mut s, "DROP TABLE p CASCADE");
    ok(&mut s, "INSERT INTO q VALUES (2, 9)");
    assert_eq!(ints(&mut s, "SELECT count(*) FROM q"), [[Some(2)]]);
}

/// A foreign key no index leads with gets one of its own (as in InnoDB): queries selecting a
/// parent's rows and a parent's DELETE read it instead of scanning the table; no catalog view
/// lists it and no statement names it; it goes when its key goes or another index leads with
/// the key's columns, and is built for a key added to a table with rows.
#[test]
fn foreign_keys_get_an_index_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalog(dir.path());
    let mut s = Session::new(catalog.clone(), "t");
    ok(
        &mut s,
        "CREATE TABLE p (id int PRIMARY KEY); \
         CREATE TABLE c (id int PRIMARY KEY, pid int REFERENCES p, v int); \
         CREATE TABLE lines (pid int REFERENCES p, n int, PRIMARY KEY (pid, n)); \
         INSERT INTO p SELECT i FROM generate_series(1, 200) AS i; \
         INSERT INTO c SELECT i, i % 100 + 1, i FROM generate_series(1, 5000) AS i",
    );
    let by_parent = "SELECT id FROM c WHERE pid = 5";
    let plan = common::explain(&mut s, by_parent);
    assert!(
        plan.contains("Index Lookup on c using c_pid_fkey (the foreign key's index)"),
        "{plan}"
    );
    // The primary key leads with lines' key: no index of its own.
    let plan = common::explain(&mut s, "SELECT n FROM lines WHERE pid = 5");
    assert!(plan.contains("(primary key)"), "{plan}");
    let count = |s: &mut Session, pid: i64| {
        ints(s, &format!("SELECT count(*) FROM c WHERE pid = {pid}"))[0][0].unwrap()
    };
    assert_eq!(count(&mut s, 5), 50);
    // Kept by every write.
    ok(
        &mut s,
        "UPDATE c SET pid = 5 WHERE id <= 10; DELETE FROM c WHERE id = 4; \
         INSERT INTO c VALUES (6000, 5, 0)",
    );
    let expected = ints(&mut s, "SELECT count(*) FROM c WHERE pid + 0 = 5")[0][0].unwrap();
    assert_eq!(count(&mut s, 5), expected);
    assert_eq!(expected, 50 + 9 - 1 + 1);
    // Not a relation.
    for sql in [
        "SELECT count(*) FROM pg_class WHERE relname = 'c_pid_fkey'",
        "SELECT count(*) FROM pg_indexes WHERE tablename = 'c'",
    ] {
        let expected = if sql.contains("pg_indexes") { 1 } else { 0 };
        assert_eq!(ints(&mut s, sql), [[Some(expected)]], "{sql}");
    }
    assert_eq!(error(&mut s, "DROP INDEX c_pid_fkey").0, "42704");
    // A parent's DELETE finds its children through it, not by reading the whole table.
    let hits = |s: &mut Session, sql: &str| {
        let before = catalog.database().stats().buffer.hits;
        ok(s, sql);
        catalog.database().stats().buffer.hits - before
    };
    // (The fewest of five: background work may touch pages meanwhile.)
    let scan = hits(&mut s, "SELECT count(*) FROM c WHERE v + 0 = -1");
    let delete = (150..155)
        .map(|id| hits(&mut s, &format!("DELETE FROM p WHERE id = {id}")))
        .min()
        .unwrap();
    assert!(
        delete * 4 < scan,
        "{delete} page accesses for the delete, {scan} for a scan"
    );
    // Kept over a restart.
    drop(s);
    drop(catalog);
    let catalog = self::catalog(dir.path());
    let mut s = Session::new(catalog.clone(), "t");
    assert!(common::explain(&mut s, by_parent).contains("c_pid_fkey"));
    // A CREATE INDEX leading with the key's columns replaces it; its name is free.
    ok(&mut s, "CREATE INDEX c_pid_fkey ON c (pid, v)");
    let plan = common::explain(&mut s, by_parent);
    assert!(
        plan.contains("using c_pid_fkey") && !plan.contains("foreign key's index"),
        "{plan}"
    );
    assert_eq!(count(&mut s, 5), expected);
    // Dropping that index leaves the key without one, as in PostgreSQL.
    ok(&mut s, "DROP INDEX c_pid_fkey");
    assert!(common::explain(&mut s, by_parent).contains("Full Scan"));
    // A key added to a table with rows gets one, built from them; a rolled-back ADD leaves
    // none, DROP CONSTRAINT takes it.
    ok(&mut s, "ALTER TABLE c DROP CONSTRAINT c_pid_fkey");
    ok(
        &mut s,
        "BEGIN; ALTER TABLE c ADD CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p; ROLLBACK",
    );
    assert!(common::explain(&mut s, by_parent).contains("Full Scan"));
    ok(
        &mut s,
        "ALTER TABLE c ADD CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p",
    );
    let plan = common::explain(&mut s, by_parent);
    assert!(
        plan.contains("using c_p (the foreign key's index)"),
        "{plan}"
    );
    assert_eq!(count(&mut s, 5), expected);
    ok(&mut s, "ALTER TABLE c RENAME CONSTRAINT c_p TO c_parent");
    let plan = common::explain(&mut s, by_parent);
    assert!(
        plan.contains("using c_parent (the foreign key's index)"),
        "{plan}"
    );
    ok(&mut s, "ALTER TABLE c DROP CONSTRAINT c_parent");
    assert!(common::explain(&mut s, by_parent).contains("Full Scan"));
    // One index serves a key on (a) and one on (a, b); it stays while either needs it, and
    // the shorter key gets one of its own when that index goes with a column.
    ok(
        &mut s,
        "CREATE TABLE p2 (a int, b int, PRIMARY KEY (a, b)); \
         CREATE TABLE d (id int PRIMARY KEY, a int, b int, \
           CONSTRAINT d_a FOREIGN KEY (a) REFERENCES p, \
           CONSTRAINT d_ab FOREIGN KEY (a, b) REFERENCES p2); \
         INSERT INTO p2 VALUES (5, 1); INSERT INTO d VALUES (1, 5, 1), (2, 6, NULL)",
    );
    let by_a = "SELECT id FROM d WHERE a = 5";
    let plan = common::explain(&mut s, by_a);
    assert!(
        plan.contains("using d_ab (the foreign key's index)"),
        "{plan}"
    );
    ok(&mut s, "DROP TABLE p2 CASCADE");
    let plan = common::explain(&mut s, by_a);
    assert!(
        plan.contains("using d_ab (the foreign key's index)"),
        "{plan}"
    );
    ok(
        &mut s,
        "CREATE TABLE p3 (a int, b int, PRIMARY KEY (a, b)); INSERT INTO p3 VALUES (5, 1); \
         ALTER TABLE d ADD CONSTRAINT d_ab FOREIGN KEY (a, b) REFERENCES p3",
    );
    let plan = common::explain(&mut s, by_a);
    assert!(
        plan.contains("using d_ab (the foreign key's index)"),
        "{plan}"
    );
    ok(&mut s, "ALTER TABLE d DROP COLUMN b");
    let plan = common::explain(&mut s, by_a);
    assert!(
        plan.contains("using d_a (the foreign key's index)"),
        "{plan}"
    );
    assert_eq!(ints(&mut s, "SELECT id FROM d WHERE a = 5"), [[Some(1)]]);
}

/// A delete of a referenced row and an insert referencing it, in two transactions at once:
/// whichever commits first wins and the other fails with 23503, in both orders, at READ
/// COMMITTED and REPEATABLE READ. No referencing row is ever left without its row.
#[test]
fn concurrent_deletes_leave_no_orphans() {
    for level in ["READ COMMITTED", "REPEATABLE READ"] {
        for insert_first in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let catalog = catalog(dir.path());
            let mut a = Session::new(catalog.clone(), "a");
            let mut b = Session::new(catalog.clone(), "b");
            ok(
                &mut a,
                "CREATE TABLE p (id int PRIMARY KEY); \
                 CREATE TABLE c (id int PRIMARY KEY, p_id int REFERENCES p); \
                 INSERT INTO p VALUES (1)",
            );
            ok(&mut a, &format!("BEGIN ISOLATION LEVEL {level}"));
            ok(&mut b, &format!("BEGIN ISOLATION LEVEL {level}"));
            // Both snapshots see p = 1 and no child.
            assert_eq!(ints(&mut a, "SELECT count(*) FROM c"), [[Some(0)]]);
            assert_eq!(ints(&mut b, "SELECT count(*) FROM p"), [[Some(1)]]);
            let insert = "INSERT INTO c VALUES (1, 1)";
            let delete = "DELETE FROM p WHERE id = 1";
            let (mut first, mut second, first_sql, second_sql) = if insert_first {
                (a, b, insert, delete)
            } else {
                (b, a, delete, insert)
            };
            ok(&mut first, first_sql);
            // The second waits for the first's lock on p's row, in its own thread.
            let waiter = std::thread::spawn(move || {
                let result = second.execute_sql(second_sql).pop().unwrap();
                let code = result.err().map(|error| error.code);
                second.execute_sql("ROLLBACK");
                code
            });
            std::thread::sleep(Duration::from_millis(100));
            ok(&mut first, "COMMIT");
            let code = waiter.join().unwrap();
            assert_eq!(code, Some("23503"), "{level}, insert first: {insert_first}");
            let mut check = Session::new(catalog, "check");
            let orphans = ints(
                &mut check,
                "SELECT count(*) FROM c WHERE NOT EXISTS (SELECT 1 FROM p WHERE p.id = c.p_id)",
            );
            assert_eq!(orphans, [[Some(0)]], "{level}");
        }
    }
}

/// What drivers and ORMs read back: pg_constraint rows ('c', 'f' with conkey, confkey,
/// confrelid and the actions) and pg_get_constraintdef's text.
#[test]
fn pg_constraint_shows_checks_and_foreign_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(catalog(dir.path()), "t");
    ok(
        &mut s,
        "CREATE TABLE p (a int, b int, PRIMARY KEY (a, b)); \
         CREATE TABLE q (id int PRIMARY KEY CHECK (id > 0), x int, y int, \
         CONSTRAINT q_xy FOREIGN KEY (x, y) REFERENCES p (a, b) ON DELETE CASCADE)",
    );
    let rows = match s
        .execute_sql(
            "SELECT conname, contype, conkey, confkey, confdeltype, confupdtype, \
             confrelid = 'p'::regclass, pg_get_constraintdef(oid) FROM pg_constraint \
             WHERE conrelid = 'q'::regclass ORDER BY conname",
        )
        .pop()
        .unwrap()
        .unwrap()
    {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    };
    let text = |row: &[Value]| -> Vec<String> {
        row.iter()
            .map(|v| v.to_text().unwrap_or_else(|| "NULL".into()))
            .collect()
    };
    let rows: Vec<Vec<String>> = rows.iter().map(|row| text(row)).collect();
    assert_eq!(
        rows,
        [
            vec![
                "q_id_check",
                "c",
                "{1}",
                "NULL",
                " ",
                " ",
                "f",
                "CHECK ((id > 0))"
            ],
            vec![
                "q_pkey",
                "p",
                "{1}",
                "NULL",
                " ",
                " ",
                "f",
                "PRIMARY KEY (id)"
            ],
            vec![
                "q_xy",
                "f",
                "{2,3}",
                "{1,2}",
                "c",
                "a",
                "t",
                "FOREIGN KEY (x, y) REFERENCES p(a, b) ON DELETE CASCADE"
            ],
        ]
        .map(|row| row.into_iter().map(String::from).collect::<Vec<_>>())
    );
}

/// Rows referencing one row, inserted by two open transactions: the referenced row is
/// locked shared, so neither waits for the other (PostgreSQL's FOR KEY SHARE); a delete of
/// it then waits for both and fails.
#[test]
fn inserts_referencing_one_row_do_not_wait_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = catalog(dir.path());
    let mut a = Session::new(catalog.clone(), "a");
    let mut b = Session::new(catalog.clone(), "b");
    ok(
        &mut a,
        "CREATE TABLE p (id int PRIMARY KEY); \
         CREATE TABLE c (id int PRIMARY KEY, p_id int REFERENCES p); \
         INSERT INTO p VALUES (1)",
    );
    ok(&mut a, "BEGIN; INSERT INTO c VALUES (1, 1)");
    // In this same thread: a wait for a's lock would time out (55P03) instead of passing.
    ok(&mut b, "BEGIN; INSERT INTO c VALUES (2, 1)");
    let mut deleter = Session::new(catalog.clone(), "d");
    let waiter = std::thread::spawn(move || {
        let result = deleter
            .execute_sql("DELETE FROM p WHERE id = 1")
            .pop()
            .unwrap();
        result.err().map(|error| error.code)
    });
    std::thread::sleep(Duration::from_millis(50));
    ok(&mut a, "COMMIT");
    ok(&mut b, "COMMIT");
    assert_eq!(waiter.join().unwrap(), Some("23503"));
    assert_eq!(ints(&mut a, "SELECT count(*) FROM c"), [[Some(2)]]);
}

/// Foreign key checks happen at the end of the statement, and at COMMIT for deferred keys
/// (DEFERRABLE INITIALLY DEFERRED, SET CONSTRAINTS), as in PostgreSQL: a child may come
/// before its parent, a parent may go before its children, and a key still broken at the
/// check fails with 23503 (at COMMIT the block rolls back). Outputs as PostgreSQL 15 gives.
#[test]
fn foreign_key_checks_wait_for_the_statement_or_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(catalog(dir.path()), "t");
    ok(
        &mut s,
        "CREATE TABLE tree (id int PRIMARY KEY, parent int REFERENCES tree (id)); \
         CREATE TABLE parents (id int PRIMARY KEY); \
         CREATE TABLE later (id int PRIMARY KEY, p int REFERENCES parents \
         DEFERRABLE INITIALLY DEFERRED); \
         CREATE TABLE soon (id int PRIMARY KEY, p int, CONSTRAINT soon_p FOREIGN KEY (p) \
         REFERENCES parents DEFERRABLE); \
         CREATE TABLE strict (id int PRIMARY KEY, p int REFERENCES parents \
         ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED)",
    );
    // Within one statement: a child before its parent, a whole subtree deleted.
    ok(
        &mut s,
        "INSERT INTO tree VALUES (2, 1), (1, NULL), (3, NULL)",
    );
    ok(&mut s, "DELETE FROM tree WHERE id IN (1, 2)");
    assert_eq!(
        ints(&mut s, "SELECT id, parent FROM tree"),
        [[Some(3), None]]
    );
    assert_eq!(
        error(&mut s, "INSERT INTO tree VALUES (5, 6), (7, 5)").0,
        "23503"
    );
    // An immediate key is checked at the end of each statement, in a block too.
    ok(&mut s, "INSERT INTO parents VALUES (1)");
    ok(&mut s, "BEGIN");
    assert_eq!(error(&mut s, "INSERT INTO soon VALUES (1, 2)").0, "23503");
    ok(&mut s, "ROLLBACK");

    // INITIALLY DEFERRED: checked at COMMIT.
    ok(
        &mut s,
        "BEGIN; INSERT INTO later VALUES (1, 2); INSERT INTO parents VALUES (2); COMMIT",
    );
    ok(&mut s, "BEGIN; INSERT INTO later VALUES (2, 3)");
    let (code, message) = error(&mut s, "COMMIT");
    assert_eq!(code, "23503");
    assert_eq!(
        message,
        "insert or update on table \"later\" violates foreign key constraint \"later_p_fkey\""
    );
    // The block rolled back and the session goes on.
    assert_eq!(
        ints(&mut s, "SELECT id FROM later ORDER BY id"),
        [[Some(1)]]
    );
    // Outside a block a deferred key is checked at the statement's end (its commit).
    assert_eq!(error(&mut s, "INSERT INTO later VALUES (3, 9)").0, "23503");
    // NO ACTION deferred: the parent may go first, or come back.
    ok(
        &mut s,
        "BEGIN; DELETE FROM parents WHERE id = 2; DELETE FROM later WHERE p = 2; COMMIT",
    );
    ok(
        &mut s,
        "INSERT INTO parents VALUES (2); INSERT INTO later VALUES (2, 2); \
         BEGIN; DELETE FROM parents WHERE id = 2; INSERT INTO parents VALUES (2); COMMIT",
    );
    ok(&mut s, "BEGIN; DELETE FROM parents WHERE id = 2");
    let (code, message) = error(&mut s, "COMMIT");
    assert_eq!(code, "23503");
    assert_eq!(
        message,
        "update or delete on table \"parents\" violates foreign key constraint \
         \"later_p_fkey\" on table \"later\""
    );
    // RESTRICT is never deferred.
    ok(&mut s, "INSERT INTO strict VALUES (1, 1)");
    ok(&mut s, "BEGIN");
    assert_eq!(error(&mut s, "DELETE FROM parents WHERE id = 1").0, "23503");
    ok(&mut s, "ROLLBACK");

    // SET CONSTRAINTS: DEFERRED defers a DEFERRABLE key; IMMEDIATE checks what waits, at once.
    ok(
        &mut s,
        "BEGIN; SET CONSTRAINTS ALL DEFERRED; INSERT INTO soon VALUES (1, 7)",
    );
    assert_eq!(error(&mut s, "SET CONSTRAINTS ALL IMMEDIATE").0, "23503");
    ok(&mut s, "ROLLBACK");
    ok(
        &mut s,
        "BEGIN; SET CONSTRAINTS soon_p DEFERRED; INSERT INTO soon VALUES (1, 7); \
         INSERT INTO parents VALUES (7); SET CONSTRAINTS soon_p IMMEDIATE; COMMIT",
    );
    ok(&mut s, "BEGIN; SET CONSTRAINTS ALL IMMEDIATE");
    assert_eq!(error(&mut s, "INSERT INTO later VALUES (4, 8)").0, "23503");
    ok(&mut s, "ROLLBACK");
    // ROLLBACK TO a savepoint restores the modes and drops the checks after it.
    ok(
        &mut s,
        "BEGIN; SAVEPOINT a; SET CONSTRAINTS ALL DEFERRED; INSERT INTO soon VALUES (2, 8); \
         ROLLBACK TO a",
    );
    assert_eq!(error(&mut s, "INSERT INTO soon VALUES (3, 8)").0, "23503");
    ok(&mut s, "ROLLBACK");
    ok(
        &mut s,
        "BEGIN; INSERT INTO later VALUES (5, 8); SAVEPOINT b; INSERT INTO later VALUES (6, 9); \
         ROLLBACK TO b; INSERT INTO parents VALUES (8); COMMIT",
    );
    // Naming a key that cannot be deferred, or none.
    let (code, message) = error(&mut s, "BEGIN; SET CONSTRAINTS tree_parent_fkey DEFERRED");
    assert_eq!(
        (code, message.as_str()),
        ("42809", "constraint \"tree_parent_fkey\" is not deferrable")
    );
    ok(&mut s, "ROLLBACK");
    ok(
        &mut s,
        "BEGIN; SET CONSTRAINTS tree_parent_fkey, tree_pkey IMMEDIATE; COMMIT",
    );
    assert_eq!(
        error(&mut s, "SET CONSTRAINTS nothing IMMEDIATE").0,
        "42704"
    );
    assert_eq!(
        error(
            &mut s,
            "CREATE TABLE bad (p int REFERENCES parents NOT DEFERRABLE INITIALLY DEFERRED)"
        )
        .0,
        "42601"
    );

    // The catalog says so, after a restart too.
    drop(s);
    let mut s = Session::new(catalog(dir.path()), "t");
    let rows = match s
        .execute_sql(
            "SELECT conname, condeferrable, condeferred, pg_get_constraintdef(oid) \
             FROM pg_constraint WHERE contype = 'f' ORDER BY conname",
        )
        .pop()
        .unwrap()
        .unwrap()
    {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    };
    let rows: Vec<String> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| v.to_text().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    assert_eq!(
        rows,
        [
            "later_p_fkey|t|t|FOREIGN KEY (p) REFERENCES parents(id) DEFERRABLE INITIALLY DEFERRED",
            "soon_p|t|f|FOREIGN KEY (p) REFERENCES parents(id) DEFERRABLE",
            "strict_p_fkey|t|t|FOREIGN KEY (p) REFERENCES parents(id) ON DELETE RESTRICT DEFERRABLE INITIALLY DEFERRED",
            "tree_parent_fkey|f|f|FOREIGN KEY (parent) REFERENCES tree(id)",
        ]
    );
    assert_eq!(
        ints(&mut s, "SELECT id FROM later ORDER BY id"),
        [[Some(2)], [Some(5)]]
    );
}

/// Cases a review found, each as PostgreSQL 15 gives it: a ROLLBACK TO after SET CONSTRAINTS
/// ... IMMEDIATE ran a check brings the check back; a table renamed in the block keeps its
/// deferred checks; RESTRICT is checked at the statement's end (a self-referencing tree
/// deletes whole), never deferred; DEFERRABLE UNIQUE is refused, not ignored.
#[test]
fn deferred_checks_survive_savepoints_and_renames() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(catalog(dir.path()), "t");
    ok(
        &mut s,
        "CREATE TABLE parents (id int PRIMARY KEY); \
         CREATE TABLE later (id int PRIMARY KEY, p int REFERENCES parents \
         DEFERRABLE INITIALLY DEFERRED)",
    );
    ok(
        &mut s,
        "BEGIN; SET CONSTRAINTS ALL DEFERRED; INSERT INTO later VALUES (10, 50); SAVEPOINT s; \
         INSERT INTO parents VALUES (50); SET CONSTRAINTS ALL IMMEDIATE; ROLLBACK TO s",
    );
    assert_eq!(error(&mut s, "COMMIT").0, "23503");
    ok(
        &mut s,
        "BEGIN; INSERT INTO later VALUES (11, 51); ALTER TABLE later RENAME TO later2",
    );
    let (code, message) = error(&mut s, "COMMIT");
    assert_eq!(code, "23503");
    assert_eq!(
        message,
        "insert or update on table \"later2\" violates foreign key constraint \"later_p_fkey\""
    );
    assert_eq!(ints(&mut s, "SELECT count(*) FROM later"), [[Some(0)]]);
    // A rename rolled back to a savepoint before it: the check names the table again.
    ok(
        &mut s,
        "BEGIN; INSERT INTO later VALUES (12, 52); SAVEPOINT s; \
         ALTER TABLE later RENAME TO later3; ROLLBACK TO s",
    );
    assert_eq!(error(&mut s, "COMMIT").0, "23503");
    assert_eq!(ints(&mut s, "SELECT count(*) FROM later"), [[Some(0)]]);
    ok(
        &mut s,
        "CREATE TABLE rtree (id int PRIMARY KEY, p int REFERENCES rtree ON DELETE RESTRICT); \
         INSERT INTO rtree VALUES (1, NULL), (2, 1)",
    );
    assert_eq!(error(&mut s, "DELETE FROM rtree WHERE id = 1").0, "23503");
    ok(&mut s, "DELETE FROM rtree");
    assert_eq!(ints(&mut s, "SELECT count(*) FROM rtree"), [[Some(0)]]);
    for sql in [
        "CREATE TABLE du (a int UNIQUE DEFERRABLE)",
        "CREATE TABLE du (a int, PRIMARY KEY (a) DEFERRABLE INITIALLY DEFERRED)",
        "ALTER TABLE parents ADD CONSTRAINT u UNIQUE (id) DEFERRABLE",
    ] {
        assert_eq!(error(&mut s, sql).0, "0A000", "{sql}");
    }
}

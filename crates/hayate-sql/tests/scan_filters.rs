//! A scan's filter tried on each row while it is still in its page (a pure filter, and its
//! `column = constant` parts on the row's encoding) gives what evaluating it on the decoded
//! row gives: for every column type, NULLs, values equal but stored apart (-0 and 0, 1.0 and
//! 1.00, char padding), the transaction's own writes, older versions a snapshot sees and
//! errors. (A cancel of a scan whose filter refuses every row: hayate-server's
//! tests/cancel_auth.rs.)

use crate::common;

use common::{error_code, explain, open, rows, run};
use hayate_sql::{Catalog, DataType, Outcome, Session, Value};

/// The ids a WHERE clause selects; `random() < 2` (always true, not pure) keeps a filter from
/// being tried in the page, so `ids(s, w)` and `ids(s, &plain(w))` must agree.
fn ids(session: &mut Session, filter: &str) -> Vec<i64> {
    rows(
        session,
        &format!("SELECT id FROM t WHERE {filter} ORDER BY id"),
    )
    .into_iter()
    .map(|row| match row[0] {
        Value::Int(id) => id,
        ref other => panic!("{other:?}"),
    })
    .collect()
}

fn plain(filter: &str) -> String {
    format!("({filter}) AND random() < 2")
}

#[test]
fn filters_in_the_page_agree_with_filters_on_decoded_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut s) = open(dir.path());
    run(
        &mut s,
        "CREATE TABLE t (id int PRIMARY KEY, i int, b bigint, s text, v varchar(12), \
         c char(4), f float8, n numeric, ok bool, d date, ts timestamp, tz timestamptz, \
         u uuid, by bytea)",
    );
    // Enough rows for many leaves; every tenth column value NULL.
    run(
        &mut s,
        "INSERT INTO t SELECT g, \
           CASE WHEN g % 10 = 0 THEN NULL ELSE g % 7 END, \
           CASE WHEN g % 10 = 1 THEN NULL ELSE g % 5 - 2 END, \
           CASE WHEN g % 10 = 2 THEN NULL ELSE 'text ' || (g % 13) END, \
           CASE WHEN g % 10 = 3 THEN NULL ELSE 'v' || (g % 11) END, \
           CASE WHEN g % 10 = 4 THEN NULL ELSE 'c' || (g % 3) END, \
           CASE WHEN g % 10 = 5 THEN NULL WHEN g % 4 = 0 THEN -0.0::float8 \
                ELSE (g % 4)::float8 END, \
           CASE WHEN g % 10 = 6 THEN NULL WHEN g % 3 = 0 THEN 1.00 ELSE (g % 3)::numeric END, \
           CASE WHEN g % 10 = 7 THEN NULL ELSE g % 2 = 0 END, \
           CASE WHEN g % 10 = 8 THEN NULL ELSE date '2026-01-01' + g % 9 END, \
           timestamp '2026-01-01 00:00' + (g % 6) * interval '1 hour', \
           timestamptz '2026-01-01 00:00+00' + (g % 6) * interval '1 hour', \
           CASE WHEN g % 2 = 0 THEN 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid \
                ELSE 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12'::uuid END, \
           CASE WHEN g % 10 = 9 THEN NULL ELSE ('\\x0' || (g % 4))::bytea END \
         FROM generate_series(1, 3000) g",
    );
    let filters = [
        "i = 3",
        "3 = i",
        "i = 3 AND b = -1",
        "b = 2 AND i = 3 AND s = 'text 4'",
        "i::bigint = 6",
        "i = 3.0",
        "i = NULL",
        "s = 'text 12'",
        "s = 'TEXT 12'",
        "v = 'v10'",
        "v = 'v10' AND s = 'text 1'",
        "c = 'c1'",
        "c = 'c1  '",
        "f = 0",
        "f = -0.0",
        "n = 1",
        "n = 1.0",
        "ok = true",
        "ok",
        "d = '2026-01-05'",
        "ts = '2026-01-01 03:00'",
        "tz = '2026-01-01 03:00+00'",
        "u = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'",
        "by = '\\x03'",
        "i = 2 OR s = 'text 3'",
        "i > 4 AND v <> 'v3'",
        "length(s) = 6 AND i = 1",
        "i = 1 AND s LIKE 'text 1%'",
        "i IS NULL AND b = 0",
    ];
    for filter in filters {
        let fast = ids(&mut s, filter);
        let slow = ids(&mut s, &plain(filter));
        assert_eq!(fast, slow, "{filter}");
    }
    // Rows read by key from an index's entries are tried in their pages the same way.
    run(
        &mut s,
        "CREATE INDEX t_i ON t (i); CREATE INDEX t_v ON t (v)",
    );
    assert!(explain(&mut s, "SELECT id FROM t WHERE i = 3 AND s = 'text 4'").contains("t_i"));
    for filter in filters {
        let fast = ids(&mut s, filter);
        let slow = ids(&mut s, &plain(filter));
        assert_eq!(fast, slow, "{filter}, with indexes");
    }
    // Some of them select rows at all (the comparison is not of empty sets only).
    assert_eq!(ids(&mut s, "i = 3").len(), 386);
    assert!(!ids(&mut s, "f = -0.0").is_empty());
    assert!(!ids(&mut s, "n = 1.0").is_empty());
    assert!(!ids(&mut s, "u = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'").is_empty());
    assert!(!ids(&mut s, "c = 'c1  '").is_empty());
    assert!(!ids(&mut s, "by = '\\x03'").is_empty());
    // A parameter is a constant too.
    let statement = hayate_sql::parse("SELECT count(*) FROM t WHERE v = $1 AND i = $2")
        .unwrap()
        .pop()
        .unwrap();
    let prepared = s
        .prepare(statement, &[DataType::Text, DataType::Int4])
        .unwrap();
    let counted = match s
        .execute(&prepared, vec![Value::Text("v4".into()), Value::Int(5)])
        .unwrap()
    {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    };
    let expected = rows(
        &mut s,
        "SELECT count(*) FROM t WHERE v = 'v4' AND i = 5 AND random() < 2",
    );
    assert_eq!(counted, expected);
    assert_ne!(counted[0][0], Value::Int(0));
}

#[test]
fn own_writes_older_versions_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut s) = open(dir.path());
    run(
        &mut s,
        "CREATE TABLE t (id int PRIMARY KEY, k int, name text); \
         INSERT INTO t SELECT g, g % 100, 'n' || g FROM generate_series(1, 2000) g; \
         CREATE INDEX t_k ON t (k)",
    );
    assert!(explain(&mut s, "SELECT id FROM t WHERE k = 5 AND name = 'n5'").contains("t_k"));
    // The transaction's own writes: a row it changed is judged by its new value.
    run(
        &mut s,
        "BEGIN; UPDATE t SET k = 1000 WHERE id = 5; \
         INSERT INTO t VALUES (5000, 1000, 'new'); DELETE FROM t WHERE id = 105",
    );
    assert_eq!(ids(&mut s, "k = 1000"), [5, 5000]);
    assert_eq!(ids(&mut s, "k = 5"), ids(&mut s, &plain("k = 5")));
    assert!(!ids(&mut s, "k = 5").contains(&5));
    assert!(!ids(&mut s, "k = 5").contains(&105));
    run(&mut s, "ROLLBACK");
    assert_eq!(ids(&mut s, "k = 1000"), Vec::<i64>::new());
    assert_eq!(ids(&mut s, "k = 5").len(), 20);

    // A snapshot older than a committed change reads the version it sees.
    let catalog = Catalog::open(db).unwrap();
    let mut other = Session::new(catalog, "other");
    run(
        &mut s,
        "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM t",
    );
    run(
        &mut other,
        "UPDATE t SET k = 2000, name = 'moved' WHERE id = 7",
    );
    assert!(ids(&mut s, "k = 7").contains(&7));
    assert!(ids(&mut s, "name = 'n7'").contains(&7));
    assert!(ids(&mut s, "k = 7 AND name = 'n7'").contains(&7));
    assert!(ids(&mut s, "k = 7 AND name <> 'moved'").contains(&7));
    assert_eq!(ids(&mut s, "k = 2000"), Vec::<i64>::new());
    run(&mut s, "COMMIT");
    assert_eq!(ids(&mut s, "k = 2000"), [7]);
    assert_eq!(ids(&mut s, "name = 'moved'"), [7]);

    // An error of the filter on some row is still raised.
    assert_eq!(
        error_code(&mut s, "SELECT id FROM t WHERE 10 / (k - 3) = 1"),
        "22012"
    );
    // ... also where a `column = constant` part before it is NULL (not false: the AND goes
    // on), or goes through a cast that fails: the row's encoding does not decide those.
    run(&mut s, "UPDATE t SET name = NULL WHERE id = 9");
    assert_eq!(
        error_code(
            &mut s,
            "SELECT id FROM t WHERE name = 'x' AND 1 / (id - 9) = 1"
        ),
        "22012"
    );
    // (A column added later: rows written before it do not hold it.)
    run(&mut s, "ALTER TABLE t ADD COLUMN w int");
    assert_eq!(ids(&mut s, "w = 5"), Vec::<i64>::new());
    assert_eq!(ids(&mut s, "w IS NULL").len(), 2000);
    run(&mut s, "UPDATE t SET w = k WHERE id < 1000");
    run(&mut s, "UPDATE t SET w = 100000 WHERE id = 11");
    assert_eq!(
        error_code(&mut s, "SELECT id FROM t WHERE w::int2 = 5"),
        "22003"
    );
    assert_eq!(
        error_code(&mut s, "SELECT id FROM t WHERE w::numeric(2) = 5"),
        "22003"
    );
    assert_eq!(ids(&mut s, "w::int8 = 100000"), [11]);
    assert_eq!(ids(&mut s, "w = 5"), ids(&mut s, &plain("w = 5")));
    assert_eq!(ids(&mut s, "w = 5").len(), 10);
}

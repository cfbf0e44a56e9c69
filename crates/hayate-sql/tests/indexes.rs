//! Secondary indexes: results through an index equal those of a full scan on random data
//! (seeded, `HAYATE_TEST_SEED=S` reproduces), the access paths picked, unique violations,
//! and indexes that survive a restart and a crash.

use std::sync::Arc;

use hayate_engine::{Database, DatabaseConfig, SimConfig, SimIo};
use hayate_sql::plan::access::{IndexAccess, IndexLookup};
use hayate_sql::plan::Access;
use hayate_sql::{parse, Catalog, DataType, Outcome, Session, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common;
use common::{prepared_access, rows, run, try_run};

fn session_on(db: Database) -> Session {
    Session::new(Catalog::open(db).unwrap(), "tester")
}

fn index_point(access: &Access) -> Option<usize> {
    match access {
        Access::Index(IndexAccess {
            index,
            lookup: IndexLookup::Point(_),
            ..
        }) => Some(*index),
        _ => None,
    }
}

fn index_range(access: &Access) -> Option<usize> {
    match access {
        Access::Index(IndexAccess {
            index,
            lookup: IndexLookup::Range { .. },
            ..
        }) => Some(*index),
        _ => None,
    }
}

fn seed() -> u64 {
    std::env::var("HAYATE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen())
}

fn literal(value: &Option<i64>) -> String {
    value.map_or("NULL".into(), |v| v.to_string())
}

/// The same random rows and changes go to `t` (indexed) and `plain` (no index); every query
/// must return the same rows from both, and the indexed reads must use the index.
#[test]
fn index_reads_equal_full_scans_on_random_data() {
    let seed = seed();
    println!("HAYATE_TEST_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    for table in ["t", "plain"] {
        run(
            &mut session,
            &format!("CREATE TABLE {table} (id int4 PRIMARY KEY, k int4, s text, n int8)"),
        );
    }
    run(&mut session, "CREATE INDEX t_k ON t (k)");
    run(&mut session, "CREATE INDEX t_s_n ON t USING btree (s, n)");
    let words = ["", "a", "ab", "b", "b\u{e9}", "zz"];
    let mut next_id = 0;
    for step in 0..600 {
        let context = format!("seed {seed} step {step}");
        let k: Option<i64> = (rng.gen_range(0..8) > 0).then(|| rng.gen_range(-10..10));
        let s = words[rng.gen_range(0..words.len())];
        let n: Option<i64> = (rng.gen_range(0..5) > 0).then(|| rng.gen_range(0..4));
        let change = match rng.gen_range(0..10) {
            0..=4 => {
                next_id += 1;
                format!(
                    "INSERT INTO {{}} VALUES ({next_id}, {}, '{s}', {})",
                    literal(&k),
                    literal(&n)
                )
            }
            5..=6 => format!(
                "UPDATE {{}} SET k = {}, n = {} WHERE id % 7 = {}",
                literal(&k),
                literal(&n),
                rng.gen_range(0..7)
            ),
            7 => format!("UPDATE {{}} SET id = id + 1000 WHERE k = {}", literal(&k)),
            _ => format!("DELETE FROM {{}} WHERE s = '{s}' AND id % 3 = 0"),
        };
        for table in ["t", "plain"] {
            run(&mut session, &change.replace("{}", table));
        }
        if step % 20 != 19 {
            continue;
        }
        let a: i64 = rng.gen_range(-11..11);
        let b: i64 = rng.gen_range(-11..11);
        let queries = [
            (format!("k = {a}"), Some(0), true),
            (format!("k > {a} AND k <= {b}"), Some(0), false),
            (format!("k >= {a}"), Some(0), false),
            (format!("k < {b}"), Some(0), false),
            (
                format!("s = '{s}' AND n = {}", a.rem_euclid(4)),
                Some(1),
                true,
            ),
            (format!("s >= '{s}'"), Some(1), false),
            // An equal prefix of (s, n): every n, NULLs too, then a bound on n.
            (format!("s = '{s}'"), Some(1), false),
            (
                format!("s = '{s}' AND n > {}", a.rem_euclid(4)),
                Some(1),
                false,
            ),
            (
                format!("s = '{s}' AND n <= {}", b.rem_euclid(4)),
                Some(1),
                false,
            ),
            (format!("s < '{s}' AND k = {a}"), Some(0), true),
            ("k IS NULL".to_string(), None, false),
        ];
        for (predicate, index, point) in queries {
            let indexed = format!("SELECT id, k, s, n FROM t WHERE {predicate} ORDER BY id");
            let chosen = prepared_access(&session, &indexed, &[]);
            if let Some(index) = index {
                let used = if point {
                    index_point(&chosen)
                } else {
                    index_range(&chosen)
                };
                assert_eq!(used, Some(index), "{context}: {indexed} chose {chosen:?}");
            }
            let plain = indexed.replace("FROM t ", "FROM plain ");
            assert_eq!(
                rows(&mut session, &indexed),
                rows(&mut session, &plain),
                "{context}: {predicate}"
            );
        }
        // Every row is reachable through each index: counts by index equal the table's.
        let total = rows(&mut session, "SELECT count(*) FROM plain");
        let by_k = rows(
            &mut session,
            "SELECT count(*) FROM t WHERE k >= -100 OR k IS NULL",
        );
        assert_eq!(total, by_k, "{context}");
    }
}

/// Ids 1..=count whose `a` (id % 10) and `b` (id % 37) pass `keep`, as query results.
fn ids_where(count: i64, keep: impl Fn(i64, i64) -> bool) -> Vec<Vec<Value>> {
    (1..=count)
        .filter(|id| keep(id % 10, id % 37))
        .map(|id| vec![Value::Int(id)])
        .collect()
}

/// With conditions on two indexed columns, the keys one index finds are narrowed by the
/// other's entries before any row is read (an index AND): the plan says so, and the rows
/// are the right ones whether the narrowing range is read or is too long and skipped, with
/// the transaction's own writes in the range, and for a snapshot older than rows other
/// transactions changed since (their entries come through the versions' undo chains).
#[test]
fn a_second_index_narrows_the_keys_of_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = Session::new(catalog.clone(), "tester");
    let mut other = Session::new(catalog, "other");
    run(
        &mut session,
        "CREATE TABLE n (id int4 PRIMARY KEY, a int4, b int4)",
    );
    run(&mut session, "CREATE INDEX n_a ON n (a)");
    run(&mut session, "CREATE INDEX n_b ON n (b)");
    run(
        &mut session,
        "INSERT INTO n SELECT i, i % 10, i % 37 FROM generate_series(1, 3000) AS i",
    );
    let plan = common::explain(&mut session, "SELECT id FROM n WHERE a = 3 AND b = 5");
    assert!(plan.contains("using n_a narrowed by n_b"), "{plan}");
    let plan = common::explain(&mut session, "SELECT id FROM n WHERE b = 5 AND a < 4");
    assert!(plan.contains("using n_b narrowed by n_a"), "{plan}");
    type Expected = fn(i64, i64) -> bool;
    let queries: [(&str, Expected); 5] = [
        ("a = 3 AND b = 5", |a, b| a == 3 && b == 5),
        ("a = 3 AND b BETWEEN 5 AND 9", |a, b| {
            a == 3 && (5..=9).contains(&b)
        }),
        ("a = 3 AND b >= 0", |a, _| a == 3),
        ("b = 5 AND a < 4", |a, b| b == 5 && a < 4),
        ("a > 7 AND b > 30", |a, b| a > 7 && b > 30),
    ];
    for (predicate, keep) in queries {
        let sql = format!("SELECT id FROM n WHERE {predicate} ORDER BY id");
        assert_eq!(
            rows(&mut session, &sql),
            ids_where(3000, keep),
            "{predicate}"
        );
    }
    // This transaction's own writes in both ranges.
    run(&mut session, "BEGIN");
    run(&mut session, "UPDATE n SET b = 5 WHERE id IN (13, 23)");
    run(&mut session, "UPDATE n SET a = 4 WHERE id = 153");
    let mut expected = ids_where(3000, |a, b| a == 3 && b == 5);
    assert!(expected.contains(&vec![Value::Int(153)]));
    expected.retain(|row| row[0] != Value::Int(153));
    expected.extend([vec![Value::Int(13)], vec![Value::Int(23)]]);
    expected.sort_by_key(|row| row[0].to_text());
    let mut found = rows(&mut session, "SELECT id FROM n WHERE a = 3 AND b = 5");
    found.sort_by_key(|row| row[0].to_text());
    assert_eq!(found, expected);
    run(&mut session, "ROLLBACK");
    // A snapshot older than other transactions' changes to rows in both ranges.
    run(&mut session, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    let before = rows(
        &mut session,
        "SELECT id FROM n WHERE a = 3 AND b = 5 ORDER BY id",
    );
    assert_eq!(before, ids_where(3000, |a, b| a == 3 && b == 5));
    run(&mut other, "UPDATE n SET b = 6 WHERE a = 3 AND id % 2 = 0");
    run(&mut other, "UPDATE n SET a = 2 WHERE b = 5 AND id % 3 = 0");
    run(&mut other, "DELETE FROM n WHERE a = 3 AND id % 7 = 3");
    let again = rows(
        &mut session,
        "SELECT id FROM n WHERE a = 3 AND b = 5 ORDER BY id",
    );
    assert_eq!(again, before);
    run(&mut session, "COMMIT");
    let now = rows(
        &mut session,
        "SELECT id FROM n WHERE a = 3 AND b = 5 ORDER BY id",
    );
    let kept = |id: i64| id % 2 == 1 && id % 3 != 0 && id % 7 != 3;
    let expected = ids_where(3000, |a, b| a == 3 && b == 5);
    let expected: Vec<Vec<Value>> = (expected.into_iter())
        .filter(|row| matches!(row[0], Value::Int(id) if kept(id)))
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(now, expected);
    // An index created after a snapshot holds entries that snapshot cannot see: that
    // snapshot's reads are planned without it.
    run(
        &mut session,
        "CREATE TABLE m (id int4 PRIMARY KEY, a int4, b int4)",
    );
    run(&mut session, "CREATE INDEX m_a ON m (a)");
    run(
        &mut session,
        "INSERT INTO m SELECT i, i % 10, i % 37 FROM generate_series(1, 3000) AS i",
    );
    run(&mut session, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(
        rows(&mut session, "SELECT count(*) FROM m"),
        [[Value::Int(3000)]]
    );
    run(&mut other, "CREATE INDEX m_b ON m (b)");
    let plan = common::explain(&mut session, "SELECT id FROM m WHERE a = 3 AND b = 5");
    assert!(
        plan.contains("using m_a") && !plan.contains("m_b"),
        "{plan}"
    );
    let old = rows(
        &mut session,
        "SELECT id FROM m WHERE a = 3 AND b = 5 ORDER BY id",
    );
    assert_eq!(old, ids_where(3000, |a, b| a == 3 && b == 5));
    run(&mut session, "COMMIT");
}

/// A REPEATABLE READ transaction whose snapshot is older than an index (another session's
/// CREATE INDEX, or one its own block made) reads without it: the index has entries for the
/// rows' versions from its build on, and the older versions that snapshot sees would be
/// missed. Prepared statements are planned again for it, and again with the index after.
#[test]
fn an_index_newer_than_the_snapshot_is_not_read_through() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = Session::new(catalog.clone(), "tester");
    let mut other = Session::new(catalog.clone(), "other");
    run(
        &mut session,
        "CREATE TABLE r (id int4 PRIMARY KEY, a int4, pad text); CREATE TABLE clock (x int4); \
         INSERT INTO r SELECT i, i % 10, repeat('x', 400) FROM generate_series(1, 1000) AS i",
    );
    let count = |session: &mut Session, sql: &str| match &rows(session, sql)[0][0] {
        Value::Int(count) => *count,
        other => panic!("{other:?}"),
    };
    let by_a = "SELECT count(*) FROM r WHERE a = 3";
    run(
        &mut session,
        "PREPARE by_a (int4) AS SELECT count(*) FROM r WHERE a = $1",
    );
    // Another session's index, made after the snapshot and after rows it sees changed.
    run(&mut session, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(count(&mut session, "SELECT count(*) FROM clock"), 0);
    run(&mut other, "UPDATE r SET a = 100 WHERE id <= 50");
    run(&mut other, "CREATE INDEX r_a ON r (a)");
    let plan = common::explain(&mut session, by_a);
    assert!(
        plan.contains("Full Scan") && !plan.contains("r_a"),
        "{plan}"
    );
    assert_eq!(count(&mut session, by_a), 100);
    assert_eq!(count(&mut session, "EXECUTE by_a (3)"), 100);
    run(
        &mut session,
        "PREPARE in_block (int4) AS SELECT count(*) FROM r WHERE a = $1",
    );
    assert_eq!(count(&mut session, "EXECUTE in_block (3)"), 100);
    run(&mut session, "COMMIT");
    // A newer snapshot reads through it, the statements prepared in the block too.
    assert!(common::explain(&mut session, by_a).contains("using r_a"));
    assert_eq!(count(&mut session, by_a), 95);
    assert_eq!(count(&mut session, "EXECUTE by_a (3)"), 95);
    assert_eq!(count(&mut session, "EXECUTE in_block (3)"), 95);
    assert_eq!(count(&mut session, "EXECUTE in_block (100)"), 50);
    // (planned again with the index: one row's read touches a few pages, a scan all.)
    run(&mut session, "UPDATE r SET a = 999 WHERE id = 500");
    let hits = |session: &mut Session, sql: &str| {
        let before = catalog.database().stats().buffer.hits;
        assert_eq!(count(session, sql), 1);
        catalog.database().stats().buffer.hits - before
    };
    let scan = hits(&mut session, "SELECT count(*) FROM r WHERE a + 0 = 999");
    // (The fewest of three: background work may touch pages meanwhile.)
    let lookup = (0..3)
        .map(|_| hits(&mut session, "EXECUTE in_block (999)"))
        .min()
        .unwrap();
    assert!(
        lookup * 5 < scan,
        "{lookup} page accesses, {scan} for a scan"
    );
    // The block's own index, built after other sessions changed rows its snapshot sees.
    run(&mut session, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(count(&mut session, "SELECT count(*) FROM clock"), 0);
    run(
        &mut other,
        "UPDATE r SET a = 200 WHERE id BETWEEN 51 AND 100",
    );
    run(&mut session, "CREATE INDEX r_a_id ON r (a, id)");
    run(&mut session, "DROP INDEX r_a");
    let plan = common::explain(&mut session, by_a);
    assert!(plan.contains("Full Scan"), "{plan}");
    assert_eq!(count(&mut session, by_a), 95);
    run(&mut session, "COMMIT");
    assert!(common::explain(&mut session, by_a).contains("using r_a_id"));
    assert_eq!(count(&mut session, by_a), 90);
    // Another session's block made an index over its own uncommitted writes: nobody reads
    // through it until the block commits, nor then a snapshot taken before.
    run(&mut other, "BEGIN");
    run(
        &mut other,
        "UPDATE r SET a = 300 WHERE id BETWEEN 101 AND 150",
    );
    run(&mut other, "CREATE INDEX r_a_only ON r (a)");
    run(&mut other, "DROP INDEX r_a_id");
    assert!(common::explain(&mut session, by_a).contains("Full Scan"));
    assert_eq!(count(&mut session, by_a), 90);
    run(&mut session, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(count(&mut session, "SELECT count(*) FROM clock"), 0);
    run(&mut other, "COMMIT");
    assert!(common::explain(&mut session, by_a).contains("Full Scan"));
    assert_eq!(count(&mut session, by_a), 90);
    run(&mut session, "COMMIT");
    assert!(common::explain(&mut session, by_a).contains("using r_a_only"));
    assert_eq!(count(&mut session, by_a), 85);
}

/// TRUNCATE in a REPEATABLE READ block older than an index (or than rows) removes every
/// entry and row, not only those its snapshot sees: nothing is left to refuse a later
/// insert of a truncated key (23505), or to be found.
#[test]
fn truncate_in_an_older_snapshot_leaves_no_entries() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = Session::new(catalog.clone(), "tester");
    let mut other = Session::new(catalog, "other");
    run(
        &mut session,
        "CREATE TABLE u (id int4 PRIMARY KEY, x int4); CREATE TABLE clock (x int4); \
         INSERT INTO u SELECT i, i FROM generate_series(1, 100) AS i",
    );
    run(&mut session, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(
        rows(&mut session, "SELECT count(*) FROM clock"),
        [[Value::Int(0)]]
    );
    run(&mut other, "CREATE UNIQUE INDEX u_x ON u (x)");
    // (A DELETE and an UPDATE of the indexed column remove entries the index's build
    // wrote after the snapshot: no serialization failure either.)
    run(&mut session, "DELETE FROM u WHERE id = 3");
    run(&mut session, "UPDATE u SET x = 1000 WHERE id = 4");
    run(&mut session, "TRUNCATE u");
    run(&mut session, "COMMIT");
    assert_eq!(
        rows(&mut session, "SELECT count(*) FROM u"),
        [[Value::Int(0)]]
    );
    run(&mut session, "INSERT INTO u VALUES (1, 1), (2, 50)");
    assert_eq!(
        rows(&mut session, "SELECT id FROM u WHERE x = 50"),
        [[Value::Int(2)]]
    );
}

/// ORDER BY an index's columns reads the index in order, forward or backward, instead of
/// sorting (always on the chosen path; with a LIMIT instead of a full or equally narrow
/// scan): on random rows with NULLs, repeats, NaNs and signed zeros, every query returns
/// the rows a sort of the unindexed copy returns, and the plans have no Sort where the index
/// gives the order.
#[test]
fn order_by_an_index_reads_it_in_order_on_random_data() {
    // Rows as text: a NaN equals itself there.
    let texts = |rows: Vec<Vec<Value>>| -> Vec<Vec<Option<String>>> {
        rows.iter()
            .map(|row| row.iter().map(Value::to_text).collect())
            .collect()
    };
    let seed = seed();
    println!("HAYATE_TEST_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    for table in ["t", "plain"] {
        run(
            &mut session,
            &format!(
                "CREATE TABLE {table} (id int4 PRIMARY KEY, k int4, s text NOT NULL, n int8, \
                 u float8)"
            ),
        );
    }
    run(&mut session, "CREATE INDEX t_k ON t (k)");
    run(&mut session, "CREATE INDEX t_s_n ON t (s, n)");
    run(&mut session, "CREATE INDEX t_u ON t (u)");
    let words = ["", "a", "ab", "b", "b\u{e9}", "zz"];
    // 'Infinity' - 'Infinity' is a NaN with the sign bit set on x86.
    let floats = [
        "NULL",
        "'-Infinity'",
        "-1.5",
        "'-0'",
        "0",
        "2.5",
        "'Infinity'",
        "'NaN'",
        "'Infinity'::float8 - 'Infinity'::float8",
    ];
    let mut next_id = 0;
    for step in 0..400 {
        let context = format!("seed {seed} step {step}");
        let k: Option<i64> = (rng.gen_range(0..6) > 0).then(|| rng.gen_range(-10..10));
        let s = words[rng.gen_range(0..words.len())];
        let n: Option<i64> = (rng.gen_range(0..5) > 0).then(|| rng.gen_range(0..4));
        let u = floats[rng.gen_range(0..floats.len())];
        let change = match rng.gen_range(0..10) {
            0..=5 => {
                next_id += 1;
                format!(
                    "INSERT INTO {{}} VALUES ({next_id}, {}, '{s}', {}, {u})",
                    literal(&k),
                    literal(&n)
                )
            }
            6..=7 => format!(
                "UPDATE {{}} SET k = {}, u = {u} WHERE id % 5 = {}",
                literal(&k),
                rng.gen_range(0..5)
            ),
            _ => format!("DELETE FROM {{}} WHERE s = '{s}' AND id % 4 = 0"),
        };
        for table in ["t", "plain"] {
            run(&mut session, &change.replace("{}", table));
        }
        if step % 25 != 24 {
            continue;
        }
        let a: i64 = rng.gen_range(-11..11);
        let limit = rng.gen_range(1..12);
        // (query, the index gives its order)
        let queries = [
            (format!("SELECT k FROM {{}} ORDER BY k LIMIT {limit}"), true),
            (
                format!("SELECT id, k FROM {{}} ORDER BY k DESC, id DESC LIMIT {limit}"),
                true,
            ),
            (
                format!("SELECT id, k FROM {{}} ORDER BY k, id LIMIT {limit} OFFSET 2"),
                true,
            ),
            (
                format!("SELECT id, k FROM {{}} WHERE k > {a} ORDER BY k, id"),
                true,
            ),
            (
                format!("SELECT id, k FROM {{}} WHERE k <= {a} ORDER BY k DESC, id DESC"),
                true,
            ),
            (
                format!("SELECT id, n FROM {{}} WHERE s = '{s}' ORDER BY n DESC, id DESC LIMIT 4"),
                true,
            ),
            (
                format!(
                    "SELECT s, n, id FROM {{}} WHERE s >= '{s}' ORDER BY s, n, id LIMIT {limit}"
                ),
                true,
            ),
            (
                format!("SELECT id, u FROM {{}} ORDER BY u DESC, id DESC LIMIT {limit}"),
                true,
            ),
            (format!("SELECT u FROM {{}} ORDER BY u LIMIT {limit}"), true),
            (
                "SELECT id, k FROM {} ORDER BY k DESC, id DESC LIMIT 3 FOR UPDATE".to_string(),
                true,
            ),
            // NULLs where the index does not put them, a mixed direction, a column after
            // the index's that is not the key, no LIMIT over a full scan: sorted.
            (
                format!("SELECT k FROM {{}} ORDER BY k NULLS FIRST LIMIT {limit}"),
                false,
            ),
            (
                format!("SELECT s, n, id FROM {{}} ORDER BY s, n DESC, id LIMIT {limit}"),
                false,
            ),
            (
                format!("SELECT k, s, id FROM {{}} ORDER BY k, s, id LIMIT {limit}"),
                false,
            ),
            ("SELECT k, id FROM {} ORDER BY k, id".to_string(), false),
        ];
        for (query, ordered) in &queries {
            let indexed = query.replace("{}", "t");
            let plan = common::explain(&mut session, &indexed);
            assert_eq!(
                !plan.contains("Sort"),
                *ordered,
                "{context}: {indexed}\n{plan}"
            );
            assert_eq!(
                texts(rows(&mut session, &indexed)),
                texts(rows(&mut session, &query.replace("{}", "plain"))),
                "{context}: {indexed}\n{plan}"
            );
        }
        // Every NaN is the same key: an equality through the index finds them all.
        let nans = "SELECT count(*) FROM {} WHERE u = 'NaN'";
        assert_eq!(
            rows(&mut session, &nans.replace("{}", "t")),
            rows(&mut session, &nans.replace("{}", "plain")),
            "{context}: {nans}"
        );
        // A transaction's own writes come in the index's order too.
        run(&mut session, "BEGIN");
        for table in ["t", "plain"] {
            run(
                &mut session,
                &format!(
                    "INSERT INTO {table} VALUES ({}, -20, 'b', 1, NULL)",
                    next_id + 1
                ),
            );
            run(
                &mut session,
                &format!("UPDATE {table} SET k = 20 WHERE id % 3 = 1"),
            );
        }
        for (query, _) in &queries[..3] {
            assert_eq!(
                texts(rows(&mut session, &query.replace("{}", "t"))),
                texts(rows(&mut session, &query.replace("{}", "plain"))),
                "{context}: in a block: {query}"
            );
        }
        run(&mut session, "ROLLBACK");
    }
}

#[test]
fn point_queries_on_an_index_never_scan() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    run(
        &mut session,
        "CREATE TABLE sbtest1(id SERIAL, k INTEGER DEFAULT '0' NOT NULL, \
         c text DEFAULT '' NOT NULL, pad text DEFAULT '' NOT NULL, PRIMARY KEY (id))",
    );
    run(&mut session, "CREATE INDEX k_1 ON sbtest1(k)");
    for sql in [
        "SELECT c FROM sbtest1 WHERE k = $1",
        "SELECT c FROM sbtest1 WHERE k = $1 AND c = 'x'",
        "UPDATE sbtest1 SET c = 'y' WHERE k = $1",
        "DELETE FROM sbtest1 WHERE k = $1",
    ] {
        assert_eq!(
            index_point(&prepared_access(&session, sql, &[DataType::Int8])),
            Some(0),
            "{sql}"
        );
    }
    // The primary key still wins where it applies.
    assert!(matches!(
        prepared_access(
            &session,
            "SELECT c FROM sbtest1 WHERE id = $1 AND k = 3",
            &[]
        ),
        Access::Point(_)
    ));
    assert_eq!(
        index_range(&prepared_access(
            &session,
            "SELECT c FROM sbtest1 WHERE k BETWEEN 1 AND 5",
            &[]
        ))
        .or(index_range(&prepared_access(
            &session,
            "SELECT c FROM sbtest1 WHERE k >= 1 AND k <= 5",
            &[]
        ))),
        Some(0)
    );
    run(
        &mut session,
        "INSERT INTO sbtest1 (k, c) VALUES (5, 'five'), (7, 'seven'), (5, 'cinq')",
    );
    // An int8 parameter finds int4 index keys.
    let statement = parse("SELECT c FROM sbtest1 WHERE k = $1 ORDER BY id")
        .unwrap()
        .pop()
        .unwrap();
    let prepared = session.prepare(statement, &[DataType::Int8]).unwrap();
    let Outcome::Rows { rows: found, .. } =
        session.execute(&prepared, vec![Value::Int(5)]).unwrap()
    else {
        panic!("rows expected")
    };
    assert_eq!(
        found,
        vec![
            vec![Value::Text("five".into())],
            vec![Value::Text("cinq".into())]
        ]
    );
    assert_eq!(
        rows(&mut session, "SELECT c FROM sbtest1 WHERE k = 5.5"),
        Vec::<Vec<Value>>::new()
    );
}

/// TPC-C's customers by name: the index with three equal columns beats the primary key's two;
/// on a tie the primary key wins, and a bound after the equal columns breaks a tie.
#[test]
fn the_key_with_the_longest_equal_prefix_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    run(
        &mut session,
        "CREATE TABLE customer (w int4, d int4, id int4, last text, first text, \
         PRIMARY KEY (w, d, id))",
    );
    run(
        &mut session,
        "CREATE INDEX customer_name ON customer (w, d, last, first)",
    );
    let mut id = 0;
    for w in 1..=2 {
        for d in 1..=3 {
            for (last, first) in [
                ("ABLE", "'x'"),
                ("BAR", "'b'"),
                ("BAR", "NULL"),
                ("BAR", "'a'"),
            ] {
                id += 1;
                run(
                    &mut session,
                    &format!("INSERT INTO customer VALUES ({w}, {d}, {id}, '{last}', {first})"),
                );
            }
        }
    }
    let by_name = "SELECT id, first FROM customer WHERE w = $1 AND d = $2 AND last = $3";
    let types = [DataType::Int8, DataType::Int8, DataType::Text];
    assert_eq!(
        index_range(&prepared_access(&session, by_name, &types)),
        Some(0)
    );
    let explained = rows(
        &mut session,
        "EXPLAIN SELECT id FROM customer WHERE w = 2 AND d = 3 AND last = 'BAR' ORDER BY first",
    );
    assert!(
        format!("{explained:?}").contains("Index Range Scan on customer using customer_name"),
        "{explained:?}"
    );
    // Every BAR of district (2, 3), the NULL first name too, in PostgreSQL's order.
    assert_eq!(
        rows(
            &mut session,
            "SELECT id, first FROM customer WHERE w = 2 AND d = 3 AND last = 'BAR' ORDER BY first"
        ),
        vec![
            vec![Value::Int(24), Value::Text("a".into())],
            vec![Value::Int(22), Value::Text("b".into())],
            vec![Value::Int(23), Value::Null],
        ]
    );
    assert_eq!(
        rows(
            &mut session,
            "SELECT id FROM customer WHERE w = 1 AND d = 2 AND last = 'BAR' AND first > 'a'"
        ),
        vec![vec![Value::Int(6)]]
    );
    assert!(matches!(
        prepared_access(
            &session,
            "SELECT id FROM customer WHERE w = 1 AND d = 2",
            &[]
        ),
        Access::Range { .. }
    ));
    assert!(matches!(
        prepared_access(
            &session,
            "SELECT id FROM customer WHERE w = 1 AND d = 2 AND id > 3",
            &[]
        ),
        Access::Range { .. }
    ));
    let bounded = "SELECT id FROM customer WHERE w = 1 AND d = 2 AND last >= 'B'";
    assert_eq!(
        index_range(&prepared_access(&session, bounded, &[])),
        Some(0)
    );
    assert_eq!(
        rows(&mut session, &format!("{bounded} ORDER BY id")),
        vec![
            vec![Value::Int(6)],
            vec![Value::Int(7)],
            vec![Value::Int(8)]
        ]
    );
}

#[test]
fn unique_indexes_reject_duplicates_like_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    run(
        &mut session,
        "CREATE TABLE u (id int4 PRIMARY KEY, email text, n int4)",
    );
    run(
        &mut session,
        "INSERT INTO u VALUES (1, 'a', 1), (2, 'b', 1), (3, NULL, 2), (4, NULL, 2)",
    );
    // Existing duplicates: the index is not created and the table is unchanged.
    let error = try_run(&mut session, "CREATE UNIQUE INDEX u_n ON u (n)").unwrap_err();
    assert_eq!(error.code, "23505");
    assert_eq!(error.message, "could not create unique index \"u_n\"");
    assert_eq!(error.detail.as_deref(), Some("Key (n)=(1) is duplicated."));
    assert_eq!(
        try_run(&mut session, "DROP INDEX u_n").unwrap_err().code,
        "42704"
    );
    run(
        &mut session,
        "CREATE UNIQUE INDEX IF NOT EXISTS u_email ON u (email)",
    );
    run(
        &mut session,
        "CREATE UNIQUE INDEX IF NOT EXISTS u_email ON u (email)",
    );
    assert_eq!(
        try_run(&mut session, "CREATE INDEX u_email ON u (n)")
            .unwrap_err()
            .code,
        "42P07"
    );
    let error = try_run(&mut session, "INSERT INTO u VALUES (5, 'a', 0)").unwrap_err();
    assert_eq!(error.code, "23505");
    assert_eq!(
        error.message,
        "duplicate key value violates unique constraint \"u_email\""
    );
    assert_eq!(
        error.detail.as_deref(),
        Some("Key (email)=(a) already exists.")
    );
    // NULLs never conflict; an update into a taken value does; freeing a value reuses it.
    run(&mut session, "INSERT INTO u VALUES (5, NULL, 0)");
    assert_eq!(
        try_run(&mut session, "UPDATE u SET email = 'b' WHERE id = 1")
            .unwrap_err()
            .code,
        "23505"
    );
    run(&mut session, "UPDATE u SET email = 'c' WHERE id = 2");
    run(&mut session, "UPDATE u SET email = 'b' WHERE id = 1");
    run(&mut session, "DELETE FROM u WHERE id = 2");
    run(&mut session, "INSERT INTO u VALUES (6, 'c', 0)");
    assert_eq!(
        rows(&mut session, "SELECT id FROM u WHERE email = 'c'"),
        vec![vec![Value::Int(6)]]
    );
    // A failed statement inside a block leaves no entry behind.
    run(&mut session, "BEGIN");
    run(&mut session, "INSERT INTO u VALUES (7, 'd', 0)");
    run(&mut session, "ROLLBACK");
    run(&mut session, "INSERT INTO u VALUES (8, 'd', 0)");
    run(&mut session, "DROP INDEX u_email");
    run(&mut session, "DROP INDEX IF EXISTS u_email");
    run(&mut session, "INSERT INTO u VALUES (9, 'd', 0)");
    // A UNIQUE constraint of CREATE TABLE is a unique index named as PostgreSQL names it.
    run(
        &mut session,
        "CREATE TABLE v (a int4 UNIQUE, b text, UNIQUE (b, a))",
    );
    run(&mut session, "INSERT INTO v VALUES (1, 'x')");
    let error = try_run(&mut session, "INSERT INTO v VALUES (1, 'y')").unwrap_err();
    assert_eq!(
        error.message,
        "duplicate key value violates unique constraint \"v_a_key\""
    );
}

fn indexed_rows(session: &mut Session) -> Vec<Vec<Value>> {
    let chosen = prepared_access(session, "SELECT id FROM r WHERE k = 3", &[]);
    assert_eq!(index_point(&chosen), Some(0), "{chosen:?}");
    rows(session, "SELECT id FROM r WHERE k = 3 ORDER BY id")
}

#[test]
fn indexes_survive_restart_and_crash() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut session =
            session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
        run(&mut session, "CREATE TABLE r (id int4 PRIMARY KEY, k int4)");
        run(&mut session, "INSERT INTO r VALUES (1, 3), (2, 4), (3, 3)");
        run(&mut session, "CREATE INDEX r_k ON r (k)");
        run(&mut session, "INSERT INTO r VALUES (4, 3)");
    }
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    let expected: Vec<Vec<Value>> = [1, 3, 4].iter().map(|v| vec![Value::Int(*v)]).collect();
    assert_eq!(indexed_rows(&mut session), expected);
    drop(session);

    // A power loss on a simulated disk: committed index entries and DDL come back.
    let io = Arc::new(SimIo::new(SimConfig::with_seed(11)));
    let db = Database::open_with_io(io.clone(), DatabaseConfig::default()).unwrap();
    let mut session = session_on(db);
    run(&mut session, "CREATE TABLE r (id int4 PRIMARY KEY, k int4)");
    run(&mut session, "INSERT INTO r VALUES (1, 3), (2, 4), (3, 3)");
    run(&mut session, "CREATE INDEX r_k ON r (k)");
    run(&mut session, "INSERT INTO r VALUES (4, 3)");
    run(&mut session, "CREATE INDEX r_gone ON r (k)");
    run(&mut session, "DROP INDEX r_gone");
    let image = Arc::new(io.crash());
    drop(session);
    let mut session = session_on(Database::open_with_io(image, DatabaseConfig::default()).unwrap());
    assert_eq!(indexed_rows(&mut session), expected);
    assert_eq!(
        try_run(&mut session, "DROP INDEX r_gone").unwrap_err().code,
        "42704"
    );
    run(&mut session, "UPDATE r SET k = 5 WHERE id = 1");
    assert_eq!(indexed_rows(&mut session), expected[1..].to_vec());
}

#[test]
fn descending_and_nulls_order_are_kept_as_written() {
    // PostgreSQL 15's pg_indexes and indoption for the same statements (checked there).
    let dir = tempfile::tempdir().unwrap();
    let create = [
        "CREATE TABLE ev (id int4 PRIMARY KEY, at int4, kind text)",
        "CREATE INDEX ev_at ON ev (at DESC)",
        "CREATE INDEX ev_at2 ON ev (at DESC NULLS LAST, kind)",
        "CREATE INDEX ev_kind ON ev (kind NULLS FIRST, at ASC NULLS LAST)",
        "CREATE UNIQUE INDEX ev_u ON ev (kind ASC, id DESC) WHERE kind IS NOT NULL",
        "INSERT INTO ev VALUES (1, 5, 'a'), (2, NULL, 'b'), (3, 7, NULL)",
    ];
    let expected = [
        (
            "ev_at",
            "CREATE INDEX ev_at ON public.ev USING btree (at DESC)",
            "3",
        ),
        (
            "ev_at2",
            "CREATE INDEX ev_at2 ON public.ev USING btree (at DESC NULLS LAST, kind)",
            "1 0",
        ),
        (
            "ev_kind",
            "CREATE INDEX ev_kind ON public.ev USING btree (kind NULLS FIRST, at)",
            "2 0",
        ),
        (
            "ev_pkey",
            "CREATE UNIQUE INDEX ev_pkey ON public.ev USING btree (id)",
            "0",
        ),
        (
            "ev_u",
            "CREATE UNIQUE INDEX ev_u ON public.ev USING btree (kind, id DESC) \
             WHERE (kind IS NOT NULL)",
            "0 3",
        ),
    ];
    let shown = |session: &mut Session| -> Vec<(String, String, String)> {
        rows(
            session,
            "SELECT i.indexname, i.indexdef, x.indoption::text FROM pg_indexes i \
             JOIN pg_class c ON c.relname = i.indexname JOIN pg_index x ON x.indexrelid = c.oid \
             WHERE i.tablename = 'ev' ORDER BY 1",
        )
        .into_iter()
        .map(|row| match &row[..] {
            [Value::Text(a), Value::Text(b), Value::Text(c)] => (a.clone(), b.clone(), c.clone()),
            other => panic!("{other:?}"),
        })
        .collect()
    };
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    {
        let mut session =
            session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
        for statement in create {
            run(&mut session, statement);
        }
        assert_eq!(shown(&mut session), expected);
    }
    // Kept in the catalog across a restart; the entries stay ascending, so every order reads
    // right through them.
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    assert_eq!(shown(&mut session), expected);
    let ids = |session: &mut Session, sql: &str| -> Vec<Value> {
        rows(session, sql)
            .into_iter()
            .map(|row| row[0].clone())
            .collect()
    };
    assert_eq!(
        ids(&mut session, "SELECT id FROM ev ORDER BY at DESC"),
        [Value::Int(2), Value::Int(3), Value::Int(1)]
    );
    assert_eq!(
        ids(
            &mut session,
            "SELECT id FROM ev ORDER BY at DESC NULLS LAST LIMIT 2"
        ),
        [Value::Int(3), Value::Int(1)]
    );
}

#[test]
fn create_index_writes_its_entries_in_key_order() {
    // Index values in an order unrelated to the rows' (as sysbench's k): entries written in
    // row order would split leaves in the middle and leave them about two thirds full.
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let mut session = session_on(db.clone());
    run(
        &mut session,
        "CREATE TABLE s (id int4 PRIMARY KEY, k int4, pad text)",
    );
    run(
        &mut session,
        "INSERT INTO s SELECT i, (i * 7919) % 100003, 'pad' FROM generate_series(1, 100000) AS g(i)",
    );
    run(&mut session, "CREATE INDEX s_k ON s (k)");
    // A rebuild (ADD COLUMN) builds its indexes the same way.
    run(&mut session, "CREATE UNIQUE INDEX s_pad_k ON s (pad, k)");
    run(
        &mut session,
        "ALTER TABLE s ADD COLUMN extra int4 DEFAULT 7",
    );
    let report = db.check().unwrap();
    for index in ["s_k", "s_pad_k"] {
        let (_, tree) = report
            .trees
            .iter()
            .find(|(name, _)| name.contains(&format!("index.{index}")))
            .unwrap_or_else(|| panic!("no tree for {index}: {:?}", report.trees));
        assert_eq!(tree.entries, 100_000);
        assert!(
            tree.leaf_fill() >= 0.85,
            "{index}: leaves {:.0}% full",
            tree.leaf_fill() * 100.0
        );
    }
    let got = rows(&mut session, "SELECT id FROM s WHERE k = 7919");
    assert_eq!(got, vec![vec![Value::Int(1)]]);
    // A unique index over repeated keys names the key, also for rows of the open block.
    run(&mut session, "BEGIN");
    run(&mut session, "CREATE TABLE b (id int4 PRIMARY KEY, v text)");
    run(
        &mut session,
        "INSERT INTO b VALUES (1, 'q'), (2, 'r'), (3, 'q')",
    );
    let error = try_run(&mut session, "CREATE UNIQUE INDEX b_v ON b (v)").unwrap_err();
    assert_eq!(error.code, "23505");
    assert_eq!(error.detail.as_deref(), Some("Key (v)=(q) is duplicated."));
}

/// Expression indexes (`lower(email)`, `(a + b)`, mixed with columns and a predicate) on
/// random data: a unique one refuses two rows whose expression is equal (23505, its DETAIL
/// naming the expression as PostgreSQL does), reads comparing an expression with a constant
/// go through its index and equal full scans of an unindexed copy, and the indexes survive
/// ALTER TABLE's rebuild, RENAME COLUMN and a restart; dropping a column an expression reads
/// drops the index.
#[test]
fn expression_indexes_hold_their_expressions_values() {
    let seed = seed();
    println!("HAYATE_TEST_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    for table in ["t", "plain"] {
        run(
            &mut session,
            &format!("CREATE TABLE {table} (id int4 PRIMARY KEY, email text, a int4, b int4)"),
        );
        run(
            &mut session,
            &format!("INSERT INTO {table} VALUES (0, 'Q', 1, 2), (-1, NULL, 3, NULL)"),
        );
    }
    // Built over existing rows, then kept up by every write.
    run(
        &mut session,
        "CREATE UNIQUE INDEX t_email ON t (lower(email))",
    );
    run(&mut session, "CREATE INDEX t_sum ON t ((a + b))");
    run(
        &mut session,
        "CREATE INDEX t_a_mod ON t (a, (b % 3)) WHERE a > 0",
    );
    let emails = ["'a'", "'A'", "'b'", "'B'", "'c'", "NULL"];
    let check = |session: &mut Session, context: &str, n: i64| {
        let email = emails[n.unsigned_abs() as usize % emails.len()];
        let queries = [
            (format!("lower(email) = lower({email})"), Some(0)),
            ("lower(email) >= 'b'".to_string(), Some(0)),
            (format!("a + b = {n}"), Some(1)),
            (format!("{n} < a + b AND a + b <= {}", n + 3), Some(1)),
            (format!("a = {n} AND b % 3 = 1 AND a > 0"), Some(2)),
            // Not the indexed expression: the table is scanned.
            (format!("upper(email) = upper({email})"), None),
            (format!("b + a = {n}"), None),
        ];
        for (predicate, index) in queries {
            let indexed = format!("SELECT id, email, a, b FROM t WHERE {predicate} ORDER BY id");
            let chosen = prepared_access(session, &indexed, &[]);
            let used = index_point(&chosen).or(index_range(&chosen));
            match index {
                Some(index) => assert_eq!(used, Some(index), "{context}: {indexed}: {chosen:?}"),
                None => assert_eq!(used, None, "{context}: {indexed}: {chosen:?}"),
            }
            let plain = indexed.replace("FROM t ", "FROM plain ");
            assert_eq!(
                rows(session, &indexed),
                rows(session, &plain),
                "{context}: {predicate}"
            );
        }
    };
    let mut next_id = 0;
    for step in 0..400 {
        let context = format!("seed {seed} step {step}");
        let email = emails[rng.gen_range(0..emails.len())];
        let a = rng.gen_range(-1..4);
        let b = match rng.gen_range(0..5) {
            0 => "NULL".to_string(),
            _ => rng.gen_range(-2..5).to_string(),
        };
        let change = match rng.gen_range(0..10) {
            0..=3 => {
                next_id += 1;
                format!("INSERT INTO {{}} VALUES ({next_id}, {email}, {a}, {b})")
            }
            4 => format!(
                "UPDATE {{}} SET email = {email} WHERE id % 7 = {}",
                rng.gen_range(0..7)
            ),
            5 => format!("UPDATE {{}} SET b = {b} WHERE a = {a}"),
            6 => format!(
                "UPDATE {{}} SET a = a + 1 WHERE id % 3 = {}",
                rng.gen_range(0..3)
            ),
            7 => format!("UPDATE {{}} SET id = id + 1000 WHERE a = {a}"),
            _ => format!("DELETE FROM {{}} WHERE a = {a} AND id % 2 = 0"),
        };
        // The unindexed copy tells whether the change leaves two rows with one lower(email).
        run(&mut session, "BEGIN");
        run(&mut session, &change.replace("{}", "plain"));
        let duplicated = !rows(
            &mut session,
            "SELECT lower(email) FROM plain WHERE email IS NOT NULL \
             GROUP BY lower(email) HAVING count(*) > 1",
        )
        .is_empty();
        run(&mut session, if duplicated { "ROLLBACK" } else { "COMMIT" });
        match try_run(&mut session, &change.replace("{}", "t")) {
            Ok(_) => assert!(!duplicated, "{context}: {change} was let through"),
            Err(error) => {
                assert!(duplicated, "{context}: {change}: {error:?}");
                assert_eq!(error.code, "23505", "{context}");
                assert!(
                    (error.detail.as_deref().unwrap_or_default())
                        .starts_with("Key (lower(email))=("),
                    "{context}: {error:?}"
                );
            }
        }
        if step == 200 {
            // ALTER TABLE rebuilds the table and its indexes.
            run(&mut session, "ALTER TABLE t ADD COLUMN extra int4");
            run(&mut session, "ALTER TABLE t DROP COLUMN extra");
        }
        if step % 20 == 19 {
            check(&mut session, &context, rng.gen_range(-1..6));
        }
    }
    drop(session);
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    check(&mut session, "after a restart", 2);
    assert_eq!(
        try_run(
            &mut session,
            "INSERT INTO t SELECT 5000, upper(email), 0, 0 FROM t WHERE email IS NOT NULL LIMIT 1"
        )
        .unwrap_err()
        .code,
        "23505"
    );
    // The definitions as PostgreSQL 15 writes them.
    let definitions = |session: &mut Session| -> Vec<Value> {
        rows(
            session,
            "SELECT indexdef FROM pg_indexes WHERE tablename = 't' AND indexname <> 't_pkey' \
             ORDER BY indexname",
        )
        .into_iter()
        .map(|row| row[0].clone())
        .collect()
    };
    let text = |s: &str| Value::Text(s.into());
    assert_eq!(
        definitions(&mut session),
        [
            text("CREATE INDEX t_a_mod ON public.t USING btree (a, ((b % 3))) WHERE (a > 0)"),
            text("CREATE UNIQUE INDEX t_email ON public.t USING btree (lower(email))"),
            text("CREATE INDEX t_sum ON public.t USING btree (((a + b)))"),
        ]
    );
    // A renamed column is renamed inside the expressions; a dropped one drops its indexes.
    run(&mut session, "ALTER TABLE t RENAME COLUMN email TO mail");
    run(&mut session, "ALTER TABLE t DROP COLUMN b");
    assert_eq!(
        definitions(&mut session),
        [text(
            "CREATE UNIQUE INDEX t_email ON public.t USING btree (lower(mail))"
        )]
    );
    let chosen = prepared_access(&session, "SELECT id FROM t WHERE lower(mail) = 'a'", &[]);
    assert_eq!(index_point(&chosen), Some(0), "{chosen:?}");
    // Its stored type would no longer be the expression's.
    assert_eq!(
        try_run(
            &mut session,
            "ALTER TABLE t ALTER COLUMN mail TYPE varchar(40)"
        )
        .unwrap_err()
        .code,
        "0A000"
    );
    // What PostgreSQL refuses.
    for (bad, code) in [
        ("CREATE INDEX bad ON t (random())", "42P17"),
        ("CREATE INDEX bad ON t ((a || now()::text))", "42P17"),
        ("CREATE INDEX bad ON t (count(*))", "42803"),
        ("CREATE INDEX bad ON t (lower(nosuch))", "42703"),
    ] {
        assert_eq!(try_run(&mut session, bad).unwrap_err().code, code, "{bad}");
    }
}

/// A comparison through a cast is a key lookup only when the cast keeps the column's values
/// exact and in order (an integer to a wider integer): `t::int = 5` finds '5' and '05',
/// `f::int >= 3` finds 2.6, as a scan does; an expression index's entry follows a change
/// SQL calls equal but the expression does not (1.5 to 1.50 as text).
#[test]
fn casts_that_change_equality_are_not_key_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    for statement in [
        "CREATE TABLE sc (id int4 PRIMARY KEY, t text, f float8, n int4)",
        "CREATE INDEX sc_t ON sc (t)",
        "CREATE INDEX sc_f ON sc (f)",
        "CREATE INDEX sc_n ON sc (n)",
        "INSERT INTO sc VALUES (1, '5', 2.6, 7), (2, '05', 3.2, 8)",
        "CREATE TABLE sk (k text PRIMARY KEY)",
        "INSERT INTO sk VALUES ('7'), ('07')",
    ] {
        run(&mut session, statement);
    }
    let ids = |session: &mut Session, sql: &str| -> Vec<Value> {
        rows(session, sql)
            .into_iter()
            .map(|row| row[0].clone())
            .collect()
    };
    let both = [Value::Int(1), Value::Int(2)];
    assert_eq!(
        ids(
            &mut session,
            "SELECT id FROM sc WHERE t::int4 = 5 ORDER BY id"
        ),
        both
    );
    assert_eq!(
        ids(
            &mut session,
            "SELECT id FROM sc WHERE f::int4 >= 3 ORDER BY id"
        ),
        both
    );
    assert_eq!(
        ids(
            &mut session,
            "SELECT k FROM sk WHERE k::int4 = 7 ORDER BY k"
        ),
        [Value::Text("07".into()), Value::Text("7".into())]
    );
    assert_eq!(
        ids(
            &mut session,
            "SELECT sc.id FROM sc JOIN sk ON sk.k::int4 = sc.n ORDER BY 1"
        ),
        [Value::Int(1), Value::Int(1)]
    );
    // An integer widened stays a key lookup.
    let chosen = prepared_access(&session, "SELECT id FROM sc WHERE n::int8 = 7", &[]);
    assert_eq!(index_point(&chosen), Some(2), "{chosen:?}");
    let chosen = prepared_access(&session, "SELECT id FROM sc WHERE id::int8 = 1", &[]);
    assert!(matches!(chosen, Access::Point(_)), "{chosen:?}");

    run(
        &mut session,
        "CREATE TABLE nx (id int4 PRIMARY KEY, n numeric)",
    );
    run(&mut session, "CREATE INDEX nx_text ON nx ((n::text))");
    run(&mut session, "INSERT INTO nx VALUES (1, 1.5)");
    run(&mut session, "UPDATE nx SET n = 1.50 WHERE id = 1");
    assert_eq!(
        ids(&mut session, "SELECT id FROM nx WHERE n::text = '1.50'"),
        [Value::Int(1)]
    );
    assert!(ids(&mut session, "SELECT id FROM nx WHERE n::text = '1.5'").is_empty());
    run(&mut session, "DELETE FROM nx");
    assert!(ids(&mut session, "SELECT id FROM nx WHERE n::text >= '1'").is_empty());
}

/// Partial indexes (CREATE INDEX ... WHERE) on random data: a unique one holds only the rows
/// its predicate accepts (a duplicate among them is 23505, one outside them is not), reads
/// through them equal full scans of an unindexed copy, queries whose WHERE does not imply a
/// predicate never use its index, and the indexes survive ALTER TABLE's rebuild and a
/// restart; dropping a column the predicate reads drops the index, as in PostgreSQL.
#[test]
fn partial_indexes_hold_the_rows_their_predicate_accepts() {
    let seed = seed();
    println!("HAYATE_TEST_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    for table in ["t", "plain"] {
        run(
            &mut session,
            &format!("CREATE TABLE {table} (id int4 PRIMARY KEY, email text, live bool, n int4)"),
        );
    }
    run(
        &mut session,
        "INSERT INTO t VALUES (0, 'a', true, 1), (-1, 'a', false, 1)",
    );
    run(
        &mut session,
        "INSERT INTO plain VALUES (0, 'a', true, 1), (-1, 'a', false, 1)",
    );
    // Built over existing rows, then kept up by every write.
    run(
        &mut session,
        "CREATE UNIQUE INDEX t_live_email ON t (email) WHERE live",
    );
    run(
        &mut session,
        "CREATE INDEX t_positive ON t (n) WHERE n > 0 AND email IS NOT NULL",
    );
    let emails = ["'a'", "'b'", "'c'", "'d'", "NULL"];
    let check = |session: &mut Session, context: &str, a: i64| {
        let email = emails[a.unsigned_abs() as usize % 4];
        let queries = [
            (format!("email = {email} AND live"), Some(0)),
            ("live AND email >= 'b'".to_string(), Some(0)),
            (format!("n > 0 AND email IS NOT NULL AND n = {a}"), Some(1)),
            (format!("email = {email} AND n > 0 AND n < {a}"), Some(1)),
            // Not implied: n = 2 says nothing of n > 0 here, email = 'a' nothing of live.
            (format!("n = {a}"), None),
            (format!("email = {email}"), None),
        ];
        for (predicate, index) in queries {
            let indexed = format!("SELECT id, email, live, n FROM t WHERE {predicate} ORDER BY id");
            let chosen = prepared_access(session, &indexed, &[]);
            let used = index_point(&chosen).or(index_range(&chosen));
            match index {
                Some(index) => assert_eq!(used, Some(index), "{context}: {indexed}: {chosen:?}"),
                None => assert_eq!(used, None, "{context}: {indexed}: {chosen:?}"),
            }
            let plain = indexed.replace("FROM t ", "FROM plain ");
            assert_eq!(
                rows(session, &indexed),
                rows(session, &plain),
                "{context}: {predicate}"
            );
        }
    };
    let mut next_id = 0;
    for step in 0..400 {
        let context = format!("seed {seed} step {step}");
        let email = emails[rng.gen_range(0..emails.len())];
        let live = rng.gen_bool(0.5);
        let n = rng.gen_range(-2..4);
        let change = match rng.gen_range(0..10) {
            0..=3 => {
                next_id += 1;
                format!("INSERT INTO {{}} VALUES ({next_id}, {email}, {live}, {n})")
            }
            4 => format!(
                "UPDATE {{}} SET live = {live} WHERE id % 5 = {}",
                rng.gen_range(0..5)
            ),
            5 => format!(
                "UPDATE {{}} SET email = {email} WHERE id % 7 = {}",
                rng.gen_range(0..7)
            ),
            6 => format!("UPDATE {{}} SET n = n - 1 WHERE n = {n}"),
            7 => format!("UPDATE {{}} SET id = id + 1000 WHERE n = {n}"),
            _ => format!("DELETE FROM {{}} WHERE email = {email} AND id % 3 = 0"),
        };
        // The unindexed copy tells whether the change leaves two live rows with one email.
        run(&mut session, "BEGIN");
        run(&mut session, &change.replace("{}", "plain"));
        let duplicated = !rows(
            &mut session,
            "SELECT email FROM plain WHERE live AND email IS NOT NULL \
             GROUP BY email HAVING count(*) > 1",
        )
        .is_empty();
        run(&mut session, if duplicated { "ROLLBACK" } else { "COMMIT" });
        match try_run(&mut session, &change.replace("{}", "t")) {
            Ok(_) => assert!(!duplicated, "{context}: {change} was let through"),
            Err(error) => {
                assert!(duplicated, "{context}: {change}: {error:?}");
                assert_eq!(error.code, "23505", "{context}");
            }
        }
        if step == 200 {
            // ALTER TABLE rebuilds the table and its indexes.
            run(&mut session, "ALTER TABLE t ADD COLUMN extra int4");
            run(&mut session, "ALTER TABLE t DROP COLUMN extra");
        }
        if step % 20 == 19 {
            check(&mut session, &context, rng.gen_range(-1..4));
        }
    }
    drop(session);
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    for a in -1..4 {
        check(&mut session, "after a restart", a);
    }
    assert_eq!(
        try_run(
            &mut session,
            "CREATE INDEX t_bad ON t (n) WHERE n > random()"
        )
        .unwrap_err()
        .code,
        "42P17"
    );
    run(&mut session, "ALTER TABLE t DROP COLUMN live");
    let left = rows(
        &mut session,
        "SELECT indexname FROM pg_indexes WHERE tablename = 't' ORDER BY indexname",
    );
    assert_eq!(
        left,
        vec![
            vec![Value::Text("t_pkey".into())],
            vec![Value::Text("t_positive".into())]
        ]
    );
}

/// What a partial index is not: a foreign key's referenced key (42830) or the index its
/// checks and cascades find child rows through (rows outside the predicate have no entry,
/// and are cascaded and checked all the same); a UNIQUE constraint in pg_constraint. Its
/// predicate may not depend on the session's time zone (42P17) nor name the table.
#[test]
fn partial_indexes_and_foreign_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    run(
        &mut session,
        "CREATE TABLE parent (id int4 PRIMARY KEY, code int4)",
    );
    run(
        &mut session,
        "CREATE UNIQUE INDEX parent_code_key ON parent (code) WHERE id > 0",
    );
    assert_eq!(
        try_run(
            &mut session,
            "CREATE TABLE bad (id int4 PRIMARY KEY, code int4 REFERENCES parent (code))"
        )
        .unwrap_err()
        .code,
        "42830"
    );
    let constraints = rows(
        &mut session,
        "SELECT count(*) FROM pg_constraint WHERE conname = 'parent_code_key'",
    );
    assert_eq!(constraints, vec![vec![Value::Int(0)]]);
    run(
        &mut session,
        "CREATE TABLE child (id int4 PRIMARY KEY, pid int4 REFERENCES parent ON DELETE CASCADE, \
         archived bool)",
    );
    run(
        &mut session,
        "CREATE INDEX child_live ON child (pid) WHERE NOT archived",
    );
    run(&mut session, "INSERT INTO parent VALUES (1, 10), (2, 20)");
    run(
        &mut session,
        "INSERT INTO child VALUES (1, 1, false), (2, 1, true), (3, 2, true)",
    );
    run(&mut session, "DELETE FROM parent WHERE id = 1");
    assert_eq!(
        rows(&mut session, "SELECT id FROM child ORDER BY id"),
        vec![vec![Value::Int(3)]]
    );
    run(&mut session, "CREATE TABLE strict_child (id int4 PRIMARY KEY, pid int4 REFERENCES parent, archived bool)");
    run(
        &mut session,
        "CREATE INDEX strict_live ON strict_child (pid) WHERE NOT archived",
    );
    run(&mut session, "INSERT INTO strict_child VALUES (1, 2, true)");
    assert_eq!(
        try_run(&mut session, "DELETE FROM parent WHERE id = 2")
            .unwrap_err()
            .code,
        "23503"
    );

    run(
        &mut session,
        "CREATE TABLE events (id int4 PRIMARY KEY, at timestamptz, deleted_at timestamptz)",
    );
    for predicate in [
        "at > '2026-01-01'",
        "at::date = '2026-01-01'",
        "date_trunc('day', at) = at",
    ] {
        let sql = format!("CREATE INDEX events_bad ON events (id) WHERE {predicate}");
        assert_eq!(
            try_run(&mut session, &sql).unwrap_err().code,
            "42P17",
            "{sql}"
        );
    }
    run(
        &mut session,
        "CREATE INDEX events_live ON events (at) WHERE deleted_at IS NULL",
    );
    assert!(try_run(
        &mut session,
        "CREATE INDEX events_named ON events (at) WHERE events.deleted_at IS NULL"
    )
    .is_err());
}

/// A DROP COLUMN keeps the CHECKs and partial indexes that name another column whose name
/// contains the dropped one's (`a` in `total`); a predicate whose constants are read in the
/// session's zone when bound (a literal cast through timestamptz) is refused (42P17).
#[test]
fn drop_column_keeps_what_names_other_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session_on(Database::open(dir.path(), DatabaseConfig::default()).unwrap());
    run(
        &mut session,
        "CREATE TABLE zt (id int4 PRIMARY KEY, d date, total int4 CHECK (total > 0), a int4)",
    );
    run(
        &mut session,
        "CREATE INDEX zt_total ON zt (id) WHERE total > 5",
    );
    // A NaN constant is the same in every zone.
    run(&mut session, "ALTER TABLE zt ADD COLUMN f float8");
    run(
        &mut session,
        "CREATE INDEX zt_f ON zt (id) WHERE f <> 'NaN'",
    );
    // Neither a literal 'a' nor a quoted "Total" names the dropped columns a and Total.
    run(
        &mut session,
        "ALTER TABLE zt ADD COLUMN k text CHECK (k IN ('a', 'b'))",
    );
    run(&mut session, "ALTER TABLE zt ADD COLUMN \"Total\" int4");
    run(&mut session, "ALTER TABLE zt DROP COLUMN \"Total\"");
    assert_eq!(
        try_run(
            &mut session,
            "CREATE INDEX zt_bad ON zt (id) WHERE d >= '2024-01-01 20:00+00'::timestamptz::date"
        )
        .unwrap_err()
        .code,
        "42P17"
    );
    run(&mut session, "ALTER TABLE zt DROP COLUMN a");
    assert_eq!(
        try_run(
            &mut session,
            "INSERT INTO zt VALUES (1, '2024-01-01', -1, 0, 'a')"
        )
        .unwrap_err()
        .code,
        "23514"
    );
    assert_eq!(
        try_run(
            &mut session,
            "INSERT INTO zt VALUES (1, '2024-01-01', 1, 0, 'z')"
        )
        .unwrap_err()
        .code,
        "23514"
    );
    let indexes = rows(
        &mut session,
        "SELECT indexname FROM pg_indexes WHERE tablename = 'zt' ORDER BY indexname",
    );
    assert_eq!(
        indexes,
        vec![
            vec![Value::Text("zt_f".into())],
            vec![Value::Text("zt_pkey".into())],
            vec![Value::Text("zt_total".into())]
        ]
    );
}

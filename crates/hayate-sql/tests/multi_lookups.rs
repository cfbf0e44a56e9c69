//! IN lists, ORs of key equalities and constants passed through join equalities: the planner
//! turns them into lookups (EXPLAIN checked), and the rows are those of the same query
//! evaluated by a full scan (the column hidden behind `+ 0`, which no access path reads).

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common;
use common::explain;

fn session(dir: &std::path::Path) -> Session {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    Session::new(catalog, "tester")
}

fn query(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let outcome = session.execute_sql(sql).pop().unwrap();
    match outcome.unwrap_or_else(|error| panic!("{sql}: {error}")) {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

fn load(session: &mut Session) {
    for sql in [
        "CREATE TABLE s (w int4, i int4, q int4, name text, PRIMARY KEY (w, i))",
        "CREATE INDEX s_name ON s (w, name)",
        "CREATE TABLE wh (w_id int4 PRIMARY KEY, tax int4)",
        "INSERT INTO s SELECT w, i, (w * 7 + i * 13) % 100, 'n' || (i % 17) \
         FROM generate_series(1, 3) w, generate_series(1, 400) i",
        "INSERT INTO wh SELECT g, g * 10 FROM generate_series(1, 3) g",
    ] {
        query_ok(session, sql);
    }
}

/// A database with the tables of `load`.
fn loaded() -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    load(&mut session);
    (dir, session)
}

fn query_ok(session: &mut Session, sql: &str) {
    session
        .execute_sql(sql)
        .into_iter()
        .for_each(|outcome| drop(outcome.unwrap_or_else(|error| panic!("{sql}: {error}"))));
}

/// A random IN list over `column`: duplicates, values outside the data and a NULL now and then.
fn in_list(rng: &mut StdRng, column: String, high: i64) -> String {
    let count = rng.gen_range(1..12);
    let values: Vec<String> = (0..count)
        .map(|_| match rng.gen_range(0..20) {
            0 => "NULL".to_string(),
            1 => (high + 5).to_string(),
            _ => rng.gen_range(1..=high).to_string(),
        })
        .collect();
    format!("{column} IN ({})", values.join(", "))
}

/// A random predicate of kind `round % 5` with the columns named by `c`.
fn predicate(rng: &mut StdRng, round: usize, c: &dyn Fn(&str) -> String) -> String {
    match round % 5 {
        0 => format!("{} = 2 AND {}", c("w"), in_list(rng, c("i"), 400)),
        1 => format!(
            "{} AND {}",
            in_list(rng, c("w"), 3),
            in_list(rng, c("i"), 400)
        ),
        2 => in_list(rng, c("w"), 4),
        3 => format!(
            "({} = {} AND {} = {}) OR ({} = {} AND {} >= {})",
            c("w"),
            rng.gen_range(1..=3),
            c("i"),
            rng.gen_range(1..=400),
            c("w"),
            rng.gen_range(1..=3),
            c("i"),
            rng.gen_range(1..=400)
        ),
        _ => format!(
            "{} AND {} = 'n{}'",
            in_list(rng, c("w"), 3),
            c("name"),
            rng.gen_range(0..17)
        ),
    }
}

#[test]
fn in_lists_and_ors_are_unions_of_lookups_with_the_scan_rows() {
    let (_dir, mut session) = loaded();
    let plan = explain(
        &mut session,
        "SELECT q FROM s WHERE w = 1 AND i IN (10, 20, 30)",
    );
    assert!(
        plan.contains("Union of 3 Reads: Point Lookup on s (primary key)"),
        "{plan}"
    );
    let plan = explain(
        &mut session,
        "SELECT q FROM s WHERE (w = 1 AND i = 5) OR (w = 2 AND i = 9)",
    );
    assert!(plan.contains("Union of 2 Reads: Point Lookup"), "{plan}");
    let plan = explain(&mut session, "SELECT q FROM s WHERE w IN (1, 3)");
    assert!(
        plan.contains("Union of 2 Reads: Range Scan on s (primary key)"),
        "{plan}"
    );
    let plan = explain(
        &mut session,
        "SELECT q FROM s WHERE w IN (1, 2) AND name = 'n3'",
    );
    assert!(
        plan.contains("Union of 2 Reads: Index Lookup on s"),
        "{plan}"
    );
    // A branch no key narrows leaves the whole OR to a scan.
    let plan = explain(&mut session, "SELECT q FROM s WHERE w = 1 OR q = 5");
    assert!(plan.contains("Full Scan on s"), "{plan}");

    let mut rng = StdRng::seed_from_u64(21);
    for round in 0..150 {
        let indexed = predicate(&mut rng.clone(), round, &|name| name.to_string());
        // The reference: every column read through an expression, so no path applies.
        let scan = predicate(&mut rng, round, &|name| match name {
            "name" => "(name || '')".to_string(),
            other => format!("({other} + 0)"),
        });
        let fast = query(
            &mut session,
            &format!("SELECT w, i, q FROM s WHERE {indexed} ORDER BY w, i"),
        );
        let slow = query(
            &mut session,
            &format!("SELECT w, i, q FROM s WHERE {scan} ORDER BY w, i"),
        );
        assert_eq!(fast, slow, "{indexed} against {scan}");
        let plan = explain(&mut session, &format!("SELECT q FROM s WHERE {scan}"));
        assert!(plan.contains("Full Scan"), "{scan}: {plan}");
        let plan = explain(&mut session, &format!("SELECT q FROM s WHERE {indexed}"));
        assert!(!plan.contains("Full Scan"), "{indexed}: {plan}");
        // Without ORDER BY the union still returns primary key order.
        let unordered = query(
            &mut session,
            &format!("SELECT w, i, q FROM s WHERE {indexed}"),
        );
        assert_eq!(unordered, fast, "{indexed} in key order");
    }
}

#[test]
fn constants_pass_through_join_equalities() {
    let (_dir, mut session) = loaded();
    // TPC-C kits' customer-and-warehouse read, the big table first.
    let sql = "SELECT q, tax FROM s, wh WHERE w_id = 2 AND w = w_id AND i = 77";
    let plan = explain(&mut session, sql);
    assert!(plan.contains("Point Lookup on s (primary key)"), "{plan}");
    assert!(!plan.contains("Full Scan"), "{plan}");
    let expected = query(
        &mut session,
        "SELECT q, tax FROM s, wh WHERE w_id = 2 AND w + 0 = w_id AND i = 77",
    );
    assert_eq!(expected.len(), 1);
    assert_eq!(query(&mut session, sql), expected);
    // Through an inner ON, and FOR UPDATE.
    let sql = "SELECT q FROM s JOIN wh ON w = w_id WHERE w_id = 3 AND i IN (1, 2) FOR UPDATE";
    let plan = explain(&mut session, sql);
    assert!(
        plan.contains("Union of 2 Reads: Point Lookup on s"),
        "{plan}"
    );
    assert_eq!(query(&mut session, sql).len(), 2);
    // A LEFT JOIN's ON passes nothing: the unmatched left rows stay.
    let rows = query(
        &mut session,
        "SELECT w_id, q FROM wh LEFT JOIN s ON w = w_id AND i = 5 AND w = 1 ORDER BY w_id",
    );
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1][1], Value::Null);
    // Contradicting constants in one class leave no row.
    let rows = query(
        &mut session,
        "SELECT q FROM s, wh WHERE w = w_id AND w_id = 1 AND w = 2 AND i = 3",
    );
    assert!(rows.is_empty());
    // In a correlated subquery, the outer value reaches the key through the equality.
    let rows = query(
        &mut session,
        "SELECT w_id, (SELECT q FROM s, wh AS inner_wh WHERE inner_wh.w_id = wh.w_id \
         AND w = inner_wh.w_id AND i = 10) FROM wh ORDER BY w_id",
    );
    let expected = query(&mut session, "SELECT w, q FROM s WHERE i = 10 ORDER BY w");
    assert_eq!(rows, expected);
}

/// A FROM list whose first table would be read whole while a later one has a point lookup
/// starts with the later one (the columns still come in the written order).
#[test]
fn a_narrow_table_written_second_is_read_first() {
    let (_dir, mut session) = loaded();
    let sql = "SELECT * FROM wh, s WHERE s.w = 1 AND s.i = 5 AND wh.w_id = s.q % 3 + 1";
    let plan = explain(&mut session, sql);
    assert!(!plan.contains("Full Scan"), "{plan}");
    assert!(plan.contains("Point Lookup on s"), "{plan}");
    // The same query with its keys hidden keeps the written order and scans.
    let hidden = "SELECT * FROM wh, s WHERE s.w + 0 = 1 AND s.i + 0 = 5 AND wh.w_id = s.q % 3 + 1";
    assert!(explain(&mut session, hidden).contains("Full Scan"));
    let rows = query(&mut session, sql);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows, query(&mut session, hidden));
    // wh's columns first, as written.
    assert_eq!(rows[0].len(), 6);
    assert_eq!(rows[0][2], Value::Int(1));
    assert_eq!(rows[0][3], Value::Int(5));
    // Three tables, the narrow one last; with a LEFT JOIN the order stays as written.
    let three = "SELECT wh.w_id, s.q, w2.tax FROM wh, wh AS w2, s \
                 WHERE s.w = 2 AND s.i = 7 AND wh.w_id = s.w AND w2.w_id = wh.w_id";
    let plan = explain(&mut session, three);
    assert!(!plan.contains("Full Scan"), "{plan}");
    let rows = query(&mut session, three);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][0], Value::Int(2));
    let left = "SELECT * FROM wh LEFT JOIN s ON s.w = wh.w_id AND s.i = 5 WHERE wh.w_id < 3";
    assert_eq!(query(&mut session, left).len(), 2);
    // A few rows from an index look their partners up by key instead of merging with a
    // scan of the whole other table.
    let lookup = "SELECT b.q FROM s AS a, s AS b WHERE a.w = 1 AND a.name = 'n3' \
                  AND b.w = a.w AND b.i = a.i";
    let plan = explain(&mut session, lookup);
    assert!(plan.contains("Index Nested Loop"), "{plan}");
    assert!(!plan.contains("Full Scan"), "{plan}");
    let expected = query(
        &mut session,
        "SELECT q FROM s WHERE w = 1 AND name = 'n3' ORDER BY i",
    );
    assert_eq!(query(&mut session, lookup), expected);
}

/// A union reads each distinct lookup once: an IN list that repeats its values (BenchBase's
/// twitter pads `uid IN (...)` to 20 parameters with the last one) costs the page accesses
/// of its distinct values, on an index and on the primary key, and gives the same rows.
#[test]
fn repeated_in_list_values_are_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = Session::new(catalog.clone(), "tester");
    query_ok(
        &mut session,
        "CREATE TABLE tw (id int4 PRIMARY KEY, uid int4, body text)",
    );
    query_ok(&mut session, "CREATE INDEX tw_uid ON tw (uid)");
    query_ok(
        &mut session,
        "INSERT INTO tw SELECT i, i % 500, repeat('x', 200) FROM generate_series(1, 5000) i",
    );
    // The fewest page accesses of three reads: background work may touch pages meanwhile.
    let mut read = |sql: &str| {
        let mut fewest = u64::MAX;
        let mut rows = Vec::new();
        for _ in 0..3 {
            let before = catalog.database().stats().buffer.hits;
            rows = query(&mut session, sql);
            fewest = fewest.min(catalog.database().stats().buffer.hits - before);
        }
        (rows, fewest)
    };
    let padded = |values: &str, last: &str| format!("{values}{}", format!(", {last}").repeat(18));
    for (column, values, last) in [("uid", "7, 9", "9"), ("id", "7, 9", "9")] {
        let sql = |list: &str| format!("SELECT id FROM tw WHERE {column} IN ({list}) ORDER BY id");
        let (rows, hits) = read(&sql(values));
        let (padded_rows, padded_hits) = read(&sql(&padded(values, last)));
        assert!(!rows.is_empty());
        assert_eq!(padded_rows, rows, "{column}");
        assert!(
            padded_hits < hits * 2,
            "{column}: {padded_hits} page accesses for 20 values, {hits} for their 2"
        );
    }
}

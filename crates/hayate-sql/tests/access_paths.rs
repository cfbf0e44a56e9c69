//! Access paths chosen for primary key predicates: equality on every key column is a point
//! lookup (also when the constant's type differs from the column's), equality on the first
//! key columns and/or a bound on the next one a range scan, anything else a full scan.
//! Results are checked too.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::plan::Access;
use hayate_sql::{parse, Catalog, DataType, Outcome, Session, Value};

use crate::common;
use common::{explain, prepared_access, rows};

fn session(dir: &std::path::Path) -> Session {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    Session::new(catalog, "tester")
}

fn run(session: &mut Session, sql: &str) -> Vec<Outcome> {
    session
        .execute_sql(sql)
        .into_iter()
        .map(|outcome| outcome.unwrap_or_else(|error| panic!("{sql}: {error}")))
        .collect()
}

#[test]
fn primary_key_predicates_pick_lookups_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    run(
        &mut session,
        "CREATE TABLE a (id int4 PRIMARY KEY, v text); \
         CREATE TABLE b (x text, y int8, z int2, PRIMARY KEY (x, y)); \
         INSERT INTO a VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    );
    let point = |access: Access| matches!(access, Access::Point(_));
    assert!(point(prepared_access(
        &session,
        "SELECT v FROM a WHERE id = 2",
        &[]
    )));
    assert!(point(prepared_access(
        &session,
        "SELECT v FROM a WHERE id = $1",
        &[DataType::Int8]
    )));
    assert!(point(prepared_access(
        &session,
        "SELECT v FROM a WHERE $1 = id AND v = 'x'",
        &[]
    )));
    assert!(point(prepared_access(
        &session,
        "UPDATE a SET v = 'z' WHERE id = $1",
        &[]
    )));
    assert!(point(prepared_access(
        &session,
        "DELETE FROM a WHERE id = 5::int8",
        &[]
    )));
    assert!(point(prepared_access(
        &session,
        "SELECT * FROM b WHERE y = 1 AND x = 'k'",
        &[]
    )));
    assert!(matches!(
        prepared_access(&session, "SELECT * FROM b WHERE x = 'k'", &[]),
        Access::Range {
            prefix,
            lower: None,
            upper: None
        } if prefix.len() == 1
    ));
    assert!(matches!(
        prepared_access(&session, "SELECT * FROM b WHERE x = 'k' AND y > 3", &[]),
        Access::Range {
            prefix,
            lower: Some(_),
            upper: None
        } if prefix.len() == 1
    ));
    assert!(matches!(
        prepared_access(&session, "SELECT v FROM a WHERE id > 1 AND id <= $1", &[]),
        Access::Range {
            prefix,
            lower: Some(_),
            upper: Some(_)
        } if prefix.is_empty()
    ));
    assert_eq!(
        prepared_access(&session, "SELECT v FROM a WHERE v = 'one'", &[]),
        Access::Full
    );
    assert!(matches!(
        prepared_access(&session, "SELECT v FROM a WHERE id = 1 OR id = 2", &[]),
        Access::Union(branches) if branches.len() == 2
            && branches.iter().all(|b| matches!(b, Access::Point(_)))
    ));
    assert_eq!(
        prepared_access(&session, "SELECT v FROM a WHERE id = 1 OR v = 'two'", &[]),
        Access::Full
    );
    assert_eq!(
        prepared_access(&session, "SELECT * FROM b WHERE y = 1", &[]),
        Access::Full
    );

    // An int8 parameter finds the int4 key; a fractional one finds nothing.
    let statement = parse("SELECT v FROM a WHERE id = $1")
        .unwrap()
        .pop()
        .unwrap();
    let prepared = session.prepare(statement, &[DataType::Int8]).unwrap();
    let rows = |outcome: Outcome| match outcome {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    };
    let found = rows(session.execute(&prepared, vec![Value::Int(3)]).unwrap());
    assert_eq!(found, vec![vec![Value::Text("three".into())]]);
    let outcome = run(&mut session, "SELECT v FROM a WHERE id = 2.5");
    assert_eq!(
        rows(outcome.into_iter().next().unwrap()),
        Vec::<Vec<Value>>::new()
    );
    let outcome = run(
        &mut session,
        "SELECT id FROM a WHERE id >= 1.5 AND id < 3 ORDER BY id",
    );
    assert_eq!(
        rows(outcome.into_iter().next().unwrap()),
        vec![vec![Value::Int(2)]]
    );
}

/// Equality on a prefix of a composite key, with and without a bound on the next column,
/// returns exactly the rows a full scan with the same filter returns (TPC-C's shapes:
/// the order lines of one order, the new orders of one district, a range of orders).
#[test]
fn composite_key_prefixes_are_range_scans_with_the_right_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    run(
        &mut session,
        "CREATE TABLE ol (w int4, d int2, o int8, n text, v int4, PRIMARY KEY (w, d, o, n)); \
         INSERT INTO ol SELECT g % 3, g % 5, g / 60, 'n' || (g % 4)::text, g \
         FROM generate_series(1, 2000) AS g; \
         CREATE TABLE flat (w int4, d int2, o int8, n text, v int4); \
         INSERT INTO flat SELECT * FROM ol",
    );
    let rows = |session: &mut Session, sql: &str| match run(session, sql).pop().unwrap() {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    };
    for filter in [
        "w = 1",
        "w = 1 AND d = 2",
        "w = 1 AND d = 2 AND o = 7",
        "w = 1 AND d = 2 AND o >= 3 AND o < 6",
        "w = 1 AND d = 2 AND o > 3 AND o <= 6",
        "w = 1 AND d = 2 AND o < 4",
        "w = 1 AND d = 2 AND o >= 9",
        "w = 1 AND d = 2 AND o = 7 AND n > 'n1'",
        "w = 1 AND d = 2::int8 AND o = 7::int4",
        "w = 2 AND d = 99999",
        "w = 1 AND d = 2 AND o >= 3.5",
        "w = 1 AND d = NULL",
    ] {
        let sql = format!("SELECT w, d, o, n, v FROM ol WHERE {filter} ORDER BY w, d, o, n");
        assert!(
            matches!(
                prepared_access(&session, &sql, &[]),
                Access::Range { ref prefix, .. } if !prefix.is_empty()
            ),
            "{filter}"
        );
        let expected = rows(
            &mut session,
            &format!("SELECT w, d, o, n, v FROM flat WHERE {filter} ORDER BY w, d, o, n"),
        );
        assert_eq!(rows(&mut session, &sql), expected, "{filter}");
        if !filter.contains("99999") && !filter.contains("NULL") {
            assert!(!expected.is_empty(), "{filter}: the test should find rows");
        }
    }
}

fn ints(values: &[i64]) -> Vec<Vec<Value>> {
    values.iter().map(|v| vec![Value::Int(*v)]).collect()
}

#[test]
fn order_by_the_key_descending_reads_backward() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    run(
        &mut session,
        "CREATE TABLE o (w int4, id int4, v text, PRIMARY KEY (w, id)); \
         INSERT INTO o SELECT w, i, 'v' || i FROM generate_series(1, 3) w, \
         generate_series(1, 500) i",
    );
    let last = "SELECT w, id FROM o ORDER BY w DESC, id DESC LIMIT 3";
    assert_eq!(
        rows(&mut session, last),
        vec![
            vec![Value::Int(3), Value::Int(500)],
            vec![Value::Int(3), Value::Int(499)],
            vec![Value::Int(3), Value::Int(498)],
        ]
    );
    let plan = explain(&mut session, last);
    assert!(plan.contains("Full Scan on o Backward"), "{plan}");
    assert!(!plan.contains("Sort"), "{plan}");
    let newest = "SELECT id FROM o WHERE w = 2 ORDER BY id DESC LIMIT 2";
    assert_eq!(rows(&mut session, newest), ints(&[500, 499]));
    let plan = explain(&mut session, newest);
    assert!(
        plan.contains("Range Scan on o (primary key) Backward"),
        "{plan}"
    );
    assert!(!plan.contains("Sort"), "{plan}");
    // Mixed directions need a sort.
    let plan = explain(&mut session, "SELECT w, id FROM o ORDER BY w DESC, id");
    assert!(
        plan.contains("Sort") && !plan.contains("Backward"),
        "{plan}"
    );
    // Every bound, backward, equals the forward result reversed.
    for (low, high) in [(0, 600), (50, 100), (499, 500), (200, 199), (1, 1)] {
        for (lower, upper) in [(">=", "<="), (">", "<"), (">=", "<")] {
            let range = format!("w = 1 AND id {lower} {low} AND id {upper} {high}");
            let mut forward = rows(
                &mut session,
                &format!("SELECT id FROM o WHERE {range} ORDER BY id"),
            );
            forward.reverse();
            let backward = format!("SELECT id FROM o WHERE {range} ORDER BY id DESC");
            assert_eq!(rows(&mut session, &backward), forward, "{range}");
        }
    }
    // A block's own writes merge into the backward scan in order.
    run(
        &mut session,
        "BEGIN; INSERT INTO o VALUES (3, 501, 'new'); DELETE FROM o WHERE w = 3 AND id = 500; \
         UPDATE o SET v = 'upd' WHERE w = 3 AND id = 499",
    );
    assert_eq!(
        rows(
            &mut session,
            "SELECT id, v FROM o WHERE w = 3 ORDER BY id DESC LIMIT 3"
        ),
        vec![
            vec![Value::Int(501), Value::Text("new".into())],
            vec![Value::Int(499), Value::Text("upd".into())],
            vec![Value::Int(498), Value::Text("v498".into())],
        ]
    );
    run(&mut session, "ROLLBACK");
}

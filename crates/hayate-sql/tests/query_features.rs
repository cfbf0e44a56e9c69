//! Query features beyond SELECT-FROM-WHERE that clients send: ARRAY(subquery), string_agg,
//! WITH, INTERSECT / EXCEPT [ALL], RIGHT and FULL joins, LATERAL, window functions; each
//! checked on small tables with NULLs, and what stays unsupported checked for its SQLSTATE.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, Value};

fn session(dir: &std::path::Path) -> Session {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = Session::new(catalog, "tester");
    for outcome in session.execute_sql(
        "CREATE TABLE a (id int4 PRIMARY KEY, x int4, name text); \
         CREATE TABLE b (id int4 PRIMARY KEY, x int4); \
         INSERT INTO a VALUES (1, 10, 'one'), (2, 20, 'two'), (3, NULL, NULL), (4, 20, 'four'); \
         INSERT INTO b VALUES (10, 20), (11, 30), (12, NULL), (13, 20)",
    ) {
        outcome.unwrap();
    }
    session
}

fn query(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let outcome = session.execute_sql(sql).pop().unwrap();
    match outcome.unwrap_or_else(|error| panic!("{sql}: {error}")) {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

fn error(session: &mut Session, sql: &str) -> (&'static str, String) {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(outcome) => panic!("{sql}: expected an error, got {outcome:?}"),
        Err(error) => (error.code, error.to_string()),
    }
}

fn int(v: i64) -> Value {
    Value::Int(v)
}

fn text(v: &str) -> Value {
    Value::Text(v.into())
}

const NULL: Value = Value::Null;

#[test]
fn array_subquery_and_string_agg() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    assert_eq!(
        query(
            &mut s,
            "SELECT ARRAY(SELECT id FROM a WHERE x = 20 ORDER BY id DESC)"
        ),
        vec![vec![text("{4,2}")]]
    );
    // No rows: an empty array; NULL elements are NULL.
    assert_eq!(
        query(
            &mut s,
            "SELECT ARRAY(SELECT id FROM a WHERE id > 9), ARRAY(SELECT name FROM a WHERE id = 3)"
        ),
        vec![vec![text("{}"), text("{NULL}")]]
    );
    // Correlated: per row.
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, array_to_string(ARRAY(SELECT b.id FROM b WHERE b.x = a.x ORDER BY 1), ',') \
             FROM a ORDER BY a.id"
        ),
        vec![
            vec![int(1), text("")],
            vec![int(2), text("10,13")],
            vec![int(3), text("")],
            vec![int(4), text("10,13")],
        ]
    );
    // string_agg skips NULL values; NULL over no rows.
    assert_eq!(
        query(&mut s, "SELECT string_agg(name, ', ') FROM a"),
        vec![vec![text("one, two, four")]]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT x, string_agg(name, '-') FROM a GROUP BY x ORDER BY x"
        ),
        vec![
            vec![int(10), text("one")],
            vec![int(20), text("two-four")],
            vec![NULL, NULL],
        ]
    );
    assert_eq!(
        query(&mut s, "SELECT string_agg(name, ',') FROM a WHERE id > 9"),
        vec![vec![NULL]]
    );
    assert_eq!(
        error(&mut s, "SELECT ARRAY(SELECT id, x FROM a)").0,
        "42601"
    );
}

#[test]
fn with_queries() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    assert_eq!(
        query(
            &mut s,
            "WITH big AS (SELECT id, x FROM a WHERE x >= 20) SELECT id FROM big ORDER BY id"
        ),
        vec![vec![int(2)], vec![int(4)]]
    );
    // Column aliases; a later WITH query reads an earlier one.
    assert_eq!(
        query(
            &mut s,
            "WITH c(k) AS (SELECT x FROM a), d AS (SELECT k FROM c WHERE k IS NOT NULL) \
             SELECT count(*), sum(k) FROM d"
        ),
        vec![vec![int(3), int(50)]]
    );
    // Referenced twice, under two aliases.
    assert_eq!(
        query(
            &mut s,
            "WITH c AS (SELECT id, x FROM a) \
             SELECT c1.id, c2.id FROM c c1 JOIN c c2 ON c1.x = c2.x AND c1.id < c2.id"
        ),
        vec![vec![int(2), int(4)]]
    );
    // Seen from a subquery; a WITH name hides a table's.
    assert_eq!(
        query(
            &mut s,
            "WITH c AS (SELECT x FROM b) SELECT id FROM a WHERE x IN (SELECT x FROM c) ORDER BY id"
        ),
        vec![vec![int(2)], vec![int(4)]]
    );
    assert_eq!(
        query(&mut s, "WITH a AS (SELECT 7 AS id) SELECT id FROM a"),
        vec![vec![int(7)]]
    );
    // A WITH query does not see itself: `a` inside is the table.
    assert_eq!(
        query(
            &mut s,
            "WITH a AS (SELECT count(*) AS n FROM a) SELECT n FROM a"
        ),
        vec![vec![int(4)]]
    );
    assert_eq!(
        query(
            &mut s,
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) \
             SELECT n FROM r"
        ),
        vec![vec![int(1)], vec![int(2)], vec![int(3)]]
    );
}

#[test]
fn intersect_and_except() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    // a.x: 10, 20, NULL, 20; b.x: 20, 30, NULL, 20. NULLs are equal in set operations.
    assert_eq!(
        query(
            &mut s,
            "SELECT x FROM a INTERSECT SELECT x FROM b ORDER BY x"
        ),
        vec![vec![int(20)], vec![NULL]]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT x FROM a INTERSECT ALL SELECT x FROM b ORDER BY x"
        ),
        vec![vec![int(20)], vec![int(20)], vec![NULL]]
    );
    assert_eq!(
        query(&mut s, "SELECT x FROM a EXCEPT SELECT x FROM b"),
        vec![vec![int(10)]]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT x FROM a EXCEPT ALL SELECT x FROM b WHERE id <> 13 ORDER BY x"
        ),
        vec![vec![int(10)], vec![int(20)]]
    );
    // INTERSECT binds tighter than UNION and EXCEPT.
    assert_eq!(
        query(
            &mut s,
            "SELECT 1 UNION SELECT 2 INTERSECT SELECT 3 ORDER BY 1"
        ),
        vec![vec![int(1)]]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT id, name FROM a EXCEPT SELECT id, name FROM a WHERE id < 4"
        ),
        vec![vec![int(4), text("four")]]
    );
    assert_eq!(
        error(&mut s, "SELECT id, x FROM a INTERSECT SELECT id FROM b").0,
        "42601"
    );
    assert_eq!(
        error(&mut s, "SELECT name FROM a EXCEPT SELECT x FROM b").0,
        "42804"
    );
}

#[test]
fn right_and_full_joins() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let pair = |l: Option<i64>, r: Option<i64>| vec![l.map_or(NULL, int), r.map_or(NULL, int)];
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, b.id FROM a RIGHT JOIN b ON a.x = b.x ORDER BY b.id, a.id"
        ),
        vec![
            pair(Some(2), Some(10)),
            pair(Some(4), Some(10)),
            pair(None, Some(11)),
            pair(None, Some(12)),
            pair(Some(2), Some(13)),
            pair(Some(4), Some(13)),
        ]
    );
    // WHERE on the nullable (left) side runs after the join.
    assert_eq!(
        query(
            &mut s,
            "SELECT b.id FROM a RIGHT OUTER JOIN b ON a.x = b.x WHERE a.id IS NULL ORDER BY b.id"
        ),
        vec![vec![int(11)], vec![int(12)]]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, b.id FROM a RIGHT JOIN b ON a.x = b.x WHERE a.name = 'two' ORDER BY b.id"
        ),
        vec![pair(Some(2), Some(10)), pair(Some(2), Some(13))]
    );
    // A condition on the preserved side in ON keeps its rows.
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, b.id FROM a RIGHT JOIN b ON a.x = b.x AND b.id = 10 ORDER BY b.id, a.id"
        ),
        vec![
            pair(Some(2), Some(10)),
            pair(Some(4), Some(10)),
            pair(None, Some(11)),
            pair(None, Some(12)),
            pair(None, Some(13)),
        ]
    );
    // Three items: the right join preserves the derived table.
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, b.id, c.k FROM a JOIN b ON a.x = b.x \
             RIGHT JOIN (VALUES (20), (99)) AS c(k) ON b.x = c.k ORDER BY 3, 1, 2"
        ),
        vec![
            vec![int(2), int(10), int(20)],
            vec![int(2), int(13), int(20)],
            vec![int(4), int(10), int(20)],
            vec![int(4), int(13), int(20)],
            vec![NULL, NULL, int(99)],
        ]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, b.id FROM a FULL JOIN b ON a.x = b.x ORDER BY a.id, b.id"
        ),
        vec![
            pair(Some(1), None),
            pair(Some(2), Some(10)),
            pair(Some(2), Some(13)),
            pair(Some(3), None),
            pair(Some(4), Some(10)),
            pair(Some(4), Some(13)),
            pair(None, Some(11)),
            pair(None, Some(12)),
        ]
    );
    // Without an equality every pair is tested.
    assert_eq!(
        query(
            &mut s,
            "SELECT count(*), count(a.id), count(b.id) FROM a FULL OUTER JOIN b ON a.x < b.x"
        ),
        vec![vec![int(7), int(6), int(6)]]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id FROM a FULL JOIN b ON a.x = b.x WHERE b.id IS NULL ORDER BY a.id"
        ),
        vec![vec![int(1)], vec![int(3)]]
    );
    // USING merges the two columns, which RIGHT / FULL would have to coalesce.
    let (code, message) = error(&mut s, "SELECT * FROM a FULL JOIN b USING (x)");
    assert_eq!(code, "0A000", "{message}");
}

#[test]
fn lateral_subqueries() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    // Per row of a: the b rows of its x (LEFT keeps a's rows without any).
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, m.n FROM a CROSS JOIN LATERAL \
             (SELECT count(*) AS n FROM b WHERE b.x = a.x) AS m ORDER BY a.id"
        ),
        vec![
            vec![int(1), int(0)],
            vec![int(2), int(2)],
            vec![int(3), int(0)],
            vec![int(4), int(2)],
        ]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, l.id FROM a LEFT JOIN LATERAL \
             (SELECT b.id FROM b WHERE b.x = a.x ORDER BY b.id DESC LIMIT 1) AS l ON true \
             ORDER BY a.id"
        ),
        vec![
            vec![int(1), NULL],
            vec![int(2), int(13)],
            vec![int(3), NULL],
            vec![int(4), int(13)],
        ]
    );
    // Comma form, column aliases, a WHERE on the lateral column.
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, o.doubled FROM a, LATERAL (SELECT a.x * 2) AS o(doubled) \
             WHERE o.doubled > 20 ORDER BY a.id"
        ),
        vec![vec![int(2), int(40)], vec![int(4), int(40)]]
    );
    // Without LATERAL the subquery cannot see a.
    assert_eq!(
        error(&mut s, "SELECT * FROM a, (SELECT a.x) AS o").0,
        "42P01"
    );
    assert_eq!(
        error(
            &mut s,
            "SELECT * FROM a RIGHT JOIN LATERAL (SELECT a.x) AS o ON true"
        )
        .0,
        "42P10"
    );
}

#[test]
fn window_functions() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    // a: (1, 10), (2, 20), (3, NULL), (4, 20); NULLs sort last and form one partition.
    assert_eq!(
        query(
            &mut s,
            "SELECT id, row_number() OVER (PARTITION BY x ORDER BY id DESC) FROM a ORDER BY id"
        ),
        vec![
            vec![int(1), int(1)],
            vec![int(2), int(2)],
            vec![int(3), int(1)],
            vec![int(4), int(1)],
        ]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT id, rank() OVER (ORDER BY x), dense_rank() OVER (ORDER BY x), \
             row_number() OVER () AS n FROM a ORDER BY id"
        )
        .into_iter()
        .map(|row| row[..3].to_vec())
        .collect::<Vec<_>>(),
        vec![
            vec![int(1), int(1), int(1)],
            vec![int(2), int(2), int(2)],
            vec![int(3), int(4), int(3)],
            vec![int(4), int(2), int(2)],
        ]
    );
    // Over a grouped query, in a derived table, and as an ORDER BY key.
    assert_eq!(
        query(
            &mut s,
            "SELECT x, count(*), rank() OVER (ORDER BY count(*) DESC) FROM a \
             GROUP BY x ORDER BY 3, 1"
        ),
        vec![
            vec![int(20), int(2), int(1)],
            vec![int(10), int(1), int(2)],
            vec![NULL, int(1), int(2)],
        ]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id DESC) AS r FROM a) t \
             WHERE r <= 2 ORDER BY r"
        ),
        vec![vec![int(4)], vec![int(3)]]
    );
    // GROUP BY by select-list position.
    assert_eq!(
        query(&mut s, "SELECT x, count(*) FROM a GROUP BY 1 ORDER BY 1"),
        vec![
            vec![int(10), int(1)],
            vec![int(20), int(2)],
            vec![NULL, int(1)],
        ]
    );
    assert_eq!(error(&mut s, "SELECT x FROM a GROUP BY 2").0, "42703");
    assert_eq!(
        error(&mut s, "SELECT id FROM a WHERE row_number() OVER () > 1").0,
        "42P20"
    );
    let (code, message) = error(&mut s, "SELECT sum(x) OVER (PARTITION BY id) FROM a");
    assert_eq!(code, "0A000", "{message}");
    let (code, message) = error(&mut s, "SELECT lag(x) OVER (ORDER BY id) FROM a");
    assert_eq!(code, "0A000", "{message}");
}

#[test]
fn interval_arithmetic() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let holds = |s: &mut Session, sql: &str| {
        assert_eq!(query(s, sql), vec![vec![Value::Bool(true)]], "{sql}");
    };
    // Months on the calendar (clamped to the month's length), then days, then time.
    holds(
        &mut s,
        "SELECT timestamp '2024-01-31 10:00:00' + interval '1 month' \
         = timestamp '2024-02-29 10:00:00'",
    );
    holds(
        &mut s,
        "SELECT timestamp '2024-01-01' - interval '1 year 2 mons 3 days 04:05:06' \
         = timestamp '2022-10-28 19:54:54'",
    );
    holds(
        &mut s,
        "SELECT interval '2 hours' + timestamp '2024-01-01 23:00:00' \
         = timestamp '2024-01-02 01:00:00'",
    );
    // date +/- interval is a timestamp.
    holds(
        &mut s,
        "SELECT date '2024-03-01' - interval '1 day' = timestamp '2024-02-29 00:00:00'",
    );
    holds(
        &mut s,
        "SELECT now() - interval '1 day' < now() AND now() - interval '1 day' > now() - interval '2 days'",
    );
    holds(
        &mut s,
        "SELECT timestamp '2024-01-01' + interval '90' minute = timestamp '2024-01-01 01:30:00'",
    );
    assert_eq!(
        query(&mut s, "SELECT CAST(NULL AS timestamp) + interval '1 day'"),
        vec![vec![NULL]]
    );
    assert_eq!(
        query(&mut s, "SELECT interval '1 day' - interval '1 hour'"),
        vec![vec![Value::Interval(hayate_sql::types::Interval {
            months: 0,
            days: 1,
            micros: -3_600_000_000
        })]]
    );
    assert_eq!(error(&mut s, "SELECT 1 + interval '1 day'").0, "42883");
    assert_eq!(
        error(&mut s, "SELECT now() + interval '1 fortnight'").0,
        "22007"
    );
}

#[test]
fn distinct_aggregates() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    // a.x: 10, 20, NULL, 20 -> distinct non-NULL inputs 10 and 20.
    assert_eq!(
        query(
            &mut s,
            "SELECT count(DISTINCT x), sum(DISTINCT x), count(x), count(*) FROM a"
        ),
        vec![vec![int(2), int(30), int(3), int(4)]]
    );
    // Per group: b's x joined to a's rows of the same x.
    assert_eq!(
        query(
            &mut s,
            "SELECT b.x, count(DISTINCT a.id), count(*) FROM b JOIN a ON a.x = b.x \
             GROUP BY b.x ORDER BY b.x"
        ),
        vec![vec![int(20), int(2), int(4)]]
    );
    // No rows: count(DISTINCT) is 0, sum(DISTINCT) NULL.
    assert_eq!(
        query(
            &mut s,
            "SELECT count(DISTINCT x), sum(DISTINCT x) FROM a WHERE id > 99"
        ),
        vec![vec![int(0), NULL]]
    );
    // TPC-C's stock-level shape: distinct items among many rows, also with the smallest work_mem.
    command(
        &mut s,
        "CREATE TABLE s (w int4, i int4, PRIMARY KEY (w, i))",
    );
    command(
        &mut s,
        "INSERT INTO s SELECT g % 7, g FROM generate_series(1, 3000) AS g",
    );
    command(&mut s, "CREATE TABLE ol (id int4 PRIMARY KEY, i int4)");
    command(
        &mut s,
        "INSERT INTO ol SELECT g, g % 500 + 1 FROM generate_series(1, 6000) AS g",
    );
    let sql = "SELECT s.w, count(DISTINCT s.i) FROM ol JOIN s ON s.i = ol.i \
               GROUP BY s.w ORDER BY s.w";
    let in_memory = query(&mut s, sql);
    let expected: Vec<Vec<Value>> = (0..7)
        .map(|w| vec![int(w), int((1..=500).filter(|i| i % 7 == w).count() as i64)])
        .collect();
    assert_eq!(in_memory, expected);
    command(&mut s, "SET work_mem = '64kB'");
    assert_eq!(query(&mut s, sql), expected);
}

fn command(session: &mut Session, sql: &str) {
    let outcome = session.execute_sql(sql).pop().unwrap();
    outcome.unwrap_or_else(|error| panic!("{sql}: {error}"));
}

/// `||` with one text operand and one of another type is PostgreSQL's text || anynonarray:
/// the other operand as text, NULL if either is NULL.
#[test]
fn concatenation_with_non_text_operands() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    assert_eq!(
        query(
            &mut session,
            "SELECT 'a' || 1, 1 || 'a', 'a' || NULL::int4, 'a' || 1.5, 'x' || true, \
             'd' || DATE '2020-01-01'"
        ),
        vec![vec![
            text("a1"),
            text("1a"),
            NULL,
            text("a1.5"),
            text("xtrue"),
            text("d2020-01-01")
        ]]
    );
    assert_eq!(
        query(&mut session, "SELECT name || x FROM a ORDER BY id"),
        vec![
            vec![text("one10")],
            vec![text("two20")],
            vec![NULL],
            vec![text("four20")]
        ]
    );
    assert_eq!(
        query(
            &mut session,
            "SELECT 'id=' || id || ', x=' || x FROM a WHERE id = 1"
        ),
        vec![vec![text("id=1, x=10")]]
    );
    assert_eq!(
        query(&mut session, "SELECT x || '-' || name FROM a WHERE id = 2"),
        vec![vec![text("20-two")]]
    );
}

/// `agg(...) FILTER (WHERE ...)` aggregates only the rows it accepts; `array_agg(x ORDER BY
/// ...)` and `string_agg(..., ORDER BY ...)` aggregate in that order (outputs as PostgreSQL
/// 15's for the same rows).
#[test]
fn aggregate_filter_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    // a: (1, 10, 'one'), (2, 20, 'two'), (3, NULL, NULL), (4, 20, 'four')
    assert_eq!(
        query(
            &mut s,
            "SELECT count(id) FILTER (WHERE x = 20), count(*) FILTER (WHERE x IS NULL), \
             sum(x) FILTER (WHERE name LIKE '%o%'), count(*) FROM a"
        ),
        vec![vec![int(2), int(1), int(50), int(4)]]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT x, array_agg(name ORDER BY name DESC), string_agg(name, ',' ORDER BY id DESC), \
             array_agg(id ORDER BY name NULLS FIRST) FILTER (WHERE id > 1) \
             FROM a GROUP BY x ORDER BY x"
        ),
        vec![
            vec![int(10), text("{one}"), text("one"), Value::Null],
            vec![int(20), text("{two,four}"), text("four,two"), text("{4,2}")],
            vec![Value::Null, text("{NULL}"), Value::Null, text("{3}")],
        ]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT array_agg(DISTINCT x ORDER BY x DESC) FROM a"
        ),
        vec![vec![text("{NULL,20,10}")]]
    );
    // A row FILTER rejects is not evaluated (10/0 would fail).
    assert_eq!(
        query(
            &mut s,
            "SELECT sum(10 / x) FILTER (WHERE x <> 0) FROM (VALUES (0), (2)) v(x)"
        ),
        vec![vec![int(5)]]
    );
    // WITH ORDINALITY counts the longest array; an uncorrelated unnest is a plain FROM
    // item (a RIGHT JOIN to it works).
    assert_eq!(
        query(
            &mut s,
            "SELECT y, n FROM unnest(ARRAY[1], ARRAY['a', 'b', 'c']) WITH ORDINALITY AS u(x, y, n)"
        ),
        vec![
            vec![text("a"), int(1)],
            vec![text("b"), int(2)],
            vec![text("c"), int(3)],
        ]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT a.id, u.v FROM a RIGHT JOIN unnest(ARRAY[1, 9]) u(v) ON a.id = u.v::int \
             ORDER BY u.v"
        ),
        vec![vec![int(1), text("1")], vec![Value::Null, text("9")]]
    );
}

/// GROUP BY a table's primary key lets the query read the table's other columns (they are
/// functionally dependent on it, as PostgreSQL allows: Django's annotate(Count(...)) groups
/// by the id only); a column of a table whose key is not grouped stays 42803.
#[test]
fn group_by_primary_key_groups_the_rows_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    // a: (1, 10, 'one'), (2, 20, 'two'), (3, NULL, NULL), (4, 20, 'four');
    // b: (10, 20), (11, 30), (12, NULL), (13, 20)
    assert_eq!(
        query(
            &mut s,
            "SELECT \"a\".\"id\", \"a\".\"name\", count(b.id) AS n FROM a LEFT JOIN b \
             ON a.x = b.x GROUP BY \"a\".\"id\" HAVING count(b.id) >= 0 ORDER BY a.name, a.id"
        ),
        vec![
            vec![int(4), text("four"), int(2)],
            vec![int(1), text("one"), int(0)],
            vec![int(2), text("two"), int(2)],
            vec![int(3), Value::Null, int(0)],
        ]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT id + 1, upper(name) FROM a GROUP BY a.id ORDER BY 1 LIMIT 2"
        ),
        vec![vec![int(2), text("ONE")], vec![int(3), text("TWO")]]
    );
    assert_eq!(error(&mut s, "SELECT name FROM a GROUP BY x").0, "42803");
    assert_eq!(
        error(
            &mut s,
            "SELECT b.x FROM a JOIN b ON a.x = b.x GROUP BY a.id"
        )
        .0,
        "42803"
    );
}

/// A single table's rows are decoded only as far as the query reads them
/// (`TableRead::columns`): count(*) decodes no column, and every query shape that reads
/// some columns (aggregates with FILTER and ORDER BY, GROUP BY a key with a dependent column,
/// ORDER BY a column not selected, DISTINCT ON, WHERE on a column not selected, a column
/// after many skipped ones) returns what the same query returns when joined to one constant
/// row, which decodes every column.
#[test]
fn only_the_columns_a_query_reads_are_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    let mut run = |sql: &str| session.execute_sql(sql).pop().unwrap().unwrap();
    run("CREATE TABLE p (id int4 PRIMARY KEY, a text, b int4, c text, d int8, e float8)");
    for id in 0..300 {
        let a = if id % 7 == 0 {
            "NULL".to_string()
        } else {
            format!("'a{}'", id % 13)
        };
        run(&format!(
            "INSERT INTO p VALUES ({id}, {a}, {}, 'c{}', {}, {})",
            id % 5,
            id % 11,
            (id * 37) % 101,
            id as f64 / 4.0
        ));
    }
    let statement = hayate_sql::parse("SELECT count(*) FROM p")
        .unwrap()
        .pop()
        .unwrap();
    let prepared = session.prepare(statement, &[]).unwrap();
    let hayate_sql::plan::Plan::Select(select) = prepared.plan() else {
        panic!("not a select");
    };
    assert_eq!(select.table_reads()[0].columns, Some(vec![false; 6]));
    for sql in [
        "SELECT count(*) FROM p",
        "SELECT count(*), sum(d), max(e) FROM p WHERE b = 2",
        "SELECT b, count(*) FILTER (WHERE d > 50), string_agg(c, ',' ORDER BY d, id), min(a) \
         FROM p GROUP BY b ORDER BY b",
        "SELECT id, c FROM p GROUP BY id ORDER BY id DESC LIMIT 3",
        "SELECT id, a FROM p WHERE e > 20 ORDER BY d DESC, id LIMIT 5",
        "SELECT DISTINCT ON (b) b, c FROM p ORDER BY b, d, id",
        "SELECT e FROM p WHERE a IS NULL ORDER BY id",
        "SELECT count(DISTINCT a), avg(e) FROM p",
    ] {
        let joined = sql.replace(" FROM p", " FROM p, (SELECT 1) AS one");
        assert_eq!(
            query(&mut session, sql),
            query(&mut session, &joined),
            "{sql}"
        );
        assert!(!query(&mut session, sql).is_empty(), "{sql}");
    }
}

//! Joins, FROM items and the planner's choices: results compared with joins computed in the
//! test by nested loops over the same (seeded random) data, and EXPLAIN checked for the
//! algorithm picked.

use hayate_engine::fiber::{Fiber, Step};
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

/// Two sessions on one database.
fn two_sessions(dir: &std::path::Path) -> (Session, Session) {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    (
        Session::new(catalog.clone(), "one"),
        Session::new(catalog, "two"),
    )
}

fn query(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let outcome = session.execute_sql(sql).pop().unwrap();
    match outcome.unwrap_or_else(|error| panic!("{sql}: {error}")) {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

fn columns(session: &mut Session, sql: &str) -> Vec<String> {
    match session.execute_sql(sql).pop().unwrap().unwrap() {
        Outcome::Rows { columns, .. } => columns.into_iter().map(|c| c.name).collect(),
        other => panic!("{other:?}"),
    }
}

fn error_code(session: &mut Session, sql: &str) -> &'static str {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(outcome) => panic!("{sql}: expected an error, got {outcome:?}"),
        Err(error) => error.code,
    }
}

fn int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Int)
}

fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    rows
}

/// a(id pk, b_id, v), b(id pk, label), c(x, y) without a key; b_id and x may be NULL.
struct Data {
    a: Vec<(i64, Option<i64>, i64)>,
    b: Vec<(i64, String)>,
    c: Vec<(Option<i64>, i64)>,
}

fn load(session: &mut Session, seed: u64) -> Data {
    let mut rng = StdRng::seed_from_u64(seed);
    let statements = "CREATE TABLE a (id int4 PRIMARY KEY, b_id int4, v int8); \
         CREATE TABLE b (id int8 PRIMARY KEY, label text); \
         CREATE TABLE c (x int4, y int4)";
    for outcome in session.execute_sql(statements) {
        outcome.unwrap();
    }
    let a: Vec<(i64, Option<i64>, i64)> = (1..=60)
        .map(|id| {
            let b_id = (rng.gen_range(0..8) > 0).then(|| rng.gen_range(0..25));
            (id, b_id, rng.gen_range(-50..50))
        })
        .collect();
    let b: Vec<(i64, String)> = (0..20)
        .map(|id| (id, format!("label{}", rng.gen_range(0..5))))
        .collect();
    let c: Vec<(Option<i64>, i64)> = (0..40)
        .map(|_| {
            (
                (rng.gen_range(0..6) > 0).then(|| rng.gen_range(0..25)),
                rng.gen_range(0..100),
            )
        })
        .collect();
    let sql = |v: Option<i64>| v.map_or("NULL".to_string(), |v| v.to_string());
    for (id, b_id, v) in &a {
        query_ok(
            session,
            &format!("INSERT INTO a VALUES ({id}, {}, {v})", sql(*b_id)),
        );
    }
    for (id, label) in &b {
        query_ok(session, &format!("INSERT INTO b VALUES ({id}, '{label}')"));
    }
    for (x, y) in &c {
        query_ok(session, &format!("INSERT INTO c VALUES ({}, {y})", sql(*x)));
    }
    Data { a, b, c }
}

fn query_ok(session: &mut Session, sql: &str) {
    session.execute_sql(sql).pop().unwrap().unwrap();
}

#[test]
fn joins_match_nested_loops_computed_here() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let data = load(&mut s, 7);

    // Inner join on b's whole primary key: an index nested loop, in both spellings.
    let expected: Vec<Vec<Value>> = data
        .a
        .iter()
        .flat_map(|(id, b_id, _)| {
            data.b
                .iter()
                .filter(move |(bid, _)| Some(*bid) == *b_id)
                .map(move |(_, label)| vec![Value::Int(*id), Value::Text(label.clone())])
        })
        .collect();
    let sql = "SELECT a.id, b.label FROM a JOIN b ON a.b_id = b.id ORDER BY a.id";
    assert_eq!(query(&mut s, sql), expected);
    assert!(explain(&mut s, sql).contains("Index Nested Loop Inner Join: primary key lookup on b"));
    let comma = "SELECT x.id, y.label FROM a AS x, b y WHERE y.id = x.b_id ORDER BY 1";
    assert_eq!(query(&mut s, comma), expected);
    assert!(explain(&mut s, comma).contains("Index Nested Loop"));
    assert!(!explain(&mut s, comma).contains("Full Scan on b"));

    // Equi-join on a column without a key: a hash join; LEFT keeps unmatched rows.
    let inner: Vec<Vec<Value>> = data
        .a
        .iter()
        .flat_map(|(id, b_id, _)| {
            data.c
                .iter()
                .filter(move |(x, _)| x.is_some() && *x == *b_id)
                .map(move |(_, y)| vec![Value::Int(*id), Value::Int(*y)])
        })
        .collect();
    let sql = "SELECT a.id, c.y FROM a JOIN c ON c.x = a.b_id";
    assert_eq!(sorted(query(&mut s, sql)), sorted(inner.clone()));
    assert!(explain(&mut s, sql).contains("Hash Inner Join"));
    let mut left = inner.clone();
    for (id, b_id, _) in &data.a {
        if !data.c.iter().any(|(x, _)| x.is_some() && x == b_id) {
            left.push(vec![Value::Int(*id), Value::Null]);
        }
    }
    let sql = "SELECT a.id, c.y FROM a LEFT OUTER JOIN c ON c.x = a.b_id";
    assert_eq!(sorted(query(&mut s, sql)), sorted(left));
    assert!(explain(&mut s, sql).contains("Hash Left Join"));

    // A non-equi condition: a nested loop.
    let expected: Vec<Vec<Value>> = data
        .a
        .iter()
        .flat_map(|(id, b_id, _)| {
            data.c
                .iter()
                .filter(move |(x, _)| matches!((x, b_id), (Some(x), Some(b)) if x < b))
                .map(move |(x, _)| vec![Value::Int(*id), int(*x)])
        })
        .collect();
    let sql = "SELECT a.id, c.x FROM a INNER JOIN c ON c.x < a.b_id";
    assert_eq!(sorted(query(&mut s, sql)), sorted(expected));
    assert!(explain(&mut s, sql).contains("Nested Loop Inner Join"));

    // LEFT JOIN ... WHERE right IS NULL: the a rows without a b row.
    let expected: Vec<Vec<Value>> = data
        .a
        .iter()
        .filter(|(_, b_id, _)| !data.b.iter().any(|(id, _)| Some(*id) == *b_id))
        .map(|(id, _, _)| vec![Value::Int(*id)])
        .collect();
    let sql = "SELECT a.id FROM a LEFT JOIN b ON b.id = a.b_id WHERE b.id IS NULL ORDER BY a.id";
    assert_eq!(query(&mut s, sql), expected);
    assert!(explain(&mut s, sql).contains("Index Nested Loop Left Join"));

    // Three tables, a filter on one of them, CROSS JOIN and counts.
    let expected = data
        .a
        .iter()
        .filter(|(_, _, v)| *v > 0)
        .flat_map(|(_, b_id, _)| {
            data.b
                .iter()
                .filter(move |(id, _)| Some(*id) == *b_id)
                .flat_map(|(id, _)| data.c.iter().filter(move |(x, _)| *x == Some(*id)))
        })
        .count();
    let sql = "SELECT count(*) FROM a JOIN b ON b.id = a.b_id JOIN c ON c.x = b.id WHERE a.v > 0";
    assert_eq!(query(&mut s, sql), vec![vec![Value::Int(expected as i64)]]);
    let cross = data.a.len() * data.b.len();
    assert_eq!(
        query(&mut s, "SELECT count(*) FROM a CROSS JOIN b"),
        vec![vec![Value::Int(cross as i64)]]
    );

    // A self join through aliases; USING merges the column.
    let expected: Vec<Vec<Value>> = data
        .a
        .iter()
        .filter_map(|(id, b_id, _)| {
            let other = data.a.iter().find(|(other, _, _)| Some(*other) == *b_id)?;
            Some(vec![Value::Int(*id), Value::Int(other.2)])
        })
        .collect();
    let sql = "SELECT x.id, y.v FROM a x JOIN a y ON y.id = x.b_id ORDER BY x.id";
    assert_eq!(query(&mut s, sql), expected);
    // Two key-ordered scans joined on their keys: a merge join (LEFT too).
    let expected: Vec<Vec<Value>> = data
        .a
        .iter()
        .map(|(id, _, v)| {
            let label = data.b.iter().find(|(b, _)| b == id).map(|(_, l)| l.clone());
            vec![
                Value::Int(*id),
                Value::Int(*v),
                label.map_or(Value::Null, Value::Text),
            ]
        })
        .collect();
    let sql = "SELECT a.id, a.v, b.label FROM a LEFT JOIN b ON b.id = a.id ORDER BY a.id";
    assert_eq!(query(&mut s, sql), expected);
    assert!(
        explain(&mut s, sql).contains("Merge Left Join"),
        "{}",
        explain(&mut s, sql)
    );
    let sql = "SELECT a.id, b.label FROM b JOIN a ON a.id = b.id AND a.v > b.id ORDER BY a.id";
    let inner: Vec<Vec<Value>> = expected
        .iter()
        .filter(|row| {
            row[2] != Value::Null
                && row[1].compare(&row[0]).unwrap() == Some(std::cmp::Ordering::Greater)
        })
        .map(|row| vec![row[0].clone(), row[2].clone()])
        .collect();
    assert_eq!(query(&mut s, sql), inner);
    assert!(explain(&mut s, sql).contains("Merge Inner Join"));
    let using = query(
        &mut s,
        "SELECT id, label, count(*) FROM a JOIN b USING (id) GROUP BY id, label ORDER BY id",
    );
    assert_eq!(
        using.len(),
        data.b.iter().filter(|(id, _)| *id >= 1).count()
    );
}

#[test]
fn names_stars_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    load(&mut s, 3);
    assert_eq!(
        columns(&mut s, "SELECT * FROM a JOIN b ON a.b_id = b.id LIMIT 1"),
        ["id", "b_id", "v", "id", "label"]
    );
    assert_eq!(
        columns(
            &mut s,
            "SELECT b.*, a.id FROM a, b WHERE a.id = 1 AND b.id = 2"
        ),
        ["id", "label", "id"]
    );
    assert_eq!(
        columns(&mut s, "SELECT * FROM a JOIN b USING (id) LIMIT 1"),
        ["id", "b_id", "v", "label"]
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT public.a.id FROM public.a WHERE public.a.id = 5"
        ),
        vec![vec![Value::Int(5)]]
    );
    assert_eq!(error_code(&mut s, "SELECT id FROM a, b"), "42702");
    assert_eq!(error_code(&mut s, "SELECT nothing FROM a, b"), "42703");
    assert_eq!(error_code(&mut s, "SELECT a.nothing FROM a"), "42703");
    assert_eq!(error_code(&mut s, "SELECT q.id FROM a"), "42P01");
    assert_eq!(error_code(&mut s, "SELECT a.id FROM a x"), "42P01");
    assert_eq!(error_code(&mut s, "SELECT * FROM nowhere"), "42P01");
    assert_eq!(error_code(&mut s, "SELECT * FROM a, a"), "42712");
}

#[test]
fn system_tables_join_like_tables() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    query_ok(
        &mut s,
        "CREATE TABLE owners (nsp int8 PRIMARY KEY, who text)",
    );
    query_ok(
        &mut s,
        "INSERT INTO owners VALUES (2200, 'app'), (11, 'system'), (5, 'none')",
    );
    let rows = query(
        &mut s,
        "SELECT n.nspname FROM pg_catalog.pg_namespace n JOIN pg_namespace m ON n.oid = m.oid \
         ORDER BY n.nspname",
    );
    assert_eq!(
        rows,
        vec![
            vec![Value::Text("information_schema".into())],
            vec![Value::Text("pg_catalog".into())],
            vec![Value::Text("public".into())],
        ]
    );
    let sql = "SELECT nspname, who FROM pg_namespace JOIN owners ON owners.nsp = pg_namespace.oid \
               ORDER BY 1";
    assert_eq!(
        query(&mut s, sql),
        vec![
            vec![
                Value::Text("pg_catalog".into()),
                Value::Text("system".into())
            ],
            vec![Value::Text("public".into()), Value::Text("app".into())],
        ]
    );
    let plan = explain(&mut s, sql);
    assert!(
        plan.contains("System Table pg_catalog.pg_namespace"),
        "{plan}"
    );
    assert!(
        plan.contains("Index Nested Loop Inner Join: primary key lookup on owners"),
        "{plan}"
    );
    assert_eq!(
        error_code(&mut s, "SELECT * FROM public.pg_namespace"),
        "42P01"
    );
}

#[test]
fn generate_series_distinct_union() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let ints = |values: &[i64]| {
        values
            .iter()
            .map(|v| vec![Value::Int(*v)])
            .collect::<Vec<_>>()
    };
    assert_eq!(
        query(&mut s, "SELECT aid FROM generate_series(1, 5) AS aid"),
        ints(&[1, 2, 3, 4, 5])
    );
    assert_eq!(
        query(&mut s, "SELECT g.x FROM generate_series(10, 1, -4) AS g(x)"),
        ints(&[10, 6, 2])
    );
    assert_eq!(
        columns(&mut s, "SELECT * FROM generate_series(1, 2)"),
        ["generate_series"]
    );
    assert_eq!(
        query(&mut s, "SELECT * FROM generate_series(3, 1)"),
        ints(&[])
    );
    assert_eq!(
        error_code(&mut s, "SELECT * FROM generate_series(1, 3, 0)"),
        "22023"
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT DISTINCT x % 3 FROM generate_series(1, 10) g(x) ORDER BY 1"
        ),
        ints(&[0, 1, 2])
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT DISTINCT ON (x % 3) x FROM generate_series(1, 10) g(x) ORDER BY x % 3, x DESC"
        ),
        ints(&[9, 10, 8])
    );
    assert_eq!(
        query(&mut s, "SELECT 1 UNION SELECT 2 UNION SELECT 1 ORDER BY 1"),
        ints(&[1, 2])
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT x FROM generate_series(1, 2) g(x) UNION ALL SELECT 2 ORDER BY 1 DESC LIMIT 2"
        ),
        ints(&[2, 2])
    );
    assert_eq!(
        query(&mut s, "SELECT a.x, b.y FROM generate_series(1, 3) a(x) JOIN generate_series(2, 4) b(y) ON a.x = b.y ORDER BY 1"),
        vec![vec![Value::Int(2), Value::Int(2)], vec![Value::Int(3), Value::Int(3)]]
    );
}

#[test]
fn insert_select_streams_pgbench_style_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    query_ok(
        &mut s,
        "CREATE TABLE accounts (aid int4 PRIMARY KEY, bid int4, abalance int4, filler text)",
    );
    let rows = 100_000;
    let started = std::time::Instant::now();
    let outcome = s
        .execute_sql(&format!(
            "insert into accounts(aid,bid,abalance,filler) select aid, (aid - 1) / 10000 + 1, 0, '' \
             from generate_series(1, {rows}) as aid"
        ))
        .pop()
        .unwrap()
        .unwrap();
    eprintln!("INSERT ... SELECT of {rows} rows: {:?}", started.elapsed());
    assert_eq!(
        outcome,
        Outcome::Command {
            tag: format!("INSERT 0 {rows}")
        }
    );
    assert_eq!(
        query(&mut s, "SELECT count(*), sum(aid), max(bid) FROM accounts"),
        vec![vec![
            Value::Int(rows),
            Value::Int(rows * (rows + 1) / 2),
            Value::Int(10)
        ]]
    );
    // Columns left out get their defaults (NULL here); the query may read the target table.
    query_ok(
        &mut s,
        "CREATE TABLE copy (aid int4 PRIMARY KEY, note text)",
    );
    query_ok(
        &mut s,
        "INSERT INTO copy (aid) SELECT aid FROM accounts WHERE aid <= 3",
    );
    assert_eq!(
        query(&mut s, "SELECT aid, note FROM copy ORDER BY aid"),
        (1..=3)
            .map(|v| vec![Value::Int(v), Value::Null])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        error_code(
            &mut s,
            "INSERT INTO copy SELECT aid FROM accounts WHERE aid = 1"
        ),
        "23505"
    );
    assert_eq!(
        error_code(&mut s, "INSERT INTO copy (aid) SELECT 1, 2"),
        "42601"
    );
}

/// The ids a query returns, in order.
fn ids(session: &mut Session, sql: &str) -> Vec<i64> {
    query(session, sql)
        .into_iter()
        .map(|row| match row[0] {
            Value::Int(id) => id,
            ref other => panic!("{sql}: id {other:?}"),
        })
        .collect()
}

#[test]
fn skip_locked_and_nowait_as_postgresql() {
    // Outcomes checked against PostgreSQL 15 with the same statements (two connections).
    let dir = tempfile::tempdir().unwrap();
    let (mut a, mut b) = two_sessions(dir.path());
    query_ok(
        &mut a,
        "CREATE TABLE jobs (id int4 PRIMARY KEY, queue text, run_at int4, payload text)",
    );
    query_ok(
        &mut a,
        "INSERT INTO jobs SELECT g, 'q' || (g % 3), 100 - g, 'p' || g \
         FROM generate_series(1, 20) g",
    );
    let next_two = "SELECT id FROM jobs ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED";
    query_ok(&mut a, "BEGIN");
    assert_eq!(ids(&mut a, next_two), [1, 2]);
    // A queue's second consumer takes the next rows nobody holds.
    assert_eq!(ids(&mut b, next_two), [3, 4]);
    // Sorted on a column without an index: rows are locked as they leave the sort, so a
    // LIMIT locks only what it returns and the other consumer gets the next ones.
    let sorted = "SELECT id FROM jobs WHERE queue = 'q1' ORDER BY payload LIMIT 2 \
                  FOR UPDATE SKIP LOCKED";
    assert!(explain(&mut a, sorted).contains("Lock Rows of jobs (locking rows, skip locked)"));
    assert_eq!(ids(&mut a, sorted), [1, 10]);
    query_ok(&mut b, "BEGIN");
    assert_eq!(ids(&mut b, sorted), [13, 16]);
    assert_eq!(
        ids(
            &mut b,
            "SELECT id FROM jobs ORDER BY payload DESC LIMIT 3 FOR UPDATE SKIP LOCKED"
        ),
        [9, 8, 7]
    );
    query_ok(&mut b, "ROLLBACK");
    // NOWAIT fails at a held row (55P03), point lookup or sorted read alike, and takes a
    // free one.
    for held in [
        "SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT",
        "SELECT id FROM jobs ORDER BY payload FOR SHARE NOWAIT",
        "SELECT j.id FROM jobs j WHERE j.id = 2 FOR UPDATE OF j NOWAIT",
    ] {
        assert_eq!(error_code(&mut b, held), "55P03", "{held}");
    }
    assert_eq!(
        ids(&mut b, "SELECT id FROM jobs WHERE id = 5 FOR UPDATE NOWAIT"),
        [5]
    );
    // FOR UPDATE in a derived table locks (the statement is not read-only).
    assert_eq!(
        query(
            &mut b,
            "SELECT count(*) FROM (SELECT id FROM jobs FOR UPDATE SKIP LOCKED) s"
        ),
        vec![vec![Value::Int(17)]]
    );
    // REPEATABLE READ skips the same way.
    query_ok(&mut b, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(
        ids(
            &mut b,
            "SELECT id FROM jobs WHERE id < 6 ORDER BY payload FOR UPDATE SKIP LOCKED"
        ),
        [3, 4, 5]
    );
    query_ok(&mut b, "ROLLBACK");
    assert_eq!(
        error_code(
            &mut b,
            "SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE OF nosuch"
        ),
        "42P01"
    );
    // Once the holder ends, its rows are taken again.
    query_ok(&mut a, "COMMIT");
    assert_eq!(ids(&mut b, next_two), [1, 2]);
}

#[test]
fn locking_clauses_reach_where_postgresql_locks() {
    // Outcomes checked against PostgreSQL 15 with the same statements (two connections).
    let dir = tempfile::tempdir().unwrap();
    let (mut a, mut b) = two_sessions(dir.path());
    for statement in [
        "CREATE TABLE jobs (id int4 PRIMARY KEY, queue text, payload text)",
        "CREATE TABLE jd (job int4 PRIMARY KEY)",
        "INSERT INTO jobs SELECT g, 'q' || (g % 3), 'p' || g FROM generate_series(1, 20) g",
        "INSERT INTO jd VALUES (1), (2), (7)",
    ] {
        query_ok(&mut a, statement);
    }
    query_ok(&mut a, "BEGIN");
    // FOR UPDATE of a derived table locks the rows of the table inside it.
    assert_eq!(
        ids(
            &mut a,
            "SELECT id FROM (SELECT * FROM jobs WHERE id < 4) s FOR UPDATE"
        ),
        [1, 2, 3]
    );
    assert_eq!(
        error_code(&mut b, "SELECT id FROM jobs WHERE id = 2 FOR UPDATE NOWAIT"),
        "55P03"
    );
    // ... but not when a WHERE, join, ORDER BY or LIMIT outside it would have it lock rows
    // the statement does not return.
    assert_eq!(
        error_code(
            &mut b,
            "SELECT id FROM (SELECT * FROM jobs) s WHERE id = 5 FOR UPDATE"
        ),
        "0A000"
    );
    // A locking subquery in an expression makes its statement a writing one.
    assert_eq!(
        ids(
            &mut b,
            "SELECT id FROM jobs WHERE id = \
             (SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
        ),
        [4]
    );
    // Rows a correlated filter drops are not locked: the lock comes after the filter.
    query_ok(&mut b, "BEGIN");
    assert_eq!(
        ids(
            &mut b,
            "SELECT id FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM jd WHERE jd.job = j.id) \
             ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED"
        ),
        [4, 5]
    );
    assert_eq!(
        ids(
            &mut b,
            "SELECT id FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM jd WHERE jd.job = j.id) \
             AND id >= 7 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
        ),
        [8]
    );
    // 7, which the filter dropped, is free.
    assert_eq!(
        ids(&mut a, "SELECT id FROM jobs WHERE id = 7 FOR UPDATE NOWAIT"),
        [7]
    );
    query_ok(&mut b, "ROLLBACK");
    assert_eq!(
        error_code(
            &mut b,
            "SELECT j.id FROM jobs j LEFT JOIN jd ON jd.job = j.id FOR UPDATE OF jd"
        ),
        "0A000"
    );
    assert_eq!(
        ids(
            &mut b,
            "SELECT j.id FROM jobs j LEFT JOIN jd ON jd.job = j.id WHERE j.id = 10 \
             FOR UPDATE OF j"
        ),
        [10]
    );
    // FOR SHARE holders share; FOR UPDATE waits for them (here: NOWAIT fails).
    query_ok(&mut b, "BEGIN");
    assert_eq!(
        ids(&mut b, "SELECT id FROM jobs WHERE id = 10 FOR SHARE NOWAIT"),
        [10]
    );
    assert_eq!(
        ids(&mut a, "SELECT id FROM jobs WHERE id = 10 FOR SHARE NOWAIT"),
        [10]
    );
    assert_eq!(
        error_code(
            &mut b,
            "SELECT id FROM jobs WHERE id = 10 FOR UPDATE NOWAIT"
        ),
        "55P03"
    );
    query_ok(&mut b, "ROLLBACK");
    // The strongest clause that names a table wins, NOWAIT over SKIP LOCKED.
    assert_eq!(
        error_code(
            &mut b,
            "SELECT id FROM jobs WHERE id IN (1, 11) ORDER BY id \
             FOR SHARE SKIP LOCKED FOR UPDATE OF jobs NOWAIT"
        ),
        "55P03"
    );
    assert_eq!(
        ids(
            &mut b,
            "SELECT id FROM jobs WHERE id IN (1, 11) ORDER BY id FOR SHARE SKIP LOCKED"
        ),
        [11]
    );
    // With no FROM there is nothing to lock: the row comes back (sqlparser alone reads the
    // FOR as an alias), also inside a derived table whose rows are then locked by nothing.
    assert_eq!(ids(&mut b, "SELECT 7 FOR UPDATE NOWAIT"), [7]);
    assert_eq!(ids(&mut b, "SELECT 1 AS id FOR KEY SHARE"), [1]);
    assert_eq!(
        ids(
            &mut b,
            "SELECT id FROM (SELECT 3 AS id FOR UPDATE) s FOR UPDATE"
        ),
        [3]
    );
    query_ok(&mut a, "ROLLBACK");
}

#[test]
fn for_update_locks_rows_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s1, mut s2) = two_sessions(dir.path());
    query_ok(&mut s1, "CREATE TABLE t (id int4 PRIMARY KEY, v int4)");
    query_ok(&mut s1, "INSERT INTO t VALUES (1, 10), (2, 20)");
    assert!(explain(&mut s1, "SELECT v FROM t WHERE id = 1 FOR UPDATE").contains("(locking rows)"));
    query_ok(&mut s1, "BEGIN");
    assert_eq!(
        query(&mut s1, "SELECT v FROM t WHERE id = 1 FOR UPDATE"),
        vec![vec![Value::Int(10)]]
    );
    assert_eq!(
        query(&mut s1, "SELECT v FROM t WHERE v > 15 FOR UPDATE"),
        vec![vec![Value::Int(20)]]
    );
    query_ok(&mut s1, "COMMIT");

    // REPEATABLE READ, a row changed after the snapshot: a plain read sees the old version,
    // locking it fails.
    for locking in [
        "SELECT v FROM t WHERE id = 1 FOR UPDATE",
        "SELECT v FROM t WHERE v < 100 ORDER BY id FOR UPDATE",
        "SELECT t.v FROM generate_series(1, 1) g(x) JOIN t ON t.id = g.x FOR UPDATE",
    ] {
        query_ok(&mut s1, "BEGIN ISOLATION LEVEL REPEATABLE READ");
        let before = query(&mut s1, "SELECT v FROM t WHERE id = 1");
        query_ok(&mut s2, "UPDATE t SET v = v + 1 WHERE id = 1");
        assert_eq!(query(&mut s1, "SELECT v FROM t WHERE id = 1"), before);
        assert_eq!(error_code(&mut s1, locking), "40001", "{locking}");
        query_ok(&mut s1, "ROLLBACK");
    }
    // READ COMMITTED (the default): a row changed after the statement's snapshot and before
    // its lock is read again at its newest version, as PostgreSQL does; a row that no longer
    // passes the filter is left out.
    query_ok(&mut s1, "BEGIN");
    query_ok(&mut s2, "BEGIN");
    query_ok(&mut s2, "UPDATE t SET v = 50 WHERE id = 1");
    query_ok(&mut s2, "UPDATE t SET v = 1 WHERE id = 2");
    let waiting = std::thread::spawn(move || {
        let rows = query(
            &mut s1,
            "SELECT id, v FROM t WHERE v > 5 ORDER BY id FOR UPDATE",
        );
        (s1, rows)
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    query_ok(&mut s2, "COMMIT");
    let (mut s1, rows) = waiting.join().unwrap();
    assert_eq!(rows, vec![vec![Value::Int(1), Value::Int(50)]]);
    assert_eq!(
        query(&mut s1, "UPDATE t SET v = v + 1 WHERE id = 1 RETURNING v"),
        vec![vec![Value::Int(51)]]
    );
    query_ok(&mut s1, "COMMIT");
    assert_eq!(
        error_code(&mut s1, "SELECT count(*) FROM t FOR UPDATE"),
        "0A000"
    );
}

/// TPC-C's delivery: the oldest new order of a district, `ORDER BY` the key column after the
/// equal prefix with a LIMIT, is read in key order without a sort, and FOR UPDATE locks only
/// the row returned, not the district's others.
#[test]
fn order_by_the_key_after_an_equal_prefix_reads_in_order_and_locks_what_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (mut s1, mut s2) = two_sessions(dir.path());
    query_ok(
        &mut s1,
        "CREATE TABLE new_order (w int4, d int4, o int4, PRIMARY KEY (w, d, o))",
    );
    query_ok(
        &mut s1,
        "INSERT INTO new_order SELECT g % 2, g % 3, g FROM generate_series(1, 60) AS g",
    );
    let oldest = "SELECT o FROM new_order WHERE w = 1 AND d = 2 ORDER BY o LIMIT 1 FOR UPDATE";
    let plan = explain(&mut s1, oldest);
    assert!(!plan.contains("Sort"), "{plan}");
    // Not in key order: still sorted.
    let sorted = "SELECT o FROM new_order WHERE w = 1 ORDER BY o LIMIT 1";
    assert!(explain(&mut s1, sorted).contains("Sort"), "{sorted}");
    // In descending key order: read backward, no sort.
    let newest = "SELECT o FROM new_order WHERE w = 1 AND d = 2 ORDER BY o DESC LIMIT 1";
    let plan = explain(&mut s1, newest);
    assert!(
        plan.contains("Backward") && !plan.contains("Sort"),
        "{plan}"
    );
    assert_eq!(query(&mut s1, newest), vec![vec![Value::Int(59)]]);
    assert_eq!(
        query(
            &mut s1,
            "SELECT o FROM new_order WHERE w = 1 AND d = 2 ORDER BY d, o DESC LIMIT 2"
        ),
        vec![vec![Value::Int(59)], vec![Value::Int(53)]]
    );
    query_ok(&mut s1, "BEGIN");
    assert_eq!(query(&mut s1, oldest), vec![vec![Value::Int(5)]]);
    // On a fiber, a statement that meets a row lock suspends (`Step::Wait`) instead of
    // blocking: only the row the FOR UPDATE returned is locked.
    let mut other_row = Fiber::new(|| {
        query_ok(
            &mut s2,
            "DELETE FROM new_order WHERE w = 1 AND d = 2 AND o = 11",
        )
    });
    assert!(matches!(other_row.resume(), Step::Done(_)));
    drop(other_row);
    let mut locked_row = Fiber::new(|| {
        s2.execute_sql("DELETE FROM new_order WHERE w = 1 AND d = 2 AND o = 5")
            .pop()
            .unwrap()
    });
    assert!(matches!(locked_row.resume(), Step::Wait(_)));
    query_ok(&mut s1, "COMMIT");
    let deleted = loop {
        if let Step::Done(result) = locked_row.resume() {
            break result;
        }
    };
    assert!(deleted.is_ok(), "{deleted:?}");
}

/// A primary key bound partly by a constant of the right table's own filter and partly by
/// the join (TPC-C's stock-level: `s_w_id = ? AND s_i_id = ol_i_id`) is an index nested
/// loop, with the rows of a hash join over the same data.
#[test]
fn index_join_on_a_key_bound_by_a_constant_and_the_join() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    for sql in [
        "CREATE TABLE stock (w int4, i int4, q int4, PRIMARY KEY (w, i))",
        "INSERT INTO stock SELECT g % 3, g / 3, g % 17 FROM generate_series(0, 2999) AS g",
        "CREATE TABLE lines (id int4 PRIMARY KEY, w int4, i int4)",
        "INSERT INTO lines SELECT g, g % 3, (g * 7) % 1100 FROM generate_series(1, 400) AS g",
        "CREATE TABLE stock_copy (w int4, i int4, q int4)",
        "INSERT INTO stock_copy SELECT * FROM stock",
    ] {
        s.execute_sql(sql).pop().unwrap().unwrap();
    }
    let sql = "SELECT count(DISTINCT stock.i), count(*) FROM lines, stock \
               WHERE lines.id < 300 AND stock.w = 1 AND stock.i = lines.i AND stock.q < 9";
    let plan = explain(&mut s, sql);
    assert!(
        plan.contains("Index Nested Loop Inner Join: primary key lookup on stock"),
        "{plan}"
    );
    let copy = sql.replace("stock", "stock_copy");
    assert!(!explain(&mut s, &copy).contains("Index Nested Loop"));
    let rows = query(&mut s, sql);
    assert_eq!(rows, query(&mut s, &copy));
    assert_ne!(rows[0][1], Value::Int(0), "the test should join some rows");
}

#[test]
fn lock_lists_and_key_strengths_as_postgresql() {
    // Outcomes checked against PostgreSQL 15 with the same statements (two connections).
    let dir = tempfile::tempdir().unwrap();
    let (mut a, mut b) = two_sessions(dir.path());
    query_ok(&mut a, "CREATE TABLE pa (id int4 PRIMARY KEY, x int4)");
    query_ok(&mut a, "CREATE TABLE pb (id int4 PRIMARY KEY, y int4)");
    query_ok(&mut a, "CREATE TABLE pc (id int4 PRIMARY KEY, z int4)");
    query_ok(&mut a, "INSERT INTO pa VALUES (1, 1), (2, 2)");
    query_ok(&mut a, "INSERT INTO pb VALUES (1, 10), (2, 20)");
    query_ok(&mut a, "INSERT INTO pc VALUES (1, 100), (2, 200)");
    let held = |b: &mut Session, table: &str, id: i64| {
        let sql = format!("SELECT id FROM {table} WHERE id = {id} FOR UPDATE NOWAIT");
        match b.execute_sql(&sql).pop().unwrap() {
            Ok(_) => false,
            Err(error) if error.code == "55P03" => true,
            Err(error) => panic!("{sql}: {error}"),
        }
    };
    // OF a list: each table named is locked, the others are not.
    query_ok(&mut a, "BEGIN");
    assert_eq!(
        ids(
            &mut a,
            "SELECT pa.id FROM pa JOIN pb USING (id) JOIN pc USING (id) WHERE pa.id = 1 \
             FOR UPDATE OF pa, pb"
        ),
        [1]
    );
    assert!(held(&mut b, "pa", 1));
    assert!(held(&mut b, "pb", 1));
    assert!(!held(&mut b, "pc", 1));
    assert!(!held(&mut b, "pa", 2));
    query_ok(&mut a, "ROLLBACK");
    // Aliases, NOWAIT after the list, and lists in two clauses of different strengths.
    query_ok(&mut a, "BEGIN");
    assert_eq!(
        ids(
            &mut a,
            "SELECT x.id FROM pa x, pb y, pc z WHERE x.id = 2 AND y.id = 2 AND z.id = 2 \
             FOR SHARE OF x, y NOWAIT FOR UPDATE OF z"
        ),
        [2]
    );
    assert!(held(&mut b, "pa", 2));
    assert!(held(&mut b, "pc", 2));
    // A share lock lets another share lock through.
    assert_eq!(
        ids(&mut b, "SELECT id FROM pb WHERE id = 2 FOR SHARE NOWAIT"),
        [2]
    );
    query_ok(&mut a, "ROLLBACK");
    // A name in the list that is not in FROM is refused, as PostgreSQL does.
    assert_eq!(
        error_code(&mut a, "SELECT pa.id FROM pa FOR UPDATE OF pa, nowhere"),
        "42P01"
    );
    // FOR NO KEY UPDATE conflicts with FOR UPDATE; FOR KEY SHARE with FOR UPDATE but not
    // with FOR SHARE.
    query_ok(&mut a, "BEGIN");
    assert_eq!(
        ids(&mut a, "SELECT id FROM pa WHERE id = 1 FOR NO KEY UPDATE"),
        [1]
    );
    assert_eq!(
        ids(&mut a, "SELECT id FROM pb WHERE id = 1 FOR KEY SHARE OF pb"),
        [1]
    );
    assert!(held(&mut b, "pa", 1));
    assert!(held(&mut b, "pb", 1));
    assert_eq!(
        ids(&mut b, "SELECT id FROM pb WHERE id = 1 FOR SHARE NOWAIT"),
        [1]
    );
    query_ok(&mut a, "ROLLBACK");
    assert!(!held(&mut b, "pa", 1));
}

/// Runs statements, each of which must succeed.
fn run_all(session: &mut Session, statements: &str) {
    for outcome in session.execute_sql(statements) {
        outcome.unwrap_or_else(|error| panic!("{statements}: {error}"));
    }
}

/// A parent row (id, group) and a child row (id, parent id, quantity) of the model.
type Parent = (i64, i64);
type Child = (i64, Option<i64>, i64);

/// A join through a secondary index: each row of the outer side looks its matches up in the
/// index on the inner table's join column (an ORM's parent-to-children join) when the outer
/// side is a narrow read or, with statistics, when that is estimated cheaper than the hash
/// join's scan of the inner table. Results equal the model's whatever the plan: NULL keys
/// match nothing, a LEFT JOIN keeps its unmatched rows, a partial index is used only when
/// the inner table's filter implies its predicate.
#[test]
fn joins_look_rows_up_through_a_secondary_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    run_all(
        &mut s,
        "CREATE TABLE parent (id int4 PRIMARY KEY, grp int4); \
         CREATE TABLE child (id int4 PRIMARY KEY, parent_id int8, qty int4); \
         CREATE INDEX child_parent ON child (parent_id); \
         CREATE INDEX child_big ON child (qty) WHERE qty > 900; \
         INSERT INTO parent SELECT i, i % 30 FROM generate_series(1, 300) AS i; \
         INSERT INTO child SELECT i, CASE WHEN i % 17 = 0 THEN NULL ELSE i % 320 + 1 END, \
             i % 1000 FROM generate_series(1, 3000) AS i",
    );
    let parents: Vec<Parent> = (1..=300).map(|id| (id, id % 30)).collect();
    let children: Vec<Child> = (1..=3000)
        .map(|id| ((id), (id % 17 != 0).then_some(id % 320 + 1), id % 1000))
        .collect();
    // (parent, child) pairs of the parents `keep` accepts and children `matches` accepts.
    let pairs =
        |keep: &dyn Fn(&Parent) -> bool, matches: &dyn Fn(&Parent, &Child) -> bool, left: bool| {
            let mut rows = Vec::new();
            for parent in parents.iter().filter(|p| keep(p)) {
                let found: Vec<_> = children.iter().filter(|c| matches(parent, c)).collect();
                if found.is_empty() && left {
                    rows.push(vec![Value::Int(parent.0), Value::Null]);
                }
                for child in found {
                    rows.push(vec![Value::Int(parent.0), Value::Int(child.0)]);
                }
            }
            sorted(rows)
        };
    let by_parent = |p: &Parent, c: &Child| c.1 == Some(p.0);
    let lookup = "Index Nested Loop Inner Join: lookup on child using child_parent";

    // Points on the outer side: their children through the index. (With `p.id = 7` the
    // children's own read would be a lookup of 7, implied through the equality.)
    let point = "SELECT p.id, c.id FROM parent p JOIN child c ON c.parent_id = p.id \
                 WHERE p.id IN (7, 8, 9)";
    assert_eq!(
        sorted(query(&mut s, point)),
        pairs(&|p| (7..=9).contains(&p.0), &by_parent, false)
    );
    assert!(
        explain(&mut s, point).contains(lookup),
        "{}",
        explain(&mut s, point)
    );
    // A LEFT JOIN with a condition on the inner table: unmatched parents kept.
    let left = "SELECT p.id, c.id FROM parent p LEFT JOIN child c \
                ON c.parent_id = p.id AND c.qty > 990 WHERE p.id IN (298, 299)";
    let expected = pairs(
        &|p| p.0 == 298 || p.0 == 299,
        &|p, c| by_parent(p, c) && c.2 > 990,
        true,
    );
    assert_eq!(sorted(query(&mut s, left)), expected);
    assert!(explain(&mut s, left).contains("Index Nested Loop Left Join: lookup on child"));
    let left_none = left.replace("990", "998");
    assert_eq!(
        sorted(query(&mut s, &left_none)),
        vec![
            vec![Value::Int(298), Value::Null],
            vec![Value::Int(299), Value::Null]
        ]
    );
    // Without statistics a scan on the outer side joins by hashing.
    let group =
        "SELECT p.id, c.id FROM parent p JOIN child c ON c.parent_id = p.id WHERE p.grp = 3";
    let expected = pairs(&|p| p.1 == 3, &by_parent, false);
    assert_eq!(sorted(query(&mut s, group)), expected);
    assert!(explain(&mut s, group).contains("Hash Inner Join"));
    // A partial index serves only a filter that implies its predicate.
    let by_qty = |p: &Parent, c: &Child| c.2 == p.0 + 900;
    let partial = "SELECT p.id, c.id FROM parent p JOIN child c ON c.qty = p.id + 900 \
                   WHERE p.id IN (50, 51)";
    let in_50_51 = |p: &Parent| p.0 == 50 || p.0 == 51;
    assert_eq!(
        sorted(query(&mut s, partial)),
        pairs(&in_50_51, &by_qty, false)
    );
    assert!(!explain(&mut s, partial).contains("child_big"));
    let implied = format!("{partial} AND c.qty > 900");
    assert_eq!(
        sorted(query(&mut s, &implied)),
        pairs(&in_50_51, &by_qty, false)
    );
    assert!(explain(&mut s, &implied).contains("lookup on child using child_big"));

    // With statistics, by cost: 10 parents' lookups cost less than reading every child...
    run_all(&mut s, "ANALYZE");
    assert_eq!(sorted(query(&mut s, group)), expected);
    assert!(
        explain(&mut s, group).contains(lookup),
        "{}",
        explain(&mut s, group)
    );
    // ... written the other way round too: the 10 parents go first.
    let reversed = "SELECT p.id, c.id FROM child c JOIN parent p ON c.parent_id = p.id \
                    WHERE p.grp = 3";
    assert_eq!(sorted(query(&mut s, reversed)), expected);
    assert!(explain(&mut s, reversed).contains(lookup));
    // ... but every parent's lookups cost more than one scan of the children.
    let all = "SELECT p.id, c.id FROM parent p JOIN child c ON c.parent_id = p.id";
    assert_eq!(
        sorted(query(&mut s, all)),
        pairs(&|_| true, &by_parent, false)
    );
    assert!(explain(&mut s, all).contains("Hash Inner Join"));
}

/// With statistics, a small table no key narrows goes first only when the next table's rows
/// are then looked up, not read whole: a star join's dimension (each product matching a
/// tenth of the lines) stays after the fact table, which is not hashed.
#[test]
fn a_small_table_goes_first_only_when_it_narrows_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    run_all(
        &mut s,
        "CREATE TABLE line (id int4 PRIMARY KEY, product int4, qty int4); \
         CREATE INDEX line_product ON line (product); \
         CREATE TABLE product (id int4 PRIMARY KEY, name text); \
         INSERT INTO product SELECT i, 'p' || i FROM generate_series(1, 10) AS i; \
         INSERT INTO line SELECT i, i % 10 + 1, i FROM generate_series(1, 5000) AS i; \
         ANALYZE",
    );
    let star = "SELECT count(*), sum(l.qty) FROM line l JOIN product p ON l.product = p.id";
    let plan = explain(&mut s, star);
    assert!(
        plan.contains("Index Nested Loop Inner Join: primary key lookup on product"),
        "{plan}"
    );
    assert_eq!(
        query(&mut s, star),
        vec![vec![Value::Int(5000), Value::Int(12_502_500)]]
    );
}

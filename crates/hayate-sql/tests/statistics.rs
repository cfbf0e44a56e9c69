//! Planner statistics: ANALYZE and the automatic analysis fill pg_stats, pg_class.reltuples
//! and pg_stat_user_tables; access paths and the first table of a join are chosen by the
//! estimated cost; statistics survive a restart and end with their rows (TRUNCATE).

use hayate_sql::plan::Access;
use hayate_sql::{Catalog, DataType, Outcome, Session, Value};

use crate::common::{self, error_code, explain, prepared_access, rows, run, texts};

/// `t`: 1,000 rows; `status` 'open' in 980 of them and 'closed' in 20, `n` = id % 50 but
/// NULL in every tenth row, `a` = id % 2, `b` = id; an index on each of those four.
fn table_t(session: &mut Session) {
    run(
        session,
        "CREATE TABLE t (id int4 PRIMARY KEY, status text, n int4, a int4, b int4)",
    );
    run(
        session,
        "INSERT INTO t SELECT i, CASE WHEN i % 50 = 0 THEN 'closed' ELSE 'open' END, \
         CASE WHEN i % 10 = 0 THEN NULL ELSE i % 50 END, i % 2, i \
         FROM generate_series(1, 1000) AS i",
    );
    for column in ["status", "n", "a", "b"] {
        run(session, &format!("CREATE INDEX t_{column} ON t ({column})"));
    }
}

fn one(session: &mut Session, sql: &str) -> Value {
    rows(session, sql).remove(0).remove(0)
}

fn tag(session: &mut Session, sql: &str) -> String {
    match run(session, sql) {
        Outcome::Command { tag } => tag,
        other => panic!("{sql}: {other:?}"),
    }
}

#[test]
fn analyze_fills_pg_stats_reltuples_and_the_table_counters() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut s) = common::open(dir.path());
    table_t(&mut s);
    let reltuples = "SELECT reltuples FROM pg_class WHERE relname = 't'";
    assert_eq!(one(&mut s, reltuples), Value::Float(-1.0));
    assert!(rows(&mut s, "SELECT * FROM pg_stats WHERE tablename = 't'").is_empty());
    assert_eq!(tag(&mut s, "ANALYZE t"), "ANALYZE");
    assert_eq!(one(&mut s, reltuples), Value::Float(1000.0));
    let status = rows(
        &mut s,
        "SELECT null_frac, avg_width, n_distinct, most_common_vals, most_common_freqs \
         FROM pg_stats WHERE tablename = 't' AND attname = 'status'",
    );
    assert_eq!(
        status,
        vec![vec![
            Value::Float4(0.0),
            Value::Int(4),
            Value::Float4(2.0),
            Value::Text("{open,closed}".into()),
            Value::Text("{0.98,0.02}".into()),
        ]]
    );
    let n = rows(
        &mut s,
        "SELECT null_frac, n_distinct FROM pg_stats WHERE tablename = 't' AND attname = 'n'",
    );
    assert_eq!(n, vec![vec![Value::Float4(0.1), Value::Float4(45.0)]]);
    // Every id once: distinct values grow with the rows (-1: as many as rows); a histogram.
    let id = rows(
        &mut s,
        "SELECT n_distinct, most_common_vals IS NULL, histogram_bounds \
         FROM pg_stats WHERE tablename = 't' AND attname = 'id'",
    );
    assert_eq!(id[0][0], Value::Float4(-1.0));
    assert_eq!(id[0][1], Value::Bool(true));
    let bounds = id[0][2].to_text().unwrap();
    assert!(
        bounds.starts_with("{1,") && bounds.ends_with(",1000}"),
        "{bounds}"
    );
    let counters = "SELECT analyze_count, last_analyze IS NOT NULL, n_mod_since_analyze, \
                    n_live_tup, autoanalyze_count FROM pg_stat_user_tables WHERE relname = 't'";
    let row = rows(&mut s, counters).remove(0);
    assert_eq!(
        row,
        vec![
            Value::Int(1),
            Value::Bool(true),
            Value::Int(0),
            Value::Int(1000),
            Value::Int(0)
        ]
    );
    run(&mut s, "DELETE FROM t WHERE id > 990");
    run(&mut s, "UPDATE t SET n = 1 WHERE id <= 5");
    assert_eq!(
        one(
            &mut s,
            "SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 't'"
        ),
        Value::Int(15)
    );
    // VACUUM ANALYZE analyzes (its tag is VACUUM's); VACUUM alone does not; ANALYZE of every
    // table; a table that does not exist.
    assert_eq!(tag(&mut s, "VACUUM (VERBOSE, ANALYZE) t"), "VACUUM");
    assert_eq!(one(&mut s, reltuples), Value::Float(990.0));
    assert_eq!(tag(&mut s, "VACUUM t"), "VACUUM");
    run(&mut s, "CREATE TABLE u (k int4)");
    assert_eq!(tag(&mut s, "analyze"), "ANALYZE");
    assert_eq!(
        one(
            &mut s,
            "SELECT sum(analyze_count)::int8 FROM pg_stat_user_tables"
        ),
        Value::Int(4)
    );
    assert_eq!(error_code(&mut s, "ANALYZE t, nosuch"), "42P01");
    assert_eq!(error_code(&mut s, "ANALYZE t (status, nope)"), "42703");
    assert_eq!(tag(&mut s, "ANALYZE public.t (status, n), u"), "ANALYZE");
}

#[test]
fn statistics_choose_between_indexes_and_a_full_scan() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut s) = common::open(dir.path());
    table_t(&mut s);
    let open = "SELECT count(*) FROM t WHERE status = 'open'";
    let closed = "SELECT count(*) FROM t WHERE status = 'closed'";
    let both = "SELECT count(*) FROM t WHERE a = 1 AND b = 7";
    let most = "SELECT count(*) FROM t WHERE b > 3";
    // Without statistics: by shape, an index whenever one compares a column.
    assert!(explain(&mut s, open).contains("Index Lookup on t using t_status"));
    assert!(explain(&mut s, both).contains("Index Lookup on t using t_a"));
    assert!(explain(&mut s, most).contains("Index Range Scan on t using t_b"));
    run(&mut s, "ANALYZE t");
    // 98% of the rows: a scan; 2%: the index.
    let plan = explain(&mut s, open);
    assert!(
        plan.contains("Full Scan on t (estimated 980 rows)"),
        "{plan}"
    );
    let plan = explain(&mut s, closed);
    assert!(plan.contains("Index Lookup on t using t_status"), "{plan}");
    assert!(plan.contains("(estimated 20 rows)"), "{plan}");
    // b = 7 finds one row, a = 1 half of them.
    let plan = explain(&mut s, both);
    assert!(plan.contains("Index Lookup on t using t_b"), "{plan}");
    let plan = explain(&mut s, most);
    assert!(plan.contains("Full Scan on t"), "{plan}");
    let plan = explain(&mut s, "SELECT * FROM t WHERE b > 995");
    assert!(plan.contains("Index Range Scan on t using t_b"), "{plan}");
    // The rows are the same whichever path reads them.
    assert_eq!(one(&mut s, open), Value::Int(980));
    assert_eq!(one(&mut s, closed), Value::Int(20));
    assert_eq!(one(&mut s, both), Value::Int(1));
    assert_eq!(one(&mut s, most), Value::Int(997));
    // A parameter's value is not known: equality on status is half the rows (2 values).
    run(
        &mut s,
        "PREPARE by_status(text) AS SELECT count(*) FROM t WHERE status = $1",
    );
    assert_eq!(one(&mut s, "EXECUTE by_status('closed')"), Value::Int(20));
}

#[test]
fn parameters_are_planned_as_narrow() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut s) = common::open(dir.path());
    table_t(&mut s);
    run(&mut s, "ANALYZE t");
    let index = |access: &Access| match access {
        Access::Index(path) => Some(path.index),
        _ => None,
    };
    let text = [DataType::Text];
    let int = [DataType::Int4];
    // status = $1 may be the rare 'closed' (2%): the index (as 'open' would not be).
    let access = prepared_access(&s, "SELECT id FROM t WHERE status = $1", &text);
    assert_eq!(index(&access), Some(0), "{access:?}");
    // b > $1 may be near the end: the index's range.
    let access = prepared_access(&s, "SELECT id FROM t WHERE b > $1", &int);
    assert_eq!(index(&access), Some(3), "{access:?}");
    // a = $1 is half the rows whichever value it is: a scan.
    let access = prepared_access(&s, "SELECT id FROM t WHERE a = $1", &int);
    assert_eq!(access, Access::Full);
    // A table analyzed while empty plans as one never analyzed.
    run(&mut s, "CREATE TABLE e (id int4 PRIMARY KEY, a int4)");
    run(&mut s, "CREATE INDEX e_a ON e (a)");
    run(&mut s, "ANALYZE e");
    run(&mut s, "INSERT INTO e VALUES (1, 1), (2, 1)");
    let access = prepared_access(&s, "SELECT id FROM e WHERE a = $1", &int);
    assert_eq!(index(&access), Some(0), "{access:?}");
}

#[test]
fn a_join_starts_with_the_table_estimated_to_return_fewest_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut s) = common::open(dir.path());
    run(&mut s, "CREATE TABLE big (id int4 PRIMARY KEY, x int4)");
    run(
        &mut s,
        "CREATE TABLE mid (id int4 PRIMARY KEY, x int4, k int4)",
    );
    run(
        &mut s,
        "CREATE TABLE few (id int4 PRIMARY KEY, k int4, m int4)",
    );
    run(&mut s, "CREATE INDEX mid_k ON mid (k)");
    run(&mut s, "CREATE INDEX few_m ON few (m)");
    run(
        &mut s,
        "INSERT INTO big SELECT i, i % 100 FROM generate_series(1, 2000) AS i",
    );
    // mid.k = 10 in 5% of mid's rows (an index lookup still costs less than a scan);
    // few.m = 5 in one of few's (whose k is 10).
    run(
        &mut s,
        "INSERT INTO mid SELECT i, i % 100, CASE WHEN i % 20 = 0 THEN 10 ELSE i + 1000 END \
         FROM generate_series(1, 1000) AS i",
    );
    run(
        &mut s,
        "INSERT INTO few SELECT i, i * 2, i FROM generate_series(1, 500) AS i",
    );
    let query = "SELECT count(*) FROM big, mid, few \
                 WHERE big.x = mid.x AND mid.k = few.k AND mid.k = 10 AND few.m = 5";
    let first_read = |s: &mut Session| {
        let plan = explain(s, query);
        let line = (plan.lines())
            .find(|line| line.contains("Lookup on") || line.contains("Scan on"))
            .unwrap_or_default()
            .to_string();
        (line, plan)
    };
    // By shape both index lookups are alike: the first written (mid) goes first.
    let (line, plan) = first_read(&mut s);
    assert!(line.contains("on mid"), "{plan}");
    let before = one(&mut s, query);
    run(&mut s, "ANALYZE");
    let (line, plan) = first_read(&mut s);
    assert!(line.contains("on few using few_m"), "{plan}");
    // mid read through its index for k = 10 (a constant says more than few's k per row).
    assert!(
        plan.contains("on mid using mid_k (estimated 50 rows)"),
        "{plan}"
    );
    assert_eq!(one(&mut s, query), before);
}

#[test]
fn statistics_survive_a_restart_and_end_with_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let reltuples = "SELECT reltuples FROM pg_class WHERE relname = 't'";
    {
        let (_db, mut s) = common::open(dir.path());
        table_t(&mut s);
        run(&mut s, "ANALYZE t");
    }
    let (_db, mut s) = common::open(dir.path());
    assert_eq!(one(&mut s, reltuples), Value::Float(1000.0));
    let plan = explain(&mut s, "SELECT count(*) FROM t WHERE status = 'open'");
    assert!(
        plan.contains("Full Scan on t (estimated 980 rows)"),
        "{plan}"
    );
    // A column added since has none (after the next analysis); the others keep theirs.
    // ADD COLUMN writes the rows anew: no statistics until then, the rows copied count
    // toward the automatic one.
    run(&mut s, "ALTER TABLE t ADD COLUMN extra int4");
    assert_eq!(one(&mut s, reltuples), Value::Float(-1.0));
    let modified = "SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 't'";
    assert_eq!(one(&mut s, modified), Value::Int(1000));
    run(&mut s, "ANALYZE t");
    run(&mut s, "ALTER TABLE t ALTER COLUMN status TYPE varchar(10)");
    assert_eq!(
        texts(
            &mut s,
            "SELECT attname FROM pg_stats WHERE tablename = 't' ORDER BY attname"
        ),
        ["a", "b", "extra", "id", "n"]
    );
    // TRUNCATE: new, empty rows, no statistics of the old ones.
    run(&mut s, "TRUNCATE t");
    assert_eq!(one(&mut s, reltuples), Value::Float(-1.0));
    assert!(rows(&mut s, "SELECT * FROM pg_stats").is_empty());
}

#[test]
fn tables_are_analyzed_automatically_once_enough_rows_changed() {
    let dir = tempfile::tempdir().unwrap();
    let db = hayate_engine::Database::open(dir.path(), Default::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut s = Session::new(catalog.clone(), "tester");
    run(&mut s, "CREATE TABLE q (id int4 PRIMARY KEY, v text)");
    run(
        &mut s,
        "INSERT INTO q SELECT i, 'x' FROM generate_series(1, 40) AS i",
    );
    // 40 rows changed: not more than 50.
    assert!(catalog.autoanalyze(&|| false).is_empty());
    run(&mut s, "INSERT INTO q VALUES (41, 'y'), (42, 'y')");
    run(&mut s, "UPDATE q SET v = 'z' WHERE id <= 9");
    assert_eq!(catalog.autoanalyze(&|| false), ["q"]);
    let counters = "SELECT autoanalyze_count, last_autoanalyze IS NOT NULL, analyze_count, \
                    n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'q'";
    assert_eq!(
        rows(&mut s, counters),
        vec![vec![
            Value::Int(1),
            Value::Bool(true),
            Value::Int(0),
            Value::Int(0)
        ]]
    );
    assert_eq!(
        one(&mut s, "SELECT reltuples FROM pg_class WHERE relname = 'q'"),
        Value::Float(42.0)
    );
    // Now 50 + 10% of 42 rows must change: 54 do not make it due, 55 do.
    run(&mut s, "UPDATE q SET v = 'w' WHERE id <= 42");
    run(&mut s, "UPDATE q SET v = 'v' WHERE id <= 12");
    assert!(catalog.autoanalyze(&|| false).is_empty());
    run(&mut s, "DELETE FROM q WHERE id = 1");
    assert_eq!(catalog.autoanalyze(&|| false), ["q"]);
    assert_eq!(
        one(&mut s, "SELECT reltuples FROM pg_class WHERE relname = 'q'"),
        Value::Float(41.0)
    );
}

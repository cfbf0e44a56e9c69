//! Operators past `work_mem`: the same ORDER BY, join, GROUP BY and DISTINCT queries with
//! `work_mem = '64kB'` (many runs and partitions) and with a work memory that holds
//! everything give the same rows; the small one really wrote temporary files, and none are
//! left afterwards. The data has NULLs and many duplicate keys.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, Value};

/// Rows of `t`; with a few columns of text, enough to need dozens of 64 kB runs.
const ROWS: i64 = 20_000;

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    db: Database,
    session: Session,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db.clone()).unwrap();
    let mut session = Session::new(catalog, "tester");
    // g: 0..99 with NULL every 7th row; k: 0..4999 with NULL every 11th; s: text.
    for sql in [
        "CREATE TABLE t (id int PRIMARY KEY, g int, k int, s text, f float8)",
        "INSERT INTO t SELECT i, CASE WHEN i % 7 = 0 THEN NULL ELSE i % 100 END, \
         CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 7919) % 5000 END, \
         'row number ' || CAST((i * 104729) % 20000 AS text), i * 0.5 \
         FROM generate_series(1, 20000) i",
        "CREATE TABLE u (id int PRIMARY KEY, k int, label text)",
        "INSERT INTO u SELECT i, CASE WHEN i % 13 = 0 THEN NULL ELSE i % 4000 END, \
         'label ' || CAST(i AS text) FROM generate_series(1, 8000) i",
    ] {
        execute(&mut session, sql);
    }
    Fixture {
        path: dir.path().to_path_buf(),
        _dir: dir,
        db,
        session,
    }
}

fn execute(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(Outcome::Rows { rows, .. }) => rows,
        Ok(Outcome::Command { .. }) => Vec::new(),
        Err(error) => panic!("{sql}: {error}"),
    }
}

fn temp_files(path: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(path)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("temp."))
        .collect()
}

fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by_key(|row| format!("{row:?}"));
    rows
}

/// Runs `sql` with a large and a small work_mem; returns both results and the temporary
/// bytes the small one wrote, checking that no temporary file is left.
fn both(fixture: &mut Fixture, sql: &str) -> (Vec<Vec<Value>>, Vec<Vec<Value>>, u64) {
    execute(&mut fixture.session, "SET work_mem = '1GB'");
    let before = fixture.db.temp().stats();
    let in_memory = execute(&mut fixture.session, sql);
    assert_eq!(
        fixture.db.temp().stats().bytes_written,
        before.bytes_written,
        "{sql}: 1GB of work_mem spilled"
    );
    execute(&mut fixture.session, "SET work_mem = '64kB'");
    let before = fixture.db.temp().stats();
    let spilled = execute(&mut fixture.session, sql);
    let after = fixture.db.temp().stats();
    assert!(
        after.bytes_read > before.bytes_read,
        "{sql}: nothing read back"
    );
    assert_eq!(temp_files(&fixture.path), Vec::<String>::new(), "{sql}");
    (
        in_memory,
        spilled,
        after.bytes_written - before.bytes_written,
    )
}

/// The query must spill several runs' worth and give the same rows in the same order.
fn same_order(fixture: &mut Fixture, sql: &str, rows: usize) {
    let (in_memory, spilled, written) = both(fixture, sql);
    assert_eq!(in_memory.len(), rows, "{sql}");
    assert!(
        written > 4 * 64 * 1024,
        "{sql}: only {written} bytes spilled"
    );
    assert!(in_memory == spilled, "{sql}: spilled rows differ");
}

/// The same rows in any order (a spilled hash join or aggregation emits partition by
/// partition).
fn same_rows(fixture: &mut Fixture, sql: &str, rows: usize) {
    let (in_memory, spilled, written) = both(fixture, sql);
    assert_eq!(in_memory.len(), rows, "{sql}");
    assert!(written > 0, "{sql}: nothing spilled");
    assert!(
        sorted(in_memory) == sorted(spilled),
        "{sql}: spilled rows differ"
    );
}

#[test]
fn order_by_spills_to_sorted_runs_with_the_same_order() {
    let mut fixture = fixture();
    same_order(&mut fixture, "SELECT * FROM t ORDER BY k, s", 20_000);
    // Descending with NULLs first, duplicate keys in input order (the sort is stable).
    same_order(&mut fixture, "SELECT id, g FROM t ORDER BY g DESC", 20_000);
    same_order(
        &mut fixture,
        "SELECT id, g, s FROM t ORDER BY g NULLS FIRST, s DESC LIMIT 15000",
        15_000,
    );
    let rows = execute(&mut fixture.session, "SELECT g FROM t ORDER BY g DESC");
    assert_eq!(rows[0], vec![Value::Null], "NULLs first when descending");
    assert_eq!(rows[rows.len() - 1], vec![Value::Int(0)]);
}

#[test]
fn joins_spill_to_partitions_and_sorted_runs() {
    let mut fixture = fixture();
    // t.k has NULLs and duplicates, u.k too: a hash join (equality on non-key columns).
    let inner = "SELECT t.id, u.id, t.k FROM t JOIN u ON t.k = u.k";
    let expected = execute(
        &mut fixture.session,
        &format!("SELECT count(*) FROM ({inner}) j"),
    );
    let Value::Int(count) = expected[0][0] else {
        panic!("{expected:?}")
    };
    assert!(count > 10_000, "{count}");
    same_rows(&mut fixture, inner, count as usize);
    // LEFT JOIN with a residual condition: unmatched rows padded, NULL keys kept.
    let left = "SELECT t.id, u.label FROM t LEFT JOIN u ON t.k = u.k AND u.id % 2 = 0";
    let rows = execute(&mut fixture.session, left).len();
    assert!(rows > 20_000, "{rows}");
    same_rows(&mut fixture, left, rows);
    // A sort-merge join: both sides ordered on their primary keys.
    let merge = "SELECT t.id, t.s, u.label FROM t JOIN u ON t.id = u.id";
    let plan = execute(&mut fixture.session, &format!("EXPLAIN {merge}"));
    assert!(format!("{plan:?}").contains("Merge"), "{plan:?}");
    same_order(&mut fixture, merge, 8_000);
    same_order(
        &mut fixture,
        "SELECT t.id, u.label FROM t LEFT JOIN u ON t.id = u.id",
        20_000,
    );
}

#[test]
fn group_by_and_distinct_spill_with_the_same_results() {
    let mut fixture = fixture();
    // 5,000 groups (and a NULL group) of count, sum, avg, min, max.
    same_rows(
        &mut fixture,
        "SELECT k, count(*), sum(id), avg(f), min(s), max(s) FROM t GROUP BY k",
        5_001,
    );
    same_rows(
        &mut fixture,
        "SELECT s, g, count(k) FROM t GROUP BY s, g",
        20_000,
    );
    // DISTINCT keeps the first row of each key in input order, spilled or not.
    same_order(&mut fixture, "SELECT DISTINCT s FROM t", 20_000);
    same_order(
        &mut fixture,
        "SELECT DISTINCT k, s FROM t ORDER BY k, s",
        20_000,
    );
    let (in_memory, spilled, _) = both(&mut fixture, "SELECT DISTINCT k FROM t");
    assert_eq!(in_memory.len(), 5_001);
    assert!(in_memory == spilled);
    let (in_memory, spilled, _) = both(
        &mut fixture,
        "SELECT DISTINCT ON (g) g, s FROM t ORDER BY g, s DESC",
    );
    assert_eq!(in_memory.len(), 101, "0..99 and NULL");
    assert!(in_memory == spilled);
    assert_eq!(ROWS, 20_000);
}

#[test]
fn work_mem_is_checked_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = Session::new(catalog, "tester");
    assert_eq!(
        execute(&mut session, "SHOW work_mem"),
        vec![vec![Value::Text("4MB".into())]]
    );
    for bad in ["SET work_mem = '4 parsecs'", "SET work_mem = '1kB'"] {
        let error = session.execute_sql(bad).pop().unwrap().unwrap_err();
        assert_eq!(error.code, "22023", "{bad}");
    }
    execute(&mut session, "SET work_mem = '64kB'");
    assert_eq!(
        execute(&mut session, "SHOW work_mem"),
        vec![vec![Value::Text("64kB".into())]]
    );
}

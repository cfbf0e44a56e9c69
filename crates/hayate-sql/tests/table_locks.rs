//! Rows committed by other sessions while a DDL rebuilds a table are not lost: writers hold
//! the table's write lock until their transaction ends, a DDL waits for them and holds new
//! writers off (`table_lock`). Writers insert, in autocommit and in multi-statement blocks,
//! while CREATE INDEX, ALTER TABLE ADD COLUMN and TRUNCATE run; afterwards every committed row
//! is found by a scan and through the index.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::plan::access::{IndexAccess, IndexLookup};
use hayate_sql::plan::{Access, Plan};
use hayate_sql::{parse, Catalog, Outcome, Session, SqlError, Value};

const PRELOADED: i64 = 40_000;
const WRITERS: i64 = 2;

fn try_run(session: &mut Session, sql: &str) -> Result<Outcome, SqlError> {
    let mut outcomes = session.execute_sql(sql);
    assert_eq!(outcomes.len(), 1, "{sql}");
    outcomes.pop().unwrap()
}

fn run(session: &mut Session, sql: &str) {
    try_run(session, sql).unwrap_or_else(|error| panic!("{sql}: {error}"));
}

fn count(session: &mut Session, sql: &str) -> i64 {
    match try_run(session, sql).unwrap_or_else(|error| panic!("{sql}: {error}")) {
        Outcome::Rows { rows, .. } => match rows[0][0] {
            Value::Int(n) => n,
            ref other => panic!("{sql}: {other:?}"),
        },
        other => panic!("{sql}: {other:?}"),
    }
}

/// Starts writers inserting rows (id = v, disjoint id ranges), half in autocommit, half in
/// blocks of three statements. Returns the stop flag, the count of committed rows and the
/// threads.
fn start_writers(
    catalog: &Arc<Catalog>,
    base: i64,
) -> (
    Arc<AtomicBool>,
    Arc<AtomicU64>,
    Vec<std::thread::JoinHandle<()>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let threads = (0..WRITERS)
        .map(|writer| {
            let catalog = catalog.clone();
            let stop = stop.clone();
            let committed = committed.clone();
            std::thread::spawn(move || {
                let mut session = Session::new(catalog, "writer");
                let mut id = base + writer * 10_000_000;
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) || round < 20 {
                    round += 1;
                    if round.is_multiple_of(2) {
                        id += 1;
                        run(
                            &mut session,
                            &format!("INSERT INTO t (id, v) VALUES ({id}, {id})"),
                        );
                        committed.fetch_add(1, Ordering::Relaxed);
                    } else {
                        run(&mut session, "BEGIN");
                        for _ in 0..3 {
                            id += 1;
                            run(
                                &mut session,
                                &format!("INSERT INTO t (id, v) VALUES ({id}, {id})"),
                            );
                        }
                        run(&mut session, "COMMIT");
                        committed.fetch_add(3, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    (stop, committed, threads)
}

fn wait_for(committed: &AtomicU64, rows: u64) {
    while committed.load(Ordering::Relaxed) < rows {
        std::thread::yield_now();
    }
}

fn finish(stop: Arc<AtomicBool>, threads: Vec<std::thread::JoinHandle<()>>) {
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn rows_committed_during_ddl_rebuilds_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut ddl = Session::new(catalog.clone(), "ddl");
    run(&mut ddl, "CREATE TABLE t (id int8 PRIMARY KEY, v int8)");
    run(
        &mut ddl,
        &format!("INSERT INTO t SELECT g, g FROM generate_series(1, {PRELOADED}) g"),
    );

    // CREATE INDEX and ALTER TABLE ADD COLUMN (a rewrite) with writers running.
    let (stop, committed, threads) = start_writers(&catalog, 1_000_000);
    wait_for(&committed, 50);
    run(&mut ddl, "CREATE INDEX t_v ON t (v)");
    wait_for(&committed, committed.load(Ordering::Relaxed) + 50);
    run(&mut ddl, "ALTER TABLE t ADD COLUMN w int4 DEFAULT 1");
    wait_for(&committed, committed.load(Ordering::Relaxed) + 50);
    finish(stop, threads);
    let expected = PRELOADED + committed.load(Ordering::Relaxed) as i64;

    assert_eq!(count(&mut ddl, "SELECT count(*) FROM t"), expected);
    let through_index = "SELECT count(*) FROM t WHERE v >= 0";
    let statement = parse(through_index).unwrap().pop().unwrap();
    match ddl.prepare(statement, &[]).unwrap().plan() {
        Plan::Select(select) => assert!(
            matches!(
                select.table_reads()[0].access,
                Access::Index(IndexAccess {
                    lookup: IndexLookup::Range { .. },
                    ..
                })
            ),
            "{:?}",
            select.table_reads()[0].access
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&mut ddl, through_index), expected);
    // Rows inserted after the ALTER got the default, those before it were rewritten with it.
    assert_eq!(
        count(&mut ddl, "SELECT count(*) FROM t WHERE w = 1"),
        expected
    );

    // TRUNCATE with writers running: what is left is exactly what committed after it.
    let (stop, committed, threads) = start_writers(&catalog, 100_000_000);
    wait_for(&committed, 50);
    run(&mut ddl, "TRUNCATE t");
    let left = count(&mut ddl, "SELECT count(*) FROM t");
    finish(stop, threads);
    let after = count(&mut ddl, "SELECT count(*) FROM t");
    assert!(after >= left, "{after} < {left}");
    assert_eq!(count(&mut ddl, through_index), after);
    assert!(after < committed.load(Ordering::Relaxed) as i64);
}

#[test]
fn a_block_that_wrote_a_table_holds_ddl_off_until_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut writer = Session::new(catalog.clone(), "writer");
    run(&mut writer, "CREATE TABLE t (id int8 PRIMARY KEY, v int8)");
    run(&mut writer, "BEGIN");
    run(&mut writer, "INSERT INTO t VALUES (1, 1)");
    let ddl_catalog = catalog.clone();
    let ddl = std::thread::spawn(move || {
        let mut ddl = Session::new(ddl_catalog, "ddl");
        run(&mut ddl, "CREATE INDEX t_v ON t (v)");
        count(&mut ddl, "SELECT count(*) FROM t WHERE v = 1")
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    run(&mut writer, "INSERT INTO t VALUES (2, 1)");
    run(&mut writer, "COMMIT");
    // The index was built after the block committed: it has both rows.
    assert_eq!(ddl.join().unwrap(), 2);
}

/// A writer lets go of its table lock once its commit is logged and applied, before the commit
/// is visible (early lock release; the server finishes it after the log flush): a DDL that
/// waited for the lock must still read that commit's rows. (The DDL's snapshot waits for
/// started commits, `Database::begin_read_only_after_commits`, tested in the engine; here the
/// DDL's own tree creation, which flushes the log, usually publishes the commit first too.)
#[test]
fn a_ddl_reads_the_rows_of_a_commit_not_yet_visible_when_the_lock_was_released() {
    let dir = tempfile::tempdir().unwrap();
    let catalog =
        Catalog::open(Database::open(dir.path(), DatabaseConfig::default()).unwrap()).unwrap();
    let mut writer = Session::new(catalog.clone(), "writer");
    run(&mut writer, "CREATE TABLE t (id int8 PRIMARY KEY, v int8)");
    run(
        &mut writer,
        "INSERT INTO t SELECT g, g FROM generate_series(1, 100) AS g",
    );
    writer.set_defer_commits(true);
    for (round, ddl) in [
        "CREATE INDEX t_v ON t (v)",
        "ALTER TABLE t ADD COLUMN w int8 DEFAULT 5",
    ]
    .into_iter()
    .enumerate()
    {
        let id = 1000 + round as i64;
        run(&mut writer, &format!("INSERT INTO t VALUES ({id}, {id})"));
        let pending = writer.take_pending_commit().expect("a deferred commit");
        let mut session = Session::new(catalog.clone(), "ddl");
        let ddl_thread = std::thread::spawn(move || {
            run(&mut session, ddl);
            session
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        pending.finish().unwrap();
        let mut session = ddl_thread.join().unwrap();
        let found = count(
            &mut session,
            &format!("SELECT count(*) FROM t WHERE v = {id} AND id = {id}"),
        );
        assert_eq!(found, 1, "{ddl} lost the row of the commit it waited for");
        let through_index = count(
            &mut session,
            &format!("SELECT count(*) FROM t WHERE v = {id}"),
        );
        assert_eq!(through_index, 1, "{ddl}: the index misses the row");
    }
}

/// A DDL in a REPEATABLE READ block whose snapshot predates another session's commit keeps
/// that commit's rows: a rebuild reads the newest committed rows, not the block's snapshot.
#[test]
fn a_rebuild_in_an_older_block_keeps_rows_committed_after_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let catalog =
        Catalog::open(Database::open(dir.path(), DatabaseConfig::default()).unwrap()).unwrap();
    let mut block = Session::new(catalog.clone(), "block");
    let mut other = Session::new(catalog, "other");
    run(&mut block, "CREATE TABLE t (id int8 PRIMARY KEY, v int8)");
    run(&mut block, "INSERT INTO t VALUES (1, 1)");
    run(&mut block, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(count(&mut block, "SELECT count(*) FROM t"), 1);
    run(&mut other, "INSERT INTO t VALUES (2, 2)");
    run(&mut block, "ALTER TABLE t ADD COLUMN c int8 DEFAULT 0");
    run(&mut block, "COMMIT");
    assert_eq!(
        count(&mut other, "SELECT count(*) FROM t WHERE c = 0"),
        2,
        "the rebuild dropped the row committed after the block's snapshot"
    );
}

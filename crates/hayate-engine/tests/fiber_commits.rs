//! Commits on fibers (`Database::commit_on_fiber`): the wait for the log suspends the fiber, so
//! the commits of many fibers of one thread share log flushes, early lock release loses no
//! increment of a hot row, and every acknowledged commit survives a restart.

use hayate_engine::fiber::{self, Idle};
use hayate_engine::{BufferSize, Database, DatabaseConfig, TreeId};

fn host(idle: Idle) {
    hayate_engine::reap_or_sleep(idle);
}

type Work<'a> = Box<dyn FnOnce() -> hayate_engine::Result<u64> + 'a>;

fn counters_database(dir: &std::path::Path, counters: u64) -> (Database, TreeId) {
    let db = Database::open(dir, config()).unwrap();
    let table = db.create_table("counters").unwrap();
    let mut txn = db.begin();
    for key in 0..counters {
        txn.insert(table, &key.to_be_bytes(), &0u64.to_le_bytes())
            .unwrap();
    }
    txn.commit().unwrap();
    (db, table)
}

fn config() -> DatabaseConfig {
    DatabaseConfig {
        buffer_size: BufferSize::Bytes(8 << 20),
        ..Default::default()
    }
}

fn read_counter(db: &Database, table: TreeId, key: &[u8]) -> u64 {
    let value = db.begin_read_only().get(table, key).unwrap().unwrap();
    u64::from_le_bytes(value.try_into().unwrap())
}

#[test]
fn commits_of_many_fibers_share_log_flushes_and_lose_no_increment() {
    let dir = tempfile::tempdir().unwrap();
    let counters = 50u64;
    let (fibers, increments) = (64u64, 20u64);
    {
        let (db, table) = counters_database(dir.path(), counters);
        hayate_engine::install_thread_ring().unwrap();
        let db = &db;
        let works: Vec<Work<'_>> = (0..fibers)
            .map(|fiber_index| {
                Box::new(move || {
                    let mut retries = 0u64;
                    for round in 0..increments {
                        let key = ((fiber_index * 7 + round * 13) % counters).to_be_bytes();
                        loop {
                            let mut txn = db.begin();
                            let old = txn.get(table, &key)?.expect("counter row");
                            let value = u64::from_le_bytes(old.try_into().unwrap()) + 1;
                            let result = match txn.put(table, &key, &value.to_le_bytes()) {
                                Ok(()) => db.commit_on_fiber(txn).map(|_| ()),
                                Err(error) => Err(error),
                            };
                            match result {
                                Ok(()) => break,
                                Err(error) if error.is_retryable() => {
                                    retries += 1;
                                    fiber::pause();
                                }
                                Err(error) => return Err(error),
                            }
                        }
                    }
                    Ok(retries)
                }) as Work<'_>
            })
            .collect();
        let flushes_before = db.stats().wal.flushes;
        let (outputs, _) = fiber::run_all(works, host);
        let retries: u64 = outputs.into_iter().map(|output| output.unwrap()).sum();
        let flushes = db.stats().wal.flushes - flushes_before;
        let commits = fibers * increments;
        eprintln!("{commits} commits in {flushes} flushes, {retries} retries");
        assert!(flushes > 0);
        assert!(
            flushes * 4 < commits,
            "commits of one thread's fibers must share flushes: {flushes} for {commits}"
        );
        db.check().unwrap();
        // No close: the reopen replays the log.
    }
    let db = Database::open(dir.path(), config()).unwrap();
    let table = db.table("counters").unwrap();
    let total: u64 = (0..counters)
        .map(|key| read_counter(&db, table, &key.to_be_bytes()))
        .sum();
    assert_eq!(
        total,
        fibers * increments,
        "every acknowledged increment is there"
    );
}

#[test]
fn a_hot_row_changes_hands_at_each_logged_commit_and_keeps_every_increment() {
    // 64 fibers on one thread each add 1 to one hot row, 20 times, by locking reads: early
    // lock release must not let two writers read the same version, and with the lock held
    // until durability each flush could carry one increment only.
    let dir = tempfile::tempdir().unwrap();
    let (database, table) = counters_database(dir.path(), 1);
    let hot = 0u64.to_be_bytes();
    let db = &database;
    let works: Vec<Work<'_>> = (0..64)
        .map(|_| {
            Box::new(move || {
                for _ in 0..20 {
                    let mut txn = db.begin();
                    let value = txn.lock_latest(table, &hot)?.unwrap();
                    let count = u64::from_le_bytes(value.try_into().unwrap());
                    txn.put(table, &hot, &(count + 1).to_le_bytes())?;
                    db.commit_on_fiber(txn)?;
                }
                Ok(0u64)
            }) as Work<'_>
        })
        .collect();
    let flushes_before = db.stats().wal.flushes;
    let (outputs, _) = fiber::run_all(works, host);
    for output in outputs {
        output.unwrap();
    }
    let flushes = db.stats().wal.flushes - flushes_before;
    assert_eq!(read_counter(db, table, &hot), 64 * 20);
    assert!(
        flushes < 64 * 20 / 2,
        "{flushes} flushes for {} commits",
        64 * 20
    );
    database.close().unwrap();
    let db = Database::open(dir.path(), config()).unwrap();
    assert_eq!(read_counter(&db, table, &hot), 64 * 20);
}

#[test]
fn a_locking_read_sees_the_newest_version_and_may_write_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let table = db.create_table("counters").unwrap();
    let mut setup = db.begin();
    setup.insert(table, b"a", b"1").unwrap();
    setup.insert(table, b"b", b"1").unwrap();
    setup.commit().unwrap();

    // Both snapshots are taken before another transaction changes both rows.
    let mut plain = db.begin();
    let mut locking = db.begin();
    let mut other = db.begin();
    other.put(table, b"a", b"2").unwrap();
    other.put(table, b"b", b"2").unwrap();
    other.commit().unwrap();

    // A plain write of a row changed after the snapshot is a serialization failure...
    let error = plain.put(table, b"a", b"3").unwrap_err();
    assert!(error.is_retryable(), "{error}");
    // ...a locking read sees the newest version and the write goes through.
    assert_eq!(plain.get(table, b"b").unwrap().as_deref(), Some(&b"1"[..]));
    let newest = locking.lock_latest(table, b"b").unwrap();
    assert_eq!(newest.as_deref(), Some(&b"2"[..]));
    locking.put(table, b"b", b"3").unwrap();
    // The snapshot read of the other row is unchanged by the locking read.
    assert_eq!(
        locking.get(table, b"a").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    // Off a fiber, commit_on_fiber is a plain commit.
    assert!(db.commit_on_fiber(locking).unwrap().is_some());
    drop(plain);

    let check = db.begin_read_only();
    assert_eq!(check.get(table, b"b").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(check.get(table, b"a").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn prefetch_on_a_fiber_reads_the_pages_of_many_keys_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(0),
        buffer_frames_min: 64,
        ..Default::default()
    };
    let db = Database::open(dir.path(), config).unwrap();
    let table = db.create_table("rows").unwrap();
    let value = vec![7u8; 1000];
    for chunk in (0..2000u32).collect::<Vec<_>>().chunks(200) {
        let mut txn = db.begin();
        for key in chunk {
            txn.insert(table, &key.to_be_bytes(), &value).unwrap();
        }
        txn.commit().unwrap();
    }
    db.checkpoint().unwrap();
    hayate_engine::install_thread_ring().unwrap();
    // Keys far apart: each on a leaf of its own, most not resident in a 64-frame pool.
    let keys: Vec<(TreeId, Vec<u8>)> = (0..16u32)
        .map(|index| (table, (index * 125).to_be_bytes().to_vec()))
        .collect();
    let db = &db;
    let keys = &keys;
    let mut prefetching = fiber::Fiber::new(move || {
        let txn = db.begin_read_only();
        txn.prefetch(keys).unwrap();
        let misses = db.stats().buffer.misses;
        for (tree, key) in keys {
            assert_eq!(txn.get(*tree, key).unwrap().as_deref(), Some(&value[..]));
        }
        db.stats().buffer.misses - misses
    });
    let mut read_waits = 0;
    let misses_after_prefetch = loop {
        match prefetching.resume() {
            fiber::Step::Done(misses) => break misses,
            fiber::Step::Wait(fiber::Wait::Io(_)) => {
                read_waits += 1;
                hayate_engine::reap_thread_ring(true);
            }
            fiber::Step::Wait(_) => {}
        }
    };
    assert_eq!(misses_after_prefetch, 0, "the reads after the prefetch hit");
    assert!(
        read_waits <= 8,
        "{read_waits} waits for the leaves of 16 keys: read one at a time"
    );
}

//! Many read transactions on one thread: misses suspend tasks, not the thread, and are loaded
//! in batches.

use hayate_engine::{BufferSize, Database, DatabaseConfig, Task, TryLookup, WritePolicy};
use rand::{Rng, SeedableRng};

const ROWS: u32 = 1500;

/// What a read task returns: each key it read with the value it saw.
type Reads = hayate_engine::Result<Vec<(u32, Option<Vec<u8>>)>>;

fn value_of(key: u32) -> Vec<u8> {
    // 4000 bytes: longer than a quarter page, so every row lives in an overflow chain.
    (0..4000u32)
        .map(|i| (key.wrapping_mul(31).wrapping_add(i) % 251) as u8)
        .collect()
}

fn small_pool_database(dir: &std::path::Path, policy: WritePolicy) -> Database {
    let mut config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(0),
        buffer_frames_min: 64,
        ..Default::default()
    };
    config.store.policy = policy;
    Database::open(dir, config).unwrap()
}

fn load(db: &Database) -> hayate_engine::TreeId {
    let table = db.create_table("rows").unwrap();
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(100) {
        let mut txn = db.begin();
        for &key in chunk {
            txn.insert(table, &key.to_be_bytes(), &value_of(key))
                .unwrap();
        }
        txn.commit().unwrap();
    }
    table
}

fn many_tasks_read_correct_values_with_batched_misses(policy: WritePolicy) {
    let dir = tempfile::tempdir().unwrap();
    let db = small_pool_database(dir.path(), policy);
    let table = load(&db);
    let seed = 7;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let key_lists: Vec<Vec<u32>> = (0..32)
        .map(|_| (0..25).map(|_| rng.gen_range(0..ROWS)).collect())
        .collect();
    let tasks: Vec<Task<'_, Reads>> = key_lists
        .iter()
        .map(|keys| {
            let db = &db;
            Box::pin(async move {
                let txn = db.begin_read_only();
                let mut found = Vec::new();
                for &key in keys {
                    found.push((key, txn.get_async(table, &key.to_be_bytes()).await?));
                }
                Ok(found)
            }) as Task<'_, _>
        })
        .collect();
    let (outputs, stats) = db.run_tasks(tasks).unwrap();
    eprintln!("{policy:?}: {stats:?}");
    for output in outputs {
        for (key, value) in output.unwrap() {
            assert_eq!(
                value.as_deref(),
                Some(&value_of(key)[..]),
                "key {key} ({policy:?})"
            );
        }
    }
    assert_eq!(stats.tasks, 32);
    assert!(
        stats.pages_loaded > 100,
        "the 64-frame pool must miss: {stats:?}"
    );
    assert!(
        stats.batches * 4 < stats.pages_loaded,
        "misses of different tasks must share batches: {stats:?}"
    );
    db.check().unwrap();
}

#[test]
fn many_tasks_out_of_place() {
    many_tasks_read_correct_values_with_batched_misses(WritePolicy::OutOfPlace);
}

#[test]
fn many_tasks_in_place() {
    many_tasks_read_correct_values_with_batched_misses(WritePolicy::InPlace);
}

#[test]
fn try_get_names_the_missing_page_and_hits_after_loading() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_pool_database(dir.path(), WritePolicy::OutOfPlace);
    let table = load(&db);
    let txn = db.begin_read_only();
    let mut misses = 0;
    for key in (0..ROWS).step_by(97) {
        let key_bytes = key.to_be_bytes();
        let value = loop {
            match txn.try_get(table, &key_bytes).unwrap() {
                TryLookup::Found(value) => break value,
                TryLookup::Missing(page_id) => {
                    misses += 1;
                    assert!(misses < 10_000, "a lookup must make progress");
                    // Load it the way the executor does for a waiting task.
                    let (_, stats) = db
                        .run_tasks(vec![Box::pin(async move {
                            hayate_engine::PageWait::new(page_id).await
                        }) as Task<'_, ()>])
                        .unwrap();
                    assert_eq!(stats.batches, 1);
                }
            }
        };
        assert_eq!(value, Some(value_of(key)));
    }
    assert!(
        misses > 0,
        "a 64-frame pool over {ROWS} 4 KB rows must miss"
    );
    assert_eq!(
        txn.try_get(table, &u32::MAX.to_be_bytes()).unwrap(),
        TryLookup::Found(None)
    );
}

#[test]
fn update_tasks_share_log_flushes_and_lose_no_increment() {
    let dir = tempfile::tempdir().unwrap();
    let config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(8 << 20),
        ..Default::default()
    };
    let counters = 50u64;
    let (tasks_count, increments_per_task) = (64u64, 20u64);
    {
        let db = Database::open(dir.path(), config.clone()).unwrap();
        let table = db.create_table("counters").unwrap();
        let mut txn = db.begin();
        for key in 0..counters {
            txn.insert(table, &key.to_be_bytes(), &0u64.to_le_bytes())
                .unwrap();
        }
        txn.commit().unwrap();
        let tasks: Vec<Task<'_, hayate_engine::Result<u64>>> = (0..tasks_count)
            .map(|task| {
                let db = &db;
                Box::pin(async move {
                    let mut retries = 0u64;
                    for round in 0..increments_per_task {
                        let key = ((task * 7 + round * 13) % counters).to_be_bytes();
                        loop {
                            let mut txn = db.begin();
                            let old = txn.get_async(table, &key).await?.expect("counter row");
                            let value = u64::from_le_bytes(old.try_into().unwrap()) + 1;
                            let result =
                                match txn.put_async(table, &key, &value.to_le_bytes()).await {
                                    Ok(()) => txn.commit_async().await.map(|_| ()),
                                    Err(error) => Err(error),
                                };
                            match result {
                                Ok(()) => break,
                                Err(error) if error.is_retryable() => retries += 1,
                                Err(error) => return Err(error),
                            }
                        }
                    }
                    Ok(retries)
                }) as Task<'_, _>
            })
            .collect();
        let (outputs, stats) = db.run_tasks(tasks).unwrap();
        let retries: u64 = outputs.into_iter().map(|output| output.unwrap()).sum();
        let commits = tasks_count * increments_per_task;
        eprintln!("{stats:?}, {retries} retries after conflicts");
        assert!(stats.log_flushes > 0);
        assert!(
            stats.log_flushes * 4 < commits,
            "commits of one round must share a flush: {stats:?}"
        );
        db.check().unwrap();
        // No close: the reopen replays the log.
    }
    let db = Database::open(dir.path(), config).unwrap();
    let table = db.table("counters").unwrap();
    let txn = db.begin_read_only();
    let total: u64 = (0..counters)
        .map(|key| {
            let value = txn.get(table, &key.to_be_bytes()).unwrap().unwrap();
            u64::from_le_bytes(value.try_into().unwrap())
        })
        .sum();
    assert_eq!(
        total,
        tasks_count * increments_per_task,
        "every acknowledged increment is there"
    );
}

/// Runs one future to completion as a task.
fn block_on<T>(db: &Database, future: impl std::future::Future<Output = T>) -> T {
    let task: Task<'_, T> = Box::pin(future);
    let (mut outputs, _) = db.run_tasks(vec![task]).unwrap();
    outputs.pop().unwrap()
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
    let error = block_on(&db, plain.put_async(table, b"a", b"3")).unwrap_err();
    assert!(error.is_retryable(), "{error}");
    // ...a locking read sees the newest version and the write goes through.
    assert_eq!(plain.get(table, b"b").unwrap().as_deref(), Some(&b"1"[..]));
    let newest = block_on(&db, locking.lock_latest_async(table, b"b")).unwrap();
    assert_eq!(newest.as_deref(), Some(&b"2"[..]));
    block_on(&db, locking.put_async(table, b"b", b"3")).unwrap();
    // The snapshot read of the other row is unchanged by the locking read.
    assert_eq!(
        locking.get(table, b"a").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    block_on(&db, locking.commit_async()).unwrap();
    drop(plain);

    let check = db.begin_read_only();
    assert_eq!(check.get(table, b"b").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(check.get(table, b"a").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn locks_are_released_when_the_commit_is_logged_and_increments_are_never_lost() {
    // 64 tasks on one thread each add 1 to one hot row, 20 times, by locking reads: every
    // increment must survive (early lock release must not let two writers read the same
    // version), and the commits must share log flushes.
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let table = db.create_table("hot").unwrap();
    let mut setup = db.begin();
    setup
        .insert(table, b"counter", &0u64.to_le_bytes())
        .unwrap();
    setup.commit().unwrap();
    let tasks: Vec<Task<'_, hayate_engine::Result<()>>> = (0..64)
        .map(|_| {
            let db = &db;
            Box::pin(async move {
                for _ in 0..20 {
                    let mut txn = db.begin();
                    let value = txn.lock_latest_async(table, b"counter").await?.unwrap();
                    let count = u64::from_le_bytes(value.try_into().unwrap());
                    txn.put_async(table, b"counter", &(count + 1).to_le_bytes())
                        .await?;
                    txn.commit_async().await?;
                }
                Ok(())
            }) as Task<'_, _>
        })
        .collect();
    let (outputs, stats) = db.run_tasks(tasks).unwrap();
    for output in outputs {
        output.unwrap();
    }
    let value = db
        .begin_read_only()
        .get(table, b"counter")
        .unwrap()
        .unwrap();
    assert_eq!(u64::from_le_bytes(value.try_into().unwrap()), 64 * 20);
    // With the lock held until durability, each flush could carry one increment only.
    assert!(
        stats.log_flushes < 64 * 20 / 2,
        "{} flushes for {} commits",
        stats.log_flushes,
        64 * 20
    );
    db.close().unwrap();
    // And after a restart (recovery from the log), the count is the same.
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let value = db
        .begin_read_only()
        .get(table, b"counter")
        .unwrap()
        .unwrap();
    assert_eq!(u64::from_le_bytes(value.try_into().unwrap()), 64 * 20);
}

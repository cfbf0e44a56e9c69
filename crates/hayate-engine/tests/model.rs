//! Model-based randomized test: random transactions against the engine and a `BTreeMap` of the
//! committed state, compared after every read.
//!
//! Each seed runs a seeded loop of transactions (insert/put/update/delete/get/get_for_update and
//! range scans, some aborted), with occasional checkpoints, purges, old snapshots read later,
//! and reopening the database (after `close`, after a drop without close, after a simulated
//! power loss). Every configuration runs over a tiny and a large buffer pool, both write
//! policies and page sizes 4096 and 16384; the tiny-pool runs also have the smallest log
//! buffer, so larger transactions are logged as several commit parts.
//!
//! Seeds: `HAYATE_TEST_SEEDS=n` runs n seeds per configuration (default 16);
//! `HAYATE_TEST_SEED=s` reruns only seed s. A failing seed is printed.
//!
//! The concurrent variant runs 4 workers on disjoint key ranges plus shared counter rows and
//! checks the final state against the per-worker models and the counters against the number
//! of successful increments. The workers are threads, or fibers (two threads of two fibers
//! each, on a disk whose reads take 20 us: reads, row-lock and latch waits suspend a fiber and
//! its thread runs the other).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use hayate_engine::{
    BufferSize, Database, DatabaseConfig, Error, Transaction, TreeId, WritePolicy,
};
use hayate_engine::{Io, SimConfig, SimIo};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const TABLE: &str = "model";

#[derive(Debug, Clone, Copy)]
struct Setup {
    policy: WritePolicy,
    page_size: usize,
    /// Frames of the pool: a tiny pool makes nearly every access go to the disk.
    frames: usize,
}

fn config(setup: Setup) -> DatabaseConfig {
    let mut config = DatabaseConfig::default();
    config.store.policy = setup.policy;
    config.store.page_size = setup.page_size;
    config.store.segment_pages = 32;
    config.buffer_size = BufferSize::Bytes((setup.frames * setup.page_size) as u64);
    config.buffer_frames_min = setup.frames;
    config.maintenance_interval = Duration::from_millis(5);
    if setup.frames == TINY {
        // The smallest log buffer: frames of at most 12 KiB, so the larger transactions are
        // logged as several commit parts.
        config.wal.buffer_size_bytes = 16 * 1024;
    }
    config
}

/// Seeds to run: `HAYATE_TEST_SEED` alone, else `0..HAYATE_TEST_SEEDS` (default `default`).
fn seeds(default: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("HAYATE_TEST_SEED") {
        return vec![seed.parse().expect("HAYATE_TEST_SEED must be a number")];
    }
    let count = std::env::var("HAYATE_TEST_SEEDS")
        .map(|count| count.parse().expect("HAYATE_TEST_SEEDS must be a number"))
        .unwrap_or(default);
    (0..count).collect()
}

/// Prints how to rerun a seed when the test panics while it is alive.
struct SeedReporter {
    seed: u64,
    what: String,
}

impl Drop for SeedReporter {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "FAILED {} with seed {}; rerun with HAYATE_TEST_SEED={}",
                self.what, self.seed, self.seed
            );
        }
    }
}

fn random_key(rng: &mut StdRng, known: &[Vec<u8>]) -> Vec<u8> {
    if !known.is_empty() && rng.gen_bool(0.6) {
        return known[rng.gen_range(0..known.len())].clone();
    }
    let length = rng.gen_range(1..64);
    // A small alphabet makes prefixes shared between keys common.
    (0..length)
        .map(|_| b"abcd\x00\xff"[rng.gen_range(0..6)])
        .collect()
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let length = match rng.gen_range(0..10) {
        0..=5 => rng.gen_range(0..100),
        6..=8 => rng.gen_range(100..2000),
        _ => rng.gen_range(2000..6000),
    };
    let mut value = vec![0u8; length];
    rng.fill(&mut value[..]);
    value
}

fn random_bound(rng: &mut StdRng, known: &[Vec<u8>]) -> Bound<Vec<u8>> {
    match rng.gen_range(0..4) {
        0 => Bound::Unbounded,
        1 => Bound::Excluded(random_key(rng, known)),
        _ => Bound::Included(random_key(rng, known)),
    }
}

fn as_slice(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key.as_slice()),
        Bound::Excluded(key) => Bound::Excluded(key.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Rows of `model` in the range, or an empty list for a range `BTreeMap` rejects.
fn model_range(
    model: &Model,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let empty = match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e)) | (Bound::Excluded(s), Bound::Included(e)) => {
            s >= e
        }
        (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    model
        .range::<Vec<u8>, _>((start.clone(), end.clone()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

fn scan_all(
    txn: &Transaction,
    table: TreeId,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    txn.scan(table, as_slice(start), as_slice(end))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Compares every row of the table with the model.
fn verify_all(db: &Database, table: TreeId, model: &Model, context: &str) {
    let txn = db.begin_read_only();
    let rows = scan_all(&txn, table, &Bound::Unbounded, &Bound::Unbounded);
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    if rows != expected {
        let first_difference = rows
            .iter()
            .zip(expected.iter())
            .position(|(row, want)| row != want);
        panic!(
            "{context}: full scan differs from the model: {} rows, expected {}; first \
             difference at index {first_difference:?}",
            rows.len(),
            expected.len()
        );
    }
    for (key, value) in model.iter().take(50) {
        assert_eq!(
            txn.get(table, key).unwrap().as_ref(),
            Some(value),
            "{context}"
        );
    }
}

/// One random transaction; returns its local view if it committed.
fn random_transaction(
    rng: &mut StdRng,
    db: &Database,
    table: TreeId,
    committed: &Model,
    known: &mut Vec<Vec<u8>>,
) -> Option<Model> {
    let mut txn = db.begin();
    let mut view = committed.clone();
    let op_count = if rng.gen_bool(0.2) {
        rng.gen_range(5..40)
    } else {
        rng.gen_range(1..6)
    };
    for _ in 0..op_count {
        let key = random_key(rng, known);
        if !known.contains(&key) && known.len() < 2000 {
            known.push(key.clone());
        }
        match rng.gen_range(0..100) {
            0..=19 => {
                let value = random_value(rng);
                let result = txn.insert(table, &key, &value);
                match view.entry(key) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        assert!(matches!(result, Err(Error::DuplicateKey)), "{result:?}");
                    }
                    std::collections::btree_map::Entry::Vacant(entry) => {
                        result.unwrap();
                        entry.insert(value);
                    }
                }
            }
            20..=39 => {
                let value = random_value(rng);
                txn.put(table, &key, &value).unwrap();
                view.insert(key, value);
            }
            40..=49 => {
                let value = random_value(rng);
                let updated = txn.update(table, &key, &value).unwrap();
                assert_eq!(updated, view.contains_key(&key));
                if updated {
                    view.insert(key, value);
                }
            }
            50..=64 => {
                let deleted = txn.delete(table, &key).unwrap();
                assert_eq!(deleted, view.remove(&key).is_some());
            }
            65..=79 => {
                assert_eq!(txn.get(table, &key).unwrap().as_ref(), view.get(&key));
            }
            80..=84 => {
                let row = txn.get_for_update(table, &key).unwrap();
                assert_eq!(row.as_ref(), view.get(&key));
            }
            _ => {
                let start = random_bound(rng, known);
                let end = random_bound(rng, known);
                let rows = scan_all(&txn, table, &start, &end);
                let expected = model_range(&view, &start, &end);
                assert_eq!(rows, expected, "scan {start:?}..{end:?}");
                // In descending order, merged with the transaction's own writes the same way.
                let mut reversed: Vec<(Vec<u8>, Vec<u8>)> = txn
                    .scan_reverse(table, as_slice(&start), as_slice(&end))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                reversed.reverse();
                assert_eq!(reversed, expected, "reverse scan {start:?}..{end:?}");
            }
        }
    }
    if rng.gen_bool(0.15) {
        if rng.gen_bool(0.5) {
            txn.abort();
        } else {
            drop(txn);
        }
        return None;
    }
    txn.commit().unwrap();
    Some(view)
}

#[derive(Debug)]
enum Reopen {
    Close,
    DropWithoutClose,
    Crash,
}

fn run_seed(setup: Setup, seed: u64, transactions: usize) {
    let _reporter = SeedReporter {
        seed,
        what: format!("{setup:?}"),
    };
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6d6f_64656c);
    let mut sim = Arc::new(SimIo::new(SimConfig::with_seed(seed)));
    let mut db = Database::open_with_io(sim.clone(), config(setup)).unwrap();
    let mut table = db.create_table(TABLE).unwrap();
    let mut committed = Model::new();
    let mut known: Vec<Vec<u8>> = Vec::new();
    // An old snapshot and the committed state it must keep seeing.
    let mut old_snapshot: Option<(Transaction, Model)> = None;

    for step in 0..transactions {
        if let Some(view) = random_transaction(&mut rng, &db, table, &committed, &mut known) {
            committed = view;
        }
        match rng.gen_range(0..100) {
            0..=2 => {
                db.checkpoint().unwrap();
            }
            3..=5 => {
                db.purge().unwrap();
            }
            6..=8 if old_snapshot.is_none() => {
                old_snapshot = Some((db.begin_read_only(), committed.clone()));
            }
            9..=12 => {
                if let Some((txn, model)) = old_snapshot.take() {
                    let start = random_bound(&mut rng, &known);
                    let end = random_bound(&mut rng, &known);
                    let rows = scan_all(&txn, table, &start, &end);
                    assert_eq!(rows, model_range(&model, &start, &end), "old snapshot scan");
                    let key = random_key(&mut rng, &known);
                    assert_eq!(txn.get(table, &key).unwrap().as_ref(), model.get(&key));
                    if rng.gen_bool(0.5) {
                        old_snapshot = Some((txn, model));
                    }
                }
            }
            13 | 14 => {
                old_snapshot = None;
                let how = match rng.gen_range(0..3) {
                    0 => Reopen::Close,
                    1 => Reopen::DropWithoutClose,
                    _ => Reopen::Crash,
                };
                eprintln!("step {step}: reopen after {how:?}");
                match how {
                    Reopen::Close => db.close().unwrap(),
                    Reopen::DropWithoutClose => drop(db),
                    Reopen::Crash => {
                        // Every commit was acknowledged, hence synced: all must survive.
                        let crashed = Arc::new(sim.crash());
                        drop(db);
                        sim = crashed;
                    }
                }
                db = Database::open_with_io(sim.clone() as Arc<dyn Io>, config(setup))
                    .unwrap_or_else(|error| panic!("reopen at step {step}: {error}"));
                table = db.table(TABLE).unwrap();
                verify_all(
                    &db,
                    table,
                    &committed,
                    &format!("after reopen at step {step}"),
                );
                db.check().unwrap();
            }
            _ => {}
        }
    }
    drop(old_snapshot);
    verify_all(&db, table, &committed, "at the end");
    db.check().unwrap();
    db.close().unwrap();
}

fn run_setup(setup: Setup) {
    for seed in seeds(16) {
        run_seed(setup, seed, 120);
    }
}

const TINY: usize = 12;
const LARGE: usize = 2048;

#[test]
fn out_of_place_4k_tiny_pool() {
    run_setup(Setup {
        policy: WritePolicy::OutOfPlace,
        page_size: 4096,
        frames: TINY,
    });
}

#[test]
fn out_of_place_4k_large_pool() {
    run_setup(Setup {
        policy: WritePolicy::OutOfPlace,
        page_size: 4096,
        frames: LARGE,
    });
}

#[test]
fn out_of_place_16k_tiny_pool() {
    run_setup(Setup {
        policy: WritePolicy::OutOfPlace,
        page_size: 16384,
        frames: TINY,
    });
}

#[test]
fn out_of_place_16k_large_pool() {
    run_setup(Setup {
        policy: WritePolicy::OutOfPlace,
        page_size: 16384,
        frames: LARGE,
    });
}

#[test]
fn in_place_4k_tiny_pool() {
    run_setup(Setup {
        policy: WritePolicy::InPlace,
        page_size: 4096,
        frames: TINY,
    });
}

#[test]
fn in_place_4k_large_pool() {
    run_setup(Setup {
        policy: WritePolicy::InPlace,
        page_size: 4096,
        frames: LARGE,
    });
}

#[test]
fn in_place_16k_tiny_pool() {
    run_setup(Setup {
        policy: WritePolicy::InPlace,
        page_size: 16384,
        frames: TINY,
    });
}

#[test]
fn in_place_16k_large_pool() {
    run_setup(Setup {
        policy: WritePolicy::InPlace,
        page_size: 16384,
        frames: LARGE,
    });
}

// ---- Concurrent variant ----

const THREADS: usize = 4;
const COUNTERS: usize = 3;

fn counter_key(index: usize) -> Vec<u8> {
    format!("counter/{index}").into_bytes()
}

fn read_counter(value: Option<Vec<u8>>) -> u64 {
    value.map_or(0, |bytes| u64::from_le_bytes(bytes.try_into().unwrap()))
}

/// One thread's work: transactions on its own keys (prefix `t<thread>/`), some incrementing a
/// shared counter, retried from the start on retryable errors. Returns the committed model of
/// its keys and the increments it made per counter.
fn worker(
    db: &Database,
    table: TreeId,
    thread: usize,
    seed: u64,
    transactions: usize,
) -> (Model, [u64; COUNTERS]) {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(thread as u64));
    let mut committed = Model::new();
    let mut increments = [0u64; COUNTERS];
    let prefix = format!("t{thread}/");
    for _ in 0..transactions {
        // Choose the transaction's operations once, so a retry repeats the same intent.
        let mut keys = Vec::new();
        for _ in 0..rng.gen_range(1..5) {
            let mut key = prefix.clone().into_bytes();
            key.extend((0..rng.gen_range(0..8)).map(|_| b"xyz"[rng.gen_range(0..3)]));
            let value = if rng.gen_bool(0.25) {
                None
            } else {
                Some(random_value(&mut rng))
            };
            keys.push((key, value));
        }
        let counter = rng.gen_bool(0.6).then(|| rng.gen_range(0..COUNTERS));
        let abort = rng.gen_bool(0.1);
        loop {
            let attempt = (|| -> hayate_engine::Result<Option<Model>> {
                let mut txn = db.begin();
                let mut view = committed.clone();
                for (key, value) in &keys {
                    match value {
                        Some(value) => {
                            txn.put(table, key, value)?;
                            view.insert(key.clone(), value.clone());
                        }
                        None => {
                            let deleted = txn.delete(table, key)?;
                            assert_eq!(deleted, view.remove(key).is_some());
                        }
                    }
                    assert_eq!(txn.get(table, key)?.as_ref(), view.get(key));
                }
                if let Some(index) = counter {
                    let key = counter_key(index);
                    let count = read_counter(txn.get_for_update(table, &key)?);
                    txn.put(table, &key, &(count + 1).to_le_bytes())?;
                }
                if abort {
                    txn.abort();
                    return Ok(None);
                }
                txn.commit()?;
                Ok(Some(view))
            })();
            match attempt {
                Ok(Some(view)) => {
                    committed = view;
                    if let Some(index) = counter {
                        increments[index] += 1;
                    }
                    break;
                }
                Ok(None) => break,
                Err(error) if error.is_retryable() => continue,
                Err(error) => panic!("thread {thread}: {error}"),
            }
        }
    }
    (committed, increments)
}

/// What a worker found: its keys' committed model and its increments per counter.
type WorkerResult = (Model, [u64; COUNTERS]);

/// How the workers of `run_concurrent` run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workers {
    Threads,
    Fibers,
}

fn run_concurrent(setup: Setup, seed: u64, workers: Workers) {
    let _reporter = SeedReporter {
        seed,
        what: format!("concurrent {setup:?} on {workers:?}"),
    };
    let mut disk = SimConfig::with_seed(seed);
    if workers == Workers::Fibers {
        disk.latency_read = Some(Duration::from_micros(20));
    }
    let sim = Arc::new(SimIo::new(disk));
    let mut config = config(setup);
    config.locks.timeout = Duration::from_secs(2);
    let db = Database::open_with_io(sim.clone(), config.clone()).unwrap();
    let table = db.create_table(TABLE).unwrap();
    let thread_count = match workers {
        Workers::Threads => THREADS,
        Workers::Fibers => THREADS / 2,
    };
    let barrier = Arc::new(Barrier::new(thread_count + 1));
    let done = Arc::new(AtomicBool::new(false));
    let snapshots_checked = Arc::new(AtomicU64::new(0));
    // A reader: the sum of the counters never goes down from one snapshot to the next, and a
    // snapshot read twice gives the same answer.
    let reader = {
        let db = db.clone();
        let done = done.clone();
        let snapshots_checked = snapshots_checked.clone();
        std::thread::spawn(move || {
            let mut last_sum = 0;
            while !done.load(Ordering::Acquire) {
                let txn = db.begin_read_only();
                let sum: u64 = (0..COUNTERS)
                    .map(|i| read_counter(txn.get(table, &counter_key(i)).unwrap()))
                    .sum();
                assert!(sum >= last_sum, "counter sum went from {last_sum} to {sum}");
                let again: u64 = (0..COUNTERS)
                    .map(|i| read_counter(txn.get(table, &counter_key(i)).unwrap()))
                    .sum();
                assert_eq!(sum, again, "a snapshot changed while it was read");
                last_sum = sum;
                snapshots_checked.fetch_add(1, Ordering::Relaxed);
                std::thread::yield_now();
            }
        })
    };
    let workers: Vec<_> = match workers {
        Workers::Threads => (0..THREADS)
            .map(|thread| {
                let db = db.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    vec![worker(&db, table, thread, seed, 150)]
                })
            })
            .collect(),
        Workers::Fibers => (0..THREADS / 2)
            .map(|thread| {
                let db = db.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let db = &db;
                    let fibers: Vec<Box<dyn FnOnce() -> WorkerResult + '_>> = (0..2)
                        .map(|fiber| {
                            let index = thread * 2 + fiber;
                            Box::new(move || worker(db, table, index, seed, 150))
                                as Box<dyn FnOnce() -> WorkerResult>
                        })
                        .collect();
                    hayate_engine::fiber::run_all(fibers, hayate_engine::reap_or_sleep).0
                })
            })
            .collect(),
    };
    barrier.wait();
    let mut checkpoints = 0;
    while !workers.iter().all(|worker| worker.is_finished()) {
        db.checkpoint().unwrap();
        checkpoints += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut expected = Model::new();
    let mut totals = [0u64; COUNTERS];
    for worker in workers {
        for (model, increments) in worker.join().unwrap() {
            expected.extend(model);
            for (total, count) in totals.iter_mut().zip(increments) {
                *total += count;
            }
        }
    }
    done.store(true, Ordering::Release);
    reader.join().unwrap();
    for (index, total) in totals.iter().enumerate() {
        if *total > 0 {
            expected.insert(counter_key(index), total.to_le_bytes().to_vec());
        }
    }
    assert!(snapshots_checked.load(Ordering::Relaxed) > 0);
    eprintln!("seed {seed}: {checkpoints} checkpoints, counters {totals:?}");
    verify_all(&db, table, &expected, "concurrent, at the end");
    db.check().unwrap();
    db.close().unwrap();
    // And after reopening.
    let db = Database::open_with_io(sim, config).unwrap();
    let table = db.table(TABLE).unwrap();
    verify_all(&db, table, &expected, "concurrent, after reopen");
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn concurrent_out_of_place_tiny_pool() {
    for seed in seeds(4) {
        run_concurrent(
            Setup {
                policy: WritePolicy::OutOfPlace,
                page_size: 4096,
                frames: 16,
            },
            seed,
            Workers::Threads,
        );
    }
}

#[test]
fn concurrent_fibers_out_of_place_tiny_pool() {
    for seed in seeds(4) {
        run_concurrent(
            Setup {
                policy: WritePolicy::OutOfPlace,
                page_size: 4096,
                frames: 16,
            },
            seed,
            Workers::Fibers,
        );
    }
}

#[test]
fn concurrent_fibers_in_place_tiny_pool() {
    for seed in seeds(4) {
        run_concurrent(
            Setup {
                policy: WritePolicy::InPlace,
                page_size: 4096,
                frames: 16,
            },
            seed,
            Workers::Fibers,
        );
    }
}

#[test]
fn concurrent_in_place_large_pool() {
    for seed in seeds(4) {
        run_concurrent(
            Setup {
                policy: WritePolicy::InPlace,
                page_size: 4096,
                frames: LARGE,
            },
            seed,
            Workers::Threads,
        );
    }
}

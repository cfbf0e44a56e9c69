//! Simulated power loss at every sync point of a randomized workload (`SimIo::crash_at_sync`).
//!
//! For each seed and configuration:
//! 1. Run the workload once on a fresh simulated disk to count its sync points and note the
//!    ones around checkpoints.
//! 2. For every chosen crash point `k`, rerun the workload with the disk freezing at the `k`-th
//!    sync, keeping the model of acknowledged commits and the one commit in flight.
//! 3. Power loss (`crash`), with unsynced writes dropped, applied or torn; sometimes a second
//!    crash during recovery's own syncs.
//! 4. Reopen and verify: every acknowledged commit is there with its exact value, nothing else
//!    except possibly the whole in-flight commit, `check()` passes and the database takes writes.
//!
//! Reproduce a failure with `HAYATE_CRASH_SEED=<printed seed>`; raise coverage with
//! `HAYATE_CRASH_SEEDS=<number of seeds>` (each seed also samples more crash points).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hayate_engine::{
    BufferSize, Database, DatabaseConfig, Io, OpenOptions, SimConfig, SimIo, SyncMode, TreeId,
    WritePolicy,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const TABLE: &str = "crash";
const KEY_SPACE: u32 = 240;
const VALUE_BYTES_MAX: usize = 5000;

#[derive(Debug, Clone, Copy)]
struct Spec {
    policy: WritePolicy,
    page_size: usize,
    transactions: u32,
    checkpoint_every: u32,
    /// Let the maintenance thread run the cleaner (and the checkpoints it asks for). Sync
    /// points then depend on thread timing, so a seed reproduces only approximately.
    cleaner: bool,
    /// How the log is made durable: fdatasync, or O_DSYNC writes (each one a sync point).
    wal_sync: SyncMode,
    /// Zero-filled log segments (small ones, so that several are created and filled).
    wal_preallocate: bool,
}

fn config(spec: &Spec) -> DatabaseConfig {
    let mut config = DatabaseConfig::default();
    config.store.policy = spec.policy;
    config.store.page_size = spec.page_size;
    config.store.segment_pages = 16;
    // The maintenance thread must not take checkpoints or clean on its own, so the sync points
    // of a seed are the same from run to run (the cleaner has its own test).
    config.store.cleaner.free_segments_low = 0;
    if spec.cleaner {
        config.store.cleaner.free_segments_low = 6;
        config.store.cleaner.free_segments_high = 10;
        config.store.cleaner.protection_period = Duration::ZERO;
        config.maintenance_interval = Duration::from_millis(1);
    }
    config.checkpoint_interval = Duration::from_secs(3600);
    config.checkpoint_log_bytes = u64::MAX;
    // A pool much smaller than the data, so pages are evicted and written between checkpoints.
    config.buffer_size = BufferSize::Bytes(12 * spec.page_size as u64);
    config.buffer_frames_min = 12;
    config.wal.buffer_size_bytes = 1 << 20;
    config.wal.sync_mode = spec.wal_sync;
    if spec.wal_preallocate {
        config.wal.preallocate_segments = true;
        config.wal.segment_size_bytes = 256 * 1024;
    }
    config
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
}

/// Seeds to run: `HAYATE_CRASH_SEED` pins one, else `HAYATE_CRASH_SEEDS` (default 1) seeds
/// derived from `base`.
fn seeds(base: u64) -> Vec<u64> {
    if let Some(seed) = env_u64("HAYATE_CRASH_SEED") {
        return vec![seed];
    }
    let count = env_u64("HAYATE_CRASH_SEEDS").unwrap_or(1).max(1);
    (0..count)
        .map(|index| base.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(index))
        .collect()
}

fn key(index: u32) -> Vec<u8> {
    format!("key{index:05}").into_bytes()
}

fn value(rng: &mut StdRng, txn: u32) -> Vec<u8> {
    let len = if rng.gen_bool(0.3) {
        rng.gen_range(1000..=VALUE_BYTES_MAX)
    } else {
        rng.gen_range(1..200)
    };
    let fill: u8 = rng.gen();
    let mut value = format!("txn{txn}:").into_bytes();
    value.resize(len.max(value.len()), fill);
    value
}

/// `old` with one to three of its bytes changed (the same length).
fn small_change(rng: &mut StdRng, old: &[u8], txn: u32) -> Vec<u8> {
    let mut value = old.to_vec();
    for _ in 0..rng.gen_range(1..=3) {
        let index = rng.gen_range(0..value.len());
        value[index] = value[index].wrapping_add(1 + (txn % 250) as u8);
    }
    value
}

/// What a workload run acknowledged before it stopped.
#[derive(Default)]
struct Outcome {
    table_acknowledged: bool,
    acknowledged: Model,
    /// The model with the commit in flight at the freeze applied, if one was in flight.
    in_flight: Option<Model>,
    commits_acknowledged: u32,
    /// Sync counts right before and after each explicit checkpoint (reference run only).
    checkpoint_syncs: Vec<(u64, u64)>,
    completed: bool,
    /// Pages written between checkpoints (reference run only).
    eviction_writes: u64,
    segments_cleaned: u64,
}

/// One randomized transaction against the model: returns the model after it, and the ops.
fn plan_transaction(rng: &mut StdRng, model: &Model, txn: u32) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let count = rng.gen_range(1..=4);
    let mut ops = Vec::new();
    let mut touched = BTreeSet::new();
    for _ in 0..count {
        let k = key(rng.gen_range(0..KEY_SPACE));
        if !touched.insert(k.clone()) {
            continue;
        }
        let exists = model.contains_key(&k);
        let op = if exists && rng.gen_bool(0.3) {
            None
        } else if exists && rng.gen_bool(0.4) {
            // A few bytes of the row change: logged as a patch when the row is long enough.
            Some(small_change(rng, &model[&k], txn))
        } else {
            Some(value(rng, txn))
        };
        ops.push((k, op));
    }
    ops
}

fn apply(model: &mut Model, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

/// Runs the workload of `seed` until it ends or the first error (the frozen disk).
fn run_workload(io: &Arc<SimIo>, spec: &Spec, seed: u64, outcome: &mut Outcome) {
    let dyn_io: Arc<dyn Io> = io.clone();
    let Ok(db) = Database::open_with_io(dyn_io, config(spec)) else {
        return;
    };
    let Ok(table) = db.create_table(TABLE) else {
        return;
    };
    outcome.table_acknowledged = true;
    let mut rng = StdRng::seed_from_u64(seed);
    for txn_number in 1..=spec.transactions {
        let ops = plan_transaction(&mut rng, &outcome.acknowledged, txn_number);
        let mut txn = db.begin();
        for (k, v) in &ops {
            let result = match v {
                Some(v) => txn.put(table, k, v),
                None => txn.delete(table, k).map(|deleted| assert!(deleted)),
            };
            if result.is_err() {
                return; // nothing of this transaction reached the log
            }
        }
        let mut after = outcome.acknowledged.clone();
        apply(&mut after, &ops);
        if txn.commit().is_err() {
            outcome.in_flight = Some(after);
            return;
        }
        outcome.acknowledged = after;
        outcome.commits_acknowledged += 1;
        if txn_number % spec.checkpoint_every == 0 {
            let before = io.sync_count();
            if db.checkpoint().is_err() {
                return;
            }
            outcome.checkpoint_syncs.push((before, io.sync_count()));
        }
    }
    outcome.completed = true;
    outcome.eviction_writes =
        db.stats().buffer.eviction_writes + db.stats().buffer.background_writes;
    outcome.segments_cleaned = db.stats().store.segments_cleaned;
    // Dropping stops the background threads without a checkpoint: the crash comes next.
}

fn read_all(db: &Database, table: TreeId) -> Model {
    let txn = db.begin_read_only();
    txn.scan(table, Bound::Unbounded, Bound::Unbounded)
        .expect("scan")
        .collect::<Result<Model, _>>()
        .expect("scan rows")
}

fn describe_difference(found: &Model, expected: &Model) -> String {
    let mut lines = Vec::new();
    for (k, v) in expected {
        match found.get(k) {
            None => lines.push(format!("missing {}", String::from_utf8_lossy(k))),
            Some(found_value) if found_value != v => lines.push(format!(
                "wrong value of {}: {} bytes, expected {}",
                String::from_utf8_lossy(k),
                found_value.len(),
                v.len()
            )),
            _ => {}
        }
    }
    for k in found.keys().filter(|k| !expected.contains_key(*k)) {
        lines.push(format!("unexpected {}", String::from_utf8_lossy(k)));
    }
    lines.truncate(8);
    lines.join("; ")
}

/// Opens the crashed image and checks it against the outcome. Returns the open database.
fn verify_recovered(image: Arc<SimIo>, spec: &Spec, outcome: &Outcome, context: &str) {
    let io: Arc<dyn Io> = image.clone();
    let db = Database::open_with_io(io, config(spec))
        .unwrap_or_else(|error| panic!("{context}: reopen failed: {error}"));
    let table = match db.table(TABLE) {
        Ok(table) => table,
        Err(error) => {
            assert!(
                !outcome.table_acknowledged,
                "{context}: acknowledged table lost: {error}"
            );
            return;
        }
    };
    let found = read_all(&db, table);
    let matches_acknowledged = found == outcome.acknowledged;
    let matches_in_flight = outcome.in_flight.as_ref() == Some(&found);
    assert!(
        matches_acknowledged || matches_in_flight,
        "{context}: recovered state is neither the acknowledged one ({} commits) nor it plus \
         the in-flight commit: {} (report: {})",
        outcome.commits_acknowledged,
        describe_difference(&found, &outcome.acknowledged),
        db.recovery_report()
    );
    db.check()
        .unwrap_or_else(|error| panic!("{context}: check failed: {error}"));
    // The recovered database takes writes and keeps them across a clean restart.
    let mut txn = db.begin();
    txn.put(table, b"after-recovery", b"yes").unwrap();
    txn.commit()
        .unwrap_or_else(|error| panic!("{context}: commit after recovery: {error}"));
    db.close()
        .unwrap_or_else(|error| panic!("{context}: close after recovery: {error}"));
}

/// Crash points to test: all of them when few, else a seeded sample that keeps the first,
/// the last and every sync next to a checkpoint.
fn crash_points(total: u64, checkpoints: &[(u64, u64)], rng: &mut StdRng) -> Vec<u64> {
    let budget = 400 * env_u64("HAYATE_CRASH_SEEDS").unwrap_or(1).max(1);
    let mut points: BTreeSet<u64> = BTreeSet::new();
    points.insert(0);
    points.insert(total);
    for &(before, after) in checkpoints {
        for k in before.saturating_sub(1)..=(after + 1).min(total) {
            points.insert(k);
        }
    }
    if total < budget + points.len() as u64 {
        points.extend(0..=total);
    } else {
        while (points.len() as u64) < budget + 2 * checkpoints.len() as u64 {
            points.insert(rng.gen_range(0..=total));
        }
    }
    points.into_iter().collect()
}

fn crash_at_every_sync(spec: Spec, base_seed: u64) {
    let started = Instant::now();
    let mut exercised = 0;
    for seed in seeds(base_seed) {
        eprintln!("crash_sim {spec:?}: seed {seed} (HAYATE_CRASH_SEED={seed} to reproduce)");
        let reference_io = Arc::new(SimIo::new(SimConfig::with_seed(seed)));
        let mut reference = Outcome::default();
        run_workload(&reference_io, &spec, seed, &mut reference);
        assert!(
            reference.completed,
            "seed {seed}: workload failed without a crash"
        );
        assert!(
            reference.eviction_writes > 0,
            "seed {seed}: the pool never wrote a page between checkpoints"
        );
        if spec.cleaner {
            assert!(
                reference.segments_cleaned > 0,
                "seed {seed}: the cleaner never ran"
            );
        }
        let total = reference_io.sync_count();
        let mut rng = StdRng::seed_from_u64(seed ^ 0xC0FFEE);
        let points = crash_points(total, &reference.checkpoint_syncs, &mut rng);
        let mut recovery_crashes = 0;
        for &k in &points {
            let context = format!("seed {seed}, crash at sync {k} of {total}");
            let io = Arc::new(SimIo::new(SimConfig::with_seed(seed.wrapping_add(k))));
            io.crash_at_sync(k);
            let mut outcome = Outcome::default();
            run_workload(&io, &spec, seed, &mut outcome);
            let mut image = Arc::new(io.crash());
            if k % 5 == 2 {
                // Crash again during recovery's own syncs, before it finished.
                let j = rng.gen_range(0..6);
                image.crash_at_sync(j);
                let dyn_io: Arc<dyn Io> = image.clone();
                if let Ok(db) = Database::open_with_io(dyn_io, config(&spec)) {
                    drop(db);
                } else {
                    recovery_crashes += 1;
                }
                image = Arc::new(image.crash());
            }
            verify_recovered(image, &spec, &outcome, &context);
            exercised += 1;
        }
        eprintln!(
            "crash_sim {spec:?}: seed {seed}: {} of {total} sync points crashed, {} of them \
             again during recovery",
            points.len(),
            recovery_crashes
        );
        assert!(recovery_crashes > 0, "seed {seed}: no crash hit recovery");
    }
    eprintln!(
        "crash_sim {spec:?}: {exercised} crash points in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn crash_out_of_place_4k() {
    let spec = Spec {
        policy: WritePolicy::OutOfPlace,
        page_size: 4096,
        transactions: 300,
        checkpoint_every: 40,
        cleaner: false,
        wal_sync: SyncMode::Data,
        wal_preallocate: false,
    };
    crash_at_every_sync(spec, 1);
}

#[test]
fn crash_in_place_4k() {
    let spec = Spec {
        policy: WritePolicy::InPlace,
        page_size: 4096,
        transactions: 300,
        checkpoint_every: 40,
        cleaner: false,
        wal_sync: SyncMode::Data,
        wal_preallocate: false,
    };
    crash_at_every_sync(spec, 2);
}

#[test]
fn crash_out_of_place_16k() {
    let spec = Spec {
        policy: WritePolicy::OutOfPlace,
        page_size: 16384,
        transactions: 150,
        checkpoint_every: 30,
        cleaner: false,
        wal_sync: SyncMode::Data,
        wal_preallocate: false,
    };
    crash_at_every_sync(spec, 3);
}

#[test]
fn crash_in_place_16k() {
    let spec = Spec {
        policy: WritePolicy::InPlace,
        page_size: 16384,
        transactions: 150,
        checkpoint_every: 30,
        cleaner: false,
        wal_sync: SyncMode::Data,
        wal_preallocate: false,
    };
    crash_at_every_sync(spec, 4);
}

// The log made durable by O_DSYNC writes instead of fdatasync: every log write is a sync point
// (and a torn write when the power fails during it).
#[test]
fn crash_out_of_place_4k_dsync() {
    let spec = Spec {
        policy: WritePolicy::OutOfPlace,
        page_size: 4096,
        transactions: 300,
        checkpoint_every: 40,
        cleaner: false,
        wal_sync: SyncMode::Dsync,
        wal_preallocate: false,
    };
    crash_at_every_sync(spec, 6);
}

#[test]
fn crash_in_place_4k_dsync_preallocated() {
    let spec = Spec {
        policy: WritePolicy::InPlace,
        page_size: 4096,
        transactions: 300,
        checkpoint_every: 40,
        cleaner: false,
        wal_sync: SyncMode::Dsync,
        wal_preallocate: true,
    };
    crash_at_every_sync(spec, 7);
}

#[test]
fn crash_out_of_place_4k_preallocated() {
    let spec = Spec {
        policy: WritePolicy::OutOfPlace,
        page_size: 4096,
        transactions: 300,
        checkpoint_every: 40,
        cleaner: false,
        wal_sync: SyncMode::Data,
        wal_preallocate: true,
    };
    crash_at_every_sync(spec, 8);
}

// The cleaner and maintenance checkpoints run concurrently with commits, so relocations race
// with write-backs, reads and checkpoints at every crash point.
#[test]
fn crash_out_of_place_cleaner() {
    let spec = Spec {
        policy: WritePolicy::OutOfPlace,
        page_size: 4096,
        transactions: 300,
        checkpoint_every: 60,
        cleaner: true,
        wal_sync: SyncMode::Data,
        wal_preallocate: false,
    };
    crash_at_every_sync(spec, 5);
}

/// Corrupts the last bytes of the newest log segment of a crashed image (a torn last block)
/// and checks that recovery cuts the log there: the state is the one after some prefix of the
/// commits, the cut is reported, and later commits survive another restart.
fn torn_log_tail(policy: WritePolicy, wal_sync: SyncMode) {
    let spec = Spec {
        policy,
        page_size: 4096,
        transactions: 60,
        checkpoint_every: 1000,
        cleaner: false,
        wal_sync,
        wal_preallocate: false,
    };
    let seed = env_u64("HAYATE_CRASH_SEED").unwrap_or(77);
    eprintln!("torn_log_tail {policy:?}: seed {seed}");
    let io = Arc::new(SimIo::new(SimConfig::with_seed(seed)));
    let dyn_io: Arc<dyn Io> = io.clone();
    let db = Database::open_with_io(dyn_io, config(&spec)).unwrap();
    let table = db.create_table(TABLE).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut prefixes = vec![model.clone()];
    for txn_number in 1..=spec.transactions {
        let ops = plan_transaction(&mut rng, &model, txn_number);
        let mut txn = db.begin();
        for (k, v) in &ops {
            match v {
                Some(v) => txn.put(table, k, v).unwrap(),
                None => assert!(txn.delete(table, k).unwrap()),
            }
        }
        txn.commit().unwrap();
        apply(&mut model, &ops);
        prefixes.push(model.clone());
    }
    drop(db);
    let image = Arc::new(io.crash());
    let newest = image
        .list()
        .unwrap()
        .into_iter()
        .filter(|name| name.starts_with("wal."))
        .max()
        .expect("a log segment");
    let bytes = image.file_contents(&newest).unwrap();
    let end = bytes.iter().rposition(|&byte| byte != 0).expect("log data") + 1;
    let torn_start = end.saturating_sub(rng.gen_range(16..300));
    let garbage: Vec<u8> = (torn_start..end).map(|_| rng.gen()).collect();
    let file = image.open(&newest, OpenOptions::EXISTING_DIRECT).unwrap();
    file.write_at(&garbage, torn_start as u64).unwrap();
    file.sync_data().unwrap();
    drop(file);

    let dyn_io: Arc<dyn Io> = image.clone();
    let db = Database::open_with_io(dyn_io, config(&spec)).unwrap();
    let report = db.recovery_report().clone();
    eprintln!("{report}");
    assert!(
        report.log_tail_truncated,
        "torn tail not reported: {report}"
    );
    let table = db.table(TABLE).unwrap();
    let found = read_all(&db, table);
    let prefix = prefixes
        .iter()
        .rposition(|prefix| *prefix == found)
        .unwrap_or_else(|| {
            panic!(
                "recovered state is no prefix of the commits: {}",
                describe_difference(&found, &model)
            )
        });
    assert!(
        prefix < spec.transactions as usize,
        "the torn commit survived"
    );
    assert!(
        prefix + 3 >= spec.transactions as usize,
        "cut too much: {prefix} commits left"
    );
    db.check().unwrap();
    // New commits after the cut are appended where the valid log ends and survive.
    let mut txn = db.begin();
    txn.put(table, b"after-cut", b"kept").unwrap();
    txn.commit().unwrap();
    drop(db);
    let image = Arc::new(image.crash());
    let dyn_io: Arc<dyn Io> = image.clone();
    let db = Database::open_with_io(dyn_io, config(&spec)).unwrap();
    let mut expected = prefixes[prefix].clone();
    expected.insert(b"after-cut".to_vec(), b"kept".to_vec());
    let found = read_all(&db, db.table(TABLE).unwrap());
    assert!(
        found == expected,
        "after the cut and a second crash: {}",
        describe_difference(&found, &expected)
    );
    db.check().unwrap();
}

#[test]
fn torn_log_tail_out_of_place() {
    torn_log_tail(WritePolicy::OutOfPlace, SyncMode::Data);
}

#[test]
fn torn_log_tail_out_of_place_dsync() {
    torn_log_tail(WritePolicy::OutOfPlace, SyncMode::Dsync);
}

#[test]
fn torn_log_tail_in_place() {
    torn_log_tail(WritePolicy::InPlace, SyncMode::Data);
}

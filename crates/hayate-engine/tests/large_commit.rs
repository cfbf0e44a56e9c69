//! Transactions whose write set is larger than one log frame (design.md 3.9, 5.1, 5.4): they
//! commit, survive a restart and a power loss at every sync point all or nothing, and
//! checkpoints taken while they are logged and applied recover them.
//!
//! The log buffer is 64 KiB here, so a frame holds at most 60 KiB and the large transactions
//! (300-700 KiB) are logged as 5-12 `CommitPart` frames, flushed while they are appended.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hayate_engine::{
    BufferSize, Database, DatabaseConfig, Io, SimConfig, SimIo, SyncMode, TreeId, WalConfig,
    WritePolicy,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const TABLE: &str = "load";
const WAL_BUFFER_BYTES: usize = 64 * 1024;

fn config(policy: WritePolicy, wal_sync: SyncMode) -> DatabaseConfig {
    let mut config = DatabaseConfig::default();
    config.store.policy = policy;
    config.store.segment_pages = 32;
    config.store.cleaner.free_segments_low = 0;
    config.checkpoint_interval = Duration::from_secs(3600);
    config.checkpoint_log_bytes = u64::MAX;
    config.buffer_size = BufferSize::Bytes(256 * 4096);
    config.wal.buffer_size_bytes = WAL_BUFFER_BYTES;
    // Small segments, so that the parts of one commit span segment files.
    config.wal.segment_size_bytes = 256 * 1024;
    config.wal.sync_mode = wal_sync;
    config
}

/// The writes of one transaction: a value of `None` deletes the row.
type Writes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// `rows` puts of `value_len` bytes under `prefix`, plus updates and deletes of rows the model
/// already holds.
fn large_writes(prefix: &str, rows: usize, value_len: usize, model: &Model) -> Writes {
    let mut writes: Writes = (0..rows)
        .map(|row| {
            let key = format!("{prefix}-{row:06}").into_bytes();
            let mut value = format!("{prefix}:{row}:").into_bytes();
            value.resize(value_len, (row % 251) as u8);
            (key, Some(value))
        })
        .collect();
    for (index, key) in model.keys().enumerate().filter(|(index, _)| index % 5 == 0) {
        let change = (index % 2 == 0).then(|| format!("{prefix} changed").into_bytes());
        writes.push((key.clone(), change));
    }
    writes
}

fn small_writes(txn: usize) -> Writes {
    (0..3)
        .map(|row| {
            let key = format!("small-{:03}", (txn * 7 + row) % 40).into_bytes();
            (key, Some(format!("small txn {txn}").into_bytes()))
        })
        .collect()
}

fn apply(model: &mut Model, writes: &Writes) {
    for (key, value) in writes {
        match value {
            Some(value) => model.insert(key.clone(), value.clone()),
            None => model.remove(key),
        };
    }
}

/// Runs one transaction; an error means the frozen disk stopped it.
fn commit(db: &Database, table: TreeId, writes: &Writes) -> hayate_engine::Result<()> {
    let mut txn = db.begin();
    for (key, value) in writes {
        match value {
            Some(value) => txn.put(table, key, value)?,
            None => {
                txn.delete(table, key)?;
            }
        }
    }
    txn.commit().map(|_| ())
}

fn read_all(db: &Database) -> Model {
    let table = db.table(TABLE).expect("table");
    let txn = db.begin_read_only();
    txn.scan(table, Bound::Unbounded, Bound::Unbounded)
        .expect("scan")
        .collect::<Result<Model, _>>()
        .expect("scan rows")
}

#[track_caller]
fn assert_same(found: &Model, expected: &Model, context: &str) {
    if found != expected {
        let missing = expected
            .keys()
            .filter(|key| !found.contains_key(*key))
            .count();
        let extra = found
            .keys()
            .filter(|key| !expected.contains_key(*key))
            .count();
        let changed = expected
            .iter()
            .filter(|(key, value)| found.get(*key).is_some_and(|found| found != *value))
            .count();
        panic!("{context}: {missing} rows missing, {extra} unexpected, {changed} differ");
    }
}

fn large_commit_survives_restart(policy: WritePolicy) {
    let io = Arc::new(SimIo::new(SimConfig::with_seed(11)));
    let dyn_io: Arc<dyn Io> = io.clone();
    let db = Database::open_with_io(dyn_io, config(policy, SyncMode::Data)).unwrap();
    let table = db.create_table(TABLE).unwrap();
    let mut model = Model::new();
    let first = large_writes("a", 300, 100, &model);
    commit(&db, table, &first).unwrap();
    apply(&mut model, &first);
    let flushes_before = db.stats().wal.flushes;
    // About 650 KiB: ten times the largest frame.
    let large = large_writes("b", 2000, 300, &model);
    commit(&db, table, &large).unwrap();
    apply(&mut model, &large);
    assert!(
        db.stats().wal.flushes >= flushes_before + 9,
        "the parts were flushed while appended"
    );
    assert_same(&read_all(&db), &model, "before the restart");
    // Power loss without a checkpoint: the commit comes back from the log alone.
    drop(db);
    let image = Arc::new(io.crash());
    let dyn_io: Arc<dyn Io> = image.clone();
    let db = Database::open_with_io(dyn_io, config(policy, SyncMode::Data)).unwrap();
    let report = db.recovery_report().clone();
    assert!(
        report.operations_replayed >= large.len() as u64,
        "replayed from the log: {report}"
    );
    assert_same(&read_all(&db), &model, "after the power loss");
    db.check().unwrap();
    db.close().unwrap();
    let dyn_io: Arc<dyn Io> = image.clone();
    let db = Database::open_with_io(dyn_io, config(policy, SyncMode::Data)).unwrap();
    assert_same(&read_all(&db), &model, "after a clean restart");
}

#[test]
fn large_commit_survives_restart_out_of_place() {
    large_commit_survives_restart(WritePolicy::OutOfPlace);
}

#[test]
fn large_commit_survives_restart_in_place() {
    large_commit_survives_restart(WritePolicy::InPlace);
}

/// The largest value a transaction accepts (16 MiB less the row header) needs a frame larger
/// than the default log buffer allows: it commits, as parts, and survives a power loss.
#[test]
fn largest_value_commits_with_the_default_log_buffer() {
    let io = Arc::new(SimIo::new(SimConfig::with_seed(9)));
    let dyn_io: Arc<dyn Io> = io.clone();
    let mut config = config(WritePolicy::OutOfPlace, SyncMode::Data);
    config.wal = WalConfig::default();
    let db = Database::open_with_io(dyn_io, config.clone()).unwrap();
    let table = db.create_table(TABLE).unwrap();
    let value: Vec<u8> = (0..(16 << 20) - 17)
        .map(|index: u32| (index % 253) as u8)
        .collect();
    let mut txn = db.begin();
    assert!(txn
        .put(table, b"big", &[value.as_slice(), b"x"].concat())
        .is_err());
    txn.put(table, b"big", &value).unwrap();
    txn.put(table, b"small", b"row").unwrap();
    txn.commit().unwrap();
    drop(db);
    let image = Arc::new(io.crash());
    let dyn_io: Arc<dyn Io> = image.clone();
    let db = Database::open_with_io(dyn_io, config).unwrap();
    let mut expected = Model::new();
    expected.insert(b"big".to_vec(), value);
    expected.insert(b"small".to_vec(), b"row".to_vec());
    assert_same(&read_all(&db), &expected, "after the power loss");
}

/// What a workload run acknowledged before the disk froze.
#[derive(Default)]
struct Outcome {
    table_acknowledged: bool,
    acknowledged: Model,
    /// The model with the transaction in flight at the freeze applied, and whether it was a
    /// large one.
    in_flight: Option<(Model, bool)>,
    completed: bool,
}

/// Small transactions around large ones, with a checkpoint in the middle.
fn run_workload(io: &Arc<SimIo>, policy: WritePolicy, wal_sync: SyncMode, outcome: &mut Outcome) {
    let dyn_io: Arc<dyn Io> = io.clone();
    let Ok(db) = Database::open_with_io(dyn_io, config(policy, wal_sync)) else {
        return;
    };
    let Ok(table) = db.create_table(TABLE) else {
        return;
    };
    outcome.table_acknowledged = true;
    for txn in 0..9 {
        let large = txn % 3 == 1;
        let writes = if large {
            large_writes(&format!("t{txn}"), 700, 400, &outcome.acknowledged)
        } else {
            small_writes(txn)
        };
        let mut after = outcome.acknowledged.clone();
        apply(&mut after, &writes);
        if commit(&db, table, &writes).is_err() {
            outcome.in_flight = Some((after, large));
            return;
        }
        outcome.acknowledged = after;
        if txn == 4 && db.checkpoint().is_err() {
            return;
        }
    }
    outcome.completed = true;
}

/// Power loss at every sync point of the workload (sometimes again during recovery): the
/// recovered state is the acknowledged one, or it plus the whole transaction in flight.
fn crash_at_every_sync(policy: WritePolicy, wal_sync: SyncMode) {
    let reference_io = Arc::new(SimIo::new(SimConfig::with_seed(3)));
    let mut reference = Outcome::default();
    run_workload(&reference_io, policy, wal_sync, &mut reference);
    assert!(reference.completed, "workload failed without a crash");
    let total = reference_io.sync_count();
    let mut large_lost = 0;
    let mut large_recovered = 0;
    for k in 0..=total {
        let context = format!("{policy:?} {wal_sync:?}, crash at sync {k} of {total}");
        let io = Arc::new(SimIo::new(SimConfig::with_seed(k)));
        io.crash_at_sync(k);
        let mut outcome = Outcome::default();
        run_workload(&io, policy, wal_sync, &mut outcome);
        let mut image = Arc::new(io.crash());
        if k % 4 == 2 {
            image.crash_at_sync(k % 7);
            let dyn_io: Arc<dyn Io> = image.clone();
            drop(Database::open_with_io(dyn_io, config(policy, wal_sync)));
            image = Arc::new(image.crash());
        }
        let dyn_io: Arc<dyn Io> = image.clone();
        let db = Database::open_with_io(dyn_io, config(policy, wal_sync))
            .unwrap_or_else(|error| panic!("{context}: reopen failed: {error}"));
        if db.table(TABLE).is_err() {
            assert!(!outcome.table_acknowledged, "{context}: table lost");
            continue;
        }
        let found = read_all(&db);
        match &outcome.in_flight {
            Some((after, large)) if found == *after => large_recovered += u32::from(*large),
            Some((_, large)) if found == outcome.acknowledged => large_lost += u32::from(*large),
            _ => assert_same(&found, &outcome.acknowledged, &context),
        }
        db.check()
            .unwrap_or_else(|error| panic!("{context}: check failed: {error}"));
    }
    eprintln!(
        "{policy:?} {wal_sync:?}: {total} sync points; a large commit in flight was lost \
         {large_lost} times, recovered {large_recovered} times"
    );
    assert!(large_lost > 0, "no crash fell inside a large commit");
}

#[test]
fn crash_during_large_commits_out_of_place() {
    crash_at_every_sync(WritePolicy::OutOfPlace, SyncMode::Data);
}

#[test]
fn crash_during_large_commits_in_place_dsync() {
    crash_at_every_sync(WritePolicy::InPlace, SyncMode::Dsync);
}

/// Checkpoints run in a loop while one thread commits large transactions and another small
/// ones; a power loss afterwards recovers every commit. A redo LSN inside a commit's parts
/// would make recovery fail (a part without its first part is corruption).
#[test]
fn checkpoints_concurrent_with_large_commits() {
    let io = Arc::new(SimIo::new(SimConfig::with_seed(5)));
    let dyn_io: Arc<dyn Io> = io.clone();
    let config = config(WritePolicy::OutOfPlace, SyncMode::Data);
    let db = Arc::new(Database::open_with_io(dyn_io, config.clone()).unwrap());
    let table = db.create_table(TABLE).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let checkpointer = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut checkpoints = 0;
            while !stop.load(Ordering::Relaxed) {
                db.checkpoint().unwrap();
                checkpoints += 1;
            }
            checkpoints
        })
    };
    let small = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let mut model = Model::new();
            for txn in 0..300 {
                let key = format!("s-{txn:04}").into_bytes();
                let writes = vec![(key, Some(vec![txn as u8; 50]))];
                commit(&db, table, &writes).unwrap();
                apply(&mut model, &writes);
            }
            model
        })
    };
    let mut model = Model::new();
    for txn in 0..12 {
        let writes = large_writes(&format!("L{txn:02}"), 600, 500, &Model::new());
        commit(&db, table, &writes).unwrap();
        apply(&mut model, &writes);
    }
    model.extend(small.join().unwrap());
    stop.store(true, Ordering::Relaxed);
    let checkpoints = checkpointer.join().unwrap();
    assert!(checkpoints >= 2, "only {checkpoints} checkpoints ran");
    let db = Arc::into_inner(db).expect("threads are done");
    drop(db);
    let image = Arc::new(io.crash());
    let dyn_io: Arc<dyn Io> = image.clone();
    let db = Database::open_with_io(dyn_io, config).unwrap();
    eprintln!("{checkpoints} checkpoints; {}", db.recovery_report());
    assert_same(&read_all(&db), &model, "after the power loss");
    db.check().unwrap();
}

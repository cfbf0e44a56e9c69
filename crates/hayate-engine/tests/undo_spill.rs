//! Rollback segment on flash: long snapshots held while many updates overwrite the same rows,
//! with an undo memory budget far below the before-images they keep alive.
//!
//! 1. Load rows, then open an old snapshot (and later a middle one) and keep them.
//! 2. Many transactions update, delete and re-insert random rows; purge runs meanwhile.
//! 3. Every snapshot still reads exactly its model (point reads and scans), although most of
//!    its versions were spilled to flash and are read back from there.
//! 4. Once the snapshots end, purge drops every entry and deletes the spill segments; a
//!    restart leaves no spill file behind.
//!
//! Runs on the simulated disk (seeded) and on the real device through the default backend.
//! Reproduce with `HAYATE_UNDO_SEED=<printed seed>`.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use hayate_engine::{Database, DatabaseConfig, Io, SimConfig, SimIo, Transaction, TreeId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const ROWS: u32 = 60;
const UPDATE_TRANSACTIONS: u32 = 300;
const UNDO_MEMORY_BYTES: u64 = 32 * 1024;

fn config() -> DatabaseConfig {
    let mut config = DatabaseConfig::default();
    config.undo.memory_bytes = UNDO_MEMORY_BYTES;
    config.undo.spill_segment_bytes = 64 * 1024;
    config
}

fn seed() -> u64 {
    std::env::var("HAYATE_UNDO_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(11)
}

fn key(index: u32) -> Vec<u8> {
    format!("row{index:04}").into_bytes()
}

fn value(rng: &mut StdRng, txn: u32) -> Vec<u8> {
    let len = rng.gen_range(100..1500);
    let mut value = format!("txn{txn}:").into_bytes();
    value.resize(len, b'a' + (txn % 26) as u8);
    value
}

fn read_all(txn: &Transaction, table: TreeId) -> Model {
    txn.scan(table, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Point reads and a scan of `txn` both equal `model`.
#[track_caller]
fn assert_reads(txn: &Transaction, table: TreeId, model: &Model, what: &str) {
    for index in 0..ROWS {
        let key = key(index);
        assert_eq!(
            txn.get(table, &key).unwrap().as_ref(),
            model.get(&key),
            "{what}: row {index}"
        );
    }
    assert!(read_all(txn, table) == *model, "{what}: scan differs");
}

fn undo_files(io: &dyn Io) -> usize {
    io.list()
        .unwrap()
        .iter()
        .filter(|name| name.starts_with("undo."))
        .count()
}

fn long_snapshots_read_spilled_versions(io: Arc<dyn Io>, seed: u64) {
    eprintln!("undo_spill: seed {seed} (HAYATE_UNDO_SEED={seed} to reproduce)");
    let mut rng = StdRng::seed_from_u64(seed);
    let db = Database::open_with_io(Arc::clone(&io), config()).unwrap();
    let table = db.create_table("spill").unwrap();
    let mut model = Model::new();
    let mut txn = db.begin();
    for index in 0..ROWS {
        let value = value(&mut rng, 0);
        txn.insert(table, &key(index), &value).unwrap();
        model.insert(key(index), value);
    }
    txn.commit().unwrap();

    let old_snapshot = db.begin_read_only();
    let old_model = model.clone();
    let mut middle: Option<(Transaction, Model)> = None;
    for txn_number in 1..=UPDATE_TRANSACTIONS {
        let mut txn = db.begin();
        for _ in 0..rng.gen_range(1..6) {
            let key = key(rng.gen_range(0..ROWS));
            if rng.gen_bool(0.15) {
                txn.delete(table, &key).unwrap();
                model.remove(&key);
            } else {
                let value = value(&mut rng, txn_number);
                txn.put(table, &key, &value).unwrap();
                model.insert(key, value);
            }
        }
        txn.commit().unwrap();
        if txn_number == UPDATE_TRANSACTIONS / 2 {
            middle = Some((db.begin_read_only(), model.clone()));
        }
        if txn_number % 50 == 0 {
            db.purge().unwrap();
        }
    }
    let (middle_snapshot, middle_model) = middle.expect("middle snapshot taken");
    db.purge().unwrap();

    assert_reads(&old_snapshot, table, &old_model, "old snapshot");
    assert_reads(&middle_snapshot, table, &middle_model, "middle snapshot");
    assert_reads(&db.begin_read_only(), table, &model, "latest");
    let undo = db.stats().txn.undo;
    eprintln!("undo_spill: with snapshots held: {undo:?}");
    assert!(undo.spilled_bytes_total > 0, "nothing spilled: {undo:?}");
    assert!(undo.spilled_bytes > 0, "{undo:?}");
    assert!(
        undo.spilled_reads > 0,
        "no spilled version read back: {undo:?}"
    );
    assert!(
        undo.memory_bytes <= UNDO_MEMORY_BYTES,
        "memory over budget: {undo:?}"
    );
    assert!(undo.spill_segments > 1, "{undo:?}");

    // The middle snapshot ends first: purge keeps what the old one needs.
    drop(middle_snapshot);
    db.purge().unwrap();
    assert_reads(&old_snapshot, table, &old_model, "old snapshot after purge");
    drop(old_snapshot);
    db.purge().unwrap();
    let undo = db.stats().txn.undo;
    eprintln!("undo_spill: after the snapshots ended and purge: {undo:?}");
    assert_eq!(undo.entries, 0, "{undo:?}");
    assert_eq!((undo.memory_bytes, undo.spilled_bytes), (0, 0), "{undo:?}");
    assert!(undo.spill_segments_removed > 0, "{undo:?}");
    assert!(undo.spill_segments <= 1, "{undo:?}");
    assert!(undo_files(&*io) <= 1);
    db.check().unwrap();
    drop(db);

    let db = Database::open_with_io(Arc::clone(&io), config()).unwrap();
    assert_eq!(
        undo_files(&*io),
        0,
        "spill files of the last run are deleted at open"
    );
    let table = db.table("spill").unwrap();
    assert_reads(&db.begin_read_only(), table, &model, "after restart");
}

#[test]
fn long_snapshots_read_spilled_versions_on_the_simulated_disk() {
    let seed = seed();
    let io = Arc::new(SimIo::new(SimConfig::with_seed(seed)));
    long_snapshots_read_spilled_versions(io, seed);
}

#[test]
fn long_snapshots_read_spilled_versions_on_the_real_device() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let io = hayate_engine::open_default(dir.path()).unwrap();
    long_snapshots_read_spilled_versions(io, seed() + 1);
}

//! I/O errors through the simulated disk: injected read, write and sync failures, a full disk
//! and corrupted pages surface as errors (never panics), the engine stops writing after a
//! failed sync, and every acknowledged commit survives a crash taken afterwards.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use hayate_engine::{
    BufferSize, Database, DatabaseConfig, Error, FaultKind, Io, OpenOptions, SimConfig, SimIo,
    TreeId, WritePolicy,
};

const PAGE_SIZE: usize = 4096;

fn config(policy: WritePolicy, frames: usize) -> DatabaseConfig {
    let mut config = DatabaseConfig::default();
    config.store.policy = policy;
    config.store.page_size = PAGE_SIZE;
    config.store.segment_pages = 32;
    config.buffer_size = BufferSize::Bytes((frames * PAGE_SIZE) as u64);
    config.buffer_frames_min = frames;
    config
}

fn key(index: u32) -> Vec<u8> {
    format!("key{index:06}").into_bytes()
}

fn value(index: u32, version: u32) -> Vec<u8> {
    let length = 200 + (index as usize * 37) % 700;
    let mut value = format!("value {index} version {version} ").into_bytes();
    value.resize(length, b'a' + (index % 26) as u8);
    value
}

/// Commits rows `range` (one transaction per 10 rows) and records them in `model`.
fn fill(
    db: &Database,
    table: TreeId,
    range: std::ops::Range<u32>,
    version: u32,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let rows: Vec<u32> = range.collect();
    for chunk in rows.chunks(10) {
        let mut txn = db.begin();
        for &index in chunk {
            txn.put(table, &key(index), &value(index, version)).unwrap();
        }
        txn.commit().unwrap();
        for &index in chunk {
            model.insert(key(index), value(index, version));
        }
    }
}

/// Every row equals the model (a full scan and point reads), and `check` passes.
fn verify(db: &Database, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let table = db.table("t").unwrap();
    let txn = db.begin_read_only();
    let rows: BTreeMap<Vec<u8>, Vec<u8>> = txn
        .scan(table, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), model.len());
    assert!(rows == *model, "rows differ from the acknowledged commits");
    for (key, value) in model.iter().step_by(7) {
        assert_eq!(txn.get(table, key).unwrap().as_ref(), Some(value));
    }
    drop(txn);
    db.check().unwrap();
}

fn reopen_after_crash(sim: &SimIo, config: DatabaseConfig) -> (Arc<SimIo>, Database) {
    let crashed = Arc::new(sim.crash());
    crashed.set_capacity_bytes(None);
    let db = Database::open_with_io(crashed.clone(), config).unwrap();
    (crashed, db)
}

fn read_error_surfaces(policy: WritePolicy) {
    let sim = Arc::new(SimIo::new(SimConfig::with_seed(7)));
    let mut model = BTreeMap::new();
    {
        let db = Database::open_with_io(sim.clone(), config(policy, 8)).unwrap();
        let table = db.create_table("t").unwrap();
        fill(&db, table, 0..400, 0, &mut model);
        db.close().unwrap();
    }
    // A fresh, tiny pool: reads go to the disk.
    let db = Database::open_with_io(sim.clone(), config(policy, 8)).unwrap();
    let table = db.table("t").unwrap();
    sim.fail_after(0, FaultKind::Read);
    let txn = db.begin_read_only();
    let scanned: Result<Vec<_>, Error> = txn
        .scan(table, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect();
    let mut errors = usize::from(scanned.is_err());
    for index in (0..400).step_by(13) {
        errors += usize::from(txn.get(table, &key(index)).is_err());
    }
    assert!(errors > 0, "no read failed although every disk read fails");
    assert!(matches!(scanned, Err(Error::Io { .. })), "{scanned:?}");
    drop(txn);
    sim.clear_faults();
    verify(&db, &model);
    // Reads failing do not stop writes.
    fill(&db, table, 400..410, 0, &mut model);
    verify(&db, &model);
    db.close().unwrap();
}

#[test]
fn read_error_surfaces_out_of_place() {
    read_error_surfaces(WritePolicy::OutOfPlace);
}

#[test]
fn read_error_surfaces_in_place() {
    read_error_surfaces(WritePolicy::InPlace);
}

fn write_error_in_checkpoint(policy: WritePolicy, frames: usize) {
    let sim = Arc::new(SimIo::new(SimConfig::with_seed(8)));
    let mut model = BTreeMap::new();
    let db = Database::open_with_io(sim.clone(), config(policy, frames)).unwrap();
    let table = db.create_table("t").unwrap();
    fill(&db, table, 0..300, 0, &mut model);
    db.checkpoint().unwrap();
    fill(&db, table, 0..300, 1, &mut model);
    sim.fail_after(0, FaultKind::Write);
    let result = db.checkpoint();
    assert!(
        result.is_err(),
        "checkpoint succeeded although every write fails"
    );
    // Later writes fail too (the log cannot be written, or the engine stopped writing).
    let mut txn = db.begin();
    let later = txn
        .put(table, &key(1), b"never")
        .and_then(|()| txn.commit().map(|_| ()));
    assert!(
        later.is_err(),
        "a commit succeeded although every write fails"
    );
    let (_, db) = reopen_after_crash(&sim, config(policy, frames));
    verify(&db, &model);
    db.close().unwrap();
}

#[test]
fn write_error_in_checkpoint_out_of_place() {
    write_error_in_checkpoint(WritePolicy::OutOfPlace, 2048);
}

#[test]
fn write_error_in_checkpoint_in_place_tiny_pool() {
    write_error_in_checkpoint(WritePolicy::InPlace, 8);
}

fn failed_sync_poisons(policy: WritePolicy) {
    let sim = Arc::new(SimIo::new(SimConfig::with_seed(9)));
    let mut model = BTreeMap::new();
    let db = Database::open_with_io(sim.clone(), config(policy, 64)).unwrap();
    let table = db.create_table("t").unwrap();
    fill(&db, table, 0..100, 0, &mut model);
    sim.fail_after(0, FaultKind::Sync);
    let mut txn = db.begin();
    txn.put(table, &key(1000), b"unacknowledged").unwrap();
    assert!(
        txn.commit().is_err(),
        "commit succeeded although its sync failed"
    );
    // No retry of the sync: the engine refuses writes even once the disk works again.
    sim.clear_faults();
    let mut txn = db.begin();
    let result = txn.put(table, &key(1001), b"refused");
    assert!(matches!(result, Err(Error::Poisoned(_))), "{result:?}");
    assert!(matches!(db.checkpoint(), Err(Error::Poisoned(_))));
    assert!(matches!(db.create_table("u"), Err(Error::Poisoned(_))));
    // Reads still work.
    assert_eq!(
        db.begin_read_only().get(table, &key(5)).unwrap(),
        Some(value(5, 0))
    );
    let (_, db) = reopen_after_crash(&sim, config(policy, 64));
    // The failed commit may or may not have reached the disk; nothing else changed.
    let table = db.table("t").unwrap();
    let failed = db.begin_read_only().get(table, &key(1000)).unwrap();
    assert!(failed.is_none() || failed.as_deref() == Some(&b"unacknowledged"[..]));
    if let Some(failed) = failed {
        model.insert(key(1000), failed);
    }
    verify(&db, &model);
    db.close().unwrap();
}

#[test]
fn failed_sync_poisons_out_of_place() {
    failed_sync_poisons(WritePolicy::OutOfPlace);
}

#[test]
fn failed_sync_poisons_in_place() {
    failed_sync_poisons(WritePolicy::InPlace);
}

fn disk_full(policy: WritePolicy) {
    let sim = Arc::new(SimIo::new(SimConfig::with_seed(10)));
    let mut model = BTreeMap::new();
    let db = Database::open_with_io(sim.clone(), config(policy, 16)).unwrap();
    let table = db.create_table("t").unwrap();
    fill(&db, table, 0..100, 0, &mut model);
    db.checkpoint().unwrap();
    sim.set_capacity_bytes(Some(sim.used_bytes() + 256 * 1024));
    let mut failed = None;
    for index in 100..100_000u32 {
        let mut txn = db.begin();
        let result = txn
            .put(table, &key(index), &value(index, 0))
            .and_then(|()| txn.commit().map(|_| ()));
        if index % 50 == 0 && result.is_ok() {
            // Checkpoints write pages too; they may be the ones to hit the limit.
            if let Err(error) = db.checkpoint() {
                assert!(
                    matches!(error, Error::DiskFull { .. } | Error::Poisoned(_)),
                    "{error}"
                );
                model.insert(key(index), value(index, 0));
                failed = Some((index + 1, error));
                break;
            }
        }
        match result {
            Ok(()) => {
                model.insert(key(index), value(index, 0));
            }
            Err(error) => {
                failed = Some((index, error));
                break;
            }
        }
    }
    let (failed_index, error) = failed.expect("the disk never filled up");
    assert!(
        matches!(error, Error::DiskFull { .. } | Error::Poisoned(_)),
        "{error}"
    );
    let (_, db) = reopen_after_crash(&sim, config(policy, 16));
    let table = db.table("t").unwrap();
    let maybe = db.begin_read_only().get(table, &key(failed_index)).unwrap();
    assert!(maybe.is_none() || maybe == Some(value(failed_index, 0)));
    if let Some(maybe) = maybe {
        model.insert(key(failed_index), maybe);
    }
    verify(&db, &model);
    // With space again the database takes writes.
    fill(&db, table, 200_000..200_010, 0, &mut model);
    verify(&db, &model);
    db.close().unwrap();
}

#[test]
fn disk_full_out_of_place() {
    disk_full(WritePolicy::OutOfPlace);
}

#[test]
fn disk_full_in_place() {
    disk_full(WritePolicy::InPlace);
}

fn corruption_is_reported(policy: WritePolicy) {
    let sim = Arc::new(SimIo::new(SimConfig::with_seed(11)));
    let mut model = BTreeMap::new();
    {
        let db = Database::open_with_io(sim.clone(), config(policy, 64)).unwrap();
        let table = db.create_table("t").unwrap();
        fill(&db, table, 0..300, 0, &mut model);
        db.close().unwrap();
    }
    // Flip bytes in the middle of every page of the data file.
    let data = sim.file_contents("data.hyt").expect("data file");
    let file = sim.open("data.hyt", OpenOptions::EXISTING_DIRECT).unwrap();
    let mut flipped = 0;
    for offset in (0..data.len()).step_by(PAGE_SIZE) {
        let mut page = data[offset..offset + PAGE_SIZE].to_vec();
        if page.iter().all(|&byte| byte == 0) {
            continue;
        }
        for byte in &mut page[PAGE_SIZE / 2..PAGE_SIZE / 2 + 8] {
            *byte ^= 0x5a;
        }
        file.write_at(&page, offset as u64).unwrap();
        flipped += 1;
    }
    file.sync_data().unwrap();
    drop(file);
    assert!(flipped > 0);
    let error = match Database::open_with_io(sim.clone(), config(policy, 8)) {
        Err(error) => error,
        Ok(db) => {
            let table = db.table("t").unwrap();
            let txn = db.begin_read_only();
            let scanned: Result<Vec<_>, Error> = txn
                .scan(table, Bound::Unbounded, Bound::Unbounded)
                .unwrap()
                .collect();
            assert!(scanned.is_err(), "a scan over corrupt pages succeeded");
            assert!(txn.get(table, &key(7)).is_err());
            drop(txn);
            db.check().expect_err("check passed over corrupt pages")
        }
    };
    let Error::Corruption { location, .. } = &error else {
        panic!("expected a corruption error, got {error:?}");
    };
    assert_eq!(location.file, "data.hyt", "{error}");
    assert!(location.page_id.is_some(), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("data.hyt") && message.contains("page "),
        "{message}"
    );
}

#[test]
fn corruption_is_reported_out_of_place() {
    corruption_is_reported(WritePolicy::OutOfPlace);
}

#[test]
fn corruption_is_reported_in_place() {
    corruption_is_reported(WritePolicy::InPlace);
}

//! Base backup under load (docs/design.md 5.7): while threads transfer money between accounts
//! (a row per transfer), write pages back through a small buffer and ask for checkpoints, a
//! copy is taken. The copy opens, passes `check`, holds every transfer committed before the
//! copy began and conserves the total; as a standby fed the primary's log from its own end
//! on, it ends equal to the primary. Both page-store policies.

use crate::common;

use common::rows;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hayate_engine::{BackupWriter, BufferSize, Database, DatabaseConfig, TreeId, WritePolicy};

const ACCOUNTS: u64 = 64;
const START_BALANCE: i64 = 1_000;

fn config(policy: WritePolicy) -> DatabaseConfig {
    let mut config = DatabaseConfig {
        // Small: pages are written back while the copy runs.
        buffer_size: BufferSize::Bytes(1 << 20),
        checkpoint_interval: Duration::from_millis(50),
        maintenance_interval: Duration::from_millis(10),
        ..DatabaseConfig::default()
    };
    config.store.policy = policy;
    config
}

fn balance(db: &Database, accounts: TreeId, key: u64) -> i64 {
    let txn = db.begin_read_only();
    let value = txn.get(accounts, &key.to_be_bytes()).unwrap().unwrap();
    txn.commit().unwrap();
    i64::from_le_bytes(value[..8].try_into().unwrap())
}

/// Moves `amount` from one account to another and logs the transfer; a wide row so the
/// tables span many pages.
fn transfer(
    db: &Database,
    (accounts, transfers): (TreeId, TreeId),
    id: u64,
    from: u64,
    to: u64,
) -> hayate_engine::Result<()> {
    let mut txn = db.begin();
    for (key, delta) in [(from, -7i64), (to, 7)] {
        let old = txn.get_for_update(accounts, &key.to_be_bytes())?.unwrap();
        let balance = i64::from_le_bytes(old[..8].try_into().unwrap()) + delta;
        let mut row = balance.to_le_bytes().to_vec();
        row.resize(300, key as u8);
        txn.put(accounts, &key.to_be_bytes(), &row)?;
    }
    let mut row = [from.to_le_bytes(), to.to_le_bytes()].concat();
    row.resize(200, 0xAB);
    txn.put(transfers, &id.to_be_bytes(), &row)?;
    txn.commit().map(|_| ())
}

fn total(db: &Database, accounts: TreeId) -> i64 {
    (0..ACCOUNTS).map(|key| balance(db, accounts, key)).sum()
}

fn backup_under_load(policy: WritePolicy) {
    let dirs = tempfile::tempdir().unwrap();
    let (primary_dir, copy_dir) = (dirs.path().join("a"), dirs.path().join("b"));
    let primary = Database::open(&primary_dir, config(policy)).unwrap();
    let tables = (
        primary.create_table("accounts").unwrap(),
        primary.create_table("transfers").unwrap(),
    );
    let mut txn = primary.begin();
    for key in 0..ACCOUNTS {
        let mut row = START_BALANCE.to_le_bytes().to_vec();
        row.resize(300, key as u8);
        txn.put(tables.0, &key.to_be_bytes(), &row).unwrap();
    }
    txn.commit().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(AtomicU64::new(0));
    let committed = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..3u64)
        .map(|worker| {
            let (db, stop, next_id, committed) = (
                primary.clone(),
                stop.clone(),
                next_id.clone(),
                committed.clone(),
            );
            std::thread::spawn(move || {
                let mut seed = worker + 1;
                while !stop.load(Ordering::Relaxed) {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let from = (seed >> 33) % ACCOUNTS;
                    let to = (from + 1 + (seed >> 20) % (ACCOUNTS - 1)) % ACCOUNTS;
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    match transfer(&db, tables, id, from, to) {
                        Ok(()) => {
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) if error.is_retryable() => {}
                        Err(error) => panic!("transfer: {error}"),
                    }
                }
            })
        })
        .collect();
    while committed.load(Ordering::Relaxed) < 300 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let checkpointer = {
        let (db, stop) = (primary.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.checkpoint().unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    let before: Vec<_> = rows(&primary, tables.1)
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let mut writer = BackupWriter::new(&copy_dir).unwrap();
    let mut pieces = 0;
    let report = primary
        .base_backup(&mut |name, offset, bytes| {
            pieces += 1;
            // Stretch the copy so that commits, write-backs and checkpoint requests land
            // between its pieces.
            std::thread::sleep(Duration::from_millis(2));
            writer.write(name, offset, bytes)
        })
        .unwrap();
    writer.finish().unwrap();
    let during = committed.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().unwrap();
    }
    checkpointer.join().unwrap();
    assert!(report.files >= 3 && pieces >= report.files, "{report:?}");

    let copy = Database::open(&copy_dir, config(policy)).unwrap();
    copy.check().unwrap();
    assert_eq!(total(&copy, tables.0), START_BALANCE * ACCOUNTS as i64);
    let copied: std::collections::HashSet<_> = rows(&copy, tables.1)
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    for key in &before {
        assert!(
            copied.contains(key),
            "a transfer committed before the copy is missing"
        );
    }
    assert!(copied.len() >= before.len());

    // Seeded from the copy, a standby receives the rest of the primary's log from its own end.
    let need = copy.start_standby().unwrap();
    assert!(need <= report.log_end && need <= primary.log_end_lsn());
    let end = primary.log_local_durable_lsn();
    let rest = primary.read_log(need, end).unwrap();
    assert_eq!(copy.receive_log(need, &rest).unwrap(), end);
    copy.apply_received().unwrap();
    copy.promote().unwrap();
    assert_eq!(rows(&copy, tables.0), rows(&primary, tables.0));
    assert_eq!(rows(&copy, tables.1), rows(&primary, tables.1));
    assert!(rows(&copy, tables.1).len() as u64 >= during);
    copy.check().unwrap();
    copy.close().unwrap();
    primary.close().unwrap();
}

#[test]
fn a_base_backup_under_load_opens_consistent_and_catches_up_out_of_place() {
    backup_under_load(WritePolicy::OutOfPlace);
}

#[test]
fn a_base_backup_under_load_opens_consistent_and_catches_up_in_place() {
    backup_under_load(WritePolicy::InPlace);
}

#[test]
fn a_backup_goes_only_into_a_directory_without_a_database() {
    let dirs = tempfile::tempdir().unwrap();
    let db = Database::open(dirs.path(), DatabaseConfig::default()).unwrap();
    assert!(BackupWriter::new(dirs.path()).is_err());
    let target = dirs.path().join("copy");
    let mut writer = BackupWriter::new(&target).unwrap();
    assert!(writer.write("../escape", 0, b"x").is_err());
    assert!(writer.write("undo.0000000000000001", 0, b"x").is_err());
    // Without a control file the copy is not a database.
    writer.write("data.hyt", 0, &[0; 4096]).unwrap();
    assert!(writer.finish().is_err());
    assert!(!target.join("control.hyt").exists());
    db.close().unwrap();
}

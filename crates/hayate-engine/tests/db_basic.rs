//! End-to-end basics of the embedded API: tables, transactions, snapshots, reopen.

use std::ops::Bound;

use hayate_engine::{Database, DatabaseConfig, Error, WritePolicy};

fn config(policy: WritePolicy) -> DatabaseConfig {
    let mut config = DatabaseConfig::default();
    config.store.policy = policy;
    config.buffer_size = hayate_engine::BufferSize::Bytes(64 * 4096);
    config
}

fn crud_and_reopen(policy: WritePolicy) {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path(), config(policy)).unwrap();
        let table = db.create_table("accounts").unwrap();
        assert!(matches!(
            db.create_table("accounts"),
            Err(Error::TableExists(_))
        ));
        let mut txn = db.begin();
        for id in 0..500u32 {
            txn.insert(table, &id.to_be_bytes(), format!("value {id}").as_bytes())
                .unwrap();
        }
        assert!(matches!(
            txn.insert(table, &7u32.to_be_bytes(), b"dup"),
            Err(Error::DuplicateKey)
        ));
        txn.commit().unwrap();

        let reader = db.begin_read_only();
        let mut writer = db.begin();
        assert!(writer
            .update(table, &1u32.to_be_bytes(), b"changed")
            .unwrap());
        assert!(writer.delete(table, &2u32.to_be_bytes()).unwrap());
        assert!(!writer.delete(table, &9999u32.to_be_bytes()).unwrap());
        assert_eq!(
            writer.get(table, &1u32.to_be_bytes()).unwrap().unwrap(),
            b"changed"
        );
        writer.commit().unwrap();
        // The older snapshot still sees the old versions, through the rollback segment.
        assert_eq!(
            reader.get(table, &1u32.to_be_bytes()).unwrap().unwrap(),
            b"value 1"
        );
        assert_eq!(
            reader.get(table, &2u32.to_be_bytes()).unwrap().unwrap(),
            b"value 2"
        );
        let rows: Vec<_> = reader
            .scan(table, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), 500);
        drop(reader);
        let fresh = db.begin_read_only();
        assert_eq!(fresh.get(table, &2u32.to_be_bytes()).unwrap(), None);
        let count = fresh
            .scan(table, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count();
        assert_eq!(count, 499);
        drop(fresh);
        db.check().unwrap();
        // No close: the reopen must replay the log.
    }
    let db = Database::open(dir.path(), config(policy)).unwrap();
    let report = db.recovery_report().clone();
    eprintln!("{report}");
    assert!(report.records_replayed >= 1, "{report}");
    let table = db.table("accounts").unwrap();
    let txn = db.begin_read_only();
    assert_eq!(
        txn.get(table, &1u32.to_be_bytes()).unwrap().unwrap(),
        b"changed"
    );
    assert_eq!(txn.get(table, &2u32.to_be_bytes()).unwrap(), None);
    assert_eq!(
        txn.get(table, &3u32.to_be_bytes()).unwrap().unwrap(),
        b"value 3"
    );
    let from_10: Vec<_> = txn
        .scan(
            table,
            Bound::Included(&10u32.to_be_bytes()[..]),
            Bound::Excluded(&20u32.to_be_bytes()[..]),
        )
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(from_10.len(), 10);
    drop(txn);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn crud_and_reopen_out_of_place() {
    crud_and_reopen(WritePolicy::OutOfPlace);
}

#[test]
fn crud_and_reopen_in_place() {
    crud_and_reopen(WritePolicy::InPlace);
}

#[test]
fn oversized_keys_and_values_are_rejected_before_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), config(WritePolicy::OutOfPlace)).unwrap();
    let table = db.create_table("t").unwrap();
    let mut txn = db.begin();
    let long_key = vec![7u8; 4096];
    assert!(matches!(
        txn.put(table, &long_key, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        txn.insert(table, b"", b"v"),
        Err(Error::InvalidArgument(_))
    ));
    let huge_value = vec![0u8; 17 << 20];
    assert!(matches!(
        txn.put(table, b"k", &huge_value),
        Err(Error::ValueTooLarge { .. })
    ));
    txn.put(table, b"k", b"fine").unwrap();
    txn.commit().unwrap();
    // The engine still accepts writes.
    let mut txn = db.begin();
    txn.put(table, b"k2", b"also fine").unwrap();
    txn.commit().unwrap();
    db.check().unwrap();
}

/// An update that changes 4 bytes of a 4 KiB row logs those bytes (a patch), not the row; the
/// row reads back whole, before and after a reopen that replays the patch from the log.
#[test]
fn a_small_update_of_a_large_row_logs_the_change_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut row = vec![b'x'; 4096];
    let log_bytes = {
        let db = Database::open(dir.path(), config(WritePolicy::OutOfPlace)).unwrap();
        let table = db.create_table("rows").unwrap();
        let mut txn = db.begin();
        txn.insert(table, b"k", &row).unwrap();
        txn.commit().unwrap();
        db.checkpoint().unwrap();

        let before = db.log_durable_lsn();
        row[100..104].copy_from_slice(&7u32.to_le_bytes());
        let mut txn = db.begin();
        assert!(txn.update(table, b"k", &row).unwrap());
        txn.commit().unwrap();
        let log_bytes = db.log_durable_lsn() - before;
        assert_eq!(
            db.begin_read_only().get(table, b"k").unwrap(),
            Some(row.clone())
        );
        // Dropped without a checkpoint: reopening replays the patch.
        drop(db);
        log_bytes
    };
    assert!(log_bytes < 200, "a 4-byte change logged {log_bytes} bytes");
    let db = Database::open(dir.path(), config(WritePolicy::OutOfPlace)).unwrap();
    let table = db.table("rows").unwrap();
    assert_eq!(db.begin_read_only().get(table, b"k").unwrap(), Some(row));
}

#[test]
fn a_snapshot_after_commits_waits_for_a_started_commit_to_be_visible() {
    use hayate_engine::{SimConfig, SimIo};
    use std::time::Duration;

    // Every sync takes 300 ms: a started commit stays invisible that long.
    let disk = std::sync::Arc::new(SimIo::new(SimConfig {
        latency_sync: Some(Duration::from_millis(300)),
        ..SimConfig::default()
    }));
    let db = Database::open_with_io(disk, DatabaseConfig::default()).unwrap();
    let table = db.create_table("t").unwrap();
    let mut txn = db.begin();
    txn.insert(table, b"k", b"v").unwrap();
    // Logged and applied, its locks released (what a DDL waiting for them sees), not durable.
    let pending = txn.commit_start().unwrap().expect("a write");
    db.request_log_flush(pending.lsn());
    assert_eq!(
        db.begin_read_only().get(table, b"k").unwrap(),
        None,
        "the commit was visible before its flush"
    );
    let after = db.begin_read_only_after_commits();
    assert_eq!(after.get(table, b"k").unwrap().as_deref(), Some(&b"v"[..]));
    pending.finish().unwrap();
}

//! Isolation tests for MVCC, after Hermitage: transactions interleaved explicitly, in one
//! thread where nothing waits and in threads where a lock wait is involved.
//!
//! Hayate provides snapshot isolation: readers see the snapshot taken at `begin`, writers lock
//! rows and the first updater wins (a later writer of a row changed after its snapshot gets
//! `SerializationFailure`). Write skew is therefore allowed; see `write_skew_is_allowed`.
//! `begin_serializable` adds validation of the reads at commit, which refuses it.

use std::ops::Bound;
use std::sync::mpsc;
use std::time::Duration;

use hayate_engine::{Database, DatabaseConfig, Error, SimConfig, SimIo, Transaction, TreeId};

const LOCK_TIMEOUT: Duration = Duration::from_millis(300);

/// A database with rows "1" = "10" and "2" = "20".
fn setup() -> (Database, TreeId) {
    let mut config = DatabaseConfig::default();
    config.locks.timeout = LOCK_TIMEOUT;
    let io = std::sync::Arc::new(SimIo::new(SimConfig::with_seed(1)));
    let db = Database::open_with_io(io, config).unwrap();
    let table = db.create_table("test").unwrap();
    let mut txn = db.begin();
    txn.insert(table, b"1", b"10").unwrap();
    txn.insert(table, b"2", b"20").unwrap();
    txn.commit().unwrap();
    (db, table)
}

fn get(txn: &Transaction, table: TreeId, key: &[u8]) -> Option<Vec<u8>> {
    txn.get(table, key).unwrap()
}

fn committed(db: &Database, table: TreeId, key: &[u8]) -> Option<Vec<u8>> {
    get(&db.begin_read_only(), table, key)
}

fn scan(txn: &Transaction, table: TreeId) -> Vec<(Vec<u8>, Vec<u8>)> {
    txn.scan(table, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn row(key: &[u8], value: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (key.to_vec(), value.to_vec())
}

/// Starts `write` of `key` in a thread (it waits for the row lock of `holder`) and returns a
/// receiver of its result. The thread's transaction is committed if the write succeeded.
fn write_in_thread(
    db: &Database,
    table: TreeId,
    key: &'static [u8],
    value: &'static [u8],
) -> mpsc::Receiver<Result<(), Error>> {
    let (sender, receiver) = mpsc::channel();
    let db = db.clone();
    // The snapshot is taken here, before the first writer commits.
    let mut txn = db.begin();
    std::thread::spawn(move || {
        let result = txn
            .put(table, key, value)
            .and_then(|()| txn.commit().map(|_| ()));
        sender.send(result).unwrap();
    });
    receiver
}

#[test]
fn dirty_write_is_prevented_first_writer_commits() {
    let (db, table) = setup();
    let mut first = db.begin();
    first.put(table, b"1", b"11").unwrap();
    let second = write_in_thread(&db, table, b"1", b"12");
    // The second writer waits for the row lock (a short wait shows it is still blocked).
    assert!(second.recv_timeout(Duration::from_millis(50)).is_err());
    first.commit().unwrap();
    let result = second.recv().unwrap();
    assert!(
        matches!(result, Err(Error::SerializationFailure)),
        "{result:?}"
    );
    assert_eq!(committed(&db, table, b"1").unwrap(), b"11");
}

#[test]
fn dirty_write_is_prevented_first_writer_aborts() {
    let (db, table) = setup();
    let mut first = db.begin();
    first.put(table, b"1", b"11").unwrap();
    let second = write_in_thread(&db, table, b"1", b"12");
    assert!(second.recv_timeout(Duration::from_millis(50)).is_err());
    first.abort();
    second.recv().unwrap().unwrap();
    assert_eq!(committed(&db, table, b"1").unwrap(), b"12");
}

#[test]
fn dirty_read_is_prevented() {
    let (db, table) = setup();
    let mut writer = db.begin();
    writer.put(table, b"1", b"11").unwrap();
    writer.delete(table, b"2").unwrap();
    let reader = db.begin_read_only();
    assert_eq!(get(&reader, table, b"1").unwrap(), b"10");
    assert_eq!(get(&reader, table, b"2").unwrap(), b"20");
    writer.commit().unwrap();
    // Still the snapshot; a new transaction sees the commit.
    assert_eq!(get(&reader, table, b"1").unwrap(), b"10");
    assert_eq!(committed(&db, table, b"1").unwrap(), b"11");
    assert_eq!(committed(&db, table, b"2"), None);
}

#[test]
fn dirty_read_after_abort_is_prevented() {
    let (db, table) = setup();
    let mut writer = db.begin();
    writer.put(table, b"1", b"11").unwrap();
    writer.abort();
    assert_eq!(committed(&db, table, b"1").unwrap(), b"10");
}

#[test]
fn lost_update_is_prevented() {
    let (db, table) = setup();
    let mut first = db.begin();
    let mut second = db.begin();
    // Both read 10 and want to add to it.
    let first_value = get(&first, table, b"1").unwrap();
    let second_value = get(&second, table, b"1").unwrap();
    assert_eq!(first_value, second_value);
    first.put(table, b"1", b"11").unwrap();
    first.commit().unwrap();
    let result = second.put(table, b"1", b"12");
    assert!(
        matches!(result, Err(Error::SerializationFailure)),
        "{result:?}"
    );
    // The failure sticks: the transaction cannot commit.
    assert!(matches!(second.commit(), Err(Error::SerializationFailure)));
    assert_eq!(committed(&db, table, b"1").unwrap(), b"11");
}

#[test]
fn lost_update_with_get_for_update_is_prevented() {
    let (db, table) = setup();
    let mut first = db.begin();
    let mut second = db.begin();
    assert_eq!(first.get_for_update(table, b"1").unwrap().unwrap(), b"10");
    first.put(table, b"1", b"11").unwrap();
    first.commit().unwrap();
    let result = second.get_for_update(table, b"1");
    assert!(
        matches!(result, Err(Error::SerializationFailure)),
        "{result:?}"
    );
}

#[test]
fn read_skew_is_prevented() {
    let (db, table) = setup();
    let reader = db.begin_read_only();
    assert_eq!(get(&reader, table, b"1").unwrap(), b"10");
    let mut writer = db.begin();
    writer.put(table, b"1", b"12").unwrap();
    writer.put(table, b"2", b"18").unwrap();
    writer.commit().unwrap();
    assert_eq!(get(&reader, table, b"2").unwrap(), b"20");
    assert_eq!(
        scan(&reader, table),
        vec![row(b"1", b"10"), row(b"2", b"20")]
    );
}

/// Snapshot isolation, not serializability: two transactions each read both rows and update a
/// different one; both commit, giving a state no serial order would (the invariant
/// "at least one row is positive" breaks). Applications that need it lock with
/// `get_for_update` on the rows they read.
#[test]
fn write_skew_is_allowed() {
    let (db, table) = setup();
    let mut first = db.begin();
    let mut second = db.begin();
    let sum = |txn: &Transaction| {
        get(txn, table, b"1").unwrap().len() + get(txn, table, b"2").unwrap().len()
    };
    assert_eq!(sum(&first), 4);
    assert_eq!(sum(&second), 4);
    first.put(table, b"1", b"0").unwrap();
    second.put(table, b"2", b"0").unwrap();
    first.commit().unwrap();
    second.commit().unwrap();
    assert_eq!(committed(&db, table, b"1").unwrap(), b"0");
    assert_eq!(committed(&db, table, b"2").unwrap(), b"0");
}

#[test]
fn write_skew_is_prevented_by_get_for_update() {
    let (db, table) = setup();
    let mut first = db.begin();
    let mut second = db.begin();
    first.get_for_update(table, b"1").unwrap();
    first.get_for_update(table, b"2").unwrap();
    first.put(table, b"1", b"0").unwrap();
    first.commit().unwrap();
    let result = second.get_for_update(table, b"1");
    assert!(
        matches!(result, Err(Error::SerializationFailure)),
        "{result:?}"
    );
}

#[test]
fn deadlock_is_detected() {
    let (db, table) = setup();
    let mut first = db.begin();
    let mut second = db.begin();
    first.put(table, b"1", b"11").unwrap();
    second.put(table, b"2", b"21").unwrap();
    let (sender, receiver) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        // Waits for `second`'s lock on row 2.
        let result = first.put(table, b"2", b"12");
        sender.send(()).unwrap();
        (first, result)
    });
    assert!(receiver.recv_timeout(Duration::from_millis(50)).is_err());
    // Row 1 is held by `first`, which waits for us: a cycle.
    let second_result = second.put(table, b"1", b"22");
    let second_deadlocked = matches!(second_result, Err(Error::Deadlock));
    if second_deadlocked {
        // The victim aborts, which lets `first` take row 2.
        second.abort();
        let (first, first_result) = thread.join().unwrap();
        first_result.unwrap();
        first.commit().unwrap();
        assert_eq!(committed(&db, table, b"2").unwrap(), b"12");
    } else {
        // `first` was the victim: it fails, aborts when dropped, and `second` proceeds.
        second_result.unwrap();
        let (first, first_result) = thread.join().unwrap();
        assert!(
            matches!(first_result, Err(Error::Deadlock)),
            "{first_result:?}"
        );
        assert!(matches!(first.commit(), Err(Error::Deadlock)));
        second.commit().unwrap();
        assert_eq!(committed(&db, table, b"1").unwrap(), b"22");
    }
    assert!(db.stats().txn.locks.deadlocks >= 1);
}

#[test]
fn lock_wait_times_out() {
    let (db, table) = setup();
    let mut holder = db.begin();
    holder.put(table, b"1", b"11").unwrap();
    let mut waiter = db.begin();
    let result = waiter.put(table, b"1", b"12");
    assert!(matches!(result, Err(Error::LockTimeout(_))), "{result:?}");
    assert!(result.unwrap_err().is_retryable());
    holder.commit().unwrap();
    assert_eq!(committed(&db, table, b"1").unwrap(), b"11");
}

#[test]
fn read_only_transaction_cannot_write() {
    let (db, table) = setup();
    let mut txn = db.begin_read_only();
    assert!(matches!(
        txn.put(table, b"3", b"30"),
        Err(Error::ReadOnlyTransaction)
    ));
    assert!(matches!(
        txn.insert(table, b"3", b"30"),
        Err(Error::ReadOnlyTransaction)
    ));
    assert!(matches!(
        txn.update(table, b"1", b"11"),
        Err(Error::ReadOnlyTransaction)
    ));
    assert!(matches!(
        txn.delete(table, b"1"),
        Err(Error::ReadOnlyTransaction)
    ));
    assert!(matches!(
        txn.get_for_update(table, b"1"),
        Err(Error::ReadOnlyTransaction)
    ));
    assert_eq!(txn.commit().unwrap(), None);
    assert_eq!(committed(&db, table, b"3"), None);
    assert_eq!(committed(&db, table, b"1").unwrap(), b"10");
}

#[test]
fn own_writes_are_visible_in_get_and_scan() {
    let (db, table) = setup();
    let mut txn = db.begin();
    txn.put(table, b"0", b"00").unwrap();
    txn.update(table, b"1", b"11").unwrap();
    txn.delete(table, b"2").unwrap();
    txn.insert(table, b"3", b"30").unwrap();
    assert_eq!(get(&txn, table, b"0").unwrap(), b"00");
    assert_eq!(get(&txn, table, b"1").unwrap(), b"11");
    assert_eq!(get(&txn, table, b"2"), None);
    assert_eq!(
        scan(&txn, table),
        vec![row(b"0", b"00"), row(b"1", b"11"), row(b"3", b"30")]
    );
    let ranged: Vec<_> = txn
        .scan(table, Bound::Excluded(b"0"), Bound::Included(b"2"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ranged, vec![row(b"1", b"11")]);
    // Others do not see them yet.
    assert_eq!(scan(&db.begin_read_only(), table).len(), 2);
    txn.commit().unwrap();
    assert_eq!(scan(&db.begin_read_only(), table).len(), 3);
}

#[test]
fn delete_then_reinsert_in_one_transaction() {
    let (db, table) = setup();
    let mut txn = db.begin();
    assert!(txn.delete(table, b"1").unwrap());
    assert_eq!(get(&txn, table, b"1"), None);
    assert!(!txn.update(table, b"1", b"x").unwrap());
    txn.insert(table, b"1", b"13").unwrap();
    assert!(matches!(
        txn.insert(table, b"1", b"14"),
        Err(Error::DuplicateKey)
    ));
    assert_eq!(get(&txn, table, b"1").unwrap(), b"13");
    txn.commit().unwrap();
    assert_eq!(committed(&db, table, b"1").unwrap(), b"13");
}

#[test]
fn snapshot_ignores_later_inserts_and_deletes() {
    let (db, table) = setup();
    let reader = db.begin_read_only();
    let mut writer = db.begin();
    writer.insert(table, b"3", b"30").unwrap();
    writer.delete(table, b"1").unwrap();
    writer.commit().unwrap();
    db.purge().unwrap();
    assert_eq!(get(&reader, table, b"3"), None);
    assert_eq!(get(&reader, table, b"1").unwrap(), b"10");
    assert_eq!(
        scan(&reader, table),
        vec![row(b"1", b"10"), row(b"2", b"20")]
    );
    let fresh = db.begin_read_only();
    assert_eq!(
        scan(&fresh, table),
        vec![row(b"2", b"20"), row(b"3", b"30")]
    );
}

#[test]
fn insert_conflicts_with_concurrent_committed_insert() {
    let (db, table) = setup();
    let mut first = db.begin();
    let mut second = db.begin();
    first.insert(table, b"5", b"50").unwrap();
    first.commit().unwrap();
    // The row is invisible to `second`'s snapshot but was committed after it: not a
    // duplicate the snapshot can see, and not a write that may overwrite it.
    let result = second.insert(table, b"5", b"51");
    assert!(
        matches!(result, Err(Error::SerializationFailure)),
        "{result:?}"
    );
    assert_eq!(committed(&db, table, b"5").unwrap(), b"50");
}

/// SERIALIZABLE (`begin_serializable`) under concurrency: threads run the on-call doctors
/// rule (withdraw 100 from one of two accounts only if the two hold at least 100 together)
/// with retries. Snapshot isolation lets two withdrawals see the same total and overdraw
/// (write skew); serializable transactions keep the sum at or above zero, and every
/// withdrawal that committed is counted.
#[test]
fn serializable_threads_never_overdraw_two_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let table = db.create_table("accounts").unwrap();
    let ledger = db.create_table("ledger").unwrap();
    let mut setup = db.begin();
    setup.insert(table, b"x", b"1000").unwrap();
    setup.insert(table, b"y", b"1000").unwrap();
    setup.commit().unwrap();
    fn balance(txn: &Transaction, table: TreeId, key: &[u8]) -> i64 {
        String::from_utf8(txn.get(table, key).unwrap().unwrap())
            .unwrap()
            .parse()
            .unwrap()
    }
    let threads: Vec<_> = (0..4u8)
        .map(|thread| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut withdrawn = 0;
                for round in 0..60u32 {
                    loop {
                        let mut txn = db.begin_serializable();
                        let (x, y) = (balance(&txn, table, b"x"), balance(&txn, table, b"y"));
                        if x + y < 100 {
                            break;
                        }
                        let (key, balance) = if (round + thread as u32).is_multiple_of(2) {
                            (&b"x"[..], x)
                        } else {
                            (&b"y"[..], y)
                        };
                        let mut entry = vec![thread];
                        entry.extend_from_slice(&round.to_be_bytes());
                        let written = txn
                            .put(table, key, (balance - 100).to_string().as_bytes())
                            .and_then(|()| txn.insert(ledger, &entry, b"100"))
                            .and_then(|()| txn.commit());
                        match written {
                            Ok(_) => {
                                withdrawn += 100;
                                break;
                            }
                            Err(error) if error.is_retryable() => continue,
                            Err(error) => panic!("{error}"),
                        }
                    }
                }
                withdrawn
            })
        })
        .collect();
    let withdrawn: i64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let check = db.begin_read_only();
    let (x, y) = (balance(&check, table, b"x"), balance(&check, table, b"y"));
    let entries = check
        .scan(ledger, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .count() as i64;
    assert!(x + y >= 0, "overdrawn: x = {x}, y = {y}");
    assert_eq!(2000 - (x + y), withdrawn);
    assert_eq!(entries * 100, withdrawn);
    assert_eq!(withdrawn, 2000, "the accounts are emptied in 100s exactly");
}

/// A serializable writer fails at commit when a commit after its snapshot changed a row it
/// read or inserted into a range it scanned; a plain snapshot transaction does not.
#[test]
fn serializable_commit_validates_points_and_ranges() {
    let (db, table) = setup();
    for (reader_scans, serializable, fails) in [
        (false, true, true),
        (true, true, true),
        (false, false, false),
        (true, false, false),
    ] {
        let mut reader = if serializable {
            db.begin_serializable()
        } else {
            db.begin()
        };
        if reader_scans {
            scan(&reader, table);
        } else {
            get(&reader, table, b"1");
        }
        let mut other = db.begin();
        if reader_scans {
            other.insert(table, b"15", b"new").unwrap();
        } else {
            other.put(table, b"1", b"11").unwrap();
        }
        other.commit().unwrap();
        reader.put(table, b"9", b"mine").unwrap();
        let result = reader.commit();
        assert_eq!(
            matches!(result, Err(Error::ReadWriteConflict)),
            fails,
            "scan {reader_scans}, serializable {serializable}: {result:?}"
        );
        let mut cleanup = db.begin();
        cleanup.delete(table, b"15").unwrap();
        cleanup.delete(table, b"9").unwrap();
        cleanup.commit().unwrap();
    }
}

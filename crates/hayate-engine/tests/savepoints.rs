//! Savepoints: `Transaction::savepoint` marks a point, `rollback_to` undoes the writes made
//! after it (newest first), releases the row locks taken after it and forgets a write
//! conflict met after it; the transaction goes on and commits what was written before.

use std::time::Duration;

use hayate_engine::{Database, DatabaseConfig, Error, TreeId};

fn setup() -> (tempfile::TempDir, Database, TreeId) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = DatabaseConfig::default();
    config.locks.timeout = Duration::from_millis(200);
    let db = Database::open(dir.path(), config).unwrap();
    let table = db.create_table("t").unwrap();
    let mut txn = db.begin();
    txn.insert(table, b"a", b"1").unwrap();
    txn.insert(table, b"b", b"1").unwrap();
    txn.commit().unwrap();
    (dir, db, table)
}

fn committed(db: &Database, table: TreeId) -> Vec<(Vec<u8>, Vec<u8>)> {
    let txn = db.begin_read_only();
    let rows = txn
        .scan(
            table,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
        )
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    txn.abort();
    rows
}

fn pairs(rows: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
    rows.iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

#[test]
fn rollback_to_undoes_later_writes_in_reverse_and_keeps_earlier_ones() {
    let (_dir, db, table) = setup();
    let mut txn = db.begin();
    txn.put(table, b"a", b"2").unwrap();
    let outer = txn.savepoint();
    txn.put(table, b"a", b"3").unwrap(); // overwrites a write made before the mark
    txn.delete(table, b"b").unwrap();
    txn.insert(table, b"c", b"1").unwrap();
    let inner = txn.savepoint();
    txn.put(table, b"c", b"2").unwrap();
    txn.rollback_to(inner).unwrap();
    assert_eq!(txn.get(table, b"c").unwrap().as_deref(), Some(&b"1"[..]));
    txn.rollback_to(outer).unwrap();
    assert_eq!(txn.get(table, b"a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(txn.get(table, b"b").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(txn.get(table, b"c").unwrap(), None);
    // The inner mark was rolled back past.
    assert!(matches!(
        txn.rollback_to(inner),
        Err(Error::InvalidArgument(_))
    ));
    // The outer mark stays valid, as SQL's ROLLBACK TO keeps its savepoint.
    txn.insert(table, b"d", b"1").unwrap();
    txn.rollback_to(outer).unwrap();
    txn.commit().unwrap();
    assert_eq!(committed(&db, table), pairs(&[("a", "2"), ("b", "1")]));
}

#[test]
fn rollback_to_releases_locks_taken_after_the_mark_only() {
    let (_dir, db, table) = setup();
    let mut txn = db.begin();
    txn.put(table, b"a", b"2").unwrap();
    let mark = txn.savepoint();
    txn.put(table, b"b", b"2").unwrap();
    txn.rollback_to(mark).unwrap();

    let mut other = db.begin();
    other.put(table, b"b", b"3").unwrap(); // the lock on b was released
    assert!(matches!(
        other.put(table, b"a", b"3"),
        Err(Error::LockTimeout(_))
    ));
    drop(other);
    let mut other = db.begin();
    other.put(table, b"b", b"3").unwrap();
    other.commit().unwrap();
    txn.commit().unwrap();
    assert_eq!(committed(&db, table), pairs(&[("a", "2"), ("b", "3")]));
}

#[test]
fn a_conflict_after_the_mark_is_recoverable() {
    let (_dir, db, table) = setup();
    let mut txn = db.begin();
    txn.put(table, b"a", b"2").unwrap();
    let mark = txn.savepoint();
    let mut other = db.begin();
    other.put(table, b"b", b"9").unwrap();
    other.commit().unwrap();
    // b changed after the snapshot: writing it is a serialization failure...
    assert!(matches!(
        txn.put(table, b"b", b"2"),
        Err(Error::SerializationFailure)
    ));
    assert!(matches!(
        txn.put(table, b"c", b"1"),
        Err(Error::SerializationFailure)
    ));
    // ... that the rollback to the mark forgets: the write that met it never happened.
    txn.rollback_to(mark).unwrap();
    txn.put(table, b"c", b"1").unwrap();
    txn.commit().unwrap();
    assert_eq!(
        committed(&db, table),
        pairs(&[("a", "2"), ("b", "9"), ("c", "1")])
    );
}

#[test]
fn a_conflict_before_the_mark_stays() {
    let (_dir, db, table) = setup();
    let mut txn = db.begin();
    let mut other = db.begin();
    other.put(table, b"b", b"9").unwrap();
    other.commit().unwrap();
    assert!(txn.put(table, b"b", b"2").is_err());
    let mark = txn.savepoint();
    txn.rollback_to(mark).unwrap();
    assert!(matches!(txn.commit(), Err(Error::SerializationFailure)));
    assert_eq!(committed(&db, table), pairs(&[("a", "1"), ("b", "9")]));
}

#[test]
fn rollback_to_without_a_mark_of_this_transaction_is_an_error() {
    let (_dir, db, table) = setup();
    let mut first = db.begin();
    let mark = first.savepoint();
    let mut second = db.begin();
    second.put(table, b"a", b"5").unwrap();
    assert!(matches!(
        second.rollback_to(mark),
        Err(Error::InvalidArgument(_))
    ));
    second.commit().unwrap();
    first.abort();
}

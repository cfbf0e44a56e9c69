//! The engine's support for READ COMMITTED (the SQL layer's default, as in PostgreSQL):
//! a statement-level snapshot (`refresh_snapshot`) and locking reads of the newest version
//! (`lock_latest`) that let a writer update a row changed by a concurrent commit without
//! losing that commit's update.

use hayate_engine::{Database, DatabaseConfig};

fn counter(value: &[u8]) -> u64 {
    u64::from_le_bytes(value.try_into().unwrap())
}

#[test]
fn refreshed_snapshot_sees_later_commits_and_keeps_own_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let table = db.create_table("t").unwrap();
    let mut setup = db.begin();
    setup.insert(table, b"a", b"1").unwrap();
    setup.commit().unwrap();

    let mut txn = db.begin();
    txn.put(table, b"mine", b"x").unwrap();
    let mut other = db.begin();
    other.put(table, b"a", b"2").unwrap();
    other.put(table, b"b", b"2").unwrap();
    other.commit().unwrap();
    assert_eq!(txn.get(table, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(txn.get(table, b"b").unwrap(), None);

    txn.refresh_snapshot();
    assert_eq!(txn.get(table, b"a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(txn.get(table, b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(txn.get(table, b"mine").unwrap().as_deref(), Some(&b"x"[..]));
    // After the refresh the row changed before it is no conflict.
    txn.put(table, b"a", b"3").unwrap();
    txn.commit().unwrap();
    let check = db.begin_read_only();
    assert_eq!(check.get(table, b"a").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(
        check.get(table, b"mine").unwrap().as_deref(),
        Some(&b"x"[..])
    );
}

#[test]
fn locking_read_of_the_newest_version_allows_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let table = db.create_table("t").unwrap();
    let mut setup = db.begin();
    setup.insert(table, b"a", b"1").unwrap();
    setup.insert(table, b"b", b"1").unwrap();
    setup.commit().unwrap();

    let mut plain = db.begin();
    let mut locking = db.begin();
    let mut other = db.begin();
    other.put(table, b"a", b"2").unwrap();
    other.put(table, b"b", b"2").unwrap();
    other.commit().unwrap();

    let error = plain.put(table, b"a", b"3").unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert_eq!(
        locking.lock_latest(table, b"b").unwrap().as_deref(),
        Some(&b"2"[..])
    );
    locking.put(table, b"b", b"3").unwrap();
    // Its own write is what a second locking read returns.
    assert_eq!(
        locking.lock_latest(table, b"b").unwrap().as_deref(),
        Some(&b"3"[..])
    );
    assert_eq!(
        locking.get(table, b"a").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    locking.commit().unwrap();
    assert_eq!(
        db.begin_read_only().get(table, b"b").unwrap().as_deref(),
        Some(&b"3"[..])
    );
}

#[test]
fn concurrent_increments_by_locking_reads_are_never_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let table = db.create_table("hot").unwrap();
    let mut setup = db.begin();
    setup.insert(table, b"n", &0u64.to_le_bytes()).unwrap();
    setup.commit().unwrap();
    let (threads, increments) = (8u64, 50u64);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let db = &db;
            scope.spawn(move || {
                for _ in 0..increments {
                    let mut txn = db.begin();
                    let value = txn.lock_latest(table, b"n").unwrap().unwrap();
                    txn.put(table, b"n", &(counter(&value) + 1).to_le_bytes())
                        .unwrap();
                    txn.commit().unwrap();
                }
            });
        }
    });
    let value = db.begin_read_only().get(table, b"n").unwrap().unwrap();
    assert_eq!(counter(&value), threads * increments);
}

//! Log shipping between two databases in one process (docs/design.md 5.6): a primary whose
//! flushes are shipped through an in-memory link to a standby, which makes them durable,
//! acknowledges, and applies them. The link stands for the network transport (not built yet);
//! it can be cut, resumed and made to refuse (fencing).
//!
//! A standby starts as a copy of the primary's files taken while it was closed (an offline
//! base backup), so both logs hold the same bytes at the same positions.

use crate::common;

use common::rows;
use std::collections::VecDeque;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hayate_engine::{
    BufferSize, Database, DatabaseConfig, Error, LogRecord, LogShipper, Lsn, StoreConfig,
    StreamDecoder, TreeId, WalConfig, WritePolicy,
};
use parking_lot::{Condvar, Mutex};

#[derive(Default)]
struct LinkState {
    /// Flushed ranges handed over by the primary, not yet delivered.
    queue: VecDeque<(Lsn, Vec<u8>)>,
    /// Deliveries happen only while connected.
    connected: bool,
    /// The standby's durable log end, as acknowledged.
    acked: Lsn,
    /// Set to make the primary's waits fail (it was fenced).
    fenced: bool,
    /// Tells the delivery thread to end.
    stop: bool,
}

/// The primary's shipper and the standby's feed, in memory.
#[derive(Default)]
struct Link {
    state: Mutex<LinkState>,
    changed: Condvar,
}

impl LogShipper for Link {
    fn ship(&self, lsn: Lsn, bytes: &[u8]) {
        self.state.lock().queue.push_back((lsn, bytes.to_vec()));
        self.changed.notify_all();
    }

    fn wait_replicated(&self, lsn: Lsn) -> hayate_engine::Result<()> {
        let mut state = self.state.lock();
        loop {
            if state.fenced {
                return Err(Error::NotPrimary("fenced by the test".into()));
            }
            if state.acked >= lsn {
                return Ok(());
            }
            self.changed.wait(&mut state);
        }
    }
}

impl Link {
    fn set_connected(&self, connected: bool) {
        self.state.lock().connected = connected;
        self.changed.notify_all();
    }

    fn fence(&self) {
        self.state.lock().fenced = true;
        self.changed.notify_all();
    }

    /// Starts delivering to `standby`: first the primary's bytes it misses before the queued
    /// ones (read from the primary's files), then the queue; each delivery is acknowledged
    /// with the standby's durable end and then applied.
    fn deliver(
        self: &Arc<Self>,
        primary: &Database,
        standby: &Database,
        mut need: Lsn,
    ) -> JoinHandle<()> {
        let (link, primary, standby) = (self.clone(), primary.clone(), standby.clone());
        link.state.lock().stop = false;
        std::thread::spawn(move || loop {
            let (lsn, bytes) = {
                let mut state = link.state.lock();
                while !state.stop && (!state.connected || state.queue.is_empty()) {
                    link.changed.wait(&mut state);
                }
                if state.stop {
                    return;
                }
                state.queue.pop_front().expect("queue is not empty")
            };
            if need < lsn {
                let missing = primary.read_log(need, lsn).expect("read the primary's log");
                standby
                    .receive_log(need, &missing)
                    .expect("receive caught-up bytes");
            }
            need = standby
                .receive_log(lsn, &bytes)
                .expect("receive shipped bytes");
            {
                let mut state = link.state.lock();
                state.acked = state.acked.max(need);
            }
            link.changed.notify_all();
            standby.apply_received().expect("apply on the standby");
        })
    }

    fn stop(&self, thread: JoinHandle<()>) {
        self.state.lock().stop = true;
        self.changed.notify_all();
        thread.join().unwrap();
    }
}

fn config() -> DatabaseConfig {
    DatabaseConfig {
        buffer_size: BufferSize::Bytes(8 << 20),
        wal: WalConfig {
            // Small buffers: a commit of a few hundred KiB goes out as parts over many flushes.
            buffer_size_bytes: 64 * 1024,
            ..WalConfig::default()
        },
        ..DatabaseConfig::default()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A primary with table `accounts` and a standby seeded from a copy of its closed files.
struct Pair {
    _dirs: tempfile::TempDir,
    primary_dir: std::path::PathBuf,
    standby_dir: std::path::PathBuf,
    primary: Database,
    standby: Database,
    link: Arc<Link>,
    delivery: Option<JoinHandle<()>>,
}

impl Pair {
    fn new() -> Pair {
        Pair::with_config(config())
    }

    fn with_config(config: DatabaseConfig) -> Pair {
        let dirs = tempfile::tempdir().unwrap();
        let primary_dir = dirs.path().join("a");
        let standby_dir = dirs.path().join("b");
        let primary = Database::open(&primary_dir, config.clone()).unwrap();
        primary.create_table("accounts").unwrap();
        primary.close().unwrap();
        copy_dir(&primary_dir, &standby_dir);
        let primary = Database::open(&primary_dir, config.clone()).unwrap();
        let standby = Database::open(&standby_dir, config).unwrap();
        let need = standby.start_standby().unwrap();
        let link = Arc::new(Link::default());
        link.set_connected(true);
        let shipped_from = primary.set_log_shipper(Some(link.clone()));
        assert!(
            need <= shipped_from,
            "the standby is not ahead of the primary"
        );
        let delivery = Some(link.deliver(&primary, &standby, need));
        Pair {
            _dirs: dirs,
            primary_dir,
            standby_dir,
            primary,
            standby,
            link,
            delivery,
        }
    }

    fn table(&self) -> TreeId {
        self.primary.table("accounts").unwrap()
    }

    /// Waits until the standby applied everything the primary logged.
    fn caught_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.standby.applied_lsn() < self.primary.log_end_lsn() {
            assert!(Instant::now() < deadline, "the standby did not catch up");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn stop_delivery(&mut self) {
        if let Some(thread) = self.delivery.take() {
            self.link.stop(thread);
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.link.fence();
        self.stop_delivery();
        // The shipper holds nothing of the primary, but drop it before the databases anyway.
        self.primary.set_log_shipper(None);
    }
}

fn put(db: &Database, table: TreeId, key: u64, value: &[u8]) -> hayate_engine::Result<()> {
    let mut txn = db.begin();
    txn.put(table, &key.to_be_bytes(), value)?;
    txn.commit().map(|_| ())
}

#[test]
fn acknowledged_commits_are_durable_on_the_standby_and_the_logs_are_identical() {
    let pair = Pair::new();
    let table = pair.table();
    let start = pair.standby.log_end_lsn();
    for key in 0..200u64 {
        put(&pair.primary, table, key, &key.to_le_bytes().repeat(8)).unwrap();
        // Acknowledged: the standby has it durable.
        assert!(pair.standby.log_local_durable_lsn() >= pair.primary.log_durable_lsn());
    }
    // A commit larger than a log buffer: logged as parts over several flushes.
    let mut txn = pair.primary.begin();
    for key in 1_000..1_300u64 {
        txn.put(table, &key.to_be_bytes(), &[key as u8; 1024])
            .unwrap();
    }
    txn.commit().unwrap();
    // DDL replicates too.
    let other = pair.primary.create_table("other").unwrap();
    put(&pair.primary, other, 1, b"one").unwrap();
    pair.primary.drop_table("other").unwrap();
    pair.caught_up();
    assert_eq!(rows(&pair.standby, table), rows(&pair.primary, table));
    assert_eq!(rows(&pair.standby, table).len(), 500);
    assert!(matches!(
        pair.standby.table("other"),
        Err(Error::NoSuchTable(_))
    ));
    let end = pair.primary.log_durable_lsn();
    assert_eq!(
        pair.standby.read_log(start, end).unwrap(),
        pair.primary.read_log(start, end).unwrap(),
        "the logs differ"
    );
}

#[test]
fn no_commit_is_acknowledged_or_visible_while_the_standby_is_cut_off() {
    let pair = Pair::new();
    let table = pair.table();
    put(&pair.primary, table, 1, b"before").unwrap();
    pair.link.set_connected(false);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let primary = pair.primary.clone();
    let committer = std::thread::spawn(move || {
        done_tx.send(put(&primary, table, 2, b"during")).unwrap();
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        done_rx.try_recv().is_err(),
        "acknowledged without the standby"
    );
    let txn = pair.primary.begin_read_only();
    assert_eq!(txn.get(table, &2u64.to_be_bytes()).unwrap(), None);
    txn.commit().unwrap();
    pair.link.set_connected(true);
    done_rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .unwrap();
    committer.join().unwrap();
    let txn = pair.primary.begin_read_only();
    assert_eq!(
        txn.get(table, &2u64.to_be_bytes()).unwrap().as_deref(),
        Some(&b"during"[..])
    );
    txn.commit().unwrap();
}

#[test]
fn hot_standby_snapshots_are_stable_and_writes_are_refused() {
    let pair = Pair::new();
    let table = pair.table();
    put(&pair.primary, table, 7, b"old").unwrap();
    pair.caught_up();
    let reader = pair.standby.begin_read_only();
    assert_eq!(
        reader.get(table, &7u64.to_be_bytes()).unwrap().as_deref(),
        Some(&b"old"[..])
    );
    for round in 0..20u64 {
        put(&pair.primary, table, 7, format!("new {round}").as_bytes()).unwrap();
        put(&pair.primary, table, 100 + round, b"added").unwrap();
    }
    pair.caught_up();
    // The open snapshot still reads what it read; a new one sees everything.
    assert_eq!(
        reader.get(table, &7u64.to_be_bytes()).unwrap().as_deref(),
        Some(&b"old"[..])
    );
    assert_eq!(
        reader
            .scan(table, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count(),
        1
    );
    reader.commit().unwrap();
    let fresh = pair.standby.begin_read_only();
    assert_eq!(
        fresh.get(table, &7u64.to_be_bytes()).unwrap().as_deref(),
        Some(&b"new 19"[..])
    );
    fresh.commit().unwrap();
    assert!(matches!(
        put(&pair.standby, table, 1, b"x"),
        Err(Error::Standby)
    ));
    assert!(matches!(
        pair.standby.create_table("t"),
        Err(Error::Standby)
    ));
}

#[test]
fn a_restarted_standby_catches_up_from_the_primary_and_is_promoted_with_every_commit() {
    let mut pair = Pair::new();
    let table = pair.table();
    for key in 0..50u64 {
        put(&pair.primary, table, key, b"first").unwrap();
    }
    pair.caught_up();
    // The standby goes down; its replacement opens the same files.
    pair.stop_delivery();
    let old = std::mem::replace(&mut pair.standby, pair.primary.clone());
    old.close().unwrap();
    let standby = Database::open(&pair.standby_dir, config()).unwrap();
    assert_eq!(
        rows(&standby, table).len(),
        50,
        "the standby's own log recovered"
    );
    let need = standby.start_standby().unwrap();
    pair.standby = standby;
    pair.delivery = Some(pair.link.deliver(&pair.primary, &pair.standby, need));
    for key in 50..100u64 {
        put(&pair.primary, table, key, b"second").unwrap();
    }
    pair.caught_up();
    let expected = rows(&pair.primary, table);
    // The primary dies; the standby takes over.
    pair.link.fence();
    pair.stop_delivery();
    pair.standby.promote().unwrap();
    assert!(!pair.standby.is_standby());
    assert_eq!(rows(&pair.standby, table), expected);
    put(&pair.standby, table, 1_000, b"after failover").unwrap();
    assert_eq!(rows(&pair.standby, table).len(), 101);
    let _ = &pair.primary_dir;
}

#[test]
fn promotion_cuts_a_commit_whose_last_part_never_came() {
    let mut pair = Pair::new();
    let table = pair.table();
    put(&pair.primary, table, 1, b"acknowledged").unwrap();
    pair.caught_up();
    // The delivery is ours now.
    pair.stop_delivery();
    let primary = pair.primary.clone();
    let committer = std::thread::spawn(move || {
        let mut txn = primary.begin();
        for key in 10..400u64 {
            txn.put(table, &key.to_be_bytes(), &[3; 1024]).unwrap();
        }
        txn.commit()
    });
    // Deliver and acknowledge each flush of the commit, except the one holding its last part
    // (a decoder of our own tells which).
    let mut decoder: Option<StreamDecoder> = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let next = pair.link.state.lock().queue.pop_front();
        let Some((lsn, bytes)) = next else {
            assert!(
                Instant::now() < deadline,
                "the commit's last part never came"
            );
            std::thread::sleep(Duration::from_millis(2));
            continue;
        };
        let decoder = decoder.get_or_insert_with(|| StreamDecoder::new(lsn));
        let completes =
            decoder.push(lsn, &bytes).unwrap().iter().any(
                |(_, record)| matches!(record, LogRecord::Commit { ops, .. } if ops.len() > 300),
            );
        if completes {
            break;
        }
        let durable = pair.standby.receive_log(lsn, &bytes).unwrap();
        pair.link.state.lock().acked = durable;
        pair.link.changed.notify_all();
    }
    pair.standby.apply_received().unwrap();
    // The primary dies before the standby got the last part: never acknowledged.
    pair.link.fence();
    assert!(matches!(
        committer.join().unwrap(),
        Err(Error::NotPrimary(_))
    ));
    pair.standby.promote().unwrap();
    assert_eq!(rows(&pair.standby, table).len(), 1);
    put(&pair.standby, table, 2, b"new primary").unwrap();
    // The cut holds across a restart: recovery finds the new commit, not the parts.
    let dir = pair.standby_dir.clone();
    let promoted = std::mem::replace(&mut pair.standby, pair.primary.clone());
    promoted.close().unwrap();
    let reopened = Database::open(&dir, config()).unwrap();
    let keys: Vec<Vec<u8>> = rows(&reopened, table)
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(
        keys,
        vec![1u64.to_be_bytes().to_vec(), 2u64.to_be_bytes().to_vec()]
    );
}

#[test]
fn a_fenced_primary_stops_acknowledging_but_is_not_poisoned() {
    let pair = Pair::new();
    let table = pair.table();
    put(&pair.primary, table, 1, b"kept").unwrap();
    pair.link.fence();
    assert!(matches!(
        put(&pair.primary, table, 2, b"refused"),
        Err(Error::NotPrimary(_))
    ));
    assert!(matches!(
        put(&pair.primary, table, 3, b"refused too"),
        Err(Error::NotPrimary(_))
    ));
    // Reads go on; nothing unacknowledged became visible.
    assert_eq!(rows(&pair.primary, table).len(), 1);
    let poisoned = matches!(
        pair.primary.begin().put(table, &4u64.to_be_bytes(), b"x"),
        Err(Error::Poisoned(_))
    );
    assert!(!poisoned);
}

/// Waits until `db`'s log is durable here past `lsn`; returns the new position.
fn logged_past(db: &Database, lsn: Lsn) -> Lsn {
    let deadline = Instant::now() + Duration::from_secs(20);
    while db.log_local_durable_lsn() <= lsn {
        assert!(Instant::now() < deadline, "nothing was logged");
        std::thread::sleep(Duration::from_millis(2));
    }
    db.log_local_durable_lsn()
}

#[test]
fn an_old_primary_with_an_unacknowledged_tail_is_rewound_to_the_fork_point() {
    for policy in [WritePolicy::OutOfPlace, WritePolicy::InPlace] {
        rewind_an_old_primary(DatabaseConfig {
            store: StoreConfig {
                policy,
                ..StoreConfig::default()
            },
            ..config()
        });
    }
}

fn rewind_an_old_primary(config: DatabaseConfig) {
    let mut pair = Pair::with_config(config.clone());
    let table = pair.table();
    for key in 0..200u64 {
        put(&pair.primary, table, key, &[1; 200]).unwrap();
    }
    pair.caught_up();
    // Its log is acknowledged up to its end: the checkpoint covers no more than the fork point.
    pair.primary.checkpoint().unwrap();
    // Logged after the checkpoint and before the fork: the rewound node replays these.
    for key in 200..300u64 {
        put(&pair.primary, table, key, &[2; 200]).unwrap();
    }
    pair.caught_up();
    // The standby is cut off; what the primary logs now, nobody acknowledges: a commit that
    // overwrites, deletes and inserts rows, and a new table.
    pair.stop_delivery();
    let before_tail = pair.primary.log_local_durable_lsn();
    let primary = pair.primary.clone();
    let tail_commit = std::thread::spawn(move || {
        let mut txn = primary.begin();
        for key in 0..50u64 {
            txn.put(table, &key.to_be_bytes(), &[9; 200]).unwrap();
        }
        for key in 250..260u64 {
            txn.delete(table, &key.to_be_bytes()).unwrap();
        }
        for key in 1_000..1_100u64 {
            txn.put(table, &key.to_be_bytes(), &[9; 200]).unwrap();
        }
        txn.commit()
    });
    let after_commit = logged_past(&pair.primary, before_tail);
    let primary = pair.primary.clone();
    let tail_ddl = std::thread::spawn(move || primary.create_table("tail"));
    logged_past(&pair.primary, after_commit);
    pair.link.fence();
    assert!(matches!(
        tail_commit.join().unwrap(),
        Err(Error::NotPrimary(_))
    ));
    assert!(matches!(
        tail_ddl.join().unwrap(),
        Err(Error::NotPrimary(_))
    ));
    // The standby takes over; its log goes on from the fork point.
    pair.standby.promote().unwrap();
    let fork = pair.standby.log_end_lsn();
    assert!(
        fork < pair.primary.log_end_lsn(),
        "the old primary holds a tail"
    );
    let at_fork = rows(&pair.standby, table);
    assert_eq!(at_fork.len(), 300);
    for key in 300..320u64 {
        put(&pair.standby, table, key, &[3; 200]).unwrap();
    }
    let after = pair.standby.create_table("after").unwrap();
    put(&pair.standby, after, 1, b"after the fork").unwrap();
    // The old primary goes down: its last commits were never acknowledged, so no checkpoint.
    let new_primary = pair.standby.clone();
    let old = std::mem::replace(&mut pair.primary, new_primary.clone());
    assert!(matches!(old.close(), Err(Error::NotPrimary(_))));
    let old_dir = pair.primary_dir.clone();
    // A copy that opens as a primary checkpoints its tail at open: it cannot be rewound.
    let copy_dir_path = old_dir.with_extension("copy");
    copy_dir(&old_dir, &copy_dir_path);
    Database::open(&copy_dir_path, config.clone())
        .unwrap()
        .close()
        .unwrap();
    let refused = Database::rewind(&copy_dir_path, &config, fork).unwrap_err();
    assert!(
        refused.to_string().contains("checkpoint covers"),
        "{refused}"
    );
    // Restarted as a standby (after a kill), it recovers its tail but takes no checkpoint.
    let standby_config = DatabaseConfig {
        standby: true,
        ..config.clone()
    };
    let restarted = Database::open(&old_dir, standby_config.clone()).unwrap();
    assert!(restarted.is_standby());
    assert!(rows(&restarted, table)
        .iter()
        .any(|(key, _)| key[..] == 1_000u64.to_be_bytes()));
    assert!(
        restarted.checkpoint().is_err(),
        "a checkpoint over the tail"
    );
    restarted.close().unwrap();
    // Its primary names the fork point; the rewind cuts the tail.
    let report = Database::rewind(&old_dir, &config, fork).unwrap();
    assert_eq!(report.end_lsn, fork);
    assert!(
        report.old_end_lsn > fork && report.covered_lsn <= fork,
        "{report:?}"
    );
    let rewound = Database::open(&old_dir, standby_config).unwrap();
    assert_eq!(rewound.log_end_lsn(), fork);
    assert_eq!(rows(&rewound, table), at_fork);
    assert!(rewound.table("tail").is_err(), "the tail's table is gone");
    // It follows the new primary from the fork point and ends equal to it.
    let end = new_primary.log_local_durable_lsn();
    let missing = new_primary.read_log(fork, end).unwrap();
    assert_eq!(rewound.receive_log(fork, &missing).unwrap(), end);
    rewound.apply_received().unwrap();
    rewound.confirm_log();
    assert_eq!(rows(&rewound, table), rows(&new_primary, table));
    assert_eq!(rows(&rewound, after), rows(&new_primary, after));
    rewound.check().unwrap();
    rewound.checkpoint().unwrap();
    rewound.close().unwrap();
    let reopened = Database::open(&old_dir, config).unwrap();
    assert_eq!(rows(&reopened, table), rows(&new_primary, table));
    reopened.check().unwrap();
}

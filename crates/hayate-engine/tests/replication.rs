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
    BufferSize, Database, DatabaseConfig, Error, Io, LogRecord, LogShipper, Lsn, OpenOptions,
    SimConfig, SimIo, StoreConfig, StreamDecoder, TreeId, WalConfig, WritePolicy,
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
    /// with the standby's durable end and then applied. A delivery that fails (a disk gone)
    /// ends it and fences the primary, as a transport whose standby stopped answering does.
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
            let delivered = (|| {
                if need < lsn {
                    let missing = primary.read_log(need, lsn)?;
                    standby.receive_log(need, &missing)?;
                }
                need = standby.receive_log(lsn, &bytes)?;
                {
                    let mut state = link.state.lock();
                    state.acked = state.acked.max(need);
                }
                link.changed.notify_all();
                standby.apply_received().map(|_| ())
            })();
            if delivered.is_err() {
                link.fence();
                return;
            }
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
            // A pool of a few pages: the tail's pages are written back before the rewind,
            // over (in place) or beside (out of place) the checkpoint's images.
            buffer_size: BufferSize::Bytes(16 * 4096),
            buffer_frames_min: 16,
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
    let written = |db: &Database| {
        let buffer = db.stats().buffer;
        buffer.eviction_writes + buffer.background_writes
    };
    let written_before_tail = written(&pair.primary);
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
    assert!(
        written(&pair.primary) > written_before_tail,
        "no page was written back after the checkpoint"
    );
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

/// Commits of the power-loss workload, and the row each one writes besides its counter.
const POWER_LOSS_COMMITS: u64 = 24;

/// The power-loss runs' configuration: no checkpoint or cleaning of the maintenance thread's
/// own (the sync points of a run are then the same from run to run), a small pool.
fn power_loss_config(policy: WritePolicy) -> DatabaseConfig {
    let mut config = config();
    config.store.policy = policy;
    config.store.segment_pages = 16;
    config.store.cleaner.free_segments_low = 0;
    config.checkpoint_interval = Duration::from_secs(3600);
    config.checkpoint_log_bytes = u64::MAX;
    config.buffer_size = BufferSize::Bytes(16 * 4096);
    config.buffer_frames_min = 16;
    config
}

fn as_standby(config: &DatabaseConfig) -> DatabaseConfig {
    DatabaseConfig {
        standby: true,
        ..config.clone()
    }
}

/// Two simulated disks holding the same database (a table, nothing else): the standby's a
/// copy of the primary's files.
fn seeded_disks(config: &DatabaseConfig, seed: u64) -> [Arc<SimIo>; 2] {
    let primary = Arc::new(SimIo::new(SimConfig::with_seed(seed)));
    let db = Database::open_with_io(primary.clone(), config.clone()).unwrap();
    db.create_table("accounts").unwrap();
    db.close().unwrap();
    let standby = Arc::new(SimIo::new(SimConfig::with_seed(seed ^ 0x5eed)));
    for name in primary.list().unwrap() {
        let bytes = primary.file_contents(&name).unwrap();
        let file = standby.open(&name, OpenOptions::CREATE_DIRECT).unwrap();
        file.write_at(&bytes, 0).unwrap();
        file.sync_data().unwrap();
    }
    standby.sync_dir().unwrap();
    [primary, standby]
}

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// What a power-loss run acknowledged, and the sync points each disk passed.
struct PowerLossRun {
    /// The rows after the last acknowledged commit.
    acknowledged: Rows,
    /// The rows had the commit in flight at the failure been acknowledged.
    in_flight: Option<Rows>,
    syncs: [u64; 2],
    /// The disks as they come back from power loss.
    images: [Arc<SimIo>; 2],
}

/// Runs the workload over a primary and its standby, the disk of `node` (0 primary, 1
/// standby) freezing at its `k`-th sync point, then cuts the power of both.
fn power_loss_run(config: &DatabaseConfig, crash: Option<(usize, u64)>) -> PowerLossRun {
    let disks = seeded_disks(config, 7);
    let before = [disks[0].sync_count(), disks[1].sync_count()];
    if let Some((node, k)) = crash {
        disks[node].crash_at_sync(k);
    }
    let mut run = PowerLossRun {
        acknowledged: Vec::new(),
        in_flight: None,
        syncs: [0; 2],
        images: disks.clone(),
    };
    let opened = Database::open_with_io(disks[0].clone(), config.clone()).and_then(|primary| {
        Database::open_with_io(disks[1].clone(), as_standby(config)).map(|s| (primary, s))
    });
    if let Ok((primary, standby)) = opened {
        // The primary accepted the standby's log (a copy of its own).
        standby.confirm_log();
        let link = Arc::new(Link::default());
        link.set_connected(true);
        primary.set_log_shipper(Some(link.clone()));
        let delivery = link.deliver(&primary, &standby, standby.log_end_lsn());
        let table = primary.table("accounts").unwrap();
        let mut model: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = Default::default();
        for commit in 1..=POWER_LOSS_COMMITS {
            let mut after = model.clone();
            let mut txn = primary.begin();
            let writes = [
                (b"counter".to_vec(), commit.to_be_bytes().to_vec()),
                ((commit % 7).to_be_bytes().to_vec(), vec![commit as u8; 300]),
            ];
            let mut failed = false;
            for (key, value) in &writes {
                failed |= txn.put(table, key, value).is_err();
                after.insert(key.clone(), value.clone());
            }
            if commit % 5 == 0 {
                let key = ((commit + 3) % 7).to_be_bytes().to_vec();
                failed |= txn.delete(table, &key).is_err();
                after.remove(&key);
            }
            if failed {
                break;
            }
            if txn.commit().is_err() {
                run.in_flight = Some(after.into_iter().collect());
                break;
            }
            model = after;
            run.acknowledged = model.clone().into_iter().collect();
            // Checkpoints of both nodes fall among the sync points too.
            if commit == POWER_LOSS_COMMITS / 2 && primary.checkpoint().is_err() {
                break;
            }
            if commit == 2 * POWER_LOSS_COMMITS / 3 {
                let _ = standby.checkpoint();
            }
        }
        link.fence();
        link.stop(delivery);
        primary.set_log_shipper(None);
    }
    run.syncs = [
        disks[0].sync_count() - before[0],
        disks[1].sync_count() - before[1],
    ];
    run.images = [Arc::new(disks[0].crash()), Arc::new(disks[1].crash())];
    run
}

/// After the power loss the standby takes over: it holds every acknowledged commit, and so
/// does the old primary, which is rewound to the fork point if it holds more and then follows
/// the new primary until both are equal. Returns whether it was rewound.
fn verify_power_loss(config: &DatabaseConfig, run: &PowerLossRun, context: &str) -> bool {
    let allowed = |found: &Rows, node: &str| {
        assert!(
            *found == run.acknowledged || Some(found) == run.in_flight.as_ref(),
            "{context}: the {node} holds {} rows, {} acknowledged",
            found.len(),
            run.acknowledged.len()
        );
    };
    let new_primary = Database::open_with_io(run.images[1].clone(), as_standby(config))
        .unwrap_or_else(|error| panic!("{context}: the standby does not open: {error}"));
    new_primary.promote().unwrap();
    let fork = new_primary.log_end_lsn();
    let table = new_primary.table("accounts").unwrap();
    allowed(&rows(&new_primary, table), "standby");
    let old_disk: Arc<dyn Io> = run.images[0].clone();
    let mut old = Database::open_with_io(old_disk.clone(), as_standby(config))
        .unwrap_or_else(|error| panic!("{context}: the old primary does not open: {error}"));
    allowed(&rows(&old, table), "old primary");
    let rewound = old.log_end_lsn() > fork;
    if rewound {
        old.close().unwrap();
        Database::rewind_with_io(old_disk.clone(), config, fork)
            .unwrap_or_else(|error| panic!("{context}: rewind: {error}"));
        old = Database::open_with_io(old_disk, as_standby(config)).unwrap();
        assert_eq!(old.log_end_lsn(), fork, "{context}");
    }
    put(&new_primary, table, 99, b"after the failover").unwrap();
    let end = new_primary.log_local_durable_lsn();
    let from = old.log_end_lsn();
    let missing = new_primary.read_log(from, end).unwrap();
    old.receive_log(from, &missing).unwrap();
    old.apply_received().unwrap();
    old.confirm_log();
    assert_eq!(rows(&old, table), rows(&new_primary, table), "{context}");
    old.check()
        .unwrap_or_else(|error| panic!("{context}: check of the old primary: {error}"));
    new_primary
        .check()
        .unwrap_or_else(|error| panic!("{context}: check of the new primary: {error}"));
    rewound
}

/// Simulated power loss (`SimIo`) at every sync point of both nodes of a replicated pair, for
/// both page-store policies: after it, the promoted standby and the recovered old primary
/// each hold every acknowledged commit, nothing but the one in flight besides, and the old
/// primary follows the new one (rewound when it holds a tail).
#[test]
fn acknowledged_commits_survive_power_loss_at_every_sync_point_of_both_nodes() {
    for policy in [WritePolicy::OutOfPlace, WritePolicy::InPlace] {
        let config = power_loss_config(policy);
        let reference = power_loss_run(&config, None);
        assert!(
            reference.acknowledged.contains(&(
                b"counter".to_vec(),
                POWER_LOSS_COMMITS.to_be_bytes().to_vec()
            )),
            "the reference run acknowledged every commit"
        );
        assert!(!verify_power_loss(&config, &reference, "no power loss"));
        let (mut rewinds, mut in_flight) = (0, 0);
        for node in 0..2 {
            for k in 0..=reference.syncs[node] {
                let run = power_loss_run(&config, Some((node, k)));
                let context = format!(
                    "{policy:?}, power lost at sync point {k} of the {}",
                    ["primary", "standby"][node]
                );
                rewinds += usize::from(verify_power_loss(&config, &run, &context));
                in_flight += usize::from(run.in_flight.is_some());
            }
        }
        eprintln!(
            "{policy:?}: power lost at {} sync points of the primary and {} of the standby; \
             {in_flight} runs had a commit in flight, {rewinds} old primaries were rewound",
            reference.syncs[0] + 1,
            reference.syncs[1] + 1
        );
        // A standby that froze while the primary's own write went through leaves the
        // primary a tail: the rewind is exercised.
        assert!(rewinds > 0, "no run left the old primary a tail");
    }
}

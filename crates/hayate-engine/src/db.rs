//! The embedded API: open a database, manage tables and indexes, run transactions.
//!
//! Opening a database:
//! 1. Open the I/O backend for the directory (io_uring + O_DIRECT, else pread/pwrite).
//! 2. Open the page store at its last durable checkpoint, or create an empty one.
//! 3. Size and allocate the buffer pool (bytes, or a percentage of the data).
//! 4. Open the log from the checkpoint's redo LSN, cutting a torn tail.
//! 5. Replay the log (`txn::recovery`), then checkpoint so the next start begins here (not
//!    when opened as a standby: see `DatabaseConfig::standby`).
//! 6. Start the maintenance thread: purge, cleaner passes, checkpoints by log volume or time.

mod backup;
mod replication;

pub use backup::{is_backup_file, BackupReport, BackupWriter};
pub use replication::{ApplyReport, RewindReport};

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::btree::{BTree, TreeCheckReport};
use crate::buffer::{BufferPool, BufferPoolConfig, BufferStats, LatchConfig};
use crate::error::{Error, Location, Result};
use crate::exec;
use crate::io::{self, Io};
use crate::store::{self, PageStore, StoreConfig, StoreStats};
use crate::temp::TempSpace;
use crate::txn::recovery::RecoveryReport;
use crate::txn::{
    row, LockConfig, Transaction, TreeId, TreeInfo, TreeKind, TxnManager, TxnStats, UndoConfig,
};
use crate::wal::{Lsn, Wal, WalConfig, WalStats};

/// Longest suspension of a fiber waiting for its commit to be durable before it looks at the
/// log again (`Database::commit_on_fiber`); the flush's wake-up ends it sooner.
const LOG_RECHECK: Duration = Duration::from_millis(100);

/// How much memory the buffer pool gets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BufferSize {
    /// A fixed size in bytes, rounded down to whole pages.
    Bytes(u64),
    /// A percentage of the data's size when the database is opened.
    PercentOfData(f64),
}

/// Which I/O implementation `Database::open` uses for the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoBackend {
    /// io_uring with O_DIRECT when available, else pread/pwrite.
    Auto,
    /// pread/pwrite/fdatasync (`SyncIo`), still with O_DIRECT where the file system allows.
    Sync,
}

/// Everything `Database::open` can be told; `Default` gives the settings used in production.
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// How to create the page store; an existing store keeps its own policy and sizes.
    pub store: StoreConfig,
    /// Memory of the buffer pool. Default 128 MiB.
    pub buffer_size: BufferSize,
    /// Lower bound on the frames of the pool, whatever the percentage. Default 64.
    pub buffer_frames_min: usize,
    /// Keep inner B+tree pages in the pool: eviction skips them in its first two clock
    /// rounds. Default true.
    pub keep_inner_resident: bool,
    /// The write-ahead log: segment size, sync mode, group commit.
    pub wal: WalConfig,
    /// Row lock waits: spinning, parking, timeout.
    pub locks: LockConfig,
    /// Rollback segment: memory budget before before-images spill to flash.
    pub undo: UndoConfig,
    /// How threads wait for page latches (spin, then park).
    pub latches: LatchConfig,
    /// Which I/O implementation `Database::open` uses. Default `IoBackend::Auto`.
    pub io_backend: IoBackend,
    /// A checkpoint is due when this much time has passed since the last one and the log has
    /// grown. Default 30 s.
    pub checkpoint_interval: Duration,
    /// A checkpoint is due when the log has grown by this many bytes since the last one.
    /// Default 256 MiB.
    pub checkpoint_log_bytes: u64,
    /// Pause between rounds of the maintenance thread (purge, cleaner pass, checkpoint if
    /// due). Default 20 ms.
    pub maintenance_interval: Duration,
    /// Open as a standby (design 5.6): the database starts as `start_standby` leaves it, and
    /// checkpoints are held as with `hold_checkpoints` until its primary accepted its log
    /// (`confirm_log`) or it is promoted. Default false.
    pub standby: bool,
    /// A node of a replicated pair, whose log may end in a tail that no standby acknowledged
    /// (it was a primary that lost its standby): recovery takes no checkpoint, and none is
    /// taken until `confirm_log` (a standby acknowledged this log, or the primary acknowledges
    /// alone) or promotion, so its last checkpoint stays one that `rewind` can start from
    /// should another node's log go on without the tail. Default false.
    pub hold_checkpoints: bool,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            store: StoreConfig::default(),
            buffer_size: BufferSize::Bytes(128 << 20),
            buffer_frames_min: 64,
            keep_inner_resident: true,
            wal: WalConfig::default(),
            locks: LockConfig::default(),
            undo: UndoConfig::default(),
            latches: LatchConfig::default(),
            io_backend: IoBackend::Auto,
            checkpoint_interval: Duration::from_secs(30),
            checkpoint_log_bytes: 256 << 20,
            maintenance_interval: Duration::from_millis(20),
            standby: false,
            hold_checkpoints: false,
        }
    }
}

/// Result of `Database::check`.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Each table and index by name, with what the check of its B+tree found.
    pub trees: Vec<(String, TreeCheckReport)>,
    /// Distinct pages reachable from the trees (equal to `pages_allocated` when it passes).
    pub pages_in_trees: u64,
    /// Pages the store counts as live.
    pub pages_allocated: u64,
    /// Rows read from all trees (deleted rows not yet purged included).
    pub rows: u64,
}

/// Counters of every layer, from `Database::stats`.
#[derive(Debug, Clone)]
pub struct DatabaseStats {
    /// The buffer pool.
    pub buffer: BufferStats,
    /// The page store.
    pub store: StoreStats,
    /// The write-ahead log.
    pub wal: WalStats,
    /// Transactions, the rollback segment and row locks.
    pub txn: TxnStats,
}

struct Maintenance {
    shared: Arc<MaintenanceShared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What the maintenance thread works on. The thread never holds `Inner`: dropping the last
/// `Database` handle then drops `Inner`, whose `Drop` stops and joins the thread, so no
/// background work touches the files after the handle is gone.
struct MaintenanceShared {
    manager: Arc<TxnManager>,
    store: Arc<dyn PageStore>,
    checkpoint_interval: Duration,
    checkpoint_log_bytes: u64,
    last_checkpoint: Mutex<(Instant, u64)>,
    stop: Mutex<bool>,
    wake: Condvar,
}

struct Inner {
    io: Arc<dyn Io>,
    temp: TempSpace,
    manager: Arc<TxnManager>,
    pool: Arc<BufferPool>,
    store: Arc<dyn PageStore>,
    config: DatabaseConfig,
    recovery: RecoveryReport,
    maintenance: Maintenance,
    /// Makes the log durable for commits that do not block their thread on it (fibers, the
    /// server's event loops).
    log_flusher: exec::flusher::LogFlusher,
    /// Set while this database is a standby (`replication`).
    standby: Mutex<Option<Arc<replication::Receiver>>>,
}

/// An open database. Cheap to clone; all clones share one engine.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

impl Database {
    /// Opens (creating it if needed) the database in `dir`.
    pub fn open(dir: &Path, config: DatabaseConfig) -> Result<Database> {
        Self::open_with_io(open_io(dir, config.io_backend)?, config)
    }

    /// Opens a database on a given I/O backend (a simulated disk in tests, a tracing or
    /// latency-injecting wrapper in the lab).
    pub fn open_with_io(io: Arc<dyn Io>, config: DatabaseConfig) -> Result<Database> {
        let (store, created) = store::open(io.clone(), &config.store)?;
        let opened = store.opened_checkpoint().unwrap_or_default();
        let frame_count = buffer_frames(&config, store.as_ref());
        let pool_config = BufferPoolConfig {
            frame_count,
            keep_inner_resident: config.keep_inner_resident,
            latch: config.latches.clone(),
            ..BufferPoolConfig::default()
        };
        let pool = BufferPool::new(store.clone(), pool_config)?;
        let (wal, recovery) = Wal::open(io.clone(), config.wal.clone(), opened.redo_lsn)?;
        let wal = Arc::new(wal);
        let tail_truncated = recovery.report.tail_truncated;
        let (manager, mut report) = TxnManager::recover(
            pool.clone(),
            wal.clone(),
            &opened,
            recovery.records,
            config.locks.clone(),
            io.clone(),
            config.undo.clone(),
        )?;
        report.log_tail_truncated = tail_truncated;
        if !created {
            log::info!("{report}");
        }
        if (config.standby || config.hold_checkpoints) && !created {
            manager.set_log_unconfirmed(true);
        } else {
            manager.checkpoint()?;
        }
        let maintenance = Arc::new(MaintenanceShared {
            manager: manager.clone(),
            store: store.clone(),
            checkpoint_interval: config.checkpoint_interval,
            checkpoint_log_bytes: config.checkpoint_log_bytes,
            last_checkpoint: Mutex::new((Instant::now(), wal.end_lsn())),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let temp = TempSpace::open(io.clone())?;
        let publisher = Arc::downgrade(&manager);
        let flushed: exec::flusher::FlushedHook = Box::new(move || {
            if let Some(manager) = publisher.upgrade() {
                manager.publish_durable();
            }
        });
        let inner = Arc::new(Inner {
            io,
            temp,
            manager,
            pool,
            store,
            config,
            recovery: report,
            log_flusher: exec::flusher::LogFlusher::start(wal.clone(), flushed),
            standby: Mutex::new(None),
            maintenance: Maintenance {
                shared: maintenance,
                thread: Mutex::new(None),
            },
        });
        start_maintenance(&inner);
        let db = Database { inner };
        if db.inner.config.standby {
            db.start_standby()?;
        }
        Ok(db)
    }

    /// What recovery found and replayed when this database was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// The configuration the database was opened with (an existing store's policy and sizes
    /// are its own, not `config().store`'s).
    pub fn config(&self) -> &DatabaseConfig {
        &self.inner.config
    }

    /// The I/O backend every file of the database goes through.
    pub fn io(&self) -> &Arc<dyn Io> {
        &self.inner.io
    }

    /// Creates an empty table; autocommitted and durable when it returns.
    /// `Error::TableExists` if a table or index has this name.
    pub fn create_table(&self, name: &str) -> Result<TreeId> {
        Ok(self
            .inner
            .manager
            .create_tree(name, TreeKind::Table, true)?
            .id)
    }

    /// Creates a secondary index: an ordered key space the caller keeps in step with its table
    /// inside the same transactions (for a non-unique index, append the primary key to the
    /// index key).
    pub fn create_index(&self, name: &str, unique: bool) -> Result<TreeId> {
        Ok(self
            .inner
            .manager
            .create_tree(name, TreeKind::Index, unique)?
            .id)
    }

    /// Drops the table (or index) `name` and frees its pages; autocommitted and durable when
    /// it returns.
    /// `Error::NoSuchTable` if there is none of this name.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        self.inner.manager.drop_tree(name)
    }

    /// Drops the index (or table) `name` and frees its pages; autocommitted and durable when
    /// it returns.
    /// `Error::NoSuchTable` if there is none of this name.
    pub fn drop_index(&self, name: &str) -> Result<()> {
        self.inner.manager.drop_tree(name)
    }

    /// Looks a table or index up by name.
    pub fn table(&self, name: &str) -> Result<TreeId> {
        Ok(self.inner.manager.tree(name)?.id)
    }

    /// Every table and index, in tree id order (the order they were created).
    pub fn tables(&self) -> Vec<TreeInfo> {
        self.inner.manager.catalog().trees.into_values().collect()
    }

    /// Begins a transaction that reads a snapshot of the newest published commit.
    pub fn begin(&self) -> Transaction {
        self.inner.manager.begin(false)
    }

    /// Begins a SERIALIZABLE transaction: snapshot isolation whose commit also fails
    /// (`Error::ReadWriteConflict`) when a commit after its snapshot wrote what it read, so
    /// write skew and phantoms are refused (design 6, "Serializable").
    pub fn begin_serializable(&self) -> Transaction {
        self.inner.manager.begin_serializable()
    }

    /// Begins a transaction that only reads; a write fails with
    /// `Error::ReadOnlyTransaction`.
    pub fn begin_read_only(&self) -> Transaction {
        self.inner.manager.begin(true)
    }

    /// `begin_read_only` whose snapshot holds every commit started before the call: it first
    /// waits for those still being made durable or published. What a DDL reads a table
    /// through once it holds the table's lock: a writer lets go of its locks when its commit
    /// is logged and applied (early lock release), before the commit is visible.
    pub fn begin_read_only_after_commits(&self) -> Transaction {
        self.wait_for_started_commits();
        self.inner.manager.begin(true)
    }

    /// Waits until every commit started before the call is visible (durable and published).
    pub fn wait_for_started_commits(&self) {
        self.inner.manager.wait_for_started_commits();
    }

    /// How far the log is durable.
    pub fn log_durable_lsn(&self) -> Lsn {
        self.inner.log_flusher.durable_lsn()
    }

    /// Asks the log flusher to make the log durable up to `lsn`; returns at once.
    pub fn request_log_flush(&self, lsn: Lsn) {
        self.inner.log_flusher.request(lsn);
    }

    /// Commits `txn` like `Transaction::commit`, but on a fiber the wait for the log suspends
    /// the fiber instead of blocking its thread:
    /// 1. `Transaction::commit_start` logs and applies the write set and releases its locks;
    /// 2. the log flusher is asked for the commit's position (by the `Durable` future's first
    ///    poll), so every commit logged meanwhile, of any fiber or thread, shares its fdatasync;
    /// 3. the fiber suspends (`fiber::wait_on` the flusher's `Durable` future) until the
    ///    flusher thread, having made the log durable there, fires its wake-up: other fibers
    ///    run meanwhile, and a thread whose fibers all wait parks rather than spins on the CPU
    ///    the flusher needs;
    /// 4. `PendingCommit::finish` publishes the commit.
    ///
    /// Off a fiber it is `Transaction::commit`.
    pub fn commit_on_fiber(&self, txn: Transaction) -> Result<Option<u64>> {
        if !crate::fiber::on_fiber() {
            return txn.commit();
        }
        let Some(pending) = txn.commit_start()? else {
            return Ok(None);
        };
        let flusher = &self.inner.log_flusher;
        if flusher.durable_lsn() < pending.lsn() {
            // A failed or stopped flusher ends the wait too; `finish` then reports it.
            let _ = crate::fiber::wait_on(&mut flusher.durable(pending.lsn()), LOG_RECHECK);
        }
        pending.finish().map(Some)
    }

    /// A future ready once the log is durable up to `lsn` (a `PendingCommit::lsn`): the
    /// database's log flusher thread flushes and wakes the waiter, so an event loop serving
    /// many connections never blocks on an fdatasync.
    pub fn log_durable(&self, lsn: Lsn) -> exec::flusher::Durable {
        self.inner.log_flusher.durable(lsn)
    }

    /// Takes a checkpoint now; returns its id.
    pub fn checkpoint(&self) -> Result<u64> {
        let id = self.inner.manager.checkpoint()?;
        *self.inner.maintenance.shared.last_checkpoint.lock() =
            (Instant::now(), self.inner.manager.wal().end_lsn());
        Ok(id)
    }

    /// The temporary space: sorts and hash joins beyond their work memory spill here.
    pub fn temp(&self) -> &TempSpace {
        &self.inner.temp
    }

    /// Purges old row versions no snapshot needs; returns (undo entries, rows) purged.
    pub fn purge(&self) -> Result<(u64, u64)> {
        self.inner.manager.purge()
    }

    /// Full consistency check: every page checksum (by reading it), B+tree order and
    /// structure, row headers, the store's own structures, and that the pages reachable from
    /// the trees are exactly the allocated pages. Writers are paused while it runs.
    pub fn check(&self) -> Result<CheckReport> {
        let _quiet = self.inner.pool.quiesce();
        self.inner.store.check()?;
        let mut report = CheckReport::default();
        let mut seen: HashSet<u64> = HashSet::new();
        for tree in self.tables() {
            let btree = BTree::open(tree.root);
            let tree_report = btree.check(&self.inner.pool)?;
            for page_id in btree.page_ids(&self.inner.pool)? {
                if !seen.insert(page_id) {
                    let location = Location {
                        file: format!("tree {}", tree.name),
                        page_id: Some(page_id),
                        ..Default::default()
                    };
                    return Err(Error::corruption(location, "page belongs to two trees"));
                }
            }
            let mut cursor = btree.scan(
                &self.inner.pool,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
            );
            loop {
                let batch = cursor.next_batch(&self.inner.pool)?;
                if batch.is_empty() {
                    break;
                }
                for (_, raw) in batch {
                    row::decode(&raw, &tree.name)?;
                    report.rows += 1;
                }
            }
            report.trees.push((tree.name.clone(), tree_report));
        }
        report.pages_in_trees = seen.len() as u64;
        report.pages_allocated = self.inner.store.live_page_count();
        if report.pages_in_trees != report.pages_allocated {
            let location = Location {
                file: "data.hyt".into(),
                ..Default::default()
            };
            return Err(Error::corruption(
                location,
                format!(
                    "{} pages allocated but {} reachable from trees (leaked or double-used)",
                    report.pages_allocated, report.pages_in_trees
                ),
            ));
        }
        Ok(report)
    }

    /// Bytes of the buffer pool (SQL's shared_buffers).
    pub fn buffer_bytes(&self) -> u64 {
        self.inner.pool.capacity_bytes()
    }

    /// Bytes per page (SQL's block_size).
    pub fn page_size(&self) -> usize {
        self.inner.pool.page_size()
    }

    /// Counters of every layer, most since the database was opened.
    pub fn stats(&self) -> DatabaseStats {
        DatabaseStats {
            buffer: self.inner.pool.stats(),
            store: self.inner.store.stats(),
            wal: self.inner.manager.wal().stats(),
            txn: self.inner.manager.stats(),
        }
    }

    /// Checkpoints and stops background work. Other clones become unusable for writes. A
    /// standby whose log is not confirmed yet (`DatabaseConfig::standby`) closes without a
    /// checkpoint (`DatabaseConfig::hold_checkpoints`): the next start replays its log again.
    pub fn close(self) -> Result<()> {
        self.inner.log_flusher.stop();
        stop_maintenance(&self.inner);
        let result = if self.inner.manager.log_unconfirmed() {
            Ok(())
        } else {
            self.inner.manager.checkpoint().map(|_| ())
        };
        self.inner.pool.shutdown();
        result
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        stop_maintenance(self);
        self.pool.shutdown();
    }
}

/// The I/O backend `backend` names for the directory.
fn open_io(dir: &Path, backend: IoBackend) -> Result<Arc<dyn Io>> {
    Ok(match backend {
        IoBackend::Auto => io::open_default(dir)?,
        IoBackend::Sync => Arc::new(io::sync_file::SyncIo::new(dir)?),
    })
}

fn buffer_frames(config: &DatabaseConfig, store: &dyn PageStore) -> usize {
    let page_size = store.page_size() as u64;
    let frames = match config.buffer_size {
        BufferSize::Bytes(bytes) => bytes / page_size,
        BufferSize::PercentOfData(percent) => {
            (store.live_page_count() as f64 * percent / 100.0).ceil() as u64
        }
    };
    (frames as usize).max(config.buffer_frames_min).max(8)
}

fn start_maintenance(inner: &Inner) {
    let shared = inner.maintenance.shared.clone();
    let interval = inner.config.maintenance_interval;
    let thread = std::thread::Builder::new()
        .name("hayate-maintenance".into())
        .spawn(move || loop {
            {
                let mut stop = shared.stop.lock();
                if !*stop {
                    shared.wake.wait_for(&mut stop, interval);
                }
                if *stop {
                    return;
                }
            }
            if let Err(error) = maintain(&shared) {
                if !matches!(error, Error::Poisoned(_) | Error::NotPrimary(_)) {
                    log::error!("maintenance: {error}");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
        .expect("spawn maintenance thread");
    *inner.maintenance.thread.lock() = Some(thread);
}

fn stop_maintenance(inner: &Inner) {
    *inner.maintenance.shared.stop.lock() = true;
    inner.maintenance.shared.wake.notify_all();
    if let Some(thread) = inner.maintenance.thread.lock().take() {
        let _ = thread.join();
    }
}

/// One round of background work.
fn maintain(shared: &MaintenanceShared) -> Result<()> {
    shared.manager.check_writable()?;
    shared.manager.purge()?;
    let cleaned = shared.store.clean(false)?;
    let (last_time, last_lsn) = *shared.last_checkpoint.lock();
    let log_bytes = shared.manager.wal().end_lsn().saturating_sub(last_lsn);
    let due = !shared.manager.log_unconfirmed()
        && (log_bytes >= shared.checkpoint_log_bytes
            || (last_time.elapsed() >= shared.checkpoint_interval && log_bytes > 0)
            || (cleaned > 0 && shared.store.wants_checkpoint()));
    if due {
        shared.manager.checkpoint()?;
        *shared.last_checkpoint.lock() = (Instant::now(), shared.manager.wal().end_lsn());
    }
    Ok(())
}

//! Transactions: snapshot isolation by MVCC.
//!
//! Commit protocol (the only path by which data changes):
//! 1. While the transaction ran, each written row was locked (`locks`) and its write buffered
//!    in the transaction's write set; a row committed by someone else after our snapshot is a
//!    serialization failure (first updater wins; later writers wait for the lock, then fail).
//! 2. Under the commit-order mutex: take the next commit timestamp and append one `Commit`
//!    log record holding the whole write set, so timestamp order equals log order (a write set
//!    larger than a log frame goes out as contiguous parts, all appended under the mutex).
//!    Register the record as "being applied" at its first byte (checkpoints replay from the
//!    oldest such record).
//! 3. Apply the write set to the B+trees: each row gets the new version, and the version it
//!    replaces goes to the rollback segment (`undo`), linked from the row.
//! 4. Wait until the log is durable up to the record (group commit: fdatasync shared by all
//!    committers waiting at the time).
//! 5. Publish: the visible timestamp advances once every earlier commit is published too, so a
//!    snapshot never sees a commit without the ones before it. Then release the row locks.
//!
//! Readers take the visible timestamp as their snapshot and never lock: a row newer than the
//! snapshot is read through its undo chain.

pub mod catalog;
pub mod locks;
pub mod recovery;
mod replica;
pub mod row;
mod serializable;
mod transaction;
pub mod undo;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

pub use catalog::{Catalog, TreeId, TreeInfo, TreeKind};
pub use locks::{LockConfig, LockStats};
pub use transaction::{Locked, PendingCommit, Savepoint, Scan, Transaction};

use crate::btree::BTree;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::page::PageId;
use crate::store::CheckpointMeta;
use crate::wal::{patch_pieces, patched, LogRecord, Lsn, Op, Wal};
use locks::LockTable;
use serializable::{ReadSet, RecentWrites};
pub use undo::{UndoConfig, UndoStats};
use undo::{UndoEntry, UndoLog};

/// Lock key used by purge, which never waits.
const PURGE_TXN_ID: u64 = u64::MAX;
/// Longest suspension of a fiber waiting for the commit order before it looks again (an
/// advance wakes it sooner; a stopping log does not).
const ORDER_RECHECK: std::time::Duration = std::time::Duration::from_millis(10);
/// Values shorter than this are logged whole: a patch would save little and cost a lookup.
const PATCH_VALUE_BYTES_MIN: usize = 64;

struct CommitOrder {
    next_commit_ts: u64,
    /// commit ts -> LSN of commits whose changes are not fully applied to the trees yet.
    applying: BTreeMap<u64, Lsn>,
    /// Commits done but not yet published because an earlier one is still running.
    finished: BTreeSet<u64>,
    /// commit ts -> end LSN of commits applied to the trees and waiting for the log: once the
    /// log is durable past that end they count as finished, whether or not their committer
    /// has woken from its flush wait yet (`advance_visible`).
    awaiting_flush: BTreeMap<u64, Lsn>,
    next_checkpoint_id: u64,
    /// Keys written by commits while serializable transactions run (`serializable`).
    recent: RecentWrites,
    /// Fibers waiting for the visible timestamp to advance (`wait_visible_locked`), woken with
    /// `published`'s threads.
    waiting: Vec<crate::fiber::Wakeup>,
}

/// Counters of transactions since the database opened, and the rollback segment's size now.
#[derive(Debug, Clone, Default)]
pub struct TxnStats {
    /// Transactions whose writes were committed and made durable.
    pub commits: u64,
    /// Transactions that ended without committing (aborted, or dropped uncommitted).
    pub aborts: u64,
    /// Writes that failed with `Error::SerializationFailure`.
    pub serialization_failures: u64,
    /// Entries in the rollback segment now (`undo.entries`).
    pub undo_entries: u64,
    /// Bytes of before-images held in memory.
    pub undo_bytes: u64,
    /// Undo entries purged because no snapshot needed them any more.
    pub undo_purged: u64,
    /// The rollback segment in detail: memory, spilled bytes, spilled reads, spill files.
    pub undo: UndoStats,
    /// Deleted rows removed from their trees by purge.
    pub tombstones_purged: u64,
    /// Checkpoints completed.
    pub checkpoints: u64,
    /// The row lock table.
    pub locks: LockStats,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    aborts: AtomicU64,
    serialization_failures: AtomicU64,
    undo_purged: AtomicU64,
    tombstones_purged: AtomicU64,
    checkpoints: AtomicU64,
}

pub struct TxnManager {
    pool: Arc<BufferPool>,
    wal: Arc<Wal>,
    catalog: RwLock<Catalog>,
    locks: LockTable,
    undo: UndoLog,
    commit_order: Mutex<CommitOrder>,
    published: Condvar,
    visible_ts: AtomicU64,
    next_txn_id: AtomicU64,
    /// snapshot ts -> number of open transactions reading at it
    snapshots: Mutex<BTreeMap<u64, usize>>,
    /// Deleted rows awaiting physical removal: (tree, key, tombstone commit ts).
    tombstones: Mutex<VecDeque<(TreeId, Vec<u8>, u64)>>,
    checkpoint_lock: Mutex<()>,
    /// Set after an error that leaves memory and disk out of step; no more writes.
    poisoned: RwLock<Option<String>>,
    /// A standby's manager: only the primary's log changes data (`replica`).
    standby: AtomicBool,
    /// On a standby, the first received record not yet applied: checkpoints redo from there
    /// at the latest. `u64::MAX` on a primary.
    replay_from: AtomicU64,
    /// A standby opened with `DatabaseConfig::standby` whose log its primary has not yet
    /// accepted as a prefix of its own: it may hold an old primary's unacknowledged tail, so
    /// no checkpoint may cover it (`replica`).
    log_unconfirmed: AtomicBool,
    counters: Counters,
}

impl TxnManager {
    /// Builds the manager over a recovered catalog (see `recovery`).
    fn new(
        pool: Arc<BufferPool>,
        wal: Arc<Wal>,
        catalog: Catalog,
        lock_config: LockConfig,
        undo: UndoLog,
        next_checkpoint_id: u64,
    ) -> TxnManager {
        let visible = catalog.next_commit_ts - 1;
        TxnManager {
            undo,
            next_txn_id: AtomicU64::new(catalog.next_txn_id),
            commit_order: Mutex::new(CommitOrder {
                next_commit_ts: catalog.next_commit_ts,
                applying: BTreeMap::new(),
                finished: BTreeSet::new(),
                recent: RecentWrites::default(),
                waiting: Vec::new(),
                awaiting_flush: BTreeMap::new(),
                next_checkpoint_id,
            }),
            catalog: RwLock::new(catalog),
            pool,
            wal,
            locks: LockTable::new(lock_config),
            published: Condvar::new(),
            visible_ts: AtomicU64::new(visible),
            snapshots: Mutex::new(BTreeMap::new()),
            tombstones: Mutex::new(VecDeque::new()),
            checkpoint_lock: Mutex::new(()),
            poisoned: RwLock::new(None),
            standby: AtomicBool::new(false),
            replay_from: AtomicU64::new(u64::MAX),
            log_unconfirmed: AtomicBool::new(false),
            counters: Counters::default(),
        }
    }

    pub fn wal(&self) -> &Arc<Wal> {
        &self.wal
    }

    pub fn visible_ts(&self) -> u64 {
        self.visible_ts.load(Ordering::Acquire)
    }

    pub fn catalog(&self) -> Catalog {
        self.catalog.read().clone()
    }

    pub fn tree(&self, name: &str) -> Result<TreeInfo> {
        self.catalog
            .read()
            .by_name(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(name.into()))
    }

    fn tree_by_id(&self, id: TreeId) -> Result<TreeInfo> {
        self.catalog
            .read()
            .trees
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(format!("#{id}")))
    }

    pub fn check_writable(&self) -> Result<()> {
        if let Some(reason) = self.poisoned.read().as_ref() {
            return Err(Error::Poisoned(reason.clone()));
        }
        if self.wal.is_poisoned() {
            return Err(Error::Poisoned("the log could not be made durable".into()));
        }
        self.wal.check_open()
    }

    /// Stops writes after an error that leaves memory and the log out of step. A primary that
    /// lost its role (`Error::NotPrimary`) is not poisoned: its log and pages are sound.
    fn poison(&self, error: &Error) {
        if matches!(error, Error::NotPrimary(_) | Error::Standby) {
            return;
        }
        let mut poisoned = self.poisoned.write();
        if poisoned.is_none() {
            log::error!("engine stops accepting writes: {error}");
            *poisoned = Some(error.to_string());
        }
    }

    /// Starts a transaction reading at the newest published snapshot.
    pub fn begin(self: &Arc<Self>, read_only: bool) -> Transaction {
        let txn_id = self.next_txn_id.fetch_add(1, Ordering::Relaxed);
        let snapshot_ts = self.register_snapshot();
        Transaction::new(self.clone(), txn_id, snapshot_ts, read_only)
    }

    /// Starts a SERIALIZABLE transaction (`serializable`): registered before its snapshot is
    /// taken, and that snapshot includes every commit timestamp taken before it registered,
    /// so each commit after its snapshot records its keys for the validation.
    pub fn begin_serializable(self: &Arc<Self>) -> Transaction {
        let floor = {
            let mut order = self.commit_order.lock();
            let floor = order.next_commit_ts.saturating_sub(1);
            order.recent.register(floor);
            floor
        };
        self.wait_visible(floor);
        let mut txn = self.begin(false);
        txn.make_serializable(floor);
        txn
    }

    /// Waits until every commit that took its timestamp before the call is visible.
    pub fn wait_for_started_commits(&self) {
        let newest = self.commit_order.lock().next_commit_ts.saturating_sub(1);
        self.wait_visible(newest);
    }

    /// Ends a serializable transaction's registration (see `begin_serializable`).
    fn end_serializable(&self, floor: u64) {
        self.commit_order.lock().recent.deregister(floor);
    }

    /// Takes a snapshot at the newest published commit and registers it (undo entries it
    /// may need are kept until `end_snapshot`).
    fn register_snapshot(&self) -> u64 {
        let mut snapshots = self.snapshots.lock();
        let snapshot_ts = self.visible_ts();
        *snapshots.entry(snapshot_ts).or_insert(0) += 1;
        snapshot_ts
    }

    fn end_snapshot(&self, snapshot_ts: u64) {
        let mut snapshots = self.snapshots.lock();
        if let Some(count) = snapshots.get_mut(&snapshot_ts) {
            *count -= 1;
            if *count == 0 {
                snapshots.remove(&snapshot_ts);
            }
        }
    }

    fn oldest_snapshot_ts(&self) -> u64 {
        let snapshots = self.snapshots.lock();
        snapshots
            .keys()
            .next()
            .copied()
            .unwrap_or_else(|| self.visible_ts())
    }

    /// The root page of tree `id` (its name is not copied, unlike `tree_by_id`).
    fn tree_root(&self, id: TreeId) -> Result<PageId> {
        self.catalog
            .read()
            .trees
            .get(&id)
            .map(|tree| tree.root)
            .ok_or_else(|| Error::NoSuchTable(format!("#{id}")))
    }

    /// Reads the version of a row of tree `id` visible at `snapshot_ts`.
    fn read_visible(&self, id: TreeId, key: &[u8], snapshot_ts: u64) -> Result<Option<Vec<u8>>> {
        match BTree::open(self.tree_root(id)?).get(&self.pool, key)? {
            Some(raw) => self.resolve_owned(id, raw, snapshot_ts),
            None => Ok(None),
        }
    }

    /// `read_visible` of sorted keys (`BTree::get_sorted`: one descent per leaf).
    fn read_visible_sorted(
        &self,
        id: TreeId,
        keys: &[Vec<u8>],
        snapshot_ts: u64,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let mut keep_stored = row::keep_visible(snapshot_ts, keep);
        let raws = BTree::open(self.tree_root(id)?).get_sorted_where(
            &self.pool,
            keys,
            &mut keep_stored,
        )?;
        raws.into_iter()
            .map(|raw| match raw {
                Some(raw) => self.resolve_owned(id, raw, snapshot_ts),
                None => Ok(None),
            })
            .collect()
    }

    /// `resolve` for a stored row read into `raw`: a visible value reuses its buffer.
    fn resolve_owned(&self, id: TreeId, raw: Vec<u8>, snapshot_ts: u64) -> Result<Option<Vec<u8>>> {
        self.visible(raw, snapshot_ts, || {
            self.tree_by_id(id)
                .map_or_else(|_| format!("#{id}"), |tree| tree.name)
        })
    }

    /// The value a stored row shows to a snapshot: the row itself if committed at or before it,
    /// otherwise the newest older version in its undo chain (None: absent or deleted).
    fn resolve(&self, tree: &TreeInfo, raw: Vec<u8>, snapshot_ts: u64) -> Result<Option<Vec<u8>>> {
        self.visible(raw, snapshot_ts, || tree.name.clone())
    }

    /// `resolve` of a row copied out of its page: its header is cut off in place (no second
    /// copy of the row); `tree_name` names the tree in the error of a malformed row.
    fn visible(
        &self,
        mut raw: Vec<u8>,
        snapshot_ts: u64,
        tree_name: impl FnOnce() -> String,
    ) -> Result<Option<Vec<u8>>> {
        let Some((commit_ts, undo_pointer, tombstone)) = row::header(&raw) else {
            return Err(row::malformed(raw.len(), &tree_name()));
        };
        if commit_ts > snapshot_ts {
            return self.walk_undo(undo_pointer, snapshot_ts);
        }
        if tombstone {
            return Ok(None);
        }
        raw.drain(..row::ROW_HEADER_SIZE);
        Ok(Some(raw))
    }

    /// Follows an undo chain to the newest version committed at or before `snapshot_ts`.
    fn walk_undo(&self, mut pointer: u64, snapshot_ts: u64) -> Result<Option<Vec<u8>>> {
        for _ in 0..1_000_000 {
            if pointer == 0 {
                return Ok(None);
            }
            let Some(entry) = self.undo.get(pointer)? else {
                // Versions from before a restart are older than every snapshot, so an earlier
                // epoch means "no older version"; a purged entry of ours is a broken snapshot.
                return if self.undo.is_current_epoch(pointer) {
                    Err(Error::SnapshotTooOld)
                } else {
                    Ok(None)
                };
            };
            if entry.commit_ts <= snapshot_ts {
                return Ok(entry.value);
            }
            pointer = entry.undo_pointer;
        }
        panic!("undo chain longer than a million versions");
    }

    /// Steps 2-3 of the commit protocol: log the write set and apply it. Returns the commit
    /// timestamp and the log position that must be durable before the commit is acknowledged.
    /// A serializable transaction passes its reads and snapshot: it commits only if no commit
    /// after its snapshot wrote what it read (`serializable`), checked here, under the
    /// commit-order mutex, before its timestamp is taken.
    fn commit_apply(
        &self,
        txn_id: u64,
        ops: Vec<Op>,
        reads: Option<(&ReadSet, u64)>,
    ) -> Result<(u64, Lsn)> {
        self.check_primary()?;
        self.check_writable()?;
        let mut order = self.commit_order.lock();
        if let Some((reads, snapshot_ts)) = reads {
            if order.recent.conflicts(reads, snapshot_ts) {
                self.counters
                    .serialization_failures
                    .fetch_add(1, Ordering::Relaxed);
                return Err(Error::ReadWriteConflict);
            }
        }
        let commit_ts = order.next_commit_ts;
        if order.recent.recording() {
            let keys = ops
                .iter()
                .map(|op| (op.tree_id(), op.key().to_vec()))
                .collect();
            order.recent.record(commit_ts, keys);
        }
        let record = LogRecord::Commit {
            txn_id,
            commit_ts,
            ops,
        };
        // For a commit logged in parts, `lsn` is the first part's: redo must start there.
        let appended = self.wal.append(&record)?;
        order.next_commit_ts += 1;
        order.applying.insert(commit_ts, appended.lsn);
        let LogRecord::Commit { ops, .. } = record else {
            unreachable!()
        };
        drop(order);
        let applied = self.apply_ops(commit_ts, appended.lsn, &ops);
        {
            let mut order = self.commit_order.lock();
            order.applying.remove(&commit_ts);
            if applied.is_ok() {
                order.awaiting_flush.insert(commit_ts, appended.end_lsn);
            }
        }
        if let Err(error) = applied {
            self.poison(&error);
            self.finish_failed(commit_ts, &error);
            return Err(error);
        }
        Ok((commit_ts, appended.end_lsn))
    }

    /// Step 4: waits until the log is durable up to `end_lsn` (at once if a group flush already
    /// covered it).
    fn commit_durable(&self, commit_ts: u64, end_lsn: Lsn) -> Result<()> {
        if let Err(error) = self.wal.flush_to(end_lsn) {
            self.poison(&error);
            self.finish_failed(commit_ts, &error);
            return Err(error);
        }
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The log op of a committed write of `value` to `key`: a `Patch` against the row's latest
    /// version when few of its bytes change, else a `Put`. The caller holds the row's lock, so
    /// the latest version stays the base until this commit applies.
    fn patch_or_put(&self, tree_id: TreeId, key: Vec<u8>, value: Vec<u8>) -> Result<Op> {
        if value.len() >= PATCH_VALUE_BYTES_MIN {
            if let Ok(tree) = self.tree_by_id(tree_id) {
                let latest = match BTree::open(tree.root).get(&self.pool, &key)? {
                    Some(raw) => row::decode(&raw, &tree.name)?.value,
                    None => None,
                };
                if let Some(pieces) = latest.and_then(|latest| patch_pieces(&latest, &value)) {
                    return Ok(Op::Patch {
                        tree_id,
                        key,
                        length: value.len() as u32,
                        pieces,
                    });
                }
            }
        }
        Ok(Op::Put {
            tree_id,
            key,
            value,
        })
    }

    /// Applies committed operations to the trees, saving before-images in the undo log.
    fn apply_ops(&self, commit_ts: u64, lsn: Lsn, ops: &[Op]) -> Result<()> {
        for op in ops {
            let (tree_id, key) = (op.tree_id(), op.key());
            let Ok(tree) = self.tree_by_id(tree_id) else {
                continue;
            };
            let btree = BTree::open(tree.root);
            let old = match btree.get(&self.pool, key)? {
                Some(raw) => Some(row::decode(&raw, &tree.name)?),
                None => None,
            };
            let patched_value;
            let value = match op {
                Op::Put { value, .. } => Some(value.as_slice()),
                Op::Delete { .. } => None,
                Op::Patch { length, pieces, .. } => {
                    // Computed from this row's latest version under its lock (`patch_or_put`):
                    // that version is still the latest.
                    let base = old.as_ref().and_then(|old| old.value.as_deref());
                    patched_value = base
                        .and_then(|base| patched(base, *length, pieces))
                        .ok_or_else(|| {
                            Error::Poisoned(format!(
                                "a patch of a row of {} found no {length}-byte version under \
                                 its lock",
                                tree.name
                            ))
                        })?;
                    Some(patched_value.as_slice())
                }
            };
            if value.is_none() && old.as_ref().is_none_or(|old| old.value.is_none()) {
                continue; // deleting a row that does not exist (or is already a tombstone)
            }
            let undo_pointer = match old {
                Some(old) => self.undo.push(UndoEntry {
                    commit_ts: old.commit_ts,
                    value: old.value,
                    undo_pointer: old.undo_pointer,
                    superseded_ts: commit_ts,
                }),
                None => 0,
            };
            btree.put(
                &self.pool,
                key,
                &row::encode(commit_ts, undo_pointer, value),
                lsn,
            )?;
            if value.is_none() {
                self.tombstones
                    .lock()
                    .push_back((tree_id, key.to_vec(), commit_ts));
            }
        }
        Ok(())
    }

    /// Waits until `commit_ts` (and every earlier commit) is visible.
    fn wait_visible(&self, commit_ts: u64) {
        let order = self.commit_order.lock();
        self.wait_visible_locked(order, commit_ts);
    }

    /// Marks `commit_ts` done and waits until it (and every earlier commit) is visible.
    fn publish(&self, commit_ts: u64) {
        let order = self.mark_published(commit_ts);
        self.wait_visible_locked(order, commit_ts);
    }

    /// Waits until `commit_ts` is visible; on a fiber suspended with the order unlocked until
    /// the visible timestamp advances (the commit waited for may be another fiber's of this
    /// thread).
    fn wait_visible_locked<'a>(
        &'a self,
        mut order: parking_lot::MutexGuard<'a, CommitOrder>,
        commit_ts: u64,
    ) {
        // One wake-up while it is in the list (not fired): a wait that ends at its deadline
        // does not add another.
        let mut wakeup: Option<crate::fiber::Wakeup> = None;
        // A stopped primary never publishes its unreplicated commits (`finish_failed`).
        while self.visible_ts() < commit_ts && !self.wal.is_stopped() {
            if crate::fiber::on_fiber() {
                let wakeup = match &wakeup {
                    Some(listed) if !listed.fired() => listed.clone(),
                    _ => {
                        let fresh = crate::fiber::Wakeup::new();
                        order.waiting.push(fresh.clone());
                        wakeup = Some(fresh.clone());
                        fresh
                    }
                };
                drop(order);
                crate::fiber::wait_for_wakeup(wakeup, std::time::Instant::now() + ORDER_RECHECK);
                order = self.commit_order.lock();
            } else {
                self.published.wait(&mut order);
            }
        }
    }

    /// Wakes every waiter for the visible timestamp (threads and fibers).
    fn notify_published(&self, order: &mut CommitOrder) {
        self.published.notify_all();
        crate::fiber::fire_all(&mut order.waiting);
    }

    /// Marks a durable commit done and advances the visible timestamp over every contiguous
    /// done commit. Does not wait for earlier commits (tasks wait by polling `visible_ts`).
    fn mark_published(&self, commit_ts: u64) -> parking_lot::MutexGuard<'_, CommitOrder> {
        let mut order = self.commit_order.lock();
        self.finish_in_order(&mut order, commit_ts);
        order
    }

    /// Ends a commit that failed after taking its timestamp, without waiting, so later commits
    /// are not stuck behind it. The engine is poisoned by then, or (`Error::NotPrimary`) the
    /// primary lost its standby: then the commit, applied but never replicated, must never
    /// become visible, and the visible timestamp stays before it for good (every later commit
    /// fails the same way); waiters for it give up (`wait_visible_locked`).
    fn finish_failed(&self, commit_ts: u64, error: &Error) {
        let mut order = self.commit_order.lock();
        if matches!(error, Error::NotPrimary(_)) {
            order.awaiting_flush.remove(&commit_ts);
            self.notify_published(&mut order);
            return;
        }
        self.finish_in_order(&mut order, commit_ts);
    }

    /// Counts `commit_ts` as done and advances the visible timestamp over every contiguous
    /// done commit: finished ones, and applied ones the log has made durable meanwhile (a
    /// group flush makes a batch durable at once; the first of its committers to wake
    /// publishes the batch, instead of each waiting for the one before it to wake up).
    fn finish_in_order(&self, order: &mut CommitOrder, commit_ts: u64) {
        order.awaiting_flush.remove(&commit_ts);
        if commit_ts > self.visible_ts() {
            order.finished.insert(commit_ts);
        }
        self.advance_visible(order);
    }

    /// Publishes every commit the log has made durable whose earlier commits are all done
    /// (the log flusher calls it after each flush, so readers see a flushed batch at once).
    pub(crate) fn publish_durable(&self) {
        let mut order = self.commit_order.lock();
        self.advance_visible(&mut order);
    }

    /// Advances the visible timestamp over every contiguous done commit (see
    /// `finish_in_order`).
    fn advance_visible(&self, order: &mut CommitOrder) {
        let start = self.visible_ts();
        let durable_lsn = self.wal.durable_lsn();
        let mut visible = start;
        loop {
            let next = visible + 1;
            if order.finished.remove(&next) {
                visible = next;
                continue;
            }
            match order.awaiting_flush.get(&next) {
                Some(&end_lsn) if end_lsn <= durable_lsn => {
                    order.awaiting_flush.remove(&next);
                    visible = next;
                }
                _ => break,
            }
        }
        if visible != start {
            self.visible_ts.store(visible, Ordering::Release);
            self.notify_published(order);
        }
    }

    /// Creates a table or index. DDL is autocommitted and logged like a commit.
    pub fn create_tree(&self, name: &str, kind: TreeKind, unique: bool) -> Result<TreeInfo> {
        self.check_primary()?;
        self.check_writable()?;
        if name.is_empty() || name.len() > 1024 {
            return Err(Error::InvalidArgument(
                "tree name must have 1..=1024 bytes".into(),
            ));
        }
        let _operation = self.pool.operation();
        let mut catalog = self.catalog.write();
        if catalog.by_name(name).is_some() {
            return Err(Error::TableExists(name.into()));
        }
        let id = catalog.next_tree_id;
        let (commit_ts, lsn) = {
            let mut order = self.commit_order.lock();
            let commit_ts = order.next_commit_ts;
            let record = LogRecord::CreateTree {
                tree_id: id,
                name: name.into(),
                kind: kind.to_u8(),
                unique,
                commit_ts,
            };
            let appended = self.wal.append(&record)?;
            order.next_commit_ts += 1;
            (commit_ts, appended.end_lsn)
        };
        let root = match BTree::create(&self.pool) {
            Ok(root) => root,
            Err(error) => {
                self.poison(&error);
                self.finish_failed(commit_ts, &error);
                return Err(error);
            }
        };
        let info = TreeInfo {
            id,
            name: name.into(),
            kind,
            unique,
            root,
        };
        catalog.trees.insert(id, info.clone());
        catalog.next_tree_id += 1;
        drop(catalog);
        self.finish_ddl(commit_ts, lsn)?;
        Ok(info)
    }

    /// Drops a table or index and frees its pages.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        self.check_primary()?;
        self.check_writable()?;
        let _operation = self.pool.operation();
        let mut catalog = self.catalog.write();
        let info = catalog
            .by_name(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(name.into()))?;
        let (commit_ts, lsn) = {
            let mut order = self.commit_order.lock();
            let commit_ts = order.next_commit_ts;
            let appended = self.wal.append(&LogRecord::DropTree {
                tree_id: info.id,
                commit_ts,
            })?;
            order.next_commit_ts += 1;
            (commit_ts, appended.end_lsn)
        };
        catalog.trees.remove(&info.id);
        drop(catalog);
        if let Err(error) = BTree::open(info.root).destroy(&self.pool) {
            self.poison(&error);
            self.finish_failed(commit_ts, &error);
            return Err(error);
        }
        self.finish_ddl(commit_ts, lsn)
    }

    fn finish_ddl(&self, commit_ts: u64, lsn: Lsn) -> Result<()> {
        if let Err(error) = self.wal.flush_to(lsn) {
            self.poison(&error);
            self.finish_failed(commit_ts, &error);
            return Err(error);
        }
        self.publish(commit_ts);
        Ok(())
    }

    /// Holds off checkpoints until the guard drops (a base backup's copy).
    pub(crate) fn hold_checkpoints(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.checkpoint_lock.lock()
    }

    /// Takes a checkpoint (see docs/design.md, "Checkpoint protocol").
    pub fn checkpoint(&self) -> Result<u64> {
        let _single = self.checkpoint_lock.lock();
        // Checked under the lock: a checkpoint that failed while we waited leaves the store's
        // checkpoint unfinished and the engine poisoned.
        self.check_writable()?;
        if self.log_unconfirmed() {
            return Err(Error::InvalidArgument(
                "no checkpoint while this standby's log is not known to be its primary's (a \
                 rewind may cut it)"
                    .into(),
            ));
        }
        let store = self.pool.store().clone();
        let gate = self.pool.quiesce();
        let (meta, end_lsn) = {
            let mut order = self.commit_order.lock();
            let end_lsn = self.wal.end_lsn();
            let redo_lsn = order
                .applying
                .values()
                .next()
                .copied()
                .unwrap_or(end_lsn)
                .min(self.replay_from.load(Ordering::Acquire));
            let mut catalog = self.catalog.read().clone();
            catalog.next_commit_ts = order.next_commit_ts;
            catalog.next_txn_id = self.next_txn_id.load(Ordering::Relaxed);
            catalog.covered_lsn = end_lsn;
            let checkpoint_id = order.next_checkpoint_id;
            order.next_checkpoint_id += 1;
            (
                CheckpointMeta {
                    checkpoint_id,
                    redo_lsn,
                    payload: catalog.encode(),
                },
                end_lsn,
            )
        };
        let snapshot = store.begin_checkpoint();
        let pages = self.pool.take_dirty_pages();
        drop(gate);
        let page_refs: Vec<(u64, &[u8])> =
            pages.iter().map(|(id, image)| (*id, &image[..])).collect();
        let written = self
            .wal
            .flush_to(end_lsn)
            .and_then(|()| store.finish_checkpoint(snapshot, &page_refs, &meta));
        self.pool.finish_checkpoint_pages(written.is_ok());
        let result = written.and_then(|()| self.wal.truncate_before(meta.redo_lsn).map(|_| ()));
        if let Err(error) = result {
            self.poison(&error);
            return Err(error);
        }
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(meta.checkpoint_id)
    }

    /// Drops undo entries and tombstones no snapshot needs. Returns (undo entries, rows) purged.
    pub fn purge(&self) -> Result<(u64, u64)> {
        let oldest = self.oldest_snapshot_ts();
        let undo_purged = self.undo.purge(oldest)?;
        self.counters
            .undo_purged
            .fetch_add(undo_purged, Ordering::Relaxed);
        let mut rows_purged = 0;
        loop {
            let next = {
                let mut tombstones = self.tombstones.lock();
                match tombstones.front() {
                    Some((_, _, ts)) if *ts <= oldest => tombstones.pop_front(),
                    _ => None,
                }
            };
            let Some((tree_id, key, ts)) = next else {
                break;
            };
            if self.purge_tombstone(tree_id, key, ts)? {
                rows_purged += 1;
            }
        }
        self.counters
            .tombstones_purged
            .fetch_add(rows_purged, Ordering::Relaxed);
        Ok((undo_purged, rows_purged))
    }

    fn purge_tombstone(&self, tree_id: TreeId, key: Vec<u8>, ts: u64) -> Result<bool> {
        let Ok(tree) = self.tree_by_id(tree_id) else {
            return Ok(false);
        };
        let lock_key = (tree_id, key);
        if !self.locks.try_lock(PURGE_TXN_ID, &lock_key) {
            // A writer owns the row; it will replace the tombstone anyway.
            return Ok(false);
        }
        let btree = BTree::open(tree.root);
        let result = (|| {
            let Some(raw) = btree.get(&self.pool, &lock_key.1)? else {
                return Ok(false);
            };
            if row::peek(&raw) != Some((ts, true)) {
                return Ok(false);
            }
            btree.delete(&self.pool, &lock_key.1, self.wal.durable_lsn())?;
            Ok(true)
        })();
        self.locks.release_all(PURGE_TXN_ID, &[lock_key]);
        result
    }

    pub fn stats(&self) -> TxnStats {
        let undo = self.undo.stats();
        TxnStats {
            commits: self.counters.commits.load(Ordering::Relaxed),
            aborts: self.counters.aborts.load(Ordering::Relaxed),
            serialization_failures: self.counters.serialization_failures.load(Ordering::Relaxed),
            undo_entries: undo.entries,
            undo_bytes: undo.memory_bytes,
            undo,
            undo_purged: self.counters.undo_purged.load(Ordering::Relaxed),
            tombstones_purged: self.counters.tombstones_purged.load(Ordering::Relaxed),
            checkpoints: self.counters.checkpoints.load(Ordering::Relaxed),
            locks: self.locks.stats(),
        }
    }
}

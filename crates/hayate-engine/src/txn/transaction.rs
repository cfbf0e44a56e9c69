//! A transaction: a snapshot to read at, and a write set applied only at commit.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::locks::LockKey;
use super::serializable::ReadSet;
use super::{row, TreeId, TreeInfo, TxnManager};
use crate::btree::{BTree, Cursor, NodeLimits, TryLookup, VALUE_LENGTH_MAX};
use crate::error::{Error, Result};
use crate::wal::{Lsn, Op};

/// Why a transaction can no longer commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Serialization,
    Deadlock,
    LockTimeout(u64),
}

impl Failure {
    fn of(error: &Error) -> Option<Failure> {
        match error {
            Error::SerializationFailure => Some(Failure::Serialization),
            Error::Deadlock => Some(Failure::Deadlock),
            Error::LockTimeout(ms) => Some(Failure::LockTimeout(*ms)),
            _ => None,
        }
    }
    fn error(self) -> Error {
        match self {
            Failure::Serialization => Error::SerializationFailure,
            Failure::Deadlock => Error::Deadlock,
            Failure::LockTimeout(ms) => Error::LockTimeout(ms),
        }
    }
}

/// A locking read that does not wait (`try_lock_latest`, `try_get_for_update`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locked {
    /// Locked: the row's value (None: there is no such row).
    Row(Option<Vec<u8>>),
    /// Another transaction holds the row's lock; nothing was taken.
    Busy,
}

/// Batched loads `prefetch` waits for at most (a tree's height, plus overflow pages).
const PREFETCH_ROUNDS_MAX: usize = 6;

/// A transaction at snapshot isolation (see `txn`): reads see the snapshot plus its own
/// writes, writes are buffered and row-locked until `commit`. Dropped unfinished, it aborts
/// (unless `commit_start` already applied its writes: then the commit is completed).
pub struct Transaction {
    manager: Arc<TxnManager>,
    txn_id: u64,
    snapshot_ts: u64,
    read_only: bool,
    /// (tree, key) -> new value, or None for a delete.
    writes: BTreeMap<(TreeId, Vec<u8>), Option<Vec<u8>>>,
    locked: Vec<LockKey>,
    /// Rows read by a locking read of their newest version (`lock_latest`): this
    /// transaction may write them even if they changed after its snapshot.
    read_latest: KeySet,
    failure: Option<Failure>,
    finished: bool,
    /// Set by `commit_start` between applying the commit and publishing it: if the commit is
    /// dropped in between (its fiber or caller failed), `finish` completes the commit, so that later
    /// commits never wait for a timestamp nobody will publish.
    applied: Option<(u64, Lsn)>,
    /// Once a savepoint was taken: each write's key and the entry of `writes` it replaced
    /// (None: the key had none), oldest first, so `rollback_to` can undo writes in reverse.
    write_undo: Option<Vec<WriteUndo>>,
    /// SERIALIZABLE: the floor it registered with and what it read (`serializable`).
    serializable: Option<(u64, parking_lot::Mutex<ReadSet>)>,
}

type WriteUndo = ((TreeId, Vec<u8>), Option<Option<Vec<u8>>>);

/// A point in a transaction to roll back to (`Transaction::savepoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Savepoint {
    writes: usize,
    locked: usize,
    read_latest: usize,
    failure: Option<Failure>,
}

impl Transaction {
    pub(super) fn new(
        manager: Arc<TxnManager>,
        txn_id: u64,
        snapshot_ts: u64,
        read_only: bool,
    ) -> Transaction {
        Transaction {
            manager,
            txn_id,
            snapshot_ts,
            read_only,
            writes: BTreeMap::new(),
            locked: Vec::new(),
            read_latest: KeySet::default(),
            failure: None,
            finished: false,
            applied: None,
            write_undo: None,
            serializable: None,
        }
    }

    /// Records reads from now on for validation at commit (`TxnManager::begin_serializable`).
    pub(super) fn make_serializable(&mut self, floor: u64) {
        self.serializable = Some((floor, parking_lot::Mutex::new(ReadSet::default())));
    }

    /// True for a SERIALIZABLE transaction.
    pub fn is_serializable(&self) -> bool {
        self.serializable.is_some()
    }

    /// Marks the current state of the transaction: `rollback_to` with the mark undoes every
    /// later write (SQL's SAVEPOINT). Writes are recorded for undo from the first mark on.
    pub fn savepoint(&mut self) -> Savepoint {
        let undo = self.write_undo.get_or_insert_with(Vec::new);
        Savepoint {
            writes: undo.len(),
            locked: self.locked.len(),
            read_latest: self.read_latest.len(),
            failure: self.failure,
        }
    }

    /// Undoes every write made after `mark`, newest first, and releases the row locks taken
    /// after it (their rows now hold what they held at the mark, which this transaction had
    /// not locked). A write conflict, deadlock or lock timeout that happened after the mark
    /// is forgotten: the write that met it did not happen. The mark stays valid, as SQL's
    /// ROLLBACK TO keeps its savepoint; marks taken after it are invalid afterwards.
    pub fn rollback_to(&mut self, mark: Savepoint) -> Result<()> {
        if self.finished {
            return Err(Error::TransactionClosed);
        }
        let undo = self.write_undo.as_mut().ok_or_else(|| {
            Error::InvalidArgument("rollback_to a mark this transaction never made".into())
        })?;
        if mark.writes > undo.len()
            || mark.locked > self.locked.len()
            || mark.read_latest > self.read_latest.len()
        {
            return Err(Error::InvalidArgument(
                "rollback_to a mark already rolled back past".into(),
            ));
        }
        for (key, previous) in undo.drain(mark.writes..).rev() {
            match previous {
                Some(value) => self.writes.insert(key, value),
                None => self.writes.remove(&key),
            };
        }
        let released = self.locked.split_off(mark.locked);
        self.manager.locks.release_all(self.txn_id, &released);
        self.read_latest.truncate(mark.read_latest);
        self.failure = mark.failure;
        Ok(())
    }

    /// Records a write in the write set (and, after a savepoint, what it replaced).
    fn write(&mut self, tree: TreeId, key: &[u8], value: Option<Vec<u8>>) {
        let previous = self.writes.insert((tree, key.to_vec()), value);
        if let Some(undo) = &mut self.write_undo {
            undo.push(((tree, key.to_vec()), previous));
        }
    }

    /// Its transaction id, assigned in the order transactions begin.
    pub fn id(&self) -> u64 {
        self.txn_id
    }

    /// The commit timestamp its reads see: every commit up to it, none after.
    pub fn snapshot_ts(&self) -> u64 {
        self.snapshot_ts
    }

    /// True if begun with `Database::begin_read_only`.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn tree(&self, tree: TreeId) -> Result<TreeInfo> {
        self.manager.tree_by_id(tree)
    }

    /// This transaction's write of a row, if it wrote it (Some(None): deleted it).
    fn own_write(&self, tree: TreeId, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        if self.writes.is_empty() {
            return None; // no key to build for a read-only statement's lookups
        }
        self.writes.get(&(tree, key.to_vec()))
    }

    /// Reads a row as of the snapshot, seeing this transaction's own writes.
    pub fn get(&self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some((_, reads)) = &self.serializable {
            reads.lock().point(tree, key);
        }
        if let Some(write) = self.own_write(tree, key) {
            return Ok(write.clone());
        }
        self.manager.read_visible(tree, key, self.snapshot_ts)
    }

    /// `get` of many keys, sorted ascending: the rows as of the snapshot (this transaction's
    /// own writes seen), in the keys' order. Keys that share a leaf are read under one
    /// descent to it (`BTree::get_sorted`), so the rows of an index range's primary keys
    /// cost far less than a `get` each.
    pub fn get_sorted(&self, tree: TreeId, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.get_sorted_where(tree, keys, &mut |_| true)
    }

    /// `get_sorted`, except that rows `keep` refuses may read as None: as with
    /// `Scan::next_row_where`, a committed row whose version the snapshot sees lies whole in
    /// its leaf is given to `keep` there and not copied if refused; other rows (older
    /// versions, overflow values, the transaction's own writes) are returned without asking.
    /// `keep` runs with a leaf latched: it must not read the database, wait or suspend.
    pub fn get_sorted_where(
        &self,
        tree: TreeId,
        keys: &[Vec<u8>],
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        if let Some((_, reads)) = &self.serializable {
            let mut reads = reads.lock();
            for key in keys {
                reads.point(tree, key);
            }
        }
        let mut values = self
            .manager
            .read_visible_sorted(tree, keys, self.snapshot_ts, keep)?;
        for (key, value) in keys.iter().zip(values.iter_mut()) {
            if let Some(write) = self.own_write(tree, key) {
                *value = write.clone();
            }
        }
        Ok(values)
    }

    /// Brings the pages holding `keys` (tree, key) into the buffer: every missing page of
    /// every key is loaded in the same batch (`BufferPool::load_batch`, all reads in flight at
    /// once; on a fiber the fiber suspends once for them), one batch per tree level at most, so
    /// a transaction about to read many rows waits about once rather than once per row. Reads
    /// nothing for the caller; the later `get` calls then hit.
    pub fn prefetch(&self, keys: &[(TreeId, Vec<u8>)]) -> Result<()> {
        // Each tree's catalog entry once, not once per key and level.
        let mut trees: Vec<(TreeId, BTree)> = Vec::new();
        for (tree, _) in keys {
            if !trees.iter().any(|(known, _)| known == tree) {
                trees.push((*tree, BTree::open(self.tree(*tree)?.root)));
            }
        }
        for _level in 0..PREFETCH_ROUNDS_MAX {
            let mut missing = Vec::new();
            for (tree, key) in keys {
                let (_, btree) = trees
                    .iter()
                    .find(|(known, _)| known == tree)
                    .expect("every tree was opened above");
                if let TryLookup::Missing(page) = btree.try_get(&self.manager.pool, key)? {
                    missing.push(page);
                }
            }
            if missing.is_empty() {
                break;
            }
            missing.sort_unstable();
            missing.dedup();
            self.manager.pool.load_released(&missing)?;
        }
        Ok(())
    }

    /// Reads a row and locks it against other writers (SELECT ... FOR UPDATE). Fails with a
    /// serialization error if it changed after the snapshot.
    pub fn get_for_update(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let info = self.tree(tree)?;
        self.lock_row(&info, key)?;
        self.get(tree, key)
    }

    /// `lock_latest` for threads: locks the row and returns its newest committed
    /// version (this transaction's own write if it has one), which it may then write even if
    /// it changed after the snapshot. The SQL layer's UPDATE and DELETE at READ COMMITTED use
    /// it, as PostgreSQL re-reads a row changed by a concurrent commit instead of failing.
    pub fn lock_latest(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(write) = self.writes.get(&(tree, key.to_vec())) {
            return Ok(write.clone());
        }
        let info = self.tree(tree)?;
        let lock_key = (tree, key.to_vec());
        self.read_latest.insert(lock_key);
        self.lock_row(&info, key)?;
        self.manager.read_visible(tree, key, u64::MAX)
    }

    /// `get_for_update` without waiting: `Locked::Busy` if another transaction holds the
    /// row's lock (SELECT ... FOR UPDATE NOWAIT / SKIP LOCKED at REPEATABLE READ).
    pub fn try_get_for_update(&mut self, tree: TreeId, key: &[u8]) -> Result<Locked> {
        let info = self.tree(tree)?;
        match self.lock_row_or_skip(&info, key, false)? {
            None => Ok(Locked::Busy),
            Some(_) => self.get(tree, key).map(Locked::Row),
        }
    }

    /// `lock_latest` without waiting: `Locked::Busy` if another transaction holds the row's
    /// lock (SELECT ... FOR UPDATE NOWAIT / SKIP LOCKED at READ COMMITTED; a queue's
    /// consumers taking the oldest entry nobody else is taking).
    pub fn try_lock_latest(&mut self, tree: TreeId, key: &[u8]) -> Result<Locked> {
        if let Some(write) = self.writes.get(&(tree, key.to_vec())) {
            return Ok(Locked::Row(write.clone()));
        }
        let info = self.tree(tree)?;
        let lock_key = (tree, key.to_vec());
        let before = self.read_latest.len();
        self.read_latest.insert(lock_key);
        if self.lock_row_or_skip(&info, key, false)?.is_none() {
            self.read_latest.truncate(before);
            return Ok(Locked::Busy);
        }
        self.manager
            .read_visible(tree, key, u64::MAX)
            .map(Locked::Row)
    }

    /// Locks a row shared (other shared holders allowed, writers kept out until this
    /// transaction ends) and returns its newest committed version, or this transaction's own
    /// write: a foreign key's check that its referenced row exists and stays (PostgreSQL's
    /// FOR KEY SHARE). Rows inserting references to one row no longer queue behind each other.
    pub fn lock_shared_latest(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.lock_shared_or_skip(tree, key, true)? {
            Locked::Row(row) => Ok(row),
            Locked::Busy => unreachable!("a waiting lock is never busy"),
        }
    }

    /// `lock_shared_latest` without waiting: `Locked::Busy` if another transaction holds the
    /// row exclusively (SELECT ... FOR SHARE NOWAIT / SKIP LOCKED).
    pub fn try_lock_shared_latest(&mut self, tree: TreeId, key: &[u8]) -> Result<Locked> {
        self.lock_shared_or_skip(tree, key, false)
    }

    fn lock_shared_or_skip(&mut self, tree: TreeId, key: &[u8], wait: bool) -> Result<Locked> {
        if let Some(write) = self.writes.get(&(tree, key.to_vec())) {
            return Ok(Locked::Row(write.clone()));
        }
        if self.finished {
            return Err(Error::TransactionClosed);
        }
        if self.read_only {
            return Err(Error::ReadOnlyTransaction);
        }
        let lock_key = (tree, key.to_vec());
        let taken = match wait {
            true => self.manager.locks.lock_shared(self.txn_id, &lock_key),
            false => match self.manager.locks.try_take_shared(self.txn_id, &lock_key) {
                Some(taken) => Ok(taken),
                None => return Ok(Locked::Busy),
            },
        };
        let taken = taken.map_err(|error| self.fail(error))?;
        if taken {
            self.locked.push(lock_key);
        }
        self.manager
            .read_visible(tree, key, u64::MAX)
            .map(Locked::Row)
    }

    /// Moves the snapshot to the newest published commit (READ COMMITTED: each statement
    /// reads what was committed before it started). Writes and locks are kept.
    pub fn refresh_snapshot(&mut self) {
        let old = self.snapshot_ts;
        self.snapshot_ts = self.manager.register_snapshot();
        self.manager.end_snapshot(old);
    }

    /// Inserts or replaces a row.
    pub fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_sizes(key, Some(value))?;
        let info = self.tree(tree)?;
        self.lock_row(&info, key)?;
        self.write(tree, key, Some(value.to_vec()));
        Ok(())
    }

    /// Inserts a row; `Error::DuplicateKey` if it exists.
    pub fn insert(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_sizes(key, Some(value))?;
        let info = self.tree(tree)?;
        if self.lock_row(&info, key)? {
            return Err(Error::DuplicateKey);
        }
        self.write(tree, key, Some(value.to_vec()));
        Ok(())
    }

    /// Replaces an existing row; returns false (and changes nothing) if there is none.
    pub fn update(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<bool> {
        self.check_sizes(key, Some(value))?;
        let info = self.tree(tree)?;
        if !self.lock_row(&info, key)? {
            return Ok(false);
        }
        self.write(tree, key, Some(value.to_vec()));
        Ok(true)
    }

    /// Deletes a row; returns false if there is none.
    pub fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<bool> {
        let info = self.tree(tree)?;
        if !self.lock_row(&info, key)? {
            return Ok(false);
        }
        self.write(tree, key, None);
        Ok(true)
    }

    /// Rejects keys and values the B+tree cannot store, before anything is logged: a commit
    /// whose apply fails would stop the engine.
    fn check_sizes(&self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let key_limit = NodeLimits::new(self.manager.pool.page_size()).key_length_max;
        if key.is_empty() || key.len() > key_limit {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes; keys must have 1..={key_limit} bytes",
                key.len()
            )));
        }
        let value_limit = VALUE_LENGTH_MAX - row::ROW_HEADER_SIZE;
        match value {
            Some(value) if value.len() > value_limit => Err(Error::ValueTooLarge {
                size: value.len(),
                limit: value_limit,
            }),
            _ => Ok(()),
        }
    }

    /// Locks a row for writing and returns whether it exists for this transaction.
    fn lock_row(&mut self, info: &TreeInfo, key: &[u8]) -> Result<bool> {
        let exists = self.lock_row_or_skip(info, key, true)?;
        Ok(exists.unwrap_or_default())
    }

    /// `lock_row`, or None without waiting when `wait` is false and another transaction
    /// holds the row's lock (NOWAIT and SKIP LOCKED).
    fn lock_row_or_skip(
        &mut self,
        info: &TreeInfo,
        key: &[u8],
        wait: bool,
    ) -> Result<Option<bool>> {
        if let Some(exists) = self.write_precheck(info, key)? {
            return Ok(Some(exists));
        }
        let lock_key = (info.id, key.to_vec());
        let taken = match wait {
            true => self.manager.locks.lock(self.txn_id, &lock_key),
            false => match self.manager.locks.try_take(self.txn_id, &lock_key) {
                Some(taken) => Ok(taken),
                None => return Ok(None),
            },
        };
        let taken = taken.map_err(|error| self.fail(error))?;
        if taken {
            self.locked.push(lock_key.clone());
        }
        let latest = BTree::open(info.root).get(&self.manager.pool, key)?;
        if let Some(commit_ts) = self.unpublished_conflict(&lock_key, latest.as_deref()) {
            self.manager.wait_visible(commit_ts);
        }
        self.check_latest(info, &lock_key, latest.as_deref())
            .map(Some)
    }

    /// The commit timestamp of the row's newest version when it is newer than the snapshot
    /// (so writing the row will fail) and not yet visible: its commit released its locks early
    /// and is still waiting for the log. The failing writer waits until it is visible first,
    /// so that a retry's new snapshot sees it rather than failing again at once.
    fn unpublished_conflict(&self, lock_key: &LockKey, latest: Option<&[u8]>) -> Option<u64> {
        let (commit_ts, _) = row::peek(latest?)?;
        let conflict = commit_ts > self.snapshot_ts && !self.read_latest.contains(lock_key);
        (conflict && commit_ts > self.manager.visible_ts()).then_some(commit_ts)
    }

    /// Checks shared by the write paths. Some(exists) if this transaction already wrote the row.
    fn write_precheck(&self, info: &TreeInfo, key: &[u8]) -> Result<Option<bool>> {
        if self.finished {
            return Err(Error::TransactionClosed);
        }
        if self.read_only {
            return Err(Error::ReadOnlyTransaction);
        }
        if let Some(failure) = self.failure {
            return Err(failure.error());
        }
        self.manager.check_primary()?;
        self.manager.check_writable()?;
        Ok(self
            .writes
            .get(&(info.id, key.to_vec()))
            .map(|write| write.is_some()))
    }

    /// With the row locked: whether it exists, or a serialization failure if a version newer
    /// than the snapshot was committed (unless the row was read by `lock_latest`).
    fn check_latest(
        &mut self,
        info: &TreeInfo,
        lock_key: &LockKey,
        latest: Option<&[u8]>,
    ) -> Result<bool> {
        match latest.map(row::peek) {
            None => Ok(false),
            Some(None) => row::decode(latest.unwrap_or_default(), &info.name).map(|_| false),
            Some(Some((commit_ts, _)))
                if commit_ts > self.snapshot_ts && !self.read_latest.contains(lock_key) =>
            {
                Err(self.fail(Error::SerializationFailure))
            }
            Some(Some((_, tombstone))) => Ok(!tombstone),
        }
    }

    /// Steps 1-3 of the commit protocol: logs and applies the write set, releases the row
    /// locks and marks the commit applied (a drop from here on finishes it). Returns its
    /// timestamp and the log position to wait for; None for a transaction that wrote nothing
    /// (finished already).
    fn log_and_apply(&mut self) -> Result<Option<(u64, Lsn)>> {
        let Some(ops) = self.start_commit()? else {
            return Ok(None);
        };
        let applied = match &self.serializable {
            Some((_, reads)) => {
                let reads = reads.lock();
                self.manager
                    .commit_apply(self.txn_id, ops, Some((&reads, self.snapshot_ts)))
            }
            None => self.manager.commit_apply(self.txn_id, ops, None),
        };
        let (commit_ts, end_lsn) = match applied {
            Ok(applied) => applied,
            Err(error) => {
                self.finish(false);
                return Err(error);
            }
        };
        self.applied = Some((commit_ts, end_lsn));
        self.release_locks_early();
        Ok(Some((commit_ts, end_lsn)))
    }

    /// The checks every commit starts with. Returns the write set as log operations, or None
    /// for a transaction that wrote nothing (then it is finished already).
    fn start_commit(&mut self) -> Result<Option<Vec<Op>>> {
        if self.finished {
            return Err(Error::TransactionClosed);
        }
        if let Some(failure) = self.failure {
            self.finish(false);
            return Err(failure.error());
        }
        if self.writes.is_empty() {
            self.finish(true);
            return Ok(None);
        }
        match self.take_ops() {
            Ok(ops) => Ok(Some(ops)),
            Err(error) => {
                self.finish(false);
                Err(error)
            }
        }
    }

    /// The write set as log operations, in key order: a rewrite of few bytes of a row becomes
    /// a patch (`TxnManager::patch_or_put`; this transaction holds the row's lock).
    fn take_ops(&mut self) -> Result<Vec<Op>> {
        std::mem::take(&mut self.writes)
            .into_iter()
            .map(|((tree_id, key), value)| match value {
                Some(value) => self.manager.patch_or_put(tree_id, key, value),
                None => Ok(Op::Delete { tree_id, key }),
            })
            .collect()
    }

    fn fail(&mut self, error: Error) -> Error {
        if let Some(failure) = Failure::of(&error) {
            self.failure = Some(failure);
            if matches!(failure, Failure::Serialization) {
                self.manager
                    .counters
                    .serialization_failures
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        error
    }

    /// Scans rows with keys in `[start, end)` style bounds, in key order, as of the snapshot
    /// and with this transaction's own writes.
    pub fn scan(&self, tree: TreeId, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<Scan> {
        self.scan_at(tree, start, end, self.snapshot_ts, false)
    }

    /// `scan` in descending key order (ORDER BY ... DESC on the key).
    pub fn scan_reverse(
        &self,
        tree: TreeId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<Scan> {
        self.scan_at(tree, start, end, self.snapshot_ts, true)
    }

    /// `scan` of the newest committed versions (not the snapshot's) with this transaction's
    /// own writes: what a check that must not miss a concurrent commit reads after taking the
    /// lock that orders it after that commit (a foreign key's referencing rows, once the
    /// referenced row is locked).
    pub fn scan_latest(
        &self,
        tree: TreeId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<Scan> {
        self.scan_at(tree, start, end, u64::MAX, false)
    }

    fn scan_at(
        &self,
        tree: TreeId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        snapshot_ts: u64,
        reverse: bool,
    ) -> Result<Scan> {
        let info = self.tree(tree)?;
        if let Some((_, reads)) = &self.serializable {
            reads.lock().range(tree, start, end);
        }
        let own_start = start.map(|key| (tree, key.to_vec()));
        let own_end = end.map(|key| (tree, key.to_vec()));
        // `BTreeMap::range` panics on an inverted or empty-excluded range; such a range
        // simply holds none of our writes.
        let mut own: VecDeque<(Vec<u8>, Option<Vec<u8>>)> = if range_is_empty(start, end) {
            VecDeque::new()
        } else {
            self.writes
                .range((own_start, own_end))
                .filter(|((write_tree, _), _)| *write_tree == tree)
                .map(|((_, key), value)| (key.clone(), value.clone()))
                .collect()
        };
        let btree = BTree::open(info.root);
        let cursor = if reverse {
            own.make_contiguous().reverse();
            btree.scan_reverse(&self.manager.pool, start, end)
        } else {
            btree.scan(&self.manager.pool, start, end)
        };
        Ok(Scan {
            manager: self.manager.clone(),
            info,
            snapshot_ts,
            reverse,
            cursor,
            batch: VecDeque::new(),
            tree_done: false,
            own,
        })
    }

    /// Makes the writes durable and visible (see the commit protocol in `txn`). Returns the
    /// commit timestamp, or None for a transaction that wrote nothing.
    pub fn commit(self) -> Result<Option<u64>> {
        match self.commit_start()? {
            Some(pending) => pending.finish().map(Some),
            None => Ok(None),
        }
    }

    /// Steps 1-3 of the commit protocol without waiting for the log: the write set is logged
    /// and applied and the row locks are released. Returns the commit still to be made
    /// durable and published (`PendingCommit`), or None for a transaction that wrote nothing
    /// (finished already). A server's event loop awaits `Database::log_durable` for
    /// `PendingCommit::lsn` and then calls `PendingCommit::finish`, instead of blocking in
    /// `commit` while other connections of the loop wait.
    pub fn commit_start(mut self) -> Result<Option<PendingCommit>> {
        let Some((commit_ts, end_lsn)) = self.log_and_apply()? else {
            return Ok(None);
        };
        Ok(Some(PendingCommit {
            txn: self,
            commit_ts,
            end_lsn,
        }))
    }

    /// Early lock release (step 3 of the commit protocol): once the commit's record is in the
    /// log and its writes applied, its row locks go, before the log is durable. A transaction
    /// that takes one of these locks next appends its own commit record after ours, so it
    /// becomes durable (and is acknowledged) only after us; snapshot readers still see our
    /// writes only once published. Hot rows (a warehouse's W_YTD) then change hands once per
    /// commit rather than once per log flush.
    fn release_locks_early(&mut self) {
        self.manager.locks.release_all(self.txn_id, &self.locked);
        self.locked.clear();
    }

    /// Discards the writes.
    pub fn abort(mut self) {
        self.finish(false);
    }

    fn finish(&mut self, committed: bool) {
        if self.finished {
            return;
        }
        self.finished = true;
        let mut committed = committed;
        if let Some((commit_ts, end_lsn)) = self.applied.take() {
            // Dropped while waiting for the log: finish the commit here (blocking).
            if self.manager.commit_durable(commit_ts, end_lsn).is_ok() {
                drop(self.manager.mark_published(commit_ts));
                committed = true;
            }
        }
        if !self.read_only {
            // (A read-only transaction never takes a lock, nor waits for one.)
            self.manager.locks.release_all(self.txn_id, &self.locked);
            self.locked.clear();
        }
        self.manager.end_snapshot(self.snapshot_ts);
        if let Some((floor, _)) = self.serializable.take() {
            self.manager.end_serializable(floor);
        }
        if !committed {
            self.manager.counters.aborts.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// True if no key lies within `start`..`end` (the start bound is past the end bound).
fn range_is_empty(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(start), Bound::Included(end)) => start > end,
        (Bound::Included(start), Bound::Excluded(end))
        | (Bound::Excluded(start), Bound::Included(end))
        | (Bound::Excluded(start), Bound::Excluded(end)) => start >= end,
        _ => false,
    }
}

/// A commit whose write set is logged and applied (`Transaction::commit_start`), waiting for
/// the log to be durable up to `lsn` before it is acknowledged and published. Dropped
/// unfinished, it finishes like `commit` (blocking), so later commits never wait for a
/// timestamp nobody publishes.
pub struct PendingCommit {
    txn: Transaction,
    commit_ts: u64,
    end_lsn: Lsn,
}

impl PendingCommit {
    /// The log position that must be durable before the commit is acknowledged.
    pub fn lsn(&self) -> Lsn {
        self.end_lsn
    }

    /// Steps 4-5 of the commit protocol: returns at once once the log is durable up to
    /// `lsn` (else waits for it), publishes the commit and returns its timestamp.
    pub fn finish(mut self) -> Result<u64> {
        self.txn.applied = None;
        let result = self
            .txn
            .manager
            .commit_durable(self.commit_ts, self.end_lsn);
        if result.is_ok() {
            self.txn.manager.publish(self.commit_ts);
        }
        self.txn.finish(result.is_ok());
        result.map(|()| self.commit_ts)
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.finish(false);
    }
}

/// Rows of a range, merged from the tree (as of the snapshot) and the transaction's writes.
pub struct Scan {
    manager: Arc<TxnManager>,
    info: TreeInfo,
    snapshot_ts: u64,
    /// Descending key order.
    reverse: bool,
    cursor: Cursor,
    /// Visible rows of the current tree batch.
    batch: VecDeque<(Vec<u8>, Vec<u8>)>,
    tree_done: bool,
    own: VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Scan {
    /// Refills `batch` with visible rows until it holds one or the tree is exhausted,
    /// leaving out rows whose visible version `keep` refuses (see `next_row_where`).
    fn fill(&mut self, keep: &mut dyn FnMut(&[u8]) -> bool) -> Result<()> {
        // Decided in the leaf only for a row whose stored version is the snapshot's; a row
        // this transaction wrote comes from `own` whatever its stored version shows.
        let mut keep_stored = row::keep_visible(self.snapshot_ts, keep);
        while self.batch.is_empty() && !self.tree_done {
            let entries = self
                .cursor
                .next_batch_where(&self.manager.pool, &mut keep_stored)?;
            if entries.is_empty() {
                self.tree_done = true;
            }
            for (key, raw) in entries {
                if let Some(value) = self.manager.resolve(&self.info, raw, self.snapshot_ts)? {
                    self.batch.push_back((key, value));
                }
            }
        }
        Ok(())
    }

    /// The values of the scan's rows without their keys (an index read's primary keys),
    /// or None once there are more than `most` (the scan stops at the end of that leaf).
    /// The flag says whether they are in the scan's order: a committed version the snapshot
    /// sees is taken straight from its leaf, an older one (its row changed since the
    /// snapshot) comes after the others of its leaf. With writes of this transaction in the
    /// range every row comes in order through `next_row`.
    pub fn values(mut self, most: usize) -> Result<Option<(Vec<Vec<u8>>, bool)>> {
        let mut values: Vec<Vec<u8>> = Vec::new();
        if !self.own.is_empty() || !self.batch.is_empty() {
            while let Some((_, value)) = self.next_row()? {
                if values.len() == most {
                    return Ok(None);
                }
                values.push(value);
            }
            return Ok(Some((values, true)));
        }
        let mut ordered = true;
        loop {
            let leaf = {
                let mut take = |value: &[u8]| {
                    values.push(value.to_vec());
                    false
                };
                let mut keep_stored = row::keep_visible(self.snapshot_ts, &mut take);
                (self.cursor).next_leaf_where(&self.manager.pool, &mut keep_stored)?
            };
            let Some(entries) = leaf else {
                return Ok(Some((values, ordered)));
            };
            for (_, raw) in entries {
                if let Some(value) = self.manager.resolve(&self.info, raw, self.snapshot_ts)? {
                    values.push(value);
                    ordered = false;
                }
            }
            if values.len() > most {
                return Ok(None);
            }
        }
    }

    /// The next row as (key, value) in the scan's key order, or None past the range.
    pub fn next_row(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.next_row_where(&mut |_| true)
    }

    /// `next_row`, except that rows `keep` refuses may be left out: a committed row whose
    /// version the snapshot sees lies whole in its leaf is given to `keep` there, before it
    /// is copied, and is skipped if refused. Other rows (older versions, overflow values,
    /// the transaction's own writes) are returned without asking, so `keep` is a filter
    /// ahead of the caller's own, never instead of it. `keep` runs with a leaf latched: it
    /// must not read the database, wait or suspend.
    pub fn next_row_where(
        &mut self,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            self.fill(keep)?;
            let take_own = match (self.batch.front(), self.own.front()) {
                (None, None) => return Ok(None),
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((tree_key, _)), Some((own_key, _))) => {
                    // Which comes first in the scan's order.
                    let ordering = match self.reverse {
                        false => own_key.cmp(tree_key),
                        true => tree_key.cmp(own_key),
                    };
                    if ordering == std::cmp::Ordering::Equal {
                        self.batch.pop_front(); // our own write replaces it
                    }
                    ordering != std::cmp::Ordering::Greater
                }
            };
            if take_own {
                let (key, value) = self.own.pop_front().expect("checked");
                match value {
                    Some(value) => return Ok(Some((key, value))),
                    None => continue, // deleted by us
                }
            }
            return Ok(self.batch.pop_front());
        }
    }
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_row().transpose()
    }
}

/// Keys in the order first inserted, with a set for lookups: a transaction may lock thousands
/// of rows by `lock_latest` (a READ COMMITTED SELECT ... FOR UPDATE over a range), and each
/// later lock asks whether its row is among them.
#[derive(Default)]
struct KeySet {
    order: Vec<LockKey>,
    set: HashSet<LockKey>,
}

impl KeySet {
    fn insert(&mut self, key: LockKey) {
        if self.set.insert(key.clone()) {
            self.order.push(key);
        }
    }

    fn contains(&self, key: &LockKey) -> bool {
        self.set.contains(key)
    }

    fn len(&self) -> usize {
        self.order.len()
    }

    /// Forgets every key inserted after the first `len`.
    fn truncate(&mut self, len: usize) {
        for key in self.order.drain(len.min(self.order.len())..) {
            self.set.remove(&key);
        }
    }
}

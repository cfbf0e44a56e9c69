//! SERIALIZABLE transactions: snapshot isolation plus backward validation of the reads at
//! commit (design 6, "Serializable").
//!
//! 1. A serializable transaction records what it read: each key it looked up and each key
//!    range it scanned, per tree (`ReadSet`), whether or not a row was there.
//! 2. While any serializable transaction runs, every commit leaves its written keys in the
//!    log of recent writes (`RecentWrites`), under the commit-order mutex, in timestamp order.
//! 3. A serializable transaction that wrote something commits only if no commit after its
//!    snapshot wrote a key it read or a key inside a range it scanned (a row changed, deleted,
//!    or a phantom inserted); it validates under the commit-order mutex, right before taking
//!    its own timestamp. Its reads are then still true at its commit timestamp, so it is
//!    equivalent to running alone at that instant, and commit timestamp order is a serial
//!    order of the serializable writers. Otherwise `Error::ReadWriteConflict` (40001).
//! 4. A transaction that wrote nothing needs no validation: its snapshot is a prefix of that
//!    serial order. Write-skew and phantoms are refused; a read-only transaction never fails.
//!
//! Compared with PostgreSQL's SSI, which aborts on two consecutive read-write dependencies,
//! this aborts on any single one into a committing writer (more false positives under
//! contention, no SIREAD lock table; the same anomalies are excluded).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ops::Bound;

use super::TreeId;

/// A key range of one tree, as a scan asked for it.
type KeyRange = (TreeId, Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The keys one commit wrote, with its timestamp.
type CommitKeys = (u64, Vec<(TreeId, Vec<u8>)>);

/// What a serializable transaction read.
#[derive(Debug, Default)]
pub(crate) struct ReadSet {
    points: HashSet<(TreeId, Vec<u8>)>,
    ranges: Vec<KeyRange>,
}

impl ReadSet {
    pub(crate) fn point(&mut self, tree: TreeId, key: &[u8]) {
        self.points.insert((tree, key.to_vec()));
    }

    pub(crate) fn range(&mut self, tree: TreeId, start: Bound<&[u8]>, end: Bound<&[u8]>) {
        let owned = |bound: Bound<&[u8]>| bound.map(<[u8]>::to_vec);
        let entry = (tree, owned(start), owned(end));
        if !self.ranges.contains(&entry) {
            self.ranges.push(entry);
        }
    }

    /// True if writing `key` of `tree` changes what this set read.
    fn covers(&self, tree: TreeId, key: &[u8]) -> bool {
        self.points.contains(&(tree, key.to_vec()))
            || self.ranges.iter().any(|(range_tree, start, end)| {
                *range_tree == tree && above(start, key) && below(end, key)
            })
    }
}

fn above(start: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match start {
        Bound::Included(start) => key >= start.as_slice(),
        Bound::Excluded(start) => key > start.as_slice(),
        Bound::Unbounded => true,
    }
}

fn below(end: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match end {
        Bound::Included(end) => key <= end.as_slice(),
        Bound::Excluded(end) => key < end.as_slice(),
        Bound::Unbounded => true,
    }
}

/// The keys commits wrote while serializable transactions ran (kept under the commit-order
/// mutex).
#[derive(Debug, Default)]
pub(crate) struct RecentWrites {
    /// Floor (the last commit timestamp taken when it began; its snapshot is at or after it)
    /// of each running serializable transaction -> how many.
    floors: BTreeMap<u64, usize>,
    /// (commit timestamp, written keys), oldest first.
    commits: VecDeque<CommitKeys>,
}

impl RecentWrites {
    /// Registers a serializable transaction whose snapshot will be at or after `floor`:
    /// every later commit is recorded until it ends.
    pub(crate) fn register(&mut self, floor: u64) {
        *self.floors.entry(floor).or_insert(0) += 1;
    }

    /// Ends a serializable transaction and forgets the commits no running one needs.
    pub(crate) fn deregister(&mut self, floor: u64) {
        if let Some(count) = self.floors.get_mut(&floor) {
            *count -= 1;
            if *count == 0 {
                self.floors.remove(&floor);
            }
        }
        let oldest = self.floors.keys().next().copied().unwrap_or(u64::MAX);
        while self
            .commits
            .front()
            .is_some_and(|(commit_ts, _)| *commit_ts <= oldest)
        {
            self.commits.pop_front();
        }
    }

    /// True while a serializable transaction runs (commits must record their keys).
    pub(crate) fn recording(&self) -> bool {
        !self.floors.is_empty()
    }

    pub(crate) fn record(&mut self, commit_ts: u64, keys: Vec<(TreeId, Vec<u8>)>) {
        self.commits.push_back((commit_ts, keys));
    }

    /// True if a commit after `snapshot_ts` wrote a key `reads` covers.
    pub(crate) fn conflicts(&self, reads: &ReadSet, snapshot_ts: u64) -> bool {
        self.commits
            .iter()
            .rev()
            .take_while(|(commit_ts, _)| *commit_ts > snapshot_ts)
            .any(|(_, keys)| keys.iter().any(|(tree, key)| reads.covers(*tree, key)))
    }
}

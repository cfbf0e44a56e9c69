//! Range scans that hold no latch between batches.
//!
//! Lifecycle of a cursor:
//! 1. `BTree::scan` records the bounds; nothing is read yet.
//! 2. Each `next_batch` descends from the root to the leaf holding the resume key (shared
//!    latches, hand over hand), noting the leaf's upper fence: the nearest separator to the
//!    right of the path. A forward scan notes the leaf's parent too (its version): while the
//!    parent stays unchanged and resident, the next leaf is found in it without a descent
//!    (`BTree::leaf_from_parent`, checked as an optimistic descent is).
//! 3. It copies the leaf's entries within the bounds (values from overflow chains while the leaf
//!    is still latched), up to `BATCH_BYTES_MAX`, then releases the leaf. On a fiber a chain
//!    page that is not resident ends the batch before its entry: the leaf is let go, the
//!    chain loaded, and the next batch starts at that entry (`copy_value_or_miss`).
//! 4. The cursor resumes after the last key copied, or at the fence if it copied the whole leaf.
//!    Splits, merges and frees between batches are harmless since it only keeps keys.
//!
//! A reverse cursor (`BTree::scan_reverse`, descending key order) mirrors it: each batch
//! descends to the leaf holding the greatest keys before its resume bound (`Seek::Before`,
//! or the rightmost leaf at first), copies the leaf's entries below the bound from the last
//! down, and resumes before the leaf's lower fence (the nearest separator to the left of the
//! path). Leaves have no left links; a descent per leaf costs what a forward scan's does.

use std::collections::VecDeque;
use std::ops::Bound;

use crate::buffer::{BufferPool, PageStamp};
use crate::error::Result;

use super::node::{LeafValue, NodeAccessor};
use super::overflow::load_chain_released;
use super::tree::{copy_value_or_miss, BTree, LeafFences, Seek, CHAIN_TRIES};

/// A batch stops once it holds this many key and value bytes (at least one entry).
pub const BATCH_BYTES_MAX: usize = 1 << 20;
/// On a fiber, a scan that goes on past its first leaf loads a missing leaf together with the
/// leaves after it within its range (one batch of reads in flight, not one read at a time):
/// 2 at its second leaf, doubling with each leaf it goes on to, up to this many.
pub const READ_AHEAD_LEAVES: usize = 16;

pub type Entry = (Vec<u8>, Vec<u8>);

/// How many entries ahead of the one it copies a scan prefetches cells (`copy_entries`),
/// and how many cache lines of each: the key and the start of the value.
const CELLS_AHEAD: usize = 8;
const CELL_LINES: usize = 3;

/// Why `Cursor::copy_entries` stopped.
enum LeafEnd {
    /// At a key past where the scan stops.
    Finished,
    /// The batch is full; the leaf has entries after this key (in the scan's order).
    Full(Vec<u8>),
    /// Every entry asked for was copied.
    Exhausted,
    /// On a fiber, this entry's overflow chain has this page not resident.
    Missing(Vec<u8>, crate::page::PageId),
}

/// A range scan, forward or reverse; see the module docs.
pub struct Cursor {
    tree: BTree,
    /// Where the next batch starts (forward), or the bound it reads before (reverse).
    resume: Bound<Vec<u8>>,
    /// Where the scan stops: its end bound (forward), or its start bound (reverse).
    end: Bound<Vec<u8>>,
    reverse: bool,
    finished: bool,
    buffered: VecDeque<Entry>,
    /// Leaves read so far: read-ahead starts at the second.
    leaves_read: usize,
    /// The last leaf's parent as the descent to it saw it: the next leaf is looked up there
    /// while the parent stays unchanged (forward scans).
    parent: Option<(PageStamp, usize)>,
    /// Batches in a row that ended at the same entry's chain (see `CHAIN_TRIES`).
    chain_tries: u32,
}

fn owned(bound: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match bound {
        Bound::Included(key) => Bound::Included(key.to_vec()),
        Bound::Excluded(key) => Bound::Excluded(key.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl BTree {
    /// A cursor over the keys within `start`..`end`, in ascending order.
    pub fn scan(&self, _pool: &BufferPool, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Cursor {
        Cursor {
            tree: *self,
            resume: owned(start),
            end: owned(end),
            reverse: false,
            finished: false,
            buffered: VecDeque::new(),
            leaves_read: 0,
            parent: None,
            chain_tries: 0,
        }
    }

    /// A cursor over the keys within `start`..`end`, in descending order.
    pub fn scan_reverse(
        &self,
        _pool: &BufferPool,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Cursor {
        Cursor {
            tree: *self,
            resume: owned(end),
            end: owned(start),
            reverse: true,
            finished: false,
            buffered: VecDeque::new(),
            leaves_read: 0,
            parent: None,
            chain_tries: 0,
        }
    }
}

impl Cursor {
    /// True if `key` lies beyond where the scan stops (past the end bound, or before the
    /// start bound of a reverse scan).
    fn past_end(&self, key: &[u8]) -> bool {
        match (&self.end, self.reverse) {
            (Bound::Included(end), false) => key > end.as_slice(),
            (Bound::Excluded(end), false) => key >= end.as_slice(),
            (Bound::Included(start), true) => key < start.as_slice(),
            (Bound::Excluded(start), true) => key <= start.as_slice(),
            (Bound::Unbounded, _) => false,
        }
    }

    /// The next entries in order; empty when the scan is over.
    pub fn next_batch(&mut self, pool: &BufferPool) -> Result<Vec<Entry>> {
        self.next_batch_where(pool, &mut |_| true)
    }

    /// `next_batch` without the entries whose value lies whole in its leaf and `keep` refuses
    /// (they are never copied). `keep` runs with the leaf latched: it must not touch the
    /// tree, wait or suspend. Values in overflow chains are always kept.
    pub fn next_batch_where(
        &mut self,
        pool: &BufferPool,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Vec<Entry>> {
        loop {
            match self.next_leaf_where(pool, keep)? {
                None => return Ok(Vec::new()),
                Some(batch) if !batch.is_empty() => return Ok(batch),
                Some(_) => {}
            }
        }
    }

    /// One leaf's part of `next_batch_where`, maybe empty (every entry refused); None when
    /// the scan is over. For a caller whose `keep` takes the values it is given, and who may
    /// stop between leaves.
    pub fn next_leaf_where(
        &mut self,
        pool: &BufferPool,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Option<Vec<Entry>>> {
        if !self.buffered.is_empty() {
            return Ok(Some(self.buffered.drain(..).collect()));
        }
        if self.finished {
            return Ok(None);
        }
        Ok(Some(match self.reverse {
            false => self.read_leaf(pool, keep)?,
            true => self.read_leaf_reverse(pool, keep)?,
        }))
    }

    /// The next entry, or None when the scan is over. (Entries it buffered come out of a later
    /// `next_batch_where` untested: use one or the other on a cursor.)
    pub fn next(&mut self, pool: &BufferPool) -> Result<Option<Entry>> {
        if self.buffered.is_empty() {
            let batch = self.next_batch(pool)?;
            self.buffered.extend(batch);
        }
        Ok(self.buffered.pop_front())
    }

    /// Copies the latched leaf's entries at `indexes` that `keep` does not refuse, in that
    /// order, until one lies past where the scan stops or the batch is full with entries of
    /// the leaf left. The cells `CELLS_AHEAD` entries on are prefetched: cells lie in the
    /// page in the order they were written, not in key order, so each is a cache miss the
    /// hardware does not foresee, and the misses overlap only when asked for ahead.
    fn copy_entries(
        &self,
        pool: &BufferPool,
        node: &NodeAccessor<'_>,
        indexes: impl Iterator<Item = usize> + Clone,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(Vec<Entry>, LeafEnd)> {
        let mut ahead = indexes.clone();
        ahead
            .by_ref()
            .take(CELLS_AHEAD)
            .for_each(|index| node.prefetch_cell(index, CELL_LINES));
        let mut indexes = indexes.peekable();
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        let no_wait = crate::fiber::on_fiber() && self.chain_tries < CHAIN_TRIES;
        while let Some(index) = indexes.next() {
            if let Some(later) = ahead.next() {
                node.prefetch_cell(later, CELL_LINES);
            }
            let key = node.key(index)?;
            if self.past_end(key) {
                return Ok((batch, LeafEnd::Finished));
            }
            if let LeafValue::Inline(value) = node.leaf_value(index)? {
                if !keep(value) {
                    continue;
                }
            }
            let value = match copy_value_or_miss(pool, node, index, no_wait)? {
                Ok(value) => value,
                Err(page_id) => return Ok((batch, LeafEnd::Missing(key.to_vec(), page_id))),
            };
            batch_bytes += key.len() + value.len();
            batch.push((key.to_vec(), value));
            if batch_bytes >= BATCH_BYTES_MAX && indexes.peek().is_some() {
                return Ok((batch, LeafEnd::Full(key.to_vec())));
            }
        }
        Ok((batch, LeafEnd::Exhausted))
    }

    /// After a batch that ended at `key`'s overflow chain (`page_id` not resident; the leaf
    /// let go): the next batch starts at `key`, once the chain is loaded. `chain_tries`: the
    /// count before this batch.
    fn chain_missed(
        &mut self,
        pool: &BufferPool,
        key: Vec<u8>,
        page_id: crate::page::PageId,
        nothing_copied: bool,
        chain_tries: u32,
    ) -> Result<()> {
        // Again at the same entry if the batch copied nothing before it.
        let again = nothing_copied && self.resume == Bound::Included(key.clone());
        self.chain_tries = if again { chain_tries + 1 } else { 1 };
        self.resume = Bound::Included(key);
        // The leaf is read again, not gone past: read-ahead does not grow.
        self.leaves_read -= 1;
        load_chain_released(pool, page_id)
    }

    /// Copies entries from the leaf holding the resume key and advances the resume key.
    fn read_leaf(
        &mut self,
        pool: &BufferPool,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Vec<Entry>> {
        let seek_key: &[u8] = match &self.resume {
            Bound::Included(key) | Bound::Excluded(key) => key,
            Bound::Unbounded => &[],
        };
        let mut fences = LeafFences::default();
        let read_ahead = match self.leaves_read {
            0 => 0,
            read => (1usize << read.min(8)).min(READ_AHEAD_LEAVES),
        };
        let end = &self.end;
        let within = |low: &[u8]| match end {
            Bound::Included(end) => low <= end.as_slice(),
            Bound::Excluded(end) => low < end.as_slice(),
            Bound::Unbounded => true,
        };
        let from_parent = match &self.parent {
            Some(parent) => self.tree.leaf_from_parent(pool, parent, seek_key)?,
            None => None,
        };
        let leaf = match from_parent {
            Some((leaf, high, index)) => {
                fences.high = Some(high);
                fences.parent = self.parent.map(|(parent, _)| (parent, index));
                leaf
            }
            None => self.tree.descend_shared(
                pool,
                seek_key,
                Seek::At,
                Some(&mut fences),
                read_ahead,
                within,
            )?,
        };
        self.parent = fences.parent;
        self.leaves_read += 1;
        let node = NodeAccessor::new(&leaf)?;
        // A scan going on at a leaf's lower fence starts at its first key.
        let from_first = matches!(self.resume, Bound::Included(_) | Bound::Unbounded)
            && (node.count() == 0 || node.key(0)? >= seek_key);
        let start = match from_first {
            true => 0,
            false => match (&self.resume, node.search(seek_key)?) {
                (Bound::Excluded(_), Ok(index)) => index + 1,
                (_, Ok(index) | Err(index)) => index,
            },
        };
        let (batch, end) = self.copy_entries(pool, &node, start..node.count(), keep)?;
        let chain_tries = std::mem::take(&mut self.chain_tries);
        match end {
            LeafEnd::Exhausted => {}
            LeafEnd::Finished => {
                self.finished = true;
                return Ok(batch);
            }
            LeafEnd::Full(last) => {
                self.resume = Bound::Excluded(last);
                return Ok(batch);
            }
            LeafEnd::Missing(key, page_id) => {
                drop(leaf);
                self.chain_missed(pool, key, page_id, batch.is_empty(), chain_tries)?;
                return Ok(batch);
            }
        }
        drop(leaf);
        match fences.high {
            Some(fence) if !self.past_end(&fence) => {
                if fence.as_slice() <= seek_key {
                    let page_id = self.tree.root;
                    return Err(super::node::corruption(
                        page_id,
                        "separator does not advance",
                    ));
                }
                self.resume = Bound::Included(fence);
            }
            _ => self.finished = true,
        }
        Ok(batch)
    }

    /// Copies entries from the leaf holding the greatest keys before the resume bound, last
    /// first, and moves the bound down.
    fn read_leaf_reverse(
        &mut self,
        pool: &BufferPool,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Vec<Entry>> {
        let (seek_key, seek): (&[u8], Seek) = match &self.resume {
            Bound::Included(key) => (key, Seek::At),
            Bound::Excluded(key) => (key, Seek::Before),
            Bound::Unbounded => (&[], Seek::Last),
        };
        let mut fences = LeafFences::default();
        let leaf = self
            .tree
            .descend_shared(pool, seek_key, seek, Some(&mut fences), 0, |_| false)?;
        self.leaves_read += 1;
        let node = NodeAccessor::new(&leaf)?;
        // The leaf's entries before the bound: 0..stop.
        let stop = match &self.resume {
            Bound::Included(_) => match node.search(seek_key)? {
                Ok(index) => index + 1,
                Err(index) => index,
            },
            Bound::Excluded(_) => match node.search(seek_key)? {
                Ok(index) | Err(index) => index,
            },
            Bound::Unbounded => node.count(),
        };
        let (batch, end) = self.copy_entries(pool, &node, (0..stop).rev(), keep)?;
        let chain_tries = std::mem::take(&mut self.chain_tries);
        match end {
            LeafEnd::Exhausted => {}
            LeafEnd::Finished => {
                self.finished = true;
                return Ok(batch);
            }
            LeafEnd::Full(last) => {
                self.resume = Bound::Excluded(last);
                return Ok(batch);
            }
            LeafEnd::Missing(key, page_id) => {
                drop(leaf);
                self.chain_missed(pool, key, page_id, batch.is_empty(), chain_tries)?;
                return Ok(batch);
            }
        }
        drop(leaf);
        let more = |low: &[u8]| match &self.end {
            Bound::Included(start) | Bound::Excluded(start) => low > start.as_slice(),
            Bound::Unbounded => true,
        };
        match fences.low {
            Some(low) if more(&low) => {
                let retreats = match seek {
                    Seek::At => low.as_slice() <= seek_key,
                    Seek::Before => low.as_slice() < seek_key,
                    Seek::Last => true,
                };
                if !retreats {
                    return Err(super::node::corruption(
                        self.tree.root,
                        "separator does not retreat",
                    ));
                }
                self.resume = Bound::Excluded(low);
            }
            _ => self.finished = true,
        }
        Ok(batch)
    }
}

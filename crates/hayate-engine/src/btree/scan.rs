//! Range scans that hold no latch between batches.
//!
//! Lifecycle of a cursor:
//! 1. `BTree::scan` records the bounds; nothing is read yet.
//! 2. Each `next_batch` descends from the root to the leaf holding the resume key (shared
//!    latches, hand over hand), noting the leaf's upper fence: the nearest separator to the
//!    right of the path.
//! 3. It copies the leaf's entries within the bounds (values from overflow chains while the leaf
//!    is still latched), up to `BATCH_BYTES_MAX`, then releases the leaf.
//! 4. The cursor resumes after the last key copied, or at the fence if it copied the whole leaf.
//!    Splits, merges and frees between batches are harmless since it only keeps keys.

use std::collections::VecDeque;
use std::ops::Bound;

use crate::buffer::BufferPool;
use crate::error::Result;

use super::node::NodeAccessor;
use super::tree::{copy_value, BTree};

/// A batch stops once it holds this many key and value bytes (at least one entry).
pub const BATCH_BYTES_MAX: usize = 1 << 20;
/// On a fiber, a scan that goes on past its first leaf loads a missing leaf together with the
/// leaves after it within its range (one batch of reads in flight, not one read at a time):
/// 2 at its second leaf, doubling with each leaf it goes on to, up to this many.
pub const READ_AHEAD_LEAVES: usize = 16;

pub type Entry = (Vec<u8>, Vec<u8>);

/// A forward range scan; see the module docs.
pub struct Cursor {
    tree: BTree,
    resume: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    finished: bool,
    buffered: VecDeque<Entry>,
    /// Leaves read so far: read-ahead starts at the second.
    leaves_read: usize,
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
            finished: false,
            buffered: VecDeque::new(),
            leaves_read: 0,
        }
    }
}

impl Cursor {
    /// True if `key` lies beyond the end bound.
    fn past_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Included(end) => key > end.as_slice(),
            Bound::Excluded(end) => key >= end.as_slice(),
            Bound::Unbounded => false,
        }
    }

    /// The next entries in order; empty when the scan is over.
    pub fn next_batch(&mut self, pool: &BufferPool) -> Result<Vec<Entry>> {
        if !self.buffered.is_empty() {
            return Ok(self.buffered.drain(..).collect());
        }
        while !self.finished {
            let batch = self.read_leaf(pool)?;
            if !batch.is_empty() {
                return Ok(batch);
            }
        }
        Ok(Vec::new())
    }

    /// The next entry, or None when the scan is over.
    pub fn next(&mut self, pool: &BufferPool) -> Result<Option<Entry>> {
        if self.buffered.is_empty() {
            let batch = self.next_batch(pool)?;
            self.buffered.extend(batch);
        }
        Ok(self.buffered.pop_front())
    }

    /// Copies entries from the leaf holding the resume key and advances the resume key.
    fn read_leaf(&mut self, pool: &BufferPool) -> Result<Vec<Entry>> {
        let seek_key: &[u8] = match &self.resume {
            Bound::Included(key) | Bound::Excluded(key) => key,
            Bound::Unbounded => &[],
        };
        let mut fence = None;
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
        let leaf =
            self.tree
                .descend_shared(pool, seek_key, Some(&mut fence), read_ahead, within)?;
        self.leaves_read += 1;
        let node = NodeAccessor::new(&leaf)?;
        let mut index = match (&self.resume, node.search(seek_key)?) {
            (Bound::Excluded(_), Ok(index)) => index + 1,
            (_, Ok(index) | Err(index)) => index,
        };
        let mut batch = Vec::new();
        let mut batch_bytes = 0;
        while index < node.count() {
            let key = node.key(index)?;
            if self.past_end(key) {
                self.finished = true;
                return Ok(batch);
            }
            let value = copy_value(pool, &node, index)?;
            batch_bytes += key.len() + value.len();
            batch.push((key.to_vec(), value));
            index += 1;
            if batch_bytes >= BATCH_BYTES_MAX && index < node.count() {
                self.resume = Bound::Excluded(key.to_vec());
                return Ok(batch);
            }
        }
        drop(leaf);
        match fence {
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
}

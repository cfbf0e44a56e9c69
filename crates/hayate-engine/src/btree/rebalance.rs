//! Deletes and the rebalancing of underfull nodes.
//!
//! A node is underfull when its slots and cells use less than a quarter of the usable bytes.
//! Rebalancing works bottom-up on the exclusively latched path:
//! 1. An underfull node is paired with its right sibling (or its left one if it is the last
//!    child); the pair shares the parent's separator cell.
//! 2. If both fit in one page (for inner nodes, with the separator pulled down), the right node
//!    is merged into the left one, the separator is removed from the parent and the right page
//!    is freed; the parent is then checked in turn.
//! 3. Otherwise the cells of the pair are redistributed evenly and the parent gets the new
//!    separator, if the parent has room for it (separators vary in length); if not, the node
//!    stays underfull, which is harmless. Rebalancing stops after a redistribution.
//! 4. A root inner node left with no key pulls its only child up into itself (the root page id
//!    never changes) and frees the child's page.
//!
//! On a fiber no latch is held while a read is waited for: a sibling (or the root's only
//! child) that is not resident puts the step off. The node stays underfull (harmless, as
//! after a redistribution that does not fit; an inner root with no key still routes every
//! key to its child), the page is loaded once the delete has let go of its latches, and a
//! later delete of the node finds it there.

use crate::buffer::{BufferPool, PageWriteGuard};
use crate::error::Result;
use crate::page::{PageHeaderBuilder, PageId};

use super::node::{
    cell_key, encode_inner_cell, inner_cell_child, shortest_separator, split_point, NodeAccessor,
    NodeBuilder, NodeLimits, INNER_CELL_HEADER_SIZE, SLOT_SIZE,
};
use super::tree::{check_level, write_or_miss, BTree, PathEntry, Removed};

/// What rebalancing one underfull node did.
enum Step {
    /// A merge: the parent lost a cell and is checked next.
    Merged,
    /// A redistribution, or nothing to do.
    Done,
    /// On a fiber, a page it needs is not resident: put off (see the module docs).
    Deferred(PageId),
}

impl BTree {
    /// Removes `key`; returns the removed value. Modified pages get `lsn`.
    pub fn delete(&self, pool: &BufferPool, key: &[u8], lsn: u64) -> Result<Option<Vec<u8>>> {
        if key.len() > NodeLimits::new(pool.page_size()).key_length_max {
            return Ok(None);
        }
        let _operation = pool.operation();
        let removed = match self.delete_optimistic(pool, key, lsn)? {
            Some(removed) => removed,
            None => self.delete_pessimistic(pool, key, lsn)?,
        };
        removed.map(|removed| removed.finish(pool)).transpose()
    }

    /// The delete if the leaf does not underflow; Ok(None) if it would.
    fn delete_optimistic(
        &self,
        pool: &BufferPool,
        key: &[u8],
        lsn: u64,
    ) -> Result<Option<Option<Removed>>> {
        let limits = NodeLimits::new(pool.page_size());
        let Some(mut leaf) = self.descend_leaf_exclusive(pool, key)? else {
            return Ok(None);
        };
        let node = NodeAccessor::new(&leaf)?;
        let Ok(index) = node.search(key)? else {
            return Ok(Some(None));
        };
        let remaining_bytes = node.used_bytes() - node.cell(index)?.len() - SLOT_SIZE;
        if leaf.page_id() != self.root && remaining_bytes < limits.underflow_bytes {
            return Ok(None);
        }
        let removed = Removed::read(&node, index)?;
        NodeBuilder::new(&mut leaf).remove_cell(index)?;
        leaf.set_lsn(lsn);
        Ok(Some(Some(removed)))
    }

    fn delete_pessimistic(
        &self,
        pool: &BufferPool,
        key: &[u8],
        lsn: u64,
    ) -> Result<Option<Removed>> {
        let limits = NodeLimits::new(pool.page_size());
        let mut path = self.descend_exclusive(pool, key, |node| {
            let largest = if node.is_leaf() {
                limits.leaf_cell_size_max()
            } else {
                limits.inner_cell_size_max()
            };
            node.used_bytes().saturating_sub(largest + SLOT_SIZE) >= limits.underflow_bytes
        })?;
        let leaf = &mut path.last_mut().expect("leaf on path").guard;
        let node = NodeAccessor::new(leaf)?;
        let Ok(index) = node.search(key)? else {
            return Ok(None);
        };
        let removed = Removed::read(&node, index)?;
        NodeBuilder::new(leaf).remove_cell(index)?;
        leaf.set_lsn(lsn);
        let deferred = self.rebalance(pool, &mut path, &limits, lsn)?;
        drop(path);
        if let Some(page_id) = deferred {
            // Best effort, with no latch held: the delete is done whatever this read does.
            let _ = pool.load_batch(&[page_id]);
        }
        Ok(Some(removed))
    }

    /// Fixes underfull nodes from the end of `path` upwards. Returns the page to load if a
    /// step was put off (on a fiber).
    fn rebalance(
        &self,
        pool: &BufferPool,
        path: &mut Vec<PathEntry<'_>>,
        limits: &NodeLimits,
        lsn: u64,
    ) -> Result<Option<PageId>> {
        let on_fiber = crate::fiber::on_fiber();
        while let Some(entry) = path.last_mut() {
            if entry.guard.page_id() == self.root {
                return collapse_root(pool, &mut entry.guard, lsn, on_fiber);
            }
            let used_bytes = NodeAccessor::new(&entry.guard)?.used_bytes();
            if used_bytes >= limits.underflow_bytes || path.len() == 1 {
                return Ok(None);
            }
            let entry = path.pop().expect("entry");
            let parent = &mut path.last_mut().expect("parent").guard;
            match merge_or_redistribute(pool, parent, entry, limits, lsn, on_fiber)? {
                Step::Merged => {}
                Step::Done => return Ok(None),
                Step::Deferred(page_id) => return Ok(Some(page_id)),
            }
        }
        Ok(None)
    }
}

/// Pulls the only child of an inner root up into the root, as often as needed. Returns the
/// child to load if it was not resident (on a fiber).
fn collapse_root(
    pool: &BufferPool,
    root: &mut PageWriteGuard<'_>,
    lsn: u64,
    on_fiber: bool,
) -> Result<Option<PageId>> {
    loop {
        let node = NodeAccessor::new(root)?;
        if node.is_leaf() || node.count() > 0 {
            return Ok(None);
        }
        let expected_level = node.level() - 1;
        let child_id = node.child(0)?;
        let Some(child) = write_or_miss(pool, child_id, on_fiber)? else {
            return Ok(Some(child_id));
        };
        let child_node = NodeAccessor::new(&child)?;
        check_level(&child_node, Some(expected_level))?;
        let kind_byte = child[4];
        let body_offset = crate::page::PAGE_HEADER_SIZE;
        root[body_offset..].copy_from_slice(&child[body_offset..]);
        let kind = crate::page::PageKind::from_u8(kind_byte).expect("checked node kind");
        PageHeaderBuilder::new(root).set_kind(kind);
        root.set_lsn(lsn);
        pool.free(child);
    }
}

/// Rebalances the underfull node of `entry` with a sibling under `parent`.
fn merge_or_redistribute(
    pool: &BufferPool,
    parent: &mut PageWriteGuard<'_>,
    entry: PathEntry<'_>,
    limits: &NodeLimits,
    lsn: u64,
    on_fiber: bool,
) -> Result<Step> {
    let parent_node = NodeAccessor::new(parent)?;
    let parent_count = parent_node.count();
    if parent_count == 0 {
        // A node left with no key by a step put off earlier: the node has no sibling, so
        // the parent itself is rebalanced next (collapsed into the root, or merged with its
        // own sibling; never safe, it is on the path).
        return Ok(Step::Merged);
    }
    let left_index = entry.child_index.min(parent_count - 1);
    let separator = parent_node.key(left_index)?.to_vec();
    let left_page_id = parent_node.child(left_index)?;
    let right_page_id = parent_node.child(left_index + 1)?;
    let expected_level = NodeAccessor::new(&entry.guard)?.level();
    // Left to right: if the underfull node is the right one, let go of it and take both anew.
    // The parent is held exclusively, so nobody else can reach either sibling meanwhile.
    let latched = if entry.child_index == left_index {
        write_or_miss(pool, right_page_id, on_fiber)?
            .map(|right| (entry.guard, right))
            .ok_or(right_page_id)
    } else {
        drop(entry.guard);
        match write_or_miss(pool, left_page_id, on_fiber)? {
            Some(left) => write_or_miss(pool, right_page_id, on_fiber)?
                .map(|right| (left, right))
                .ok_or(right_page_id),
            None => Err(left_page_id),
        }
    };
    let (mut left, mut right) = match latched {
        Ok(pair) => pair,
        Err(missing) => return Ok(Step::Deferred(missing)),
    };
    let right_copy = right.to_vec();
    let right_node = NodeAccessor::new(&right_copy)?;
    let left_node = NodeAccessor::new(&left)?;
    check_level(&left_node, Some(expected_level))?;
    check_level(&right_node, Some(expected_level))?;
    let leaf = left_node.is_leaf();
    let mut separator_cell = Vec::new();
    if !leaf {
        encode_inner_cell(&mut separator_cell, &separator, right_node.link());
    }
    let separator_bytes = if leaf {
        0
    } else {
        separator_cell.len() + SLOT_SIZE
    };
    if left_node.used_bytes() + right_node.used_bytes() + separator_bytes <= limits.usable_bytes {
        let mut index = left_node.count();
        let mut builder = NodeBuilder::new(&mut left);
        if !leaf {
            assert!(builder.insert_cell(index, &separator_cell)?);
            index += 1;
        }
        for right_index in 0..right_node.count() {
            assert!(builder.insert_cell(index, right_node.cell(right_index)?)?);
            index += 1;
        }
        if leaf {
            builder.set_link(right_node.link());
        }
        left.set_lsn(lsn);
        NodeBuilder::new(parent).remove_cell(left_index)?;
        parent.set_lsn(lsn);
        pool.free(right);
        return Ok(Step::Merged);
    }
    redistribute(
        parent,
        left_index,
        &mut left,
        &mut right,
        &separator_cell,
        lsn,
    )?;
    Ok(Step::Done)
}

/// Spreads the cells of two siblings evenly, if the parent has room for the new separator;
/// see the module docs.
fn redistribute(
    parent: &mut PageWriteGuard<'_>,
    left_index: usize,
    left: &mut PageWriteGuard<'_>,
    right: &mut PageWriteGuard<'_>,
    separator_cell: &[u8],
    lsn: u64,
) -> Result<()> {
    let (left_copy, right_copy) = (left.to_vec(), right.to_vec());
    let (left_node, right_node) = (
        NodeAccessor::new(&left_copy)?,
        NodeAccessor::new(&right_copy)?,
    );
    let leaf = left_node.is_leaf();
    let mut cells = Vec::with_capacity(left_node.count() + right_node.count() + 1);
    for index in 0..left_node.count() {
        cells.push(left_node.cell(index)?);
    }
    if !leaf {
        cells.push(separator_cell);
    }
    for index in 0..right_node.count() {
        cells.push(right_node.cell(index)?);
    }
    let (left_cells, right_cells, new_separator, right_link);
    if leaf {
        let split = split_point(&cells);
        let left_last = cell_key(cells[split - 1], true);
        new_separator = shortest_separator(left_last, cell_key(cells[split], true)).to_vec();
        (left_cells, right_cells, right_link) =
            (&cells[..split], &cells[split..], right_node.link());
    } else {
        if cells.len() < 3 {
            return Ok(());
        }
        let split = split_point(&cells).min(cells.len() - 2);
        new_separator = cell_key(cells[split], false).to_vec();
        right_link = inner_cell_child(cells[split]);
        (left_cells, right_cells) = (&cells[..split], &cells[split + 1..]);
    }
    let parent_node = NodeAccessor::new(parent)?;
    let old_separator_length = parent_node.key(left_index)?.len();
    if parent_node.free_bytes() + old_separator_length < new_separator.len() {
        return Ok(());
    }
    let right_page_id = right.page_id();
    let left_link = if leaf {
        right_page_id
    } else {
        left_node.link()
    };
    NodeBuilder::new(left).rebuild(left_node.level(), left_link, left_cells);
    NodeBuilder::new(right).rebuild(right_node.level(), right_link, right_cells);
    let mut parent_cell = Vec::with_capacity(INNER_CELL_HEADER_SIZE + new_separator.len());
    encode_inner_cell(&mut parent_cell, &new_separator, right_page_id);
    let mut builder = NodeBuilder::new(parent);
    builder.remove_cell(left_index)?;
    assert!(
        builder.insert_cell(left_index, &parent_cell)?,
        "checked parent room"
    );
    parent.set_lsn(lsn);
    left.set_lsn(lsn);
    right.set_lsn(lsn);
    Ok(())
}

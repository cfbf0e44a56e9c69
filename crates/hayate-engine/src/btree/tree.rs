//! The B+tree handle: lookups, inserts and node splits.
//!
//! Latching protocol (crabbing); latches are always taken top-down, and two pages of one level
//! only left to right while their parent is held exclusively:
//! 0. Point lookups and the optimistic writer descent first try without latching inner nodes:
//!    each inner node is read at a latch version (`BufferPool::optimistic`) and the child id is
//!    used only if the node's version still holds after the child was reached (optimistic lock
//!    coupling). The leaf is then pinned and latched (resident pages only), and the parent's
//!    version checked once more: if it moved, the leaf may no longer cover the key, so the
//!    descent restarts. A page not resident, a root that is a leaf, or repeated restarts fall
//!    back to step 1 or 2. Readers of inner nodes thus write no shared memory.
//! 1. Readers descend from the root with shared latches hand over hand: the child is latched
//!    before the parent is released.
//! 2. Writers first descend the same way but take the leaf exclusively (the root exclusively if
//!    it is the leaf). If the change fits the leaf without a split or an underflow they apply it
//!    and are done.
//! 3. Otherwise they release everything and descend again from the root with exclusive latches,
//!    releasing all ancestors as soon as a child is safe: it can absorb one more separator (for
//!    an insert) or lose one cell without underflowing (for a delete).
//! 4. Splits, merges and redistributions then work bottom-up on the latched path; a sibling is
//!    latched only while the parent is held exclusively, so nobody else can be waiting for it.
//! 5. The root page never moves: a root split moves its content into two new children, and a
//!    root left with one child pulls that child up into itself.
//! 6. Overflow chains are read while the leaf pointing at them is latched, and freed only after
//!    the cell was unlinked under the leaf's exclusive latch.
//! 7. Page-changing operations hold `BufferPool::operation` throughout; lookups and scans do
//!    not. Scan cursors hold no latch between batches and re-seek by key.

use crate::buffer::{BufferPool, Optimistic, PageReadGuard, PageStamp, PageWriteGuard};
use crate::error::{Error, Result};
use crate::page::{PageId, PageKind, PAGE_ID_NONE};

use super::node::{
    cell_key, compare_keys, corruption, encode_inner_cell, encode_leaf_cell, inner_cell_child,
    shortest_separator, split_point, split_point_in_order, LeafValue, NodeAccessor, NodeBuilder,
    NodeLimits, INNER_CELL_HEADER_SIZE, SLOT_SIZE,
};
use super::overflow::{
    free_chain, head_length, load_chain_released, overwrite_chain, read_chain, try_read_chain,
    write_chain, VALUE_LENGTH_MAX,
};

/// The deepest tree accepted (root level + 1).
pub const TREE_DEPTH_MAX: usize = 32;

/// Restarts of an optimistic descent before it falls back to latching.
const OPTIMISTIC_RESTARTS_MAX: usize = 32;

/// Times in a row a fiber's lookup lets go of a leaf to load the overflow chain of a value
/// (`copy_value_or_miss`) before it reads the chain holding the leaf's latch, as off a fiber:
/// a chain longer than the pool keeps resident would otherwise never be read whole.
pub(super) const CHAIN_TRIES: u32 = 3;

/// Outcome of `BTree::try_get`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryLookup {
    /// The lookup finished: the key's value, or None if the tree does not hold the key.
    Found(Option<Vec<u8>>),
    /// This page must be loaded before the lookup can go on.
    Missing(PageId),
}

/// A handle to one B+tree, identified by its root page id, which never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BTree {
    pub(super) root: PageId,
}

/// A latched page on a writer's path and its index among its parent's children.
pub(super) struct PathEntry<'a> {
    pub guard: PageWriteGuard<'a>,
    pub child_index: usize,
}

/// An overflow chain: its first page and the bytes it holds.
type Chain = (PageId, u64);

/// A value unlinked from a leaf: the part the leaf held and its chain, if any, which is read
/// and freed once latches are released. Once unlinked (under the leaf's exclusive latch) the
/// chain is the unlinker's alone: readers of a chain hold its leaf, so none is left on it and
/// none can reach it, and no write waits for its reads holding a latch.
pub(super) struct Removed {
    pub value: Vec<u8>,
    pub chain: Option<Chain>,
}

impl Removed {
    pub fn read(node: &NodeAccessor<'_>, index: usize) -> Result<Removed> {
        let (value, chain) = leaf_part(node, index)?;
        Ok(Removed { value, chain })
    }

    /// Reads and frees the chain (call without latches) and returns the value. The chain is
    /// freed even if reading it fails (the change is made either way).
    pub fn finish(mut self, pool: &BufferPool) -> Result<Vec<u8>> {
        if let Some((first_page_id, length_bytes)) = self.chain {
            let read = read_chain(pool, first_page_id, length_bytes, &mut self.value);
            free_chain(pool, first_page_id, length_bytes)?;
            read?;
        }
        Ok(self.value)
    }
}

/// The part of leaf cell `index`'s value kept in the leaf (the inline value, or an overflow
/// value's head), copied out with room for the whole value, and the overflow chain holding the
/// rest, if any. An overflow value longer than the limit is corruption.
fn leaf_part(node: &NodeAccessor<'_>, index: usize) -> Result<(Vec<u8>, Option<Chain>)> {
    let value = node.leaf_value(index)?;
    match value {
        LeafValue::Inline(bytes) => Ok((bytes.to_vec(), None)),
        LeafValue::Overflow {
            length_bytes, head, ..
        } => {
            if length_bytes > VALUE_LENGTH_MAX as u64 {
                return Err(corruption(
                    node.page_id(),
                    "overflow value longer than the limit",
                ));
            }
            let mut part = Vec::with_capacity(length_bytes as usize);
            part.extend_from_slice(head);
            Ok((part, value.chain()))
        }
    }
}

/// Copies the value of leaf cell `index` out of the page and its overflow chain. With
/// `no_wait` (a fiber's lookup, fewer than `CHAIN_TRIES` times in a row) a chain page that is
/// not resident is not waited for: Err names it, and the caller lets go of the leaf, loads
/// the chain (`load_chain_released`) and looks again, so no write waits for this read.
pub(super) fn copy_value_or_miss(
    pool: &BufferPool,
    node: &NodeAccessor<'_>,
    index: usize,
    no_wait: bool,
) -> Result<std::result::Result<Vec<u8>, PageId>> {
    let (mut value, chain) = leaf_part(node, index)?;
    if let Some((first_page_id, chain_bytes)) = chain {
        if no_wait {
            if let Some(missing) = try_read_chain(pool, first_page_id, chain_bytes, &mut value)? {
                return Ok(Err(missing));
            }
        } else {
            read_chain(pool, first_page_id, chain_bytes, &mut value)?;
        }
    }
    Ok(Ok(value))
}

/// Lets go of `leaf` and loads the chain from `missing` on (see `copy_value_or_miss`).
pub(super) fn load_chain_after(
    pool: &BufferPool,
    leaf: PageReadGuard<'_>,
    missing: PageId,
) -> Result<()> {
    drop(leaf);
    load_chain_released(pool, missing)
}

/// `page_id` latched shared; on a fiber None when it is not resident (the caller lets go of
/// its latches, loads it and starts again: no latch is held while a fiber waits for a read).
pub(super) fn read_or_miss(
    pool: &BufferPool,
    page_id: PageId,
    on_fiber: bool,
) -> Result<Option<PageReadGuard<'_>>> {
    match on_fiber {
        true => pool.try_read(page_id),
        false => pool.read(page_id).map(Some),
    }
}

/// `read_or_miss` with an exclusive latch.
pub(super) fn write_or_miss(
    pool: &BufferPool,
    page_id: PageId,
    on_fiber: bool,
) -> Result<Option<PageWriteGuard<'_>>> {
    match on_fiber {
        true => pool.try_write(page_id),
        false => pool.write(page_id).map(Some),
    }
}

/// Checks that a child has the level its parent implies.
pub(super) fn check_level(node: &NodeAccessor<'_>, expected: Option<u8>) -> Result<()> {
    match expected {
        Some(level) if node.level() != level => Err(corruption(
            node.page_id(),
            format!(
                "node at level {} where level {level} was expected",
                node.level()
            ),
        )),
        None if node.level() as usize >= TREE_DEPTH_MAX => Err(corruption(
            node.page_id(),
            format!("root level {} exceeds the depth limit", node.level()),
        )),
        _ => Ok(()),
    }
}

/// Which leaf a shared descent looks for (`BTree::descend_shared`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seek {
    /// The leaf whose range holds the key.
    At,
    /// The leaf holding the greatest keys below the key (a reverse scan's next leaf).
    Before,
    /// The rightmost leaf (the key is not used).
    Last,
}

/// The bounds of a leaf's key range, from the separators of the path to it: `low` inclusive
/// (None for the leftmost leaf), `high` exclusive (None for the rightmost); and the leaf's
/// parent as it was passed with the leaf's child index in it (None if the root is the leaf),
/// for `BTree::leaf_from_parent`.
#[derive(Debug, Default)]
pub(super) struct LeafFences {
    pub(super) low: Option<Vec<u8>>,
    pub(super) high: Option<Vec<u8>>,
    pub(super) parent: Option<(PageStamp, usize)>,
}

impl BTree {
    /// Allocates an empty root leaf and returns its page id.
    pub fn create(pool: &BufferPool) -> Result<PageId> {
        let _operation = pool.operation();
        let mut root = pool.allocate(PageKind::BtreeLeaf)?;
        NodeBuilder::new(&mut root).init(0, 0);
        Ok(root.page_id())
    }

    /// A handle to the tree rooted at `root`; cheap, nothing is read.
    pub fn open(root: PageId) -> BTree {
        BTree { root }
    }

    /// The root page id, which identifies the tree.
    pub fn root(&self) -> PageId {
        self.root
    }

    pub(super) fn check_key(pool: &BufferPool, key: &[u8]) -> Result<NodeLimits> {
        let limits = NodeLimits::new(pool.page_size());
        if key.len() > limits.key_length_max {
            return Err(Error::ValueTooLarge {
                size: key.len(),
                limit: limits.key_length_max,
            });
        }
        Ok(limits)
    }

    /// The leaf whose key range holds `key` (with `seek` `Seek::Before`, the leaf holding the
    /// greatest keys below `key`), latched shared. If `fences` is given it receives the leaf's
    /// bounds: the separators nearest to it on either side of the path.
    ///
    /// On a fiber, a missing leaf is loaded together with up to `read_ahead` leaves to its
    /// right (the parent's next children) whose lowest key `within` accepts, one batch in
    /// flight at once: a scan that goes on past its first leaf asks for them (`Cursor`).
    pub(super) fn descend_shared<'p>(
        &self,
        pool: &'p BufferPool,
        key: &[u8],
        seek: Seek,
        fences: Option<&mut LeafFences>,
        read_ahead: usize,
        within: impl Fn(&[u8]) -> bool,
    ) -> Result<PageReadGuard<'p>> {
        if crate::fiber::on_fiber() {
            // A task on a fiber holds no latch while it waits for a page: the descent stops at
            // the first page not resident, lets go, loads it (suspending) and starts again.
            let mut fences = fences;
            let mut pages = Vec::new();
            loop {
                let fetch = |page_id| pool.try_read(page_id);
                pages.clear();
                let found = self.descend_shared_with(
                    key,
                    seek,
                    fences.as_deref_mut(),
                    fetch,
                    |node, index| {
                        // The missing page is a leaf: its right siblings under the same parent.
                        if read_ahead > 0 && node.level() == 1 {
                            let last = node.count().min(index + read_ahead);
                            for sibling in index + 1..=last {
                                // The separator before a child is the lowest key it may hold.
                                if !within(node.key(sibling - 1)?) {
                                    break;
                                }
                                pages.push(node.child(sibling)?);
                            }
                        }
                        Ok(())
                    },
                )?;
                match found {
                    Ok(leaf) => return Ok(leaf),
                    Err(missing) => {
                        pages.insert(0, missing);
                        pool.load_released(&pages)?;
                    }
                }
            }
        }
        let fetch = |page_id| pool.read(page_id).map(Some);
        let leaf = self.descend_shared_with(key, seek, fences, fetch, |_, _| Ok(()))?;
        Ok(leaf.expect("a blocking read always yields the page"))
    }

    /// The leaf for `key` (latched shared, resident only), its upper fence and its child
    /// index, read from the leaf level's node `parent` if that is unchanged since it was
    /// stamped on a descent to child `last` and `key` falls below its last separator: a scan
    /// going on to the next leaf spares the descent from the root. As step 0 of the protocol,
    /// the parent's version is checked again once the leaf is latched. None: descend from the
    /// root.
    pub(super) fn leaf_from_parent<'p>(
        &self,
        pool: &'p BufferPool,
        (parent, last): &(PageStamp, usize),
        key: &[u8],
    ) -> Result<Option<(PageReadGuard<'p>, Vec<u8>, usize)>> {
        let Some(page) = pool.unchanged(parent) else {
            return Ok(None);
        };
        // SAFETY: the node is parsed through bounds-checked accessors only, and what they give
        // is used only after `validate`.
        let bytes = unsafe { page.bytes() };
        let step = || -> Result<Option<(PageId, Vec<u8>, usize)>> {
            let node = NodeAccessor::new(bytes)?;
            if node.is_leaf() || node.level() != 1 {
                return Ok(None);
            }
            // Child i >= 1 holds key(i - 1) <= k < key(i); the last child's upper bound lies
            // in an ancestor. A scan at the last leaf's upper fence wants the next child.
            let index = match *last < node.count() && node.key(*last)? == key {
                true => last + 1,
                false => node.child_index_for(key)?,
            };
            if index == 0 || index >= node.count() {
                return Ok(None);
            }
            Ok(Some((node.child(index)?, node.key(index)?.to_vec(), index)))
        };
        let step = step();
        if !page.validate() {
            return Ok(None);
        }
        let Ok(Some((child, high, index))) = step else {
            return Ok(None); // an unreadable node is reported by the descent
        };
        let Some(leaf) = pool.try_read(child)? else {
            return Ok(None);
        };
        if !page.validate() {
            return Ok(None);
        }
        check_level(&NodeAccessor::new(&leaf)?, Some(0))?;
        Ok(Some((leaf, high, index)))
    }

    /// The leaf for `key` by an optimistic descent (step 0 of the protocol), latched by
    /// `fetch_leaf` (which must not load pages: a child id read optimistically may name a page
    /// freed since). None: take a latching descent instead.
    fn descend_optimistic<G: std::ops::Deref<Target = [u8]>>(
        &self,
        pool: &BufferPool,
        key: &[u8],
        fetch_leaf: impl Fn(PageId) -> Result<Option<G>>,
    ) -> Result<Option<G>> {
        self.descend_optimistic_noting(pool, key, fetch_leaf, &mut None)
    }

    /// `descend_optimistic`, noting in `parent` the stamp of the leaf's parent as the descent
    /// validated it (None if the root is the leaf or the descent failed).
    fn descend_optimistic_noting<G: std::ops::Deref<Target = [u8]>>(
        &self,
        pool: &BufferPool,
        key: &[u8],
        fetch_leaf: impl Fn(PageId) -> Result<Option<G>>,
        parent_seen: &mut Option<PageStamp>,
    ) -> Result<Option<G>> {
        *parent_seen = None;
        'restart: for attempt in 0..OPTIMISTIC_RESTARTS_MAX {
            if attempt > OPTIMISTIC_RESTARTS_MAX / 2 {
                std::thread::yield_now();
            }
            let mut page_id = self.root;
            let mut parent: Option<crate::buffer::OptimisticPage<'_>> = None;
            let mut expected_level = None;
            loop {
                let page = match pool.optimistic(page_id) {
                    Optimistic::Page(page) => page,
                    Optimistic::Busy => continue 'restart,
                    Optimistic::NotResident => return Ok(None),
                };
                // The child id came from the parent at its version; if that still holds, the
                // child was the right page when its own version was taken.
                if let Some(parent) = &parent {
                    if !parent.validate() {
                        continue 'restart;
                    }
                }
                // SAFETY: `inner_step` only parses through bounds-checked accessors that return
                // errors, and its result is used only after `validate`.
                let step = inner_step(unsafe { page.bytes() }, key, expected_level);
                if !page.validate() {
                    continue 'restart;
                }
                let Some((child, level)) = step? else {
                    return Ok(None); // the root is a leaf
                };
                if level > 1 {
                    (parent, page_id, expected_level) = (Some(page), child, Some(level - 1));
                    continue;
                }
                let leaf = fetch_leaf(child);
                if !page.validate() {
                    continue 'restart;
                }
                let Some(leaf) = leaf? else {
                    return Ok(None);
                };
                check_level(&NodeAccessor::new(&leaf)?, Some(0))?;
                *parent_seen = Some(page.stamp(page_id));
                return Ok(Some(leaf));
            }
        }
        Ok(None)
    }

    /// The descent of `descend_shared`, with pages fetched by `fetch`: None from `fetch` ends
    /// the descent with `Err(page)` (the page is not resident; every latch is released), after
    /// `missed` saw the node that points at it and the index of the pointer.
    fn descend_shared_with<'p>(
        &self,
        key: &[u8],
        seek: Seek,
        mut fences: Option<&mut LeafFences>,
        fetch: impl Fn(PageId) -> Result<Option<PageReadGuard<'p>>>,
        mut missed: impl FnMut(&NodeAccessor<'_>, usize) -> Result<()>,
    ) -> Result<std::result::Result<PageReadGuard<'p>, PageId>> {
        if let Some(fences) = fences.as_deref_mut() {
            // A retry (after a miss on a fiber) may take another path, which need not cross
            // the separators the last attempt noted (a merge removed one meanwhile).
            *fences = LeafFences::default();
        }
        let Some(mut guard) = fetch(self.root)? else {
            return Ok(Err(self.root));
        };
        let mut expected_level = None;
        loop {
            let node = NodeAccessor::new(&guard)?;
            check_level(&node, expected_level)?;
            if node.is_leaf() {
                return Ok(Ok(guard));
            }
            let index = match seek {
                Seek::At => node.child_index_for(key)?,
                // The child after the last separator below the key.
                Seek::Before => match node.search(key)? {
                    Ok(index) | Err(index) => index,
                },
                Seek::Last => node.count(),
            };
            let child = node.child(index)?;
            if let Some(fences) = fences.as_deref_mut() {
                // Child `index` holds keys from separator index - 1 up to separator index;
                // a deeper level's separators are the nearer bounds.
                if index < node.count() {
                    fences.high = Some(node.key(index)?.to_vec());
                }
                if index > 0 {
                    fences.low = Some(node.key(index - 1)?.to_vec());
                }
            }
            if let Some(fences) = fences.as_deref_mut() {
                if node.level() == 1 {
                    fences.parent = Some((guard.stamp(), index));
                }
            }
            expected_level = Some(node.level() - 1);
            // Hand over hand: the child is latched before the parent is released.
            let Some(child_guard) = fetch(child)? else {
                missed(&node, index)?;
                return Ok(Err(child));
            };
            guard = child_guard;
        }
    }

    /// Optimistic writer descent: shared latches down to the leaf's parent, the leaf exclusive.
    /// Returns None if the root changed from leaf to inner meanwhile (go pessimistic).
    ///
    /// On a fiber a page not resident ends the descent: every latch is let go, the page is
    /// loaded (suspending) and the descent starts again from the root, so a writer never waits
    /// for a read holding its path's latches.
    pub(super) fn descend_leaf_exclusive<'p>(
        &self,
        pool: &'p BufferPool,
        key: &[u8],
    ) -> Result<Option<PageWriteGuard<'p>>> {
        if let Some(leaf) = self.descend_optimistic(pool, key, |page_id| pool.try_write(page_id))? {
            return Ok(Some(leaf));
        }
        let on_fiber = crate::fiber::on_fiber();
        let read = |page_id| read_or_miss(pool, page_id, on_fiber);
        let write = |page_id| write_or_miss(pool, page_id, on_fiber);
        'restart: loop {
            let Some(mut guard) = read(self.root)? else {
                pool.load_released(&[self.root])?;
                continue 'restart;
            };
            let mut expected_level = None;
            loop {
                let node = NodeAccessor::new(&guard)?;
                check_level(&node, expected_level)?;
                if node.is_leaf() {
                    // Only the root can be reached as a leaf here.
                    drop(guard);
                    let Some(root) = write(self.root)? else {
                        pool.load_released(&[self.root])?;
                        continue 'restart;
                    };
                    let is_leaf = NodeAccessor::new(&root)?.is_leaf();
                    return Ok(if is_leaf { Some(root) } else { None });
                }
                let child = node.child(node.child_index_for(key)?)?;
                let missing = if node.level() == 1 {
                    match write(child)? {
                        Some(leaf) => {
                            drop(guard);
                            check_level(&NodeAccessor::new(&leaf)?, Some(0))?;
                            return Ok(Some(leaf));
                        }
                        None => child,
                    }
                } else {
                    expected_level = Some(node.level() - 1);
                    match read(child)? {
                        Some(child_guard) => {
                            guard = child_guard;
                            continue;
                        }
                        None => child,
                    }
                };
                drop(guard);
                pool.load_released(&[missing])?;
                continue 'restart;
            }
        }
    }

    /// Pessimistic writer descent: exclusive latches from the root, releasing the ancestors of
    /// every child for which `safe` holds. The last entry is the leaf.
    ///
    /// On a fiber the path is first made resident the way a reader does (`descend_shared`:
    /// no latch held while a read is waited for), so this descent (a split or merge: rare,
    /// exclusive latches from the root) usually finds every page; one evicted in between ends
    /// it as in `descend_leaf_exclusive`: every latch is let go, the page is loaded and the
    /// descent starts again.
    pub(super) fn descend_exclusive<'p>(
        &self,
        pool: &'p BufferPool,
        key: &[u8],
        safe: impl Fn(&NodeAccessor<'_>) -> bool,
    ) -> Result<Vec<PathEntry<'p>>> {
        let on_fiber = crate::fiber::on_fiber();
        if on_fiber {
            drop(self.descend_shared(pool, key, Seek::At, None, 0, |_| false)?);
        }
        'restart: loop {
            let Some(root) = write_or_miss(pool, self.root, on_fiber)? else {
                pool.load_released(&[self.root])?;
                continue 'restart;
            };
            let mut path = vec![PathEntry {
                guard: root,
                child_index: 0,
            }];
            check_level(&NodeAccessor::new(&path[0].guard)?, None)?;
            loop {
                let node = NodeAccessor::new(&path.last().expect("path").guard)?;
                if node.is_leaf() {
                    return Ok(path);
                }
                let child_index = node.child_index_for(key)?;
                let child = node.child(child_index)?;
                let level = node.level() - 1;
                let Some(guard) = write_or_miss(pool, child, on_fiber)? else {
                    drop(path);
                    pool.load_released(&[child])?;
                    continue 'restart;
                };
                let child_node = NodeAccessor::new(&guard)?;
                check_level(&child_node, Some(level))?;
                let child_is_safe = safe(&child_node);
                path.push(PathEntry { guard, child_index });
                if child_is_safe {
                    path.drain(..path.len() - 1);
                }
            }
        }
    }

    /// The value stored under `key`.
    pub fn get(&self, pool: &BufferPool, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if key.len() > NodeLimits::new(pool.page_size()).key_length_max {
            return Ok(None);
        }
        let on_fiber = crate::fiber::on_fiber();
        let mut tries = 0;
        loop {
            let fetch = |page_id| pool.try_read(page_id);
            let leaf = match self.descend_optimistic(pool, key, fetch)? {
                Some(leaf) => leaf,
                None => self.descend_shared(pool, key, Seek::At, None, 0, |_| false)?,
            };
            let node = NodeAccessor::new(&leaf)?;
            let Ok(index) = node.search(key)? else {
                return Ok(None);
            };
            match copy_value_or_miss(pool, &node, index, on_fiber && tries < CHAIN_TRIES)? {
                Ok(value) => return Ok(Some(value)),
                Err(missing) => load_chain_after(pool, leaf, missing)?,
            }
            tries += 1;
        }
    }

    /// Point lookups of `keys`, sorted ascending (repeats allowed): their values, in order.
    /// After a descent to the leaf holding a key, the next keys up to the leaf's last key are
    /// looked up in that leaf too (a key between a leaf's first and last keys can only be
    /// there), each searched from where the previous one was, and a key past it in the leaf's
    /// parent while that is unchanged, so reading the rows of many nearby keys (an index
    /// range's primary keys, sorted) costs less than a `get` each.
    /// Values are copied out before the leaf is let go; no latch is held between leaves.
    pub fn get_sorted(&self, pool: &BufferPool, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.get_sorted_where(pool, keys, &mut |_| true)
    }

    /// `get_sorted`, with None for each value that lies whole in its leaf and `keep` refuses
    /// there (it is never copied). `keep` runs with the leaf latched: it must not touch the
    /// tree, wait or suspend. Values in overflow chains are always kept.
    pub fn get_sorted_where(
        &self,
        pool: &BufferPool,
        keys: &[Vec<u8>],
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        debug_assert!(keys.windows(2).all(|pair| pair[0] <= pair[1]));
        let key_length_max = NodeLimits::new(pool.page_size()).key_length_max;
        let mut values = Vec::with_capacity(keys.len());
        // The last leaf's parent: while it is unchanged, a key between two of its separators
        // is looked up in it rather than from the root (`leaf_from_parent`).
        let mut parent: Option<PageStamp> = None;
        let on_fiber = crate::fiber::on_fiber();
        // Chain misses in a row at values[missed_at] (see `copy_value_or_miss`).
        let (mut tries, mut missed_at) = (0, usize::MAX);
        while values.len() < keys.len() {
            let first = &keys[values.len()];
            if first.len() > key_length_max {
                values.push(None);
                continue;
            }
            let from_parent = match &parent {
                Some(stamp) => self.leaf_from_parent(pool, &(*stamp, usize::MAX), first)?,
                None => None,
            };
            let leaf = match from_parent {
                Some((leaf, _, _)) => leaf,
                None => {
                    let fetch = |page_id| pool.try_read(page_id);
                    match self.descend_optimistic_noting(pool, first, fetch, &mut parent)? {
                        Some(leaf) => leaf,
                        None => self.descend_shared(pool, first, Seek::At, None, 0, |_| false)?,
                    }
                }
            };
            let node = NodeAccessor::new(&leaf)?;
            let last = match node.count() {
                0 => None,
                count => Some(node.key(count - 1)?),
            };
            let mut from = 0;
            let start = values.len();
            let no_wait = on_fiber && (missed_at != start || tries < CHAIN_TRIES);
            let mut missing = None;
            for (offset, key) in keys[start..].iter().enumerate() {
                // The first key is the leaf's by its descent; the next ones up to its last.
                if offset > 0 && last.is_none_or(|last| compare_keys(key, last).is_gt()) {
                    break;
                }
                let value = match node.search_from(key, from)? {
                    Ok(index) => {
                        from = index;
                        match node.leaf_value(index)? {
                            LeafValue::Inline(value) if !keep(value) => None,
                            _ => match copy_value_or_miss(pool, &node, index, no_wait)? {
                                Ok(value) => Some(value),
                                Err(page_id) => {
                                    missing = Some(page_id);
                                    break;
                                }
                            },
                        }
                    }
                    Err(index) => {
                        from = index;
                        None
                    }
                };
                values.push(value);
            }
            if let Some(page_id) = missing {
                // The lookups go on at this key once its chain is loaded.
                tries = if missed_at == values.len() {
                    tries + 1
                } else {
                    1
                };
                missed_at = values.len();
                load_chain_after(pool, leaf, page_id)?;
            }
        }
        Ok(values)
    }

    /// A point lookup that never waits for I/O (see `exec`): on a miss it releases every
    /// latch and names the page to load; the caller loads it and calls again.
    pub fn try_get(&self, pool: &BufferPool, key: &[u8]) -> Result<TryLookup> {
        if key.len() > NodeLimits::new(pool.page_size()).key_length_max {
            return Ok(TryLookup::Found(None));
        }
        let fetch = |page_id| pool.try_read(page_id);
        let guard = match self.descend_optimistic(pool, key, fetch)? {
            Some(leaf) => leaf,
            None => match self.descend_shared_with(key, Seek::At, None, fetch, |_, _| Ok(()))? {
                Ok(leaf) => leaf,
                Err(missing) => return Ok(TryLookup::Missing(missing)),
            },
        };
        let node = NodeAccessor::new(&guard)?;
        let Ok(index) = node.search(key)? else {
            return Ok(TryLookup::Found(None));
        };
        // The leaf stays latched while the chain is read (see `overflow`).
        Ok(match copy_value_or_miss(pool, &node, index, true)? {
            Ok(value) => TryLookup::Found(Some(value)),
            Err(missing) => TryLookup::Missing(missing),
        })
    }

    /// Inserts or replaces `key`; returns the previous value. Modified pages get `lsn`.
    pub fn put(
        &self,
        pool: &BufferPool,
        key: &[u8],
        value: &[u8],
        lsn: u64,
    ) -> Result<Option<Vec<u8>>> {
        let limits = Self::check_key(pool, key)?;
        if value.len() > VALUE_LENGTH_MAX {
            return Err(Error::ValueTooLarge {
                size: value.len(),
                limit: VALUE_LENGTH_MAX,
            });
        }
        let _operation = pool.operation();
        let mut cell = Vec::with_capacity(16 + key.len() + value.len().min(limits.page_size));
        let mut chain = None;
        if value.len() > limits.inline_value_max {
            // A head of at most inline_value_max - 10 bytes keeps the cell within its limit
            // (2 bytes of head length and the 8-byte page id come with it).
            let head_max = limits.inline_value_max.saturating_sub(10);
            let head = head_length(limits.page_size, value.len(), head_max);
            if let Some(previous) = self.overwrite_in_place(pool, key, value, head, lsn)? {
                return Ok(Some(previous));
            }
            let first_page_id = write_chain(pool, &value[head..], lsn)?;
            chain = Some((first_page_id, (value.len() - head) as u64));
            let reference = LeafValue::Overflow {
                length_bytes: value.len() as u64,
                first_page_id,
                head: &value[..head],
            };
            encode_leaf_cell(&mut cell, key, reference);
        } else {
            encode_leaf_cell(&mut cell, key, LeafValue::Inline(value));
        }
        let outcome = match self.put_optimistic(pool, key, &cell, lsn) {
            Ok(Some(removed)) => Ok(removed),
            Ok(None) => self.put_pessimistic(pool, key, &cell, &limits, lsn),
            Err(error) => Err(error),
        };
        let removed = match outcome {
            Ok(removed) => removed,
            Err(error) => {
                if let Some((first_page_id, chain_bytes)) = chain {
                    // Nothing points at the new chain; give it back (best effort).
                    let _ = free_chain(pool, first_page_id, chain_bytes);
                }
                return Err(error);
            }
        };
        removed.map(|removed| removed.finish(pool)).transpose()
    }

    /// Replaces an overflow value by one of the same length and head length without a new
    /// chain: the chain's pages whose bytes changed are overwritten (`overwrite_chain`), then
    /// the head in the leaf cell, all under the leaf's exclusive latch. An update of a few
    /// bytes of a wide row dirties only the pages holding them, allocates and frees nothing.
    /// Returns the previous value; None (nothing changed) if the key holds a value of
    /// another shape, or the leaf or a chain page is not resident: the caller writes a new
    /// chain.
    fn overwrite_in_place(
        &self,
        pool: &BufferPool,
        key: &[u8],
        value: &[u8],
        head: usize,
        lsn: u64,
    ) -> Result<Option<Vec<u8>>> {
        let Some(mut leaf) = self.descend_leaf_exclusive(pool, key)? else {
            return Ok(None);
        };
        let node = NodeAccessor::new(&leaf)?;
        let Ok(index) = node.search(key)? else {
            return Ok(None);
        };
        let LeafValue::Overflow {
            length_bytes,
            first_page_id,
            head: old_head,
        } = node.leaf_value(index)?
        else {
            return Ok(None);
        };
        if length_bytes != value.len() as u64 || old_head.len() != head {
            return Ok(None);
        }
        let mut previous = Vec::with_capacity(value.len());
        previous.extend_from_slice(old_head);
        if !overwrite_chain(
            pool,
            first_page_id,
            &value[head..],
            lsn,
            Some(&mut previous),
        )? {
            return Ok(None);
        }
        let mut cell = Vec::with_capacity(16 + key.len() + head);
        let reference = LeafValue::Overflow {
            length_bytes,
            first_page_id,
            head: &value[..head],
        };
        encode_leaf_cell(&mut cell, key, reference);
        NodeBuilder::new(&mut leaf).overwrite_cell(index, &cell)?;
        leaf.set_lsn(lsn);
        Ok(Some(previous))
    }

    /// The put if it fits the leaf; Ok(None) if the leaf must split.
    fn put_optimistic(
        &self,
        pool: &BufferPool,
        key: &[u8],
        cell: &[u8],
        lsn: u64,
    ) -> Result<Option<Option<Removed>>> {
        let Some(mut leaf) = self.descend_leaf_exclusive(pool, key)? else {
            return Ok(None);
        };
        let node = NodeAccessor::new(&leaf)?;
        let search = node.search(key)?;
        let freed_bytes = match search {
            Ok(index) => node.cell(index)?.len() + SLOT_SIZE,
            Err(_) => 0,
        };
        if node.free_bytes() + freed_bytes < cell.len() + SLOT_SIZE {
            return Ok(None);
        }
        let (removed, fitted) = apply_leaf_put(&mut leaf, search, cell)?;
        assert!(fitted, "checked free space");
        leaf.set_lsn(lsn);
        Ok(Some(removed))
    }

    fn put_pessimistic(
        &self,
        pool: &BufferPool,
        key: &[u8],
        cell: &[u8],
        limits: &NodeLimits,
        lsn: u64,
    ) -> Result<Option<Removed>> {
        let inner_needed = limits.inner_cell_size_max() + SLOT_SIZE;
        let leaf_needed = cell.len() + SLOT_SIZE;
        let mut path = self.descend_exclusive(pool, key, |node| {
            let needed = if node.is_leaf() {
                leaf_needed
            } else {
                inner_needed
            };
            node.free_bytes() >= needed
        })?;
        let mut entry = path.pop().expect("leaf on path");
        let node = NodeAccessor::new(&entry.guard)?;
        let search = node.search(key)?;
        let freed_bytes = match search {
            Ok(index) => node.cell(index)?.len() + SLOT_SIZE,
            Err(_) => 0,
        };
        if node.free_bytes() + freed_bytes >= cell.len() + SLOT_SIZE {
            let (removed, fitted) = apply_leaf_put(&mut entry.guard, search, cell)?;
            assert!(fitted, "checked free space");
            entry.guard.set_lsn(lsn);
            return Ok(removed);
        }
        // Every page the splits may take, taken before anything changes: an allocation failing
        // half way up would leave a split node with no separator above it. Usually the leaf's
        // parent has room for the separator (a prefix of one of the leaf's keys or `key`): one
        // page; else one per node on the path, two for the root. Leftovers are freed.
        let longest_key = (0..node.count())
            .map(|index| node.key(index).map(<[u8]>::len))
            .try_fold(key.len(), |longest, length| length.map(|l| l.max(longest)))?;
        let needed = match path.last() {
            None => 2, // the leaf is the root
            Some(parent) => {
                let room = NodeAccessor::new(&parent.guard)?.free_bytes();
                if room >= INNER_CELL_HEADER_SIZE + longest_key + SLOT_SIZE {
                    1
                } else {
                    let top_is_root = path[0].guard.page_id() == self.root;
                    path.len() + 1 + usize::from(top_is_root)
                }
            }
        };
        let mut spare = Vec::with_capacity(needed);
        for _ in 0..needed {
            match pool.allocate(PageKind::BtreeLeaf) {
                Ok(page) => spare.push(page),
                Err(error) => {
                    spare.into_iter().for_each(|page| pool.free(page));
                    return Err(error);
                }
            }
        }
        let (removed, index, replace) = match search {
            Ok(index) => (Some(Removed::read(&node, index)?), index, true),
            Err(index) => (None, index, false),
        };
        let outcome = self.split_up(&mut path, entry, index, replace, cell, lsn, &mut spare);
        spare.into_iter().for_each(|page| pool.free(page));
        outcome?;
        Ok(removed)
    }

    /// Splits the leaf `entry` while putting `cell` at `index`, then each ancestor on `path`
    /// that has no room for the separator from below, with pages from `spare`.
    #[allow(clippy::too_many_arguments)]
    fn split_up<'p>(
        &self,
        path: &mut Vec<PathEntry<'p>>,
        mut entry: PathEntry<'p>,
        index: usize,
        replace: bool,
        cell: &[u8],
        lsn: u64,
        spare: &mut Vec<PageWriteGuard<'p>>,
    ) -> Result<()> {
        let mut pending = self.split_node(&mut entry.guard, index, replace, cell, lsn, spare)?;
        while let Some((separator, right_page_id)) = pending {
            let cell_index = entry.child_index;
            drop(entry);
            entry = path.pop().expect("a safe ancestor takes the separator");
            let mut separator_cell = Vec::with_capacity(16 + separator.len());
            encode_inner_cell(&mut separator_cell, &separator, right_page_id);
            entry.guard.set_lsn(lsn);
            if NodeBuilder::new(&mut entry.guard).insert_cell(cell_index, &separator_cell)? {
                break;
            }
            let guard = &mut entry.guard;
            pending = self.split_node(guard, cell_index, false, &separator_cell, lsn, spare)?;
        }
        Ok(())
    }

    /// Splits the node under `guard` while inserting `cell` at `index` (replacing the cell there
    /// if `replace`), its new pages taken from `spare`. Returns the separator and new right
    /// page for the parent, or None after a root split (which needs no parent). Nothing
    /// changes if it fails.
    fn split_node<'p>(
        &self,
        guard: &mut PageWriteGuard<'p>,
        index: usize,
        replace: bool,
        cell: &[u8],
        lsn: u64,
        spare: &mut Vec<PageWriteGuard<'p>>,
    ) -> Result<Option<(Vec<u8>, PageId)>> {
        let copy = guard.to_vec();
        let node = NodeAccessor::new(&copy)?;
        let (leaf, level) = (node.is_leaf(), node.level());
        let mut cells = (0..node.count())
            .map(|cell_index| node.cell(cell_index))
            .collect::<Result<Vec<&[u8]>>>()?;
        if replace {
            cells[index] = cell;
        } else {
            cells.insert(index, cell);
        }
        let (left_cells, right_cells, separator, right_link);
        if leaf {
            // An insert past the last key of the rightmost leaf is a load in key order (or an
            // ascending key): the left leaf keeps 15/16 of a page, not half of one.
            let in_order = !replace && index == cells.len() - 1 && node.link() == PAGE_ID_NONE;
            let split = if in_order {
                split_point_in_order(&cells, copy.len())
            } else {
                split_point(&cells)
            };
            let left_last = cell_key(cells[split - 1], true);
            separator = shortest_separator(left_last, cell_key(cells[split], true)).to_vec();
            (left_cells, right_cells, right_link) = (&cells[..split], &cells[split..], node.link());
        } else {
            // The middle cell moves up; its child becomes the right node's leftmost child.
            assert!(
                cells.len() >= 3,
                "inner node with {} cells overflows",
                cells.len()
            );
            let split = split_point(&cells).min(cells.len() - 2);
            separator = cell_key(cells[split], false).to_vec();
            right_link = inner_cell_child(cells[split]);
            (left_cells, right_cells) = (&cells[..split], &cells[split + 1..]);
        }
        let mut right = spare.pop().expect("pages taken for every split");
        let right_page_id = right.page_id();
        NodeBuilder::new(&mut right).rebuild(level, right_link, right_cells);
        right.set_lsn(lsn);
        let left_link = if leaf { right_page_id } else { node.link() };
        if guard.page_id() != self.root {
            NodeBuilder::new(guard).rebuild(level, left_link, left_cells);
            guard.set_lsn(lsn);
            return Ok(Some((separator, right_page_id)));
        }
        if level as usize + 2 > TREE_DEPTH_MAX {
            spare.push(right);
            return Err(Error::Unsupported(format!(
                "B+tree depth limit {TREE_DEPTH_MAX} reached"
            )));
        }
        // The root keeps its page id: its halves move to two new children.
        let mut left = spare.pop().expect("two pages taken for a root split");
        NodeBuilder::new(&mut left).rebuild(level, left_link, left_cells);
        left.set_lsn(lsn);
        let mut root_cell = Vec::with_capacity(16 + separator.len());
        encode_inner_cell(&mut root_cell, &separator, right_page_id);
        NodeBuilder::new(guard).rebuild(level + 1, left.page_id(), &[&root_cell]);
        guard.set_lsn(lsn);
        Ok(None)
    }
}

/// One level of an optimistic descent: the child for `key` and the node's level, or None if
/// the node is a leaf.
fn inner_step(
    bytes: &[u8],
    key: &[u8],
    expected_level: Option<u8>,
) -> Result<Option<(PageId, u8)>> {
    let node = NodeAccessor::new(bytes)?;
    check_level(&node, expected_level)?;
    if node.is_leaf() {
        return Ok(None);
    }
    let index = node.child_index_for(key)?;
    Ok(Some((node.child(index)?, node.level())))
}

/// Replaces or inserts `cell` in a leaf. Returns the removed old value and whether the new cell
/// fitted (if not, the old cell is gone and the caller splits).
fn apply_leaf_put(
    leaf: &mut PageWriteGuard<'_>,
    search: std::result::Result<usize, usize>,
    cell: &[u8],
) -> Result<(Option<Removed>, bool)> {
    let removed = match search {
        Ok(index) => {
            let removed = Removed::read(&NodeAccessor::new(leaf)?, index)?;
            NodeBuilder::new(leaf).remove_cell(index)?;
            Some(removed)
        }
        Err(_) => None,
    };
    let index = match search {
        Ok(index) | Err(index) => index,
    };
    let fitted = NodeBuilder::new(leaf).insert_cell(index, cell)?;
    Ok((removed, fitted))
}

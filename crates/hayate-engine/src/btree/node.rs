//! Slotted node pages of the B+tree (node format version 1).
//!
//! A node page starts with the common 32-byte page header (kind `BtreeLeaf` or `BtreeInner`),
//! followed by the node header (all integers little-endian):
//!
//! | offset | size | field                                                               |
//! |--------|------|---------------------------------------------------------------------|
//! | 32     | 2    | cell count n                                                        |
//! | 34     | 1    | node format version (`NODE_FORMAT_VERSION`)                         |
//! | 35     | 1    | level: 0 for a leaf, child level + 1 for an inner node              |
//! | 36     | 4    | cell content start: lowest byte offset used by a cell               |
//! | 40     | 4    | fragmented bytes: free bytes between cells (left by removals)       |
//! | 44     | 4    | reserved, zero                                                      |
//! | 48     | 8    | link: right sibling (leaf) or leftmost child, child 0 (inner)       |
//! | 56     | 2n   | slot array: u16 byte offset of each cell, in ascending key order    |
//!
//! Cells grow down from the end of the page; free space is the gap between the slot array and
//! the cell content start, plus the fragmented bytes, which `compact` gathers into the gap.
//! Keys compare byte-wise (memcmp order) and are strictly ascending across the slots.
//!
//! Leaf cell: `u16 key length | u32 value length | u8 flags | key | value`, where flags 0 means
//! the value is inline and flags 1 (`FLAG_OVERFLOW`) means the value lives in an overflow chain:
//! the value length is the total length and the 8 bytes after the key are the first overflow
//! page id. Flags 2 (`FLAG_OVERFLOW_HEAD`, node format 2) keep the head of the value inline
//! and the rest in whole overflow pages: after the key come `u16 head length | head | u64
//! first overflow page id`. A value a little longer than an overflow page's capacity (a 4 KiB
//! row with 4 KiB pages) then takes one overflow page, not two.
//!
//! Inner cell i: `u16 key length | u64 child page id | key`. An inner node with n keys has n+1
//! children: child 0 in the link field and child i+1 in cell i. Child i+1 holds the keys k with
//! key(i) <= k < key(i+1).
//!
//! Bytes of a node are untrusted: `NodeAccessor::new` checks the header, and every cell access
//! checks its bounds, returning `Error::Corruption` naming the page.

use crate::error::{Error, Location, Result};

/// The byte-wise (memcmp) order of two keys, their first 8 bytes compared as one big-endian
/// word (a shorter key padded with zeros): most keys of a search differ there (an integer key
/// is 8 bytes, a separator often fewer), and the word comparison spares a call to memcmp for
/// each such probe.
#[inline]
pub fn compare_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    #[inline]
    fn word(key: &[u8]) -> u64 {
        match key.first_chunk::<8>() {
            Some(first) => u64::from_be_bytes(*first),
            None => {
                let mut word = 0u64;
                for (place, byte) in key.iter().enumerate() {
                    word |= (*byte as u64) << (56 - 8 * place);
                }
                word
            }
        }
    }
    let (x, y) = (word(a), word(b));
    if x != y {
        return x.cmp(&y);
    }
    if a.len() <= 8 || b.len() <= 8 {
        // The first min(len, 8) bytes agree and the longer key's bytes up to the eighth are
        // zero: the shorter is a prefix of the longer.
        return a.len().cmp(&b.len());
    }
    a[8..].cmp(&b[8..])
}
use crate::page::{PageHeaderAccessor, PageHeaderBuilder, PageId, PageKind};

pub const NODE_FORMAT_VERSION: u8 = 2;
/// Oldest node format still read: format 1 has no `FLAG_OVERFLOW_HEAD` cells, which is all
/// that changed.
const NODE_FORMAT_VERSION_MIN: u8 = 1;
const COUNT_OFFSET: usize = 32;
const VERSION_OFFSET: usize = 34;
const LEVEL_OFFSET: usize = 35;
const CONTENT_START_OFFSET: usize = 36;
const FRAGMENTED_OFFSET: usize = 40;
const LINK_OFFSET: usize = 48;
pub const SLOTS_OFFSET: usize = 56;
pub const SLOT_SIZE: usize = 2;
pub const LEAF_CELL_HEADER_SIZE: usize = 7;
pub const INNER_CELL_HEADER_SIZE: usize = 10;
const FLAG_OVERFLOW: u8 = 1;
const FLAG_OVERFLOW_HEAD: u8 = 2;

/// Builds a corruption error naming a B+tree page.
pub fn corruption(page_id: PageId, detail: impl Into<String>) -> Error {
    let location = Location {
        file: "btree".into(),
        page_id: Some(page_id),
        ..Default::default()
    };
    Error::corruption(location, detail)
}

fn read_u16(bytes: &[u8], offset: usize) -> usize {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]]) as usize
}

fn read_u32(bytes: &[u8], offset: usize) -> usize {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes")) as usize
}

fn read_u64(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

/// Size limits derived from the page size.
#[derive(Debug, Clone, Copy)]
pub struct NodeLimits {
    pub page_size: usize,
    /// Longest key accepted; keeps at least a handful of cells in every node.
    pub key_length_max: usize,
    /// Longer values go to overflow pages.
    pub inline_value_max: usize,
    /// Bytes available to slots and cells.
    pub usable_bytes: usize,
    /// A node using fewer bytes than this (slots plus cells) is underfull.
    pub underflow_bytes: usize,
}

impl NodeLimits {
    pub fn new(page_size: usize) -> NodeLimits {
        let usable_bytes = page_size - SLOTS_OFFSET;
        let limits = NodeLimits {
            page_size,
            key_length_max: page_size / 8,
            inline_value_max: page_size / 4,
            usable_bytes,
            underflow_bytes: usable_bytes / 4,
        };
        // Splits choose the point that minimises the larger half, so any cell list of at most
        // one page plus one cell splits into two fitting halves if a cell is at most half a page.
        assert!(limits.leaf_cell_size_max() + SLOT_SIZE <= usable_bytes / 2);
        limits
    }

    pub fn leaf_cell_size_max(&self) -> usize {
        LEAF_CELL_HEADER_SIZE + self.key_length_max + self.inline_value_max.max(8)
    }

    pub fn inner_cell_size_max(&self) -> usize {
        INNER_CELL_HEADER_SIZE + self.key_length_max
    }
}

/// Where a leaf value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafValue<'a> {
    Inline(&'a [u8]),
    /// `head` (possibly empty) is kept in the leaf; the chain holds the remaining
    /// `length_bytes - head.len()` bytes.
    Overflow {
        length_bytes: u64,
        first_page_id: PageId,
        head: &'a [u8],
    },
}

impl LeafValue<'_> {
    /// The overflow chain: (first page id, bytes it holds).
    pub fn chain(&self) -> Option<(PageId, u64)> {
        match *self {
            LeafValue::Inline(_) => None,
            LeafValue::Overflow {
                length_bytes,
                first_page_id,
                head,
            } => Some((
                first_page_id,
                length_bytes.saturating_sub(head.len() as u64),
            )),
        }
    }
}

/// Appends a leaf cell to `out`.
pub fn encode_leaf_cell(out: &mut Vec<u8>, key: &[u8], value: LeafValue<'_>) {
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    match value {
        LeafValue::Inline(bytes) => {
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.push(0);
            out.extend_from_slice(key);
            out.extend_from_slice(bytes);
        }
        LeafValue::Overflow {
            length_bytes,
            first_page_id,
            head,
        } => {
            out.extend_from_slice(&(length_bytes as u32).to_le_bytes());
            if head.is_empty() {
                out.push(FLAG_OVERFLOW);
                out.extend_from_slice(key);
            } else {
                out.push(FLAG_OVERFLOW_HEAD);
                out.extend_from_slice(key);
                out.extend_from_slice(&(head.len() as u16).to_le_bytes());
                out.extend_from_slice(head);
            }
            out.extend_from_slice(&first_page_id.to_le_bytes());
        }
    }
}

/// Appends an inner cell to `out`.
pub fn encode_inner_cell(out: &mut Vec<u8>, key: &[u8], child: PageId) {
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&child.to_le_bytes());
    out.extend_from_slice(key);
}

/// The key of a cell returned by `NodeAccessor::cell` (bounds already checked there).
pub fn cell_key(cell: &[u8], leaf: bool) -> &[u8] {
    let header = if leaf {
        LEAF_CELL_HEADER_SIZE
    } else {
        INNER_CELL_HEADER_SIZE
    };
    &cell[header..header + read_u16(cell, 0)]
}

/// The child of an inner cell returned by `NodeAccessor::cell`.
pub fn inner_cell_child(cell: &[u8]) -> PageId {
    read_u64(cell, 2)
}

/// Read access to a node page.
#[derive(Clone, Copy)]
pub struct NodeAccessor<'a> {
    bytes: &'a [u8],
    count: usize,
    level: u8,
    content_start: usize,
}

impl<'a> NodeAccessor<'a> {
    /// Checks the node header; cells are checked when accessed.
    pub fn new(bytes: &'a [u8]) -> Result<NodeAccessor<'a>> {
        let header = PageHeaderAccessor::new(bytes);
        let page_id = header.page_id();
        let leaf_kind = match header.kind() {
            Some(PageKind::BtreeLeaf) => true,
            Some(PageKind::BtreeInner) => false,
            _ => return Err(corruption(page_id, "page is not a B+tree node")),
        };
        if !(NODE_FORMAT_VERSION_MIN..=NODE_FORMAT_VERSION).contains(&bytes[VERSION_OFFSET]) {
            return Err(corruption(
                page_id,
                format!("unknown node format version {}", bytes[VERSION_OFFSET]),
            ));
        }
        let level = bytes[LEVEL_OFFSET];
        if leaf_kind != (level == 0) {
            return Err(corruption(
                page_id,
                format!("node kind and level {level} disagree"),
            ));
        }
        let count = read_u16(bytes, COUNT_OFFSET);
        let content_start = read_u32(bytes, CONTENT_START_OFFSET);
        let fragmented = read_u32(bytes, FRAGMENTED_OFFSET);
        if SLOTS_OFFSET + count * SLOT_SIZE > content_start
            || content_start > bytes.len()
            || fragmented > bytes.len() - content_start
        {
            return Err(corruption(
                page_id,
                format!("bad node header: {count} cells, content start {content_start}"),
            ));
        }
        Ok(NodeAccessor {
            bytes,
            count,
            level,
            content_start,
        })
    }

    pub fn page_id(&self) -> PageId {
        read_u64(self.bytes, 8)
    }
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }
    pub fn level(&self) -> u8 {
        self.level
    }
    pub fn count(&self) -> usize {
        self.count
    }
    pub fn link(&self) -> PageId {
        read_u64(self.bytes, LINK_OFFSET)
    }
    fn fragmented_bytes(&self) -> usize {
        read_u32(self.bytes, FRAGMENTED_OFFSET)
    }

    /// Free bytes, counting fragments that compaction would gather.
    pub fn free_bytes(&self) -> usize {
        self.content_start - (SLOTS_OFFSET + self.count * SLOT_SIZE) + self.fragmented_bytes()
    }

    /// Bytes used by slots and cells.
    pub fn used_bytes(&self) -> usize {
        self.bytes.len() - SLOTS_OFFSET - self.free_bytes()
    }

    #[inline]
    fn cell_header_size(&self) -> usize {
        if self.is_leaf() {
            LEAF_CELL_HEADER_SIZE
        } else {
            INNER_CELL_HEADER_SIZE
        }
    }

    #[inline(always)]
    fn cell_offset(&self, index: usize) -> Result<usize> {
        assert!(index < self.count, "cell {index} of {}", self.count);
        let offset = read_u16(self.bytes, SLOTS_OFFSET + index * SLOT_SIZE);
        if offset < self.content_start || offset + self.cell_header_size() > self.bytes.len() {
            return Err(self.bad_offset(index, offset));
        }
        Ok(offset)
    }

    fn corrupt(&self, detail: String) -> Error {
        corruption(self.page_id(), detail)
    }

    // The corruption errors of cell accesses are built out of line: lookups stay short.
    #[cold]
    #[inline(never)]
    fn bad_offset(&self, index: usize, offset: usize) -> Error {
        self.corrupt(format!("cell {index} at bad offset {offset}"))
    }

    #[cold]
    #[inline(never)]
    fn key_overrun(&self, index: usize) -> Error {
        self.corrupt(format!("key of cell {index} overruns the page"))
    }

    /// The key of cell `index`.
    #[inline(always)] // in `search`'s loop
    pub fn key(&self, index: usize) -> Result<&'a [u8]> {
        let offset = self.cell_offset(index)?;
        let start = offset + self.cell_header_size();
        let end = start + read_u16(self.bytes, offset);
        match self.bytes.get(start..end) {
            Some(key) => Ok(key),
            None => Err(self.key_overrun(index)),
        }
    }

    /// All bytes of cell `index`.
    pub fn cell(&self, index: usize) -> Result<&'a [u8]> {
        let offset = self.cell_offset(index)?;
        let key_length = read_u16(self.bytes, offset);
        let size = if self.is_leaf() {
            let body = match self.bytes[offset + 6] {
                0 => read_u32(self.bytes, offset + 2),
                FLAG_OVERFLOW => 8,
                FLAG_OVERFLOW_HEAD => {
                    let head_offset = offset + LEAF_CELL_HEADER_SIZE + key_length;
                    if head_offset + 2 > self.bytes.len() {
                        return Err(self.corrupt(format!("cell {index} overruns the page")));
                    }
                    2 + read_u16(self.bytes, head_offset) + 8
                }
                flags => return Err(self.corrupt(format!("cell {index} has flags {flags}"))),
            };
            LEAF_CELL_HEADER_SIZE + key_length + body
        } else {
            INNER_CELL_HEADER_SIZE + key_length
        };
        self.bytes
            .get(offset..offset + size)
            .ok_or_else(|| self.corrupt(format!("cell {index} overruns the page")))
    }

    /// Binary search: `Ok(index)` of an equal key or `Err(index)` where it would be inserted.
    /// While one probe's key is compared, the cells of both possible next probes are
    /// prefetched, so their cache misses overlap instead of following one another.
    pub fn search(&self, key: &[u8]) -> Result<std::result::Result<usize, usize>> {
        self.search_from(key, 0)
    }

    /// `search` among the cells from `from` on (the caller knows `key` sorts after the ones
    /// before it).
    pub fn search_from(
        &self,
        key: &[u8],
        from: usize,
    ) -> Result<std::result::Result<usize, usize>> {
        let (mut low, mut high) = (from.min(self.count), self.count);
        while low < high {
            let middle = low + (high - low) / 2;
            self.prefetch_cell(low + (middle - low) / 2, 1);
            self.prefetch_cell(middle + 1 + (high - middle - 1) / 2, 1);
            match compare_keys(self.key(middle)?, key) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Ok(Ok(middle)),
            }
        }
        Ok(Err(low))
    }

    /// Starts loading the first `lines` cache lines of cell `index` (nothing if out of
    /// range): a search compares keys (one line), a scan reads keys and values.
    #[inline]
    pub fn prefetch_cell(&self, index: usize, lines: usize) {
        if index < self.count {
            let offset = read_u16(self.bytes, SLOTS_OFFSET + index * SLOT_SIZE);
            for line in 0..lines {
                if let Some(bytes) = self.bytes.get(offset + line * 64..) {
                    crate::page::prefetch(bytes.as_ptr());
                }
            }
        }
    }

    /// Index of the child whose subtree holds `key` (the number of keys <= `key`).
    pub fn child_index_for(&self, key: &[u8]) -> Result<usize> {
        debug_assert!(!self.is_leaf());
        Ok(match self.search(key)? {
            Ok(index) => index + 1,
            Err(index) => index,
        })
    }

    /// Child `index` of an inner node, 0..=count.
    pub fn child(&self, index: usize) -> Result<PageId> {
        debug_assert!(!self.is_leaf());
        let child = if index == 0 {
            self.link()
        } else {
            let offset = self.cell_offset(index - 1)?;
            read_u64(self.bytes, offset + 2)
        };
        if child == 0 {
            return Err(self.corrupt(format!("child {index} is page 0")));
        }
        Ok(child)
    }

    /// The value of leaf cell `index`.
    pub fn leaf_value(&self, index: usize) -> Result<LeafValue<'a>> {
        debug_assert!(self.is_leaf());
        let cell = self.cell(index)?;
        let body = &cell[LEAF_CELL_HEADER_SIZE + read_u16(cell, 0)..];
        if cell[6] == FLAG_OVERFLOW {
            Ok(LeafValue::Overflow {
                length_bytes: read_u32(cell, 2) as u64,
                first_page_id: read_u64(body, 0),
                head: &[],
            })
        } else if cell[6] == FLAG_OVERFLOW_HEAD {
            let head_length = read_u16(body, 0);
            let length_bytes = read_u32(cell, 2) as u64;
            if head_length as u64 >= length_bytes {
                return Err(self.corrupt(format!("cell {index} has a head longer than its value")));
            }
            Ok(LeafValue::Overflow {
                length_bytes,
                first_page_id: read_u64(body, 2 + head_length),
                head: &body[2..2 + head_length],
            })
        } else {
            Ok(LeafValue::Inline(body))
        }
    }

    /// Checks that cells do not overlap the free space and that their sizes add up.
    pub fn check_space(&self) -> Result<()> {
        let mut cell_bytes = 0;
        for index in 0..self.count {
            cell_bytes += self.cell(index)?.len();
        }
        let expected = self.bytes.len() - self.content_start - self.fragmented_bytes();
        if cell_bytes != expected {
            return Err(self.corrupt(format!(
                "cells hold {cell_bytes} bytes but the header accounts for {expected}"
            )));
        }
        Ok(())
    }
}

/// Write access to a node page. Callers open it only on pages that passed `NodeAccessor::new`
/// or that they initialise with `init`.
pub struct NodeBuilder<'a> {
    bytes: &'a mut [u8],
}

impl<'a> NodeBuilder<'a> {
    pub fn new(bytes: &'a mut [u8]) -> NodeBuilder<'a> {
        NodeBuilder { bytes }
    }

    fn accessor(&self) -> NodeAccessor<'_> {
        NodeAccessor::new(self.bytes).expect("node builder over a checked node")
    }

    fn set_u16(&mut self, offset: usize, value: usize) {
        let value = u16::try_from(value).expect("fits u16");
        self.bytes[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
    }

    fn set_u32(&mut self, offset: usize, value: usize) {
        let value = u32::try_from(value).expect("fits u32");
        self.bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
    }

    /// Empties the node (the page header stays, except the kind which follows the level).
    pub fn init(&mut self, level: u8, link: PageId) {
        let kind = if level == 0 {
            PageKind::BtreeLeaf
        } else {
            PageKind::BtreeInner
        };
        PageHeaderBuilder::new(self.bytes).set_kind(kind);
        self.bytes[COUNT_OFFSET..SLOTS_OFFSET].fill(0);
        self.bytes[VERSION_OFFSET] = NODE_FORMAT_VERSION;
        self.bytes[LEVEL_OFFSET] = level;
        let page_size = self.bytes.len();
        self.set_u32(CONTENT_START_OFFSET, page_size);
        self.set_link(link);
    }

    pub fn set_link(&mut self, link: PageId) {
        self.bytes[LINK_OFFSET..LINK_OFFSET + 8].copy_from_slice(&link.to_le_bytes());
    }

    /// Inserts a cell at slot `index`, compacting if needed. Returns false if it does not fit.
    pub fn insert_cell(&mut self, index: usize, cell: &[u8]) -> Result<bool> {
        let node = self.accessor();
        let (count, free, content_start) = (node.count(), node.free_bytes(), node.content_start);
        assert!(index <= count);
        if free < cell.len() + SLOT_SIZE {
            return Ok(false);
        }
        let slots_end = SLOTS_OFFSET + count * SLOT_SIZE;
        if content_start - slots_end < cell.len() + SLOT_SIZE {
            self.compact()?;
        }
        let content_start = read_u32(self.bytes, CONTENT_START_OFFSET) - cell.len();
        self.bytes[content_start..content_start + cell.len()].copy_from_slice(cell);
        self.set_u32(CONTENT_START_OFFSET, content_start);
        let slot = SLOTS_OFFSET + index * SLOT_SIZE;
        self.bytes.copy_within(slot..slots_end, slot + SLOT_SIZE);
        self.set_u16(slot, content_start);
        self.set_u16(COUNT_OFFSET, count + 1);
        Ok(true)
    }

    /// Overwrites the cell at slot `index` with `cell` of the same size, in place.
    pub fn overwrite_cell(&mut self, index: usize, cell: &[u8]) -> Result<()> {
        let node = self.accessor();
        if node.cell(index)?.len() != cell.len() {
            return Err(node.corrupt(format!("cell {index} changed size under its latch")));
        }
        let offset = node.cell_offset(index)?;
        self.bytes[offset..offset + cell.len()].copy_from_slice(cell);
        Ok(())
    }

    /// Removes the cell at slot `index`; its bytes become fragmented free space.
    pub fn remove_cell(&mut self, index: usize) -> Result<()> {
        let node = self.accessor();
        let (count, content_start) = (node.count(), node.content_start);
        let size = node.cell(index)?.len();
        let offset = node.cell_offset(index)?;
        let fragmented = node.fragmented_bytes();
        if offset == content_start {
            self.set_u32(CONTENT_START_OFFSET, offset + size);
        } else {
            self.set_u32(FRAGMENTED_OFFSET, fragmented + size);
        }
        let slot = SLOTS_OFFSET + index * SLOT_SIZE;
        let slots_end = SLOTS_OFFSET + count * SLOT_SIZE;
        self.bytes.copy_within(slot + SLOT_SIZE..slots_end, slot);
        self.set_u16(COUNT_OFFSET, count - 1);
        Ok(())
    }

    /// Moves all cells to the end of the page so the free space is one gap.
    pub fn compact(&mut self) -> Result<()> {
        let copy = self.bytes.to_vec();
        let node = NodeAccessor::new(&copy)?;
        let mut content_start = copy.len();
        for index in 0..node.count() {
            let cell = node.cell(index)?;
            content_start -= cell.len();
            self.bytes[content_start..content_start + cell.len()].copy_from_slice(cell);
            self.set_u16(SLOTS_OFFSET + index * SLOT_SIZE, content_start);
        }
        self.set_u32(CONTENT_START_OFFSET, content_start);
        self.set_u32(FRAGMENTED_OFFSET, 0);
        Ok(())
    }

    /// Replaces the node's content with `cells` (which must fit) at `level` with `link`.
    pub fn rebuild(&mut self, level: u8, link: PageId, cells: &[&[u8]]) {
        self.init(level, link);
        for (index, cell) in cells.iter().enumerate() {
            let fitted = self.insert_cell(index, cell).expect("fresh node");
            assert!(fitted, "rebuilt node overflows");
        }
    }
}

/// Bytes a list of cells takes in a node (cells plus slots).
pub fn cells_size(cells: &[&[u8]]) -> usize {
    cells.iter().map(|cell| cell.len() + SLOT_SIZE).sum()
}

/// The split point of `cells` that minimises the larger half; both halves non-empty.
pub fn split_point(cells: &[&[u8]]) -> usize {
    assert!(cells.len() >= 2, "cannot split {} cells", cells.len());
    let total = cells_size(cells);
    let (mut best, mut best_larger) = (1, usize::MAX);
    let mut left = 0;
    for (index, cell) in cells.iter().enumerate().take(cells.len() - 1) {
        left += cell.len() + SLOT_SIZE;
        let larger = left.max(total - left);
        if larger < best_larger {
            best = index + 1;
            best_larger = larger;
        }
    }
    best
}

/// Share of a node's usable bytes the left node keeps when an in-order insert splits the
/// rightmost leaf (15/16, as InnoDB fills pages on sequential inserts): a load in key order
/// leaves full leaves behind it instead of half-full ones that no later insert would fill.
pub const IN_ORDER_FILL_NUMERATOR: usize = 15;
/// Denominator of `IN_ORDER_FILL_NUMERATOR`.
pub const IN_ORDER_FILL_DENOMINATOR: usize = 16;

/// The split point of `cells` for an in-order insert (the new cell is the last): the longest
/// prefix that fills at most 15/16 of `page_size`'s usable bytes, so the left node stays
/// nearly full and the right one takes the rest; both halves non-empty and fitting a node.
pub fn split_point_in_order(cells: &[&[u8]], page_size: usize) -> usize {
    assert!(cells.len() >= 2, "cannot split {} cells", cells.len());
    let target = (page_size - SLOTS_OFFSET) * IN_ORDER_FILL_NUMERATOR / IN_ORDER_FILL_DENOMINATOR;
    let mut left = 0;
    let mut split = 0;
    for cell in &cells[..cells.len() - 1] {
        left += cell.len() + SLOT_SIZE;
        if left > target {
            break;
        }
        split += 1;
    }
    let split = split.max(1);
    // Two cells of nearly half a page each can leave the right half too large: then the
    // balanced split, which always fits.
    if cells_size(&cells[split..]) > page_size - SLOTS_OFFSET {
        return split_point(cells);
    }
    split
}

/// The shortest key s with `left < s <= right` (suffix truncation of separators).
pub fn shortest_separator<'k>(left: &[u8], right: &'k [u8]) -> &'k [u8] {
    debug_assert!(left < right);
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    &right[..(common + 1).min(right.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn compare_keys_is_memcmp_order(
            a in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            shared in 0usize..40,
        ) {
            // Keys that often share a prefix of up to and past 8 bytes.
            let mut b = b;
            let prefix = shared.min(a.len()).min(b.len());
            b[..prefix].copy_from_slice(&a[..prefix]);
            proptest::prop_assert_eq!(compare_keys(&a, &b), a.cmp(&b));
            proptest::prop_assert_eq!(compare_keys(&b, &a), b.cmp(&a));
            proptest::prop_assert_eq!(compare_keys(&a, &a), std::cmp::Ordering::Equal);
        }

        #[test]
        fn compare_keys_is_memcmp_order_with_zero_bytes(
            a in proptest::collection::vec(0u8..2, 0..30),
            b in proptest::collection::vec(0u8..2, 0..30),
        ) {
            // Zeros where a shorter key is padded: "ab" sorts before "ab\0".
            proptest::prop_assert_eq!(compare_keys(&a, &b), a.cmp(&b));
        }
    }

    #[test]
    fn in_order_split_keeps_the_left_node_nearly_full() {
        let cell = [7u8; 100];
        let cells: Vec<&[u8]> = vec![&cell[..]; 40];
        let split = split_point_in_order(&cells, 4096);
        let usable = 4096 - SLOTS_OFFSET;
        let left = cells_size(&cells[..split]);
        assert!(left <= usable * 15 / 16 && left + 100 + SLOT_SIZE > usable * 15 / 16);
        assert!(
            left * 10 >= usable * 9,
            "left node at least 90% full: {left} of {usable}"
        );
        assert!(split < cells.len());
    }

    #[test]
    fn in_order_split_falls_back_when_the_right_half_would_overflow() {
        let (small, large, second) = ([1u8; 200], [2u8; 1800], [3u8; 2000]);
        let new_cell = [4u8; 2000];
        let cells: Vec<&[u8]> = vec![&large, &second, &small, &new_cell];
        let split = split_point_in_order(&cells, 4096);
        let usable = 4096 - SLOTS_OFFSET;
        assert!(cells_size(&cells[..split]) <= usable);
        assert!(cells_size(&cells[split..]) <= usable);
    }
    use crate::page::PageHeaderBuilder;

    fn leaf_page() -> Vec<u8> {
        let mut page = vec![0u8; 4096];
        PageHeaderBuilder::new(&mut page).init(PageKind::BtreeLeaf, 5);
        NodeBuilder::new(&mut page).init(0, 0);
        page
    }

    fn leaf_cell(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut cell = Vec::new();
        encode_leaf_cell(&mut cell, key, LeafValue::Inline(value));
        cell
    }

    #[test]
    fn insert_search_remove_and_compact() {
        let mut page = leaf_page();
        for (index, key) in [b"b", b"d", b"f"].iter().enumerate() {
            assert!(NodeBuilder::new(&mut page)
                .insert_cell(index, &leaf_cell(*key, b"value"))
                .unwrap());
        }
        let node = NodeAccessor::new(&page).unwrap();
        assert_eq!(node.search(b"d").unwrap(), Ok(1));
        assert_eq!(node.search(b"e").unwrap(), Err(2));
        assert_eq!(node.leaf_value(2).unwrap(), LeafValue::Inline(b"value"));
        NodeBuilder::new(&mut page).remove_cell(1).unwrap();
        let node = NodeAccessor::new(&page).unwrap();
        node.check_space().unwrap();
        let used = node.used_bytes();
        NodeBuilder::new(&mut page).compact().unwrap();
        let node = NodeAccessor::new(&page).unwrap();
        node.check_space().unwrap();
        assert_eq!(node.used_bytes(), used);
        assert_eq!(node.key(1).unwrap(), b"f");
    }

    #[test]
    fn fills_up_then_refuses() {
        let mut page = leaf_page();
        let mut inserted = 0;
        loop {
            let key = format!("key{inserted:05}");
            let cell = leaf_cell(key.as_bytes(), &[7u8; 100]);
            if !NodeBuilder::new(&mut page)
                .insert_cell(inserted, &cell)
                .unwrap()
            {
                break;
            }
            inserted += 1;
        }
        assert_eq!(inserted, (4096 - SLOTS_OFFSET) / (7 + 8 + 100 + 2));
        NodeAccessor::new(&page).unwrap().check_space().unwrap();
    }

    #[test]
    fn corrupt_slot_is_an_error() {
        let mut page = leaf_page();
        NodeBuilder::new(&mut page)
            .insert_cell(0, &leaf_cell(b"k", b"v"))
            .unwrap();
        page[SLOTS_OFFSET] = 0xff;
        page[SLOTS_OFFSET + 1] = 0xff;
        let node = NodeAccessor::new(&page).unwrap();
        assert!(matches!(node.key(0), Err(Error::Corruption { .. })));
        page[COUNT_OFFSET + 1] = 0x70;
        assert!(NodeAccessor::new(&page).is_err());
    }

    #[test]
    fn separators_are_short() {
        assert_eq!(shortest_separator(b"apple", b"apricot"), b"apr");
        assert_eq!(shortest_separator(b"ab", b"abc"), b"abc");
        assert_eq!(split_point(&[b"aa", b"bb", b"cc", b"dd"]), 2);
    }
}

//! Overflow chains: values too long to live inline in a leaf.
//!
//! An overflow page (kind `Overflow`) holds, after the 32-byte page header (little-endian):
//!
//! | offset | size | field                                          |
//! |--------|------|------------------------------------------------|
//! | 32     | 8    | next page id of the chain, 0 at the end         |
//! | 40     | 4    | value bytes held by this page                   |
//! | 44     | 4    | reserved, zero                                  |
//! | 48     | ...  | value bytes                                     |
//!
//! Lifecycle:
//! 1. `write_chain` writes the value back to front (so each page knows its successor when it is
//!    written) before the leaf cell pointing at it exists; nobody else can see the pages yet.
//! 2. Readers follow the chain while holding the leaf that points at it (shared), so the chain
//!    cannot be freed underneath them. Resident pages are copied optimistically (no pin, no
//!    latch; kept only if the frame's latch version held, see `BufferPool::optimistic`), others
//!    pinned and latched.
//! 3. Whoever unlinks the cell (under the leaf's exclusive latch) frees the chain afterwards
//!    with `free_chain`; no reader can reach it any more.
//! 4. A value replaced by one of the same length and head keeps its chain: under the leaf's
//!    exclusive latch `overwrite_chain` rewrites only the pages whose bytes changed (an update
//!    of a few bytes of a wide row dirties its leaf alone), when the chain is resident and at
//!    most `OVERWRITE_PAGES_MAX` pages long.

use crate::buffer::{BufferPool, Optimistic};
use crate::error::Result;
use crate::page::{PageHeaderAccessor, PageId, PageKind, PAGE_ID_NONE};

use super::node::corruption;

const NEXT_OFFSET: usize = 32;
const USED_OFFSET: usize = 40;
const DATA_OFFSET: usize = 48;

/// Longest value the tree accepts.
pub const VALUE_LENGTH_MAX: usize = 16 << 20;

fn capacity_bytes(page_size: usize) -> usize {
    page_size - DATA_OFFSET
}

/// How many leading bytes of a `length`-byte overflow value stay in the leaf: the part that
/// would only partly fill a last overflow page, when it fits in `head_max` bytes; else none.
pub fn head_length(page_size: usize, length: usize, head_max: usize) -> usize {
    let remainder = length % capacity_bytes(page_size);
    if remainder <= head_max && remainder < length {
        remainder
    } else {
        0
    }
}

/// Writes `value` to a new chain and returns its first page id. Pins one page at a time.
pub fn write_chain(pool: &BufferPool, value: &[u8], lsn: u64) -> Result<PageId> {
    let capacity = capacity_bytes(pool.page_size());
    let mut next = PAGE_ID_NONE;
    let chunks: Vec<&[u8]> = value.chunks(capacity).collect();
    for chunk in chunks.iter().rev() {
        let mut page = match pool.allocate(PageKind::Overflow) {
            Ok(page) => page,
            Err(error) => {
                // Give back what was written so far; nothing points at it.
                if next != PAGE_ID_NONE {
                    free_pages_from(pool, next)?;
                }
                return Err(error);
            }
        };
        page[NEXT_OFFSET..NEXT_OFFSET + 8].copy_from_slice(&next.to_le_bytes());
        page[USED_OFFSET..USED_OFFSET + 4].copy_from_slice(&(chunk.len() as u32).to_le_bytes());
        page[DATA_OFFSET..DATA_OFFSET + chunk.len()].copy_from_slice(chunk);
        page.set_lsn(lsn);
        next = page.page_id();
    }
    Ok(next)
}

/// Reads one overflow page: (next page id, value bytes), checked against the chain so far.
fn read_page<T>(
    pool: &BufferPool,
    page_id: PageId,
    remaining_bytes: u64,
    visit: impl FnOnce(&[u8]) -> T,
) -> Result<(PageId, usize, T)> {
    let page = pool.read(page_id)?;
    parse_page(&page, page_id, remaining_bytes, visit)
}

/// Appends one resident overflow page's bytes to `out` without pinning or latching it:
/// (next page id, bytes held), or None if the page is not resident or kept changing (the
/// caller reads it with a latch).
fn read_page_optimistic(
    pool: &BufferPool,
    page_id: PageId,
    remaining_bytes: u64,
    out: &mut Vec<u8>,
) -> Result<Option<(PageId, usize)>> {
    for _ in 0..4 {
        let page = match pool.optimistic(page_id) {
            Optimistic::Page(page) => page,
            Optimistic::Busy => {
                std::hint::spin_loop();
                continue;
            }
            Optimistic::NotResident => return Ok(None),
        };
        let mark = out.len();
        // SAFETY: `parse_page` checks every length against the page before slicing and returns
        // errors, never panics; the copy and the result are kept only if `validate` holds.
        let parsed = parse_page(unsafe { page.bytes() }, page_id, remaining_bytes, |bytes| {
            out.extend_from_slice(bytes)
        });
        if page.validate() {
            let (next, used, ()) = parsed?;
            return Ok(Some((next, used)));
        }
        out.truncate(mark);
    }
    Ok(None)
}

/// Checks an overflow page against what the chain still has to hold, and hands its bytes to
/// `visit`; returns (next page, bytes held, visit's result).
fn parse_page<T>(
    page: &[u8],
    page_id: PageId,
    remaining_bytes: u64,
    visit: impl FnOnce(&[u8]) -> T,
) -> Result<(PageId, usize, T)> {
    if PageHeaderAccessor::new(page).kind() != Some(PageKind::Overflow) {
        return Err(corruption(
            page_id,
            "overflow chain reaches a non-overflow page",
        ));
    }
    let next = u64::from_le_bytes(page[NEXT_OFFSET..NEXT_OFFSET + 8].try_into().expect("8"));
    let used = u32::from_le_bytes(page[USED_OFFSET..USED_OFFSET + 4].try_into().expect("4"));
    let used = used as usize;
    let last = (remaining_bytes as usize) <= capacity_bytes(page.len());
    let expected = (remaining_bytes as usize).min(capacity_bytes(page.len()));
    if used != expected || (next == PAGE_ID_NONE) != last {
        return Err(corruption(
            page_id,
            format!("overflow page holds {used} bytes, next {next}; expected {expected}"),
        ));
    }
    let result = visit(&page[DATA_OFFSET..DATA_OFFSET + used]);
    Ok((next, used, result))
}

/// Like `read_chain`, but never waits for I/O: returns the first page that is not resident
/// (the caller loads it and starts over), or None when `out` holds the whole value.
pub fn try_read_chain(
    pool: &BufferPool,
    first_page_id: PageId,
    length_bytes: u64,
    out: &mut Vec<u8>,
) -> Result<Option<PageId>> {
    out.reserve(length_bytes as usize);
    let mut remaining = length_bytes;
    let mut page_id = first_page_id;
    loop {
        let (next, used) = match read_page_optimistic(pool, page_id, remaining, out)? {
            Some(read) => read,
            None => {
                let Some(page) = pool.try_read(page_id)? else {
                    return Ok(Some(page_id));
                };
                let (next, used, ()) = parse_page(&page, page_id, remaining, |bytes| {
                    out.extend_from_slice(bytes)
                })?;
                (next, used)
            }
        };
        remaining -= used as u64;
        if next == PAGE_ID_NONE {
            return Ok(None);
        }
        page_id = next;
    }
}

/// Pages `load_chain_released` loads at most per call.
const LOAD_PAGES_MAX: usize = 256;

/// With no latch held (a fiber's lookup found `page_id`, a page of a chain, not resident and
/// let go of the leaf): loads the chain from there on, one page at a time as each names the
/// next, up to `LOAD_PAGES_MAX` pages, so the lookup that follows finds it resident.
/// Speculative, as every read without the leaf's latch: the chain may have been freed or
/// rewritten meanwhile (a freed page is not read, a page that is no overflow page ends the
/// walk), and what the value is, the next lookup decides under the leaf's latch.
pub fn load_chain_released(pool: &BufferPool, page_id: PageId) -> Result<()> {
    let mut page_id = page_id;
    for _ in 0..LOAD_PAGES_MAX {
        let next = match next_link(pool, page_id) {
            Some(next) => next,
            None => {
                pool.load_released(&[page_id])?;
                match next_link(pool, page_id) {
                    Some(next) => next,
                    None => return Ok(()),
                }
            }
        };
        if next == PAGE_ID_NONE {
            return Ok(());
        }
        page_id = next;
    }
    Ok(())
}

/// The next page id of a resident overflow page, read without a latch; None if the page is
/// not resident, kept changing or is not an overflow page.
fn next_link(pool: &BufferPool, page_id: PageId) -> Option<PageId> {
    let Optimistic::Page(page) = pool.optimistic(page_id) else {
        return None;
    };
    // SAFETY: the page's bytes are only read, within its length; the result is kept only if
    // `validate` holds.
    let bytes = unsafe { page.bytes() };
    let next = (PageHeaderAccessor::new(bytes).kind() == Some(PageKind::Overflow))
        .then(|| u64::from_le_bytes(bytes[NEXT_OFFSET..NEXT_OFFSET + 8].try_into().expect("8")));
    if page.validate() {
        next
    } else {
        None
    }
}

/// Appends the chain's `length_bytes` bytes to `out`.
pub fn read_chain(
    pool: &BufferPool,
    first_page_id: PageId,
    length_bytes: u64,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.reserve(length_bytes as usize);
    let mut remaining = length_bytes;
    let mut page_id = first_page_id;
    loop {
        let (next, used) = match read_page_optimistic(pool, page_id, remaining, out)? {
            Some(read) => read,
            None => {
                let (next, used, ()) = read_page(pool, page_id, remaining, |bytes| {
                    out.extend_from_slice(bytes)
                })?;
                (next, used)
            }
        };
        remaining -= used as u64;
        if next == PAGE_ID_NONE {
            return Ok(());
        }
        page_id = next;
    }
}

/// Longest chain `overwrite_chain` takes (its pages are latched together).
pub const OVERWRITE_PAGES_MAX: usize = 4;

/// Overwrites the bytes of a resident chain holding `tail.len()` bytes with `tail`, changing
/// only the pages whose bytes differ (others are not even dirtied); with `previous`, appends
/// the old bytes to it. The caller holds the exclusive latch of the leaf pointing at the chain,
/// so no reader can see a page change (readers of a chain hold its leaf). Returns false, with
/// nothing changed, if a page is not resident or the chain is longer than
/// `OVERWRITE_PAGES_MAX` pages: the caller writes a new chain instead.
pub fn overwrite_chain(
    pool: &BufferPool,
    first_page_id: PageId,
    tail: &[u8],
    lsn: u64,
    mut previous: Option<&mut Vec<u8>>,
) -> Result<bool> {
    let capacity = capacity_bytes(pool.page_size());
    if tail.len().div_ceil(capacity) > OVERWRITE_PAGES_MAX {
        return Ok(false);
    }
    // Pass 1, shared: every page resident, which ones differ.
    let mut differing = Vec::new();
    let mut remaining = tail.len() as u64;
    let mut page_id = first_page_id;
    for chunk in tail.chunks(capacity) {
        let Some(page) = pool.try_read(page_id)? else {
            return Ok(false);
        };
        let (next, _, same) = parse_page(&page, page_id, remaining, |bytes| {
            if let Some(previous) = previous.as_deref_mut() {
                previous.extend_from_slice(bytes);
            }
            bytes == chunk
        })?;
        if !same {
            differing.push((page_id, chunk));
        }
        remaining -= chunk.len() as u64;
        page_id = next;
    }
    // Pass 2, exclusive: all differing pages latched before any changes.
    let mut pages = Vec::with_capacity(differing.len());
    for (page_id, _) in &differing {
        match pool.try_write(*page_id)? {
            Some(page) => pages.push(page),
            None => return Ok(false),
        }
    }
    for (page, (_, chunk)) in pages.iter_mut().zip(&differing) {
        page[DATA_OFFSET..DATA_OFFSET + chunk.len()].copy_from_slice(chunk);
        page.set_lsn(lsn);
    }
    Ok(true)
}

/// The page ids of a chain, checking its structure (used by `check` and `page_ids`).
pub fn chain_page_ids(
    pool: &BufferPool,
    first_page_id: PageId,
    length_bytes: u64,
    out: &mut Vec<PageId>,
) -> Result<()> {
    let mut remaining = length_bytes;
    let mut page_id = first_page_id;
    loop {
        out.push(page_id);
        let (next, used, ()) = read_page(pool, page_id, remaining, |_| ())?;
        remaining -= used as u64;
        if next == PAGE_ID_NONE {
            return Ok(());
        }
        page_id = next;
    }
}

/// Frees a chain that is no longer reachable.
pub fn free_chain(pool: &BufferPool, first_page_id: PageId, length_bytes: u64) -> Result<()> {
    let mut page_ids = Vec::new();
    chain_page_ids(pool, first_page_id, length_bytes, &mut page_ids)?;
    for page_id in page_ids {
        pool.free(pool.write(page_id)?);
    }
    Ok(())
}

/// Frees a chain being built (its lengths are not known to the caller).
fn free_pages_from(pool: &BufferPool, first_page_id: PageId) -> Result<()> {
    let mut page_id = first_page_id;
    while page_id != PAGE_ID_NONE {
        let page = pool.write(page_id)?;
        let next = u64::from_le_bytes(page[NEXT_OFFSET..NEXT_OFFSET + 8].try_into().expect("8"));
        pool.free(page);
        page_id = next;
    }
    Ok(())
}

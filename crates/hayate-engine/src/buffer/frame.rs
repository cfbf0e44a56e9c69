//! Per-frame state.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use super::latch::Latch;
use crate::page::PAGE_ID_NONE;

pub(super) struct Frame {
    /// Protects the frame's bytes in the arena; its version lets readers go without it.
    pub latch: Latch,
    /// Page held, or PAGE_ID_NONE. Changed only under the page table mutex and the exclusive
    /// latch, so a reader holding the latch (or validating its version) sees a stable value.
    pub page_id: AtomicU64,
    /// Guards alive on this frame (and the loader while a read is in flight). Lock-free readers
    /// pin before they latch and check the page id, so a frame is claimed for another page only
    /// by moving its pin count from 0 to 1 (see `BufferPool::claim_frame`).
    pub pin_count: AtomicU32,
    /// Set when a write guard is dropped; cleared when the bytes are copied for write-back.
    pub dirty: AtomicBool,
    /// Second-chance bit of the clock.
    pub referenced: AtomicBool,
    /// A write-back of this frame is in flight; only one at a time, so writes of one page reach
    /// the store in order.
    pub io_busy: AtomicBool,
    /// The bytes hold the page (false while loading or after a failed read).
    pub valid: AtomicBool,
    /// The page is an inner B+tree page (kept resident).
    pub inner: AtomicBool,
}

impl Frame {
    pub fn new() -> Frame {
        Frame {
            latch: Latch::new(),
            page_id: AtomicU64::new(PAGE_ID_NONE),
            pin_count: AtomicU32::new(0),
            dirty: AtomicBool::new(false),
            referenced: AtomicBool::new(false),
            io_busy: AtomicBool::new(false),
            valid: AtomicBool::new(false),
            inner: AtomicBool::new(false),
        }
    }
}

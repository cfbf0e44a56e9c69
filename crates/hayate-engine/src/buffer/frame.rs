//! Per-frame state.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use parking_lot::RwLock;

use crate::page::PAGE_ID_NONE;

pub(super) struct Frame {
    /// Protects the frame's bytes in the arena.
    pub latch: RwLock<()>,
    /// Page held, or PAGE_ID_NONE. Changed only under the page table mutex.
    pub page_id: AtomicU64,
    /// Guards alive on this frame (and the loader while a read is in flight).
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
            latch: RwLock::new(()),
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

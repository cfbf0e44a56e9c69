//! The buffer pool: page frames in one arena allocated at start-up.
//!
//! Lifecycle of a page access:
//! 1. `read`/`write` look the page up in the page table without a lock (`table`) and pin its
//!    frame (pin count > 0 means the frame cannot be evicted); after a lock-free miss they ask
//!    again under the table mutex.
//! 2. The caller takes the frame's latch (shared or exclusive, `latch`), checks that the frame
//!    still holds the page, and gets a guard that derefs to the page bytes. `optimistic` reads a
//!    resident page at a latch version instead, with neither pin nor latch.
//! 3. On a miss, the clock hand picks a clean, unpinned victim; inner B+tree pages are skipped
//!    for two rounds so index pages stay resident. A dirty victim is written back first (the page
//!    stays in the table meanwhile, so nobody reads a stale copy from the store).
//! 4. Dropping a write guard marks the frame dirty; the background writer keeps the fraction of
//!    dirty frames below a target so a miss rarely waits for a write.
//!
//! The checkpoint gate: every operation that changes pages holds `operation()` (shared) for its
//! whole duration; a checkpoint takes it exclusively, so it sees only complete operations.

mod frame;
mod gate;
mod latch;
mod pool;
mod table;
mod writer;

pub use latch::LatchConfig;
pub use pool::{
    BufferPool, BufferPoolConfig, BufferStats, Optimistic, OptimisticPage, PageReadGuard,
    PageStamp, PageWriteGuard,
};

#[cfg(test)]
mod tests;

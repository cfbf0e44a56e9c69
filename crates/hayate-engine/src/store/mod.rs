//! Page stores: where page images live on the device.
//!
//! Two write policies, chosen when a database is created:
//! - `out_of_place` (default): dirty pages are appended to large segments written sequentially; a
//!   mapping table finds each page's latest copy; a cleaner reclaims segments.
//! - `in_place`: every page has a fixed home; before a page is first overwritten after a
//!   checkpoint its checkpointed image is saved to a journal (the classic baseline).
//!
//! Both keep the last checkpoint's page images intact until the next checkpoint is durable, so
//! recovery always starts from a structurally consistent tree and replays the logical log.

pub mod control;
pub mod memory;

use crate::error::Result;
use crate::page::PageId;

/// What the store knows of a checkpoint besides the pages. Opaque bytes for the layers above
/// (catalog, timestamps), written and read back atomically with the checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointMeta {
    pub checkpoint_id: u64,
    /// Log position from which replay must start to recover this checkpoint.
    pub redo_lsn: u64,
    /// Upper layers' state (catalog, next timestamps), encoded by them.
    pub payload: Vec<u8>,
}

/// Counters of a store, for reports.
#[derive(Debug, Clone, Default)]
pub struct StoreStats {
    pub pages_read: u64,
    pub pages_written: u64,
    /// Pages written by the cleaner (relocations) and by in-place journaling.
    pub pages_written_extra: u64,
    /// Device bytes written / page bytes the engine asked to write.
    pub write_amplification: f64,
    pub file_size_bytes: u64,
    pub live_pages: u64,
    pub free_segments: u64,
    pub total_segments: u64,
    pub cleaner_passes: u64,
    pub segments_cleaned: u64,
}

/// State captured by `begin_checkpoint` while the engine is quiescent.
pub struct StoreSnapshot {
    pub(crate) state: Box<dyn std::any::Any + Send>,
}

pub trait PageStore: Send + Sync {
    fn page_size(&self) -> usize;
    /// Reads and verifies the latest written image of a page.
    fn read_page(&self, page_id: PageId, buf: &mut [u8]) -> Result<()>;
    /// Writes sealed page images. Not durable, and not part of recovery, until a checkpoint
    /// that includes them completes.
    fn write_pages(&self, pages: &[(PageId, &[u8])]) -> Result<()>;
    /// Returns a page id that is not in use. Its content is undefined until first written.
    fn allocate_page_id(&self) -> Result<PageId>;
    /// Gives back a page id; it may be handed out again by `allocate_page_id`.
    fn free_page_id(&self, page_id: PageId);
    /// Number of page ids in use (allocated and not freed).
    fn live_page_count(&self) -> u64;
    /// Captures allocation state; called while no operation changes pages.
    fn begin_checkpoint(&self) -> StoreSnapshot;
    /// Writes the pages that were dirty at `begin_checkpoint` and makes the checkpoint durable:
    /// after it returns, recovery starts from this checkpoint.
    fn finish_checkpoint(
        &self,
        snapshot: StoreSnapshot,
        pages: &[(PageId, &[u8])],
        meta: &CheckpointMeta,
    ) -> Result<()>;
    /// The checkpoint the store was opened at (None for a new database).
    fn opened_checkpoint(&self) -> Option<CheckpointMeta>;
    /// Runs a cleaner pass if the store has one and it is due; returns segments reclaimed.
    fn clean(&self, _force: bool) -> Result<u64> {
        Ok(0)
    }
    /// True when the cleaner has moved pages and a checkpoint would free their old segments.
    fn wants_checkpoint(&self) -> bool {
        false
    }
    fn stats(&self) -> StoreStats;
    /// Verifies the store's own structures (mapping vs segment usage, free lists).
    fn check(&self) -> Result<()>;
}

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
pub mod in_place;
pub mod memory;
pub mod out_of_place;
pub mod page_ids;

use std::sync::Arc;

pub use control::WritePolicy;
pub use out_of_place::{CleanerConfig, VictimPolicy};

use crate::error::{Error, Result};
use crate::io::Io;
use crate::page::PageId;

/// How to create a store; an existing store keeps the policy and sizes it was created with.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Where page images are written. Default `WritePolicy::OutOfPlace`.
    pub policy: WritePolicy,
    /// Bytes per page (see `validate_page_size`). Default `PAGE_SIZE_DEFAULT`.
    pub page_size: usize,
    /// Pages per segment (out-of-place only).
    pub segment_pages: u64,
    /// The out-of-place store's cleaner; not persisted, so it applies to existing stores too.
    pub cleaner: CleanerConfig,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            policy: WritePolicy::OutOfPlace,
            page_size: crate::page::PAGE_SIZE_DEFAULT,
            segment_pages: 256,
            cleaner: CleanerConfig::default(),
        }
    }
}

/// Opens the store in `io`, or creates it with `config` when there is none. Returns the store
/// and whether it was created.
pub fn open(io: Arc<dyn Io>, config: &StoreConfig) -> Result<(Arc<dyn PageStore>, bool)> {
    match control::ControlFile::open(io.as_ref())? {
        Some(control) => {
            let store: Arc<dyn PageStore> = match control.current().policy {
                WritePolicy::OutOfPlace => Arc::new(out_of_place::OutOfPlaceStore::open(
                    io,
                    control,
                    config.cleaner.clone(),
                )?),
                WritePolicy::InPlace => Arc::new(in_place::InPlaceStore::open(io, control)?),
            };
            Ok((store, false))
        }
        None => {
            if io.list()?.iter().any(|name| name.starts_with("data.")) {
                return Err(Error::InvalidArgument(
                    "data file present but control file missing; refusing to overwrite".into(),
                ));
            }
            let store: Arc<dyn PageStore> = match config.policy {
                WritePolicy::OutOfPlace => Arc::new(out_of_place::OutOfPlaceStore::create(
                    io,
                    config.page_size,
                    config.segment_pages,
                    config.cleaner.clone(),
                )?),
                WritePolicy::InPlace => {
                    Arc::new(in_place::InPlaceStore::create(io, config.page_size)?)
                }
            };
            Ok((store, true))
        }
    }
}

/// What the store knows of a checkpoint besides the pages. Opaque bytes for the layers above
/// (catalog, timestamps), written and read back atomically with the checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointMeta {
    /// Increases with every checkpoint; names its checkpoint file.
    pub checkpoint_id: u64,
    /// Log position from which replay must start to recover this checkpoint.
    pub redo_lsn: u64,
    /// Upper layers' state (catalog, next timestamps), encoded by them.
    pub payload: Vec<u8>,
}

/// Counters of a store since it was opened, and its current size, for reports.
#[derive(Debug, Clone, Default)]
pub struct StoreStats {
    /// Page images read from the device (the cleaner's reads included).
    pub pages_read: u64,
    /// Page images the engine asked to write: write-back and checkpoints.
    pub pages_written: u64,
    /// Pages written by the cleaner (relocations) and by in-place journaling.
    pub pages_written_extra: u64,
    /// Device bytes written / page bytes the engine asked to write.
    pub write_amplification: f64,
    /// Size of the data file.
    pub file_size_bytes: u64,
    /// Page ids in use (allocated and not freed).
    pub live_pages: u64,
    /// Bytes of the live pages (`live_pages` times the page size).
    pub live_bytes: u64,
    /// Segments free for writing (out-of-place only).
    pub free_segments: u64,
    /// Segments in the data file (out-of-place only).
    pub total_segments: u64,
    /// Cleaner passes run (out-of-place only).
    pub cleaner_passes: u64,
    /// Segments the cleaner emptied (out-of-place only).
    pub segments_cleaned: u64,
}

impl StoreStats {
    /// Space amplification: data file bytes per byte of live pages (1.0 for an empty store).
    /// The out-of-place store's dead page images and free segments make it exceed 1.
    pub fn space_amplification(&self) -> f64 {
        if self.live_bytes == 0 {
            1.0
        } else {
            self.file_size_bytes as f64 / self.live_bytes as f64
        }
    }
}

/// State captured by `begin_checkpoint` while the engine is quiescent.
pub struct StoreSnapshot {
    pub(crate) state: Box<dyn std::any::Any + Send>,
}

/// Where page images live on the device (see the module docs); the buffer pool's backing.
pub trait PageStore: Send + Sync {
    /// Bytes per page, fixed when the store was created.
    fn page_size(&self) -> usize;
    /// Reads and verifies the latest written image of a page.
    fn read_page(&self, page_id: PageId, buf: &mut [u8]) -> Result<()>;
    /// Reads and verifies many pages, with as many reads in flight as the backend allows.
    fn read_pages(&self, pages: &mut [(PageId, &mut [u8])]) -> Result<()> {
        for (page_id, buf) in pages.iter_mut() {
            self.read_page(*page_id, buf)?;
        }
        Ok(())
    }
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
    /// The store's counters and sizes now.
    fn stats(&self) -> StoreStats;
    /// Verifies the store's own structures (mapping vs segment usage, free lists).
    fn check(&self) -> Result<()>;
}

#[cfg(test)]
mod tests;

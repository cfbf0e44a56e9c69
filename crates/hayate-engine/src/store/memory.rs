//! A page store in memory, for unit tests of the layers above. It verifies checksums like the
//! real stores but keeps nothing on a device and has no checkpoint durability.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::page_ids::PageIdAllocator;
use super::{CheckpointMeta, PageStore, StoreSnapshot, StoreStats};
use crate::error::{Error, Location, Result};
use crate::page::{self, PageId};

/// A page store in memory, for tests of the layers above (see the module docs).
pub struct MemoryStore {
    page_size: usize,
    state: Mutex<MemoryState>,
}

struct MemoryState {
    pages: HashMap<PageId, Vec<u8>>,
    ids: PageIdAllocator,
    stats: StoreStats,
    /// Page ids still to be given out before allocations fail as a full disk would (tests of
    /// what a failed allocation leaves); None: no limit.
    allocations_left: Option<u64>,
}

impl MemoryStore {
    /// An empty store of pages of `page_size` bytes.
    pub fn new(page_size: usize) -> MemoryStore {
        MemoryStore {
            page_size,
            state: Mutex::new(MemoryState {
                pages: HashMap::new(),
                ids: PageIdAllocator::new(1, Vec::new()),
                stats: StoreStats::default(),
                allocations_left: None,
            }),
        }
    }

    /// From now on, gives out `left` more page ids, then fails allocations with `DiskFull`
    /// (None: no limit again).
    pub fn limit_allocations(&self, left: Option<u64>) {
        self.state.lock().allocations_left = left;
    }

    /// Flips the bits of one byte of a stored page image (for corruption tests). Returns false
    /// if the page has no stored image.
    pub fn corrupt_page(&self, page_id: PageId, offset: usize) -> bool {
        let mut state = self.state.lock();
        match state.pages.get_mut(&page_id) {
            Some(image) if offset < image.len() => {
                image[offset] ^= 0xff;
                true
            }
            _ => false,
        }
    }
}

impl PageStore for MemoryStore {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn read_page(&self, page_id: PageId, buf: &mut [u8]) -> Result<()> {
        let mut state = self.state.lock();
        state.stats.pages_read += 1;
        let Some(image) = state.pages.get(&page_id) else {
            let location = Location {
                file: "memory".into(),
                page_id: Some(page_id),
                ..Default::default()
            };
            return Err(Error::corruption(location, "page was never written"));
        };
        buf.copy_from_slice(image);
        page::verify(buf, page_id, "memory", 0)
    }

    fn write_pages(&self, pages: &[(PageId, &[u8])]) -> Result<()> {
        let mut state = self.state.lock();
        for (page_id, image) in pages {
            debug_assert_eq!(image.len(), self.page_size);
            state.pages.insert(*page_id, image.to_vec());
            state.stats.pages_written += 1;
        }
        Ok(())
    }

    fn allocate_page_id(&self) -> Result<PageId> {
        let mut state = self.state.lock();
        match &mut state.allocations_left {
            Some(0) => {
                return Err(Error::DiskFull {
                    file: "memory".into(),
                })
            }
            Some(left) => *left -= 1,
            None => {}
        }
        Ok(state.ids.allocate().0)
    }

    fn free_page_id(&self, page_id: PageId) {
        self.state.lock().ids.free(page_id);
    }

    fn live_page_count(&self) -> u64 {
        self.state.lock().ids.live_count()
    }

    fn begin_checkpoint(&self) -> StoreSnapshot {
        StoreSnapshot {
            state: Box::new(()),
        }
    }

    fn finish_checkpoint(
        &self,
        _snapshot: StoreSnapshot,
        pages: &[(PageId, &[u8])],
        _meta: &CheckpointMeta,
    ) -> Result<()> {
        self.write_pages(pages)
    }

    fn opened_checkpoint(&self) -> Option<CheckpointMeta> {
        None
    }

    fn stats(&self) -> StoreStats {
        self.state.lock().stats.clone()
    }

    fn check(&self) -> Result<()> {
        Ok(())
    }
}

//! Page id allocation, shared by the page stores.
//!
//! Invariant: the ids in use are exactly `1..next` minus the free list; the free list holds no
//! duplicates and nothing outside `1..next`. Freed ids are reused last-freed first.

use crate::page::{PageId, PAGE_ID_NONE};

#[derive(Debug, Clone)]
pub struct PageIdAllocator {
    next: PageId,
    free: Vec<PageId>,
}

impl PageIdAllocator {
    pub fn new(next: PageId, free: Vec<PageId>) -> PageIdAllocator {
        assert!(next > PAGE_ID_NONE, "page id 0 is never allocated");
        PageIdAllocator { next, free }
    }

    /// Returns an id not in use, and whether it was never used before (beyond the old end).
    pub fn allocate(&mut self) -> (PageId, bool) {
        if let Some(page_id) = self.free.pop() {
            return (page_id, false);
        }
        let page_id = self.next;
        self.next += 1;
        (page_id, true)
    }

    pub fn free(&mut self, page_id: PageId) {
        assert!(
            page_id != PAGE_ID_NONE && page_id < self.next,
            "freeing unknown page {page_id}"
        );
        debug_assert!(!self.free.contains(&page_id), "page {page_id} freed twice");
        self.free.push(page_id);
    }

    /// The first id never allocated.
    pub fn next(&self) -> PageId {
        self.next
    }

    pub fn free_ids(&self) -> &[PageId] {
        &self.free
    }

    pub fn live_count(&self) -> u64 {
        self.next - 1 - self.free.len() as u64
    }

    /// Checks the invariant; the error says what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::with_capacity(self.free.len());
        for &page_id in &self.free {
            if page_id == PAGE_ID_NONE || page_id >= self.next {
                return Err(format!("free page list holds unknown page {page_id}"));
            }
            if !seen.insert(page_id) {
                return Err(format!("free page list holds page {page_id} twice"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_reuses_and_counts() {
        let mut ids = PageIdAllocator::new(1, Vec::new());
        assert_eq!(ids.allocate(), (1, true));
        assert_eq!(ids.allocate(), (2, true));
        ids.free(1);
        assert_eq!(ids.live_count(), 1);
        assert_eq!(ids.allocate(), (1, false));
        assert!(ids.check().is_ok());
        let broken = PageIdAllocator::new(3, vec![2, 2]);
        assert!(broken.check().is_err());
        assert!(PageIdAllocator::new(3, vec![5]).check().is_err());
    }
}

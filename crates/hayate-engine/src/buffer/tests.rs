use std::sync::Arc;

use super::*;
use crate::page::{PageKind, PAGE_HEADER_SIZE};
use crate::store::memory::MemoryStore;
use crate::store::PageStore;

fn pool(frames: usize) -> Arc<BufferPool> {
    let store: Arc<dyn PageStore> = Arc::new(MemoryStore::new(4096));
    let config = BufferPoolConfig {
        frame_count: frames,
        ..BufferPoolConfig::default()
    };
    BufferPool::new(store, config).expect("pool")
}

#[test]
fn pages_survive_eviction_in_a_tiny_pool() {
    let pool = pool(8);
    let mut ids = Vec::new();
    for value in 0..200u32 {
        let mut page = pool.allocate(PageKind::BtreeLeaf).expect("allocate");
        page[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + 4].copy_from_slice(&value.to_le_bytes());
        ids.push(page.page_id());
    }
    for (value, id) in ids.iter().enumerate() {
        let page = pool.read(*id).expect("read");
        let stored = u32::from_le_bytes(
            page[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + 4]
                .try_into()
                .unwrap(),
        );
        assert_eq!(stored as usize, value, "page {id}");
    }
    let stats = pool.stats();
    assert!(stats.misses >= 190, "tiny pool must miss: {stats:?}");
    assert!(
        stats.pages_written >= 190,
        "dirty pages must be written back: {stats:?}"
    );
}

#[test]
fn all_frames_pinned_is_an_error_not_a_hang() {
    let pool = pool(8);
    let guards: Vec<_> = (0..8)
        .map(|_| pool.allocate(PageKind::BtreeLeaf).unwrap())
        .collect();
    assert!(pool.allocate(PageKind::BtreeLeaf).is_err());
    drop(guards);
    assert!(pool.allocate(PageKind::BtreeLeaf).is_ok());
}

#[test]
fn freed_pages_are_reused() {
    let pool = pool(8);
    let page = pool.allocate(PageKind::Overflow).unwrap();
    let id = page.page_id();
    pool.free(page);
    let again = pool.allocate(PageKind::Overflow).unwrap();
    assert_eq!(again.page_id(), id);
}

#[test]
fn a_stamp_holds_only_while_nothing_changed_the_page() {
    let pool = pool(8);
    let id = pool.allocate(PageKind::BtreeLeaf).unwrap().page_id();
    let stamp = pool.read(id).unwrap().stamp();
    // Shared holds and optimistic reads leave it as it was.
    let again = pool.read(id).unwrap();
    assert_eq!(again.stamp(), stamp);
    drop(again);
    let view = pool.unchanged(&stamp).expect("unchanged");
    assert!(view.validate());
    // Any exclusive hold moves it on, even one that writes nothing.
    drop(pool.write(id).unwrap());
    assert!(!view.validate());
    assert!(pool.unchanged(&stamp).is_none());
    // A page evicted and loaded again, in whichever frame, is not the page stamped.
    let stamp = pool.read(id).unwrap().stamp();
    for _ in 0..16 {
        drop(pool.allocate(PageKind::BtreeLeaf).unwrap());
    }
    assert!(pool.unchanged(&stamp).is_none(), "evicted");
    let reloaded = pool.read(id).unwrap();
    assert!(pool.unchanged(&stamp).is_none(), "loaded again");
    assert!(pool.unchanged(&reloaded.stamp()).is_some());
    // A freed page's stamp does not hold either.
    let stamp = reloaded.stamp();
    drop(reloaded);
    pool.free(pool.write(id).unwrap());
    assert!(pool.unchanged(&stamp).is_none(), "freed");
}

#[test]
fn concurrent_increments_are_not_lost() {
    let pool = pool(16);
    let ids: Vec<_> = (0..40)
        .map(|_| pool.allocate(PageKind::BtreeLeaf).unwrap().page_id())
        .collect();
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let pool = pool.clone();
            let ids = ids.clone();
            std::thread::spawn(move || {
                for round in 0..500 {
                    let id = ids[(round * 7 + thread * 13) % ids.len()];
                    let mut page = pool.write(id).unwrap();
                    let range = PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + 8;
                    let count = u64::from_le_bytes(page[range.clone()].try_into().unwrap());
                    page[range].copy_from_slice(&(count + 1).to_le_bytes());
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let total: u64 = ids
        .iter()
        .map(|id| {
            let page = pool.read(*id).unwrap();
            u64::from_le_bytes(
                page[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + 8]
                    .try_into()
                    .unwrap(),
            )
        })
        .sum();
    assert_eq!(total, 2000);
}

#[test]
fn take_dirty_pages_returns_sealed_copies_and_cleans() {
    // The background writer must leave the page dirty for the checkpoint to take it (with the
    // default target, one dirty frame of 8 is enough to make it write).
    let store: Arc<dyn PageStore> = Arc::new(MemoryStore::new(4096));
    let config = BufferPoolConfig {
        frame_count: 8,
        dirty_fraction_target: 1.0,
        ..BufferPoolConfig::default()
    };
    let pool = BufferPool::new(store, config).expect("pool");
    let id = pool.allocate(PageKind::BtreeLeaf).unwrap().page_id();
    let gate = pool.quiesce();
    let pages = pool.take_dirty_pages();
    drop(gate);
    pool.finish_checkpoint_pages(true);
    assert_eq!(pages.len(), 1);
    assert_eq!(pages[0].0, id);
    crate::page::verify(&pages[0].1, id, "test", 0).expect("sealed");
    assert_eq!(pool.stats().dirty_frames, 0);
}

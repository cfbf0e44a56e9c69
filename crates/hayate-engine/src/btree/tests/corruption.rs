//! A flipped byte in a stored page image surfaces as `Error::Corruption` naming the page, from
//! lookups and from `check`, never as a panic.

use std::sync::Arc;

use crate::BTree;
use crate::Error;
use crate::MemoryStore;
use crate::PageStore;
use crate::{BufferPool, BufferPoolConfig};

#[test]
fn btree_corrupt_page_is_reported_not_panicked() {
    let memory = Arc::new(MemoryStore::new(4096));
    let store: Arc<dyn PageStore> = memory.clone();
    let config = BufferPoolConfig {
        frame_count: 8,
        ..BufferPoolConfig::default()
    };
    let pool = BufferPool::new(store, config).expect("pool");
    let tree = BTree::open(BTree::create(&pool).expect("create"));
    let key = |number: u32| format!("key{number:06}").into_bytes();
    for number in 0..3000 {
        tree.put(&pool, &key(number), &[3u8; 60], 1).expect("put");
    }
    pool.flush_all().expect("flush");
    let page_ids = tree.page_ids(&pool).expect("page ids");
    // Evict everything: touching many other pages pushes the tree's pages out of 8 frames.
    let victim = *page_ids.last().expect("a leaf");
    for _ in 0..40 {
        let page = pool
            .allocate(crate::page::PageKind::Overflow)
            .expect("allocate");
        pool.free(page);
    }
    let filler: Vec<_> = (0..16)
        .map(|_| {
            pool.allocate(crate::page::PageKind::Overflow)
                .expect("allocate")
                .page_id()
        })
        .collect();
    pool.flush_all().expect("flush");
    for &page_id in &filler {
        drop(pool.read(page_id).expect("read"));
    }
    assert!(memory.corrupt_page(victim, 2000), "victim was written");
    let names_victim = |error: &Error| match error {
        Error::Corruption { location, .. } => location.page_id == Some(victim),
        _ => false,
    };
    let error = tree.check(&pool).expect_err("check must fail");
    assert!(names_victim(&error), "{error}");
    let mut failed_gets = 0;
    for number in 0..3000 {
        match tree.get(&pool, &key(number)) {
            Ok(value) => assert_eq!(value, Some(vec![3u8; 60])),
            Err(error) => {
                assert!(names_victim(&error), "{error}");
                failed_gets += 1;
            }
        }
    }
    assert!(failed_gets > 0, "the corrupt leaf must be unreadable");
}

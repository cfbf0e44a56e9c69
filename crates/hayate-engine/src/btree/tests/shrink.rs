//! Growth to depth three or more, then deletion of everything: the tree shrinks back to its
//! single root leaf and every other page is freed.

use crate::BTree;

#[test]
fn btree_grows_then_shrinks_to_one_leaf() {
    let pool = super::pool(4096, 16);
    let tree = BTree::open(BTree::create(&pool).expect("create"));
    let live_empty = pool.store().live_page_count();
    // Long keys keep the fan-out low, so depth three comes quickly.
    let key = |number: u32| format!("{number:0>8}{}", "k".repeat(300)).into_bytes();
    let mut count = 0;
    while tree.check(&pool).expect("check").depth < 3 {
        for _ in 0..200 {
            tree.put(&pool, &key(count), &[1u8; 50], 1).expect("put");
            count += 1;
        }
    }
    // Delete in an order that exercises left and right siblings.
    for number in (0..count).step_by(2).chain((1..count).step_by(2).rev()) {
        assert!(tree
            .delete(&pool, &key(number), 2)
            .expect("delete")
            .is_some());
    }
    let report = tree.check(&pool).expect("check");
    assert_eq!((report.depth, report.leaf_pages, report.entries), (1, 1, 0));
    for _ in 0..1000 {
        if pool.store().live_page_count() == live_empty {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(pool.store().live_page_count(), live_empty);
    assert_eq!(tree.page_ids(&pool).expect("page ids"), vec![tree.root()]);
}

use std::ops::Bound;
use std::sync::Arc;

use super::*;
use crate::buffer::{BufferPool, BufferPoolConfig};
use crate::error::Error;
use crate::store::memory::MemoryStore;
use crate::store::PageStore;

/// A buffer pool of `frames` frames over an in-memory store.
fn pool(page_size: usize, frames: usize) -> Arc<BufferPool> {
    let store: Arc<dyn PageStore> = Arc::new(MemoryStore::new(page_size));
    let config = BufferPoolConfig {
        frame_count: frames,
        ..BufferPoolConfig::default()
    };
    BufferPool::new(store, config).expect("pool")
}

/// Live pages once in-flight write-backs have landed (they hold back freed ids).
fn live_pages_settled(pool: &BufferPool, expected: u64) -> u64 {
    for _ in 0..1000 {
        if pool.store().live_page_count() == expected {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    pool.store().live_page_count()
}

fn key(number: u32) -> Vec<u8> {
    format!("key-{number:08}").into_bytes()
}

#[test]
fn put_get_replace_delete() {
    let pool = pool(4096, 16);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    assert_eq!(tree.put(&pool, b"a", b"1", 1).unwrap(), None);
    assert_eq!(tree.put(&pool, b"a", b"2", 2).unwrap(), Some(b"1".to_vec()));
    assert_eq!(tree.get(&pool, b"a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(tree.get(&pool, b"b").unwrap(), None);
    assert_eq!(tree.delete(&pool, b"a", 3).unwrap(), Some(b"2".to_vec()));
    assert_eq!(tree.delete(&pool, b"a", 4).unwrap(), None);
    assert_eq!(tree.check(&pool).unwrap().entries, 0);
}

#[test]
fn page_sized_values_use_overflow_chains() {
    let pool = pool(4096, 8);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    let live_before = pool.store().live_page_count();
    let value: Vec<u8> = (0..4096u32).map(|byte| byte as u8).collect();
    tree.put(&pool, b"big", &value, 1).unwrap();
    assert_eq!(tree.get(&pool, b"big").unwrap(), Some(value.clone()));
    // An overflow page holds 4,048 bytes: the first 48 bytes stay in the leaf.
    let report = tree.check(&pool).unwrap();
    assert_eq!(report.overflow_pages, 1);
    assert_eq!(tree.put(&pool, b"big", b"small", 2).unwrap(), Some(value));
    assert_eq!(live_pages_settled(&pool, live_before), live_before);
    // Whole pages (no head), and a remainder too long for the leaf (no head either).
    for (length, pages) in [(2 * 4048, 2), (4048 + 2000, 2), (3 * 4048 + 7, 3)] {
        let value: Vec<u8> = (0..length as u32).map(|byte| (byte % 251) as u8).collect();
        tree.put(&pool, b"big", &value, 3).unwrap();
        assert_eq!(tree.get(&pool, b"big").unwrap(), Some(value.clone()));
        assert_eq!(tree.check(&pool).unwrap().overflow_pages, pages, "{length}");
    }
}

/// A value replaced by one of the same length and head keeps its chain: the changed pages
/// are overwritten in place, nothing is allocated or freed; another length writes a new chain.
#[test]
fn same_shape_overflow_values_are_overwritten_in_place() {
    let pool = pool(4096, 16);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    for (length, pages) in [(4117usize, 1usize), (3 * 4048 + 7, 3)] {
        let mut value: Vec<u8> = (0..length as u32).map(|byte| (byte % 251) as u8).collect();
        tree.put(&pool, b"big", &value, 1).unwrap();
        let ids = tree.page_ids(&pool).unwrap();
        let live = pool.store().live_page_count();
        // A change in the leaf's head, then one in the chain's last page.
        for (step, index) in [(2u64, 10usize), (3, length - 5)] {
            let old = value.clone();
            value[index] = value[index].wrapping_add(7);
            assert_eq!(tree.put(&pool, b"big", &value, step).unwrap(), Some(old));
            assert_eq!(tree.get(&pool, b"big").unwrap(), Some(value.clone()));
            assert_eq!(tree.page_ids(&pool).unwrap(), ids, "{length} at {index}");
            assert_eq!(pool.store().live_page_count(), live);
        }
        assert_eq!(tree.check(&pool).unwrap().overflow_pages, pages as u64);
        // One byte longer: a new chain.
        value.push(1);
        tree.put(&pool, b"big", &value, 4).unwrap();
        assert_eq!(tree.get(&pool, b"big").unwrap(), Some(value.clone()));
        assert_ne!(tree.page_ids(&pool).unwrap(), ids);
        assert_eq!(tree.delete(&pool, b"big", 5).unwrap(), Some(value));
    }
    // A chain longer than overwrite_chain takes is written anew, with the right bytes.
    let length = (overflow::OVERWRITE_PAGES_MAX + 1) * 4048;
    let mut value = vec![3u8; length];
    tree.put(&pool, b"long", &value, 6).unwrap();
    let ids = tree.page_ids(&pool).unwrap();
    value[length / 2] = 4;
    tree.put(&pool, b"long", &value, 7).unwrap();
    assert_eq!(tree.get(&pool, b"long").unwrap(), Some(value));
    assert_ne!(tree.page_ids(&pool).unwrap(), ids);
    tree.check(&pool).unwrap();
}

#[test]
fn limits_are_enforced() {
    let pool = pool(4096, 8);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    let long_key = vec![1u8; 4096 / 8 + 1];
    assert!(matches!(
        tree.put(&pool, &long_key, b"", 1),
        Err(Error::ValueTooLarge { .. })
    ));
    let huge = vec![0u8; VALUE_LENGTH_MAX + 1];
    assert!(matches!(
        tree.put(&pool, b"k", &huge, 1),
        Err(Error::ValueTooLarge { .. })
    ));
}

#[test]
fn splits_scans_and_merges() {
    let pool = pool(4096, 12);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    for number in 0..3000 {
        tree.put(&pool, &key(number), &[number as u8; 40], 1)
            .unwrap();
    }
    let report = tree.check(&pool).unwrap();
    assert!(report.depth >= 2, "{report:?}");
    assert_eq!(report.entries, 3000);
    let start = key(100);
    let end = key(2000);
    let mut cursor = tree.scan(&pool, Bound::Included(&start), Bound::Excluded(&end));
    let mut expected = 100;
    while let Some((found, value)) = cursor.next(&pool).unwrap() {
        assert_eq!(found, key(expected));
        assert_eq!(value, vec![expected as u8; 40]);
        expected += 1;
    }
    assert_eq!(expected, 2000);
    for number in (0..3000).step_by(2) {
        assert!(tree.delete(&pool, &key(number), 2).unwrap().is_some());
    }
    let report = tree.check(&pool).unwrap();
    assert_eq!(report.entries, 1500);
    for number in 0..3000 {
        let found = tree.get(&pool, &key(number)).unwrap();
        assert_eq!(found.is_some(), number % 2 == 1);
    }
}

#[test]
fn destroy_frees_every_page() {
    let pool = pool(4096, 16);
    let live_before = pool.store().live_page_count();
    let tree = BTree::open(BTree::create(&pool).unwrap());
    for number in 0..2000 {
        let value = vec![7u8; (number as usize * 37) % 3000];
        tree.put(&pool, &key(number), &value, 1).unwrap();
    }
    let page_ids = tree.page_ids(&pool).unwrap();
    let expected = live_before + page_ids.len() as u64;
    assert_eq!(live_pages_settled(&pool, expected), expected);
    tree.destroy(&pool).unwrap();
    assert_eq!(live_pages_settled(&pool, live_before), live_before);
}

/// The value stored under key number `number` in the concurrent test: its own digits repeated,
/// some long enough for overflow chains, so a reader can tell a value of the wrong key or a
/// torn one.
fn value_of(number: u32, generation: u32) -> Vec<u8> {
    let length = match number % 7 {
        0 => 2000, // overflow chain with 4 KiB pages
        _ => 20 + (number % 50) as usize,
    };
    let pattern = format!("{number:08}/{generation:04};");
    pattern.bytes().cycle().take(length).collect()
}

/// Writers insert, replace and delete keys (splitting and merging nodes, freeing and reusing
/// pages) in a pool small enough to evict, while readers look keys up through the optimistic
/// descent. Every value found must be one a writer stored under that key.
#[test]
fn lookups_race_splits_merges_and_evictions() {
    let pool = pool(4096, 96);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    let key_count = 4000u32;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let found = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..2u32)
            .map(|writer| {
                let (pool, stop) = (&pool, &stop);
                scope.spawn(move || {
                    let mut state = 0x9e37_79b9u32 ^ (writer + 1);
                    for round in 0..30_000u32 {
                        state ^= state << 13;
                        state ^= state >> 17;
                        state ^= state << 5;
                        // Each writer owns the keys of its parity, so values are predictable.
                        let number = (state % (key_count / 2)) * 2 + writer;
                        if round % 3 == 2 {
                            tree.delete(pool, &key(number), 1).unwrap();
                        } else {
                            let value = value_of(number, round % 10_000);
                            tree.put(pool, &key(number), &value, 1).unwrap();
                        }
                    }
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                })
            })
            .collect();
        for reader in 0..2u32 {
            let (pool, stop, found) = (&pool, &stop, &found);
            scope.spawn(move || {
                let mut number = reader * 7;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    number = (number + 13) % key_count;
                    let Some(value) = tree.get(pool, &key(number)).unwrap() else {
                        continue;
                    };
                    let text = String::from_utf8(value.clone()).expect("ascii value");
                    let generation: u32 = text[9..13].parse().expect("generation digits");
                    assert_eq!(value, value_of(number, generation), "key {number}");
                    found.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        for writer in writers {
            writer.join().unwrap();
        }
    });
    assert!(
        found.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "readers found nothing"
    );
    tree.check(&pool).expect("tree stays well formed");
}

mod concurrent;
mod corruption;
mod model;
mod shrink;

#[test]
fn a_load_in_key_order_fills_the_leaves() {
    let pool = pool(4096, 256);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    for number in 0..20_000 {
        tree.put(&pool, &key(number), &[9u8; 100], 1).unwrap();
    }
    let report = tree.check(&pool).unwrap();
    assert_eq!(report.entries, 20_000);
    assert!(
        report.leaf_fill() >= 0.9,
        "leaves {:.1}% full after an in-order load",
        report.leaf_fill() * 100.0
    );

    // Random order still splits evenly: leaves end about 70% full, never nearly empty.
    let random = BTree::open(BTree::create(&pool).unwrap());
    let mut numbers: Vec<u32> = (0..20_000).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for index in (1..numbers.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        numbers.swap(index, (state % (index as u64 + 1)) as usize);
    }
    for &number in &numbers {
        random.put(&pool, &key(number), &[9u8; 100], 1).unwrap();
    }
    let report = random.check(&pool).unwrap();
    assert!(
        report.leaf_fill() > 0.5 && report.leaf_fill() < 0.9,
        "{report:?}"
    );
}

/// 4,000 keys of 100-byte values in a tree over a simulated disk (whose reads can be slowed
/// down) behind a pool of 16 frames: most pages are not resident.
fn slow_disk_tree() -> (Arc<crate::io::sim::SimIo>, Arc<BufferPool>, BTree) {
    use crate::io::sim::{SimConfig, SimIo};
    use crate::store::in_place::InPlaceStore;

    let disk = Arc::new(SimIo::new(SimConfig::default()));
    let store: Arc<dyn PageStore> = Arc::new(InPlaceStore::create(disk.clone(), 4096).unwrap());
    let config = BufferPoolConfig {
        frame_count: 16,
        ..BufferPoolConfig::default()
    };
    let pool = BufferPool::new(store, config).unwrap();
    let tree = BTree::open(BTree::create(&pool).unwrap());
    for number in 0..4000 {
        tree.put(&pool, &key(number), &[7u8; 100], 1).unwrap();
    }
    (disk, pool, tree)
}

#[test]
fn a_writer_on_a_fiber_holds_no_latch_while_it_waits_for_a_page() {
    use crate::fiber::{Fiber, Step, Wait};

    let (disk, pool, tree) = slow_disk_tree();
    assert_eq!(
        tree.check(&pool).unwrap().depth,
        2,
        "a root over the leaves"
    );
    // The first leaf was evicted long ago (16 frames); every read of it now takes 20 ms.
    disk.set_read_latency(Some(std::time::Duration::from_millis(20)));
    let mut writer = Fiber::new(|| tree.put(&pool, &key(0), b"new", 2));
    let Step::Wait(Wait::Until(_)) = writer.resume() else {
        panic!("the writer did not wait for the simulated read");
    };
    // Another thread takes the root exclusively: it waits while the writer holds it shared.
    let root_free = std::thread::scope(|scope| {
        let taker = scope.spawn(|| drop(pool.write(tree.root()).unwrap()));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !taker.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let free = taker.is_finished();
        // Either way the writer goes on, so a waiting taker gets the root in the end.
        loop {
            match writer.resume() {
                Step::Done(result) => {
                    result.unwrap();
                    break;
                }
                Step::Wait(Wait::Until(deadline)) => crate::fiber::sleep_thread_until(deadline),
                Step::Wait(_) => {}
            }
        }
        free
    });
    assert!(
        root_free,
        "the writer waited for its leaf holding the root's latch"
    );
    drop(writer);
    disk.set_read_latency(None);
    assert_eq!(tree.get(&pool, &key(0)).unwrap(), Some(b"new".to_vec()));
}

#[test]
fn deletes_on_a_fiber_hold_no_exclusive_latch_while_they_wait_for_a_page() {
    use crate::buffer::Optimistic;
    use crate::fiber::{Fiber, Step, Wait};

    let (disk, pool, tree) = slow_disk_tree();
    let leaves_before = tree.check(&pool).unwrap().leaf_pages;
    // Deleting the first keys in order empties leaf after leaf: each underflowing leaf is
    // merged with (or takes cells from) its right sibling, evicted long ago (16 frames).
    disk.set_read_latency(Some(std::time::Duration::from_millis(5)));
    let mut deleter = Fiber::new(|| {
        for number in 0..600 {
            assert!(tree.delete(&pool, &key(number), 2)?.is_some());
        }
        Ok::<_, Error>(())
    });
    let mut waits = 0;
    loop {
        match deleter.resume() {
            Step::Done(result) => {
                result.unwrap();
                break;
            }
            Step::Wait(wait) => {
                waits += 1;
                assert!(
                    !matches!(pool.optimistic(tree.root()), Optimistic::Busy),
                    "the deleter waits for a read holding the root's exclusive latch"
                );
                if let Wait::Until(deadline) = wait {
                    crate::fiber::sleep_thread_until(deadline);
                }
            }
        }
    }
    drop(deleter);
    disk.set_read_latency(None);
    assert!(waits > 10, "{waits} waits for reads");
    let report = tree.check(&pool).unwrap();
    assert_eq!(report.entries, 3400);
    assert!(
        report.leaf_pages < leaves_before,
        "no leaf was merged: {} leaves, {leaves_before} before",
        report.leaf_pages
    );
    for number in [0, 599, 600, 3999] {
        let expected = (number >= 600).then(|| vec![7u8; 100]);
        assert_eq!(tree.get(&pool, &key(number)).unwrap(), expected);
    }
}

#[test]
fn a_split_that_cannot_allocate_every_page_it_needs_changes_nothing() {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    let store = Arc::new(MemoryStore::new(4096));
    let config = BufferPoolConfig {
        frame_count: 256,
        ..BufferPoolConfig::default()
    };
    let pool = BufferPool::new(store.clone() as Arc<dyn PageStore>, config).unwrap();
    let tree = BTree::open(BTree::create(&pool).unwrap());
    let mut numbers: Vec<u32> = (0..20_000).collect();
    numbers.shuffle(&mut rand::rngs::StdRng::seed_from_u64(7));
    // Long keys: inner nodes fill (and split) often.
    let long_key = |number: u32| format!("{:0>200}", number).into_bytes();
    let mut refused = 0;
    for (done, &number) in numbers.iter().enumerate() {
        // One page id to spare: a leaf split alone succeeds, a split that would go on up
        // must fail before it changes anything.
        store.limit_allocations(Some(1));
        match tree.put(&pool, &long_key(number), &[7u8; 40], 1) {
            Ok(_) => {}
            Err(Error::DiskFull { .. }) => {
                refused += 1;
                assert_eq!(tree.get(&pool, &long_key(number)).unwrap(), None);
                assert_eq!(tree.check(&pool).unwrap().entries, done as u64);
                store.limit_allocations(None);
                tree.put(&pool, &long_key(number), &[7u8; 40], 1).unwrap();
            }
            Err(error) => panic!("{error}"),
        }
    }
    store.limit_allocations(None);
    assert!(refused > 0, "no split went past the leaf's parent");
    let report = tree.check(&pool).unwrap();
    assert_eq!(report.entries, 20_000);
    assert!(report.depth >= 3, "{report:?}");
    for number in [0, 9_999, 19_999] {
        assert_eq!(
            tree.get(&pool, &long_key(number)).unwrap(),
            Some(vec![7u8; 40])
        );
    }
}

#[test]
fn a_descent_reports_only_the_fences_of_its_own_path() {
    use super::tree::{LeafFences, Seek};

    let pool = pool(4096, 64);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    for number in 0..2000 {
        tree.put(&pool, &key(number), &[1u8; 50], 1).unwrap();
    }
    // Fences left by an earlier attempt (a retry after a miss on a fiber reuses them).
    let mut fences = LeafFences {
        low: Some(b"stale low".to_vec()),
        high: Some(b"stale high".to_vec()),
        parent: None,
    };
    let first = tree
        .descend_shared(&pool, b"", Seek::At, Some(&mut fences), 0, |_| false)
        .unwrap();
    drop(first);
    assert_eq!(fences.low, None, "the leftmost leaf has no lower fence");
    assert!(fences
        .high
        .as_ref()
        .is_some_and(|high| high != b"stale high"));
    let last = tree
        .descend_shared(&pool, b"", Seek::Last, Some(&mut fences), 0, |_| false)
        .unwrap();
    drop(last);
    assert_eq!(fences.high, None, "the rightmost leaf has no upper fence");
}

/// `get_sorted` answers as a `get` of each key: sorted key sets with absent keys, repeats,
/// keys past either end and keys over the length limit, over a tree of many leaves (some
/// values in overflow chains) in a pool smaller than the tree, after deletes leave gaps.
#[test]
fn get_sorted_equals_a_get_of_each_key() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    let pool = pool(4096, 64);
    let tree = BTree::open(BTree::create(&pool).unwrap());
    let mut random = StdRng::seed_from_u64(7);
    for number in (0..6000u32).step_by(3) {
        let length = if number % 97 == 0 {
            5000
        } else {
            20 + number as usize % 60
        };
        tree.put(&pool, &key(number), &vec![(number % 251) as u8; length], 1)
            .unwrap();
    }
    for number in (0..6000u32).step_by(21) {
        tree.delete(&pool, &key(number), 2).unwrap();
    }
    let too_long = vec![b'k'; 5000];
    for round in 0..40 {
        let mut keys: Vec<Vec<u8>> = (0..random.gen_range(1..400))
            .map(|_| key(random.gen_range(0..6100)))
            .collect();
        if round % 4 == 0 {
            keys.push(too_long.clone());
            keys.push(Vec::new());
        }
        keys.sort();
        let expected: Vec<Option<Vec<u8>>> =
            keys.iter().map(|k| tree.get(&pool, k).unwrap()).collect();
        assert_eq!(
            tree.get_sorted(&pool, &keys).unwrap(),
            expected,
            "round {round}"
        );
    }
    assert_eq!(
        tree.get_sorted(&pool, &[]).unwrap(),
        Vec::<Option<Vec<u8>>>::new()
    );
}

/// A forward cursor that goes on after splits and merges beside it (done between its batches)
/// returns every key that was there all along, once and in order, with the value the tree
/// holds when the batch is read. (Keys put behind where it resumes, its last leaf's upper
/// fence, are not seen: a snapshot would not see them either.) Its next leaf is found in the
/// parent it saw (`BTree::leaf_from_parent`) only while that parent is unchanged.
#[test]
fn a_cursor_goes_on_exactly_after_the_tree_changed_under_it() {
    use rand::{Rng, SeedableRng};
    for seed in 0..8u64 {
        let mut random = rand::rngs::StdRng::seed_from_u64(seed);
        let pool = pool(4096, 4096);
        let tree = BTree::open(BTree::create(&pool).unwrap());
        let mut model = std::collections::BTreeMap::new();
        for number in (0..40_000).step_by(4) {
            let value = vec![(number % 251) as u8; 40];
            tree.put(&pool, &key(number), &value, 1).unwrap();
            model.insert(key(number), value);
        }
        let mut all_along: std::collections::BTreeSet<Vec<u8>> = model.keys().cloned().collect();
        let mut cursor = tree.scan(&pool, Bound::Unbounded, Bound::Unbounded);
        let mut seen = Vec::new();
        let mut batches = 0;
        loop {
            let batch = cursor.next_batch(&pool).unwrap();
            if batch.is_empty() {
                break;
            }
            for (key, value) in &batch {
                assert_eq!(model.get(key), Some(value), "seed {seed}: a value not held");
                assert!(
                    seen.last() < Some(key),
                    "seed {seed}: out of order or twice"
                );
                seen.push(key.clone());
            }
            batches += 1;
            let last = &batch.last().unwrap().0;
            let at: u32 = std::str::from_utf8(&last[4..]).unwrap().parse().unwrap();
            // Mostly ahead of the cursor (so the next leaves split or merge).
            let start = match random.gen_bool(0.8) {
                true => at + random.gen_range(1..400),
                false => at.saturating_sub(random.gen_range(0..400)),
            };
            match random.gen_range(0..4) {
                0 => {
                    for number in start..start + random.gen_range(1..300) {
                        let value = vec![7u8; random.gen_range(10..120)];
                        tree.put(&pool, &key(number), &value, 2).unwrap();
                        model.insert(key(number), value);
                    }
                }
                1 => {
                    for number in start..start + random.gen_range(1..2000) {
                        tree.delete(&pool, &key(number), 2).unwrap();
                        model.remove(&key(number));
                        all_along.remove(&key(number));
                    }
                }
                _ => {} // leaves it alone: the next leaf comes from the parent
            }
            if batches % 10 == 0 {
                // Sorted lookups (leaf to leaf through the parent too) see the tree as it is.
                let keys: Vec<Vec<u8>> = (0..40_000).step_by(3).map(key).collect();
                let found = tree.get_sorted(&pool, &keys).unwrap();
                for (key, value) in keys.iter().zip(found) {
                    assert_eq!(value.as_ref(), model.get(key), "seed {seed}: sorted lookup");
                }
            }
        }
        assert!(batches > 100, "seed {seed}: {batches} batches");
        let seen: std::collections::BTreeSet<Vec<u8>> = seen.into_iter().collect();
        let missed = all_along.difference(&seen).count();
        assert_eq!(missed, 0, "seed {seed}: keys there all along not seen");
        tree.check(&pool).unwrap();
    }
}

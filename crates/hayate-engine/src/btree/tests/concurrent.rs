//! Concurrency: four writer threads on disjoint keys and two scanners share one tree in a small
//! pool; afterwards the tree holds exactly what each writer left and passes `check`. Keys put
//! before the writers start and never touched are found by every scan, however the writers
//! split, merge and evict the leaves around them (a scan going from leaf to leaf through a
//! parent it saw earlier must notice any change to it).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{BTree, BufferPool};

const WRITER_COUNT: u64 = 4;
/// Every this many key numbers, a key of no writer's stays put throughout.
const STEADY_EVERY: u64 = 7;
const OPERATIONS_PER_WRITER: usize = 3000;

fn key(writer: u64, number: u64) -> Vec<u8> {
    // Writers interleave in key order so they share leaves and split each other's nodes.
    format!("{number:06}-{writer}").into_bytes()
}

fn writer(tree: BTree, pool: &BufferPool, writer: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut random = StdRng::seed_from_u64(writer);
    let mut model = BTreeMap::new();
    for step in 0..OPERATIONS_PER_WRITER {
        let key = key(writer, random.gen_range(0..800));
        match random.gen_range(0..10) {
            0..=5 => {
                let length = if random.gen_bool(0.05) {
                    5000
                } else {
                    random.gen_range(0..300)
                };
                let value = vec![(step % 251) as u8; length];
                let previous = tree.put(pool, &key, &value, step as u64).expect("put");
                assert_eq!(previous, model.insert(key, value));
            }
            6..=7 => {
                let removed = tree.delete(pool, &key, step as u64).expect("delete");
                assert_eq!(removed, model.remove(&key));
            }
            _ => assert_eq!(tree.get(pool, &key).expect("get").as_ref(), model.get(&key)),
        }
    }
    model
}

/// The keys no writer touches (writer number `WRITER_COUNT`).
fn steady_keys() -> impl Iterator<Item = Vec<u8>> {
    (0..800)
        .step_by(STEADY_EVERY as usize)
        .map(|number| key(WRITER_COUNT, number))
}

fn scanner(tree: BTree, pool: &BufferPool, stop: &AtomicBool) -> u64 {
    let steady: Vec<Vec<u8>> = steady_keys().collect();
    let mut scans = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut cursor = tree.scan(pool, Bound::Unbounded, Bound::Unbounded);
        let mut previous: Option<Vec<u8>> = None;
        let mut steady_seen = 0;
        while let Some((key, value)) = cursor.next(pool).expect("scan") {
            assert!(
                previous.as_ref().is_none_or(|previous| *previous < key),
                "scan order"
            );
            if steady.binary_search(&key).is_ok() {
                assert_eq!(value, key, "a steady key's value");
                steady_seen += 1;
            }
            previous = Some(key);
        }
        assert_eq!(steady_seen, steady.len(), "a scan missed steady keys");
        // Sorted lookups go leaf to leaf through parents too.
        let found = tree.get_sorted(pool, &steady).expect("get_sorted");
        for (key, value) in steady.iter().zip(found) {
            assert_eq!(value.as_ref(), Some(key), "a steady key's sorted lookup");
        }
        scans += 1;
    }
    scans
}

#[test]
fn btree_concurrent_writers_and_scanners() {
    let pool = super::pool(4096, 64);
    let tree = BTree::open(BTree::create(&pool).expect("create"));
    for key in steady_keys() {
        tree.put(&pool, &key, &key, 0).expect("put");
    }
    let stop = AtomicBool::new(false);
    let (models, scans) = std::thread::scope(|scope| {
        let scanners: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| scanner(tree, &pool, &stop)))
            .collect();
        let writers: Vec<_> = (0..WRITER_COUNT)
            .map(|index| {
                let pool = &pool;
                scope.spawn(move || writer(tree, pool, index))
            })
            .collect();
        let models: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        let scans: u64 = scanners.into_iter().map(|s| s.join().unwrap()).sum();
        (models, scans)
    });
    assert!(scans > 0);
    let mut expected: BTreeMap<Vec<u8>, Vec<u8>> = models.into_iter().flatten().collect();
    expected.extend(steady_keys().map(|key| (key.clone(), key)));
    let mut cursor = tree.scan(&pool, Bound::Unbounded, Bound::Unbounded);
    let mut found = BTreeMap::new();
    while let Some((key, value)) = cursor.next(&pool).expect("scan") {
        found.insert(key, value);
    }
    assert!(found == expected, "final contents differ");
    let report = tree.check(&pool).expect("check");
    assert_eq!(report.entries, expected.len() as u64);
}

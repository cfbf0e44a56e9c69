//! Model-based test: random puts, deletes, gets and range scans against a `BTreeMap`, for
//! several seeds, page sizes and pool sizes (tiny pools force eviction mid-operation).

use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{live_pages_settled, pool};
use crate::{BTree, BufferPool};

fn random_key(random: &mut StdRng, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<u8> {
    if !model.is_empty() && random.gen_bool(0.5) {
        let skip = random.gen_range(0..model.len());
        return model.keys().nth(skip).expect("key").clone();
    }
    let length = random.gen_range(1..200);
    // A small alphabet makes shared prefixes and near-equal keys common.
    (0..length).map(|_| random.gen_range(b'a'..b'e')).collect()
}

fn random_value(random: &mut StdRng, page_size: usize) -> Vec<u8> {
    let length = match random.gen_range(0..10) {
        0 => random.gen_range(page_size - 100..page_size + 100),
        1 | 2 => random.gen_range(0..10_000),
        _ => random.gen_range(0..200),
    };
    let byte = random.gen::<u8>();
    (0..length)
        .map(|index| byte.wrapping_add(index as u8))
        .collect()
}

fn bound(random: &mut StdRng, key: &[u8]) -> Bound<Vec<u8>> {
    match random.gen_range(0..3) {
        0 => Bound::Included(key.to_vec()),
        1 => Bound::Excluded(key.to_vec()),
        _ => Bound::Unbounded,
    }
}

fn as_slice(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key.as_slice()),
        Bound::Excluded(key) => Bound::Excluded(key.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn check_scan(
    random: &mut StdRng,
    tree: &BTree,
    pool: &BufferPool,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let mut ends = [random_key(random, model), random_key(random, model)];
    ends.sort();
    let (start, end) = (bound(random, &ends[0]), bound(random, &ends[1]));
    let invalid = matches!((&start, &end), (Bound::Excluded(a), Bound::Excluded(b)) if a == b);
    if invalid {
        return;
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model
        .range::<[u8], _>((as_slice(&start), as_slice(&end)))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let mut cursor = tree.scan(pool, as_slice(&start), as_slice(&end));
    let mut found = Vec::new();
    loop {
        let batch = cursor.next_batch(pool).expect("scan");
        if batch.is_empty() {
            break;
        }
        found.extend(batch);
    }
    assert!(
        found == expected,
        "scan {start:?}..{end:?} differs from the model"
    );
    let mut cursor = tree.scan_reverse(pool, as_slice(&start), as_slice(&end));
    let mut found = Vec::new();
    loop {
        let batch = cursor.next_batch(pool).expect("reverse scan");
        if batch.is_empty() {
            break;
        }
        found.extend(batch);
    }
    found.reverse();
    assert!(
        found == expected,
        "reverse scan {start:?}..{end:?} differs from the model"
    );
}

fn run(seed: u64, page_size: usize, frames: usize, operations: usize) {
    let pool = pool(page_size, frames);
    let live_before = pool.store().live_page_count();
    let tree = BTree::open(BTree::create(&pool).expect("create"));
    let mut model = BTreeMap::new();
    let mut random = StdRng::seed_from_u64(seed);
    for step in 0..operations {
        let lsn = step as u64 + 1;
        match random.gen_range(0..10) {
            0..=4 => {
                let key = random_key(&mut random, &model);
                // A third of the replacements keep the length and change a few bytes (an
                // overflow value's chain is then overwritten in place).
                let value = match model.get(&key) {
                    Some(old) if !old.is_empty() && random.gen_range(0..3) == 0 => {
                        let mut value = old.clone();
                        for _ in 0..random.gen_range(1..4) {
                            let index = random.gen_range(0..value.len());
                            value[index] = value[index].wrapping_add(1);
                        }
                        value
                    }
                    _ => random_value(&mut random, page_size),
                };
                let previous = tree.put(&pool, &key, &value, lsn).expect("put");
                assert_eq!(previous, model.insert(key, value), "put at step {step}");
            }
            5..=6 => {
                let key = random_key(&mut random, &model);
                let removed = tree.delete(&pool, &key, lsn).expect("delete");
                assert_eq!(removed, model.remove(&key), "delete at step {step}");
            }
            7..=8 => {
                let key = random_key(&mut random, &model);
                let found = tree.get(&pool, &key).expect("get");
                assert_eq!(found.as_ref(), model.get(&key), "get at step {step}");
            }
            _ => check_scan(&mut random, &tree, &pool, &model),
        }
        if step % 500 == 0 {
            let report = tree.check(&pool).expect("check");
            assert_eq!(report.entries, model.len() as u64, "entries at step {step}");
        }
    }
    let report = tree.check(&pool).expect("final check");
    assert_eq!(report.entries, model.len() as u64);
    for key in model.keys().cloned().collect::<Vec<_>>() {
        assert!(tree.delete(&pool, &key, 0).expect("drain").is_some());
    }
    let report = tree.check(&pool).expect("check after drain");
    assert_eq!((report.depth, report.leaf_pages, report.entries), (1, 1, 0));
    tree.destroy(&pool).expect("destroy");
    assert_eq!(
        live_pages_settled(&pool, live_before),
        live_before,
        "pages leaked"
    );
}

fn run_seeds(page_size: usize, frames: usize, operations: usize) {
    let base: u64 = std::env::var("BTREE_MODEL_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0x5eed);
    for seed in base..base + 4 {
        let outcome = std::panic::catch_unwind(|| run(seed, page_size, frames, operations));
        if let Err(panic) = outcome {
            eprintln!(
                "btree model failed: seed {seed}, page size {page_size}, {frames} frames \
                 (rerun with BTREE_MODEL_SEED={seed})"
            );
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn btree_model_4k_tiny_pool() {
    run_seeds(4096, 12, 4000);
}

#[test]
fn btree_model_4k_large_pool() {
    run_seeds(4096, 4096, 4000);
}

#[test]
fn btree_model_16k_tiny_pool() {
    run_seeds(16384, 12, 3000);
}

#[test]
fn btree_model_24k_tiny_pool() {
    run_seeds(24576, 12, 3000);
}

#[test]
fn btree_model_24k_large_pool() {
    run_seeds(24576, 1024, 3000);
}

//! A micro benchmark of point inserts and lookups in memory, for the command line.

use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use hayate_engine::{
    BTree, BufferPool, BufferPoolConfig, MemoryStore, PageStore, Result, PAGE_SIZE_DEFAULT,
};

const VALUE_LENGTH_BYTES: usize = 100;

/// Throughput of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct BtreeBenchReport {
    pub key_count: u64,
    pub thread_count: usize,
    pub inserts_per_second: f64,
    pub lookups_per_second: f64,
}

/// Single-threaded run: `key_count` random 8-byte keys with 100-byte values, inserted then
/// looked up in random order, in a pool of `pool_pages` frames over a `MemoryStore`.
pub fn bench_btree(pool_pages: usize, key_count: u64) -> Result<BtreeBenchReport> {
    bench_btree_threads(pool_pages, key_count, 1)
}

/// Like `bench_btree` with `thread_count` threads, each inserting and looking up its share.
pub fn bench_btree_threads(
    pool_pages: usize,
    key_count: u64,
    thread_count: usize,
) -> Result<BtreeBenchReport> {
    let thread_count = thread_count.max(1);
    let store: Arc<dyn PageStore> = Arc::new(MemoryStore::new(PAGE_SIZE_DEFAULT));
    let config = BufferPoolConfig {
        frame_count: pool_pages,
        ..BufferPoolConfig::default()
    };
    let pool = BufferPool::new(store, config)?;
    let tree = BTree::open(BTree::create(&pool)?);
    let mut random = StdRng::seed_from_u64(42);
    let keys: Vec<[u8; 8]> = (0..key_count)
        .map(|_| random.gen::<u64>().to_be_bytes())
        .collect();
    let shares: Vec<&[[u8; 8]]> = keys
        .chunks(keys.len().div_ceil(thread_count).max(1))
        .collect();
    let value = [0x5au8; VALUE_LENGTH_BYTES];

    let start = Instant::now();
    run_threads(&shares, |share, _| {
        for key in share {
            tree.put(&pool, key, &value, 1)?;
        }
        Ok(())
    })?;
    let inserts_per_second = key_count as f64 / start.elapsed().as_secs_f64();

    let start = Instant::now();
    run_threads(&shares, |share, thread| {
        let mut order: Vec<&[u8; 8]> = share.iter().collect();
        order.shuffle(&mut StdRng::seed_from_u64(thread as u64));
        for key in order {
            let found = tree.get(&pool, key)?;
            assert!(found.is_some(), "inserted key missing");
        }
        Ok(())
    })?;
    let lookups_per_second = key_count as f64 / start.elapsed().as_secs_f64();
    pool.shutdown();
    Ok(BtreeBenchReport {
        key_count,
        thread_count,
        inserts_per_second,
        lookups_per_second,
    })
}

fn run_threads<F>(shares: &[&[[u8; 8]]], work: F) -> Result<()>
where
    F: Fn(&[[u8; 8]], usize) -> Result<()> + Sync,
{
    std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .iter()
            .enumerate()
            .map(|(thread, share)| {
                let work = &work;
                scope.spawn(move || work(share, thread))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("bench thread panicked"))
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    })
}

//! The cleaner keeps an out-of-place store with ~50% live data bounded under random updates.
//!
//! 1. Load a table whose rows fill a known number of pages (one row per page, values near a
//!    page in size, so live pages are known).
//! 2. Run rounds of random updates while the maintenance thread cleans and checkpoints.
//! 3. After a warm-up, the data file stays within a bound of the live pages in every round;
//!    the store reports write amplification >= 1 and segments cleaned; all rows read back.
//!
//! `HAYATE_CLEANER_SEED` picks the seed (printed).

use std::time::Duration;

use hayate_engine::{BufferSize, Database, DatabaseConfig, VictimPolicy, WritePolicy};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ROWS: u32 = 1500;
const VALUE_BYTES: usize = 1800;
const ROUNDS: u32 = 30;
const UPDATES_PER_ROUND: u32 = 1000;
const WARM_UP_ROUNDS: u32 = 5;

fn value(row: u32, version: u32) -> Vec<u8> {
    let mut value = format!("row {row} version {version};").into_bytes();
    value.resize(VALUE_BYTES, (row ^ version) as u8);
    value
}

fn run(victim_policy: VictimPolicy) {
    let seed = std::env::var("HAYATE_CLEANER_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0xC1EA);
    eprintln!("cleaner {victim_policy:?}: seed {seed} (HAYATE_CLEANER_SEED)");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut config = DatabaseConfig::default();
    config.store.policy = WritePolicy::OutOfPlace;
    config.store.segment_pages = 32;
    config.store.cleaner.victim_policy = victim_policy;
    config.store.cleaner.protection_period = Duration::from_millis(5);
    config.store.cleaner.free_segments_low = 8;
    config.store.cleaner.free_segments_high = 16;
    config.store.cleaner.victim_utilization_max = 0.95;
    config.buffer_size = BufferSize::Bytes(64 * 4096);
    config.checkpoint_log_bytes = 4 << 20;
    config.maintenance_interval = Duration::from_millis(2);
    let db = Database::open(dir.path(), config).unwrap();
    let table = db.create_table("cleaned").unwrap();
    let mut versions = vec![0u32; ROWS as usize];
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(100) {
        let mut txn = db.begin();
        for &row in chunk {
            txn.insert(table, &row.to_be_bytes(), &value(row, 0))
                .unwrap();
        }
        txn.commit().unwrap();
    }
    db.checkpoint().unwrap();
    let live_pages = db.stats().store.live_pages;
    let page_size = 4096u64;
    let mut ratios = Vec::new();
    for round in 0..ROUNDS {
        for _ in 0..UPDATES_PER_ROUND / 10 {
            let mut txn = db.begin();
            for _ in 0..10 {
                let row = rng.gen_range(0..ROWS);
                let version = versions[row as usize] + 1;
                if txn
                    .update(table, &row.to_be_bytes(), &value(row, version))
                    .unwrap()
                {
                    versions[row as usize] = version;
                }
            }
            txn.commit().unwrap();
        }
        // Let the maintenance thread catch up a little, as a steady load would.
        std::thread::sleep(Duration::from_millis(20));
        let stats = db.stats().store;
        let ratio = stats.file_size_bytes as f64 / (stats.live_pages * page_size) as f64;
        eprintln!(
            "round {round}: file {} KiB, live {} pages, ratio {ratio:.2}, segments cleaned {}, \
             write amplification {:.3}",
            stats.file_size_bytes >> 10,
            stats.live_pages,
            stats.segments_cleaned,
            stats.write_amplification
        );
        ratios.push(ratio);
        if round >= WARM_UP_ROUNDS {
            assert!(
                ratio <= 3.0,
                "round {round}: file is {ratio:.2}x the live pages ({live_pages} at load)"
            );
        }
    }
    // Not growing without bound: the last rounds are no bigger than the bound after warm-up.
    let warm = ratios[WARM_UP_ROUNDS as usize];
    let last = *ratios.last().unwrap();
    assert!(
        last <= warm.max(2.0) * 1.5,
        "file keeps growing: {warm:.2} -> {last:.2}"
    );
    let stats = db.stats().store;
    eprintln!(
        "cleaner {victim_policy:?}: write amplification {:.3}, file/live ratio {last:.2}, {} \
         segments cleaned",
        stats.write_amplification, stats.segments_cleaned
    );
    assert!(stats.write_amplification >= 1.0, "{stats:?}");
    assert!(
        stats.segments_cleaned > 0,
        "the cleaner never ran: {stats:?}"
    );
    let txn = db.begin_read_only();
    for row in 0..ROWS {
        let found = txn.get(table, &row.to_be_bytes()).unwrap();
        assert!(
            found.as_deref() == Some(&value(row, versions[row as usize])[..]),
            "row {row} wrong or missing"
        );
    }
    drop(txn);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn cleaner_bounds_file_size_greedy() {
    run(VictimPolicy::Greedy);
}

#[test]
fn cleaner_bounds_file_size_cost_benefit() {
    run(VictimPolicy::CostBenefit);
}

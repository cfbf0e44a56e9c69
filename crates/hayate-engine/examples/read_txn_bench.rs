//! One-row read-only transactions in memory: `begin_read_only`, `get`, `commit`, on OS threads
//! and as fibers. For profiling the read path of a transaction:
//!
//! `cargo run --release -p hayate-engine --example read_txn_bench -- [seconds] [rows]
//! [threads|fibers] [value bytes] [thread count]`
//!
//! 1. Create a database in a temporary directory with a buffer pool larger than the data.
//! 2. Load `rows` rows with 8-byte big-endian keys for each value size (100 bytes, and 4,104
//!    bytes like the lab's primitive tables, which go to overflow pages).
//! 3. For 1 and 2 threads, run random one-row read transactions for the given seconds, with
//!    the blocking API and as 64 fibers per thread; print transactions per second.

use std::time::{Duration, Instant};

use hayate_engine::{BufferSize, Database, DatabaseConfig, TreeId};

type BenchResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> BenchResult<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u64 = arguments.first().map_or(Ok(2), |text| text.parse())?;
    let rows: u64 = arguments.get(1).map_or(Ok(100_000), |text| text.parse())?;
    let mode = arguments.get(2).cloned().unwrap_or_default();
    let value_sizes: Vec<usize> = match arguments.get(3) {
        Some(text) => vec![text.parse()?],
        None => vec![100, 4104],
    };
    let thread_counts: Vec<usize> = match arguments.get(4) {
        Some(text) => vec![text.parse()?],
        None => vec![1, 2],
    };
    let temporary = tempfile::Builder::new()
        .prefix(".hayate-read-bench-")
        .tempdir_in(std::env::current_dir()?)?;
    // Room for every page with a margin, as an in-memory (100% buffer) run would have.
    let data_bytes: u64 = value_sizes
        .iter()
        .map(|&value_bytes| rows * data_bytes_per_row(value_bytes))
        .sum();
    let config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(data_bytes * 2 + (32 << 20)),
        ..Default::default()
    };
    let db = Database::open(temporary.path(), config)?;
    let duration = Duration::from_secs(seconds);
    for value_bytes in value_sizes {
        let table = load(&db, &format!("t{value_bytes}"), rows, value_bytes)?;
        for &threads in &thread_counts {
            if mode.is_empty() || mode == "threads" {
                let (rate, per_cpu) = run(threads, duration, |thread, deadline| {
                    read_on_thread(&db, table, rows, thread, deadline)
                })?;
                println!(
                    "{value_bytes:>5}-byte rows, {threads} thread(s), blocking: {rate:>10.0} txn/s \
                     ({per_cpu:.0} per CPU second)"
                );
            }
            if mode.is_empty() || mode == "fibers" {
                let (rate, per_cpu) = run(threads, duration, |thread, deadline| {
                    read_as_fibers(&db, table, rows, thread, 64, deadline)
                })?;
                println!(
                    "{value_bytes:>5}-byte rows, {threads} thread(s), 64 fibers: {rate:>10.0} txn/s \
                     ({per_cpu:.0} per CPU second)"
                );
            }
        }
    }
    let buffer = db.stats().buffer;
    println!("buffer: {} hits, {} misses", buffer.hits, buffer.misses);
    db.close()?;
    Ok(())
}

/// Bytes of pages a row takes: its leaf cell, or a 23-byte cell and whole overflow pages.
fn data_bytes_per_row(value_bytes: usize) -> u64 {
    let row_bytes = value_bytes as u64 + 17;
    if row_bytes <= 1024 {
        row_bytes + 20
    } else {
        23 + row_bytes.div_ceil(4048) * 4096
    }
}

fn load(db: &Database, name: &str, rows: u64, value_bytes: usize) -> BenchResult<TreeId> {
    let table = db.create_table(name)?;
    let value = vec![0x5a; value_bytes];
    for first in (0..rows).step_by(1000) {
        let mut txn = db.begin();
        for key in first..(first + 1000).min(rows) {
            txn.insert(table, &key.to_be_bytes(), &value)?;
        }
        txn.commit()?;
    }
    Ok(table)
}

/// CPU time of the calling thread: on a shared machine, transactions per CPU second compare
/// runs better than per wall second.
fn thread_cpu_seconds() -> f64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    time.tv_sec as f64 + time.tv_nsec as f64 / 1e9
}

/// Runs `work(thread, deadline)` on `threads` threads; returns transactions per second and per
/// CPU second of the workers.
fn run(
    threads: usize,
    duration: Duration,
    work: impl Fn(usize, Instant) -> hayate_engine::Result<u64> + Sync,
) -> BenchResult<(f64, f64)> {
    let started = Instant::now();
    let deadline = started + duration;
    let counts: Vec<(hayate_engine::Result<u64>, f64)> = std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                scope.spawn(move || {
                    let cpu_start = thread_cpu_seconds();
                    let count = work(thread, deadline);
                    (count, thread_cpu_seconds() - cpu_start)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("bench thread panicked"))
            .collect()
    });
    let (mut total, mut cpu_seconds) = (0, 0.0);
    for (count, seconds) in counts {
        total += count?;
        cpu_seconds += seconds;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok((total as f64 / elapsed, total as f64 / cpu_seconds))
}

/// A cheap random sequence (xorshift).
fn next_key(state: &mut u64, rows: u64) -> [u8; 8] {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state % rows).to_be_bytes()
}

fn read_on_thread(
    db: &Database,
    table: TreeId,
    rows: u64,
    thread: usize,
    deadline: Instant,
) -> hayate_engine::Result<u64> {
    let mut state = 0x9e37_79b9_7f4a_7c15 ^ (thread as u64 + 1);
    let mut count = 0u64;
    while !count.is_multiple_of(256) || Instant::now() < deadline {
        let key = next_key(&mut state, rows);
        let txn = db.begin_read_only();
        let value = txn.get(table, &key)?;
        assert!(value.is_some(), "row missing");
        txn.commit()?;
        count += 1;
    }
    Ok(count)
}

fn read_as_fibers(
    db: &Database,
    table: TreeId,
    rows: u64,
    thread: usize,
    fiber_count: usize,
    deadline: Instant,
) -> hayate_engine::Result<u64> {
    type Work<'a> = Box<dyn FnOnce() -> hayate_engine::Result<u64> + 'a>;
    if let Err(error) = hayate_engine::install_thread_ring() {
        eprintln!("no io_uring ring, misses block the thread: {error}");
    }
    let works: Vec<Work<'_>> = (0..fiber_count)
        .map(|fiber| {
            Box::new(move || {
                let mut state = 0x2545_f491_4f6c_dd1d ^ ((thread * 100_000 + fiber) as u64 + 1);
                let mut count = 0u64;
                while !count.is_multiple_of(256) || Instant::now() < deadline {
                    let key = next_key(&mut state, rows);
                    let txn = db.begin_read_only();
                    let value = txn.get(table, &key)?;
                    assert!(value.is_some(), "row missing");
                    txn.commit()?;
                    count += 1;
                }
                Ok(count)
            }) as Work<'_>
        })
        .collect();
    let (counts, _) = hayate_engine::fiber::run_all(works, hayate_engine::reap_or_sleep);
    counts.into_iter().sum()
}

//! The demo's mixed workload: client threads each run one-row transactions (a point read, or
//! a durable single-row update) until the time is up, while a progress bar shows throughput.
//!
//! Thread `t` of `n` updates only keys with `key % n == t`, so it knows the last value it
//! committed for each of them; `verify` uses that after reopening to check recovery.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hayate::error::{CliError, CliResult};
use hayate::report::{format_rate, Histogram};
use hayate_engine::{Database, TreeId};
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{row_key, row_value};

/// Retries of one transaction after serialization failures, deadlocks or lock timeouts.
const RETRIES_MAX: u32 = 100;

#[derive(Debug, Clone, Copy)]
pub struct WorkloadConfig {
    pub rows: u64,
    pub threads: u64,
    pub update_percent: u64,
    pub duration: Duration,
    pub seed: u64,
}

/// What the threads did.
#[derive(Default)]
pub struct WorkloadResult {
    pub elapsed: Duration,
    pub reads: Histogram,
    pub updates: Histogram,
    /// Transactions retried after a conflict.
    pub retries: u64,
    /// key -> sequence number of the last committed update of that key.
    pub last_updates: HashMap<u64, u64>,
}

#[derive(Default)]
struct Live {
    reads: AtomicU64,
    updates: AtomicU64,
    retries: AtomicU64,
    stop: AtomicBool,
}

/// One thread's results.
#[derive(Default)]
struct ThreadResult {
    reads: Histogram,
    updates: Histogram,
    last_updates: HashMap<u64, u64>,
}

pub fn run(
    database: &Database,
    table: TreeId,
    config: WorkloadConfig,
) -> CliResult<WorkloadResult> {
    let live = Live::default();
    let started = Instant::now();
    let outcomes: Vec<CliResult<ThreadResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads)
            .map(|thread| {
                let live = &live;
                scope.spawn(move || {
                    let outcome = client(database, table, config, thread, live);
                    if outcome.is_err() {
                        live.stop.store(true, Ordering::Relaxed);
                    }
                    outcome
                })
            })
            .collect();
        show_progress(&live, config.duration);
        live.stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(CliError::new("a client thread panicked")))
            })
            .collect()
    });
    let mut result = WorkloadResult {
        elapsed: started.elapsed(),
        retries: live.retries.load(Ordering::Relaxed),
        ..WorkloadResult::default()
    };
    for outcome in outcomes {
        let thread = outcome?;
        result.reads.merge(&thread.reads);
        result.updates.merge(&thread.updates);
        result.last_updates.extend(thread.last_updates);
    }
    Ok(result)
}

/// Updates the progress bar until the time is up or a thread stopped on an error.
fn show_progress(live: &Live, duration: Duration) {
    let bar = ProgressBar::new(duration.as_millis() as u64);
    bar.set_style(
        ProgressStyle::with_template("workload [{bar:30}] {elapsed:>3} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut last = (Instant::now(), 0u64);
    while started.elapsed() < duration && !live.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100).min(duration));
        let reads = live.reads.load(Ordering::Relaxed);
        let updates = live.updates.load(Ordering::Relaxed);
        let now = Instant::now();
        let interval = now.duration_since(last.0).as_secs_f64();
        if interval >= 0.5 {
            let rate = (reads + updates - last.1) as f64 / interval;
            bar.set_message(format!(
                "{} txn/s now | {} reads, {} updates",
                format_rate(rate),
                reads,
                updates
            ));
            last = (now, reads + updates);
        }
        bar.set_position(started.elapsed().as_millis() as u64);
    }
    bar.finish_and_clear();
}

/// One client thread's loop.
fn client(
    database: &Database,
    table: TreeId,
    config: WorkloadConfig,
    thread: u64,
    live: &Live,
) -> CliResult<ThreadResult> {
    let mut random = StdRng::seed_from_u64(config.seed.wrapping_add(thread));
    let mut result = ThreadResult::default();
    // This thread's update keys are thread, thread + n, thread + 2n, ...
    let own_keys = (config.rows - thread).div_ceil(config.threads);
    let mut sequence = 0u64;
    while !live.stop.load(Ordering::Relaxed) {
        let update = own_keys > 0 && random.gen_range(0..100) < config.update_percent;
        let started = Instant::now();
        if update {
            let key = thread + random.gen_range(0..own_keys) * config.threads;
            sequence += 1;
            update_row(database, table, key, thread, sequence, live)?;
            result.updates.record(elapsed_ns(started));
            result.last_updates.insert(key, sequence);
            live.updates.fetch_add(1, Ordering::Relaxed);
        } else {
            let key = random.gen_range(0..config.rows);
            read_row(database, table, key)?;
            result.reads.record(elapsed_ns(started));
            live.reads.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(result)
}

fn read_row(database: &Database, table: TreeId, key: u64) -> CliResult<()> {
    let transaction = database.begin_read_only();
    let value = transaction.get(table, &row_key(key))?;
    transaction.commit()?;
    match value {
        Some(_) => Ok(()),
        None => Err(CliError::new(format!("row {key} is missing"))),
    }
}

/// Updates one row in its own transaction, retrying after conflicts.
fn update_row(
    database: &Database,
    table: TreeId,
    key: u64,
    thread: u64,
    sequence: u64,
    live: &Live,
) -> CliResult<()> {
    let value = row_value(key, thread, sequence);
    for _ in 0..RETRIES_MAX {
        let mut transaction = database.begin();
        let outcome = transaction
            .update(table, &row_key(key), &value)
            .and_then(|found| {
                if !found {
                    return Ok(false);
                }
                transaction.commit().map(|_| true)
            });
        match outcome {
            Ok(true) => return Ok(()),
            Ok(false) => return Err(CliError::new(format!("row {key} is missing"))),
            Err(error) if error.is_retryable() => {
                live.retries.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => return Err(error.into()),
        }
    }
    Err(CliError::new(format!(
        "update of row {key} failed {RETRIES_MAX} times in a row"
    )))
}

fn elapsed_ns(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

//! `hayate-lab bench tasks`: durable single-row updates on an in-memory table, run as many
//! fibers per thread (`crate::fibers`: a fiber waiting for the log lets the others run, so the
//! commits in flight share fdatasyncs) and, for comparison, on OS threads with the blocking API
//! (commits share flushes through group commit).
//!
//! 1. Create a database in a temporary directory on the real device and load the rows.
//! 2. For each configuration, update random rows for the given seconds, each update its own
//!    durable transaction, retrying after conflicts.
//! 3. Report commits per second and commits per log flush.

use std::path::Path;
use std::time::{Duration, Instant};

use hayate::error::{CliResult, Context};
use hayate::report::{format_count, format_rate};
use hayate_engine::{BufferSize, Database, DatabaseConfig, TreeId};

const ROWS: u64 = 100_000;

pub struct TasksReport {
    pub mode: &'static str,
    pub threads: usize,
    pub fibers_per_thread: usize,
    pub commits: u64,
    pub seconds: f64,
    pub log_flushes: u64,
}

impl TasksReport {
    pub fn commits_per_second(&self) -> f64 {
        self.commits as f64 / self.seconds
    }
    pub fn commits_per_flush(&self) -> f64 {
        self.commits as f64 / self.log_flushes.max(1) as f64
    }
}

pub fn run(base: &Path, seconds: u64) -> CliResult<Vec<TasksReport>> {
    let temporary = tempfile::Builder::new()
        .prefix(".hayate-bench-tasks-")
        .tempdir_in(base)
        .context(|| format!("cannot create a directory in {}", base.display()))?;
    let config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(256 << 20),
        ..Default::default()
    };
    let db = Database::open(temporary.path(), config)?;
    let table = load(&db)?;
    let duration = Duration::from_secs(seconds);
    let mut reports = Vec::new();
    for threads in [16, 64] {
        reports.push(measure(&db, "threads", threads, 1, || {
            run_threads(&db, table, threads, duration)
        })?);
    }
    for (threads, fibers) in [(1, 64), (1, 256), (2, 256)] {
        reports.push(measure(&db, "fibers", threads, fibers, || {
            run_fiber_threads(&db, table, threads, fibers, duration)
        })?);
    }
    db.close()?;
    temporary
        .close()
        .context(|| "cannot remove the benchmark directory".to_string())?;
    print(seconds, &reports);
    Ok(reports)
}

fn load(db: &Database) -> CliResult<TreeId> {
    let table = db.create_table("accounts")?;
    for first in (0..ROWS).step_by(1000) {
        let mut txn = db.begin();
        for key in first..(first + 1000).min(ROWS) {
            txn.insert(table, &key.to_be_bytes(), &[0u8; 100])?;
        }
        txn.commit()?;
    }
    Ok(table)
}

fn measure(
    db: &Database,
    mode: &'static str,
    threads: usize,
    fibers_per_thread: usize,
    body: impl FnOnce() -> CliResult<u64>,
) -> CliResult<TasksReport> {
    let flushes_before = db.stats().wal.flushes;
    let started = Instant::now();
    let commits = body()?;
    Ok(TasksReport {
        mode,
        threads,
        fibers_per_thread,
        commits,
        seconds: started.elapsed().as_secs_f64(),
        log_flushes: db.stats().wal.flushes - flushes_before,
    })
}

/// A cheap per-worker random sequence (xorshift), so tasks need no shared generator.
fn next_key(state: &mut u64) -> [u8; 8] {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state % ROWS).to_be_bytes()
}

fn increment(value: &[u8]) -> Vec<u8> {
    let mut value = value.to_vec();
    value[0] = value[0].wrapping_add(1);
    value
}

fn run_threads(db: &Database, table: TreeId, threads: usize, duration: Duration) -> CliResult<u64> {
    let deadline = Instant::now() + duration;
    let results: Vec<CliResult<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                scope.spawn(move || -> CliResult<u64> {
                    let mut state = 0x9e37_79b9_7f4a_7c15 ^ (thread as u64 + 1);
                    let mut commits = 0;
                    while Instant::now() < deadline {
                        let key = next_key(&mut state);
                        let mut txn = db.begin();
                        let value = txn.get(table, &key)?.unwrap_or_default();
                        let result = txn
                            .put(table, &key, &increment(&value))
                            .and_then(|()| txn.commit());
                        match result {
                            Ok(_) => commits += 1,
                            Err(error) if error.is_retryable() => {}
                            Err(error) => return Err(error.into()),
                        }
                    }
                    Ok(commits)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("worker panicked"))
            .collect()
    });
    results.into_iter().sum()
}

fn run_fiber_threads(
    db: &Database,
    table: TreeId,
    threads: usize,
    fibers: usize,
    duration: Duration,
) -> CliResult<u64> {
    let deadline = Instant::now() + duration;
    let results: Vec<CliResult<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                scope.spawn(move || run_fibers_on_this_thread(db, table, thread, fibers, deadline))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("worker panicked"))
            .collect()
    });
    results.into_iter().sum()
}

fn run_fibers_on_this_thread(
    db: &Database,
    table: TreeId,
    thread: usize,
    fibers: usize,
    deadline: Instant,
) -> CliResult<u64> {
    type Work<'a> = Box<dyn FnOnce() -> hayate_engine::Result<u64> + 'a>;
    let works: Vec<Work<'_>> = (0..fibers)
        .map(|fiber| {
            let seed = 0x2545_f491_4f6c_dd1d ^ ((thread * 100_000 + fiber) as u64 + 1);
            Box::new(move || update_until(db, table, seed, deadline)) as Work<'_>
        })
        .collect();
    let mut total = 0;
    for output in crate::fibers::run(works) {
        total += output?;
    }
    Ok(total)
}

/// Updates random rows, each its own durable transaction, until the deadline; returns the
/// commits.
fn update_until(
    db: &Database,
    table: TreeId,
    seed: u64,
    deadline: Instant,
) -> hayate_engine::Result<u64> {
    let mut state = seed;
    let mut commits = 0u64;
    while Instant::now() < deadline {
        let key = next_key(&mut state);
        let mut txn = db.begin();
        let value = txn.get(table, &key)?.unwrap_or_default();
        let result = match txn.put(table, &key, &increment(&value)) {
            Ok(()) => crate::fibers::commit(db, txn).map(|_| ()),
            Err(error) => Err(error),
        };
        match result {
            Ok(()) => commits += 1,
            Err(error) if error.is_retryable() => crate::fibers::pause(),
            Err(error) => return Err(error),
        }
    }
    Ok(commits)
}

fn print(seconds: u64, reports: &[TasksReport]) {
    println!();
    println!(
        "durable single-row updates in memory ({} rows of 100 bytes), {seconds} s per run:",
        format_count(ROWS)
    );
    println!("  mode     threads  fibers/thread  commits/s  commits/flush");
    println!("  -------  -------  -------------  ---------  -------------");
    for report in reports {
        println!(
            "  {:<7}  {:>7}  {:>13}  {:>9}  {:>13.1}",
            report.mode,
            report.threads,
            report.fibers_per_thread,
            format_rate(report.commits_per_second()),
            report.commits_per_flush()
        );
    }
}

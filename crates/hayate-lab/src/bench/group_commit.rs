//! Group-commit micro benchmark: N committer threads append a small `Commit` record and wait
//! for it to be durable, in a loop, for a fixed time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hayate_engine::{Io, LogRecord, Op, Result, Wal, WalConfig};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupCommitReport {
    pub committers: usize,
    pub duration: Duration,
    pub commits: u64,
    pub flushes: u64,
    pub commits_per_second: f64,
    pub flushes_per_second: f64,
    pub commits_per_flush: f64,
    pub commit_wait_us_p50: f64,
    pub commit_wait_us_p99: f64,
}

/// Runs the benchmark on a WAL in `io` (which should be empty: the log found there is
/// recovered first and then extended).
pub fn bench_group_commit(
    io: Arc<dyn Io>,
    config: WalConfig,
    committers: usize,
    duration: Duration,
) -> Result<GroupCommitReport> {
    let (wal, _recovery) = Wal::open(io, config, 0)?;
    let wal = Arc::new(wal);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let threads: Vec<_> = (0..committers)
        .map(|committer| {
            let wal = Arc::clone(&wal);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || commit_loop(&wal, committer as u64, &stop))
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut waits_ns = Vec::new();
    let mut first_error = None;
    for thread in threads {
        match thread.join().expect("committer thread panicked") {
            Ok(mut thread_waits_ns) => waits_ns.append(&mut thread_waits_ns),
            Err(error) => first_error = first_error.or(Some(error)),
        }
    }
    if let Some(error) = first_error {
        return Err(error);
    }
    let elapsed_seconds = started.elapsed().as_secs_f64();
    let stats = wal.stats();
    waits_ns.sort_unstable();
    Ok(GroupCommitReport {
        committers,
        duration,
        commits: stats.commits,
        flushes: stats.flushes,
        commits_per_second: stats.commits as f64 / elapsed_seconds,
        flushes_per_second: stats.flushes as f64 / elapsed_seconds,
        commits_per_flush: stats.commits_per_flush,
        commit_wait_us_p50: percentile_ns(&waits_ns, 0.50) / 1000.0,
        commit_wait_us_p99: percentile_ns(&waits_ns, 0.99) / 1000.0,
    })
}

/// One committer: returns the wait of each commit in nanoseconds.
fn commit_loop(wal: &Wal, committer: u64, stop: &AtomicBool) -> Result<Vec<u64>> {
    let mut waits_ns = Vec::new();
    let mut sequence = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let record = LogRecord::Commit {
            txn_id: committer << 40 | sequence,
            commit_ts: sequence,
            ops: vec![Op::Put {
                tree_id: 1,
                key: sequence.to_le_bytes().to_vec(),
                value: vec![0xab; 100],
            }],
        };
        let started = Instant::now();
        let appended = wal.append(&record)?;
        wal.flush_to(appended.end_lsn)?;
        waits_ns.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
        sequence += 1;
    }
    Ok(waits_ns)
}

/// Nearest-rank percentile of sorted values; 0 for none.
fn percentile_ns(sorted_ns: &[u64], fraction: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let rank = ((sorted_ns.len() as f64 * fraction).ceil() as usize).clamp(1, sorted_ns.len());
    sorted_ns[rank - 1] as f64
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hayate_engine::{Io, SyncIo, WalConfig};

    use super::bench_group_commit;

    #[test]
    fn reports_commits() {
        let dir = tempfile::tempdir().expect("temp dir");
        let io: Arc<dyn Io> = Arc::new(SyncIo::new(dir.path()).expect("sync io"));
        let duration = std::time::Duration::from_millis(200);
        let report = bench_group_commit(io, WalConfig::default(), 4, duration).unwrap();
        assert!(report.commits > 0);
        assert!(report.flushes > 0 && report.flushes <= report.commits);
        assert!(report.commit_wait_us_p50 <= report.commit_wait_us_p99);
    }
}

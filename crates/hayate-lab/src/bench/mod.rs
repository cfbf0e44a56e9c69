//! `hayate-lab bench`: the engine's micro benchmarks.
//!
//! 1. Describe the machine (CPUs, memory, kernel).
//! 2. B+tree in memory: point inserts then point lookups of random keys, 1 and 2 threads.
//! 3. Group commit on the real device: 1, 16 and 256 committers, each run on a fresh log in a
//!    temporary directory under `--dir` (refused on tmpfs, which has no device behind it), with
//!    fdatasync, O_DSYNC writes, or both alternating in one run (`--wal-sync`).
//! 4. Durable updates as fibers versus OS threads (`tasks`).
//! 5. Print a table per benchmark and, with `--json`, write the B+tree and group-commit results
//!    as JSON.

mod btree;
mod group_commit;
mod tasks;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use hayate::error::{CliError, CliResult, Context};
use hayate::report::{self, format_count, format_rate, io_backend_name};
use hayate_engine::{IoKind, SyncMode, WalConfig};

use crate::machine::Machine;
use btree::{bench_btree, bench_btree_threads, BtreeBenchReport};
use group_commit::{bench_group_commit, GroupCommitReport};

const COMMITTER_COUNTS: [usize; 3] = [1, 16, 256];
const BTREE_THREAD_COUNTS: [usize; 2] = [1, 2];

/// Which micro benchmark to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchKind {
    /// B+tree point inserts and lookups in memory, 1 and 2 threads.
    Btree,
    /// Group commit with 1, 16 and 256 committers on the real device.
    Commit,
    /// Durable single-row updates in memory as many fibers per thread vs on OS threads.
    Tasks,
    /// All of the above.
    All,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Benchmark to run.
    #[arg(value_enum, default_value_t = BenchKind::All)]
    pub kind: BenchKind,

    /// Seconds per group-commit or fibers run.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub seconds: u64,

    /// Keys of the B+tree benchmark.
    #[arg(long, value_name = "N", default_value_t = 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub keys: u64,

    /// Directory under which the group-commit log is written; it must be on the real device
    /// (not tmpfs). A temporary subdirectory is made there and removed afterwards.
    /// Default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Also write the results, the configuration and the machine as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// How the group-commit log is made durable: fdatasync after each write, O_DSYNC writes
    /// (dsync), or both side by side in one run.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = WalSync::Fdatasync)]
    pub wal_sync: WalSync,

    /// Zero-fill log segments when they are created, so flushes overwrite allocated blocks.
    #[arg(long)]
    pub wal_preallocate: bool,
}

/// Durability mode(s) of the group-commit benchmark's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WalSync {
    Fdatasync,
    Dsync,
    Both,
}

/// The file system under the group-commit log.
struct Device {
    dir: PathBuf,
    file_system: String,
    io_kind: Option<IoKind>,
}

pub fn run(args: &BenchArgs) -> CliResult<()> {
    let machine = Machine::describe();
    println!("machine: {machine}");
    let mut btree = Vec::new();
    let mut commit = None;
    if matches!(args.kind, BenchKind::Btree | BenchKind::All) {
        btree = run_btree(args.keys)?;
    }
    if matches!(args.kind, BenchKind::Commit | BenchKind::All) {
        commit = Some(run_commit(args)?);
    }
    if matches!(args.kind, BenchKind::Tasks | BenchKind::All) {
        tasks::run(&device_dir(args)?, args.seconds)?;
    }
    if let Some(path) = &args.json {
        let json = to_json(args, &machine, &btree, commit.as_ref());
        std::fs::write(path, json).context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Frames for the B+tree benchmark: room for every leaf (about 24 entries of 108 bytes per
/// 4 KiB page after random splits), so that it measures the tree, not evictions.
fn btree_pool_pages(keys: u64) -> usize {
    (keys / 12) as usize + 1024
}

fn run_btree(keys: u64) -> CliResult<Vec<BtreeBenchReport>> {
    println!();
    println!(
        "B+tree in memory: {} random 8-byte keys with 100-byte values, 4 KiB pages, {} frames",
        format_count(keys),
        format_count(btree_pool_pages(keys) as u64)
    );
    let mut reports = Vec::new();
    for threads in BTREE_THREAD_COUNTS {
        let spinner = crate::progress::spinner(&format!("B+tree, {threads} thread(s)"));
        let report = if threads == 1 {
            bench_btree(btree_pool_pages(keys), keys)
        } else {
            bench_btree_threads(btree_pool_pages(keys), keys, threads)
        };
        spinner.finish_and_clear();
        reports.push(report.context(|| format!("B+tree benchmark with {threads} threads"))?);
    }
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|report| {
            vec![
                report.thread_count.to_string(),
                format_rate(report.inserts_per_second),
                format_rate(report.lookups_per_second),
            ]
        })
        .collect();
    print!(
        "{}",
        report::table(&["threads", "inserts/s", "lookups/s"], &rows)
    );
    Ok(reports)
}

/// The directory on the real device under which benchmarks write (`--dir` or the current one).
fn device_dir(args: &BenchArgs) -> CliResult<PathBuf> {
    let base = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context(|| "no current directory".to_string())?,
    };
    let file_system = crate::sysstat::describe_device(&base).file_system;
    if file_system == "tmpfs" || file_system == "ramfs" {
        return Err(CliError::new(format!(
            "{} is on {file_system}, which has no device to measure; pass --dir on a disk",
            base.display()
        )));
    }
    Ok(base)
}

/// One group-commit run and the log configuration it ran with.
struct CommitRun {
    config: WalConfig,
    report: GroupCommitReport,
}

/// The log configurations `--wal-sync` and `--wal-preallocate` ask for.
fn wal_configs(args: &BenchArgs) -> Vec<WalConfig> {
    let modes: &[SyncMode] = match args.wal_sync {
        WalSync::Fdatasync => &[SyncMode::Data],
        WalSync::Dsync => &[SyncMode::Dsync],
        WalSync::Both => &[SyncMode::Data, SyncMode::Dsync],
    };
    modes
        .iter()
        .map(|&sync_mode| WalConfig {
            sync_mode,
            preallocate_segments: args.wal_preallocate,
            ..WalConfig::default()
        })
        .collect()
}

fn run_commit(args: &BenchArgs) -> CliResult<(Device, Vec<CommitRun>)> {
    let base = device_dir(args)?;
    let file_system = crate::sysstat::describe_device(&base).file_system;
    let temporary = tempfile::Builder::new()
        .prefix(".hayate-bench-")
        .tempdir_in(&base)
        .context(|| format!("cannot create a directory in {}", base.display()))?;
    let duration = Duration::from_secs(args.seconds);
    let mut reports = Vec::new();
    let mut io_kind = None;
    // Modes alternate per committer count, so both see the device in the same state.
    for committers in COMMITTER_COUNTS {
        for config in wal_configs(args) {
            let mode = config.sync_mode.name();
            let dir = temporary
                .path()
                .join(format!("committers-{committers}-{mode}"));
            std::fs::create_dir(&dir).context(|| format!("cannot create {}", dir.display()))?;
            let io = hayate_engine::open_default(&dir)?;
            io_kind = Some(io.kind());
            let spinner =
                crate::progress::spinner(&format!("group commit, {committers} committers, {mode}"));
            let report = bench_group_commit(io, config.clone(), committers, duration);
            spinner.finish_and_clear();
            let report =
                report.context(|| format!("group commit with {committers} committers, {mode}"))?;
            reports.push(CommitRun { config, report });
        }
    }
    let device = Device {
        dir: base,
        file_system,
        io_kind,
    };
    print_commit(&device, args.seconds, &reports);
    temporary
        .close()
        .context(|| "cannot remove the benchmark directory".to_string())?;
    Ok((device, reports))
}

fn print_commit(device: &Device, seconds: u64, runs: &[CommitRun]) {
    let wal = WalConfig::default();
    println!();
    println!(
        "group commit: {seconds} s per run, commit records of one 100-byte row, log in {} \
         ({}), I/O backend {}, segments of {} MiB, group commit delay {:?}",
        device.dir.display(),
        device.file_system,
        device.io_kind.map_or("none", io_backend_name),
        wal.segment_size_bytes >> 20,
        wal.group_commit_delay
    );
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|CommitRun { config, report }| {
            let preallocated = if config.preallocate_segments {
                "yes"
            } else {
                "no"
            };
            vec![
                report.committers.to_string(),
                config.sync_mode.name().to_string(),
                preallocated.to_string(),
                format_rate(report.commits_per_second),
                format_rate(report.flushes_per_second),
                format!("{:.1}", report.commits_per_flush),
                format!("{:.0}", report.commit_wait_us_p50),
                format!("{:.0}", report.commit_wait_us_p99),
            ]
        })
        .collect();
    print!(
        "{}",
        report::table(
            &[
                "committers",
                "sync",
                "preallocated",
                "commits/s",
                "flushes/s",
                "commits/flush",
                "wait p50 us",
                "wait p99 us"
            ],
            &rows
        )
    );
}

fn to_json(
    args: &BenchArgs,
    machine: &Machine,
    btree: &[BtreeBenchReport],
    commit: Option<&(Device, Vec<CommitRun>)>,
) -> String {
    let btree: Vec<serde_json::Value> = btree
        .iter()
        .map(|report| {
            serde_json::json!({
                "threads": report.thread_count,
                "keys": report.key_count,
                "inserts_per_second": report.inserts_per_second.round(),
                "lookups_per_second": report.lookups_per_second.round(),
            })
        })
        .collect();
    let document = serde_json::json!({
        "machine": machine,
        "config": {
            "seconds_per_commit_run": args.seconds,
            "btree_keys": args.keys,
            "btree_pool_pages": btree_pool_pages(args.keys),
            "btree_value_bytes": 100,
            "wal": format!("{:?}", wal_configs(args)),
        },
        "btree": btree,
        "group_commit": commit_json(commit),
    });
    let mut text = serde_json::to_string_pretty(&document).expect("JSON of plain values");
    text.push('\n');
    text
}

fn commit_json(commit: Option<&(Device, Vec<CommitRun>)>) -> serde_json::Value {
    let Some((device, reports)) = commit else {
        return serde_json::Value::Null;
    };
    let runs: Vec<serde_json::Value> = reports
        .iter()
        .map(|CommitRun { config, report }| {
            serde_json::json!({
                "committers": report.committers,
                "wal_sync": config.sync_mode.name(),
                "wal_preallocate": config.preallocate_segments,
                "duration_seconds": report.duration.as_secs_f64(),
                "commits": report.commits,
                "flushes": report.flushes,
                "commits_per_second": report.commits_per_second,
                "flushes_per_second": report.flushes_per_second,
                "commits_per_flush": report.commits_per_flush,
                "commit_wait_us_p50": report.commit_wait_us_p50,
                "commit_wait_us_p99": report.commit_wait_us_p99,
            })
        })
        .collect();
    let io_backend = device
        .io_kind
        .map_or("none".into(), |kind| format!("{kind:?}").to_lowercase());
    serde_json::json!({
        "dir": device.dir.display().to_string(),
        "file_system": device.file_system,
        "io_backend": io_backend,
        "runs": runs,
    })
}

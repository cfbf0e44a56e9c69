//! I/O trace replay: the device IOPS a run's own I/O pattern reaches with no database work, the
//! denominator of storage utilization alpha = run IOPS / replay IOPS (University of Tokyo).
//!
//! A replay:
//! 1. opens every file the trace names, relative to the database directory, with O_DIRECT
//!    through the engine's `Io`; records of files that no longer exist (removed WAL or segment
//!    files) and records beyond a file's current end are skipped and counted;
//! 2. reads the current bytes of every extent the trace writes into memory (at most
//!    `memory_bytes_max`; past it only a prefix of the trace is replayed, and the report says
//!    so), because every replayed write puts back exactly those bytes: the database is intact
//!    afterwards, whatever the order the writes land in;
//! 3. replays the records in trace order, as fast as possible, with `concurrency` I/Os in
//!    flight: up to 4 threads each claim the next chunk of records (their share of the
//!    concurrency) and submit it as batches, one per file and direction, the way the engine
//!    submits I/O; a sync first waits until every earlier write has completed, then runs
//!    `sync_data` on its file, while the other threads go on with later records;
//! 4. reports the reads and writes per second of the timed phase (syncs are not counted).
//!
//! The replay counts trace requests; compare it with the run's trace requests per second
//! (`trace_iops`), or measure both with /proc/diskstats (`ReplayReport::device_iops`).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::io::trace::{read_csv, TraceOp, TraceRecord};
use clap::Args;
use hayate_engine::{AlignedBuf, Io, IoFile, OpenOptions, ReadRequest, WriteRequest};
use indicatif::{ProgressBar, ProgressStyle};
use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};

use super::results::{Alpha, ResultFile};
use super::sysstat::DiskCounters;
use hayate::error::{CliError, CliResult, Context};
use hayate::report::{format_bytes, format_count, format_rate};

/// Bytes aligned for O_DIRECT.
const ALIGN: u64 = hayate_engine::IO_ALIGN as u64;
/// Default memory for the bytes the replayed writes put back.
pub const MEMORY_BYTES_DEFAULT: u64 = 1 << 30;
/// Threads submitting at once; more would only add task switches on a small machine.
pub const THREADS_MAX: u32 = 4;
/// Largest accepted concurrency (the engine's io_uring keeps at most 256 per ring).
pub const CONCURRENCY_MAX: u32 = 4096;
/// Extents read per batch while capturing the bytes the writes put back.
const CAPTURE_BATCH: usize = 64;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub common: crate::args::CommonArgs,

    /// The I/O trace to replay: a CSV file written by a traced run
    /// (header "start_ns,op,file,offset,len,latency_ns"). Its file names are relative to
    /// --dir, which must hold the database the trace was captured on.
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,

    /// I/Os kept in flight during the replay; use the concurrency of the traced run.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub concurrency: u32,

    /// Reads and writes per second of the traced run, for alpha. Default: from the trace
    /// itself (its reads and writes over the time between its first and last record).
    #[arg(long, value_name = "IOPS")]
    pub run_iops: Option<f64>,

    /// Memory for the current bytes of the extents the trace writes (the replay writes them
    /// back unchanged, so the database stays intact). Past it, only a prefix is replayed.
    #[arg(long, value_name = "MIB", default_value_t = MEMORY_BYTES_DEFAULT >> 20)]
    pub memory_mib: u64,
}

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// I/Os in flight.
    pub concurrency: u32,
    /// Memory for the bytes the writes put back.
    pub memory_bytes_max: u64,
    /// Show progress bars on stderr.
    pub progress: bool,
    /// Block device to count in /proc/diskstats during the timed phase (e.g. "vda").
    pub block_device: Option<String>,
}

/// What a replay did and how fast.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Records in the trace given.
    pub trace_records: u64,
    /// Records of the trace prefix that was replayed (all unless memory ran out).
    pub replayed_records: u64,
    /// Records after the prefix, left out because their write bytes did not fit in memory.
    pub not_replayed_records: u64,
    pub reads: u64,
    pub writes: u64,
    pub syncs: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Records of files that no longer exist.
    pub skipped_missing_file: u64,
    /// Records beyond the current end of their file, or empty.
    pub skipped_out_of_range: u64,
    /// Bytes held in memory for the writes (distinct extents).
    pub captured_bytes: u64,
    pub concurrency: u32,
    pub threads: u32,
    /// Duration of the timed phase.
    pub seconds: f64,
    /// Reads plus writes per second of the timed phase.
    pub iops: f64,
    /// Completed device reads plus writes per second (/proc/diskstats) during the timed phase,
    /// when a block device was given.
    pub device_iops: Option<f64>,
}

/// alpha = run IOPS / replay IOPS, for the results of a run.
pub fn alpha(run_iops: f64, report: &ReplayReport) -> Alpha {
    Alpha {
        run_iops,
        replay_iops: report.iops,
        alpha: if report.iops > 0.0 {
            run_iops / report.iops
        } else {
            0.0
        },
        trace_records: report.trace_records,
        replay_concurrency: report.concurrency,
    }
}

/// Reads plus writes per second of the traced run: its records over the time from the first
/// to the last record's completion. `None` for a trace without reads or writes.
pub fn trace_iops(records: &[TraceRecord]) -> Option<f64> {
    let data = records.iter().filter(|r| r.op != TraceOp::Sync);
    let first_ns = data.clone().map(|r| r.start_ns).min()?;
    let end_ns = data.clone().map(|r| r.start_ns + r.latency_ns).max()?;
    let count = data.count() as f64;
    let seconds = (end_ns.saturating_sub(first_ns)) as f64 / 1e9;
    (seconds > 0.0).then(|| count / seconds)
}

/// Replays `records` on the files of `io` with `concurrency` I/Os in flight (see module docs),
/// with the default memory limit.
pub fn replay(
    io: &Arc<dyn Io>,
    records: &[TraceRecord],
    concurrency: u32,
    progress: bool,
) -> CliResult<ReplayReport> {
    let options = ReplayOptions {
        concurrency,
        memory_bytes_max: MEMORY_BYTES_DEFAULT,
        progress,
        block_device: None,
    };
    replay_with(io, records, &options)
}

pub fn replay_with(
    io: &Arc<dyn Io>,
    records: &[TraceRecord],
    options: &ReplayOptions,
) -> CliResult<ReplayReport> {
    if !(1..=CONCURRENCY_MAX).contains(&options.concurrency) {
        return Err(CliError::new(format!(
            "replay concurrency {} must be 1..={CONCURRENCY_MAX}",
            options.concurrency
        )));
    }
    let mut report = ReplayReport {
        trace_records: records.len() as u64,
        concurrency: options.concurrency,
        threads: options.concurrency.min(THREADS_MAX),
        ..ReplayReport::default()
    };
    let plan = prepare(io.as_ref(), records, options, &mut report)?;
    run_timed(&plan, options, &mut report)?;
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// Preparing: files, aligned operations, the bytes writes put back

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Read,
    /// Writes `contents[index]`.
    Write(usize),
    Sync,
}

/// One record to replay, aligned for O_DIRECT.
#[derive(Debug, Clone, Copy)]
struct Op {
    kind: OpKind,
    file: usize,
    offset: u64,
    len: u64,
}

struct Plan {
    files: Vec<Arc<dyn IoFile>>,
    ops: Vec<Op>,
    contents: Vec<AlignedBuf>,
}

/// The records widened to whole aligned blocks, skipping what cannot be replayed; stops before
/// the first record whose new write extent would pass the memory limit.
fn prepare(
    io: &dyn Io,
    records: &[TraceRecord],
    options: &ReplayOptions,
    report: &mut ReplayReport,
) -> CliResult<Plan> {
    let mut files: Vec<Arc<dyn IoFile>> = Vec::new();
    // Per file name: index into `files` and its length in whole blocks, or None if missing.
    let mut opened: HashMap<&str, Option<(usize, u64)>> = HashMap::new();
    let mut extents: HashMap<(usize, u64, u64), usize> = HashMap::new();
    let mut write_extents: Vec<(usize, u64, u64)> = Vec::new();
    let mut ops = Vec::with_capacity(records.len());
    for record in records {
        let file = match opened.get(record.file.as_str()) {
            Some(&file) => file,
            None => {
                let file = open_existing(io, &record.file, &mut files)?;
                opened.insert(&record.file, file);
                file
            }
        };
        let Some((file, file_len)) = file else {
            report.skipped_missing_file += 1;
            report.replayed_records += 1;
            continue;
        };
        let offset = record.offset / ALIGN * ALIGN;
        let end = (record.offset + record.len).div_ceil(ALIGN) * ALIGN;
        let kind = match record.op {
            TraceOp::Sync => OpKind::Sync,
            _ if record.len == 0 || end > file_len => {
                report.skipped_out_of_range += 1;
                report.replayed_records += 1;
                continue;
            }
            TraceOp::Read => OpKind::Read,
            TraceOp::Write => {
                let key = (file, offset, end - offset);
                let next = write_extents.len();
                let index = *extents.entry(key).or_insert(next);
                if index == next {
                    if report.captured_bytes + (end - offset) > options.memory_bytes_max {
                        extents.remove(&key);
                        break;
                    }
                    report.captured_bytes += end - offset;
                    write_extents.push(key);
                }
                OpKind::Write(index)
            }
        };
        report.replayed_records += 1;
        ops.push(Op {
            kind,
            file,
            offset,
            len: end - offset,
        });
    }
    report.not_replayed_records = report.trace_records - report.replayed_records;
    let contents = capture(
        &files,
        &write_extents,
        report.captured_bytes,
        options.progress,
    )?;
    Ok(Plan {
        files,
        ops,
        contents,
    })
}

/// Opens a file of the trace if it exists; returns its index and length in whole blocks.
fn open_existing(
    io: &dyn Io,
    name: &str,
    files: &mut Vec<Arc<dyn IoFile>>,
) -> CliResult<Option<(usize, u64)>> {
    // "." is the directory itself (the trace's record of a directory fsync at a checkpoint):
    // not a file to replay on; counted with the missing files.
    if name == "." || !io.exists(name)? {
        return Ok(None);
    }
    let file = io
        .open(name, OpenOptions::EXISTING_DIRECT)
        .context(|| format!("cannot open {name} for the replay"))?;
    let len = file.len()? / ALIGN * ALIGN;
    files.push(file);
    Ok(Some((files.len() - 1, len)))
}

/// Reads the current bytes of every write extent, in batches per file.
fn capture(
    files: &[Arc<dyn IoFile>],
    extents: &[(usize, u64, u64)],
    total_bytes: u64,
    progress: bool,
) -> CliResult<Vec<AlignedBuf>> {
    let bar = bar(
        progress,
        total_bytes,
        "capture  [{bar:30}] {bytes}/{total_bytes} to write back",
    );
    let mut contents: Vec<AlignedBuf> = extents
        .iter()
        .map(|&(_, _, len)| AlignedBuf::new(len as usize))
        .collect();
    let mut order: Vec<usize> = (0..extents.len()).collect();
    order.sort_by_key(|&index| (extents[index].0, extents[index].1));
    let mut by_index: Vec<Option<&mut AlignedBuf>> = contents.iter_mut().map(Some).collect();
    for group in order.chunk_by(|&a, &b| extents[a].0 == extents[b].0) {
        for batch in group.chunks(CAPTURE_BATCH) {
            let mut requests: Vec<ReadRequest<'_>> = batch
                .iter()
                .map(|&index| ReadRequest {
                    offset: extents[index].1,
                    buf: &mut by_index[index].take().expect("each extent once")[..],
                })
                .collect();
            files[extents[batch[0]].0].read_batch(&mut requests)?;
            bar.inc(batch.iter().map(|&index| extents[index].2).sum());
        }
    }
    bar.finish_and_clear();
    Ok(contents)
}

fn bar(progress: bool, len: u64, template: &str) -> ProgressBar {
    if !progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

// ---------------------------------------------------------------------------------------------
// The timed replay

/// Which records are claimed and which claimed chunks with writes are still running.
struct Dispatch {
    next: usize,
    /// First op index of every claimed chunk that holds writes and has not completed.
    writes_in_flight: BTreeSet<usize>,
}

struct Shared<'a> {
    plan: &'a Plan,
    dispatch: Mutex<Dispatch>,
    writes_done: Condvar,
    bar: ProgressBar,
}

/// Counts of one thread.
#[derive(Default)]
struct Done {
    reads: u64,
    writes: u64,
    syncs: u64,
    read_bytes: u64,
    write_bytes: u64,
}

fn run_timed(plan: &Plan, options: &ReplayOptions, report: &mut ReplayReport) -> CliResult<()> {
    let shared = Shared {
        plan,
        dispatch: Mutex::new(Dispatch {
            next: 0,
            writes_in_flight: BTreeSet::new(),
        }),
        writes_done: Condvar::new(),
        bar: bar(
            options.progress,
            plan.ops.len() as u64,
            "replay   [{bar:30}] {pos}/{len} I/Os, {per_sec}",
        ),
    };
    let threads = report.threads;
    let counters_before = options.block_device.as_deref().and_then(DiskCounters::read);
    let started = Instant::now();
    let results: Vec<CliResult<Done>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let share = options.concurrency / threads
                    + u32::from(thread < options.concurrency % threads);
                let shared = &shared;
                scope.spawn(move || replay_worker(shared, share as usize))
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("replay worker panicked"))
            .collect()
    });
    report.seconds = started.elapsed().as_secs_f64();
    let counters_after = options.block_device.as_deref().and_then(DiskCounters::read);
    shared.bar.finish_and_clear();
    for done in results {
        let done = done?;
        report.reads += done.reads;
        report.writes += done.writes;
        report.syncs += done.syncs;
        report.read_bytes += done.read_bytes;
        report.write_bytes += done.write_bytes;
    }
    if report.seconds > 0.0 {
        report.iops = (report.reads + report.writes) as f64 / report.seconds;
    }
    if let (Some(before), Some(after)) = (counters_before, counters_after) {
        let rates = after.rates_since(&before, report.seconds);
        report.device_iops = Some(rates.reads_per_second + rates.writes_per_second);
    }
    Ok(())
}

/// What a worker claimed: a sync, or a chunk of reads and writes `[start, end)`.
enum Claim {
    Sync(usize),
    Chunk(usize, usize),
}

/// Claims and runs chunks of up to `share` records until none are left. On an error the other
/// workers still finish their chunks; the first error is returned.
fn replay_worker(shared: &Shared<'_>, share: usize) -> CliResult<Done> {
    let mut done = Done::default();
    let mut arena = AlignedBuf::new(hayate_engine::IO_ALIGN);
    while let Some(claim) = claim(shared, share) {
        match claim {
            Claim::Sync(index) => {
                let op = shared.plan.ops[index];
                shared.plan.files[op.file].sync_data()?;
                done.syncs += 1;
                shared.bar.inc(1);
            }
            Claim::Chunk(start, end) => {
                let result = run_chunk(shared.plan, &shared.plan.ops[start..end], &mut arena);
                let mut dispatch = shared.dispatch.lock();
                if dispatch.writes_in_flight.remove(&start) {
                    shared.writes_done.notify_all();
                }
                drop(dispatch);
                let chunk_done = result?;
                done.reads += chunk_done.reads;
                done.writes += chunk_done.writes;
                done.read_bytes += chunk_done.read_bytes;
                done.write_bytes += chunk_done.write_bytes;
                shared.bar.inc((end - start) as u64);
            }
        }
    }
    Ok(done)
}

/// Takes the next records in trace order. A sync is claimed alone, and only returned once every
/// earlier chunk holding writes has completed.
fn claim(shared: &Shared<'_>, share: usize) -> Option<Claim> {
    let ops = &shared.plan.ops;
    let mut dispatch = shared.dispatch.lock();
    let start = dispatch.next;
    if start >= ops.len() {
        return None;
    }
    if ops[start].kind == OpKind::Sync {
        dispatch.next += 1;
        while dispatch
            .writes_in_flight
            .first()
            .is_some_and(|&first| first < start)
        {
            shared.writes_done.wait(&mut dispatch);
        }
        return Some(Claim::Sync(start));
    }
    let mut end = start;
    while end < ops.len() && end - start < share && ops[end].kind != OpKind::Sync {
        end += 1;
    }
    dispatch.next = end;
    if ops[start..end]
        .iter()
        .any(|op| matches!(op.kind, OpKind::Write(_)))
    {
        dispatch.writes_in_flight.insert(start);
    }
    Some(Claim::Chunk(start, end))
}

/// Runs a chunk as batches: one per file and direction, in order of first appearance.
fn run_chunk(plan: &Plan, chunk: &[Op], arena: &mut AlignedBuf) -> CliResult<Done> {
    let mut done = Done::default();
    let mut groups: Vec<(usize, bool)> = Vec::new();
    for op in chunk {
        let group = (op.file, op.kind == OpKind::Read);
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    for (file, is_read) in groups {
        let members = chunk
            .iter()
            .filter(|op| op.file == file && (op.kind == OpKind::Read) == is_read);
        if is_read {
            let bytes: u64 = members.clone().map(|op| op.len).sum();
            if (arena.len() as u64) < bytes {
                *arena = AlignedBuf::new(bytes as usize);
            }
            let mut rest: &mut [u8] = &mut arena[..];
            let mut requests = Vec::new();
            for op in members {
                let (buf, tail) = rest.split_at_mut(op.len as usize);
                rest = tail;
                requests.push(ReadRequest {
                    offset: op.offset,
                    buf,
                });
                done.reads += 1;
                done.read_bytes += op.len;
            }
            plan.files[file].read_batch(&mut requests)?;
        } else {
            let requests: Vec<WriteRequest<'_>> = members
                .map(|op| {
                    let OpKind::Write(index) = op.kind else {
                        unreachable!("a chunk holds reads and writes only")
                    };
                    done.writes += 1;
                    done.write_bytes += op.len;
                    WriteRequest {
                        offset: op.offset,
                        buf: &plan.contents[index][..],
                    }
                })
                .collect();
            plan.files[file].write_batch(&requests)?;
        }
    }
    Ok(done)
}

// ---------------------------------------------------------------------------------------------
// The command

pub fn run(args: &ReplayArgs) -> CliResult<()> {
    let dir = args.common.base_dir();
    if !dir.is_dir() {
        return Err(CliError::new(format!(
            "{} is not a directory (--dir names the database the trace was captured on)",
            dir.display()
        )));
    }
    let file = std::fs::File::open(&args.trace)
        .context(|| format!("cannot open trace {}", args.trace.display()))?;
    let records = read_csv(std::io::BufReader::new(file))
        .context(|| format!("cannot read trace {}", args.trace.display()))?;
    let io =
        hayate_engine::open_default(&dir).context(|| format!("cannot open {}", dir.display()))?;
    let device = super::sysstat::describe_device(&dir);
    let options = ReplayOptions {
        concurrency: args.concurrency,
        memory_bytes_max: args.memory_mib.saturating_mul(1 << 20),
        progress: true,
        block_device: (device.block_device != "unknown").then(|| device.block_device.clone()),
    };
    let report = replay_with(&io, &records, &options)?;
    let run_iops = args.run_iops.or_else(|| trace_iops(&records));
    let alpha = run_iops.map(|run_iops| alpha(run_iops, &report));
    print!("{}", format_report(&report, alpha.as_ref()));
    let results = ReplayResults {
        trace_file: args.trace.display().to_string(),
        report,
        alpha,
    };
    let path = ResultFile::new("replay", &dir, results).write(&args.common.results)?;
    println!("results: {}", path.display());
    Ok(())
}

/// The results file of `hayate-lab replay`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplayResults {
    pub trace_file: String,
    pub report: ReplayReport,
    /// From --run-iops or the trace's own timing.
    pub alpha: Option<Alpha>,
}

fn format_report(report: &ReplayReport, alpha: Option<&Alpha>) -> String {
    let mut out = format!(
        "replayed {} of {} records in {:.2} s with {} I/Os in flight ({} threads):\n  \
         {} reads ({}), {} writes ({}), {} syncs\n  {} reads+writes/s",
        format_count(report.replayed_records),
        format_count(report.trace_records),
        report.seconds,
        report.concurrency,
        report.threads,
        format_count(report.reads),
        format_bytes(report.read_bytes),
        format_count(report.writes),
        format_bytes(report.write_bytes),
        format_count(report.syncs),
        format_rate(report.iops),
    );
    if let Some(device_iops) = report.device_iops {
        out += &format!(" (device: {}/s)", format_rate(device_iops));
    }
    out.push('\n');
    if report.skipped_missing_file + report.skipped_out_of_range > 0 {
        out += &format!(
            "  skipped: {} records of removed files, {} beyond the end of their file\n",
            format_count(report.skipped_missing_file),
            format_count(report.skipped_out_of_range)
        );
    }
    if report.not_replayed_records > 0 {
        out += &format!(
            "  not replayed: the last {} records (their writes need more than the memory \
             limit; raise --memory-mib)\n",
            format_count(report.not_replayed_records)
        );
    }
    if let Some(alpha) = alpha {
        out += &format!(
            "alpha = run {}/s / replay {}/s = {:.2}\n",
            format_rate(alpha.run_iops),
            format_rate(alpha.replay_iops),
            alpha.alpha
        );
    }
    out
}

#[cfg(test)]
mod tests;

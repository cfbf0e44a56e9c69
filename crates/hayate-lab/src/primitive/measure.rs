//! One measured run of the primitive workload: the same figures for every engine, plus what
//! only Hayate can tell (time split, timeline, trace replay).
//!
//! Sequence of a run:
//! 1. Prewarm when the buffer holds all the data; warm up for `--warmup` seconds.
//! 2. Take counters (CPU, device, engine), start the I/O trace (Hayate), run for `--seconds`
//!    with a progress bar, stop the trace, take the counters again.
//! 3. Hayate: close the database and replay the trace on its files with no database work at
//!    the run's concurrency (alpha); write the timeline of the run's first milliseconds.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::io::trace::{TraceOp, TraceRecord};
use hayate_engine::{Phase, PhaseReport};

use super::driver::{run_one, Attempt, KeyGenerator, Mode, PrimitiveDriver, RunJob, WorkerOutcome};
use super::{DeviceClassArg, HayateDriver, Plan};
use crate::driver::{Driver, DriverResult};
use crate::progress::timed_bar;
use crate::results::{
    IoRates, Percentiles, PrimitiveRun, Span, SpanKind, TimeSplit, Timeline, WorkerTimeline,
};
use crate::{replay, sysstat};
use hayate::error::{CliError, CliResult, Context};
use hayate::report::Histogram;

/// Runs `body` for a job's duration while a progress bar counts the seconds.
pub(crate) fn with_progress<T>(what: &str, seconds: u64, body: impl FnOnce() -> T + Send) -> T
where
    T: Send,
{
    let bar = timed_bar(seconds, what);
    let done = std::sync::atomic::AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            let started = Instant::now();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                bar.set_position(started.elapsed().as_secs().min(seconds));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let result = body();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        result
    });
    bar.finish_and_clear();
    result
}

pub(crate) fn percentiles(histogram: &Histogram, total_ns: u128) -> Percentiles {
    let us = |fraction: f64| histogram.quantile_ns(fraction) as f64 / 1000.0;
    Percentiles {
        mean_us: if histogram.count() == 0 {
            0.0
        } else {
            total_ns as f64 / histogram.count() as f64 / 1000.0
        },
        p50_us: us(0.5),
        p90_us: us(0.9),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: us(1.0),
    }
}

/// Reads, writes and their bytes in a trace.
pub(crate) fn trace_rates(records: &[TraceRecord], seconds: f64) -> IoRates {
    let (mut reads, mut writes, mut read_bytes, mut write_bytes) = (0u64, 0u64, 0u64, 0u64);
    for record in records {
        match record.op {
            TraceOp::Read => {
                reads += 1;
                read_bytes += record.len;
            }
            TraceOp::Write => {
                writes += 1;
                write_bytes += record.len;
            }
            TraceOp::Sync => {}
        }
    }
    let seconds = seconds.max(1e-9);
    IoRates {
        reads_per_second: reads as f64 / seconds,
        writes_per_second: writes as f64 / seconds,
        read_mib_per_second: read_bytes as f64 / seconds / (1 << 20) as f64,
        write_mib_per_second: write_bytes as f64 / seconds / (1 << 20) as f64,
        source: "engine I/O trace".into(),
    }
}

/// The run's common fields.
fn base_run(
    plan: &Plan,
    driver: &dyn PrimitiveDriver,
    class: DeviceClassArg,
    percent: f64,
    mode: Mode,
    outcome: &WorkerOutcome,
    seconds: f64,
) -> PrimitiveRun {
    PrimitiveRun {
        engine: driver.engine().to_string(),
        engine_version: driver.version(),
        engine_settings: driver.settings(),
        device_class: class.name().to_string(),
        emulated: class != DeviceClassArg::Real,
        mode: mode.as_str().to_string(),
        buffer_percent: percent,
        buffer_bytes: plan.buffer_bytes(percent),
        page_size: driver.page_size(),
        write_policy: driver.write_policy(),
        tables: plan.spec.tables,
        rows_per_table: plan.spec.rows_per_table,
        data_bytes: plan.spec.data_bytes(),
        concurrency: plan.concurrency,
        worker_threads: outcome.worker_threads,
        seconds,
        transactions: outcome.transactions,
        transactions_per_second: outcome.transactions as f64 / seconds.max(1e-9),
        retries: outcome.retries,
        latency: percentiles(&outcome.latency, outcome.latency_total_ns()),
        ..PrimitiveRun::default()
    }
}

fn label(driver: &dyn PrimitiveDriver, class: DeviceClassArg, percent: f64, mode: Mode) -> String {
    format!(
        "{} {} {}% {}",
        driver.engine(),
        class.name(),
        percent,
        mode.as_str()
    )
}

fn warm(
    plan: &Plan,
    driver: &dyn PrimitiveDriver,
    percent: f64,
    mode: Mode,
    what: &str,
) -> CliResult<()> {
    let fail = |error: crate::driver::DriverError| {
        CliError::new(format!("{}: warm-up: {error}", driver.engine()))
    };
    if percent >= 100.0 {
        driver.prewarm(&plan.spec).map_err(fail)?;
    }
    if plan.warmup > 0 {
        let job = plan.job(mode, Duration::from_secs(plan.warmup));
        with_progress(&format!("warm-up {what}"), plan.warmup, || {
            run_job(driver, &job)
        })
        .map_err(fail)?;
    }
    Ok(())
}

/// Runs a job natively when the engine can, else on one session per thread.
fn run_job(driver: &dyn PrimitiveDriver, job: &RunJob) -> DriverResult<WorkerOutcome> {
    match driver.run_native(job) {
        Some(result) => result,
        None => run_sessions(driver, job),
    }
}

/// `job.concurrency` threads, each with its own session, until the job's duration is over.
pub fn run_sessions(driver: &dyn PrimitiveDriver, job: &RunJob) -> DriverResult<WorkerOutcome> {
    let sessions = (0..job.concurrency)
        .map(|_| driver.connect())
        .collect::<DriverResult<Vec<_>>>()?;
    let started = Instant::now();
    let deadline = started + job.duration;
    let results: Vec<DriverResult<WorkerOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .into_iter()
            .enumerate()
            .map(|(worker, mut session)| {
                scope.spawn(move || -> DriverResult<WorkerOutcome> {
                    let mut keys = KeyGenerator::new(&job.spec, job.seed, worker as u64);
                    let mut outcome = WorkerOutcome {
                        worker_threads: 1,
                        ..WorkerOutcome::default()
                    };
                    let mut now = Instant::now();
                    while now < deadline {
                        let (table, sid) = keys.next();
                        // Small values: peers store C1 as a 32-bit integer.
                        let c1 = (outcome.transactions % 1_000_000) as i64;
                        match run_one(session.as_mut(), job.mode, table, sid, c1, deadline)? {
                            Attempt::Committed { retries } => {
                                outcome.retries += retries;
                                let finished = Instant::now();
                                outcome.record(finished.duration_since(now));
                                now = finished;
                            }
                            Attempt::GaveUp { retries } => {
                                outcome.retries += retries;
                                break;
                            }
                        }
                    }
                    Ok(outcome)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("session thread panicked"))
            .collect()
    });
    let mut total = WorkerOutcome::default();
    for result in results {
        total.merge(&result?);
    }
    Ok(total)
}

/// CPU seconds of this process and of the engine's server processes.
pub(crate) fn cpu_seconds(driver: &dyn Driver) -> f64 {
    sysstat::self_cpu_seconds() + sysstat::process_tree_cpu_seconds(&driver.server_pids())
}

/// What a run of any engine measured around its body: the body's value, wall seconds, CPU
/// seconds of the engine's processes (the lab's included) and the block device's I/O rates.
pub(crate) struct Around<T> {
    pub value: T,
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub io: Option<IoRates>,
}

/// Runs `body` for `seconds` under a progress bar labeled `what`, measuring around it.
pub(crate) fn measure_around<T: Send>(
    driver: &dyn Driver,
    what: &str,
    seconds: u64,
    body: impl FnOnce() -> T + Send,
) -> Around<T> {
    let device = sysstat::describe_device(Path::new("."));
    let disk_before = sysstat::DiskCounters::read(&device.block_device);
    let cpu_before = cpu_seconds(driver);
    let started = Instant::now();
    let value = with_progress(what, seconds, body);
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_seconds = cpu_seconds(driver) - cpu_before;
    let io = match (
        disk_before,
        sysstat::DiskCounters::read(&device.block_device),
    ) {
        (Some(before), Some(after)) => Some(after.rates_since(&before, elapsed)),
        _ => None,
    };
    Around {
        value,
        seconds: elapsed,
        cpu_seconds,
        io,
    }
}

/// What a native Hayate run measured: its value, wall and CPU seconds, its I/O trace and the
/// engine's counters before and after.
pub(crate) struct Native<T> {
    pub value: T,
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub records: Vec<TraceRecord>,
    pub before: hayate_engine::DatabaseStats,
    pub after: hayate_engine::DatabaseStats,
}

/// Runs `body` on Hayate with its I/O traced and its timeline recorded (`timeline` long).
pub(crate) fn measure_native<T: Send>(
    driver: &HayateDriver,
    what: &str,
    seconds: u64,
    timeline: Duration,
    body: impl FnOnce() -> T + Send,
) -> CliResult<Native<T>> {
    let closed = || CliError::new("hayate: the database is not open");
    let db = driver.database().ok_or_else(closed)?;
    let tracing = driver.tracing().ok_or_else(closed)?;
    let before = db.stats();
    let cpu_before = sysstat::self_cpu_seconds();
    driver.set_timeline_window(timeline);
    tracing.take_records();
    tracing.start();
    let started = Instant::now();
    let value = with_progress(what, seconds, body);
    let elapsed = started.elapsed().as_secs_f64();
    tracing.stop();
    if tracing.dropped_count() > 0 {
        log::warn!(
            "the I/O trace of {what} kept its first {} records and dropped {}: the replay \
             covers only the start of the run",
            crate::io::trace::TRACE_RECORDS_MAX,
            tracing.dropped_count()
        );
    }
    driver.set_timeline_window(Duration::ZERO);
    Ok(Native {
        value,
        seconds: elapsed,
        cpu_seconds: sysstat::self_cpu_seconds() - cpu_before,
        records: tracing.take_records(),
        after: db.stats(),
        before,
    })
}

impl<T> Native<T> {
    /// Buffer hit ratio over the run.
    pub fn hit_ratio(&self) -> f64 {
        let hits = self.after.buffer.hits - self.before.buffer.hits;
        let misses = self.after.buffer.misses - self.before.buffer.misses;
        hits as f64 / (hits + misses).max(1) as f64
    }

    /// Log flushes over the run.
    pub fn log_flushes(&self) -> u64 {
        self.after.wal.flushes - self.before.wal.flushes
    }

    /// Commits per log flush, given the commits that wrote.
    pub fn commits_per_flush(&self, commits: u64) -> Option<f64> {
        let flushes = self.log_flushes();
        (flushes > 0).then(|| commits as f64 / flushes as f64)
    }
}

/// A measured run on a peer (or any driver without native runs): one session per thread.
pub fn session_run(
    plan: &Plan,
    driver: &dyn PrimitiveDriver,
    class: DeviceClassArg,
    percent: f64,
    mode: Mode,
) -> CliResult<PrimitiveRun> {
    let what = label(driver, class, percent, mode);
    warm(plan, driver, percent, mode, &what)?;
    let job = plan.job(mode, Duration::from_secs(plan.seconds));
    let around = measure_around(driver, &what, plan.seconds, || run_job(driver, &job));
    let outcome = around
        .value
        .map_err(|error| CliError::new(format!("{}: {error}", driver.engine())))?;
    let mut run = base_run(plan, driver, class, percent, mode, &outcome, around.seconds);
    run.cpu_us_per_transaction = around.cpu_seconds * 1e6 / outcome.transactions.max(1) as f64;
    if let Some(io) = around.io {
        run.io = io;
    }
    Ok(run)
}

/// A measured run on Hayate (see the module docs).
pub fn hayate_run(
    plan: &Plan,
    driver: &HayateDriver,
    class: DeviceClassArg,
    percent: f64,
    mode: Mode,
    results_dir: &Path,
) -> CliResult<PrimitiveRun> {
    let what = label(driver, class, percent, mode);
    warm(plan, driver, percent, mode, &what)?;
    let device_io = driver
        .device_io()
        .ok_or_else(|| CliError::new("hayate: the database is not open"))?;
    let job = plan.job(mode, Duration::from_secs(plan.seconds));
    let native = measure_native(driver, &what, plan.seconds, plan.timeline, || {
        driver.run_native(&job)
    })?;
    let outcome = (native.value.as_ref())
        .expect("Hayate runs natively")
        .as_ref()
        .map_err(|error| CliError::new(format!("hayate: {error}")))?
        .clone();
    let (seconds, records) = (native.seconds, &native.records);

    let mut run = base_run(plan, driver, class, percent, mode, &outcome, seconds);
    run.cpu_us_per_transaction = native.cpu_seconds * 1e6 / outcome.transactions.max(1) as f64;
    run.io = trace_rates(records, seconds);
    run.buffer_hit_ratio = Some(native.hit_ratio());
    let details = driver.details();
    run.log_flushes = Some(native.log_flushes());
    run.commits_per_flush = native.commits_per_flush(details.updates_committed);
    run.space_amplification = Some(native.after.store.space_amplification());
    run.time_split = Some(time_split(&details.phases));

    let stamp = crate::results::unix_now();
    let name = format!(
        "{}-{}-{}-{}pct-{stamp}",
        driver.engine(),
        class.name(),
        mode.as_str(),
        percent
    );
    if !plan.timeline.is_zero() {
        let label = (
            run.engine.as_str(),
            run.mode.as_str(),
            run.buffer_percent,
            run.device_class.as_str(),
        );
        let timeline = timeline(label, &details, plan.timeline);
        let file = format!("timeline-{name}.json");
        write_json(results_dir, &file, &timeline)?;
        run.timeline_file = Some(file);
    }
    if plan.keep_traces {
        let file = format!("trace-{name}.csv");
        std::fs::create_dir_all(results_dir)
            .context(|| format!("cannot create {}", results_dir.display()))?;
        let out = std::fs::File::create(results_dir.join(&file))
            .context(|| format!("cannot create {file}"))?;
        crate::io::trace::write_csv(records, std::io::BufWriter::new(out))?;
        run.trace_file = Some(file);
    }
    run.alpha = close_and_replay(
        driver,
        &device_io,
        records,
        plan.concurrency,
        &run.io,
        plan.replay,
    )?;
    Ok(run)
}

/// Closes Hayate's database (the replay rewrites what it wrote), then, when asked, replays
/// the run's I/O trace with no database work at `concurrency`: the run's alpha.
pub(crate) fn close_and_replay(
    driver: &HayateDriver,
    device_io: &std::sync::Arc<dyn hayate_engine::Io>,
    records: &[TraceRecord],
    concurrency: u32,
    run_io: &IoRates,
    replay: bool,
) -> CliResult<Option<crate::results::Alpha>> {
    driver
        .close()
        .map_err(|error| CliError::new(format!("hayate: {error}")))?;
    if !replay || records.is_empty() {
        return Ok(None);
    }
    let run_iops = run_io.reads_per_second + run_io.writes_per_second;
    let report = replay::replay(device_io, records, concurrency, true)?;
    Ok(Some(replay::alpha(run_iops, &report)))
}

pub(crate) fn time_split(phases: &PhaseReport) -> TimeSplit {
    let wall = phases.wall().as_secs_f64().max(1e-12);
    let share = |phase: Phase| phases.total(phase).as_secs_f64() / wall;
    TimeSplit {
        cpu: share(Phase::Cpu),
        read_io: share(Phase::ReadIo),
        write_io: share(Phase::WriteIo),
        log_wait: share(Phase::LogWait),
        lock_wait: share(Phase::LockWait),
    }
}

/// The timeline of a run (`engine`, `mode`, `buffer_percent` and `device_class` label it).
pub(crate) fn timeline(
    label: (&str, &str, f64, &str),
    details: &super::hayate::NativeDetails,
    window: Duration,
) -> Timeline {
    let (engine, mode, buffer_percent, device_class) = label;
    let origin = details.started.unwrap_or_else(Instant::now);
    let micros = |instant: Instant| instant.saturating_duration_since(origin).as_secs_f64() * 1e6;
    let workers = details
        .worker_phases
        .iter()
        .enumerate()
        .map(|(worker, phases)| WorkerTimeline {
            worker: worker as u32,
            spans: phases
                .spans
                .iter()
                .map(|span| Span {
                    start_us: micros(span.start),
                    end_us: micros(span.end),
                    kind: match span.phase {
                        Phase::Cpu => SpanKind::Cpu,
                        Phase::ReadIo => SpanKind::ReadIo,
                        Phase::WriteIo => SpanKind::WriteIo,
                        Phase::LogWait => SpanKind::LogWait,
                        Phase::LockWait => SpanKind::LockWait,
                    },
                    in_flight: span.in_flight,
                })
                .collect(),
        })
        .collect();
    Timeline {
        engine: engine.to_string(),
        mode: mode.to_string(),
        buffer_percent,
        device_class: device_class.to_string(),
        window_us: window.as_micros() as u64,
        workers,
    }
}

pub(crate) fn write_json(dir: &Path, file: &str, value: &impl serde::Serialize) -> CliResult<()> {
    std::fs::create_dir_all(dir).context(|| format!("cannot create {}", dir.display()))?;
    let text = serde_json::to_string(value).context(|| format!("cannot encode {file}"))?;
    std::fs::write(dir.join(file), text).context(|| format!("cannot write {file}"))
}

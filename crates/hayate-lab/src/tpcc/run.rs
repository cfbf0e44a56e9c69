//! Measured TPC-C runs: the same figures for every engine, plus what only Hayate can tell
//! (time split by phase, timeline, I/O trace replayed for alpha).
//!
//! A run: size the buffer (reopening Hayate or restarting a server), prewarm when the buffer
//! holds everything, warm up, then run for the measured seconds with a progress bar, taking
//! CPU, device and engine counters around it; Hayate's database is then closed and the run's
//! I/O trace replayed with no database work to give alpha.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::driver::{DriverError, DriverResult};
use crate::primitive::measure::{
    close_and_replay, measure_around, measure_native, percentiles, time_split, timeline,
    trace_rates, with_progress, write_json,
};
use crate::primitive::{DeviceClassArg, HayateDriver};
use crate::results::{TpccRun, TpccTypeRun};
use crate::tpcc::deferred::{defer, executors_for, run_executor, DeliveryQueue};
use crate::tpcc::driver::TpccDriver;
use crate::tpcc::metrics::{record_output, TpccJob, TpccOutcome};
use crate::tpcc::spec::Scale;
use crate::tpcc::txn::{DeliveryInput, Terminal, TpccSession, TxnType};
use hayate::error::{CliError, CliResult};

/// What every run of an invocation shares.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub scale: Scale,
    pub terminals: u32,
    pub seconds: u64,
    pub warmup: u64,
    pub seed: u64,
    pub timeline: Duration,
    pub replay: bool,
    /// Deliveries deferred (clause 2.7.2), else inline.
    pub deferred_delivery: bool,
}

impl RunPlan {
    pub fn job(&self, duration: Duration) -> TpccJob {
        TpccJob {
            scale: self.scale,
            terminals: self.terminals,
            duration,
            seed: self.seed,
            acknowledged: None,
            deferred_delivery: self.deferred_delivery,
        }
    }
}

/// Runs a job natively when the engine can, else on one session per terminal (thread), and
/// one per Delivery executor when they run deferred.
pub fn run_job(driver: &dyn TpccDriver, job: &TpccJob) -> DriverResult<TpccOutcome> {
    if let Some(result) = driver.run_tpcc_native(job) {
        return result;
    }
    let queue = (job.deferred_delivery)
        .then(|| DeliveryQueue::new(&job.scale, executors_for(&job.scale, job.terminals)));
    let sessions = (0..job.terminals)
        .map(|_| driver.connect_tpcc())
        .collect::<DriverResult<Vec<_>>>()?;
    let executors = (0..queue.as_ref().map_or(0, DeliveryQueue::executors))
        .map(|_| driver.connect_tpcc())
        .collect::<DriverResult<Vec<_>>>()?;
    let deadline = Instant::now() + job.duration;
    let results: Vec<DriverResult<TpccOutcome>> = std::thread::scope(|scope| {
        let queue = queue.as_ref();
        let mut handles: Vec<_> = sessions
            .into_iter()
            .enumerate()
            .map(|(index, mut session)| {
                scope.spawn(move || {
                    let mut terminal = Terminal::new(&job.scale, index as u32, job.seed);
                    run_terminal(session.as_mut(), &mut terminal, job, deadline, queue)
                })
            })
            .collect();
        for (index, mut session) in executors.into_iter().enumerate() {
            let queue = queue.expect("executors only with a queue");
            handles.push(scope.spawn(move || {
                let mut deliver = |input: &DeliveryInput| session.delivery(input);
                run_executor(queue, index as u32, deadline, &mut deliver)
                    .map(|(outcome, _)| outcome)
            }));
        }
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(DriverError::fatal("a terminal thread panicked")))
            })
            .collect()
    });
    let mut total = TpccOutcome::default();
    for result in results {
        total.merge(&result?);
    }
    total.deliveries_pending = queue.map_or(0, |queue| queue.pending());
    Ok(total)
}

/// Runs one terminal on a session until the deadline: the next input, retried on retryable
/// failures (the same input) until it commits or the run ends; a Delivery goes to
/// `deliveries` when given (deferred). For engines without a native runner.
pub fn run_terminal(
    session: &mut dyn TpccSession,
    terminal: &mut Terminal,
    job: &TpccJob,
    deadline: Instant,
    deliveries: Option<&DeliveryQueue>,
) -> DriverResult<TpccOutcome> {
    let mut outcome = TpccOutcome {
        worker_threads: 1,
        ..TpccOutcome::default()
    };
    while Instant::now() < deadline {
        let input = terminal.next();
        if defer(&input, deliveries, deadline)? {
            continue;
        }
        let started = Instant::now();
        loop {
            match session.run(&input) {
                Ok(output) => {
                    record_output(&mut outcome, &input, output, started.elapsed(), job);
                    break;
                }
                Err(error) if error.retryable => {
                    if Instant::now() >= deadline {
                        outcome.gave_up += 1;
                        break;
                    }
                    outcome.retry(input.kind(), &error);
                }
                Err(error) => {
                    return Err(DriverError::fatal(format!(
                        "{}: {error}",
                        input.kind().as_str()
                    )))
                }
            }
        }
    }
    Ok(outcome)
}

fn label(driver: &dyn TpccDriver, class: DeviceClassArg, percent: f64) -> String {
    format!("{} {} {}% tpcc", driver.engine(), class.name(), percent)
}

fn warm(plan: &RunPlan, driver: &dyn TpccDriver, what: &str) -> CliResult<()> {
    if plan.warmup == 0 {
        return Ok(());
    }
    let job = plan.job(Duration::from_secs(plan.warmup));
    with_progress(&format!("warm-up {what}"), plan.warmup, || {
        run_job(driver, &job)
    })
    .map_err(|error| CliError::new(format!("{}: warm-up: {error}", driver.engine())))?;
    Ok(())
}

/// The common fields of a run from its outcome.
fn base_run(
    plan: &RunPlan,
    driver: &dyn TpccDriver,
    class: DeviceClassArg,
    percent: f64,
    buffer_bytes: u64,
    outcome: &TpccOutcome,
    seconds: f64,
) -> TpccRun {
    let seconds = seconds.max(1e-9);
    let per_type = TxnType::ALL
        .iter()
        .map(|kind| {
            let typed = &outcome.per_type[kind.index()];
            TpccTypeRun {
                name: kind.as_str().to_string(),
                committed: typed.committed,
                per_second: typed.committed as f64 / seconds,
                latency: percentiles(&typed.latency, typed.latency_sum_ns),
            }
        })
        .collect();
    TpccRun {
        engine: driver.engine().to_string(),
        engine_version: driver.version(),
        engine_settings: driver.settings(),
        device_class: class.name().to_string(),
        emulated: class != DeviceClassArg::Real,
        buffer_percent: percent,
        buffer_bytes,
        page_size: driver.page_size(),
        write_policy: driver.write_policy(),
        warehouses: plan.scale.warehouses,
        data_bytes: plan.scale.data_bytes(),
        terminals: plan.terminals,
        worker_threads: outcome.worker_threads,
        seconds,
        nopm: outcome.per_type[TxnType::NewOrder.index()].committed as f64 * 60.0 / seconds,
        transactions_per_second: outcome.committed() as f64 / seconds,
        per_type,
        rolled_back: outcome.rolled_back,
        retries: outcome.retries.clone(),
        gave_up: outcome.gave_up,
        deliveries_pending: outcome.deliveries_pending,
        deferred_delivery: plan.deferred_delivery,
        ..TpccRun::default()
    }
}

/// A measured run on a peer (or any engine without a native runner).
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // peers run through sessions
pub fn session_run(
    plan: &RunPlan,
    driver: &dyn TpccDriver,
    percent: f64,
    buffer_bytes: u64,
) -> CliResult<TpccRun> {
    let class = DeviceClassArg::Real;
    let what = label(driver, class, percent);
    warm(plan, driver, &what)?;
    let job = plan.job(Duration::from_secs(plan.seconds));
    let around = measure_around(driver, &what, plan.seconds, || run_job(driver, &job));
    let outcome = around
        .value
        .map_err(|error| CliError::new(format!("{}: {error}", driver.engine())))?;
    let mut run = base_run(
        plan,
        driver,
        class,
        percent,
        buffer_bytes,
        &outcome,
        around.seconds,
    );
    run.cpu_us_per_transaction = around.cpu_seconds * 1e6 / outcome.committed().max(1) as f64;
    if let Some(io) = around.io {
        run.io = io;
    }
    Ok(run)
}

/// A measured run on Hayate (see the module docs). The database must be open.
pub fn hayate_run(
    plan: &RunPlan,
    driver: &HayateDriver,
    class: DeviceClassArg,
    percent: f64,
    buffer_bytes: u64,
    results_dir: &Path,
) -> CliResult<TpccRun> {
    let what = label(driver, class, percent);
    let closed = || CliError::new("hayate: the database is not open");
    if percent >= 100.0 {
        driver
            .prewarm_all()
            .map_err(|error| CliError::new(format!("hayate: prewarm: {error}")))?;
    }
    warm(plan, driver, &what)?;
    let device_io = driver.device_io().ok_or_else(closed)?;
    let job = plan.job(Duration::from_secs(plan.seconds));
    let native = measure_native(driver, &what, plan.seconds, plan.timeline, || {
        run_job(driver, &job)
    })?;
    let outcome = (native.value.as_ref())
        .map_err(|error| CliError::new(format!("hayate: {error}")))?
        .clone();
    let (seconds, records) = (native.seconds, &native.records);

    let mut run = base_run(
        plan,
        driver,
        class,
        percent,
        buffer_bytes,
        &outcome,
        seconds,
    );
    run.cpu_us_per_transaction = native.cpu_seconds * 1e6 / outcome.committed().max(1) as f64;
    run.io = trace_rates(records, seconds);
    run.buffer_hit_ratio = Some(native.hit_ratio());
    let details = driver.details();
    run.log_flushes = Some(native.log_flushes());
    run.commits_per_flush = native.commits_per_flush(details.updates_committed);
    run.time_split = Some(time_split(&details.phases));
    if !plan.timeline.is_zero() {
        let stamp = crate::results::unix_now();
        let name = format!("{}-{}-tpcc-{percent}pct-{stamp}", run.engine, class.name());
        let label = ("hayate", "tpcc", percent, class.name());
        let file = format!("timeline-{name}.json");
        write_json(
            results_dir,
            &file,
            &timeline(label, &details, plan.timeline),
        )?;
        run.timeline_file = Some(file);
    }
    run.alpha = close_and_replay(
        driver,
        &device_io,
        records,
        plan.terminals,
        &run.io,
        plan.replay,
    )?;
    Ok(run)
}

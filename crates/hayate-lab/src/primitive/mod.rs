//! `hayate-lab primitive`: the primitive workload of the HA paper.
//!
//! N tables (`SID integer primary key, C1 integer, Data1 char(4096)`), transactions that read
//! one row by a uniformly random SID (`select`) or set its C1 (`update`), each committed on its
//! own. Per engine (Hayate, then each peer asked for):
//! 1. Load the tables once (progress bar).
//! 2. For each device class (Hayate only; peers run on the real device) and buffer size:
//!    size the buffer (reopening the database or restarting the server), prewarm when the
//!    buffer holds everything, then for each mode run a warm-up and a measured run.
//! 3. A measured Hayate run also captures its I/O trace, records a timeline of its first
//!    milliseconds, and accounts its workers' time by phase; the trace is then replayed with no
//!    database work (the database closed meanwhile) to give alpha.
//! 4. The latency model is fitted over each sweep; everything goes into one results file.

pub mod driver;
mod hayate;
pub(crate) mod measure;

pub use hayate::{HayateDriver, HayateOptions};

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::io::latency::DeviceClassArg;
use clap::{Args, ValueEnum};
use hayate_engine::WritePolicy;

use super::results::{DeviceResult, PrimitiveResults, PrimitiveRun, ResultFile};
use crate::driver::Driver;
use ::hayate::args::{parse_percent, PolicyArg};
use ::hayate::error::{CliError, CliResult, Context};
use ::hayate::report::{format_count, format_rate, format_us};
use driver::{Mode, PrimitiveDriver, PrimitiveSpec, RunJob};

/// Buffer sizes of `--sweep`, in percent of the table data.
pub const SWEEP_PERCENTS: [f64; 7] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0];

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Select,
    Update,
    /// Select, then update, at every buffer size.
    Both,
}

#[derive(Debug, Args)]
pub struct PrimitiveArgs {
    #[command(flatten)]
    pub common: crate::args::CommonArgs,

    /// Number of tables.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub tables: Option<u32>,

    /// Rows per table; each row is 4,112 bytes (the paper used 500,000) [default: 20,000,
    /// about 820 MiB for 10 tables; --quick: 300].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub rows: Option<u64>,

    /// Transactions to run: select (read one row by random SID), update (set C1 of one row by
    /// random SID, durable commit) or both.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    pub mode: ModeArg,

    /// Seconds of each measured run [default: 10; --quick: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: Option<u64>,

    /// Seconds of warm-up before each measured run (not measured) [default: 2; --quick: 0].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub warmup: Option<u64>,

    /// Transactions in flight at once (Hayate: tasks spread over --workers threads; peers:
    /// one connection and thread each).
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,

    /// OS threads Hayate's transactions run on [default: the number of CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub workers: Option<u32>,

    /// Buffer sizes as percentages of the table data, comma-separated (index pages stay
    /// resident on top of nothing: they count against the buffer) [default: 10; --quick:
    /// 10,100].
    #[arg(long, value_name = "P[,P...]", value_delimiter = ',', value_parser = parse_percent)]
    pub buffer_percent: Vec<f64>,

    /// Sweep the buffer sizes 1, 2, 5, 10, 20, 50 and 100%.
    #[arg(long, conflicts_with = "buffer_percent")]
    pub sweep: bool,

    /// Page size in bytes for Hayate's database: a multiple of 4096 up to 65536 (the classic
    /// experiments used 24576).
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    pub page_size: usize,

    /// Hayate's page store write policy.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = PolicyArg::OutOfPlace)]
    pub policy: PolicyArg,

    /// Device classes to run Hayate on, comma-separated; all but `real` are emulated by added
    /// latency (results say so). Peers always run on the real device.
    #[arg(
        long,
        value_enum,
        value_name = "CLASS[,CLASS...]",
        value_delimiter = ',',
        default_value = "real"
    )]
    pub device_class: Vec<DeviceClassArg>,

    /// Peers to run side by side, comma-separated: postgresql, mariadb, sqlite (needs a build
    /// with `--features peers` and the peers' Debian packages).
    #[arg(long, value_name = "NAME[,NAME...]", value_delimiter = ',')]
    pub peers: Vec<String>,

    /// Skip Hayate (run only the peers).
    #[arg(long)]
    pub no_hayate: bool,

    /// Also run Hayate the way the peers run: one OS thread and blocking session per
    /// transaction in flight (reported as engine `hayate-threads`), to compare with its tasks.
    #[arg(long)]
    pub hayate_threads: bool,

    /// Milliseconds at the start of each Hayate run recorded as a transaction timeline
    /// (0: none).
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub timeline_ms: u64,

    /// Do not replay the I/O trace of Hayate's runs (no alpha).
    #[arg(long)]
    pub no_replay: bool,

    /// Keep each Hayate run's I/O trace as CSV in the results directory.
    #[arg(long)]
    pub keep_traces: bool,

    /// A tiny, seconds-long run (2 tables of 300 rows, buffers 10 and 100%, 1 s per run):
    /// a smoke test of the whole pipeline.
    #[arg(long)]
    pub quick: bool,

    /// Seed of the random keys.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
}

/// The resolved plan of an invocation.
#[derive(Debug, Clone)]
pub struct Plan {
    pub spec: PrimitiveSpec,
    pub modes: Vec<Mode>,
    pub seconds: u64,
    pub warmup: u64,
    pub concurrency: u32,
    pub workers: u32,
    pub buffer_percents: Vec<f64>,
    pub classes: Vec<DeviceClassArg>,
    pub page_size: usize,
    pub policy: WritePolicy,
    pub timeline: Duration,
    pub replay: bool,
    pub keep_traces: bool,
    pub hayate_threads: bool,
    pub seed: u64,
}

impl Plan {
    pub fn from_args(args: &PrimitiveArgs) -> CliResult<Plan> {
        let quick = args.quick;
        if !args.page_size.is_multiple_of(4096) || !(4096..=65536).contains(&args.page_size) {
            return Err(CliError::new(format!(
                "--page-size {} is not a multiple of 4096 from 4096 to 65536",
                args.page_size
            )));
        }
        let buffer_percents = if args.sweep {
            SWEEP_PERCENTS.to_vec()
        } else if !args.buffer_percent.is_empty() {
            args.buffer_percent.clone()
        } else if quick {
            vec![10.0, 100.0]
        } else {
            vec![10.0]
        };
        let modes = match args.mode {
            ModeArg::Select => vec![Mode::Select],
            ModeArg::Update => vec![Mode::Update],
            ModeArg::Both => vec![Mode::Select, Mode::Update],
        };
        let cpus = std::thread::available_parallelism().map_or(1, |count| count.get()) as u32;
        Ok(Plan {
            spec: PrimitiveSpec {
                tables: args.tables.unwrap_or(if quick { 2 } else { 10 }),
                rows_per_table: args.rows.unwrap_or(if quick { 300 } else { 20_000 }),
            },
            modes,
            seconds: args.seconds.unwrap_or(if quick { 1 } else { 10 }),
            warmup: args.warmup.unwrap_or(if quick { 0 } else { 2 }),
            concurrency: args.concurrency,
            workers: args.workers.unwrap_or(cpus),
            buffer_percents,
            classes: args.device_class.clone(),
            page_size: args.page_size,
            policy: match args.policy {
                PolicyArg::OutOfPlace => WritePolicy::OutOfPlace,
                PolicyArg::InPlace => WritePolicy::InPlace,
            },
            timeline: Duration::from_millis(args.timeline_ms),
            replay: !args.no_replay,
            keep_traces: args.keep_traces,
            hayate_threads: args.hayate_threads,
            seed: args.seed,
        })
    }

    fn job(&self, mode: Mode, duration: Duration) -> RunJob {
        RunJob {
            spec: self.spec,
            mode,
            concurrency: self.concurrency,
            duration,
            seed: self.seed,
        }
    }

    fn buffer_bytes(&self, percent: f64) -> u64 {
        (self.spec.data_bytes() as f64 * percent / 100.0) as u64
    }
}

pub fn run(args: &PrimitiveArgs) -> CliResult<()> {
    let plan = Plan::from_args(args)?;
    let base = args.common.base_dir();
    #[cfg(not(feature = "peers"))]
    if !args.peers.is_empty() {
        return Err(CliError::new(
            "this hayate was built without peers; rebuild with \
             `cargo build --release -p hayate --features peers` to run PostgreSQL, MariaDB \
             or SQLite side by side",
        ));
    }
    #[cfg(feature = "peers")]
    check_peers(&args.peers)?;
    if args.no_hayate && args.peers.is_empty() {
        return Err(CliError::new("--no-hayate needs at least one --peers"));
    }
    let temporary = tempfile::Builder::new()
        .prefix(".hayate-lab-")
        .tempdir_in(&base)
        .context(|| format!("cannot create a directory in {}", base.display()))?;
    let device_reference = latest_device_result(&args.common.results);
    eprintln!(
        "primitive workload: {} tables x {} rows ({} of row data), {} s runs, concurrency {}",
        plan.spec.tables,
        format_count(plan.spec.rows_per_table),
        ::hayate::report::format_bytes(plan.spec.data_bytes()),
        plan.seconds,
        plan.concurrency
    );
    let results = PrimitiveResults {
        runs: Vec::new(),
        device_reference,
    };
    let mut runs = Runs::start(ResultFile::new("primitive", &base, results), &args.common)?;
    let outcome = (|| -> CliResult<()> {
        if !args.no_hayate {
            let options = HayateOptions {
                page_size: plan.page_size,
                policy: plan.policy,
                workers: plan.workers,
            };
            let driver = HayateDriver::new(&temporary.path().join("hayate"), options);
            let result = run_hayate(&plan, &driver, &args.common.results, &mut runs);
            driver.shutdown()?;
            result?;
        }
        for peer in &args.peers {
            run_peer(&plan, peer, temporary.path(), &mut runs)?;
        }
        Ok(())
    })();
    // What was measured is kept and reported even when a later engine failed.
    runs.finish()?;
    super::report::run(&super::report::ReportArgs {
        results: args.common.results.clone(),
        out: None,
    })?;
    outcome?;
    temporary
        .close()
        .context(|| "cannot remove the lab's temporary directory".to_string())?;
    Ok(())
}

/// The runs of an invocation, saved to its results file after every run, so an interrupted or
/// failed sweep keeps what it measured.
struct Runs {
    file: ResultFile<PrimitiveResults>,
    path: PathBuf,
}

impl Runs {
    fn start(
        file: ResultFile<PrimitiveResults>,
        common: &crate::args::CommonArgs,
    ) -> CliResult<Runs> {
        let path = file.write(&common.results)?;
        Ok(Runs { file, path })
    }

    fn push(&mut self, run: PrimitiveRun) -> CliResult<()> {
        self.file.results.runs.push(run);
        self.file.rewrite(&self.path)
    }

    /// Fits the latency model over the sweeps, saves and prints the runs.
    fn finish(&mut self) -> CliResult<()> {
        let results = &mut self.file.results;
        super::model::fill_sweep(&mut results.runs, results.device_reference.as_ref());
        self.file.rewrite(&self.path)?;
        print_runs(&self.file.results.runs);
        println!("\nresults: {}", self.path.display());
        Ok(())
    }
}

fn load(plan: &Plan, driver: &dyn PrimitiveDriver) -> CliResult<()> {
    let total = plan.spec.tables as u64 * plan.spec.rows_per_table;
    let bar = crate::progress::progress_bar(total, &format!("loading {}", driver.engine()));
    let started = std::time::Instant::now();
    driver
        .load_primitive(&plan.spec, &|rows| bar.set_position(rows))
        .map_err(|error| CliError::new(format!("{}: load: {error}", driver.engine())))?;
    bar.finish_and_clear();
    eprintln!(
        "{}: loaded {} rows in {:.1} s",
        driver.engine(),
        format_count(total),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run_hayate(
    plan: &Plan,
    driver: &HayateDriver,
    results_dir: &Path,
    runs: &mut Runs,
) -> CliResult<()> {
    load(plan, driver)?;
    for &class in &plan.classes {
        driver.set_device_class(class.class());
        for &percent in &plan.buffer_percents {
            for &mode in &plan.modes {
                // Each mode starts from a fresh open: the previous run's trace replay needed
                // the database closed.
                driver
                    .set_buffer_bytes(plan.buffer_bytes(percent))
                    .map_err(engine_error)?;
                let run = measure::hayate_run(plan, driver, class, percent, mode, results_dir)?;
                runs.push(run)?;
                if plan.hayate_threads {
                    driver
                        .set_buffer_bytes(plan.buffer_bytes(percent))
                        .map_err(engine_error)?;
                    let mut run = measure::session_run(plan, driver, class, percent, mode)?;
                    run.engine = "hayate-threads".into();
                    run.engine_settings
                        .insert("concurrency".into(), "one OS thread per transaction".into());
                    runs.push(run)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(feature = "peers")]
fn run_peer(plan: &Plan, peer: &str, base: &Path, runs: &mut Runs) -> CliResult<()> {
    let first_buffer = plan.buffer_bytes(plan.buffer_percents[0]);
    let driver = super::peers::open_peer(peer, base, first_buffer)
        .map_err(|error| CliError::new(format!("{peer}: {error}")))?;
    let result = (|| -> CliResult<()> {
        load(plan, driver.as_ref())?;
        for &percent in &plan.buffer_percents {
            driver
                .set_buffer_bytes(plan.buffer_bytes(percent))
                .map_err(|error| CliError::new(format!("{peer}: {error}")))?;
            for &mode in &plan.modes {
                runs.push(measure::session_run(
                    plan,
                    driver.as_ref(),
                    DeviceClassArg::Real,
                    percent,
                    mode,
                )?)?;
            }
        }
        Ok(())
    })();
    let shutdown = driver.shutdown();
    result?;
    shutdown.map_err(|error| CliError::new(format!("{peer}: shutdown: {error}")))
}

#[cfg(not(feature = "peers"))]
fn run_peer(_: &Plan, peer: &str, _: &Path, _: &mut Runs) -> CliResult<()> {
    Err(CliError::new(format!("{peer}: built without peers")))
}

/// Fails before any work when a requested peer is unknown or not installed.
#[cfg(feature = "peers")]
pub(crate) fn check_peers(peers: &[String]) -> CliResult<()> {
    let available = super::peers::available();
    for peer in peers {
        match available.iter().find(|(name, _)| name == peer) {
            None => {
                return Err(CliError::new(format!(
                    "unknown peer `{peer}`; peers are {}",
                    super::peers::PEERS.join(", ")
                )))
            }
            Some((_, Err(message))) => return Err(CliError::new(format!("{peer}: {message}"))),
            Some((_, Ok(()))) => {}
        }
    }
    Ok(())
}

fn engine_error(error: super::driver::DriverError) -> CliError {
    CliError::new(format!("hayate: {error}"))
}

/// The most recent `hayate-lab device` result in the results directory, if any.
pub(crate) fn latest_device_result(dir: &Path) -> Option<DeviceResult> {
    let paths: Vec<PathBuf> = super::results::list(dir).ok()?;
    paths
        .iter()
        .rev()
        .filter(|path| super::results::kind_of(path).ok().as_deref() == Some("device"))
        .find_map(|path| super::results::read::<DeviceResult>(path).ok())
        .map(|file| file.results)
}

fn print_runs(runs: &[PrimitiveRun]) {
    let header = [
        "engine",
        "device",
        "mode",
        "buffer",
        "tx/s",
        "p50",
        "p99",
        "reads/s",
        "writes/s",
        "hit",
        "tx/flush",
        "CPU/tx",
        "alpha",
        "space amp",
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let class = if run.emulated {
                format!("{} (emulated)", run.device_class)
            } else {
                run.device_class.clone()
            };
            vec![
                run.engine.clone(),
                class,
                run.mode.clone(),
                format!("{}%", run.buffer_percent),
                format_rate(run.transactions_per_second),
                format_us((run.latency.p50_us * 1000.0) as u64),
                format_us((run.latency.p99_us * 1000.0) as u64),
                format_rate(run.io.reads_per_second),
                format_rate(run.io.writes_per_second),
                run.buffer_hit_ratio
                    .map_or("-".into(), |ratio| format!("{:.1}%", ratio * 100.0)),
                run.commits_per_flush
                    .map_or("-".into(), |per| format!("{per:.1}")),
                format!("{:.1} us", run.cpu_us_per_transaction),
                run.alpha
                    .map_or("-".into(), |alpha| format!("{:.2}", alpha.alpha)),
                run.space_amplification
                    .map_or("-".into(), |amplification| format!("{amplification:.2}")),
            ]
        })
        .collect();
    println!();
    print!("{}", ::hayate::report::table(&header, &rows));
}

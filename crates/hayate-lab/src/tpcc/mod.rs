//! `hayate-lab tpcc`: TPC-C (revision 5.11) on Hayate and its peers, with the consistency
//! conditions, a crash loop, and buffer sweeps on device classes.
//!
//! Commands:
//! - `load`: makes a Hayate TPC-C database in a directory (`--db`), checks conditions 1 - 12.
//! - `run`: measured runs per device class and buffer size, on Hayate (a loaded `--db`, or a
//!   fresh database loaded first) and on peers (`--peers`, each loaded into a private server);
//!   checks each engine's database afterwards; saves results after every run and writes the
//!   report.
//! - `check`: the consistency conditions on a Hayate TPC-C database.
//! - `crash`: runs TPC-C in a child process, kills it with SIGKILL at random moments, recovers,
//!   checks conditions 1 - 4 and that every acknowledged New-Order exists, and goes on.
//!
//! Modules:
//! - `spec`: sizes and the random functions of the specification (NURand, names, strings).
//! - `rows`: the nine tables as rows and the generator of the initial database.
//! - `txn`: the five transactions' inputs and outputs, the terminals that generate them and the
//!   session interface every engine implements them behind.
//! - `deferred`: Deliveries queued by terminals and run by executors (clause 2.7.2).
//! - `metrics`: what a run asks (`TpccJob`) and measures (`TpccOutcome`).
//! - `check`: consistency conditions 1 - 12.
//! - `hayate`: the tables, loader and transactions on Hayate's embedded API.
//! - `run`: measured runs; `crash`: the crash loop.

pub mod check;
pub mod crash;
pub mod deferred;
pub mod driver;
pub mod hayate;
pub mod metrics;
pub mod rows;
pub mod run;
pub mod spec;
pub mod txn;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use hayate_engine::WritePolicy;
use serde::{Deserialize, Serialize};

use crate::driver::Driver;
use crate::primitive::{DeviceClassArg, HayateDriver, HayateOptions};
use crate::results::{ResultFile, TpccCheck, TpccResults, TpccRun};
use ::hayate::args::{parse_percent, PolicyArg};
use ::hayate::error::{CliError, CliResult, Context};
use ::hayate::report::{format_bytes, format_count, format_rate, format_us};
use check::{ConditionResult, Conditions};
use driver::TpccDriver;
use run::RunPlan;
use spec::Scale;

/// Buffer sizes of `--sweep`, in percent of the table data (the HA paper's Case C).
pub const SWEEP_PERCENTS: [f64; 5] = [5.0, 10.0, 20.0, 50.0, 100.0];

/// The file in a Hayate TPC-C database directory describing what was loaded.
const META_FILE: &str = "tpcc.json";

#[derive(Debug, Args)]
pub struct TpccArgs {
    #[command(subcommand)]
    pub command: TpccCommand,
}

#[derive(Debug, Subcommand)]
pub enum TpccCommand {
    /// Load a Hayate TPC-C database into --db and check conditions 1 - 12.
    Load(LoadArgs),
    /// Measured TPC-C runs on Hayate and peers, by device class and buffer size.
    Run(RunArgs),
    /// Check the consistency conditions of a Hayate TPC-C database.
    Check(CheckArgs),
    /// Run TPC-C, kill the engine with SIGKILL at random moments, recover and check, repeatedly.
    Crash(crash::CrashArgs),
    /// The crash loop's engine process (internal).
    #[command(hide = true)]
    CrashChild(crash::ChildArgs),
}

/// How a Hayate TPC-C database is laid out.
#[derive(Debug, Clone, Args)]
pub struct LayoutArgs {
    /// Warehouses (each about 77 MB of table data by the specification's row sizes).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub warehouses: u32,

    /// Page size in bytes: a multiple of 4096 up to 65536.
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    pub page_size: usize,

    /// Hayate's page store write policy.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = PolicyArg::OutOfPlace)]
    pub policy: PolicyArg,

    /// Seed of the generated data and of the terminals.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,

    /// OS threads Hayate's transactions run on [default: the number of CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub workers: Option<u32>,
}

impl LayoutArgs {
    fn options(&self) -> CliResult<HayateOptions> {
        if !self.page_size.is_multiple_of(4096) || !(4096..=65536).contains(&self.page_size) {
            return Err(CliError::new(format!(
                "--page-size {} is not a multiple of 4096 from 4096 to 65536",
                self.page_size
            )));
        }
        Ok(HayateOptions {
            page_size: self.page_size,
            policy: match self.policy {
                PolicyArg::OutOfPlace => WritePolicy::OutOfPlace,
                PolicyArg::InPlace => WritePolicy::InPlace,
            },
            workers: self.workers.unwrap_or_else(cpus),
        })
    }
}

fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |count| count.get()) as u32
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Directory of the new database (must not hold one).
    #[arg(long, value_name = "DIR", default_value = "hayate-tpcc")]
    pub db: PathBuf,

    #[command(flatten)]
    pub layout: LayoutArgs,

    /// Skip the consistency check after loading.
    #[arg(long)]
    pub no_check: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Directory of a Hayate TPC-C database (made by `hayate-lab tpcc load`).
    #[arg(long, value_name = "DIR", default_value = "hayate-tpcc")]
    pub db: PathBuf,

    /// Also check condition 11, which holds only right after loading (before any Delivery).
    #[arg(long)]
    pub just_loaded: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: crate::args::CommonArgs,

    /// Run Hayate on this loaded database (`hayate-lab tpcc load`) instead of loading a fresh
    /// one in a temporary directory; its warehouses, page size and policy are the load's.
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,

    #[command(flatten)]
    pub layout: LayoutArgs,

    /// Terminals: transactions in flight, zero think time (the HA paper used 30). Hayate runs
    /// them as tasks over --workers threads; peers get one connection and thread each.
    #[arg(long, value_name = "N", default_value_t = 30,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub terminals: u32,

    /// Seconds of each measured run [default: 30; --quick: 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: Option<u64>,

    /// Seconds of warm-up before each measured run [default: 5; --quick: 0].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub warmup: Option<u64>,

    /// Buffer sizes as percentages of the table data, comma-separated (inner B+tree pages stay
    /// resident and count against it) [default: 5,100; --quick: 100].
    #[arg(long, value_name = "P[,P...]", value_delimiter = ',', value_parser = parse_percent)]
    pub buffer_percent: Vec<f64>,

    /// Sweep the buffer sizes 5, 10, 20, 50 and 100%.
    #[arg(long, conflicts_with = "buffer_percent")]
    pub sweep: bool,

    /// Device classes to run Hayate on, comma-separated; all but `real` are emulated by added
    /// latency (results say so). Peers run on the real device.
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

    /// Milliseconds at the start of each Hayate run recorded as a transaction timeline.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub timeline_ms: u64,

    /// Do not replay the I/O trace of Hayate's runs (no alpha).
    #[arg(long)]
    pub no_replay: bool,

    /// Run each Delivery inline in its terminal, its ten districts in one transaction, instead
    /// of deferred (clause 2.7.2: queued, each district delivered as a transaction of its own
    /// by one executor per district).
    #[arg(long)]
    pub inline_delivery: bool,

    /// A seconds-long smoke test: 1 warehouse, 8 terminals, 3 s at a 100% buffer, then the
    /// consistency check.
    #[arg(long)]
    pub quick: bool,
}

/// What `load` leaves next to a Hayate TPC-C database.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadMeta {
    pub scale: Scale,
    pub seed: u64,
    pub page_size: usize,
    pub policy: String,
    /// Bytes of live pages right after loading: what Hayate's buffer percentages refer to.
    pub stored_bytes: u64,
}

pub fn run(args: &TpccArgs) -> CliResult<()> {
    match &args.command {
        TpccCommand::Load(args) => load_command(args),
        TpccCommand::Run(args) => run_command(args),
        TpccCommand::Check(args) => check_command(args),
        TpccCommand::Crash(args) => crash::run(args),
        TpccCommand::CrashChild(args) => crash::child(args),
    }
}

fn engine_error(engine: &str) -> impl Fn(crate::driver::DriverError) -> CliError + '_ {
    move |error| CliError::new(format!("{engine}: {error}"))
}

/// Loads `scale` into a driver with a progress bar.
pub fn load_into(driver: &dyn TpccDriver, scale: &Scale, seed: u64) -> CliResult<()> {
    let bar = crate::progress::progress_bar(scale.rows(), &format!("loading {}", driver.engine()));
    let started = Instant::now();
    driver
        .load_tpcc(scale, seed, &|rows| bar.set_position(rows))
        .map_err(|error| CliError::new(format!("{}: load: {error}", driver.engine())))?;
    bar.finish_and_clear();
    eprintln!(
        "{}: loaded {} warehouse(s), about {} rows, in {:.1} s",
        driver.engine(),
        scale.warehouses,
        format_count(scale.rows()),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Loads a Hayate TPC-C database into `dir`, writes its meta file; the driver is left open
/// with a buffer that holds everything.
pub fn load_hayate(driver: &HayateDriver, dir: &Path, layout: &LayoutArgs) -> CliResult<LoadMeta> {
    if dir.join(META_FILE).exists() {
        return Err(CliError::new(format!(
            "{} holds a TPC-C database already",
            dir.display()
        )));
    }
    let scale = Scale::standard(layout.warehouses);
    load_into(driver, &scale, layout.seed)?;
    driver
        .set_buffer_bytes(scale.data_bytes() * 2)
        .map_err(engine_error("hayate"))?;
    let meta = LoadMeta {
        scale,
        seed: layout.seed,
        page_size: layout.page_size,
        policy: driver.write_policy(),
        stored_bytes: driver.stored_bytes().unwrap_or(scale.data_bytes()),
    };
    let text = serde_json::to_string_pretty(&meta).context(|| "cannot encode tpcc.json".into())?;
    std::fs::write(dir.join(META_FILE), text)
        .context(|| format!("cannot write {}", dir.join(META_FILE).display()))?;
    Ok(meta)
}

pub fn read_meta(dir: &Path) -> CliResult<LoadMeta> {
    let path = dir.join(META_FILE);
    let text = std::fs::read_to_string(&path).context(|| {
        format!(
            "{} is not a TPC-C database (no {META_FILE}); make one with \
             `hayate-lab tpcc load --db {}`",
            dir.display(),
            dir.display()
        )
    })?;
    serde_json::from_str(&text).context(|| format!("{} is damaged", path.display()))
}

/// A driver on an existing database, opened with a buffer of `buffer_bytes`.
pub fn open_hayate(
    dir: &Path,
    workers: Option<u32>,
    buffer_bytes: u64,
) -> CliResult<(HayateDriver, LoadMeta)> {
    let meta = read_meta(dir)?;
    let policy = match meta.policy.as_str() {
        "in-place" => WritePolicy::InPlace,
        _ => WritePolicy::OutOfPlace,
    };
    let options = HayateOptions {
        page_size: meta.page_size,
        policy,
        workers: workers.unwrap_or_else(cpus),
    };
    let driver = HayateDriver::new(dir, options);
    driver
        .set_buffer_bytes(buffer_bytes)
        .map_err(engine_error("hayate"))?;
    Ok((driver, meta))
}

fn load_command(args: &LoadArgs) -> CliResult<()> {
    let driver = HayateDriver::new(&args.db, args.layout.options()?);
    let meta = load_hayate(&driver, &args.db, &args.layout)?;
    println!(
        "loaded {} warehouse(s) into {}: {} of table data by the specification, {} stored",
        meta.scale.warehouses,
        args.db.display(),
        format_bytes(meta.scale.data_bytes()),
        format_bytes(meta.stored_bytes)
    );
    if !args.no_check {
        let results = check_engine(&driver, &meta.scale, Conditions::All { just_loaded: true })?;
        print_conditions(&results, true);
        fail_on_violations(&results)?;
    }
    driver.close().map_err(engine_error("hayate"))?;
    Ok(())
}

fn check_command(args: &CheckArgs) -> CliResult<()> {
    let meta = read_meta(&args.db)?;
    let (driver, _) = open_hayate(&args.db, None, meta.stored_bytes.max(64 << 20))?;
    let which = Conditions::All {
        just_loaded: args.just_loaded,
    };
    let results = check_engine(&driver, &meta.scale, which)?;
    print_conditions(&results, args.just_loaded);
    driver.close().map_err(engine_error("hayate"))?;
    fail_on_violations(&results)
}

/// Reads an engine's data and checks it, with a spinner while reading.
pub fn check_engine(
    driver: &dyn TpccDriver,
    scale: &Scale,
    which: Conditions,
) -> CliResult<Vec<ConditionResult>> {
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_message(format!(
        "{}: reading the tables for the check",
        driver.engine()
    ));
    spinner.enable_steady_tick(Duration::from_millis(200));
    let data = driver
        .tpcc_check_data()
        .map_err(|error| CliError::new(format!("{}: check: {error}", driver.engine())))?;
    spinner.finish_and_clear();
    Ok(check::check(&data, scale, which))
}

pub fn fail_on_violations(results: &[ConditionResult]) -> CliResult<()> {
    let failed: Vec<String> = results
        .iter()
        .filter(|result| !result.passed())
        .map(|result| result.number.to_string())
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(CliError::new(format!(
        "consistency conditions violated: {}",
        failed.join(", ")
    )))
}

pub fn print_conditions(results: &[ConditionResult], eleven_checked: bool) {
    let mut rows: Vec<Vec<String>> = results
        .iter()
        .map(|result| {
            vec![
                result.number.to_string(),
                result.title.clone(),
                if result.passed() { "pass" } else { "FAIL" }.to_string(),
                format_count(result.checked),
                format_count(result.failures),
                result.example.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if !eleven_checked && !results.iter().any(|result| result.number == 11) {
        rows.push(vec![
            "11".into(),
            check::TITLES[10].into(),
            "skipped".into(),
            "-".into(),
            "-".into(),
            "holds only right after loading (check --just-loaded)".into(),
        ]);
        rows.sort_by_key(|row| row[0].parse::<u32>().unwrap_or(0));
    }
    let header = [
        "#",
        "condition",
        "result",
        "checked",
        "failures",
        "first failure",
    ];
    print!("{}", ::hayate::report::table(&header, &rows));
}

fn run_command(args: &RunArgs) -> CliResult<()> {
    #[cfg(not(feature = "peers"))]
    if !args.peers.is_empty() {
        return Err(CliError::new(
            "this hayate was built without peers; rebuild with \
             `cargo build --release -p hayate --features peers` to run PostgreSQL, MariaDB \
             or SQLite side by side",
        ));
    }
    #[cfg(feature = "peers")]
    crate::primitive::check_peers(&args.peers)?;
    if args.no_hayate && args.peers.is_empty() {
        return Err(CliError::new("--no-hayate needs at least one --peers"));
    }
    let quick = args.quick;
    let percents = if args.sweep {
        SWEEP_PERCENTS.to_vec()
    } else if !args.buffer_percent.is_empty() {
        args.buffer_percent.clone()
    } else if quick {
        vec![100.0]
    } else {
        vec![5.0, 100.0]
    };
    let base = args.common.base_dir();
    let temporary = tempfile::Builder::new()
        .prefix(".hayate-tpcc-")
        .tempdir_in(&base)
        .context(|| format!("cannot create a directory in {}", base.display()))?;
    let mut plan = RunPlan {
        scale: Scale::standard(args.layout.warehouses),
        terminals: if quick { 8 } else { args.terminals },
        seconds: args.seconds.unwrap_or(if quick { 3 } else { 30 }),
        warmup: args.warmup.unwrap_or(if quick { 0 } else { 5 }),
        seed: args.layout.seed,
        timeline: Duration::from_millis(args.timeline_ms),
        replay: !args.no_replay,
        deferred_delivery: !args.inline_delivery,
    };
    let mut results = Results::start(&base, &args.common.results)?;
    let outcome = (|| -> CliResult<()> {
        if !args.no_hayate {
            let (driver, meta) = match &args.db {
                Some(dir) => open_hayate(dir, args.layout.workers, 64 << 20)?,
                None => {
                    let dir = temporary.path().join("hayate");
                    let driver = HayateDriver::new(&dir, args.layout.options()?);
                    let meta = load_hayate(&driver, &dir, &args.layout)?;
                    (driver, meta)
                }
            };
            plan.scale = meta.scale;
            eprintln!(
                "TPC-C: {} warehouse(s), {} terminals, {} s runs; Hayate stores {} ({} by the \
                 specification's row sizes)",
                plan.scale.warehouses,
                plan.terminals,
                plan.seconds,
                format_bytes(meta.stored_bytes),
                format_bytes(plan.scale.data_bytes())
            );
            let result = run_hayate(&plan, &driver, &meta, &percents, args, &mut results);
            let shutdown = driver.shutdown();
            result?;
            shutdown.map_err(engine_error("hayate"))?;
        }
        for peer in &args.peers {
            run_peer(&plan, peer, temporary.path(), &percents, &mut results)?;
        }
        Ok(())
    })();
    results.finish()?;
    super::report::run(&super::report::ReportArgs {
        results: args.common.results.clone(),
        out: None,
    })?;
    outcome?;
    temporary
        .close()
        .context(|| "cannot remove the lab's temporary directory".to_string())?;
    results.fail_on_violations()
}

fn run_hayate(
    plan: &RunPlan,
    driver: &HayateDriver,
    meta: &LoadMeta,
    percents: &[f64],
    args: &RunArgs,
    results: &mut Results,
) -> CliResult<()> {
    for &class in &args.device_class {
        driver.set_device_class(class.class());
        for &percent in percents {
            let bytes = hayate_buffer_bytes(driver, meta, percent);
            driver
                .set_buffer_bytes(bytes)
                .map_err(engine_error("hayate"))?;
            let run = run::hayate_run(plan, driver, class, percent, bytes, &args.common.results)?;
            results.push(run)?;
        }
    }
    driver.set_device_class(DeviceClassArg::Real.class());
    driver
        .set_buffer_bytes(meta.stored_bytes.max(64 << 20))
        .map_err(engine_error("hayate"))?;
    let conditions = check_engine(driver, &plan.scale, Conditions::All { just_loaded: false })?;
    results.check("hayate", conditions)
}

/// Hayate's buffer for a run at `percent`: that share of the database as stored when the run
/// starts (TPC-C grows as it runs). A buffer of 100% or more gets room for the run's inserts
/// as well (half the database again), so that it really holds everything throughout.
fn hayate_buffer_bytes(driver: &HayateDriver, meta: &LoadMeta, percent: f64) -> u64 {
    let stored = driver.stored_bytes().unwrap_or(meta.stored_bytes);
    let headroom = if percent >= 100.0 { 1.5 } else { 1.0 };
    (stored as f64 * percent / 100.0 * headroom) as u64
}

#[cfg(feature = "peers")]
fn run_peer(
    plan: &RunPlan,
    peer: &str,
    base: &Path,
    percents: &[f64],
    results: &mut Results,
) -> CliResult<()> {
    let data_bytes = plan.scale.data_bytes();
    let bytes = |percent: f64| (data_bytes as f64 * percent / 100.0) as u64;
    let driver = super::peers::open_peer(peer, base, bytes(percents[0]))
        .map_err(|error| CliError::new(format!("{peer}: {error}")))?;
    let result = (|| -> CliResult<()> {
        load_into(driver.as_ref(), &plan.scale, plan.seed)?;
        for &percent in percents {
            driver
                .set_buffer_bytes(bytes(percent))
                .map_err(engine_error(peer))?;
            results.push(run::session_run(
                plan,
                driver.as_ref(),
                percent,
                bytes(percent),
            )?)?;
        }
        let conditions = check_engine(
            driver.as_ref(),
            &plan.scale,
            Conditions::All { just_loaded: false },
        )?;
        results.check(peer, conditions)
    })();
    let shutdown = driver.shutdown();
    result?;
    shutdown.map_err(|error| CliError::new(format!("{peer}: shutdown: {error}")))
}

#[cfg(not(feature = "peers"))]
fn run_peer(_: &RunPlan, peer: &str, _: &Path, _: &[f64], _: &mut Results) -> CliResult<()> {
    Err(CliError::new(format!("{peer}: built without peers")))
}

/// The results of an invocation, saved after every run.
struct Results {
    file: ResultFile<TpccResults>,
    path: PathBuf,
}

impl Results {
    fn start(base: &Path, dir: &Path) -> CliResult<Results> {
        let file = ResultFile::new("tpcc", base, TpccResults::default());
        let path = file.write(dir)?;
        Ok(Results { file, path })
    }

    fn push(&mut self, run: TpccRun) -> CliResult<()> {
        print_run(&run);
        self.file.results.runs.push(run);
        self.file.rewrite(&self.path)
    }

    fn check(&mut self, engine: &str, conditions: Vec<ConditionResult>) -> CliResult<()> {
        println!("\n{engine}: consistency after the runs");
        print_conditions(&conditions, false);
        self.file.results.checks.push(TpccCheck {
            engine: engine.to_string(),
            when: "after runs".into(),
            conditions,
        });
        self.file.rewrite(&self.path)
    }

    fn finish(&mut self) -> CliResult<()> {
        self.file.rewrite(&self.path)?;
        print_summary(&self.file.results.runs);
        println!("\nresults: {}", self.path.display());
        Ok(())
    }

    fn fail_on_violations(&self) -> CliResult<()> {
        for check in &self.file.results.checks {
            fail_on_violations(&check.conditions)
                .map_err(|error| CliError::new(format!("{}: {error}", check.engine)))?;
        }
        Ok(())
    }
}

/// One run's transactions by type, as soon as it is measured.
fn print_run(run: &TpccRun) {
    let class = if run.emulated {
        format!("{} (emulated)", run.device_class)
    } else {
        run.device_class.clone()
    };
    println!(
        "\n{} on {} at a {}% buffer: {} NOPM, {} tx/s, {} rolled back, retries {}",
        run.engine,
        class,
        run.buffer_percent,
        format_count(run.nopm as u64),
        format_rate(run.transactions_per_second),
        format_count(run.rolled_back),
        if run.retries.is_empty() {
            "none".to_string()
        } else {
            run.retries
                .iter()
                .map(|(cause, count)| format!("{cause} {count}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let rows: Vec<Vec<String>> = run
        .per_type
        .iter()
        .map(|typed| {
            vec![
                typed.name.clone(),
                format_count(typed.committed),
                format_rate(typed.per_second),
                format_us((typed.latency.p50_us * 1000.0) as u64),
                format_us((typed.latency.p90_us * 1000.0) as u64),
                format_us((typed.latency.p99_us * 1000.0) as u64),
                format_us((typed.latency.max_us * 1000.0) as u64),
            ]
        })
        .collect();
    let header = [
        "transaction",
        "committed",
        "per s",
        "p50",
        "p90",
        "p99",
        "max",
    ];
    print!("{}", ::hayate::report::table(&header, &rows));
    if run.deferred_delivery {
        println!(
            "Deliveries deferred (clause 2.7.2): latency from queueing to the tenth district's \
             commit; {} still queued at the end (not counted)",
            format_count(run.deliveries_pending)
        );
    }
}

fn print_summary(runs: &[TpccRun]) {
    let header = [
        "engine", "device", "buffer", "NOPM", "tx/s", "reads/s", "writes/s", "hit", "tx/flush",
        "CPU/tx", "CPU", "read", "write", "log", "lock", "alpha",
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let share =
                |value: Option<f64>| value.map_or("-".into(), |v| format!("{:.0}%", v * 100.0));
            let split = run.time_split;
            vec![
                run.engine.clone(),
                if run.emulated {
                    format!("{} (emulated)", run.device_class)
                } else {
                    run.device_class.clone()
                },
                format!("{}%", run.buffer_percent),
                format_count(run.nopm as u64),
                format_rate(run.transactions_per_second),
                format_rate(run.io.reads_per_second),
                format_rate(run.io.writes_per_second),
                share(run.buffer_hit_ratio),
                run.commits_per_flush
                    .map_or("-".into(), |per| format!("{per:.1}")),
                format!("{:.0} us", run.cpu_us_per_transaction),
                share(split.map(|split| split.cpu)),
                share(split.map(|split| split.read_io)),
                share(split.map(|split| split.write_io)),
                share(split.map(|split| split.log_wait)),
                share(split.map(|split| split.lock_wait)),
                run.alpha
                    .map_or("-".into(), |alpha| format!("{:.2}", alpha.alpha)),
            ]
        })
        .collect();
    println!();
    print!("{}", ::hayate::report::table(&header, &rows));
}

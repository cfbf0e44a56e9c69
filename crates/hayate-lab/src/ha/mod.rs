//! `hayate-lab ha`: the HA paper's Case B. Durable single-row updates (the primitive
//! workload's `update`, through the server) with and without a synchronous standby, at small
//! and full buffers, Hayate beside PostgreSQL 15 with a synchronous streaming standby.
//!
//! Settings of the standby (issue 20):
//! - (a) both nodes on this machine's disk (`--dir`): the standby's fdatasync competes with
//!   the primary's on one device, and the two servers share the two cores;
//! - (b) Hayate's standby on a memory-backed file system (`--tmpfs`, checked to be tmpfs)
//!   with the low-latency class's latency added to every I/O (`hayate serve
//!   --emulate-device low-latency`): emulated, standing for the paper's separate server with
//!   its own low-latency SSD. PostgreSQL runs only (a): it reads and writes through the OS
//!   page cache, so its standby cannot be given a device latency.
//!
//! Per engine:
//! 1. start the server (`hayate serve`, or the lab's private PostgreSQL) and load the tables;
//! 2. per buffer size (percent of the data, the standby's buffer the same) and round: run
//!    alone (Hayate: no replication at all; PostgreSQL: its standby stopped and
//!    `synchronous_standby_names` empty), then with the standby of each setting (Hayate: the
//!    primary restarted with `--ha-replication-listen` after its stopped directory was copied
//!    for a standby started with `--ha-follow`; PostgreSQL: the standby started from its
//!    replication slot and `synchronous_standby_names = '*'`), each after waiting until the
//!    standby is synchronous, a prewarm at full buffers and a warm-up;
//! 3. after each run with a standby, check that the standby applied every update (the sum
//!    of C1 equal on both nodes).
//!
//! The summary gives the median tps of the rounds, the overhead of each setting against
//! alone, HA at the small buffer against HA at the full one, and the targets.

mod nodes;
mod summary;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::args::CommonArgs;
use crate::driver::{Driver, DriverResult};
use crate::peers::hayate_wire::HayateWireDriver;
use crate::peers::postgres::PostgresDriver;
use crate::primitive::driver::{Mode, PrimitiveDriver, PrimitiveSpec, RunJob};
use crate::primitive::measure::{percentiles, run_sessions, with_progress};
use crate::progress::progress_bar;
use crate::results::{Percentiles, ResultFile};
use ::hayate::args::parse_percent;
use ::hayate::error::{CliError, CliResult};
use nodes::{HaPrimary, HayateStandby, Standby};
pub use summary::summary;

/// The engines compared.
const ENGINES: &[&str] = &["hayate", "postgresql"];

/// Where a standby runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    /// (a): the standby on this machine's disk, beside the primary.
    A,
    /// (b): Hayate's standby on tmpfs with the low-latency class's latency (emulated).
    B,
}

impl Setting {
    pub fn label(self) -> &'static str {
        match self {
            Setting::A => "(a) standby on the same disk",
            Setting::B => "(b) standby on tmpfs + 10 us per I/O (emulated)",
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct HaArgs {
    /// Engines to run, comma-separated (hayate, postgresql).
    #[arg(long, value_delimiter = ',', default_values_t = ENGINES.iter().map(|e| e.to_string()))]
    pub engines: Vec<String>,

    /// Standby settings, comma-separated: a (same disk), b (tmpfs + low-latency emulation,
    /// Hayate only).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Setting::A, Setting::B])]
    pub settings: Vec<Setting>,

    /// Buffer sizes as percentages of the table data, comma-separated; the standby gets the
    /// same.
    #[arg(long, value_name = "P[,P...]", value_delimiter = ',', value_parser = parse_percent,
          default_values_t = [1.0, 100.0])]
    pub buffer_percent: Vec<f64>,

    /// Tables of the primitive workload.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub tables: u32,

    /// Rows per table, 4,112 bytes each.
    #[arg(long, default_value_t = 20_000,
          value_parser = clap::value_parser!(u64).range(100..=10_000_000))]
    pub rows: u64,

    /// Client connections updating at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub clients: u32,

    /// Seconds of each measured run.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,

    /// Seconds of warm-up before each measured run.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=600))]
    pub warmup: u64,

    /// Rounds: each runs alone and every setting once, in turn (medians are reported).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: u32,

    /// A tmpfs directory for setting (b)'s standby.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    pub tmpfs: PathBuf,

    /// Hayate's replication in TLS (`--ha-replication-tls`, with a self-signed certificate
    /// made for the run and trusted by both nodes).
    #[arg(long)]
    pub replication_tls: bool,

    #[command(flatten)]
    pub common: CommonArgs,
}

/// The results file of `hayate-lab ha`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HaResults {
    pub tables: u32,
    pub rows_per_table: u64,
    pub data_bytes: u64,
    pub clients: u32,
    pub seconds: u64,
    pub warmup_seconds: u64,
    pub rounds: u32,
    pub runs: Vec<HaRun>,
    pub notes: Vec<String>,
    /// Hayate's replication connections were TLS.
    #[serde(default)]
    pub replication_tls: bool,
}

/// One measured run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HaRun {
    pub engine: String,
    /// None: alone.
    pub setting: Option<Setting>,
    pub buffer_percent: f64,
    pub buffer_bytes: u64,
    pub round: u32,
    pub transactions: u64,
    pub tps: f64,
    pub latency: Percentiles,
    /// With a standby: whether it applied every update (sum of C1 equal on both nodes).
    pub standby_agrees: Option<bool>,
    /// CPU seconds of the primary's and the standby's server processes in the measured run.
    pub primary_cpu_seconds: f64,
    pub standby_cpu_seconds: Option<f64>,
    /// CPUs of this machine (the nodes and the clients share them).
    pub cpus: usize,
    /// Why the run did not measure.
    pub error: Option<String>,
}

pub fn run(args: &HaArgs) -> CliResult<()> {
    for engine in &args.engines {
        if !ENGINES.contains(&engine.as_str()) {
            return Err(CliError::new(format!(
                "unknown engine {engine} (hayate, postgresql)"
            )));
        }
    }
    if args.settings.contains(&Setting::B) && args.engines.iter().any(|e| e == "hayate") {
        nodes::check_tmpfs(&args.tmpfs)?;
    }
    let spec = PrimitiveSpec {
        tables: args.tables,
        rows_per_table: args.rows,
    };
    let base_dir = args.common.base_dir();
    let mut results = HaResults {
        tables: args.tables,
        rows_per_table: args.rows,
        data_bytes: spec.data_bytes(),
        clients: args.clients,
        seconds: args.seconds,
        warmup_seconds: args.warmup,
        rounds: args.rounds,
        runs: Vec::new(),
        replication_tls: args.replication_tls,
        notes: vec![
            "Durable single-row updates (the primitive workload's update: SET c1 of a row by \
             a uniformly random sid, autocommit, prepared statements) through the server over \
             TCP on 127.0.0.1, the same client code for both engines."
                .into(),
            "Alone: Hayate without replication; PostgreSQL with its standby stopped and \
             synchronous_standby_names empty. With a standby: every commit is acknowledged \
             once durable on both nodes (Hayate's strict synchronous replication; PostgreSQL \
             synchronous_commit = on, synchronous_standby_names = '*')."
                .into(),
            format!(
                "Setting (b) is emulated: Hayate's standby keeps its files on tmpfs ({}) and \
                 every I/O of it takes at least 10 us (hayate serve --emulate-device \
                 low-latency), standing for a separate server with a low-latency SSD.",
                args.tmpfs.display()
            ),
            "Both nodes, the clients and the lab share this machine's cores.".into(),
        ],
    };
    if args.replication_tls {
        results.notes.push(
            "Hayate's replication connections are TLS (--ha-replication-tls, a self-signed \
             certificate made for the run); PostgreSQL's streaming replication runs without."
                .into(),
        );
    }
    let mut file = ResultFile::new("ha", &base_dir, results);
    let path = file.write(&args.common.results)?;
    for engine in &args.engines {
        let outcome = match engine.as_str() {
            "hayate" => run_hayate(args, &spec, &base_dir, &mut file, &path),
            _ => run_postgres(args, &spec, &base_dir, &mut file, &path),
        };
        if let Err(error) = outcome {
            eprintln!("{engine}: {error}");
            file.results.runs.push(HaRun {
                engine: engine.clone(),
                error: Some(error.to_string()),
                ..HaRun::default()
            });
            file.rewrite(&path)?;
        }
    }
    print!("{}", summary(&file.results));
    println!("results: {}", path.display());
    Ok(())
}

/// What one engine's measurements share.
struct Bench<'a> {
    /// The engine's name in the results (`--engines`).
    engine: &'static str,
    args: &'a HaArgs,
    spec: &'a PrimitiveSpec,
    file: &'a mut ResultFile<HaResults>,
    path: &'a Path,
}

impl Bench<'_> {
    fn buffer_bytes(&self, percent: f64) -> u64 {
        ((self.spec.data_bytes() as f64 * percent / 100.0) as u64).max(1 << 20)
    }

    fn load(&self, driver: &dyn PrimitiveDriver) -> DriverResult<()> {
        let rows = self.spec.tables as u64 * self.spec.rows_per_table;
        let bar = progress_bar(rows, &format!("{}: loading", self.engine));
        let result = driver.load_primitive(self.spec, &|loaded| bar.set_position(loaded));
        bar.finish_and_clear();
        result
    }

    /// Warms up and measures updates on `driver` (the primary), then checks the standby.
    fn measure(
        &mut self,
        driver: &dyn HaPrimary,
        standby: Option<(Setting, &dyn Standby)>,
        percent: f64,
        round: u32,
    ) -> CliResult<()> {
        let setting = standby.map(|(setting, _)| setting);
        let name = format!(
            "{} {}% round {round}: {}",
            self.engine,
            percent,
            setting.map_or("alone", Setting::label)
        );
        let mut run = HaRun {
            engine: self.engine.to_string(),
            setting,
            buffer_percent: percent,
            buffer_bytes: self.buffer_bytes(percent),
            round,
            ..HaRun::default()
        };
        match self.measure_run(driver, standby, percent, &name) {
            Ok(Measured {
                transactions,
                latency,
                agrees,
                primary_cpu_seconds,
                standby_cpu_seconds,
            }) => {
                run.primary_cpu_seconds = primary_cpu_seconds;
                run.standby_cpu_seconds = standby_cpu_seconds;
                run.cpus = std::thread::available_parallelism().map_or(1, usize::from);
                run.transactions = transactions;
                run.tps = transactions as f64 / self.args.seconds as f64;
                run.latency = latency;
                run.standby_agrees = agrees;
                eprintln!("{name}: {:.0} tps", run.tps);
            }
            Err(error) => {
                eprintln!("{name}: {error}");
                run.error = Some(error.to_string());
            }
        }
        self.file.results.runs.push(run);
        self.file.rewrite(self.path)
    }

    fn measure_run(
        &self,
        driver: &dyn HaPrimary,
        standby: Option<(Setting, &dyn Standby)>,
        percent: f64,
        name: &str,
    ) -> DriverResult<Measured> {
        if let Some((_, standby)) = standby {
            standby.wait_synchronous(&mut driver.client()?)?;
        }
        if percent >= 100.0 {
            nodes::prewarm(&mut driver.client()?, self.spec)?;
            if let Some((_, standby)) = standby {
                nodes::prewarm(&mut standby.client()?, self.spec)?;
            }
        }
        let job = |seconds: u64, seed: u64| RunJob {
            spec: *self.spec,
            mode: Mode::Update,
            concurrency: self.args.clients,
            duration: Duration::from_secs(seconds),
            seed,
        };
        if self.args.warmup > 0 {
            with_progress(&format!("{name} (warm-up)"), self.args.warmup, || {
                run_sessions(driver, &job(self.args.warmup, 7))
            })?;
        }
        let cpu = |pids: &[u32]| crate::sysstat::process_tree_cpu_seconds(pids);
        let primary_before = cpu(&driver.server_pids());
        let standby_before = standby.map(|(_, standby)| cpu(&standby.pids()));
        let outcome = with_progress(name, self.args.seconds, || {
            run_sessions(driver, &job(self.args.seconds, 11))
        })?;
        let primary_cpu_seconds = cpu(&driver.server_pids()) - primary_before;
        let standby_cpu_seconds = standby
            .zip(standby_before)
            .map(|((_, standby), before)| cpu(&standby.pids()) - before);
        let agrees = match standby {
            Some((_, standby)) => Some(nodes::standby_agrees(
                &mut driver.client()?,
                &mut standby.client()?,
                self.spec,
            )?),
            None => None,
        };
        Ok(Measured {
            transactions: outcome.transactions,
            latency: percentiles(&outcome.latency, outcome.latency_sum_ns),
            agrees,
            primary_cpu_seconds,
            standby_cpu_seconds,
        })
    }
}

/// What a measured run gives.
struct Measured {
    transactions: u64,
    latency: Percentiles,
    agrees: Option<bool>,
    primary_cpu_seconds: f64,
    standby_cpu_seconds: Option<f64>,
}

fn run_hayate(
    args: &HaArgs,
    spec: &PrimitiveSpec,
    base_dir: &Path,
    file: &mut ResultFile<HaResults>,
    path: &Path,
) -> CliResult<()> {
    let mut bench = Bench {
        engine: "hayate",
        args,
        spec,
        file,
        path,
    };
    let driver = HayateWireDriver::open(base_dir, 0)?;
    bench.load(&driver)?;
    // Kept until the end: the certificate's files.
    let certificate = args
        .replication_tls
        .then(|| nodes::ReplicationCertificate::create(base_dir))
        .transpose()?;
    let tls_args = certificate
        .as_ref()
        .map_or(Vec::new(), nodes::ReplicationCertificate::serve_args);
    for &percent in &args.buffer_percent {
        let bytes = bench.buffer_bytes(percent);
        driver.set_buffer_bytes(bytes)?;
        for round in 1..=args.rounds {
            driver.restart_with(Vec::new(), &mut |_| Ok(()))?;
            bench.measure(&driver, None, percent, round)?;
            for &setting in &args.settings {
                let standby_base = match setting {
                    Setting::A => base_dir.to_path_buf(),
                    Setting::B => args.tmpfs.clone(),
                };
                let standby =
                    HayateStandby::start(&driver, &standby_base, setting, bytes, &tls_args)?;
                bench.measure(&driver, Some((setting, &standby)), percent, round)?;
                driver.restart_with(Vec::new(), &mut |_| Ok(()))?;
                standby.stop()?;
            }
        }
    }
    driver.shutdown()?;
    Ok(())
}

fn run_postgres(
    args: &HaArgs,
    spec: &PrimitiveSpec,
    base_dir: &Path,
    file: &mut ResultFile<HaResults>,
    path: &Path,
) -> CliResult<()> {
    let mut bench = Bench {
        engine: "postgresql",
        args,
        spec,
        file,
        path,
    };
    let first = bench.buffer_bytes(args.buffer_percent.first().copied().unwrap_or(100.0));
    let driver = PostgresDriver::open(base_dir, first)?;
    bench.load(&driver)?;
    let mut standby = nodes::PostgresStandbyNode::create(&driver, base_dir, first)?;
    for &percent in &args.buffer_percent {
        let bytes = bench.buffer_bytes(percent);
        driver.set_buffer_bytes(bytes)?;
        standby.set_buffer_bytes(bytes);
        for round in 1..=args.rounds {
            standby.stop()?;
            driver.set_synchronous(false)?;
            bench.measure(&driver, None, percent, round)?;
            if args.settings.contains(&Setting::A) {
                standby.start()?;
                driver.set_synchronous(true)?;
                bench.measure(&driver, Some((Setting::A, &standby)), percent, round)?;
            }
        }
    }
    standby.stop()?;
    drop(standby);
    driver.shutdown()?;
    Ok(())
}

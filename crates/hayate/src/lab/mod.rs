//! `hayate lab`: the experiments that prove Hayate's numbers on the user's own machine, side by
//! side with the databases a user would otherwise pick.
//!
//! Every experiment is one subcommand. A run:
//! 1. describes the machine and the device under the data directory (`results::Machine`);
//! 2. runs, with progress bars on stderr, and prints a summary table on stdout;
//! 3. writes one JSON file (configuration, machine and every figure) into the results
//!    directory (default `lab-results/`), plus CSV traces and timelines next to it;
//! 4. `hayate lab report` turns every JSON file of a results directory into one HTML page with
//!    SVG charts.
//!
//! Modules:
//! - `results`: the JSON schema shared by the experiments and the report.
//! - `driver`: the one interface the primitive workload runs through, for Hayate and peers.
//! - `device`: raw device limits through the engine's own I/O path (`hayate lab device`).
//! - `primitive`: the primitive workload of the HA paper (`hayate lab primitive`).
//! - `replay`: replays a captured I/O trace with no database work; gives alpha.
//! - `sysstat`: device and CPU counters from /proc, the same for every engine.
//! - `model`: the latency model (predicted throughput relative to all-in-memory).
//! - `report`: the HTML report (`hayate lab report`).
//! - `tpcc`: TPC-C with its consistency conditions, crash loop and sweeps (`hayate lab tpcc`).
//! - `temp`: the temporary space (external sort, partitioned hash join; `hayate lab temp`),
//!   and `temp_sql`, the same seen from SQL queries with a small and a large work_mem.
//! - `peers` (feature `peers`): PostgreSQL, MariaDB/InnoDB and SQLite behind `driver`.
//! - `server` (feature `peers`): Hayate's server and the peers' through sysbench over TCP
//!   (`hayate lab server`).

pub mod device;
pub mod driver;
pub mod model;
#[cfg(feature = "peers")]
pub mod peers;
pub mod primitive;
pub mod replay;
pub mod report;
pub mod results;
#[cfg(feature = "peers")]
pub mod server;
pub mod sysstat;
pub mod temp;
pub mod temp_sql;
pub mod tpcc;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::error::CliResult;

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Measure the raw device under a directory with the engine's I/O path: random reads at
    /// the page size for queue depths 1..256, random and sequential writes, synced log writes.
    Device(device::DeviceArgs),
    /// The primitive workload of the HA paper: N tables of 4 KiB rows, one-row select or
    /// update transactions by random key, on Hayate and (with --peers) other databases.
    Primitive(primitive::PrimitiveArgs),
    /// Replay an I/O trace (CSV from a primitive run) on its files with no database work and
    /// report the IOPS reached; a run's alpha is its IOPS divided by this.
    Replay(replay::ReplayArgs),
    /// Write one HTML page (SVG charts) from every result in a results directory.
    Report(report::ReportArgs),
    /// TPC-C: load, run (device classes, buffer sweeps, peers), check the consistency
    /// conditions, and a crash loop with SIGKILL and recovery.
    Tpcc(tpcc::TpccArgs),
    /// Temporary space on flash: external merge sort and partitioned hash join through the
    /// engine's spill path, per work memory and device class, against the in-memory baseline.
    Temp(temp::TempArgs),
    /// Hayate (`hayate serve`), PostgreSQL and MariaDB as servers on 127.0.0.1, driven by the
    /// same client (sysbench over TCP): OLTP workloads, tps per engine and the ratio
    /// Hayate/PostgreSQL. Needs the feature `peers`.
    #[cfg(feature = "peers")]
    Server(server::ServerArgs),
}

/// Options every experiment shares.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Directory the JSON results, traces and timelines are written to (created if missing).
    #[arg(long, value_name = "DIR", default_value = "lab-results")]
    pub results: PathBuf,

    /// Directory on the device to measure, under which the experiment's temporary files and
    /// databases are made (and removed afterwards). It must be on the real device, not tmpfs.
    /// Default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl CommonArgs {
    pub fn base_dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| PathBuf::from("."))
    }
}

pub fn run(args: &LabArgs) -> CliResult<()> {
    match &args.command {
        LabCommand::Device(args) => device::run(args),
        LabCommand::Primitive(args) => primitive::run(args),
        LabCommand::Replay(args) => replay::run(args),
        LabCommand::Report(args) => report::run(args),
        LabCommand::Tpcc(args) => tpcc::run(args),
        LabCommand::Temp(args) => temp::run(args),
        #[cfg(feature = "peers")]
        LabCommand::Server(args) => server::run(args),
    }
}

/// A progress bar on stderr counting `total` items (hidden when stderr is not a terminal).
pub fn progress_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:<28} [{bar:30}] {human_pos}/{human_len} {per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// A progress bar on stderr over a timed run of `seconds`.
pub fn timed_bar(seconds: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(seconds.max(1));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:<40} [{bar:30}] {pos}/{len} s")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

//! `hayate-lab`: the experiments that prove Hayate's numbers on the user's own machine, side by
//! side with the databases a user would otherwise pick.
//!
//! Every experiment is one subcommand. A run:
//! 1. describes the machine and the device under the data directory (`results::Machine`);
//! 2. runs, with progress bars on stderr, and prints a summary table on stdout;
//! 3. writes one JSON file (configuration, machine and every figure) into the results
//!    directory (default `lab-results/`), plus CSV traces and timelines next to it;
//! 4. `hayate-lab report` turns every JSON file of a results directory into one HTML page with
//!    SVG charts.
//!
//! Modules, roughly from the shared ground up to the experiments:
//! - `args`, `progress`, `machine`: shared flags, progress bars, what a run was measured on.
//! - `sysstat`: device and CPU counters from /proc and /sys, the same for every engine.
//! - `results`: the JSON schema shared by the experiments and the report.
//! - `io`: I/O wrappers of the lab over the engine's `Io`: latency injection for device
//!   classes, and trace recording.
//! - `driver`: the one interface every database is driven through (`Driver`, `DriverError`);
//!   each workload adds its own trait on it (`primitive::driver`, `tpcc::driver`).
//! - `model`: the latency model (predicted throughput relative to all-in-memory).
//! - `replay`: replays a captured I/O trace with no database work; gives alpha.
//! - `device`: raw device limits through the engine's own I/O path (`hayate-lab device`).
//! - `tpcc`: TPC-C with its consistency conditions, crash loop and sweeps (`hayate-lab tpcc`).
//! - `primitive`: the primitive workload of the HA paper (`hayate-lab primitive`), and Hayate's
//!   driver of both workloads.
//! - `peers` (feature `peers`): PostgreSQL, MariaDB/InnoDB, SQLite and Hayate's own server
//!   behind the same driver traits, one folder per peer over shared SQL code (`peers::sql`).
//! - `server` (feature `peers`): Hayate's server and the peers' through sysbench over TCP
//!   (`hayate-lab server`).
//! - `benchbase` (feature `peers`): BenchBase, built by the user, against Hayate's server and
//!   PostgreSQL (`hayate-lab benchbase`).
//! - `ha` (feature `peers`): the HA paper's Case B, durable updates with and without a
//!   synchronous standby, Hayate beside PostgreSQL's synchronous streaming (`hayate-lab ha`).
//! - `temp`: the temporary space (external sort, partitioned hash join; `hayate-lab temp`),
//!   through the engine's spill path (`temp::engine`) and through SQL queries with a small and
//!   a large work_mem (`temp::sql`).
//! - `bench`: the engine's micro benchmarks (`hayate-lab bench`).
//! - `report`: the HTML report (`hayate-lab report`).
//!
//! `main` only declares the modules and dispatches the subcommands; no module imports it.

mod args;
mod bench;
#[cfg(feature = "peers")]
mod benchbase;
mod device;
mod driver;
mod fibers;
#[cfg(feature = "peers")]
mod ha;
mod io;
mod machine;
mod model;
#[cfg(feature = "peers")]
mod peers;
mod primitive;
mod progress;
mod replay;
mod report;
mod results;
#[cfg(feature = "peers")]
mod server;
mod sysstat;
mod temp;
mod tpcc;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hayate::args::parse_command_line;
use hayate::error::{exit_code, CliResult};

/// Hayate's lab: experiments that measure Hayate on this machine, side by side with the
/// databases a user would otherwise pick, and draw the charts.
///
/// Logging goes to stderr and is set with RUST_LOG (default: warn), e.g. RUST_LOG=info.
#[derive(Debug, Parser)]
#[command(name = "hayate-lab", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
    /// Hayate, PostgreSQL and MariaDB as servers driven by sysbench: this build lacks the
    /// feature `peers` it needs (cargo run --release -p hayate-lab --features peers -- server).
    #[cfg(not(feature = "peers"))]
    Server {
        /// The server benchmark's options (read by a build with the feature `peers`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        options: Vec<String>,
    },
    /// BenchBase (built by the user) against Hayate's server and PostgreSQL, one after the
    /// other: its sample configurations, requests/s side by side, and the procedures over
    /// twice PostgreSQL's latency. Needs the feature `peers`.
    #[cfg(feature = "peers")]
    Benchbase(benchbase::BenchbaseArgs),
    /// BenchBase against Hayate and PostgreSQL: this build lacks the feature `peers` it
    /// needs (cargo run --release -p hayate-lab --features peers -- benchbase ...).
    #[cfg(not(feature = "peers"))]
    Benchbase {
        /// The benchmark's options (read by a build with the feature `peers`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        options: Vec<String>,
    },
    /// High availability, the paper's Case B: durable updates through the server alone and
    /// with a synchronous standby (on this disk, and on tmpfs with an emulated low-latency
    /// device), at small and full buffers, beside PostgreSQL with a synchronous streaming
    /// standby. Needs the feature `peers`.
    #[cfg(feature = "peers")]
    Ha(ha::HaArgs),
    /// High availability, Case B: this build lacks the feature `peers` it needs (cargo run
    /// --release -p hayate-lab --features peers -- ha).
    #[cfg(not(feature = "peers"))]
    Ha {
        /// The experiment's options (read by a build with the feature `peers`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        options: Vec<String>,
    },
    /// Micro benchmarks of the engine: in-memory B+tree, group commit on the real device,
    /// durable updates as tasks versus OS threads.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli: Cli = match parse_command_line() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    exit_code(run(&cli.command))
}

fn run(command: &Command) -> CliResult<()> {
    match command {
        Command::Device(args) => device::run(args),
        Command::Primitive(args) => primitive::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Report(args) => report::run(args),
        Command::Tpcc(args) => tpcc::run(args),
        Command::Temp(args) => temp::run(args),
        #[cfg(feature = "peers")]
        Command::Server(args) => server::run(args),
        #[cfg(not(feature = "peers"))]
        Command::Server { .. } => Err(hayate::error::CliError::new(
            "this hayate-lab was built without the feature `peers`, which `server` needs (the \
             PostgreSQL and MariaDB clients): run `cargo run --release -p hayate-lab --features \
             peers -- server ...`",
        )),
        #[cfg(feature = "peers")]
        Command::Benchbase(args) => benchbase::run(args),
        #[cfg(not(feature = "peers"))]
        Command::Benchbase { .. } => Err(hayate::error::CliError::new(
            "this hayate-lab was built without the feature `peers`, which `benchbase` needs \
             (the PostgreSQL server and client): run `cargo run --release -p hayate-lab \
             --features peers -- benchbase --benchbase-dir DIR`",
        )),
        #[cfg(feature = "peers")]
        Command::Ha(args) => ha::run(args),
        #[cfg(not(feature = "peers"))]
        Command::Ha { .. } => Err(hayate::error::CliError::new(
            "this hayate-lab was built without the feature `peers`, which `ha` needs (the \
             PostgreSQL server and client): run `cargo run --release -p hayate-lab --features \
             peers -- ha`",
        )),
        Command::Bench(args) => bench::run(args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn syntax_is_consistent() {
        super::Cli::command().debug_assert();
    }
}

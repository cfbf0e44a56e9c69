//! `hayate-lab server`: Hayate and PostgreSQL / MariaDB as servers, compared through the same
//! client path: the same client program (sysbench) over the same transport (`--transport`:
//! each server's Unix-domain socket, as psql and pgbench connect by default, or TCP on
//! 127.0.0.1), the data in memory and durable commits for every engine.
//!
//! 1. For each engine (`engines`): start its server with a new database under `--dir`
//!    (Hayate: `hayate serve` from this executable; the peers: the lab's private servers),
//!    `sysbench oltp_common prepare` (the tables, their rows and the secondary index) and a
//!    warm-up run (not recorded).
//! 2. `--rounds` times: `sysbench WORKLOAD run` for every workload and thread count, the
//!    engines taking turns, a progress bar moving with sysbench's report every second. On a
//!    shared machine whose speed drifts between minutes, turns within a round put every
//!    engine under the same conditions; the summary takes each engine's median over the
//!    rounds and shows the spread of the per-round ratios.
//! 3. Stop the servers and remove their directories.
//!
//! An engine that cannot start or prepare (e.g. Hayate's SQL lacking a feature sysbench uses)
//! is recorded with its error and the others go on. The JSON results (kind "server") are
//! rewritten after each step; stdout gets a summary with the ratio Hayate / PostgreSQL per
//! workload, the target of issue 5 being at least 1.5x on oltp_point_select and
//! oltp_update_non_index at 16 threads.

pub mod engines;
pub mod sysbench;

#[cfg(test)]
mod tests;

use clap::Args;

use super::results::{
    describe_transport, median_runs, ResultFile, ServerEngine, ServerResults, ServerRun,
};
use super::sysstat;
use crate::args::CommonArgs;
use engines::Server;
use hayate::error::{CliError, CliResult};
use sysbench::{DataSet, Target};

/// sysbench's OLTP workloads the lab runs.
pub const WORKLOADS: &[&str] = &[
    "oltp_point_select",
    "oltp_update_non_index",
    "oltp_read_only",
    "oltp_read_write",
];

/// The workloads and thread count of issue 5's target (Hayate at least 1.5x PostgreSQL).
pub const TARGET_WORKLOADS: &[&str] = &["oltp_point_select", "oltp_update_non_index"];
pub const TARGET_THREADS: u32 = 16;
pub const TARGET_RATIO: f64 = 1.5;

/// Before each run the lab waits for the machine to be quiet (the servers' background work
/// after the previous run, such as PostgreSQL's autovacuum, done): a window with at most this
/// share of all cores busy...
const QUIET_BUSY_MAX: f64 = 0.10;
const QUIET_WINDOW: std::time::Duration = std::time::Duration::from_millis(500);
/// ... or this long.
const QUIET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Bytes a sysbench row takes in a server, with its share of both indexes (an estimate for
/// sizing the peers' buffers so that the data stays in memory).
const ROW_BYTES_ESTIMATE: u64 = 300;
/// The peers' buffer is at least this, and at least four times the estimated data.
const PEER_BUFFER_BYTES_MIN: u64 = 256 << 20;

/// How sysbench reaches the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// Each server's Unix-domain socket (how psql and pgbench connect by default).
    Unix,
    /// TCP on 127.0.0.1.
    Tcp,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Unix => "unix",
            Transport::Tcp => "tcp",
        }
    }
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Engines to measure, in order (hayate, postgresql, mariadb).
    #[arg(
        long,
        value_name = "NAME[,NAME...]",
        value_delimiter = ',',
        default_value = "hayate,postgresql,mariadb"
    )]
    pub engines: Vec<String>,

    /// sysbench workloads to run (oltp_point_select, oltp_update_non_index, oltp_read_only,
    /// oltp_read_write).
    #[arg(
        long,
        value_name = "NAME[,NAME...]",
        value_delimiter = ',',
        default_value = "oltp_point_select,oltp_update_non_index,oltp_read_only,oltp_read_write"
    )]
    pub workloads: Vec<String>,

    /// Client threads (connections); a list runs a sweep.
    #[arg(
        long,
        value_name = "N[,N...]",
        value_delimiter = ',',
        default_value = "16"
    )]
    pub threads: Vec<u32>,

    /// Seconds of each measured run.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,

    /// Seconds of the warm-up run (oltp_read_only, not recorded) before an engine's runs.
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,

    /// Tables (sbtest1...).
    #[arg(long, default_value_t = 4)]
    pub tables: u32,

    /// Rows per table.
    #[arg(long, default_value_t = 50_000)]
    pub table_size: u64,

    /// How sysbench connects to every server.
    #[arg(long, value_enum, default_value_t = Transport::Unix)]
    pub transport: Transport,

    /// Times every run is repeated, the engines taking turns; the summary takes medians.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
}

pub fn run(args: &ServerArgs) -> CliResult<()> {
    check_args(args)?;
    let client = sysbench::version().map_err(CliError::new)?;
    let base_dir = args.common.base_dir();
    let data = DataSet {
        tables: args.tables,
        table_size: args.table_size,
    };
    let data_bytes = u64::from(args.tables) * args.table_size * ROW_BYTES_ESTIMATE;
    let peer_buffer_bytes = (4 * data_bytes).max(PEER_BUFFER_BYTES_MIN);
    let transport = args.transport.name().to_string();
    let results = ServerResults {
        client: client.clone(),
        transport: transport.clone(),
        rounds: args.rounds,
        tables: args.tables,
        table_size: args.table_size,
        seconds: args.seconds,
        engines: Vec::new(),
        runs: Vec::new(),
        notes: notes(&client, &transport, data_bytes, peer_buffer_bytes),
    };
    let mut file = ResultFile::new("server", &base_dir, results);
    let path = file.write(&args.common.results)?;
    let mut servers = Vec::new();
    for engine in &args.engines {
        match start_engine(engine, args, data, peer_buffer_bytes, &mut file.results) {
            Ok(server) => servers.push(server),
            Err(error) => record_engine_error(&mut file.results, engine, error),
        }
        file.rewrite(&path)?;
    }
    for round in 1..=args.rounds {
        for workload in &args.workloads {
            for &threads in &args.threads {
                for server in &servers {
                    let run = measured_run(server, args, data, workload, threads, round);
                    file.results.runs.push(run);
                }
            }
        }
        file.rewrite(&path)?;
    }
    for server in servers {
        let engine = server.engine.clone();
        if let Err(error) = server.server.stop() {
            record_engine_error(&mut file.results, &engine, format!("stopping: {error}"));
        }
    }
    file.rewrite(&path)?;
    print!("{}", summary(&file.results));
    println!("results: {}", path.display());
    Ok(())
}

fn record_engine_error(results: &mut ServerResults, engine: &str, error: String) {
    eprintln!("{engine}: {error}");
    if let Some(entry) = (results.engines.iter_mut()).find(|entry| entry.engine == engine) {
        entry.error = Some(error);
    }
}

fn check_args(args: &ServerArgs) -> CliResult<()> {
    for engine in &args.engines {
        if !engines::ENGINES.contains(&engine.as_str()) {
            return Err(CliError::new(format!(
                "unknown engine {engine:?}: the engines are {}",
                engines::ENGINES.join(", ")
            )));
        }
    }
    for workload in &args.workloads {
        if !WORKLOADS.contains(&workload.as_str()) {
            return Err(CliError::new(format!(
                "unknown workload {workload:?}: the workloads are {}",
                WORKLOADS.join(", ")
            )));
        }
    }
    if args.threads.is_empty() || args.threads.contains(&0) {
        return Err(CliError::new("--threads needs counts of at least 1"));
    }
    if args.engines.is_empty() || args.workloads.is_empty() {
        return Err(CliError::new(
            "--engines and --workloads need at least one name",
        ));
    }
    if args.tables == 0 || args.table_size == 0 || args.seconds == 0 || args.rounds == 0 {
        return Err(CliError::new(
            "--tables, --table-size, --seconds and --rounds must be at least 1",
        ));
    }
    Ok(())
}

fn notes(client: &str, transport: &str, data_bytes: u64, peer_buffer_bytes: u64) -> Vec<String> {
    vec![
        format!(
            "Every engine is driven by the same client program ({client}) over {}, with its \
             default options (prepared statements where the driver has them). Hayate and \
             PostgreSQL speak the PostgreSQL protocol (sysbench's pgsql driver), MariaDB its \
             own (sysbench's mysql driver).",
            describe_transport(transport)
        ),
        "Isolation: each engine runs at its default, as sysbench sets none. PostgreSQL runs at \
         its default READ COMMITTED, MariaDB/InnoDB at REPEATABLE READ, Hayate at its default \
         READ COMMITTED (a fresh snapshot per statement, updates of the latest version)."
            .to_string(),
        "Durable commits for every engine: Hayate syncs its log at commit, PostgreSQL runs \
         with fsync and synchronous_commit on, MariaDB with innodb_flush_log_at_trx_commit=1 \
         (each engine's settings are recorded)."
            .to_string(),
        format!(
            "Data in memory: the tables take about {} MiB (estimated); PostgreSQL's \
             shared_buffers and InnoDB's buffer pool are {} MiB, Hayate's buffer is its \
             `hayate serve` default of 128 MiB.",
            data_bytes >> 20,
            peer_buffer_bytes >> 20
        ),
    ]
}

/// A server the rounds run against.
struct Measured {
    engine: String,
    server: Server,
    target: Target,
}

/// Starts `engine`, records how it runs, prepares its data and warms it up. An error that
/// ends the engine's measurement is returned (the caller records it; the server is stopped).
fn start_engine(
    engine: &str,
    args: &ServerArgs,
    data: DataSet,
    peer_buffer_bytes: u64,
    results: &mut ServerResults,
) -> Result<Measured, String> {
    results.engines.push(ServerEngine {
        engine: engine.to_string(),
        ..ServerEngine::default()
    });
    let spinner = spinner(&format!("{engine}: starting the server"));
    let started = Server::start(engine, &args.common.base_dir(), peer_buffer_bytes);
    spinner.finish_and_clear();
    let server = started.map_err(|error| format!("cannot start the server: {error}"))?;
    let target = server.target(args.transport);
    let description = server.describe();
    if let Some(entry) = results.engines.last_mut() {
        entry.engine_version = description.version;
        entry.engine_settings = description.settings;
        entry.isolation = description.isolation;
        entry.client_driver = target.driver.to_string();
        entry.address = target.endpoint.address();
    }
    match prepare_and_warm_up(engine, args, data, &target, results) {
        Ok(()) => Ok(Measured {
            engine: engine.to_string(),
            server,
            target,
        }),
        Err(error) => {
            let stopped = server.stop();
            Err(match stopped {
                Ok(()) => error,
                Err(stop) => format!("{error}; stopping the server: {stop}"),
            })
        }
    }
}

fn prepare_and_warm_up(
    engine: &str,
    args: &ServerArgs,
    data: DataSet,
    target: &Target,
    results: &mut ServerResults,
) -> Result<(), String> {
    let spinner = spinner(&format!(
        "{engine}: sysbench prepare ({} x {} rows)",
        data.tables, data.table_size
    ));
    let prepared = sysbench::prepare(target, data, 4);
    spinner.finish_and_clear();
    let prepare_seconds = prepared?;
    if let Some(entry) = results.engines.last_mut() {
        entry.prepare_seconds = Some(prepare_seconds);
    }
    let threads_max = args.threads.iter().copied().max().unwrap_or(1);
    if args.warmup > 0 {
        timed_run(
            engine,
            target,
            data,
            "oltp_read_only",
            threads_max,
            args.warmup,
        )
        .map_err(|error| format!("warm-up: {error}"))?;
    }
    Ok(())
}

/// One recorded run; a failed run is recorded with its error.
fn measured_run(
    server: &Measured,
    args: &ServerArgs,
    data: DataSet,
    workload: &str,
    threads: u32,
    round: u32,
) -> ServerRun {
    let engine = server.engine.as_str();
    let spinner = spinner(&format!("{engine}: waiting for a quiet machine"));
    let (waited, settled) = sysstat::wait_until_quiet(QUIET_BUSY_MAX, QUIET_WINDOW, QUIET_TIMEOUT);
    spinner.finish_and_clear();
    let pids = server.server.pids();
    let server_before = sysstat::process_tree_cpu_seconds(&pids);
    let client_before = sysstat::children_cpu_seconds();
    let report = timed_run(
        engine,
        &server.target,
        data,
        workload,
        threads,
        args.seconds,
    );
    let client_seconds = sysstat::children_cpu_seconds() - client_before;
    let server_seconds = sysstat::process_tree_cpu_seconds(&pids) - server_before;
    let mut run = match report {
        Ok(report) => {
            let per_transaction = |seconds: f64| {
                (report.transactions > 0).then(|| seconds * 1e6 / report.transactions as f64)
            };
            ServerRun {
                server_cpu_us: per_transaction(server_seconds),
                client_cpu_us: per_transaction(client_seconds),
                ..report.to_run(engine, workload, threads, round)
            }
        }
        Err(error) => {
            eprintln!("{engine} {workload} {threads} threads: {error}");
            ServerRun {
                engine: engine.to_string(),
                workload: workload.to_string(),
                threads,
                round,
                error: Some(error),
                ..ServerRun::default()
            }
        }
    };
    run.settle_seconds = waited.as_secs_f64();
    run.settled = settled;
    let of_rounds = match args.rounds {
        1 => String::new(),
        rounds => format!(" (round {round}/{rounds})"),
    };
    let cpu = match (run.server_cpu_us, run.client_cpu_us) {
        (Some(server), Some(client)) => {
            format!(", CPU per transaction: server {server:.1} us, sysbench {client:.1} us")
        }
        _ => String::new(),
    };
    eprintln!(
        "{engine:<10} {workload:<22} {threads:>3} threads: {} tps{cpu}{of_rounds}",
        format_rate(run.transactions_per_second)
    );
    run
}

/// One sysbench run with a progress bar over its seconds.
fn timed_run(
    engine: &str,
    target: &Target,
    data: DataSet,
    workload: &str,
    threads: u32,
    seconds: u64,
) -> Result<sysbench::Report, String> {
    let what = format!("{engine} {workload} x{threads}");
    let bar = crate::progress::timed_bar(seconds, &what);
    let mut progress = |line: &str| {
        if let Some(second) = sysbench::report_second(line) {
            bar.set_position(second.min(seconds));
            if let Some(tps) = sysbench::report_tps(line) {
                bar.set_message(format!("{what} {tps} tps"));
            }
        }
    };
    let report = sysbench::run(target, data, workload, threads, seconds, &mut progress);
    bar.finish_and_clear();
    report
}

fn spinner(what: &str) -> indicatif::ProgressBar {
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_message(what.to_string());
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    spinner
}

fn format_rate(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// Hayate's median throughput over PostgreSQL's for a workload and thread count, when both
/// ran.
pub fn ratio(results: &ServerResults, workload: &str, threads: u32) -> Option<f64> {
    let key = (workload.to_string(), threads);
    let tps = |engine: &str| {
        let medians = median_runs(&results.runs, engine);
        medians.get(&key).map(|run| run.transactions_per_second)
    };
    let (hayate, postgresql) = (tps("hayate")?, tps("postgresql")?);
    (postgresql > 0.0).then(|| hayate / postgresql)
}

/// The lowest and highest ratio Hayate / PostgreSQL of a single round, over the rounds both
/// ran.
pub fn ratio_spread(results: &ServerResults, workload: &str, threads: u32) -> Option<(f64, f64)> {
    let tps = |engine: &str, round: u32| {
        (results.runs.iter())
            .find(|run| {
                run.engine == engine
                    && run.workload == workload
                    && run.threads == threads
                    && run.round == round
                    && run.error.is_none()
            })
            .map(|run| run.transactions_per_second)
    };
    let ratios: Vec<f64> = (1..=results.rounds)
        .filter_map(|round| {
            let postgresql = tps("postgresql", round).filter(|tps| *tps > 0.0)?;
            Some(tps("hayate", round)? / postgresql)
        })
        .collect();
    let low = ratios.iter().copied().reduce(f64::min)?;
    let high = ratios.iter().copied().reduce(f64::max)?;
    Some((low, high))
}

/// The one-screen summary: tps per workload, thread count and engine, the ratio Hayate /
/// PostgreSQL, and whether the target is met.
pub fn summary(results: &ServerResults) -> String {
    use std::fmt::Write;
    let engines: Vec<&str> = (results.engines.iter())
        .map(|engine| engine.engine.as_str())
        .collect();
    let by_engine: Vec<_> = (engines.iter())
        .map(|engine| median_runs(&results.runs, engine))
        .collect();
    let mut out = String::new();
    let rounds = match results.rounds {
        0 | 1 => String::new(),
        rounds => format!(", median of {rounds} rounds"),
    };
    let _ = writeln!(
        out,
        "\nsysbench over {} ({}), {} tables x {} rows, {} s per run{rounds}; transactions per \
         second:",
        describe_transport(&results.transport),
        results.client,
        results.tables,
        results.table_size,
        results.seconds
    );
    let _ = write!(out, "{:<22} {:>7}", "workload", "threads");
    for engine in &engines {
        let _ = write!(out, " {engine:>11}");
    }
    let _ = writeln!(out, " {:>16}", "hayate/postgres");
    let mut keys: Vec<(String, u32)> = (results.runs.iter())
        .map(|run| (run.workload.clone(), run.threads))
        .collect();
    keys.sort_by_key(|(workload, threads)| {
        let order = WORKLOADS.iter().position(|known| known == workload);
        (order, *threads)
    });
    keys.dedup();
    for (workload, threads) in &keys {
        let _ = write!(out, "{workload:<22} {threads:>7}");
        for runs in &by_engine {
            let cell = (runs.get(&(workload.clone(), *threads))).map_or_else(
                || "-".to_string(),
                |run| format_rate(run.transactions_per_second),
            );
            let _ = write!(out, " {cell:>11}");
        }
        let cell =
            ratio(results, workload, *threads).map_or_else(|| "-".into(), |r| format!("{r:.2}x"));
        let spread = match ratio_spread(results, workload, *threads) {
            Some((low, high)) if results.rounds > 1 => {
                format!("  (rounds {low:.2}x-{high:.2}x)")
            }
            _ => String::new(),
        };
        let _ = writeln!(out, " {cell:>16}{spread}");
    }
    let _ = writeln!(
        out,
        "CPU per transaction in those runs, server + sysbench (us):"
    );
    for (workload, threads) in &keys {
        let _ = write!(out, "{workload:<22} {threads:>7}");
        for runs in &by_engine {
            let run = runs.get(&(workload.clone(), *threads));
            let cell = match run.map(|run| (run.server_cpu_us, run.client_cpu_us)) {
                Some((Some(server), Some(client))) => format!("{server:.1} + {client:.1}"),
                _ => "-".to_string(),
            };
            let _ = write!(out, " {cell:>13}");
        }
        let _ = writeln!(out);
    }
    for engine in &results.engines {
        if let Some(error) = &engine.error {
            let _ = writeln!(out, "{}: not measured: {}", engine.engine, headline(error));
        }
    }
    for run in results.runs.iter().filter(|run| run.error.is_some()) {
        let error = run.error.as_deref().unwrap_or_default();
        let _ = writeln!(
            out,
            "{} {} {} threads failed: {}",
            run.engine,
            run.workload,
            run.threads,
            headline(error)
        );
    }
    let _ = writeln!(out, "{}", target_line(results));
    out
}

/// The line of an error that says what went wrong: sysbench's first FATAL line (which quotes
/// the server's message) when there is one, else the first line.
fn headline(error: &str) -> String {
    let first = error.lines().next().unwrap_or_default();
    match error.lines().find(|line| line.starts_with("FATAL:")) {
        Some(fatal) => format!(
            "{} {}",
            first.trim_end_matches(':'),
            fatal.trim_start_matches("FATAL:")
        ),
        None => first.to_string(),
    }
}

/// Whether issue 5's target is met.
pub fn target_line(results: &ServerResults) -> String {
    let ratios: Vec<(&str, Option<f64>)> = (TARGET_WORKLOADS.iter())
        .map(|workload| (*workload, ratio(results, workload, TARGET_THREADS)))
        .collect();
    let shown: Vec<String> = (ratios.iter())
        .map(|(workload, ratio)| match ratio {
            Some(ratio) => format!("{workload} {ratio:.2}x"),
            None => format!("{workload} not measured"),
        })
        .collect();
    let verdict = if ratios.iter().any(|(_, ratio)| ratio.is_none()) {
        "not measured"
    } else if (ratios.iter()).all(|(_, ratio)| ratio.is_some_and(|r| r >= TARGET_RATIO)) {
        "met"
    } else {
        "not met"
    };
    format!(
        "target (Hayate >= {TARGET_RATIO}x PostgreSQL at {TARGET_THREADS} threads): {verdict} \
         ({})",
        shown.join(", ")
    )
}

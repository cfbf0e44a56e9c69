//! `hayate-lab server`: Hayate and PostgreSQL / MariaDB as servers, compared through the same
//! client path: the same client program (sysbench) over the same transport (`--transport`:
//! each server's Unix-domain socket, as psql and pgbench connect by default, or TCP on
//! 127.0.0.1) and durable commits for every engine, with the data in memory or every engine
//! given the same buffer size (`--buffer-size`).
//!
//! 1. Measure the device holding `--dir` (unless `--no-device`): random 4 KiB reads at queue
//!    depth 32 for a few seconds on a test file (`device::measure_random_reads`), the
//!    reference of each run's device utilization.
//! 2. For each engine (`engines`): start its server with a new database under `--dir`
//!    (Hayate: `hayate serve` from this executable; the peers: the lab's private servers)
//!    with the data in memory, and `sysbench oltp_common prepare` (the tables, their rows and
//!    the secondary index).
//! 3. For each `--buffer-size` (none given: once, as started): restart every server on its
//!    prepared data with that buffer (Hayate's buffer pool, InnoDB's buffer pool, PostgreSQL's
//!    shared_buffers), then a warm-up run of each (not recorded).
//! 4. `--rounds` times: `sysbench WORKLOAD run` for every workload and thread count, the
//!    engines taking turns, a progress bar moving with sysbench's report every second, and
//!    the device's counters (/proc/diskstats) read before and after. On a shared machine whose
//!    speed drifts between minutes, turns within a round put every engine under the same
//!    conditions; the summary takes each engine's median over the rounds and shows the spread
//!    of the per-round ratios.
//! 5. Stop the servers and remove their directories.
//!
//! An engine that cannot start, prepare or restart (e.g. Hayate's SQL lacking a feature
//! sysbench uses) is recorded with its error and the others go on. The JSON results (kind
//! "server") are rewritten after each step; stdout gets a summary (`summary`) with the ratios
//! Hayate / peer per workload, the device reads per second and utilization, the target of
//! issue 5 (at least 1.5x PostgreSQL on oltp_point_select and oltp_update_non_index at 16
//! threads, data in memory) and that of issue 19 (uniform point selects at a small buffer
//! reading the device at 80% of its reads per second at queue depth 32).

pub mod engines;
pub mod summary;
pub mod sysbench;

#[cfg(test)]
mod tests;

use std::path::Path;

use clap::Args;

use super::results::{
    describe_buffer, describe_transport, ResultFile, ServerBuffer, ServerEngine, ServerResults,
    ServerRun,
};
use super::sysstat::{self, DiskstatsDevice, IoRates};
use crate::args::{parse_buffer_size, CommonArgs};
use crate::progress::spinner;
use engines::Server;
use hayate::error::{CliError, CliResult};
use summary::{format_rate, summary};
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

/// The device's reference: random reads of 4 KiB at this queue depth, split over this many
/// threads each submitting batches (so the queue stays nearly full between batches, as fio's
/// iodepth keeps it), for this long, on a test file of this size in `--dir`.
const DEVICE_QUEUE_DEPTH: u32 = 32;
const DEVICE_THREADS: u32 = 4;
const DEVICE_SECONDS: f64 = 3.0;
const DEVICE_FILE_BYTES: u64 = 512 << 20;

/// sysbench's `--rand-type`: how the workloads pick the rows they read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RandType {
    /// Every row equally likely.
    Uniform,
    /// Normally distributed around the middle of the table.
    Gaussian,
    /// sysbench's default: a share of the rows (1% by default) gets most of the picks.
    Special,
    /// Pareto distributed.
    Pareto,
}

impl RandType {
    pub fn name(self) -> &'static str {
        match self {
            RandType::Uniform => "uniform",
            RandType::Gaussian => "gaussian",
            RandType::Special => "special",
            RandType::Pareto => "pareto",
        }
    }
}

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

    /// The buffer of every engine, e.g. 16MB (units B, kB, MB, GB, TB; a bare number is kB);
    /// a list measures each size on the same prepared data, the servers restarted between
    /// sizes. Hayate: `hayate serve --buffer-size`; MariaDB: innodb_buffer_pool_size (data
    /// files with O_DIRECT); PostgreSQL: shared_buffers (it also reads through the OS page
    /// cache). Default: the data in memory (Hayate `hayate serve`'s default, a quarter of the
    /// memory, the peers four times the estimated data, at least 256 MiB).
    #[arg(
        long,
        value_name = "SIZE[,SIZE...]",
        value_delimiter = ',',
        value_parser = parse_buffer_size
    )]
    pub buffer_size: Vec<u64>,

    /// How the workloads pick rows (sysbench's --rand-type); default: sysbench's own,
    /// special.
    #[arg(long, value_enum)]
    pub rand_type: Option<RandType>,

    /// Do not measure the device's random reads at queue depth 32 before the servers start
    /// (the reference of each run's device utilization, dev%).
    #[arg(long)]
    pub no_device: bool,
}

pub fn run(args: &ServerArgs) -> CliResult<()> {
    check_args(args)?;
    let client = sysbench::version().map_err(CliError::new)?;
    let base_dir = args.common.base_dir();
    let data = DataSet {
        tables: args.tables,
        table_size: args.table_size,
        rand_type: args.rand_type.map(RandType::name),
    };
    let data_bytes = u64::from(args.tables) * args.table_size * ROW_BYTES_ESTIMATE;
    let peer_buffer_bytes = (4 * data_bytes).max(PEER_BUFFER_BYTES_MIN);
    let disk = DiskstatsDevice::of_directory(&base_dir);
    if disk.is_none() {
        eprintln!(
            "warning: {} is on no device of /proc/diskstats: no device reads/s",
            base_dir.display()
        );
    }
    let (device_read_iops_qd32, device_note) = measure_device(args, &base_dir);
    let transport = args.transport.name();
    let mut notes = notes(&client, transport);
    notes.push(
        buffer_note(&args.buffer_size, data_bytes)
            .unwrap_or_else(|| memory_note(data_bytes, peer_buffer_bytes)),
    );
    notes.push(device_note);
    let results = ServerResults {
        client,
        transport: transport.to_string(),
        rounds: args.rounds,
        tables: args.tables,
        table_size: args.table_size,
        seconds: args.seconds,
        engines: Vec::new(),
        runs: Vec::new(),
        notes,
        diskstats_device: disk.as_ref().map(|disk| disk.name.clone()),
        device_read_iops_qd32,
        rand_type: data.rand_type.map(str::to_string),
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
    for buffer_bytes in buffer_sizes(args) {
        servers = set_up_buffer(servers, buffer_bytes, args, data, &mut file.results);
        file.rewrite(&path)?;
        for round in 1..=args.rounds {
            let runs = &mut file.results.runs;
            run_round(
                &servers,
                args,
                data,
                disk.as_ref(),
                buffer_bytes,
                round,
                runs,
            );
            file.rewrite(&path)?;
        }
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

/// One round at one buffer size: every workload and thread count, the engines taking turns.
fn run_round(
    servers: &[Measured],
    args: &ServerArgs,
    data: DataSet,
    disk: Option<&DiskstatsDevice>,
    buffer_bytes: Option<u64>,
    round: u32,
    runs: &mut Vec<ServerRun>,
) {
    for workload in &args.workloads {
        for &threads in &args.threads {
            for server in servers {
                let spec = RunSpec {
                    buffer_bytes,
                    workload,
                    threads,
                    round,
                };
                runs.push(measured_run(server, args, data, disk, &spec));
            }
        }
    }
}

/// The buffer sizes the runs cover: each `--buffer-size`, or once as the servers started
/// (None: the data in memory).
fn buffer_sizes(args: &ServerArgs) -> Vec<Option<u64>> {
    if args.buffer_size.is_empty() {
        vec![None]
    } else {
        args.buffer_size.iter().copied().map(Some).collect()
    }
}

/// The device's random reads per second at queue depth 32 under `base_dir`, and a note saying
/// how it was measured (or why not).
fn measure_device(args: &ServerArgs, base_dir: &Path) -> (Option<f64>, String) {
    if args.no_device {
        return (
            None,
            "The device's reads/s at queue depth 32 were not measured (--no-device): no device \
             utilization."
                .to_string(),
        );
    }
    let measured = crate::device::measure_random_reads(
        base_dir,
        DEVICE_FILE_BYTES,
        DEVICE_QUEUE_DEPTH,
        DEVICE_THREADS,
        DEVICE_SECONDS,
    );
    match measured {
        Ok(reads) => {
            eprintln!(
                "device: {} random 4 KiB reads/s at queue depth {DEVICE_QUEUE_DEPTH}",
                format_rate(reads.point.ops_per_second)
            );
            let note = format!(
                "Device utilization (dev%): each run's device reads/s (/proc/diskstats of the \
                 device holding --dir, before and after sysbench: every process's reads) over \
                 the device's {} random 4 KiB reads/s at queue depth {DEVICE_QUEUE_DEPTH}, \
                 measured before the servers started as `hayate-lab device` does ({}, {} \
                 threads each submitting batches of {}, {} s on a {} test file).",
                format_rate(reads.point.ops_per_second),
                reads.backend,
                reads.threads,
                DEVICE_QUEUE_DEPTH / reads.threads.max(1),
                reads.seconds,
                describe_buffer(Some(reads.file_bytes)),
            );
            (Some(reads.point.ops_per_second), note)
        }
        Err(error) => {
            eprintln!("warning: cannot measure the device's reads/s: {error}");
            let note = format!(
                "The device's reads/s at queue depth 32 could not be measured ({error}): no \
                 device utilization."
            );
            (None, note)
        }
    }
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

fn notes(client: &str, transport: &str) -> Vec<String> {
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
    ]
}

/// The buffers when none was given: the data in memory.
fn memory_note(data_bytes: u64, peer_buffer_bytes: u64) -> String {
    format!(
        "Data in memory: the tables take about {} MiB (estimated); PostgreSQL's shared_buffers \
         and InnoDB's buffer pool are {} MiB, Hayate's buffer is its `hayate serve` default of \
         {} MiB (a quarter of the memory).",
        data_bytes >> 20,
        peer_buffer_bytes >> 20,
        ::hayate::memory::default_buffer_bytes() >> 20
    )
}

/// What the reader must know when the buffers were given (`--buffer-size`).
fn buffer_note(buffer_sizes: &[u64], data_bytes: u64) -> Option<String> {
    let sizes: Vec<String> = (buffer_sizes.iter())
        .map(|bytes| describe_buffer(Some(*bytes)))
        .collect();
    let smallest = buffer_sizes.iter().copied().min()?;
    Some(format!(
        "Buffers of {} for every engine (the data in memory only while sysbench prepared it; \
         the tables take about {} MiB, estimated, {:.1}x the smallest buffer), each server \
         restarted on its prepared data for each size and warmed up: Hayate with `hayate \
         serve --buffer-size` (its data file with O_DIRECT), MariaDB with \
         innodb_buffer_pool_size and innodb_flush_method=O_DIRECT (InnoDB rounds the pool up \
         to at least 6 MiB), PostgreSQL with shared_buffers (at least 8 MiB). PostgreSQL 15 \
         reads and writes through the OS page cache besides shared_buffers, so the buffer does \
         not limit it as it does the other two: what the page cache holds is served without \
         device reads (the effective sizes are in each engine's settings per buffer).",
        sizes.join(", "),
        data_bytes >> 20,
        data_bytes as f64 / smallest as f64
    ))
}

/// A server the rounds run against.
struct Measured {
    engine: String,
    server: Server,
    target: Target,
}

/// Starts `engine`, records how it runs and prepares its data. An error that ends the
/// engine's measurement is returned (the caller records it; the server is stopped).
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
    let starting = spinner(&format!("{engine}: starting the server"));
    let started = Server::start(engine, &args.common.base_dir(), peer_buffer_bytes);
    starting.finish_and_clear();
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
    let preparing = spinner(&format!(
        "{engine}: sysbench prepare ({} x {} rows)",
        data.tables, data.table_size
    ));
    let prepared = sysbench::prepare(&target, data, 4);
    preparing.finish_and_clear();
    match prepared {
        Ok(seconds) => {
            if let Some(entry) = results.engines.last_mut() {
                entry.prepare_seconds = Some(seconds);
            }
            Ok(Measured {
                engine: engine.to_string(),
                server,
                target,
            })
        }
        Err(error) => Err(stopped_after(server, error)),
    }
}

/// `error`, with the error of stopping the server if that failed too.
fn stopped_after(server: Server, error: String) -> String {
    match server.stop() {
        Ok(()) => error,
        Err(stop) => format!("{error}; stopping the server: {stop}"),
    }
}

/// Readies every server for the runs at `buffer_bytes`: restarted with that buffer (when
/// given) and warmed up. A server that fails is recorded with its error, stopped and left
/// out of the servers returned.
fn set_up_buffer(
    servers: Vec<Measured>,
    buffer_bytes: Option<u64>,
    args: &ServerArgs,
    data: DataSet,
    results: &mut ServerResults,
) -> Vec<Measured> {
    let mut ready = Vec::new();
    for mut server in servers {
        let engine = server.engine.clone();
        let set_up = set_up_server(&mut server, buffer_bytes, args, data, results);
        let Err(error) = set_up else {
            ready.push(server);
            continue;
        };
        let error = stopped_after(server.server, error);
        let size = buffer_bytes.map_or_else(String::new, |bytes| {
            format!(" at {}", describe_buffer(Some(bytes)))
        });
        eprintln!("{engine}{size}: {error}");
        let entry = (results.engines.iter_mut()).find(|entry| entry.engine == engine);
        match (entry, buffer_bytes) {
            (Some(entry), Some(_)) => {
                if let Some(buffer) = entry.buffers.last_mut() {
                    buffer.error = Some(error);
                }
            }
            (Some(entry), None) => entry.error = Some(error),
            (None, _) => {}
        }
    }
    ready
}

fn set_up_server(
    server: &mut Measured,
    buffer_bytes: Option<u64>,
    args: &ServerArgs,
    data: DataSet,
    results: &mut ServerResults,
) -> Result<(), String> {
    let engine = server.engine.as_str();
    if let Some(bytes) = buffer_bytes {
        let size = describe_buffer(Some(bytes));
        let spinner = spinner(&format!("{engine}: restarting with a {size} buffer"));
        let restarted = server.server.set_buffer_bytes(bytes);
        spinner.finish_and_clear();
        let entry = (results.engines.iter_mut()).find(|entry| entry.engine == engine);
        if let Some(entry) = entry {
            entry.buffers.push(ServerBuffer {
                buffer_bytes: bytes,
                engine_settings: server.server.describe().settings,
                error: None,
            });
        }
        restarted.map_err(|error| format!("cannot restart with a {size} buffer: {error}"))?;
    }
    if args.warmup > 0 {
        let threads_max = args.threads.iter().copied().max().unwrap_or(1);
        let warm_up = timed_run(
            engine,
            &server.target,
            data,
            "oltp_read_only",
            threads_max,
            args.warmup,
        );
        warm_up.map_err(|error| format!("warm-up: {error}"))?;
    }
    Ok(())
}

/// What one recorded run measures.
struct RunSpec<'a> {
    buffer_bytes: Option<u64>,
    workload: &'a str,
    threads: u32,
    round: u32,
}

/// One recorded run; a failed run is recorded with its error.
fn measured_run(
    server: &Measured,
    args: &ServerArgs,
    data: DataSet,
    disk: Option<&DiskstatsDevice>,
    spec: &RunSpec<'_>,
) -> ServerRun {
    let engine = server.engine.as_str();
    let RunSpec {
        buffer_bytes,
        workload,
        threads,
        round,
    } = *spec;
    let spinner = spinner(&format!("{engine}: waiting for a quiet machine"));
    let (waited, settled) = sysstat::wait_until_quiet(QUIET_BUSY_MAX, QUIET_WINDOW, QUIET_TIMEOUT);
    spinner.finish_and_clear();
    let pids = server.server.pids();
    let server_before = sysstat::process_tree_cpu_seconds(&pids);
    let client_before = sysstat::children_cpu_seconds();
    let disk_before = disk.and_then(DiskstatsDevice::read);
    let started = std::time::Instant::now();
    let report = timed_run(
        engine,
        &server.target,
        data,
        workload,
        threads,
        args.seconds,
    );
    let elapsed_seconds = started.elapsed().as_secs_f64();
    let disk_after = disk.and_then(DiskstatsDevice::read);
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
    run.buffer_bytes = buffer_bytes;
    run.settle_seconds = waited.as_secs_f64();
    run.settled = settled;
    if let (Some(before), Some(after)) = (disk_before, disk_after) {
        let rates: IoRates = after.rates_since(&before, elapsed_seconds);
        run.device_reads_per_s = Some(rates.reads_per_second);
        run.device_writes_per_s = Some(rates.writes_per_second);
    }
    eprintln!("{}", run_line(&run, args.rounds));
    run
}

/// The line printed after each run: its tps, CPU and device reads.
fn run_line(run: &ServerRun, rounds: u32) -> String {
    let ServerRun {
        engine,
        workload,
        threads,
        round,
        ..
    } = run;
    let buffer = run.buffer_bytes.map_or_else(String::new, |bytes| {
        format!(", {} buffer", describe_buffer(Some(bytes)))
    });
    let of_rounds = match rounds {
        1 => String::new(),
        rounds => format!(" (round {round}/{rounds})"),
    };
    let cpu = match (run.server_cpu_us, run.client_cpu_us) {
        (Some(server), Some(client)) => {
            format!(", CPU per transaction: server {server:.1} us, sysbench {client:.1} us")
        }
        _ => String::new(),
    };
    let device = run.device_reads_per_s.map_or_else(String::new, |reads| {
        format!(", device {} reads/s", format_rate(reads))
    });
    format!(
        "{engine:<10} {workload:<22} {threads:>3} threads{buffer}: {} tps{cpu}{device}{of_rounds}",
        format_rate(run.transactions_per_second)
    )
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

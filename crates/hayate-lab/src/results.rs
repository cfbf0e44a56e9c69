//! The JSON schema of the lab's results, shared by every experiment and by the report.
//!
//! One file per experiment run: `<results>/<kind>-<unix seconds>.json`, holding a `ResultFile`
//! whose `results` field is the experiment's own type (`DeviceResult`, `PrimitiveResults`).
//! Fields are only ever added (with `#[serde(default)]`), so older files stay readable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::machine::Machine;
pub use crate::sysstat::{DeviceInfo, IoRates};
use hayate::error::{CliResult, Context};

/// Version of this schema; bumped when a field changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// The envelope of every results file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResultFile<T> {
    /// "device" or "primitive".
    pub kind: String,
    pub schema_version: u32,
    pub hayate_version: String,
    /// When the run started, seconds since the Unix epoch.
    pub started_unix: u64,
    /// The command line that produced this file.
    pub command_line: Vec<String>,
    pub machine: Machine,
    /// The device under the experiment's directory.
    pub device: DeviceInfo,
    pub results: T,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Percentiles {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

// ---------------------------------------------------------------------------------------------
// hayate-lab device

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeviceResult {
    /// I/O backend used ("io_uring + O_DIRECT" or "pread/pwrite").
    pub backend: String,
    pub page_size: u64,
    /// Size of the test file the random I/O spreads over.
    pub file_bytes: u64,
    pub seconds_per_point: f64,
    /// Random reads of `page_size`, one point per queue depth (1, 2, 4, ... 256).
    pub random_read: Vec<DevicePoint>,
    /// Random writes of `page_size` (not synced), per queue depth.
    pub random_write: Vec<DevicePoint>,
    /// Sequential writes in large blocks (the out-of-place segment size), per queue depth.
    pub sequential_write: Vec<DevicePoint>,
    /// Log-sized writes each followed by fdatasync, queue depth 1, per write size.
    pub synced_write: Vec<DevicePoint>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DevicePoint {
    pub queue_depth: u32,
    pub block_bytes: u64,
    pub operations: u64,
    pub ops_per_second: f64,
    pub mib_per_second: f64,
    pub latency: Percentiles,
}

impl DeviceResult {
    /// Random reads per second at a queue depth (the nearest measured depth at or below it).
    pub fn random_reads_at(&self, queue_depth: u32) -> Option<f64> {
        self.random_read
            .iter()
            .filter(|point| point.queue_depth <= queue_depth)
            .max_by_key(|point| point.queue_depth)
            .map(|point| point.ops_per_second)
    }
}

// ---------------------------------------------------------------------------------------------
// hayate-lab primitive

/// All runs of one `hayate-lab primitive` invocation (a sweep has many).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PrimitiveResults {
    pub runs: Vec<PrimitiveRun>,
    /// The device measurement the runs are compared to, when one was found or made.
    pub device_reference: Option<DeviceResult>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PrimitiveRun {
    /// "hayate", "postgresql", "mariadb" or "sqlite".
    pub engine: String,
    /// Version string the engine reported.
    pub engine_version: String,
    /// Every setting that matters for durability and caching, as the engine was configured
    /// (e.g. synchronous_commit=on, innodb_flush_log_at_trx_commit=1, synchronous=FULL).
    pub engine_settings: BTreeMap<String, String>,
    /// "real", "low-latency", "nand" or "external".
    pub device_class: String,
    /// True when the device class is emulated by added latency.
    pub emulated: bool,
    /// "select" or "update".
    pub mode: String,
    pub buffer_percent: f64,
    pub buffer_bytes: u64,
    pub page_size: u64,
    /// "out-of-place" or "in-place" (Hayate), else the peer's own.
    pub write_policy: String,
    pub tables: u32,
    pub rows_per_table: u64,
    /// Bytes of table data (rows), which the buffer percentage refers to.
    pub data_bytes: u64,
    /// Concurrent transactions in flight.
    pub concurrency: u32,
    /// OS threads running them.
    pub worker_threads: u32,
    pub seconds: f64,
    pub transactions: u64,
    pub transactions_per_second: f64,
    /// Transactions retried after a serialization failure or deadlock.
    pub retries: u64,
    pub latency: Percentiles,
    pub io: IoRates,
    pub buffer_hit_ratio: Option<f64>,
    pub log_flushes: Option<u64>,
    pub commits_per_flush: Option<f64>,
    /// Data file bytes per byte of live pages at the end of the run; Hayate only (none in
    /// older files).
    #[serde(default)]
    pub space_amplification: Option<f64>,
    /// CPU time (user + system, of every process of the engine and of the lab's clients) per
    /// transaction.
    pub cpu_us_per_transaction: f64,
    /// Where the workers' time went; Hayate only (peers cannot be instrumented).
    pub time_split: Option<TimeSplit>,
    /// Storage utilization from replaying the run's I/O trace.
    pub alpha: Option<Alpha>,
    /// Inputs and prediction of the latency model.
    pub model: Option<ModelPoint>,
    /// File name (in the results directory) of the run's transaction timeline, if recorded.
    pub timeline_file: Option<String>,
    /// File name of the run's I/O trace CSV, if kept.
    pub trace_file: Option<String>,
}

/// Shares of the workers' wall time, summing to 1.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TimeSplit {
    pub cpu: f64,
    pub read_io: f64,
    pub write_io: f64,
    pub log_wait: f64,
    /// Waiting for row locks held by another thread's transactions (none in older files).
    #[serde(default)]
    pub lock_wait: f64,
}

/// alpha = device IOPS during the run / IOPS when the run's trace is replayed alone.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Alpha {
    pub run_iops: f64,
    pub replay_iops: f64,
    pub alpha: f64,
    pub trace_records: u64,
    /// I/Os the replay kept in flight.
    pub replay_concurrency: u32,
}

/// The latency model for one run: (t_cpu + t_mem) / (t_cpu + t_io).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ModelPoint {
    /// CPU time per transaction between I/Os, microseconds.
    pub t_cpu_us: f64,
    /// Time per transaction an all-in-memory run spends on what is I/O here, microseconds.
    pub t_mem_us: f64,
    /// Non-CPU time per transaction of this run, microseconds: `t_mem` plus its buffer misses
    /// times the read latency (see `lab::model`).
    pub t_io_us: f64,
    /// Buffer misses (page reads) per transaction.
    pub reads_per_transaction: f64,
    /// Predicted throughput relative to the all-in-memory run.
    pub predicted_relative: f64,
    /// Measured throughput relative to the all-in-memory run of the same sweep, if any.
    pub measured_relative: Option<f64>,
}

// ---------------------------------------------------------------------------------------------
// hayate-lab tpcc

/// One `hayate-lab tpcc run` invocation: every measured run, and the consistency check of
/// each engine's database after its runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TpccResults {
    pub runs: Vec<TpccRun>,
    pub checks: Vec<TpccCheck>,
}

/// One measured TPC-C run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TpccRun {
    pub engine: String,
    pub engine_version: String,
    pub engine_settings: BTreeMap<String, String>,
    pub device_class: String,
    pub emulated: bool,
    pub buffer_percent: f64,
    pub buffer_bytes: u64,
    pub page_size: u64,
    pub write_policy: String,
    pub warehouses: u32,
    /// Table data of the initial database by the specification's row sizes (what buffer
    /// percentages refer to).
    pub data_bytes: u64,
    /// Terminals (transactions in flight), zero think time.
    pub terminals: u32,
    pub worker_threads: u32,
    pub seconds: f64,
    /// New-Order transactions committed per minute (not an audited tpmC).
    pub nopm: f64,
    /// Committed transactions of every type per second.
    pub transactions_per_second: f64,
    pub per_type: Vec<TpccTypeRun>,
    /// New-Orders rolled back on their unused item (the specified 1%).
    pub rolled_back: u64,
    /// Retries by cause.
    pub retries: BTreeMap<String, u64>,
    /// Transactions still failing when the run ended (not counted).
    pub gave_up: u64,
    /// Deliveries ran deferred (clause 2.7.2): counted when their ten districts committed.
    #[serde(default)]
    pub deferred_delivery: bool,
    /// Deferred Deliveries queued but not finished when the run ended (not counted).
    #[serde(default)]
    pub deliveries_pending: u64,
    pub io: IoRates,
    pub buffer_hit_ratio: Option<f64>,
    pub log_flushes: Option<u64>,
    pub commits_per_flush: Option<f64>,
    pub cpu_us_per_transaction: f64,
    pub time_split: Option<TimeSplit>,
    pub alpha: Option<Alpha>,
    pub timeline_file: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TpccTypeRun {
    /// "new-order", "payment", "order-status", "delivery" or "stock-level".
    pub name: String,
    pub committed: u64,
    pub per_second: f64,
    pub latency: Percentiles,
}

/// The consistency conditions checked on an engine's database.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TpccCheck {
    pub engine: String,
    /// "after load", "after runs", "after crash cycle N".
    pub when: String,
    pub conditions: Vec<crate::tpcc::check::ConditionResult>,
}

/// `hayate-lab tpcc crash`: kills and recoveries.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TpccCrashResults {
    pub warehouses: u32,
    pub terminals: u32,
    pub cycles: Vec<CrashCycle>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CrashCycle {
    pub cycle: u32,
    /// How long the engine ran before SIGKILL.
    pub ran_ms: u64,
    /// New-Orders acknowledged to the terminals in the cycle.
    pub acknowledged_new_orders: u64,
    /// Of those, how many were missing after recovery (must be 0).
    pub missing_new_orders: u64,
    pub recovery_ms: u64,
    /// Log records replayed by the recovery.
    pub redo_records: u64,
    pub conditions: Vec<crate::tpcc::check::ConditionResult>,
    pub passed: bool,
}

// ---------------------------------------------------------------------------------------------
// hayate-lab server

/// One `hayate-lab server` invocation: each engine as a server on this machine, driven by
/// the same client program (sysbench) over the same transport.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerResults {
    /// The client and its version, e.g. "sysbench 1.0.20".
    pub client: String,
    /// How the client reaches every server: "unix" (Unix-domain sockets) or "tcp" (TCP on
    /// 127.0.0.1; files written before the choice existed are TCP).
    #[serde(default = "transport_tcp")]
    pub transport: String,
    /// Rounds: every run was repeated this often, the engines taking turns.
    #[serde(default = "one")]
    pub rounds: u32,
    pub tables: u32,
    pub table_size: u64,
    /// Seconds of each measured run.
    pub seconds: u64,
    pub engines: Vec<ServerEngine>,
    pub runs: Vec<ServerRun>,
    /// What the reader must know to compare the engines (isolation levels, buffers...).
    pub notes: Vec<String>,
    /// The /proc/diskstats line whose counters give each run's device reads and writes: the
    /// device (or partition) holding `--dir`; None when it has none (or in older files).
    #[serde(default)]
    pub diskstats_device: Option<String>,
    /// Random 4 KiB reads per second of that device at queue depth 32, measured once before
    /// the servers start (the reference of each run's device utilization, `dev%`); None when
    /// skipped (`--no-device`), failed, or in older files.
    #[serde(default)]
    pub device_read_iops_qd32: Option<f64>,
    /// sysbench's `--rand-type` (which rows the workloads pick); None: sysbench's default,
    /// "special" (also in older files).
    #[serde(default)]
    pub rand_type: Option<String>,
}

impl ServerResults {
    /// A run's device utilization: its device reads/s over the device's random reads/s at
    /// queue depth 32, when both are known.
    pub fn device_utilization(&self, run: &ServerRun) -> Option<f64> {
        let iops = self.device_read_iops_qd32.filter(|iops| *iops > 0.0)?;
        Some(run.device_reads_per_s? / iops)
    }
}

/// One engine's server as it was measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerEngine {
    /// "hayate", "postgresql" or "mariadb".
    pub engine: String,
    pub engine_version: String,
    /// Every durability and caching setting, as the server was configured.
    pub engine_settings: BTreeMap<String, String>,
    /// The isolation level the client's transactions run at.
    pub isolation: String,
    /// sysbench's driver for the engine ("pgsql" or "mysql").
    pub client_driver: String,
    /// Where the server listened: "127.0.0.1:PORT" or its socket's path.
    pub address: String,
    /// Seconds `sysbench oltp_common prepare` took.
    pub prepare_seconds: Option<f64>,
    /// Why the engine could not be measured (start or prepare failed); its runs are missing.
    pub error: Option<String>,
    /// The server as it ran at each `--buffer-size`, restarted on the prepared data; empty
    /// when no size was given (the data in memory, `engine_settings`) and in older files.
    #[serde(default)]
    pub buffers: Vec<ServerBuffer>,
}

/// One engine's server restarted with one buffer size.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerBuffer {
    /// The size asked for (`--buffer-size`); the engine's effective size is in the settings.
    pub buffer_bytes: u64,
    /// Every durability and caching setting at this size.
    pub engine_settings: BTreeMap<String, String>,
    /// Why the restart or the warm-up at this size failed; no runs at this size or later.
    pub error: Option<String>,
}

/// One `sysbench WORKLOAD run` on one engine.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerRun {
    pub engine: String,
    /// "oltp_point_select", "oltp_update_non_index", "oltp_read_only" or "oltp_read_write".
    pub workload: String,
    pub threads: u32,
    /// The buffer of every engine in the run (`--buffer-size`); None: the data in memory, each
    /// engine's default-sized buffer (also in older files).
    #[serde(default)]
    pub buffer_bytes: Option<u64>,
    /// Which round of the invocation, from 1.
    #[serde(default = "one")]
    pub round: u32,
    /// Seconds waited before the run for the machine to become quiet (the servers'
    /// background work after the previous run), and whether it did.
    #[serde(default)]
    pub settle_seconds: f64,
    #[serde(default)]
    pub settled: bool,
    /// CPU time per transaction, in microseconds, of the server (its whole process tree) and
    /// of the client (sysbench) during the run.
    #[serde(default)]
    pub server_cpu_us: Option<f64>,
    #[serde(default)]
    pub client_cpu_us: Option<f64>,
    /// Time sysbench measured.
    pub seconds: f64,
    pub transactions: u64,
    pub transactions_per_second: f64,
    pub queries_per_second: f64,
    pub latency_avg_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_max_ms: f64,
    /// Errors sysbench ignored (and retried), e.g. deadlocks and serialization failures.
    pub errors: u64,
    pub reconnects: u64,
    /// Why the run failed, with the end of sysbench's output; the figures are then zero.
    pub error: Option<String>,
    /// Completed reads and writes per second of the device holding `--dir` over the run
    /// (/proc/diskstats before and after sysbench); None when the device has no counters (or
    /// in older files).
    #[serde(default)]
    pub device_reads_per_s: Option<f64>,
    #[serde(default)]
    pub device_writes_per_s: Option<f64>,
}

/// What the medians of `median_runs` are taken per: (buffer size, workload, threads).
pub type RunKey = (Option<u64>, String, u32);

impl ServerRun {
    pub fn key(&self) -> RunKey {
        (self.buffer_bytes, self.workload.clone(), self.threads)
    }
}

/// The median run of one engine per buffer size, workload and thread count over the rounds:
/// the middle one by throughput, the lower of the two middle ones when the count is even.
/// Failed runs are left out.
pub fn median_runs<'a>(
    runs: impl IntoIterator<Item = &'a ServerRun>,
    engine: &str,
) -> BTreeMap<RunKey, &'a ServerRun> {
    let mut by_key: BTreeMap<RunKey, Vec<&ServerRun>> = BTreeMap::new();
    for run in runs {
        if run.engine == engine && run.error.is_none() {
            by_key.entry(run.key()).or_default().push(run);
        }
    }
    (by_key.into_iter())
        .map(|(key, mut runs)| {
            runs.sort_by(|a, b| {
                a.transactions_per_second
                    .total_cmp(&b.transactions_per_second)
            });
            (key, runs[(runs.len() - 1) / 2])
        })
        .collect()
}

/// "Unix-domain sockets" or "TCP on 127.0.0.1" for a `ServerResults::transport`, for
/// sentences.
pub fn describe_transport(name: &str) -> &'static str {
    match name {
        "unix" => "Unix-domain sockets",
        _ => "TCP on 127.0.0.1",
    }
}

/// A buffer size for tables and sentences: "16 MiB", "1 GiB", "512 KiB" when exact, else
/// with decimals; "in memory" for None (each engine's default, the data in memory).
pub fn describe_buffer(bytes: Option<u64>) -> String {
    let Some(bytes) = bytes else {
        return "in memory".to_string();
    };
    let units = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in units {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    match bytes {
        0..1024 => format!("{bytes} B"),
        _ => hayate::report::format_bytes(bytes),
    }
}

fn transport_tcp() -> String {
    "tcp".to_string()
}

fn one() -> u32 {
    1
}

// ---------------------------------------------------------------------------------------------
// Transaction timelines

/// What each worker did over a short window of a run (written as its own JSON file).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub engine: String,
    pub mode: String,
    pub buffer_percent: f64,
    pub device_class: String,
    pub window_us: u64,
    pub workers: Vec<WorkerTimeline>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerTimeline {
    pub worker: u32,
    pub spans: Vec<Span>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpanKind {
    Cpu,
    ReadIo,
    WriteIo,
    LogWait,
    LockWait,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Span {
    pub start_us: f64,
    pub end_us: f64,
    pub kind: SpanKind,
    /// Transactions the worker had in flight during the span.
    pub in_flight: u32,
}

// ---------------------------------------------------------------------------------------------
// Reading and writing

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

impl<T: Serialize> ResultFile<T> {
    pub fn new(kind: &str, directory: &Path, results: T) -> ResultFile<T> {
        ResultFile {
            kind: kind.to_string(),
            schema_version: SCHEMA_VERSION,
            hayate_version: env!("CARGO_PKG_VERSION").to_string(),
            started_unix: unix_now(),
            command_line: std::env::args().collect(),
            machine: Machine::describe(),
            device: crate::sysstat::describe_device(directory),
            results,
        }
    }

    /// Writes `<dir>/<kind>-<started_unix>.json` (a suffix keeps names unique); returns the path.
    pub fn write(&self, dir: &Path) -> CliResult<PathBuf> {
        std::fs::create_dir_all(dir)
            .context(|| format!("cannot create results directory {}", dir.display()))?;
        let mut path = dir.join(format!("{}-{}.json", self.kind, self.started_unix));
        let mut suffix = 1;
        while path.exists() {
            suffix += 1;
            path = dir.join(format!("{}-{}-{suffix}.json", self.kind, self.started_unix));
        }
        self.rewrite(&path)?;
        Ok(path)
    }

    /// Replaces the file at `path` (written first with `write`) with the current contents.
    pub fn rewrite(&self, path: &Path) -> CliResult<()> {
        let text = serde_json::to_string_pretty(self)
            .context(|| "cannot encode results as JSON".to_string())?;
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, text).context(|| format!("cannot write {}", partial.display()))?;
        std::fs::rename(&partial, path).context(|| format!("cannot write {}", path.display()))
    }
}

/// Reads one results file of a known kind.
pub fn read<T: DeserializeOwned>(path: &Path) -> CliResult<ResultFile<T>> {
    let text =
        std::fs::read_to_string(path).context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).context(|| format!("{} is not a lab results file", path.display()))
}

/// Kind of a results file without decoding its results.
pub fn kind_of(path: &Path) -> CliResult<String> {
    #[derive(Deserialize)]
    struct Kind {
        kind: String,
    }
    let text =
        std::fs::read_to_string(path).context(|| format!("cannot read {}", path.display()))?;
    let kind: Kind = serde_json::from_str(&text)
        .context(|| format!("{} is not a lab results file", path.display()))?;
    Ok(kind.kind)
}

/// The JSON results files of a directory, sorted by name (so by time).
pub fn list(dir: &Path) -> CliResult<Vec<PathBuf>> {
    let entries =
        std::fs::read_dir(dir).context(|| format!("cannot read directory {}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .collect();
    paths.sort();
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_through_json_files() {
        let temporary = tempfile::tempdir().expect("tempdir");
        let device = DeviceResult {
            backend: "test".into(),
            page_size: 4096,
            random_read: vec![DevicePoint {
                queue_depth: 1,
                ops_per_second: 10_000.0,
                ..DevicePoint::default()
            }],
            ..DeviceResult::default()
        };
        let file = ResultFile::new("device", temporary.path(), device);
        let first = file.write(temporary.path()).expect("write");
        let second = file.write(temporary.path()).expect("write again");
        assert_ne!(first, second, "a second file must not overwrite the first");
        assert_eq!(kind_of(&first).expect("kind"), "device");
        let back: ResultFile<DeviceResult> = read(&first).expect("read");
        assert_eq!(back.results.random_reads_at(4), Some(10_000.0));
        assert_eq!(back.results.random_reads_at(0), None);
        assert_eq!(list(temporary.path()).expect("list").len(), 2);
    }

    /// A `hayate-lab server` file as written before buffer sizes, device reads/s and the
    /// device's IOPS were recorded.
    const SERVER_FILE_BEFORE_DEVICE_READS: &str = r#"{
        "client": "sysbench 1.0.20", "transport": "unix", "rounds": 1,
        "tables": 4, "table_size": 50000, "seconds": 30,
        "engines": [{"engine": "hayate", "engine_version": "0.1.0", "engine_settings": {},
                     "isolation": "READ COMMITTED", "client_driver": "pgsql",
                     "address": "/tmp/.s.PGSQL.5432", "prepare_seconds": 3.5,
                     "error": null}],
        "runs": [{"engine": "hayate", "workload": "oltp_point_select", "threads": 16,
                  "round": 1, "settle_seconds": 0.5, "settled": true,
                  "server_cpu_us": 11.0, "client_cpu_us": 10.0, "seconds": 30.0,
                  "transactions": 2700000, "transactions_per_second": 90000.0,
                  "queries_per_second": 90000.0, "latency_avg_ms": 0.18,
                  "latency_p95_ms": 0.3, "latency_max_ms": 9.0, "errors": 0,
                  "reconnects": 0, "error": null}],
        "notes": []
    }"#;

    #[test]
    fn server_results_read_with_and_without_the_device_fields() {
        let old: ServerResults =
            serde_json::from_str(SERVER_FILE_BEFORE_DEVICE_READS).expect("an older file");
        assert_eq!(old.device_read_iops_qd32, None);
        assert_eq!(old.diskstats_device, None);
        assert_eq!(old.rand_type, None);
        assert!(old.engines[0].buffers.is_empty());
        let run = &old.runs[0];
        assert_eq!((run.buffer_bytes, run.device_reads_per_s), (None, None));
        assert_eq!(run.device_writes_per_s, None);
        assert_eq!(old.device_utilization(run), None);

        let mut new = old.clone();
        new.device_read_iops_qd32 = Some(100_000.0);
        new.diskstats_device = Some("vda1".into());
        new.rand_type = Some("uniform".into());
        new.engines[0].buffers.push(ServerBuffer {
            buffer_bytes: 16 << 20,
            engine_settings: BTreeMap::from([("buffer_bytes".into(), "16777216".into())]),
            error: None,
        });
        new.runs[0].buffer_bytes = Some(16 << 20);
        new.runs[0].device_reads_per_s = Some(80_000.0);
        new.runs[0].device_writes_per_s = Some(12.5);
        let text = serde_json::to_string(&new).expect("encode");
        let back: ServerResults = serde_json::from_str(&text).expect("decode");
        assert_eq!(back.device_read_iops_qd32, Some(100_000.0));
        assert_eq!(back.diskstats_device.as_deref(), Some("vda1"));
        assert_eq!(back.rand_type.as_deref(), Some("uniform"));
        assert_eq!(back.engines[0].buffers[0].buffer_bytes, 16 << 20);
        let run = &back.runs[0];
        assert_eq!(run.key(), (Some(16 << 20), "oltp_point_select".into(), 16));
        assert_eq!(run.device_reads_per_s, Some(80_000.0));
        assert_eq!(run.device_writes_per_s, Some(12.5));
        assert_eq!(back.device_utilization(run), Some(0.8));
    }

    #[test]
    fn buffer_sizes_are_described_exactly() {
        assert_eq!(describe_buffer(None), "in memory");
        assert_eq!(describe_buffer(Some(16 << 20)), "16 MiB");
        assert_eq!(describe_buffer(Some(2 << 30)), "2 GiB");
        assert_eq!(describe_buffer(Some(512 << 10)), "512 KiB");
        assert_eq!(describe_buffer(Some(1000)), "1000 B");
        assert_eq!(describe_buffer(Some((3 << 20) + 1)), "3.0 MiB");
    }
}

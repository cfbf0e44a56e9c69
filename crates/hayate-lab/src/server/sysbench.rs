//! sysbench, the one client program of `hayate-lab server`: its command lines, a run with a
//! progress bar, and the parser of its final report.
//!
//! 1. `Target` says how sysbench reaches an engine (driver, TCP port or Unix-domain socket,
//!    user, database).
//! 2. `prepare` runs `sysbench oltp_common prepare` (tables, rows, the secondary index).
//! 3. `run` runs `sysbench WORKLOAD run` with a report every second, which moves the progress
//!    bar; the whole output is kept and `parse_report` reads the final report.
//!
//! A sysbench that does not finish in its time plus `GRACE` is killed. A failing sysbench is
//! an error carrying the end of its output (the engine's own message is in it).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::results::ServerRun;

/// Time a run may take beyond its `--time` (connecting, the final report) before it is killed.
const GRACE: Duration = Duration::from_secs(60);
/// The longest a prepare may take.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(3600);
/// Lines of sysbench's output quoted in errors.
const OUTPUT_TAIL_LINES: usize = 12;

/// How sysbench connects to one engine.
#[derive(Debug, Clone)]
pub struct Target {
    /// sysbench's `--db-driver`: "pgsql" or "mysql".
    pub driver: &'static str,
    pub endpoint: Endpoint,
    pub user: String,
    pub database: String,
}

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// TCP on 127.0.0.1.
    Tcp { port: u16 },
    /// A PostgreSQL-protocol server's Unix-domain socket `<dir>/.s.PGSQL.<port>` (libpq
    /// takes a directory as the host).
    PostgresSocket { dir: PathBuf, port: u16 },
    /// A MySQL-protocol server's Unix-domain socket file.
    MysqlSocket { path: PathBuf },
}

impl Endpoint {
    /// The address as the results record it: "127.0.0.1:PORT" or the socket's path.
    pub fn address(&self) -> String {
        match self {
            Endpoint::Tcp { port } => format!("127.0.0.1:{port}"),
            Endpoint::PostgresSocket { dir, port } => {
                dir.join(format!(".s.PGSQL.{port}")).display().to_string()
            }
            Endpoint::MysqlSocket { path } => path.display().to_string(),
        }
    }
}

impl Target {
    /// The connection options.
    fn arguments(&self) -> Vec<String> {
        let prefix = self.driver;
        let mut arguments = vec![format!("--db-driver={}", self.driver)];
        match &self.endpoint {
            Endpoint::Tcp { port } => arguments.extend([
                format!("--{prefix}-host=127.0.0.1"),
                format!("--{prefix}-port={port}"),
            ]),
            Endpoint::PostgresSocket { dir, port } => arguments.extend([
                format!("--{prefix}-host={}", dir.display()),
                format!("--{prefix}-port={port}"),
            ]),
            Endpoint::MysqlSocket { path } => {
                arguments.push(format!("--{prefix}-socket={}", path.display()))
            }
        }
        arguments.extend([
            format!("--{prefix}-user={}", self.user),
            format!("--{prefix}-db={}", self.database),
        ]);
        arguments
    }
}

/// The data set every workload runs on, and how the runs pick its rows.
#[derive(Debug, Clone, Copy)]
pub struct DataSet {
    pub tables: u32,
    pub table_size: u64,
    /// sysbench's `--rand-type` of the runs (None: sysbench's default); `prepare` fills the
    /// tables the same way whatever it is.
    pub rand_type: Option<&'static str>,
}

impl DataSet {
    fn arguments(&self) -> Vec<String> {
        vec![
            format!("--tables={}", self.tables),
            format!("--table-size={}", self.table_size),
        ]
    }

    fn run_arguments(&self) -> Vec<String> {
        let mut arguments = self.arguments();
        if let Some(rand_type) = self.rand_type {
            arguments.push(format!("--rand-type={rand_type}"));
        }
        arguments
    }
}

/// "sysbench 1.0.20", or an error saying how to install it.
pub fn version() -> Result<String, String> {
    let output = Command::new("sysbench")
        .arg("--version")
        .output()
        .map_err(|error| {
            format!("cannot run sysbench ({error}): install it with `apt-get install sysbench`")
        })?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if !output.status.success() || !text.starts_with("sysbench") {
        return Err(format!("`sysbench --version` failed: {text}"));
    }
    Ok(text)
}

/// `sysbench oltp_common prepare`: creates and fills the tables (one thread per table, at most
/// `threads`). Returns the seconds it took.
pub fn prepare(target: &Target, data: DataSet, threads: u32) -> Result<f64, String> {
    let mut command = Command::new("sysbench");
    command
        .args(target.arguments())
        .args(data.arguments())
        .arg(format!("--threads={}", threads.clamp(1, data.tables)))
        .args(["oltp_common", "prepare"]);
    let start = Instant::now();
    let output = run_to_end(command, PREPARE_TIMEOUT, &mut |_| {})?;
    // With several threads sysbench 1.0 exits with 0 when only some of them failed.
    let failed_thread = output.text.lines().any(|line| line.starts_with("FATAL:"));
    if !output.success || failed_thread {
        return Err(format!(
            "sysbench prepare failed:\n{}",
            tail(&output.text, OUTPUT_TAIL_LINES)
        ));
    }
    Ok(start.elapsed().as_secs_f64())
}

/// `sysbench WORKLOAD run` for `seconds` with `threads`; `progress(second, line)` is called
/// for each intermediate report. The figures are those of sysbench's final report.
pub fn run(
    target: &Target,
    data: DataSet,
    workload: &str,
    threads: u32,
    seconds: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, String> {
    let mut command = Command::new("sysbench");
    command
        .args(target.arguments())
        .args(data.run_arguments())
        .arg(format!("--threads={threads}"))
        .arg(format!("--time={seconds}"))
        .args(["--report-interval=1", "--percentile=95", "--events=0"])
        .args([workload, "run"]);
    let timeout = Duration::from_secs(seconds) + GRACE;
    let output = run_to_end(command, timeout, progress)?;
    let report = parse_report(&output.text);
    // A thread that failed leaves a FATAL line, even when the others ran to the end.
    let failed_thread = output.text.lines().any(|line| line.starts_with("FATAL:"));
    match (output.success && !failed_thread, report) {
        (true, Some(report)) => Ok(report),
        _ => Err(format!(
            "sysbench {workload} run failed:\n{}",
            tail(&output.text, OUTPUT_TAIL_LINES)
        )),
    }
}

/// The figures of sysbench's final report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Report {
    pub transactions: u64,
    pub transactions_per_second: f64,
    pub queries_per_second: f64,
    pub errors: u64,
    pub reconnects: u64,
    pub seconds: f64,
    pub latency_avg_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_max_ms: f64,
}

impl Report {
    pub fn to_run(self, engine: &str, workload: &str, threads: u32, round: u32) -> ServerRun {
        ServerRun {
            engine: engine.to_string(),
            workload: workload.to_string(),
            threads,
            round,
            seconds: self.seconds,
            transactions: self.transactions,
            transactions_per_second: self.transactions_per_second,
            queries_per_second: self.queries_per_second,
            latency_avg_ms: self.latency_avg_ms,
            latency_p95_ms: self.latency_p95_ms,
            latency_max_ms: self.latency_max_ms,
            errors: self.errors,
            reconnects: self.reconnects,
            error: None,
            ..ServerRun::default()
        }
    }
}

/// Reads the final report of `sysbench ... run` (1.0.x), `None` when it is missing or
/// incomplete:
///
/// ```text
///     transactions:                        124    (39.43 per sec.)
///     queries:                             2514   (799.41 per sec.)
///     ignored errors:                      2      (0.64 per sec.)
///     reconnects:                          0      (0.00 per sec.)
///     total time:                          3.1444s
/// Latency (ms):
///          avg:                                   98.33
///          max:                                 1144.23
///          95th percentile:                      153.02
/// ```
pub fn parse_report(text: &str) -> Option<Report> {
    let mut report = Report::default();
    let mut found = 0;
    let mut in_latency = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("Latency (ms):") {
            in_latency = true;
            continue;
        }
        if !line.starts_with(' ') {
            in_latency = false;
        }
        let Some((name, value)) = trimmed.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let parsed = match (in_latency, name) {
            (false, "transactions") => count_and_rate(value).map(|(count, rate)| {
                report.transactions = count;
                report.transactions_per_second = rate;
            }),
            (false, "queries") => count_and_rate(value).map(|(_, rate)| {
                report.queries_per_second = rate;
            }),
            (false, "ignored errors") => count_and_rate(value).map(|(count, _)| {
                report.errors = count;
            }),
            (false, "reconnects") => count_and_rate(value).map(|(count, _)| {
                report.reconnects = count;
            }),
            (false, "total time") => (value.strip_suffix('s'))
                .and_then(|seconds| seconds.parse().ok())
                .map(|seconds| report.seconds = seconds),
            (true, "avg") => value.parse().ok().map(|ms| report.latency_avg_ms = ms),
            (true, "max") => value.parse().ok().map(|ms| report.latency_max_ms = ms),
            (true, name) if name.ends_with("th percentile") => {
                value.parse().ok().map(|ms| report.latency_p95_ms = ms)
            }
            _ => continue,
        };
        // A figure that does not parse makes the report incomplete.
        parsed?;
        found += 1;
    }
    (found == 8).then_some(report)
}

/// "124    (39.43 per sec.)" -> (124, 39.43).
fn count_and_rate(value: &str) -> Option<(u64, f64)> {
    let (count, rest) = value.split_once('(')?;
    let rate = rest.strip_suffix("per sec.)")?.trim();
    Some((count.trim().parse().ok()?, rate.parse().ok()?))
}

/// The second of an intermediate report line "[ 3s ] thds: ...".
pub fn report_second(line: &str) -> Option<u64> {
    let inner = line.strip_prefix('[')?.split_once(']')?.0.trim();
    inner.strip_suffix('s')?.trim().parse().ok()
}

/// The tps of an intermediate report line, for the progress bar's message.
pub fn report_tps(line: &str) -> Option<&str> {
    line.split_once("tps:")?.1.split_whitespace().next()
}

struct Output {
    success: bool,
    /// stdout, then stderr.
    text: String,
}

/// Runs `command` to its end, calling `on_line` for each line of stdout; kills it after
/// `timeout`.
fn run_to_end(
    mut command: Command,
    timeout: Duration,
    on_line: &mut dyn FnMut(&str),
) -> Result<Output, String> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot run sysbench: {error}"))?;
    let (lines, received) = mpsc::channel::<String>();
    let stdout = child.stdout.take();
    let reader = thread::spawn(move || {
        let Some(stdout) = stdout else { return };
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let mut stderr = child.stderr.take();
    let error_reader = thread::spawn(move || {
        let mut text = String::new();
        if let Some(stderr) = stderr.as_mut() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });
    let deadline = Instant::now() + timeout;
    let mut text = String::new();
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match received.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(line) => {
                on_line(&line);
                text.push_str(&line);
                text.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                timed_out = true;
                kill(&mut child);
                break;
            }
        }
    }
    let status = child
        .wait()
        .map_err(|error| format!("cannot wait for sysbench: {error}"))?;
    let _ = reader.join();
    text.push_str(&error_reader.join().unwrap_or_default());
    if timed_out {
        return Err(format!(
            "sysbench did not finish within {} s and was killed:\n{}",
            timeout.as_secs(),
            tail(&text, OUTPUT_TAIL_LINES)
        ));
    }
    Ok(Output {
        success: status.success(),
        text,
    })
}

fn kill(child: &mut Child) {
    let _ = child.kill();
}

/// The last `lines` non-empty lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real report: sysbench 1.0.20, pgsql driver, PostgreSQL 15, oltp_read_write.
    const REPORT: &str = include_str!("testdata/sysbench-pgsql-oltp_read_write.txt");

    #[test]
    fn parses_a_real_sysbench_report() {
        let report = parse_report(REPORT).expect("a complete report");
        assert_eq!(report.transactions, 124);
        assert_eq!(report.transactions_per_second, 39.43);
        assert_eq!(report.queries_per_second, 799.41);
        assert_eq!(report.errors, 2);
        assert_eq!(report.reconnects, 0);
        assert_eq!(report.seconds, 3.1444);
        assert_eq!(report.latency_avg_ms, 98.33);
        assert_eq!(report.latency_p95_ms, 153.02);
        assert_eq!(report.latency_max_ms, 1144.23);
    }

    #[test]
    fn an_incomplete_report_is_none() {
        let cut = &REPORT[..REPORT.find("Latency (ms):").expect("latency section")];
        assert_eq!(parse_report(cut), None);
        assert_eq!(parse_report("FATAL: connection refused"), None);
    }

    #[test]
    fn runs_pass_the_rand_type_and_prepare_does_not() {
        let mut data = DataSet {
            tables: 8,
            table_size: 100_000,
            rand_type: None,
        };
        assert_eq!(data.run_arguments(), ["--tables=8", "--table-size=100000"]);
        data.rand_type = Some("uniform");
        assert_eq!(
            data.run_arguments(),
            ["--tables=8", "--table-size=100000", "--rand-type=uniform"]
        );
        assert_eq!(data.arguments(), ["--tables=8", "--table-size=100000"]);
    }

    #[test]
    fn reads_intermediate_report_lines() {
        let line = "[ 3s ] thds: 4 tps: 82.71 qps: 1647.19 (r/w/o: 1148.90/327.82/170.47) \
                    lat (ms,95%): 125.52 err/s: 1.01 reconn/s: 0.00";
        assert_eq!(report_second(line), Some(3));
        assert_eq!(report_tps(line), Some("82.71"));
        assert_eq!(report_second("Threads started!"), None);
    }
}

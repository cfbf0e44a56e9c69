//! The one-screen summary of `hayate-lab server` on stdout: per buffer size, workload and
//! thread count, each engine's median tps, the ratios Hayate / peer, the CPU per transaction,
//! the device reads per second with the device utilization (`dev%`), and the targets.

use std::fmt::Write;

use super::{TARGET_RATIO, TARGET_THREADS, TARGET_WORKLOADS, WORKLOADS};
use crate::results::{
    describe_buffer, describe_transport, median_runs, RunKey, ServerResults, ServerRun,
};

/// Issue 19's target: Hayate's uniform point selects on data at least 20x the buffer read the
/// device at this share of its random reads per second at queue depth 32, or more.
pub const UTILIZATION_TARGET: f64 = 0.8;
const UTILIZATION_WORKLOAD: &str = "oltp_point_select";

/// Hayate's median throughput over `peer`'s for one buffer size, workload and thread count,
/// when both ran.
pub fn ratio_of(results: &ServerResults, peer: &str, key: &RunKey) -> Option<f64> {
    let tps = |engine: &str| {
        let medians = median_runs(&results.runs, engine);
        medians.get(key).map(|run| run.transactions_per_second)
    };
    let (hayate, peer) = (tps("hayate")?, tps(peer)?);
    (peer > 0.0).then(|| hayate / peer)
}

/// Hayate's median throughput over PostgreSQL's for a workload and thread count with the data
/// in memory, when both ran.
pub fn ratio(results: &ServerResults, workload: &str, threads: u32) -> Option<f64> {
    ratio_of(
        results,
        "postgresql",
        &(None, workload.to_string(), threads),
    )
}

/// The lowest and highest ratio Hayate / `peer` of a single round, over the rounds both ran.
pub fn ratio_spread_of(results: &ServerResults, peer: &str, key: &RunKey) -> Option<(f64, f64)> {
    let tps = |engine: &str, round: u32| {
        (results.runs.iter())
            .find(|run| {
                run.engine == engine
                    && run.key() == *key
                    && run.round == round
                    && run.error.is_none()
            })
            .map(|run| run.transactions_per_second)
    };
    let ratios: Vec<f64> = (1..=results.rounds)
        .filter_map(|round| {
            let peer = tps(peer, round).filter(|tps| *tps > 0.0)?;
            Some(tps("hayate", round)? / peer)
        })
        .collect();
    let low = ratios.iter().copied().reduce(f64::min)?;
    let high = ratios.iter().copied().reduce(f64::max)?;
    Some((low, high))
}

/// The lowest and highest ratio Hayate / PostgreSQL of a single round with the data in
/// memory, over the rounds both ran (the tests' shorthand).
#[cfg(test)]
pub fn ratio_spread(results: &ServerResults, workload: &str, threads: u32) -> Option<(f64, f64)> {
    ratio_spread_of(
        results,
        "postgresql",
        &(None, workload.to_string(), threads),
    )
}

pub fn format_rate(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// The engines of the summary's columns: those started, then any other that has runs.
fn engine_names(results: &ServerResults) -> Vec<&str> {
    let mut names: Vec<&str> = (results.engines.iter())
        .map(|engine| engine.engine.as_str())
        .collect();
    for run in &results.runs {
        if !names.contains(&run.engine.as_str()) {
            names.push(&run.engine);
        }
    }
    names
}

/// The engines Hayate is compared to (none without Hayate).
fn peer_names<'a>(engines: &[&'a str]) -> Vec<&'a str> {
    if !engines.contains(&"hayate") {
        return Vec::new();
    }
    (engines.iter().copied())
        .filter(|engine| *engine != "hayate")
        .collect()
}

fn short_name(engine: &str) -> &str {
    match engine {
        "postgresql" => "postgres",
        other => other,
    }
}

/// Every (buffer, workload, threads) that ran, buffers in the order given (in memory first),
/// workloads in sysbench's order.
fn run_keys(results: &ServerResults) -> Vec<RunKey> {
    let mut keys: Vec<RunKey> = results.runs.iter().map(ServerRun::key).collect();
    keys.sort_by_key(|(buffer, workload, threads)| {
        let order = WORKLOADS.iter().position(|known| known == workload);
        (*buffer, order, *threads)
    });
    keys.dedup();
    keys
}

/// The first columns of a row: workload, threads and, when any run had one, the buffer.
fn key_cells(out: &mut String, key: &RunKey, with_buffer: bool) {
    let (buffer, workload, threads) = key;
    let _ = write!(out, "{workload:<22} {threads:>7}");
    if with_buffer {
        let _ = write!(out, " {:>10}", describe_buffer(*buffer));
    }
}

/// The one-screen summary: tps per buffer size, workload, thread count and engine, the ratios
/// Hayate / peer, CPU per transaction, device reads per second and utilization, and whether
/// the targets are met.
pub fn summary(results: &ServerResults) -> String {
    let engines = engine_names(results);
    let keys = run_keys(results);
    let with_buffer = keys.iter().any(|(buffer, _, _)| buffer.is_some());
    let mut out = String::new();
    let rounds = match results.rounds {
        0 | 1 => String::new(),
        rounds => format!(", median of {rounds} rounds"),
    };
    let rand_type = (results.rand_type.as_ref()).map_or_else(String::new, |rand_type| {
        format!(", --rand-type={rand_type}")
    });
    let _ = writeln!(
        out,
        "\nsysbench over {} ({}), {} tables x {} rows, {} s per run{rand_type}{rounds}; \
         transactions per second:",
        describe_transport(&results.transport),
        results.client,
        results.tables,
        results.table_size,
        results.seconds
    );
    tps_table(&mut out, results, &engines, &keys, with_buffer);
    cpu_table(&mut out, results, &engines, &keys, with_buffer);
    device_table(&mut out, results, &engines, &keys, with_buffer);
    for engine in &results.engines {
        if let Some(error) = &engine.error {
            let _ = writeln!(out, "{}: not measured: {}", engine.engine, headline(error));
        }
        for buffer in &engine.buffers {
            if let Some(error) = &buffer.error {
                let size = describe_buffer(Some(buffer.buffer_bytes));
                let _ = writeln!(out, "{} at {size}: {}", engine.engine, headline(error));
            }
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
    if keys.iter().any(|(buffer, _, _)| buffer.is_none()) {
        let _ = writeln!(out, "{}", target_line(results));
    }
    for line in utilization_lines(results) {
        let _ = writeln!(out, "{line}");
    }
    out
}

fn tps_table(
    out: &mut String,
    results: &ServerResults,
    engines: &[&str],
    keys: &[RunKey],
    with_buffer: bool,
) {
    let peers = peer_names(engines);
    let by_engine: Vec<_> = (engines.iter())
        .map(|engine| median_runs(&results.runs, engine))
        .collect();
    let _ = write!(out, "{:<22} {:>7}", "workload", "threads");
    if with_buffer {
        let _ = write!(out, " {:>10}", "buffer");
    }
    for engine in engines {
        let _ = write!(out, " {engine:>11}");
    }
    for peer in &peers {
        let _ = write!(out, " {:>16}", format!("hayate/{}", short_name(peer)));
    }
    let _ = writeln!(out);
    for key in keys {
        key_cells(out, key, with_buffer);
        for runs in &by_engine {
            let cell = (runs.get(key)).map_or_else(
                || "-".to_string(),
                |run| format_rate(run.transactions_per_second),
            );
            let _ = write!(out, " {cell:>11}");
        }
        let mut spreads = Vec::new();
        for peer in &peers {
            let cell =
                ratio_of(results, peer, key).map_or_else(|| "-".into(), |r| format!("{r:.2}x"));
            let _ = write!(out, " {cell:>16}");
            if let Some((low, high)) = ratio_spread_of(results, peer, key) {
                spreads.push((short_name(peer), format!("{low:.2}x-{high:.2}x")));
            }
        }
        match spreads.as_slice() {
            _ if results.rounds <= 1 => {}
            [] => {}
            [(_, spread)] if peers.len() == 1 => {
                let _ = write!(out, "  (rounds {spread})");
            }
            spreads => {
                let shown: Vec<String> = (spreads.iter())
                    .map(|(peer, spread)| format!("{peer} {spread}"))
                    .collect();
                let _ = write!(out, "  (rounds: {})", shown.join(", "));
            }
        }
        let _ = writeln!(out);
    }
}

fn cpu_table(
    out: &mut String,
    results: &ServerResults,
    engines: &[&str],
    keys: &[RunKey],
    with_buffer: bool,
) {
    let _ = writeln!(
        out,
        "CPU per transaction in those runs, server + sysbench (us):"
    );
    median_rows(out, results, engines, keys, with_buffer, |run| {
        match run.map(|run| (run.server_cpu_us, run.client_cpu_us)) {
            Some((Some(server), Some(client))) => format!("{server:.1} + {client:.1}"),
            _ => "-".to_string(),
        }
    });
}

/// A row per run key: its cells, then `cell` of each engine's median run for the key.
fn median_rows(
    out: &mut String,
    results: &ServerResults,
    engines: &[&str],
    keys: &[RunKey],
    with_buffer: bool,
    cell: impl Fn(Option<&ServerRun>) -> String,
) {
    let by_engine: Vec<_> = (engines.iter())
        .map(|engine| median_runs(&results.runs, engine))
        .collect();
    for key in keys {
        key_cells(out, key, with_buffer);
        for runs in &by_engine {
            let _ = write!(out, " {:>13}", cell(runs.get(key).copied()));
        }
        let _ = writeln!(out);
    }
}

/// Device reads per second of each median run and its share of the device's reads per second
/// at queue depth 32 (`dev%`); nothing when no run has device counters.
fn device_table(
    out: &mut String,
    results: &ServerResults,
    engines: &[&str],
    keys: &[RunKey],
    with_buffer: bool,
) {
    if !(results.runs.iter()).any(|run| run.device_reads_per_s.is_some()) {
        return;
    }
    let device = results.diskstats_device.as_deref().unwrap_or("the device");
    let reference = match results.device_read_iops_qd32 {
        Some(iops) => format!(
            "dev%: of the device's {} random 4 KiB reads/s at queue depth 32",
            format_rate(iops)
        ),
        None => "the device's reads/s at queue depth 32 not measured: no dev%".to_string(),
    };
    let _ = writeln!(
        out,
        "Device reads/s of {device} in those runs ({reference}):"
    );
    median_rows(out, results, engines, keys, with_buffer, |run| {
        let reads = run.and_then(|run| run.device_reads_per_s);
        let utilization = run.and_then(|run| results.device_utilization(run));
        match (reads, utilization) {
            (Some(reads), Some(share)) => format!("{} {:.0}%", format_rate(reads), share * 100.0),
            (Some(reads), None) => format_rate(reads),
            _ => "-".to_string(),
        }
    });
}

/// The line of an error that says what went wrong: sysbench's first FATAL line (which quotes
/// the server's message) when there is one, else the first line.
pub fn headline(error: &str) -> String {
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

/// Whether issue 5's target is met (data in memory).
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

/// Issue 19's measure, per buffer size and thread count of Hayate's point selects: the share of
/// the device's reads per second at queue depth 32 its run used.
pub fn utilization_lines(results: &ServerResults) -> Vec<String> {
    let medians = median_runs(&results.runs, "hayate");
    let uniform = results.rand_type.as_deref() == Some("uniform");
    (medians.iter())
        .filter(|((buffer, workload, _), _)| buffer.is_some() && workload == UTILIZATION_WORKLOAD)
        .filter_map(|((buffer, _, threads), run)| {
            let share = results.device_utilization(run)?;
            let verdict = match (uniform, share >= UTILIZATION_TARGET) {
                (false, _) => "not comparable: the target is for --rand-type uniform",
                (true, true) => "met",
                (true, false) => "not met",
            };
            Some(format!(
                "device utilization target (Hayate's {UTILIZATION_WORKLOAD} reads the device at \
                 >= {:.0}% of its QD32 reads/s, data >= 20x the buffer): {verdict} ({:.0}% at {}, \
                 {threads} threads)",
                UTILIZATION_TARGET * 100.0,
                share * 100.0,
                describe_buffer(*buffer)
            ))
        })
        .collect()
}

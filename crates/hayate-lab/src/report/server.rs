//! The server section (`hayate-lab server`): sysbench's transactions per second per buffer
//! size, workload and engine through the same client path, the ratios Hayate / PostgreSQL and
//! Hayate / MariaDB, the device reads per second of each run and its device utilization
//! (`dev%`: those reads over the device's random reads per second at queue depth 32), each
//! engine's server and settings, and every run.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::device::figure;
use super::html::{self, escape, format_decimal, format_grouped};
use super::primitive::engine_color;
use super::svg::{Axis, BarChart, BarSeries, ScaleKind};
use super::Collection;
use crate::results::{describe_buffer, describe_transport, median_runs, ServerEngine, ServerRun};

/// sysbench's workloads in the order they are shown.
const WORKLOADS: &[&str] = &[
    "oltp_point_select",
    "oltp_update_non_index",
    "oltp_read_only",
    "oltp_read_write",
];
/// Issue 5's target: Hayate at least 1.5x PostgreSQL on these at 16 threads.
const TARGET_WORKLOADS: &[&str] = &["oltp_point_select", "oltp_update_non_index"];
const TARGET_THREADS: u32 = 16;
const TARGET_RATIO: f64 = 1.5;

pub fn has_results(collection: &Collection) -> bool {
    !collection.servers.is_empty()
}

/// (transport, buffer size, workload order, workload, threads).
type Key = (String, Option<u64>, usize, String, u32);

/// An engine's median run and its device utilization (from its file's device measurement).
#[derive(Clone, Copy)]
struct Median<'a> {
    run: &'a ServerRun,
    utilization: Option<f64>,
}

/// Engines as the tables order them: Hayate first, then by name.
type EngineKey = (bool, String);
type Table<'a> = BTreeMap<Key, BTreeMap<EngineKey, Median<'a>>>;

/// The median run (over its rounds) of each transport, buffer size, workload and thread count
/// per engine, from the newest results file that has it.
fn newest(collection: &Collection) -> Table<'_> {
    let mut table = Table::new();
    for source in &collection.servers {
        let results = &source.file.results;
        let mut engines: Vec<&str> = (results.runs.iter())
            .map(|run| run.engine.as_str())
            .collect();
        engines.sort_unstable();
        engines.dedup();
        for engine in engines {
            for ((buffer, workload, threads), run) in median_runs(&results.runs, engine) {
                let order = (WORKLOADS.iter())
                    .position(|known| *known == workload)
                    .unwrap_or(WORKLOADS.len());
                let key = (results.transport.clone(), buffer, order, workload, threads);
                let engine = (engine != "hayate", engine.to_string());
                let utilization = results.device_utilization(run);
                let median = Median { run, utilization };
                table.entry(key).or_default().insert(engine, median);
            }
        }
    }
    table
}

/// Hayate's throughput over `peer`'s.
fn ratio(runs: &BTreeMap<EngineKey, Median<'_>>, peer: &str) -> Option<f64> {
    let hayate = runs.get(&(false, "hayate".to_string()))?.run;
    let peer = runs.get(&(true, peer.to_string()))?.run;
    (peer.transactions_per_second > 0.0)
        .then(|| hayate.transactions_per_second / peer.transactions_per_second)
}

/// "34,512 reads/s, 24% dev" or what of it is known; empty when nothing is.
fn device_reads(run: &ServerRun, utilization: Option<f64>) -> String {
    let reads = run
        .device_reads_per_s
        .map(|reads| format!("{} reads/s", format_grouped(reads)));
    let utilization = utilization.map(|share| format!("{}% dev", format_decimal(share * 100.0, 0)));
    let parts: Vec<String> = reads.into_iter().chain(utilization).collect();
    parts.join(", ")
}

pub fn section(collection: &Collection) -> String {
    let mut out = String::from(
        "<h2 id=\"server\">Server: sysbench</h2><p>Each engine as a server on this machine, \
         driven by the same client program (sysbench) over the same transport (each server's \
         Unix-domain socket, or TCP on 127.0.0.1), with durable commits and the data in memory, \
         or every engine with the same buffer size (<code>--buffer-size</code>: Hayate's \
         buffer, InnoDB's buffer pool with O_DIRECT, PostgreSQL's shared_buffers, PostgreSQL \
         also reading through the OS page cache); with several rounds, each figure is the \
         engine's median run. Hayate runs as <code>hayate serve</code>; PostgreSQL and \
         MariaDB are the lab's private servers. Each run's device reads per second come from \
         /proc/diskstats of the device holding the data; <em>dev</em> (device utilization) is \
         that over the device's random 4 KiB reads per second at queue depth 32, measured \
         before the servers start (issue 19's target: at least 80% with uniform point selects \
         over data at least 20x the buffer). Issue 5's target: Hayate at least 1.5x \
         PostgreSQL's transactions per second on oltp_point_select and oltp_update_non_index \
         at 16 threads, data in memory.</p>",
    );
    if let Some(newest_file) = collection.servers.last() {
        let results = &newest_file.file.results;
        out.push_str("<ul>");
        for note in &results.notes {
            let _ = write!(out, "<li>{}</li>", escape(note));
        }
        if let Some(rand_type) = &results.rand_type {
            let _ = write!(out, "<li>sysbench --rand-type={}</li>", escape(rand_type));
        }
        out.push_str("</ul>");
    }
    let table = newest(collection);
    if !table.is_empty() {
        out.push_str("<div class=\"charts\">");
        out.push_str(&tps_chart(&table));
        out.push_str("</div>");
        out.push_str(&ratio_table(&table));
    }
    out.push_str(&engine_table(collection));
    out.push_str(&run_table(collection));
    out
}

fn tps_chart(table: &Table<'_>) -> String {
    let mut engines: Vec<EngineKey> = table
        .values()
        .flat_map(|runs| runs.keys().cloned())
        .collect();
    engines.sort();
    engines.dedup();
    let varies = |values: Vec<String>| values.windows(2).any(|pair| pair[0] != pair[1]);
    let threads_vary = varies(table.keys().map(|key| key.4.to_string()).collect());
    let transports_vary = varies(table.keys().map(|key| key.0.clone()).collect());
    let buffers_vary = varies(table.keys().map(|key| describe_buffer(key.1)).collect());
    let groups = (table.keys())
        .map(|(transport, buffer, _, workload, threads)| {
            let mut group = workload.trim_start_matches("oltp_").to_string();
            if threads_vary {
                group.push_str(&format!(" x{threads}"));
            }
            if buffers_vary {
                group.push_str(&format!(" {}", describe_buffer(*buffer)));
            }
            if transports_vary {
                group.push_str(&format!(" {transport}"));
            }
            group
        })
        .collect();
    let series = (engines.iter())
        .map(|engine| BarSeries {
            label: engine.1.clone(),
            color: engine_color(&engine.1),
            values: (table.values())
                .map(|runs| {
                    runs.get(engine)
                        .map(|median| median.run.transactions_per_second)
                })
                .collect(),
        })
        .collect();
    let chart = BarChart {
        title: "sysbench: transactions per second".to_string(),
        x_label: "workload".to_string(),
        groups,
        y_axis: Axis::new("transactions per second", ScaleKind::Linear),
        series,
    };
    figure(
        &chart.render(),
        "The newest results of each engine, buffer size, workload and thread count (the \
         median run when there were rounds). Same client, same options and the same transport \
         for every engine.",
    )
}

fn ratio_table(table: &Table<'_>) -> String {
    let mut rows = Vec::new();
    for ((transport, buffer, _, workload, threads), runs) in table {
        let tps = |engine: &str| {
            let Some((_, median)) = runs.iter().find(|((_, name), _)| name == engine) else {
                return "-".to_string();
            };
            let mut cell = format_grouped(median.run.transactions_per_second);
            let reads = device_reads(median.run, median.utilization);
            if !reads.is_empty() {
                let _ = write!(cell, "<br><small>{reads}</small>");
            }
            cell
        };
        let format_ratio = |ratio: Option<f64>| {
            ratio.map_or_else(
                || "-".to_string(),
                |ratio| format!("{}x", format_decimal(ratio, 2)),
            )
        };
        let to_postgresql = ratio(runs, "postgresql");
        let targeted = TARGET_WORKLOADS.contains(&workload.as_str())
            && *threads == TARGET_THREADS
            && buffer.is_none();
        let verdict = match (targeted, to_postgresql) {
            (false, _) => String::new(),
            (true, None) => " (target: not measured)".to_string(),
            (true, Some(ratio)) if ratio >= TARGET_RATIO => {
                " <span class=\"badge real\">target met</span>".to_string()
            }
            (true, Some(_)) => " <strong>target not met</strong>".to_string(),
        };
        rows.push(vec![
            escape(workload),
            threads.to_string(),
            describe_buffer(*buffer),
            describe_transport(transport).to_string(),
            tps("hayate"),
            tps("postgresql"),
            tps("mariadb"),
            format!("{}{verdict}", format_ratio(to_postgresql)),
            format_ratio(ratio(runs, "mariadb")),
        ]);
    }
    html::table(
        &[
            "workload",
            "threads",
            "buffer",
            "transport",
            "hayate tps",
            "postgresql tps",
            "mariadb tps",
            "hayate / postgresql",
            "hayate / mariadb",
        ],
        &rows,
        "numbers",
    )
}

fn engine_table(collection: &Collection) -> String {
    let mut rows = Vec::new();
    let engines = (collection.servers.iter()).flat_map(|source| {
        (source.file.results.engines.iter()).map(move |engine| (source, engine))
    });
    for (source, engine) in engines {
        let ServerEngine {
            engine: name,
            engine_version,
            engine_settings,
            isolation,
            client_driver,
            address,
            prepare_seconds,
            error,
            buffers,
        } = engine;
        let join = |settings: &BTreeMap<String, String>| {
            let settings: Vec<String> = (settings.iter())
                .map(|(key, value)| format!("{}={}", escape(key), escape(value)))
                .collect();
            settings.join("<br>")
        };
        let mut settings = join(engine_settings);
        for buffer in buffers {
            let _ = write!(
                settings,
                "<br><strong>restarted with a {} buffer:</strong>{}<br>{}",
                describe_buffer(Some(buffer.buffer_bytes)),
                (buffer.error.as_ref())
                    .map_or_else(String::new, |error| format!(" failed: {}", escape(error))),
                join(&buffer.engine_settings)
            );
        }
        rows.push(vec![
            escape(name),
            escape(engine_version),
            format!(
                "{} ({}, {} x {} rows)",
                escape(client_driver),
                escape(&source.file.results.client),
                source.file.results.tables,
                source.file.results.table_size
            ),
            escape(address),
            escape(isolation),
            prepare_seconds.map_or_else(|| "-".to_string(), |seconds| format_decimal(seconds, 1)),
            error.as_ref().map_or_else(String::new, |error| {
                format!(
                    "<strong>not measured:</strong> <pre>{}</pre>",
                    escape(error)
                )
            }),
            format!("<small>{settings}</small>"),
        ]);
    }
    let mut out = String::from("<h3>Servers</h3>");
    out.push_str(&html::table(
        &[
            "engine",
            "version",
            "sysbench driver",
            "address",
            "isolation",
            "prepare s",
            "status",
            "settings",
        ],
        &rows,
        "text",
    ));
    out
}

fn run_table(collection: &Collection) -> String {
    let mut rows = Vec::new();
    let runs = (collection.servers.iter()).flat_map(|source| {
        let results = &source.file.results;
        (results.runs.iter()).map(move |run| (results, run))
    });
    let optional = |value: Option<f64>, decimals: usize| {
        value.map_or_else(|| "-".to_string(), |value| format_decimal(value, decimals))
    };
    for (results, run) in runs {
        let utilization = (results.device_utilization(run)).map(|share| share * 100.0);
        rows.push(vec![
            escape(&run.engine),
            escape(&run.workload),
            run.threads.to_string(),
            describe_buffer(run.buffer_bytes),
            describe_transport(&results.transport).to_string(),
            run.round.to_string(),
            format_decimal(run.seconds, 1),
            format_grouped(run.transactions_per_second),
            format_grouped(run.queries_per_second),
            run.server_cpu_us
                .map_or_else(|| "-".to_string(), |us| format_decimal(us, 1)),
            run.client_cpu_us
                .map_or_else(|| "-".to_string(), |us| format_decimal(us, 1)),
            format_decimal(run.latency_avg_ms, 2),
            format_decimal(run.latency_p95_ms, 2),
            format_decimal(run.latency_max_ms, 2),
            run.device_reads_per_s
                .map_or_else(|| "-".to_string(), format_grouped),
            run.device_writes_per_s
                .map_or_else(|| "-".to_string(), format_grouped),
            optional(utilization, 0),
            run.errors.to_string(),
            run.reconnects.to_string(),
            run.error
                .as_ref()
                .map_or_else(String::new, |error| format!("<pre>{}</pre>", escape(error))),
        ]);
    }
    let mut out = String::from("<h3>Runs</h3>");
    out.push_str(&html::table(
        &[
            "engine",
            "workload",
            "threads",
            "buffer",
            "transport",
            "round",
            "seconds",
            "tps",
            "qps",
            "server CPU us/tx",
            "sysbench CPU us/tx",
            "latency avg ms",
            "p95 ms",
            "max ms",
            "device reads/s",
            "device writes/s",
            "dev%",
            "ignored errors",
            "reconnects",
            "error",
        ],
        &rows,
        "numbers",
    ));
    out
}

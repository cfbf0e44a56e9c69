//! The server section (`hayate-lab server`): sysbench's transactions per second per workload
//! and engine through the same client path, the ratio Hayate / PostgreSQL, each engine's
//! server and settings, and every run.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::device::figure;
use super::html::{self, escape, format_decimal, format_grouped};
use super::primitive::engine_color;
use super::svg::{Axis, BarChart, BarSeries, ScaleKind};
use super::Collection;
use crate::results::{describe_transport, median_runs, ServerEngine, ServerRun};

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

/// (transport, workload order, workload, threads).
type Key = (String, usize, String, u32);

/// The median run (over its rounds) of each transport, workload and thread count per engine,
/// engines Hayate first, from the newest results file that has it.
fn newest(collection: &Collection) -> BTreeMap<Key, BTreeMap<(bool, String), &ServerRun>> {
    let mut table: BTreeMap<Key, BTreeMap<(bool, String), &ServerRun>> = BTreeMap::new();
    for source in &collection.servers {
        let results = &source.file.results;
        let mut engines: Vec<&str> = (results.runs.iter())
            .map(|run| run.engine.as_str())
            .collect();
        engines.sort_unstable();
        engines.dedup();
        for engine in engines {
            for ((workload, threads), run) in median_runs(&results.runs, engine) {
                let order = (WORKLOADS.iter())
                    .position(|known| *known == workload)
                    .unwrap_or(WORKLOADS.len());
                let key = (results.transport.clone(), order, workload, threads);
                let engine = (engine != "hayate", engine.to_string());
                table.entry(key).or_default().insert(engine, run);
            }
        }
    }
    table
}

fn ratio(runs: &BTreeMap<(bool, String), &ServerRun>) -> Option<f64> {
    let hayate = runs.get(&(false, "hayate".to_string()))?;
    let postgresql = runs.get(&(true, "postgresql".to_string()))?;
    (postgresql.transactions_per_second > 0.0)
        .then(|| hayate.transactions_per_second / postgresql.transactions_per_second)
}

pub fn section(collection: &Collection) -> String {
    let mut out = String::from(
        "<h2 id=\"server\">Server: sysbench</h2><p>Each engine as a server on this machine, \
         driven by the same client program (sysbench) over the same transport (each server's \
         Unix-domain socket, or TCP on 127.0.0.1), with the data in memory and durable \
         commits; with several rounds, each figure is the engine's median run. Hayate runs as \
         <code>hayate serve</code>; PostgreSQL and \
         MariaDB are the lab's private servers. Issue 5's target: Hayate at least 1.5x \
         PostgreSQL's transactions per second on oltp_point_select and oltp_update_non_index \
         at 16 threads.</p>",
    );
    if let Some(newest_file) = collection.servers.last() {
        out.push_str("<ul>");
        for note in &newest_file.file.results.notes {
            let _ = write!(out, "<li>{}</li>", escape(note));
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

fn tps_chart(table: &BTreeMap<Key, BTreeMap<(bool, String), &ServerRun>>) -> String {
    let mut engines: Vec<(bool, String)> = table
        .values()
        .flat_map(|runs| runs.keys().cloned())
        .collect();
    engines.sort();
    engines.dedup();
    let varies = |values: Vec<String>| values.windows(2).any(|pair| pair[0] != pair[1]);
    let threads_vary = varies(table.keys().map(|key| key.3.to_string()).collect());
    let transports_vary = varies(table.keys().map(|key| key.0.clone()).collect());
    let groups = (table.keys())
        .map(|(transport, _, workload, threads)| {
            let mut group = workload.trim_start_matches("oltp_").to_string();
            if threads_vary {
                group.push_str(&format!(" x{threads}"));
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
                .map(|runs| runs.get(engine).map(|run| run.transactions_per_second))
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
        "The newest results of each engine, workload and thread count (the median run when \
         there were rounds). Same client, same options and the same transport for every \
         engine.",
    )
}

fn ratio_table(table: &BTreeMap<Key, BTreeMap<(bool, String), &ServerRun>>) -> String {
    let mut rows = Vec::new();
    for ((transport, _, workload, threads), runs) in table {
        let tps = |engine: &str| {
            (runs.iter())
                .find(|((_, name), _)| name == engine)
                .map_or_else(
                    || "-".to_string(),
                    |(_, run)| format_grouped(run.transactions_per_second),
                )
        };
        let ratio = ratio(runs);
        let targeted = TARGET_WORKLOADS.contains(&workload.as_str()) && *threads == TARGET_THREADS;
        let verdict = match (targeted, ratio) {
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
            describe_transport(transport).to_string(),
            tps("hayate"),
            tps("postgresql"),
            tps("mariadb"),
            format!(
                "{}{verdict}",
                ratio.map_or_else(
                    || "-".to_string(),
                    |ratio| format!("{}x", format_decimal(ratio, 2))
                )
            ),
        ]);
    }
    html::table(
        &[
            "workload",
            "threads",
            "transport",
            "hayate tps",
            "postgresql tps",
            "mariadb tps",
            "hayate / postgresql",
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
        } = engine;
        let settings: Vec<String> = (engine_settings.iter())
            .map(|(key, value)| format!("{}={}", escape(key), escape(value)))
            .collect();
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
            format!("<small>{}</small>", settings.join("<br>")),
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
        let transport = describe_transport(&source.file.results.transport);
        (source.file.results.runs.iter()).map(move |run| (transport, run))
    });
    for (transport, run) in runs {
        rows.push(vec![
            escape(&run.engine),
            escape(&run.workload),
            run.threads.to_string(),
            transport.to_string(),
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
            "ignored errors",
            "reconnects",
            "error",
        ],
        &rows,
        "numbers",
    ));
    out
}

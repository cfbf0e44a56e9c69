//! The server section (`hayate lab server`): sysbench's transactions per second per workload
//! and engine through the same client path, the ratio Hayate / PostgreSQL, each engine's
//! server and settings, and every run.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::device::figure;
use super::html::{self, escape, format_decimal, format_grouped};
use super::primitive::engine_color;
use super::svg::{Axis, BarChart, BarSeries, ScaleKind};
use super::Collection;
use crate::lab::results::{ServerEngine, ServerRun};

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

/// (workload order, workload, threads).
type Key = (usize, String, u32);

/// The newest successful run of each (workload, threads) per engine, engines Hayate first.
fn newest(collection: &Collection) -> BTreeMap<Key, BTreeMap<(bool, String), &ServerRun>> {
    let mut table: BTreeMap<Key, BTreeMap<(bool, String), &ServerRun>> = BTreeMap::new();
    let runs = (collection.servers.iter()).flat_map(|source| source.file.results.runs.iter());
    for run in runs.filter(|run| run.error.is_none()) {
        let order = (WORKLOADS.iter())
            .position(|workload| *workload == run.workload)
            .unwrap_or(WORKLOADS.len());
        let key = (order, run.workload.clone(), run.threads);
        let engine = (run.engine != "hayate", run.engine.clone());
        table.entry(key).or_default().insert(engine, run);
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
        "<h2 id=\"server\">Server: sysbench over TCP</h2><p>Each engine as a server on \
         127.0.0.1, driven by the same client program (sysbench) over TCP, with the data in \
         memory and durable commits. Hayate runs as <code>hayate serve</code>; PostgreSQL and \
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
    let threads_vary = table
        .keys()
        .map(|(_, _, threads)| threads)
        .collect::<Vec<_>>()
        .windows(2)
        .any(|pair| pair[0] != pair[1]);
    let groups = (table.keys())
        .map(|(_, workload, threads)| {
            let short = workload.trim_start_matches("oltp_");
            if threads_vary {
                format!("{short} x{threads}")
            } else {
                short.to_string()
            }
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
        "The newest run of each engine, workload and thread count. Same client, same options, \
         TCP on 127.0.0.1 for every engine.",
    )
}

fn ratio_table(table: &BTreeMap<Key, BTreeMap<(bool, String), &ServerRun>>) -> String {
    let mut rows = Vec::new();
    for ((_, workload, threads), runs) in table {
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
    let runs = (collection.servers.iter()).flat_map(|source| source.file.results.runs.iter());
    for run in runs {
        rows.push(vec![
            escape(&run.engine),
            escape(&run.workload),
            run.threads.to_string(),
            format_decimal(run.seconds, 1),
            format_grouped(run.transactions_per_second),
            format_grouped(run.queries_per_second),
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
            "seconds",
            "tps",
            "qps",
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

//! The TPC-C section: throughput by buffer size per engine and device class, engines side by
//! side, alpha and time split of Hayate's runs, transactions by type, the consistency checks,
//! and the crash loop.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::device::figure;
use super::html::{self, escape, format_decimal, format_grouped, format_percent, or_dash};
use super::primitive::{
    class_cell, class_label, class_style, engine_color, percent_tick, relative_tick, CPU_COLOR,
    LOCK_COLOR, LOG_COLOR, READ_COLOR, WRITE_COLOR,
};
use super::svg::{
    Axis, BarChart, BarRow, BarSeries, HorizontalBars, LegendEntry, LineChart, Marker, Marking,
    ScaleKind, Segment, Series,
};
use super::{Collection, Source};
use crate::results::{TpccCrashResults, TpccRun};

fn runs(collection: &Collection) -> impl Iterator<Item = &TpccRun> {
    collection
        .tpcc
        .iter()
        .flat_map(|source| source.file.results.runs.iter())
}

fn run_label(run: &TpccRun) -> String {
    let class = if run.device_class == "real" {
        String::new()
    } else {
        format!(" {}", run.device_class)
    };
    format!(
        "{}{class} {}%",
        run.engine,
        format_decimal(run.buffer_percent, 1)
    )
}

pub fn section(collection: &Collection) -> String {
    let mut out = String::from(
        "<h2 id=\"tpcc\">TPC-C</h2><p>The five transactions of TPC-C 5.11 (New-Order, Payment, \
         Order-Status, Delivery, Stock-Level) in the standard mix, zero think time, durable \
         commits. NOPM: New-Order transactions committed per minute (this is not an audited \
         tpmC). Hayate's buffer percentages refer to its stored data (B+tree pages) after \
         loading, the peers' to the table data by the specification's row sizes; index pages \
         stay resident where the engine allows it.</p>",
    );
    if runs(collection).next().is_some() {
        out.push_str("<div class=\"charts\">");
        out.push_str(&throughput_chart(collection));
        out.push_str(&side_by_side(collection));
        out.push_str("</div><div class=\"charts\">");
        out.push_str(&alpha_chart(collection));
        out.push_str(&split_chart(collection));
        out.push_str("</div>");
        out.push_str(&run_table(collection));
        out.push_str(&type_table(collection));
    }
    out.push_str(&checks_table(collection));
    out.push_str(&crash_section(collection));
    out
}

/// (engine, device class, emulated) -> runs by buffer size.
type Sweeps<'a> = BTreeMap<(u8, String, String, bool), BTreeMap<u64, &'a TpccRun>>;

fn sweeps(collection: &Collection) -> Sweeps<'_> {
    let mut sweeps: Sweeps<'_> = BTreeMap::new();
    for run in runs(collection) {
        let key = (
            u8::from(run.engine != "hayate"),
            run.engine.clone(),
            run.device_class.clone(),
            run.emulated,
        );
        let buffer = (run.buffer_percent * 1000.0).round().max(0.0) as u64;
        sweeps.entry(key).or_default().insert(buffer, run);
    }
    sweeps
}

fn throughput_chart(collection: &Collection) -> String {
    let series = sweeps(collection)
        .into_iter()
        .map(|((_, engine, class, emulated), sweep)| {
            let (dash, marker) = class_style(&class);
            Series {
                label: format!("{engine}, {}", class_label(&class, emulated)),
                color: engine_color(&engine),
                dash,
                marker: if sweep.len() == 1 {
                    Marker::Circle
                } else {
                    marker
                },
                points: sweep
                    .values()
                    .map(|run| (run.buffer_percent, run.transactions_per_second))
                    .collect(),
            }
        })
        .collect();
    let chart = LineChart {
        title: "TPC-C: transactions per second by buffer size".to_string(),
        x_axis: Axis::new("buffer (% of the data, log scale)", ScaleKind::Log10)
            .with_domain(5.0, 100.0)
            .with_format(percent_tick),
        y_axis: Axis::new("transactions per second (log scale)", ScaleKind::Log10),
        series,
        rules: Vec::new(),
    };
    figure(
        &chart.render(),
        "One line per engine and device class (the HA paper's Case C compares device classes \
         at 5% to 100% buffers). All five transaction types count.",
    )
}

fn side_by_side(collection: &Collection) -> String {
    let real: Vec<&TpccRun> = runs(collection)
        .filter(|run| run.device_class == "real")
        .collect();
    let mut percents: Vec<u64> = real
        .iter()
        .map(|run| (run.buffer_percent * 1000.0).round() as u64)
        .collect();
    percents.sort_unstable();
    percents.dedup();
    let mut engines: Vec<String> = real.iter().map(|run| run.engine.clone()).collect();
    engines.sort_by_key(|engine| (engine != "hayate", engine.clone()));
    engines.dedup();
    let series = engines
        .iter()
        .map(|engine| BarSeries {
            label: engine.clone(),
            color: engine_color(engine),
            values: percents
                .iter()
                .map(|percent| {
                    // The newest run of the engine at this buffer size.
                    real.iter()
                        .rev()
                        .find(|run| {
                            &run.engine == engine
                                && (run.buffer_percent * 1000.0).round() as u64 == *percent
                        })
                        .map(|run| run.nopm)
                })
                .collect(),
        })
        .collect();
    let chart = BarChart {
        title: "TPC-C on the real device: NOPM side by side".to_string(),
        x_label: "buffer (% of the data)".to_string(),
        groups: percents
            .iter()
            .map(|percent| percent_tick(*percent as f64 / 1000.0))
            .collect(),
        y_axis: Axis::new("New-Orders per minute", ScaleKind::Linear),
        series,
    };
    figure(
        &chart.render(),
        "Every engine with the same transactions, terminals and durability (each engine's \
         settings are in the tables below).",
    )
}

fn alpha_chart(collection: &Collection) -> String {
    let rows: Vec<BarRow> = runs(collection)
        .filter_map(|run| run.alpha.map(|alpha| (run, alpha)))
        .map(|(run, alpha)| BarRow {
            label: run_label(run),
            segments: vec![Segment {
                value: alpha.alpha.clamp(0.0, 1.2),
                color: engine_color(&run.engine),
                tip: format!(
                    "{}: run {} IOPS, replay {} IOPS",
                    run_label(run),
                    format_grouped(alpha.run_iops),
                    format_grouped(alpha.replay_iops)
                ),
            }],
            annotation: format_decimal(alpha.alpha, 2),
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let chart = HorizontalBars {
        title: "TPC-C: storage utilization (alpha)".to_string(),
        x_axis: Axis::new("alpha (run IOPS ÷ replay IOPS)", ScaleKind::Linear)
            .with_domain(0.0, 1.2),
        rows,
        legend: Vec::new(),
        markings: vec![Marking {
            label: "target 0.9".to_string(),
            value: 0.9,
        }],
    };
    figure(
        &chart.render(),
        "The run's I/O trace replayed with no database work at the run's concurrency; at large \
         buffers a run does little I/O and alpha says little.",
    )
}

fn split_chart(collection: &Collection) -> String {
    let parts = [
        ("CPU", CPU_COLOR),
        ("read I/O", READ_COLOR),
        ("write I/O", WRITE_COLOR),
        ("log wait", LOG_COLOR),
        ("lock wait", LOCK_COLOR),
    ];
    let rows: Vec<BarRow> = runs(collection)
        .filter_map(|run| run.time_split.map(|split| (run, split)))
        .map(|(run, split)| {
            let shares = [
                split.cpu,
                split.read_io,
                split.write_io,
                split.log_wait,
                split.lock_wait,
            ];
            BarRow {
                label: run_label(run),
                segments: parts
                    .iter()
                    .zip(shares)
                    .map(|((name, color), share)| Segment {
                        value: share.max(0.0),
                        color: color.to_string(),
                        tip: format!("{}: {name} {}", run_label(run), format_percent(share)),
                    })
                    .collect(),
                annotation: String::new(),
            }
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let chart = HorizontalBars {
        title: "TPC-C: where Hayate's workers' time went".to_string(),
        x_axis: Axis::new("share of worker wall time", ScaleKind::Linear)
            .with_domain(0.0, 1.0)
            .with_format(relative_tick),
        rows,
        legend: parts
            .iter()
            .map(|(name, color)| LegendEntry::boxed(name, color))
            .collect(),
        markings: Vec::new(),
    };
    figure(
        &chart.render(),
        "Time of the worker threads by what they waited on (Hayate only; peers cannot be \
         instrumented this way).",
    )
}

fn run_table(collection: &Collection) -> String {
    let rows: Vec<Vec<String>> = runs(collection)
        .map(|run| {
            let retries: u64 = run.retries.values().sum();
            vec![
                escape(&run.engine),
                class_cell(&run.device_class, run.emulated),
                format!("{}%", format_decimal(run.buffer_percent, 1)),
                hayate::report::format_bytes(run.buffer_bytes),
                format!("{} / {}", run.warehouses, run.terminals),
                format_decimal(run.seconds, 1),
                format!("<strong>{}</strong>", format_grouped(run.nopm)),
                format_grouped(run.transactions_per_second),
                format_grouped(run.rolled_back as f64),
                if retries == 0 {
                    "0".to_string()
                } else {
                    escape(
                        &run.retries
                            .iter()
                            .map(|(cause, count)| format!("{cause} {count}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                    )
                },
                format_grouped(run.io.reads_per_second),
                format_grouped(run.io.writes_per_second),
                or_dash(run.buffer_hit_ratio.map(format_percent)),
                or_dash(run.commits_per_flush.map(|per| format_decimal(per, 1))),
                format!("{} µs", format_decimal(run.cpu_us_per_transaction, 0)),
                or_dash(run.alpha.map(|alpha| format_decimal(alpha.alpha, 2))),
            ]
        })
        .collect();
    let mut out = String::from("<h3>TPC-C runs</h3>");
    out.push_str(&html::table(
        &[
            "engine",
            "device",
            "buffer",
            "buffer bytes",
            "warehouses / terminals",
            "seconds",
            "NOPM",
            "tx/s",
            "rolled back",
            "retries",
            "reads/s",
            "writes/s",
            "hit",
            "tx/flush",
            "CPU/tx",
            "alpha",
        ],
        &rows,
        "numbers",
    ));
    out
}

fn type_table(collection: &Collection) -> String {
    let mut rows = Vec::new();
    for run in runs(collection) {
        for typed in &run.per_type {
            rows.push(vec![
                escape(&run_label(run)),
                escape(&typed.name),
                format_grouped(typed.committed as f64),
                format_grouped(typed.per_second),
                format_decimal(typed.latency.p50_us / 1000.0, 2),
                format_decimal(typed.latency.p90_us / 1000.0, 2),
                format_decimal(typed.latency.p99_us / 1000.0, 2),
                format_decimal(typed.latency.max_us / 1000.0, 2),
            ]);
        }
    }
    let mut out = String::from("<h3>TPC-C transactions by type</h3>");
    out.push_str(&html::table(
        &[
            "run",
            "transaction",
            "committed",
            "per s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms",
        ],
        &rows,
        "numbers",
    ));
    out
}

fn checks_table(collection: &Collection) -> String {
    let mut rows = Vec::new();
    for source in &collection.tpcc {
        for check in &source.file.results.checks {
            let failed: Vec<String> = check
                .conditions
                .iter()
                .filter(|result| !result.passed())
                .map(|result| result.number.to_string())
                .collect();
            let checked: Vec<String> = check
                .conditions
                .iter()
                .map(|result| result.number.to_string())
                .collect();
            rows.push(vec![
                escape(&check.engine),
                escape(&check.when),
                checked.join(", "),
                if failed.is_empty() {
                    "<span class=\"badge real\">all pass</span>".to_string()
                } else {
                    format!("<strong>FAILED: {}</strong>", failed.join(", "))
                },
            ]);
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h3>Consistency conditions</h3><p>Conditions 1 - 12 of clause 3.3.2, checked on each \
         engine's database after its runs (condition 11 holds only right after loading and is \
         not checked after runs).</p>",
    );
    out.push_str(&html::table(
        &["engine", "when", "conditions checked", "result"],
        &rows,
        "text",
    ));
    out
}

fn crash_section(collection: &Collection) -> String {
    if collection.tpcc_crashes.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h3>Crash loop</h3><p>TPC-C in a child process killed with SIGKILL at random moments; \
         after each kill the database recovers from its log, conditions 1 - 4 are checked and \
         every New-Order acknowledged so far must exist.</p>",
    );
    let mut rows = Vec::new();
    let mut series = Vec::new();
    for (index, source) in collection.tpcc_crashes.iter().enumerate() {
        rows.push(crash_row(source));
        series.push(Series {
            label: format!("run {}", index + 1),
            color: engine_color("hayate"),
            dash: String::new(),
            marker: Marker::Circle,
            points: source
                .file
                .results
                .cycles
                .iter()
                .map(|cycle| (cycle.cycle as f64, cycle.recovery_ms as f64))
                .collect(),
        });
    }
    out.push_str(&html::table(
        &[
            "file",
            "warehouses / terminals",
            "cycles",
            "passed",
            "New-Orders acknowledged",
            "missing",
            "recovery ms (mean / max)",
        ],
        &rows,
        "numbers",
    ));
    let chart = LineChart {
        title: "Crash loop: recovery time per cycle".to_string(),
        x_axis: Axis::new("cycle", ScaleKind::Linear),
        y_axis: Axis::new("recovery (ms)", ScaleKind::Linear),
        series,
        rules: Vec::new(),
    };
    let _ = write!(
        out,
        "<div class=\"charts\">{}</div>",
        figure(
            &chart.render(),
            "Time to open the database after each SIGKILL: log replay from the last checkpoint.",
        )
    );
    out
}

fn crash_row(source: &Source<TpccCrashResults>) -> Vec<String> {
    let results = &source.file.results;
    let cycles = &results.cycles;
    let passed = cycles.iter().filter(|cycle| cycle.passed).count();
    let acknowledged: u64 = cycles
        .iter()
        .map(|cycle| cycle.acknowledged_new_orders)
        .sum();
    let missing: u64 = cycles.iter().map(|cycle| cycle.missing_new_orders).sum();
    let mean = cycles
        .iter()
        .map(|cycle| cycle.recovery_ms as f64)
        .sum::<f64>()
        / cycles.len().max(1) as f64;
    let max = cycles
        .iter()
        .map(|cycle| cycle.recovery_ms)
        .max()
        .unwrap_or(0);
    vec![
        format!("<code>{}</code>", escape(&source.file_name)),
        format!("{} / {}", results.warehouses, results.terminals),
        format_grouped(cycles.len() as f64),
        if passed == cycles.len() {
            format!("<span class=\"badge real\">{passed}</span>")
        } else {
            format!("<strong>{passed}</strong>")
        },
        format_grouped(acknowledged as f64),
        format_grouped(missing as f64),
        format!(
            "{} / {}",
            format_decimal(mean, 0),
            format_grouped(max as f64)
        ),
    ]
}

/// Whether the TPC-C results hold anything to show.
pub fn has_results(collection: &Collection) -> bool {
    !collection.tpcc.is_empty() || !collection.tpcc_crashes.is_empty()
}

//! The primitive workload section: buffer sweeps, engines side by side, the latency model
//! against measurement, alpha, time split, and tables with every figure of every run.
//!
//! Runs group into sweeps by engine, device class, mode and write policy; a sweep's points
//! come from every primitive file, a newer file's run replacing an older one at the same
//! buffer size. Colors identify engines and dash patterns/markers device classes, the same in
//! every chart.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::io::latency::DeviceClass;

use super::device::figure;
use super::html::{
    self, escape, format_decimal, format_grouped, format_number, format_percent, format_short,
    or_dash,
};
use super::svg::{
    Axis, BarChart, BarRow, BarSeries, HorizontalBars, LegendEntry, LineChart, Marker, Marking,
    Rule, ScaleKind, Segment, Series, DASHES, MARKERS, PALETTE, REFERENCE_GRAY,
};
use super::{Collection, RunRef};
use crate::results::PrimitiveRun;
use hayate::report::format_bytes;

/// The device classes in their order of style (dash pattern and marker).
const CLASSES: [&str; 4] = ["real", "low-latency", "nand", "external"];

/// Colors of the time split's parts, shared with the timelines.
pub const CPU_COLOR: &str = "#0072B2";
pub const READ_COLOR: &str = "#E69F00";
pub const WRITE_COLOR: &str = "#CC79A7";
pub const LOG_COLOR: &str = "#009E73";
pub const LOCK_COLOR: &str = "#6e7781";

/// A sweep's identity; the field order is the order of legends: modes (select first),
/// engines (Hayate first), device classes (real first), write policies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SweepKey {
    mode_rank: u8,
    mode: String,
    engine_rank: u8,
    engine: String,
    class_rank: usize,
    device_class: String,
    write_policy: String,
}

impl SweepKey {
    fn of(run: &PrimitiveRun) -> SweepKey {
        SweepKey {
            mode_rank: mode_rank(&run.mode),
            mode: run.mode.clone(),
            engine_rank: u8::from(run.engine != "hayate"),
            engine: run.engine.clone(),
            class_rank: (CLASSES.iter().position(|class| *class == run.device_class))
                .unwrap_or(CLASSES.len()),
            device_class: run.device_class.clone(),
            write_policy: run.write_policy.clone(),
        }
    }

    /// The chart a sweep goes into when charts are per mode and device class.
    fn chart(&self) -> (u8, String, usize, String) {
        let (mode, class) = (self.mode.clone(), self.device_class.clone());
        (self.mode_rank, mode, self.class_rank, class)
    }
}

fn mode_rank(mode: &str) -> u8 {
    match mode {
        "select" => 0,
        "update" => 1,
        _ => 2,
    }
}

/// Runs of one sweep by buffer size (thousandths of a percent).
type Sweep<'a> = BTreeMap<u64, RunRef<'a>>;

fn sweeps(collection: &Collection) -> BTreeMap<SweepKey, Sweep<'_>> {
    let mut sweeps: BTreeMap<SweepKey, Sweep<'_>> = BTreeMap::new();
    for reference in collection.runs() {
        let buffer = (reference.run.buffer_percent * 1000.0).round().max(0.0) as u64;
        (sweeps.entry(SweepKey::of(reference.run)).or_default()).insert(buffer, reference);
    }
    sweeps
}

/// Modes in a fixed order: select, update, then others by name.
fn modes(collection: &Collection) -> Vec<String> {
    let mut modes: Vec<String> = collection.runs().map(|r| r.run.mode.clone()).collect();
    modes.sort_by_key(|mode| (mode_rank(mode), mode.clone()));
    modes.dedup();
    modes
}

/// An engine's color, the same in every chart: fixed for the known engines, else picked by
/// the name from the rest of the palette.
pub fn engine_color(engine: &str) -> String {
    let color = match engine {
        "hayate" => PALETTE[0],
        "mariadb" => PALETTE[1],
        "postgresql" => PALETTE[2],
        "sqlite" => PALETTE[3],
        other => {
            let hash = other
                .bytes()
                .fold(0usize, |hash, byte| hash * 31 + byte as usize);
            PALETTE[4 + hash % (PALETTE.len() - 4)]
        }
    };
    color.to_string()
}

pub(super) fn class_style(class: &str) -> (String, Marker) {
    let index = CLASSES
        .iter()
        .position(|known| *known == class)
        .unwrap_or(0);
    (DASHES[index].to_string(), MARKERS[index])
}

/// "emulated: every I/O ≥ 100 µs" for an emulated run's class.
pub fn emulation_note(device_class: &str, emulated: bool) -> Option<String> {
    if !emulated {
        return None;
    }
    let Ok(class) = device_class.parse::<DeviceClass>() else {
        return Some("emulated".to_string());
    };
    let latency = class.latency();
    let mut note = format!(
        "emulated: every I/O ≥ {}",
        format_duration_us(latency.read.as_secs_f64() * 1e6)
    );
    if let Some(limit) = latency.iops_limit {
        let _ = write!(note, ", ≤ {} IOPS", format_grouped(limit as f64));
    }
    Some(note)
}

fn format_duration_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{} ms", format_decimal(us / 1000.0, 1))
    } else {
        format!("{} µs", format_decimal(us, 1))
    }
}

/// "nand (emulated: every I/O ≥ 100 µs)" or "real device".
pub fn class_label(device_class: &str, emulated: bool) -> String {
    match emulation_note(device_class, emulated) {
        Some(note) => format!("{device_class} ({note})"),
        None if device_class == "real" => "real device".to_string(),
        None => device_class.to_string(),
    }
}

/// The class as a table cell, with an emulation badge.
pub fn class_cell(device_class: &str, emulated: bool) -> String {
    match emulation_note(device_class, emulated) {
        Some(note) => format!(
            "{} <span class=\"badge emulated\">{}</span>",
            escape(device_class),
            escape(&note)
        ),
        None => format!(
            "{} <span class=\"badge real\">measured</span>",
            escape(device_class)
        ),
    }
}

fn buffer_label(percent: f64) -> String {
    format!("{}%", format_decimal(percent, 1))
}

pub(super) fn percent_tick(value: f64) -> String {
    format!("{}%", format_short(value))
}

pub(super) fn relative_tick(value: f64) -> String {
    format!("{}%", format_short(value * 100.0))
}

/// Whether any engine in these sweeps ran with more than one write policy (then labels say it).
fn policies_matter<'a>(keys: impl Iterator<Item = &'a SweepKey>) -> bool {
    let mut seen: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for key in keys {
        let pair = (key.engine.as_str(), key.mode.as_str());
        if let Some(policy) = seen.insert(pair, key.write_policy.as_str()) {
            if policy != key.write_policy {
                return true;
            }
        }
    }
    false
}

fn engine_label(key: &SweepKey, with_policy: bool) -> String {
    if with_policy && !key.write_policy.is_empty() {
        format!("{} ({})", key.engine, key.write_policy)
    } else {
        key.engine.clone()
    }
}

fn is_emulated(sweep: &Sweep<'_>) -> bool {
    sweep.values().any(|reference| reference.run.emulated)
}

pub fn section(collection: &Collection) -> String {
    let sweeps = sweeps(collection);
    let mut out = String::from(
        "<h2 id=\"primitive\">Primitive workload</h2><p>N tables of 4 KiB rows; <em>select</em> \
         reads one row by a random key and commits, <em>update</em> sets one column of one row \
         by a random key and commits durably. The buffer holds a percentage of the table data \
         with index pages kept resident.</p>",
    );
    out.push_str("<h3>Throughput by buffer size</h3><div class=\"charts\">");
    for mode in modes(collection) {
        out.push_str(&throughput_chart(collection, &sweeps, &mode));
    }
    out.push_str("</div>");
    out.push_str(&side_by_side(&sweeps));
    out.push_str(&model_charts(&sweeps));
    out.push_str(&alpha_and_split(collection));
    out.push_str(&run_tables(collection));
    out.push_str(&settings_table(collection));
    out
}

fn throughput_chart(
    collection: &Collection,
    sweeps: &BTreeMap<SweepKey, Sweep<'_>>,
    mode: &str,
) -> String {
    let of_mode: Vec<(&SweepKey, &Sweep<'_>)> =
        sweeps.iter().filter(|(key, _)| key.mode == mode).collect();
    let with_policy = policies_matter(of_mode.iter().map(|(key, _)| *key));
    let mut series = Vec::new();
    // One run per device class, in legend order, for the read limits.
    let mut limits: Vec<RunRef<'_>> = Vec::new();
    for (key, sweep) in &of_mode {
        let (dash, marker) = class_style(&key.device_class);
        series.push(Series {
            label: format!(
                "{}, {}",
                engine_label(key, with_policy),
                class_label(&key.device_class, is_emulated(sweep))
            ),
            color: engine_color(&key.engine),
            dash,
            marker,
            points: (sweep.values())
                .map(|r| (r.run.buffer_percent, r.run.transactions_per_second))
                .collect(),
        });
        let class_seen = (limits.iter()).any(|seen| seen.run.device_class == key.device_class);
        if let (false, Some(first)) = (class_seen, sweep.values().next()) {
            limits.push(*first);
        }
    }
    let rules = merge_rules(
        (limits.iter())
            .filter_map(|reference| read_limit(collection, *reference))
            .collect(),
    );
    let chart = LineChart {
        title: format!("{mode}: throughput by buffer size"),
        x_axis: Axis::new("buffer (% of table data, log scale)", ScaleKind::Log10)
            .with_domain(1.0, 100.0)
            .with_format(percent_tick),
        y_axis: Axis::new("transactions per second (log scale)", ScaleKind::Log10),
        series,
        rules,
    };
    figure(
        &chart.render(),
        "One line per engine and device class. Gray lines: the device's random-read limit \
         (reads/s, from hayate-lab device) at the run's concurrency; at small buffers a select \
         needs about one read, so throughput cannot pass it.",
    )
}

/// The device's random reads per second at a run's concurrency, for its device class:
/// (device class, queue depth, reads per second).
fn read_limit(collection: &Collection, reference: RunRef<'_>) -> Option<(String, u32, f64)> {
    let run = reference.run;
    let queue_depth = run.concurrency.max(1);
    let measured = (collection.device_for(reference.source))
        .and_then(|device| device.random_reads_at(queue_depth));
    let emulated = run
        .emulated
        .then(|| run.device_class.parse::<DeviceClass>().ok())
        .flatten()
        .map(|class| class.latency());
    let limit = match emulated {
        // Every I/O takes at least the class's latency: queue depth / latency at most.
        Some(latency) => {
            let read_us = latency.read.as_secs_f64() * 1e6;
            let mut limit = if read_us > 0.0 {
                f64::from(queue_depth) * 1e6 / read_us
            } else {
                f64::INFINITY
            };
            if let Some(iops) = latency.iops_limit {
                limit = limit.min(iops as f64);
            }
            if let Some(measured) = measured {
                limit = limit.min(measured);
            }
            limit.is_finite().then_some(limit)
        }
        None => measured,
    }?;
    Some((run.device_class.clone(), queue_depth, limit))
}

/// One reference line per distinct limit (classes with the same limit share a line).
fn merge_rules(limits: Vec<(String, u32, f64)>) -> Vec<Rule> {
    let mut merged: Vec<(Vec<String>, u32, f64)> = Vec::new();
    for (class, queue_depth, limit) in limits {
        let same = merged.iter_mut().find(|(_, depth, value)| {
            *depth == queue_depth && (value - limit).abs() <= 0.005 * value.abs()
        });
        match same {
            Some((classes, _, _)) => classes.push(class),
            None => merged.push((vec![class], queue_depth, limit)),
        }
    }
    (merged.into_iter())
        .map(|(classes, queue_depth, limit)| {
            let (dash, _) = class_style(&classes[0]);
            Rule {
                label: format!("read limit, {} at QD {queue_depth}", classes.join(" and ")),
                value: limit,
                color: REFERENCE_GRAY.to_string(),
                dash: if dash.is_empty() || classes.len() > 1 {
                    "5 3".to_string()
                } else {
                    dash
                },
            }
        })
        .collect()
}

/// Grouped bars per buffer size, one bar per engine, for each mode and device class with
/// more than one engine.
fn side_by_side(sweeps: &BTreeMap<SweepKey, Sweep<'_>>) -> String {
    let mut groups: BTreeMap<_, Vec<(&SweepKey, &Sweep<'_>)>> = BTreeMap::new();
    for (key, sweep) in sweeps {
        groups.entry(key.chart()).or_default().push((key, sweep));
    }
    let mut charts = String::new();
    for ((_, mode, _, class), members) in &groups {
        let distinct_engines = {
            let mut names: Vec<&str> = members.iter().map(|(key, _)| key.engine.as_str()).collect();
            names.dedup();
            names.len()
        };
        if distinct_engines < 2 {
            continue;
        }
        let mut buffers: Vec<u64> = members
            .iter()
            .flat_map(|(_, sweep)| sweep.keys())
            .copied()
            .collect();
        buffers.sort_unstable();
        buffers.dedup();
        let with_policy = policies_matter(members.iter().map(|(key, _)| *key));
        let series = (members.iter())
            .map(|(key, sweep)| BarSeries {
                label: engine_label(key, with_policy),
                color: engine_color(&key.engine),
                values: (buffers.iter())
                    .map(|buffer| sweep.get(buffer).map(|r| r.run.transactions_per_second))
                    .collect(),
            })
            .collect();
        let emulated = members.iter().any(|(_, sweep)| is_emulated(sweep));
        let chart = BarChart {
            title: format!(
                "{mode}, {}: engines side by side",
                class_label(class, emulated)
            ),
            x_label: "buffer (% of table data)".to_string(),
            groups: buffers
                .iter()
                .map(|b| buffer_label(*b as f64 / 1000.0))
                .collect(),
            y_axis: Axis::new("transactions per second (log scale)", ScaleKind::Log10),
            series,
        };
        charts.push_str(&figure(
            &chart.render(),
            "Same machine, same concurrency, same transactions; bars are labeled with their \
             transactions per second.",
        ));
    }
    if charts.is_empty() {
        return String::new();
    }
    format!("<h3>Engines side by side</h3><div class=\"charts\">{charts}</div>")
}

/// Predicted against measured relative throughput, one chart per mode and device class.
fn model_charts(sweeps: &BTreeMap<SweepKey, Sweep<'_>>) -> String {
    let mut groups: BTreeMap<_, Vec<(&SweepKey, &Sweep<'_>)>> = BTreeMap::new();
    for (key, sweep) in sweeps {
        if sweep.values().any(|r| r.run.model.is_some()) {
            groups.entry(key.chart()).or_default().push((key, sweep));
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h3>Latency model against measurement</h3><p>Predicted throughput relative to the \
         100% buffer run: (t<sub>cpu</sub> + t<sub>mem</sub>) / (t<sub>cpu</sub> + \
         t<sub>io</sub>), with t<sub>cpu</sub> the CPU time per transaction in memory and \
         t<sub>io</sub> adding the run's reads per transaction times the device's read \
         latency (queue depth 1). The model waits for every read in turn; a measured line \
         above the prediction shows I/O the engine overlapped with other work.</p>\
         <div class=\"charts\">",
    );
    for ((_, mode, _, class), members) in &groups {
        let with_policy = policies_matter(members.iter().map(|(key, _)| *key));
        let mut series = Vec::new();
        for (key, sweep) in members {
            let color = engine_color(&key.engine);
            let label = engine_label(key, with_policy);
            let models = sweep
                .values()
                .filter_map(|r| r.run.model.map(|model| (r.run.buffer_percent, model)));
            let measured: Vec<(f64, f64)> = (models.clone())
                .filter_map(|(buffer, model)| model.measured_relative.map(|m| (buffer, m)))
                .collect();
            let predicted = models.map(|(buffer, model)| (buffer, model.predicted_relative));
            series.push(Series {
                label: format!("{label}, measured"),
                color: color.clone(),
                dash: String::new(),
                marker: Marker::Circle,
                points: measured,
            });
            series.push(Series {
                label: format!("{label}, predicted"),
                color,
                dash: "6 4".to_string(),
                marker: Marker::Triangle,
                points: predicted.collect(),
            });
        }
        let emulated = members.iter().any(|(_, sweep)| is_emulated(sweep));
        let chart = LineChart {
            title: format!(
                "{mode}, {}: model vs measured",
                class_label(class, emulated)
            ),
            x_axis: Axis::new("buffer (% of table data, log scale)", ScaleKind::Log10)
                .with_domain(1.0, 100.0)
                .with_format(percent_tick),
            y_axis: Axis::new("throughput relative to 100% buffer", ScaleKind::Linear)
                .with_domain(0.0, 1.0)
                .with_format(relative_tick),
            series,
            rules: Vec::new(),
        };
        out.push_str(&figure(
            &chart.render(),
            "Solid: measured (transactions/s ÷ transactions/s at 100%). Dashed: the model's \
             prediction from the same run's reads per transaction.",
        ));
    }
    out.push_str("</div>");
    out
}

/// "hayate select 1% nand*" for bar rows (the asterisk marks emulation).
fn run_label(run: &PrimitiveRun) -> String {
    format!(
        "{} {} {} {}{}",
        run.engine,
        run.mode,
        buffer_label(run.buffer_percent),
        run.device_class,
        if run.emulated { " (emulated)" } else { "" }
    )
}

fn alpha_and_split(collection: &Collection) -> String {
    let mut charts = String::new();
    for mode in modes(collection) {
        let runs: Vec<&PrimitiveRun> = (collection.runs())
            .map(|reference| reference.run)
            .filter(|run| run.mode == mode)
            .collect();
        if runs.iter().any(|run| run.alpha.is_some()) {
            charts.push_str(&figure(
                &alpha_chart(&mode, &runs),
                "alpha = device IOPS during the run ÷ IOPS when its I/O trace is replayed alone \
                 at the same concurrency: the share of the device the engine used.",
            ));
        }
        if runs.iter().any(|run| run.time_split.is_some()) {
            charts.push_str(&figure(
                &split_chart(&mode, &runs),
                "Shares of the workers' wall time (Hayate only: peers cannot be instrumented).",
            ));
        }
    }
    if charts.is_empty() {
        return String::new();
    }
    format!("<h3>Storage utilization and time split</h3><div class=\"charts\">{charts}</div>")
}

fn alpha_chart(mode: &str, runs: &[&PrimitiveRun]) -> String {
    let rows = (runs.iter())
        .filter_map(|run| run.alpha.map(|alpha| (run, alpha)))
        .map(|(run, alpha)| BarRow {
            label: run_label(run),
            segments: vec![Segment {
                value: alpha.alpha,
                color: engine_color(&run.engine),
                tip: format!(
                    "alpha {}: run {} IOPS, replay {} IOPS",
                    format_decimal(alpha.alpha, 3),
                    format_grouped(alpha.run_iops),
                    format_grouped(alpha.replay_iops)
                ),
            }],
            annotation: format_decimal(alpha.alpha, 2),
        })
        .collect();
    HorizontalBars {
        title: format!("{mode}: storage utilization (alpha)"),
        x_axis: Axis::new("alpha (run IOPS ÷ replay IOPS)", ScaleKind::Linear)
            .with_domain(0.0, 1.0),
        rows,
        legend: Vec::new(),
        markings: vec![Marking {
            label: "target 0.9".to_string(),
            value: 0.9,
        }],
    }
    .render()
}

fn split_chart(mode: &str, runs: &[&PrimitiveRun]) -> String {
    let parts = [
        ("CPU", CPU_COLOR),
        ("read I/O", READ_COLOR),
        ("write I/O", WRITE_COLOR),
        ("log wait", LOG_COLOR),
        ("lock wait", LOCK_COLOR),
    ];
    let rows = (runs.iter())
        .filter_map(|run| run.time_split.map(|split| (run, split)))
        .map(|(run, split)| {
            let shares = [
                split.cpu,
                split.read_io,
                split.write_io,
                split.log_wait,
                split.lock_wait,
            ];
            let segments = (parts.iter().zip(shares))
                .map(|((name, color), share)| Segment {
                    value: share.max(0.0),
                    color: color.to_string(),
                    tip: format!("{}: {name} {}", run_label(run), format_percent(share)),
                })
                .collect();
            BarRow {
                label: run_label(run),
                segments,
                annotation: String::new(),
            }
        })
        .collect();
    HorizontalBars {
        title: format!("{mode}: where the workers' time went"),
        x_axis: Axis::new("share of worker wall time", ScaleKind::Linear)
            .with_domain(0.0, 1.0)
            .with_format(relative_tick),
        rows,
        legend: (parts.iter())
            .map(|(name, color)| LegendEntry::boxed(name, color))
            .collect(),
        markings: Vec::new(),
    }
    .render()
}

fn run_tables(collection: &Collection) -> String {
    let mut throughput_rows = Vec::new();
    let mut io_rows = Vec::new();
    for reference in collection.runs() {
        let run = reference.run;
        let identity = vec![
            escape(&run.engine),
            class_cell(&run.device_class, run.emulated),
            escape(&run.mode),
            buffer_label(run.buffer_percent),
        ];
        let mut row = identity.clone();
        row.extend([
            escape(&run.write_policy),
            format!("{} / {}", run.concurrency, run.worker_threads),
            format!(
                "{} × {}",
                run.tables,
                format_grouped(run.rows_per_table as f64)
            ),
            format_bytes(run.data_bytes),
            format_bytes(run.buffer_bytes),
            format_grouped(run.page_size as f64),
            format_decimal(run.seconds, 1),
            format_grouped(run.transactions as f64),
            format!(
                "<strong>{}</strong>",
                format_grouped(run.transactions_per_second)
            ),
            format_grouped(run.retries as f64),
            format_number(run.latency.mean_us),
            format_number(run.latency.p50_us),
            format_number(run.latency.p99_us),
            format_number(run.latency.p999_us),
            format!("<code>{}</code>", escape(&reference.source.file_name)),
        ]);
        throughput_rows.push(row);

        let mut row = identity;
        let split = run.time_split.map(|split| {
            [
                split.cpu,
                split.read_io,
                split.write_io,
                split.log_wait,
                split.lock_wait,
            ]
            .map(format_percent)
            .join(" / ")
        });
        let model = run.model.map(|model| {
            format!(
                "{} / {} (t<sub>cpu</sub> {}, t<sub>mem</sub> {}, t<sub>io</sub> {} µs; {} \
                 reads/tx)",
                format_percent(model.predicted_relative),
                or_dash(model.measured_relative.map(format_percent)),
                format_number(model.t_cpu_us),
                format_number(model.t_mem_us),
                format_number(model.t_io_us),
                format_decimal(model.reads_per_transaction, 2)
            )
        });
        let alpha = run.alpha.map(|alpha| {
            format!(
                "{} ({} / {} IOPS, replay at {} in flight)",
                format_decimal(alpha.alpha, 3),
                format_grouped(alpha.run_iops),
                format_grouped(alpha.replay_iops),
                alpha.replay_concurrency
            )
        });
        row.extend([
            format_grouped(run.io.reads_per_second),
            format_grouped(run.io.writes_per_second),
            format_decimal(run.io.read_mib_per_second, 1),
            format_decimal(run.io.write_mib_per_second, 1),
            escape(&run.io.source),
            or_dash(
                run.buffer_hit_ratio
                    .map(|ratio| format_decimal(ratio * 100.0, 2) + "%"),
            ),
            or_dash(
                run.log_flushes
                    .map(|flushes| format_grouped(flushes as f64)),
            ),
            or_dash(run.commits_per_flush.map(format_number)),
            or_dash(
                run.space_amplification
                    .map(|amplification| format_decimal(amplification, 2)),
            ),
            format_number(run.cpu_us_per_transaction),
            or_dash(split),
            or_dash(alpha),
            or_dash(model),
        ]);
        io_rows.push(row);
    }
    let mut out = String::from("<h3>Every run: throughput and latency (µs)</h3>");
    out.push_str(&html::table(
        &[
            "engine",
            "device",
            "mode",
            "buffer",
            "write policy",
            "in flight / threads",
            "tables × rows",
            "data",
            "buffer size",
            "page bytes",
            "seconds",
            "transactions",
            "tx/s",
            "retries",
            "mean",
            "p50",
            "p99",
            "p99.9",
            "file",
        ],
        &throughput_rows,
        "runs",
    ));
    out.push_str("<h3>Every run: I/O, CPU, time split, alpha and model</h3>");
    out.push_str(&html::table(
        &[
            "engine",
            "device",
            "mode",
            "buffer",
            "reads/s",
            "writes/s",
            "read MiB/s",
            "write MiB/s",
            "I/O counted by",
            "hit ratio",
            "log flushes",
            "commits/flush",
            "space amplification",
            "CPU µs/tx",
            "CPU / read / write / log",
            "alpha (run / replay IOPS)",
            "model: predicted / measured",
        ],
        &io_rows,
        "runs",
    ));
    out
}

/// Every engine's durability and caching settings, once per distinct configuration.
fn settings_table(collection: &Collection) -> String {
    let mut seen: Vec<(&str, &str, &BTreeMap<String, String>)> = Vec::new();
    for reference in collection.runs() {
        let run = reference.run;
        let entry = (
            run.engine.as_str(),
            run.engine_version.as_str(),
            &run.engine_settings,
        );
        if !seen.contains(&entry) {
            seen.push(entry);
        }
    }
    let rows: Vec<Vec<String>> = (seen.iter())
        .map(|(engine, version, settings)| {
            let lines: Vec<String> = (settings.iter())
                .map(|(key, value)| format!("<code>{} = {}</code>", escape(key), escape(value)))
                .collect();
            vec![
                escape(engine),
                escape(version),
                if lines.is_empty() {
                    "-".to_string()
                } else {
                    lines.join("<br>")
                },
            ]
        })
        .collect();
    let mut out = String::from(
        "<h3>Engine settings</h3><p>Every setting that matters for durability and caching, as \
         each engine ran.</p>",
    );
    out.push_str(&html::table(
        &["engine", "version", "settings"],
        &rows,
        "text",
    ));
    out
}

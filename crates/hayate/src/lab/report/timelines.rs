//! The timelines section: what every worker did over a short window of a run, like the trace
//! charts of the HA paper.

use std::fmt::Write;

use super::device::figure;
use super::html::{format_decimal, format_grouped, format_percent};
use super::primitive::{emulation_note, CPU_COLOR, LOG_COLOR, READ_COLOR, WRITE_COLOR};
use super::svg::{TimelineChart, TimelineRow};
use super::Collection;
use crate::lab::results::{SpanKind, Timeline};

/// Rows drawn at most; more workers are left out (the caption says how many).
const WORKERS_SHOWN_MAX: usize = 48;

const KINDS: [(SpanKind, &str, &str); 4] = [
    (SpanKind::Cpu, "CPU", CPU_COLOR),
    (SpanKind::ReadIo, "read I/O", READ_COLOR),
    (SpanKind::WriteIo, "write I/O", WRITE_COLOR),
    (SpanKind::LogWait, "log wait", LOG_COLOR),
];

fn kind_index(kind: SpanKind) -> usize {
    KINDS
        .iter()
        .position(|(known, _, _)| *known == kind)
        .unwrap_or(0)
}

pub fn section(collection: &Collection) -> String {
    let mut out = String::from(
        "<h2 id=\"timelines\">Transaction timelines</h2><p>One row per worker over a short \
         window of a run: what the worker was doing at each moment. Below each chart: the share \
         of span time of each kind and the transactions a worker had in flight on average.\
         </p><div class=\"charts\">",
    );
    for (file_name, timeline) in &collection.timelines {
        let emulated = collection.runs().any(|reference| {
            reference.run.timeline_file.as_deref() == Some(file_name.as_str())
                && reference.run.emulated
        });
        out.push_str(&one_timeline(file_name, timeline, emulated));
    }
    out.push_str("</div>");
    out
}

fn one_timeline(file_name: &str, timeline: &Timeline, emulated: bool) -> String {
    let mut workers: Vec<_> = timeline.workers.iter().collect();
    workers.sort_by_key(|worker| worker.worker);
    let shown = workers.len().min(WORKERS_SHOWN_MAX);
    let rows = (workers.iter().take(shown))
        .map(|worker| TimelineRow {
            label: format!("w{}", worker.worker),
            spans: (worker.spans.iter())
                .map(|span| (span.start_us, span.end_us, kind_index(span.kind)))
                .collect(),
        })
        .collect();
    let device = match emulation_note(&timeline.device_class, emulated) {
        Some(note) => format!("{} ({note})", timeline.device_class),
        None => timeline.device_class.clone(),
    };
    let chart = TimelineChart {
        title: format!(
            "{} {}, {}% buffer, {}",
            timeline.engine,
            timeline.mode,
            format_decimal(timeline.buffer_percent, 1),
            device
        ),
        window_us: timeline.window_us as f64,
        rows,
        kinds: (KINDS.iter())
            .map(|(_, name, color)| (name.to_string(), color.to_string()))
            .collect(),
    };
    let (svg, drawn_until_us) = chart.render();
    figure(&svg, &caption(file_name, timeline, shown, drawn_until_us))
}

/// Window, workers shown, and the share of span time of each kind.
fn caption(file_name: &str, timeline: &Timeline, shown: usize, drawn_until_us: f64) -> String {
    let mut totals = [0.0f64; 4];
    let mut spans = 0usize;
    let mut in_flight_us = 0.0;
    for worker in &timeline.workers {
        for span in &worker.spans {
            let length = (span.end_us - span.start_us).max(0.0);
            totals[kind_index(span.kind)] += length;
            in_flight_us += length * f64::from(span.in_flight);
            spans += 1;
        }
    }
    let sum: f64 = totals.iter().sum();
    let mut text = format!(
        "{file_name}: {} µs window, {} of {} workers, {} spans.",
        format_grouped(timeline.window_us as f64),
        shown,
        timeline.workers.len(),
        format_grouped(spans as f64)
    );
    if sum > 0.0 {
        let shares: Vec<String> = (KINDS.iter().zip(totals))
            .map(|((_, name, _), total)| format!("{name} {}", format_percent(total / sum)))
            .collect();
        let _ = write!(
            text,
            " Span time: {}. In flight per worker: {} on average.",
            shares.join(", "),
            format_decimal(in_flight_us / sum, 1)
        );
    }
    if drawn_until_us < timeline.window_us as f64 {
        let _ = write!(
            text,
            " Too many spans to draw: later rows stop at {} µs.",
            format_grouped(drawn_until_us)
        );
    }
    text
}

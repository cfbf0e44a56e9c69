//! The timelines section: what every worker did over a short window of a run, like the trace
//! charts of the HA paper.

use std::fmt::Write;

use super::device::figure;
use super::html::{format_decimal, format_grouped, format_percent};
use super::primitive::{emulation_note, CPU_COLOR, LOCK_COLOR, LOG_COLOR, READ_COLOR, WRITE_COLOR};
use super::svg::{TimelineChart, TimelineRow, PLOT_WIDTH};
use super::Collection;
use crate::results::{SpanKind, Timeline};

/// Rows drawn at most; more workers are left out (the caption says how many).
const WORKERS_SHOWN_MAX: usize = 48;

const KINDS: [(SpanKind, &str, &str); 5] = [
    (SpanKind::Cpu, "CPU", CPU_COLOR),
    (SpanKind::ReadIo, "read I/O", READ_COLOR),
    (SpanKind::WriteIo, "write I/O", WRITE_COLOR),
    (SpanKind::LogWait, "log wait", LOG_COLOR),
    (SpanKind::LockWait, "lock wait", LOCK_COLOR),
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

/// The whole window, and when its spans are too thin to see, a zoom on its beginning.
fn one_timeline(file_name: &str, timeline: &Timeline, emulated: bool) -> String {
    let mut workers: Vec<_> = timeline.workers.iter().collect();
    workers.sort_by_key(|worker| worker.worker);
    let shown = workers.len().min(WORKERS_SHOWN_MAX);
    let spans = || workers.iter().flat_map(|worker| worker.spans.iter());
    let window_us = timeline.window_us as f64;
    // Span times are relative to the window; if a recorder wrote absolute times, shift them.
    let earliest = spans()
        .map(|span| span.start_us)
        .fold(f64::INFINITY, f64::min);
    let outside = spans().any(|span| span.end_us > window_us * 1.01 || span.start_us < 0.0);
    let origin_us = if outside && earliest.is_finite() {
        earliest
    } else {
        0.0
    };
    let rows: Vec<TimelineRow> = (workers.iter().take(shown))
        .map(|worker| TimelineRow {
            label: format!("w{}", worker.worker),
            spans: (worker.spans.iter())
                .map(|span| {
                    let (start, end) = (span.start_us - origin_us, span.end_us - origin_us);
                    (start, end, kind_index(span.kind))
                })
                .collect(),
        })
        .collect();
    let device = match emulation_note(&timeline.device_class, emulated) {
        Some(note) => format!("{} ({note})", timeline.device_class),
        None => timeline.device_class.clone(),
    };
    let title = format!(
        "{} {}, {}% buffer, {}: worker timeline",
        timeline.engine,
        timeline.mode,
        format_decimal(timeline.buffer_percent, 1),
        device
    );
    let kinds: Vec<(String, String)> = (KINDS.iter())
        .map(|(_, name, color)| (name.to_string(), color.to_string()))
        .collect();
    let chart = TimelineChart {
        title: title.clone(),
        window_us,
        rows: rows.clone(),
        kinds: kinds.clone(),
    };
    let (svg, drawn_until_us) = chart.render();
    let mut out = figure(&svg, &caption(file_name, timeline, shown, drawn_until_us));
    if let Some(zoom_us) =
        zoom_window_us(spans().map(|span| span.end_us - span.start_us), window_us)
    {
        let clipped = (rows.into_iter())
            .map(|row| TimelineRow {
                label: row.label,
                spans: (row.spans.into_iter())
                    .filter(|(start, _, _)| *start < zoom_us)
                    .map(|(start, end, kind)| (start, end.min(zoom_us), kind))
                    .collect(),
            })
            .collect();
        let zoomed = TimelineChart {
            title: format!("{title} (first {} µs)", format_grouped(zoom_us)),
            window_us: zoom_us,
            rows: clipped,
            kinds,
        };
        let caption = format!(
            "The first {} µs of the window above, where single spans can be told apart.",
            format_grouped(zoom_us)
        );
        out.push_str(&figure(&zoomed.render().0, &caption));
    }
    out
}

/// A shorter window in which the median span is about 12 pixels wide, rounded to 1, 2 or 5
/// x 10^k microseconds; None when the spans are already wide enough (3 pixels or more).
fn zoom_window_us(lengths: impl Iterator<Item = f64>, window_us: f64) -> Option<f64> {
    let mut lengths: Vec<f64> = lengths.filter(|length| *length > 0.0).collect();
    if lengths.is_empty() || window_us <= 0.0 {
        return None;
    }
    lengths.sort_by(f64::total_cmp);
    let median_us = lengths[lengths.len() / 2];
    if median_us * PLOT_WIDTH / window_us >= 3.0 {
        return None;
    }
    let wanted_us = median_us * PLOT_WIDTH / 12.0;
    let power = 10f64.powf(wanted_us.log10().floor());
    let rounded = [1.0, 2.0, 5.0, 10.0]
        .map(|mantissa| mantissa * power)
        .into_iter()
        .rfind(|candidate| *candidate <= wanted_us)
        .unwrap_or(power);
    (rounded < window_us).then_some(rounded)
}

/// Window, workers shown, and the share of span time of each kind.
fn caption(file_name: &str, timeline: &Timeline, shown: usize, drawn_until_us: f64) -> String {
    let mut totals = [0.0f64; KINDS.len()];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thin_spans_get_a_zoomed_window() {
        // 10 us spans over 100 ms: 0.06 pixels each; zoom so they are about 12 pixels.
        let zoom = zoom_window_us([10.0, 10.0, 12.0].into_iter(), 100_000.0);
        assert_eq!(zoom, Some(200.0));
        assert_eq!(
            zoom_window_us([10.0].into_iter(), 1_000.0),
            None,
            "wide enough"
        );
        assert_eq!(zoom_window_us(std::iter::empty(), 1_000.0), None);
    }
}

//! Worker timelines: one row per worker, one rectangle per span.

use std::fmt::Write;

use super::{
    draw_frame, draw_x_axis, svg_open, Axis, Legend, LegendEntry, Scale, AXIS_BELOW, AXIS_INK, INK,
    MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, PLOT_HEIGHT, WIDTH,
};
use super::{format_short, ScaleKind, REFERENCE_GRAY};
use crate::report::html::escape;

// Worker timelines

#[derive(Debug, Clone)]
pub struct TimelineRow {
    pub label: String,
    /// (start_us, end_us, index into `TimelineChart::kinds`).
    pub spans: Vec<(f64, f64, usize)>,
}

#[derive(Debug, Clone)]
pub struct TimelineChart {
    pub title: String,
    pub window_us: f64,
    pub rows: Vec<TimelineRow>,
    /// (label, color) of each span kind.
    pub kinds: Vec<(String, String)>,
}

/// At most this many rectangles are drawn per timeline; beyond it the rest of the window is
/// cut off (the caption says so).
pub const TIMELINE_RECTANGLES_MAX: usize = 40_000;

impl TimelineChart {
    /// The chart and the time up to which spans were drawn (less than the window when the
    /// rectangle limit was reached).
    pub fn render(&self) -> (String, f64) {
        let (left, right) = (MARGIN_LEFT, WIDTH - MARGIN_RIGHT);
        let top = MARGIN_TOP;
        let row_height = (PLOT_HEIGHT / self.rows.len().max(1) as f64).clamp(5.0, 20.0);
        let bottom = top + row_height * self.rows.len().max(1) as f64;
        let entries: Vec<LegendEntry> = (self.kinds.iter())
            .map(|(label, color)| LegendEntry::boxed(label, color))
            .collect();
        let legend = Legend::layout(&entries, right - left);
        let height = bottom + AXIS_BELOW + legend.height + 8.0;
        let in_milliseconds = self.window_us >= 5_000.0;
        let x_axis = if in_milliseconds {
            Axis::new("time in the window (ms)", ScaleKind::Linear)
                .with_format(|us| format_short(us / 1000.0))
        } else {
            Axis::new("time in the window (µs)", ScaleKind::Linear)
        }
        .with_domain(0.0, self.window_us.max(1.0));
        let x_scale = Scale {
            kind: ScaleKind::Linear,
            low: 0.0,
            high: self.window_us.max(1.0),
            pixel_low: left,
            pixel_high: right,
        };

        let mut out = String::new();
        svg_open(&mut out, WIDTH, height, &self.title);
        draw_x_axis(&mut out, &x_axis, &x_scale, top, bottom);
        let one_pixel_us = self.window_us.max(1.0) / (right - left);
        let label_every = (12.0 / row_height).ceil().max(1.0) as usize;
        let mut drawn = 0;
        let mut drawn_until = self.window_us;
        for (index, row) in self.rows.iter().enumerate() {
            let y = top + index as f64 * row_height;
            if index % label_every == 0 {
                let _ = write!(
                    out,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"12\" \
                     fill=\"{AXIS_INK}\">{}</text>",
                    left - 7.0,
                    y + row_height / 2.0 + 4.0,
                    escape(&row.label)
                );
            }
            for (start, end, kind) in merge_spans(&row.spans, one_pixel_us / 2.0) {
                if drawn >= TIMELINE_RECTANGLES_MAX {
                    drawn_until = drawn_until.min(start);
                    break;
                }
                let color = self
                    .kinds
                    .get(kind)
                    .map_or(REFERENCE_GRAY, |kind| kind.1.as_str());
                let x = x_scale.map(start);
                let _ = write!(
                    out,
                    "<rect x=\"{x:.2}\" y=\"{:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"{}\"/>",
                    y + 1.0,
                    (x_scale.map(end) - x).max(0.6),
                    (row_height - 2.0).max(1.0),
                    escape(color)
                );
                drawn += 1;
            }
        }
        draw_frame(&mut out, left, top, right, bottom);
        let _ = write!(
            out,
            "<text transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\" \
             fill=\"{INK}\">worker</text>",
            (top + bottom) / 2.0
        );
        legend.draw(&mut out, left, bottom + AXIS_BELOW);
        out.push_str("</svg>");
        (out, drawn_until)
    }
}

/// Sorts spans by start and joins neighbours of the same kind separated by less than `gap_us`
/// (they would be drawn as one anyway).
fn merge_spans(spans: &[(f64, f64, usize)], gap_us: f64) -> Vec<(f64, f64, usize)> {
    let mut sorted: Vec<(f64, f64, usize)> = spans
        .iter()
        .copied()
        .filter(|(start, end, _)| start.is_finite() && end.is_finite() && end >= start)
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64, usize)> = Vec::with_capacity(sorted.len());
    for span in sorted {
        match merged.last_mut() {
            Some(last) if last.2 == span.2 && span.0 - last.1 < gap_us => {
                last.1 = last.1.max(span.1)
            }
            _ => merged.push(span),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_closer_than_a_pixel_merge() {
        let spans = [
            (10.0, 20.0, 0),
            (0.0, 9.9, 0),
            (20.05, 30.0, 1),
            (30.01, 40.0, 1),
        ];
        assert_eq!(
            merge_spans(&spans, 0.2),
            vec![(0.0, 20.0, 0), (20.05, 40.0, 1)]
        );
    }
}

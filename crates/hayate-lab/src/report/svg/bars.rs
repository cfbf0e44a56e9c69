//! Bar charts: grouped vertical bars, and horizontal bars that may stack.

use std::fmt::Write;

use super::REFERENCE_GRAY;
use super::{
    draw_frame, draw_x_axis, draw_y_axis, svg_open, Axis, Legend, LegendEntry, Scale, AXIS_BELOW,
    AXIS_INK, CHARACTER_WIDTH, INK, MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, PLOT_HEIGHT, WIDTH,
};
use crate::report::html::escape;

// Grouped vertical bars

#[derive(Debug, Clone)]
pub struct BarSeries {
    pub label: String,
    pub color: String,
    /// One value per group; None leaves a gap.
    pub values: Vec<Option<f64>>,
}

#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub groups: Vec<String>,
    pub y_axis: Axis,
    pub series: Vec<BarSeries>,
}

impl BarChart {
    pub fn render(&self) -> String {
        let entries: Vec<LegendEntry> = self
            .series
            .iter()
            .map(|series| LegendEntry::boxed(&series.label, &series.color))
            .collect();
        let (left, right) = (MARGIN_LEFT, WIDTH - MARGIN_RIGHT);
        let (top, bottom) = (MARGIN_TOP, MARGIN_TOP + PLOT_HEIGHT);
        let legend = Legend::layout(&entries, right - left);
        let height = bottom + AXIS_BELOW + legend.height + 8.0;
        let values = self
            .series
            .iter()
            .flat_map(|series| series.values.iter().flatten());
        // Room above the tallest bar for its label.
        let (y_low, y_high) = self
            .y_axis
            .domain_for(values.copied().map(|value| value * 1.12));
        let y_scale = Scale {
            kind: self.y_axis.kind,
            low: y_low,
            high: y_high,
            pixel_low: bottom,
            pixel_high: top,
        };

        let mut out = String::new();
        svg_open(&mut out, WIDTH, height, &self.title);
        draw_y_axis(&mut out, &self.y_axis, &y_scale, left, right);
        draw_frame(&mut out, left, top, right, bottom);
        let group_width = (right - left) / self.groups.len().max(1) as f64;
        let bar_width = group_width * 0.8 / self.series.len().max(1) as f64;
        for (group_index, group) in self.groups.iter().enumerate() {
            let group_left = left + group_index as f64 * group_width + group_width * 0.1;
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
                 fill=\"{AXIS_INK}\">{}</text>",
                group_left + group_width * 0.4,
                bottom + 17.0,
                escape(group)
            );
            for (series_index, series) in self.series.iter().enumerate() {
                let Some(value) = series.values.get(group_index).copied().flatten() else {
                    continue;
                };
                if !self.y_axis.accepts(value) {
                    continue;
                }
                let x = group_left + series_index as f64 * bar_width;
                let y = y_scale.map(value);
                self.draw_bar(&mut out, series, group, value, (x, y, bar_width, bottom));
            }
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{INK}\">{}</text>",
            (left + right) / 2.0,
            bottom + 38.0,
            escape(&self.x_label)
        );
        legend.draw(&mut out, left, bottom + AXIS_BELOW);
        out.push_str("</svg>");
        out
    }

    fn draw_bar(
        &self,
        out: &mut String,
        series: &BarSeries,
        group: &str,
        value: f64,
        (x, y, width, bottom): (f64, f64, f64, f64),
    ) {
        let label = (self.y_axis.format)(value);
        let tip = format!("{} at {group}: {label}", series.label);
        let _ = write!(
            out,
            "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\">\
             <title>{}</title></rect>",
            x + 1.0,
            (width - 2.0).max(1.0),
            (bottom - y).max(0.5),
            escape(&series.color),
            escape(&tip)
        );
        let center = x + width / 2.0;
        if width >= 8.0 * label.len() as f64 {
            let _ = write!(
                out,
                "<text x=\"{center:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\" \
                 fill=\"{INK}\">{}</text>",
                y - 4.0,
                escape(&label)
            );
        } else {
            let _ = write!(
                out,
                "<text transform=\"translate({:.1} {:.1}) rotate(-90)\" font-size=\"11.5\" \
                 fill=\"{INK}\">{}</text>",
                center + 3.5,
                y - 4.0,
                escape(&label)
            );
        }
    }
}

// Horizontal bars, optionally stacked

#[derive(Debug, Clone)]
pub struct Segment {
    pub value: f64,
    pub color: String,
    pub tip: String,
}

#[derive(Debug, Clone)]
pub struct BarRow {
    pub label: String,
    pub segments: Vec<Segment>,
    /// Text right of the bar (the figure).
    pub annotation: String,
}

/// A vertical reference line at an x value.
#[derive(Debug, Clone)]
pub struct Marking {
    pub label: String,
    pub value: f64,
}

#[derive(Debug, Clone)]
pub struct HorizontalBars {
    pub title: String,
    pub x_axis: Axis,
    pub rows: Vec<BarRow>,
    pub legend: Vec<LegendEntry>,
    pub markings: Vec<Marking>,
}

const BAR_ROW: f64 = 22.0;

impl HorizontalBars {
    pub fn render(&self) -> String {
        let longest = self.rows.iter().map(|row| row.label.chars().count()).max();
        let label_width = (longest.unwrap_or(4) as f64 * CHARACTER_WIDTH + 16.0).clamp(60.0, 330.0);
        let (left, right) = (label_width, WIDTH - 64.0);
        let top = MARGIN_TOP;
        let bottom = top + self.rows.len().max(1) as f64 * BAR_ROW + 4.0;
        let legend = Legend::layout(&self.legend, right - left);
        let height = bottom + AXIS_BELOW + legend.height + 8.0;
        let totals = self.rows.iter().map(|row| {
            row.segments
                .iter()
                .map(|segment| segment.value)
                .sum::<f64>()
        });
        let (x_low, x_high) =
            (self.x_axis).domain_for(totals.chain(self.markings.iter().map(|m| m.value)));
        let x_scale = Scale {
            kind: self.x_axis.kind,
            low: x_low,
            high: x_high,
            pixel_low: left,
            pixel_high: right,
        };

        let mut out = String::new();
        svg_open(&mut out, WIDTH, height, &self.title);
        draw_x_axis(&mut out, &self.x_axis, &x_scale, top, bottom);
        draw_frame(&mut out, left, top, right, bottom);
        for (index, row) in self.rows.iter().enumerate() {
            let y = top + 4.0 + index as f64 * BAR_ROW;
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{INK}\">{}</text>",
                left - 8.0,
                y + BAR_ROW / 2.0 + 2.0,
                escape(&row.label)
            );
            let mut start = 0.0;
            for segment in &row.segments {
                let x = x_scale.map(start);
                let end = x_scale.map(start + segment.value);
                let _ = write!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
                     fill=\"{}\"><title>{}</title></rect>",
                    y + 3.0,
                    (end - x).max(0.0),
                    BAR_ROW - 8.0,
                    escape(&segment.color),
                    escape(&segment.tip)
                );
                start += segment.value;
            }
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" fill=\"{INK}\">{}</text>",
                x_scale.map(start) + 5.0,
                y + BAR_ROW / 2.0 + 2.0,
                escape(&row.annotation)
            );
        }
        for marking in &self.markings {
            let x = x_scale.map(marking.value);
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" \
                 stroke=\"{REFERENCE_GRAY}\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\" \
                 fill=\"{REFERENCE_GRAY}\">{}</text>",
                top - 4.0,
                top - 8.0,
                escape(&marking.label)
            );
        }
        legend.draw(&mut out, left, bottom + AXIS_BELOW);
        out.push_str("</svg>");
        out
    }
}

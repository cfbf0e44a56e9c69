//! The report's charts, written as SVG by hand: line charts, grouped bars, horizontal (stacked)
//! bars and worker timelines.
//!
//! Why by hand rather than `plotters`: the report needs four simple chart shapes, static text
//! that can be searched and copied, native hover titles on points, and nothing but strings out;
//! a few hundred lines here cost no dependency, no font loading and no build time, and keep
//! every piece of text under our own escaping.
//!
//! Drawing one chart:
//! 1. the data decides each axis's domain (`Axis::domain_for`), rounded to readable ticks;
//! 2. the legend is laid out first, since its rows decide the chart's height;
//! 3. grid, ticks and axis titles are drawn, then the data, then the legend.
//!
//! Colors come from the Okabe-Ito palette, which stays distinct under the common forms of
//! color blindness; lines are also told apart by dash pattern and marker shape.

use std::fmt::Write;

use super::html::{escape, format_short};

/// The Okabe-Ito palette without yellow (too light on white), in order of use.
pub const PALETTE: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];

/// Reference lines and other secondary marks.
pub const REFERENCE_GRAY: &str = "#6e7781";

const FONT: &str = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, \
                    sans-serif";
const WIDTH: f64 = 680.0;
const PLOT_HEIGHT: f64 = 300.0;
const MARGIN_LEFT: f64 = 72.0;
const MARGIN_RIGHT: f64 = 24.0;
/// Width of the plot area of line charts and timelines, pixels.
pub const PLOT_WIDTH: f64 = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
const MARGIN_TOP: f64 = 44.0;
/// Below the plot: tick labels and the x axis title.
const AXIS_BELOW: f64 = 50.0;
/// Approximate width of one character of 13 px text, for layout.
const CHARACTER_WIDTH: f64 = 7.1;
const GRID: &str = "#e6e9ed";
const AXIS_INK: &str = "#57606a";
const INK: &str = "#1f2328";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleKind {
    Linear,
    /// Logarithmic, ticks at 1, 2, 5 x 10^k (or decades only over a wide range).
    Log10,
    /// Logarithmic, ticks at powers of two (queue depths).
    Log2,
}

/// One axis: its title, scale, optional fixed domain and tick format.
#[derive(Debug, Clone)]
pub struct Axis {
    pub label: String,
    pub kind: ScaleKind,
    pub domain: Option<(f64, f64)>,
    /// Linear axes only: start at zero even when the data does not.
    pub from_zero: bool,
    pub format: fn(f64) -> String,
}

impl Axis {
    pub fn new(label: &str, kind: ScaleKind) -> Axis {
        Axis {
            label: label.to_string(),
            kind,
            domain: None,
            from_zero: kind == ScaleKind::Linear,
            format: format_short,
        }
    }

    pub fn with_domain(mut self, low: f64, high: f64) -> Axis {
        self.domain = Some((low, high));
        self
    }

    pub fn with_format(mut self, format: fn(f64) -> String) -> Axis {
        self.format = format;
        self
    }

    /// Whether a value can be placed on this axis (log axes need positive values).
    fn accepts(&self, value: f64) -> bool {
        value.is_finite() && (self.kind == ScaleKind::Linear || value > 0.0)
    }

    /// The domain covering `values` (and the fixed domain, if any), rounded outward to ticks.
    fn domain_for(&self, values: impl Iterator<Item = f64>) -> (f64, f64) {
        let (mut low, mut high) = self.domain.unwrap_or((f64::INFINITY, f64::NEG_INFINITY));
        for value in values.filter(|value| self.accepts(*value)) {
            low = low.min(value);
            high = high.max(value);
        }
        if !low.is_finite() || !high.is_finite() {
            return if self.kind == ScaleKind::Linear {
                (0.0, 1.0)
            } else {
                (1.0, 10.0)
            };
        }
        match self.kind {
            ScaleKind::Linear => {
                if self.from_zero {
                    low = low.min(0.0);
                    high = high.max(0.0);
                }
                if high - low <= f64::EPSILON * high.abs().max(1.0) {
                    high = low + low.abs().max(1.0);
                }
                if self.domain.is_some() {
                    return (low, high);
                }
                let step = nice_step((high - low) / 5.0);
                ((low / step).floor() * step, (high / step).ceil() * step)
            }
            ScaleKind::Log10 => {
                if self.domain.is_some() {
                    return (low, high.max(low * 2.0));
                }
                let low = round_125(low, false);
                let high = round_125(high, true);
                (
                    low,
                    if high > low {
                        high
                    } else {
                        round_125(low * 1.01, true)
                    },
                )
            }
            ScaleKind::Log2 => {
                let low = low.log2().floor().exp2();
                let high = high.log2().ceil().exp2();
                (low, if high > low { high } else { low * 2.0 })
            }
        }
    }
}

/// The step among 1, 2, 2.5, 5 x 10^k nearest above `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 2.5 {
        2.5
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// The nearest 1, 2, 5 x 10^k below (or above, with `up`) a positive value.
fn round_125(value: f64, up: bool) -> f64 {
    let power = 10f64.powf(value.log10().floor());
    let candidates = [1.0, 2.0, 5.0, 10.0].map(|mantissa| mantissa * power);
    let tolerance = value * 1e-9;
    if up {
        candidates
            .into_iter()
            .find(|candidate| *candidate >= value - tolerance)
            .unwrap_or(10.0 * power)
    } else {
        candidates
            .into_iter()
            .rev()
            .find(|candidate| *candidate <= value + tolerance)
            .unwrap_or(power)
    }
}

/// An axis's domain mapped onto a pixel range.
#[derive(Debug, Clone, Copy)]
struct Scale {
    kind: ScaleKind,
    low: f64,
    high: f64,
    pixel_low: f64,
    pixel_high: f64,
}

impl Scale {
    fn transform(&self, value: f64) -> f64 {
        match self.kind {
            ScaleKind::Linear => value,
            ScaleKind::Log10 => value.max(f64::MIN_POSITIVE).log10(),
            ScaleKind::Log2 => value.max(f64::MIN_POSITIVE).log2(),
        }
    }

    fn map(&self, value: f64) -> f64 {
        let (low, high) = (self.transform(self.low), self.transform(self.high));
        let share = (self.transform(value) - low) / (high - low);
        self.pixel_low + share.clamp(-0.02, 1.02) * (self.pixel_high - self.pixel_low)
    }

    fn ticks(&self) -> Vec<f64> {
        let tolerance = (self.high - self.low).abs() * 1e-9;
        let inside =
            |value: &f64| *value >= self.low - tolerance && *value <= self.high + tolerance;
        match self.kind {
            ScaleKind::Linear => {
                let step = nice_step((self.high - self.low) / 5.0);
                let first = (self.low / step).ceil() as i64;
                let last = (self.high / step).floor() as i64;
                (first..=last).map(|index| index as f64 * step).collect()
            }
            ScaleKind::Log10 => {
                let decades = (self.high / self.low).log10();
                let mantissas: &[f64] = if decades > 3.5 {
                    &[1.0]
                } else {
                    &[1.0, 2.0, 5.0]
                };
                let first = self.low.log10().floor() as i32;
                let last = self.high.log10().ceil() as i32;
                (first..=last)
                    .flat_map(|power| mantissas.iter().map(move |m| m * 10f64.powi(power)))
                    .filter(inside)
                    .collect()
            }
            ScaleKind::Log2 => {
                let first = self.low.log2().round() as i32;
                let last = self.high.log2().round() as i32;
                let stride = if last - first > 12 { 2 } else { 1 };
                (first..=last)
                    .step_by(stride)
                    .map(|power| 2f64.powi(power))
                    .collect()
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    None,
}

/// The marker shapes in order of use, matching `DASHES`.
pub const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
];

/// Dash patterns in order of use ("" is solid).
pub const DASHES: [&str; 4] = ["", "7 4", "2 3", "9 3 2 3"];

/// How a legend entry shows its series.
#[derive(Debug, Clone)]
pub enum Swatch {
    Line { dash: String, marker: Marker },
    Box,
}

#[derive(Debug, Clone)]
pub struct LegendEntry {
    pub label: String,
    pub color: String,
    pub swatch: Swatch,
}

impl LegendEntry {
    pub fn boxed(label: &str, color: &str) -> LegendEntry {
        LegendEntry {
            label: label.to_string(),
            color: color.to_string(),
            swatch: Swatch::Box,
        }
    }
}

/// Legend entries placed in rows below the plot.
struct Legend {
    /// (x, y, entry) of each entry, relative to the legend's top left corner.
    placed: Vec<(f64, f64, LegendEntry)>,
    height: f64,
}

const LEGEND_ROW: f64 = 20.0;

impl Legend {
    fn layout(entries: &[LegendEntry], width: f64) -> Legend {
        let mut placed = Vec::new();
        let (mut x, mut y) = (0.0, 0.0);
        for entry in entries {
            let entry_width = 34.0 + entry.label.chars().count() as f64 * CHARACTER_WIDTH + 14.0;
            if x > 0.0 && x + entry_width > width {
                x = 0.0;
                y += LEGEND_ROW;
            }
            placed.push((x, y, entry.clone()));
            x += entry_width;
        }
        let height = if entries.is_empty() {
            0.0
        } else {
            y + LEGEND_ROW + 6.0
        };
        Legend { placed, height }
    }

    fn draw(&self, out: &mut String, left: f64, top: f64) {
        for (x, y, entry) in &self.placed {
            let (x, y) = (left + x, top + y + LEGEND_ROW / 2.0);
            let color = escape(&entry.color);
            match &entry.swatch {
                Swatch::Line { dash, marker } => {
                    let _ = write!(
                        out,
                        "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" \
                         stroke=\"{color}\" stroke-width=\"2.2\"{}/>",
                        x,
                        x + 26.0,
                        dash_attribute(dash)
                    );
                    draw_marker(out, *marker, x + 13.0, y, &color, None);
                }
                Swatch::Box => {
                    let _ = write!(
                        out,
                        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"22\" height=\"11\" rx=\"2\" \
                         fill=\"{color}\"/>",
                        x + 2.0,
                        y - 5.5
                    );
                }
            }
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{INK}\">{}</text>",
                x + 32.0,
                y + 4.0,
                escape(&entry.label)
            );
        }
    }
}

fn dash_attribute(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{}\"", escape(dash))
    }
}

fn draw_marker(out: &mut String, marker: Marker, x: f64, y: f64, color: &str, tip: Option<&str>) {
    let shape = match marker {
        Marker::Circle => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.8\""),
        Marker::Square => format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"7\" height=\"7\"",
            x - 3.5,
            y - 3.5
        ),
        Marker::Triangle => format!(
            "<polygon points=\"{x:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\"",
            y - 4.6,
            x - 4.3,
            y + 3.0,
            x + 4.3,
            y + 3.0
        ),
        Marker::Diamond => format!(
            "<polygon points=\"{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}\"",
            y - 4.8,
            x + 4.8,
            y + 4.8,
            x - 4.8
        ),
        Marker::None => return,
    };
    let close = match marker {
        Marker::Circle => "circle",
        Marker::Square => "rect",
        _ => "polygon",
    };
    match tip {
        Some(tip) => {
            let _ = write!(
                out,
                "{shape} fill=\"{color}\" stroke=\"#fff\" stroke-width=\"1\"><title>{}</title>\
                 </{close}>",
                escape(tip)
            );
        }
        None => {
            let _ = write!(
                out,
                "{shape} fill=\"{color}\" stroke=\"#fff\" stroke-width=\"1\"/>"
            );
        }
    }
}

fn svg_open(out: &mut String, width: f64, height: f64, title: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\" aria-label=\"{title}\" \
         font-family=\"{FONT}\" font-size=\"13\"><title>{title}</title>\
         <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\
         <text x=\"{MARGIN_LEFT}\" y=\"24\" font-size=\"15\" font-weight=\"600\" \
         fill=\"{INK}\">{title}</text>",
        title = escape(title)
    );
}

/// Grid lines, ticks and the title of a vertical (y) axis.
fn draw_y_axis(out: &mut String, axis: &Axis, scale: &Scale, left: f64, right: f64) {
    for tick in scale.ticks() {
        let y = scale.map(tick);
        let _ = write!(
            out,
            "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" \
             stroke=\"{GRID}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" \
             fill=\"{AXIS_INK}\">{}</text>",
            left - 7.0,
            y + 4.0,
            escape(&(axis.format)(tick))
        );
    }
    let middle = (scale.pixel_low + scale.pixel_high) / 2.0;
    let _ = write!(
        out,
        "<text transform=\"translate(16 {middle:.1}) rotate(-90)\" text-anchor=\"middle\" \
         fill=\"{INK}\">{}</text>",
        escape(&axis.label)
    );
}

/// Grid lines, ticks and the title of a horizontal (x) axis.
fn draw_x_axis(out: &mut String, axis: &Axis, scale: &Scale, top: f64, bottom: f64) {
    for tick in scale.ticks() {
        let x = scale.map(tick);
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" \
             stroke=\"{GRID}\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" \
             fill=\"{AXIS_INK}\">{}</text>",
            bottom + 17.0,
            escape(&(axis.format)(tick))
        );
    }
    let middle = (scale.pixel_low + scale.pixel_high) / 2.0;
    let _ = write!(
        out,
        "<text x=\"{middle:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{INK}\">{}</text>",
        bottom + 38.0,
        escape(&axis.label)
    );
}

fn draw_frame(out: &mut String, left: f64, top: f64, right: f64, bottom: f64) {
    let _ = write!(
        out,
        "<path d=\"M{left:.1},{top:.1} V{bottom:.1} H{right:.1}\" fill=\"none\" \
         stroke=\"{AXIS_INK}\"/>"
    );
}

// ---------------------------------------------------------------------------------------------
// Line charts

#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub color: String,
    pub dash: String,
    pub marker: Marker,
    pub points: Vec<(f64, f64)>,
}

/// A horizontal reference line across the plot, labeled at its right end.
#[derive(Debug, Clone)]
pub struct Rule {
    pub label: String,
    pub value: f64,
    pub color: String,
    pub dash: String,
}

#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_axis: Axis,
    pub y_axis: Axis,
    pub series: Vec<Series>,
    pub rules: Vec<Rule>,
}

impl LineChart {
    pub fn render(&self) -> String {
        let entries: Vec<LegendEntry> = self
            .series
            .iter()
            .map(|series| LegendEntry {
                label: series.label.clone(),
                color: series.color.clone(),
                swatch: Swatch::Line {
                    dash: series.dash.clone(),
                    marker: series.marker,
                },
            })
            .chain(self.rules.iter().map(|rule| LegendEntry {
                label: rule.label.clone(),
                color: rule.color.clone(),
                swatch: Swatch::Line {
                    dash: rule.dash.clone(),
                    marker: Marker::None,
                },
            }))
            .collect();
        let (left, right) = (MARGIN_LEFT, WIDTH - MARGIN_RIGHT);
        let (top, bottom) = (MARGIN_TOP, MARGIN_TOP + PLOT_HEIGHT);
        let legend = Legend::layout(&entries, right - left);
        let height = bottom + AXIS_BELOW + legend.height + 8.0;

        let points = || self.series.iter().flat_map(|series| series.points.iter());
        let (x_low, x_high) = self.x_axis.domain_for(points().map(|point| point.0));
        let y_values = points().map(|point| point.1);
        let (y_low, y_high) =
            (self.y_axis).domain_for(y_values.chain(self.rules.iter().map(|rule| rule.value)));
        let x_scale = Scale {
            kind: self.x_axis.kind,
            low: x_low,
            high: x_high,
            pixel_low: left,
            pixel_high: right,
        };
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
        draw_x_axis(&mut out, &self.x_axis, &x_scale, top, bottom);
        draw_frame(&mut out, left, top, right, bottom);
        let mut label_heights: Vec<f64> = Vec::new();
        for rule in &self.rules {
            let y = y_scale.map(rule.value);
            // Above the line, or below it when another rule's label is already there.
            let clash = |height: &f64| (height - (y - 5.0)).abs() < 13.0;
            let label_y = if label_heights.iter().any(clash) {
                y + 14.0
            } else {
                y - 5.0
            };
            label_heights.push(label_y);
            let _ = write!(
                out,
                "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" \
                 stroke=\"{}\" stroke-width=\"1.5\"{}><title>{}</title></line>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"12\" \
                 fill=\"{}\">{}</text>",
                escape(&rule.color),
                dash_attribute(&rule.dash),
                escape(&format!(
                    "{}: {}",
                    rule.label,
                    (self.y_axis.format)(rule.value)
                )),
                right - 4.0,
                label_y,
                escape(&rule.color),
                escape(&format!(
                    "{}: {}",
                    rule.label,
                    (self.y_axis.format)(rule.value)
                ))
            );
        }
        for series in &self.series {
            self.draw_series(&mut out, series, &x_scale, &y_scale);
        }
        legend.draw(&mut out, left, bottom + AXIS_BELOW);
        out.push_str("</svg>");
        out
    }

    fn draw_series(&self, out: &mut String, series: &Series, x_scale: &Scale, y_scale: &Scale) {
        let mut points: Vec<(f64, f64)> = series
            .points
            .iter()
            .copied()
            .filter(|(x, y)| self.x_axis.accepts(*x) && self.y_axis.accepts(*y))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = escape(&series.color);
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", x_scale.map(*x), y_scale.map(*y)))
            .collect();
        if path.len() > 1 {
            let _ = write!(
                out,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2.2\" \
                 stroke-linejoin=\"round\"{}/>",
                path.join(" "),
                dash_attribute(&series.dash)
            );
        }
        for (x, y) in &points {
            let tip = format!(
                "{}: {} = {}, {} = {}",
                series.label,
                self.x_axis.label,
                (self.x_axis.format)(*x),
                self.y_axis.label,
                (self.y_axis.format)(*y)
            );
            let (px, py) = (x_scale.map(*x), y_scale.map(*y));
            draw_marker(out, series.marker, px, py, &color, Some(&tip));
        }
    }
}

// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
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
    fn domains_round_to_readable_ticks() {
        let linear = Axis::new("y", ScaleKind::Linear);
        assert_eq!(linear.domain_for([3.0, 87.0].into_iter()), (0.0, 100.0));
        let log = Axis::new("y", ScaleKind::Log10);
        assert_eq!(
            log.domain_for([30_000.0, 1_200_000.0].into_iter()),
            (20_000.0, 2_000_000.0)
        );
        let log2 = Axis::new("qd", ScaleKind::Log2);
        assert_eq!(log2.domain_for([1.0, 200.0].into_iter()), (1.0, 256.0));
        let buffer = Axis::new("buffer", ScaleKind::Log10).with_domain(1.0, 100.0);
        assert_eq!(buffer.domain_for([2.0, 50.0].into_iter()), (1.0, 100.0));
        assert_eq!(buffer.domain_for([0.5].into_iter()), (0.5, 100.0));
        let scale = Scale {
            kind: ScaleKind::Log10,
            low: 1.0,
            high: 100.0,
            pixel_low: 0.0,
            pixel_high: 200.0,
        };
        assert_eq!(scale.ticks(), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        assert!((scale.map(10.0) - 100.0).abs() < 1e-9);
    }

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

    #[test]
    fn charts_escape_their_text() {
        let chart = LineChart {
            title: "a <b> chart".into(),
            x_axis: Axis::new("x & y", ScaleKind::Linear),
            y_axis: Axis::new("y", ScaleKind::Log10),
            series: vec![Series {
                label: "<script>".into(),
                color: PALETTE[0].into(),
                dash: String::new(),
                marker: Marker::Circle,
                points: vec![(1.0, 10.0), (2.0, 0.0), (3.0, 1000.0)],
            }],
            rules: vec![],
        };
        let svg = chart.render();
        assert!(svg.contains("a &lt;b&gt; chart") && svg.contains("x &amp; y"));
        assert!(svg.contains("&lt;script&gt;") && !svg.contains("<script>"));
        // The zero cannot be drawn on a log axis: two markers, one line.
        assert_eq!(
            svg.matches("<circle").count(),
            2 + 1,
            "two points and the legend's"
        );
    }
}

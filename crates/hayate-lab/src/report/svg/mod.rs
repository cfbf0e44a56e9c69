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
//!
//! This module holds what every chart shares (axes and scales, legends, markers, the frame);
//! `line`, `bars` and `timeline` hold one chart shape each.

use std::fmt::Write;

mod bars;
mod line;
mod timeline;

pub use bars::{BarChart, BarRow, BarSeries, HorizontalBars, Marking, Segment};
pub use line::{LineChart, Rule, Series};
pub use timeline::{TimelineChart, TimelineRow};

use super::html::{escape, format_short};

/// The Okabe-Ito palette without yellow (too light on white), in order of use.
pub const PALETTE: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
];

/// Reference lines and other secondary marks.
pub const REFERENCE_GRAY: &str = "#6e7781";

pub(super) const FONT: &str =
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, \
                    sans-serif";
pub(super) const WIDTH: f64 = 680.0;
pub(super) const PLOT_HEIGHT: f64 = 300.0;
pub(super) const MARGIN_LEFT: f64 = 72.0;
pub(super) const MARGIN_RIGHT: f64 = 24.0;
/// Width of the plot area of line charts and timelines, pixels.
pub const PLOT_WIDTH: f64 = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
pub(super) const MARGIN_TOP: f64 = 44.0;
/// Below the plot: tick labels and the x axis title.
pub(super) const AXIS_BELOW: f64 = 50.0;
/// Approximate width of one character of 13 px text, for layout.
pub(super) const CHARACTER_WIDTH: f64 = 7.1;
pub(super) const GRID: &str = "#e6e9ed";
pub(super) const AXIS_INK: &str = "#57606a";
pub(super) const INK: &str = "#1f2328";

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
    pub(super) fn accepts(&self, value: f64) -> bool {
        value.is_finite() && (self.kind == ScaleKind::Linear || value > 0.0)
    }

    /// The domain covering `values` (and the fixed domain, if any), rounded outward to ticks.
    pub(super) fn domain_for(&self, values: impl Iterator<Item = f64>) -> (f64, f64) {
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
pub(super) struct Scale {
    pub(super) kind: ScaleKind,
    pub(super) low: f64,
    pub(super) high: f64,
    pub(super) pixel_low: f64,
    pub(super) pixel_high: f64,
}

impl Scale {
    fn transform(&self, value: f64) -> f64 {
        match self.kind {
            ScaleKind::Linear => value,
            ScaleKind::Log10 => value.max(f64::MIN_POSITIVE).log10(),
            ScaleKind::Log2 => value.max(f64::MIN_POSITIVE).log2(),
        }
    }

    pub(super) fn map(&self, value: f64) -> f64 {
        let (low, high) = (self.transform(self.low), self.transform(self.high));
        let share = (self.transform(value) - low) / (high - low);
        self.pixel_low + share.clamp(-0.02, 1.02) * (self.pixel_high - self.pixel_low)
    }

    pub(super) fn ticks(&self) -> Vec<f64> {
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
pub(super) struct Legend {
    /// (x, y, entry) of each entry, relative to the legend's top left corner.
    placed: Vec<(f64, f64, LegendEntry)>,
    pub(super) height: f64,
}

pub(super) const LEGEND_ROW: f64 = 20.0;

impl Legend {
    pub(super) fn layout(entries: &[LegendEntry], width: f64) -> Legend {
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

    pub(super) fn draw(&self, out: &mut String, left: f64, top: f64) {
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

pub(super) fn dash_attribute(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{}\"", escape(dash))
    }
}

pub(super) fn draw_marker(
    out: &mut String,
    marker: Marker,
    x: f64,
    y: f64,
    color: &str,
    tip: Option<&str>,
) {
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

pub(super) fn svg_open(out: &mut String, width: f64, height: f64, title: &str) {
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
pub(super) fn draw_y_axis(out: &mut String, axis: &Axis, scale: &Scale, left: f64, right: f64) {
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
pub(super) fn draw_x_axis(out: &mut String, axis: &Axis, scale: &Scale, top: f64, bottom: f64) {
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

pub(super) fn draw_frame(out: &mut String, left: f64, top: f64, right: f64, bottom: f64) {
    let _ = write!(
        out,
        "<path d=\"M{left:.1},{top:.1} V{bottom:.1} H{right:.1}\" fill=\"none\" \
         stroke=\"{AXIS_INK}\"/>"
    );
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
}

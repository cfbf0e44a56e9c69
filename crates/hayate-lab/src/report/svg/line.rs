//! Line charts: series over two axes, with horizontal reference lines.

use std::fmt::Write;

use super::{
    dash_attribute, draw_frame, draw_marker, draw_x_axis, draw_y_axis, svg_open, Axis, Legend,
    LegendEntry, Marker, Scale, Swatch, AXIS_BELOW, MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP,
    PLOT_HEIGHT, WIDTH,
};
use crate::report::html::escape;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::svg::{ScaleKind, PALETTE};

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

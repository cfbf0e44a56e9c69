//! The device section: what `hayate-lab device` measured, one block per results file.

use std::fmt::Write;

use super::html::{self, escape, format_decimal, format_grouped, format_number};
use super::svg::{Axis, LineChart, Marker, ScaleKind, Series, DASHES, PALETTE};
use super::{Collection, Source};
use crate::results::{DevicePoint, DeviceResult};

pub fn section(collection: &Collection) -> String {
    let mut out = String::from(
        "<h2 id=\"device\">Device</h2><p>The raw device under the data directory, measured \
         through the engine's own I/O path. Random reads at the page size are the physical \
         limit the primitive runs are compared to.</p>",
    );
    for source in &collection.devices {
        out.push_str(&one_device(source));
    }
    out
}

fn one_device(source: &Source<DeviceResult>) -> String {
    let device = &source.file.results;
    let info = &source.file.device;
    let mut out = String::new();
    let _ = write!(
        out,
        "<h3>{} ({}) under <code>{}</code></h3><p class=\"muted\">{}: {}, page {} bytes, test \
         file {} MiB, {} s per point. File <code>{}</code>.</p>",
        escape(&info.block_device),
        escape(&info.file_system),
        escape(&info.directory),
        html::format_unix_time(source.file.started_unix),
        escape(&device.backend),
        device.page_size,
        device.file_bytes / (1 << 20),
        format_decimal(device.seconds_per_point, 1),
        escape(&source.file_name)
    );
    out.push_str("<div class=\"charts\">");
    out.push_str(&figure(
        &iops_chart(device),
        "Operations per second by queue depth (I/Os kept in flight). Reads flatten where the \
         device saturates.",
    ));
    out.push_str(&figure(
        &latency_chart(device),
        "Latency of one random read by queue depth: median and 99th percentile.",
    ));
    out.push_str("</div>");
    out.push_str(&points_table(device));
    out
}

pub fn figure(svg: &str, caption: &str) -> String {
    format!(
        "<figure>{svg}<figcaption>{}</figcaption></figure>",
        escape(caption)
    )
}

fn series(label: &str, index: usize, points: Vec<(f64, f64)>) -> Series {
    Series {
        label: label.to_string(),
        color: PALETTE[index % PALETTE.len()].to_string(),
        dash: DASHES[index % DASHES.len()].to_string(),
        marker: [Marker::Circle, Marker::Square, Marker::Triangle][index % 3],
        points,
    }
}

fn by_depth(points: &[DevicePoint], value: fn(&DevicePoint) -> f64) -> Vec<(f64, f64)> {
    (points.iter())
        .map(|point| (f64::from(point.queue_depth), value(point)))
        .collect()
}

fn iops_chart(device: &DeviceResult) -> String {
    let read_label = format!("random read, {} B", device.page_size);
    let write_label = format!("random write, {} B", device.page_size);
    let mut all = vec![series(
        &read_label,
        0,
        by_depth(&device.random_read, |p| p.ops_per_second),
    )];
    if !device.random_write.is_empty() {
        let points = by_depth(&device.random_write, |p| p.ops_per_second);
        all.push(series(&write_label, 1, points));
    }
    LineChart {
        title: "Random I/O by queue depth".to_string(),
        x_axis: Axis::new("queue depth (I/Os in flight, log2 scale)", ScaleKind::Log2),
        y_axis: Axis::new("operations per second", ScaleKind::Linear),
        series: all,
        rules: Vec::new(),
    }
    .render()
}

fn latency_chart(device: &DeviceResult) -> String {
    let reads = &device.random_read;
    LineChart {
        title: "Random read latency by queue depth".to_string(),
        x_axis: Axis::new("queue depth (I/Os in flight, log2 scale)", ScaleKind::Log2),
        y_axis: Axis::new("latency (µs, log scale)", ScaleKind::Log10),
        series: vec![
            series("p50", 0, by_depth(reads, |p| p.latency.p50_us)),
            series("p99", 1, by_depth(reads, |p| p.latency.p99_us)),
        ],
        rules: Vec::new(),
    }
    .render()
}

fn points_table(device: &DeviceResult) -> String {
    let groups = [
        ("random read", &device.random_read),
        ("random write", &device.random_write),
        ("sequential write", &device.sequential_write),
        ("synced write (fdatasync each)", &device.synced_write),
    ];
    let mut rows = Vec::new();
    for (name, points) in groups {
        for point in points.iter() {
            let latency = &point.latency;
            rows.push(vec![
                name.to_string(),
                point.queue_depth.to_string(),
                format_grouped(point.block_bytes as f64),
                format_grouped(point.ops_per_second),
                format_number(point.mib_per_second),
                format_number(latency.mean_us),
                format_number(latency.p50_us),
                format_number(latency.p90_us),
                format_number(latency.p99_us),
                format_number(latency.p999_us),
                format_number(latency.max_us),
                format_grouped(point.operations as f64),
            ]);
        }
    }
    let mut out = String::from("<h3>Every point, with latency percentiles (µs)</h3>");
    out.push_str(&html::table(
        &[
            "test",
            "queue depth",
            "block bytes",
            "ops/s",
            "MiB/s",
            "mean",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "operations",
        ],
        &rows,
        "numbers",
    ));
    if let Some(best) =
        (device.synced_write.iter()).max_by(|a, b| a.ops_per_second.total_cmp(&b.ops_per_second))
    {
        let _ = write!(
            out,
            "<p>Synced writes: up to <strong>{} per second</strong> ({} B each, p99 {} µs): \
             the rate a log without group commit could commit at.</p>",
            format_grouped(best.ops_per_second),
            format_grouped(best.block_bytes as f64),
            format_number(best.latency.p99_us)
        );
    }
    out
}

//! Shared pieces of the printed reports: latency histograms, tables, engine statistics and a
//! description of the machine.

use std::fmt::Write as _;

use hayate_engine::{CheckReport, DatabaseStats, IoKind, StoreStats};

/// Sub-buckets per power of two: values are kept to within 1/32 (about 3%).
const SUB_BUCKET_BITS: u32 = 5;
const SUB_BUCKETS: usize = 1 << SUB_BUCKET_BITS;
/// Enough buckets for any u64.
const BUCKET_COUNT: usize = (64 - SUB_BUCKET_BITS as usize + 1) * SUB_BUCKETS;

/// A log-linear histogram of nanosecond latencies: constant memory however long the run.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.total)
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKET_COUNT],
            total: 0,
        }
    }
}

impl Histogram {
    pub fn record(&mut self, value_ns: u64) {
        self.counts[bucket_of(value_ns)] += 1;
        self.total += 1;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (count, other_count) in self.counts.iter_mut().zip(&other.counts) {
            *count += other_count;
        }
        self.total += other.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// Nearest-rank quantile (`fraction` in 0..=1), as the lowest value of its bucket; 0 when
    /// empty.
    pub fn quantile_ns(&self, fraction: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total as f64 * fraction).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return bucket_low(bucket);
            }
        }
        unreachable!("rank {rank} <= total {}", self.total)
    }
}

fn bucket_of(value: u64) -> usize {
    if value < SUB_BUCKETS as u64 {
        return value as usize;
    }
    let magnitude = 63 - value.leading_zeros(); // >= SUB_BUCKET_BITS
    let shift = magnitude - SUB_BUCKET_BITS;
    let sub_bucket = (value >> shift) as usize - SUB_BUCKETS;
    (shift as usize + 1) * SUB_BUCKETS + sub_bucket
}

fn bucket_low(bucket: usize) -> u64 {
    if bucket < SUB_BUCKETS {
        return bucket as u64;
    }
    let shift = (bucket / SUB_BUCKETS - 1) as u32;
    ((SUB_BUCKETS + bucket % SUB_BUCKETS) as u64) << shift
}

/// Formats nanoseconds as microseconds with a useful precision.
pub fn format_us(value_ns: u64) -> String {
    let us = value_ns as f64 / 1000.0;
    if us < 10.0 {
        format!("{us:.1} us")
    } else {
        format!("{us:.0} us")
    }
}

/// Formats a rate with thousands separators.
pub fn format_rate(per_second: f64) -> String {
    format_count(per_second.round() as u64)
}

pub fn format_count(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

pub fn format_bytes(bytes: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / MIB / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}

/// A plain text table: a header row and left-aligned first column, right-aligned numbers.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|cell| cell.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|cell| cell.to_string()).collect();
    write_row(&mut out, &widths, &header);
    let rule: Vec<String> = widths.iter().map(|width| "-".repeat(*width)).collect();
    write_row(&mut out, &widths, &rule);
    for row in rows {
        write_row(&mut out, &widths, row);
    }
    out
}

fn write_row(out: &mut String, widths: &[usize], row: &[String]) {
    out.push_str("  ");
    for (index, (width, cell)) in widths.iter().zip(row).enumerate() {
        if index == 0 {
            let _ = write!(out, "{cell:<width$}");
        } else {
            let _ = write!(out, "  {cell:>width$}");
        }
    }
    out.push('\n');
}

/// Engine counters as aligned `name: value` lines.
pub fn format_stats(stats: &DatabaseStats) -> String {
    let buffer = &stats.buffer;
    let store = &stats.store;
    let wal = &stats.wal;
    let txn = &stats.txn;
    let lines = [
        (
            "buffer pool",
            format!(
                "{} frames, hit ratio {:.2}% ({} hits, {} misses), {} dirty, {} pages written \
                 ({} by evictions, {} in background)",
                format_count(buffer.frame_count),
                buffer.hit_ratio() * 100.0,
                format_count(buffer.hits),
                format_count(buffer.misses),
                format_count(buffer.dirty_frames),
                format_count(buffer.pages_written),
                format_count(buffer.eviction_writes),
                format_count(buffer.background_writes),
            ),
        ),
        (
            "log",
            format!(
                "{} commits in {} flushes ({:.1} commits per flush), {} written",
                format_count(wal.commits),
                format_count(wal.flushes),
                wal.commits_per_flush,
                format_bytes(wal.bytes_written),
            ),
        ),
        (
            "page store",
            format!(
                "{} pages read, {} written (+{} by cleaner/journal), write amplification {:.2}",
                format_count(store.pages_read),
                format_count(store.pages_written),
                format_count(store.pages_written_extra),
                store.write_amplification,
            ),
        ),
        (
            "space",
            if store.total_segments == 0 {
                // The in-place store has no segments and no cleaner.
                format!(
                    "{} file, {} live pages ({}), space amplification {}",
                    format_bytes(store.file_size_bytes),
                    format_count(store.live_pages),
                    format_bytes(store.live_bytes),
                    space_amplification(store),
                )
            } else {
                format!(
                    "{} file, {} live pages ({}), space amplification {}, {} of {} \
                     segments free, {} cleaner passes ({} segments cleaned)",
                    format_bytes(store.file_size_bytes),
                    format_count(store.live_pages),
                    format_bytes(store.live_bytes),
                    space_amplification(store),
                    format_count(store.free_segments),
                    format_count(store.total_segments),
                    format_count(store.cleaner_passes),
                    format_count(store.segments_cleaned),
                )
            },
        ),
        (
            "transactions",
            format!(
                "{} commits, {} aborts, {} serialization failures, {} checkpoints",
                format_count(txn.commits),
                format_count(txn.aborts),
                format_count(txn.serialization_failures),
                format_count(txn.checkpoints),
            ),
        ),
        (
            "undo / locks",
            format!(
                "{} undo entries ({}), {} purged; {} lock waits, {} deadlocks, {} timeouts",
                format_count(txn.undo_entries),
                format_bytes(txn.undo_bytes),
                format_count(txn.undo_purged),
                format_count(txn.locks.waits),
                format_count(txn.locks.deadlocks),
                format_count(txn.locks.timeouts),
            ),
        ),
    ];
    let mut out = String::new();
    for (name, value) in lines {
        let _ = writeln!(out, "  {name:<13} {value}");
    }
    out
}

/// File bytes per live page byte, or a dash while no page has reached the file yet.
fn space_amplification(store: &StoreStats) -> String {
    if store.file_size_bytes == 0 {
        "- (no page written yet)".into()
    } else {
        format!("{:.2}", store.space_amplification())
    }
}

/// The consistency check report: one line per tree and a total.
pub fn format_check(check: &CheckReport) -> String {
    let rows: Vec<Vec<String>> = check
        .trees
        .iter()
        .map(|(name, tree)| {
            vec![
                name.clone(),
                tree.depth.to_string(),
                format_count(tree.inner_pages),
                format_count(tree.leaf_pages),
                format_count(tree.overflow_pages),
                format_count(tree.entries),
                format!("{:.0}%", tree.leaf_fill() * 100.0),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "tree",
            "depth",
            "inner pages",
            "leaf pages",
            "overflow",
            "entries",
            "leaf fill",
        ],
        &rows,
    );
    let _ = writeln!(
        out,
        "check: ok ({} trees, {} rows, {} pages reachable = {} allocated)",
        check.trees.len(),
        format_count(check.rows),
        format_count(check.pages_in_trees),
        format_count(check.pages_allocated),
    );
    out
}

/// How the engine's I/O backend is named in reports.
pub fn io_backend_name(kind: IoKind) -> &'static str {
    match kind {
        IoKind::Uring => "io_uring (O_DIRECT where the file system allows it)",
        IoKind::Sync => "pread/pwrite + fdatasync",
        IoKind::Simulated => "simulated disk",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_precision() {
        let mut histogram = Histogram::default();
        for value in 1..=100_000u64 {
            histogram.record(value * 10);
        }
        for (fraction, exact) in [(0.5, 500_000.0), (0.99, 990_000.0), (1.0, 1_000_000.0)] {
            let found = histogram.quantile_ns(fraction) as f64;
            assert!(
                found <= exact && found >= exact * (1.0 - 1.0 / 32.0),
                "{fraction}"
            );
        }
        assert_eq!(histogram.quantile_ns(0.0), 10);
        assert_eq!(Histogram::default().quantile_ns(0.5), 0);
    }

    #[test]
    fn buckets_are_monotonic() {
        let mut last = 0;
        for value in (0..1_000_000u64).step_by(7).chain([u64::MAX]) {
            let bucket = bucket_of(value);
            assert!(bucket >= last && bucket < BUCKET_COUNT);
            assert!(bucket_low(bucket) <= value);
            last = bucket;
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_count(1_234_567), "1,234,567");
        assert_eq!(format_count(12), "12");
    }
}

//! ANALYZE: reads a table and derives its statistics (`statistics`), by hand or by the
//! automatic analysis.
//!
//! 1. ANALYZE (or `Catalog::autoanalyze`) reads the whole table from one snapshot, keeps a
//!    uniform sample of at most `SAMPLE_ROWS` rows (reservoir sampling of their encoded
//!    bytes; only the sample is decoded) and counts the rows.
//! 2. Per column it derives, as PostgreSQL's `compute_scalar_stats` does: the fraction of
//!    NULLs, the number of distinct values (exact when the sample is the table, else the
//!    Haas-Stokes estimator over the sample's values seen once), up to `COMMON_VALUES` most
//!    common values with their frequencies, and up to `HISTOGRAM_BOUNDS` bounds of
//!    equal-count buckets over the other values.
//! 3. The result is written in its own transaction under the DDL mutex, published to the
//!    table's `Statistics`, and the catalog version moves so prepared statements are
//!    planned again. The server's background worker asks for tables due every
//!    `AUTOANALYZE_NAPTIME`.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;
use std::time::Duration;

use hayate_engine::TreeId;
use rand::Rng;

use super::statistics::{statistics_key, statistics_tree, ColumnStatistics, TableStatistics};
use super::table::Table;
use super::Catalog;
use crate::encoding::row;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::{datetime, DataType, Value};

/// Rows sampled per table (PostgreSQL: 300 x default_statistics_target 100).
pub const SAMPLE_ROWS: usize = 30_000;
/// Most common values kept per column (PostgreSQL's default_statistics_target).
const COMMON_VALUES: usize = 100;
/// Histogram bounds kept per column.
const HISTOGRAM_BOUNDS: usize = 101;
/// Values wider than this (bytes of text) are counted but never kept as common values or
/// bounds (PostgreSQL's WIDTH_THRESHOLD): the statistics row stays small.
const WIDTH_THRESHOLD: usize = 1024;
/// The sample's bytes past which it is thinned to three quarters of its rows (wide rows:
/// the sample stays a uniform one, of fewer rows).
const SAMPLE_BYTES: usize = 128 << 20;
/// How often the server's worker looks for tables due for analysis.
pub const AUTOANALYZE_NAPTIME: Duration = Duration::from_secs(10);

/// Types whose values get common values and a histogram (the others only the NULL fraction
/// and distinct count): those a key orders.
fn ordered(data_type: DataType) -> bool {
    !(data_type.is_array()
        || matches!(
            data_type,
            DataType::Json | DataType::Jsonb | DataType::Enum(_) | DataType::Bytea
        ))
}

/// What an analysis asks every 4,096 rows: true to stop (the server is stopping).
pub type Stopped<'a> = &'a dyn Fn() -> bool;

/// Reads `table` from one snapshot and derives its statistics.
fn collect(
    db: &hayate_engine::Database,
    table: &Table,
    stopped: Stopped,
) -> SqlResult<TableStatistics> {
    let txn = db.begin_read_only();
    let mut sample: Vec<Vec<u8>> = Vec::new();
    let mut capacity = SAMPLE_ROWS;
    let mut bytes = 0usize;
    let mut rows: u64 = 0;
    let mut rng = rand::thread_rng();
    for entry in txn.scan(table.tree, Bound::Unbounded, Bound::Unbounded)? {
        let (_, value) = entry?;
        rows += 1;
        if rows.is_multiple_of(4096) && stopped() {
            return Err(SqlError::new(sqlstate::QUERY_CANCELED, "analysis stopped"));
        }
        let length = value.len();
        if sample.len() < capacity {
            sample.push(value);
        } else {
            let slot = rng.gen_range(0..rows) as usize;
            if slot >= capacity {
                continue;
            }
            bytes -= sample[slot].len();
            sample[slot] = value;
        }
        bytes += length;
        if bytes > SAMPLE_BYTES && sample.len() > 100 {
            // A uniform sample's random subset is a uniform sample.
            capacity = sample.len() * 3 / 4;
            while sample.len() > capacity {
                let drop = rng.gen_range(0..sample.len());
                bytes -= sample.swap_remove(drop).len();
            }
        }
    }
    txn.abort();
    let types: Vec<DataType> = table.def.columns.iter().map(|c| c.data_type).collect();
    let decoded = (sample.iter())
        .map(|bytes| row::decode(bytes, &types, &table.def.name))
        .collect::<SqlResult<Vec<Vec<Value>>>>()?;
    let columns = (0..types.len())
        .map(|column| {
            let values = decoded.iter().map(|row| row[column].clone()).collect();
            Some(column_statistics(values, types[column], rows as f64))
        })
        .collect();
    Ok(TableStatistics {
        rows: rows as f64,
        columns,
        last_manual: 0,
        last_automatic: 0,
    })
}

/// A column's statistics from its sampled `values` of a table of `total` rows.
fn column_statistics(mut values: Vec<Value>, data_type: DataType, total: f64) -> ColumnStatistics {
    let sampled = values.len() as f64;
    values.retain(|value| !value.is_null());
    let null_fraction = if sampled > 0.0 {
        1.0 - values.len() as f64 / sampled
    } else {
        0.0
    };
    let width = |value: &Value| match value {
        Value::Text(text) => text.len(),
        Value::Bytes(bytes) => bytes.len(),
        _ => data_type.size().max(1) as usize,
    };
    let average_width = match values.is_empty() {
        true => 0.0,
        false => values.iter().map(width).sum::<usize>() as f64 / values.len() as f64,
    };
    values.sort_by(|a, b| a.sort_order(b));
    // Runs of equal values: (first index, count).
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for (position, value) in values.iter().enumerate() {
        match groups.last_mut() {
            Some((first, count)) if values[*first].sort_order(value) == Ordering::Equal => {
                *count += 1
            }
            _ => groups.push((position, 1)),
        }
    }
    let n = values.len() as f64;
    let d = groups.len() as f64;
    let once = groups.iter().filter(|(_, count)| *count == 1).count() as f64;
    let non_null_total = total * (1.0 - null_fraction);
    let distinct = if sampled >= total || n == 0.0 {
        d
    } else if once >= d {
        // Every sampled value once: as many distinct values as rows (a key).
        non_null_total
    } else {
        // Haas and Stokes' Duj1 (PostgreSQL's choice): n*d / (n - f1 + f1*n/N).
        let estimate = n * d / (n - once + once * n / non_null_total.max(n));
        estimate.clamp(d, non_null_total.max(d))
    };
    if !ordered(data_type) || n == 0.0 {
        return ColumnStatistics {
            data_type,
            null_fraction,
            average_width,
            distinct,
            common: Vec::new(),
            histogram: Vec::new(),
        };
    }
    // Common values: all of them when the sample holds every distinct value and they fit,
    // else those clearly above the average count (PostgreSQL's 1.25 times).
    let mut by_count = groups.clone();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let complete = groups.len() <= COMMON_VALUES && (sampled >= total || once == 0.0);
    let average = n / d;
    let narrow = |(first, _): &(usize, usize)| width(&values[*first]) <= WIDTH_THRESHOLD;
    let common_groups: Vec<(usize, usize)> = (by_count.into_iter())
        .filter(narrow)
        .filter(|(_, count)| complete || (*count > 1 && *count as f64 > 1.25 * average))
        .take(COMMON_VALUES)
        .collect();
    let common = (common_groups.iter())
        .map(|(first, count)| (values[*first].clone(), *count as f64 / sampled))
        .collect();
    // The histogram over the rest.
    let rest: Vec<&Value> = (groups.iter())
        .filter(|group| narrow(group) && !common_groups.contains(group))
        .flat_map(|(first, count)| values[*first..*first + *count].iter())
        .collect();
    let histogram = match rest.len() {
        0 | 1 => Vec::new(),
        length => {
            let bounds = HISTOGRAM_BOUNDS.min(length);
            // Equal-count buckets; a bound repeats where a value fills more than one.
            (0..bounds)
                .map(|i| rest[i * (length - 1) / (bounds - 1)].clone())
                .collect()
        }
    };
    ColumnStatistics {
        data_type,
        null_fraction,
        average_width,
        distinct,
        common,
        histogram,
    }
}

impl Catalog {
    /// ANALYZE of the table `name` (42P01 if there is none; 25006 on a standby): reads it,
    /// keeps and publishes what it learned. `automatic`: the background worker's.
    pub fn analyze(&self, name: &str) -> SqlResult<()> {
        self.analyze_table(name, false, &|| false)
    }

    /// An analysis of the table `name`: by hand, it waits for one running; automatic, it
    /// leaves the table to the one running.
    fn analyze_table(&self, name: &str, automatic: bool, stopped: Stopped) -> SqlResult<()> {
        if self.is_standby() {
            return Err(SqlError::new(
                sqlstate::READ_ONLY_SQL_TRANSACTION,
                "cannot execute ANALYZE during recovery",
            ));
        }
        let table = self.table(name)?;
        let slot = table.statistics.clone();
        let _running = match automatic {
            true => match slot.analyzing.try_lock() {
                Some(guard) => guard,
                None => return Ok(()),
            },
            false => hayate_engine::fiber::lock(&slot.analyzing),
        };
        self.analyze_rows(&table, automatic, stopped)
    }

    fn analyze_rows(&self, table: &Table, automatic: bool, stopped: Stopped) -> SqlResult<()> {
        let counted = table.statistics.modified();
        let mut statistics = collect(&self.db, table, stopped)?;
        let previous = table.statistics.get();
        let now = datetime::now_micros();
        statistics.last_manual = previous.as_ref().map_or(0, |p| p.last_manual);
        statistics.last_automatic = previous.as_ref().map_or(0, |p| p.last_automatic);
        match automatic {
            true => statistics.last_automatic = now,
            false => statistics.last_manual = now,
        }
        {
            let _ddl = hayate_engine::fiber::lock(&self.ddl);
            let mut txn = self.db.begin();
            // Statistics of engine trees that are gone (dropped, truncated, rebuilt) go; a
            // tree an open block's DDL replaced is still there, and so are its statistics
            // should the block roll back.
            let live: Vec<TreeId> = self.db.tables().iter().map(|tree| tree.id).collect();
            let mut stale = Vec::new();
            for entry in txn.scan(self.tree, Bound::Included(b"\0"), Bound::Excluded(b"\x01"))? {
                let (key, _) = entry?;
                if statistics_tree(&key).is_some_and(|tree| !live.contains(&tree)) {
                    stale.push(key);
                }
            }
            for key in stale {
                txn.delete(self.tree, &key)?;
            }
            if live.contains(&table.tree) {
                txn.put(
                    self.tree,
                    &statistics_key(table.tree),
                    &statistics.encode()?,
                )?;
            }
            txn.commit()?;
        }
        table.statistics.set(Some(Arc::new(statistics)));
        // Writes that came during the read count toward the next analysis.
        let _ = (table.statistics.modified).fetch_update(
            AtomicOrdering::Relaxed,
            AtomicOrdering::Relaxed,
            |modified| Some(modified.saturating_sub(counted)),
        );
        match automatic {
            true => &table.statistics.autoanalyze_count,
            false => &table.statistics.analyze_count,
        }
        .fetch_add(1, AtomicOrdering::Relaxed);
        self.bump_version();
        Ok(())
    }

    /// ANALYZE of every table of the database.
    pub fn analyze_all(&self) -> SqlResult<()> {
        for name in self.table_names() {
            match self.analyze(&name) {
                Err(error) if error.code == sqlstate::UNDEFINED_TABLE => {} // dropped since
                other => other?,
            }
        }
        Ok(())
    }

    /// Analyzes each table more than 50 + 10% of whose rows changed since its last
    /// analysis, until `stopped`; the names of those analyzed. Nothing on a standby.
    pub fn autoanalyze(&self, stopped: Stopped) -> Vec<String> {
        if self.is_standby() {
            return Vec::new();
        }
        let due: Vec<String> = (self.state.read().tables.values())
            .filter(|table| table.statistics.due())
            .map(|table| table.def.name.clone())
            .collect();
        let mut analyzed = Vec::new();
        for name in due {
            if stopped() {
                break;
            }
            match self.analyze_table(&name, true, stopped) {
                Ok(()) => analyzed.push(name),
                Err(error) => {
                    // Not tried again every round: only once as many rows changed again.
                    log::warn!("automatic analysis of table \"{name}\" failed: {error}");
                    if let Ok(table) = self.table(&name) {
                        table.statistics.modified.store(0, AtomicOrdering::Relaxed);
                    }
                }
            }
        }
        analyzed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::statistics::UNKNOWN_BOUND;

    fn ints(values: impl IntoIterator<Item = i64>) -> Vec<Value> {
        values.into_iter().map(Value::Int).collect()
    }

    #[test]
    fn a_whole_table_sample_counts_exactly() {
        // 1,000 rows: value 0 in half of them, 1..=500 once each, 10 NULLs in place of some.
        let mut values = ints(std::iter::repeat_n(0, 490));
        values.extend(ints(1..=500));
        values.extend(std::iter::repeat_n(Value::Null, 10));
        let stats = column_statistics(values, DataType::Int8, 1000.0);
        assert!((stats.null_fraction - 0.01).abs() < 1e-9);
        assert_eq!(stats.distinct, 501.0);
        assert_eq!(stats.common.len(), 1);
        assert!(matches!(stats.common[0], (Value::Int(0), f) if (f - 0.49).abs() < 1e-9));
        assert!((stats.equal(Some(&Value::Int(0))) - 0.49).abs() < 1e-9);
        let one = stats.equal(Some(&Value::Int(7)));
        assert!((one - 0.001).abs() < 1e-4, "{one}");
        // Values 1..=500 below 251: about half of the 500 rows not 0.
        let below = stats.range(None, Some((Some(&Value::Int(251)), false)));
        assert!((below - (0.49 + 0.25)).abs() < 0.01, "{below}");
        let above = stats.range(Some((Some(&Value::Int(1000)), false)), None);
        assert!(above < 0.001, "{above}");
        assert_eq!(stats.equal(Some(&Value::Null)), 0.0);
        assert_eq!(stats.range(None, Some((Some(&Value::Null), true))), 0.0);
        // A parameter: the least common value's share; an unknown bound: narrow.
        assert!((stats.equal(None) - 0.001).abs() < 1e-4);
        assert_eq!(stats.range(Some((None, true)), None), UNKNOWN_BOUND);
        // Inclusive and exclusive bounds on the histogram's values.
        let at_most = stats.range(None, Some((Some(&Value::Int(250)), true)));
        let below = stats.range(None, Some((Some(&Value::Int(250)), false)));
        assert!(at_most >= below, "{at_most} {below}");
    }

    #[test]
    fn distinct_values_are_estimated_past_the_sample() {
        // A sample of 3,000 of 300,000 rows: 1,000 values three times each.
        let values = ints((0..3000).map(|i| i % 1000));
        let stats = column_statistics(values, DataType::Int8, 300_000.0);
        assert_eq!(stats.distinct, 1000.0);
        // Every sampled value once: a key, as many values as rows.
        let stats = column_statistics(ints(0..3000), DataType::Int8, 300_000.0);
        assert_eq!(stats.distinct, 300_000.0);
    }

    #[test]
    fn statistics_survive_their_encoding() {
        let mut values: Vec<Value> = (0..200)
            .map(|i| Value::Text(format!("v{}", i % 20)))
            .collect();
        values.push(Value::Null);
        let column = column_statistics(values, DataType::Text, 201.0);
        let stats = TableStatistics {
            rows: 201.0,
            columns: vec![Some(column), None],
            last_manual: 5,
            last_automatic: 0,
        };
        let decoded = TableStatistics::decode(&stats.encode().unwrap()).unwrap();
        assert_eq!(decoded, stats);
        assert_eq!(statistics_tree(&statistics_key(77)), Some(77));
    }
}

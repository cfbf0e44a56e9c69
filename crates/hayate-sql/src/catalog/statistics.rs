//! Planner statistics: what ANALYZE learns of a table's rows, kept in `sql.catalog`.
//!
//! 1. ANALYZE (or the automatic analysis, `Catalog::autoanalyze`) reads the whole table from
//!    one snapshot, keeps a uniform sample of at most `SAMPLE_ROWS` rows (reservoir sampling
//!    of their encoded bytes; only the sample is decoded) and counts the rows.
//! 2. Per column it derives, as PostgreSQL's `compute_scalar_stats` does: the fraction of
//!    NULLs, the number of distinct values (exact when the sample is the table, else the
//!    Haas-Stokes estimator over the sample's values seen once), up to `COMMON_VALUES` most
//!    common values with their frequencies, and up to `HISTOGRAM_BOUNDS` bounds of
//!    equal-count buckets over the other values.
//! 3. The result is written under the table's engine tree id (a TRUNCATE or rebuild starts a
//!    new tree: statistics never outlive the rows they describe; tree ids are never reused)
//!    in its own transaction, published to the table's `Statistics` (shared by every
//!    definition of the tree), and the catalog version moves so prepared statements are
//!    planned again.
//! 4. Writes count the rows they change (`Statistics::wrote`); a table is due for automatic
//!    analysis when more than 50 + 10% of its rows changed since the last one (PostgreSQL's
//!    autovacuum_analyze_threshold and _scale_factor). The server's background worker asks
//!    every `AUTOANALYZE_NAPTIME`.
//!
//! Row format (a value of `sql.catalog` under `statistics_key(tree)`, told from a table's
//! by its first byte): u8 `STATISTICS_TAG`, f64 rows, i64 last manual and automatic
//! analysis (microseconds since 2000, 0 never), u16 column count; per column u8 present,
//! then type tag u8, type modifier u32, f64 NULL fraction, f64 average width, f64 distinct
//! values, u16 common
//! value count with their f64 frequencies, the values as one encoded row, u16 histogram
//! bound count and the bounds as one encoded row (rows as `encoding::row`, byte strings as
//! u32 length + bytes; integers and floats little-endian).

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Duration;

use hayate_engine::TreeId;
use parking_lot::{Mutex, RwLock};
use rand::Rng;

use super::reader::Reader;
use super::table::Table;
use super::Catalog;
use crate::encoding::row;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::{datetime, DataType, Value};

/// The first byte of a statistics row (a table definition's is its format version).
pub(super) const STATISTICS_TAG: u8 = b'S';
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
/// Rows changed before a table is analyzed again: this many plus `AUTOANALYZE_FRACTION` of
/// its rows.
const AUTOANALYZE_THRESHOLD: f64 = 50.0;
const AUTOANALYZE_FRACTION: f64 = 0.1;
/// How often the server's worker looks for tables due for analysis.
pub const AUTOANALYZE_NAPTIME: Duration = Duration::from_secs(10);

/// The key of a table's statistics in `sql.catalog`: no table name starts with a NUL.
fn statistics_key(tree: TreeId) -> Vec<u8> {
    let mut key = b"\0statistics ".to_vec();
    key.extend_from_slice(&tree.to_be_bytes());
    key
}

/// The tree of a statistics row's key.
pub(super) fn statistics_tree(key: &[u8]) -> Option<TreeId> {
    let tree = key.strip_prefix(b"\0statistics ")?;
    Some(TreeId::from_be_bytes(tree.try_into().ok()?))
}

/// What ANALYZE learned of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableStatistics {
    /// Rows the table held.
    pub rows: f64,
    /// Per column (None: nothing known, a column added later).
    pub columns: Vec<Option<ColumnStatistics>>,
    /// When the last ANALYZE and the last automatic analysis ran (microseconds since
    /// 2000-01-01 UTC; 0 never).
    pub last_manual: i64,
    pub last_automatic: i64,
}

/// What ANALYZE learned of a column's values.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnStatistics {
    /// The column's type when analyzed (an ALTER COLUMN TYPE since makes them unusable).
    pub data_type: DataType,
    pub null_fraction: f64,
    /// The average width of the non-NULL values in bytes (text and bytea their length).
    pub average_width: f64,
    /// Distinct non-NULL values (estimated past the sample).
    pub distinct: f64,
    /// The most common values and their frequencies among all rows, most common first.
    pub common: Vec<(Value, f64)>,
    /// Bounds of equal-count buckets over the values not in `common`, ascending.
    pub histogram: Vec<Value>,
}

/// Selectivity of `column = value` without statistics of the column (PostgreSQL's
/// DEFAULT_EQ_SEL), of `column < value` (DEFAULT_INEQ_SEL) and of a range bounded on both
/// sides (DEFAULT_RANGE_INEQ_SEL).
pub const DEFAULT_EQUAL: f64 = 0.005;
pub const DEFAULT_INEQUALITY: f64 = 1.0 / 3.0;
pub const DEFAULT_RANGE: f64 = 0.005;
/// Selectivity of a range whose bound is not known when planning (a parameter of a prepared
/// statement, planned once for every value): taken as narrow, since reading a range that
/// proves wide through an index costs a few times a scan of the table, while scanning the
/// table for a range that proves narrow costs the whole table (PostgreSQL's 1/3 would give
/// such statements a full scan; it plans its first executions with the values instead).
pub const UNKNOWN_BOUND: f64 = DEFAULT_RANGE;

/// A bound of a range of values: the value if known (None: a parameter), inclusive.
pub type ValueBound<'a> = Option<(Option<&'a Value>, bool)>;

impl ColumnStatistics {
    /// The fraction of rows whose value equals `value` (None: a value not known when
    /// planning, a parameter: taken as the least common value's, for the reason given at
    /// `UNKNOWN_BOUND`; a skewed column's rare values are what such statements ask for).
    pub fn equal(&self, value: Option<&Value>) -> f64 {
        let common: f64 = self.common.iter().map(|(_, f)| f).sum();
        let others = self.distinct - self.common.len() as f64;
        // Each value not among the common ones.
        let each = match others >= 1.0 {
            true => Some(((1.0 - self.null_fraction - common) / others).clamp(0.0, 1.0)),
            false => None,
        };
        let least = self.common.last().map(|(_, frequency)| *frequency);
        let Some(value) = value else {
            return match (each, least) {
                (Some(each), Some(least)) => each.min(least),
                (Some(each), None) => each,
                (None, Some(least)) => least,
                (None, None) => 0.0,
            };
        };
        if value.is_null() {
            return 0.0;
        }
        if let Some((_, frequency)) = self.common.iter().find(|(v, _)| equal_values(v, value)) {
            return *frequency;
        }
        match (each, least) {
            (Some(each), Some(least)) => each.min(least),
            (Some(each), None) => each,
            // Every distinct value is a common one: this one is in no row (but say little).
            (None, _) => (1.0 - common - self.null_fraction).clamp(0.0, 1.0) / 2.0,
        }
    }

    /// The fraction of rows whose value lies between the bounds.
    pub fn range(&self, lower: ValueBound, upper: ValueBound) -> f64 {
        let known = |bound: ValueBound| bound.is_none_or(|(value, _)| value.is_some());
        if !known(lower) || !known(upper) {
            return UNKNOWN_BOUND;
        }
        let lower = lower.map(|(value, inclusive)| (value.expect("known"), inclusive));
        let upper = upper.map(|(value, inclusive)| (value.expect("known"), inclusive));
        // A comparison with NULL is never true.
        if lower.is_some_and(|(value, _)| value.is_null())
            || upper.is_some_and(|(value, _)| value.is_null())
        {
            return 0.0;
        }
        let inside = |value: &Value| {
            lower.is_none_or(|(bound, inclusive)| match value.sort_order(bound) {
                Ordering::Greater => true,
                Ordering::Equal => inclusive,
                Ordering::Less => false,
            }) && upper.is_none_or(|(bound, inclusive)| match value.sort_order(bound) {
                Ordering::Less => true,
                Ordering::Equal => inclusive,
                Ordering::Greater => false,
            })
        };
        let common: f64 = (self.common.iter())
            .filter(|(value, _)| inside(value))
            .map(|(_, f)| f)
            .sum();
        let rest =
            (1.0 - self.null_fraction - self.common.iter().map(|(_, f)| f).sum::<f64>()).max(0.0);
        // The histogram's share below the upper bound (with it if inclusive) less its share
        // below the lower one (with it if exclusive).
        let upper_share = upper.map_or(1.0, |(value, inclusive)| {
            self.histogram_below(value, inclusive)
        });
        let lower_share = lower.map_or(0.0, |(value, inclusive)| {
            self.histogram_below(value, !inclusive)
        });
        let share = (upper_share - lower_share).max(0.0);
        (common + share * rest).clamp(0.0, 1.0)
    }

    /// The fraction of the histogram's values below `value` (`or_equal`: or equal to it),
    /// interpolated within its bucket for finite numbers (else half the bucket). Bounds
    /// repeat where a value fills more than a bucket.
    fn histogram_below(&self, value: &Value, or_equal: bool) -> f64 {
        let bounds = &self.histogram;
        if bounds.len() < 2 {
            return 0.5;
        }
        let buckets = (bounds.len() - 1) as f64;
        let above = bounds.partition_point(|bound| match bound.sort_order(value) {
            Ordering::Less => true,
            Ordering::Equal => or_equal,
            Ordering::Greater => false,
        });
        if above == 0 {
            return 0.0;
        }
        if above == bounds.len() {
            return 1.0;
        }
        let (low, high) = (&bounds[above - 1], &bounds[above]);
        let within = match (low.as_f64(), high.as_f64(), value.as_f64()) {
            (Some(low), Some(high), Some(value))
                if high > low && low.is_finite() && high.is_finite() && value.is_finite() =>
            {
                ((value - low) / (high - low)).clamp(0.0, 1.0)
            }
            _ => 0.5,
        };
        ((above - 1) as f64 + within) / buckets
    }
}

/// Values equal as a key compares them (text to text, numbers across their types).
fn equal_values(a: &Value, b: &Value) -> bool {
    matches!(a.compare(b), Ok(Some(Ordering::Equal)))
}

/// The statistics of one table's rows, shared by every definition of its engine tree, and
/// the count of rows written since they were taken.
#[derive(Debug, Default)]
pub struct Statistics {
    current: RwLock<Option<Arc<TableStatistics>>>,
    /// Rows inserted, updated or deleted since the last analysis (or since open).
    modified: AtomicU64,
    /// Held by the analysis running (one at a time: a second waits, an automatic one
    /// skips the table).
    analyzing: Mutex<()>,
    /// Analyses since open, by hand and automatic (pg_stat_user_tables).
    pub(crate) analyze_count: AtomicU64,
    pub(crate) autoanalyze_count: AtomicU64,
}

impl Statistics {
    /// What the last analysis learned, if any.
    pub fn get(&self) -> Option<Arc<TableStatistics>> {
        self.current.read().clone()
    }

    /// What the planner goes by: none for a table analyzed while empty (its rows since are
    /// unknown; PostgreSQL, too, never plans for an empty table).
    pub fn for_planning(&self) -> Option<Arc<TableStatistics>> {
        self.get().filter(|statistics| statistics.rows >= 1.0)
    }

    pub(super) fn set(&self, statistics: Option<Arc<TableStatistics>>) {
        *self.current.write() = statistics;
    }

    /// A write changed `rows` rows.
    pub fn wrote(&self, rows: u64) {
        if rows > 0 {
            self.modified.fetch_add(rows, AtomicOrdering::Relaxed);
        }
    }

    /// Rows changed since the last analysis.
    pub fn modified(&self) -> u64 {
        self.modified.load(AtomicOrdering::Relaxed)
    }

    /// True when enough rows changed for an automatic analysis.
    fn due(&self) -> bool {
        let rows = self.get().map_or(0.0, |s| s.rows);
        self.modified() as f64 > AUTOANALYZE_THRESHOLD + AUTOANALYZE_FRACTION * rows
    }
}

impl TableStatistics {
    /// The statistics of `table`'s column at `column`, if taken with its present type.
    pub fn column(&self, table: &Table, column: usize) -> Option<&ColumnStatistics> {
        let stats = self.columns.get(column)?.as_ref()?;
        let def = table.def.columns.get(column)?;
        (stats.data_type == def.data_type).then_some(stats)
    }

    pub(super) fn encode(&self) -> SqlResult<Vec<u8>> {
        let mut out = vec![STATISTICS_TAG];
        out.extend_from_slice(&self.rows.to_le_bytes());
        out.extend_from_slice(&self.last_manual.to_le_bytes());
        out.extend_from_slice(&self.last_automatic.to_le_bytes());
        out.extend_from_slice(&(self.columns.len() as u16).to_le_bytes());
        for column in &self.columns {
            let Some(column) = column else {
                out.push(0);
                continue;
            };
            out.push(1);
            out.push(column.data_type.tag());
            out.extend_from_slice(&column.data_type.type_modifier().to_le_bytes());
            out.extend_from_slice(&column.null_fraction.to_le_bytes());
            out.extend_from_slice(&column.average_width.to_le_bytes());
            out.extend_from_slice(&column.distinct.to_le_bytes());
            out.extend_from_slice(&(column.common.len() as u16).to_le_bytes());
            for (_, frequency) in &column.common {
                out.extend_from_slice(&frequency.to_le_bytes());
            }
            let values: Vec<Value> = column.common.iter().map(|(v, _)| v.clone()).collect();
            put_values(&mut out, &values, column.data_type)?;
            out.extend_from_slice(&(column.histogram.len() as u16).to_le_bytes());
            put_values(&mut out, &column.histogram, column.data_type)?;
        }
        Ok(out)
    }

    pub(super) fn decode(bytes: &[u8]) -> SqlResult<TableStatistics> {
        let corrupt = || {
            SqlError::new(
                sqlstate::DATA_CORRUPTED,
                "corrupt table statistics in sql.catalog",
            )
        };
        let mut reader = Reader::new(bytes);
        if reader.u8() != Some(STATISTICS_TAG) {
            return Err(corrupt());
        }
        let f64_of = |reader: &mut Reader| reader.i64().map(|v| f64::from_bits(v as u64));
        let rows = f64_of(&mut reader).ok_or_else(corrupt)?;
        let last_manual = reader.i64().ok_or_else(corrupt)?;
        let last_automatic = reader.i64().ok_or_else(corrupt)?;
        let count = reader.u16().ok_or_else(corrupt)?;
        let mut columns = Vec::with_capacity(count as usize);
        for _ in 0..count {
            if reader.u8().ok_or_else(corrupt)? == 0 {
                columns.push(None);
                continue;
            }
            let tag = reader.u8().ok_or_else(corrupt)?;
            let modifier = reader.u32().ok_or_else(corrupt)?;
            let data_type = DataType::from_tag(tag, modifier).ok_or_else(corrupt)?;
            let null_fraction = f64_of(&mut reader).ok_or_else(corrupt)?;
            let average_width = f64_of(&mut reader).ok_or_else(corrupt)?;
            let distinct = f64_of(&mut reader).ok_or_else(corrupt)?;
            let common_count = reader.u16().ok_or_else(corrupt)? as usize;
            let frequencies = (0..common_count)
                .map(|_| f64_of(&mut reader))
                .collect::<Option<Vec<f64>>>()
                .ok_or_else(corrupt)?;
            let common_values = take_values(&mut reader, common_count, data_type)?;
            let histogram_count = reader.u16().ok_or_else(corrupt)? as usize;
            let histogram = take_values(&mut reader, histogram_count, data_type)?;
            columns.push(Some(ColumnStatistics {
                data_type,
                null_fraction,
                average_width,
                distinct,
                common: common_values.into_iter().zip(frequencies).collect(),
                histogram,
            }));
        }
        Ok(TableStatistics {
            rows,
            columns,
            last_manual,
            last_automatic,
        })
    }
}

/// Values of one type as one encoded row.
fn put_values(out: &mut Vec<u8>, values: &[Value], data_type: DataType) -> SqlResult<()> {
    let encoded = row::encode(values, &vec![data_type; values.len()])?;
    out.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
    out.extend_from_slice(&encoded);
    Ok(())
}

fn take_values(reader: &mut Reader, count: usize, data_type: DataType) -> SqlResult<Vec<Value>> {
    let bytes = reader.bytes().ok_or_else(|| {
        SqlError::new(
            sqlstate::DATA_CORRUPTED,
            "corrupt table statistics in sql.catalog",
        )
    })?;
    row::decode(bytes, &vec![data_type; count], "sql.catalog statistics")
}

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

//! Planner statistics: what ANALYZE learns of a table's rows (`analyze` takes them), how the
//! planner reads them (selectivities of equalities and ranges), and their row in
//! `sql.catalog`.
//!
//! They are kept under the table's engine tree id (a TRUNCATE or rebuild starts a new tree:
//! statistics never outlive the rows they describe; tree ids are never reused) and
//! published to the table's `Statistics`, shared by every definition of the tree, which
//! also counts the rows written since (`Statistics::wrote`): a table is due for automatic
//! analysis when more than 50 + 10% of its rows changed since the last one (PostgreSQL's
//! autovacuum_analyze_threshold and _scale_factor).
//!
//! Row format (a value of `sql.catalog` under `statistics_key(tree)`, told from a table's
//! by its first byte): u8 `STATISTICS_TAG`, f64 rows, i64 last manual and automatic
//! analysis (microseconds since 2000, 0 never), u16 column count; per column u8 present,
//! then type tag u8, type modifier u32, f64 NULL fraction, f64 average width, f64 distinct
//! values, u16 common value count with their f64 frequencies, the values as one encoded
//! row, u16 histogram bound count and the bounds as one encoded row (rows as
//! `encoding::row`, byte strings as u32 length + bytes; integers and floats little-endian).

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use hayate_engine::TreeId;
use parking_lot::{Mutex, RwLock};

use super::definition::TableDef;
use super::reader::Reader;
use crate::encoding::row;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::{DataType, Value};

/// The first byte of a statistics row (a table definition's is its format version).
pub(super) const STATISTICS_TAG: u8 = b'S';
/// Rows changed before a table is analyzed again: this many plus `AUTOANALYZE_FRACTION` of
/// its rows.
const AUTOANALYZE_THRESHOLD: f64 = 50.0;
const AUTOANALYZE_FRACTION: f64 = 0.1;

/// The key of a table's statistics in `sql.catalog`: no table name starts with a NUL.
pub(super) fn statistics_key(tree: TreeId) -> Vec<u8> {
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
    /// The share of rows equal to a value the plan does not know but that the column holds
    /// (a join's probe): the non-NULL rows over the distinct values.
    pub fn average_equal(&self) -> f64 {
        ((1.0 - self.null_fraction) / self.distinct.max(1.0)).clamp(0.0, 1.0)
    }

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
    pub(super) modified: AtomicU64,
    /// Held by the analysis running (one at a time: a second waits, an automatic one
    /// skips the table).
    pub(super) analyzing: Mutex<()>,
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
    pub(super) fn due(&self) -> bool {
        let rows = self.get().map_or(0.0, |s| s.rows);
        self.modified() as f64 > AUTOANALYZE_THRESHOLD + AUTOANALYZE_FRACTION * rows
    }
}

impl TableStatistics {
    /// The statistics of the column at `column` of a table defined as `def`, if taken with
    /// its present type.
    pub fn column(&self, def: &TableDef, column: usize) -> Option<&ColumnStatistics> {
        let stats = self.columns.get(column)?.as_ref()?;
        let def = def.columns.get(column)?;
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

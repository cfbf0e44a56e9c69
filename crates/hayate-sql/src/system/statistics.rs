//! PostgreSQL's cumulative statistics views (pg_stat_*, pg_statio_*) with PostgreSQL 15's
//! columns, so the monitoring queries of tools bind and list the databases, tables and indexes
//! (BenchBase's collector reads all eight after every run), and pg_stats, what ANALYZE
//! learned per column (`catalog::statistics`). Hayate keeps no per-table or per-index
//! activity counters beyond the analyses' (rows at the last one, rows changed since, their
//! times and counts since the server started), so the other columns are NULL rather than a
//! zero that would read as "no activity"; the only counters given are true ones (nothing is
//! ever archived).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::{Snapshot, SystemTable, UserTable, BOOL, INT4, NAME, OID, PUBLIC_SCHEMA, TEXT};
use crate::types::{DataType, Value};

const INT8: DataType = DataType::Int8;
const FLOAT: DataType = DataType::Float8;
const FLOAT4: DataType = DataType::Float4;
const TIME: DataType = DataType::TimestampTz;

/// Their names.
pub(super) const NAMES: &[&str] = &[
    "pg_stat_archiver",
    "pg_stat_bgwriter",
    "pg_stat_database",
    "pg_stat_database_conflicts",
    "pg_stat_user_tables",
    "pg_statio_user_tables",
    "pg_stat_user_indexes",
    "pg_statio_user_indexes",
    "pg_stats",
];

type Columns = &'static [(&'static str, DataType)];

const TABLE_COLUMNS: Columns = &[
    ("relid", OID),
    ("schemaname", NAME),
    ("relname", NAME),
    ("seq_scan", INT8),
    ("seq_tup_read", INT8),
    ("idx_scan", INT8),
    ("idx_tup_fetch", INT8),
    ("n_tup_ins", INT8),
    ("n_tup_upd", INT8),
    ("n_tup_del", INT8),
    ("n_tup_hot_upd", INT8),
    ("n_live_tup", INT8),
    ("n_dead_tup", INT8),
    ("n_mod_since_analyze", INT8),
    ("n_ins_since_vacuum", INT8),
    ("last_vacuum", TIME),
    ("last_autovacuum", TIME),
    ("last_analyze", TIME),
    ("last_autoanalyze", TIME),
    ("vacuum_count", INT8),
    ("autovacuum_count", INT8),
    ("analyze_count", INT8),
    ("autoanalyze_count", INT8),
];

const STATS_COLUMNS: Columns = &[
    ("schemaname", NAME),
    ("tablename", NAME),
    ("attname", NAME),
    ("inherited", BOOL),
    ("null_frac", FLOAT4),
    ("avg_width", INT4),
    ("n_distinct", FLOAT4),
    ("most_common_vals", TEXT),
    ("most_common_freqs", TEXT),
    ("histogram_bounds", TEXT),
    ("correlation", FLOAT4),
    ("most_common_elems", TEXT),
    ("most_common_elem_freqs", TEXT),
    ("elem_count_histogram", TEXT),
];

const TABLE_IO_COLUMNS: Columns = &[
    ("relid", OID),
    ("schemaname", NAME),
    ("relname", NAME),
    ("heap_blks_read", INT8),
    ("heap_blks_hit", INT8),
    ("idx_blks_read", INT8),
    ("idx_blks_hit", INT8),
    ("toast_blks_read", INT8),
    ("toast_blks_hit", INT8),
    ("tidx_blks_read", INT8),
    ("tidx_blks_hit", INT8),
];

const INDEX_COLUMNS: Columns = &[
    ("relid", OID),
    ("indexrelid", OID),
    ("schemaname", NAME),
    ("relname", NAME),
    ("indexrelname", NAME),
    ("idx_scan", INT8),
    ("idx_tup_read", INT8),
    ("idx_tup_fetch", INT8),
];

const INDEX_IO_COLUMNS: Columns = &[
    ("relid", OID),
    ("indexrelid", OID),
    ("schemaname", NAME),
    ("relname", NAME),
    ("indexrelname", NAME),
    ("idx_blks_read", INT8),
    ("idx_blks_hit", INT8),
];

const DATABASE_COLUMNS: Columns = &[
    ("datid", OID),
    ("datname", NAME),
    ("numbackends", INT4),
    ("xact_commit", INT8),
    ("xact_rollback", INT8),
    ("blks_read", INT8),
    ("blks_hit", INT8),
    ("tup_returned", INT8),
    ("tup_fetched", INT8),
    ("tup_inserted", INT8),
    ("tup_updated", INT8),
    ("tup_deleted", INT8),
    ("conflicts", INT8),
    ("temp_files", INT8),
    ("temp_bytes", INT8),
    ("deadlocks", INT8),
    ("checksum_failures", INT8),
    ("checksum_last_failure", TIME),
    ("blk_read_time", FLOAT),
    ("blk_write_time", FLOAT),
    ("session_time", FLOAT),
    ("active_time", FLOAT),
    ("idle_in_transaction_time", FLOAT),
    ("sessions", INT8),
    ("sessions_abandoned", INT8),
    ("sessions_fatal", INT8),
    ("sessions_killed", INT8),
    ("stats_reset", TIME),
];

const CONFLICT_COLUMNS: Columns = &[
    ("datid", OID),
    ("datname", NAME),
    ("confl_tablespace", INT8),
    ("confl_lock", INT8),
    ("confl_snapshot", INT8),
    ("confl_bufferpin", INT8),
    ("confl_deadlock", INT8),
];

const ARCHIVER_COLUMNS: Columns = &[
    ("archived_count", INT8),
    ("last_archived_wal", TEXT),
    ("last_archived_time", TIME),
    ("failed_count", INT8),
    ("last_failed_wal", TEXT),
    ("last_failed_time", TIME),
    ("stats_reset", TIME),
];

const BGWRITER_COLUMNS: Columns = &[
    ("checkpoints_timed", INT8),
    ("checkpoints_req", INT8),
    ("checkpoint_write_time", FLOAT),
    ("checkpoint_sync_time", FLOAT),
    ("buffers_checkpoint", INT8),
    ("buffers_clean", INT8),
    ("maxwritten_clean", INT8),
    ("buffers_backend", INT8),
    ("buffers_backend_fsync", INT8),
    ("buffers_alloc", INT8),
    ("stats_reset", TIME),
];

/// The statistics view `name`.
pub(super) fn definition(name: &str) -> Option<SystemTable> {
    let name = *NAMES.iter().find(|known| **known == name)?;
    let (_, oid, columns, compute): super::Definition = match name {
        "pg_stat_archiver" => ("pg_catalog", 12040, ARCHIVER_COLUMNS, |_, _| {
            // No WAL is ever archived: both counts are truly zero.
            let mut row = nulls(ARCHIVER_COLUMNS);
            row[0] = Value::Int(0);
            row[3] = Value::Int(0);
            vec![row]
        }),
        "pg_stat_bgwriter" => ("pg_catalog", 12041, BGWRITER_COLUMNS, |_, _| {
            vec![nulls(BGWRITER_COLUMNS)]
        }),
        "pg_stat_database" => ("pg_catalog", 12042, DATABASE_COLUMNS, |snapshot, _| {
            per_database(snapshot, DATABASE_COLUMNS)
        }),
        "pg_stat_database_conflicts" => ("pg_catalog", 12043, CONFLICT_COLUMNS, |snapshot, _| {
            per_database(snapshot, CONFLICT_COLUMNS)
        }),
        "pg_stat_user_tables" => ("pg_catalog", 12044, TABLE_COLUMNS, |snapshot, _| {
            per_table(snapshot, TABLE_COLUMNS)
        }),
        "pg_statio_user_tables" => ("pg_catalog", 12045, TABLE_IO_COLUMNS, |snapshot, _| {
            per_table(snapshot, TABLE_IO_COLUMNS)
        }),
        "pg_stat_user_indexes" => ("pg_catalog", 12046, INDEX_COLUMNS, |snapshot, _| {
            per_index(snapshot, INDEX_COLUMNS)
        }),
        "pg_statio_user_indexes" => ("pg_catalog", 12047, INDEX_IO_COLUMNS, |snapshot, _| {
            per_index(snapshot, INDEX_IO_COLUMNS)
        }),
        "pg_stats" => ("pg_catalog", 12048, STATS_COLUMNS, |snapshot, _| {
            per_column(snapshot)
        }),
        _ => return None,
    };
    Some(SystemTable {
        schema: "pg_catalog",
        name,
        oid,
        columns,
        compute,
    })
}

fn nulls(columns: Columns) -> Vec<Value> {
    vec![Value::Null; columns.len()]
}

/// A row per database: its oid and name, then NULLs.
fn per_database(snapshot: &Snapshot, columns: Columns) -> Vec<Vec<Value>> {
    snapshot
        .databases
        .iter()
        .map(|database| {
            let mut row = nulls(columns);
            row[0] = Value::Int(database.oid as i64);
            row[1] = Value::Text(database.name.clone());
            row
        })
        .collect()
}

/// A row per table: relid, schemaname, relname, then NULLs; pg_stat_user_tables with the
/// analyses' columns.
fn per_table(snapshot: &Snapshot, columns: Columns) -> Vec<Vec<Value>> {
    snapshot
        .tables
        .iter()
        .map(|table| {
            let mut row = nulls(columns);
            row[0] = Value::Int(table.oid);
            row[1] = Value::Text(PUBLIC_SCHEMA.into());
            row[2] = Value::Text(table.name().into());
            if columns == TABLE_COLUMNS {
                let statistics = &table.table.statistics;
                let taken = statistics.get();
                let set = |row: &mut Vec<Value>, name: &str, value: Value| {
                    let position = (columns.iter())
                        .position(|(column, _)| *column == name)
                        .expect("a pg_stat_user_tables column");
                    row[position] = value;
                };
                let time = |micros: i64| match micros {
                    0 => Value::Null,
                    micros => Value::TimestampTz(micros),
                };
                if let Some(taken) = &taken {
                    set(&mut row, "n_live_tup", Value::Int(taken.rows as i64));
                    set(&mut row, "last_analyze", time(taken.last_manual));
                    set(&mut row, "last_autoanalyze", time(taken.last_automatic));
                }
                set(
                    &mut row,
                    "n_mod_since_analyze",
                    Value::Int(statistics.modified() as i64),
                );
                let count = |counter: &AtomicU64| Value::Int(counter.load(Relaxed) as i64);
                set(&mut row, "analyze_count", count(&statistics.analyze_count));
                set(
                    &mut row,
                    "autoanalyze_count",
                    count(&statistics.autoanalyze_count),
                );
            }
            row
        })
        .collect()
}

/// pg_stats: a row per column of each analyzed table. n_distinct is negative (minus the
/// fraction of rows) when the values are thought to grow with the rows (more than a tenth
/// of them distinct), as PostgreSQL gives it; arrays in their text form.
fn per_column(snapshot: &Snapshot) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for table in &snapshot.tables {
        let Some(taken) = table.table.statistics.get() else {
            continue;
        };
        for (position, column) in table.table.def.columns.iter().enumerate() {
            let Some(stats) = taken.column(&table.table.def, position) else {
                continue;
            };
            let n_distinct = match stats.distinct > 0.1 * taken.rows {
                true => -(stats.distinct / taken.rows.max(1.0)).min(1.0),
                false => stats.distinct.round(),
            };
            let array = |values: Vec<Option<String>>| match values.is_empty() {
                true => Value::Null,
                false => Value::Text(super::array::format(&values)),
            };
            let text = |value: &Value| value.to_text_typed(column.data_type);
            let mut row = nulls(STATS_COLUMNS);
            row[0] = Value::Text(PUBLIC_SCHEMA.into());
            row[1] = Value::Text(table.name().into());
            row[2] = Value::Text(column.name.clone());
            row[3] = Value::Bool(false);
            row[4] = Value::Float4(stats.null_fraction as f32);
            row[5] = Value::Int(stats.average_width.round() as i64);
            row[6] = Value::Float4(n_distinct as f32);
            row[7] = array(stats.common.iter().map(|(value, _)| text(value)).collect());
            row[8] = array(
                (stats.common.iter())
                    .map(|(_, frequency)| Some(crate::types::format_float4(*frequency as f32)))
                    .collect(),
            );
            row[9] = array(stats.histogram.iter().map(text).collect());
            rows.push(row);
        }
    }
    rows
}

/// A row per index (primary keys included): relid, indexrelid, schemaname, relname,
/// indexrelname, then NULLs.
fn per_index(snapshot: &Snapshot, columns: Columns) -> Vec<Vec<Value>> {
    let row = |table: &UserTable, index: &super::IndexInfo| {
        let mut row = nulls(columns);
        row[0] = Value::Int(table.oid);
        row[1] = Value::Int(index.oid);
        row[2] = Value::Text(PUBLIC_SCHEMA.into());
        row[3] = Value::Text(table.name().into());
        row[4] = Value::Text(index.name.clone());
        row
    };
    snapshot
        .tables
        .iter()
        .flat_map(|table| table.indexes.iter().map(move |index| row(table, index)))
        .collect()
}

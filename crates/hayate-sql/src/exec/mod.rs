//! The executor: runs a plan inside an engine transaction.
//!
//! Queries run as a tree of operators pushing rows to their parents (`query`); a scan in key
//! order under a LIMIT stops as soon as it has enough rows. UPDATE and DELETE read the rows
//! they change first, then write them.

mod aggregate;
mod constraints;
mod full_join;
pub(crate) mod index;
mod lateral;
mod query;
mod run;
mod set_function;
mod set_operation;
mod spill;
mod window;
mod write;

use std::cmp::Ordering;
use std::ops::Bound;

use hayate_engine::{Database, Locked, Transaction};

use crate::catalog::{Catalog, Table};
use crate::encoding::{key, row};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::access::{Access, KeyBound};
use crate::plan::expr::truth;
use crate::plan::{
    EvalContext, Expr, InsertSelect, LockWait, OutputColumn, Plan, QueryPlan, Returning, RowLock,
    SortKey, TableRead,
};
use crate::types::{DataType, Value};
pub use constraints::{recheck, ConstraintCache, ConstraintModes, PendingCheck};
pub use index::IndexTerms;
use run::Run;
pub use spill::{memory_size_bytes, memory_size_text, parse_work_mem, WORK_MEM_DEFAULT};

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Rows {
        columns: Vec<OutputColumn>,
        rows: Vec<Vec<Value>>,
        /// The command tag without the row count ("SELECT", "INSERT 0", "UPDATE", ...).
        command: String,
    },
    /// A statement without rows; the full command tag ("INSERT 0 3", "CREATE TABLE").
    Command { tag: String },
}

/// Counts the rows a write statement changed toward its table's next automatic analysis
/// (`Statistics::wrote`): its tag's count, or its RETURNING rows.
fn count_written(plan: &Plan, outcome: &Outcome) {
    let table = match plan {
        Plan::Insert { table, .. } => table,
        Plan::InsertSelect(insert) => &insert.table,
        Plan::Update { read, .. } | Plan::Delete { read, .. } => &read.table,
        _ => return,
    };
    let rows = match outcome {
        Outcome::Rows { rows, .. } => rows.len() as u64,
        Outcome::Command { tag } => (tag.rsplit(' ').next())
            .and_then(|count| count.parse().ok())
            .unwrap_or(0),
    };
    table.statistics.wrote(rows);
}

pub struct Executor<'a> {
    pub db: &'a Database,
    /// What system tables are computed from.
    pub catalog: &'a Catalog,
    pub context: EvalContext<'a>,
    /// READ COMMITTED: UPDATE and DELETE lock each row they read and work on its newest
    /// committed version (re-checking their WHERE on it), as PostgreSQL does, instead of
    /// failing with 40001 when a concurrent transaction changed it after the snapshot.
    pub read_committed: bool,
    /// Memory of one sort, hash table or aggregation before it spills to temporary files.
    pub work_mem_bytes: usize,
    /// Constraints bound and looked up by this statement (`constraints`).
    pub constraints: ConstraintCache,
    /// Partial indexes' predicates and expression indexes' keys bound by this statement.
    pub index_terms: IndexTerms,
    /// The block's SET CONSTRAINTS modes; None outside a block, where a deferred key is
    /// checked at the end of the statement (its transaction's end).
    pub constraint_modes: Option<&'a ConstraintModes>,
}

/// A row read from a table: its key and its column values.
type KeyedRow = (Vec<u8>, Vec<Value>);

/// The start and end of a scan, as owned keys.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

impl Executor<'_> {
    /// Runs a query or a DML statement, then the foreign key checks it postponed to its end
    /// (`constraints`).
    pub fn run(&self, plan: &Plan, txn: &mut Transaction) -> SqlResult<Outcome> {
        // A statement run again (autocommit's retry) starts with none of the failed run's.
        self.constraints.forget_pending();
        let outcome = self.run_plan(plan, txn)?;
        self.check_pending(txn)?;
        count_written(plan, &outcome);
        Ok(outcome)
    }

    fn run_plan(&self, plan: &Plan, txn: &mut Transaction) -> SqlResult<Outcome> {
        match plan {
            Plan::Select(select) => self.select(select, txn),
            Plan::InsertSelect(insert) => self.insert_select(insert, txn),
            Plan::Explain(query) => Ok(Outcome::Rows {
                columns: plan.columns(),
                rows: query
                    .explain()
                    .into_iter()
                    .map(|line| vec![Value::Text(line)])
                    .collect(),
                command: "EXPLAIN".into(),
            }),
            Plan::Insert {
                table,
                rows,
                returning,
                sequences,
                on_conflict,
            } => self.insert(
                table,
                rows,
                sequences,
                on_conflict.as_ref(),
                returning.as_ref(),
                txn,
            ),
            // RESTART IDENTITY in a block happens when the block commits (`Session`).
            Plan::Truncate { tables, .. } => self.truncate(tables, txn),
            Plan::Update {
                read,
                assignments,
                returning,
            } => self.update(read, assignments, returning.as_ref(), txn),
            Plan::Delete { read, returning } => self.delete(read, returning.as_ref(), txn),
            // Sequences are not transactional: these commit on their own (`catalog`).
            Plan::CreateSequence {
                name,
                options,
                if_not_exists,
                owner,
            } => {
                self.catalog
                    .create_sequence(name, *options, *if_not_exists)?;
                if owner.is_some() {
                    self.catalog.sequence(name)?.set_owner(owner.clone())?;
                    self.catalog.bump_version();
                }
                Ok(Outcome::Command {
                    tag: "CREATE SEQUENCE".into(),
                })
            }
            Plan::DropSequence { names, if_exists } => {
                for name in names {
                    self.catalog.drop_sequence(name, *if_exists)?;
                }
                Ok(Outcome::Command {
                    tag: "DROP SEQUENCE".into(),
                })
            }
            other => unreachable!("not a data statement: {other:?}"),
        }
    }

    /// The key of a point lookup with expressions over `row`, or None if no row can match.
    fn point_key(
        &self,
        table: &Table,
        values: &[Expr],
        row: &[Value],
        context: &EvalContext,
    ) -> SqlResult<Option<Vec<u8>>> {
        let mut out = Vec::new();
        for (expr, column) in values.iter().zip(&table.def.primary_key) {
            let data_type = table.def.columns[*column].data_type;
            match key_value(expr.eval(row, context)?, data_type)? {
                Some(value) => key::encode_column(&mut out, &value, data_type)?,
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// The byte range of a range scan (None: empty): the encoded equal prefix of the key, then
    /// the bounds on the key column after it.
    fn range(
        &self,
        table: &Table,
        access: &Access,
        context: &EvalContext,
    ) -> SqlResult<Option<KeyRange>> {
        let Access::Range {
            prefix,
            lower,
            upper,
        } = access
        else {
            return Ok(Some((Bound::Unbounded, Bound::Unbounded)));
        };
        let key_columns = &table.def.primary_key;
        let mut base = Vec::new();
        for (expr, column) in prefix.iter().zip(key_columns) {
            let data_type = table.def.columns[*column].data_type;
            let value = expr.eval(&[], context)?;
            if value.is_null() {
                return Ok(None); // `= NULL` matches nothing
            }
            match key_value(value, data_type)? {
                Some(value) => key::encode_column(&mut base, &value, data_type)?,
                None => return Ok(None), // outside the column type's range
            }
        }
        // The whole prefix: [base, successor of base).
        let (prefix_start, prefix_end) = prefix_range(base.clone());
        let bounded = key_columns
            .get(prefix.len())
            .map(|column| table.def.columns[*column].data_type);
        let encode = |bound: &KeyBound| -> SqlResult<Option<(Vec<u8>, bool)>> {
            let Some(data_type) = bounded else {
                return Ok(None);
            };
            let value = bound.value.eval(&[], context)?;
            if value.is_null() {
                return Err(SqlError::new(sqlstate::INTERNAL_ERROR, "NULL bound"));
            }
            Ok(match key_value(value, data_type)? {
                Some(value) => {
                    let mut key = base.clone();
                    key::encode_column(&mut key, &value, data_type)?;
                    Some((key, bound.inclusive))
                }
                None => None,
            })
        };
        let start = match lower {
            None => prefix_start,
            Some(bound) => match encode(bound) {
                Err(error) if error.code == sqlstate::INTERNAL_ERROR => return Ok(None),
                Err(error) => return Err(error),
                Ok(None) => prefix_start,
                Ok(Some((key, true))) => Bound::Included(key),
                Ok(Some((key, false))) => match key::prefix_successor(&key) {
                    Some(successor) => Bound::Included(successor),
                    None => return Ok(None),
                },
            },
        };
        let end = match upper {
            None => prefix_end,
            Some(bound) => match encode(bound) {
                Err(error) if error.code == sqlstate::INTERNAL_ERROR => return Ok(None),
                Err(error) => return Err(error),
                Ok(None) => prefix_end,
                Ok(Some((key, false))) => Bound::Excluded(key),
                Ok(Some((key, true))) => match key::prefix_successor(&key) {
                    Some(successor) => Bound::Excluded(successor),
                    None => prefix_end,
                },
            },
        };
        Ok(Some((start, end)))
    }

    fn select(&self, query: &QueryPlan, txn: &mut Transaction) -> SqlResult<Outcome> {
        let run = Run::new(self, txn);
        let rows = run.collect(&query.root, None)?;
        Ok(Outcome::Rows {
            columns: query.columns.clone(),
            rows,
            command: "SELECT".into(),
        })
    }

    /// INSERT ... SELECT: rows are inserted as the query produces them (no materialized
    /// result), so a generate_series of a million rows streams into the table.
    fn insert_select(&self, insert: &InsertSelect, txn: &mut Transaction) -> SqlResult<Outcome> {
        let table = &insert.table;
        // Defaults such as nextval() take a new value per row; the others are computed once.
        let per_row: Vec<usize> = (0..insert.defaults.len())
            .filter(|column| {
                !insert.targets.contains(column) && !insert.defaults[*column].is_constant()
            })
            .collect();
        let defaults = (0..insert.defaults.len())
            .map(|column| match per_row.contains(&column) {
                true => Ok(Value::Null),
                false => insert.defaults[column].eval(&[], &self.context),
            })
            .collect::<SqlResult<Vec<Value>>>()?;
        // The query's rows first go through a buffer so that reading and writing never hold
        // the transaction at once (the query may read the table it inserts into).
        const BATCH: usize = 1024;
        let mut returned = Vec::new();
        let mut count = 0usize;
        let mut batch: Vec<Vec<Value>> = Vec::with_capacity(BATCH);
        let mut touched = std::collections::HashSet::new();
        let run = Run::new(self, txn);
        let mut flush = |batch: &mut Vec<Vec<Value>>, run: &Run| -> SqlResult<()> {
            for values in batch.drain(..) {
                let mut full = defaults.clone();
                for column in &per_row {
                    full[*column] = insert.defaults[*column].eval(&[], &self.context)?;
                }
                for (value, column) in values.into_iter().zip(&insert.targets) {
                    full[*column] = value;
                }
                let full = self.conform(table, full)?;
                let mut txn = run.txn.borrow_mut();
                let written = match &insert.on_conflict {
                    None => {
                        self.insert_row(table, &full, &mut txn)?;
                        full
                    }
                    Some(on_conflict) => {
                        let outcome = self.insert_on_conflict(
                            table,
                            full,
                            on_conflict,
                            &mut touched,
                            &mut txn,
                        );
                        match outcome? {
                            Some(row) => row,
                            None => continue,
                        }
                    }
                };
                if let Some(returning) = &insert.returning {
                    returned.push(self.project(&returning.projection, &written)?);
                }
                count += 1;
            }
            Ok(())
        };
        run.produce(&insert.query.root, &mut |row| {
            batch.push(row);
            if batch.len() >= BATCH {
                flush(&mut batch, &run)?;
            }
            Ok(true)
        })?;
        flush(&mut batch, &run)?;
        Ok(dml_outcome(
            "INSERT 0",
            count,
            insert.returning.as_ref(),
            returned,
        ))
    }

    fn project(&self, projection: &[Expr], row: &[Value]) -> SqlResult<Vec<Value>> {
        projection
            .iter()
            .map(|expr| expr.eval(row, &self.context))
            .collect()
    }

    /// Casts a new row to the table's column types and checks NOT NULL (and that an enum
    /// column's value is one of its type's labels, whatever the row came from).
    fn conform(&self, table: &Table, values: Vec<Value>) -> SqlResult<Vec<Value>> {
        values
            .into_iter()
            .zip(&table.def.columns)
            .map(|(value, column)| {
                let value = value.cast(column.data_type)?;
                if let (DataType::Enum(oid), Value::Text(label)) = (column.data_type, &value) {
                    self.catalog.existing_enum_type(oid)?.check(label)?;
                }
                if value.is_null() && column.not_null {
                    return Err(SqlError::new(
                        sqlstate::NOT_NULL_VIOLATION,
                        format!(
                            "null value in column \"{}\" of relation \"{}\" violates not-null \
                             constraint",
                            column.name, table.def.name
                        ),
                    ));
                }
                Ok(value)
            })
            .collect()
    }

    fn row_key(&self, table: &Table, values: &[Value]) -> SqlResult<Vec<u8>> {
        table.row_key(self.db, values)
    }

    /// Inserts a row with its index entries; returns its engine key.
    fn insert_row(
        &self,
        table: &Table,
        values: &[Value],
        txn: &mut Transaction,
    ) -> SqlResult<Vec<u8>> {
        self.check_row(table, values)?;
        let key = self.row_key(table, values)?;
        let encoded = row::encode(values, &table.def.types())?;
        txn.insert(table.tree, &key, &encoded)
            .map_err(|error| match error {
                hayate_engine::Error::DuplicateKey => duplicate_key(table, values),
                other => other.into(),
            })?;
        self.add_entries(table, values, &key, None, txn)?;
        // After the write, so that a row may reference itself.
        self.check_references(table, None, values, txn)?;
        Ok(key)
    }

    fn update(
        &self,
        read: &TableRead,
        assignments: &[(usize, Expr)],
        returning: Option<&Returning>,
        txn: &mut Transaction,
    ) -> SqlResult<Outcome> {
        let table = &read.table;
        // New values first (they may run subqueries), then the writes.
        let rows = {
            let run = Run::new(self, txn);
            let context = run.context();
            let mut rows = Vec::new();
            for (key, old) in run.read_keyed(read)? {
                let Some(old) = self.latest_matching(&run, read, &key, old, RowLock::UPDATE)?
                else {
                    continue;
                };
                let mut new = old.clone();
                for (column, expr) in assignments {
                    new[*column] = expr.eval(&old, &context)?;
                }
                rows.push((key, old, new));
            }
            rows
        };
        let mut returned = Vec::new();
        for (key, old, new) in &rows {
            let new = self.conform(table, new.clone())?;
            self.replace_row(table, key, old, &new, txn)?;
            if let Some(returning) = returning {
                returned.push(self.project(&returning.projection, &new)?);
            }
        }
        Ok(dml_outcome("UPDATE", rows.len(), returning, returned))
    }

    /// At READ COMMITTED, the version of a row an UPDATE, a DELETE or a SELECT ... FOR UPDATE
    /// works on: the row is locked and its newest committed version read; None if that
    /// version is gone or no longer passes the statement's WHERE. At REPEATABLE READ the row
    /// as read (a later write of a row changed since the snapshot fails with 40001).
    /// `lock` says what to do about a row another transaction holds (None: SKIP LOCKED
    /// skipped it).
    fn latest_matching(
        &self,
        run: &Run,
        read: &TableRead,
        key: &[u8],
        read_row: Vec<Value>,
        lock: RowLock,
    ) -> SqlResult<Option<Vec<Value>>> {
        if !self.read_committed {
            return Ok(Some(read_row));
        }
        let table = &read.table;
        let latest = lock_row(&mut run.txn.borrow_mut(), table, key, lock, true)?;
        let Some(Some(raw)) = latest else {
            return Ok(None);
        };
        let latest = row::decode(&raw, &table.def.types(), &table.def.name)?;
        if latest == read_row {
            return Ok(Some(latest));
        }
        if let Some(filter) = &read.filter {
            if !truth(&filter.eval(&latest, &run.context())?)? {
                return Ok(None);
            }
        }
        Ok(Some(latest))
    }

    fn delete(
        &self,
        read: &TableRead,
        returning: Option<&Returning>,
        txn: &mut Transaction,
    ) -> SqlResult<Outcome> {
        let rows = {
            let run = Run::new(self, txn);
            let mut rows = Vec::new();
            for (key, old) in run.read_keyed(read)? {
                if let Some(old) = self.latest_matching(&run, read, &key, old, RowLock::UPDATE)? {
                    rows.push((key, old));
                }
            }
            rows
        };
        let mut returned = Vec::new();
        for (key, old) in &rows {
            txn.delete(read.table.tree, key)?;
            self.remove_entries(&read.table, old, key, None, txn)?;
            self.referenced_row_changed(&read.table, old, None, txn)?;
            if let Some(returning) = returning {
                returned.push(self.project(&returning.projection, old)?);
            }
        }
        Ok(dml_outcome("DELETE", rows.len(), returning, returned))
    }
}

/// Sorts (sort keys, row) pairs by ORDER BY (`compare_sort_keys`). The sort is stable.
#[allow(dead_code)]
fn sort_output(output: &mut [(Vec<Value>, Vec<Value>)], order_by: &[SortKey]) {
    output.sort_by(|(a, _), (b, _)| compare_sort_keys(a, b, order_by));
}

/// The order of two rows' ORDER BY values: NULLs last ascending and first descending unless
/// NULLS FIRST/LAST says otherwise.
pub(crate) fn compare_sort_keys(a: &[Value], b: &[Value], order_by: &[SortKey]) -> Ordering {
    for (index, key) in order_by.iter().enumerate() {
        let ordering = match (a[index].is_null(), b[index].is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) if key.nulls_first => Ordering::Less,
            (true, false) => Ordering::Greater,
            (false, true) if key.nulls_first => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ if key.descending => a[index].sort_order(&b[index]).reverse(),
            _ => a[index].sort_order(&b[index]),
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

/// The keys that start with `prefix` (every key for an empty one).
fn prefix_range(prefix: Vec<u8>) -> KeyRange {
    if prefix.is_empty() {
        return (Bound::Unbounded, Bound::Unbounded);
    }
    let end = match key::prefix_successor(&prefix) {
        Some(end) => Bound::Excluded(end),
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix), end)
}

fn as_slice(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key.as_slice()),
        Bound::Excluded(key) => Bound::Excluded(key.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A constant converted to a key column's type for a lookup (see `key::key_value`).
fn key_value(value: Value, data_type: DataType) -> SqlResult<Option<Value>> {
    key::key_value(value, data_type)
}

fn duplicate_key(table: &Table, values: &[Value]) -> SqlError {
    let (columns, key): (Vec<String>, Vec<String>) = if table.has_row_id() {
        (Vec::new(), Vec::new())
    } else {
        table
            .def
            .primary_key
            .iter()
            .map(|c| {
                (
                    table.def.columns[*c].name.clone(),
                    values[*c].to_text().unwrap_or_default(),
                )
            })
            .unzip()
    };
    SqlError::new(
        sqlstate::UNIQUE_VIOLATION,
        format!(
            "duplicate key value violates unique constraint \"{}\"",
            table.def.primary_key_name()
        ),
    )
    .with_detail(format!(
        "Key ({})=({}) already exists.",
        columns.join(", "),
        key.join(", ")
    ))
}

fn dml_outcome(
    command: &str,
    count: usize,
    returning: Option<&Returning>,
    rows: Vec<Vec<Value>>,
) -> Outcome {
    match returning {
        Some(returning) => Outcome::Rows {
            columns: returning.columns.clone(),
            rows,
            command: command.to_string(),
        },
        None => Outcome::Command {
            tag: format!("{command} {count}"),
        },
    }
}

/// Locks a row for a locking read as `lock` says and returns its value: the newest committed
/// version when `latest` (READ COMMITTED), else the snapshot's (REPEATABLE READ, 40001 if it
/// changed since). None when SKIP LOCKED met a row another transaction holds; NOWAIT fails
/// there with 55P03.
fn lock_row(
    txn: &mut Transaction,
    table: &Table,
    key: &[u8],
    lock: RowLock,
    latest: bool,
) -> SqlResult<Option<Option<Vec<u8>>>> {
    let waits = lock.wait == LockWait::Wait;
    let locked = match (lock.shared && latest, latest) {
        // FOR SHARE at READ COMMITTED: a shared lock (REPEATABLE READ's check against the
        // snapshot takes the row lock exclusively, as FOR UPDATE does).
        (true, _) if waits => Locked::Row(txn.lock_shared_latest(table.tree, key)?),
        (true, _) => txn.try_lock_shared_latest(table.tree, key)?,
        (false, true) if waits => Locked::Row(txn.lock_latest(table.tree, key)?),
        (false, false) if waits => Locked::Row(txn.get_for_update(table.tree, key)?),
        (false, true) => txn.try_lock_latest(table.tree, key)?,
        (false, false) => txn.try_get_for_update(table.tree, key)?,
    };
    match (locked, lock.wait) {
        (Locked::Row(row), _) => Ok(Some(row)),
        (Locked::Busy, LockWait::SkipLocked) => Ok(None),
        (Locked::Busy, _) => Err(SqlError::new(
            sqlstate::LOCK_NOT_AVAILABLE,
            format!(
                "could not obtain lock on row in relation \"{}\"",
                table.def.name
            ),
        )),
    }
}

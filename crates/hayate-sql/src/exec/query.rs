//! Running query plans: each operator pushes its rows into its parent's sink.
//!
//! Leaves (table reads, system tables, generate_series, VALUES) produce rows one by one;
//! Filter, Project, Limit, Distinct and the probe side of joins pass them on without holding
//! them, so a LIMIT stops a scan early and INSERT ... SELECT streams. Sort, aggregation,
//! Distinct, the build side of a hash join and both sides of a merge join hold their input up
//! to the session's `work_mem` and spill to temporary files beyond it (`spill`); the inner side
//! of a nested loop is held in memory.
//!
//! Subqueries in expressions run through `SubqueryRunner`: an uncorrelated one once per
//! statement (its rows are kept), a correlated one per evaluation, with the current row
//! pushed on a stack that `Expr::Outer` reads.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::rc::Rc;

use super::run::{hash_key, Run, Sink};
use super::spill::{self, Built, JoinBuild, MatchingGroups, SortBuffer, SortedRows};
use super::{as_slice, compare_sort_keys, KeyRange, KeyedRow};
use crate::catalog::Table;
use crate::encoding::row;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::access::{Access, IndexAccess, IndexLookup};
use crate::plan::expr::{truth, BinaryOp, SubqueryRunner};
use crate::plan::{
    EvalContext, Expr, JoinKind, Relation, RowLock, Subquery, SubqueryKind, TableRead,
};
use crate::types::{DataType, Value};

const CARDINALITY_VIOLATION: &str = "21000";

/// Whether every expression is a column of the input (one of the first 64), none of them
/// twice: a projection that can move the values out of the input row.
fn distinct_columns(exprs: &[Expr]) -> bool {
    let mut seen = 0u64;
    exprs.iter().all(|expr| match expr {
        Expr::Column(index) if *index < 64 && seen & (1 << index) == 0 => {
            seen |= 1 << index;
            true
        }
        _ => false,
    })
}

impl<'r, 'e> Run<'r, 'e> {
    /// WITH RECURSIVE: the base rows, then the step over the rows its last run added, until
    /// a run adds none (or the sink stops it: a LIMIT ends an endless recursion; a cancel
    /// ends any).
    fn recursive_union(
        &self,
        base: &Relation,
        step: &Relation,
        work: usize,
        all: bool,
        sink: &mut Sink,
    ) -> SqlResult<bool> {
        let mut seen = HashSet::new();
        let mut added = Vec::new();
        let mut keep = |row: Vec<Value>, added: &mut Vec<Vec<Value>>| -> SqlResult<bool> {
            if !all && !seen.insert(hash_key(&row)) {
                return Ok(true);
            }
            added.push(row.clone());
            sink(row)
        };
        if !self.produce(base, &mut |row| keep(row, &mut added))? {
            return Ok(false);
        }
        while !added.is_empty() {
            crate::interrupt::check()?;
            self.work_tables
                .borrow_mut()
                .insert(work, Rc::new(std::mem::take(&mut added)));
            let mut next = Vec::new();
            let going = self.produce(step, &mut |row| keep(row, &mut next))?;
            added = next;
            if !going {
                return Ok(false);
            }
        }
        self.work_tables.borrow_mut().remove(&work);
        Ok(true)
    }

    /// All rows of a relation.
    pub fn collect(&self, relation: &Relation, limit: Option<usize>) -> SqlResult<Vec<Vec<Value>>> {
        let mut rows = Vec::new();
        if limit == Some(0) {
            return Ok(rows);
        }
        self.produce(relation, &mut |row| {
            rows.push(row);
            Ok(limit.is_none_or(|limit| rows.len() < limit))
        })?;
        Ok(rows)
    }

    /// Pushes the rows of `relation` into `sink`; false if the sink stopped it.
    pub fn produce(&self, relation: &Relation, sink: &mut Sink) -> SqlResult<bool> {
        match relation {
            Relation::Values(rows) => {
                for exprs in rows {
                    let row = exprs
                        .iter()
                        .map(|e| self.eval(e, &[]))
                        .collect::<SqlResult<_>>()?;
                    if !sink(row)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Relation::Table { read, lock } => {
                self.read_table(read, *lock, &[], &mut |_, row| sink(row))
            }
            Relation::System(table) => {
                let context = &self.exec.context;
                let rows = table.rows_for(
                    self.exec.catalog,
                    context.user_name,
                    context.database_name,
                    context.settings,
                );
                for mut row in rows {
                    row.push(Value::Int(table.oid)); // tableoid
                    if !sink(row)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Relation::Series { start, stop, step } => self.series(start, stop, step.as_ref(), sink),
            Relation::LockRows { input, read, lock } => self.produce(input, &mut |row| match self
                .lock_sorted_row(read, *lock, row)?
            {
                Some(row) => sink(row),
                None => Ok(true),
            }),
            Relation::Filter { input, predicate } => self.produce(input, &mut |row| {
                if self.holds(predicate, &row)? {
                    sink(row)
                } else {
                    Ok(true)
                }
            }),
            Relation::Project { input, exprs } => {
                let moves = distinct_columns(exprs);
                self.produce(input, &mut |mut row| {
                    let projected = match moves {
                        // The input row is ours: its values move instead of being copied.
                        true => exprs
                            .iter()
                            .map(|e| match e {
                                Expr::Column(index) => {
                                    std::mem::replace(&mut row[*index], Value::Null)
                                }
                                _ => unreachable!("distinct_columns checked it"),
                            })
                            .collect(),
                        false => exprs
                            .iter()
                            .map(|e| self.eval(e, &row))
                            .collect::<SqlResult<_>>()?,
                    };
                    sink(projected)
                })
            }
            Relation::Limit {
                input,
                limit,
                offset,
            } => {
                let limit = limit
                    .as_ref()
                    .map(|e| self.count_value(e, "LIMIT"))
                    .transpose()?
                    .flatten();
                let mut skip = offset
                    .as_ref()
                    .map(|e| self.count_value(e, "OFFSET"))
                    .transpose()?
                    .flatten()
                    .unwrap_or(0);
                if limit == Some(0) {
                    return Ok(true);
                }
                let mut emitted = 0usize;
                let mut stopped = false;
                self.produce(input, &mut |row| {
                    if skip > 0 {
                        skip -= 1;
                        return Ok(true);
                    }
                    if !sink(row)? {
                        stopped = true;
                        return Ok(false);
                    }
                    emitted += 1;
                    Ok(limit.is_none_or(|limit| emitted < limit))
                })?;
                Ok(!stopped)
            }
            Relation::Sort { input, keys } => {
                let compare = Box::new(|a: &[Value], b: &[Value]| compare_sort_keys(a, b, keys));
                let mut sorter = SortBuffer::new(self.space(), self.work_mem(), compare);
                self.produce(input, &mut |row| {
                    let sort_keys = keys
                        .iter()
                        .map(|key| self.eval(&key.expr, &row))
                        .collect::<SqlResult<_>>()?;
                    sorter.push(sort_keys, row)?;
                    Ok(true)
                })?;
                let mut sorted = sorter.finish()?;
                while let Some((_, row)) = sorted.next_row()? {
                    if !sink(row)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Relation::Distinct { input, on } => {
                let mut distinct = spill::Distinct::new(self.space(), self.work_mem());
                let streamed = self.produce(input, &mut |row| {
                    let key = match on {
                        None => hash_key(&row),
                        Some(exprs) => {
                            let values: Vec<Value> = exprs
                                .iter()
                                .map(|e| self.eval(e, &row))
                                .collect::<SqlResult<_>>()?;
                            hash_key(&values)
                        }
                    };
                    match distinct.push(key, row)? {
                        Some(row) => sink(row),
                        None => Ok(true),
                    }
                })?;
                Ok(streamed && distinct.finish(sink)?)
            }
            Relation::Aggregate { input, aggregation } => {
                let context = self.context();
                let mut aggregate =
                    spill::Aggregate::new(self.space(), self.work_mem(), aggregation);
                self.produce(input, &mut |row| {
                    aggregate.push(row, &context)?;
                    Ok(true)
                })?;
                aggregate.finish(&context, sink)
            }
            Relation::Union { left, right, all } => {
                let mut seen = HashSet::new();
                let mut pass = |row: Vec<Value>| {
                    if *all || seen.insert(hash_key(&row)) {
                        sink(row)
                    } else {
                        Ok(true)
                    }
                };
                Ok(self.produce(left, &mut pass)? && self.produce(right, &mut pass)?)
            }
            Relation::SetOperation {
                left,
                right,
                operator,
                all,
            } => super::set_operation::produce(self, left, right, *operator, *all, sink),
            Relation::RecursiveUnion {
                base,
                step,
                work,
                all,
            } => self.recursive_union(base, step, *work, *all, sink),
            Relation::WorkTable { work, .. } => {
                let rows = self.work_tables.borrow().get(work).cloned();
                for row in rows.iter().flat_map(|rows| rows.iter()) {
                    if !sink(row.clone())? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Relation::ProjectSet { input, calls } => self.produce(input, &mut |row| {
                let mut columns = Vec::with_capacity(calls.len());
                for call in calls {
                    let args = call
                        .args
                        .iter()
                        .map(|arg| self.eval(arg, &row))
                        .collect::<SqlResult<Vec<Value>>>()?;
                    columns.push(super::set_function::values(call.function, &args)?);
                }
                let count = columns.iter().map(Vec::len).max().unwrap_or(0);
                for position in 0..count {
                    let mut out = row.clone();
                    for column in &columns {
                        out.push(column.get(position).cloned().unwrap_or(Value::Null));
                    }
                    if !sink(out)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }),
            Relation::Window { input, calls } => {
                let rows = self.collect(input, None)?;
                for row in super::window::run(calls, rows, &self.context())? {
                    if !sink(row)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Relation::LateralJoin {
                left,
                right,
                kind,
                condition,
            } => super::lateral::produce(self, left, right, *kind, condition.as_ref(), sink),
            Relation::FullJoin {
                left,
                right,
                left_keys,
                right_keys,
                condition,
            } => super::full_join::produce(
                self,
                left,
                right,
                (left_keys, right_keys),
                condition.as_ref(),
                sink,
            ),
            Relation::NestedLoopJoin {
                left,
                right,
                kind,
                condition,
            } => {
                let inner = self.collect(right, None)?;
                let width = right.width();
                self.produce(left, &mut |outer| {
                    let Some(matched) = self.join_with(&outer, &inner, condition.as_ref(), sink)?
                    else {
                        return Ok(false);
                    };
                    self.unmatched(*kind, matched, outer, width, sink)
                })
            }
            Relation::HashJoin {
                left,
                right,
                kind,
                left_keys,
                right_keys,
                condition,
            } => {
                let may_spill = matches!(kind, JoinKind::Inner | JoinKind::Left);
                let mut build = JoinBuild::new(self.space(), self.work_mem(), may_spill);
                self.produce(right, &mut |row| {
                    if let Some(key) = self.join_key(right_keys, &row)? {
                        build.push(key, row)?;
                    }
                    Ok(true)
                })?;
                let width = right.width();
                let mut probe = |outer: Vec<Value>, candidates: &[Vec<Value>]| {
                    let Some(matched) =
                        self.join_with(&outer, candidates, condition.as_ref(), sink)?
                    else {
                        return Ok(false);
                    };
                    self.unmatched(*kind, matched, outer, width, sink)
                };
                match build.finish()? {
                    Built::Memory(table) => self.produce(left, &mut |outer| {
                        let key = self.join_key(left_keys, &outer)?;
                        let candidates = key.and_then(|key| table.get(&key));
                        probe(outer, candidates.map_or(&[][..], Vec::as_slice))
                    }),
                    Built::Spilled(mut spilled) => {
                        // Probe rows go to their partitions; a NULL key matches nothing.
                        let streamed = self.produce(left, &mut |outer| match self
                            .join_key(left_keys, &outer)?
                        {
                            Some(key) => spilled.probe(&key, &outer).map(|()| true),
                            None => probe(outer, &[]),
                        })?;
                        Ok(streamed && spilled.finish(&mut probe)?)
                    }
                }
            }
            Relation::IndexJoin {
                left,
                right,
                lock,
                kind,
                condition,
            } => {
                let width = right.table.def.columns.len();
                self.produce(left, &mut |outer| {
                    let mut matched = false;
                    let mut stopped = false;
                    self.read_table(right, *lock, &outer, &mut |_, found| {
                        let mut joined = outer.clone();
                        joined.extend(found);
                        if let Some(condition) = condition {
                            if !self.holds(condition, &joined)? {
                                return Ok(true);
                            }
                        }
                        matched = true;
                        stopped = !sink(joined)?;
                        Ok(!stopped)
                    })?;
                    if stopped {
                        return Ok(false);
                    }
                    self.unmatched(*kind, matched, outer, width, sink)
                })
            }
            Relation::MergeJoin {
                left,
                right,
                kind,
                left_keys,
                right_keys,
                condition,
            } => self.merge_join(
                left,
                right,
                *kind,
                left_keys,
                right_keys,
                condition.as_ref(),
                sink,
            ),
        }
    }

    /// Sort-merge join. Both sides are sorted on their keys (already sorted input, the case
    /// the planner picks it for, sorts in one pass), externally past `work_mem`; the inner
    /// side is read one group of equal keys at a time. Rows with a NULL key match nothing.
    #[allow(clippy::too_many_arguments)]
    fn merge_join(
        &self,
        left: &Relation,
        right: &Relation,
        kind: JoinKind,
        left_keys: &[Expr],
        right_keys: &[Expr],
        condition: Option<&Expr>,
        sink: &mut Sink,
    ) -> SqlResult<bool> {
        let sorted = |relation: &Relation, keys: &[Expr]| -> SqlResult<SortedRows> {
            let mut sorter = SortBuffer::new(self.space(), self.work_mem(), Box::new(compare_keys));
            self.produce(relation, &mut |row| {
                let values = keys
                    .iter()
                    .map(|key| self.eval(key, &row))
                    .collect::<SqlResult<Vec<_>>>()?;
                sorter.push(values, row)?;
                Ok(true)
            })?;
            sorter.finish()
        };
        let mut outer = sorted(left, left_keys)?;
        let mut inner = MatchingGroups::new(sorted(right, right_keys)?, compare_keys)?;
        let width = right.width();
        while let Some((key, row)) = outer.next_row()? {
            let mut matched = false;
            if !key.iter().any(Value::is_null) {
                for (_, candidate) in inner.matching(&key)? {
                    let mut joined = row.clone();
                    joined.extend(candidate.iter().cloned());
                    if let Some(condition) = condition {
                        if !self.holds(condition, &joined)? {
                            continue;
                        }
                    }
                    matched = true;
                    if !sink(joined)? {
                        return Ok(false);
                    }
                }
            }
            if !self.unmatched(kind, matched, row, width, sink)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A LEFT JOIN's left row without a match: padded with NULLs.
    /// Sends `outer` joined with each candidate that satisfies `condition` to `sink`: Some(any
    /// matched), or None once the sink wants no more rows.
    fn join_with(
        &self,
        outer: &[Value],
        candidates: &[Vec<Value>],
        condition: Option<&Expr>,
        sink: &mut Sink,
    ) -> SqlResult<Option<bool>> {
        let mut matched = false;
        for candidate in candidates {
            let mut joined = outer.to_vec();
            joined.extend(candidate.iter().cloned());
            if let Some(condition) = condition {
                if !self.holds(condition, &joined)? {
                    continue;
                }
            }
            matched = true;
            if !sink(joined)? {
                return Ok(None);
            }
        }
        Ok(Some(matched))
    }

    fn unmatched(
        &self,
        kind: JoinKind,
        matched: bool,
        outer: Vec<Value>,
        width: usize,
        sink: &mut Sink,
    ) -> SqlResult<bool> {
        if matched || kind != JoinKind::Left {
            return Ok(true);
        }
        let mut padded = outer;
        padded.resize_with(padded.len() + width, || Value::Null);
        sink(padded)
    }

    /// The hash key of a join row (None: a key is NULL, which matches nothing).
    fn join_key(&self, keys: &[Expr], row: &[Value]) -> SqlResult<Option<Vec<u8>>> {
        let mut values = Vec::with_capacity(keys.len());
        for key in keys {
            let value = self.eval(key, row)?;
            if value.is_null() {
                return Ok(None);
            }
            values.push(value);
        }
        Ok(Some(hash_key(&values)))
    }

    fn series(
        &self,
        start: &Expr,
        stop: &Expr,
        step: Option<&Expr>,
        sink: &mut Sink,
    ) -> SqlResult<bool> {
        let integer = |expr: &Expr| -> SqlResult<Option<i64>> {
            match self.eval(expr, &[])? {
                Value::Null => Ok(None),
                Value::Int(v) => Ok(Some(v)),
                other => match other.cast(crate::types::DataType::Int8)? {
                    Value::Int(v) => Ok(Some(v)),
                    _ => Ok(None),
                },
            }
        };
        let (Some(start), Some(stop)) = (integer(start)?, integer(stop)?) else {
            return Ok(true);
        };
        let step = match step {
            Some(step) => match integer(step)? {
                Some(step) => step,
                None => return Ok(true),
            },
            None => 1,
        };
        if step == 0 {
            return Err(SqlError::new(
                sqlstate::INVALID_PARAMETER_VALUE,
                "step size cannot equal zero",
            ));
        }
        let mut current = start;
        while (step > 0 && current <= stop) || (step < 0 && current >= stop) {
            if !sink(vec![Value::Int(current)])? {
                return Ok(false);
            }
            match current.checked_add(step) {
                Some(next) => current = next,
                None => break,
            }
        }
        Ok(true)
    }

    /// A LIMIT or OFFSET value; None for NULL (no limit).
    fn count_value(&self, expr: &Expr, what: &str) -> SqlResult<Option<usize>> {
        match self.eval(expr, &[])? {
            Value::Null => Ok(None),
            Value::Int(v) if v >= 0 => Ok(Some(v as usize)),
            _ => Err(SqlError::new(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!("{what} must not be negative"),
            )),
        }
    }

    /// A row of `read`'s table leaving a sort or a filter, locked as `lock` says (LockRows):
    /// the row to return (at READ COMMITTED its newest version, if that still passes the
    /// table's filter), or None to leave it out.
    fn lock_sorted_row(
        &self,
        read: &TableRead,
        lock: RowLock,
        row: Vec<Value>,
    ) -> SqlResult<Option<Vec<Value>>> {
        let table = &read.table;
        let key = table.row_key(self.exec.db, &row)?;
        if self.exec.read_committed {
            return self.exec.latest_matching(self, read, &key, row, lock);
        }
        let locked = super::lock_row(&mut self.txn.borrow_mut(), table, &key, lock, false)?;
        Ok(matches!(locked, Some(Some(_))).then_some(row))
    }

    /// Reads the rows of `read` that pass its filter, with their keys. The access path's
    /// expressions are evaluated on `key_row` (the left row of an index join, else empty);
    /// `lock` locks each row read (FOR UPDATE / FOR SHARE).
    pub fn read_table(
        &self,
        read: &TableRead,
        lock: Option<RowLock>,
        key_row: &[Value],
        f: &mut dyn FnMut(Vec<u8>, Vec<Value>) -> SqlResult<bool>,
    ) -> SqlResult<bool> {
        let table = &read.table;
        let types = table.def.types();
        let context = self.context();
        // A filter reading a few of many columns runs on those alone: only the rows it keeps
        // are decoded whole.
        let filter_columns = read.filter.as_ref().and_then(|filter| {
            let mut columns = Vec::new();
            let mut wanted = vec![false; types.len()];
            (filter.columns_read(&mut columns) && columns.len() * 2 < types.len()).then(|| {
                for column in columns {
                    wanted[column] = true;
                }
                wanted
            })
        });
        // The columns the plan reads of the rows that pass (None: all).
        let decode = |raw: &[u8]| match &read.columns {
            Some(wanted) if lock.is_none() => {
                row::decode_some(raw, &types, wanted, &table.def.name)
            }
            _ => row::decode(raw, &types, &table.def.name),
        };
        // Whether a row passes the filter; with a filter reading few columns, only those.
        let passes = |filter: &Expr, raw: &[u8]| -> SqlResult<bool> {
            let name = &table.def.name;
            let values = match &filter_columns {
                Some(wanted) => row::decode_some(raw, &types, wanted, name)?,
                None => row::decode(raw, &types, name)?,
            };
            truth(&filter.eval(&values, &context)?)
        };
        // A pure filter is tried on each row of a scan or sorted read while it is in its
        // page, its `column = constant` parts first on the row's encoding: the rows it refuses
        // are never copied. A row it errs on, or any once the statement is cancelled, is let
        // through to `keep`, which raises the error.
        let prefilter = read.filter.as_ref().filter(|filter| filter.is_pure());
        let equal = prefilter.and_then(|filter| equal_columns(filter, table, &context));
        let mut ahead = |raw: &[u8]| match prefilter {
            Some(filter) => {
                crate::interrupt::check().is_err()
                    || (!equal
                        .as_ref()
                        .is_some_and(|equal| equal.refuses(raw, &types))
                        && passes(filter, raw).unwrap_or(true))
            }
            None => true,
        };
        let mut keep = |key: Vec<u8>, raw: &[u8]| -> SqlResult<bool> {
            let values = match &read.filter {
                Some(filter) if filter_columns.is_some() => {
                    if !passes(filter, raw)? {
                        return Ok(true);
                    }
                    decode(raw)?
                }
                Some(filter) => {
                    let values = row::decode(raw, &types, &table.def.name)?;
                    if !truth(&filter.eval(&values, &context)?)? {
                        return Ok(true);
                    }
                    values
                }
                None => decode(raw)?,
            };
            let Some(lock) = lock else {
                return f(key, values);
            };
            if self.exec.read_committed {
                // Locks the row and goes on with its newest committed version, if that still
                // passes the filter, as UPDATE does (PostgreSQL's FOR UPDATE re-reads too).
                return match self.exec.latest_matching(self, read, &key, values, lock)? {
                    Some(latest) => f(key, latest),
                    None => Ok(true),
                };
            }
            // REPEATABLE READ: a row changed since the snapshot is a serialization failure.
            match super::lock_row(&mut self.txn.borrow_mut(), table, &key, lock, false)? {
                Some(Some(_)) => f(key, values),
                _ => Ok(true),
            }
        };
        // An index nested loop's lookup values read the outer row (`key_row`): their values
        // for this row.
        let bound;
        let access = match &read.access {
            Access::Index(path) if !key_row.is_empty() => {
                bound = Access::Index(bound_lookup(path, key_row, &context)?);
                &bound
            }
            access => access,
        };
        match access {
            Access::Point(values) => {
                let Some(key) = self.exec.point_key(table, values, key_row, &context)? else {
                    return Ok(true);
                };
                let raw = self.txn.borrow().get(table.tree, &key)?;
                match raw {
                    Some(raw) => keep(key, &raw),
                    None => Ok(true),
                }
            }
            Access::Index(index) if read.index_order => {
                // Entries in the index's order, each row read as its entry comes, the
                // transaction borrowed only for each read (a locking read borrows it
                // mutably): a LIMIT stops the reads early.
                let Some((start, end)) = self.exec.index_entries(table, index, &context)? else {
                    return Ok(true);
                };
                let tree = table.index_trees[index.index];
                let txn = self.txn.borrow();
                let entries = match read.descending {
                    false => txn.scan(tree, as_slice(&start), as_slice(&end))?,
                    true => txn.scan_reverse(tree, as_slice(&start), as_slice(&end))?,
                };
                drop(txn);
                for entry in entries {
                    crate::interrupt::check()?;
                    let (_, key) = entry?;
                    let raw = self.txn.borrow().get(table.tree, &key)?;
                    if let Some(raw) = raw {
                        if !keep(key, &raw)? {
                            return Ok(false);
                        }
                    }
                }
                Ok(true)
            }
            Access::Index(index) => {
                // The keys first, then each row, the transaction borrowed only for the read
                // (a locking read borrows it mutably): a LIMIT stops the reads early.
                let keys = self
                    .exec
                    .index_keys(table, index, &self.txn.borrow(), &context)?;
                super::index::rows_of_keys(
                    keys,
                    |chunk| {
                        let txn = self.txn.borrow();
                        Ok(txn.get_sorted_where(table.tree, chunk, &mut ahead)?)
                    },
                    |key, raw| keep(key, raw),
                )
            }
            Access::Union(branches) => {
                // Each row once, in primary key order, as every path reads.
                let mut found = BTreeMap::new();
                let mut read = HashSet::new();
                for branch in branches {
                    self.read_branch(table, branch, &context, &mut read, &mut found)?;
                }
                for (key, raw) in found {
                    if !keep(key, &raw)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            access => {
                let Some((lower, upper)) = self.exec.range(table, access, &context)? else {
                    return Ok(true);
                };
                let txn = self.txn.borrow();
                let mut scan = match read.descending {
                    false => txn.scan(table.tree, as_slice(&lower), as_slice(&upper))?,
                    true => txn.scan_reverse(table.tree, as_slice(&lower), as_slice(&upper))?,
                };
                drop(txn);
                while let Some((key, raw)) = scan.next_row_where(&mut ahead)? {
                    crate::interrupt::check()?;
                    if !keep(key, &raw)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }

    /// Adds the rows of one branch of a union (a point lookup, a range or an index read,
    /// with constant expressions) to `found`, by primary key. A branch whose key range (in
    /// the table or an index) `read` holds is not read again (`uid IN ($1, ..., $20)` with
    /// repeated values, as BenchBase's twitter pads its lists); an index read narrowed by
    /// other indexes is always read (its range alone does not say which rows it gives).
    fn read_branch(
        &self,
        table: &Table,
        access: &Access,
        context: &EvalContext,
        read: &mut HashSet<(usize, KeyRange)>,
        found: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    ) -> SqlResult<()> {
        let txn = self.txn.borrow();
        match access {
            Access::Point(values) => {
                if let Some(key) = self.exec.point_key(table, values, &[], context)? {
                    let range = (Bound::Included(key.clone()), Bound::Included(key.clone()));
                    if !read.insert((usize::MAX, range)) {
                        return Ok(());
                    }
                    if let Some(raw) = txn.get(table.tree, &key)? {
                        found.insert(key, raw);
                    }
                }
            }
            Access::Index(index) => {
                if index.narrowed_by.is_empty() {
                    if let Some(range) = self.exec.index_entries(table, index, context)? {
                        if !read.insert((index.index, range)) {
                            return Ok(());
                        }
                    }
                }
                self.exec
                    .read_index(table, index, &txn, context, &mut |key, raw| {
                        found.insert(key, raw.to_vec());
                        Ok(())
                    })?
            }
            access => {
                let Some((lower, upper)) = self.exec.range(table, access, context)? else {
                    return Ok(());
                };
                if !read.insert((usize::MAX, (lower.clone(), upper.clone()))) {
                    return Ok(());
                }
                for entry in txn.scan(table.tree, as_slice(&lower), as_slice(&upper))? {
                    crate::interrupt::check()?;
                    let (key, raw) = entry?;
                    found.insert(key, raw);
                }
            }
        }
        Ok(())
    }

    /// The rows of `read` (UPDATE and DELETE read them all before writing).
    pub fn read_keyed(&self, read: &TableRead) -> SqlResult<Vec<KeyedRow>> {
        let mut rows = Vec::new();
        self.read_table(read, None, &[], &mut |key, values| {
            rows.push((key, values));
            Ok(true)
        })?;
        Ok(rows)
    }

    /// The rows of a subquery: kept for the statement when uncorrelated, else run with
    /// `row` as the enclosing row.
    fn subquery_rows(&self, subquery: &Subquery, row: &[Value]) -> SqlResult<Rc<Vec<Vec<Value>>>> {
        let limit = match subquery.kind {
            SubqueryKind::Exists => Some(1),
            SubqueryKind::Scalar => Some(2),
            SubqueryKind::In(_) | SubqueryKind::Array => None,
        };
        if !subquery.correlated {
            let id = subquery as *const Subquery as usize;
            if let Some(rows) = self.cache.borrow().get(&id) {
                return Ok(rows.clone());
            }
            let rows = Rc::new(self.collect(&subquery.plan.root, limit)?);
            self.cache.borrow_mut().insert(id, rows.clone());
            return Ok(rows);
        }
        self.outer.borrow_mut().push(row.to_vec());
        let rows = self.collect(&subquery.plan.root, limit);
        self.outer.borrow_mut().pop();
        Ok(Rc::new(rows?))
    }
}

impl SubqueryRunner for Run<'_, '_> {
    fn subquery(
        &self,
        subquery: &Subquery,
        row: &[Value],
        context: &EvalContext,
    ) -> SqlResult<Value> {
        match &subquery.kind {
            SubqueryKind::In(left) => {
                let value = left.eval(row, context)?;
                let rows = self.subquery_rows(subquery, row)?;
                if rows.is_empty() {
                    return Ok(Value::Bool(false));
                }
                if value.is_null() {
                    return Ok(Value::Null);
                }
                let mut unknown = false;
                for candidate in rows.iter() {
                    match value.compare(&candidate[0])? {
                        Some(std::cmp::Ordering::Equal) => return Ok(Value::Bool(true)),
                        Some(_) => {}
                        None => unknown = true,
                    }
                }
                Ok(if unknown {
                    Value::Null
                } else {
                    Value::Bool(false)
                })
            }
            SubqueryKind::Array => {
                let rows = self.subquery_rows(subquery, row)?;
                let elements: Vec<Option<String>> =
                    rows.iter().map(|row| row[0].to_text()).collect();
                Ok(Value::Text(crate::system::array::format(&elements)))
            }
            SubqueryKind::Exists => {
                let rows = self.subquery_rows(subquery, row)?;
                Ok(Value::Bool(!rows.is_empty()))
            }
            SubqueryKind::Scalar => {
                let rows = self.subquery_rows(subquery, row)?;
                match rows.len() {
                    0 => Ok(Value::Null),
                    1 => Ok(rows[0][0].clone()),
                    _ => Err(SqlError::new(
                        CARDINALITY_VIOLATION,
                        "more than one row returned by a subquery used as an expression",
                    )),
                }
            }
        }
    }

    fn outer(&self, depth: usize, index: usize) -> SqlResult<Value> {
        let stack = self.outer.borrow();
        stack
            .len()
            .checked_sub(depth)
            .and_then(|level| stack[level].get(index))
            .cloned()
            .ok_or_else(|| SqlError::new(sqlstate::INTERNAL_ERROR, "outer reference without a row"))
    }
}

/// Orders join keys (NULLs first; they never match).
/// `path` with its lookup values evaluated over `row` (an index nested loop's outer row).
fn bound_lookup(
    path: &IndexAccess,
    row: &[Value],
    context: &EvalContext,
) -> SqlResult<IndexAccess> {
    let bind = |values: &[Expr]| -> SqlResult<Vec<Expr>> {
        (values.iter())
            .map(|value| Ok(Expr::Literal(value.eval(row, context)?)))
            .collect()
    };
    let lookup = match &path.lookup {
        IndexLookup::Point(values) => IndexLookup::Point(bind(values)?),
        IndexLookup::Range {
            prefix,
            lower,
            upper,
        } => IndexLookup::Range {
            prefix: bind(prefix)?,
            lower: lower.clone(),
            upper: upper.clone(),
        },
    };
    Ok(IndexAccess {
        index: path.index,
        lookup,
        narrowed_by: path.narrowed_by.clone(),
    })
}

fn compare_keys(a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let ordering = match (x.is_null(), y.is_null()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            (false, false) => x
                .compare(y)
                .ok()
                .flatten()
                .unwrap_or(std::cmp::Ordering::Equal),
        };
        if ordering != std::cmp::Ordering::Equal {
            return ordering;
        }
    }
    std::cmp::Ordering::Equal
}

/// The leading `column = constant` conjuncts of a pure filter, the constants evaluated once,
/// as tests on a row's encoding (None: none the encoding can decide). Only the conjuncts
/// before the first other one are taken, each a column itself or widened (to bigint or
/// numeric, which cannot fail): refusing a row where one of them is false is then what the
/// AND's left-to-right evaluation does, which stops there without evaluating (or raising
/// the errors of) the conjuncts after it.
fn equal_columns(filter: &Expr, table: &Table, context: &EvalContext) -> Option<row::EqualColumns> {
    let mut parts = Vec::new();
    crate::plan::access::conjuncts(filter, &mut parts);
    let type_of = crate::plan::access::column_types(table);
    let plain = |side: &Expr| match side {
        Expr::Column(_) => true,
        Expr::Cast { expr, to } => {
            matches!(**expr, Expr::Column(_))
                && matches!(to, DataType::Int8 | DataType::Numeric(None))
        }
        _ => false,
    };
    let mut pairs: Vec<(usize, Value)> = Vec::new();
    for part in parts {
        let Some((column, op, constant)) = crate::plan::access::column_comparison(part, &type_of)
        else {
            break;
        };
        let Expr::Binary { left, right, .. } = part else {
            break;
        };
        let column_side = if std::ptr::eq(constant, right.as_ref()) {
            left
        } else {
            right
        };
        if op != BinaryOp::Equal || !constant.is_pure() || !plain(column_side) {
            break;
        }
        let Ok(value) = constant.eval(&[], context) else {
            break;
        };
        pairs.push((column, value));
    }
    let types = table.def.types();
    row::EqualColumns::new(pairs.iter().map(|(column, value)| (*column, value)), &types)
}

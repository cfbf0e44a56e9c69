//! The executor: runs a plan inside an engine transaction.
//!
//! Rows are materialized per statement (OLTP statements touch few rows); a scan in key order
//! with a LIMIT and no sort stops as soon as it has enough rows.

mod aggregate;

use std::cmp::Ordering;
use std::ops::Bound;

use hayate_engine::{Database, Transaction};

use crate::catalog::Table;
use crate::encoding::{key, row};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::access::{Access, KeyBound};
use crate::plan::expr::truth;
use crate::plan::{
    EvalContext, Expr, OutputColumn, Plan, Returning, SelectPlan, SortKey, TableRead,
};
use crate::types::{DataType, Value};

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

pub struct Executor<'a> {
    pub db: &'a Database,
    pub context: EvalContext<'a>,
}

/// A row read from a table: its key and its column values.
type KeyedRow = (Vec<u8>, Vec<Value>);

/// The start and end of a scan, as owned keys.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

impl Executor<'_> {
    /// Runs a query or a DML statement.
    pub fn run(&self, plan: &Plan, txn: &mut Transaction) -> SqlResult<Outcome> {
        match plan {
            Plan::Select(select) => self.select(select, txn),
            Plan::Insert {
                table,
                rows,
                returning,
            } => self.insert(table, rows, returning.as_ref(), txn),
            Plan::Update {
                read,
                assignments,
                returning,
            } => self.update(read, assignments, returning.as_ref(), txn),
            Plan::Delete { read, returning } => self.delete(read, returning.as_ref(), txn),
            other => unreachable!("not a data statement: {other:?}"),
        }
    }

    fn eval_constant(&self, expr: &Expr) -> SqlResult<Value> {
        expr.eval(&[], &self.context)
    }

    /// Reads the rows of `read` that pass its filter, at most `limit` of them.
    fn read(
        &self,
        read: &TableRead,
        txn: &Transaction,
        limit: Option<usize>,
    ) -> SqlResult<Vec<KeyedRow>> {
        let table = &read.table;
        let types = table.def.types();
        let mut rows = Vec::new();
        let keep = |key: Vec<u8>, raw: &[u8], rows: &mut Vec<KeyedRow>| -> SqlResult<()> {
            let values = row::decode(raw, &types, &table.def.name)?;
            if let Some(filter) = &read.filter {
                if !truth(&filter.eval(&values, &self.context)?)? {
                    return Ok(());
                }
            }
            rows.push((key, values));
            Ok(())
        };
        match &read.access {
            Access::System(source) => {
                let names = (self.context.user_name, self.context.database_name);
                for values in source.rows(names.0, names.1) {
                    let passes = match &read.filter {
                        Some(filter) => truth(&filter.eval(&values, &self.context)?)?,
                        None => true,
                    };
                    if passes {
                        rows.push((Vec::new(), values));
                    }
                }
            }
            Access::Point(values) => {
                if let Some(key) = self.point_key(table, values)? {
                    if let Some(raw) = txn.get(table.tree, &key)? {
                        keep(key, &raw, &mut rows)?;
                    }
                }
            }
            access => {
                let Some((lower, upper)) = self.range(table, access)? else {
                    return Ok(rows);
                };
                let scan = txn.scan(table.tree, as_slice(&lower), as_slice(&upper))?;
                for entry in scan {
                    let (key, raw) = entry?;
                    keep(key, &raw, &mut rows)?;
                    if limit.is_some_and(|limit| rows.len() >= limit) {
                        break;
                    }
                }
            }
        }
        Ok(rows)
    }

    /// The key of a point lookup, or None if no row can match.
    fn point_key(&self, table: &Table, values: &[Expr]) -> SqlResult<Option<Vec<u8>>> {
        let mut out = Vec::new();
        for (expr, column) in values.iter().zip(&table.def.primary_key) {
            let data_type = table.def.columns[*column].data_type;
            match key_value(self.eval_constant(expr)?, data_type)? {
                Some(value) => key::encode_column(&mut out, &value, data_type)?,
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// The byte range of a range scan (None: empty), from bounds on the first key column.
    fn range(&self, table: &Table, access: &Access) -> SqlResult<Option<KeyRange>> {
        let Access::Range { lower, upper } = access else {
            return Ok(Some((Bound::Unbounded, Bound::Unbounded)));
        };
        let data_type = table.def.columns[table.def.primary_key[0]].data_type;
        let encode = |bound: &KeyBound| -> SqlResult<Option<(Vec<u8>, bool)>> {
            let value = self.eval_constant(&bound.value)?;
            if value.is_null() {
                return Err(SqlError::new(sqlstate::INTERNAL_ERROR, "NULL bound"));
            }
            Ok(match key_value(value, data_type)? {
                Some(value) => {
                    let mut prefix = Vec::new();
                    key::encode_column(&mut prefix, &value, data_type)?;
                    Some((prefix, bound.inclusive))
                }
                None => None,
            })
        };
        let start = match lower {
            None => Bound::Unbounded,
            Some(bound) => match encode(bound) {
                Err(error) if error.code == sqlstate::INTERNAL_ERROR => return Ok(None),
                Err(error) => return Err(error),
                Ok(None) => Bound::Unbounded,
                Ok(Some((prefix, true))) => Bound::Included(prefix),
                Ok(Some((prefix, false))) => match key::prefix_successor(&prefix) {
                    Some(successor) => Bound::Included(successor),
                    None => return Ok(None),
                },
            },
        };
        let end = match upper {
            None => Bound::Unbounded,
            Some(bound) => match encode(bound) {
                Err(error) if error.code == sqlstate::INTERNAL_ERROR => return Ok(None),
                Err(error) => return Err(error),
                Ok(None) => Bound::Unbounded,
                Ok(Some((prefix, false))) => Bound::Excluded(prefix),
                Ok(Some((prefix, true))) => match key::prefix_successor(&prefix) {
                    Some(successor) => Bound::Excluded(successor),
                    None => Bound::Unbounded,
                },
            },
        };
        Ok(Some((start, end)))
    }

    fn select(&self, select: &SelectPlan, txn: &Transaction) -> SqlResult<Outcome> {
        let limit = select
            .limit
            .as_ref()
            .map(|e| self.count_value(e, "LIMIT"))
            .transpose()?
            .flatten();
        let offset = select
            .offset
            .as_ref()
            .map(|e| self.count_value(e, "OFFSET"))
            .transpose()?
            .flatten()
            .unwrap_or(0);
        let streaming = select.ordered_by_key && select.aggregation.is_none();
        let read_limit = match (streaming, limit) {
            (true, Some(limit)) => Some(limit.saturating_add(offset)),
            _ => None,
        };
        let mut rows: Vec<Vec<Value>> = match &select.source {
            Some(read) => self
                .read(read, txn, read_limit)?
                .into_iter()
                .map(|(_, values)| values)
                .collect(),
            None => vec![Vec::new()],
        };
        if let Some(aggregation) = &select.aggregation {
            rows = aggregate::run(aggregation, rows, &self.context)?;
        }
        if let Some(having) = &select.having {
            let mut kept = Vec::with_capacity(rows.len());
            for row in rows {
                if truth(&having.eval(&row, &self.context)?)? {
                    kept.push(row);
                }
            }
            rows = kept;
        }
        let mut output: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(rows.len());
        for row in &rows {
            let projected = self.project(&select.projection, row)?;
            let sort_keys = if select.ordered_by_key {
                Vec::new()
            } else {
                select
                    .order_by
                    .iter()
                    .map(|key| key.expr.eval(row, &self.context))
                    .collect::<SqlResult<_>>()?
            };
            output.push((sort_keys, projected));
        }
        if !select.ordered_by_key {
            sort_output(&mut output, &select.order_by);
        }
        let rows: Vec<Vec<Value>> = output
            .into_iter()
            .skip(offset)
            .take(limit.unwrap_or(usize::MAX))
            .map(|(_, row)| row)
            .collect();
        Ok(Outcome::Rows {
            columns: select.columns.clone(),
            rows,
            command: "SELECT".into(),
        })
    }

    /// A LIMIT or OFFSET value; None for NULL (no limit).
    fn count_value(&self, expr: &Expr, what: &str) -> SqlResult<Option<usize>> {
        match self.eval_constant(expr)? {
            Value::Null => Ok(None),
            Value::Int(v) if v >= 0 => Ok(Some(v as usize)),
            _ => Err(SqlError::new(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!("{what} must not be negative"),
            )),
        }
    }

    fn project(&self, projection: &[Expr], row: &[Value]) -> SqlResult<Vec<Value>> {
        projection
            .iter()
            .map(|expr| expr.eval(row, &self.context))
            .collect()
    }

    /// Casts a new row to the table's column types and checks NOT NULL.
    fn conform(&self, table: &Table, values: Vec<Value>) -> SqlResult<Vec<Value>> {
        values
            .into_iter()
            .zip(&table.def.columns)
            .map(|(value, column)| {
                let value = value.cast(column.data_type)?;
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
        if table.has_row_id() {
            let id = table.allocate_row_id(self.db)?;
            return key::encode(&[Value::Int(id)], &[DataType::Int8]);
        }
        let mut out = Vec::new();
        for column in &table.def.primary_key {
            key::encode_column(
                &mut out,
                &values[*column],
                table.def.columns[*column].data_type,
            )?;
        }
        Ok(out)
    }

    fn insert_row(&self, table: &Table, values: &[Value], txn: &mut Transaction) -> SqlResult<()> {
        let key = self.row_key(table, values)?;
        let encoded = row::encode(values, &table.def.types())?;
        txn.insert(table.tree, &key, &encoded)
            .map_err(|error| match error {
                hayate_engine::Error::DuplicateKey => duplicate_key(table, values),
                other => other.into(),
            })
    }

    fn insert(
        &self,
        table: &Table,
        rows: &[Vec<Expr>],
        returning: Option<&Returning>,
        txn: &mut Transaction,
    ) -> SqlResult<Outcome> {
        let mut returned = Vec::new();
        for exprs in rows {
            let values = self.project(exprs, &[])?;
            let values = self.conform(table, values)?;
            self.insert_row(table, &values, txn)?;
            if let Some(returning) = returning {
                returned.push(self.project(&returning.projection, &values)?);
            }
        }
        Ok(dml_outcome("INSERT 0", rows.len(), returning, returned))
    }

    fn update(
        &self,
        read: &TableRead,
        assignments: &[(usize, Expr)],
        returning: Option<&Returning>,
        txn: &mut Transaction,
    ) -> SqlResult<Outcome> {
        let table = &read.table;
        let rows = self.read(read, txn, None)?;
        let mut returned = Vec::new();
        let key_changes = assignments
            .iter()
            .any(|(column, _)| table.def.primary_key.contains(column));
        for (key, old) in &rows {
            let mut new = old.clone();
            for (column, expr) in assignments {
                new[*column] = expr.eval(old, &self.context)?;
            }
            let new = self.conform(table, new)?;
            let encoded = row::encode(&new, &table.def.types())?;
            let new_key = if key_changes {
                self.row_key(table, &new)?
            } else {
                key.clone()
            };
            if new_key == *key {
                txn.update(table.tree, key, &encoded)?;
            } else {
                txn.delete(table.tree, key)?;
                txn.insert(table.tree, &new_key, &encoded)
                    .map_err(|error| match error {
                        hayate_engine::Error::DuplicateKey => duplicate_key(table, &new),
                        other => other.into(),
                    })?;
            }
            if let Some(returning) = returning {
                returned.push(self.project(&returning.projection, &new)?);
            }
        }
        Ok(dml_outcome("UPDATE", rows.len(), returning, returned))
    }

    fn delete(
        &self,
        read: &TableRead,
        returning: Option<&Returning>,
        txn: &mut Transaction,
    ) -> SqlResult<Outcome> {
        let rows = self.read(read, txn, None)?;
        let mut returned = Vec::new();
        for (key, old) in &rows {
            txn.delete(read.table.tree, key)?;
            if let Some(returning) = returning {
                returned.push(self.project(&returning.projection, old)?);
            }
        }
        Ok(dml_outcome("DELETE", rows.len(), returning, returned))
    }
}

/// Sorts (sort keys, row) pairs by ORDER BY: NULLs last ascending and first descending
/// unless NULLS FIRST/LAST says otherwise. The sort is stable.
fn sort_output(output: &mut [(Vec<Value>, Vec<Value>)], order_by: &[SortKey]) {
    output.sort_by(|(a, _), (b, _)| {
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
    });
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
            "duplicate key value violates unique constraint \"{}_pkey\"",
            table.def.name
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

//! Writes beyond a plain row: INSERT with identity columns and ON CONFLICT, the replacement
//! of a row with its index entries (UPDATE, ON CONFLICT DO UPDATE), TRUNCATE inside a
//! transaction block.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;

use hayate_engine::Transaction;

use super::{dml_outcome, duplicate_key, Executor, Outcome};
use crate::catalog::index_entry::entry;
use crate::catalog::Table;
use crate::encoding::row;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::truth;
use crate::plan::write::{Arbiter, ConflictAction, OnConflict, SequenceFill};
use crate::plan::{Expr, Returning};
use crate::types::Value;

impl Executor<'_> {
    pub(super) fn insert(
        &self,
        table: &Table,
        rows: &[Vec<Expr>],
        sequences: &[SequenceFill],
        on_conflict: Option<&OnConflict>,
        returning: Option<&Returning>,
        txn: &mut Transaction,
    ) -> SqlResult<Outcome> {
        let mut returned = Vec::new();
        let mut count = 0;
        let mut touched = HashSet::new();
        for (position, exprs) in rows.iter().enumerate() {
            let mut values = self.project(exprs, &[])?;
            for fill in sequences {
                if fill.rows[position] {
                    values[fill.column] =
                        Value::Int(fill.sequence.next_value(self.context.sequences)?);
                }
            }
            let values = self.conform(table, values)?;
            let written = match on_conflict {
                None => {
                    self.insert_row(table, &values, txn)?;
                    Some(values)
                }
                Some(on_conflict) => {
                    self.insert_on_conflict(table, values, on_conflict, &mut touched, txn)?
                }
            };
            if let Some(row) = written {
                count += 1;
                if let Some(returning) = returning {
                    returned.push(self.project(&returning.projection, &row)?);
                }
            }
        }
        Ok(dml_outcome("INSERT 0", count, returning, returned))
    }

    /// Inserts a row unless it conflicts on an arbiter; then does the conflict action.
    /// Returns the row written (None: nothing was). A conflict with a row the statement
    /// wrote before is one too: DO NOTHING skips the row (the first one proposed wins), DO
    /// UPDATE fails with 21000, as in PostgreSQL. `touched`: the engine keys of the rows
    /// the statement inserted or updated (kept only for DO UPDATE).
    pub(super) fn insert_on_conflict(
        &self,
        table: &Table,
        values: Vec<Value>,
        on_conflict: &OnConflict,
        touched: &mut HashSet<Vec<u8>>,
        txn: &mut Transaction,
    ) -> SqlResult<Option<Vec<Value>>> {
        let updating = matches!(on_conflict.action, ConflictAction::Update { .. });
        let mut existing = None;
        for arbiter in &on_conflict.arbiters {
            existing = match arbiter {
                Arbiter::PrimaryKey => {
                    let key = self.row_key(table, &values)?;
                    txn.get(table.tree, &key)?.map(|_| key)
                }
                Arbiter::Index(position) => self.find_unique(table, *position, &values, txn)?,
            };
            if existing.is_some() {
                break;
            }
        }
        let Some(key) = existing else {
            let key = self.insert_row(table, &values, txn)?;
            if updating {
                touched.insert(key);
            }
            return Ok(Some(values));
        };
        let ConflictAction::Update {
            assignments,
            filter,
        } = &on_conflict.action
        else {
            return Ok(None);
        };
        if touched.contains(&key) {
            return Err(SqlError::new(
                sqlstate::CARDINALITY_VIOLATION,
                "ON CONFLICT DO UPDATE command cannot affect row a second time",
            )
            .with_detail(
                "Ensure that no rows proposed for insertion within the same command have \
                 duplicate constrained values.",
            ));
        }
        let raw = txn.get_for_update(table.tree, &key)?.ok_or_else(|| {
            SqlError::new(
                sqlstate::SERIALIZATION_FAILURE,
                "could not serialize access due to concurrent delete",
            )
        })?;
        let old = row::decode(&raw, &table.def.types(), &table.def.name)?;
        let mut both = old.clone();
        both.extend(values);
        if let Some(filter) = filter {
            if !truth(&filter.eval(&both, &self.context)?)? {
                return Ok(None);
            }
        }
        let mut new = old.clone();
        for (column, expr) in assignments {
            new[*column] = expr.eval(&both, &self.context)?;
        }
        let new = self.conform(table, new)?;
        self.replace_row(table, &key, &old, &new, txn)?;
        let new_key = match table.has_row_id() {
            true => key,
            false => self.row_key(table, &new)?,
        };
        touched.insert(new_key);
        Ok(Some(new))
    }

    /// Replaces row `old` (engine key `key`) by `new`: a new key if its primary key changed,
    /// and new entries in the indexes whose columns (or the key) changed.
    pub(super) fn replace_row(
        &self,
        table: &Table,
        key: &[u8],
        old: &[Value],
        new: &[Value],
        txn: &mut Transaction,
    ) -> SqlResult<()> {
        self.check_row(table, new)?;
        let new_key = if table.has_row_id() {
            key.to_vec()
        } else {
            self.row_key(table, new)?
        };
        let moved = new_key != key;
        let mut changed = Vec::with_capacity(table.def.indexes.len());
        for index in &table.def.indexes {
            let mut index_changed = moved || index.reads_changed(old, new);
            if index_changed && !moved && !index.expressions.is_empty() {
                // Whether the entry changes (values equal as SQL values may still differ
                // through an expression: 1.5 and 1.50 as text).
                let entry_of = |values: &[Value]| -> SqlResult<Option<Vec<u8>>> {
                    let keys = self.index_terms.keys(
                        self.catalog,
                        &table.def,
                        index,
                        values,
                        &self.context,
                    )?;
                    keys.map(|keys| Ok(entry(&table.def, index, &keys, key)?.0))
                        .transpose()
                };
                index_changed = entry_of(old)? != entry_of(new)?;
            }
            if !index_changed && index.predicate.is_some() {
                // The row enters or leaves a partial index.
                let includes = |values: &[Value]| {
                    self.index_terms.includes(
                        self.catalog,
                        &table.def,
                        index,
                        values,
                        &self.context,
                    )
                };
                index_changed = includes(old)? != includes(new)?;
            }
            changed.push(index_changed);
        }
        let any_changed = changed.iter().any(|c| *c);
        if any_changed {
            self.remove_entries(table, old, key, Some(&changed), txn)?;
        }
        let encoded = row::encode(new, &table.def.types())?;
        if moved {
            txn.delete(table.tree, key)?;
            txn.insert(table.tree, &new_key, &encoded)
                .map_err(|error| match error {
                    hayate_engine::Error::DuplicateKey => duplicate_key(table, new),
                    other => other.into(),
                })?;
        } else {
            txn.update(table.tree, key, &encoded)?;
        }
        if any_changed {
            self.add_entries(table, new, &new_key, Some(&changed), txn)?;
        }
        self.check_references(table, Some(old), new, txn)?;
        self.referenced_row_changed(table, old, Some(new), txn)
    }

    /// TRUNCATE inside a transaction block: deletes every row and index entry in the
    /// transaction, so a rollback keeps them. The newest ones, each locked as newest (the
    /// statement holds the tables' exclusive locks; as in PostgreSQL, TRUNCATE is not a
    /// serialization failure): a REPEATABLE READ block's snapshot may predate rows and
    /// entries (an index built since) it must not leave behind.
    pub(super) fn truncate(
        &self,
        tables: &[Arc<Table>],
        txn: &mut Transaction,
    ) -> SqlResult<Outcome> {
        self.db.wait_for_started_commits();
        for table in tables {
            for tree in std::iter::once(table.tree).chain(table.index_trees.iter().copied()) {
                let mut keys = Vec::new();
                for entry in txn.scan_latest(tree, Bound::Unbounded, Bound::Unbounded)? {
                    keys.push(entry?.0);
                }
                for key in keys {
                    txn.lock_latest(tree, &key)?;
                    txn.delete(tree, &key)?;
                }
            }
        }
        Ok(Outcome::Command {
            tag: "TRUNCATE TABLE".into(),
        })
    }
}

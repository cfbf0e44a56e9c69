//! CHECK and FOREIGN KEY constraints on the rows a statement writes (design 8.4).
//!
//! 1. A new or changed row must pass every CHECK of its table (`check_row`; NULL passes).
//! 2. A row whose foreign key columns are all non-NULL and new (an insert, or an update that
//!    changed them) needs its referenced row (`check_references`): the referenced table's
//!    row with those values in its primary key or unique index is locked shared and read at
//!    its newest committed version (`Transaction::lock_shared_latest`). The lock orders us
//!    against a transaction deleting that row (which locks it exclusively): whichever comes
//!    second sees the other's commit, so no referencing row is ever left without its
//!    referenced row, while inserts referencing one row do not wait for each other.
//! 3. When a referenced row is deleted or its key changed (`referenced_row_changed`, after the
//!    write locked it), the referencing rows are found at their newest committed versions
//!    (`Transaction::scan_latest`, through an index whose leading columns are the foreign key
//!    when one exists) and the key's action runs: CASCADE deletes or updates them, SET NULL / SET DEFAULT update them (each such write goes through the
//!    same checks, so cascades chain).
//! 4. A key that finds no referenced row (2) or a NO ACTION or RESTRICT key whose referenced
//!    row went away while rows still reference it (3) is not an error yet, as in PostgreSQL: a
//!    `PendingCheck`, checked again (`recheck`) at the end of the statement, or at COMMIT when
//!    the key is deferred (DEFERRABLE INITIALLY DEFERRED, or SET CONSTRAINTS ... DEFERRED:
//!    `ConstraintModes`), and only then refused if still broken. So a statement may insert a
//!    child before its parent, and a transaction may with a deferred key. The found case
//!    stays the fast path: nothing is kept for it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

use hayate_engine::Transaction;

use super::{as_slice, key_value, prefix_range, Executor};
use crate::catalog::index_entry::{self, NOT_NULL};
use crate::catalog::{Catalog, Deferral, ForeignKeyDef, Leading, ReferentialAction, Table};
use crate::encoding::{key, row};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::bind::Binder;
use crate::plan::Expr;
use crate::types::Value;

/// A table's CHECKs, bound: (name, expression).
type BoundChecks = Rc<Vec<(String, Expr)>>;

/// The foreign keys referencing a table: (referencing table, key position).
type Referencing = Rc<Vec<(Arc<Table>, usize)>>;

/// What one statement looked up about constraints, kept for its other rows, and the checks
/// it postponed.
#[derive(Default)]
pub struct ConstraintCache {
    /// Table name -> its CHECKs.
    checks: RefCell<HashMap<String, BoundChecks>>,
    /// Table name -> the foreign keys referencing it.
    referencing: RefCell<HashMap<String, Referencing>>,
    /// Checks for the end of the statement.
    pending: RefCell<Vec<PendingCheck>>,
    /// Checks of deferred keys, for the session to run at COMMIT.
    deferred: RefCell<Vec<PendingCheck>>,
}

impl PendingCheck {
    /// The check's table after ALTER TABLE `from` RENAME TO `to`.
    pub fn rename_table(&mut self, from: &str, to: &str) {
        if self.table == from {
            self.table = to.to_string();
        }
    }

    /// The check's key after ALTER TABLE `table` RENAME CONSTRAINT `from` TO `to`.
    pub fn rename_key(&mut self, table: &str, from: &str, to: &str) {
        if self.table == table && self.key == from {
            self.key = to.to_string();
        }
    }
}

impl ConstraintCache {
    /// The checks of deferred keys the statement left (`Session` keeps them until COMMIT).
    pub fn take_deferred(&self) -> Vec<PendingCheck> {
        std::mem::take(&mut self.deferred.borrow_mut())
    }

    /// Drops the checks of a run that failed.
    pub(super) fn forget_pending(&self) {
        self.pending.borrow_mut().clear();
        self.deferred.borrow_mut().clear();
    }
}

/// The SET CONSTRAINTS modes of a transaction block.
#[derive(Debug, Default, Clone)]
pub struct ConstraintModes {
    /// SET CONSTRAINTS ALL's mode (true: deferred).
    all: Option<bool>,
    /// Modes set by name since, newest last.
    named: Vec<(String, bool)>,
}

impl ConstraintModes {
    /// SET CONSTRAINTS `names` (empty: ALL) DEFERRED (`deferred`) or IMMEDIATE.
    pub fn set(&mut self, names: &[String], deferred: bool) {
        if names.is_empty() {
            self.all = Some(deferred);
            self.named.clear();
        }
        for name in names {
            self.named.retain(|(named, _)| named != name);
            self.named.push((name.clone(), deferred));
        }
    }

    /// A constraint renamed in the block keeps the mode SET CONSTRAINTS gave its old name
    /// (other constraints of that name keep theirs).
    pub fn renamed(&mut self, from: &str, to: &str) {
        if let Some(&(_, deferred)) = self.named.iter().find(|(name, _)| name == from) {
            self.named.retain(|(name, _)| name != to);
            self.named.push((to.to_string(), deferred));
        }
    }

    /// True if the key's checks wait for COMMIT.
    pub fn deferred(&self, key: &ForeignKeyDef) -> bool {
        if !key.deferral.deferrable() {
            return false;
        }
        match self.named.iter().find(|(name, _)| *name == key.name) {
            Some((_, deferred)) => *deferred,
            None => self
                .all
                .unwrap_or(key.deferral == Deferral::InitiallyDeferred),
        }
    }
}

/// A foreign key check postponed to the end of the statement or to COMMIT.
#[derive(Debug, Clone)]
pub struct PendingCheck {
    /// The referencing table and its key's name (found again by name: the key may have been
    /// dropped since, and then nothing is checked; a table renamed in the block is renamed
    /// here too, `rename_table`).
    pub table: String,
    pub key: String,
    /// The key's values.
    values: Vec<Value>,
    /// True: a referencing row found no referenced row; false: the referenced row went away
    /// (NO ACTION, RESTRICT) while rows referenced it.
    missing: bool,
    /// RESTRICT: checked at the statement's end whatever the deferral, and a referenced row
    /// made again with the same key does not satisfy it (as in PostgreSQL).
    restrict: bool,
}

/// Checks postponed foreign key checks: each holds if the referenced row exists now (it is
/// locked shared, as at once) or no row references those values any longer; else 23503 as
/// the statement that broke it would have said.
pub fn recheck(catalog: &Catalog, checks: &[PendingCheck], txn: &mut Transaction) -> SqlResult<()> {
    for check in checks {
        crate::interrupt::check()?;
        let Ok(child) = catalog.table(&check.table) else {
            continue; // dropped since
        };
        let Some(foreign) = child.def.foreign_keys.iter().find(|k| k.name == check.key) else {
            continue;
        };
        if foreign.columns.len() != check.values.len() {
            continue; // dropped, and another key made under its name
        }
        let parent = catalog.table(&foreign.table)?;
        let values: Vec<&Value> = check.values.iter().collect();
        if !check.restrict {
            if let Some((tree, key)) = referenced_key(&parent, foreign, &values)? {
                if txn.lock_shared_latest(tree, &key)?.is_some() {
                    continue;
                }
            }
        }
        if referencing_rows(&child, foreign, &check.values, txn)?.is_empty() {
            continue;
        }
        return Err(match check.missing {
            true => missing_reference(&child, foreign, &values),
            false => still_referenced(&parent, foreign, &child, &check.values)?,
        });
    }
    Ok(())
}

impl Executor<'_> {
    /// Fails with 23514 if the row is refused by one of the table's CHECKs.
    pub(super) fn check_row(&self, table: &Table, values: &[Value]) -> SqlResult<()> {
        if table.def.checks.is_empty() {
            return Ok(());
        }
        let checks = self.bound_checks(table)?;
        for (name, expr) in checks.iter() {
            if expr.eval(values, &self.context)? == Value::Bool(false) {
                return Err(SqlError::new(
                    sqlstate::CHECK_VIOLATION,
                    format!(
                        "new row for relation \"{}\" violates check constraint \"{name}\"",
                        table.def.name
                    ),
                )
                .with_detail(format!("Failing row contains ({}).", row_text(values))));
            }
        }
        Ok(())
    }

    fn bound_checks(&self, table: &Table) -> SqlResult<BoundChecks> {
        if let Some(checks) = self.constraints.checks.borrow().get(&table.def.name) {
            return Ok(checks.clone());
        }
        let mut binder = Binder::new(self.catalog, &[]);
        let checks = table
            .def
            .checks
            .iter()
            .map(|check| {
                Ok((
                    check.name.clone(),
                    binder.bind_check(&table.def, &check.expr)?,
                ))
            })
            .collect::<SqlResult<Vec<_>>>()?;
        let checks = Rc::new(checks);
        self.constraints
            .checks
            .borrow_mut()
            .insert(table.def.name.clone(), checks.clone());
        Ok(checks)
    }

    /// Fails with 23503 unless every foreign key of the row that is new or changed (`old`:
    /// the row before an update) finds its referenced row, which it locks.
    pub(super) fn check_references(
        &self,
        table: &Table,
        old: Option<&[Value]>,
        new: &[Value],
        txn: &mut Transaction,
    ) -> SqlResult<()> {
        for foreign in &table.def.foreign_keys {
            let values: Vec<&Value> = foreign.columns.iter().map(|c| &new[*c]).collect();
            if values.iter().any(|value| value.is_null()) {
                continue; // MATCH SIMPLE: a NULL column satisfies the key
            }
            if old.is_some_and(|old| foreign.columns.iter().all(|c| old[*c] == new[*c])) {
                continue;
            }
            let parent = self.catalog.table(&foreign.table)?;
            let found = match referenced_key(&parent, foreign, &values)? {
                Some((tree, key)) => txn.lock_shared_latest(tree, &key)?.is_some(),
                None => false,
            };
            if !found {
                let values = values.into_iter().cloned().collect();
                self.postpone(table, foreign, values, true, false);
            }
        }
        Ok(())
    }

    /// Keeps a broken key's check for the end of the statement, or for COMMIT when the key
    /// is deferred in this block.
    fn postpone(
        &self,
        table: &Table,
        foreign: &ForeignKeyDef,
        values: Vec<Value>,
        missing: bool,
        restrict: bool,
    ) {
        let check = PendingCheck {
            table: table.def.name.clone(),
            key: foreign.name.clone(),
            values,
            missing,
            restrict,
        };
        match self.constraint_modes {
            Some(modes) if !restrict && modes.deferred(foreign) => &self.constraints.deferred,
            _ => &self.constraints.pending,
        }
        .borrow_mut()
        .push(check);
    }

    /// Runs the checks the statement postponed to its end (`recheck`).
    pub(super) fn check_pending(&self, txn: &mut Transaction) -> SqlResult<()> {
        let pending = std::mem::take(&mut *self.constraints.pending.borrow_mut());
        recheck(self.catalog, &pending, txn)
    }

    /// A row of `table` was deleted (`new` None) or updated: the rows whose foreign keys
    /// referenced its old key get their key's action.
    pub(super) fn referenced_row_changed(
        &self,
        table: &Table,
        old: &[Value],
        new: Option<&[Value]>,
        txn: &mut Transaction,
    ) -> SqlResult<()> {
        let referencing = self.referencing(table);
        for (child, position) in referencing.iter() {
            let foreign = &child.def.foreign_keys[*position];
            let referenced = referenced_columns(table, foreign)?;
            let key: Vec<Value> = referenced.iter().map(|c| old[*c].clone()).collect();
            if key.iter().any(Value::is_null) {
                continue;
            }
            if new.is_some_and(|new| referenced.iter().all(|c| old[*c] == new[*c])) {
                continue;
            }
            let action = match new {
                None => foreign.on_delete,
                Some(_) => foreign.on_update,
            };
            let rows = referencing_rows(child, foreign, &key, txn)?;
            if rows.is_empty() {
                continue;
            }
            match action {
                // The rows may be gone (or, for NO ACTION, the key back) by the check's time:
                // the statement's end, or COMMIT for a deferred NO ACTION key.
                ReferentialAction::NoAction => self.postpone(child, foreign, key, false, false),
                ReferentialAction::Restrict => self.postpone(child, foreign, key, false, true),
                ReferentialAction::Cascade if new.is_none() => {
                    for (child_key, child_old) in rows {
                        txn.delete(child.tree, &child_key)?;
                        self.remove_entries(child, &child_old, &child_key, None, txn)?;
                        self.referenced_row_changed(child, &child_old, None, txn)?;
                    }
                }
                action => {
                    let fill: Vec<Value> = match action {
                        ReferentialAction::Cascade => {
                            let new = new.expect("a delete cascades above");
                            referenced.iter().map(|c| new[*c].clone()).collect()
                        }
                        ReferentialAction::SetNull => vec![Value::Null; foreign.columns.len()],
                        _ => foreign
                            .columns
                            .iter()
                            .map(|c| self.column_default(child, *c))
                            .collect::<SqlResult<_>>()?,
                    };
                    for (child_key, child_old) in rows {
                        let mut child_new = child_old.clone();
                        for (column, value) in foreign.columns.iter().zip(&fill) {
                            child_new[*column] = value.clone();
                        }
                        let child_new = self.conform(child, child_new)?;
                        self.replace_row(child, &child_key, &child_old, &child_new, txn)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The default of a column (SET DEFAULT), evaluated now; NULL without one.
    fn column_default(&self, table: &Table, column: usize) -> SqlResult<Value> {
        let def = &table.def.columns[column];
        match table.def.default_text(column) {
            Some(text) => {
                let mut binder = Binder::new(self.catalog, &[]);
                let expr = binder.bind_default_text(&text, def.data_type)?;
                expr.eval(&[], &self.context)
            }
            None => Ok(Value::Null),
        }
    }

    /// The foreign keys referencing `table`, looked up once per statement.
    fn referencing(&self, table: &Table) -> Referencing {
        if let Some(found) = self.constraints.referencing.borrow().get(&table.def.name) {
            return found.clone();
        }
        let found = Rc::new(self.catalog.referencing(&table.def.name));
        self.constraints
            .referencing
            .borrow_mut()
            .insert(table.def.name.clone(), found.clone());
        found
    }
}

/// The engine tree and key of the referenced row with `values` in the referenced columns:
/// the primary key, or the entry of the unique index (None: no row can have them, e.g. a
/// value outside the referenced column's type).
fn referenced_key(
    parent: &Table,
    foreign: &ForeignKeyDef,
    values: &[&Value],
) -> SqlResult<Option<(hayate_engine::TreeId, Vec<u8>)>> {
    let def = &parent.def;
    let referenced = referenced_columns(parent, foreign)?;
    let mut row = vec![Value::Null; def.columns.len()];
    for (column, value) in referenced.iter().zip(values) {
        match key_value((*value).clone(), def.columns[*column].data_type)? {
            Some(value) => row[*column] = value,
            None => return Ok(None),
        }
    }
    match crate::plan::bind::unique_key_of(def, &referenced) {
        Some(None) => {
            let mut key_bytes = Vec::new();
            for column in &def.primary_key {
                key::encode_column(
                    &mut key_bytes,
                    &row[*column],
                    def.columns[*column].data_type,
                )?;
            }
            Ok(Some((parent.tree, key_bytes)))
        }
        Some(Some(position)) => {
            let index = &def.indexes[position];
            let (entry, _) =
                index_entry::entry(def, index, &index.key_values(&row, Vec::new()), &[])?;
            Ok(Some((parent.index_trees[position], entry)))
        }
        None => Err(SqlError::new(
            sqlstate::INVALID_FOREIGN_KEY,
            format!(
                "there is no unique constraint matching given keys for referenced table \"{}\"",
                def.name
            ),
        )),
    }
}

/// The rows of `child` whose foreign key equals `key`, at their newest committed
/// versions with this transaction's writes, each locked: through the primary key or an
/// index whose leading columns are the key's columns, else a scan.
fn referencing_rows(
    child: &Table,
    foreign: &ForeignKeyDef,
    key: &[Value],
    txn: &mut Transaction,
) -> SqlResult<Vec<(Vec<u8>, Vec<Value>)>> {
    let def = &child.def;
    let types = def.types();
    // The key's value of a child column.
    let value_of = |column: usize| {
        let position = foreign.columns.iter().position(|c| *c == column)?;
        key_value(key[position].clone(), def.columns[column].data_type).transpose()
    };
    let mut candidates: Vec<Vec<u8>> = Vec::new();
    let leading = def.leading_index(&foreign.columns);
    if leading == Some(Leading::PrimaryKey) {
        let mut prefix = Vec::new();
        for column in &def.primary_key[..foreign.columns.len()] {
            let Some(value) = value_of(*column).transpose()? else {
                return Ok(Vec::new());
            };
            key::encode_column(&mut prefix, &value, def.columns[*column].data_type)?;
        }
        let (start, end) = prefix_range(prefix);
        for entry in txn.scan_latest(child.tree, as_slice(&start), as_slice(&end))? {
            candidates.push(entry?.0);
        }
    } else if let Some(Leading::Index(position)) = leading {
        let index = &def.indexes[position];
        let mut prefix = Vec::new();
        for column in &index.columns[..foreign.columns.len()] {
            let Some(value) = value_of(*column).transpose()? else {
                return Ok(Vec::new());
            };
            prefix.push(NOT_NULL);
            key::encode_column(&mut prefix, &value, def.columns[*column].data_type)?;
        }
        let (start, end) = prefix_range(prefix);
        let tree = child.index_trees[position];
        for entry in txn.scan_latest(tree, as_slice(&start), as_slice(&end))? {
            candidates.push(entry?.1);
        }
    } else {
        for entry in txn.scan_latest(child.tree, Bound::Unbounded, Bound::Unbounded)? {
            crate::interrupt::check()?;
            let (row_key, raw) = entry?;
            let values = row::decode(&raw, &types, &def.name)?;
            if matches(foreign, &values, key) {
                candidates.push(row_key);
            }
        }
    }
    let mut rows = Vec::new();
    for row_key in candidates {
        let Some(raw) = txn.lock_latest(child.tree, &row_key)? else {
            continue;
        };
        let values = row::decode(&raw, &types, &def.name)?;
        if matches(foreign, &values, key) {
            rows.push((row_key, values));
        }
    }
    Ok(rows)
}

/// True if the row's foreign key columns equal `key`.
fn matches(foreign: &ForeignKeyDef, values: &[Value], key: &[Value]) -> bool {
    foreign.columns.iter().zip(key).all(|(column, value)| {
        values[*column].compare(value).ok().flatten() == Some(std::cmp::Ordering::Equal)
    })
}

/// The referenced columns of a foreign key, as positions in the referenced table.
fn referenced_columns(parent: &Table, foreign: &ForeignKeyDef) -> SqlResult<Vec<usize>> {
    foreign
        .referenced
        .iter()
        .map(|name| {
            parent.def.column_index(name).ok_or_else(|| {
                SqlError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!(
                        "column \"{name}\" referenced in foreign key constraint \"{}\" does not exist",
                        foreign.name
                    ),
                )
            })
        })
        .collect()
}

/// 23503 of a row whose key finds no referenced row.
fn missing_reference(child: &Table, foreign: &ForeignKeyDef, values: &[&Value]) -> SqlError {
    let names: Vec<&str> = foreign
        .columns
        .iter()
        .map(|c| child.def.columns[*c].name.as_str())
        .collect();
    let shown: Vec<String> = values
        .iter()
        .map(|v| v.to_text().unwrap_or_default())
        .collect();
    SqlError::new(
        sqlstate::FOREIGN_KEY_VIOLATION,
        format!(
            "insert or update on table \"{}\" violates foreign key constraint \"{}\"",
            child.def.name, foreign.name
        ),
    )
    .with_detail(format!(
        "Key ({})=({}) is not present in table \"{}\".",
        names.join(", "),
        shown.join(", "),
        foreign.table
    ))
}

/// 23503 of a referenced row deleted or changed while `child`'s rows reference its `key`.
fn still_referenced(
    parent: &Table,
    foreign: &ForeignKeyDef,
    child: &Table,
    key: &[Value],
) -> SqlResult<SqlError> {
    let names: Vec<&str> = referenced_columns(parent, foreign)?
        .iter()
        .map(|c| parent.def.columns[*c].name.as_str())
        .collect();
    Ok(SqlError::new(
        sqlstate::FOREIGN_KEY_VIOLATION,
        format!(
            "update or delete on table \"{}\" violates foreign key constraint \"{}\" on table \"{}\"",
            parent.def.name, foreign.name, child.def.name
        ),
    )
    .with_detail(format!(
        "Key ({})=({}) is still referenced from table \"{}\".",
        names.join(", "),
        row_text(key),
        child.def.name
    )))
}

/// Values as PostgreSQL's DETAIL lines show a row: comma-separated, null for NULL.
fn row_text(values: &[Value]) -> String {
    values
        .iter()
        .map(|v| v.to_text().unwrap_or_else(|| "null".into()))
        .collect::<Vec<_>>()
        .join(", ")
}

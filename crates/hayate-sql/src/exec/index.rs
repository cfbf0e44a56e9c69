//! Secondary indexes in statements: their upkeep by writes, and reads through them. The
//! entry layout is `catalog::index_entry`'s.
//!
//! 1. An INSERT adds the new row's entries (`add_entries`); a unique index with no NULL
//!    column checks uniqueness through the engine's `insert`, in the writing transaction.
//!    A partial index holds the rows its predicate is true for, an expression index the
//!    values of its key expressions (`IndexTerms`).
//! 2. An UPDATE removes and adds the entries of the indexes whose columns it changed, a
//!    DELETE removes them all (`remove_entries`); ON CONFLICT finds the conflicting row by a
//!    unique index (`find_unique`).
//! 3. A read through an index (`read_index`) turns the plan's constant lookup into an entry
//!    prefix or range (`index_entries`), collects the primary keys and reads the rows in
//!    primary key order; a read in the index's order (an ORDER BY it gives) reads each row
//!    as its entry comes (`Run::read_table`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Bound;
use std::rc::Rc;

use hayate_engine::Transaction;

use super::{as_slice, key_value, prefix_range, Executor, KeyRange};
use crate::catalog::index_entry::{entry, violation, NOT_NULL, NULL};
use crate::catalog::{Catalog, IndexDef, Table, TableDef};
use crate::encoding::key;
use crate::error::SqlResult;
use crate::plan::access::{IndexAccess, IndexLookup, KeyBound};
use crate::plan::bind::Binder;
use crate::plan::{EvalContext, Expr};
use crate::types::{DataType, Value};

/// Takes each row read: (primary key, raw row).
type RowSink<'a> = dyn FnMut(Vec<u8>, &[u8]) -> SqlResult<()> + 'a;

/// Rows read per `Transaction::get_sorted` call: few at first (a LIMIT stops after few
/// extra reads), doubling up to this many.
const SORTED_READ_CHUNK_MAX: usize = 512;

/// Reads the rows of primary keys in primary key order, a chunk at a time through `read`
/// (`Transaction::get_sorted`: one descent per leaf), calling `keep` with each row that
/// exists until it returns false (then false).
pub(super) fn rows_of_keys(
    keys: Vec<Vec<u8>>,
    mut read: impl FnMut(&[Vec<u8>]) -> SqlResult<Vec<Option<Vec<u8>>>>,
    mut keep: impl FnMut(Vec<u8>, &[u8]) -> SqlResult<bool>,
) -> SqlResult<bool> {
    let mut chunk = 16;
    let mut keys = keys.into_iter().peekable();
    while keys.peek().is_some() {
        let batch: Vec<Vec<u8>> = keys.by_ref().take(chunk).collect();
        chunk = (chunk * 2).min(SORTED_READ_CHUNK_MAX);
        let rows = read(&batch)?;
        for (key, row) in batch.into_iter().zip(rows) {
            if let Some(raw) = row {
                if !keep(key, &raw)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Fewer primary keys than this from an index path are read as they are: narrowing them
/// by another index (`IndexAccess::narrowed_by`) would save little.
const NARROWED_KEYS_MIN: usize = 32;

/// A narrowing index's range is read only while it has at most this many entries per key
/// to narrow: an entry is a step in an index leaf, a key a lookup in the clustered table.
const NARROWING_ENTRIES_PER_KEY: usize = 8;

/// Keeps the keys that are also in `found` (both in primary key order).
fn retain_found(keys: &mut Vec<Vec<u8>>, found: Vec<Vec<u8>>) {
    let mut found = found.into_iter().peekable();
    keys.retain(|key| {
        while found
            .next_if(|other| hayate_engine::compare_keys(other, key).is_lt())
            .is_some()
        {}
        found.peek() == Some(key)
    });
}

/// Partial indexes' predicates and expression indexes' key expressions, bound once per
/// statement (or DDL command) and index.
#[derive(Default)]
pub struct IndexTerms {
    /// (table, index) -> the index's predicate and key expressions, bound over the table's
    /// columns.
    bound: RefCell<HashMap<(String, String), Rc<BoundTerms>>>,
}

struct BoundTerms {
    predicate: Option<Expr>,
    expressions: Vec<Expr>,
}

impl IndexTerms {
    fn bound(
        &self,
        catalog: &Catalog,
        def: &TableDef,
        index: &IndexDef,
    ) -> SqlResult<Rc<BoundTerms>> {
        let key = (def.name.clone(), index.name.clone());
        if let Some(bound) = self.bound.borrow().get(&key) {
            return Ok(bound.clone());
        }
        let mut binder = Binder::new(catalog, &[]);
        let predicate = (index.predicate.as_deref())
            .map(|predicate| binder.bind_index_predicate(def, predicate))
            .transpose()?;
        let expressions = (index.expressions.iter())
            .map(|expression| binder.bind_index_expression(def, expression))
            .collect::<SqlResult<Vec<Expr>>>()?;
        let bound = Rc::new(BoundTerms {
            predicate,
            expressions,
        });
        self.bound.borrow_mut().insert(key, bound.clone());
        Ok(bound)
    }

    /// True if the row has an entry in the index: always for a plain index; for a partial
    /// one, when its predicate is true (NULL or false: no entry, as in PostgreSQL).
    pub fn includes(
        &self,
        catalog: &Catalog,
        def: &TableDef,
        index: &IndexDef,
        values: &[Value],
        context: &EvalContext,
    ) -> SqlResult<bool> {
        if index.predicate.is_none() {
            return Ok(true);
        }
        let bound = self.bound(catalog, def, index)?;
        match &bound.predicate {
            Some(predicate) => Ok(predicate.eval(values, context)? == Value::Bool(true)),
            None => Ok(true),
        }
    }

    /// The row's key in the index (`IndexDef::key_values`: its columns' values, its
    /// expressions evaluated over the row), or None when a partial index leaves it out.
    pub fn keys(
        &self,
        catalog: &Catalog,
        def: &TableDef,
        index: &IndexDef,
        values: &[Value],
        context: &EvalContext,
    ) -> SqlResult<Option<Vec<Value>>> {
        if index.predicate.is_none() && index.expressions.is_empty() {
            return Ok(Some(index.key_values(values, Vec::new())));
        }
        let bound = self.bound(catalog, def, index)?;
        if let Some(predicate) = &bound.predicate {
            if predicate.eval(values, context)? != Value::Bool(true) {
                return Ok(None);
            }
        }
        let computed = (bound.expressions.iter())
            .map(|expression| expression.eval(values, context))
            .collect::<SqlResult<Vec<Value>>>()?;
        Ok(Some(index.key_values(values, computed)))
    }
}

impl Executor<'_> {
    /// The row's key in `index` of `table` (`IndexTerms::keys`), or None when a partial
    /// index leaves it out.
    fn index_keys_of(
        &self,
        table: &Table,
        index: &IndexDef,
        values: &[Value],
    ) -> SqlResult<Option<Vec<Value>>> {
        self.index_terms
            .keys(self.catalog, &table.def, index, values, &self.context)
    }

    /// Adds a new row's entries to the table's indexes (all of them, or those in `only`;
    /// a partial index only if the row satisfies its predicate).
    pub(crate) fn add_entries(
        &self,
        table: &Table,
        values: &[Value],
        pk: &[u8],
        only: Option<&[bool]>,
        txn: &mut Transaction,
    ) -> SqlResult<()> {
        for (position, index) in table.def.indexes.iter().enumerate() {
            if only.is_some_and(|only| !only[position]) {
                continue;
            }
            let Some(keys) = self.index_keys_of(table, index, values)? else {
                continue;
            };
            let tree = table.index_trees[position];
            let (entry, checked) = entry(&table.def, index, &keys, pk)?;
            if checked {
                txn.insert(tree, &entry, pk).map_err(|error| match error {
                    hayate_engine::Error::DuplicateKey => violation(&table.def, index, &keys),
                    other => other.into(),
                })?;
            } else {
                txn.put(tree, &entry, pk)?;
            }
        }
        Ok(())
    }

    /// Removes an old row's entries from the table's indexes (all of them, or those in
    /// `only`; a partial index only if the row satisfied its predicate).
    pub(crate) fn remove_entries(
        &self,
        table: &Table,
        values: &[Value],
        pk: &[u8],
        only: Option<&[bool]>,
        txn: &mut Transaction,
    ) -> SqlResult<()> {
        for (position, index) in table.def.indexes.iter().enumerate() {
            if only.is_some_and(|only| !only[position]) {
                continue;
            }
            let Some(keys) = self.index_keys_of(table, index, values)? else {
                continue;
            };
            let (entry, _) = entry(&table.def, index, &keys, pk)?;
            let tree = table.index_trees[position];
            // An index built after the snapshot wrote the entry after it: the row's own
            // lock decides conflicts, not the entry's version (no 40001 for it).
            if !table.index_readable(position, txn.snapshot_ts()) {
                txn.lock_latest(tree, &entry)?;
            }
            txn.delete(tree, &entry)?;
        }
        Ok(())
    }

    /// The primary key of the row whose unique index key equals the row's, if any (None also
    /// when the row has a NULL in the index, which never conflicts, or is outside a partial
    /// index).
    pub(crate) fn find_unique(
        &self,
        table: &Table,
        position: usize,
        values: &[Value],
        txn: &Transaction,
    ) -> SqlResult<Option<Vec<u8>>> {
        let index = &table.def.indexes[position];
        let Some(keys) = self.index_keys_of(table, index, values)? else {
            return Ok(None);
        };
        let (entry, checked) = entry(&table.def, index, &keys, &[])?;
        if !checked {
            return Ok(None);
        }
        Ok(txn.get(table.index_trees[position], &entry)?)
    }

    /// The prefix of the index entries whose first columns equal `values` (None: no entry
    /// can, e.g. for a NULL).
    fn index_prefix(
        &self,
        def: &TableDef,
        index: &IndexDef,
        values: &[crate::plan::Expr],
        context: &EvalContext,
    ) -> SqlResult<Option<Vec<u8>>> {
        let mut out = Vec::new();
        for (position, expr) in values.iter().enumerate() {
            let data_type: DataType = index.key_type(def, position);
            match key_value(expr.eval(&[], context)?, data_type)? {
                Some(value) => {
                    out.push(NOT_NULL);
                    key::encode_column(&mut out, &value, data_type)?;
                }
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// Reads through an index: calls `keep` with (primary key, raw row) of every row whose
    /// entry matches, in primary key order. The lookup values are evaluated in `context`
    /// (a correlated subquery's read them from the enclosing row).
    pub(super) fn read_index(
        &self,
        table: &Table,
        access: &IndexAccess,
        txn: &Transaction,
        context: &EvalContext,
        keep: &mut RowSink<'_>,
    ) -> SqlResult<()> {
        let keys = self.index_keys(table, access, txn, context)?;
        rows_of_keys(
            keys,
            |chunk| Ok(txn.get_sorted(table.tree, chunk)?),
            |pk, raw| keep(pk, raw).map(|()| true),
        )?;
        Ok(())
    }

    /// The primary keys an index access finds, in primary key order (the caller reads the
    /// rows, and may stop early: a LIMIT reads only the rows it needs).
    pub(super) fn index_keys(
        &self,
        table: &Table,
        access: &IndexAccess,
        txn: &Transaction,
        context: &EvalContext,
    ) -> SqlResult<Vec<Vec<u8>>> {
        let mut keys =
            (self.lookup_keys(table, access, txn, context, usize::MAX)?).unwrap_or_default();
        for narrowing in &access.narrowed_by {
            if keys.len() < NARROWED_KEYS_MIN {
                break;
            }
            // (The plan leaves out indexes the snapshot may not read through; a narrowing
            // one skipped is only a missed shortcut.)
            if !table.index_readable(narrowing.index, txn.snapshot_ts()) {
                continue;
            }
            let most = keys.len().saturating_mul(NARROWING_ENTRIES_PER_KEY);
            if let Some(found) = self.lookup_keys(table, narrowing, txn, context, most)? {
                retain_found(&mut keys, found);
            }
        }
        Ok(keys)
    }

    /// The primary keys one index lookup finds, in primary key order, or None once its
    /// range has more than `most` entries (the scan stops there).
    fn lookup_keys(
        &self,
        table: &Table,
        access: &IndexAccess,
        txn: &Transaction,
        context: &EvalContext,
        most: usize,
    ) -> SqlResult<Option<Vec<Vec<u8>>>> {
        let index = &table.def.indexes[access.index];
        let tree = table.index_trees[access.index];
        if let (IndexLookup::Point(values), true) = (&access.lookup, index.unique) {
            let Some(entry) = self.index_prefix(&table.def, index, values, context)? else {
                return Ok(Some(Vec::new()));
            };
            return Ok(Some(txn.get(tree, &entry)?.into_iter().collect()));
        }
        let Some((start, end)) = self.index_entries(table, access, context)? else {
            return Ok(Some(Vec::new()));
        };
        let scan = txn.scan(tree, as_slice(&start), as_slice(&end))?;
        let Some((mut keys, in_entry_order)) = scan.values(most)? else {
            return Ok(None);
        };
        if matches!(access.lookup, IndexLookup::Range { .. }) || !in_entry_order {
            // A range's entries come in index order; the plan expects primary key order.
            keys.sort_unstable_by(|a, b| hayate_engine::compare_keys(a, b));
        }
        Ok(Some(keys))
    }

    /// The range of the entries an index access finds (None: empty). A lookup's entries,
    /// and a range's of equal values, come in primary key order.
    pub(super) fn index_entries(
        &self,
        table: &Table,
        access: &IndexAccess,
        context: &EvalContext,
    ) -> SqlResult<Option<KeyRange>> {
        let index = &table.def.indexes[access.index];
        match &access.lookup {
            IndexLookup::Point(values) => Ok(self
                .index_prefix(&table.def, index, values, context)?
                .map(prefix_range)),
            IndexLookup::Range {
                prefix,
                lower,
                upper,
            } => {
                let Some(base) = self.index_prefix(&table.def, index, prefix, context)? else {
                    return Ok(None);
                };
                let next = index.key_type(&table.def, prefix.len());
                self.index_range(next, base, lower, upper, context)
            }
        }
    }

    /// The entry range of the entries starting with `base` (the encoded equal prefix) whose
    /// next key, of type `data_type`, is within the bounds: with no bound, every entry of the
    /// prefix (NULLs in the next key too), else never a NULL. None: empty.
    fn index_range(
        &self,
        data_type: DataType,
        base: Vec<u8>,
        lower: &Option<KeyBound>,
        upper: &Option<KeyBound>,
        context: &EvalContext,
    ) -> SqlResult<Option<KeyRange>> {
        if lower.is_none() && upper.is_none() {
            return Ok(Some(prefix_range(base)));
        }
        let with = |marker: u8| {
            let mut key = base.clone();
            key.push(marker);
            key
        };
        // Some(None): the bound cannot be encoded for this type and only the filter applies.
        let encode = |bound: &KeyBound| -> SqlResult<Option<Option<Vec<u8>>>> {
            let value = bound.value.eval(&[], context)?;
            if value.is_null() {
                return Ok(None);
            }
            Ok(Some(match key_value(value, data_type)? {
                Some(value) => {
                    let mut prefix = with(NOT_NULL);
                    key::encode_column(&mut prefix, &value, data_type)?;
                    Some(prefix)
                }
                None => None,
            }))
        };
        let start = match lower {
            None => Bound::Included(with(NOT_NULL)),
            Some(bound) => match encode(bound)? {
                None => return Ok(None),
                Some(None) => Bound::Included(with(NOT_NULL)),
                Some(Some(prefix)) if bound.inclusive => Bound::Included(prefix),
                Some(Some(prefix)) => match key::prefix_successor(&prefix) {
                    Some(successor) => Bound::Included(successor),
                    None => return Ok(None),
                },
            },
        };
        let end = match upper {
            None => Bound::Excluded(with(NULL)),
            Some(bound) => match encode(bound)? {
                None => return Ok(None),
                Some(None) => Bound::Excluded(with(NULL)),
                Some(Some(prefix)) if !bound.inclusive => Bound::Excluded(prefix),
                Some(Some(prefix)) => match key::prefix_successor(&prefix) {
                    Some(successor) => Bound::Excluded(successor),
                    None => Bound::Excluded(with(NULL)),
                },
            },
        };
        Ok(Some((start, end)))
    }
}

//! Secondary indexes: the engine key of an entry, their upkeep by writes, and reads through
//! them.
//!
//! An entry's key is, per index column, 0x01 and the column's memcomparable key encoding, or
//! 0x02 for NULL (so NULLs sort last, as in PostgreSQL's default ascending order); then, for a
//! non-unique index or a unique one with a NULL column, the row's primary key (so equal index
//! values stay distinct entries, in primary key order). The value is the primary key. A unique
//! index with no NULL column checks uniqueness through the engine's `insert`, in the writing
//! transaction, like a primary key.

use std::ops::Bound;

use hayate_engine::Transaction;

use super::{as_slice, key_value, prefix_range, Executor, KeyRange};
use crate::catalog::{IndexDef, Table, TableDef};
use crate::encoding::key;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::access::{IndexAccess, IndexLookup, KeyBound};
use crate::types::{DataType, Value};

/// Takes each row read: (primary key, raw row).
type RowSink<'a> = dyn FnMut(Vec<u8>, &[u8]) -> SqlResult<()> + 'a;

const NOT_NULL: u8 = 0x01;
const NULL: u8 = 0x02;

/// The key of an index entry for a row, and whether its insert must check uniqueness.
pub(crate) fn entry(
    def: &TableDef,
    index: &IndexDef,
    values: &[Value],
    pk: &[u8],
) -> SqlResult<(Vec<u8>, bool)> {
    let mut out = Vec::with_capacity(16 * index.columns.len() + pk.len());
    let mut has_null = false;
    for column in &index.columns {
        match &values[*column] {
            Value::Null => {
                out.push(NULL);
                has_null = true;
            }
            value => {
                out.push(NOT_NULL);
                key::encode_column(&mut out, value, def.columns[*column].data_type)?;
            }
        }
    }
    let checked = index.unique && !has_null;
    if !checked {
        out.extend_from_slice(pk);
    }
    Ok((out, checked))
}

fn key_text(def: &TableDef, columns: &[usize], values: &[Value]) -> (String, String) {
    let names: Vec<&str> = columns
        .iter()
        .map(|c| def.columns[*c].name.as_str())
        .collect();
    let shown: Vec<String> = columns
        .iter()
        .map(|c| values[*c].to_text().unwrap_or_else(|| "null".into()))
        .collect();
    (names.join(", "), shown.join(", "))
}

/// 23505 of a write that would duplicate a unique index's key.
pub(crate) fn violation(def: &TableDef, index: &IndexDef, values: &[Value]) -> SqlError {
    let (names, shown) = key_text(def, &index.columns, values);
    SqlError::new(
        sqlstate::UNIQUE_VIOLATION,
        format!(
            "duplicate key value violates unique constraint \"{}\"",
            index.name
        ),
    )
    .with_detail(format!("Key ({names})=({shown}) already exists."))
}

/// 23505 of CREATE UNIQUE INDEX or ADD PRIMARY KEY over rows that repeat a key.
pub(crate) fn duplicated(def: &TableDef, index: &IndexDef, values: &[Value]) -> SqlError {
    let (names, shown) = key_text(def, &index.columns, values);
    SqlError::new(
        sqlstate::UNIQUE_VIOLATION,
        format!("could not create unique index \"{}\"", index.name),
    )
    .with_detail(format!("Key ({names})=({shown}) is duplicated."))
}

/// Adds a new row's entries to the table's indexes (all of them, or those in `only`).
pub(crate) fn add_entries(
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
        let tree = table.index_trees[position];
        let (entry, checked) = entry(&table.def, index, values, pk)?;
        if checked {
            txn.insert(tree, &entry, pk).map_err(|error| match error {
                hayate_engine::Error::DuplicateKey => violation(&table.def, index, values),
                other => other.into(),
            })?;
        } else {
            txn.put(tree, &entry, pk)?;
        }
    }
    Ok(())
}

/// Removes an old row's entries from the table's indexes (all of them, or those in `only`).
pub(crate) fn remove_entries(
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
        let (entry, _) = entry(&table.def, index, values, pk)?;
        txn.delete(table.index_trees[position], &entry)?;
    }
    Ok(())
}

/// The primary key of the row whose unique index key equals the row's, if any (None also
/// when the row has a NULL in the index, which never conflicts).
pub(crate) fn find_unique(
    table: &Table,
    position: usize,
    values: &[Value],
    txn: &Transaction,
) -> SqlResult<Option<Vec<u8>>> {
    let index = &table.def.indexes[position];
    let (entry, checked) = entry(&table.def, index, values, &[])?;
    if !checked {
        return Ok(None);
    }
    Ok(txn.get(table.index_trees[position], &entry)?)
}

impl Executor<'_> {
    /// The prefix of the index entries whose first columns equal `values` (None: no entry
    /// can, e.g. for a NULL).
    fn index_prefix(
        &self,
        def: &TableDef,
        index: &IndexDef,
        values: &[crate::plan::Expr],
    ) -> SqlResult<Option<Vec<u8>>> {
        let mut out = Vec::new();
        for (expr, column) in values.iter().zip(&index.columns) {
            let data_type: DataType = def.columns[*column].data_type;
            match key_value(self.eval_constant(expr)?, data_type)? {
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
    /// entry matches, in primary key order.
    pub(super) fn read_index(
        &self,
        table: &Table,
        access: &IndexAccess,
        txn: &Transaction,
        keep: &mut RowSink<'_>,
    ) -> SqlResult<()> {
        let index = &table.def.indexes[access.index];
        let tree = table.index_trees[access.index];
        let mut keys: Vec<Vec<u8>> = Vec::new();
        match &access.lookup {
            IndexLookup::Point(values) => {
                let Some(prefix) = self.index_prefix(&table.def, index, values)? else {
                    return Ok(());
                };
                if index.unique {
                    keys.extend(txn.get(tree, &prefix)?);
                } else {
                    let (start, end) = prefix_range(prefix);
                    for entry in txn.scan(tree, as_slice(&start), as_slice(&end))? {
                        keys.push(entry?.1);
                    }
                }
            }
            IndexLookup::Range {
                prefix,
                lower,
                upper,
            } => {
                let Some(base) = self.index_prefix(&table.def, index, prefix)? else {
                    return Ok(());
                };
                let next = index.columns[prefix.len()];
                let Some((start, end)) = self.index_range(&table.def, next, base, lower, upper)?
                else {
                    return Ok(());
                };
                for entry in txn.scan(tree, as_slice(&start), as_slice(&end))? {
                    keys.push(entry?.1);
                }
                // Entries come in index order; the plan expects primary key order.
                keys.sort_unstable();
            }
        }
        for pk in keys {
            if let Some(raw) = txn.get(table.tree, &pk)? {
                keep(pk, &raw)?;
            }
        }
        Ok(())
    }

    /// The entry range of the entries starting with `base` (the encoded equal prefix) whose
    /// next column, `next`, is within the bounds: with no bound, every entry of the prefix
    /// (NULLs in `next` too), else never a NULL. None: empty.
    fn index_range(
        &self,
        def: &TableDef,
        next: usize,
        base: Vec<u8>,
        lower: &Option<KeyBound>,
        upper: &Option<KeyBound>,
    ) -> SqlResult<Option<KeyRange>> {
        if lower.is_none() && upper.is_none() {
            return Ok(Some(prefix_range(base)));
        }
        let data_type = def.columns[next].data_type;
        let with = |marker: u8| {
            let mut key = base.clone();
            key.push(marker);
            key
        };
        // Some(None): the bound cannot be encoded for this type and only the filter applies.
        let encode = |bound: &KeyBound| -> SqlResult<Option<Option<Vec<u8>>>> {
            let value = self.eval_constant(&bound.value)?;
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

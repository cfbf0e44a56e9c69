//! The engine key of a secondary index entry, and the errors of a unique index whose key
//! repeats.
//!
//! An entry's key is, per index column, `NOT_NULL` (0x01) and the column's memcomparable key
//! encoding, or `NULL` (0x02) for NULL (so NULLs sort last, as in PostgreSQL's default
//! ascending order); then, for a non-unique index or a unique one with a NULL column, the
//! row's primary key (so equal index values stay distinct entries, in primary key order). The
//! value is the primary key. A unique index with no NULL column checks uniqueness through the
//! engine's `insert`, in the writing transaction, like a primary key.
//!
//! Users of the layout:
//! 1. DDL fills a new index from a table's rows (`catalog::ddl`, `catalog::rebuild`).
//! 2. Writes add and remove the entries of the rows they change (`exec::index`).
//! 3. Reads build entry prefixes and ranges from the same markers (`exec::index`).

use super::definition::{IndexDef, TableDef};
use crate::encoding::key;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::Value;

/// Marks an index column that is not NULL; its key encoding follows.
pub(crate) const NOT_NULL: u8 = 0x01;
/// Marks an index column that is NULL.
pub(crate) const NULL: u8 = 0x02;

/// The key of an index entry for a row whose index key is `keys` (`IndexDef::key_values`:
/// per key column or expression, its value), and whether its insert must check uniqueness.
pub(crate) fn entry(
    def: &TableDef,
    index: &IndexDef,
    keys: &[Value],
    pk: &[u8],
) -> SqlResult<(Vec<u8>, bool)> {
    let mut out = Vec::with_capacity(16 * index.columns.len() + pk.len());
    let mut has_null = false;
    for (position, value) in keys.iter().enumerate() {
        match value {
            Value::Null => {
                out.push(NULL);
                has_null = true;
            }
            value => {
                out.push(NOT_NULL);
                key::encode_column(&mut out, value, index.key_type(def, position))?;
            }
        }
    }
    let checked = index.unique && !has_null;
    if !checked {
        out.extend_from_slice(pk);
    }
    Ok((out, checked))
}

/// The key's names (columns, expressions) and values as PostgreSQL's DETAIL shows them.
fn key_text(def: &TableDef, index: &IndexDef, keys: &[Value]) -> (String, String) {
    let names: Vec<String> = (0..keys.len())
        .map(|position| index.key_name(def, position))
        .collect();
    let shown: Vec<String> = keys
        .iter()
        .map(|value| value.to_text().unwrap_or_else(|| "null".into()))
        .collect();
    (names.join(", "), shown.join(", "))
}

/// 23505 of a write that would duplicate a unique index's key (`keys`, as `entry` takes).
pub(crate) fn violation(def: &TableDef, index: &IndexDef, keys: &[Value]) -> SqlError {
    let (names, shown) = key_text(def, index, keys);
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
pub(crate) fn duplicated(def: &TableDef, index: &IndexDef, keys: &[Value]) -> SqlError {
    let (names, shown) = key_text(def, index, keys);
    SqlError::new(
        sqlstate::UNIQUE_VIOLATION,
        format!("could not create unique index \"{}\"", index.name),
    )
    .with_detail(format!("Key ({names})=({shown}) is duplicated."))
}

//! Views: a name for a query, kept as SQL text in `sql.catalog` beside the tables and bound
//! again wherever a statement names the view (docs/design.md, 8.2).
//!
//! 1. CREATE VIEW binds the query once to check it and to fix the view's column names (the
//!    query's, or the list given), then writes the view's row in the DDL's transaction (the
//!    block's, inside one) and creates an empty engine tree `sql.view.v` that gives the view
//!    a stable oid, as sequences have.
//! 2. A statement naming the view binds its query as a derived table under the view's name
//!    (`plan::bind`), so the view reads the tables as they are when the statement runs.
//! 3. DROP VIEW deletes the row and, once committed, the tree. Nothing records which tables
//!    a view reads: dropping one of them leaves the view failing with 42P01 when used.
//!
//! Row format (a value of `sql.catalog`, told from a table's by its first byte): u8 `VIEW_TAG`,
//! name, u16 column count, per column its name, u8 type tag and u32 type modifier (as in a
//! table definition), query text, engine tree name, u16 count and the names of the tables,
//! views and sequences the query reads (strings as u32 length + UTF-8). The column types are
//! those the query had at CREATE VIEW, as PostgreSQL keeps them; the names read give the
//! view's dependencies (pg_depend), which order pg_dump's output.

use std::sync::Arc;

use super::definition::put_string;
use super::reader::Reader;
use super::Catalog;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::DataType;

/// The first byte of a view's row (a table definition's is its format version, 1 to 3).
pub(super) const VIEW_TAG: u8 = b'V';
/// Engine trees that give views their oids.
pub(super) const VIEW_TREE_PREFIX: &str = "sql.view.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewDef {
    pub name: String,
    /// Its columns (name, type), in order.
    pub columns: Vec<(String, DataType)>,
    /// The query as SQL text.
    pub query: String,
    /// The (empty) engine tree its oid comes from; set by the catalog.
    pub tree: String,
    /// The relations the query named when the view was created.
    pub reads: Vec<String>,
}

impl ViewDef {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = vec![VIEW_TAG];
        put_string(&mut out, &self.name);
        out.extend_from_slice(&(self.columns.len() as u16).to_le_bytes());
        for (column, data_type) in &self.columns {
            put_string(&mut out, column);
            out.push(data_type.tag());
            out.extend_from_slice(&data_type.type_modifier().to_le_bytes());
        }
        put_string(&mut out, &self.query);
        put_string(&mut out, &self.tree);
        out.extend_from_slice(&(self.reads.len() as u16).to_le_bytes());
        for read in &self.reads {
            put_string(&mut out, read);
        }
        out
    }

    pub(super) fn decode(bytes: &[u8]) -> SqlResult<ViewDef> {
        let corrupt = |what: &str| {
            SqlError::new(
                sqlstate::DATA_CORRUPTED,
                format!("corrupt view definition in sql.catalog: {what}"),
            )
        };
        let mut reader = Reader::new(bytes);
        if reader.u8() != Some(VIEW_TAG) {
            return Err(corrupt("tag"));
        }
        let name = reader.string().ok_or_else(|| corrupt("name"))?;
        let count = reader.u16().ok_or_else(|| corrupt("column count"))?;
        let columns = (0..count)
            .map(|_| {
                let name = reader.string()?;
                let (tag, modifier) = (reader.u8()?, reader.u32()?);
                Some((name, DataType::from_tag(tag, modifier)?))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| corrupt("columns"))?;
        let query = reader.string().ok_or_else(|| corrupt("query"))?;
        let tree = reader.string().ok_or_else(|| corrupt("tree name"))?;
        let count = reader.u16().ok_or_else(|| corrupt("read count"))?;
        let reads = (0..count)
            .map(|_| reader.string())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| corrupt("relations read"))?;
        if !reader.at_end() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(ViewDef {
            name,
            columns,
            query,
            tree,
            reads,
        })
    }
}

/// A view as statements use it.
#[derive(Debug)]
pub struct View {
    pub def: ViewDef,
    /// Its engine tree's id (the view's oid, `system::tree_oid`).
    pub tree: hayate_engine::TreeId,
}

impl Catalog {
    /// The view of this name, if there is one.
    pub fn view(&self, name: &str) -> Option<Arc<View>> {
        self.state.read().views.get(name).cloned()
    }

    /// Every view, by name.
    pub fn views(&self) -> Vec<Arc<View>> {
        let mut views: Vec<Arc<View>> = self.state.read().views.values().cloned().collect();
        views.sort_by(|a, b| a.def.name.cmp(&b.def.name));
        views
    }

    /// Whether some view's query reads `table` (its text names the table's columns).
    pub fn read_by_view(&self, table: &str) -> bool {
        let state = self.state.read();
        state
            .views
            .values()
            .any(|view| view.def.reads.iter().any(|read| read == table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_rows_round_trip_and_reject_damage() {
        let def = ViewDef {
            name: "big_orders".into(),
            columns: vec![
                ("id".into(), DataType::Int8),
                ("total".into(), DataType::Numeric(Some((12, 2)))),
            ],
            query: "SELECT id, total FROM orders WHERE total > 100".into(),
            tree: "sql.view.big_orders".into(),
            reads: vec!["orders".into()],
        };
        let bytes = def.encode();
        assert_eq!(ViewDef::decode(&bytes).unwrap(), def);
        for cut in 0..bytes.len() {
            assert!(ViewDef::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ViewDef::decode(&longer).is_err());
    }
}

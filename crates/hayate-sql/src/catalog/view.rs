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
//! table definition), query text, engine tree name (strings as u32 length + UTF-8). The
//! column types are those the query had at CREATE VIEW, as PostgreSQL keeps them.

use std::sync::Arc;

use hayate_engine::Transaction;

use super::ddl::DdlUndo;
use super::definition::put_string;
use super::reader::Reader;
use super::{duplicate_relation, Catalog};
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
        if !reader.at_end() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(ViewDef {
            name,
            columns,
            query,
            tree,
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

fn not_a(name: &str, what: &str) -> SqlError {
    SqlError::new(
        sqlstate::WRONG_OBJECT_TYPE,
        format!("\"{name}\" is not a {what}"),
    )
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

    /// CREATE [OR REPLACE] VIEW (`def.tree` empty: named here).
    pub fn create_view(
        &self,
        mut def: ViewDef,
        or_replace: bool,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let previous = self.view(&def.name);
        match &previous {
            Some(_) if !or_replace => return Err(duplicate_relation(&def.name)),
            None if self.relation_exists(&def.name) => {
                return Err(match self.state.read().tables.contains_key(&def.name) {
                    true => not_a(&def.name, "view"),
                    false => duplicate_relation(&def.name),
                })
            }
            _ => {}
        }
        let mut on_rollback = Vec::new();
        let tree = match &previous {
            Some(view) => {
                def.tree = view.def.tree.clone();
                view.tree
            }
            None => {
                let (tree_name, tree) =
                    self.fresh_tree(&self.tree_name(VIEW_TREE_PREFIX, &def.name), None)?;
                def.tree = tree_name.clone();
                on_rollback.push(tree_name);
                tree
            }
        };
        let in_block = block.is_some();
        let written = self.write_defs(block, |txn| {
            Ok(txn.put(self.tree, def.name.as_bytes(), &def.encode())?)
        });
        if let Err(error) = written {
            self.drop_trees(&on_rollback);
            return Err(error);
        }
        let name = def.name.clone();
        {
            let mut state = self.state.write();
            state
                .views
                .insert(name.clone(), Arc::new(View { def, tree }));
            state.version += 1;
        }
        let undo = DdlUndo {
            previous_views: vec![(name, previous)],
            on_rollback,
            ..DdlUndo::default()
        };
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// DROP VIEW; nothing if it does not exist and `if_exists` is set.
    pub fn drop_view(
        &self,
        name: &str,
        if_exists: bool,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let Some(view) = self.view(name) else {
            if self.state.read().tables.contains_key(name) {
                return Err(not_a(name, "view"));
            }
            if if_exists {
                return Ok(DdlUndo::default());
            }
            return Err(SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("view \"{name}\" does not exist"),
            ));
        };
        let in_block = block.is_some();
        self.write_defs(block, |txn| {
            txn.delete(self.tree, name.as_bytes())?;
            Ok(())
        })?;
        {
            let mut state = self.state.write();
            state.views.remove(name);
            state.version += 1;
        }
        let undo = DdlUndo {
            on_commit: vec![view.def.tree.clone()],
            previous_views: vec![(name.to_string(), Some(view))],
            ..DdlUndo::default()
        };
        Ok(self.finish_or_defer(in_block, undo))
    }
}

/// The error for DROP TABLE naming a view.
pub(super) fn view_not_table(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::WRONG_OBJECT_TYPE,
        format!("\"{name}\" is not a table (DROP VIEW removes a view)"),
    )
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

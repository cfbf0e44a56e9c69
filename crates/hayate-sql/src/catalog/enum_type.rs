//! Enum types in the catalog: CREATE TYPE ... AS ENUM, ALTER TYPE, DROP TYPE.
//!
//! 1. CREATE TYPE creates an empty engine tree `sql.type.t` that gives the type its oid (as
//!    views and sequences have), then writes the type's row in `sql.catalog` under its name
//!    in the DDL's transaction (the block's, inside one). Types share the name space of
//!    tables, views and sequences, as PostgreSQL's row types do.
//! 2. A column of the type stores `DataType::Enum(oid)` in its table's definition and its
//!    values as text; the binder checks labels and orders by the type (`types::enums`).
//! 3. ALTER TYPE (ADD VALUE, RENAME TO) writes the row again; DROP TYPE deletes
//!    it, refused while a column or view uses the type, and drops the tree once committed.
//!
//! Row format (a value of `sql.catalog`, told from a table's by its first byte): u8
//! `ENUM_TAG`, name, engine tree name, u16 label count, per label (in sort order) the label,
//! f32 sort order and u32 number (strings as u32 length + UTF-8, integers little-endian).

use std::sync::Arc;

use hayate_engine::Transaction;

use super::definition::{mentions, put_string};
use super::reader::Reader;
use super::DdlUndo;
use super::{tree_oid, Catalog};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::enums::{EnumLabel, EnumType, LabelPlace};
use crate::types::DataType;

/// The first byte of an enum type's row (a table definition's is its format version).
pub(super) const ENUM_TAG: u8 = b'E';
/// Engine trees that give enum types their oids.
pub(super) const TYPE_TREE_PREFIX: &str = "sql.type.";

/// An enum type as the catalog keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEnum {
    pub enum_type: Arc<EnumType>,
    /// The (empty) engine tree its oid comes from.
    pub tree: String,
}

/// What ALTER TYPE changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnumChange {
    AddValue {
        label: String,
        place: LabelPlace,
        if_not_exists: bool,
    },
    Rename(String),
    /// RENAME VALUE: the catalog's part (the session rewrites the stored values).
    RenameValue {
        from: String,
        to: String,
    },
}

pub(super) fn encode(stored: &StoredEnum) -> Vec<u8> {
    let mut out = vec![ENUM_TAG];
    put_string(&mut out, &stored.enum_type.name);
    put_string(&mut out, &stored.tree);
    out.extend_from_slice(&(stored.enum_type.labels.len() as u16).to_le_bytes());
    for label in &stored.enum_type.labels {
        put_string(&mut out, &label.label);
        out.extend_from_slice(&label.sort_order.to_le_bytes());
        out.extend_from_slice(&label.number.to_le_bytes());
    }
    out
}

/// Decodes a row; the oid is set by the catalog once it finds the tree.
pub(super) fn decode(bytes: &[u8]) -> SqlResult<StoredEnum> {
    let corrupt = |what: &str| {
        SqlError::new(
            sqlstate::DATA_CORRUPTED,
            format!("corrupt enum type in sql.catalog: {what}"),
        )
    };
    let mut reader = Reader::new(bytes);
    if reader.u8() != Some(ENUM_TAG) {
        return Err(corrupt("tag"));
    }
    let name = reader.string().ok_or_else(|| corrupt("name"))?;
    let tree = reader.string().ok_or_else(|| corrupt("tree name"))?;
    let count = reader.u16().ok_or_else(|| corrupt("label count"))?;
    let labels = (0..count)
        .map(|_| {
            let label = reader.string()?;
            let sort_order = f32::from_bits(reader.u32()?);
            let number = reader.u32()?;
            Some(EnumLabel {
                label,
                sort_order,
                number,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| corrupt("labels"))?;
    let ordered = labels
        .windows(2)
        .all(|pair| pair[0].sort_order < pair[1].sort_order);
    if !reader.at_end() || !ordered {
        return Err(corrupt("trailing bytes or labels out of order"));
    }
    Ok(StoredEnum {
        enum_type: Arc::new(EnumType {
            name,
            oid: 0,
            labels,
            former: Vec::new(),
        }),
        tree,
    })
}

/// 42704 for a type name that names no type.
pub(crate) fn undefined_type(name: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_OBJECT,
        format!("type \"{name}\" does not exist"),
    )
}

pub(super) fn duplicate_type(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::DUPLICATE_OBJECT,
        format!("type \"{name}\" already exists"),
    )
}

impl Catalog {
    /// The enum type of this name, if there is one.
    pub fn enum_type(&self, name: &str) -> Option<Arc<EnumType>> {
        let state = self.state.read();
        Some(state.enums.get(name)?.enum_type.clone())
    }

    /// The enum type with this oid, if there is one.
    pub fn enum_type_by_oid(&self, oid: u32) -> Option<Arc<EnumType>> {
        let state = self.state.read();
        state
            .enums
            .values()
            .find(|stored| stored.enum_type.oid == oid)
            .map(|stored| stored.enum_type.clone())
    }

    /// `enum_type_by_oid`, 42704 if there is none (a DDL dropped it since a statement was
    /// bound with it).
    pub fn existing_enum_type(&self, oid: u32) -> SqlResult<Arc<EnumType>> {
        self.enum_type_by_oid(oid).ok_or_else(|| {
            SqlError::new(
                sqlstate::UNDEFINED_OBJECT,
                format!("type with oid {oid} does not exist"),
            )
        })
    }

    /// Every enum type, by name.
    pub fn enum_types(&self) -> Vec<Arc<EnumType>> {
        let state = self.state.read();
        let mut types: Vec<_> = state.enums.values().map(|s| s.enum_type.clone()).collect();
        types.sort_by(|a, b| a.name.cmp(&b.name));
        types
    }

    /// The stored types of these rows, oids set; one whose tree is not there (a standby yet
    /// to apply the rest of its DDL) is skipped.
    pub(super) fn load_enums(
        &self,
        stored: Vec<StoredEnum>,
    ) -> std::collections::HashMap<String, StoredEnum> {
        stored
            .into_iter()
            .filter_map(|mut stored| match self.db.table(&stored.tree) {
                Ok(tree) => {
                    Arc::make_mut(&mut stored.enum_type).oid = tree_oid(tree) as u32;
                    Some((stored.enum_type.name.clone(), stored))
                }
                Err(error) => {
                    log::debug!("catalog: type {} skipped: {error}", stored.enum_type.name);
                    None
                }
            })
            .collect()
    }

    /// CREATE TYPE name AS ENUM (labels).
    pub fn create_enum(
        &self,
        enum_type: EnumType,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let name = enum_type.name.clone();
        if self.relation_exists(&name) || self.state.read().enums.contains_key(&name) {
            return Err(duplicate_type(&name));
        }
        let (tree_name, tree) = self.fresh_tree(&self.tree_name(TYPE_TREE_PREFIX, &name), None)?;
        let mut enum_type = enum_type;
        enum_type.oid = tree_oid(tree) as u32;
        let stored = StoredEnum {
            enum_type: Arc::new(enum_type),
            tree: tree_name.clone(),
        };
        let undo = DdlUndo {
            previous_enums: vec![(name, None)],
            on_rollback: vec![tree_name],
            ..DdlUndo::default()
        };
        self.write_enum(None, stored, undo, block)
    }

    /// Writes a type's row (and deletes the row of its old name), publishes it and finishes
    /// or defers the DDL; a failed write drops what `undo.on_rollback` created.
    fn write_enum(
        &self,
        old_name: Option<&str>,
        stored: StoredEnum,
        undo: DdlUndo,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let in_block = block.is_some();
        let name = stored.enum_type.name.clone();
        let written = self.write_defs(block, |txn| {
            if let Some(old_name) = old_name {
                txn.delete(self.tree, old_name.as_bytes())?;
            }
            Ok(txn.put(self.tree, name.as_bytes(), &encode(&stored))?)
        });
        if let Err(error) = written {
            self.drop_trees(&undo.on_rollback);
            return Err(error);
        }
        {
            let mut state = self.state.write();
            if let Some(old_name) = old_name {
                state.enums.remove(old_name);
            }
            state.enums.insert(name, stored);
            state.version += 1;
        }
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// ALTER TYPE name ADD VALUE / RENAME TO.
    pub fn alter_enum(
        &self,
        name: &str,
        change: EnumChange,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let previous = self.state.read().enums.get(name).cloned();
        let Some(previous) = previous else {
            return Err(undefined_type(name));
        };
        let mut enum_type = (*previous.enum_type).clone();
        let mut previous_enums = vec![(name.to_string(), Some(previous.clone()))];
        match change {
            EnumChange::AddValue {
                label,
                if_not_exists: true,
                ..
            } if enum_type.contains(&label) => return Ok(DdlUndo::default()),
            EnumChange::AddValue { label, place, .. } => enum_type.add(&label, &place)?,
            EnumChange::Rename(to) => {
                if self.relation_exists(&to) || self.state.read().enums.contains_key(&to) {
                    return Err(duplicate_type(&to));
                }
                // Columns name the type by oid and follow the rename; defaults, checks,
                // index predicates and expressions and views keep SQL text, which may name
                // it (pg_dump writes `'x'::public.t`): a rename would leave them naming none.
                if let Some(user) = self.type_named_in_text(name, false) {
                    return Err(SqlError::unsupported(format!(
                        "ALTER TYPE ... RENAME TO of a type in use ({user})"
                    )));
                }
                enum_type.name = to.clone();
                previous_enums.push((to, None));
            }
            EnumChange::RenameValue { from, to } => {
                enum_type.rename_label(&from, &to)?;
                // Stored values are the labels' text, rewritten by the session; SQL text
                // that writes the label as a literal ('x', $$x$$, 'x'::t) would name none
                // after it. Any text holding the label's characters counts: refused, never
                // wrong.
                let user = self.stored_text_where(false, |text| text.contains(from.as_str()));
                if let Some(user) = user.or_else(|| self.enum_foreign_key(enum_type.oid)) {
                    return Err(SqlError::unsupported(format!(
                        "ALTER TYPE ... RENAME VALUE of a label {user} names"
                    )));
                }
            }
        }
        let stored = StoredEnum {
            enum_type: Arc::new(enum_type),
            tree: previous.tree.clone(),
        };
        let renamed = stored.enum_type.name != name;
        let undo = DdlUndo {
            previous_enums,
            ..DdlUndo::default()
        };
        self.write_enum(renamed.then_some(name), stored, undo, block)
    }

    /// DROP TYPE; nothing if it does not exist and `if_exists` is set. Refused while a table
    /// column or a view column is of the type or a default names it ('x'::t): 2BP01, or with
    /// CASCADE (which would drop them) 0A000; CASCADE of a type nothing uses drops it.
    pub fn drop_enum(
        &self,
        name: &str,
        if_exists: bool,
        cascade: bool,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let stored = self.state.read().enums.get(name).cloned();
        let Some(stored) = stored else {
            if if_exists {
                return Ok(DdlUndo::default());
            }
            return Err(undefined_type(name));
        };
        let user = self.enum_user(DataType::Enum(stored.enum_type.oid));
        if let Some(user) = user.or_else(|| self.type_named_in_text(name, true)) {
            if cascade {
                return Err(SqlError::unsupported(format!(
                    "DROP TYPE ... CASCADE of a type in use ({user})"
                )));
            }
            return Err(SqlError::new(
                sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("cannot drop type {name} because other objects depend on it"),
            )
            .with_detail(format!("{user} depends on type {name}")));
        }
        let in_block = block.is_some();
        self.write_defs(block, |txn| {
            txn.delete(self.tree, name.as_bytes())?;
            Ok(())
        })?;
        {
            let mut state = self.state.write();
            state.enums.remove(name);
            state.version += 1;
        }
        let undo = DdlUndo {
            on_commit: vec![stored.tree.clone()],
            previous_enums: vec![(name.to_string(), Some(stored))],
            ..DdlUndo::default()
        };
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// What keeps SQL text that names the type `name` (`definition::mentions`: a column's
    /// default, a check, an index's predicate or expression, a view's query; only defaults,
    /// which name no columns, if `defaults_only`), for the message of a change it would not
    /// follow. A name of the same spelling that is no type (a column named as the type)
    /// counts too: the change is refused, never wrong.
    fn type_named_in_text(&self, name: &str, defaults_only: bool) -> Option<String> {
        self.stored_text_where(defaults_only, |text| mentions(text, name))
    }

    /// The first keeper of SQL text (a column's default, a check, an index's predicate or
    /// expression, a view's query; only defaults if `defaults_only`) for which `matches`
    /// holds, named for a message.
    fn stored_text_where(
        &self,
        defaults_only: bool,
        matches: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let state = self.state.read();
        for table in state.tables.values() {
            let def = &table.def;
            let defaults = def.columns.iter().filter_map(|column| {
                let text = column.default.as_deref()?;
                Some((format!("the default of column {}", column.name), text))
            });
            let checks = (def.checks.iter())
                .filter(|_| !defaults_only)
                .map(|check| (format!("constraint {}", check.name), check.expr.as_str()));
            let texts = defaults.chain(checks).chain(
                def.indexes
                    .iter()
                    .filter(|_| !defaults_only)
                    .flat_map(|index| {
                        let predicate = index.predicate.as_deref().into_iter();
                        let expressions = index.expressions.iter().map(|e| e.text.as_str());
                        predicate
                            .chain(expressions)
                            .map(|text| (format!("index {}", index.name), text))
                    }),
            );
            for (what, text) in texts {
                if matches(text) {
                    return Some(format!("{what} of table {}", def.name));
                }
            }
        }
        (state.views.values())
            .filter(|_| !defaults_only)
            .find(|view| matches(&view.def.query))
            .map(|view| format!("view {}", view.def.name))
    }

    /// A foreign key whose columns are of the enum type `oid` (its rows' values are renamed
    /// table by table, which the key would refuse half way), named for a message.
    fn enum_foreign_key(&self, oid: u32) -> Option<String> {
        let state = self.state.read();
        state.tables.values().find_map(|table| {
            let def = &table.def;
            let key = def.foreign_keys.iter().find(|key| {
                (key.columns.iter()).any(|&c| def.columns[c].data_type == DataType::Enum(oid))
            })?;
            Some(format!("foreign key {} of table {}", key.name, def.name))
        })
    }

    /// A column of a table or view whose type is `data_type`, as PostgreSQL names it in a
    /// dependency message.
    fn enum_user(&self, data_type: DataType) -> Option<String> {
        let state = self.state.read();
        for table in state.tables.values() {
            if let Some(column) = table.def.columns.iter().find(|c| c.data_type == data_type) {
                return Some(format!(
                    "column {} of table {}",
                    column.name, table.def.name
                ));
            }
        }
        state.views.values().find_map(|view| {
            let (column, _) = view.def.columns.iter().find(|(_, t)| *t == data_type)?;
            Some(format!("column {column} of view {}", view.def.name))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_rows_round_trip_and_reject_damage() {
        let mut enum_type =
            EnumType::new("mood".into(), &["sad".into(), "ok".into(), "happy".into()]).unwrap();
        enum_type
            .add("meh", &LabelPlace::Before("ok".into()))
            .unwrap();
        let stored = StoredEnum {
            enum_type: Arc::new(enum_type),
            tree: "sql.type.mood".into(),
        };
        let bytes = encode(&stored);
        assert_eq!(decode(&bytes).unwrap(), stored);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }
}

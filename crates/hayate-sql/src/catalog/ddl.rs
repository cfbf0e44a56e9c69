//! DDL on the catalog: CREATE/DROP TABLE, CREATE/DROP INDEX, CREATE/DROP SEQUENCE and
//! CREATE/DROP VIEW (`view` holds a view's definition), each by the steps of the `catalog`
//! module doc, and the end of a transaction block's DDL.
//!
//! 1. A DDL takes the catalog's DDL mutex, checks names (tables, indexes and sequences share
//!    one namespace) and creates its engine trees.
//! 2. It fills them (`batch`) and writes the catalog rows: in its own transaction, or in the
//!    transaction block's.
//! 3. It publishes the change in memory and returns a `DdlUndo`: empty outside a block (the
//!    replaced trees are dropped at once), else kept by the session until the block ends,
//!    when `Catalog::finish_ddl` drops the replaced trees (commit) or puts the old tables
//!    back and drops the new trees (rollback).

use std::sync::Arc;

use hayate_engine::{Transaction, TreeId};

use super::batch::{duplicated_row, for_each_row, BatchWriter, IndexBuild};
use super::definition::{
    IndexDef, IndexKey, IndexKeys, IndexKind, TableDef, EXPRESSION_KEY, TABLE_TREE_PREFIX,
};
use super::index_entry;
use super::sequence::{Sequence, SequenceOptions};
use super::table::Table;
use super::view::{View, ViewDef, VIEW_TREE_PREFIX};
use super::{duplicate_relation, Catalog, INDEX_TREE_PREFIX, SEQUENCE_TREE_PREFIX};
use crate::error::{sqlstate, SqlError, SqlResult};

/// What a DDL changed, to finish when its transaction ends (`Catalog::finish_ddl`).
#[derive(Debug, Default)]
pub struct DdlUndo {
    /// The tables as they were before (None: there was none), restored by a rollback.
    pub(super) previous: Vec<(String, Option<Arc<Table>>)>,
    /// Engine trees no definition names once the change commits.
    pub(super) on_commit: Vec<String>,
    /// Engine trees the change created, dropped if it rolls back.
    pub(super) on_rollback: Vec<String>,
    /// The views as they were before (None: there was none), restored by a rollback.
    pub(super) previous_views: Vec<(String, Option<Arc<View>>)>,
    /// The enum types as they were before (None: there was none), restored by a rollback.
    pub(super) previous_enums: Vec<(String, Option<super::enum_type::StoredEnum>)>,
}

/// What `Catalog::create_index` creates.
pub struct NewIndex<'a> {
    pub table: &'a str,
    /// None: PostgreSQL's name (table_col1_col2_idx, then ...idx1, idx2, ...).
    pub name: Option<&'a str>,
    pub keys: &'a [IndexKey],
    pub kind: IndexKind,
    pub if_not_exists: bool,
    /// A partial index's predicate, as SQL text.
    pub predicate: Option<String>,
    /// A row's key in the new index, or None when its predicate leaves the row out.
    pub keys_of: IndexKeys<'a>,
    /// Per column, indoption bits (`IndexDef::options`); empty for the defaults.
    pub options: &'a [u8],
}

impl Catalog {
    /// A DDL's end: outside a block it is committed already (drop what it replaced); inside
    /// one, the undo goes to the session, which calls `finish_ddl` when the block ends.
    pub(super) fn finish_or_defer(&self, in_block: bool, undo: DdlUndo) -> DdlUndo {
        if in_block {
            // Indexes it made hold the block's own writes (and entries for the newest rows
            // only): nobody reads through them until it commits (`Table::index_ready`).
            let before: Vec<TreeId> = (undo.previous.iter())
                .filter_map(|(_, table)| table.as_ref())
                .flat_map(|table| table.index_trees.iter().copied())
                .collect();
            let state = self.state.read();
            for (name, _) in &undo.previous {
                if let Some(table) = state.tables.get(name) {
                    table.mark_block_indexes(&before);
                }
            }
            drop(state);
            undo
        } else {
            self.finish_ddl_locked(vec![undo], true);
            DdlUndo::default()
        }
    }

    /// Ends the DDLs of a transaction block (or of the part after a savepoint), newest last:
    /// `committed` drops the trees they replaced; otherwise their tables are put back as they
    /// were, newest first, and the trees they created are dropped. Call it after the engine
    /// transaction committed or rolled back its catalog rows.
    pub fn finish_ddl(&self, undos: Vec<DdlUndo>, committed: bool) {
        if undos.is_empty() {
            return;
        }
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        self.finish_ddl_locked(undos, committed);
    }

    fn finish_ddl_locked(&self, undos: Vec<DdlUndo>, committed: bool) {
        if committed {
            // The block's indexes are readable by snapshots from now on; statements bound
            // without them are bound again.
            let now = self.db.begin_read_only().snapshot_ts();
            let mut state = self.state.write();
            let mut readied = false;
            for (name, _) in undos.iter().flat_map(|undo| &undo.previous) {
                if let Some(table) = state.tables.get(name) {
                    readied |= table.ready_block_indexes(now);
                }
            }
            if readied {
                state.version += 1;
            }
            drop(state);
            for undo in undos {
                self.drop_trees(&undo.on_commit);
            }
            return;
        }
        for undo in undos.into_iter().rev() {
            {
                let mut state = self.state.write();
                for (name, table) in undo.previous.into_iter().rev() {
                    match table {
                        Some(table) => state.tables.insert(name, table),
                        None => state.tables.remove(&name),
                    };
                }
                for (name, view) in undo.previous_views.into_iter().rev() {
                    match view {
                        Some(view) => state.views.insert(name, view),
                        None => state.views.remove(&name),
                    };
                }
                for (name, stored) in undo.previous_enums.into_iter().rev() {
                    match stored {
                        Some(stored) => state.enums.insert(name, stored),
                        None => state.enums.remove(&name),
                    };
                }
                state.version += 1;
            }
            self.drop_trees(&undo.on_rollback);
        }
    }

    /// Creates a table; None if it exists and `if_not_exists` is set. `block`: the open
    /// transaction block's engine transaction (see the module comment).
    pub fn create_table(
        &self,
        mut def: TableDef,
        if_not_exists: bool,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        if self.relation_exists(&def.name) {
            if if_not_exists {
                return Ok(DdlUndo::default());
            }
            return Err(duplicate_relation(&def.name));
        }
        // A table's row type would take the name (PostgreSQL: 42710).
        if self.state.read().enums.contains_key(&def.name) {
            return Err(super::enum_type::duplicate_type(&def.name));
        }
        // The primary key's index is a relation too: a name of its own, as PostgreSQL
        // chooses one (t_pkey1, t_pkey2, ... when a renamed table kept t_pkey).
        self.name_primary_key(&mut def)?;
        def.add_automatic_indexes();
        for column in 0..def.columns.len() {
            if def.columns[column].identity.is_some() {
                // A taken name (a renamed table kept its sequence's) gets a number, as in
                // PostgreSQL: t_id_seq1, t_id_seq2, ...
                let base = def.sequence_name(column);
                let mut sequence = base.clone();
                let mut number = 0;
                while self.relation_exists(&sequence) {
                    number += 1;
                    sequence = format!("{base}{number}");
                }
                if number > 0 {
                    def.columns[column].sequence = Some(sequence);
                }
            }
        }
        for index in def.indexes.iter().filter(|index| !index.automatic) {
            if self.relation_exists(&index.name) {
                return Err(duplicate_relation(&index.name));
            }
        }
        let mut created = Vec::new();
        let trees = (|| -> SqlResult<()> {
            let (tree_name, _) =
                self.fresh_tree(&self.tree_name(TABLE_TREE_PREFIX, &def.name), None)?;
            created.push(tree_name.clone());
            def.tree = tree_name;
            for index in &mut def.indexes {
                let (tree_name, _) = self.fresh_tree(
                    &self.tree_name(INDEX_TREE_PREFIX, &index.name),
                    Some(index.unique),
                )?;
                created.push(tree_name.clone());
                index.tree = tree_name;
            }
            Ok(())
        })();
        if let Err(error) = trees {
            self.drop_trees(&created);
            return Err(error);
        }
        // Inside a block the sequence rows are not written: a missing row starts at 1, and
        // the block holding the row's lock would make its own nextval wait for itself.
        let in_block = block.is_some();
        let written = self.write_defs(block, |txn| {
            self.write_def(txn, &def)?;
            for column in 0..def.columns.len() {
                if def.columns[column].identity.is_some() && !in_block {
                    let name = def.sequence_name(column);
                    txn.put(self.sequence_tree, name.as_bytes(), &1i64.to_le_bytes())?;
                }
            }
            Ok(())
        });
        let loaded = written.and_then(|()| self.load(def));
        let table = match loaded {
            Ok(table) => table,
            Err(error) => {
                self.drop_trees(&created);
                return Err(error);
            }
        };
        let undo = DdlUndo {
            previous: vec![(table.def.name.clone(), None)],
            on_commit: Vec::new(),
            on_rollback: created,
            ..DdlUndo::default()
        };
        self.publish(table);
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// Drops a table with its indexes and sequences; false if it does not exist and
    /// `if_exists` is set.
    pub fn drop_table(
        &self,
        name: &str,
        if_exists: bool,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let Some(table) = self.state.read().tables.get(name).cloned() else {
            if self.state.read().views.contains_key(name) {
                return Err(view_not_table(name));
            }
            if if_exists {
                return Ok(DdlUndo::default());
            }
            return Err(SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("table \"{name}\" does not exist"),
            ));
        };
        let in_block = block.is_some();
        self.write_defs(block, |txn| {
            txn.delete(self.tree, name.as_bytes())?;
            for sequence in table.sequences.iter().flatten() {
                txn.delete(self.sequence_tree, sequence.name.as_bytes())?;
            }
            Ok(())
        })?;
        {
            let mut state = self.state.write();
            state.tables.remove(name);
            state.version += 1;
        }
        let undo = DdlUndo {
            on_commit: trees_of(&table.def),
            previous: vec![(name.to_string(), Some(table))],
            on_rollback: Vec::new(),
            ..DdlUndo::default()
        };
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// CREATE [UNIQUE] INDEX or ADD CONSTRAINT ... UNIQUE (`kind`): creates the engine
    /// index, fills it from a snapshot of the table's rows (in batches; a partial index with
    /// those its predicate accepts), then commits the new definition. Nothing if the index
    /// exists and `if_not_exists` is set.
    pub fn create_index(
        &self,
        index: NewIndex<'_>,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let NewIndex {
            table: table_name,
            name,
            keys,
            kind,
            if_not_exists,
            predicate,
            keys_of,
            options,
        } = index;
        let unique = matches!(kind, IndexKind::Unique | IndexKind::UniqueConstraint);
        let constraint = kind == IndexKind::UniqueConstraint;
        let automatic = kind == IndexKind::Automatic;
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let table = self.table(table_name)?;
        let mut expressions = Vec::new();
        let columns = keys
            .iter()
            .map(|key| match key {
                IndexKey::Column(column) => table.def.column_index(column).ok_or_else(|| {
                    SqlError::new(
                        sqlstate::UNDEFINED_COLUMN,
                        format!("column \"{column}\" does not exist"),
                    )
                }),
                IndexKey::Expression(expression) => {
                    expressions.push(expression.clone());
                    Ok(EXPRESSION_KEY)
                }
            })
            .collect::<SqlResult<Vec<usize>>>()?;
        let name = match name {
            // Not a relation: its name is its foreign key's, taken or not.
            Some(name) if automatic => name.to_string(),
            Some(name) => {
                if self.relation_exists(name) {
                    if if_not_exists {
                        return Ok(DdlUndo::default());
                    }
                    return Err(duplicate_relation(name));
                }
                name.to_string()
            }
            None => {
                // PostgreSQL's choice: table_col1_col2_idx, then ...idx1, idx2, ...
                let mut base = table.def.name.clone();
                for key in keys {
                    base.push('_');
                    base.push_str(&key.name_part());
                }
                base.push_str("_idx");
                let mut candidate = base.clone();
                let mut n = 0;
                while self.relation_exists(&candidate) {
                    n += 1;
                    candidate = format!("{base}{n}");
                }
                candidate
            }
        };
        let (tree_name, tree) =
            self.fresh_tree(&self.tree_name(INDEX_TREE_PREFIX, &name), Some(unique))?;
        let index_def = IndexDef {
            name,
            columns,
            unique,
            constraint,
            tree: tree_name.clone(),
            predicate,
            expressions,
            options: match options.iter().all(|option| *option == 0) {
                true => Vec::new(),
                false => options.to_vec(),
            },
            automatic,
        };
        let mut def = table.def.clone();
        def.indexes.push(index_def.clone());
        // An automatic index this one makes needless (it leads with the same columns) goes.
        let needless = def.drop_needless_automatic_indexes();
        let in_block = block.is_some();
        let built = (|| -> SqlResult<Table> {
            let mut writer = BatchWriter::new(&self.db);
            let mut build = IndexBuild::new(&self.db, tree, 1);
            for_each_row(&self.db, block.as_deref(), &table, |pk, values| {
                let Some(key) = keys_of(&table.def, &index_def, &values)? else {
                    return Ok(());
                };
                let (entry, checked) = index_entry::entry(&table.def, &index_def, &key, &pk)?;
                build.push(entry, &pk, checked)
            })?;
            build.write_to(&mut writer, |own, pk| {
                // The block's uncommitted rows are the block's to see.
                let txn = block.as_deref().unwrap_or(own);
                duplicated_row(txn, table.tree, &table.def, &index_def, pk, keys_of)
            })?;
            writer.finish()?;
            self.write_defs(block, |txn| self.write_def(txn, &def))?;
            self.load(def)
        })();
        let new_table = match built {
            Ok(new_table) => new_table,
            Err(error) => {
                self.drop_trees(&[tree_name]);
                return Err(error);
            }
        };
        let undo = DdlUndo {
            previous: vec![(table.def.name.clone(), Some(table))],
            on_commit: needless,
            on_rollback: vec![tree_name],
            ..DdlUndo::default()
        };
        self.publish(new_table);
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// An ALTER TABLE that changes the definition only, not the rows (ADD/DROP CONSTRAINT,
    /// ALTER COLUMN SET/DROP DEFAULT and NOT NULL): `change` edits it (the caller checked the
    /// rows against what it adds).
    pub fn alter_definition(
        &self,
        table_name: &str,
        change: impl FnOnce(&mut TableDef),
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        self.try_alter_definition(
            table_name,
            |def| {
                change(def);
                Ok(())
            },
            block,
        )
    }

    /// `alter_definition` with a change that may refuse (it runs under the DDL lock, so
    /// what it checks of the catalog holds when the definition is written).
    pub fn try_alter_definition(
        &self,
        table_name: &str,
        change: impl FnOnce(&mut TableDef) -> SqlResult<()>,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let table = self.table(table_name)?;
        let mut def = table.def.clone();
        change(&mut def)?;
        // A dropped foreign key's automatic index goes with it.
        let needless = def.drop_needless_automatic_indexes();
        let in_block = block.is_some();
        self.write_defs(block, |txn| self.write_def(txn, &def))?;
        let new_table = self.load(def)?;
        let undo = DdlUndo {
            previous: vec![(table.def.name.clone(), Some(table))],
            on_commit: needless,
            on_rollback: Vec::new(),
            ..DdlUndo::default()
        };
        self.publish(new_table);
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// ALTER TABLE `from` RENAME TO `to`: one transaction deletes the old definition and
    /// writes the new, with the foreign keys of every table that references it (itself
    /// included) naming the new one. The engine trees, index names and identity sequences
    /// keep their names (the sequences are pinned first: `TableDef::pin_sequence_names`), as
    /// in PostgreSQL, and so does the primary key (`TableDef::pin_primary_key_name`).
    pub fn rename_table(
        &self,
        from: &str,
        to: &str,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let table = self.table(from)?;
        if self.relation_exists(to) {
            return Err(duplicate_relation(to));
        }
        // A type's row has the name as its key in sql.catalog too.
        if self.state.read().enums.contains_key(to) {
            return Err(super::enum_type::duplicate_type(to));
        }
        let rename_references = |def: &mut TableDef| {
            for key in def.foreign_keys.iter_mut().filter(|key| key.table == from) {
                key.table = to.to_string();
            }
        };
        let mut def = table.def.clone();
        def.pin_sequence_names();
        def.pin_primary_key_name();
        rename_references(&mut def);
        def.name = to.to_string();
        let children: Vec<Arc<Table>> = self
            .state
            .read()
            .tables
            .values()
            .filter(|child| {
                child.def.name != from && child.def.foreign_keys.iter().any(|k| k.table == from)
            })
            .cloned()
            .collect();
        let child_defs: Vec<TableDef> = children
            .iter()
            .map(|child| {
                let mut child_def = child.def.clone();
                rename_references(&mut child_def);
                child_def
            })
            .collect();
        let in_block = block.is_some();
        self.write_defs(block, |txn| {
            txn.delete(self.tree, from.as_bytes())?;
            self.write_def(txn, &def)?;
            for child_def in &child_defs {
                self.write_def(txn, child_def)?;
            }
            Ok(())
        })?;
        // The renamed table keeps its sequence objects (their reserved values).
        let mut renamed = self.load(def)?;
        renamed.sequences = table.sequences.clone();
        let loaded_children = child_defs
            .into_iter()
            .map(|child_def| self.load(child_def))
            .collect::<SqlResult<Vec<Table>>>()?;
        let mut previous = vec![(from.to_string(), Some(table)), (to.to_string(), None)];
        previous.extend(
            children
                .into_iter()
                .map(|child| (child.def.name.clone(), Some(child))),
        );
        {
            let mut state = self.state.write();
            state.tables.remove(from);
            state.version += 1;
        }
        self.publish(renamed);
        for child in loaded_children {
            self.publish(child);
        }
        let undo = DdlUndo {
            previous,
            ..DdlUndo::default()
        };
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// ALTER INDEX `from` RENAME TO `to` on `table_name`, or RENAME CONSTRAINT of a UNIQUE
    /// constraint (its index): the definition names it anew, its engine tree stays.
    pub fn rename_index(
        &self,
        table_name: &str,
        from: &str,
        to: &str,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        self.try_alter_definition(
            table_name,
            |def| {
                if self.relation_exists(to) {
                    return Err(duplicate_relation(to));
                }
                let constraint_taken = def.checks.iter().any(|c| c.name == to)
                    || def.foreign_keys.iter().any(|k| k.name == to);
                let table = def.name.clone();
                // The primary key's index: its constraint's name.
                if !def.primary_key.is_empty() && def.primary_key_name() == from {
                    if constraint_taken {
                        return Err(SqlError::new(
                            sqlstate::DUPLICATE_OBJECT,
                            format!("constraint \"{to}\" for relation \"{table}\" already exists"),
                        ));
                    }
                    def.primary_key_constraint = Some(to.to_string());
                    return Ok(());
                }
                let index = def
                    .indexes
                    .iter_mut()
                    .find(|index| !index.automatic && index.name == from)
                    .ok_or_else(|| {
                        SqlError::new(
                            sqlstate::UNDEFINED_OBJECT,
                            format!("index \"{from}\" does not exist"),
                        )
                    })?;
                // A UNIQUE constraint's index names the constraint too.
                if index.constraint && constraint_taken {
                    return Err(SqlError::new(
                        sqlstate::DUPLICATE_OBJECT,
                        format!("constraint \"{to}\" for relation \"{table}\" already exists"),
                    ));
                }
                index.name = to.to_string();
                Ok(())
            },
            block,
        )
    }

    /// The table an index (not a primary key) belongs to.
    pub fn index_table(&self, index: &str) -> Option<Arc<Table>> {
        self.state
            .read()
            .tables
            .values()
            .find(|table| (table.def.indexes.iter()).any(|i| !i.automatic && i.name == index))
            .cloned()
    }

    /// DROP INDEX; false if it does not exist and `if_exists` is set.
    pub fn drop_index(
        &self,
        name: &str,
        if_exists: bool,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let found = self.state.read().tables.values().find_map(|table| {
            table
                .def
                .indexes
                .iter()
                .position(|index| !index.automatic && index.name == name)
                .map(|position| (table.clone(), position))
        });
        let Some((table, position)) = found else {
            if if_exists {
                return Ok(DdlUndo::default());
            }
            return Err(SqlError::new(
                sqlstate::UNDEFINED_OBJECT,
                format!("index \"{name}\" does not exist"),
            ));
        };
        let mut def = table.def.clone();
        let removed = def.indexes.remove(position);
        let in_block = block.is_some();
        self.write_defs(block, |txn| self.write_def(txn, &def))?;
        let new_table = self.load(def)?;
        let undo = DdlUndo {
            previous: vec![(table.def.name.clone(), Some(table))],
            on_commit: vec![removed.tree],
            on_rollback: Vec::new(),
            ..DdlUndo::default()
        };
        self.publish(new_table);
        Ok(self.finish_or_defer(in_block, undo))
    }

    /// CREATE SEQUENCE (committed on its own, see the module comment): its engine tree
    /// first, then its row, then it is published.
    pub fn create_sequence(
        &self,
        name: &str,
        options: SequenceOptions,
        if_not_exists: bool,
    ) -> SqlResult<()> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        if self.relation_exists(name) {
            if if_not_exists {
                return Ok(());
            }
            return Err(duplicate_relation(name));
        }
        let (tree_name, tree) =
            self.fresh_tree(&self.tree_name(SEQUENCE_TREE_PREFIX, name), None)?;
        let sequence = Sequence::new(
            name.to_string(),
            options,
            Some((tree_name.clone(), tree)),
            self.db.clone(),
            self.sequence_tree,
        );
        let written = self.write_defs(None, |txn| {
            let row = sequence.encode(options.start, &options, false);
            Ok(txn.put(self.sequence_tree, name.as_bytes(), &row)?)
        });
        if let Err(error) = written {
            self.drop_trees(&[tree_name]);
            return Err(error);
        }
        let mut state = self.state.write();
        state.sequences.insert(name.to_string(), Arc::new(sequence));
        state.version += 1;
        Ok(())
    }

    /// DROP SEQUENCE (committed on its own). A column's sequence goes with its table only.
    pub fn drop_sequence(&self, name: &str, if_exists: bool) -> SqlResult<()> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let Some(sequence) = self.state.read().sequences.get(name).cloned() else {
            if let Ok(sequence) = self.sequence(name) {
                let owner = self.state.read().tables.values().find_map(|table| {
                    let column = table
                        .sequences
                        .iter()
                        .position(|s| s.as_ref().is_some_and(|s| Arc::ptr_eq(s, &sequence)))?;
                    Some((
                        table.def.name.clone(),
                        table.def.columns[column].name.clone(),
                    ))
                });
                let (table, column) = owner.unwrap_or_default();
                return Err(SqlError::new(
                    sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                    format!(
                        "cannot drop sequence {name} because column {column} of table {table} \
                         requires it"
                    ),
                ));
            }
            if if_exists {
                return Ok(());
            }
            return Err(SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("sequence \"{name}\" does not exist"),
            ));
        };
        self.write_defs(None, |txn| {
            txn.delete(self.sequence_tree, name.as_bytes())?;
            Ok(())
        })?;
        {
            let mut state = self.state.write();
            state.sequences.remove(name);
            state.version += 1;
        }
        if let Some((tree_name, _)) = &sequence.tree {
            self.drop_trees(std::slice::from_ref(tree_name));
        }
        Ok(())
    }
}

/// The engine trees of a table: its rows and its indexes.
pub(super) fn trees_of(def: &TableDef) -> Vec<String> {
    std::iter::once(def.tree.clone())
        .chain(def.indexes.iter().map(|index| index.tree.clone()))
        .collect()
}

impl Catalog {
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
            None if self.state.read().enums.contains_key(&def.name) => {
                return Err(super::enum_type::duplicate_type(&def.name))
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

fn not_a(name: &str, what: &str) -> SqlError {
    SqlError::new(
        sqlstate::WRONG_OBJECT_TYPE,
        format!("\"{name}\" is not a {what}"),
    )
}

/// The error for DROP TABLE naming a view.
fn view_not_table(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::WRONG_OBJECT_TYPE,
        format!("\"{name}\" is not a table (DROP VIEW removes a view)"),
    )
}

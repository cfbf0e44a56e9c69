//! Rebuilding tables into fresh engine trees: TRUNCATE (outside a transaction block) and
//! ALTER TABLE (ADD PRIMARY KEY, ADD COLUMN, DROP COLUMN).
//!
//! 1. Create the new table tree and one new tree per index (`Catalog::fresh_tree`).
//! 2. Copy every row from one snapshot, changed as the `Rebuild` says, with its index
//!    entries (`batch`), checking the new primary key and unique indexes as it goes.
//! 3. Write the new definitions in one transaction (the block's, inside one) and publish
//!    them; the old trees are dropped once that commits (`DdlUndo`).

use hayate_engine::Transaction;

use super::batch::{duplicated_row, for_each_row, BatchWriter, IndexBuild};
use super::ddl::{trees_of, DdlUndo};
use super::definition::{
    ColumnDef, IndexDef, IndexKeys, TableDef, EXPRESSION_KEY, TABLE_TREE_PREFIX,
};
use super::index_entry;
use super::table::Table;
use super::{Catalog, INDEX_TREE_PREFIX};
use crate::encoding::{key, row};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::Value;

/// A change of one table made by a rebuild (`Catalog::rebuild`).
pub enum Rebuild {
    /// Empty the table (TRUNCATE).
    Truncate,
    /// Key the rows by these columns (ALTER TABLE ADD PRIMARY KEY).
    /// The key's columns and its constraint's name (None: <table>_pkey).
    AddPrimaryKey(Vec<usize>, Option<String>),
    /// Append a column; existing rows get the value.
    AddColumn(ColumnDef, Value),
    /// Remove a column (and the indexes on it).
    DropColumn(usize),
}

impl Catalog {
    /// Rebuilds tables into fresh engine trees, made visible by one commit of their
    /// definitions: TRUNCATE (outside a transaction block) and ALTER TABLE. The old trees are
    /// dropped after that commit.
    /// `keys_of` gives a row's key in an index (None: a partial index leaves it out).
    pub fn rebuild(
        &self,
        changes: Vec<(String, Rebuild)>,
        keys_of: IndexKeys<'_>,
        block: Option<&mut Transaction>,
    ) -> SqlResult<DdlUndo> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let mut created: Vec<String> = Vec::new();
        let in_block = block.is_some();
        let result = self.rebuild_locked(changes, keys_of, &mut created, block);
        match result {
            Ok((new_tables, old_trees)) => {
                let mut undo = DdlUndo {
                    previous: Vec::new(),
                    on_commit: old_trees,
                    on_rollback: created,
                    ..DdlUndo::default()
                };
                for table in new_tables {
                    let name = table.def.name.clone();
                    undo.previous.push((name.clone(), self.table(&name).ok()));
                    self.publish(table);
                }
                Ok(self.finish_or_defer(in_block, undo))
            }
            Err(error) => {
                self.drop_trees(&created);
                Err(error)
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn rebuild_locked(
        &self,
        changes: Vec<(String, Rebuild)>,
        keys_of: IndexKeys<'_>,
        created: &mut Vec<String>,
        block: Option<&mut Transaction>,
    ) -> SqlResult<(Vec<Table>, Vec<String>)> {
        let mut new_tables = Vec::new();
        // Rows copied into each new table: they count toward its first automatic analysis
        // (the new tree has no statistics; `Statistics::wrote`).
        let mut copied = Vec::new();
        let mut old_trees = Vec::new();
        for (name, change) in changes {
            let old = self.table(&name)?;
            let mut def = old.def.clone();
            let mut copy = true;
            match &change {
                Rebuild::Truncate => copy = false,
                Rebuild::AddPrimaryKey(columns, key_name) => {
                    if !def.primary_key.is_empty() {
                        return Err(SqlError::new(
                            sqlstate::INVALID_TABLE_DEFINITION,
                            format!("multiple primary keys for table \"{name}\" are not allowed"),
                        ));
                    }
                    for column in columns {
                        def.columns[*column].not_null = true;
                    }
                    def.primary_key = columns.clone();
                    def.primary_key_constraint = key_name.clone();
                    self.name_primary_key(&mut def)?;
                }
                Rebuild::AddColumn(column, _) => def.columns.push(column.clone()),
                Rebuild::DropColumn(column) => {
                    if def.primary_key.contains(column) {
                        return Err(SqlError::unsupported(
                            "dropping a primary key column (ALTER TABLE DROP COLUMN)",
                        ));
                    }
                    let column_name = def.columns[*column].name.clone();
                    for (other, position) in self.referencing(&def.name) {
                        let key = &other.def.foreign_keys[position];
                        if key.referenced.contains(&column_name) {
                            return Err(SqlError::new(
                                sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                                format!(
                                    "cannot drop column {column_name} of table {name} because \
                                     other objects depend on it"
                                ),
                            )
                            .with_detail(format!(
                                "constraint {} on table {} depends on column {column_name} of \
                                 table {name}",
                                key.name, other.def.name
                            )));
                        }
                    }
                    def.columns.remove(*column);
                    // As PostgreSQL: the indexes on the column, or whose WHERE reads it, go.
                    def.indexes.retain(|index| {
                        !index.columns.contains(column)
                            && !index.predicate_mentions(&column_name)
                            && !index.expressions_mention(&column_name)
                    });
                    // As PostgreSQL: the constraints on the column go with it.
                    def.foreign_keys.retain(|key| !key.columns.contains(column));
                    def.checks.retain(|check| !check.mentions(&column_name));
                    // (An expression key, EXPRESSION_KEY, stays what it is.)
                    let shift = |c: &mut usize| {
                        if *c > *column && *c != EXPRESSION_KEY {
                            *c -= 1
                        }
                    };
                    def.primary_key.iter_mut().for_each(shift);
                    for index in &mut def.indexes {
                        index.columns.iter_mut().for_each(shift);
                    }
                    for key in &mut def.foreign_keys {
                        key.columns.iter_mut().for_each(shift);
                    }
                }
            }
            // Every tree is made anew: an automatic index the change made needless (a new
            // primary key leads with its columns, its key dropped) is simply not made, and a
            // key whose index went with a dropped column gets one.
            def.add_automatic_indexes();
            let (tree_name, tree) =
                self.fresh_tree(&self.tree_name(TABLE_TREE_PREFIX, &def.name), None)?;
            created.push(tree_name.clone());
            def.tree = tree_name;
            let mut index_trees = Vec::new();
            for index in &mut def.indexes {
                let (tree_name, tree) = self.fresh_tree(
                    &self.tree_name(INDEX_TREE_PREFIX, &index.name),
                    Some(index.unique),
                )?;
                created.push(tree_name.clone());
                index.tree = tree_name;
                index_trees.push(tree);
            }
            let mut rows = 0u64;
            if copy {
                let types = def.types();
                let mut writer = BatchWriter::new(&self.db);
                let mut builds: Vec<IndexBuild> = index_trees
                    .iter()
                    .map(|index_tree| IndexBuild::new(&self.db, *index_tree, index_trees.len()))
                    .collect();
                for_each_row(&self.db, block.as_deref(), &old, |old_key, mut values| {
                    rows += 1;
                    match &change {
                        Rebuild::AddColumn(column, value) => {
                            if value.is_null() && column.not_null {
                                return Err(SqlError::new(
                                    sqlstate::NOT_NULL_VIOLATION,
                                    format!(
                                        "column \"{}\" of relation \"{}\" contains null values",
                                        column.name, def.name
                                    ),
                                ));
                            }
                            values.push(value.clone())
                        }
                        Rebuild::DropColumn(column) => {
                            values.remove(*column);
                        }
                        _ => {}
                    }
                    let key = if def.primary_key.is_empty() {
                        old_key
                    } else {
                        primary_key_of(&def, &values)?
                    };
                    writer.write(tree, &key, &row::encode(&values, &types)?, true, |_| {
                        let pk = IndexDef {
                            name: def.primary_key_name(),
                            columns: def.primary_key.clone(),
                            unique: true,
                            constraint: true,
                            tree: String::new(),
                            predicate: None,
                            options: Vec::new(),
                            expressions: Vec::new(),
                            automatic: false,
                        };
                        index_entry::duplicated(&def, &pk, &pk.key_values(&values, Vec::new()))
                    })?;
                    for (index, build) in def.indexes.iter().zip(&mut builds) {
                        let Some(keys) = keys_of(&def, index, &values)? else {
                            continue;
                        };
                        let (entry, checked) = index_entry::entry(&def, index, &keys, &key)?;
                        build.push(entry, &key, checked)?;
                    }
                    Ok(())
                })?;
                // The new table's rows are written (the last batch by `writer`'s transaction).
                for (index, build) in def.indexes.iter().zip(builds) {
                    build.write_to(&mut writer, |txn, pk| {
                        duplicated_row(txn, tree, &def, index, pk, keys_of)
                    })?;
                }
                writer.finish()?;
            }
            old_trees.extend(trees_of(&old.def));
            new_tables.push(def);
            copied.push(rows);
        }
        // The new trees are complete; one commit of the definitions makes them the tables.
        self.write_defs(block, |txn| {
            for def in &new_tables {
                self.write_def(txn, def)?;
            }
            Ok(())
        })?;
        let new_tables: Vec<Table> = new_tables
            .into_iter()
            .map(|def| self.load(def))
            .collect::<SqlResult<_>>()?;
        for (table, rows) in new_tables.iter().zip(copied) {
            table.statistics.wrote(rows);
        }
        Ok((new_tables, old_trees))
    }
}

/// The primary key of a row of `def` (which has one), checking its columns are not NULL.
fn primary_key_of(def: &TableDef, values: &[Value]) -> SqlResult<Vec<u8>> {
    let mut out = Vec::new();
    for column in &def.primary_key {
        if values[*column].is_null() {
            return Err(SqlError::new(
                sqlstate::NOT_NULL_VIOLATION,
                format!(
                    "column \"{}\" of relation \"{}\" contains null values",
                    def.columns[*column].name, def.name
                ),
            ));
        }
        key::encode_column(&mut out, &values[*column], def.columns[*column].data_type)?;
    }
    Ok(out)
}

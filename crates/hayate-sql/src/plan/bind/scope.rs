//! Name resolution: which columns a row of the FROM list has and what names reach them.
//!
//! A scope is the FROM list of one query level: one entry per table, derived table or table
//! function, each with its qualifier (alias, else the table's name) and its columns at an
//! offset in the joined row. Enclosing query levels are searched after the current one (a
//! correlated subquery's outer references).

use crate::catalog::Table;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::OutputColumn;
use crate::types::DataType;

#[derive(Debug, Clone)]
pub(super) struct ScopeEntry {
    /// The alias, else the table's name (None: no name, e.g. output columns of a UNION).
    pub qualifier: Option<String>,
    /// The schema, when the entry has no alias (`schema.table.column`).
    pub schema: Option<String>,
    pub columns: Vec<(String, DataType)>,
    /// Columns merged into an earlier entry's by USING/NATURAL: not found unqualified,
    /// not part of `*`.
    pub hidden: Vec<bool>,
    /// How many of the columns, from the first, `*` reads (the rest are system columns
    /// such as a system table's `tableoid`).
    pub star_width: usize,
    /// A table's primary key columns (GROUP BY on them makes its other columns grouped,
    /// as PostgreSQL's functional dependency does); empty for other entries.
    pub primary_key: Vec<usize>,
    pub offset: usize,
}

impl ScopeEntry {
    pub fn new(
        qualifier: Option<String>,
        schema: Option<String>,
        columns: Vec<(String, DataType)>,
    ) -> ScopeEntry {
        ScopeEntry {
            qualifier,
            schema,
            hidden: vec![false; columns.len()],
            star_width: columns.len(),
            columns,
            primary_key: Vec::new(),
            offset: 0,
        }
    }

    pub fn table(table: &Table) -> ScopeEntry {
        let mut entry = ScopeEntry::new(
            Some(table.def.name.clone()),
            Some(crate::system::PUBLIC_SCHEMA.into()),
            table
                .def
                .columns
                .iter()
                .map(|column| (column.name.clone(), column.data_type))
                .collect(),
        );
        entry.primary_key = table.def.primary_key.clone();
        entry
    }

    /// Gives the entry an alias (and column aliases, the first columns renamed in order).
    pub fn alias(&mut self, alias: Option<&sqlparser::ast::TableAlias>) -> SqlResult<()> {
        let Some(alias) = alias else {
            return Ok(());
        };
        self.qualifier = Some(super::ident_name(&alias.name));
        self.schema = None;
        if alias.columns.len() > self.columns.len() {
            return Err(SqlError::syntax(format!(
                "table \"{}\" has {} columns available but {} columns specified",
                super::ident_name(&alias.name),
                self.columns.len(),
                alias.columns.len()
            )));
        }
        for (column, name) in self.columns.iter_mut().zip(&alias.columns) {
            column.0 = super::ident_name(&name.name);
        }
        Ok(())
    }

    fn matches(&self, qualifier: &[String]) -> bool {
        match qualifier {
            [name] => self.qualifier.as_deref() == Some(name),
            [schema, name] => {
                self.schema.as_deref() == Some(schema) && self.qualifier.as_deref() == Some(name)
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Scope {
    pub entries: Vec<ScopeEntry>,
}

impl Scope {
    pub fn table(table: &Table) -> Scope {
        let mut scope = Scope::default();
        scope.push(ScopeEntry::table(table));
        scope
    }

    /// The output columns of a query as one unnamed entry (ORDER BY of a UNION).
    pub fn output(columns: &[OutputColumn]) -> Scope {
        let mut scope = Scope::default();
        scope.push(ScopeEntry::new(
            None,
            None,
            columns
                .iter()
                .map(|column| (column.name.clone(), column.data_type))
                .collect(),
        ));
        scope
    }

    pub fn width(&self) -> usize {
        self.entries
            .last()
            .map_or(0, |entry| entry.offset + entry.columns.len())
    }

    pub fn push(&mut self, mut entry: ScopeEntry) {
        entry.offset = self.width();
        self.entries.push(entry);
    }

    /// True if some entry answers to `qualifier`.
    pub fn has_qualifier(&self, qualifier: &[String]) -> bool {
        self.entries.iter().any(|entry| entry.matches(qualifier))
    }

    /// The row position and type of a column (Ok(None): not in this scope).
    pub fn resolve(
        &self,
        qualifier: Option<&[String]>,
        name: &str,
    ) -> SqlResult<Option<(usize, DataType)>> {
        let mut found = None;
        for entry in &self.entries {
            if let Some(qualifier) = qualifier {
                if !entry.matches(qualifier) {
                    continue;
                }
            }
            for (index, (column, data_type)) in entry.columns.iter().enumerate() {
                if column != name || (qualifier.is_none() && entry.hidden[index]) {
                    continue;
                }
                if found.is_some() {
                    return Err(SqlError::new(
                        sqlstate::AMBIGUOUS_COLUMN,
                        format!("column reference \"{name}\" is ambiguous"),
                    ));
                }
                found = Some((entry.offset + index, *data_type));
            }
        }
        Ok(found)
    }

    /// The columns `*` (qualifier None) or `t.*` expands to: (position, name, type).
    pub fn expand(&self, qualifier: Option<&[String]>) -> Vec<(usize, String, DataType)> {
        let mut out = Vec::new();
        for entry in &self.entries {
            match qualifier {
                Some(qualifier) if !entry.matches(qualifier) => continue,
                _ => {}
            }
            for (index, (name, data_type)) in entry.columns.iter().enumerate() {
                if (qualifier.is_none() && entry.hidden[index]) || index >= entry.star_width {
                    continue;
                }
                out.push((entry.offset + index, name.clone(), *data_type));
            }
        }
        out
    }
}

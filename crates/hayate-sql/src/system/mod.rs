//! System catalogs: the `pg_catalog` and `information_schema` tables that tools read (psql's
//! `\d`, drivers and pgbench on start). They are not stored: a query that reads one gets rows
//! computed from the SQL catalog at that moment, so they can never disagree with it.
//!
//! A query's FROM resolves a name here when it is qualified with `pg_catalog` or
//! `information_schema`, or when it is an unqualified `pg_catalog` name (PostgreSQL searches
//! `pg_catalog` before `public`).
//!
//! Object ids (OIDs) are stable across restarts because they derive from the engine's tree
//! ids, which the engine never reuses:
//! - a user table with tree id `k` has oid `16384 + 4k` (16384 is PostgreSQL's first user oid);
//!   its primary key index (`TableDef::primary_key_name`) is `oid + 1`, its row type `oid + 2` and its
//!   primary key constraint `oid + 3`;
//! - a secondary index with its own tree id `k` has oid `16384 + 4k` too (and `+ 3` for the
//!   constraint of a UNIQUE constraint);
//! - a column DEFAULT (pg_attrdef) has oid `table oid << 16 | attnum`, the sequence of a
//!   SERIAL/identity column `table oid << 16 | 0x8000 | attnum`;
//! - a CREATE SEQUENCE sequence has the oid of its (empty) engine tree, `16384 + 4k`;
//! - the system tables, built-in types, namespaces, the one role (oid 10) and the one
//!   database (oid 5, PostgreSQL's `postgres`) use PostgreSQL's own oids, so drivers that
//!   know them by number (JDBC's type cache) see the numbers they expect.
//!
//! OIDs are carried as `int8` values (there is no `oid` type in `types.rs`); their text form
//! is the same.
//!
//! Arrays (`text[]`, `int2[]`, `oid[]` columns, `current_schemas()`) are carried in their
//! PostgreSQL text form (`{pg_catalog,public}`) in text values: see `array`.

pub mod array;
mod constraints;
mod empty;
pub mod functions;
mod pg_types;
mod statistics;
mod tables;

use crate::ident::quote_ident;
use std::sync::Arc;

use crate::catalog::{
    Catalog, IndexExpression, Sequence, Table, EXPRESSION_KEY, INDEX_DESC, INDEX_NULLS_FIRST,
};
use crate::error::SqlResult;
use crate::types::{DataType, Value};

pub use pg_types::{format_type, type_of, type_oid_by_name};

/// The schema every user table lives in.
pub const PUBLIC_SCHEMA: &str = "public";
pub const PUBLIC_NAMESPACE_OID: i64 = 2200;
pub const PG_CATALOG_NAMESPACE_OID: i64 = 11;
pub const INFORMATION_SCHEMA_NAMESPACE_OID: i64 = 13000;
/// The one role: it owns every object; its name is the session's user.
pub const OWNER_ROLE_OID: i64 = 10;
pub(super) const OID: DataType = DataType::Int8;
pub(super) const NAME: DataType = DataType::Text;
pub(super) const TEXT: DataType = DataType::Text;
pub(super) const BOOL: DataType = DataType::Bool;
pub(super) const INT2: DataType = DataType::Int2;
pub(super) const INT4: DataType = DataType::Int4;

/// (schema, oid, columns, rows) of a system table.
pub(super) type Definition = (
    &'static str,
    i64,
    &'static [(&'static str, DataType)],
    fn(&Snapshot, &SessionNames) -> Vec<Vec<Value>>,
);

pub use crate::catalog::{tree_oid, FIRST_USER_OID};
/// pg_am: the table access method and the B+tree index method.
pub const HEAP_AM_OID: i64 = 2;
pub const BTREE_AM_OID: i64 = 403;
/// The default collation of text columns.
pub const DEFAULT_COLLATION_OID: i64 = 100;

/// The names a system table's rows depend on besides the catalog.
#[derive(Debug, Clone)]
pub struct SessionNames {
    pub user: String,
    pub database: String,
    /// The session's settings with their current values (pg_settings); a session's
    /// defaults when there is no session.
    pub settings: std::collections::BTreeMap<String, String>,
}

impl Default for SessionNames {
    fn default() -> Self {
        SessionNames {
            user: "hayate".into(),
            database: "hayate".into(),
            settings: crate::settings::default_settings("hayate", "hayate"),
        }
    }
}

/// A read-only table computed from the catalog.
#[derive(Debug, Clone)]
pub struct SystemTable {
    pub schema: &'static str,
    pub name: &'static str,
    pub oid: i64,
    /// (name, type) of each column.
    pub columns: &'static [(&'static str, DataType)],
    compute: fn(&Snapshot, &SessionNames) -> Vec<Vec<Value>>,
}

impl SystemTable {
    /// The table's rows now, one value per column (user and database names unknown: the
    /// role and the database are listed as "hayate").
    pub fn rows(&self, catalog: &Catalog) -> SqlResult<Vec<Vec<Value>>> {
        Ok(self.rows_in(&Snapshot::of(catalog), &SessionNames::default()))
    }

    /// The table's rows as the session of `user` connected to `database` with `settings`
    /// sees them (pg_roles, pg_database and information_schema name them, pg_settings lists
    /// the settings; None: a session's defaults); prefer this to `rows`.
    pub fn rows_for(
        &self,
        catalog: &Catalog,
        user: &str,
        database: &str,
        settings: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Vec<Vec<Value>> {
        let names = SessionNames {
            user: user.into(),
            database: database.into(),
            settings: settings
                .cloned()
                .unwrap_or_else(|| crate::settings::default_settings(user, database)),
        };
        self.rows_in(&Snapshot::of(catalog), &names)
    }

    /// The table's rows as a session sees them.
    pub fn rows_in(&self, snapshot: &Snapshot, names: &SessionNames) -> Vec<Vec<Value>> {
        (self.compute)(snapshot, names)
    }
}

/// The system table `schema.name` (`schema` None: any system schema).
pub fn lookup(schema: Option<&str>, name: &str) -> Option<SystemTable> {
    let table = tables::definition(name)
        .or_else(|| empty::definition(name))
        .or_else(|| statistics::definition(name))
        .or_else(|| constraints::definition(name))?;
    match schema {
        Some(schema) if schema != table.schema => None,
        _ => Some(table),
    }
}

/// Every system table: (schema, name, oid).
pub fn all_tables() -> impl Iterator<Item = SystemTable> {
    tables::NAMES
        .iter()
        .filter_map(|name| tables::definition(name))
        .chain(
            empty::NAMES
                .iter()
                .filter_map(|name| empty::definition(name)),
        )
        .chain(
            statistics::NAMES
                .iter()
                .filter_map(|name| statistics::definition(name)),
        )
        .chain(
            constraints::NAMES
                .iter()
                .filter_map(|name| constraints::definition(name)),
        )
}

/// A secondary index as the system tables show it.
#[derive(Debug, Clone)]
pub struct IndexInfo {
    pub oid: i64,
    pub name: String,
    /// Positions of the indexed columns in the table (0-based).
    pub columns: Vec<usize>,
    pub unique: bool,
    pub primary: bool,
    /// The oid of the constraint the index implements (PRIMARY KEY / UNIQUE), if any.
    pub constraint: Option<i64>,
    /// A partial index's WHERE, as SQL text.
    pub predicate: Option<String>,
    /// Per column, indoption bits (`IndexDef::options`; empty: all default).
    pub options: Vec<u8>,
    /// Key expressions, at the positions of `columns` that hold `EXPRESSION_KEY`.
    pub expressions: Vec<IndexExpression>,
}

impl IndexInfo {
    /// The key at `position`: its index column's name (a column's, or an expression's as
    /// PostgreSQL names it), its text in a definition, and its type.
    pub fn key(&self, table: &UserTable, position: usize) -> (String, String, DataType) {
        let columns = &table.table.def.columns;
        match self.columns[position] {
            EXPRESSION_KEY => {
                let nth = (self.columns[..position].iter())
                    .filter(|column| **column == EXPRESSION_KEY)
                    .count();
                match self.expressions.get(nth) {
                    Some(expression) => (
                        expression.name(),
                        expression.in_definition(),
                        expression.data_type,
                    ),
                    None => ("expr".into(), "?".into(), DataType::Text),
                }
            }
            column => (
                columns[column].name.clone(),
                crate::ident::quote_ident(&columns[column].name),
                columns[column].data_type,
            ),
        }
    }

    /// The index as pg_get_indexdef and pg_indexes show it.
    pub fn definition(&self, table: &UserTable) -> String {
        let names: Vec<String> = (0..self.columns.len())
            .map(|position| {
                let name = self.key(table, position).1;
                let option = self.options.get(position).copied().unwrap_or(0);
                let descending = option & INDEX_DESC != 0;
                let nulls_first = option & INDEX_NULLS_FIRST != 0;
                // pg_get_indexdef names what differs from the defaults: ASC NULLS LAST, and
                // DESC's NULLS FIRST.
                match (descending, nulls_first) {
                    (false, false) => name,
                    (false, true) => format!("{name} NULLS FIRST"),
                    (true, true) => format!("{name} DESC"),
                    (true, false) => format!("{name} DESC NULLS LAST"),
                }
            })
            .collect();
        let mut definition = format!(
            "CREATE {}INDEX {} ON {PUBLIC_SCHEMA}.{} USING btree ({})",
            if self.unique { "UNIQUE " } else { "" },
            crate::ident::quote_ident(&self.name),
            crate::ident::quote_ident(table.name()),
            names.join(", ")
        );
        if let Some(predicate) = &self.predicate {
            definition.push_str(&format!(" WHERE ({predicate})"));
        }
        definition
    }
}

/// A user table with its oid and indexes.
#[derive(Debug, Clone)]
pub struct UserTable {
    pub oid: i64,
    pub table: Arc<Table>,
    /// The primary key index first, then the secondary indexes.
    pub indexes: Vec<IndexInfo>,
}

impl UserTable {
    pub fn name(&self) -> &str {
        &self.table.def.name
    }

    pub fn row_type_oid(&self) -> i64 {
        self.oid + 2
    }

    /// The oid of a CHECK or FOREIGN KEY constraint: a range of its own above the trees'
    /// (oids stay below 2^31, as clients read them as 32-bit).
    pub fn rule_oid(&self, rule: Rule) -> i64 {
        let position = match rule {
            Rule::Check(position) => position,
            Rule::ForeignKey(position) => 128 + position,
        };
        RULE_OID_BASE + (self.oid - FIRST_USER_OID) * 64 + position as i64
    }
}

/// Where the oids of CHECK and FOREIGN KEY constraints start.
const RULE_OID_BASE: i64 = 1_000_000_000;
/// The first oid of enum labels (pg_enum.oid): 1024 per type, in the order added.
const ENUM_LABEL_OID_BASE: i64 = 2_000_000_000;

/// The oid of label `number` of the enum type `type_oid` (unique for the first 1024 labels
/// added to a type).
pub fn enum_label_oid(type_oid: u32, number: u32) -> i64 {
    ENUM_LABEL_OID_BASE + (type_oid as i64 - FIRST_USER_OID) * 256 + number as i64
}

/// A CHECK or FOREIGN KEY constraint of a table, by position in its definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Check(usize),
    ForeignKey(usize),
}

/// A sequence with its oid; `owner`: the (table oid, attnum) of a SERIAL/identity column's.
#[derive(Debug, Clone)]
pub struct SequenceInfo {
    pub oid: i64,
    pub sequence: Arc<Sequence>,
    pub owner: Option<(i64, i64)>,
}

/// The catalog as the system tables and functions see it, taken when a statement is bound
/// (DDL re-binds prepared statements, so it is never stale for a statement that runs).
#[derive(Debug, Default)]
pub struct Snapshot {
    pub tables: Vec<UserTable>,
    pub sequences: Vec<SequenceInfo>,
    /// The database is a standby (`pg_is_in_recovery()`).
    pub in_recovery: bool,
    /// The standbys this primary serves (pg_stat_replication).
    pub replication: Vec<crate::catalog::ReplicationStat>,
    /// Every database (pg_database).
    pub databases: Vec<crate::catalog::DatabaseInfo>,
    /// The views, each with its oid (that of its engine tree).
    pub views: Vec<(i64, Arc<crate::catalog::View>)>,
    /// The cluster's sessions (pg_stat_activity lists them when it is read).
    pub activities: Option<Arc<crate::catalog::activity::Activities>>,
    /// The enum types (pg_type, pg_enum).
    pub enums: Vec<Arc<crate::types::enums::EnumType>>,
}

impl Snapshot {
    pub fn of(catalog: &Catalog) -> Snapshot {
        let mut tables = Vec::new();
        for name in catalog.table_names() {
            let Ok(table) = catalog.table(&name) else {
                continue;
            };
            let oid = tree_oid(table.tree);
            let mut indexes = Vec::new();
            if !table.def.primary_key.is_empty() {
                indexes.push(IndexInfo {
                    oid: oid + 1,
                    name: table.def.primary_key_name(),
                    columns: table.def.primary_key.clone(),
                    unique: true,
                    primary: true,
                    constraint: Some(oid + 3),
                    predicate: None,
                    options: Vec::new(),
                    expressions: Vec::new(),
                });
            }
            indexes.extend(secondary_indexes(&table));
            tables.push(UserTable {
                oid,
                table,
                indexes,
            });
        }
        let mut sequences = Vec::new();
        for sequence in catalog.sequences() {
            // A column's own sequence, or one OWNED BY a column.
            let owner = tables.iter().find_map(|table| {
                let column = table.table.sequences.iter().position(|column| {
                    column
                        .as_ref()
                        .is_some_and(|column| Arc::ptr_eq(column, &sequence))
                })?;
                Some((table.oid, column as i64 + 1))
            });
            let owner = owner.or_else(|| {
                let (table, column) = sequence.owner()?;
                let table = tables.iter().find(|t| t.name() == table)?;
                let column = table.table.def.column_index(&column)?;
                Some((table.oid, column as i64 + 1))
            });
            let oid = match (&sequence.tree, owner) {
                (Some((_, tree)), _) => tree_oid(*tree),
                (None, Some((table, attnum))) => table << 16 | 0x8000 | attnum,
                (None, None) => continue, // its table is being replaced right now
            };
            sequences.push(SequenceInfo {
                oid,
                sequence,
                owner,
            });
        }
        Snapshot {
            tables,
            sequences,
            in_recovery: catalog.is_standby(),
            replication: catalog.cluster().replication_stats(),
            databases: catalog.cluster().databases(),
            activities: Some(catalog.cluster().activities().clone()),
            views: catalog
                .views()
                .into_iter()
                .map(|view| (tree_oid(view.tree), view))
                .collect(),
            enums: catalog.enum_types(),
        }
    }

    /// The oid a type name means: a built-in type's (`type_oid_by_name`) or an enum type's,
    /// maybe qualified by its schema.
    pub fn type_oid(&self, name: &str) -> Option<i64> {
        type_oid_by_name(name).or_else(|| {
            let name = match split_qualified(name).as_slice() {
                [name] => name.clone(),
                [schema, name] if schema == PUBLIC_SCHEMA => name.clone(),
                _ => return None,
            };
            let found = self.enums.iter().find(|enum_type| enum_type.name == name);
            found.map(|enum_type| enum_type.oid as i64)
        })
    }

    /// format_type(oid, typmod): a built-in type's SQL name, or an enum type's name, with its
    /// schema when `qualified` (the session's search_path leaves public out, as pg_dump's
    /// does), as PostgreSQL prints a type that is not visible.
    pub fn type_name(&self, oid: i64, typmod: Option<i64>, qualified: bool) -> Option<String> {
        let Some(enum_type) = self.enums.iter().find(|e| e.oid as i64 == oid) else {
            return format_type(oid, typmod);
        };
        let name = crate::ident::quote_ident(&enum_type.name);
        Some(match qualified {
            true => format!("{PUBLIC_SCHEMA}.{name}"),
            false => name,
        })
    }

    /// The sequence a nextval/currval/setval argument names: its oid ('s'::regclass) or
    /// its name, maybe schema-qualified.
    pub fn sequence(&self, argument: &Value) -> Option<&SequenceInfo> {
        match argument {
            Value::Int(oid) => self.sequences.iter().find(|info| info.oid == *oid),
            other => {
                let text = other.to_text()?;
                let name = match split_qualified(&text).as_slice() {
                    [name] => name.clone(),
                    [schema, name] if schema == PUBLIC_SCHEMA => name.clone(),
                    _ => return None,
                };
                self.sequences
                    .iter()
                    .find(|info| info.sequence.name == name)
            }
        }
    }

    pub fn table_by_oid(&self, oid: i64) -> Option<&UserTable> {
        self.tables.iter().find(|table| table.oid == oid)
    }

    pub fn index_by_oid(&self, oid: i64) -> Option<(&UserTable, &IndexInfo)> {
        self.tables.iter().find_map(|table| {
            let index = table.indexes.iter().find(|index| index.oid == oid)?;
            Some((table, index))
        })
    }

    /// The CHECK or FOREIGN KEY constraint with this oid (`UserTable::constraint_oid`).
    pub fn rule_by_oid(&self, oid: i64) -> Option<(&UserTable, Rule)> {
        self.tables.iter().find_map(|table| {
            let def = &table.table.def;
            let rules = (0..def.checks.len())
                .map(Rule::Check)
                .chain((0..def.foreign_keys.len()).map(Rule::ForeignKey));
            rules
                .into_iter()
                .find(|rule| table.rule_oid(*rule) == oid)
                .map(|rule| (table, rule))
        })
    }

    /// `pg_get_constraintdef` of a CHECK or FOREIGN KEY, as PostgreSQL prints it.
    pub fn rule_definition(&self, table: &UserTable, rule: Rule) -> String {
        let def = &table.table.def;
        match rule {
            Rule::Check(position) => format!("CHECK (({}))", def.checks[position].expr),
            Rule::ForeignKey(position) => {
                let key = &def.foreign_keys[position];
                let columns: Vec<String> = key
                    .columns
                    .iter()
                    .map(|c| quote_ident(&def.columns[*c].name))
                    .collect();
                let referenced: Vec<String> =
                    key.referenced.iter().map(|c| quote_ident(c)).collect();
                let mut text = format!(
                    "FOREIGN KEY ({}) REFERENCES {}({})",
                    columns.join(", "),
                    quote_ident(&key.table),
                    referenced.join(", ")
                );
                if key.on_update != crate::catalog::ReferentialAction::NoAction {
                    text.push_str(&format!(" ON UPDATE {}", key.on_update.sql()));
                }
                if key.on_delete != crate::catalog::ReferentialAction::NoAction {
                    text.push_str(&format!(" ON DELETE {}", key.on_delete.sql()));
                }
                text.push_str(key.deferral.clause());
                text
            }
        }
    }

    pub fn constraint_by_oid(&self, oid: i64) -> Option<(&UserTable, &IndexInfo)> {
        self.tables.iter().find_map(|table| {
            let index = table
                .indexes
                .iter()
                .find(|index| index.constraint == Some(oid))?;
            Some((table, index))
        })
    }

    /// (schema, name) of the relation (table, index or system table) with this oid.
    pub fn relation_name(&self, oid: i64) -> Option<(&'static str, String)> {
        if let Some(table) = self.table_by_oid(oid) {
            return Some((PUBLIC_SCHEMA, table.name().to_string()));
        }
        if let Some((_, index)) = self.index_by_oid(oid) {
            return Some((PUBLIC_SCHEMA, index.name.clone()));
        }
        if let Some(info) = self.sequences.iter().find(|info| info.oid == oid) {
            return Some((PUBLIC_SCHEMA, info.sequence.name.clone()));
        }
        if let Some((_, view)) = self.views.iter().find(|(view_oid, _)| *view_oid == oid) {
            return Some((PUBLIC_SCHEMA, view.def.name.clone()));
        }
        all_tables()
            .find(|table| table.oid == oid)
            .map(|table| (table.schema, table.name.to_string()))
    }

    /// The oid of a relation named as `'name'::regclass` reads it (`schema.name` or `name`,
    /// double quotes keep case).
    pub fn relation_oid(&self, text: &str) -> Option<i64> {
        let parts = split_qualified(text);
        let (schema, name) = match parts.as_slice() {
            [name] => (None, name.as_str()),
            [schema, name] => (Some(schema.as_str()), name.as_str()),
            _ => return None,
        };
        if schema.is_none() || schema == Some(PUBLIC_SCHEMA) {
            if schema.is_none() {
                if let Some(table) = lookup(Some("pg_catalog"), name) {
                    return Some(table.oid);
                }
            }
            for table in &self.tables {
                if table.name() == name {
                    return Some(table.oid);
                }
                if let Some(index) = table.indexes.iter().find(|index| index.name == name) {
                    return Some(index.oid);
                }
            }
            if let Some((oid, _)) = self.views.iter().find(|(_, view)| view.def.name == name) {
                return Some(*oid);
            }
            return self
                .sequences
                .iter()
                .find(|info| info.sequence.name == name)
                .map(|info| info.oid);
        }
        lookup(schema, name).map(|table| table.oid)
    }
}

/// Splits `a.b` / `"A".b` into its folded parts.
pub fn split_qualified(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    let mut chars = text.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                current.push('"');
            }
            '"' => {
                quoted = !quoted;
                was_quoted = true;
            }
            '.' if !quoted => {
                parts.push(fold(&current, was_quoted));
                current.clear();
                was_quoted = false;
            }
            c => current.push(c),
        }
    }
    parts.push(fold(&current, was_quoted));
    parts
}

fn fold(part: &str, quoted: bool) -> String {
    if quoted {
        part.to_string()
    } else {
        part.to_lowercase()
    }
}

/// The secondary indexes of a table, each with the oid of its engine tree. A unique index
/// with the name PostgreSQL gives a UNIQUE constraint's index (`table_col1_col2_key`, the
/// name CREATE TABLE ... UNIQUE gives it here too) implements that constraint (oid + 3);
/// the catalog keeps no other mark of the difference. A foreign key's automatic index is
/// not a relation: not listed.
fn secondary_indexes(table: &Table) -> Vec<IndexInfo> {
    let def = &table.def;
    def.indexes
        .iter()
        .zip(&table.index_trees)
        .filter(|(index, _)| !index.automatic)
        .map(|(index, tree)| {
            let oid = tree_oid(*tree);
            let constraint = def.is_unique_constraint(index).then_some(oid + 3);
            IndexInfo {
                oid,
                name: index.name.clone(),
                columns: index.columns.clone(),
                unique: index.unique,
                primary: false,
                constraint,
                predicate: index.predicate.clone(),
                options: index.options.clone(),
                expressions: index.expressions.clone(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_respects_the_schema() {
        assert!(lookup(None, "pg_namespace").is_some());
        assert!(lookup(Some("pg_catalog"), "pg_namespace").is_some());
        assert!(lookup(Some("public"), "pg_namespace").is_none());
        assert!(lookup(None, "no_such_table").is_none());
        assert!(lookup(Some("information_schema"), "tables").is_some());
        assert!(lookup(Some("pg_catalog"), "tables").is_none());
    }

    #[test]
    fn every_listed_table_is_defined_with_a_unique_oid() {
        let tables: Vec<SystemTable> = all_tables().collect();
        assert_eq!(
            tables.len(),
            tables::NAMES.len()
                + empty::NAMES.len()
                + statistics::NAMES.len()
                + constraints::NAMES.len()
        );
        let mut oids: Vec<i64> = tables.iter().map(|table| table.oid).collect();
        oids.sort();
        oids.dedup();
        assert_eq!(oids.len(), tables.len());
        let empty = Snapshot::default();
        for table in tables {
            for row in table.rows_in(&empty, &SessionNames::default()) {
                assert_eq!(row.len(), table.columns.len(), "{}", table.name);
            }
        }
    }

    #[test]
    fn qualified_names_split_and_fold() {
        assert_eq!(split_qualified("public.T"), vec!["public", "t"]);
        assert_eq!(split_qualified("\"My.T\""), vec!["My.T"]);
    }
}

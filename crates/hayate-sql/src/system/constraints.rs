//! information_schema's constraint views with PostgreSQL 15's columns: table_constraints,
//! key_column_usage, referential_constraints, constraint_column_usage and check_constraints,
//! which schema tools and ORMs read to find keys (pg_catalog's pg_constraint holds the same).
//! PostgreSQL also lists each NOT NULL column as a CHECK constraint here (`..._not_null`);
//! Hayate does not (information_schema.columns.is_nullable says it).

use super::{Snapshot, SystemTable, UserTable, INT4, NAME, PUBLIC_SCHEMA, TEXT};
use crate::catalog::{Deferral, ForeignKeyDef};
use crate::types::{DataType, Value};

/// Their names.
pub(super) const NAMES: &[&str] = &[
    "table_constraints",
    "key_column_usage",
    "referential_constraints",
    "constraint_column_usage",
    "check_constraints",
];

type Columns = &'static [(&'static str, DataType)];

const TABLE_CONSTRAINTS: Columns = &[
    ("constraint_catalog", NAME),
    ("constraint_schema", NAME),
    ("constraint_name", NAME),
    ("table_catalog", NAME),
    ("table_schema", NAME),
    ("table_name", NAME),
    ("constraint_type", TEXT),
    ("is_deferrable", TEXT),
    ("initially_deferred", TEXT),
    ("enforced", TEXT),
    ("nulls_distinct", TEXT),
];

const KEY_COLUMN_USAGE: Columns = &[
    ("constraint_catalog", NAME),
    ("constraint_schema", NAME),
    ("constraint_name", NAME),
    ("table_catalog", NAME),
    ("table_schema", NAME),
    ("table_name", NAME),
    ("column_name", NAME),
    ("ordinal_position", INT4),
    ("position_in_unique_constraint", INT4),
];

const REFERENTIAL_CONSTRAINTS: Columns = &[
    ("constraint_catalog", NAME),
    ("constraint_schema", NAME),
    ("constraint_name", NAME),
    ("unique_constraint_catalog", NAME),
    ("unique_constraint_schema", NAME),
    ("unique_constraint_name", NAME),
    ("match_option", TEXT),
    ("update_rule", TEXT),
    ("delete_rule", TEXT),
];

const CONSTRAINT_COLUMN_USAGE: Columns = &[
    ("table_catalog", NAME),
    ("table_schema", NAME),
    ("table_name", NAME),
    ("column_name", NAME),
    ("constraint_catalog", NAME),
    ("constraint_schema", NAME),
    ("constraint_name", NAME),
];

const CHECK_CONSTRAINTS: Columns = &[
    ("constraint_catalog", NAME),
    ("constraint_schema", NAME),
    ("constraint_name", NAME),
    ("check_clause", TEXT),
];

/// A table's constraint as these views list it.
struct Constraint<'a> {
    name: &'a str,
    kind: Kind<'a>,
    /// The constrained columns' positions, in key order (a CHECK: the columns it reads).
    columns: Vec<usize>,
}

enum Kind<'a> {
    PrimaryKey,
    Unique,
    ForeignKey(&'a ForeignKeyDef),
    Check(&'a str),
}

impl Kind<'_> {
    fn sql(&self) -> &'static str {
        match self {
            Kind::PrimaryKey => "PRIMARY KEY",
            Kind::Unique => "UNIQUE",
            Kind::ForeignKey(_) => "FOREIGN KEY",
            Kind::Check(_) => "CHECK",
        }
    }
}

/// The constraints of a table in pg_constraint's order: checks, foreign keys, then the
/// primary key and UNIQUE constraints.
fn constraints(table: &UserTable) -> Vec<Constraint<'_>> {
    let def = &table.table.def;
    let mut out = Vec::new();
    for check in &def.checks {
        out.push(Constraint {
            name: &check.name,
            kind: Kind::Check(&check.expr),
            columns: (0..def.columns.len())
                .filter(|c| check.mentions(&def.columns[*c].name))
                .collect(),
        });
    }
    for key in &def.foreign_keys {
        out.push(Constraint {
            name: &key.name,
            kind: Kind::ForeignKey(key),
            columns: key.columns.clone(),
        });
    }
    for index in &table.indexes {
        if index.constraint.is_none() {
            continue;
        }
        out.push(Constraint {
            name: &index.name,
            kind: match index.primary {
                true => Kind::PrimaryKey,
                false => Kind::Unique,
            },
            columns: index.columns.clone(),
        });
    }
    out
}

/// The primary key or UNIQUE constraint of `table` a foreign key's referenced columns (by
/// name) are (None: a unique index that is no constraint), and the key's columns.
fn referenced_constraint<'a>(
    snapshot: &'a Snapshot,
    key: &ForeignKeyDef,
) -> Option<(&'a UserTable, Option<&'a str>, Vec<usize>)> {
    let parent = snapshot.tables.iter().find(|t| t.name() == key.table)?;
    let referenced: Vec<usize> = (key.referenced.iter())
        .map(|name| parent.table.def.column_index(name))
        .collect::<Option<_>>()?;
    let matches = |index: &&super::IndexInfo| {
        index.unique
            && index.predicate.is_none()
            && index.columns.len() == referenced.len()
            && index.columns.iter().all(|c| referenced.contains(c))
    };
    let index =
        (parent.indexes.iter().filter(matches)).min_by_key(|index| index.constraint.is_none())?;
    let name = index.constraint.map(|_| index.name.as_str());
    Some((parent, name, index.columns.clone()))
}

fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}

fn yes_no(value: bool) -> Value {
    text(if value { "YES" } else { "NO" })
}

/// Every table's constraints with the table, as `row` makes their rows.
fn each<'a>(
    snapshot: &'a Snapshot,
    mut row: impl FnMut(&'a UserTable, &Constraint<'a>, &mut Vec<Vec<Value>>),
) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for table in &snapshot.tables {
        for constraint in constraints(table) {
            row(table, &constraint, &mut rows);
        }
    }
    rows
}

pub(super) fn definition(name: &str) -> Option<SystemTable> {
    let name = *NAMES.iter().find(|known| **known == name)?;
    let (_, oid, columns, compute): super::Definition = match name {
        "table_constraints" => (
            "information_schema",
            13103,
            TABLE_CONSTRAINTS,
            |snapshot, names| {
                each(snapshot, |table, constraint, rows| {
                    let (deferrable, deferred) = match &constraint.kind {
                        Kind::ForeignKey(key) => (
                            key.deferral.deferrable(),
                            key.deferral == Deferral::InitiallyDeferred,
                        ),
                        _ => (false, false),
                    };
                    // nulls_distinct: a UNIQUE constraint's (always YES here); NULL otherwise.
                    let unique = matches!(constraint.kind, Kind::Unique);
                    rows.push(vec![
                        text(&names.database),
                        text(PUBLIC_SCHEMA),
                        text(constraint.name),
                        text(&names.database),
                        text(PUBLIC_SCHEMA),
                        text(table.name()),
                        text(constraint.kind.sql()),
                        yes_no(deferrable),
                        yes_no(deferred),
                        yes_no(true),
                        match unique {
                            true => yes_no(true),
                            false => Value::Null,
                        },
                    ]);
                })
            },
        ),
        "key_column_usage" => (
            "information_schema",
            13104,
            KEY_COLUMN_USAGE,
            |snapshot, names| {
                each(snapshot, |table, constraint, rows| {
                    let referenced = match &constraint.kind {
                        Kind::Check(_) => return,
                        Kind::ForeignKey(key) => referenced_constraint(snapshot, key).map(
                            |(parent, _, unique_columns)| {
                                (key.referenced.iter())
                                    .map(|name| {
                                        let column = parent.table.def.column_index(name)?;
                                        let position =
                                            unique_columns.iter().position(|c| *c == column)?;
                                        Some(position as i64 + 1)
                                    })
                                    .collect::<Vec<_>>()
                            },
                        ),
                        _ => None,
                    };
                    let def = &table.table.def;
                    for (position, column) in constraint.columns.iter().enumerate() {
                        let in_unique = referenced
                            .as_ref()
                            .and_then(|positions| positions.get(position).copied().flatten());
                        rows.push(vec![
                            text(&names.database),
                            text(PUBLIC_SCHEMA),
                            text(constraint.name),
                            text(&names.database),
                            text(PUBLIC_SCHEMA),
                            text(table.name()),
                            text(&def.columns[*column].name),
                            Value::Int(position as i64 + 1),
                            in_unique.map_or(Value::Null, Value::Int),
                        ]);
                    }
                })
            },
        ),
        "referential_constraints" => (
            "information_schema",
            13105,
            REFERENTIAL_CONSTRAINTS,
            |snapshot, names| {
                each(snapshot, |_, constraint, rows| {
                    let Kind::ForeignKey(key) = &constraint.kind else {
                        return;
                    };
                    let unique = referenced_constraint(snapshot, key).and_then(|(_, name, _)| name);
                    let named = |value: &str| unique.map_or(Value::Null, |_| text(value));
                    rows.push(vec![
                        text(&names.database),
                        text(PUBLIC_SCHEMA),
                        text(constraint.name),
                        named(&names.database),
                        named(PUBLIC_SCHEMA),
                        unique.map_or(Value::Null, text),
                        text("NONE"),
                        text(key.on_update.sql()),
                        text(key.on_delete.sql()),
                    ]);
                })
            },
        ),
        "constraint_column_usage" => (
            "information_schema",
            13106,
            CONSTRAINT_COLUMN_USAGE,
            |snapshot, names| {
                each(snapshot, |table, constraint, rows| {
                    // A foreign key uses the referenced table's columns; the others their own.
                    let (owner, columns): (&UserTable, Vec<usize>) = match &constraint.kind {
                        Kind::ForeignKey(key) => {
                            let Some(parent) =
                                snapshot.tables.iter().find(|t| t.name() == key.table)
                            else {
                                return;
                            };
                            let columns = (key.referenced.iter())
                                .filter_map(|name| parent.table.def.column_index(name))
                                .collect();
                            (parent, columns)
                        }
                        _ => (table, constraint.columns.clone()),
                    };
                    let mut columns = columns;
                    columns.sort_unstable();
                    columns.dedup();
                    for column in columns {
                        rows.push(vec![
                            text(&names.database),
                            text(PUBLIC_SCHEMA),
                            text(owner.name()),
                            text(&owner.table.def.columns[column].name),
                            text(&names.database),
                            text(PUBLIC_SCHEMA),
                            text(constraint.name),
                        ]);
                    }
                })
            },
        ),
        "check_constraints" => (
            "information_schema",
            13107,
            CHECK_CONSTRAINTS,
            |snapshot, names| {
                each(snapshot, |_, constraint, rows| {
                    if let Kind::Check(expr) = &constraint.kind {
                        rows.push(vec![
                            text(&names.database),
                            text(PUBLIC_SCHEMA),
                            text(constraint.name),
                            // As pg_get_constraintdef writes it, without CHECK.
                            text(&format!("(({expr}))")),
                        ]);
                    }
                })
            },
        ),
        _ => return None,
    };
    Some(SystemTable {
        schema: "information_schema",
        name,
        oid,
        columns,
        compute,
    })
}

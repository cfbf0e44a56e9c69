//! Binding DDL and session statements: CREATE TABLE/INDEX, ALTER TABLE, TRUNCATE, SET,
//! transaction modes.
//!
//! Storage options (`WITH (fillfactor=100)` and the like) are accepted and ignored: the
//! engine's B+tree has no fill factor to set.

use sqlparser::ast;

use super::{ident_name, object_name, resolve_type, undefined_column, Binder};
use crate::catalog::{
    Catalog, CheckDef, ColumnDef, Deferral, ForeignKeyDef, Identity, IndexDef, IndexExpression,
    IndexKey, ReferentialAction, TableDef, ViewDef, INDEX_DESC, INDEX_NULLS_FIRST,
};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::Expr;
use crate::plan::write::AlterAction;
use crate::plan::Plan;
use crate::types::{DataType, Value};

/// SERIAL and its siblings: the integer type they stand for.
fn serial_type(data_type: &ast::DataType) -> Option<DataType> {
    let ast::DataType::Custom(name, modifiers) = data_type else {
        return None;
    };
    if !modifiers.is_empty() {
        return None;
    }
    match name.to_string().to_lowercase().as_str() {
        "serial" | "serial4" => Some(DataType::Int4),
        "bigserial" | "serial8" => Some(DataType::Int8),
        "smallserial" | "serial2" => Some(DataType::Int2),
        _ => None,
    }
}

/// The column names of a key or index definition (plain columns only).
fn key_columns<'a>(columns: impl Iterator<Item = &'a ast::Expr>) -> SqlResult<Vec<String>> {
    columns
        .map(|expr| match expr {
            ast::Expr::Identifier(ident) => Ok(ident_name(ident)),
            other => Err(SqlError::unsupported(format!(
                "a key or index on the expression {other}"
            ))),
        })
        .collect()
}

impl Binder<'_> {
    /// CREATE [OR REPLACE] VIEW: the query is bound once here to check it and name the
    /// view's columns (the list given, else the query's own names).
    pub(super) fn bind_create_view(&mut self, create: &ast::CreateView) -> SqlResult<Plan> {
        if create.materialized {
            return Err(SqlError::unsupported("CREATE MATERIALIZED VIEW"));
        }
        if create.temporary {
            return Err(SqlError::unsupported("CREATE TEMPORARY VIEW"));
        }
        let name = object_name(&create.name)?;
        let outer = self.relations_read.replace(Vec::new());
        let query = self.bind_query(&create.query);
        let mut reads = std::mem::replace(&mut self.relations_read, outer).unwrap_or_default();
        let query = query?;
        reads.sort();
        reads.dedup();
        if create.columns.len() > query.columns.len() {
            return Err(SqlError::syntax(
                "CREATE VIEW specifies more column names than columns",
            ));
        }
        let mut columns: Vec<(String, DataType)> = query
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.data_type))
            .collect();
        for ((column, _), given) in columns.iter_mut().zip(&create.columns) {
            *column = ident_name(&given.name);
        }
        for (position, (column, _)) in columns.iter().enumerate() {
            if columns[..position].iter().any(|(other, _)| other == column) {
                return Err(SqlError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{column}\" specified more than once"),
                ));
            }
        }
        Ok(Plan::CreateView {
            def: ViewDef {
                name,
                columns,
                query: create.query.to_string(),
                tree: String::new(),
                reads,
            },
            or_replace: create.or_replace,
        })
    }

    pub(super) fn bind_create_table(&mut self, create: &ast::CreateTable) -> SqlResult<Plan> {
        let name = object_name(&create.name)?;
        let mut columns: Vec<ColumnDef> = Vec::new();
        let mut primary_key: Vec<usize> = Vec::new();
        // CONSTRAINT name PRIMARY KEY (None: <table>_pkey).
        let mut primary_key_constraint: Option<String> = None;
        // UNIQUE constraints, by column names: each becomes a unique index.
        let mut unique: Vec<Vec<String>> = Vec::new();
        // The names given to table UNIQUE constraints (CONSTRAINT name UNIQUE ...), after
        // the column ones.
        let mut named_unique: Vec<Option<String>> = Vec::new();
        let mut constraints: Vec<Constraint> = Vec::new();
        for column in &create.columns {
            let column_name = ident_name(&column.name);
            if columns.iter().any(|c| c.name == column_name) {
                return Err(SqlError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{column_name}\" specified more than once"),
                ));
            }
            let (def, key, column_constraints) = column_def_with_constraints(self.catalog, column)?;
            constraints.extend(column_constraints);
            match key {
                Some(true) => {
                    if !primary_key.is_empty() {
                        return Err(multiple_primary_keys(&name));
                    }
                    primary_key.push(columns.len());
                    primary_key_constraint = column.options.iter().find_map(|option| match &option
                        .option
                    {
                        ast::ColumnOption::PrimaryKey(key) => {
                            key.name.as_ref().or(option.name.as_ref()).map(ident_name)
                        }
                        _ => None,
                    });
                }
                Some(false) => unique.push(vec![def.name.clone()]),
                None => {}
            }
            columns.push(def);
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(key) => {
                    not_deferrable(key.characteristics.as_ref())?;
                    if !primary_key.is_empty() {
                        return Err(multiple_primary_keys(&name));
                    }
                    primary_key_constraint = key.name.as_ref().map(ident_name);
                    for column in &key.columns {
                        let ast::Expr::Identifier(ident) = &column.column.expr else {
                            return Err(SqlError::unsupported("a primary key on an expression"));
                        };
                        let column_name = ident_name(ident);
                        let index = columns
                            .iter()
                            .position(|c| c.name == column_name)
                            .ok_or_else(|| undefined_column(&column_name))?;
                        primary_key.push(index);
                    }
                }
                ast::TableConstraint::Unique(constraint) => {
                    not_deferrable(constraint.characteristics.as_ref())?;
                    let names = key_columns(constraint.columns.iter().map(|c| &c.column.expr))?;
                    named_unique.push(constraint.name.as_ref().map(ident_name));
                    unique.push(names);
                }
                other => match table_constraint(other) {
                    Some(constraint) => constraints.push(constraint),
                    None => return Err(SqlError::unsupported(format!("table constraint {other}"))),
                },
            }
        }
        for index in &primary_key {
            columns[*index].not_null = true;
        }
        let mut indexes = Vec::new();
        let column_unique = unique.len() - named_unique.len();
        let mut given_names = std::iter::repeat_n(None, column_unique).chain(named_unique);
        for names in unique {
            let given = given_names.next().flatten();
            let index_columns = names
                .iter()
                .map(|column| {
                    columns
                        .iter()
                        .position(|c| c.name == *column)
                        .ok_or_else(|| undefined_column(column))
                })
                .collect::<SqlResult<Vec<usize>>>()?;
            // PostgreSQL names a UNIQUE constraint's index table_col1_col2_key.
            let index_name = given.unwrap_or_else(|| format!("{name}_{}_key", names.join("_")));
            if index_columns != primary_key
                && !indexes.iter().any(|i: &IndexDef| i.name == index_name)
            {
                indexes.push(IndexDef {
                    name: index_name,
                    columns: index_columns,
                    unique: true,
                    constraint: true,
                    tree: String::new(),
                    predicate: None,
                    options: Vec::new(),
                    expressions: Vec::new(),
                    automatic: false,
                });
            }
        }
        let mut def = TableDef {
            name,
            columns,
            primary_key,
            indexes,
            tree: String::new(),
            checks: Vec::new(),
            foreign_keys: Vec::new(),
            primary_key_constraint,
        };
        for column in &mut def.columns {
            if let Some(default) = &column.default {
                let bound = self.bind_default(default, column.data_type)?;
                if let Some(fixed) = fixed_default(default, &bound, column.data_type) {
                    column.default = Some(fixed);
                }
            }
        }
        for constraint in constraints {
            self.add_constraint(&mut def, constraint)?;
        }
        Ok(Plan::CreateTable {
            def,
            if_not_exists: create.if_not_exists,
        })
    }

    pub(super) fn bind_create_index(&mut self, create: &ast::CreateIndex) -> SqlResult<Plan> {
        if let Some(using) = &create.using {
            if !using.to_string().eq_ignore_ascii_case("btree") {
                return Err(SqlError::unsupported(format!("index method {using}")));
            }
        }
        if !create.include.is_empty() {
            return Err(SqlError::unsupported("CREATE INDEX ... INCLUDE"));
        }
        let table = self.catalog.table(&object_name(&create.table_name)?)?;
        // Each key: a column, or an expression over the row (`lower(email)`, `(a + b)`),
        // kept as text with its type and bound again by each writer, as a predicate is.
        let mut keys = Vec::with_capacity(create.columns.len());
        for column in &create.columns {
            let mut expr = &column.column.expr;
            while let ast::Expr::Nested(inner) = expr {
                expr = inner.as_ref();
            }
            if let ast::Expr::Identifier(ident) = expr {
                let name = ident_name(ident);
                table
                    .def
                    .column_index(&name)
                    .ok_or_else(|| undefined_column(&name))?;
                keys.push(IndexKey::Column(name));
                continue;
            }
            if super::expr::contains_aggregate(expr) {
                return Err(SqlError::new(
                    sqlstate::GROUPING_ERROR,
                    "aggregate functions are not allowed in index expressions",
                ));
            }
            let text = stored_text(expr);
            let (bound, data_type) = self.bind_index_expression_text(&table.def, &text)?;
            self.check_index_term(&table.def, &text, &bound, "expression", |binder, text| {
                binder
                    .bind_index_expression_text(&table.def, text)
                    .map(|(bound, _)| bound)
            })?;
            if data_type == DataType::Unknown {
                keys.push(IndexKey::Expression(IndexExpression {
                    text: format!("({text})::text"),
                    data_type: DataType::Text,
                }));
            } else {
                keys.push(IndexKey::Expression(IndexExpression { text, data_type }));
            }
        }
        // A partial index's WHERE: a condition on the table's columns, kept as text.
        let predicate = match &create.predicate {
            Some(written) => {
                // pg_get_indexdef writes `WHERE (...)`: a dump's parentheses are not kept.
                let mut predicate = written;
                while let ast::Expr::Nested(inner) = predicate {
                    predicate = inner.as_ref();
                }
                let text = stored_text(predicate);
                let bound = self.bind_index_predicate(&table.def, &text)?;
                self.check_index_term(&table.def, &text, &bound, "predicate", |binder, text| {
                    binder.bind_index_predicate(&table.def, text)
                })?;
                Some(text)
            }
            None => None,
        };
        // Descending columns and NULLS FIRST/LAST are kept as written (pg_get_indexdef, dumps)
        // and stored ascending: an ORDER BY ... DESC reads the index backward.
        let options = create
            .columns
            .iter()
            .map(|column| {
                let order = &column.column.options;
                let descending = matches!(order.sort, Some(ast::OrderBySort::Desc));
                let nulls_first = order.nulls_first.unwrap_or(descending);
                let mut option = 0;
                if descending {
                    option |= INDEX_DESC;
                }
                if nulls_first {
                    option |= INDEX_NULLS_FIRST;
                }
                option
            })
            .collect();
        Ok(Plan::CreateIndex {
            table: table.def.name.clone(),
            name: create.name.as_ref().map(object_name).transpose()?,
            keys,
            unique: create.unique,
            if_not_exists: create.if_not_exists,
            predicate,
            options,
        })
    }

    pub(super) fn bind_truncate(&mut self, truncate: &ast::Truncate) -> SqlResult<Plan> {
        let mut tables = Vec::with_capacity(truncate.table_names.len());
        for target in &truncate.table_names {
            let table = self.catalog.table(&object_name(&target.name)?)?;
            if !tables
                .iter()
                .any(|t: &std::sync::Arc<crate::catalog::Table>| t.def.name == table.def.name)
            {
                tables.push(table);
            }
        }
        let names: Vec<&str> = tables.iter().map(|t| t.def.name.as_str()).collect();
        for name in &names {
            let referencing = self.catalog.referencing(name);
            if let Some((child, _)) = referencing
                .iter()
                .find(|(child, _)| !names.contains(&child.def.name.as_str()))
            {
                return Err(SqlError::unsupported(format!(
                    "TRUNCATE of a table referenced in a foreign key constraint: table \"{}\" \
                     references \"{name}\" (truncate it in the same command)",
                    child.def.name
                )));
            }
        }
        let restart_identity = matches!(
            truncate.identity,
            Some(ast::TruncateIdentityOption::Restart)
        );
        Ok(Plan::Truncate {
            tables,
            restart_identity,
        })
    }

    pub(super) fn bind_alter_table(&mut self, alter: &ast::AlterTable) -> SqlResult<Plan> {
        let name = object_name(&alter.name)?;
        // OWNER TO (pg_dump's ALTER TABLE ... OWNER TO, also for views and sequences): one
        // role owns every object, so it changes nothing.
        let owner_only = alter
            .operations
            .iter()
            .all(|op| matches!(op, ast::AlterTableOperation::OwnerTo { .. }));
        if owner_only {
            let exists = self.catalog.table(&name).is_ok()
                || self.catalog.view(&name).is_some()
                || self.catalog.sequence(&name).is_ok();
            if !exists && !alter.if_exists {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_TABLE,
                    format!("relation \"{name}\" does not exist"),
                ));
            }
            return Ok(Plan::NoOp { tag: "ALTER TABLE" });
        }
        let table = match self.catalog.table(&name) {
            Ok(table) => table,
            Err(_) if alter.if_exists => return Ok(Plan::NoOp { tag: "ALTER TABLE" }),
            Err(error) => return Err(error),
        };
        let mut actions = Vec::with_capacity(alter.operations.len());
        // The table as the statement's actions so far leave it: each constraint change
        // builds on the ones before (two ADD COLUMNs with REFERENCES, two ADD CONSTRAINTs).
        let mut working = table.def.clone();
        // After a DROP COLUMN the column positions of `working` are stale.
        let mut dropped = false;
        let stale = || {
            SqlError::unsupported(
                "a constraint change after DROP COLUMN in one ALTER TABLE (use two statements)",
            )
        };
        for operation in &alter.operations {
            use ast::AlterTableOperation as Op;
            match operation {
                Op::AddConstraint {
                    constraint: ast::TableConstraint::PrimaryKey(key),
                    ..
                } => {
                    not_deferrable(key.characteristics.as_ref())?;
                    let columns = key_columns(key.columns.iter().map(|c| &c.column.expr))?;
                    for column in &columns {
                        table
                            .def
                            .column_index(column)
                            .ok_or_else(|| undefined_column(column))?;
                    }
                    actions.push(AlterAction::AddPrimaryKey {
                        columns,
                        name: key.name.as_ref().map(ident_name),
                    });
                }
                Op::AddConstraint {
                    constraint: ast::TableConstraint::Unique(unique),
                    ..
                } => {
                    not_deferrable(unique.characteristics.as_ref())?;
                    let columns = key_columns(unique.columns.iter().map(|c| &c.column.expr))?;
                    for column in &columns {
                        table
                            .def
                            .column_index(column)
                            .ok_or_else(|| undefined_column(column))?;
                    }
                    let index_name = match &unique.name {
                        Some(given) => ident_name(given),
                        None => format!("{name}_{}_key", columns.join("_")),
                    };
                    actions.push(AlterAction::AddUnique {
                        name: index_name,
                        columns,
                    });
                }
                Op::AddConstraint { constraint, .. } if table_constraint(constraint).is_some() => {
                    if dropped {
                        return Err(stale());
                    }
                    let constraint = table_constraint(constraint).expect("checked by the guard");
                    self.add_constraint(&mut working, constraint)?;
                    actions.push(AlterAction::SetConstraints {
                        checks: working.checks.clone(),
                        foreign_keys: working.foreign_keys.clone(),
                    });
                }
                Op::DropConstraint {
                    name: constraint,
                    if_exists,
                    ..
                } => {
                    let constraint = ident_name(constraint);
                    if dropped {
                        return Err(stale());
                    }
                    let def = &mut working;
                    let before = def.checks.len() + def.foreign_keys.len();
                    def.checks.retain(|check| check.name != constraint);
                    def.foreign_keys.retain(|key| key.name != constraint);
                    if def.checks.len() + def.foreign_keys.len() == before {
                        let unique = table.def.indexes.iter().find(|index| {
                            index.name == constraint && table.def.is_unique_constraint(index)
                        });
                        if let Some(index) = unique {
                            // A foreign key referencing these columns depends on it.
                            let columns: Vec<&str> = index
                                .columns
                                .iter()
                                .map(|c| table.def.columns[*c].name.as_str())
                                .collect();
                            let dependent = self.catalog.referencing(&name).into_iter().find(
                                |(child, position)| {
                                    let key = &child.def.foreign_keys[*position];
                                    key.referenced.len() == columns.len()
                                        && key
                                            .referenced
                                            .iter()
                                            .all(|c| columns.contains(&c.as_str()))
                                },
                            );
                            if let Some((child, position)) = dependent {
                                return Err(SqlError::new(
                                    sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                                    format!(
                                        "cannot drop constraint {constraint} on table {name} \
                                         because other objects depend on it"
                                    ),
                                )
                                .with_detail(format!(
                                    "constraint {} on table {} depends on index {constraint}",
                                    child.def.foreign_keys[position].name, child.def.name
                                )));
                            }
                            actions.push(AlterAction::DropUnique(constraint));
                            continue;
                        }
                        if constraint == table.def.primary_key_name()
                            && !table.def.primary_key.is_empty()
                        {
                            return Err(SqlError::unsupported("dropping a primary key"));
                        }
                        if *if_exists {
                            continue;
                        }
                        return Err(SqlError::new(
                            sqlstate::UNDEFINED_OBJECT,
                            format!(
                                "constraint \"{constraint}\" of relation \"{name}\" does not exist"
                            ),
                        ));
                    }
                    actions.push(AlterAction::SetConstraints {
                        checks: def.checks.clone(),
                        foreign_keys: def.foreign_keys.clone(),
                    });
                }
                Op::AddColumn {
                    if_not_exists,
                    column_def: definition,
                    ..
                } => {
                    let (mut column, key, constraints) =
                        column_def_with_constraints(self.catalog, definition)?;
                    if key == Some(true) || column.identity.is_some() {
                        return Err(SqlError::unsupported(
                            "ADD COLUMN with a primary key or identity (add the key separately)",
                        ));
                    }
                    let fill = match &column.default {
                        Some(default) => self.bind_default(default, column.data_type)?,
                        None => Expr::Literal(Value::Null),
                    };
                    let fixed = (column.default.as_deref())
                        .and_then(|text| fixed_default(text, &fill, column.data_type));
                    if fixed.is_some() {
                        column.default = fixed;
                    }
                    // Its UNIQUE, CHECK and REFERENCES follow as ADD CONSTRAINTs of the
                    // column (appended last, as the rebuilt table has it).
                    if dropped {
                        return Err(stale());
                    }
                    let name_taken = working.column_index(&column.name).is_some();
                    if !name_taken {
                        working.columns.push(column.clone());
                    }
                    let column_name = column.name.clone();
                    actions.push(AlterAction::AddColumn {
                        column,
                        fill,
                        if_not_exists: *if_not_exists,
                    });
                    if name_taken && *if_not_exists {
                        continue;
                    }
                    if key == Some(false) {
                        actions.push(AlterAction::AddUnique {
                            name: format!("{name}_{column_name}_key"),
                            columns: vec![column_name],
                        });
                    }
                    if !constraints.is_empty() {
                        for constraint in constraints {
                            self.add_constraint(&mut working, constraint)?;
                        }
                        actions.push(AlterAction::SetConstraints {
                            checks: working.checks.clone(),
                            foreign_keys: working.foreign_keys.clone(),
                        });
                    }
                }
                Op::AlterColumn { column_name, op } => {
                    use ast::AlterColumnOperation as C;
                    let column = ident_name(column_name);
                    let index = table
                        .def
                        .column_index(&column)
                        .ok_or_else(|| undefined_column(&column))?;
                    let (default, not_null) = match op {
                        C::SetDefault { value } => {
                            // Bound now to check it, stored as text like CREATE TABLE's.
                            let text = stored_text(value);
                            let data_type = table.def.columns[index].data_type;
                            let bound = self.bind_default(&text, data_type)?;
                            let text = fixed_default(&text, &bound, data_type).unwrap_or(text);
                            (Some(Some(text)), None)
                        }
                        C::DropDefault => (Some(None), None),
                        C::SetNotNull => (None, Some(true)),
                        C::DropNotNull => (None, Some(false)),
                        C::SetDataType {
                            data_type: target,
                            using,
                            ..
                        } => {
                            let target = resolve_type(self.catalog, target)?;
                            // USING the column itself, or cast to the new type, possibly through
                            // text (Alembic's `USING c::text::new_enum`): what the type change
                            // does anyway (Django's `USING "col"::bigint`).
                            let plain = using.as_ref().is_none_or(|using| {
                                is_cast_of_column(self.catalog, using, &column, target, true)
                            });
                            // Text or another enum becomes an enum only by an explicit cast.
                            let current = table.def.columns[index].data_type;
                            if using.is_none()
                                && matches!(target, DataType::Enum(_))
                                && current != target
                            {
                                return Err(SqlError::new(
                                    sqlstate::DATATYPE_MISMATCH,
                                    format!(
                                        "column \"{column}\" cannot be cast automatically to type {}",
                                        self.type_name(target)
                                    ),
                                ));
                            }
                            if !plain {
                                return Err(SqlError::unsupported(
                                    "ALTER COLUMN TYPE ... USING an expression other than the column",
                                ));
                            }
                            actions.push(AlterAction::SetType {
                                name: column,
                                data_type: target,
                            });
                            continue;
                        }
                        other => {
                            return Err(SqlError::unsupported(format!("ALTER COLUMN {other}")))
                        }
                    };
                    actions.push(AlterAction::AlterColumn {
                        name: column,
                        default,
                        not_null,
                    });
                }
                Op::DropColumn {
                    column_names,
                    if_exists,
                    ..
                } => {
                    dropped = true;
                    for column in column_names {
                        actions.push(AlterAction::DropColumn {
                            name: ident_name(column),
                            if_exists: *if_exists,
                        });
                    }
                }
                Op::RenameColumn {
                    old_column_name,
                    new_column_name,
                } => {
                    let (from, to) = (ident_name(old_column_name), ident_name(new_column_name));
                    table
                        .def
                        .column_index(&from)
                        .ok_or_else(|| undefined_column(&from))?;
                    if table.def.column_index(&to).is_some() {
                        return Err(SqlError::new(
                            sqlstate::DUPLICATE_COLUMN,
                            format!("column \"{to}\" of relation \"{name}\" already exists"),
                        ));
                    }
                    actions.push(AlterAction::RenameColumn { from, to });
                }
                Op::RenameConstraint { old_name, new_name } => {
                    let (from, to) = (ident_name(old_name), ident_name(new_name));
                    let has_primary_key = !working.primary_key.is_empty();
                    let constraint = |def: &crate::catalog::TableDef, name: &str| {
                        def.checks.iter().any(|c| c.name == name)
                            || def.foreign_keys.iter().any(|k| k.name == name)
                            || def.indexes.iter().any(|i| i.constraint && i.name == name)
                            || (has_primary_key && def.primary_key_name() == name)
                    };
                    if !constraint(&working, &from) {
                        return Err(crate::catalog::undefined_constraint(&from, &name));
                    }
                    if constraint(&working, &to) {
                        return Err(SqlError::new(
                            sqlstate::DUPLICATE_OBJECT,
                            format!("constraint \"{to}\" for relation \"{name}\" already exists"),
                        ));
                    }
                    if let Some(check) = working.checks.iter_mut().find(|c| c.name == from) {
                        check.name = to.clone();
                    } else if let Some(key) =
                        working.foreign_keys.iter_mut().find(|k| k.name == from)
                    {
                        key.name = to.clone();
                    } else if let Some(index) = working
                        .indexes
                        .iter_mut()
                        .find(|i| i.constraint && i.name == from)
                    {
                        index.name = to.clone();
                    } else if has_primary_key && working.primary_key_name() == from {
                        working.primary_key_constraint = Some(to.clone());
                    }
                    actions.push(AlterAction::RenameConstraint { from, to });
                }
                Op::RenameTable { table_name } => {
                    let (ast::RenameTableNameKind::To(to) | ast::RenameTableNameKind::As(to)) =
                        table_name;
                    actions.push(AlterAction::RenameTable(object_name(to)?));
                }
                other => return Err(SqlError::unsupported(format!("ALTER TABLE {other}"))),
            }
        }
        Ok(Plan::AlterTable {
            table: name,
            actions,
        })
    }

    /// ALTER INDEX name RENAME TO new: the index's table (a primary key's index renames
    /// the key's constraint too).
    pub(super) fn bind_alter_index(
        &mut self,
        name: &ast::ObjectName,
        operation: &ast::AlterIndexOperation,
    ) -> SqlResult<Plan> {
        let from = object_name(name)?;
        let ast::AlterIndexOperation::RenameIndex { index_name } = operation;
        let to = object_name(index_name)?;
        let Some(table) = self.catalog.index_table(&from) else {
            let primary_key = self.catalog.table_names().into_iter().find(|table| {
                self.catalog.table(table).is_ok_and(|table| {
                    !table.def.primary_key.is_empty() && table.def.primary_key_name() == from
                })
            });
            if let Some(table) = primary_key {
                return Ok(Plan::RenameIndex { table, from, to });
            }
            return Err(SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("relation \"{from}\" does not exist"),
            ));
        };
        Ok(Plan::RenameIndex {
            table: table.def.name.clone(),
            from,
            to,
        })
    }

    /// Names and checks a CHECK or FOREIGN KEY and adds it to `def` (a table being created or
    /// altered).
    fn add_constraint(&mut self, def: &mut TableDef, constraint: Constraint) -> SqlResult<()> {
        let taken = |def: &TableDef, name: &str| {
            def.checks.iter().any(|c| c.name == name)
                || def.foreign_keys.iter().any(|k| k.name == name)
                || def.indexes.iter().any(|i| !i.automatic && i.name == name)
        };
        match constraint {
            Constraint::Check(name, expr) => {
                self.bind_check(def, &expr)?;
                let mut check = CheckDef {
                    name: name.clone().unwrap_or_default(),
                    expr,
                };
                if name.is_none() {
                    // PostgreSQL: table_column_check after the first column it reads, else
                    // table_check.
                    let first = def.columns.iter().find(|c| check.mentions(&c.name));
                    let base = match first {
                        Some(column) => format!("{}_{}_check", def.name, column.name),
                        None => format!("{}_check", def.name),
                    };
                    check.name = unique_name(base, &|n| taken(def, n));
                }
                if taken(def, &check.name) {
                    return Err(duplicate_constraint(&check.name, &def.name));
                }
                def.checks.push(check);
            }
            Constraint::ForeignKey(name, columns, foreign) => {
                let columns = columns
                    .iter()
                    .map(|column| {
                        def.column_index(column)
                            .ok_or_else(|| undefined_column(column))
                    })
                    .collect::<SqlResult<Vec<usize>>>()?;
                let parent_name = object_name(&foreign.foreign_table)?;
                let parent = if parent_name == def.name {
                    def.clone()
                } else {
                    self.catalog.table(&parent_name)?.def.clone()
                };
                let referenced: Vec<String> = if foreign.referred_columns.is_empty() {
                    parent
                        .primary_key
                        .iter()
                        .map(|c| parent.columns[*c].name.clone())
                        .collect()
                } else {
                    foreign.referred_columns.iter().map(ident_name).collect()
                };
                if referenced.len() != columns.len() {
                    return Err(SqlError::new(
                        sqlstate::INVALID_FOREIGN_KEY,
                        "number of referencing and referenced columns for foreign key disagree",
                    ));
                }
                let referenced_columns = referenced
                    .iter()
                    .map(|c| parent.column_index(c).ok_or_else(|| undefined_column(c)))
                    .collect::<SqlResult<Vec<usize>>>()?;
                if unique_key_of(&parent, &referenced_columns).is_none() {
                    return Err(SqlError::new(
                        sqlstate::INVALID_FOREIGN_KEY,
                        format!(
                            "there is no unique constraint matching given keys for referenced \
                             table \"{parent_name}\""
                        ),
                    ));
                }
                for (child, parent_column) in columns.iter().zip(&referenced_columns) {
                    let (a, b) = (
                        def.columns[*child].data_type,
                        parent.columns[*parent_column].data_type,
                    );
                    if !(a == b || a.is_numeric() && b.is_numeric() || a.is_text() && b.is_text()) {
                        return Err(SqlError::new(
                            sqlstate::DATATYPE_MISMATCH,
                            format!(
                                "foreign key constraint cannot be implemented: key columns \
                                 \"{}\" and \"{}\" are of incompatible types",
                                def.columns[*child].name, parent.columns[*parent_column].name
                            ),
                        ));
                    }
                }
                let name = match name {
                    Some(name) => name,
                    None => {
                        let mut base = def.name.clone();
                        for column in &columns {
                            base.push('_');
                            base.push_str(&def.columns[*column].name);
                        }
                        base.push_str("_fkey");
                        unique_name(base, &|n| taken(def, n))
                    }
                };
                if taken(def, &name) {
                    return Err(duplicate_constraint(&name, &def.name));
                }
                def.foreign_keys.push(ForeignKeyDef {
                    name,
                    columns,
                    table: parent_name,
                    referenced,
                    on_delete: referential_action(foreign.on_delete),
                    on_update: referential_action(foreign.on_update),
                    deferral: deferral(foreign.characteristics.as_ref())?,
                });
            }
        }
        Ok(())
    }

    /// Binds a CHECK expression (SQL text) over a row of `def`.
    pub(crate) fn bind_check(&mut self, def: &TableDef, expr: &str) -> SqlResult<Expr> {
        self.bind_over_row(def, expr, true)
    }

    /// A partial index's predicate (its text) bound over the table's row. Its columns are
    /// named unqualified: the text is kept, and a table name in it would not follow a
    /// RENAME.
    pub(crate) fn bind_index_predicate(&mut self, def: &TableDef, expr: &str) -> SqlResult<Expr> {
        self.bind_over_row(def, expr, false)
    }

    /// An expression index's key expression bound over a row of `def`.
    pub(crate) fn bind_index_expression(
        &mut self,
        def: &TableDef,
        expression: &IndexExpression,
    ) -> SqlResult<Expr> {
        let (bound, data_type) = self.bind_index_expression_text(def, &expression.text)?;
        if data_type != expression.data_type {
            return Err(SqlError::new(
                sqlstate::DATA_CORRUPTED,
                format!(
                    "index expression {} is {data_type:?}, stored as {:?}",
                    expression.text, expression.data_type
                ),
            ));
        }
        Ok(bound)
    }

    /// A key expression's text bound over a row of `def`, and its type.
    fn bind_index_expression_text(
        &mut self,
        def: &TableDef,
        text: &str,
    ) -> SqlResult<(Expr, DataType)> {
        let parsed = parse_stored(text)?;
        self.in_row_scope(def, false, |binder| binder.bind_expr(&parsed, None))
    }

    /// Checks a partial index's predicate or an index's key expression (`what`), bound as
    /// `bound` from `text`: no subquery (0A000), nothing that depends
    /// on more than the row (42P17: non-immutable functions, the session's time zone).
    /// `rebind` binds the text again (to see whether it folds differently in another zone).
    fn check_index_term(
        &mut self,
        def: &TableDef,
        text: &str,
        bound: &Expr,
        what: &str,
        mut rebind: impl FnMut(&mut Self, &str) -> SqlResult<Expr>,
    ) -> SqlResult<()> {
        if bound.contains_subquery() {
            return Err(SqlError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                format!("cannot use subquery in index {what}"),
            ));
        }
        // Constants folded when bound (a literal cast through timestamptz) show a term read
        // in the zone: bound in two far-apart zones they differ. (Compared as text: NaN
        // constants are equal there; an error in one zone only is a difference too.)
        let mut in_zone = |east: i32| -> Option<String> {
            let zone = crate::types::zone::Zone::fixed(east).ok()?;
            let _entered = crate::types::zone::enter(std::sync::Arc::new(zone));
            let bound = rebind(self, text).ok()?;
            Some(format!("{bound:?}"))
        };
        let folds_the_zone = in_zone(14 * 3600) != in_zone(-12 * 3600);
        if !bound.is_immutable() || folds_the_zone || reads_the_zone(bound, def) {
            return Err(SqlError::new(
                sqlstate::INVALID_OBJECT_DEFINITION,
                format!("functions in index {what} must be marked IMMUTABLE"),
            ));
        }
        Ok(())
    }

    /// Runs `f` with the scope a row of `def` (`named`: the table's name may qualify its
    /// columns).
    fn in_row_scope<T>(
        &mut self,
        def: &TableDef,
        named: bool,
        f: impl FnOnce(&mut Self) -> SqlResult<T>,
    ) -> SqlResult<T> {
        let mut scope = super::scope::Scope::default();
        scope.push(super::scope::ScopeEntry::new(
            named.then(|| def.name.clone()),
            named.then(|| crate::system::PUBLIC_SCHEMA.into()),
            def.columns
                .iter()
                .map(|column| (column.name.clone(), column.data_type))
                .collect(),
        ));
        let saved = self.scope.replace(scope);
        let bound = f(self);
        self.scope = saved;
        bound
    }

    /// A boolean expression's text bound over a row of `def` (`named`: the table's name may
    /// qualify its columns).
    fn bind_over_row(&mut self, def: &TableDef, expr: &str, named: bool) -> SqlResult<Expr> {
        let parsed = parse_stored(expr)?;
        self.in_row_scope(def, named, |binder| {
            binder.bind_typed(&parsed, DataType::Bool)
        })
    }

    /// The table's partial indexes' predicates and expression indexes' key expressions,
    /// bound over its row (a predicate that does not bind, which CREATE INDEX prevents,
    /// gets FALSE and an expression that does not bind is left out: never used for reads).
    pub(crate) fn index_bindings(
        &mut self,
        table: &crate::catalog::Table,
    ) -> crate::plan::access::IndexBindings {
        let mut terms = crate::plan::access::IndexBindings::default();
        // Without a snapshot, the statement's is taken after binding: newer than every
        // index but those of open blocks.
        let snapshot = self.snapshot.unwrap_or(crate::catalog::NOT_READY - 1);
        for position in 0..table.index_trees.len() {
            let ready = table.index_ready(position);
            self.newest_index_ready = self.newest_index_ready.max(ready);
            if ready > snapshot {
                terms.unreadable.push(position);
            }
        }
        for (position, index) in table.def.indexes.iter().enumerate() {
            if let Some(predicate) = &index.predicate {
                let bound = self
                    .bind_index_predicate(&table.def, predicate)
                    .unwrap_or(Expr::Literal(Value::Bool(false)));
                terms.predicates.push((position, bound));
            }
            for key in 0..index.columns.len() {
                if let Some(expression) = index.expression_at(key) {
                    if let Ok(bound) = self.bind_index_expression(&table.def, expression) {
                        terms.expressions.push((position, key, bound));
                    }
                }
            }
        }
        terms
    }

    /// Binds a column's DEFAULT (stored as SQL text) as an expression of the column's type.
    pub(crate) fn bind_default_text(&mut self, default: &str, target: DataType) -> SqlResult<Expr> {
        self.bind_default(default, target)
    }

    /// Binds a column's DEFAULT (stored as SQL text) as an expression of the column's type.
    pub(super) fn bind_default(&mut self, default: &str, target: DataType) -> SqlResult<Expr> {
        let expr = parse_default(default)?;
        let saved = self.scope.take();
        let bound = self.bind_typed(&expr, target);
        self.scope = saved;
        bound
    }
}

/// A constraint written with a column or in the table's list, not yet named.
enum Constraint {
    Check(Option<String>, String),
    ForeignKey(Option<String>, Vec<String>, Box<ast::ForeignKeyConstraint>),
}

/// A column definition, its key flag (PRIMARY KEY: true, UNIQUE: false) and its CHECK and
/// REFERENCES constraints.
fn column_def_with_constraints(
    catalog: &Catalog,
    column: &ast::ColumnDef,
) -> SqlResult<(ColumnDef, Option<bool>, Vec<Constraint>)> {
    let mut constraints = Vec::new();
    let serial = serial_type(&column.data_type);
    let mut def = ColumnDef {
        name: ident_name(&column.name),
        data_type: match serial {
            Some(data_type) => data_type,
            None => resolve_type(catalog, &column.data_type)?,
        },
        not_null: serial.is_some(),
        default: None,
        identity: serial.map(|_| Identity::Serial),
        sequence: None,
    };
    let mut key = None;
    for option in &column.options {
        match &option.option {
            ast::ColumnOption::Null => {}
            ast::ColumnOption::NotNull => def.not_null = true,
            ast::ColumnOption::Default(expr) => def.default = Some(stored_text(expr)),
            ast::ColumnOption::PrimaryKey(constraint) => {
                not_deferrable(constraint.characteristics.as_ref())?;
                key = Some(true)
            }
            ast::ColumnOption::Unique(constraint) => {
                not_deferrable(constraint.characteristics.as_ref())?;
                key = key.or(Some(false))
            }
            ast::ColumnOption::Check(check) => constraints.push(Constraint::Check(
                option.name.as_ref().or(check.name.as_ref()).map(ident_name),
                stored_text(&check.expr),
            )),
            ast::ColumnOption::ForeignKey(foreign) => constraints.push(Constraint::ForeignKey(
                option
                    .name
                    .as_ref()
                    .or(foreign.name.as_ref())
                    .map(ident_name),
                vec![ident_name(&column.name)],
                Box::new(foreign.clone()),
            )),
            ast::ColumnOption::Generated {
                generated_as,
                generation_expr: None,
                ..
            } => {
                if !def.data_type.is_integer() {
                    return Err(SqlError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        format!(
                            "identity column type must be smallint, integer, or bigint (column \"{}\")",
                            def.name
                        ),
                    ));
                }
                def.identity = Some(match generated_as {
                    ast::GeneratedAs::Always => Identity::Always,
                    _ => Identity::ByDefault,
                });
                def.not_null = true;
            }
            other => return Err(SqlError::unsupported(format!("column option {other}"))),
        }
    }
    if def.identity.is_some() && def.default.is_some() {
        return Err(SqlError::syntax(format!(
            "multiple default values specified for column \"{}\"",
            def.name
        )));
    }
    Ok((def, key, constraints))
}

/// An expression as the catalog keeps it (a DEFAULT, a CHECK): its SQL text without the
/// parentheses around the whole, type names of casts in lower case as PostgreSQL shows them
/// (`nextval('s'::regclass)`), so a definition read back by pg_dump is the one written.
/// An expression stored as text (a CHECK, an index's predicate or key expression), parsed.
fn parse_stored(text: &str) -> SqlResult<ast::Expr> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(text)
        .and_then(|mut parser| parser.parse_expr())
        .map_err(|error| SqlError::syntax(format!("invalid stored expression {text}: {error}")))
}

/// A column's DEFAULT text as an expression.
fn parse_default(default: &str) -> SqlResult<ast::Expr> {
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(default)
        .and_then(|mut parser| parser.parse_expr())
        .map_err(|error| SqlError::syntax(format!("invalid DEFAULT {default}: {error}")))
}

/// A DEFAULT that is a date or time constant of the column's own type (a string, or a string
/// cast to that type), as PostgreSQL stores it: the value it has when the DDL runs, with its
/// type (`'2026-01-01 00:00:00+01'::timestamp with time zone`), so that it means the same in
/// every session's TimeZone. A constant of another type cast to the column's is evaluated at
/// each INSERT, as in PostgreSQL, and so is a text that would not read back as the value.
fn fixed_default(text: &str, bound: &Expr, data_type: DataType) -> Option<String> {
    let Expr::Literal(value @ (Value::Date(_) | Value::Timestamp(_) | Value::TimestampTz(_))) =
        bound
    else {
        return None;
    };
    let parsed = parse_default(text).ok()?;
    let string = |expr: &ast::Expr| matches!(expr, ast::Expr::Value(v) if matches!(v.value, ast::Value::SingleQuotedString(_)));
    let own_type = match &parsed {
        expr if string(expr) => true,
        ast::Expr::Cast {
            expr,
            data_type: to,
            ..
        } => string(expr) && super::data_type(to).ok() == Some(data_type),
        _ => false,
    };
    let fixed = value.to_text()?;
    (own_type && Value::parse(&fixed, data_type).ok().as_ref() == Some(value))
        .then(|| format!("'{fixed}'::{}", data_type.name()))
}

fn stored_text(expr: &ast::Expr) -> String {
    let mut expr = expr;
    while let ast::Expr::Nested(inner) = expr {
        expr = inner;
    }
    let text = expr.to_string();
    let mut out = String::with_capacity(text.len());
    let (mut quoted, mut cast) = (None, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match quoted {
            Some(quote) => {
                quoted = (c != quote).then_some(quote);
                out.push(c);
            }
            None if c == '\'' || c == '"' => {
                quoted = Some(c);
                cast = false;
                out.push(c);
            }
            None if c == ':' && chars.peek() == Some(&':') => {
                chars.next();
                out.push_str("::");
                cast = true;
            }
            None if cast && (c.is_ascii_alphanumeric() || c == '_' || c == ' ') => {
                out.push(c.to_ascii_lowercase());
            }
            None => {
                cast = false;
                out.push(c);
            }
        }
    }
    out
}

/// A table constraint that is a CHECK or a FOREIGN KEY.
fn table_constraint(constraint: &ast::TableConstraint) -> Option<Constraint> {
    match constraint {
        ast::TableConstraint::Check(check) => Some(Constraint::Check(
            check.name.as_ref().map(ident_name),
            stored_text(&check.expr),
        )),
        ast::TableConstraint::ForeignKey(foreign) => Some(Constraint::ForeignKey(
            foreign.name.as_ref().map(ident_name),
            foreign.columns.iter().map(ident_name).collect(),
            Box::new(foreign.clone()),
        )),
        _ => None,
    }
}

/// UNIQUE and PRIMARY KEY are checked at each row here: DEFERRABLE on them is refused
/// (0A000) rather than ignored.
fn not_deferrable(characteristics: Option<&ast::ConstraintCharacteristics>) -> SqlResult<()> {
    let deferrable = characteristics.is_some_and(|c| {
        c.deferrable == Some(true) || c.initially == Some(ast::DeferrableInitial::Deferred)
    });
    match deferrable {
        true => Err(SqlError::unsupported(
            "DEFERRABLE UNIQUE and PRIMARY KEY constraints (they are checked at each row)",
        )),
        false => Ok(()),
    }
}

/// A foreign key's [NOT] DEFERRABLE [INITIALLY ...]: INITIALLY DEFERRED alone implies
/// DEFERRABLE, as in PostgreSQL.
fn deferral(characteristics: Option<&ast::ConstraintCharacteristics>) -> SqlResult<Deferral> {
    let Some(characteristics) = characteristics else {
        return Ok(Deferral::NotDeferrable);
    };
    if characteristics.enforced.is_some() {
        return Err(SqlError::new(
            sqlstate::FEATURE_NOT_SUPPORTED,
            "foreign key constraints cannot be marked ENFORCED or NOT ENFORCED",
        ));
    }
    let deferred = characteristics.initially == Some(ast::DeferrableInitial::Deferred);
    Ok(match (characteristics.deferrable, deferred) {
        (Some(false), true) => {
            return Err(SqlError::syntax(
                "constraint declared INITIALLY DEFERRED must be DEFERRABLE",
            ))
        }
        (_, true) => Deferral::InitiallyDeferred,
        (Some(true), false) => Deferral::InitiallyImmediate,
        (_, false) => Deferral::NotDeferrable,
    })
}

fn referential_action(action: Option<ast::ReferentialAction>) -> ReferentialAction {
    match action {
        None | Some(ast::ReferentialAction::NoAction) => ReferentialAction::NoAction,
        Some(ast::ReferentialAction::Restrict) => ReferentialAction::Restrict,
        Some(ast::ReferentialAction::Cascade) => ReferentialAction::Cascade,
        Some(ast::ReferentialAction::SetNull) => ReferentialAction::SetNull,
        Some(ast::ReferentialAction::SetDefault) => ReferentialAction::SetDefault,
    }
}

/// A name not yet in `taken`: `base`, else base1, base2, ... (PostgreSQL's choice).
fn unique_name(base: String, taken: &dyn Fn(&str) -> bool) -> String {
    let mut candidate = base.clone();
    let mut n = 0;
    while taken(&candidate) {
        n += 1;
        candidate = format!("{base}{n}");
    }
    candidate
}

fn duplicate_constraint(name: &str, table: &str) -> SqlError {
    SqlError::new(
        sqlstate::DUPLICATE_OBJECT,
        format!("constraint \"{name}\" for relation \"{table}\" already exists"),
    )
}

/// The unique key of `def` whose columns are exactly `columns` (any order): None for the
/// primary key... Some(None) is the primary key, Some(Some(i)) the unique index i.
pub(crate) fn unique_key_of(def: &TableDef, columns: &[usize]) -> Option<Option<usize>> {
    let same = |key: &[usize]| {
        key.len() == columns.len() && key.iter().all(|column| columns.contains(column))
    };
    if !def.primary_key.is_empty() && same(&def.primary_key) {
        return Some(None);
    }
    def.indexes
        .iter()
        // A partial unique index is no key: rows outside its predicate may repeat.
        .position(|index| index.unique && index.predicate.is_none() && same(&index.columns))
        .map(Some)
}

/// True if an index predicate's value could depend on the session's time zone: it holds a
/// timestamptz constant (a literal is read in the zone when bound, and the predicate is
/// bound again by every writer), a cast to timestamptz, a function of the zone-sensitive
/// date/time family, or reads a timestamptz column other than by IS [NOT] NULL. Such a
/// predicate would put rows in or out of the index by the writer's zone.
fn reads_the_zone(expr: &Expr, def: &TableDef) -> bool {
    use crate::plan::expr::ScalarFunction as F;
    match expr {
        Expr::IsNull { expr, .. } if matches!(**expr, Expr::Column(_)) => false,
        Expr::Column(column) => def.columns[*column].data_type == DataType::TimestampTz,
        Expr::Literal(Value::TimestampTz(_)) => true,
        Expr::Cast { to, .. } if *to == DataType::TimestampTz => true,
        Expr::Function {
            function:
                F::AtTimeZone | F::DateTrunc | F::Extract | F::ToChar | F::ToTimestamp | F::ToDate,
            ..
        } => true,
        other => other
            .children()
            .into_iter()
            .any(|child| reads_the_zone(child, def)),
    }
}

pub(super) fn multiple_primary_keys(table: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_TABLE_DEFINITION,
        format!("multiple primary keys for table \"{table}\" are not allowed"),
    )
}

/// The isolation level a BEGIN or SET TRANSACTION names (None: the default).
pub(super) fn check_transaction_modes(
    modes: &[ast::TransactionMode],
) -> SqlResult<Option<crate::plan::Isolation>> {
    use crate::plan::Isolation;
    let mut isolation = None;
    for mode in modes {
        if let ast::TransactionMode::IsolationLevel(level) = mode {
            isolation = Some(match level {
                ast::TransactionIsolationLevel::Serializable => Isolation::Serializable,
                ast::TransactionIsolationLevel::RepeatableRead
                | ast::TransactionIsolationLevel::Snapshot => Isolation::RepeatableRead,
                _ => Isolation::ReadCommitted,
            });
        }
    }
    Ok(isolation)
}

pub(super) fn set_value(expr: &ast::Expr) -> String {
    match expr {
        ast::Expr::Value(value) => match &value.value {
            ast::Value::SingleQuotedString(text) => text.clone(),
            other => other.to_string(),
        },
        ast::Expr::Identifier(ident) => ident.value.clone(),
        other => other.to_string(),
    }
}

impl Binder<'_> {
    /// SET CONSTRAINTS (`session::constraints`): the named constraints (none: ALL) become
    /// deferred or immediate for the rest of the transaction. A named one must exist (42704)
    /// and, to be DEFERRED, be deferrable (42809): only foreign keys can be here.
    pub(super) fn bind_set_constraints(
        &mut self,
        names: &[ast::Expr],
        deferred: bool,
    ) -> SqlResult<Plan> {
        let mut bound = Vec::new();
        for name in names {
            let ast::Expr::Identifier(ident) = name else {
                return Err(SqlError::syntax("SET CONSTRAINTS takes constraint names"));
            };
            let name = &ident.value;
            let mut found = false;
            for table_name in self.catalog.table_names() {
                let Ok(table) = self.catalog.table(&table_name) else {
                    continue;
                };
                let def = &table.def;
                let deferrable = def
                    .foreign_keys
                    .iter()
                    .filter(|k| &k.name == name)
                    .map(|k| k.deferral.deferrable());
                let other = def.checks.iter().any(|c| &c.name == name)
                    || def
                        .indexes
                        .iter()
                        .any(|i| &i.name == name && def.is_unique_constraint(i))
                    || (!def.primary_key.is_empty() && *name == def.primary_key_name());
                for deferrable in deferrable.chain(other.then_some(false)) {
                    found = true;
                    if deferred && !deferrable {
                        return Err(SqlError::new(
                            sqlstate::WRONG_OBJECT_TYPE,
                            format!("constraint \"{name}\" is not deferrable"),
                        ));
                    }
                }
            }
            if !found {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_OBJECT,
                    format!("constraint \"{name}\" does not exist"),
                ));
            }
            bound.push(name.clone());
        }
        Ok(Plan::SetConstraints {
            names: bound,
            deferred,
        })
    }
}

/// SET TIME ZONE's value: an INTERVAL (`INTERVAL '1 hour'`, `'+05:30' HOUR TO MINUTE`)
/// as the number of hours east it is, else the text.
fn time_zone_value(value: &ast::Expr) -> SqlResult<String> {
    let ast::Expr::Interval(interval) = value else {
        return Ok(set_value(value));
    };
    let text = set_value(&interval.value);
    let parsed = match crate::types::interval::parse(text.trim(), None) {
        Ok(parsed) => parsed,
        // '+05:30' with HOUR TO MINUTE: hours and minutes.
        Err(error) => crate::types::interval::parse(text.trim().trim_start_matches('+'), None)
            .map_err(|_| error)?,
    };
    if parsed.months != 0 || parsed.days != 0 {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            "invalid interval value for time zone: month and day not allowed",
        ));
    }
    let hours = parsed.micros as f64 / 3_600_000_000.0;
    Ok(format!("{hours}"))
}

pub(super) fn bind_set(set: &ast::Set) -> SqlResult<Plan> {
    match set {
        ast::Set::SingleAssignment {
            variable,
            values,
            scope,
            ..
        } => Ok(Plan::Set {
            name: variable.to_string().to_lowercase(),
            value: values.iter().map(set_value).collect::<Vec<_>>().join(", "),
            local: matches!(scope, Some(ast::ContextModifier::Local)),
        }),
        ast::Set::SetTimeZone { value, local } => Ok(Plan::Set {
            name: "timezone".into(),
            value: time_zone_value(value)?,
            local: *local,
        }),
        ast::Set::SetTransaction { modes, session, .. } => Ok(Plan::SetTransaction {
            isolation: check_transaction_modes(modes)?,
            session: *session,
        }),
        ast::Set::SetNames { .. } | ast::Set::SetNamesDefault {} => Ok(Plan::NoOp { tag: "SET" }),
        other => Err(SqlError::unsupported(format!("{other}"))),
    }
}

/// Whether `expr` is the column `column`, or casts of it ending at `target` (`outer`) with
/// any inner ones to text or varchar, which keep every value a type change keeps.
fn is_cast_of_column(
    catalog: &Catalog,
    expr: &ast::Expr,
    column: &str,
    target: DataType,
    outer: bool,
) -> bool {
    match expr {
        ast::Expr::Identifier(ident) => ident_name(ident) == column,
        ast::Expr::Nested(inner) => is_cast_of_column(catalog, inner, column, target, outer),
        ast::Expr::Cast {
            expr, data_type, ..
        } => {
            let Ok(cast_to) = resolve_type(catalog, data_type) else {
                return false;
            };
            let through_text = matches!(cast_to, DataType::Text | DataType::Varchar(None));
            let fits = match outer {
                true => cast_to == target || through_text && target.is_text(),
                false => through_text,
            };
            fits && is_cast_of_column(catalog, expr, column, target, false)
        }
        _ => false,
    }
}

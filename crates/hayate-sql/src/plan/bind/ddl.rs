//! Binding DDL and session statements: CREATE TABLE, SET, transaction modes.

use sqlparser::ast;

use super::{data_type, ident_name, object_name, undefined_column, Binder};
use crate::catalog::{ColumnDef, TableDef};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::Expr;
use crate::plan::Plan;
use crate::types::DataType;

impl Binder<'_> {
    pub(super) fn bind_create_table(&mut self, create: &ast::CreateTable) -> SqlResult<Plan> {
        let name = object_name(&create.name)?;
        let mut columns: Vec<ColumnDef> = Vec::new();
        let mut primary_key: Vec<usize> = Vec::new();
        for column in &create.columns {
            let column_name = ident_name(&column.name);
            if columns.iter().any(|c| c.name == column_name) {
                return Err(SqlError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{column_name}\" specified more than once"),
                ));
            }
            let mut def = ColumnDef {
                name: column_name,
                data_type: data_type(&column.data_type)?,
                not_null: false,
                default: None,
            };
            for option in &column.options {
                match &option.option {
                    ast::ColumnOption::Null => {}
                    ast::ColumnOption::NotNull => def.not_null = true,
                    ast::ColumnOption::Default(expr) => def.default = Some(expr.to_string()),
                    ast::ColumnOption::PrimaryKey(_) => {
                        if !primary_key.is_empty() {
                            return Err(multiple_primary_keys(&name));
                        }
                        primary_key.push(columns.len());
                    }
                    other => return Err(SqlError::unsupported(format!("column option {other}"))),
                }
            }
            columns.push(def);
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(key) => {
                    if !primary_key.is_empty() {
                        return Err(multiple_primary_keys(&name));
                    }
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
                other => return Err(SqlError::unsupported(format!("table constraint {other}"))),
            }
        }
        for index in &primary_key {
            columns[*index].not_null = true;
        }
        let def = TableDef {
            name,
            columns,
            primary_key,
        };
        for column in &def.columns {
            if let Some(default) = &column.default {
                self.bind_default(default, column.data_type)?;
            }
        }
        Ok(Plan::CreateTable {
            def,
            if_not_exists: create.if_not_exists,
        })
    }

    /// Binds a column's DEFAULT (stored as SQL text) as an expression of the column's type.
    pub(super) fn bind_default(&mut self, default: &str, target: DataType) -> SqlResult<Expr> {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let expr = sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(default)
            .and_then(|mut parser| parser.parse_expr())
            .map_err(|error| SqlError::syntax(format!("invalid DEFAULT {default}: {error}")))?;
        let saved = self.scope.take();
        let bound = self.bind_typed(&expr, target);
        self.scope = saved;
        bound
    }
}

pub(super) fn multiple_primary_keys(table: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_TABLE_DEFINITION,
        format!("multiple primary keys for table \"{table}\" are not allowed"),
    )
}

pub(super) fn check_transaction_modes(modes: &[ast::TransactionMode]) -> SqlResult<()> {
    for mode in modes {
        if let ast::TransactionMode::IsolationLevel(ast::TransactionIsolationLevel::Serializable) =
            mode
        {
            return Err(SqlError::unsupported(
                "SERIALIZABLE isolation (the engine provides snapshot isolation: REPEATABLE \
                 READ)",
            ));
        }
    }
    Ok(())
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

pub(super) fn bind_set(set: &ast::Set) -> SqlResult<Plan> {
    match set {
        ast::Set::SingleAssignment {
            variable, values, ..
        } => Ok(Plan::Set {
            name: variable.to_string().to_lowercase(),
            value: values.iter().map(set_value).collect::<Vec<_>>().join(", "),
        }),
        ast::Set::SetTimeZone { value, .. } => Ok(Plan::Set {
            name: "timezone".into(),
            value: set_value(value),
        }),
        ast::Set::SetTransaction { modes, .. } => {
            check_transaction_modes(modes)?;
            Ok(Plan::NoOp { tag: "SET" })
        }
        ast::Set::SetNames { .. } | ast::Set::SetNamesDefault {} => Ok(Plan::NoOp { tag: "SET" }),
        other => Err(SqlError::unsupported(format!("{other}"))),
    }
}

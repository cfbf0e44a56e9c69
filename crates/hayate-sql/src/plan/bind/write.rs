//! Binding the write features beyond plain rows: identity columns of an INSERT and
//! INSERT ... ON CONFLICT.

use std::sync::Arc;

use sqlparser::ast;

use super::{ident_name, object_name, undefined_column, Binder};
use crate::catalog::{ColumnDef, Identity, Table, TableDef};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::write::{Arbiter, ConflictAction, OnConflict, SequenceFill};
use crate::types::Value;

/// The head of the quoted name that carries an `ON CONFLICT (columns) WHERE p` target's
/// predicate p in its column list (sqlparser does not read the WHERE there; the session
/// moves it, `session::rewrite`).
pub const CONFLICT_PREDICATE: &str = "\u{1}hayate conflict predicate\u{1}";

/// The prefix that names the proposed row's columns inside DO UPDATE.
const EXCLUDED: &str = "excluded.";

impl Binder<'_> {
    /// One fill per identity column of the table, with no rows yet.
    pub(super) fn sequence_fills(&self, table: &Table) -> Vec<SequenceFill> {
        table
            .sequences
            .iter()
            .enumerate()
            .filter_map(|(column, sequence)| {
                sequence.as_ref().map(|sequence| SequenceFill {
                    column,
                    sequence: sequence.clone(),
                    rows: Vec::new(),
                })
            })
            .collect()
    }

    /// An explicit value for a GENERATED ALWAYS column is an error, as in PostgreSQL.
    pub(super) fn check_identity_value(&self, def: &TableDef, column: usize) -> SqlResult<()> {
        let column = &def.columns[column];
        if column.identity == Some(Identity::Always) {
            return Err(SqlError::new(
                sqlstate::GENERATED_ALWAYS,
                format!(
                    "cannot insert a non-DEFAULT value into column \"{}\"",
                    column.name
                ),
            )
            .with_detail(format!(
                "Column \"{}\" is an identity column defined as GENERATED ALWAYS.",
                column.name
            )));
        }
        Ok(())
    }

    pub(super) fn bind_on_conflict(
        &mut self,
        table: &Arc<Table>,
        on: Option<&ast::OnInsert>,
    ) -> SqlResult<Option<OnConflict>> {
        let Some(on) = on else {
            return Ok(None);
        };
        let ast::OnInsert::OnConflict(on) = on else {
            return Err(SqlError::unsupported("ON DUPLICATE KEY UPDATE"));
        };
        let def = &table.def;
        let update = matches!(on.action, ast::OnConflictAction::DoUpdate(_));
        let arbiters = match &on.conflict_target {
            None if update => {
                return Err(SqlError::syntax(
                    "ON CONFLICT DO UPDATE requires inference specification or constraint name",
                ))
            }
            None => {
                let mut all: Vec<Arbiter> = Vec::new();
                if !def.primary_key.is_empty() {
                    all.push(Arbiter::PrimaryKey);
                }
                for (position, index) in def.indexes.iter().enumerate() {
                    if index.unique {
                        all.push(Arbiter::Index(position));
                    }
                }
                all
            }
            Some(ast::ConflictTarget::Columns(columns)) => {
                // `(columns) WHERE p` arrives with p as a last, quoted name (`session::rewrite`).
                let predicate = columns.last().and_then(|ident| {
                    let text = ident.value.strip_prefix(CONFLICT_PREDICATE)?;
                    Some(text)
                });
                let columns = match predicate {
                    Some(_) => &columns[..columns.len() - 1],
                    None => &columns[..],
                };
                // Partial unique indexes whose predicate p implies (as a read's WHERE would let
                // it use them, `access::usable_indexes`) are inferred too, as in PostgreSQL.
                let usable = match predicate {
                    Some(text) => Some(self.conflict_predicate_usable(table, text)?),
                    None => None,
                };
                let mut wanted = columns
                    .iter()
                    .map(|ident| {
                        let name = ident_name(ident);
                        def.column_index(&name)
                            .ok_or_else(|| undefined_column(&name))
                    })
                    .collect::<SqlResult<Vec<usize>>>()?;
                wanted.sort_unstable();
                wanted.dedup();
                let same = |columns: &[usize]| {
                    let mut columns = columns.to_vec();
                    columns.sort_unstable();
                    columns == wanted
                };
                let mut found = Vec::new();
                if !def.primary_key.is_empty() && same(&def.primary_key) {
                    found.push(Arbiter::PrimaryKey);
                }
                for (position, index) in def.indexes.iter().enumerate() {
                    let inferable = match (&index.predicate, &usable) {
                        (None, _) => true,
                        (Some(_), Some(usable)) => usable.get(position).copied().unwrap_or(false),
                        (Some(_), None) => false,
                    };
                    if index.unique && inferable && same(&index.columns) {
                        found.push(Arbiter::Index(position));
                    }
                }
                if found.is_empty() {
                    return Err(SqlError::new(
                        sqlstate::INVALID_COLUMN_REFERENCE,
                        "there is no unique or exclusion constraint matching the ON CONFLICT \
                         specification",
                    ));
                }
                found
            }
            Some(ast::ConflictTarget::OnConstraint(name)) => {
                let name = object_name(name)?;
                if !def.primary_key.is_empty() && name == def.primary_key_name() {
                    vec![Arbiter::PrimaryKey]
                } else if let Some(position) = def
                    .indexes
                    .iter()
                    .position(|index| index.unique && index.name == name)
                {
                    vec![Arbiter::Index(position)]
                } else {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_OBJECT,
                        format!(
                            "constraint \"{name}\" for table \"{}\" does not exist",
                            def.name
                        ),
                    ));
                }
            }
        };
        let action = match &on.action {
            ast::OnConflictAction::DoNothing => ConflictAction::Nothing,
            ast::OnConflictAction::DoUpdate(update) => self.bind_do_update(table, update)?,
        };
        Ok(Some(OnConflict { arbiters, action }))
    }

    /// Which of `table`'s indexes an ON CONFLICT target's WHERE predicate (SQL text) lets the
    /// target infer: `access::usable_indexes` of its conjuncts, bound over the table's row.
    fn conflict_predicate_usable(
        &mut self,
        table: &Arc<Table>,
        text: &str,
    ) -> SqlResult<Vec<bool>> {
        let expr = sqlparser::parser::Parser::new(&sqlparser::dialect::PostgreSqlDialect {})
            .try_with_sql(text)
            .and_then(|mut parser| parser.parse_expr())
            .map_err(|error| SqlError::syntax(format!("syntax error: {error}")))?;
        let saved = self.scope.replace(super::Scope::table(table));
        let bound = self.bind_typed(&expr, crate::types::DataType::Bool);
        self.scope = saved;
        let bound = bound?;
        let mut parts = Vec::new();
        crate::plan::access::conjuncts(&bound, &mut parts);
        let terms = self.index_bindings(table);
        let usable = crate::plan::access::usable_indexes(table, &terms, &parts);
        Ok(match usable.is_empty() {
            true => vec![true; table.def.indexes.len()],
            false => usable,
        })
    }

    /// DO UPDATE: bound over the existing row's columns followed by EXCLUDED's.
    fn bind_do_update(
        &mut self,
        table: &Arc<Table>,
        update: &ast::DoUpdate,
    ) -> SqlResult<ConflictAction> {
        let def = &table.def;
        let mut both = def.clone();
        both.columns
            .extend(def.columns.iter().map(|column| ColumnDef {
                name: format!("{EXCLUDED}{}", column.name),
                ..column.clone()
            }));
        let saved = self
            .scope
            .replace(super::Scope::table(&table.with_def(both)));
        let bound = (|| -> SqlResult<ConflictAction> {
            let mut assignments = Vec::with_capacity(update.assignments.len());
            for assignment in &update.assignments {
                let ast::AssignmentTarget::ColumnName(name) = &assignment.target else {
                    return Err(SqlError::unsupported("assigning to a tuple of columns"));
                };
                let column_name = name
                    .0
                    .last()
                    .and_then(|part| part.as_ident())
                    .map(ident_name)
                    .unwrap_or_default();
                let index = def
                    .column_index(&column_name)
                    .ok_or_else(|| undefined_column(&column_name))?;
                let column = &def.columns[index];
                let is_default = matches!(&assignment.value, ast::Expr::Identifier(i)
                    if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
                let value = match (&column.default, is_default) {
                    (Some(default), true) => self.bind_default(default, column.data_type)?,
                    (None, true) => crate::plan::Expr::Literal(Value::Null),
                    _ => {
                        let expr = rewrite_excluded(&assignment.value);
                        self.bind_typed(&expr, column.data_type)?
                    }
                };
                assignments.push((index, value));
            }
            let filter = update
                .selection
                .as_ref()
                .map(|expr| self.bind_typed(&rewrite_excluded(expr), crate::types::DataType::Bool))
                .transpose()?;
            Ok(ConflictAction::Update {
                assignments,
                filter,
            })
        })();
        self.scope = saved;
        bound
    }
}

/// Rewrites `excluded.c` into the quoted identifier `"excluded.c"` (a column of the scope
/// `bind_do_update` binds in), through the expression forms an ON CONFLICT clause uses.
fn rewrite_excluded(expr: &ast::Expr) -> ast::Expr {
    use ast::Expr as E;
    let boxed = |e: &ast::Expr| Box::new(rewrite_excluded(e));
    match expr {
        E::CompoundIdentifier(parts)
            if parts.len() == 2 && ident_name(&parts[0]) == EXCLUDED.trim_end_matches('.') =>
        {
            E::Identifier(ast::Ident::with_quote(
                '"',
                format!("{EXCLUDED}{}", ident_name(&parts[1])),
            ))
        }
        E::BinaryOp { left, op, right } => E::BinaryOp {
            left: boxed(left),
            op: op.clone(),
            right: boxed(right),
        },
        E::UnaryOp { op, expr } => E::UnaryOp {
            op: *op,
            expr: boxed(expr),
        },
        E::Nested(inner) => E::Nested(boxed(inner)),
        E::IsNull(inner) => E::IsNull(boxed(inner)),
        E::IsNotNull(inner) => E::IsNotNull(boxed(inner)),
        E::IsTrue(inner) => E::IsTrue(boxed(inner)),
        E::IsFalse(inner) => E::IsFalse(boxed(inner)),
        E::IsDistinctFrom(a, b) => E::IsDistinctFrom(boxed(a), boxed(b)),
        E::IsNotDistinctFrom(a, b) => E::IsNotDistinctFrom(boxed(a), boxed(b)),
        E::Cast {
            kind,
            expr,
            data_type,
            format,
        } => E::Cast {
            kind: kind.clone(),
            expr: boxed(expr),
            data_type: data_type.clone(),
            format: format.clone(),
        },
        E::Function(function) => {
            let mut function = function.clone();
            if let ast::FunctionArguments::List(list) = &mut function.args {
                for arg in &mut list.args {
                    let (ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))
                    | ast::FunctionArg::Named {
                        arg: ast::FunctionArgExpr::Expr(e),
                        ..
                    }) = arg
                    else {
                        continue;
                    };
                    *e = rewrite_excluded(e);
                }
            }
            E::Function(function)
        }
        other => other.clone(),
    }
}

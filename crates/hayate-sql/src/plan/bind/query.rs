//! Binding SELECT: the source, grouping, projection, ORDER BY and LIMIT/OFFSET.

use sqlparser::ast::{self, SelectItem, SetExpr};

use super::expr::{contains_aggregate, function_name};
use super::{ident_name, Binder, Grouping};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::Expr;
use crate::plan::{Aggregation, OutputColumn, SelectPlan, SortKey};
use crate::types::DataType;

impl Binder<'_> {
    pub(super) fn bind_query(&mut self, query: &ast::Query) -> SqlResult<SelectPlan> {
        if query.with.is_some() {
            return Err(SqlError::unsupported("WITH"));
        }
        if !query.locks.is_empty() {
            return Err(SqlError::unsupported("SELECT ... FOR UPDATE"));
        }
        let SetExpr::Select(select) = query.body.as_ref() else {
            return Err(SqlError::unsupported(format!("the query {}", query.body)));
        };
        if select.distinct.is_some() {
            return Err(SqlError::unsupported("SELECT DISTINCT"));
        }
        let system = crate::system::from_clause(self.catalog, &select.from)?;
        let table = match &system {
            Some((table, _)) => Some(table.clone()),
            None => self.single_table(&select.from)?,
        };
        let source = match table {
            Some(table) => {
                let mut read = self.bind_table_read(table, select.selection.as_ref())?;
                if let Some((_, access)) = system {
                    read.access = access;
                }
                Some(read)
            }
            None => {
                if select.selection.is_some() {
                    return Err(SqlError::unsupported("WHERE without FROM"));
                }
                None
            }
        };
        let group_by = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs,
            _ => return Err(SqlError::unsupported("GROUP BY ALL or with modifiers")),
        };
        let aggregated = !group_by.is_empty()
            || select.having.is_some()
            || select.projection.iter().any(|item| match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    contains_aggregate(e)
                }
                _ => false,
            });
        let mut aggregation_groups = Vec::new();
        if aggregated {
            let mut group_types = Vec::new();
            for expr in group_by {
                let (bound, data_type) = self.bind_expr(expr, None)?;
                aggregation_groups.push(bound);
                group_types.push(data_type);
            }
            self.grouping = Some(Grouping {
                group_by: group_by.clone(),
                group_types,
                aggregates: Vec::new(),
            });
        }
        let (projection, columns) = self.bind_projection(&select.projection)?;
        let having = select
            .having
            .as_ref()
            .map(|expr| self.bind_typed(expr, DataType::Bool))
            .transpose()?;
        let order_by = self.bind_order_by(query, &select.projection, &projection)?;
        let aggregation = self.grouping.take().map(|grouping| Aggregation {
            group_by: aggregation_groups,
            aggregates: grouping.aggregates,
        });
        let (limit, offset) = self.bind_limit(query)?;
        let ordered_by_key = match (&source, &aggregation) {
            (Some(read), None) => {
                order_by
                    .iter()
                    .all(|key| !key.descending && !key.nulls_first)
                    && order_by.len() <= read.table.def.primary_key.len()
                    && order_by
                        .iter()
                        .zip(&read.table.def.primary_key)
                        .all(|(key, column)| key.expr == Expr::Column(*column))
            }
            _ => order_by.is_empty(),
        };
        Ok(SelectPlan {
            source,
            aggregation,
            having,
            projection,
            columns,
            order_by,
            ordered_by_key,
            limit,
            offset,
        })
    }

    pub(super) fn bind_projection(
        &mut self,
        items: &[SelectItem],
    ) -> SqlResult<(Vec<Expr>, Vec<OutputColumn>)> {
        let mut projection = Vec::new();
        let mut columns = Vec::new();
        for item in items {
            match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    let table = self
                        .scope
                        .clone()
                        .ok_or_else(|| SqlError::syntax("SELECT * with no tables specified"))?;
                    if self.grouping.is_some() {
                        return Err(SqlError::new(
                            sqlstate::GROUPING_ERROR,
                            "SELECT * is not allowed with GROUP BY or aggregates",
                        ));
                    }
                    for (index, column) in table.def.columns.iter().enumerate() {
                        projection.push(Expr::Column(index));
                        columns.push(OutputColumn {
                            name: column.name.clone(),
                            data_type: column.data_type,
                        });
                    }
                }
                SelectItem::UnnamedExpr(expr) => {
                    let (bound, data_type) = self.bind_expr(expr, None)?;
                    projection.push(bound);
                    columns.push(OutputColumn {
                        name: output_name(expr),
                        data_type: output_type(data_type),
                    });
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    let (bound, data_type) = self.bind_expr(expr, None)?;
                    projection.push(bound);
                    columns.push(OutputColumn {
                        name: ident_name(alias),
                        data_type: output_type(data_type),
                    });
                }
                SelectItem::ExprWithAliases { .. } => {
                    return Err(SqlError::unsupported("several aliases for one expression"))
                }
            }
        }
        Ok((projection, columns))
    }

    pub(super) fn bind_order_by(
        &mut self,
        query: &ast::Query,
        items: &[SelectItem],
        projection: &[Expr],
    ) -> SqlResult<Vec<SortKey>> {
        let Some(order_by) = &query.order_by else {
            return Ok(Vec::new());
        };
        let ast::OrderByKind::Expressions(exprs) = &order_by.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        let mut keys = Vec::with_capacity(exprs.len());
        for order in exprs {
            let expr = match &order.expr {
                ast::Expr::Value(value) => match &value.value {
                    ast::Value::Number(number, _) => {
                        let position: usize = number.parse().unwrap_or(0);
                        projection
                            .get(position.wrapping_sub(1))
                            .cloned()
                            .ok_or_else(|| {
                                SqlError::new(
                                    sqlstate::UNDEFINED_COLUMN,
                                    format!("ORDER BY position {number} is not in select list"),
                                )
                            })?
                    }
                    _ => self.bind_expr(&order.expr, None)?.0,
                },
                ast::Expr::Identifier(ident) => {
                    let name = ident_name(ident);
                    let alias = items.iter().position(|item| {
                        matches!(item, SelectItem::ExprWithAlias { alias, .. }
                            if ident_name(alias) == name)
                    });
                    match alias {
                        Some(position) => projection[position].clone(),
                        None => self.bind_expr(&order.expr, None)?.0,
                    }
                }
                other => self.bind_expr(other, None)?.0,
            };
            let descending = matches!(order.options.sort, Some(ast::OrderBySort::Desc));
            keys.push(SortKey {
                expr,
                descending,
                // PostgreSQL: NULLs are larger than every value.
                nulls_first: order.options.nulls_first.unwrap_or(descending),
            });
        }
        Ok(keys)
    }

    pub(super) fn bind_limit(
        &mut self,
        query: &ast::Query,
    ) -> SqlResult<(Option<Expr>, Option<Expr>)> {
        let saved = self.scope.take();
        let grouping = self.grouping.take();
        let result = match &query.limit_clause {
            None => Ok((None, None)),
            Some(ast::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err(SqlError::unsupported("LIMIT BY"));
                }
                let limit = limit
                    .as_ref()
                    .map(|e| self.bind_typed(e, DataType::Int8))
                    .transpose()?;
                let offset = offset
                    .as_ref()
                    .map(|o| self.bind_typed(&o.value, DataType::Int8))
                    .transpose()?;
                Ok((limit, offset))
            }
            Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => Ok((
                Some(self.bind_typed(limit, DataType::Int8)?),
                Some(self.bind_typed(offset, DataType::Int8)?),
            )),
        };
        self.scope = saved;
        self.grouping = grouping;
        result
    }
}

/// The column name PostgreSQL gives an unnamed select item.
pub(super) fn output_name(expr: &ast::Expr) -> String {
    match expr {
        ast::Expr::Identifier(ident) => ident_name(ident),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map(ident_name).unwrap_or_default(),
        ast::Expr::Function(function) => function_name(function),
        ast::Expr::Cast { expr, .. } | ast::Expr::Nested(expr) => output_name(expr),
        _ => "?column?".into(),
    }
}

/// Result columns never have an unknown type: PostgreSQL reports `text`.
pub(super) fn output_type(data_type: DataType) -> DataType {
    match data_type {
        DataType::Unknown => DataType::Text,
        other => other,
    }
}

//! Binding expressions: names to row positions, literals and parameters typed by their
//! context, operators and functions type-checked, aggregates collected into the grouping.

use sqlparser::ast;

use super::{ident_name, resolve_type, undefined_column, Binder};
use crate::error::{sqlstate, SqlError, SqlResult};
use std::sync::Arc;

use crate::plan::expr::{BinaryOp, Expr, ScalarFunction, Subquery, SubqueryKind, SubqueryRef};
use crate::plan::{AggregateCall, AggregateFunction};
use crate::types::{DataType, Value};

pub(super) fn aggregate_function(name: &str) -> Option<AggregateFunction> {
    Some(match name {
        "count" => AggregateFunction::Count,
        "sum" => AggregateFunction::Sum,
        "min" => AggregateFunction::Min,
        "max" => AggregateFunction::Max,
        "avg" => AggregateFunction::Avg,
        "string_agg" => AggregateFunction::StringAgg,
        "array_agg" => AggregateFunction::ArrayAgg,
        "json_agg" => AggregateFunction::JsonAgg {
            binary: false,
            rows: false,
        },
        "jsonb_agg" => AggregateFunction::JsonAgg {
            binary: true,
            rows: false,
        },
        _ => return None,
    })
}

pub(super) fn function_name(function: &ast::Function) -> String {
    function
        .name
        .0
        .last()
        .and_then(|part| part.as_ident())
        .map(ident_name)
        .unwrap_or_default()
}

/// True if the expression calls an aggregate function outside any subquery.
pub(super) fn contains_aggregate(expr: &ast::Expr) -> bool {
    use ast::Expr as E;
    match expr {
        E::Function(function) => {
            aggregate_function(&function_name(function)).is_some()
                || function_args(function).iter().any(|arg| match arg {
                    FunctionArg::Expr(e) => contains_aggregate(e),
                    FunctionArg::Star => false,
                })
        }
        E::BinaryOp { left, right, .. } => contains_aggregate(left) || contains_aggregate(right),
        E::UnaryOp { expr, .. }
        | E::Nested(expr)
        | E::IsNull(expr)
        | E::IsNotNull(expr)
        | E::Cast { expr, .. } => contains_aggregate(expr),
        E::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            operand.as_deref().is_some_and(contains_aggregate)
                || else_result.as_deref().is_some_and(contains_aggregate)
                || conditions
                    .iter()
                    .any(|c| contains_aggregate(&c.condition) || contains_aggregate(&c.result))
        }
        E::IsDistinctFrom(left, right) | E::IsNotDistinctFrom(left, right) => {
            contains_aggregate(left) || contains_aggregate(right)
        }
        _ => false,
    }
}

pub(super) enum FunctionArg<'a> {
    Expr(&'a ast::Expr),
    Star,
}

pub(super) fn function_args(function: &ast::Function) -> Vec<FunctionArg<'_>> {
    let ast::FunctionArguments::List(list) = &function.args else {
        return Vec::new();
    };
    list.args
        .iter()
        .map(|arg| match arg {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))
            | ast::FunctionArg::Named {
                arg: ast::FunctionArgExpr::Expr(e),
                ..
            } => FunctionArg::Expr(e),
            _ => FunctionArg::Star,
        })
        .collect()
}

impl Binder<'_> {
    /// Binds an expression that must have type `target` (values are cast to it).
    pub fn bind_typed(&mut self, expr: &ast::Expr, target: DataType) -> SqlResult<Expr> {
        let (bound, data_type) = self.bind_expr(expr, Some(target))?;
        if data_type == target || data_type == DataType::Unknown {
            return Ok(match bound {
                Expr::Literal(value) => Expr::Literal(value.cast(target)?),
                other => other,
            });
        }
        let compatible = (data_type.is_numeric() && target.is_numeric())
            || (data_type.is_text() && target.is_text())
            || (data_type.is_datetime() && target.is_datetime())
            || (data_type.is_array() && target.is_array())
            || target.is_text();
        if !compatible {
            return Err(SqlError::mismatch(format!(
                "expression is of type {data_type} but {target} is expected"
            )));
        }
        Ok(match bound {
            Expr::Literal(value) => Expr::Literal(value.cast(target)?),
            other => Expr::Cast {
                expr: Box::new(other),
                to: target,
            },
        })
    }

    /// Resolves a column: in this query's FROM list, else in an enclosing query's (an outer
    /// reference, which makes every subquery level in between correlated).
    pub(super) fn column(
        &mut self,
        qualifier: Option<&[String]>,
        name: &str,
    ) -> SqlResult<(Expr, DataType, bool)> {
        if let Some(scope) = &self.scope {
            if let Some((index, data_type)) = scope.resolve(qualifier, name)? {
                return Ok((Expr::Column(index), data_type, false));
            }
        }
        for depth in 1..=self.outer.len() {
            let level = &self.outer[self.outer.len() - depth];
            let Some(scope) = &level.scope else {
                continue;
            };
            let Some((index, data_type)) = scope.resolve(qualifier, name)? else {
                continue;
            };
            if level.grouped {
                return Err(SqlError::unsupported(
                    "a subquery reading a column of a grouped query",
                ));
            }
            let levels = self.correlated.len();
            for flag in &mut self.correlated[levels - depth..] {
                *flag = true;
            }
            return Ok((Expr::Outer { depth, index }, data_type, true));
        }
        if let Some(qualifier) = qualifier {
            let known = self
                .scope
                .iter()
                .chain(self.outer.iter().filter_map(|level| level.scope.as_ref()))
                .any(|scope| scope.has_qualifier(qualifier));
            if !known {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_TABLE,
                    format!(
                        "missing FROM-clause entry for table \"{}\"",
                        qualifier.join(".")
                    ),
                ));
            }
            return Err(undefined_column(&format!("{}.{name}", qualifier.join("."))));
        }
        Err(undefined_column(name))
    }

    /// A subquery in an expression: bound as a query one level down.
    fn bind_subquery(
        &mut self,
        query: &ast::Query,
        in_operand: Option<&ast::Expr>,
        array: bool,
    ) -> SqlResult<(Expr, DataType)> {
        let scope = self.scope.take();
        let grouping = self.grouping.take();
        self.outer.push(super::OuterLevel {
            scope,
            grouped: grouping.is_some(),
        });
        self.correlated.push(false);
        let plan = self.bind_query(query);
        let correlated = self.correlated.pop().unwrap_or(false);
        let level = self.outer.pop().expect("pushed above");
        self.scope = level.scope;
        self.grouping = grouping;
        let plan = plan?;
        let column_type = plan.columns.first().map(|c| c.data_type);
        let (kind, data_type) = match in_operand {
            Some(left) => {
                if plan.columns.len() != 1 {
                    return Err(SqlError::syntax("subquery has too many columns"));
                }
                let right_type = column_type.unwrap_or(DataType::Unknown);
                let (left, left_type) = self.bind_expr(left, Some(right_type))?;
                result_type(BinaryOp::Equal, left_type, right_type)?;
                (SubqueryKind::In(Box::new(left)), DataType::Bool)
            }
            None if array => {
                if plan.columns.len() != 1 {
                    return Err(SqlError::syntax("subquery must return only one column"));
                }
                (SubqueryKind::Array, plan.columns[0].data_type.array_of())
            }
            None => {
                if plan.columns.len() != 1 {
                    return Err(SqlError::syntax("subquery must return only one column"));
                }
                (
                    SubqueryKind::Scalar,
                    column_type.unwrap_or(DataType::Unknown),
                )
            }
        };
        let subquery = Subquery {
            kind,
            plan,
            correlated,
        };
        Ok((Expr::Subquery(SubqueryRef(Arc::new(subquery))), data_type))
    }

    fn bind_exists(&mut self, query: &ast::Query) -> SqlResult<(Expr, DataType)> {
        let scope = self.scope.take();
        let grouping = self.grouping.take();
        self.outer.push(super::OuterLevel {
            scope,
            grouped: grouping.is_some(),
        });
        self.correlated.push(false);
        let plan = self.bind_query(query);
        let correlated = self.correlated.pop().unwrap_or(false);
        let level = self.outer.pop().expect("pushed above");
        self.scope = level.scope;
        self.grouping = grouping;
        let subquery = Subquery {
            kind: SubqueryKind::Exists,
            plan: plan?,
            correlated,
        };
        Ok((
            Expr::Subquery(SubqueryRef(Arc::new(subquery))),
            DataType::Bool,
        ))
    }

    /// Binds an expression; `expected` types literals and parameters that have no type of
    /// their own.
    pub fn bind_expr(
        &mut self,
        expr: &ast::Expr,
        expected: Option<DataType>,
    ) -> SqlResult<(Expr, DataType)> {
        // A chain of thousands of operators recurses as deep as it is long: fail, as
        // PostgreSQL does past max_stack_depth, before the statement's stack runs out.
        if hayate_engine::fiber::stack_half_used() {
            return Err(SqlError::new(
                sqlstate::STATEMENT_TOO_COMPLEX,
                "stack depth limit exceeded",
            ));
        }
        if let Some(grouping) = &self.grouping {
            if let Some(position) = grouping.group_by.iter().position(|g| g == expr) {
                return Ok((Expr::Column(position), grouping.group_types[position]));
            }
        }
        use ast::Expr as E;
        match expr {
            E::Identifier(ident) => self.bind_column(&ident_name(ident)),
            E::CompoundIdentifier(parts) => self.bind_qualified_column(parts),
            E::Value(value) => self.bind_value(&value.value, expected),
            E::Nested(inner) => self.bind_expr(inner, expected),
            E::BinaryOp { left, op, right } => self.bind_binary(left, op, right),
            E::UnaryOp { op, expr } => self.bind_unary(op, expr, expected),
            E::IsNull(inner) | E::IsNotNull(inner) => {
                let (inner, _) = self.bind_expr(inner, None)?;
                let negated = matches!(expr, E::IsNotNull(_));
                let is_null = Expr::IsNull {
                    expr: Box::new(inner),
                    negated,
                };
                Ok((is_null, DataType::Bool))
            }
            E::IsTrue(inner) | E::IsFalse(inner) => {
                self.bind_is_boolean(inner, matches!(expr, E::IsTrue(_)))
            }
            E::Between {
                expr: inner,
                negated,
                low,
                high,
            } => {
                let both = and(
                    compare(inner, ast::BinaryOperator::GtEq, low),
                    compare(inner, ast::BinaryOperator::LtEq, high),
                );
                self.bind_negatable(&both, *negated)
            }
            E::InList {
                expr: inner,
                list,
                negated,
            } => {
                let any = list
                    .iter()
                    .map(|item| compare(inner, ast::BinaryOperator::Eq, item))
                    .reduce(|any, equal| ast::Expr::BinaryOp {
                        left: Box::new(any),
                        op: ast::BinaryOperator::Or,
                        right: Box::new(equal),
                    })
                    .ok_or_else(|| SqlError::syntax("empty IN list"))?;
                self.bind_negatable(&any, *negated)
            }
            E::Like {
                negated,
                expr: inner,
                pattern,
                escape_char,
                any,
            } => {
                if escape_char.is_some() || *any {
                    return Err(SqlError::unsupported("LIKE with ESCAPE or ANY"));
                }
                let left = self.bind_typed(inner, DataType::Text)?;
                let right = self.bind_typed(pattern, DataType::Text)?;
                let op = if *negated {
                    BinaryOp::NotLike
                } else {
                    BinaryOp::Like
                };
                Ok((binary(op, left, right, DataType::Bool), DataType::Bool))
            }
            E::Cast {
                expr: inner,
                data_type: target,
                ..
            } if super::system::is_system_type(target) => {
                super::system::bind_cast(self, self.catalog, inner, target)
            }
            E::Cast {
                expr: inner,
                data_type: target,
                ..
            } => self.bind_cast(inner, resolve_type(self.catalog, target)?),
            E::TypedString(typed) => {
                let target = resolve_type(self.catalog, &typed.data_type)?;
                let text = typed.value.value.clone().into_string().unwrap_or_default();
                let literal = Expr::Literal(Value::parse(&text, target)?);
                Ok((self.enum_check(literal, target)?, target))
            }
            E::Function(function) => self.bind_function(function),
            E::Interval(interval) => {
                let ast::Expr::Value(literal) = interval.value.as_ref() else {
                    return Err(SqlError::unsupported("an interval that is not a constant"));
                };
                let (ast::Value::SingleQuotedString(text) | ast::Value::Number(text, _)) =
                    &literal.value
                else {
                    return Err(SqlError::unsupported(format!("the interval {interval}")));
                };
                let unit = interval
                    .leading_field
                    .as_ref()
                    .map(|field| field.to_string().to_lowercase());
                let parsed = crate::types::interval::parse(text, unit.as_deref())?;
                Ok((Expr::Literal(Value::Interval(parsed)), DataType::Interval))
            }
            E::Subquery(query) => self.bind_subquery(query, None, false),
            E::InSubquery {
                expr: left,
                subquery,
                negated,
            } => {
                let (bound, data_type) = self.bind_subquery(subquery, Some(left), false)?;
                Ok(if *negated {
                    (Expr::Not(Box::new(bound)), data_type)
                } else {
                    (bound, data_type)
                })
            }
            E::Exists { subquery, negated } => {
                let (bound, data_type) = self.bind_exists(subquery)?;
                Ok(if *negated {
                    (Expr::Not(Box::new(bound)), data_type)
                } else {
                    (bound, data_type)
                })
            }
            other => self.bind_expr_extra(other, expected),
        }
    }

    /// `table.column` or `schema.table.column`.
    fn bind_qualified_column(&mut self, parts: &[ast::Ident]) -> SqlResult<(Expr, DataType)> {
        let names: Vec<String> = parts.iter().map(ident_name).collect();
        let Some((column, qualifier)) = names.split_last() else {
            return Err(SqlError::syntax("empty column name"));
        };
        if qualifier.len() > 2 {
            return Err(SqlError::unsupported(format!(
                "the column reference {}",
                names.join(".")
            )));
        }
        self.bind_column_in(Some(qualifier), column)
    }

    fn bind_unary(
        &mut self,
        op: &ast::UnaryOperator,
        expr: &ast::Expr,
        expected: Option<DataType>,
    ) -> SqlResult<(Expr, DataType)> {
        match op {
            ast::UnaryOperator::Not => {
                let inner = self.bind_typed(expr, DataType::Bool)?;
                Ok((Expr::Not(Box::new(inner)), DataType::Bool))
            }
            ast::UnaryOperator::Minus => {
                let (inner, data_type) = self.bind_expr(expr, expected)?;
                if !data_type.is_numeric()
                    && !matches!(data_type, DataType::Unknown | DataType::Interval)
                {
                    return Err(SqlError::mismatch(format!(
                        "operator does not exist: - {data_type}"
                    )));
                }
                // Fold negative literals so that `id = -5` stays a key lookup.
                let folded = match &inner {
                    Expr::Literal(Value::Int(v)) => Some(Value::Int(-v)),
                    Expr::Literal(Value::Float(v)) => Some(Value::Float(-v)),
                    Expr::Literal(Value::Float4(v)) => Some(Value::Float4(-v)),
                    Expr::Literal(Value::Numeric(v)) => Some(Value::Numeric(-v)),
                    _ => None,
                };
                Ok(match folded {
                    Some(value) => (Expr::Literal(value), data_type),
                    None => (Expr::Negate(Box::new(inner)), data_type),
                })
            }
            ast::UnaryOperator::Plus => self.bind_expr(expr, expected),
            other => Err(SqlError::unsupported(format!("operator {other}"))),
        }
    }

    /// `x IS TRUE` / `x IS FALSE`: never NULL.
    fn bind_is_boolean(&mut self, inner: &ast::Expr, truth: bool) -> SqlResult<(Expr, DataType)> {
        let inner = self.bind_typed(inner, DataType::Bool)?;
        let compare = binary(
            BinaryOp::Equal,
            inner,
            Expr::Literal(Value::Bool(truth)),
            DataType::Bool,
        );
        let never_null = Expr::Function {
            function: ScalarFunction::Coalesce,
            args: vec![compare, Expr::Literal(Value::Bool(false))],
        };
        Ok((never_null, DataType::Bool))
    }

    /// Binds a rewritten boolean expression (BETWEEN, IN), negated for NOT BETWEEN / NOT IN.
    fn bind_negatable(&mut self, expr: &ast::Expr, negated: bool) -> SqlResult<(Expr, DataType)> {
        let (bound, _) = self.bind_expr(expr, None)?;
        let bound = if negated {
            Expr::Not(Box::new(bound))
        } else {
            bound
        };
        Ok((bound, DataType::Bool))
    }

    pub(super) fn bind_cast(
        &mut self,
        inner: &ast::Expr,
        target: DataType,
    ) -> SqlResult<(Expr, DataType)> {
        let (bound, from) = self.bind_expr(inner, Some(target))?;
        if let DataType::Enum(_) = target {
            return Ok((self.coerce(bound, from, target)?, target));
        }
        Ok(match bound {
            Expr::Literal(value) => (Expr::Literal(value.cast(target)?), target),
            Expr::Parameter(index) if self.params[index] == DataType::Unknown => {
                self.params[index] = target;
                (Expr::Parameter(index), target)
            }
            other => (
                Expr::Cast {
                    expr: Box::new(other),
                    to: target,
                },
                target,
            ),
        })
    }

    pub(super) fn bind_column(&mut self, name: &str) -> SqlResult<(Expr, DataType)> {
        self.bind_column_in(None, name)
    }

    fn bind_column_in(
        &mut self,
        qualifier: Option<&[String]>,
        name: &str,
    ) -> SqlResult<(Expr, DataType)> {
        let (expr, data_type, outer) = self.column(qualifier, name)?;
        if let (Some(grouping), Expr::Column(position), false) = (&self.grouping, &expr, outer) {
            if let Some((_, key)) = grouping.columns.iter().find(|(p, _)| p == position) {
                return Ok((Expr::Column(*key), data_type));
            }
        }
        if self.grouping.is_some() && !outer {
            // Reached only when the column is not a GROUP BY expression.
            return Err(SqlError::new(
                sqlstate::GROUPING_ERROR,
                format!(
                    "column \"{name}\" must appear in the GROUP BY clause or be used in an \
                     aggregate function"
                ),
            ));
        }
        Ok((expr, data_type))
    }

    pub(super) fn bind_value(
        &mut self,
        value: &ast::Value,
        expected: Option<DataType>,
    ) -> SqlResult<(Expr, DataType)> {
        match value {
            ast::Value::Number(text, _) => {
                if let Ok(v) = text.parse::<i64>() {
                    let data_type = if i32::try_from(v).is_ok() {
                        DataType::Int4
                    } else {
                        DataType::Int8
                    };
                    return Ok((Expr::Literal(Value::Int(v)), data_type));
                }
                // A number with a point or an exponent is a numeric constant, as in
                // PostgreSQL (float8 only past numeric's limits).
                if let Ok(v) = crate::types::numeric::parse(text) {
                    return Ok((Expr::Literal(Value::Numeric(v)), DataType::Numeric(None)));
                }
                let v: f64 = text.parse().map_err(|_| {
                    SqlError::new(
                        sqlstate::INVALID_TEXT_REPRESENTATION,
                        format!("invalid number {text}"),
                    )
                })?;
                Ok((Expr::Literal(Value::Float(v)), DataType::Float8))
            }
            ast::Value::SingleQuotedString(text)
            | ast::Value::EscapedStringLiteral(text)
            | ast::Value::DollarQuotedString(ast::DollarQuotedString { value: text, .. }) => {
                // A quoted literal has no type of its own: it takes the expected one.
                match expected {
                    Some(target) if target != DataType::Unknown => {
                        let literal = Expr::Literal(Value::parse(text, target)?);
                        Ok((self.enum_check(literal, target)?, target))
                    }
                    _ => Ok((Expr::Literal(Value::Text(text.clone())), DataType::Text)),
                }
            }
            ast::Value::Boolean(v) => Ok((Expr::Literal(Value::Bool(*v)), DataType::Bool)),
            ast::Value::Null => Ok((
                Expr::Literal(Value::Null),
                expected.unwrap_or(DataType::Unknown),
            )),
            ast::Value::Placeholder(name) => {
                let index = name
                    .strip_prefix('$')
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| (1..=65535).contains(n))
                    .ok_or_else(|| SqlError::syntax(format!("invalid parameter {name}")))?
                    - 1;
                if self.params.len() <= index {
                    self.params.resize(index + 1, DataType::Unknown);
                }
                if self.params[index] == DataType::Unknown {
                    if let Some(target @ DataType::Enum(_)) = expected {
                        // The client sends a label as text; it is checked as it is used.
                        self.params[index] = DataType::Text;
                        return Ok((self.enum_check(Expr::Parameter(index), target)?, target));
                    }
                    if let Some(target) = expected {
                        self.params[index] = target;
                    }
                }
                Ok((Expr::Parameter(index), self.params[index]))
            }
            other => Err(SqlError::unsupported(format!("the literal {other}"))),
        }
    }

    pub(super) fn bind_binary(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
    ) -> SqlResult<(Expr, DataType)> {
        use ast::BinaryOperator as B;
        let op = match op {
            B::Plus => BinaryOp::Add,
            B::Minus => BinaryOp::Subtract,
            B::Multiply => BinaryOp::Multiply,
            B::Divide => BinaryOp::Divide,
            B::Modulo => BinaryOp::Modulo,
            B::BitwiseAnd => BinaryOp::BitAnd,
            B::BitwiseOr => BinaryOp::BitOr,
            B::Eq => BinaryOp::Equal,
            B::NotEq => BinaryOp::NotEqual,
            B::Lt => BinaryOp::Less,
            B::LtEq => BinaryOp::LessOrEqual,
            B::Gt => BinaryOp::Greater,
            B::GtEq => BinaryOp::GreaterOrEqual,
            B::And => BinaryOp::And,
            B::Or => BinaryOp::Or,
            B::StringConcat => BinaryOp::Concat,
            other => {
                if let Some(bound) = self.bind_array_operator(left, other, right)? {
                    return Ok(bound);
                }
                if let Some(bound) = self.bind_json_operator(left, other, right)? {
                    return Ok(bound);
                }
                return super::system::bind_operator(self, self.catalog, left, other, right);
            }
        };
        if matches!(op, BinaryOp::BitAnd | BinaryOp::BitOr) {
            // Integers only: an element of a catalog array (`indoption[i] & 1`) is one.
            let (left, left_type) = self.bind_expr(left, Some(DataType::Int8))?;
            let (right, right_type) = self.bind_expr(right, Some(left_type))?;
            let result_type = result_type(op, left_type, right_type)?;
            return Ok((binary(op, left, right, result_type), result_type));
        }
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            let left = self.bind_typed(left, DataType::Bool)?;
            let right = self.bind_typed(right, DataType::Bool)?;
            return Ok((binary(op, left, right, DataType::Bool), DataType::Bool));
        }
        // Bind the side with a type of its own first; it types the other side. `||` with a
        // non-text operand is PostgreSQL's text || anynonarray: the untyped side is text
        // (bytea || bytea stays bytea's, an array's untyped other side is an array).
        let hint = |typed: DataType| match op {
            BinaryOp::Concat if typed != DataType::Bytea && !typed.is_array() => DataType::Text,
            _ => typed,
        };
        let (left, left_type, right, right_type) = if untyped(left) && !untyped(right) {
            let (r, rt) = self.bind_expr(right, None)?;
            let (l, lt) = self.bind_expr(left, Some(hint(rt)))?;
            (l, lt, r, rt)
        } else {
            let (l, lt) = self.bind_expr(left, None)?;
            if lt == DataType::Jsonb && matches!(op, BinaryOp::Concat | BinaryOp::Subtract) {
                return self.bind_jsonb_edit(op == BinaryOp::Concat, l, right);
            }
            let (r, rt) = self.bind_expr(right, Some(hint(lt)))?;
            (l, lt, r, rt)
        };
        if op == BinaryOp::Concat && (left_type.is_array() || right_type.is_array()) {
            return self.bind_array_concat(left, left_type, right, right_type);
        }
        let result_type = result_type(op, left_type, right_type)?;
        if op.is_ordering() {
            // Enum labels order by their place in the type, arrays element by element: not
            // as their text.
            let keyed = [left_type, right_type]
                .into_iter()
                .find(|t| t.needs_order_key());
            if let Some(keyed) = keyed {
                let left = self.order_key(left, keyed)?;
                let right = self.order_key(right, keyed)?;
                return Ok((binary(op, left, right, result_type), result_type));
            }
        }
        Ok((binary(op, left, right, result_type), result_type))
    }

    pub(super) fn bind_function(
        &mut self,
        function: &ast::Function,
    ) -> SqlResult<(Expr, DataType)> {
        if function.over.is_some() {
            return self.bind_window(function);
        }
        let name = function_name(function);
        if let ast::FunctionArguments::Subquery(query) = &function.args {
            if name == "array" {
                return self.bind_subquery(query, None, true);
            }
        }
        let args = function_args(function);
        if self.set_calls.is_some()
            && (matches!(
                name.as_str(),
                "unnest" | "generate_subscripts" | "generate_series" | "_pg_expandarray"
            ) || crate::plan::JSON_SET_FUNCTIONS.contains(&name.as_str()))
        {
            let exprs = args
                .iter()
                .map(|arg| match arg {
                    FunctionArg::Expr(expr) => Ok((*expr).clone()),
                    FunctionArg::Star => Err(SqlError::syntax(format!("{name}(*)"))),
                })
                .collect::<SqlResult<Vec<ast::Expr>>>()?;
            return self.bind_set_call(&name, &exprs);
        }
        if let Some(aggregate) = aggregate_function(&name) {
            return self.bind_aggregate(aggregate, &args, function);
        }
        self.bind_scalar_function(&name, &args)
    }

    pub(super) fn bind_aggregate(
        &mut self,
        aggregate: AggregateFunction,
        args: &[FunctionArg],
        function: &ast::Function,
    ) -> SqlResult<(Expr, DataType)> {
        let distinct = match &function.args {
            ast::FunctionArguments::List(list) => {
                matches!(
                    list.duplicate_treatment,
                    Some(ast::DuplicateTreatment::Distinct)
                )
            }
            _ => false,
        };
        let Some(mut grouping) = self.grouping.take() else {
            return Err(SqlError::new(
                sqlstate::GROUPING_ERROR,
                "aggregate functions are not allowed here",
            ));
        };
        let call = match (aggregate, args) {
            (AggregateFunction::Count, [FunctionArg::Star]) => Ok(AggregateCall {
                function: AggregateFunction::CountStar,
                arg: None,
                data_type: DataType::Int8,
                distinct: false,
                filter: None,
                order_by: Vec::new(),
            }),
            (
                AggregateFunction::StringAgg,
                [FunctionArg::Expr(value), FunctionArg::Expr(delimiter)],
            ) => {
                // Both go to the accumulator as one array value, `{value,delimiter}`.
                let pair = ast::Expr::Array(ast::Array {
                    elem: vec![(*value).clone(), (*delimiter).clone()],
                    named: true,
                });
                self.bind_expr(&pair, None).map(|(arg, _)| AggregateCall {
                    function: AggregateFunction::StringAgg,
                    arg: Some(arg),
                    data_type: DataType::Text,
                    distinct,
                    filter: None,
                    order_by: Vec::new(),
                })
            }
            (AggregateFunction::JsonAgg { binary, .. }, [FunctionArg::Expr(arg)]) => {
                // Each input as to_json(b) converts it (json and jsonb values as they are).
                self.bind_json_part(arg).map(|(arg, _)| AggregateCall {
                    function: AggregateFunction::JsonAgg {
                        binary,
                        rows: is_row_object(&arg),
                    },
                    arg: Some(arg),
                    data_type: if binary {
                        DataType::Jsonb
                    } else {
                        DataType::Json
                    },
                    distinct,
                    filter: None,
                    order_by: Vec::new(),
                })
            }
            (aggregate, [FunctionArg::Expr(arg)]) if aggregate != AggregateFunction::StringAgg => {
                self.bind_expr(arg, None).and_then(|(arg, arg_type)| {
                    // PostgreSQL's result types (exec::aggregate accumulates accordingly).
                    let data_type = match aggregate {
                        AggregateFunction::Count | AggregateFunction::CountStar => DataType::Int8,
                        AggregateFunction::Sum
                            if matches!(arg_type, DataType::Int2 | DataType::Int4) =>
                        {
                            DataType::Int8
                        }
                        AggregateFunction::Sum if arg_type.is_float() => arg_type,
                        AggregateFunction::Sum | AggregateFunction::Avg
                            if arg_type == DataType::Interval =>
                        {
                            DataType::Interval
                        }
                        AggregateFunction::Avg if arg_type.is_float() => DataType::Float8,
                        AggregateFunction::Sum | AggregateFunction::Avg
                            if arg_type.is_numeric() =>
                        {
                            DataType::Numeric(None)
                        }
                        // Enums and arrays compare by their sort keys: the input whose key
                        // is least (greatest) is the result (`exec::aggregate`).
                        AggregateFunction::Min | AggregateFunction::Max
                            if arg_type.needs_order_key() =>
                        {
                            // The key of the input value, evaluated on it (column 0), not
                            // on the row: the argument is evaluated once.
                            let key = self.order_key(Expr::Column(0), arg_type)?;
                            return Ok(AggregateCall {
                                function: aggregate,
                                arg: Some(arg),
                                data_type: arg_type,
                                distinct,
                                filter: None,
                                order_by: vec![crate::plan::SortKey {
                                    expr: key,
                                    descending: false,
                                    nulls_first: false,
                                }],
                            });
                        }
                        AggregateFunction::Min | AggregateFunction::Max => arg_type,
                        // Arrays are text in the array text form, typed for drivers.
                        AggregateFunction::ArrayAgg => arg_type.array_of(),
                        _ => {
                            return Err(SqlError::new(
                                sqlstate::UNDEFINED_FUNCTION,
                                format!("function {}({arg_type}) does not exist", function.name),
                            ))
                        }
                    };
                    Ok(AggregateCall {
                        function: aggregate,
                        arg: Some(arg),
                        data_type,
                        distinct,
                        filter: None,
                        order_by: Vec::new(),
                    })
                })
            }
            _ => Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {function} does not exist"),
            )),
        };
        // FILTER and ORDER BY read the input rows, as the argument does.
        let call = call.and_then(|mut call| {
            if let Some(filter) = &function.filter {
                call.filter = Some(self.bind_typed(filter, DataType::Bool)?);
            }
            let order_sensitive = matches!(
                call.function,
                AggregateFunction::ArrayAgg
                    | AggregateFunction::StringAgg
                    | AggregateFunction::JsonAgg { .. }
            );
            if let ast::FunctionArguments::List(list) = &function.args {
                for clause in &list.clauses {
                    if let ast::FunctionArgumentClause::OrderBy(order) = clause {
                        let keys = self.bind_sort_keys(order)?;
                        if order_sensitive {
                            call.order_by = keys;
                        }
                    }
                }
            }
            Ok(call)
        });
        let call = match call {
            Ok(call) => call,
            Err(error) => {
                self.grouping = Some(grouping);
                return Err(error);
            }
        };
        let data_type = call.data_type;
        let position = grouping.group_by.len() + grouping.aggregates.len();
        grouping.aggregates.push(call);
        self.grouping = Some(grouping);
        Ok((Expr::Column(position), data_type))
    }
}

/// `left op right` as an AST node (BETWEEN and IN are bound as such comparisons).
fn compare(left: &ast::Expr, op: ast::BinaryOperator, right: &ast::Expr) -> ast::Expr {
    ast::Expr::BinaryOp {
        left: Box::new(left.clone()),
        op,
        right: Box::new(right.clone()),
    }
}

fn and(left: ast::Expr, right: ast::Expr) -> ast::Expr {
    ast::Expr::BinaryOp {
        left: Box::new(left),
        op: ast::BinaryOperator::And,
        right: Box::new(right),
    }
}

pub(super) fn binary(op: BinaryOp, left: Expr, right: Expr, data_type: DataType) -> Expr {
    Expr::Binary {
        op,
        left: Box::new(left),
        right: Box::new(right),
        data_type,
    }
}

/// Literals and parameters that take their type from the other operand.
pub(super) fn untyped(expr: &ast::Expr) -> bool {
    match expr {
        ast::Expr::Value(value) => matches!(
            value.value,
            ast::Value::SingleQuotedString(_) | ast::Value::Null | ast::Value::Placeholder(_)
        ),
        ast::Expr::Nested(inner) => untyped(inner),
        _ => false,
    }
}

pub(super) fn result_type(op: BinaryOp, left: DataType, right: DataType) -> SqlResult<DataType> {
    let known = |t: DataType| {
        if t == DataType::Unknown {
            None
        } else {
            Some(t)
        }
    };
    let undefined = |l: DataType, r: DataType| {
        SqlError::new(
            sqlstate::UNDEFINED_FUNCTION,
            format!("operator does not exist: {l} {} {r}", operator_symbol(op)),
        )
    };
    if op.is_comparison() {
        if let (Some(l), Some(r)) = (known(left), known(right)) {
            let comparable = (l.is_numeric() && r.is_numeric())
                || (l.is_text() && r.is_text())
                || (l.is_datetime() && r.is_datetime())
                || l == r;
            if !comparable {
                return Err(undefined(l, r));
            }
        }
        return Ok(DataType::Bool);
    }
    if op == BinaryOp::Concat {
        return Ok(DataType::Text);
    }
    let (l, r) = (known(left).unwrap_or(right), known(right).unwrap_or(left));
    if matches!(op, BinaryOp::BitAnd | BinaryOp::BitOr) {
        return match (l.is_integer(), r.is_integer()) {
            (true, true) => Ok(l.wider_integer(r)),
            _ => Err(undefined(l, r)),
        };
    }
    if let Some(common) = l.common_numeric(r) {
        return Ok(common);
    }
    match (op, l, r) {
        (BinaryOp::Add, DataType::Date, t) | (BinaryOp::Add, t, DataType::Date)
            if t.is_integer() =>
        {
            Ok(DataType::Date)
        }
        (BinaryOp::Subtract, DataType::Date, t) if t.is_integer() => Ok(DataType::Date),
        (BinaryOp::Subtract, DataType::Date, DataType::Date) => Ok(DataType::Int4),
        (BinaryOp::Add | BinaryOp::Subtract, DataType::Interval, DataType::Interval) => {
            Ok(DataType::Interval)
        }
        (BinaryOp::Add, DataType::Interval, t) if t.is_datetime() => Ok(timestamp_of(t)),
        (BinaryOp::Add | BinaryOp::Subtract, t, DataType::Interval) if t.is_datetime() => {
            Ok(timestamp_of(t))
        }
        (BinaryOp::Subtract, a, b)
            if matches!(a, DataType::Timestamp | DataType::TimestampTz)
                && matches!(b, DataType::Timestamp | DataType::TimestampTz) =>
        {
            Ok(DataType::Interval)
        }
        (BinaryOp::Multiply, DataType::Interval, n)
        | (BinaryOp::Multiply, n, DataType::Interval)
            if n.is_numeric() =>
        {
            Ok(DataType::Interval)
        }
        (BinaryOp::Divide, DataType::Interval, n) if n.is_numeric() => Ok(DataType::Interval),
        (_, DataType::Unknown, DataType::Unknown) => Ok(DataType::Unknown),
        _ => Err(undefined(l, r)),
    }
}

/// The type of a date or timestamp plus an interval: a date becomes a timestamp.
fn timestamp_of(data_type: DataType) -> DataType {
    match data_type {
        DataType::Date => DataType::Timestamp,
        other => other,
    }
}

fn operator_symbol(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "+",
        BinaryOp::Subtract => "-",
        BinaryOp::Multiply => "*",
        BinaryOp::Divide => "/",
        BinaryOp::Modulo => "%",
        BinaryOp::BitAnd => "&",
        BinaryOp::BitOr => "|",
        BinaryOp::Concat => "||",
        BinaryOp::Equal => "=",
        BinaryOp::NotEqual => "<>",
        BinaryOp::Less => "<",
        BinaryOp::LessOrEqual => "<=",
        BinaryOp::Greater => ">",
        BinaryOp::GreaterOrEqual => ">=",
        _ => "?",
    }
}

/// A whole-row value (`json_agg(t)`'s input: `Binder::whole_row`).
fn is_row_object(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Function {
            function: crate::plan::expr::ScalarFunction::Json {
                function: crate::plan::expr::JsonFunction::RowObject,
                ..
            },
            ..
        }
    )
}

//! Binding window function calls (`row_number() OVER (...)`, rank, dense_rank).
//!
//! While a SELECT list or its ORDER BY is bound, `Binder::windows` collects the calls; each
//! call is bound to a placeholder column `WINDOW_BASE + k`. Once the rows below the Window
//! operator are known (after grouping), `place_windows` moves the placeholders to the
//! columns the Window operator appends.

use sqlparser::ast;

use super::expr::{aggregate_function, function_args, function_name, FunctionArg};
use super::Binder;
use crate::catalog::Catalog;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::Expr;
use crate::plan::{SortKey, WindowCall, WindowFunction};
use crate::system::functions::Function;
use crate::types::DataType;
use crate::types::Value;

const WINDOWING_ERROR: &str = "42P20";

/// Placeholder columns of window calls start here (no row is that wide).
const WINDOW_BASE: usize = 1 << 40;

/// Placeholder columns of set-returning calls of a SELECT list start here.
pub(super) const SET_CALL_BASE: usize = 1 << 41;

/// Moves the placeholder columns of window calls onto `base + k`.
pub(super) fn place_windows(expr: &mut Expr, base: usize) {
    place(expr, WINDOW_BASE, SET_CALL_BASE, base);
}

/// Moves the placeholder columns of set-returning calls onto `base + k`.
pub(super) fn place_set_calls(expr: &mut Expr, base: usize) {
    place(expr, SET_CALL_BASE, usize::MAX, base);
}

/// Moves placeholders in `from..to` onto `base + k`.
fn place(expr: &mut Expr, from: usize, to: usize, base: usize) {
    if let Expr::Column(index) = expr {
        if (from..to).contains(index) {
            *index = base + (*index - from);
        }
    }
    for child in expr.children_mut() {
        place(child, from, to, base);
    }
}

/// The catalog's integer array columns (int2vector, int2[]): unnest gives integers.
const INTEGER_ARRAYS: &[&str] = &[
    "indkey",
    "indoption",
    "indclass",
    "indcollation",
    "conkey",
    "confkey",
    "stxkeys",
    "partattrs",
];

/// The element type of a cast to an integer array (`'{1,2}'::oid[]`, `int4[]`), if the
/// expression is one.
fn integer_array_cast(expr: &ast::Expr) -> Option<DataType> {
    let ast::Expr::Cast { data_type, .. } = expr else {
        return None;
    };
    let element = match data_type {
        ast::DataType::Array(ast::ArrayElemTypeDef::SquareBracket(element, _))
        | ast::DataType::Array(ast::ArrayElemTypeDef::AngleBracket(element)) => element,
        _ => return None,
    };
    let name = element.to_string().to_lowercase();
    match name.trim_start_matches("pg_catalog.") {
        "smallint" | "int2" => Some(DataType::Int2),
        "int" | "integer" | "int4" => Some(DataType::Int4),
        "bigint" | "int8" | "oid" | "regclass" => Some(DataType::Int8),
        _ => None,
    }
}

impl Binder<'_> {
    /// unnest, generate_subscripts, generate_series and the json(b) set functions
    /// (`plan::JSON_SET_FUNCTIONS`) in a SELECT list: bound to a
    /// placeholder column the ProjectSet operator fills.
    pub(super) fn bind_set_call(
        &mut self,
        name: &str,
        args: &[ast::Expr],
    ) -> SqlResult<(Expr, DataType)> {
        // generate_subscripts' dimension is always 1 here: one-dimensional arrays only.
        let arity = match name {
            "unnest" | "unnest_integers" | "_pg_expandarray" => 1..=1,
            name if crate::plan::JSON_SET_FUNCTIONS.contains(&name) => 1..=1,
            "generate_subscripts" => 1..=2,
            _ => 2..=3,
        };
        if !arity.contains(&args.len()) {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!(
                    "function {name} with {} arguments does not exist",
                    args.len()
                ),
            ));
        }
        let Some(mut calls) = self.set_calls.take() else {
            return Err(SqlError::unsupported(format!(
                "{name}() outside a SELECT list"
            )));
        };
        let bound: SqlResult<Vec<(Expr, DataType)>> = args
            .iter()
            .take(if name == "generate_subscripts" { 1 } else { 3 })
            .map(|arg| {
                let expected = (name == "generate_series").then_some(DataType::Int8);
                self.bind_expr(arg, expected)
            })
            .collect();
        let bound = match bound {
            Ok(bound) => bound,
            Err(error) => {
                self.set_calls = Some(calls);
                return Err(error);
            }
        };
        let (function, data_type) = match name {
            "unnest" => {
                let column = match &args[0] {
                    ast::Expr::Identifier(ident) => Some(ident.value.to_lowercase()),
                    ast::Expr::CompoundIdentifier(parts) => {
                        parts.last().map(|ident| ident.value.to_lowercase())
                    }
                    _ => None,
                };
                let cast = integer_array_cast(&args[0]);
                let integers =
                    cast.is_some() || column.is_some_and(|c| INTEGER_ARRAYS.contains(&c.as_str()));
                let data_type = match cast {
                    Some(element) => element,
                    None if integers => DataType::Int2,
                    None => DataType::Text,
                };
                (crate::plan::SetFunction::Unnest { integers }, data_type)
            }
            "unnest_integers" => (
                crate::plan::SetFunction::Unnest { integers: true },
                DataType::Int2,
            ),
            "_pg_expandarray" => (crate::plan::SetFunction::ExpandArray, DataType::Text),
            "generate_subscripts" => (crate::plan::SetFunction::Subscripts, DataType::Int4),
            "jsonb_array_elements" | "json_array_elements" => {
                let binary = name.starts_with("jsonb");
                let data_type = if binary {
                    DataType::Jsonb
                } else {
                    DataType::Json
                };
                let function = crate::plan::SetFunction::JsonElements {
                    text: false,
                    binary,
                };
                (function, data_type)
            }
            "jsonb_array_elements_text" | "json_array_elements_text" => {
                let function = crate::plan::SetFunction::JsonElements {
                    text: true,
                    binary: name.starts_with("jsonb"),
                };
                (function, DataType::Text)
            }
            "jsonb_each" | "json_each" | "jsonb_each_text" | "json_each_text" => {
                let function = crate::plan::SetFunction::JsonEach {
                    text: name.ends_with("_text"),
                    binary: name.starts_with("jsonb"),
                };
                (function, DataType::Text)
            }
            "jsonb_object_keys" | "json_object_keys" => {
                let binary = name.starts_with("jsonb");
                (
                    crate::plan::SetFunction::JsonKeys { binary },
                    DataType::Text,
                )
            }
            _ => {
                let data_type = bound.iter().fold(DataType::Int4, |wide, (_, t)| {
                    if t.is_integer() {
                        wide.wider_integer(*t)
                    } else {
                        DataType::Int8
                    }
                });
                (crate::plan::SetFunction::Series, data_type)
            }
        };
        let position = SET_CALL_BASE + calls.len();
        calls.push(crate::plan::SetCall {
            function,
            args: bound.into_iter().map(|(expr, _)| expr).collect(),
        });
        self.set_calls = Some(calls);
        Ok((Expr::Column(position), data_type))
    }
}

impl Binder<'_> {
    pub(super) fn bind_window(&mut self, function: &ast::Function) -> SqlResult<(Expr, DataType)> {
        let name = function_name(function);
        let window_function = match name.as_str() {
            "row_number" => WindowFunction::RowNumber,
            "rank" => WindowFunction::Rank,
            "dense_rank" => WindowFunction::DenseRank,
            other if aggregate_function(other).is_some() => {
                return Err(SqlError::unsupported(format!(
                    "{other}() as a window function"
                )))
            }
            other => {
                return Err(SqlError::unsupported(format!(
                    "the window function {other}()"
                )))
            }
        };
        if !function_args(function).is_empty() {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {name} with arguments does not exist"),
            ));
        }
        let Some(ast::WindowType::WindowSpec(spec)) = &function.over else {
            return Err(SqlError::unsupported("named windows"));
        };
        if spec.window_frame.is_some() || spec.window_name.is_some() {
            return Err(SqlError::unsupported("window frames and named windows"));
        }
        // Taken while the call's own expressions bind: a window call inside one is an error.
        let Some(mut calls) = self.windows.take() else {
            return Err(SqlError::new(
                WINDOWING_ERROR,
                "window functions are not allowed here",
            ));
        };
        let bound = self.bind_window_spec(spec);
        let (partition_by, order_by) = match bound {
            Ok(bound) => bound,
            Err(error) => {
                self.windows = Some(calls);
                return Err(error);
            }
        };
        let position = WINDOW_BASE + calls.len();
        calls.push(WindowCall {
            function: window_function,
            partition_by,
            order_by,
        });
        self.windows = Some(calls);
        Ok((Expr::Column(position), DataType::Int8))
    }

    fn bind_window_spec(&mut self, spec: &ast::WindowSpec) -> SqlResult<(Vec<Expr>, Vec<SortKey>)> {
        let mut partition_by = Vec::with_capacity(spec.partition_by.len());
        for expr in &spec.partition_by {
            partition_by.push(self.bind_expr(expr, None)?.0);
        }
        Ok((partition_by, self.bind_sort_keys(&spec.order_by)?))
    }

    /// The keys of a window's or an aggregate's ORDER BY (NULLs last ascending, first
    /// descending, unless NULLS FIRST/LAST says otherwise).
    pub(super) fn bind_sort_keys(
        &mut self,
        orders: &[ast::OrderByExpr],
    ) -> SqlResult<Vec<SortKey>> {
        let mut keys = Vec::with_capacity(orders.len());
        for order in orders {
            let descending = matches!(order.options.sort, Some(ast::OrderBySort::Desc));
            let (expr, data_type) = self.bind_expr(&order.expr, None)?;
            keys.push(SortKey {
                expr: self.order_key(expr, data_type)?,
                descending,
                nulls_first: order.options.nulls_first.unwrap_or(descending),
            });
        }
        Ok(keys)
    }
}

impl Binder<'_> {
    /// `(record).x` / `(record).n`: the fields of information_schema._pg_expandarray's records
    /// (pgJDBC's getPrimaryKeys and getIndexInfo). On a call of the function in a SELECT list
    /// they are the set-returning calls unnest (x) and generate_subscripts (n), which run side
    /// by side as PostgreSQL's do; on a value (a derived table's column of those records) they
    /// read the record's text `(x,n)`.
    pub(super) fn bind_record_field(
        &mut self,
        catalog: &Catalog,
        root: &ast::Expr,
        dots: &[ast::AccessExpr],
        expr: &ast::Expr,
    ) -> SqlResult<(Expr, DataType)> {
        let field = match dots {
            [ast::AccessExpr::Dot(ast::Expr::Identifier(ident))] => ident.value.to_lowercase(),
            _ => return Err(SqlError::unsupported(format!("the expression {expr}"))),
        };
        let position = match field.as_str() {
            "x" => 1,
            "n" => 2,
            _ => {
                return Err(SqlError::unsupported(format!(
                    "the field {field} of a record"
                )))
            }
        };
        let mut inner = root;
        while let ast::Expr::Nested(nested) = inner {
            inner = nested;
        }
        if let ast::Expr::Function(function) = inner {
            if function_name(function) == "_pg_expandarray" {
                let args: Vec<ast::Expr> = function_args(function)
                    .into_iter()
                    .filter_map(|arg| match arg {
                        FunctionArg::Expr(e) => Some(e.clone()),
                        _ => None,
                    })
                    .collect();
                let name = if position == 1 {
                    "unnest_integers"
                } else {
                    "generate_subscripts"
                };
                return self.bind_set_call(name, &args);
            }
        }
        let (record, _) = self.bind_expr(root, None)?;
        let field = super::system::call(
            Function::Subscript,
            vec![record, Expr::Literal(Value::Int(position))],
            catalog,
        );
        Ok((
            Expr::Cast {
                expr: Box::new(field),
                to: DataType::Int4,
            },
            DataType::Int4,
        ))
    }
}

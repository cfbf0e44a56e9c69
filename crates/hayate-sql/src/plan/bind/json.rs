//! Binding of the json/jsonb operators (`->`, `->>`, `#>`, `#>>`, `@>`, `<@`, `?`, `?|`,
//! `?&`, jsonb `||` and `-`) and functions (`plan::expr::json` evaluates them).

use sqlparser::ast;

use super::expr::untyped;
use super::Binder;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::{Expr, JsonFunction, ScalarFunction};
use crate::types::{DataType, Value};

fn call(function: JsonFunction, binary: bool, args: Vec<Expr>) -> Expr {
    Expr::Function {
        function: ScalarFunction::Json { function, binary },
        args,
    }
}

fn is_json(data_type: DataType) -> bool {
    matches!(data_type, DataType::Json | DataType::Jsonb)
}

fn undefined(what: String) -> SqlError {
    SqlError::new(sqlstate::UNDEFINED_FUNCTION, what)
}

impl Binder<'_> {
    /// A document operand: json or jsonb (an untyped literal or parameter is `default`).
    fn bind_document(
        &mut self,
        expr: &ast::Expr,
        default: DataType,
        what: &str,
    ) -> SqlResult<(Expr, DataType)> {
        let (bound, data_type) = self.bind_expr(expr, Some(default))?;
        if untyped(expr) || data_type == DataType::Unknown {
            return Ok((self.coerce(bound, DataType::Unknown, default)?, default));
        }
        if !is_json(data_type) {
            return Err(undefined(format!(
                "operator does not exist: {data_type} {what}"
            )));
        }
        Ok((bound, data_type))
    }

    /// The json operators; None for another operator.
    pub(super) fn bind_json_operator(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
    ) -> SqlResult<Option<(Expr, DataType)>> {
        use ast::BinaryOperator as B;
        use JsonFunction as J;
        let symbol = op.to_string();
        let (function, jsonb_only) = match op {
            B::Arrow => (J::Field { text: false }, false),
            B::LongArrow => (J::Field { text: true }, false),
            B::HashArrow => (
                J::Path {
                    text: false,
                    variadic: false,
                },
                false,
            ),
            B::HashLongArrow => (
                J::Path {
                    text: true,
                    variadic: false,
                },
                false,
            ),
            B::AtArrow | B::ArrowAt => (J::Contains, true),
            B::Question => (J::HasKey, true),
            B::QuestionPipe => (J::HasKeys { all: false }, true),
            B::QuestionAnd => (J::HasKeys { all: true }, true),
            _ => return Ok(None),
        };
        let (left, right) = match op {
            B::ArrowAt => (right, left),
            _ => (left, right),
        };
        let (doc, doc_type) = self.bind_document(left, DataType::Jsonb, &symbol)?;
        if jsonb_only && doc_type != DataType::Jsonb {
            return Err(undefined(format!(
                "operator does not exist: {doc_type} {symbol}"
            )));
        }
        let key = match function {
            J::Field { .. } => {
                let (bound, key_type) = self.bind_expr(right, None)?;
                if key_type.is_integer() {
                    bound
                } else {
                    self.coerce(bound, key_type, DataType::Text)?
                }
            }
            J::Contains => self.bind_document(right, DataType::Jsonb, &symbol)?.0,
            _ => self.bind_as(right, DataType::Text)?,
        };
        let result = match function {
            J::Field { text: true } | J::Path { text: true, .. } => DataType::Text,
            J::Field { .. } | J::Path { .. } => doc_type,
            _ => DataType::Bool,
        };
        let binary = doc_type == DataType::Jsonb;
        Ok(Some((call(function, binary, vec![doc, key]), result)))
    }

    /// jsonb `||` (`concat`) and `-` with a bound jsonb left operand.
    pub(super) fn bind_jsonb_edit(
        &mut self,
        concat: bool,
        left: Expr,
        right: &ast::Expr,
    ) -> SqlResult<(Expr, DataType)> {
        let right = if concat {
            self.bind_document(right, DataType::Jsonb, "||")?.0
        } else {
            let (bound, key_type) = self.bind_expr(right, None)?;
            if key_type.is_integer() {
                bound
            } else {
                self.coerce(bound, key_type, DataType::Text)?
            }
        };
        let function = if concat {
            JsonFunction::Concat
        } else {
            JsonFunction::Remove
        };
        Ok((call(function, true, vec![left, right]), DataType::Jsonb))
    }

    /// A value that becomes part of a document: json as it is (with its type), anything
    /// else through to_json (typed jsonb).
    pub(super) fn bind_json_part(&mut self, expr: &ast::Expr) -> SqlResult<(Expr, DataType)> {
        if let ast::Expr::Identifier(ident) = expr {
            if let Some(row) = self.whole_row(&super::ident_name(ident))? {
                return Ok(row);
            }
        }
        let (bound, data_type) = self.bind_expr(expr, None)?;
        if is_json(data_type) {
            return Ok((bound, data_type));
        }
        let bound = match data_type {
            DataType::Unknown => self.coerce(bound, data_type, DataType::Text)?,
            _ => bound,
        };
        let converted = call(JsonFunction::ToJson, true, vec![bound]);
        Ok((converted, DataType::Jsonb))
    }

    /// A table's name (or alias) used as a value where JSON is built from it (`to_json(t)`,
    /// `row_to_json(t)`, `json_agg(t)`): the object of its row's columns; None if `name` is
    /// a column (which wins, as in PostgreSQL) or names no table of this query level.
    fn whole_row(&mut self, name: &str) -> SqlResult<Option<(Expr, DataType)>> {
        let Some(scope) = &self.scope else {
            return Ok(None);
        };
        let qualifier = [name.to_string()];
        if scope.resolve(None, name)?.is_some() || !scope.has_qualifier(&qualifier) {
            return Ok(None);
        }
        let mut args = Vec::new();
        for (position, column, data_type) in scope.expand(Some(&qualifier)) {
            args.push(Expr::Literal(Value::Text(column)));
            let value = Expr::Column(position);
            args.push(match data_type {
                DataType::Json | DataType::Jsonb => value,
                _ => call(JsonFunction::ToJson, true, vec![value]),
            });
        }
        Ok(Some((
            call(JsonFunction::RowObject, false, args),
            DataType::Json,
        )))
    }

    /// The json functions; None for a name that is not one.
    pub(super) fn bind_json_function(
        &mut self,
        name: &str,
        args: &[&ast::Expr],
    ) -> SqlResult<Option<(Expr, DataType)>> {
        use JsonFunction as J;
        let (base, binary) = match (name.strip_prefix("jsonb_"), name.strip_prefix("json_")) {
            (Some(base), _) => (base, true),
            (None, Some(base)) => (base, false),
            _ => match name {
                "to_json" | "row_to_json" => ("to", false),
                "to_jsonb" => ("to", true),
                _ => return Ok(None),
            },
        };
        let own_type = if binary {
            DataType::Jsonb
        } else {
            DataType::Json
        };
        let arity = |allowed: &[usize]| -> SqlResult<()> {
            match allowed.contains(&args.len()) {
                true => Ok(()),
                false => Err(undefined(format!(
                    "function {name} with {} arguments does not exist",
                    args.len()
                ))),
            }
        };
        let bound = match base {
            "to" => {
                arity(&[1])?;
                let (part, part_type) = self.bind_json_part(args[0])?;
                (self.coerce(part, part_type, own_type)?, own_type)
            }
            "build_object" | "build_array" => {
                let object = base == "build_object";
                if object && !args.len().is_multiple_of(2) {
                    return Err(SqlError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "argument list must have even number of elements",
                    ));
                }
                let mut bound = Vec::with_capacity(args.len());
                for (index, arg) in args.iter().enumerate() {
                    bound.push(if object && index % 2 == 0 {
                        self.bind_as(arg, DataType::Text)?
                    } else {
                        self.bind_json_part(arg)?.0
                    });
                }
                let function = if object {
                    J::BuildObject
                } else {
                    J::BuildArray
                };
                (call(function, binary, bound), own_type)
            }
            "typeof" | "array_length" | "strip_nulls" | "pretty" => {
                arity(&[1])?;
                let (doc, _) = self.bind_document(args[0], own_type, name)?;
                let (function, result) = match base {
                    "typeof" => (J::TypeOf, DataType::Text),
                    "array_length" => (J::ArrayLength, DataType::Int4),
                    "strip_nulls" => (J::StripNulls, own_type),
                    _ => (J::Pretty, DataType::Text),
                };
                (call(function, binary, vec![doc]), result)
            }
            "extract_path" | "extract_path_text" => {
                if args.is_empty() {
                    arity(&[1])?;
                }
                let (doc, _) = self.bind_document(args[0], own_type, name)?;
                let mut bound = vec![doc];
                for arg in &args[1..] {
                    bound.push(self.bind_as(arg, DataType::Text)?);
                }
                let text = base == "extract_path_text";
                let result = if text { DataType::Text } else { own_type };
                let function = J::Path {
                    text,
                    variadic: true,
                };
                (call(function, binary, bound), result)
            }
            "set" if binary => {
                arity(&[3, 4])?;
                let (doc, _) = self.bind_document(args[0], own_type, name)?;
                let mut bound = vec![doc, self.bind_as(args[1], DataType::Text)?];
                bound.push(self.bind_document(args[2], own_type, name)?.0);
                if let Some(create) = args.get(3) {
                    bound.push(self.bind_typed(create, DataType::Bool)?);
                }
                (call(J::Set, binary, bound), own_type)
            }
            _ => return Ok(None),
        };
        Ok(Some(bound))
    }
}

//! Binding the pg_catalog functions, operators and casts (`system::functions`): what the
//! rest of the binder does not handle itself comes here, one call per place.
//!
//! 1. `bind_function` binds a call by name (`pg_get_indexdef(...)`, `nextval(...)`),
//!    `bind_operator` the regex operators and `OPERATOR(pg_catalog.x)`, `bind_cast` the
//!    casts to reg* types, `oid`, `name` and arrays, `bind_other` COLLATE, `= ANY(array)`,
//!    CASE, ARRAY[...] and subscripts.
//! 2. Each binds the arguments through the `Binder` and makes an `Expr::System` holding a
//!    `SystemFunction` and the bound arguments.
//! 3. A call the binder can evaluate now (a constant 'name'::regclass) becomes a literal.

use sqlparser::ast;

use super::{ident_name, Binder};
use crate::catalog::Catalog;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::{BinaryOp, EvalContext, Expr, SystemCall};
use crate::system::functions::{Function, SystemFunction};
use crate::types::{DataType, Value};

pub(super) fn call(function: Function, args: Vec<Expr>, catalog: &Catalog) -> Expr {
    Expr::System(Box::new(SystemCall {
        function: SystemFunction::new(function, catalog),
        args,
    }))
}

fn undefined_function(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_FUNCTION,
        format!("function {name} does not exist"),
    )
}

/// Binds a call of a function the binder does not know (`args` already bound).
pub(super) fn bind_function(
    catalog: &Catalog,
    name: &str,
    args: Vec<Expr>,
    types: &[DataType],
) -> SqlResult<(Expr, DataType)> {
    use Function as F;
    // The argument's type is known now: its name is a constant (PostgreSQL's regtype prints
    // as this name; the argument is not evaluated).
    if name == "pg_typeof" && types.len() == 1 {
        let name = match types[0] {
            DataType::Enum(oid) => catalog.enum_type_by_oid(oid).map(|t| t.name.clone()),
            other => Some(other.name().to_string()),
        };
        return Ok((
            Expr::Literal(Value::Text(name.unwrap_or_default())),
            DataType::Text,
        ));
    }
    let (function, data_type, arity): (Function, DataType, &[usize]) = match name {
        "pg_table_is_visible" => (F::TableIsVisible, DataType::Bool, &[1]),
        "pg_type_is_visible" => (F::TypeIsVisible, DataType::Bool, &[1]),
        "pg_get_userbyid" => (F::GetUserById, DataType::Text, &[1]),
        "format_type" => (F::FormatType, DataType::Text, &[2]),
        "pg_get_expr" => (F::GetExpr, DataType::Text, &[2, 3]),
        "pg_get_indexdef" => (F::GetIndexDef, DataType::Text, &[1, 3]),
        "pg_get_constraintdef" => (F::GetConstraintDef, DataType::Text, &[1, 2]),
        "obj_description" | "shobj_description" => (F::Null, DataType::Text, &[1, 2]),
        // No privileges are kept: every object has the default ones, shown as NULL.
        "acldefault" => (F::Null, DataType::Text, &[2]),
        "col_description" => (F::Null, DataType::Text, &[2]),
        "pg_get_statisticsobjdef_columns" | "pg_get_partkeydef" | "pg_get_triggerdef" => {
            (F::Null, DataType::Text, &[1, 2])
        }
        "pg_get_viewdef" => (F::GetViewDef, DataType::Text, &[1, 2]),
        "pg_get_serial_sequence" => (F::SerialSequence, DataType::Text, &[2]),
        "current_schemas" => (F::CurrentSchemas, DataType::Text, &[1]),
        "has_table_privilege"
        | "has_schema_privilege"
        | "has_database_privilege"
        | "has_any_column_privilege"
        | "pg_has_role" => (F::True, DataType::Bool, &[2, 3]),
        "has_column_privilege" => (F::True, DataType::Bool, &[3, 4]),
        "array_position" => (F::ArrayPosition, DataType::Int4, &[2]),
        "array_remove" => (F::ArrayRemove, DataType::Text, &[2]),
        "array_append" => (F::ArrayAppend, DataType::Text, &[2]),
        "array_prepend" => (F::ArrayPrepend, DataType::Text, &[2]),
        "array_cat" => (F::ArrayCat, DataType::Text, &[2]),
        "array_to_string" => (F::ArrayToString, DataType::Text, &[2, 3]),
        "array_upper" | "array_length" => (F::ArrayUpper, DataType::Int4, &[2]),
        "array_lower" => (F::ArrayLower, DataType::Int4, &[2]),
        "cardinality" => (F::Cardinality, DataType::Int4, &[1]),
        "pg_encoding_to_char" => (F::EncodingToChar, DataType::Text, &[1]),
        "to_regtype" => (F::ToRegType, DataType::Int8, &[1]),
        "to_regclass" => (F::ToRegClass, DataType::Int8, &[1]),
        // A set-returning function in PostgreSQL; no table is a partition here, so its one
        // row is the relation itself (psql's \d asks for the tables referencing a table).
        "pg_partition_ancestors" => (F::RegClassOid, DataType::Int8, &[1]),
        "pg_relation_is_publishable" => (F::RelationIsPublishable, DataType::Bool, &[1]),
        "pg_is_in_recovery" => (F::IsInRecovery, DataType::Bool, &[0]),
        "pg_cancel_backend" => (
            F::SignalBackend(crate::catalog::activity::BackendSignal::Cancel),
            DataType::Bool,
            &[1],
        ),
        "pg_terminate_backend" => (
            F::SignalBackend(crate::catalog::activity::BackendSignal::Terminate),
            DataType::Bool,
            &[1, 2],
        ),
        "nextval" => (F::NextVal, DataType::Int8, &[1]),
        "currval" => (F::CurrVal, DataType::Int8, &[1]),
        "setval" => (F::SetVal, DataType::Int8, &[2, 3]),
        "pg_sequence_last_value" => (F::SequenceLastValue, DataType::Int8, &[1]),
        // Internal: the `last_value` column of a sequence read as a relation (from.rs).
        "hayate_sequence_shown_value" => (F::SequenceShownValue, DataType::Int8, &[1]),
        "lastval" => (F::LastVal, DataType::Int8, &[0]),
        "_pg_expandarray" => {
            return Err(SqlError::unsupported(
                "information_schema._pg_expandarray (a set-returning function of records)",
            ))
        }
        _ => return Err(undefined_function(name)),
    };
    if !arity.contains(&args.len()) {
        return Err(SqlError::new(
            sqlstate::UNDEFINED_FUNCTION,
            format!(
                "function {name} with {} arguments does not exist",
                types.len()
            ),
        ));
    }
    if matches!(
        function,
        F::NextVal | F::CurrVal | F::SetVal | F::SequenceLastValue | F::SequenceShownValue
    ) {
        return Ok((
            bind_sequence_call(function, args, types, catalog)?,
            data_type,
        ));
    }
    // An array built from an array has its type (text in the array form otherwise).
    let array_argument = match function {
        F::ArrayRemove | F::ArrayAppend | F::ArrayCat => types.first(),
        F::ArrayPrepend => types.get(1),
        _ => None,
    };
    let array_type = match (function, types) {
        // Two integer arrays: the wider one's type, as PostgreSQL resolves anyarray.
        (F::ArrayCat, &[DataType::Int8Array, _] | &[_, DataType::Int8Array]) => {
            Some(DataType::Int8Array)
        }
        _ => array_argument.copied().filter(|t| t.is_array()),
    };
    match array_type {
        // Cast to it: elements checked and canonical ('05' is 5), as stored arrays are.
        Some(array_type) => Ok((
            Expr::Cast {
                expr: Box::new(call(function, args, catalog)),
                to: array_type,
            },
            array_type,
        )),
        None => Ok((call(function, args, catalog), data_type)),
    }
}

/// A sequence function: a constant sequence argument is looked up now
/// (`SystemFunction::sequence_call`); the other arguments are cast to bigint and bool.
fn bind_sequence_call(
    function: Function,
    mut args: Vec<Expr>,
    types: &[DataType],
    catalog: &Catalog,
) -> SqlResult<Expr> {
    let constant = match &args[0] {
        Expr::Literal(argument) => Some(argument),
        _ => None,
    };
    let function = SystemFunction::sequence_call(function, constant, catalog)?;
    for (position, target) in [(1, DataType::Int8), (2, DataType::Bool)] {
        if let (Some(arg), Some(from)) = (args.get_mut(position), types.get(position)) {
            if *from != target {
                let inner = std::mem::replace(arg, Expr::Literal(Value::Null));
                *arg = match inner {
                    Expr::Literal(value) => Expr::Literal(value.cast(target)?),
                    other => Expr::Cast {
                        expr: Box::new(other),
                        to: target,
                    },
                };
            }
        }
    }
    Ok(Expr::System(Box::new(SystemCall { function, args })))
}

/// Binds the operators the binder does not know: the regex matches (`~`, `!~`, `~*`, `!~*`,
/// also as `OPERATOR(pg_catalog.~)`).
pub(super) fn bind_operator(
    binder: &mut Binder,
    catalog: &Catalog,
    left: &ast::Expr,
    op: &ast::BinaryOperator,
    right: &ast::Expr,
) -> SqlResult<(Expr, DataType)> {
    use ast::BinaryOperator as B;
    let symbol = match op {
        B::PGRegexMatch => "~".to_string(),
        B::PGRegexIMatch => "~*".to_string(),
        B::PGRegexNotMatch => "!~".to_string(),
        B::PGRegexNotIMatch => "!~*".to_string(),
        B::PGCustomBinaryOperator(parts) => match parts.as_slice() {
            [symbol] => symbol.clone(),
            [schema, symbol] if schema == "pg_catalog" => symbol.clone(),
            _ => return Err(SqlError::unsupported(format!("operator {op}"))),
        },
        other => return Err(SqlError::unsupported(format!("operator {other}"))),
    };
    let (negated, insensitive) = match symbol.as_str() {
        "~" => (false, false),
        "~*" => (false, true),
        "!~" => (true, false),
        "!~*" => (true, true),
        other => {
            // OPERATOR(pg_catalog.=) and the like: the ordinary operator.
            let op = match other {
                "=" => B::Eq,
                "<>" => B::NotEq,
                "<" => B::Lt,
                "<=" => B::LtEq,
                ">" => B::Gt,
                ">=" => B::GtEq,
                "+" => B::Plus,
                "-" => B::Minus,
                "||" => B::StringConcat,
                _ => return Err(SqlError::unsupported(format!("operator {op}"))),
            };
            return binder.bind_expr(
                &ast::Expr::BinaryOp {
                    left: Box::new(left.clone()),
                    op,
                    right: Box::new(right.clone()),
                },
                None,
            );
        }
    };
    let text = binder.bind_typed(left, DataType::Text)?;
    let pattern = binder.bind_typed(right, DataType::Text)?;
    let constant = match &pattern {
        Expr::Literal(Value::Text(pattern)) => Some(pattern.as_str()),
        _ => None,
    };
    let function = SystemFunction::regex_match(negated, insensitive, constant, catalog)?;
    let expr = Expr::System(Box::new(SystemCall {
        function,
        args: vec![text, pattern],
    }));
    Ok((expr, DataType::Bool))
}

/// The cast targets handled here: the reg* types, `oid`, `name`, `"char"`, arrays and
/// `pg_catalog.`-qualified names.
pub(super) fn is_system_type(target: &ast::DataType) -> bool {
    matches!(
        target,
        ast::DataType::Custom(..) | ast::DataType::Array(_) | ast::DataType::Regclass
    )
}

fn custom_type_name(target: &ast::DataType) -> String {
    match target {
        ast::DataType::Regclass => "regclass".into(),
        ast::DataType::Array(_) => "array".into(),
        ast::DataType::Custom(name, _) => {
            let parts: Vec<String> = name
                .0
                .iter()
                .filter_map(|part| part.as_ident().map(ident_name))
                .collect();
            match parts.as_slice() {
                [schema, name] if schema == "pg_catalog" => name.clone(),
                _ => parts.join("."),
            }
        }
        other => other.to_string().to_lowercase(),
    }
}

/// Binds `inner::target` for a target `is_system_type` accepts.
pub(super) fn bind_cast(
    binder: &mut Binder,
    catalog: &Catalog,
    inner: &ast::Expr,
    target: &ast::DataType,
) -> SqlResult<(Expr, DataType)> {
    // An array type a column can have: typed, so that it orders as an array.
    if let ast::DataType::Array(_) = target {
        if let Ok(array_type) = super::data_type(target) {
            return binder.bind_cast(inner, array_type);
        }
    }
    let name = custom_type_name(target);
    let plain = |binder: &mut Binder, to: DataType| -> SqlResult<(Expr, DataType)> {
        let (bound, _) = binder.bind_expr(inner, Some(to))?;
        Ok(match bound {
            Expr::Literal(value) => (Expr::Literal(value.cast(to)?), to),
            other => (
                Expr::Cast {
                    expr: Box::new(other),
                    to,
                },
                to,
            ),
        })
    };
    match name.as_str() {
        "oid" | "int8" | "regoper" | "xid" => plain(binder, DataType::Int8),
        "int4" => plain(binder, DataType::Int4),
        "int2" => plain(binder, DataType::Int2),
        "bool" => plain(binder, DataType::Bool),
        "float8" => plain(binder, DataType::Float8),
        // Arrays are text in the array text form.
        "name" | "char" | "text" | "varchar" | "array" | "pg_node_tree" => {
            plain(binder, DataType::Text)
        }
        "regclass" | "regtype" | "regnamespace" | "regproc" | "regprocedure" => {
            let (bound, data_type) = binder.bind_expr(inner, Some(DataType::Text))?;
            let by_oid = data_type.is_integer();
            let (function, result) = match (name.as_str(), by_oid) {
                ("regclass", true) => (Function::RegClassName, DataType::Text),
                ("regtype", true) => (Function::RegTypeName, DataType::Text),
                ("regnamespace", true) => (Function::RegNamespaceName, DataType::Text),
                ("regclass", false) => (Function::RegClassOid, DataType::Int8),
                ("regtype", false) => (Function::RegTypeOid, DataType::Int8),
                ("regnamespace", false) => (Function::RegNamespaceOid, DataType::Int8),
                (_, false) => (Function::RegProcName, DataType::Text),
                (_, true) => return Ok((bound, DataType::Int8)),
            };
            let literal = matches!(bound, Expr::Literal(_));
            let expr = call(function, vec![bound], catalog);
            // A literal name is looked up now, as PostgreSQL does ('nope'::regclass fails
            // when the statement is bound); a parameter or an outer column is looked up when
            // the statement runs.
            if literal {
                let value = expr.eval(&[], &EvalContext::constant())?;
                return Ok((Expr::Literal(value), result));
            }
            Ok((expr, result))
        }
        other => match super::resolve_type(catalog, target) {
            Ok(enum_type @ DataType::Enum(_)) => binder.bind_cast(inner, enum_type),
            _ => Err(crate::catalog::enum_type::undefined_type(other)),
        },
    }
}

/// Binds the expressions the binder does not know: COLLATE (ignored), `x = ANY(array)`,
/// CASE, ARRAY[...] and subscripts.
pub(super) fn bind_other(
    binder: &mut Binder,
    catalog: &Catalog,
    expr: &ast::Expr,
    expected: Option<DataType>,
) -> SqlResult<(Expr, DataType)> {
    use ast::Expr as E;
    match expr {
        E::Collate { expr, .. } => binder.bind_expr(expr, expected),
        E::AnyOp {
            left,
            compare_op: ast::BinaryOperator::Eq,
            right,
            ..
        } => {
            let (value, _) = binder.bind_expr(left, None)?;
            let array = binder.bind_typed(right, DataType::Text)?;
            Ok((
                call(Function::AnyEqual, vec![value, array], catalog),
                DataType::Bool,
            ))
        }
        E::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            let operand = operand
                .as_ref()
                .map(|operand| binder.bind_expr(operand, None))
                .transpose()?;
            let mut args = Vec::new();
            let mut result_type = DataType::Unknown;
            let mut results = Vec::new();
            for when in conditions {
                let condition = match &operand {
                    Some((operand, operand_type)) => {
                        let (value, _) = binder.bind_expr(&when.condition, Some(*operand_type))?;
                        Expr::Binary {
                            op: BinaryOp::Equal,
                            left: Box::new(operand.clone()),
                            right: Box::new(value),
                            data_type: DataType::Bool,
                        }
                    }
                    None => binder.bind_typed(&when.condition, DataType::Bool)?,
                };
                args.push(condition);
                results.push(&when.result);
            }
            if let Some(else_result) = else_result {
                results.push(else_result);
            }
            let mut bound_results = Vec::new();
            for result in &results {
                let (bound, data_type) = binder.bind_expr(result, None)?;
                if result_type == DataType::Unknown {
                    result_type = data_type;
                }
                bound_results.push(bound);
            }
            let result_type = match result_type {
                DataType::Unknown => DataType::Text,
                other => other,
            };
            let mut bound_results = bound_results.into_iter();
            let mut case_args = Vec::new();
            for condition in args {
                case_args.push(condition);
                case_args.push(cast_to(
                    bound_results.next().expect("one per WHEN"),
                    result_type,
                )?);
            }
            let else_value = match bound_results.next() {
                Some(value) => cast_to(value, result_type)?,
                None => Expr::Literal(Value::Null),
            };
            case_args.push(else_value);
            Ok((call(Function::Case, case_args, catalog), result_type))
        }
        E::Array(ast::Array { elem, .. }) => {
            let mut args = Vec::new();
            let mut types = Vec::new();
            for element in elem {
                let (bound, data_type) = binder.bind_expr(element, None)?;
                args.push(bound);
                types.push(data_type);
            }
            // Typed for drivers when the elements agree (integers, or text).
            let known: Vec<DataType> = types
                .into_iter()
                .filter(|t| *t != DataType::Unknown)
                .collect();
            let array_type = match known.first() {
                None => DataType::TextArray,
                Some(first) if known.iter().all(|t| t.is_integer()) => known
                    .iter()
                    .fold(*first, |a, b| a.wider_integer(*b))
                    .array_of(),
                Some(_) if known.iter().all(|t| t.is_text() && !t.is_text_form_array()) => {
                    DataType::TextArray
                }
                Some(_) => DataType::Text,
            };
            Ok((call(Function::ArrayLiteral, args, catalog), array_type))
        }
        E::CompoundFieldAccess { root, access_chain } => {
            // `con.confkey[i]` parses as `con` with the chain `.confkey`, `[i]`: the leading
            // names are the column's.
            let names = access_chain
                .iter()
                .take_while(|access| matches!(access, ast::AccessExpr::Dot(_)))
                .count();
            let (dots, rest) = access_chain.split_at(names);
            let mut parts = match root.as_ref() {
                ast::Expr::Identifier(ident) => vec![ident.clone()],
                ast::Expr::CompoundIdentifier(idents) => idents.clone(),
                _ if dots.is_empty() => Vec::new(),
                // `(record).field`: the fields of _pg_expandarray's records.
                _ => return binder.bind_record_field(catalog, root, dots, expr),
            };
            for dot in dots {
                let ast::AccessExpr::Dot(ast::Expr::Identifier(ident)) = dot else {
                    return Err(SqlError::unsupported(format!("the expression {expr}")));
                };
                parts.push(ident.clone());
            }
            let [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] = rest else {
                return Err(SqlError::unsupported(format!("the expression {expr}")));
            };
            let root = match parts.len() {
                0 => root.as_ref().clone(),
                1 => ast::Expr::Identifier(parts.remove(0)),
                _ => ast::Expr::CompoundIdentifier(parts),
            };
            let (array, array_type) = binder.bind_expr(&root, Some(DataType::Text))?;
            if array_type != DataType::Int2Array && !array_type.is_text() {
                return Err(SqlError::mismatch(format!(
                    "cannot subscript type {array_type} because it is not an array"
                )));
            }
            let index = binder.bind_typed(index, DataType::Int4)?;
            let element = call(Function::Subscript, vec![array, index], catalog);
            // Arrays are carried as text; an element compared with an integer is one, as
            // the elements of int2vector / int2[] / oid[] columns are in PostgreSQL.
            let integer = match expected {
                Some(target) if target.is_integer() => Some(target),
                _ => array_type.element().filter(|element| element.is_integer()),
            };
            match integer {
                Some(target) => Ok((
                    Expr::Cast {
                        expr: Box::new(element),
                        to: target,
                    },
                    target,
                )),
                None => Ok((element, DataType::Text)),
            }
        }
        other => Err(SqlError::unsupported(format!("the expression {other}"))),
    }
}

fn cast_to(expr: Expr, to: DataType) -> SqlResult<Expr> {
    Ok(match expr {
        Expr::Literal(value) => Expr::Literal(value.cast(to)?),
        other => other,
    })
}

//! The functions, operators and casts that catalog queries use: `pg_table_is_visible`,
//! `format_type`, `pg_get_indexdef`, the regex operators, `= ANY(array)`, `'t'::regclass`,
//! CASE, COLLATE (ignored)...
//!
//! The binder calls in here only for what it does not handle itself (one call per place in
//! `plan/bind/expr.rs`), and a bound call is one `Expr::System` node evaluated by
//! `Call::eval`. Functions that need the catalog read a `Snapshot` taken at bind time.

use std::sync::Arc;

use regex::{Regex, RegexBuilder};
use sqlparser::ast;

use super::pg_types::{format_type, type_oid_by_name};
use super::{array, Snapshot, OWNER_ROLE_OID, PUBLIC_SCHEMA};
use crate::catalog::{Catalog, Sequence};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::bind::{ident_name, Binder};
use crate::plan::expr::{truth, BinaryOp, EvalContext, Expr};
use crate::types::{DataType, Value};

/// SQLSTATE of a pattern the regex engine rejects.
const INVALID_REGULAR_EXPRESSION: &str = "2201B";

/// The functions callable by name (pg_proc lists them).
pub const NAMES: &[&str] = &[
    "pg_table_is_visible",
    "pg_type_is_visible",
    "pg_get_userbyid",
    "format_type",
    "pg_get_expr",
    "pg_get_indexdef",
    "pg_get_constraintdef",
    "obj_description",
    "col_description",
    "shobj_description",
    "current_schemas",
    "has_table_privilege",
    "has_schema_privilege",
    "has_database_privilege",
    "has_column_privilege",
    "has_any_column_privilege",
    "pg_has_role",
    "array_position",
    "array_to_string",
    "array_upper",
    "array_lower",
    "array_length",
    "cardinality",
    "pg_encoding_to_char",
    "to_regtype",
    "to_regclass",
    "pg_relation_is_publishable",
    "pg_get_statisticsobjdef_columns",
    "pg_get_partkeydef",
    "pg_get_viewdef",
    "pg_get_triggerdef",
    "pg_get_serial_sequence",
    "pg_is_in_recovery",
    "nextval",
    "currval",
    "setval",
    "lastval",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    TableIsVisible,
    GetUserById,
    FormatType,
    /// pg_get_expr: the stored expression text as it is.
    GetExpr,
    GetIndexDef,
    GetConstraintDef,
    /// Always true (one superuser owns everything).
    True,
    /// Always NULL (no comments, no statistics objects, no partitions...).
    Null,
    CurrentSchemas,
    ArrayPosition,
    ArrayToString,
    ArrayUpper,
    ArrayLower,
    Cardinality,
    EncodingToChar,
    ToRegType,
    ToRegClass,
    RelationIsPublishable,
    IsInRecovery,
    /// `text ~ pattern` and friends.
    RegexMatch {
        negated: bool,
        insensitive: bool,
    },
    /// `value = ANY(array)`.
    AnyEqual,
    /// CASE: args are condition, result pairs, then the ELSE result.
    Case,
    /// ARRAY[...].
    ArrayLiteral,
    /// array[index].
    Subscript,
    /// oid::regclass, oid::regtype, oid::regnamespace: the name.
    RegClassName,
    RegTypeName,
    RegNamespaceName,
    /// 'name'::regclass, 'name'::regtype: the oid (an error if there is none).
    RegClassOid,
    RegTypeOid,
    /// 'pg_catalog.f'::regproc: the function's name.
    RegProcName,
    /// nextval(sequence), currval(sequence), setval(sequence, value [, is_called]),
    /// lastval() (`crate::sequence`).
    NextVal,
    CurrVal,
    SetVal,
    LastVal,
}

/// A bound call of a system function.
#[derive(Clone)]
pub struct Call {
    pub function: Function,
    pub args: Vec<Expr>,
    snapshot: Arc<Snapshot>,
    /// The compiled pattern of a regex match whose pattern is a constant.
    regex: Option<Arc<Regex>>,
    /// The sequence of a sequence function whose argument is a constant.
    sequence: Option<Arc<Sequence>>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("function", &self.function)
            .field("args", &self.args)
            .finish()
    }
}

impl PartialEq for Call {
    fn eq(&self, other: &Self) -> bool {
        self.function == other.function && self.args == other.args
    }
}

fn call(function: Function, args: Vec<Expr>, catalog: &Catalog) -> Expr {
    Expr::System(Box::new(Call {
        function,
        args,
        snapshot: Arc::new(Snapshot::of(catalog)),
        regex: None,
        sequence: None,
    }))
}

fn undefined_function(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_FUNCTION,
        format!("function {name} does not exist"),
    )
}

/// Binds a call of a function the binder does not know (`args` already bound).
pub fn bind_function(
    catalog: &Catalog,
    name: &str,
    args: Vec<Expr>,
    types: &[DataType],
) -> SqlResult<(Expr, DataType)> {
    use Function as F;
    let (function, data_type, arity): (Function, DataType, &[usize]) = match name {
        "pg_table_is_visible" | "pg_type_is_visible" => (F::TableIsVisible, DataType::Bool, &[1]),
        "pg_get_userbyid" => (F::GetUserById, DataType::Text, &[1]),
        "format_type" => (F::FormatType, DataType::Text, &[2]),
        "pg_get_expr" => (F::GetExpr, DataType::Text, &[2, 3]),
        "pg_get_indexdef" => (F::GetIndexDef, DataType::Text, &[1, 3]),
        "pg_get_constraintdef" => (F::GetConstraintDef, DataType::Text, &[1, 2]),
        "obj_description" | "shobj_description" => (F::Null, DataType::Text, &[1, 2]),
        "col_description" => (F::Null, DataType::Text, &[2]),
        "pg_get_statisticsobjdef_columns" | "pg_get_partkeydef" | "pg_get_triggerdef" => {
            (F::Null, DataType::Text, &[1, 2])
        }
        "pg_get_viewdef" => (F::Null, DataType::Text, &[1, 2]),
        "pg_get_serial_sequence" => (F::Null, DataType::Text, &[2]),
        "current_schemas" => (F::CurrentSchemas, DataType::Text, &[1]),
        "has_table_privilege"
        | "has_schema_privilege"
        | "has_database_privilege"
        | "has_any_column_privilege"
        | "pg_has_role" => (F::True, DataType::Bool, &[2, 3]),
        "has_column_privilege" => (F::True, DataType::Bool, &[3, 4]),
        "array_position" => (F::ArrayPosition, DataType::Int4, &[2]),
        "array_to_string" => (F::ArrayToString, DataType::Text, &[2, 3]),
        "array_upper" | "array_length" => (F::ArrayUpper, DataType::Int4, &[2]),
        "array_lower" => (F::ArrayLower, DataType::Int4, &[2]),
        "cardinality" => (F::Cardinality, DataType::Int4, &[1]),
        "pg_encoding_to_char" => (F::EncodingToChar, DataType::Text, &[1]),
        "to_regtype" => (F::ToRegType, DataType::Int8, &[1]),
        "to_regclass" => (F::ToRegClass, DataType::Int8, &[1]),
        "pg_relation_is_publishable" => (F::RelationIsPublishable, DataType::Bool, &[1]),
        "pg_is_in_recovery" => (F::IsInRecovery, DataType::Bool, &[0]),
        "nextval" => (F::NextVal, DataType::Int8, &[1]),
        "currval" => (F::CurrVal, DataType::Int8, &[1]),
        "setval" => (F::SetVal, DataType::Int8, &[2, 3]),
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
    if matches!(function, F::NextVal | F::CurrVal | F::SetVal) {
        return Ok((
            bind_sequence_call(function, args, types, catalog)?,
            data_type,
        ));
    }
    Ok((call(function, args, catalog), data_type))
}

/// A sequence function: a constant sequence argument (a name, or the oid 's'::regclass
/// gives) is looked up now, as PostgreSQL does when it parses the call; the other
/// arguments are cast to bigint and bool.
fn bind_sequence_call(
    function: Function,
    mut args: Vec<Expr>,
    types: &[DataType],
    catalog: &Catalog,
) -> SqlResult<Expr> {
    let snapshot = Arc::new(Snapshot::of(catalog));
    let sequence = match &args[0] {
        Expr::Literal(Value::Null) => None,
        Expr::Literal(argument) => Some(
            snapshot
                .sequence(argument)
                .map(|info| info.sequence.clone())
                .ok_or_else(|| undefined_relation(argument))?,
        ),
        _ => None,
    };
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
    Ok(Expr::System(Box::new(Call {
        function,
        args,
        snapshot,
        regex: None,
        sequence,
    })))
}

fn undefined_relation(argument: &Value) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_TABLE,
        format!(
            "relation \"{}\" does not exist",
            argument.to_text().unwrap_or_default()
        ),
    )
}

/// Binds the operators the binder does not know: the regex matches (`~`, `!~`, `~*`, `!~*`,
/// also as `OPERATOR(pg_catalog.~)`).
pub fn bind_operator(
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
    let regex = match &pattern {
        Expr::Literal(Value::Text(pattern)) => Some(Arc::new(compile(pattern, insensitive)?)),
        _ => None,
    };
    let expr = Expr::System(Box::new(Call {
        function: Function::RegexMatch {
            negated,
            insensitive,
        },
        args: vec![text, pattern],
        snapshot: Arc::new(Snapshot::of(catalog)),
        regex,
        sequence: None,
    }));
    Ok((expr, DataType::Bool))
}

fn compile(pattern: &str, insensitive: bool) -> SqlResult<Regex> {
    RegexBuilder::new(pattern)
        .case_insensitive(insensitive)
        .build()
        .map_err(|error| {
            SqlError::new(
                INVALID_REGULAR_EXPRESSION,
                format!("invalid regular expression: {error}"),
            )
        })
}

/// The cast targets handled here: the reg* types, `oid`, `name`, `"char"`, arrays and
/// `pg_catalog.`-qualified names.
pub fn is_system_type(target: &ast::DataType) -> bool {
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
pub fn bind_cast(
    binder: &mut Binder,
    catalog: &Catalog,
    inner: &ast::Expr,
    target: &ast::DataType,
) -> SqlResult<(Expr, DataType)> {
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
                (_, false) => (Function::RegProcName, DataType::Text),
                (_, true) => return Ok((bound, DataType::Int8)),
            };
            let expr = call(function, vec![bound], catalog);
            // A literal name is looked up now, as PostgreSQL does ('nope'::regclass fails
            // when the statement is bound).
            if expr.is_constant() {
                let value = expr.eval(&[], &EvalContext::constant())?;
                return Ok((Expr::Literal(value), result));
            }
            Ok((expr, result))
        }
        other => Err(SqlError::new(
            sqlstate::UNDEFINED_OBJECT,
            format!("type \"{other}\" does not exist"),
        )),
    }
}

/// Binds the expressions the binder does not know: COLLATE (ignored), `x = ANY(array)`,
/// CASE, ARRAY[...] and subscripts.
pub fn bind_other(
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
            for element in elem {
                args.push(binder.bind_expr(element, None)?.0);
            }
            Ok((call(Function::ArrayLiteral, args, catalog), DataType::Text))
        }
        E::CompoundFieldAccess { root, access_chain } => {
            let [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] =
                access_chain.as_slice()
            else {
                return Err(SqlError::unsupported(format!("the expression {expr}")));
            };
            let array = binder.bind_typed(root, DataType::Text)?;
            let index = binder.bind_typed(index, DataType::Int4)?;
            let element = call(Function::Subscript, vec![array, index], catalog);
            // Arrays are carried as text; an element compared with an integer is one, as
            // the elements of int2vector / oid[] columns are in PostgreSQL.
            match expected {
                Some(target) if target.is_integer() => Ok((
                    Expr::Cast {
                        expr: Box::new(element),
                        to: target,
                    },
                    target,
                )),
                _ => Ok((element, DataType::Text)),
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

fn int_of(value: &Value) -> Option<i64> {
    match value {
        Value::Int(v) => Some(*v),
        Value::Text(text) => text.trim().parse().ok(),
        _ => None,
    }
}

fn array_of(value: &Value) -> SqlResult<Vec<Option<String>>> {
    let text = value.to_text().unwrap_or_default();
    array::parse(&text).ok_or_else(|| {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })
}

impl Call {
    pub fn is_constant(&self) -> bool {
        let volatile = matches!(
            self.function,
            Function::NextVal | Function::CurrVal | Function::SetVal | Function::LastVal
        );
        !volatile && self.args.iter().all(Expr::is_constant)
    }

    /// nextval, currval, setval and lastval (NULL arguments give NULL, as the functions are
    /// strict in PostgreSQL).
    fn eval_sequence(&self, values: &[Value], context: &EvalContext) -> SqlResult<Value> {
        let no_session = || SqlError::unsupported("sequence functions outside a session");
        if self.function == Function::LastVal {
            return Ok(Value::Int(
                context.sequences.ok_or_else(no_session)?.last()?,
            ));
        }
        if values.iter().any(Value::is_null) {
            return Ok(Value::Null);
        }
        let sequence = match &self.sequence {
            Some(sequence) => sequence.clone(),
            None => self
                .snapshot
                .sequence(&values[0])
                .map(|info| info.sequence.clone())
                .ok_or_else(|| undefined_relation(&values[0]))?,
        };
        let value = match self.function {
            Function::NextVal => sequence.next_value(context.sequences)?,
            Function::CurrVal => context
                .sequences
                .ok_or_else(no_session)?
                .current(&sequence.name)?,
            _ => {
                let Value::Int(value) = values[1] else {
                    return Err(SqlError::mismatch("setval takes a bigint value"));
                };
                let is_called = values.get(2).map(truth).transpose()?.unwrap_or(true);
                sequence.set_value(value, is_called, context.sequences)?
            }
        };
        Ok(Value::Int(value))
    }

    pub fn eval(&self, row: &[Value], context: &EvalContext) -> SqlResult<Value> {
        use Function as F;
        if self.function == F::Case {
            let (pairs, else_value) = self.args.split_at(self.args.len() - 1);
            for pair in pairs.chunks(2) {
                if truth(&pair[0].eval(row, context)?)? {
                    return pair[1].eval(row, context);
                }
            }
            return else_value[0].eval(row, context);
        }
        let sequence_function = matches!(
            self.function,
            F::NextVal | F::CurrVal | F::SetVal | F::LastVal
        );
        let values: Vec<Value> = self
            .args
            .iter()
            .map(|arg| arg.eval(row, context))
            .collect::<SqlResult<_>>()?;
        if sequence_function {
            return self.eval_sequence(&values, context);
        }
        let snapshot = &self.snapshot;
        let text = |value: &str| Ok(Value::Text(value.to_string()));
        match self.function {
            F::True => return Ok(Value::Bool(true)),
            F::Null => return Ok(Value::Null),
            F::IsInRecovery => return Ok(Value::Bool(false)),
            F::ArrayLiteral => {
                let elements: Vec<Option<String>> = values.iter().map(Value::to_text).collect();
                return text(&array::format(&elements));
            }
            F::CurrentSchemas => {
                return Ok(match &values[0] {
                    Value::Null => Value::Null,
                    value if truth(value)? => Value::Text("{pg_catalog,public}".into()),
                    _ => Value::Text(format!("{{{PUBLIC_SCHEMA}}}")),
                })
            }
            F::GetExpr | F::FormatType | F::ArrayToString => {}
            _ if values.iter().any(Value::is_null) => return Ok(Value::Null),
            _ => {}
        }
        if values.first().is_some_and(Value::is_null) {
            return Ok(Value::Null);
        }
        match self.function {
            F::TableIsVisible => Ok(Value::Bool(
                int_of(&values[0]).is_some_and(|oid| snapshot.relation_name(oid).is_some()),
            )),
            F::GetUserById => Ok(Value::Text(match int_of(&values[0]) {
                Some(OWNER_ROLE_OID) => context.user_name.to_string(),
                other => format!("unknown (OID={})", other.unwrap_or_default()),
            })),
            F::FormatType => {
                let oid = int_of(&values[0]).unwrap_or_default();
                let typmod = values.get(1).and_then(int_of);
                Ok(Value::Text(
                    format_type(oid, typmod).unwrap_or_else(|| "???".into()),
                ))
            }
            F::GetExpr => Ok(values[0].clone()),
            F::GetIndexDef => {
                let oid = int_of(&values[0]).unwrap_or_default();
                let Some((table, index)) = snapshot.index_by_oid(oid) else {
                    return Ok(Value::Null);
                };
                let columns = &table.table.def.columns;
                let names: Vec<&str> = index
                    .columns
                    .iter()
                    .map(|column| columns[*column].name.as_str())
                    .collect();
                // pg_get_indexdef(oid, n, pretty) with n > 0: the n-th column only.
                if let Some(column) = values.get(1).and_then(int_of).filter(|n| *n > 0) {
                    return Ok(names
                        .get(column as usize - 1)
                        .map_or(Value::Null, |name| Value::Text(name.to_string())));
                }
                Ok(Value::Text(format!(
                    "CREATE {}INDEX {} ON {PUBLIC_SCHEMA}.{} USING btree ({})",
                    if index.unique { "UNIQUE " } else { "" },
                    index.name,
                    table.name(),
                    names.join(", ")
                )))
            }
            F::GetConstraintDef => {
                let oid = int_of(&values[0]).unwrap_or_default();
                let Some((table, index)) = snapshot.constraint_by_oid(oid) else {
                    return Ok(Value::Null);
                };
                let columns = &table.table.def.columns;
                let names: Vec<&str> = index
                    .columns
                    .iter()
                    .map(|column| columns[*column].name.as_str())
                    .collect();
                let kind = if index.primary {
                    "PRIMARY KEY"
                } else {
                    "UNIQUE"
                };
                Ok(Value::Text(format!("{kind} ({})", names.join(", "))))
            }
            F::ArrayPosition => {
                let needle = values[1].to_text();
                let position = array_of(&values[0])?
                    .iter()
                    .position(|element| *element == needle);
                Ok(position.map_or(Value::Null, |p| Value::Int(p as i64 + 1)))
            }
            F::ArrayToString => {
                if values[0].is_null() || values[1].is_null() {
                    return Ok(Value::Null);
                }
                let separator = values[1].to_text().unwrap_or_default();
                let null_text = values.get(2).and_then(Value::to_text);
                let parts: Vec<String> = array_of(&values[0])?
                    .into_iter()
                    .filter_map(|element| element.or_else(|| null_text.clone()))
                    .collect();
                Ok(Value::Text(parts.join(&separator)))
            }
            F::ArrayUpper | F::Cardinality => {
                let length = array_of(&values[0])?.len() as i64;
                let dimension = values.get(1).and_then(int_of).unwrap_or(1);
                Ok(if length == 0 || dimension != 1 {
                    if self.function == F::Cardinality {
                        Value::Int(length)
                    } else {
                        Value::Null
                    }
                } else {
                    Value::Int(length)
                })
            }
            F::ArrayLower => {
                let length = array_of(&values[0])?.len();
                let dimension = values.get(1).and_then(int_of).unwrap_or(1);
                Ok(if length == 0 || dimension != 1 {
                    Value::Null
                } else {
                    Value::Int(1)
                })
            }
            F::Subscript => {
                let elements = array_of(&values[0])?;
                let index = int_of(&values[1]).unwrap_or(0);
                Ok(usize::try_from(index - 1)
                    .ok()
                    .and_then(|index| elements.get(index).cloned().flatten())
                    .map_or(Value::Null, Value::Text))
            }
            F::EncodingToChar => text(match int_of(&values[0]) {
                Some(6) => "UTF8",
                Some(0) => "SQL_ASCII",
                _ => "",
            }),
            F::ToRegType => Ok(values[0]
                .to_text()
                .and_then(|name| type_oid_by_name(&name))
                .map_or(Value::Null, Value::Int)),
            F::ToRegClass => Ok(values[0]
                .to_text()
                .and_then(|name| snapshot.relation_oid(&name))
                .map_or(Value::Null, Value::Int)),
            F::RelationIsPublishable => Ok(Value::Bool(
                int_of(&values[0]).is_some_and(|oid| snapshot.table_by_oid(oid).is_some()),
            )),
            F::RegexMatch {
                negated,
                insensitive,
            } => {
                let subject = values[0].to_text().unwrap_or_default();
                let matched = match &self.regex {
                    Some(regex) => regex.is_match(&subject),
                    None => {
                        let pattern = values[1].to_text().unwrap_or_default();
                        compile(&pattern, insensitive)?.is_match(&subject)
                    }
                };
                Ok(Value::Bool(matched != negated))
            }
            F::AnyEqual => {
                let needle = values[0].to_text();
                let elements = array_of(&values[1])?;
                if elements.contains(&needle) {
                    Ok(Value::Bool(true))
                } else if elements.contains(&None) {
                    Ok(Value::Null)
                } else {
                    Ok(Value::Bool(false))
                }
            }
            F::RegClassName => {
                let oid = int_of(&values[0]).unwrap_or_default();
                Ok(Value::Text(match snapshot.relation_name(oid) {
                    Some((schema, name)) if schema == PUBLIC_SCHEMA || schema == "pg_catalog" => {
                        name
                    }
                    Some((schema, name)) => format!("{schema}.{name}"),
                    None => oid.to_string(),
                }))
            }
            F::RegTypeName => {
                let oid = int_of(&values[0]).unwrap_or_default();
                let table_type = snapshot
                    .tables
                    .iter()
                    .find(|table| table.row_type_oid() == oid)
                    .map(|table| table.name().to_string());
                Ok(Value::Text(
                    table_type
                        .or_else(|| format_type(oid, None))
                        .unwrap_or_else(|| oid.to_string()),
                ))
            }
            F::RegNamespaceName => {
                let oid = int_of(&values[0]).unwrap_or_default();
                Ok(Value::Text(match oid {
                    super::PG_CATALOG_NAMESPACE_OID => "pg_catalog".into(),
                    super::PUBLIC_NAMESPACE_OID => PUBLIC_SCHEMA.into(),
                    super::INFORMATION_SCHEMA_NAMESPACE_OID => "information_schema".into(),
                    other => other.to_string(),
                }))
            }
            F::RegClassOid => {
                let name = values[0].to_text().unwrap_or_default();
                if let Ok(oid) = name.trim().parse::<i64>() {
                    return Ok(Value::Int(oid));
                }
                snapshot.relation_oid(&name).map(Value::Int).ok_or_else(|| {
                    SqlError::new(
                        sqlstate::UNDEFINED_TABLE,
                        format!("relation \"{name}\" does not exist"),
                    )
                })
            }
            F::RegTypeOid => {
                let name = values[0].to_text().unwrap_or_default();
                if let Ok(oid) = name.trim().parse::<i64>() {
                    return Ok(Value::Int(oid));
                }
                type_oid_by_name(&name).map(Value::Int).ok_or_else(|| {
                    SqlError::new(
                        sqlstate::UNDEFINED_OBJECT,
                        format!("type \"{name}\" does not exist"),
                    )
                })
            }
            F::RegProcName => {
                let name = values[0].to_text().unwrap_or_default();
                Ok(Value::Text(
                    name.strip_prefix("pg_catalog.")
                        .unwrap_or(&name)
                        .to_string(),
                ))
            }
            F::True
            | F::Null
            | F::IsInRecovery
            | F::ArrayLiteral
            | F::CurrentSchemas
            | F::Case
            | F::NextVal
            | F::CurrVal
            | F::SetVal
            | F::LastVal => {
                unreachable!("handled above")
            }
        }
    }
}

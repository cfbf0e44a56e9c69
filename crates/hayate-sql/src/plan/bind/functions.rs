//! Binding of the SQL types' names, scalar functions, and the expressions with a syntax of
//! their own (CASE, SUBSTRING(.. FROM ..), POSITION(.. IN ..), TRIM, CEIL/FLOOR, ILIKE,
//! IS [NOT] DISTINCT FROM). Arguments are cast to the types PostgreSQL would resolve the
//! function to, so evaluation (`plan::expr::functions`) sees values of known types.

use sqlparser::ast;

use super::expr::{binary, untyped, FunctionArg};
use super::Binder;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::{BinaryOp, Expr, ScalarFunction};
use crate::types::{numeric_typmod, DataType, Value};

/// The types added beside the integers, float8, bool, text and varchar (None: not one of
/// ours).
pub(super) fn data_type(data_type: &ast::DataType) -> Option<SqlResult<DataType>> {
    use ast::DataType as T;
    let length = |length: &Option<ast::CharacterLength>| -> SqlResult<Option<u32>> {
        match length {
            Some(ast::CharacterLength::IntegerLength { length, .. }) => {
                let length = u32::try_from(*length)
                    .ok()
                    .filter(|length| (1..=10_485_760).contains(length))
                    .ok_or_else(|| {
                        SqlError::new(
                            sqlstate::INVALID_PARAMETER_VALUE,
                            "length for type char must be between 1 and 10485760",
                        )
                    })?;
                Ok(Some(length))
            }
            _ => Ok(None),
        }
    };
    let numeric = |info: &ast::ExactNumberInfo| -> SqlResult<DataType> {
        Ok(DataType::Numeric(match info {
            ast::ExactNumberInfo::None => None,
            ast::ExactNumberInfo::Precision(precision) => Some(numeric_typmod(*precision, 0)?),
            ast::ExactNumberInfo::PrecisionAndScale(precision, scale) => {
                let scale = u64::try_from(*scale).map_err(|_| {
                    SqlError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "negative NUMERIC scale is not supported",
                    )
                })?;
                Some(numeric_typmod(*precision, scale)?)
            }
        }))
    };
    Some(match data_type {
        T::Float4 | T::Real | T::Float32 => Ok(DataType::Float4),
        T::Float(ast::ExactNumberInfo::Precision(bits)) if *bits <= 24 => Ok(DataType::Float4),
        T::Float(_) => Ok(DataType::Float8),
        T::Numeric(info) | T::Decimal(info) | T::Dec(info) => numeric(info),
        // PostgreSQL: char without a length is char(1).
        T::Char(l) | T::Character(l) => length(l).map(|l| DataType::Char(Some(l.unwrap_or(1)))),
        T::Bytea => Ok(DataType::Bytea),
        T::Date => Ok(DataType::Date),
        T::Timestamp(_, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => {
            Ok(DataType::TimestampTz)
        }
        T::Timestamp(_, _) => Ok(DataType::Timestamp),
        T::Uuid => Ok(DataType::Uuid),
        T::JSON => Ok(DataType::Json),
        T::JSONB => Ok(DataType::Jsonb),
        T::Interval { .. } => Ok(DataType::Interval),
        T::Custom(name, modifiers) => {
            let name = name.to_string().to_lowercase();
            let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
            match (name, modifiers.as_slice()) {
                ("bpchar", []) => Ok(DataType::Char(None)),
                ("bpchar", [length]) => {
                    let length = length.parse::<u64>().unwrap_or(0);
                    let length = ast::CharacterLength::IntegerLength { length, unit: None };
                    length_of(Some(length)).map(DataType::Char)
                }
                ("float4", []) => Ok(DataType::Float4),
                ("timestamptz", []) => Ok(DataType::TimestampTz),
                // Object identifiers are bigints here (the system tables' oid columns).
                ("oid", []) => Ok(DataType::Int8),
                _ => return None,
            }
        }
        _ => return None,
    })
}

fn length_of(length: Option<ast::CharacterLength>) -> SqlResult<Option<u32>> {
    match length {
        Some(ast::CharacterLength::IntegerLength { length, .. }) => u32::try_from(length)
            .ok()
            .filter(|length| *length >= 1)
            .map(Some)
            .ok_or_else(|| {
                SqlError::new(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    "length for type char must be at least 1",
                )
            }),
        _ => Ok(None),
    }
}

/// The type several values are converted to (CASE, COALESCE, GREATEST...): numbers to
/// their common type, text to text, dates with timestamps to timestamps; Unknown ones
/// (NULL, untyped literals) take it.
pub(super) fn common_type(types: &[DataType]) -> SqlResult<DataType> {
    let mut common = DataType::Unknown;
    for &next in types.iter().filter(|t| **t != DataType::Unknown) {
        common = match (common, next) {
            (DataType::Unknown, next) => next,
            (a, b) if a == b => a,
            (a, b) if a.is_numeric() && b.is_numeric() => {
                a.common_numeric(b).unwrap_or(DataType::Float8)
            }
            (a, b) if a.is_array() && b.is_array() => {
                // int4[] with int8[] is int8[], as their elements are; text[] with int4[]
                // is no type.
                let elements = [a, b].map(|t| t.element().unwrap_or(DataType::Unknown));
                match common_type(&elements).map(DataType::array_of) {
                    Ok(array) if array.is_array() => array,
                    _ => {
                        return Err(SqlError::mismatch(format!(
                            "types {a} and {b} cannot be matched"
                        )))
                    }
                }
            }
            (a, b) if a.is_text() && b.is_text() => DataType::Text,
            (a, b) if a.is_datetime() && b.is_datetime() => {
                if a == DataType::TimestampTz || b == DataType::TimestampTz {
                    DataType::TimestampTz
                } else {
                    DataType::Timestamp
                }
            }
            (a, b) => {
                return Err(SqlError::mismatch(format!(
                    "types {a} and {b} cannot be matched"
                )))
            }
        };
    }
    Ok(common)
}

impl Binder<'_> {
    /// Converts a bound expression of type `from` to `to`: literals now, parameters of no
    /// type yet by typing them, anything else with a cast at run time.
    pub(super) fn coerce(&mut self, expr: Expr, from: DataType, to: DataType) -> SqlResult<Expr> {
        if from == to || to == DataType::Unknown {
            return Ok(expr);
        }
        if let DataType::Enum(_) = to {
            // Text becomes an enum's value once checked to be a label; a parameter stays
            // text for the client (it is checked the same way).
            if !(from.is_text() || from == DataType::Unknown) {
                return Err(SqlError::new(
                    sqlstate::CANNOT_COERCE,
                    format!("cannot cast type {from} to {}", self.type_name(to)),
                ));
            }
            if let Expr::Parameter(index) = expr {
                if self.params[index] == DataType::Unknown {
                    self.params[index] = DataType::Text;
                }
            }
            return self.enum_check(expr, to);
        }
        Ok(match expr {
            Expr::Literal(value) => Expr::Literal(value.cast(to)?),
            Expr::Parameter(index) if self.params[index] == DataType::Unknown => {
                self.params[index] = to;
                Expr::Parameter(index)
            }
            other => Expr::Cast {
                expr: Box::new(other),
                to,
            },
        })
    }

    /// sign, ln, exp, log and log10 of a numeric argument, and log(b, x) always, are
    /// numeric, as PostgreSQL resolves them (`types::numeric_math`); of other arguments
    /// (untyped ones included) they are double precision. None: not one of them.
    fn bind_numeric_math(
        &mut self,
        name: &str,
        exprs: &[&ast::Expr],
    ) -> SqlResult<Option<(Expr, DataType)>> {
        use ScalarFunction as F;
        let numeric = DataType::Numeric(None);
        let scalar = match (name, exprs.len()) {
            ("sign", 1) => F::Sign,
            ("ln", 1) => F::Ln,
            ("exp", 1) => F::Exp,
            ("log" | "log10", 1) => F::Log10,
            ("log", 2) => {
                let base = self.bind_as(exprs[0], numeric)?;
                let value = self.bind_as(exprs[1], numeric)?;
                return Ok(Some((function(F::Log, vec![base, value]), numeric)));
            }
            _ => return Ok(None),
        };
        let (argument, data_type) = self.bind_expr(exprs[0], Some(DataType::Float8))?;
        if matches!(data_type, DataType::Numeric(_)) && !untyped(exprs[0]) {
            return Ok(Some((function(scalar, vec![argument]), numeric)));
        }
        let argument = self.convert_bound(exprs[0], argument, data_type, DataType::Float8)?;
        Ok(Some((function(scalar, vec![argument]), DataType::Float8)))
    }

    /// Binds expressions that must come to one common type (untyped literals count as
    /// unknown), and converts each to it.
    fn bind_common(&mut self, exprs: &[&ast::Expr]) -> SqlResult<(Vec<Expr>, DataType)> {
        let mut bound = Vec::with_capacity(exprs.len());
        for expr in exprs {
            let (e, t) = self.bind_expr(expr, None)?;
            let t = if untyped(expr) { DataType::Unknown } else { t };
            bound.push((e, t));
        }
        let types: Vec<DataType> = bound.iter().map(|(_, t)| *t).collect();
        let common = common_type(&types)?;
        let common = if common == DataType::Unknown {
            DataType::Text
        } else {
            common
        };
        let converted = bound
            .into_iter()
            .map(|(e, t)| self.coerce(e, t, common))
            .collect::<SqlResult<_>>()?;
        Ok((converted, common))
    }

    /// Binds an expression that PostgreSQL would convert to `target` (numbers to numbers,
    /// anything to text, untyped literals to anything).
    pub(super) fn bind_as(&mut self, expr: &ast::Expr, target: DataType) -> SqlResult<Expr> {
        let (bound, data_type) = self.bind_expr(expr, Some(target))?;
        self.convert_bound(expr, bound, data_type, target)
    }

    /// `bind_as` for an expression already bound (as `data_type`).
    fn convert_bound(
        &mut self,
        expr: &ast::Expr,
        bound: Expr,
        data_type: DataType,
        target: DataType,
    ) -> SqlResult<Expr> {
        if untyped(expr) {
            return self.coerce(bound, DataType::Unknown, target);
        }
        let convertible = data_type == target
            || data_type == DataType::Unknown
            || (data_type.is_numeric() && target.is_numeric())
            || target.is_text();
        if !convertible {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function argument of type {data_type} where {target} is expected"),
            ));
        }
        self.coerce(bound, data_type, target)
    }

    /// The syntax forms sqlparser gives their own expression nodes.
    pub(super) fn bind_expr_extra(
        &mut self,
        expr: &ast::Expr,
        expected: Option<DataType>,
    ) -> SqlResult<(Expr, DataType)> {
        use ast::Expr as E;
        let text = DataType::Text;
        match expr {
            E::Case {
                operand,
                conditions,
                else_result,
                ..
            } => self.bind_case(
                operand.as_deref(),
                conditions,
                else_result.as_deref(),
                expected,
            ),
            E::IsDistinctFrom(left, right) | E::IsNotDistinctFrom(left, right) => {
                let (bound, _) = self.bind_common(&[left, right])?;
                let op = if matches!(expr, E::IsDistinctFrom(..)) {
                    BinaryOp::IsDistinctFrom
                } else {
                    BinaryOp::IsNotDistinctFrom
                };
                let mut bound = bound.into_iter();
                let (l, r) = (bound.next().expect("two"), bound.next().expect("two"));
                Ok((binary(op, l, r, DataType::Bool), DataType::Bool))
            }
            E::ILike {
                negated,
                expr: inner,
                pattern,
                escape_char,
                any,
            } => {
                if escape_char.is_some() || *any {
                    return Err(SqlError::unsupported("ILIKE with ESCAPE or ANY"));
                }
                let left = self.bind_as(inner, text)?;
                let right = self.bind_as(pattern, text)?;
                let op = if *negated {
                    BinaryOp::NotILike
                } else {
                    BinaryOp::ILike
                };
                Ok((binary(op, left, right, DataType::Bool), DataType::Bool))
            }
            E::Substring {
                expr: inner,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.bind_as(inner, text)?];
                let from = match substring_from {
                    Some(from) => self.bind_as(from, DataType::Int4)?,
                    None => Expr::Literal(Value::Int(1)),
                };
                args.push(from);
                if let Some(count) = substring_for {
                    args.push(self.bind_as(count, DataType::Int4)?);
                }
                Ok((function(ScalarFunction::Substring, args), text))
            }
            E::Position { expr: needle, r#in } => {
                let args = vec![self.bind_as(r#in, text)?, self.bind_as(needle, text)?];
                Ok((function(ScalarFunction::Position, args), DataType::Int4))
            }
            E::Trim {
                trim_where,
                trim_what,
                expr: inner,
                trim_characters,
            } => {
                if trim_characters.is_some() {
                    return Err(SqlError::unsupported("TRIM with a list of characters"));
                }
                let scalar = match trim_where {
                    Some(ast::TrimWhereField::Leading) => ScalarFunction::LTrim,
                    Some(ast::TrimWhereField::Trailing) => ScalarFunction::RTrim,
                    _ => ScalarFunction::BTrim,
                };
                let mut args = vec![self.bind_as(inner, text)?];
                if let Some(what) = trim_what {
                    args.push(self.bind_as(what, text)?);
                }
                Ok((function(scalar, args), text))
            }
            E::Extract {
                field, expr: inner, ..
            } => {
                let unit = Expr::Literal(Value::Text(field.to_string()));
                let (value, _) = self.bind_datetime(inner)?;
                Ok((
                    function(ScalarFunction::Extract, vec![unit, value]),
                    DataType::Numeric(None),
                ))
            }
            E::AtTimeZone {
                timestamp,
                time_zone,
            } => self.bind_at_time_zone(timestamp, time_zone),
            E::Ceil { expr: inner, field } | E::Floor { expr: inner, field } => {
                if !matches!(
                    field,
                    ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime)
                ) {
                    return Err(SqlError::unsupported("CEIL/FLOOR with a field or scale"));
                }
                let name = if matches!(expr, E::Ceil { .. }) {
                    "ceil"
                } else {
                    "floor"
                };
                self.bind_scalar_function(name, &[FunctionArg::Expr(inner)])
            }
            other => super::system::bind_other(self, self.catalog, other, expected),
        }
    }

    fn bind_case(
        &mut self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::CaseWhen],
        else_result: Option<&ast::Expr>,
        expected: Option<DataType>,
    ) -> SqlResult<(Expr, DataType)> {
        let (operand, branch_conditions) = match operand {
            Some(operand) => {
                let mut exprs = vec![operand];
                exprs.extend(conditions.iter().map(|c| &c.condition));
                let (mut bound, _) = self.bind_common(&exprs)?;
                let rest = bound.split_off(1);
                (Some(Box::new(bound.remove(0))), rest)
            }
            None => {
                let bound = conditions
                    .iter()
                    .map(|c| self.bind_typed(&c.condition, DataType::Bool))
                    .collect::<SqlResult<Vec<_>>>()?;
                (None, bound)
            }
        };
        let mut results: Vec<&ast::Expr> = conditions.iter().map(|c| &c.result).collect();
        results.extend(else_result);
        let (mut bound_results, mut data_type) = self.bind_common(&results)?;
        if data_type == DataType::Text && results.iter().all(|r| untyped(r)) {
            if let Some(expected) = expected.filter(|t| *t != DataType::Unknown) {
                // CASE of untyped literals takes the type its context expects.
                let rebound = bound_results
                    .into_iter()
                    .map(|e| self.coerce(e, DataType::Text, expected))
                    .collect::<SqlResult<_>>()?;
                bound_results = rebound;
                data_type = expected;
            }
        }
        let otherwise = else_result.map(|_| Box::new(bound_results.pop().expect("else")));
        let branches = branch_conditions.into_iter().zip(bound_results).collect();
        Ok((
            Expr::Case {
                operand,
                branches,
                otherwise,
            },
            data_type,
        ))
    }

    /// Binds a call of a scalar (non-aggregate) function.
    pub(super) fn bind_scalar_function(
        &mut self,
        name: &str,
        args: &[FunctionArg],
    ) -> SqlResult<(Expr, DataType)> {
        use DataType as T;
        use ScalarFunction as F;
        let mut exprs = Vec::with_capacity(args.len());
        for arg in args {
            match arg {
                FunctionArg::Expr(e) => exprs.push(*e),
                FunctionArg::Star => {
                    return Err(SqlError::syntax(format!(
                        "{name}(*) is not a function call"
                    )))
                }
            }
        }
        let arity = |allowed: &[usize]| -> SqlResult<()> {
            if allowed.contains(&exprs.len()) {
                Ok(())
            } else {
                Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!(
                        "function {name} with {} arguments does not exist",
                        exprs.len()
                    ),
                ))
            }
        };
        if let Some(bound) = self.bind_numeric_math(name, &exprs)? {
            return Ok(bound);
        }
        // Functions whose arguments have fixed types.
        let fixed: Option<(ScalarFunction, &[DataType], DataType)> = match name {
            "lower" => Some((F::Lower, &[T::Text], T::Text)),
            "upper" => Some((F::Upper, &[T::Text], T::Text)),
            "md5" => Some((F::Md5, &[T::Text], T::Text)),
            "quote_ident" => Some((F::QuoteIdent, &[T::Text], T::Text)),
            "quote_literal" => Some((F::QuoteLiteral, &[T::Text], T::Text)),
            "btrim" => Some((F::BTrim, &[T::Text, T::Text], T::Text)),
            "ltrim" => Some((F::LTrim, &[T::Text, T::Text], T::Text)),
            "rtrim" => Some((F::RTrim, &[T::Text, T::Text], T::Text)),
            "replace" => Some((F::Replace, &[T::Text, T::Text, T::Text], T::Text)),
            "repeat" => Some((F::Repeat, &[T::Text, T::Int4], T::Text)),
            "left" => Some((F::Left, &[T::Text, T::Int4], T::Text)),
            "right" => Some((F::Right, &[T::Text, T::Int4], T::Text)),
            "substr" | "substring" => Some((F::Substring, &[T::Text, T::Int4, T::Int4], T::Text)),
            "strpos" => Some((F::Position, &[T::Text, T::Text], T::Int4)),
            "power" | "pow" => Some((F::Power, &[T::Float8, T::Float8], T::Float8)),
            "sqrt" => Some((F::Sqrt, &[T::Float8], T::Float8)),
            "random" => Some((F::Random, &[], T::Float8)),
            "now" | "current_timestamp" | "transaction_timestamp" | "statement_timestamp" => {
                Some((F::Now, &[], T::TimestampTz))
            }
            "clock_timestamp" => Some((F::ClockTimestamp, &[], T::TimestampTz)),
            "localtimestamp" => Some((F::LocalTimestamp, &[], T::Timestamp)),
            "current_date" => Some((F::CurrentDate, &[], T::Date)),
            "version" => Some((F::Version, &[], T::Text)),
            "current_database" => Some((F::CurrentDatabase, &[], T::Text)),
            "current_schema" => Some((F::CurrentSchema, &[], T::Text)),
            "current_user" | "session_user" | "user" => Some((F::CurrentUser, &[], T::Text)),
            "current_setting" => Some((F::CurrentSetting, &[T::Text, T::Bool], T::Text)),
            "set_config" => Some((F::SetConfig, &[T::Text, T::Text, T::Bool], T::Text)),
            "pg_backend_pid" => Some((F::BackendPid, &[], T::Int4)),
            "gen_random_uuid" | "uuid_generate_v4" => Some((F::GenRandomUuid, &[], T::Uuid)),
            "lpad" => Some((F::Lpad, &[T::Text, T::Int4, T::Text], T::Text)),
            "rpad" => Some((F::Rpad, &[T::Text, T::Int4, T::Text], T::Text)),
            "split_part" => Some((F::SplitPart, &[T::Text, T::Text, T::Int4], T::Text)),
            "initcap" => Some((F::Initcap, &[T::Text], T::Text)),
            "translate" => Some((F::Translate, &[T::Text, T::Text, T::Text], T::Text)),
            "reverse" => Some((F::Reverse, &[T::Text], T::Text)),
            "starts_with" => Some((F::StartsWith, &[T::Text, T::Text], T::Bool)),
            "chr" => Some((F::Chr, &[T::Int4], T::Text)),
            "ascii" => Some((F::Ascii, &[T::Text], T::Int4)),
            "regexp_replace" => Some((
                F::RegexpReplace,
                &[T::Text, T::Text, T::Text, T::Text],
                T::Text,
            )),
            "encode" => Some((F::Encode, &[T::Bytea, T::Text], T::Text)),
            "decode" => Some((F::Decode, &[T::Text, T::Text], T::Bytea)),
            "sign" => Some((F::Sign, &[T::Float8], T::Float8)),
            "ln" => Some((F::Ln, &[T::Float8], T::Float8)),
            "exp" => Some((F::Exp, &[T::Float8], T::Float8)),
            "log10" => Some((F::Log10, &[T::Float8], T::Float8)),
            "log" if exprs.len() == 1 => Some((F::Log10, &[T::Float8], T::Float8)),
            "log" => Some((F::Log, &[T::Float8, T::Float8], T::Float8)),
            "cbrt" => Some((F::Cbrt, &[T::Float8], T::Float8)),
            "pi" => Some((F::Pi, &[], T::Float8)),
            _ => None,
        };
        if let Some((scalar, types, result)) = fixed {
            // Trailing arguments are optional where PostgreSQL has the shorter form.
            let optional = match scalar {
                F::BTrim
                | F::LTrim
                | F::RTrim
                | F::Substring
                | F::CurrentSetting
                | F::Lpad
                | F::Rpad
                | F::RegexpReplace => 1,
                _ => 0,
            };
            arity(&(types.len() - optional..=types.len()).collect::<Vec<_>>())?;
            let mut bound = Vec::with_capacity(exprs.len());
            for (expr, target) in exprs.iter().zip(types) {
                bound.push(self.bind_as(expr, *target)?);
            }
            return Ok((function(scalar, bound), result));
        }
        if let Some(bound) = self.bind_json_function(name, &exprs)? {
            return Ok(bound);
        }
        match name {
            "length" | "char_length" | "character_length" | "octet_length" => {
                arity(&[1])?;
                let (arg, arg_type) = self.bind_expr(exprs[0], None)?;
                let arg = if arg_type == T::Bytea {
                    arg
                } else {
                    self.coerce(arg, arg_type, T::Text)?
                };
                let scalar = if name == "octet_length" {
                    F::OctetLength
                } else {
                    F::Length
                };
                Ok((function(scalar, vec![arg]), T::Int4))
            }
            "date_part" | "extract" => {
                arity(&[2])?;
                let unit = self.bind_as(exprs[0], T::Text)?;
                let (value, _) = self.bind_datetime(exprs[1])?;
                let call = function(F::Extract, vec![unit, value]);
                // date_part is float8; EXTRACT numeric (PostgreSQL 14 and later).
                Ok(match name {
                    "date_part" => (
                        Expr::Cast {
                            expr: Box::new(call),
                            to: T::Float8,
                        },
                        T::Float8,
                    ),
                    _ => (call, T::Numeric(None)),
                })
            }
            "to_char" => {
                arity(&[2])?;
                let (value, value_type) = self.bind_expr(exprs[0], None)?;
                let value = match value_type {
                    T::Date
                    | T::Timestamp
                    | T::TimestampTz
                    | T::Interval
                    | T::Int2
                    | T::Int4
                    | T::Int8
                    | T::Float4
                    | T::Float8
                    | T::Numeric(_) => value,
                    _ if super::expr::untyped(exprs[0]) => {
                        return Err(SqlError::new(
                            "42725",
                            "function to_char(unknown, unknown) is not unique",
                        ))
                    }
                    other => {
                        return Err(SqlError::new(
                            sqlstate::UNDEFINED_FUNCTION,
                            format!("function to_char({other}, unknown) does not exist"),
                        ))
                    }
                };
                let template = self.bind_as(exprs[1], T::Text)?;
                Ok((function(F::ToChar, vec![value, template]), T::Text))
            }
            "to_timestamp" => {
                arity(&[1, 2])?;
                let args = match exprs.len() {
                    1 => vec![self.bind_as(exprs[0], T::Float8)?],
                    _ => vec![
                        self.bind_as(exprs[0], T::Text)?,
                        self.bind_as(exprs[1], T::Text)?,
                    ],
                };
                Ok((function(F::ToTimestamp, args), T::TimestampTz))
            }
            "to_date" | "to_number" => {
                arity(&[2])?;
                let args = vec![
                    self.bind_as(exprs[0], T::Text)?,
                    self.bind_as(exprs[1], T::Text)?,
                ];
                Ok(match name {
                    "to_date" => (function(F::ToDate, args), T::Date),
                    _ => (function(F::ToNumber, args), T::Numeric(None)),
                })
            }
            "date_trunc" => {
                arity(&[2, 3])?;
                let unit = self.bind_as(exprs[0], T::Text)?;
                let (value, value_type) = self.bind_datetime(exprs[1])?;
                let result = match value_type {
                    T::Date => T::TimestampTz,
                    other => other,
                };
                let mut args = vec![unit, value];
                if let Some(zone) = exprs.get(2) {
                    if result != T::TimestampTz {
                        return Err(SqlError::new(
                            sqlstate::UNDEFINED_FUNCTION,
                            format!("function date_trunc(unknown, {value_type}, unknown) does not exist"),
                        ));
                    }
                    args.push(self.bind_as(zone, T::Text)?);
                }
                Ok((function(F::DateTrunc, args), result))
            }
            "to_hex" => {
                arity(&[1])?;
                let (arg, arg_type) = self.bind_expr(exprs[0], Some(T::Int8))?;
                let wide = !matches!(arg_type, T::Int2 | T::Int4);
                let arg = self.coerce(arg, arg_type, if wide { T::Int8 } else { T::Int4 })?;
                Ok((function(F::ToHex { wide }, vec![arg]), T::Text))
            }
            "concat" | "concat_ws" => {
                if name == "concat_ws" && exprs.is_empty() {
                    arity(&[1])?;
                }
                let mut bound = Vec::with_capacity(exprs.len());
                for expr in &exprs {
                    bound.push(self.bind_expr(expr, Some(T::Text))?.0);
                }
                let scalar = if name == "concat" {
                    F::Concat
                } else {
                    F::ConcatWs
                };
                Ok((function(scalar, bound), T::Text))
            }
            "coalesce" | "greatest" | "least" | "nullif" => {
                if name == "nullif" {
                    arity(&[2])?;
                } else if exprs.is_empty() {
                    arity(&[1])?;
                }
                let (bound, data_type) = self.bind_common(&exprs)?;
                if data_type.needs_order_key() && matches!(name, "greatest" | "least") {
                    let mut args = bound;
                    args.push(self.order_key(Expr::Column(0), data_type)?);
                    let greatest = name == "greatest";
                    return Ok((function(F::ExtremeByKey { greatest }, args), data_type));
                }
                let scalar = match name {
                    "coalesce" => F::Coalesce,
                    "greatest" => F::Greatest,
                    "least" => F::Least,
                    _ => F::NullIf,
                };
                Ok((function(scalar, bound), data_type))
            }
            "abs" => {
                arity(&[1])?;
                let (arg, arg_type) = self.bind_expr(exprs[0], None)?;
                let target = if arg_type.is_numeric() {
                    arg_type
                } else {
                    T::Float8
                };
                let arg = self.coerce(arg, arg_type, target)?;
                Ok((function(F::Abs, vec![arg]), target))
            }
            "round" | "trunc" | "floor" | "ceil" | "ceiling" => {
                let scalar = match name {
                    "round" => F::Round,
                    "trunc" => F::Trunc,
                    "floor" => F::Floor,
                    _ => F::Ceil,
                };
                let with_scale = matches!(scalar, F::Round | F::Trunc);
                arity(if with_scale { &[1, 2] } else { &[1] })?;
                let (arg, arg_type) = self.bind_expr(exprs[0], None)?;
                // Numerics stay numeric (and a scale needs one); other numbers are float8.
                let target = match arg_type {
                    T::Numeric(_) => T::Numeric(None),
                    _ if exprs.len() == 2 => T::Numeric(None),
                    _ => T::Float8,
                };
                let mut bound = vec![self.coerce(arg, arg_type, target)?];
                if exprs.len() == 2 {
                    bound.push(self.bind_as(exprs[1], T::Int4)?);
                }
                Ok((function(scalar, bound), target))
            }
            "mod" => {
                arity(&[2])?;
                let (bound, data_type) = self.bind_common(&exprs)?;
                let target = if data_type.is_integer() {
                    data_type
                } else {
                    T::Numeric(None)
                };
                let types = [data_type, data_type];
                let bound = bound
                    .into_iter()
                    .zip(types)
                    .map(|(e, t)| self.coerce(e, t, target))
                    .collect::<SqlResult<_>>()?;
                Ok((function(F::Mod, bound), target))
            }
            _ => {
                // pg_catalog functions (`system`) or an undefined function.
                let mut bound = Vec::with_capacity(exprs.len());
                let mut types = Vec::with_capacity(exprs.len());
                for arg in exprs {
                    // A parameter's type where the function says it (a pid is int4).
                    let hint = match name {
                        "pg_cancel_backend" | "pg_terminate_backend" => Some(T::Int4),
                        _ => None,
                    };
                    let (expr, data_type) = self.bind_expr(arg, hint)?;
                    bound.push(expr);
                    types.push(data_type);
                }
                super::system::bind_function(self.catalog, name, bound, &types)
            }
        }
    }
}

impl Binder<'_> {
    /// A date, timestamp, timestamptz or interval operand (an untyped literal is a
    /// timestamp).
    fn bind_datetime(&mut self, expr: &ast::Expr) -> SqlResult<(Expr, DataType)> {
        let (bound, data_type) = self.bind_expr(expr, Some(DataType::Timestamp))?;
        match data_type {
            DataType::Date | DataType::Timestamp | DataType::TimestampTz | DataType::Interval => {
                Ok((bound, data_type))
            }
            DataType::Unknown | DataType::Text if super::expr::untyped(expr) => Ok((
                self.coerce(bound, DataType::Unknown, DataType::Timestamp)?,
                DataType::Timestamp,
            )),
            other => Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function for a date/time field of type {other} does not exist"),
            )),
        }
    }

    /// `value AT TIME ZONE zone` (`ScalarFunction::AtTimeZone`; the zone a text or an
    /// interval): a timestamptz becomes the zone's wall-clock timestamp, a timestamp (or
    /// date) the timestamptz of that wall-clock time there.
    pub(super) fn bind_at_time_zone(
        &mut self,
        value: &ast::Expr,
        zone: &ast::Expr,
    ) -> SqlResult<(Expr, DataType)> {
        let (zone, zone_type) = self.bind_expr(zone, Some(DataType::Text))?;
        let zone = match zone_type {
            DataType::Interval | DataType::Text => zone,
            other => self.coerce(zone, other, DataType::Text)?,
        };
        let (bound, data_type) = self.bind_datetime(value)?;
        let target = match data_type {
            // A date is a timestamptz (its midnight in the session's zone), as PostgreSQL
            // prefers timestamptz for it.
            DataType::TimestampTz | DataType::Date => DataType::Timestamp,
            DataType::Timestamp => DataType::TimestampTz,
            other => {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("operator does not exist: {other} AT TIME ZONE text"),
                ))
            }
        };
        Ok((
            function(ScalarFunction::AtTimeZone, vec![zone, bound]),
            target,
        ))
    }
}

fn function(function: ScalarFunction, args: Vec<Expr>) -> Expr {
    Expr::Function { function, args }
}

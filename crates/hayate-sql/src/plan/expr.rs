//! Bound expressions: columns resolved to row positions, parameters to their index, types
//! checked. Evaluated against one row (the table's row, or a group's row after aggregation).

use std::cmp::Ordering;

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::system::functions::{Function, SystemFunction};
pub use crate::types::truth;
use crate::types::{datetime, numeric, DataType, Value};

mod functions;
mod json;
mod strings;

pub use json::JsonFunction;

pub(crate) use functions::{check_settable, fixed_setting, BACKEND_PID_SETTING};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    /// Bitwise & and | of integers.
    BitAnd,
    BitOr,
    Equal,
    NotEqual,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    And,
    Or,
    Concat,
    Like,
    NotLike,
    ILike,
    NotILike,
    /// Never NULL: NULL is not distinct from NULL.
    IsDistinctFrom,
    IsNotDistinctFrom,
}

impl BinaryOp {
    /// <, <=, > and >=: the comparisons that depend on an order, not only on equality.
    pub fn is_ordering(self) -> bool {
        self.is_comparison() && !matches!(self, BinaryOp::Equal | BinaryOp::NotEqual)
    }

    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Equal
                | BinaryOp::NotEqual
                | BinaryOp::Less
                | BinaryOp::LessOrEqual
                | BinaryOp::Greater
                | BinaryOp::GreaterOrEqual
        )
    }

    /// The comparison with its operands swapped (a < b is b > a).
    pub fn flipped(self) -> BinaryOp {
        match self {
            BinaryOp::Less => BinaryOp::Greater,
            BinaryOp::LessOrEqual => BinaryOp::GreaterOrEqual,
            BinaryOp::Greater => BinaryOp::Less,
            BinaryOp::GreaterOrEqual => BinaryOp::LessOrEqual,
            other => other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarFunction {
    Lower,
    Upper,
    Length,
    Abs,
    Coalesce,
    Version,
    CurrentDatabase,
    CurrentSchema,
    CurrentUser,
    OctetLength,
    /// substr(text, from [, count]), 1-based.
    Substring,
    /// position(needle in haystack) / strpos(haystack, needle): arguments (haystack, needle).
    Position,
    /// Trims the characters of the second argument (default space) from the first.
    BTrim,
    LTrim,
    RTrim,
    Replace,
    /// concat(...): NULL arguments are skipped.
    Concat,
    NullIf,
    Greatest,
    Least,
    /// greatest/least of values compared by sort keys (enums, arrays): the arguments are the
    /// values, then the key of a value as an expression over column 0, evaluated on each.
    ExtremeByKey {
        greatest: bool,
    },
    Round,
    Trunc,
    Floor,
    Ceil,
    Mod,
    Power,
    Sqrt,
    Random,
    Md5,
    /// quote_ident(text): double-quoted unless a plain lower-case, non-reserved identifier.
    QuoteIdent,
    /// quote_literal(text): a string literal (E'...' when it holds a backslash).
    QuoteLiteral,
    Left,
    Right,
    Repeat,
    /// lpad/rpad(text, length [, fill]).
    Lpad,
    Rpad,
    SplitPart,
    Initcap,
    Translate,
    Reverse,
    StartsWith,
    Chr,
    Ascii,
    /// to_hex of a bigint (wide) or of an integer, in 32 bits.
    ToHex {
        wide: bool,
    },
    /// concat_ws(separator, values...): NULL values skipped.
    ConcatWs,
    /// regexp_replace(text, pattern, replacement [, flags]).
    RegexpReplace,
    /// encode(bytea, format) / decode(text, format): hex, base64, escape.
    Encode,
    Decode,
    /// sign, ln, exp, log10 (log with one argument), log(base, x), cbrt, pi: float8.
    Sign,
    Ln,
    Exp,
    Log10,
    Log,
    Cbrt,
    Pi,
    /// now() / CURRENT_TIMESTAMP / transaction_timestamp(): the transaction's start.
    Now,
    CurrentDate,
    LocalTimestamp,
    ClockTimestamp,
    /// EXTRACT(field FROM value) (args: the field's name, the value): a numeric.
    Extract,
    /// date_trunc(field, value [, zone]): a timestamptz cut in `zone` (else the session's).
    DateTrunc,
    /// to_char(value, template) (`types::format`).
    ToChar,
    /// to_timestamp(text, template), or to_timestamp(seconds since the Unix epoch).
    ToTimestamp,
    ToDate,
    ToNumber,
    /// value AT TIME ZONE zone (args: the zone, a text or an interval; the value): a
    /// timestamptz becomes the zone's wall-clock timestamp, a timestamp the timestamptz of
    /// that wall-clock time there.
    AtTimeZone,
    /// gen_random_uuid(): a version 4 uuid.
    GenRandomUuid,
    /// current_setting(name [, missing_ok]).
    CurrentSetting,
    /// set_config(name, value, is_local): the value; the session takes the change when the
    /// statement succeeds (is_local is taken as false).
    SetConfig,
    /// pg_backend_pid(): the connection's process id (its cancel key's).
    BackendPid,
    /// What comparisons and sorting order an array value (its text form) by: PostgreSQL's
    /// element-by-element order (a shorter array first when one is the other's start,
    /// NULL elements last) as memcomparable bytes; `integers` for integer arrays.
    ArrayOrder {
        integers: bool,
    },
    /// array @> array (args: the container, the contained): every element of the second is
    /// in the first; NULL elements are in none.
    ArrayContains,
    /// array && array: an element (not NULL) in both.
    ArrayOverlap,
    /// A json/jsonb operator or function; `binary`: its documents are jsonb.
    Json {
        function: JsonFunction,
        binary: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Position in the input row.
    Column(usize),
    Literal(Value),
    /// Parameter $n+1.
    Parameter(usize),
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
        /// The result type (arithmetic range checks use it).
        data_type: DataType,
    },
    Not(Box<Expr>),
    Negate(Box<Expr>),
    IsNull {
        expr: Box<Expr>,
        negated: bool,
    },
    Cast {
        expr: Box<Expr>,
        to: DataType,
    },
    /// A value of an enum type: its text checked to be one of the type's labels (22P02
    /// otherwise) and kept, or with `order` the label's sort order (a float4), which
    /// comparisons and sorting use in place of the text.
    Enum {
        expr: Box<Expr>,
        enum_type: std::sync::Arc<crate::types::enums::EnumType>,
        order: bool,
    },
    Function {
        function: ScalarFunction,
        args: Vec<Expr>,
    },
    /// CASE [operand] WHEN .. THEN .. [ELSE ..] END (with an operand, each WHEN is compared
    /// to it with =).
    Case {
        operand: Option<Box<Expr>>,
        branches: Vec<(Expr, Expr)>,
        otherwise: Option<Box<Expr>>,
    },
    /// A pg_catalog function, operator or cast (`SystemCall`).
    System(Box<SystemCall>),
    /// A column of an enclosing query's row (a correlated subquery's reference): `depth`
    /// queries up, position `index` in that query's row.
    Outer {
        depth: usize,
        index: usize,
    },
    /// A subquery in an expression (run by `EvalContext::subqueries`).
    Subquery(SubqueryRef),
}

/// What a subquery in an expression yields.
#[derive(Debug, Clone)]
pub enum SubqueryKind {
    /// `(SELECT x ...)`: the one value of its one row, NULL without rows (21000 if more).
    Scalar,
    /// `EXISTS (SELECT ...)`.
    Exists,
    /// `left IN (SELECT x ...)`, with `left` over the current row.
    In(Box<Expr>),
    /// `ARRAY(SELECT x ...)`: the values of its rows as an array (text array form).
    Array,
}

#[derive(Debug)]
pub struct Subquery {
    pub kind: SubqueryKind,
    pub plan: crate::plan::QueryPlan,
    /// Reads columns of an enclosing query: run per row instead of once.
    pub correlated: bool,
}

/// A shared subquery; equal only to itself.
#[derive(Debug, Clone)]
pub struct SubqueryRef(pub std::sync::Arc<Subquery>);

impl PartialEq for SubqueryRef {
    fn eq(&self, other: &SubqueryRef) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Runs subqueries and resolves outer references during evaluation (the executor).
pub trait SubqueryRunner {
    fn subquery(
        &self,
        subquery: &Subquery,
        row: &[Value],
        context: &EvalContext,
    ) -> SqlResult<Value>;
    fn outer(&self, depth: usize, index: usize) -> SqlResult<Value>;
}

/// set_config's changes of a statement: (name, value, is_local).
pub type SettingChanges = std::cell::RefCell<Vec<(String, String, bool)>>;

/// What evaluation needs besides the row.
pub struct EvalContext<'a> {
    pub params: &'a [Value],
    pub database_name: &'a str,
    pub user_name: &'a str,
    /// When the transaction started (microseconds since 2000-01-01 UTC): now() and
    /// CURRENT_TIMESTAMP give this one value for the whole transaction, as in PostgreSQL.
    pub transaction_timestamp: i64,
    /// None outside the executor's query path (a subquery is then an error).
    pub subqueries: Option<&'a dyn SubqueryRunner>,
    /// The session's currval/lastval (None: nextval notes nothing, currval fails).
    pub sequences: Option<&'a crate::catalog::SessionSequences>,
    /// The session's settings (current_setting; None: no session).
    pub settings: Option<&'a std::collections::BTreeMap<String, String>>,
    /// set_config's changes, applied to the session when the statement succeeds.
    pub setting_changes: Option<&'a SettingChanges>,
}

impl<'a> EvalContext<'a> {
    /// The context for folding a constant while binding: no parameters, session or
    /// transaction (an expression needing them is not constant there).
    pub fn constant() -> EvalContext<'static> {
        EvalContext {
            params: &[],
            database_name: "",
            user_name: "",
            transaction_timestamp: 0,
            subqueries: None,
            sequences: None,
            settings: None,
            setting_changes: None,
        }
    }

    fn runner(&self) -> SqlResult<&'a dyn SubqueryRunner> {
        self.subqueries
            .ok_or_else(|| SqlError::unsupported("a subquery in this statement"))
    }
}

/// How many of a function's arguments are operands evaluated on the row: all but the key
/// template of `ExtremeByKey`, an expression over column 0 that its evaluation applies to each
/// operand's value (walkers that read, move or fold the row's columns must not see it).
fn operand_count(function: ScalarFunction, args: &[Expr]) -> usize {
    match function {
        ScalarFunction::ExtremeByKey { .. } => args.len().saturating_sub(1),
        _ => args.len(),
    }
}

impl Expr {
    /// True if the expression reads no column (a literal, a parameter, or built from them).
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Column(_) => false,
            Expr::Literal(_) | Expr::Parameter(_) => true,
            Expr::Binary { left, right, .. } => left.is_constant() && right.is_constant(),
            Expr::Not(e)
            | Expr::Negate(e)
            | Expr::Cast { expr: e, .. }
            | Expr::Enum { expr: e, .. } => e.is_constant(),
            Expr::IsNull { expr, .. } => expr.is_constant(),
            Expr::Function { function, args } => {
                !matches!(
                    function,
                    ScalarFunction::Random
                        | ScalarFunction::GenRandomUuid
                        | ScalarFunction::ClockTimestamp
                        | ScalarFunction::SetConfig
                ) && args[..operand_count(*function, args)]
                    .iter()
                    .all(Expr::is_constant)
            }
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => {
                operand.as_ref().is_none_or(|e| e.is_constant())
                    && otherwise.as_ref().is_none_or(|e| e.is_constant())
                    && branches
                        .iter()
                        .all(|(when, then)| when.is_constant() && then.is_constant())
            }
            Expr::System(call) => call.is_constant(),
            // Fixed for one run of the (sub)query that reads it.
            Expr::Outer { .. } => true,
            Expr::Subquery(subquery) => {
                !subquery.0.correlated
                    && match &subquery.0.kind {
                        SubqueryKind::In(left) => left.is_constant(),
                        _ => true,
                    }
            }
        }
    }

    /// The value of a column, literal or parameter, without copying it (None: another
    /// expression, or a parameter that is missing).
    fn direct<'v>(&'v self, row: &'v [Value], context: &'v EvalContext) -> Option<&'v Value> {
        match self {
            Expr::Column(index) => row.get(*index),
            Expr::Literal(value) => Some(value),
            Expr::Parameter(index) => context.params.get(*index),
            _ => None,
        }
    }

    /// Adds the positions of the row's columns this expression reads to `columns`; false if
    /// it may read more than its `Column`s (a correlated subquery is given the whole row).
    pub fn columns_read(&self, columns: &mut Vec<usize>) -> bool {
        match self {
            Expr::Column(index) => {
                columns.push(*index);
                true
            }
            Expr::Subquery(subquery) if subquery.0.correlated => false,
            _ => self
                .children()
                .into_iter()
                .all(|child| child.columns_read(columns)),
        }
    }

    /// True if the expression holds a subquery anywhere.
    pub fn contains_subquery(&self) -> bool {
        matches!(self, Expr::Subquery(_))
            || self.children().into_iter().any(Expr::contains_subquery)
    }

    /// False if the expression calls a function whose value depends on more than its
    /// arguments (the time, the session, chance or a sequence), as PostgreSQL requires of an
    /// index predicate. Casts that read the session's time zone are not caught.
    pub fn is_immutable(&self) -> bool {
        let own = match self {
            Expr::Function { function, .. } => !matches!(
                function,
                ScalarFunction::CurrentDatabase
                    | ScalarFunction::CurrentSchema
                    | ScalarFunction::CurrentUser
                    | ScalarFunction::Random
                    | ScalarFunction::Now
                    | ScalarFunction::CurrentDate
                    | ScalarFunction::LocalTimestamp
                    | ScalarFunction::ClockTimestamp
                    | ScalarFunction::GenRandomUuid
                    | ScalarFunction::CurrentSetting
                    | ScalarFunction::SetConfig
                    | ScalarFunction::BackendPid
            ),
            Expr::System(call) => !call.function.is_volatile(),
            Expr::Subquery(_) | Expr::Parameter(_) | Expr::Outer { .. } => false,
            _ => true,
        };
        own && self.children().into_iter().all(Expr::is_immutable)
    }

    /// True if evaluating the expression reads nothing but its row, the parameters and outer
    /// values, changes nothing and gives the same value each time within a statement: a scan
    /// may then run it on a row still in its page, with the page latched (no subquery or
    /// system call, which read the database; no chance or clock; no setting, which a
    /// set_config of the same statement may change between rows).
    pub fn is_pure(&self) -> bool {
        let own = match self {
            Expr::Function { function, .. } => !matches!(
                function,
                ScalarFunction::Random
                    | ScalarFunction::ClockTimestamp
                    | ScalarFunction::GenRandomUuid
                    | ScalarFunction::SetConfig
                    | ScalarFunction::CurrentSetting
            ),
            Expr::System(_) | Expr::Subquery(_) => false,
            _ => true,
        };
        own && self.children().into_iter().all(Expr::is_pure)
    }

    /// The expressions this one evaluates on the same row (a subquery's plan is not one).
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Column(_) | Expr::Literal(_) | Expr::Parameter(_) | Expr::Outer { .. } => {
                Vec::new()
            }
            Expr::Binary { left, right, .. } => vec![left, right],
            Expr::Not(e)
            | Expr::Negate(e)
            | Expr::Cast { expr: e, .. }
            | Expr::Enum { expr: e, .. } => vec![e],
            Expr::IsNull { expr, .. } => vec![expr],
            Expr::Function { function, args } => {
                args[..operand_count(*function, args)].iter().collect()
            }
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => {
                let mut children: Vec<&Expr> = operand.iter().map(|e| &**e).collect();
                for (when, then) in branches {
                    children.push(when);
                    children.push(then);
                }
                children.extend(otherwise.iter().map(|e| &**e));
                children
            }
            Expr::System(call) => call.args.iter().collect(),
            Expr::Subquery(subquery) => match &subquery.0.kind {
                SubqueryKind::In(left) => vec![left],
                _ => Vec::new(),
            },
        }
    }

    /// `children`, mutable. A subquery's IN operand is shared: it is copied on write.
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::Column(_) | Expr::Literal(_) | Expr::Parameter(_) | Expr::Outer { .. } => {
                Vec::new()
            }
            Expr::Binary { left, right, .. } => vec![left, right],
            Expr::Not(e)
            | Expr::Negate(e)
            | Expr::Cast { expr: e, .. }
            | Expr::Enum { expr: e, .. } => vec![e],
            Expr::IsNull { expr, .. } => vec![expr],
            Expr::Function { function, args } => {
                let count = operand_count(*function, args);
                args[..count].iter_mut().collect()
            }
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => {
                let mut children: Vec<&mut Expr> = operand.iter_mut().map(|e| &mut **e).collect();
                for (when, then) in branches {
                    children.push(when);
                    children.push(then);
                }
                children.extend(otherwise.iter_mut().map(|e| &mut **e));
                children
            }
            Expr::System(call) => call.args.iter_mut().collect(),
            Expr::Subquery(_) => Vec::new(),
        }
    }

    pub fn eval(&self, row: &[Value], context: &EvalContext) -> SqlResult<Value> {
        match self {
            Expr::Column(index) => Ok(row[*index].clone()),
            Expr::Literal(value) => Ok(value.clone()),
            Expr::Parameter(index) => context.params.get(*index).cloned().ok_or_else(|| {
                SqlError::new(
                    sqlstate::PROTOCOL_VIOLATION,
                    format!("there is no parameter ${}", index + 1),
                )
            }),
            Expr::Binary {
                op,
                left,
                right,
                data_type,
            } => {
                if matches!(op, BinaryOp::And | BinaryOp::Or) {
                    return eval_logic(*op, left, right, row, context);
                }
                // A comparison of columns, literals and parameters compares them in place
                // (a scan's filter would otherwise copy each row's text to compare it).
                if op.is_comparison() {
                    if let (Some(l), Some(r)) =
                        (left.direct(row, context), right.direct(row, context))
                    {
                        return compare(*op, l, r);
                    }
                }
                let left = left.eval(row, context)?;
                let right = right.eval(row, context)?;
                eval_binary(*op, left, right, *data_type)
            }
            Expr::Not(expr) => Ok(match expr.eval(row, context)? {
                Value::Null => Value::Null,
                value => Value::Bool(!truth(&value)?),
            }),
            Expr::Negate(expr) => match expr.eval(row, context)? {
                Value::Int(v) => v.checked_neg().map(Value::Int).ok_or_else(out_of_range),
                Value::Float(v) => Ok(Value::Float(-v)),
                Value::Float4(v) => Ok(Value::Float4(-v)),
                Value::Numeric(v) => Ok(Value::Numeric(-v)),
                Value::Interval(v) => Ok(Value::Interval(v.negate())),
                Value::Null => Ok(Value::Null),
                _ => Err(SqlError::mismatch("cannot negate a non-numeric value")),
            },
            Expr::IsNull { expr, negated } => {
                Ok(Value::Bool(expr.eval(row, context)?.is_null() != *negated))
            }
            Expr::Cast { expr, to } => expr.eval(row, context)?.cast(*to),
            Expr::Enum {
                expr,
                enum_type,
                order,
            } => match expr.eval(row, context)? {
                Value::Null => Ok(Value::Null),
                Value::Text(text) if *order => Ok(Value::Float4(enum_type.sort_order(&text)?)),
                Value::Text(text) => enum_type.check(&text).map(|_| Value::Text(text)),
                other => Err(SqlError::mismatch(format!(
                    "{other:?} is not a value of enum {}",
                    enum_type.name
                ))),
            },
            Expr::Function { function, args } => functions::eval(*function, args, row, context),
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => {
                let operand = operand.as_ref().map(|e| e.eval(row, context)).transpose()?;
                for (when, then) in branches {
                    let when = when.eval(row, context)?;
                    let matched = match &operand {
                        Some(operand) => operand.compare(&when)? == Some(Ordering::Equal),
                        None => when == Value::Bool(true),
                    };
                    if matched {
                        return then.eval(row, context);
                    }
                }
                match otherwise {
                    Some(otherwise) => otherwise.eval(row, context),
                    None => Ok(Value::Null),
                }
            }
            Expr::System(call) => call.eval(row, context),
            Expr::Outer { depth, index } => context.runner()?.outer(*depth, *index),
            Expr::Subquery(subquery) => context.runner()?.subquery(&subquery.0, row, context),
        }
    }
}

fn out_of_range() -> SqlError {
    SqlError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
}

/// A bound call of a pg_catalog function, operator or cast: the function with its argument
/// expressions.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemCall {
    pub function: SystemFunction,
    pub args: Vec<Expr>,
}

impl SystemCall {
    pub fn is_constant(&self) -> bool {
        !self.function.is_volatile() && self.args.iter().all(Expr::is_constant)
    }

    /// CASE evaluates its results lazily (args: condition, result pairs, then the ELSE
    /// result); every other function gets its argument values.
    pub fn eval(&self, row: &[Value], context: &EvalContext) -> SqlResult<Value> {
        if self.function.function == Function::Case {
            let (pairs, else_value) = self.args.split_at(self.args.len() - 1);
            for pair in pairs.chunks(2) {
                if truth(&pair[0].eval(row, context)?)? {
                    return pair[1].eval(row, context);
                }
            }
            return else_value[0].eval(row, context);
        }
        let values: Vec<Value> = self
            .args
            .iter()
            .map(|arg| arg.eval(row, context))
            .collect::<SqlResult<_>>()?;
        let search_path = context.settings.and_then(|s| s.get("search_path"));
        self.function.eval(
            &values,
            context.user_name,
            context.sequences,
            search_path.map(String::as_str),
        )
    }
}

/// Three-valued AND/OR, evaluating the right side only when needed.
fn eval_logic(
    op: BinaryOp,
    left: &Expr,
    right: &Expr,
    row: &[Value],
    context: &EvalContext,
) -> SqlResult<Value> {
    let left = left.eval(row, context)?;
    let decided = matches!(
        (op, &left),
        (BinaryOp::And, Value::Bool(false)) | (BinaryOp::Or, Value::Bool(true))
    );
    if decided {
        return Ok(left);
    }
    let right = right.eval(row, context)?;
    let (l, r) = (tri(&left)?, tri(&right)?);
    Ok(match op {
        BinaryOp::And => match (l, r) {
            (Some(false), _) | (_, Some(false)) => Value::Bool(false),
            (Some(true), Some(true)) => Value::Bool(true),
            _ => Value::Null,
        },
        _ => match (l, r) {
            (Some(true), _) | (_, Some(true)) => Value::Bool(true),
            (Some(false), Some(false)) => Value::Bool(false),
            _ => Value::Null,
        },
    })
}

fn tri(value: &Value) -> SqlResult<Option<bool>> {
    match value {
        Value::Null => Ok(None),
        other => truth(other).map(Some),
    }
}

/// A comparison operator (`BinaryOp::is_comparison`) on two values: NULL if either is.
fn compare(op: BinaryOp, left: &Value, right: &Value) -> SqlResult<Value> {
    let Some(ordering) = left.compare(right)? else {
        return Ok(Value::Null);
    };
    let result = match op {
        BinaryOp::Equal => ordering == Ordering::Equal,
        BinaryOp::NotEqual => ordering != Ordering::Equal,
        BinaryOp::Less => ordering == Ordering::Less,
        BinaryOp::LessOrEqual => ordering != Ordering::Greater,
        BinaryOp::Greater => ordering == Ordering::Greater,
        _ => ordering != Ordering::Less,
    };
    Ok(Value::Bool(result))
}

pub(crate) fn eval_binary(
    op: BinaryOp,
    left: Value,
    right: Value,
    data_type: DataType,
) -> SqlResult<Value> {
    if matches!(op, BinaryOp::IsDistinctFrom | BinaryOp::IsNotDistinctFrom) {
        let same = match (left.is_null(), right.is_null()) {
            (true, true) => true,
            (false, false) => left.compare(&right)? == Some(Ordering::Equal),
            _ => false,
        };
        return Ok(Value::Bool(same == (op == BinaryOp::IsNotDistinctFrom)));
    }
    if op.is_comparison() {
        return compare(op, &left, &right);
    }
    if left.is_null() || right.is_null() {
        return Ok(Value::Null);
    }
    match (op, left, right) {
        (BinaryOp::Concat, left, right) => {
            Ok(Value::Text(concat_text(&left) + &concat_text(&right)))
        }
        (BinaryOp::Like | BinaryOp::NotLike, Value::Text(text), Value::Text(pattern)) => {
            let matched = like(text.as_bytes(), pattern.as_bytes());
            Ok(Value::Bool(matched == (op == BinaryOp::Like)))
        }
        (BinaryOp::ILike | BinaryOp::NotILike, Value::Text(text), Value::Text(pattern)) => {
            let (text, pattern) = (text.to_lowercase(), pattern.to_lowercase());
            let matched = like(text.as_bytes(), pattern.as_bytes());
            Ok(Value::Bool(matched == (op == BinaryOp::ILike)))
        }
        (op, left, right)
            if data_type.is_datetime()
                || data_type == DataType::Interval
                || left_is_date(&left, &right) =>
        {
            eval_datetime(op, left, right)
        }
        (op, Value::Int(a), Value::Int(b)) if data_type.is_integer() || !data_type.is_numeric() => {
            let result = match op {
                BinaryOp::Add => a.checked_add(b),
                BinaryOp::Subtract => a.checked_sub(b),
                BinaryOp::Multiply => a.checked_mul(b),
                BinaryOp::Divide | BinaryOp::Modulo if b == 0 => return Err(division_by_zero()),
                BinaryOp::Divide => a.checked_div(b),
                BinaryOp::Modulo => a.checked_rem(b),
                BinaryOp::BitAnd => Some(a & b),
                BinaryOp::BitOr => Some(a | b),
                _ => return Err(SqlError::mismatch("operator does not apply to integers")),
            };
            let value = result.ok_or_else(out_of_range)?;
            let checked = data_type.check_integer(value).map_err(|_| out_of_range())?;
            Ok(Value::Int(checked))
        }
        (op, a, b) if !data_type.is_float() && a.as_decimal().is_some() => {
            let (Some(a), Some(b)) = (a.as_decimal(), b.as_decimal()) else {
                return Err(SqlError::mismatch("operator does not apply to these types"));
            };
            let result = match op {
                BinaryOp::Add => numeric::add(&a, &b)?,
                BinaryOp::Subtract => numeric::subtract(&a, &b)?,
                BinaryOp::Multiply => numeric::multiply(&a, &b)?,
                BinaryOp::Divide => numeric::divide(&a, &b)?,
                BinaryOp::Modulo => numeric::modulo(&a, &b)?,
                _ => return Err(SqlError::mismatch("operator does not apply to numeric")),
            };
            Ok(Value::Numeric(result))
        }
        (op, a, b) => {
            let (Some(a), Some(b)) = (a.as_f64(), b.as_f64()) else {
                return Err(SqlError::mismatch("operator does not apply to these types"));
            };
            let result = match op {
                BinaryOp::Add => a + b,
                BinaryOp::Subtract => a - b,
                BinaryOp::Multiply => a * b,
                BinaryOp::Divide if b == 0.0 => return Err(division_by_zero()),
                BinaryOp::Divide => a / b,
                BinaryOp::Modulo => a % b,
                _ => return Err(SqlError::mismatch("operator does not apply to these types")),
            };
            float_result(result, a.is_infinite() || b.is_infinite(), data_type)
        }
    }
}

fn left_is_date(left: &Value, right: &Value) -> bool {
    matches!(
        left,
        Value::Date(_) | Value::Timestamp(_) | Value::TimestampTz(_) | Value::Interval(_)
    ) || matches!(right, Value::Date(_) | Value::Interval(_))
}

/// A float result in its type, 22003 on an overflow to infinity (as PostgreSQL checks).
pub(crate) fn float_result(
    result: f64,
    infinite_input: bool,
    data_type: DataType,
) -> SqlResult<Value> {
    let value = if data_type == DataType::Float4 {
        Value::Float4(result as f32)
    } else {
        Value::Float(result)
    };
    let overflow = value.as_f64().is_some_and(f64::is_infinite) && !infinite_input;
    if overflow {
        return Err(SqlError::new(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: overflow",
        ));
    }
    Ok(value)
}

/// date + integer, integer + date, date - integer (days), date - date (days); a date or
/// timestamp ± interval, timestamp - timestamp (an interval), interval ± interval, interval
/// * or / a number.
fn eval_datetime(op: BinaryOp, left: Value, right: Value) -> SqlResult<Value> {
    use crate::types::interval::{add_to_timestamp, add_to_timestamptz, Interval};
    let shifted = |value: Value, interval: Interval| -> SqlResult<Value> {
        Ok(match value {
            Value::Timestamp(t) => Value::Timestamp(add_to_timestamp(t, interval)?),
            Value::TimestampTz(t) => Value::TimestampTz(add_to_timestamptz(
                t,
                interval,
                &crate::types::zone::current(),
            )?),
            Value::Date(d) => {
                Value::Timestamp(add_to_timestamp(datetime::date_to_timestamp(d), interval)?)
            }
            other => return Err(SqlError::mismatch(format!("{other:?} + interval"))),
        })
    };
    let factor = |value: &Value| {
        value
            .as_f64()
            .ok_or_else(|| SqlError::mismatch("interval * ?"))
    };
    match (op, left, right) {
        (BinaryOp::Add, Value::Interval(a), Value::Interval(b)) => {
            Ok(Value::Interval(a.checked_add(b)?))
        }
        (BinaryOp::Subtract, Value::Interval(a), Value::Interval(b)) => {
            Ok(Value::Interval(a.checked_add(b.negate())?))
        }
        (BinaryOp::Add, value, Value::Interval(i)) | (BinaryOp::Add, Value::Interval(i), value) => {
            shifted(value, i)
        }
        (BinaryOp::Subtract, value, Value::Interval(i)) => shifted(value, i.negate()),
        // timestamp - timestamptz: the timestamp read in the session's zone.
        (BinaryOp::Subtract, Value::Timestamp(a), Value::TimestampTz(b)) => Ok(Value::Interval(
            Interval::between(crate::types::zone::current().to_utc(a), b)?,
        )),
        (BinaryOp::Subtract, Value::TimestampTz(a), Value::Timestamp(b)) => Ok(Value::Interval(
            Interval::between(a, crate::types::zone::current().to_utc(b))?,
        )),
        (
            BinaryOp::Subtract,
            Value::Timestamp(a) | Value::TimestampTz(a),
            Value::Timestamp(b) | Value::TimestampTz(b),
        ) => Ok(Value::Interval(Interval::between(a, b)?)),
        (BinaryOp::Multiply, Value::Interval(i), n)
        | (BinaryOp::Multiply, n, Value::Interval(i)) => Ok(Value::Interval(i.scale(factor(&n)?)?)),
        (BinaryOp::Divide, Value::Interval(i), n) => Ok(Value::Interval(i.divide(factor(&n)?)?)),
        (BinaryOp::Add, Value::Date(d), Value::Int(n))
        | (BinaryOp::Add, Value::Int(n), Value::Date(d)) => {
            Ok(Value::Date(datetime::add_days(d, n)?))
        }
        (BinaryOp::Subtract, Value::Date(d), Value::Int(n)) => {
            let n = n.checked_neg().ok_or_else(out_of_range)?;
            Ok(Value::Date(datetime::add_days(d, n)?))
        }
        (BinaryOp::Subtract, Value::Date(a), Value::Date(b)) => {
            if [a, b]
                .iter()
                .any(|d| *d == datetime::DATE_INFINITY || *d == datetime::DATE_NEG_INFINITY)
            {
                return Err(SqlError::new(
                    sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
                    "cannot subtract infinite dates",
                ));
            }
            Ok(Value::Int(a as i64 - b as i64))
        }
        (op, left, right) => Err(SqlError::new(
            sqlstate::UNDEFINED_FUNCTION,
            format!(
                "operator does not exist: {:?} {op:?} {:?}",
                left.to_text().unwrap_or_default(),
                right.to_text().unwrap_or_default()
            ),
        )),
    }
}

fn division_by_zero() -> SqlError {
    SqlError::new(sqlstate::DIVISION_BY_ZERO, "division by zero")
}

/// SQL LIKE with `%` and `_` (and `\` escaping the next character), on bytes.
/// An operand of `||` as its cast to text shows it (a bool is `true`, not `t`).
fn concat_text(value: &Value) -> String {
    match value {
        Value::Bool(v) => v.to_string(),
        other => other.to_text().unwrap_or_default(),
    }
}

fn like(text: &[u8], pattern: &[u8]) -> bool {
    match pattern.first() {
        None => text.is_empty(),
        Some(b'%') => {
            let rest = &pattern[1..];
            if rest.is_empty() {
                return true;
            }
            (0..=text.len()).any(|skip| like(&text[skip..], rest))
        }
        Some(b'_') => {
            // One character: skip a whole UTF-8 sequence.
            let width = text.first().map_or(0, |b| utf8_width(*b));
            width > 0 && like(&text[width.min(text.len())..], &pattern[1..])
        }
        Some(b'\\') if pattern.len() > 1 => {
            text.first() == Some(&pattern[1]) && like(&text[1..], &pattern[2..])
        }
        Some(c) => text.first() == Some(c) && like(&text[1..], &pattern[1..]),
    }
}

fn utf8_width(first: u8) -> usize {
    match first {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns() {
        assert!(like(b"hello", b"h%o"));
        assert!(like(b"hello", b"_ello"));
        assert!(!like(b"hello", b"h_o"));
        assert!(like(b"50%", b"50\\%"));
    }

    #[test]
    fn arithmetic_checks_ranges() {
        let add = |a, b, t| eval_binary(BinaryOp::Add, Value::Int(a), Value::Int(b), t);
        assert_eq!(add(1, 2, DataType::Int4), Ok(Value::Int(3)));
        assert_eq!(
            add(i32::MAX as i64, 1, DataType::Int4).unwrap_err().code,
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE
        );
        let divide = eval_binary(
            BinaryOp::Divide,
            Value::Int(1),
            Value::Int(0),
            DataType::Int4,
        );
        assert_eq!(divide.unwrap_err().code, sqlstate::DIVISION_BY_ZERO);
        let null = eval_binary(BinaryOp::Equal, Value::Null, Value::Int(1), DataType::Bool);
        assert_eq!(null, Ok(Value::Null));
    }
}

//! The functions, operators and casts that catalog queries use: `pg_table_is_visible`,
//! `format_type`, `pg_get_indexdef`, the regex operators, `= ANY(array)`, `'t'::regclass`,
//! CASE, nextval... as a table of functions evaluated over the catalog.
//!
//! A call's life:
//! 1. The binder (`plan/bind/system.rs`) picks the `Function` for what it does not handle
//!    itself and makes a `SystemFunction`: the function with a `Snapshot` of the catalog
//!    taken at bind time, a constant regex pattern compiled and a constant sequence looked
//!    up.
//! 2. The plan holds it with its argument expressions (`plan::expr::SystemCall`).
//! 3. At run time the expression evaluates the arguments and `SystemFunction::eval` computes
//!    the value from them; CASE, whose arguments are evaluated lazily, stays with the
//!    expression.
//!
//! Data flows one way: the binder and the plan use this file; it uses the catalog only.

use crate::ident::quote_ident;
use std::sync::Arc;

use crate::types::pattern::{Pattern, PatternOptions};

use super::{array, Snapshot, OWNER_ROLE_OID, PUBLIC_SCHEMA};
use crate::catalog::{Catalog, Sequence, SessionSequences};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::{truth, Value};

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
    "array_remove",
    "array_append",
    "array_prepend",
    "array_cat",
    "array_to_string",
    "array_upper",
    "array_lower",
    "array_length",
    "cardinality",
    "pg_encoding_to_char",
    "to_regtype",
    "to_regclass",
    "pg_partition_ancestors",
    "pg_relation_is_publishable",
    "pg_get_statisticsobjdef_columns",
    "pg_get_partkeydef",
    "pg_get_viewdef",
    "pg_get_triggerdef",
    "pg_get_serial_sequence",
    "pg_is_in_recovery",
    "pg_cancel_backend",
    "pg_terminate_backend",
    "nextval",
    "currval",
    "setval",
    "lastval",
    "pg_sequence_last_value",
    "acldefault",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    TableIsVisible,
    /// pg_type_is_visible(oid): every type is in pg_catalog or public, both on the path.
    TypeIsVisible,
    GetUserById,
    FormatType,
    /// pg_get_expr: the stored expression text as it is.
    GetExpr,
    GetIndexDef,
    /// pg_get_viewdef(view oid [, pretty]): the view's query.
    GetViewDef,
    /// pg_get_serial_sequence(table, column): the sequence of a SERIAL or identity column,
    /// or the one OWNED BY it, schema-qualified (NULL for none).
    SerialSequence,
    GetConstraintDef,
    /// Always true (one superuser owns everything).
    True,
    /// Always NULL (no comments, no statistics objects, no partitions...).
    Null,
    CurrentSchemas,
    ArrayPosition,
    /// array_remove(array, value): the array without the elements equal to `value`.
    ArrayRemove,
    /// array_append(array, element), array_prepend(element, array), array_cat(a, b): a NULL
    /// array is empty, a NULL element is NULL in the array.
    ArrayAppend,
    ArrayPrepend,
    ArrayCat,
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
    /// 'name'::regclass, 'name'::regtype, 'name'::regnamespace: the oid (an error if there
    /// is none).
    RegClassOid,
    RegNamespaceOid,
    RegTypeOid,
    /// 'pg_catalog.f'::regproc: the function's name.
    RegProcName,
    /// nextval(sequence), currval(sequence), setval(sequence, value [, is_called]),
    /// lastval() (`crate::sequence`).
    NextVal,
    CurrVal,
    SetVal,
    /// pg_sequence_last_value(sequence): `Sequence::last_value` if is_called, else NULL.
    SequenceLastValue,
    /// The `last_value` column of `SELECT ... FROM sequence`: the last value handed out,
    /// or the next one if none was (is_called false), as PostgreSQL shows it.
    SequenceShownValue,
    LastVal,
    /// pg_cancel_backend(pid), pg_terminate_backend(pid [, timeout]): true if a session had
    /// that pid and was signalled (`catalog::activity`).
    SignalBackend(crate::catalog::activity::BackendSignal),
}

/// A system function as bound: what its calls need besides their argument values.
#[derive(Clone)]
pub struct SystemFunction {
    pub function: Function,
    snapshot: Arc<Snapshot>,
    /// The compiled pattern of a regex match whose pattern is a constant.
    regex: Option<Arc<Pattern>>,
    /// The sequence of a sequence function whose argument is a constant.
    sequence: Option<Arc<Sequence>>,
    /// The sessions a signal function signals.
    cluster: Arc<crate::catalog::Cluster>,
}

impl std::fmt::Debug for SystemFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.function.fmt(f)
    }
}

/// Two calls are equal when their functions are (their snapshots are of one catalog).
impl PartialEq for SystemFunction {
    fn eq(&self, other: &Self) -> bool {
        self.function == other.function
    }
}

impl SystemFunction {
    /// A call of `function` that reads the catalog as it is now.
    pub fn new(function: Function, catalog: &Catalog) -> SystemFunction {
        SystemFunction {
            function,
            snapshot: Arc::new(Snapshot::of(catalog)),
            regex: None,
            sequence: None,
            cluster: catalog.cluster().clone(),
        }
    }

    /// A regex match; a constant `pattern` is compiled now (an invalid one fails the bind).
    pub fn regex_match(
        negated: bool,
        insensitive: bool,
        pattern: Option<&str>,
        catalog: &Catalog,
    ) -> SqlResult<SystemFunction> {
        let regex = match pattern {
            Some(pattern) => Some(Arc::new(compile(pattern, insensitive)?)),
            None => None,
        };
        Ok(SystemFunction {
            regex,
            ..SystemFunction::new(
                Function::RegexMatch {
                    negated,
                    insensitive,
                },
                catalog,
            )
        })
    }

    /// nextval, currval or setval; a constant sequence argument (a name, or the oid that
    /// 's'::regclass gives) is looked up now, as PostgreSQL does when it parses the call.
    pub fn sequence_call(
        function: Function,
        argument: Option<&Value>,
        catalog: &Catalog,
    ) -> SqlResult<SystemFunction> {
        let mut bound = SystemFunction::new(function, catalog);
        if let Some(argument) = argument.filter(|argument| !argument.is_null()) {
            let info = bound.snapshot.sequence(argument);
            let sequence = info.ok_or_else(|| undefined_relation(argument))?;
            bound.sequence = Some(sequence.sequence.clone());
        }
        Ok(bound)
    }

    /// True for the sequence functions: a call with constant arguments is not a constant.
    pub fn is_volatile(&self) -> bool {
        matches!(
            self.function,
            Function::NextVal
                | Function::CurrVal
                | Function::SetVal
                | Function::LastVal
                | Function::SequenceLastValue
                | Function::SequenceShownValue
                | Function::SignalBackend(_)
        )
    }

    /// nextval, currval, setval and lastval (NULL arguments give NULL, as the functions are
    /// strict in PostgreSQL).
    fn eval_sequence(
        &self,
        values: &[Value],
        sequences: Option<&SessionSequences>,
    ) -> SqlResult<Value> {
        let no_session = || SqlError::unsupported("sequence functions outside a session");
        if self.function == Function::LastVal {
            return Ok(Value::Int(sequences.ok_or_else(no_session)?.last()?));
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
            Function::NextVal => sequence.next_value(sequences)?,
            Function::CurrVal => sequences.ok_or_else(no_session)?.current(&sequence.name)?,
            Function::SequenceLastValue => match sequence.last_value()? {
                (value, true) => value,
                (_, false) => return Ok(Value::Null),
            },
            Function::SequenceShownValue => sequence.last_value()?.0,
            _ => {
                let Value::Int(value) = values[1] else {
                    return Err(SqlError::mismatch("setval takes a bigint value"));
                };
                let is_called = values.get(2).map(truth).transpose()?.unwrap_or(true);
                sequence.set_value(value, is_called, sequences)?
            }
        };
        Ok(Value::Int(value))
    }

    /// The call's value from its argument values (CASE is not evaluated here: its
    /// arguments are evaluated lazily by the expression that holds it). `user_name` and
    /// `sequences` are the session's.
    pub fn eval(
        &self,
        values: &[Value],
        user_name: &str,
        sequences: Option<&SessionSequences>,
        search_path: Option<&str>,
    ) -> SqlResult<Value> {
        use Function as F;
        if let F::SignalBackend(signal) = self.function {
            return Ok(match values.first() {
                Some(Value::Int(pid)) => {
                    let pid = i32::try_from(*pid).unwrap_or(0);
                    let signalled = self.cluster.activities().signal(pid, signal);
                    if !signalled {
                        log::warn!("PID {pid} is not a PostgreSQL backend process");
                    }
                    Value::Bool(signalled)
                }
                _ => Value::Null,
            });
        }
        if self.is_volatile() {
            return self.eval_sequence(values, sequences);
        }
        let snapshot = &self.snapshot;
        let text = |value: &str| Ok(Value::Text(value.to_string()));
        match self.function {
            F::True => return Ok(Value::Bool(true)),
            F::Null => return Ok(Value::Null),
            F::IsInRecovery => return Ok(Value::Bool(snapshot.in_recovery)),
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
            F::ArrayAppend | F::ArrayPrepend | F::ArrayCat => {
                let array = |value: &Value| match value {
                    Value::Null => Ok(Vec::new()),
                    value => array_of(value),
                };
                let elements = match self.function {
                    F::ArrayAppend => {
                        let mut elements = array(&values[0])?;
                        elements.push(values[1].to_text());
                        elements
                    }
                    F::ArrayPrepend => {
                        let mut elements = vec![values[0].to_text()];
                        elements.extend(array(&values[1])?);
                        elements
                    }
                    _ if values.iter().all(Value::is_null) => return Ok(Value::Null),
                    _ => {
                        let mut elements = array(&values[0])?;
                        elements.extend(array(&values[1])?);
                        elements
                    }
                };
                return text(&array::format(&elements));
            }
            _ if values.iter().any(Value::is_null) => return Ok(Value::Null),
            _ => {}
        }
        if values.first().is_some_and(Value::is_null) {
            return Ok(Value::Null);
        }
        match self.function {
            F::TypeIsVisible => Ok(Value::Bool(int_of(&values[0]).is_some_and(|oid| {
                snapshot.type_name(oid, None, false).is_some()
                    || snapshot
                        .tables
                        .iter()
                        .any(|table| table.row_type_oid() == oid)
            }))),
            F::TableIsVisible => Ok(Value::Bool(
                int_of(&values[0]).is_some_and(|oid| snapshot.relation_name(oid).is_some()),
            )),
            F::GetUserById => Ok(Value::Text(match int_of(&values[0]) {
                Some(OWNER_ROLE_OID) => user_name.to_string(),
                other => format!("unknown (OID={})", other.unwrap_or_default()),
            })),
            F::FormatType => {
                let oid = int_of(&values[0]).unwrap_or_default();
                let typmod = values.get(1).and_then(int_of);
                let qualified = !public_visible(search_path);
                Ok(Value::Text(
                    snapshot
                        .type_name(oid, typmod, qualified)
                        .unwrap_or_else(|| "???".into()),
                ))
            }
            F::GetExpr => Ok(values[0].clone()),
            F::SerialSequence => {
                let table_name = values[0].to_text().unwrap_or_default();
                let table = snapshot
                    .relation_oid(&table_name)
                    .and_then(|oid| snapshot.tables.iter().find(|t| t.oid == oid))
                    .ok_or_else(|| undefined_relation(&values[0]))?;
                // The column name is taken as it is (no case folding), as in PostgreSQL.
                let column = values[1].to_text().unwrap_or_default();
                let attnum = table.table.def.column_index(&column).ok_or_else(|| {
                    SqlError::new(
                        sqlstate::UNDEFINED_COLUMN,
                        format!(
                            "column \"{column}\" of relation \"{}\" does not exist",
                            table.name()
                        ),
                    )
                })? as i64
                    + 1;
                Ok(snapshot
                    .sequences
                    .iter()
                    .find(|info| info.owner == Some((table.oid, attnum)))
                    .map_or(Value::Null, |info| {
                        Value::Text(format!(
                            "{PUBLIC_SCHEMA}.{}",
                            quote_ident(&info.sequence.name)
                        ))
                    }))
            }
            F::GetViewDef => {
                let oid = int_of(&values[0]).unwrap_or_default();
                Ok(snapshot
                    .views
                    .iter()
                    .find(|(view_oid, _)| *view_oid == oid)
                    .map_or(Value::Null, |(_, view)| {
                        Value::Text(format!(" {};", view.def.query))
                    }))
            }
            F::GetIndexDef => {
                let oid = int_of(&values[0]).unwrap_or_default();
                let Some((table, index)) = snapshot.index_by_oid(oid) else {
                    return Ok(Value::Null);
                };
                let names: Vec<String> = (0..index.columns.len())
                    .map(|position| index.key(table, position).1)
                    .collect();
                // pg_get_indexdef(oid, n, pretty) with n > 0: the n-th column only.
                if let Some(column) = values.get(1).and_then(int_of).filter(|n| *n > 0) {
                    return Ok(names
                        .get(column as usize - 1)
                        .map_or(Value::Null, |name| Value::Text(name.to_string())));
                }
                Ok(Value::Text(index.definition(table)))
            }
            F::GetConstraintDef => {
                let oid = int_of(&values[0]).unwrap_or_default();
                if let Some((table, rule)) = snapshot.rule_by_oid(oid) {
                    return Ok(Value::Text(snapshot.rule_definition(table, rule)));
                }
                let Some((table, index)) = snapshot.constraint_by_oid(oid) else {
                    return Ok(Value::Null);
                };
                let columns = &table.table.def.columns;
                let names: Vec<String> = index
                    .columns
                    .iter()
                    .map(|column| quote_ident(&columns[*column].name))
                    .collect();
                let kind = if index.primary {
                    "PRIMARY KEY"
                } else {
                    "UNIQUE"
                };
                Ok(Value::Text(format!("{kind} ({})", names.join(", "))))
            }
            F::ArrayRemove => {
                if values[0].is_null() {
                    return Ok(Value::Null);
                }
                let needle = values[1].to_text();
                let mut elements = array_of(&values[0])?;
                elements.retain(|element| *element != needle);
                Ok(Value::Text(array::format(&elements)))
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
                let index = int_of(&values[1]).unwrap_or(0);
                let Ok(elements) = array_of(&values[0]) else {
                    // A name is an array of its characters from 0 (pg_dump: typname[0]).
                    let name = values[0].to_text().unwrap_or_default();
                    return Ok(usize::try_from(index)
                        .ok()
                        .and_then(|index| name.chars().nth(index))
                        .map_or(Value::Null, |c| Value::Text(c.to_string())));
                };
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
                .and_then(|name| snapshot.type_oid(&name))
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
                    Some(regex) => regex.is_match(&subject)?,
                    None => {
                        let pattern = values[1].to_text().unwrap_or_default();
                        compile(&pattern, insensitive)?.is_match(&subject)?
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
                let qualified = !public_visible(search_path);
                Ok(Value::Text(
                    table_type
                        .or_else(|| snapshot.type_name(oid, None, qualified))
                        .unwrap_or_else(|| oid.to_string()),
                ))
            }
            F::RegNamespaceOid => {
                let name = values[0].to_text().unwrap_or_default();
                let name = super::split_qualified(&name).pop().unwrap_or_default();
                match name.as_str() {
                    "pg_catalog" => Ok(Value::Int(super::PG_CATALOG_NAMESPACE_OID)),
                    "information_schema" => Ok(Value::Int(super::INFORMATION_SCHEMA_NAMESPACE_OID)),
                    PUBLIC_SCHEMA => Ok(Value::Int(super::PUBLIC_NAMESPACE_OID)),
                    other => Err(SqlError::new(
                        sqlstate::INVALID_SCHEMA_NAME,
                        format!("schema \"{other}\" does not exist"),
                    )),
                }
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
                snapshot.type_oid(&name).map(Value::Int).ok_or_else(|| {
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
            | F::SequenceLastValue
            | F::SequenceShownValue
            | F::SignalBackend(_)
            | F::ArrayAppend
            | F::ArrayPrepend
            | F::ArrayCat
            | F::LastVal => {
                unreachable!("handled above (CASE by the expression holding the call)")
            }
        }
    }
}

pub(crate) fn undefined_relation(argument: &Value) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_TABLE,
        format!(
            "relation \"{}\" does not exist",
            argument.to_text().unwrap_or_default()
        ),
    )
}

fn compile(pattern: &str, insensitive: bool) -> SqlResult<Pattern> {
    let options = PatternOptions {
        case_insensitive: insensitive,
        ..PatternOptions::default()
    };
    Pattern::new(pattern, options)
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
    array::elements(&text).ok_or_else(|| {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })
}

/// Whether the public schema is on `search_path` (None: the default path, which has it).
fn public_visible(search_path: Option<&str>) -> bool {
    search_path.is_none_or(|path| {
        path.split(',')
            .any(|schema| schema.trim().trim_matches('"') == PUBLIC_SCHEMA)
    })
}

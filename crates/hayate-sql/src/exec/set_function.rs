//! The values of a set-returning function of a SELECT list (`Relation::ProjectSet`).

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::SetFunction;
use crate::system::array;
use crate::types::{json, Value};

/// The elements of an array value: its `{...}` text form, or an int2vector's numbers
/// separated by spaces (pg_index.indkey). NULL has none.
fn elements(value: &Value) -> SqlResult<Vec<Option<String>>> {
    let Some(text) = value.to_text() else {
        return Ok(Vec::new());
    };
    array::elements(&text).ok_or_else(|| {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })
}

/// The document of a json(b) set function's argument (None for NULL, which gives no rows),
/// in jsonb's normal form for the jsonb functions (an untyped literal arrives as text).
fn document(value: &Value, binary: bool) -> SqlResult<Option<json::Json>> {
    match value.to_text() {
        None => Ok(None),
        Some(text) => json::parse(&text, binary).map(Some),
    }
}

/// A field of a record's text form, as PostgreSQL's record_out writes it: nothing for NULL;
/// in double quotes (with `"` and `\` doubled) when empty or holding a quote, a backslash,
/// a parenthesis, a comma or ASCII white space (C's isspace).
fn record_field(value: Option<&str>) -> String {
    let Some(value) = value else {
        return String::new();
    };
    let quoted = value.is_empty()
        || value.chars().any(|c| {
            matches!(
                c,
                '"' | '\\' | '(' | ')' | ',' | ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c'
            )
        });
    if !quoted {
        return value.to_string();
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push(c);
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The 22023 of a json(b) set function applied to a document of the wrong kind.
fn wrong_kind(message: String) -> SqlError {
    SqlError::new(sqlstate::INVALID_PARAMETER_VALUE, message)
}

/// What PostgreSQL calls a document's kind in these errors.
fn kind(document: &json::Json) -> &'static str {
    match document {
        json::Json::Array(_) => "an array",
        json::Json::Object(_) => "an object",
        _ => "a scalar",
    }
}

/// The rows `function` returns for these argument values.
pub(super) fn values(function: SetFunction, args: &[Value]) -> SqlResult<Vec<Value>> {
    Ok(match function {
        SetFunction::JsonElements { text, binary } => match document(&args[0], binary)? {
            None => Vec::new(),
            Some(json::Json::Array(elements)) => elements
                .iter()
                .map(|element| match text {
                    true => json::text_of(element).map_or(Value::Null, Value::Text),
                    false => Value::Text(json::format(element)),
                })
                .collect(),
            Some(other) if binary => {
                return Err(wrong_kind(format!(
                    "cannot extract elements from {}",
                    kind(&other)
                )))
            }
            Some(_) => {
                let name = if text {
                    "json_array_elements_text"
                } else {
                    "json_array_elements"
                };
                return Err(wrong_kind(format!("cannot call {name} on a non-array")));
            }
        },
        SetFunction::JsonKeys { binary } => match document(&args[0], binary)? {
            None => Vec::new(),
            Some(json::Json::Object(pairs)) => {
                pairs.into_iter().map(|(key, _)| Value::Text(key)).collect()
            }
            Some(other) => {
                let name = if binary {
                    "jsonb_object_keys"
                } else {
                    "json_object_keys"
                };
                return Err(wrong_kind(format!(
                    "cannot call {name} on {}",
                    kind(&other)
                )));
            }
        },
        SetFunction::JsonEach { text, binary } => match document(&args[0], binary)? {
            None => Vec::new(),
            Some(json::Json::Object(pairs)) => pairs
                .iter()
                .map(|(key, value)| {
                    let value = match text {
                        true => json::text_of(value),
                        false => Some(json::format(value)),
                    };
                    Value::Text(format!(
                        "({},{})",
                        record_field(Some(key)),
                        record_field(value.as_deref())
                    ))
                })
                .collect(),
            Some(other) => {
                let suffix = if text { "_text" } else { "" };
                return Err(wrong_kind(match (binary, &other) {
                    (true, _) => format!("cannot call jsonb_each{suffix} on a non-object"),
                    (false, json::Json::Array(_)) => {
                        "cannot deconstruct an array as an object".to_string()
                    }
                    (false, _) => "cannot deconstruct a scalar".to_string(),
                }));
            }
        },
        SetFunction::Unnest { integers } => elements(&args[0])?
            .into_iter()
            .map(|element| match element {
                None => Ok(Value::Null),
                Some(text) if integers => text.parse().map(Value::Int).map_err(|_| {
                    SqlError::new(
                        sqlstate::INVALID_TEXT_REPRESENTATION,
                        format!("invalid input syntax for type integer: \"{text}\""),
                    )
                }),
                Some(text) => Ok(Value::Text(text)),
            })
            .collect::<SqlResult<_>>()?,
        SetFunction::ExpandArray => elements(&args[0])?
            .into_iter()
            .enumerate()
            .map(|(position, element)| {
                let element = element.unwrap_or_default();
                Value::Text(format!("({element},{})", position + 1))
            })
            .collect(),
        SetFunction::Subscripts => {
            let length = elements(&args[0])?.len() as i64;
            (1..=length).map(Value::Int).collect()
        }
        SetFunction::Series => {
            let int = |value: &Value| match value {
                Value::Int(v) => Ok(Some(*v)),
                Value::Null => Ok(None),
                other => Err(SqlError::mismatch(format!(
                    "generate_series takes integers, not {other:?}"
                ))),
            };
            let (Some(start), Some(stop)) = (int(&args[0])?, int(&args[1])?) else {
                return Ok(Vec::new());
            };
            let step = match args.get(2) {
                Some(step) => match int(step)? {
                    Some(0) => {
                        return Err(SqlError::new(
                            sqlstate::INVALID_PARAMETER_VALUE,
                            "step size cannot equal zero",
                        ))
                    }
                    Some(step) => step,
                    None => return Ok(Vec::new()),
                },
                None => 1,
            };
            let mut out = Vec::new();
            let mut value = start;
            while (step > 0 && value <= stop) || (step < 0 && value >= stop) {
                out.push(Value::Int(value));
                crate::interrupt::check()?;
                match value.checked_add(step) {
                    Some(next) => value = next,
                    None => break,
                }
            }
            out
        }
    })
}

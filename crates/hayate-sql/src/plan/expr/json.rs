//! Evaluation of the json/jsonb operators and functions (`types::json` holds the documents'
//! model). The binder has converted every argument: documents are json or jsonb text, and
//! the values that become parts of a document (json_build_object's, to_json's) are JSON
//! text already (`JsonFunction::ToJson` of the others).

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::system::array;
use crate::types::json::{self, Json};
use crate::types::{DataType, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonFunction {
    /// `->` (text: `->>`): an object's field or an array's element.
    Field { text: bool },
    /// `#>` (text: `#>>`), json_extract_path[_text](doc, VARIADIC path): the document at a
    /// path (the path as an array's text form for the operators, as arguments for the
    /// functions).
    Path { text: bool, variadic: bool },
    /// `@>`; `<@` is bound with its arguments swapped.
    Contains,
    /// `?`.
    HasKey,
    /// `?|` (any) and `?&` (all) with a text[] of keys.
    HasKeys { all: bool },
    /// jsonb `||`.
    Concat,
    /// jsonb `-` text or integer.
    Remove,
    /// to_json / to_jsonb of a value that is not json (json values are bound as themselves).
    ToJson,
    /// A table's row as an object (row_to_json(t), to_json(t), json_agg(t)): arguments as
    /// json_build_object's, json's text compact as PostgreSQL writes a record:
    /// `{"id":1,"name":"x"}`.
    RowObject,
    /// json_build_object(key, value, ...): values are JSON text (`ToJson`).
    BuildObject,
    /// json_build_array(value, ...): values are JSON text.
    BuildArray,
    /// json_typeof.
    TypeOf,
    /// json_array_length.
    ArrayLength,
    /// jsonb_set(target, path, new_value [, create_missing]).
    Set,
    /// jsonb_strip_nulls.
    StripNulls,
    /// jsonb_pretty.
    Pretty,
}

/// A document argument (None for NULL).
fn document(value: &Value, binary: bool) -> SqlResult<Option<Json>> {
    match value {
        Value::Null => Ok(None),
        Value::Text(text) => json::parse(text, binary).map(Some),
        other => Err(SqlError::mismatch(format!("{other:?} is not a json value"))),
    }
}

/// A path argument in an array's text form.
fn path_of(value: &Value) -> SqlResult<Vec<String>> {
    let text = value.to_text().unwrap_or_default();
    let elements = array::elements(&text).ok_or_else(|| {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })?;
    Ok(elements
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect())
}

fn text_value(json: &Json, as_text: bool) -> Value {
    if as_text {
        json::text_of(json).map_or(Value::Null, Value::Text)
    } else {
        Value::Text(json::format(json))
    }
}

/// Evaluates `function` over its argument values; `binary` is true where the documents are
/// jsonb.
pub(super) fn eval(function: JsonFunction, binary: bool, values: &[Value]) -> SqlResult<Value> {
    use JsonFunction as J;
    // Building functions take NULL values as JSON null.
    match function {
        J::ToJson => {
            return Ok(match &values[0] {
                Value::Null => Value::Null,
                value => Value::Text(json::format(&json::from_value(value, DataType::Unknown)?)),
            })
        }
        J::BuildObject | J::RowObject => {
            let mut pairs = Vec::with_capacity(values.len() / 2);
            for pair in values.chunks(2) {
                let key = pair[0].to_text().ok_or_else(|| {
                    SqlError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "null value not allowed for object key",
                    )
                })?;
                pairs.push((key, document(&pair[1], binary)?.unwrap_or(Json::Null)));
            }
            if !binary {
                // json's own spacing, as PostgreSQL writes it: a record compact, a
                // json_build_object with spaces.
                let (colon, comma) = match function {
                    J::RowObject => (":", ","),
                    _ => (" : ", ", "),
                };
                let fields: Vec<String> = pairs
                    .iter()
                    .map(|(key, value)| {
                        let mut field = String::new();
                        json::write_string(&mut field, key);
                        format!("{field}{colon}{}", json::format(value))
                    })
                    .collect();
                return Ok(Value::Text(format!("{{{}}}", fields.join(comma))));
            }
            return Ok(Value::Text(json::format(&json::object(pairs, binary))));
        }
        J::BuildArray => {
            let items = values
                .iter()
                .map(|v| Ok(document(v, binary)?.unwrap_or(Json::Null)))
                .collect::<SqlResult<Vec<_>>>()?;
            return Ok(Value::Text(json::format(&Json::Array(items))));
        }
        _ => {}
    }
    if values.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let doc = document(&values[0], binary)?.expect("NULLs handled above");
    Ok(match function {
        J::Field { text } => {
            let found = match &values[1] {
                Value::Int(index) => json::element(&doc, *index),
                key => json::field(&doc, &key.to_text().unwrap_or_default()),
            };
            found.map_or(Value::Null, |found| text_value(found, text))
        }
        J::Path { text, variadic } => {
            let path = if variadic {
                values[1..]
                    .iter()
                    .map(|v| v.to_text().unwrap_or_default())
                    .collect()
            } else {
                path_of(&values[1])?
            };
            json::at_path(&doc, &path).map_or(Value::Null, |found| text_value(found, text))
        }
        J::Contains => {
            let other = document(&values[1], true)?.expect("not NULL");
            Value::Bool(json::contains(&doc, &other))
        }
        J::HasKey => Value::Bool(json::has_key(
            &doc,
            &values[1].to_text().unwrap_or_default(),
        )),
        J::HasKeys { all } => {
            let keys = path_of(&values[1])?;
            let mut present = keys.iter().map(|key| json::has_key(&doc, key));
            Value::Bool(if all {
                present.all(|p| p)
            } else {
                present.any(|p| p)
            })
        }
        J::Concat => {
            let other = document(&values[1], true)?.expect("not NULL");
            Value::Text(json::format(&json::concat(doc, other)))
        }
        J::Remove => {
            let removed = match &values[1] {
                Value::Int(index) => json::remove_index(doc, *index)?,
                key => json::remove_key(doc, &key.to_text().unwrap_or_default())?,
            };
            Value::Text(json::format(&removed))
        }
        J::TypeOf => Value::Text(json::type_name(&doc).to_string()),
        J::ArrayLength => Value::Int(json::array_length(&doc)?),
        J::Set => {
            let path = path_of(&values[1])?;
            let new = document(&values[2], true)?.expect("not NULL");
            let create = !matches!(values.get(3), Some(Value::Bool(false)));
            Value::Text(json::format(&json::set_path(doc, &path, new, create)?))
        }
        J::StripNulls => Value::Text(json::format(&json::strip_nulls(doc))),
        J::Pretty => Value::Text(json::pretty(&doc)),
        J::ToJson | J::BuildObject | J::RowObject | J::BuildArray => {
            unreachable!("handled above")
        }
    })
}

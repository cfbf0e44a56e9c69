//! json and jsonb: their values, operators and functions.
//!
//! Both are kept as `Value::Text`. A json value is its input text, checked to be JSON. A
//! jsonb value is the canonical text of its document, as PostgreSQL prints jsonb: object
//! keys unique (the last one wins) and ordered shorter first, then bytewise; numbers in
//! numeric's form (`1e2` is `100`, `1.50` stays `1.50`); `": "` and `", "` between items.
//! Two equal jsonb documents therefore have equal texts, which is what `=`, DISTINCT, GROUP
//! BY and unique indexes compare, with one difference from PostgreSQL: numbers keep their
//! scale, so `{"a": 1.0}` and `{"a": 1}` are two documents (containment compares numbers by
//! value). PostgreSQL's `<` on jsonb orders by an internal rule; here it is the texts'.
//!
//! Operators and functions parse the text into a `Json` tree (serde_json reads it) and
//! print their result in the jsonb form; on json values the result keeps the input's key
//! order and duplicate keys collapse to the last one.

use std::cmp::Ordering;

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::{datetime, numeric, DataType, Value};

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// A number's text (numeric's canonical form in jsonb).
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Keys in order: input order for json, jsonb's order for jsonb.
    Object(Vec<(String, Json)>),
}

fn invalid(text: &str, binary: bool) -> SqlError {
    let name = if binary { "jsonb" } else { "json" };
    SqlError::new(
        sqlstate::INVALID_TEXT_REPRESENTATION,
        format!("invalid input syntax for type {name}: \"{text}\""),
    )
}

/// Parses JSON text; `binary` gives jsonb's normal form (key order, unique keys, numbers).
pub fn parse(text: &str, binary: bool) -> SqlResult<Json> {
    let tree: serde_json::Value = serde_json::from_str(text).map_err(|_| invalid(text, binary))?;
    Ok(from_serde(tree, binary))
}

fn from_serde(tree: serde_json::Value, binary: bool) -> Json {
    use serde_json::Value as S;
    match tree {
        S::Null => Json::Null,
        S::Bool(b) => Json::Bool(b),
        S::Number(n) => Json::Number(if binary {
            normal_number(&n.to_string())
        } else {
            n.to_string()
        }),
        S::String(s) => Json::String(s),
        S::Array(items) => Json::Array(items.into_iter().map(|i| from_serde(i, binary)).collect()),
        S::Object(map) => {
            let fields = map
                .into_iter()
                .map(|(k, v)| (k, from_serde(v, binary)))
                .collect();
            let object = Json::Object(fields);
            if binary {
                normalize(object)
            } else {
                object
            }
        }
    }
}

/// A number as numeric prints it (the JSON text itself past numeric's range here).
fn normal_number(text: &str) -> String {
    match numeric::parse(text) {
        Ok(value) => numeric::format(&value),
        Err(_) => text.to_string(),
    }
}

/// jsonb's key order: shorter keys first, then bytewise.
fn key_order(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// An object in jsonb's form: keys sorted, the last of equal keys kept. Nested objects are
/// normalized already when they come from `parse`; values built by functions go through
/// here too.
fn normalize(json: Json) -> Json {
    match json {
        Json::Object(fields) => {
            let mut unique: Vec<(String, Json)> = Vec::with_capacity(fields.len());
            for (key, value) in fields {
                let value = normalize(value);
                match unique.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = value,
                    None => unique.push((key, value)),
                }
            }
            unique.sort_by(|(a, _), (b, _)| key_order(a, b));
            Json::Object(unique)
        }
        Json::Array(items) => Json::Array(items.into_iter().map(normalize).collect()),
        other => other,
    }
}

/// The text of a document as jsonb prints it.
pub fn format(json: &Json) -> String {
    let mut out = String::new();
    write(&mut out, json, None, 0);
    out
}

/// jsonb_pretty's text: one item per line, four spaces per level.
pub fn pretty(json: &Json) -> String {
    let mut out = String::new();
    write(&mut out, json, Some(4), 0);
    out
}

fn write(out: &mut String, json: &Json, indent: Option<usize>, depth: usize) {
    let newline = |out: &mut String, depth: usize| {
        if let Some(width) = indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', width * depth));
        }
    };
    match json {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => write_string(out, s),
        Json::Array(items) if items.is_empty() => out.push_str("[]"),
        Json::Object(fields) if fields.is_empty() => out.push_str("{}"),
        Json::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                    if indent.is_none() {
                        out.push(' ');
                    }
                }
                newline(out, depth + 1);
                write(out, item, indent, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Json::Object(fields) => {
            out.push('{');
            for (index, (key, value)) in fields.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                    if indent.is_none() {
                        out.push(' ');
                    }
                }
                newline(out, depth + 1);
                write_string(out, key);
                out.push_str(": ");
                write(out, value, indent, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
    }
}

/// A JSON string literal as PostgreSQL escapes it.
pub fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The document of a json or jsonb value.
pub fn of_value(value: &Value, data_type: DataType) -> SqlResult<Json> {
    match value {
        Value::Text(text) => parse(text, data_type == DataType::Jsonb),
        other => from_value(other, DataType::Unknown),
    }
}

/// A SQL value as JSON, as to_json/to_jsonb convert it: numbers and booleans as such, json
/// values as their documents, timestamps in ISO 8601, everything else as a string.
pub fn from_value(value: &Value, data_type: DataType) -> SqlResult<Json> {
    Ok(match (value, data_type) {
        (Value::Null, _) => Json::Null,
        (Value::Text(text), DataType::Json | DataType::Jsonb) => parse(text, true)?,
        (Value::Bool(b), _) => Json::Bool(*b),
        (Value::Int(_) | Value::Numeric(_), _) => Json::Number(value.to_text().unwrap_or_default()),
        (Value::Float(f), _) if f.is_finite() => Json::Number(value.to_text().unwrap_or_default()),
        (Value::Float4(f), _) if f.is_finite() => Json::Number(value.to_text().unwrap_or_default()),
        (Value::Timestamp(micros), _) => {
            Json::String(datetime::format_timestamp(*micros, "").replacen(' ', "T", 1))
        }
        (Value::TimestampTz(micros), _) => {
            // The session zone's time with its offset in hours and minutes: +02:00.
            let zone = super::zone::current();
            let offset = zone.offset_at(*micros);
            let mut suffix = super::zone::offset_text(offset);
            if suffix.len() == 3 {
                suffix.push_str(":00");
            }
            let local = zone.to_local(*micros);
            Json::String(datetime::format_timestamp(local, &suffix).replacen(' ', "T", 1))
        }
        (other, _) => Json::String(other.to_text_typed(data_type).unwrap_or_default()),
    })
}

/// `-> text`: an object's field (an array has none: `->` takes an integer for those).
pub fn field<'a>(json: &'a Json, key: &str) -> Option<&'a Json> {
    match json {
        Json::Object(fields) => fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
        _ => None,
    }
}

/// An array's element (negative indexes count from the end).
pub fn element(json: &Json, index: i64) -> Option<&Json> {
    let Json::Array(items) = json else {
        return None;
    };
    let position = if index < 0 {
        items.len().checked_sub(index.unsigned_abs() as usize)?
    } else {
        index as usize
    };
    items.get(position)
}

/// `#>`: the document at a path of keys and array indexes.
pub fn at_path<'a>(json: &'a Json, path: &[String]) -> Option<&'a Json> {
    // A path's steps are text; on an array, one is an element's index.
    path.iter().try_fold(json, |node, step| match node {
        Json::Object(_) => field(node, step),
        Json::Array(_) => element(node, step.trim().parse().ok()?),
        _ => None,
    })
}

/// `->>`'s text: a string's contents, NULL for null, other documents as text.
pub fn text_of(json: &Json) -> Option<String> {
    match json {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        other => Some(format(other)),
    }
}

fn scalar_equal(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => match (numeric::parse(x), numeric::parse(y)) {
            (Ok(x), Ok(y)) => x == y,
            _ => x == y,
        },
        _ => a == b,
    }
}

/// `@>`: whether `outer` contains `inner`, as jsonb containment is defined: an object holds
/// every key of the other with a containing value; an array holds every element of the
/// other in some element of its own (and a top-level array holds a scalar it lists).
pub fn contains(outer: &Json, inner: &Json) -> bool {
    contains_at(outer, inner, true)
}

fn contains_at(outer: &Json, inner: &Json, top: bool) -> bool {
    match (outer, inner) {
        (Json::Object(have), Json::Object(want)) => want.iter().all(|(key, value)| {
            have.iter()
                .any(|(k, v)| k == key && contains_at(v, value, false))
        }),
        (Json::Array(have), Json::Array(want)) => want.iter().all(|wanted| {
            have.iter().any(|item| match (item, wanted) {
                (Json::Array(_) | Json::Object(_), _) => contains_at(item, wanted, false),
                _ => scalar_equal(item, wanted),
            })
        }),
        (Json::Array(have), scalar) if top && !matches!(scalar, Json::Object(_)) => {
            have.iter().any(|item| scalar_equal(item, scalar))
        }
        (Json::Array(_) | Json::Object(_), _) | (_, Json::Array(_) | Json::Object(_)) => false,
        (a, b) => scalar_equal(a, b),
    }
}

/// `?`: an object's top-level key, an array's string element, or the string itself.
pub fn has_key(json: &Json, key: &str) -> bool {
    match json {
        Json::Object(fields) => fields.iter().any(|(k, _)| k == key),
        Json::Array(items) => items
            .iter()
            .any(|i| matches!(i, Json::String(s) if s == key)),
        Json::String(s) => s == key,
        _ => false,
    }
}

/// `||` on jsonb: objects merge (the right side's keys win), arrays concatenate, and a
/// scalar or object joins an array as an element.
pub fn concat(left: Json, right: Json) -> Json {
    match (left, right) {
        (Json::Object(mut a), Json::Object(b)) => {
            a.extend(b);
            normalize(Json::Object(a))
        }
        (Json::Array(mut a), Json::Array(b)) => {
            a.extend(b);
            Json::Array(a)
        }
        (Json::Array(mut a), b) => {
            a.push(b);
            Json::Array(a)
        }
        (a, Json::Array(mut b)) => {
            b.insert(0, a);
            Json::Array(b)
        }
        (a, b) => Json::Array(vec![a, b]),
    }
}

fn scalar_error(what: &str) -> SqlError {
    SqlError::new(sqlstate::INVALID_PARAMETER_VALUE, what.to_string())
}

/// `- text`: drops an object's key, or an array's string elements equal to it.
pub fn remove_key(json: Json, key: &str) -> SqlResult<Json> {
    match json {
        Json::Object(fields) => Ok(Json::Object(
            fields.into_iter().filter(|(k, _)| k != key).collect(),
        )),
        Json::Array(items) => Ok(Json::Array(
            items
                .into_iter()
                .filter(|i| !matches!(i, Json::String(s) if s == key))
                .collect(),
        )),
        _ => Err(scalar_error("cannot delete from scalar")),
    }
}

/// `- integer`: drops an array's element (negative counts from the end).
pub fn remove_index(json: Json, index: i64) -> SqlResult<Json> {
    match json {
        Json::Array(mut items) => {
            let position = if index < 0 {
                items.len().checked_sub(index.unsigned_abs() as usize)
            } else {
                Some(index as usize)
            };
            if let Some(position) = position.filter(|p| *p < items.len()) {
                items.remove(position);
            }
            Ok(Json::Array(items))
        }
        Json::Object(_) => Err(scalar_error(
            "cannot delete from object using integer index",
        )),
        _ => Err(scalar_error("cannot delete from scalar")),
    }
}

/// jsonb_set(target, path, new_value, create_missing): replaces the document at a path;
/// a missing last key (or an index past an array's end) is added when `create`.
pub fn set_path(json: Json, path: &[String], new: Json, create: bool) -> SqlResult<Json> {
    let Some((step, rest)) = path.split_first() else {
        return Ok(new);
    };
    match json {
        Json::Object(mut fields) => {
            match fields.iter().position(|(k, _)| k == step) {
                Some(at) => {
                    let old = std::mem::replace(&mut fields[at].1, Json::Null);
                    fields[at].1 = set_path(old, rest, new, create)?;
                }
                None if create && rest.is_empty() => fields.push((step.clone(), new)),
                None => {}
            }
            Ok(normalize(Json::Object(fields)))
        }
        Json::Array(mut items) => {
            let index: i64 = step.trim().parse().map_err(|_| {
                SqlError::new(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    format!("path element at position 1 is not an integer: \"{step}\""),
                )
            })?;
            let len = items.len() as i64;
            let position = if index < 0 { len + index } else { index };
            if (0..len).contains(&position) {
                let at = position as usize;
                let old = std::mem::replace(&mut items[at], Json::Null);
                items[at] = set_path(old, rest, new, create)?;
            } else if create && rest.is_empty() {
                if position < 0 {
                    items.insert(0, new);
                } else {
                    items.push(new);
                }
            }
            Ok(Json::Array(items))
        }
        _ => Err(scalar_error("cannot set path in scalar")),
    }
}

/// jsonb_strip_nulls: drops object fields whose value is null, at every depth.
pub fn strip_nulls(json: Json) -> Json {
    match json {
        Json::Object(fields) => Json::Object(
            fields
                .into_iter()
                .filter(|(_, v)| *v != Json::Null)
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

/// json_typeof's name of a document's kind.
pub fn type_name(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// json_array_length.
pub fn array_length(json: &Json) -> SqlResult<i64> {
    match json {
        Json::Array(items) => Ok(items.len() as i64),
        Json::Object(_) => Err(scalar_error("cannot get array length of a non-array")),
        _ => Err(scalar_error("cannot get array length of a scalar")),
    }
}

/// An object built from key/value pairs (json_build_object, json_object_agg).
pub fn object(pairs: Vec<(String, Json)>, binary: bool) -> Json {
    let object = Json::Object(pairs);
    if binary {
        normalize(object)
    } else {
        object
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jsonb(text: &str) -> Json {
        parse(text, true).unwrap()
    }

    #[test]
    fn jsonb_text_is_canonical() {
        assert_eq!(
            format(&jsonb(
                r#"{"bb":1, "a": [1e2, 1.50, true, null], "bb": "x\ny"}"#
            )),
            r#"{"a": [100, 1.50, true, null], "bb": "x\ny"}"#
        );
        assert_eq!(format(&jsonb("[]")), "[]");
        assert_eq!(format(&jsonb(" {} ")), "{}");
        let json = parse(r#"{"b":1,"a":2}"#, false).unwrap();
        assert_eq!(format(&json), r#"{"b": 1, "a": 2}"#);
        assert_eq!(
            parse("{bad", true).unwrap_err().code,
            sqlstate::INVALID_TEXT_REPRESENTATION
        );
        assert_eq!(
            pretty(&jsonb(r#"{"a": [1, {"b": 2}]}"#)),
            "{\n    \"a\": [\n        1,\n        {\n            \"b\": 2\n        }\n    ]\n}"
        );
    }

    #[test]
    fn paths_and_fields() {
        let doc = jsonb(r#"{"a": {"b": [10, 20, {"c": "x"}]}, "n": null}"#);
        assert_eq!(
            field(&doc, "a").map(format).as_deref(),
            Some(r#"{"b": [10, 20, {"c": "x"}]}"#)
        );
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            at_path(&doc, &path(&["a", "b", "2", "c"])).and_then(text_of),
            Some("x".into())
        );
        assert_eq!(
            at_path(&doc, &path(&["a", "b", "-3"])).map(format),
            Some("10".into())
        );
        assert_eq!(at_path(&doc, &path(&["a", "z"])), None);
        assert_eq!(field(&doc, "n").and_then(text_of), None);
    }

    #[test]
    fn containment_and_keys() {
        let doc = jsonb(r#"{"a": 1, "tags": ["x", "y"], "o": {"p": 2.0}}"#);
        assert!(contains(&doc, &jsonb(r#"{"a": 1.0}"#)));
        assert!(contains(&doc, &jsonb(r#"{"tags": ["y"]}"#)));
        assert!(contains(&doc, &jsonb(r#"{"o": {"p": 2}}"#)));
        assert!(!contains(&doc, &jsonb(r#"{"tags": ["z"]}"#)));
        assert!(!contains(&doc, &jsonb(r#"{"a": "1"}"#)));
        assert!(contains(&jsonb("[1, 2, [3]]"), &jsonb("1")));
        assert!(contains(&jsonb("[1, 2, [3]]"), &jsonb("[[3], 1]")));
        assert!(!contains(&jsonb("[1, 2, [3]]"), &jsonb("[3]")));
        assert!(has_key(&doc, "tags"));
        assert!(!has_key(&doc, "p"));
        assert!(has_key(&jsonb(r#"["x"]"#), "x"));
    }

    #[test]
    fn editing() {
        let merged = concat(jsonb(r#"{"a": 1, "b": 2}"#), jsonb(r#"{"b": 3, "c": 4}"#));
        assert_eq!(format(&merged), r#"{"a": 1, "b": 3, "c": 4}"#);
        assert_eq!(format(&concat(jsonb("[1]"), jsonb("2"))), "[1, 2]");
        let removed = remove_key(jsonb(r#"{"a": 1, "b": 2}"#), "a").unwrap();
        assert_eq!(format(&removed), r#"{"b": 2}"#);
        assert_eq!(
            format(&remove_index(jsonb("[1, 2, 3]"), -1).unwrap()),
            "[1, 2]"
        );
        assert!(remove_key(jsonb("1"), "a").is_err());
        let path = vec!["a".to_string(), "b".to_string()];
        let set = set_path(jsonb(r#"{"a": {"c": 1}}"#), &path, jsonb("[2]"), true).unwrap();
        assert_eq!(format(&set), r#"{"a": {"b": [2], "c": 1}}"#);
        let kept = set_path(jsonb(r#"{"a": {"c": 1}}"#), &path, jsonb("2"), false).unwrap();
        assert_eq!(format(&kept), r#"{"a": {"c": 1}}"#);
        assert_eq!(
            format(&strip_nulls(jsonb(r#"{"a": null, "b": [null]}"#))),
            r#"{"b": [null]}"#
        );
    }
}

//! SQL types and values.
//!
//! A `Value` is untyped storage (integers of every width are an `i64`); the `DataType` of the
//! column or expression it belongs to gives its width and its PostgreSQL type.

use std::cmp::Ordering;
use std::fmt;

use crate::error::{sqlstate, SqlError, SqlResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Int2,
    Int4,
    Int8,
    Float8,
    Bool,
    Text,
    /// varchar(n): at most n characters; None is unbounded.
    Varchar(Option<u32>),
    /// The type of a NULL literal or an untyped parameter before it is inferred.
    Unknown,
}

impl DataType {
    /// The catalog's one-byte tag of the type (with the varchar length stored apart).
    pub fn tag(self) -> u8 {
        match self {
            DataType::Int2 => 1,
            DataType::Int4 => 2,
            DataType::Int8 => 3,
            DataType::Float8 => 4,
            DataType::Bool => 5,
            DataType::Text => 6,
            DataType::Varchar(_) => 7,
            DataType::Unknown => 0,
        }
    }

    pub fn from_tag(tag: u8, length: u32) -> Option<DataType> {
        Some(match tag {
            1 => DataType::Int2,
            2 => DataType::Int4,
            3 => DataType::Int8,
            4 => DataType::Float8,
            5 => DataType::Bool,
            6 => DataType::Text,
            7 => DataType::Varchar((length > 0).then_some(length)),
            _ => return None,
        })
    }

    pub fn is_integer(self) -> bool {
        matches!(self, DataType::Int2 | DataType::Int4 | DataType::Int8)
    }

    pub fn is_numeric(self) -> bool {
        self.is_integer() || self == DataType::Float8
    }

    pub fn is_text(self) -> bool {
        matches!(self, DataType::Text | DataType::Varchar(_))
    }

    /// The PostgreSQL name of the type.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Int2 => "smallint",
            DataType::Int4 => "integer",
            DataType::Int8 => "bigint",
            DataType::Float8 => "double precision",
            DataType::Bool => "boolean",
            DataType::Text => "text",
            DataType::Varchar(_) => "character varying",
            DataType::Unknown => "unknown",
        }
    }

    /// The wider of two integer types (int2 < int4 < int8).
    pub fn wider_integer(self, other: DataType) -> DataType {
        let rank = |t: DataType| match t {
            DataType::Int2 => 0,
            DataType::Int4 => 1,
            _ => 2,
        };
        if rank(self) >= rank(other) {
            self
        } else {
            other
        }
    }

    /// The inclusive range of an integer type.
    fn integer_range(self) -> (i64, i64) {
        match self {
            DataType::Int2 => (i16::MIN as i64, i16::MAX as i64),
            DataType::Int4 => (i32::MIN as i64, i32::MAX as i64),
            _ => (i64::MIN, i64::MAX),
        }
    }

    /// Checks that an integer fits this type.
    pub fn check_integer(self, value: i64) -> SqlResult<i64> {
        let (low, high) = self.integer_range();
        if value < low || value > high {
            return Err(SqlError::new(
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                format!("{} out of range", self.name()),
            ));
        }
        Ok(value)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Varchar(Some(length)) => write!(f, "character varying({length})"),
            other => f.write_str(other.name()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Converts a value to `target` as an assignment or explicit cast does (text is parsed,
    /// numbers are range-checked, varchar(n) is length-checked).
    pub fn cast(self, target: DataType) -> SqlResult<Value> {
        match (self, target) {
            (Value::Null, _) | (_, DataType::Unknown) => Ok(Value::Null),
            (Value::Int(v), t) if t.is_integer() => Ok(Value::Int(t.check_integer(v)?)),
            (Value::Int(v), DataType::Float8) => Ok(Value::Float(v as f64)),
            (Value::Float(v), t) if t.is_integer() => {
                let rounded = v.round_ties_even();
                if !(-9.2e18..=9.2e18).contains(&rounded) {
                    return Err(SqlError::new(
                        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                        format!("{} out of range", t.name()),
                    ));
                }
                Ok(Value::Int(t.check_integer(rounded as i64)?))
            }
            (Value::Float(v), DataType::Float8) => Ok(Value::Float(v)),
            (Value::Bool(v), DataType::Bool) => Ok(Value::Bool(v)),
            (Value::Int(v), DataType::Bool) => Ok(Value::Bool(v != 0)),
            (Value::Text(text), t) => Value::parse(&text, t),
            (value, t) if t.is_text() => {
                let text = value.to_text().unwrap_or_default();
                Value::Text(text).cast(t)
            }
            (value, t) => Err(SqlError::new(
                sqlstate::DATATYPE_MISMATCH,
                format!("cannot cast {} to {t}", value.type_name()),
            )),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "unknown",
            Value::Int(_) => "integer",
            Value::Float(_) => "double precision",
            Value::Bool(_) => "boolean",
            Value::Text(_) => "text",
        }
    }

    /// Parses the PostgreSQL text form of a value of type `target`.
    pub fn parse(text: &str, target: DataType) -> SqlResult<Value> {
        let invalid = || {
            SqlError::new(
                sqlstate::INVALID_TEXT_REPRESENTATION,
                format!(
                    "invalid input syntax for type {}: \"{text}\"",
                    target.name()
                ),
            )
        };
        let trimmed = text.trim();
        match target {
            DataType::Int2 | DataType::Int4 | DataType::Int8 => {
                let value: i64 = trimmed.parse().map_err(|_| {
                    if !trimmed.is_empty()
                        && trimmed
                            .trim_start_matches(['-', '+'])
                            .bytes()
                            .all(|b| b.is_ascii_digit())
                    {
                        SqlError::new(
                            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                            format!(
                                "value \"{text}\" is out of range for type {}",
                                target.name()
                            ),
                        )
                    } else {
                        invalid()
                    }
                })?;
                Ok(Value::Int(target.check_integer(value)?))
            }
            DataType::Float8 => {
                let value = match trimmed.to_ascii_lowercase().as_str() {
                    "infinity" | "+infinity" | "inf" => f64::INFINITY,
                    "-infinity" | "-inf" => f64::NEG_INFINITY,
                    "nan" => f64::NAN,
                    other => other.parse().map_err(|_| invalid())?,
                };
                Ok(Value::Float(value))
            }
            DataType::Bool => match trimmed.to_ascii_lowercase().as_str() {
                "t" | "true" | "y" | "yes" | "on" | "1" => Ok(Value::Bool(true)),
                "f" | "false" | "n" | "no" | "off" | "0" => Ok(Value::Bool(false)),
                _ => Err(invalid()),
            },
            DataType::Text | DataType::Unknown => Ok(Value::Text(text.to_string())),
            DataType::Varchar(limit) => {
                if let Some(limit) = limit {
                    if text.chars().count() > limit as usize {
                        return Err(SqlError::new(
                            sqlstate::STRING_DATA_RIGHT_TRUNCATION,
                            format!("value too long for type character varying({limit})"),
                        ));
                    }
                }
                Ok(Value::Text(text.to_string()))
            }
        }
    }

    /// The PostgreSQL text form (None for NULL).
    pub fn to_text(&self) -> Option<String> {
        match self {
            Value::Null => None,
            Value::Int(v) => Some(v.to_string()),
            Value::Float(v) => Some(format_float(*v)),
            Value::Bool(v) => Some(if *v { "t" } else { "f" }.to_string()),
            Value::Text(v) => Some(v.clone()),
        }
    }

    /// SQL comparison: None if either side is NULL. Integers and floats compare as numbers.
    pub fn compare(&self, other: &Value) -> SqlResult<Option<Ordering>> {
        Ok(match (self, other) {
            (Value::Null, _) | (_, Value::Null) => None,
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::Int(a), Value::Float(b)) => Some(total_order(*a as f64, *b)),
            (Value::Float(a), Value::Int(b)) => Some(total_order(*a, *b as f64)),
            (Value::Float(a), Value::Float(b)) => Some(total_order(*a, *b)),
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            (Value::Text(a), Value::Text(b)) => Some(a.cmp(b)),
            (a, b) => {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!(
                        "operator does not exist: {} = {}",
                        a.type_name(),
                        b.type_name()
                    ),
                ))
            }
        })
    }

    /// The order of ORDER BY: NULLs sort after every value (PostgreSQL's default for ASC).
    pub fn sort_order(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Greater,
            (_, Value::Null) => Ordering::Less,
            (a, b) => a.compare(b).ok().flatten().unwrap_or(Ordering::Equal),
        }
    }
}

/// Floats order as PostgreSQL orders them: NaN above every other value and equal to itself.
fn total_order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// PostgreSQL's float8 text form: the shortest text that reads back exactly.
pub fn format_float(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        let text = format!("{value}");
        if value.abs() >= 1e16 || (value != 0.0 && value.abs() < 1e-4) {
            format!("{value:e}").replace("e", "e+").replace("e+-", "e-")
        } else {
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_cast() {
        assert_eq!(Value::parse(" 42 ", DataType::Int4), Ok(Value::Int(42)));
        assert_eq!(
            Value::parse("abc", DataType::Int4).unwrap_err().code,
            sqlstate::INVALID_TEXT_REPRESENTATION
        );
        assert_eq!(
            Value::parse("70000", DataType::Int2).unwrap_err().code,
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            Value::parse("abcd", DataType::Varchar(Some(3)))
                .unwrap_err()
                .code,
            sqlstate::STRING_DATA_RIGHT_TRUNCATION
        );
        assert_eq!(Value::Float(2.5).cast(DataType::Int8), Ok(Value::Int(2)));
        assert_eq!(Value::Int(1).cast(DataType::Float8), Ok(Value::Float(1.0)));
        assert_eq!(format_float(1.5), "1.5");
        assert_eq!(Value::Bool(true).to_text().as_deref(), Some("t"));
    }

    #[test]
    fn nulls_compare_unknown_and_sort_last() {
        assert_eq!(Value::Null.compare(&Value::Int(1)), Ok(None));
        assert_eq!(Value::Null.sort_order(&Value::Int(1)), Ordering::Greater);
        assert_eq!(
            Value::Int(1).compare(&Value::Float(1.5)),
            Ok(Some(Ordering::Less))
        );
    }
}

//! SQL types and values.
//!
//! A `Value` is untyped storage (integers of every width are an `i64`); the `DataType` of the
//! column or expression it belongs to gives its width and its PostgreSQL type.
//!
//! char(n) values are kept without their trailing spaces (PostgreSQL ignores them in every
//! comparison and drops them on a cast to text); `Value::to_text_typed` pads them back to n
//! for output.

pub mod bytea;
pub mod datetime;
pub mod enums;
pub mod fields;
pub mod format;
pub mod interval;
pub mod json;
pub mod numeric;
pub mod numeric_math;
pub mod pattern;
pub mod units;
pub mod uuid;
pub mod zone;

use std::cmp::Ordering;
use std::fmt;

pub use rust_decimal::Decimal;

use crate::error::{sqlstate, SqlError, SqlResult};
pub use interval::Interval;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Int2,
    Int4,
    Int8,
    /// real: an f32.
    Float4,
    Float8,
    /// numeric(precision, scale); None is unconstrained.
    Numeric(Option<(u8, u8)>),
    Bool,
    Text,
    /// varchar(n): at most n characters; None is unbounded.
    Varchar(Option<u32>),
    /// char(n) / bpchar: blank-padded to n characters; None is bpchar without a length.
    Char(Option<u32>),
    Bytea,
    Date,
    /// timestamp without time zone.
    Timestamp,
    /// timestamp with time zone (the session zone is UTC).
    TimestampTz,
    /// smallint[] (int2[]): the catalog's key arrays (pg_constraint.conkey), carried as
    /// text values in the array text form `{1,2}`; clients see an int2[] column.
    Int2Array,
    /// uuid: a `Value::Text` in canonical form (`types::uuid`), stored as 16 bytes.
    Uuid,
    /// json: a `Value::Text`, the input text checked to be JSON (`types::json`).
    Json,
    /// jsonb: a `Value::Text`, the document's canonical text (`types::json`).
    Jsonb,
    /// interval: a `Value::Interval`.
    Interval,
    /// text[], integer[], bigint[]: the types of array results (ARRAY(subquery), ARRAY[...],
    /// array_agg), so that drivers see arrays. Their values are `Value::Text` in the array
    /// text form `{a,b}`, as every array here is, and they count as text for operators and
    /// functions. Not column types.
    TextArray,
    Int4Array,
    Int8Array,
    /// A CREATE TYPE ... AS ENUM type, by its oid: a `Value::Text` holding one of its labels
    /// (stored as text). Labels order by their place in the type, not as text: the binder
    /// checks labels and orders by `types::enums::EnumType` (an enum's labels live in the
    /// catalog, not in the type).
    Enum(u32),
    /// The type of a NULL literal or an untyped parameter before it is inferred.
    Unknown,
}

impl DataType {
    /// The catalog's one-byte tag of the type (with `type_modifier` stored apart).
    pub fn tag(self) -> u8 {
        match self {
            DataType::Int2 => 1,
            DataType::Int4 => 2,
            DataType::Int8 => 3,
            DataType::Float8 => 4,
            DataType::Bool => 5,
            DataType::Text => 6,
            DataType::Varchar(_) => 7,
            DataType::Float4 => 8,
            DataType::Numeric(_) => 9,
            DataType::Char(_) => 10,
            DataType::Bytea => 11,
            DataType::Date => 12,
            DataType::Timestamp => 13,
            DataType::TimestampTz => 14,
            DataType::Int2Array => 15,
            DataType::Uuid => 16,
            DataType::Json => 17,
            DataType::Jsonb => 18,
            DataType::Interval => 19,
            DataType::TextArray => 20,
            DataType::Int4Array => 21,
            DataType::Int8Array => 22,
            DataType::Enum(_) => 23,
            DataType::Unknown => 0,
        }
    }

    /// The catalog's u32 beside the tag: the length of varchar(n)/char(n), precision << 16 |
    /// scale of numeric(p, s), 0 for none.
    pub fn type_modifier(self) -> u32 {
        match self {
            DataType::Varchar(Some(length)) | DataType::Char(Some(length)) => length,
            DataType::Numeric(Some((precision, scale))) => (precision as u32) << 16 | scale as u32,
            DataType::Enum(oid) => oid,
            _ => 0,
        }
    }

    pub fn from_tag(tag: u8, modifier: u32) -> Option<DataType> {
        let length = (modifier > 0).then_some(modifier);
        Some(match tag {
            1 => DataType::Int2,
            2 => DataType::Int4,
            3 => DataType::Int8,
            4 => DataType::Float8,
            5 => DataType::Bool,
            6 => DataType::Text,
            7 => DataType::Varchar(length),
            8 => DataType::Float4,
            9 => DataType::Numeric(match modifier {
                0 => None,
                m => Some(numeric_typmod((m >> 16) as u64, (m & 0xFFFF) as u64).ok()?),
            }),
            10 => DataType::Char(length),
            11 => DataType::Bytea,
            12 => DataType::Date,
            13 => DataType::Timestamp,
            14 => DataType::TimestampTz,
            15 => DataType::Int2Array,
            16 => DataType::Uuid,
            17 => DataType::Json,
            18 => DataType::Jsonb,
            19 => DataType::Interval,
            20 => DataType::TextArray,
            21 => DataType::Int4Array,
            22 => DataType::Int8Array,
            23 if modifier != 0 => DataType::Enum(modifier),
            _ => return None,
        })
    }

    /// PostgreSQL's type OID.
    pub fn oid(self) -> u32 {
        match self {
            DataType::Int2 => 21,
            DataType::Int4 => 23,
            DataType::Int8 => 20,
            DataType::Float4 => 700,
            DataType::Float8 => 701,
            DataType::Numeric(_) => 1700,
            DataType::Bool => 16,
            DataType::Text => 25,
            DataType::Varchar(_) => 1043,
            DataType::Char(_) => 1042,
            DataType::Bytea => 17,
            DataType::Date => 1082,
            DataType::Timestamp => 1114,
            DataType::TimestampTz => 1184,
            DataType::Int2Array => 1005,
            DataType::Uuid => 2950,
            DataType::Json => 114,
            DataType::Jsonb => 3802,
            DataType::Interval => 1186,
            DataType::TextArray => 1009,
            DataType::Int4Array => 1007,
            DataType::Int8Array => 1016,
            DataType::Enum(oid) => oid,
            DataType::Unknown => 705,
        }
    }

    /// PostgreSQL's atttypmod (-1 for none): varchar/char length + 4, numeric
    /// ((precision << 16) | scale) + 4.
    pub fn pg_type_modifier(self) -> i32 {
        match self.type_modifier() {
            _ if matches!(self, DataType::Enum(_)) => -1,
            0 => -1,
            m => m as i32 + 4,
        }
    }

    /// The spaces a text value of this type is shown with: char(n) pads to n characters.
    pub fn padding_of(self, text: &str) -> usize {
        match self {
            DataType::Char(Some(length)) => {
                let count = if text.is_ascii() {
                    text.len()
                } else {
                    text.chars().count()
                };
                (length as usize).saturating_sub(count)
            }
            _ => 0,
        }
    }

    /// The fixed size of the type on the wire (-1: variable).
    pub fn size(self) -> i16 {
        match self {
            DataType::Int2 => 2,
            DataType::Int4 | DataType::Float4 | DataType::Date | DataType::Enum(_) => 4,
            DataType::Int8 | DataType::Float8 | DataType::Timestamp | DataType::TimestampTz => 8,
            DataType::Bool => 1,
            DataType::Uuid | DataType::Interval => 16,
            _ => -1,
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(self, DataType::Int2 | DataType::Int4 | DataType::Int8)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DataType::Float4 | DataType::Float8)
    }

    pub fn is_numeric(self) -> bool {
        self.is_integer() || self.is_float() || matches!(self, DataType::Numeric(_))
    }

    pub fn is_text(self) -> bool {
        matches!(
            self,
            DataType::Text | DataType::Varchar(_) | DataType::Char(_)
        ) || self.is_text_form_array()
    }

    /// Types whose values do not order as their stored form does (an enum's labels order by
    /// their place, an array element by element): comparisons and sorting go through an
    /// order key the binder adds (`plan::bind::enum_type`).
    pub fn needs_order_key(self) -> bool {
        matches!(self, DataType::Enum(_)) || self.is_array()
    }

    /// Values kept in rows and keys as their text: the text types, json, jsonb, enums and
    /// arrays.
    pub fn is_stored_as_text(self) -> bool {
        self.is_text()
            || matches!(
                self,
                DataType::Json | DataType::Jsonb | DataType::Enum(_) | DataType::Int2Array
            )
    }

    /// An array type a column or result can have (smallint[] included).
    pub fn is_array(self) -> bool {
        self == DataType::Int2Array || self.is_text_form_array()
    }

    /// An array result type (`TextArray`, `Int4Array`, `Int8Array`).
    pub fn is_text_form_array(self) -> bool {
        matches!(
            self,
            DataType::TextArray | DataType::Int4Array | DataType::Int8Array
        )
    }

    /// The element type of an array type (None for other types).
    pub fn element(self) -> Option<DataType> {
        match self {
            DataType::Int2Array => Some(DataType::Int2),
            DataType::Int4Array => Some(DataType::Int4),
            DataType::Int8Array => Some(DataType::Int8),
            DataType::TextArray => Some(DataType::Text),
            _ => None,
        }
    }

    /// The array type of results whose elements are of this type (Text: no typed array;
    /// the value is an array in text form all the same).
    pub fn array_of(self) -> DataType {
        match self {
            DataType::Int2 | DataType::Int4 => DataType::Int4Array,
            DataType::Int8 => DataType::Int8Array,
            DataType::Text | DataType::Varchar(_) | DataType::Char(_) | DataType::Unknown => {
                DataType::TextArray
            }
            _ => DataType::Text,
        }
    }

    pub fn is_datetime(self) -> bool {
        matches!(
            self,
            DataType::Date | DataType::Timestamp | DataType::TimestampTz
        )
    }

    /// The PostgreSQL name of the type.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Int2 => "smallint",
            DataType::Int4 => "integer",
            DataType::Int8 => "bigint",
            DataType::Float4 => "real",
            DataType::Float8 => "double precision",
            DataType::Numeric(_) => "numeric",
            DataType::Bool => "boolean",
            DataType::Text => "text",
            DataType::Varchar(_) => "character varying",
            DataType::Char(_) => "character",
            DataType::Bytea => "bytea",
            DataType::Date => "date",
            DataType::Timestamp => "timestamp without time zone",
            DataType::TimestampTz => "timestamp with time zone",
            DataType::Int2Array => "smallint[]",
            DataType::Uuid => "uuid",
            DataType::Json => "json",
            DataType::Jsonb => "jsonb",
            DataType::Interval => "interval",
            DataType::TextArray => "text[]",
            DataType::Int4Array => "integer[]",
            DataType::Int8Array => "bigint[]",
            // Its own name is in the catalog (`EnumType::name`); messages say what it is.
            DataType::Enum(_) => "enum",
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

    /// The type both operands of arithmetic are converted to, as PostgreSQL resolves its
    /// operators: integers widen, numeric beats integers, float8 beats everything, and real
    /// stays real only with real (None if either is not a number).
    pub fn common_numeric(self, other: DataType) -> Option<DataType> {
        if !self.is_numeric() || !other.is_numeric() {
            return None;
        }
        Some(if self.is_integer() && other.is_integer() {
            self.wider_integer(other)
        } else if self == DataType::Float4 && other == DataType::Float4 {
            DataType::Float4
        } else if self.is_float() || other.is_float() {
            DataType::Float8
        } else {
            DataType::Numeric(None)
        })
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

/// Checks a declared numeric(precision, scale).
pub fn numeric_typmod(precision: u64, scale: u64) -> SqlResult<(u8, u8)> {
    if precision == 0 || precision > numeric::PRECISION_MAX as u64 {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!(
                "NUMERIC precision {precision} must be between 1 and {}",
                numeric::PRECISION_MAX
            ),
        ));
    }
    if scale > precision {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("NUMERIC scale {scale} must be between 0 and precision {precision}"),
        ));
    }
    Ok((precision as u8, scale as u8))
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Varchar(Some(length)) => write!(f, "character varying({length})"),
            DataType::Char(Some(length)) => write!(f, "character({length})"),
            DataType::Numeric(Some((precision, scale))) => {
                write!(f, "numeric({precision},{scale})")
            }
            other => f.write_str(other.name()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Float(f64),
    Float4(f32),
    Numeric(Decimal),
    Bool(bool),
    Text(String),
    Bytes(Vec<u8>),
    /// Days since 2000-01-01.
    Date(i32),
    /// Microseconds since 2000-01-01 00:00:00.
    Timestamp(i64),
    /// Microseconds since 2000-01-01 00:00:00 UTC.
    TimestampTz(i64),
    Interval(Interval),
}

fn out_of_range_for(data_type: DataType) -> SqlError {
    SqlError::new(
        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
        format!("{} out of range", data_type.name()),
    )
}

/// A float rounded to an integer type (half to even, as PostgreSQL's float-to-int casts).
fn float_to_integer(value: f64, target: DataType) -> SqlResult<Value> {
    let rounded = value.round_ties_even();
    if !(-9.2e18..=9.2e18).contains(&rounded) {
        return Err(out_of_range_for(target));
    }
    Ok(Value::Int(target.check_integer(rounded as i64)?))
}

fn float_to_float4(value: f64) -> SqlResult<Value> {
    let narrowed = value as f32;
    if value.is_finite() && narrowed.is_infinite() {
        return Err(SqlError::new(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "value out of range: overflow",
        ));
    }
    Ok(Value::Float4(narrowed))
}

fn with_numeric_typmod(value: Decimal, target: DataType) -> SqlResult<Value> {
    Ok(Value::Numeric(match target {
        DataType::Numeric(Some((precision, scale))) => {
            numeric::apply_typmod(value, precision as u32, scale as u32)?
        }
        _ => value,
    }))
}

/// char(n) text: trailing spaces dropped, at most n characters (22001 past it).
fn to_char(text: &str, limit: Option<u32>) -> SqlResult<Value> {
    let trimmed = text.trim_end_matches(' ');
    if let Some(limit) = limit {
        if trimmed.chars().count() > limit as usize {
            return Err(SqlError::new(
                sqlstate::STRING_DATA_RIGHT_TRUNCATION,
                format!("value too long for type character({limit})"),
            ));
        }
    }
    Ok(Value::Text(trimmed.to_string()))
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Converts a value to `target` as an assignment or explicit cast does (text is parsed,
    /// numbers are range-checked, varchar(n) and char(n) are length-checked).
    pub fn cast(self, target: DataType) -> SqlResult<Value> {
        use DataType as T;
        match (self, target) {
            (Value::Null, _) | (_, T::Unknown) => Ok(Value::Null),
            (Value::Text(text), t) => Value::parse(&text, t),
            // boolean::text is the word, unlike boolean's output form t/f.
            (Value::Bool(v), t) if t.is_text() => Value::parse(if v { "true" } else { "false" }, t),
            (value, t) if t.is_text() => {
                let text = value.to_text().unwrap_or_default();
                Value::parse(&text, t)
            }
            (Value::Int(v), t) if t.is_integer() => Ok(Value::Int(t.check_integer(v)?)),
            (Value::Int(v), T::Float4) => Ok(Value::Float4(v as f32)),
            (Value::Int(v), T::Float8) => Ok(Value::Float(v as f64)),
            (Value::Int(v), t @ T::Numeric(_)) => with_numeric_typmod(numeric::from_i64(v), t),
            (Value::Float(v), t) if t.is_integer() => float_to_integer(v, t),
            (Value::Float4(v), t) if t.is_integer() => float_to_integer(v as f64, t),
            (Value::Float(v), T::Float8) => Ok(Value::Float(v)),
            (Value::Float(v), T::Float4) => float_to_float4(v),
            (Value::Float4(v), T::Float4) => Ok(Value::Float4(v)),
            (Value::Float4(v), T::Float8) => Ok(Value::Float(v as f64)),
            (Value::Float(v), t @ T::Numeric(_)) => with_numeric_typmod(numeric::from_f64(v)?, t),
            (Value::Float4(v), t @ T::Numeric(_)) => {
                let text = format_float4(v);
                let value = numeric::parse(&text).or_else(|_| numeric::from_f64(v as f64))?;
                with_numeric_typmod(value, t)
            }
            (Value::Numeric(v), t) if t.is_integer() => {
                let integer = numeric::to_i64(&v).ok_or_else(|| out_of_range_for(t))?;
                Ok(Value::Int(t.check_integer(integer)?))
            }
            (Value::Numeric(v), T::Float8) => Ok(Value::Float(numeric::to_f64(&v))),
            (Value::Numeric(v), T::Float4) => float_to_float4(numeric::to_f64(&v)),
            (Value::Numeric(v), t @ T::Numeric(_)) => with_numeric_typmod(v, t),
            (Value::Bool(v), T::Bool) => Ok(Value::Bool(v)),
            (Value::Int(v), T::Bool) => Ok(Value::Bool(v != 0)),
            (Value::Bool(v), t) if t.is_integer() => Ok(Value::Int(v as i64)),
            (Value::Bytes(v), T::Bytea) => Ok(Value::Bytes(v)),
            (Value::Date(v), T::Date) => Ok(Value::Date(v)),
            (Value::Date(v), T::Timestamp) => Ok(Value::Timestamp(datetime::date_to_timestamp(v))),
            // Between timestamptz and the zoneless types: the session zone's wall clock.
            (Value::Date(v), T::TimestampTz) => Ok(Value::TimestampTz(
                zone::current().to_utc(datetime::date_to_timestamp(v)),
            )),
            (Value::Timestamp(v), T::Date) => Ok(Value::Date(datetime::timestamp_to_date(v))),
            (Value::TimestampTz(v), T::Date) => Ok(Value::Date(datetime::timestamp_to_date(
                zone::current().to_local(v),
            ))),
            (Value::Timestamp(v), T::Timestamp) => Ok(Value::Timestamp(v)),
            (Value::TimestampTz(v), T::Timestamp) => {
                Ok(Value::Timestamp(zone::current().to_local(v)))
            }
            (Value::TimestampTz(v), T::TimestampTz) => Ok(Value::TimestampTz(v)),
            (Value::Timestamp(v), T::TimestampTz) => {
                Ok(Value::TimestampTz(zone::current().to_utc(v)))
            }
            (Value::Interval(v), T::Interval) => Ok(Value::Interval(v)),
            (value, t) => Err(SqlError::new(
                sqlstate::CANNOT_COERCE,
                format!("cannot cast type {} to {t}", value.type_name()),
            )),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "unknown",
            Value::Int(_) => "integer",
            Value::Float(_) => "double precision",
            Value::Float4(_) => "real",
            Value::Numeric(_) => "numeric",
            Value::Bool(_) => "boolean",
            Value::Text(_) => "text",
            Value::Bytes(_) => "bytea",
            Value::Date(_) => "date",
            Value::Timestamp(_) => "timestamp without time zone",
            Value::TimestampTz(_) => "timestamp with time zone",
            Value::Interval(_) => "interval",
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
            DataType::Float8 | DataType::Float4 => {
                let value = match trimmed.to_ascii_lowercase().as_str() {
                    "infinity" | "+infinity" | "inf" | "+inf" => f64::INFINITY,
                    "-infinity" | "-inf" => f64::NEG_INFINITY,
                    "nan" => f64::NAN,
                    other if other.contains(|c: char| c.is_ascii_alphabetic() && c != 'e') => {
                        return Err(invalid())
                    }
                    other => other.parse().map_err(|_| invalid())?,
                };
                let out_of_range = || {
                    SqlError::new(
                        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                        format!("\"{text}\" is out of range for type {}", target.name()),
                    )
                };
                if target == DataType::Float4 {
                    let narrowed: f32 = match value.is_finite() {
                        true => trimmed.parse().map_err(|_| invalid())?,
                        false => value as f32,
                    };
                    if value.is_finite() && narrowed.is_infinite() {
                        return Err(out_of_range());
                    }
                    return Ok(Value::Float4(narrowed));
                }
                if value.is_infinite() && !trimmed.to_ascii_lowercase().contains("inf") {
                    return Err(out_of_range());
                }
                Ok(Value::Float(value))
            }
            DataType::Numeric(_) => with_numeric_typmod(numeric::parse(text)?, target),
            DataType::Bool => match trimmed.to_ascii_lowercase().as_str() {
                "t" | "true" | "y" | "yes" | "on" | "1" => Ok(Value::Bool(true)),
                "f" | "false" | "n" | "no" | "off" | "0" => Ok(Value::Bool(false)),
                _ => Err(invalid()),
            },
            // An enum's label is checked by the binder, which knows the type's labels.
            DataType::Text | DataType::Unknown | DataType::Enum(_) => {
                Ok(Value::Text(text.to_string()))
            }
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
            DataType::Char(limit) => to_char(text, limit),
            DataType::Bytea => Ok(Value::Bytes(bytea::parse(text)?)),
            DataType::Date => Ok(Value::Date(datetime::parse_date(text)?)),
            DataType::Timestamp => Ok(Value::Timestamp(datetime::parse_timestamp(text)?)),
            DataType::TimestampTz => Ok(Value::TimestampTz(datetime::parse_timestamptz(text)?)),
            DataType::Int2Array => {
                let elements = crate::system::array::elements(text).ok_or_else(invalid)?;
                let elements = elements
                    .iter()
                    .map(|element| match element {
                        Some(element) => {
                            let value: i64 = element.trim().parse().map_err(|_| invalid())?;
                            Ok(Some(DataType::Int2.check_integer(value)?.to_string()))
                        }
                        None => Ok(None),
                    })
                    .collect::<SqlResult<Vec<_>>>()?;
                Ok(Value::Text(crate::system::array::format(&elements)))
            }
            DataType::Uuid => Ok(Value::Text(uuid::format(&uuid::parse(text)?))),
            DataType::Json => json::parse(text, false).map(|_| Value::Text(text.to_string())),
            DataType::Jsonb => Ok(Value::Text(json::format(&json::parse(text, true)?))),
            DataType::Interval => Ok(Value::Interval(interval::parse(text, None)?)),
            DataType::TextArray | DataType::Int4Array | DataType::Int8Array => {
                let elements = crate::system::array::parse(text).ok_or_else(|| {
                    SqlError::new(
                        sqlstate::INVALID_TEXT_REPRESENTATION,
                        format!("malformed array literal: \"{text}\""),
                    )
                })?;
                // Integers in their canonical form ('{01, +2}' is '{1,2}'), so that equal
                // arrays have equal text.
                let element_type = match target {
                    DataType::Int4Array => Some(DataType::Int4),
                    DataType::Int8Array => Some(DataType::Int8),
                    _ => None,
                };
                let elements = match element_type {
                    Some(element_type) => elements
                        .iter()
                        .map(|element| {
                            element
                                .as_deref()
                                .map(|e| Ok(Value::parse(e, element_type)?.to_text()))
                                .transpose()
                                .map(Option::flatten)
                        })
                        .collect::<SqlResult<Vec<_>>>()?,
                    None => elements,
                };
                Ok(Value::Text(crate::system::array::format(&elements)))
            }
        }
    }

    /// The PostgreSQL text form (None for NULL).
    pub fn to_text(&self) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::Int(v) => v.to_string(),
            Value::Float(v) => format_float(*v),
            Value::Float4(v) => format_float4(*v),
            Value::Numeric(v) => numeric::format(v),
            Value::Bool(v) => if *v { "t" } else { "f" }.to_string(),
            Value::Text(v) => v.clone(),
            Value::Bytes(v) => bytea::format(v),
            Value::Date(v) => datetime::format_date(*v),
            Value::Timestamp(v) => datetime::format_timestamp(*v, ""),
            Value::TimestampTz(v) => datetime::format_timestamptz(*v, &zone::current()),
            Value::Interval(v) => interval::format(*v),
        })
    }

    /// The text form as a result column of `data_type` shows it: char(n) padded to n.
    pub fn to_text_typed(&self, data_type: DataType) -> Option<String> {
        match (self, data_type) {
            (Value::Text(text), DataType::Char(Some(_))) => {
                let mut padded = text.clone();
                padded.extend(std::iter::repeat_n(' ', data_type.padding_of(text)));
                Some(padded)
            }
            _ => self.to_text(),
        }
    }

    /// The value as an f64 if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(*v as f64),
            Value::Float(v) => Some(*v),
            Value::Float4(v) => Some(*v as f64),
            Value::Numeric(v) => Some(numeric::to_f64(v)),
            _ => None,
        }
    }

    /// The value as a decimal if it is an integer or a numeric.
    pub fn as_decimal(&self) -> Option<Decimal> {
        match self {
            Value::Int(v) => Some(numeric::from_i64(*v)),
            Value::Numeric(v) => Some(*v),
            _ => None,
        }
    }

    /// A date or timestamp as microseconds since 2000-01-01 (dates at midnight).
    fn as_timestamp(&self) -> Option<i64> {
        match self {
            Value::Date(v) => Some(datetime::date_to_timestamp(*v)),
            Value::Timestamp(v) | Value::TimestampTz(v) => Some(*v),
            _ => None,
        }
    }

    /// SQL comparison: None if either side is NULL. Numbers compare across their types (as
    /// floats if either is a float, else exactly), dates with timestamps.
    pub fn compare(&self, other: &Value) -> SqlResult<Option<Ordering>> {
        use Value as V;
        Ok(Some(match (self, other) {
            (V::Null, _) | (_, V::Null) => return Ok(None),
            (V::Int(a), V::Int(b)) => a.cmp(b),
            (V::Bool(a), V::Bool(b)) => a.cmp(b),
            (V::Text(a), V::Text(b)) => a.cmp(b),
            (V::Bytes(a), V::Bytes(b)) => a.cmp(b),
            (V::Date(a), V::Date(b)) => a.cmp(b),
            (V::Interval(a), V::Interval(b)) => a.span().cmp(&b.span()),
            (V::Float(_) | V::Float4(_), _) | (_, V::Float(_) | V::Float4(_))
                if self.as_f64().is_some() && other.as_f64().is_some() =>
            {
                total_order(self.as_f64().unwrap_or(0.0), other.as_f64().unwrap_or(0.0))
            }
            (V::Int(_) | V::Numeric(_), V::Int(_) | V::Numeric(_)) => {
                let (a, b) = (self.as_decimal(), other.as_decimal());
                a.cmp(&b)
            }
            // A zoneless value against a timestamptz: its wall-clock time in the session's
            // zone, as PostgreSQL casts it.
            (V::Date(_) | V::Timestamp(_), V::TimestampTz(b)) => {
                let zone = zone::current();
                self.as_timestamp().map(|a| zone.to_utc(a)).cmp(&Some(*b))
            }
            (V::TimestampTz(a), V::Date(_) | V::Timestamp(_)) => {
                let zone = zone::current();
                Some(*a).cmp(&other.as_timestamp().map(|b| zone.to_utc(b)))
            }
            (V::Date(_) | V::Timestamp(_) | V::TimestampTz(_), _)
                if other.as_timestamp().is_some() =>
            {
                self.as_timestamp().cmp(&other.as_timestamp())
            }
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
        }))
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

/// PostgreSQL's shortest float text: plain digits when the decimal exponent is in
/// -4..`exponent_limit`, else `d.ddde+XX` with at least two exponent digits.
fn format_shortest(plain: String, scientific: String, exponent_limit: i32) -> String {
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..exponent_limit).contains(&exponent) {
        return plain;
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

fn format_special(value: f64) -> Option<String> {
    if value.is_nan() {
        Some("NaN".into())
    } else if value.is_infinite() {
        Some(if value > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        None
    }
}

/// PostgreSQL's float8 text form: the shortest text that reads back exactly.
pub fn format_float(value: f64) -> String {
    format_special(value)
        .unwrap_or_else(|| format_shortest(format!("{value}"), format!("{value:e}"), 15))
}

/// PostgreSQL's float4 text form.
pub fn format_float4(value: f32) -> String {
    format_special(value as f64)
        .unwrap_or_else(|| format_shortest(format!("{value}"), format!("{value:e}"), 6))
}

/// The truth of a boolean value (NULL is false here; three-valued logic is the callers').
pub fn truth(value: &Value) -> SqlResult<bool> {
    match value {
        Value::Bool(v) => Ok(*v),
        Value::Null => Ok(false),
        _ => Err(SqlError::mismatch("argument must be type boolean")),
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

    #[test]
    fn text_round_trips_of_the_new_types() {
        let cases = [
            (DataType::Float4, "3.1415927"),
            (DataType::Float4, "1e+10"),
            (DataType::Numeric(None), "-0.000100"),
            (DataType::Numeric(Some((5, 2))), "123.45"),
            (DataType::Bytea, "\\x00ff10"),
            (DataType::Date, "2024-02-29"),
            (DataType::Timestamp, "1999-12-31 23:59:59.999999"),
            (DataType::TimestampTz, "2020-01-02 03:04:05.5+00"),
            (DataType::Float8, "1.2345678901234568e+17"),
        ];
        for (data_type, text) in cases {
            let text = text.replace("\\\\", "\\");
            let value = Value::parse(&text, data_type).unwrap();
            assert_eq!(value.to_text().unwrap(), text, "{data_type}");
        }
        let padded = Value::parse("ab  ", DataType::Char(Some(4))).unwrap();
        assert_eq!(padded, Value::Text("ab".into()));
        assert_eq!(
            padded.to_text_typed(DataType::Char(Some(4))).unwrap(),
            "ab  "
        );
        assert_eq!(
            Value::parse("abcde", DataType::Char(Some(4)))
                .unwrap_err()
                .code,
            sqlstate::STRING_DATA_RIGHT_TRUNCATION
        );
    }

    #[test]
    fn casts_between_the_new_types() {
        let numeric = |text: &str| Value::parse(text, DataType::Numeric(None)).unwrap();
        assert_eq!(numeric("2.5").cast(DataType::Int4), Ok(Value::Int(3)));
        assert_eq!(numeric("-2.5").cast(DataType::Int4), Ok(Value::Int(-3)));
        assert_eq!(
            Value::Int(7)
                .cast(DataType::Numeric(Some((4, 1))))
                .unwrap()
                .to_text()
                .unwrap(),
            "7.0"
        );
        assert_eq!(
            Value::Float(0.1).cast(DataType::Numeric(None)),
            Ok(numeric("0.1"))
        );
        assert_eq!(
            Value::Date(1).cast(DataType::Timestamp),
            Ok(Value::Timestamp(86_400_000_000))
        );
        assert_eq!(
            Value::Float(1e300).cast(DataType::Float4).unwrap_err().code,
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE
        );
        assert_eq!(
            Value::Bool(true).cast(DataType::Date).unwrap_err().code,
            sqlstate::CANNOT_COERCE
        );
        assert_eq!(
            numeric("1.5").compare(&Value::Int(2)),
            Ok(Some(Ordering::Less))
        );
        assert_eq!(
            numeric("1.50").compare(&numeric("1.5")),
            Ok(Some(Ordering::Equal))
        );
        assert_eq!(
            Value::Date(0).compare(&Value::Timestamp(1)),
            Ok(Some(Ordering::Less))
        );
    }
}

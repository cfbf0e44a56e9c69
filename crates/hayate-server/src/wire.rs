//! Values on the wire: parameter values in (text or binary format) and result rows out.

use std::io::Write;

use bytes::{BufMut, BytesMut};
use hayate_sql::types::{numeric, uuid, Interval};
use hayate_sql::{sqlstate, DataType, OutputColumn, SqlError, SqlResult, Value};
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::messages::data::DataRow;

/// The PostgreSQL type of one of our types.
pub fn pg_type(data_type: DataType) -> Type {
    match data_type {
        DataType::Int2 => Type::INT2,
        DataType::Int4 => Type::INT4,
        DataType::Int8 => Type::INT8,
        DataType::Float4 => Type::FLOAT4,
        DataType::Float8 => Type::FLOAT8,
        DataType::Numeric(_) => Type::NUMERIC,
        DataType::Bool => Type::BOOL,
        DataType::Varchar(_) => Type::VARCHAR,
        DataType::Char(_) => Type::BPCHAR,
        DataType::Bytea => Type::BYTEA,
        DataType::Date => Type::DATE,
        DataType::Timestamp => Type::TIMESTAMP,
        DataType::TimestampTz => Type::TIMESTAMPTZ,
        DataType::Int2Array => Type::INT2_ARRAY,
        DataType::Uuid => Type::UUID,
        DataType::Json => Type::JSON,
        DataType::Jsonb => Type::JSONB,
        DataType::Interval => Type::INTERVAL,
        DataType::TextArray => Type::TEXT_ARRAY,
        DataType::Int4Array => Type::INT4_ARRAY,
        DataType::Int8Array => Type::INT8_ARRAY,
        // Only the oid goes on the wire (RowDescription, ParameterDescription).
        DataType::Enum(oid) => Type::new(
            "enum".into(),
            oid,
            postgres_types::Kind::Enum(Vec::new()),
            "public".into(),
        ),
        DataType::Text | DataType::Unknown => Type::TEXT,
    }
}

/// Our type for a parameter type the client declared (Unknown: let the binder infer it).
pub fn declared_type(pg_type: Option<&Type>) -> DataType {
    let Some(t) = pg_type else {
        return DataType::Unknown;
    };
    let types = [
        (Type::INT2, DataType::Int2),
        (Type::INT4, DataType::Int4),
        (Type::INT8, DataType::Int8),
        (Type::FLOAT4, DataType::Float4),
        (Type::FLOAT8, DataType::Float8),
        (Type::NUMERIC, DataType::Numeric(None)),
        (Type::BOOL, DataType::Bool),
        (Type::TEXT, DataType::Text),
        (Type::BPCHAR, DataType::Char(None)),
        (Type::VARCHAR, DataType::Varchar(None)),
        (Type::BYTEA, DataType::Bytea),
        (Type::DATE, DataType::Date),
        (Type::TIMESTAMP, DataType::Timestamp),
        (Type::TIMESTAMPTZ, DataType::TimestampTz),
        (Type::UUID, DataType::Uuid),
        (Type::JSON, DataType::Json),
        (Type::JSONB, DataType::Jsonb),
        (Type::INTERVAL, DataType::Interval),
    ];
    types
        .into_iter()
        .find(|(pg, _)| pg == t)
        .map_or(DataType::Unknown, |(_, ours)| ours)
}

/// The RowDescription fields of a result, in the formats the client asked for.
pub fn fields(columns: &[OutputColumn], format: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(index, column)| {
            FieldInfo::new(
                column.name.clone(),
                None,
                None,
                pg_type(column.data_type),
                format.format_for(index),
            )
            .with_type_size(column.data_type.size())
            .with_type_modifier(column.data_type.pg_type_modifier())
        })
        .collect()
}

/// Decodes one parameter value of type `data_type`.
pub fn decode_parameter(
    bytes: Option<&[u8]>,
    binary: bool,
    data_type: DataType,
) -> SqlResult<Value> {
    let Some(bytes) = bytes else {
        return Ok(Value::Null);
    };
    if !binary {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\""))?;
        return Value::parse(text, data_type);
    }
    let wrong_size = || {
        SqlError::new(
            "22P03",
            format!("incorrect binary data format in parameter of type {data_type}"),
        )
    };
    fn array<const N: usize>(
        bytes: &[u8],
        wrong_size: impl Fn() -> SqlError,
    ) -> SqlResult<[u8; N]> {
        bytes.try_into().map_err(|_| wrong_size())
    }
    let utf8 = |bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\""))
    };
    let value = match data_type {
        DataType::Int2 => Value::Int(i16::from_be_bytes(array(bytes, wrong_size)?) as i64),
        DataType::Int4 => Value::Int(i32::from_be_bytes(array(bytes, wrong_size)?) as i64),
        DataType::Int8 => Value::Int(i64::from_be_bytes(array(bytes, wrong_size)?)),
        DataType::Float4 => Value::Float4(f32::from_be_bytes(array(bytes, wrong_size)?)),
        DataType::Float8 => Value::Float(f64::from_be_bytes(array(bytes, wrong_size)?)),
        DataType::Numeric(_) => Value::Numeric(numeric::decode_binary(bytes)?),
        DataType::Bool => match bytes {
            [byte] => Value::Bool(*byte != 0),
            _ => return Err(wrong_size()),
        },
        DataType::Bytea => Value::Bytes(bytes.to_vec()),
        DataType::Date => Value::Date(i32::from_be_bytes(array(bytes, wrong_size)?)),
        DataType::Timestamp => Value::Timestamp(i64::from_be_bytes(array(bytes, wrong_size)?)),
        DataType::TimestampTz => Value::TimestampTz(i64::from_be_bytes(array(bytes, wrong_size)?)),
        DataType::Text
        | DataType::Varchar(_)
        | DataType::Char(_)
        | DataType::Json
        | DataType::Enum(_)
        | DataType::Unknown => Value::Text(utf8(bytes)?),
        // jsonb's binary form is a version byte (1) and the text.
        DataType::Jsonb => match bytes.split_first() {
            Some((1, text)) => Value::Text(utf8(text)?),
            _ => {
                return Err(SqlError::new(
                    "22P03",
                    "unsupported jsonb version number in a binary parameter",
                ))
            }
        },
        DataType::Uuid => Value::Text(uuid::format(&array(bytes, wrong_size)?)),
        DataType::Interval => {
            let bytes: [u8; 16] = array(bytes, wrong_size)?;
            let field = |range: std::ops::Range<usize>| {
                let mut buffer = [0u8; 8];
                let width = range.len();
                buffer[8 - width..].copy_from_slice(&bytes[range]);
                let value = i64::from_be_bytes(buffer);
                // Sign-extend the 4-byte fields.
                match width {
                    4 => value as i32 as i64,
                    _ => value,
                }
            };
            Value::Interval(Interval {
                micros: field(0..8),
                days: field(8..12),
                months: field(12..16),
            })
        }
        DataType::Int2Array | DataType::TextArray | DataType::Int4Array | DataType::Int8Array => {
            Value::Text(decode_binary_array(bytes, data_type)?)
        }
    };
    // Checks lengths and typmods as the text form would.
    match data_type {
        DataType::Unknown => Ok(value),
        _ => value.cast(data_type),
    }
}

/// A one-dimensional array in PostgreSQL's binary form (dimension count, null flag, element
/// oid, per dimension its length and lower bound, per element a length (-1: NULL) and the
/// element's binary form), as its text form. Elements of int2, int4, int8 and text.
fn decode_binary_array(bytes: &[u8], data_type: DataType) -> SqlResult<String> {
    let malformed = || {
        SqlError::new(
            "22P03",
            format!("incorrect binary data format in parameter of type {data_type}"),
        )
    };
    let mut rest = bytes;
    let mut take = |length: usize| -> SqlResult<&[u8]> {
        if rest.len() < length {
            return Err(malformed());
        }
        let (taken, after) = rest.split_at(length);
        rest = after;
        Ok(taken)
    };
    let int = |bytes: &[u8]| i32::from_be_bytes(bytes.try_into().unwrap_or_default());
    let dimensions = int(take(4)?);
    let _has_null = take(4)?;
    let element_oid = int(take(4)?);
    let count = match dimensions {
        0 => 0,
        1 => {
            let length = int(take(4)?);
            let _lower_bound = take(4)?;
            usize::try_from(length).map_err(|_| malformed())?
        }
        _ => return Err(SqlError::unsupported("a multidimensional array parameter")),
    };
    let mut elements: Vec<Option<String>> = Vec::with_capacity(count.min(bytes.len()));
    for _ in 0..count {
        let length = int(take(4)?);
        if length < 0 {
            elements.push(None);
            continue;
        }
        let element = take(length as usize)?;
        let text = match (element_oid, element.len()) {
            (21, 2) => i16::from_be_bytes([element[0], element[1]]).to_string(),
            (23, 4) => int(element).to_string(),
            (20, 8) => i64::from_be_bytes(element.try_into().unwrap_or_default()).to_string(),
            (25 | 1043 | 1042 | 19, _) => std::str::from_utf8(element)
                .map_err(|_| SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\""))?
                .to_string(),
            _ => return Err(malformed()),
        };
        elements.push(Some(text));
    }
    if !rest.is_empty() {
        return Err(malformed());
    }
    Ok(hayate_sql::system::array::format(&elements))
}

/// A DataRow's fields for a simple query's response.
pub fn encode_row(
    values: &[Value],
    columns: &[OutputColumn],
    format: &Format,
) -> SqlResult<DataRow> {
    let mut buffer = BytesMut::with_capacity(row_capacity_bytes(values, columns));
    put_fields(&mut buffer, values, columns, format)?;
    Ok(DataRow::new(buffer, values.len() as i16))
}

/// A whole DataRow message (type byte, length, field count, fields) appended to `out`;
/// nothing is appended on an error.
pub fn put_data_row(
    out: &mut BytesMut,
    values: &[Value],
    columns: &[OutputColumn],
    format: &Format,
) -> SqlResult<()> {
    let start = out.len();
    out.reserve(7 + row_capacity_bytes(values, columns));
    out.put_u8(b'D');
    out.put_i32(0);
    out.put_i16(values.len() as i16);
    if let Err(error) = put_fields(out, values, columns, format) {
        out.truncate(start);
        return Err(error);
    }
    let length = (out.len() - start - 1) as i32;
    out[start + 1..start + 5].copy_from_slice(&length.to_be_bytes());
    Ok(())
}

/// Each value as a field: its length (-1 for NULL) and its bytes in the column's format.
fn put_fields(
    buffer: &mut BytesMut,
    values: &[Value],
    columns: &[OutputColumn],
    format: &Format,
) -> SqlResult<()> {
    for (index, (value, column)) in values.iter().zip(columns).enumerate() {
        if value.is_null() {
            buffer.put_i32(-1);
            continue;
        }
        let length_at = buffer.len();
        buffer.put_i32(0);
        if format.format_for(index) == FieldFormat::Text {
            encode_text(buffer, value, column.data_type);
        } else {
            encode_binary(buffer, value, column.data_type)?;
        }
        let length = (buffer.len() - length_at - 4) as i32;
        buffer[length_at..length_at + 4].copy_from_slice(&length.to_be_bytes());
    }
    Ok(())
}

fn row_capacity_bytes(values: &[Value], columns: &[OutputColumn]) -> usize {
    values
        .iter()
        .zip(columns)
        .map(|(value, column)| {
            4 + match (value, column.data_type) {
                (Value::Text(text), DataType::Char(Some(length))) => {
                    text.len().max(length as usize)
                }
                (Value::Text(text), _) => text.len(),
                (Value::Bytes(bytes), _) => bytes.len(),
                _ => 16,
            }
        })
        .sum()
}

/// The text form of a value as a result column of `data_type` shows it
/// (`Value::to_text_typed`), written without an intermediate string where that is easy.
fn encode_text(buffer: &mut BytesMut, value: &Value, data_type: DataType) {
    match value {
        Value::Text(text) => put_text(buffer, text, data_type),
        Value::Int(v) => {
            // Writing into a BytesMut cannot fail.
            let _ = write!(buffer.writer(), "{v}");
        }
        _ => {
            let text = value.to_text_typed(data_type).unwrap_or_default();
            buffer.put_slice(text.as_bytes());
        }
    }
}

/// A text value as a column of `data_type` shows it: char(n) padded with spaces to n
/// characters.
fn put_text(buffer: &mut BytesMut, text: &str, data_type: DataType) {
    buffer.put_slice(text.as_bytes());
    buffer.put_bytes(b' ', data_type.padding_of(text));
}

fn encode_binary(buffer: &mut BytesMut, value: &Value, data_type: DataType) -> SqlResult<()> {
    match (value, data_type) {
        (Value::Int(v), DataType::Int2) => buffer.put_i16(*v as i16),
        (Value::Int(v), DataType::Int4) => buffer.put_i32(*v as i32),
        (Value::Int(v), DataType::Int8) => buffer.put_i64(*v),
        (Value::Float(v), DataType::Float8) => buffer.put_f64(*v),
        (Value::Float4(v), DataType::Float4) => buffer.put_f32(*v),
        (Value::Numeric(v), DataType::Numeric(_)) => buffer.put_slice(&numeric::encode_binary(v)),
        (Value::Bool(v), DataType::Bool) => buffer.put_u8(*v as u8),
        (Value::Bytes(v), DataType::Bytea) => buffer.put_slice(v),
        (Value::Date(v), DataType::Date) => buffer.put_i32(*v),
        (Value::Timestamp(v), DataType::Timestamp)
        | (Value::TimestampTz(v), DataType::TimestampTz) => buffer.put_i64(*v),
        (Value::Text(text), t) if t.is_array() => put_binary_array(buffer, text, t)?,
        (Value::Text(text), t)
            if t.is_text()
                || matches!(t, DataType::Unknown | DataType::Json | DataType::Enum(_)) =>
        {
            put_text(buffer, text, t)
        }
        (Value::Text(text), DataType::Jsonb) => {
            buffer.put_u8(1);
            buffer.put_slice(text.as_bytes());
        }
        (Value::Text(text), DataType::Uuid) => buffer.put_slice(&uuid::parse(text)?),
        (Value::Interval(v), DataType::Interval) => {
            buffer.put_i64(v.micros);
            buffer.put_i32(v.days as i32);
            buffer.put_i32(v.months as i32);
        }
        // A value of another type than its column (e.g. a system table's): its text form
        // converted to the column's type.
        (value, t) if !value.is_null() && value.clone().cast(t).is_ok_and(|v| v != *value) => {
            let converted = value.clone().cast(t)?;
            return encode_binary(buffer, &converted, t);
        }
        (value, data_type) => {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!("cannot send {value:?} as {data_type}"),
            ))
        }
    }
    Ok(())
}

/// An array (in its text form) in PostgreSQL's binary array form: one dimension, lower
/// bound 1, the element type's oid, each element length-prefixed (-1: NULL).
fn put_binary_array(buffer: &mut BytesMut, text: &str, data_type: DataType) -> SqlResult<()> {
    let elements = hayate_sql::system::array::elements(text).ok_or_else(|| {
        SqlError::new(
            sqlstate::INTERNAL_ERROR,
            format!("cannot send {text:?} as {data_type}"),
        )
    })?;
    let element_oid = match data_type {
        DataType::Int2Array => 21,
        DataType::Int4Array => 23,
        DataType::Int8Array => 20,
        _ => 25,
    };
    let has_null = elements.iter().any(Option::is_none);
    buffer.put_i32(if elements.is_empty() { 0 } else { 1 });
    buffer.put_i32(has_null as i32);
    buffer.put_i32(element_oid);
    if !elements.is_empty() {
        buffer.put_i32(elements.len() as i32);
        buffer.put_i32(1);
    }
    for element in elements {
        let Some(element) = element else {
            buffer.put_i32(-1);
            continue;
        };
        let integer = || {
            element.trim().parse::<i64>().map_err(|_| {
                SqlError::new(
                    sqlstate::INTERNAL_ERROR,
                    format!("cannot send {element:?} as an element of {data_type}"),
                )
            })
        };
        match element_oid {
            21 => {
                buffer.put_i32(2);
                buffer.put_i16(integer()? as i16);
            }
            23 => {
                buffer.put_i32(4);
                buffer.put_i32(integer()? as i32);
            }
            20 => {
                buffer.put_i32(8);
                buffer.put_i64(integer()?);
            }
            _ => {
                buffer.put_i32(element.len() as i32);
                buffer.put_slice(element.as_bytes());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_decode_in_both_formats() {
        let int4 = 7i32.to_be_bytes();
        assert_eq!(
            decode_parameter(Some(&int4), true, DataType::Int4),
            Ok(Value::Int(7))
        );
        assert_eq!(
            decode_parameter(Some(b"7"), false, DataType::Int8),
            Ok(Value::Int(7))
        );
        assert_eq!(
            decode_parameter(None, true, DataType::Int4),
            Ok(Value::Null)
        );
        assert_eq!(
            decode_parameter(Some(&[1, 2, 3]), true, DataType::Int4)
                .unwrap_err()
                .code,
            "22P03"
        );
        assert_eq!(
            decode_parameter(Some(b"x"), false, DataType::Int4)
                .unwrap_err()
                .code,
            sqlstate::INVALID_TEXT_REPRESENTATION
        );
    }

    #[test]
    fn new_types_decode_in_both_formats() {
        let both = |text: &str, binary: &[u8], data_type: DataType| {
            let from_text = decode_parameter(Some(text.as_bytes()), false, data_type).unwrap();
            let from_binary = decode_parameter(Some(binary), true, data_type).unwrap();
            assert_eq!(from_text, from_binary, "{data_type}");
            from_text
        };
        both("1.5", &1.5f32.to_be_bytes(), DataType::Float4);
        both("2020-01-02", &7306i32.to_be_bytes(), DataType::Date);
        both(
            "2000-01-01 00:00:01",
            &1_000_000i64.to_be_bytes(),
            DataType::Timestamp,
        );
        both("\\x00ff", &[0, 255], DataType::Bytea);
        let numeric = both(
            "12345.678",
            &[0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1A, 0x7C],
            DataType::Numeric(None),
        );
        assert_eq!(numeric.to_text().unwrap(), "12345.678");
        let padded = both("ab", b"ab", DataType::Char(Some(4)));
        assert_eq!(
            padded.to_text_typed(DataType::Char(Some(4))).unwrap(),
            "ab  "
        );
        assert_eq!(
            decode_parameter(Some(&[1, 2]), true, DataType::Date)
                .unwrap_err()
                .code,
            "22P03"
        );
        assert_eq!(
            decode_parameter(
                Some(&[0, 1, 0, 0, 0x80, 0, 0, 0, 0, 1]),
                true,
                DataType::Numeric(None)
            )
            .unwrap_err()
            .code,
            "22P03"
        );
    }
}

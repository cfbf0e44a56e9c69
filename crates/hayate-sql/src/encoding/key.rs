//! Order-preserving (memcomparable) keys: comparing two encoded keys byte by byte gives the
//! order of the values, column by column. Primary key columns are never NULL.
//!
//! Per column:
//! - integers (every width): 8 bytes, big-endian, sign bit flipped;
//! - float8: 8 bytes, big-endian; positive values get their sign bit set, negative values
//!   have every bit inverted (so -inf < ... < -0 <= +0 < ... < inf < NaN);
//! - float4: as float8 (of the same value);
//! - numeric: see `types::numeric::encode_key` (a sign byte, a decimal exponent, the digits);
//! - bool: one byte, 0 or 1;
//! - text, varchar, char(n) (without trailing spaces) and bytea: the bytes with 0x00 written
//!   as 0x00 0xFF, ended by 0x00 0x01. The terminator sorts below every escaped byte, so a
//!   prefix sorts first and each column is self-delimiting;
//! - date: i32 days, 4 bytes big-endian, sign bit flipped;
//! - timestamp, timestamptz: i64 microseconds, as integers;
//! - uuid: its 16 bytes;
//! - json, jsonb: as text (jsonb's canonical text);
//! - interval: its span (`Interval::span`) as an i128, 16 bytes big-endian, sign bit
//!   flipped (intervals of equal span are equal keys, as they are equal in PostgreSQL).

use crate::error::{SqlError, SqlResult};
use crate::types::{numeric, uuid, DataType, Value};

/// Appends the key encoding of `value`, already of column type `data_type`.
pub fn encode_column(out: &mut Vec<u8>, value: &Value, data_type: DataType) -> SqlResult<()> {
    match (value, data_type) {
        (Value::Int(v), t) if t.is_integer() => {
            out.extend_from_slice(&((*v as u64) ^ (1 << 63)).to_be_bytes())
        }
        (Value::Float(_) | Value::Float4(_), DataType::Float8 | DataType::Float4) => {
            let v = value.as_f64().expect("a float");
            // -0.0 and 0.0 are equal in SQL: encode both as 0.0. Every NaN (arithmetic
            // makes ones with the sign bit set) is the one NaN, above every other value.
            let v = if v == 0.0 {
                0.0f64
            } else if v.is_nan() {
                f64::NAN
            } else {
                v
            };
            let bits = v.to_bits();
            let ordered = if bits >> 63 == 0 {
                bits | (1 << 63)
            } else {
                !bits
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        (Value::Numeric(v), DataType::Numeric(_)) => numeric::encode_key(out, v),
        (Value::Bool(v), DataType::Bool) => out.push(*v as u8),
        (Value::Text(text), t) if t.is_stored_as_text() => encode_bytes(out, text.as_bytes()),
        (Value::Text(text), DataType::Uuid) => out.extend_from_slice(&uuid::parse(text)?),
        (Value::Interval(v), DataType::Interval) => {
            out.extend_from_slice(&((v.span() as u128) ^ (1 << 127)).to_be_bytes())
        }
        (Value::Bytes(bytes), DataType::Bytea) => encode_bytes(out, bytes),
        (Value::Date(v), DataType::Date) => {
            out.extend_from_slice(&((*v as u32) ^ (1 << 31)).to_be_bytes())
        }
        (Value::Timestamp(v), DataType::Timestamp)
        | (Value::TimestampTz(v), DataType::TimestampTz) => {
            out.extend_from_slice(&((*v as u64) ^ (1 << 63)).to_be_bytes())
        }
        (Value::Null, _) => {
            return Err(SqlError::new(
                crate::error::sqlstate::NOT_NULL_VIOLATION,
                "null value in primary key column",
            ))
        }
        (value, t) => {
            return Err(SqlError::mismatch(format!(
                "key value {value:?} does not match column type {t}"
            )))
        }
    }
    Ok(())
}

fn encode_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    for &byte in bytes {
        out.push(byte);
        if byte == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// A constant converted to a key column's type for a lookup: None if no key can equal it
/// (NULL, or a fractional number for an integer column). Integers of every width encode
/// alike, so an int8 parameter finds an int4 key without a cast; numbers convert exactly
/// (1.5 never finds the integer 2); text is parsed as the column's type.
pub fn key_value(value: Value, data_type: DataType) -> SqlResult<Option<Value>> {
    use DataType as T;
    Ok(match (value, data_type) {
        (Value::Null, _) => None,
        (Value::Int(v), t) if t.is_integer() => Some(Value::Int(v)),
        (Value::Float(v), t) if t.is_integer() => {
            (v.fract() == 0.0 && v.abs() < 9.2e18).then_some(Value::Int(v as i64))
        }
        (Value::Float4(v), t) if t.is_integer() => {
            (v.fract() == 0.0 && v.abs() < 9.2e18).then_some(Value::Int(v as i64))
        }
        (Value::Numeric(v), t) if t.is_integer() => {
            let whole = v.fract().is_zero();
            whole.then(|| numeric::to_i64(&v)).flatten().map(Value::Int)
        }
        (value @ (Value::Int(_) | Value::Float(_) | Value::Float4(_)), T::Float8 | T::Float4) => {
            value.as_f64().map(Value::Float)
        }
        (Value::Numeric(v), T::Float8 | T::Float4) => Some(Value::Float(numeric::to_f64(&v))),
        (Value::Int(v), T::Numeric(_)) => Some(Value::Numeric(numeric::from_i64(v))),
        (Value::Float(v), T::Numeric(_)) => numeric::from_f64(v).ok().map(Value::Numeric),
        (Value::Float4(v), T::Numeric(_)) => numeric::from_f64(v as f64).ok().map(Value::Numeric),
        (value @ Value::Numeric(_), T::Numeric(_)) => Some(value),
        (Value::Text(text), T::Char(_)) => Some(Value::Text(text.trim_end_matches(' ').into())),
        (value @ Value::Text(_), t) if t.is_text() => Some(value),
        (Value::Text(text), t) => match Value::parse(&text, t) {
            Ok(value) => Some(value),
            // A text that does not fit char(n)/numeric(p,s) equals no key of the column.
            Err(error) if error.code == crate::error::sqlstate::STRING_DATA_RIGHT_TRUNCATION => {
                None
            }
            Err(error) => return Err(error),
        },
        (value @ Value::Bool(_), T::Bool) => Some(value),
        (value @ Value::Bytes(_), T::Bytea) => Some(value),
        (value @ Value::Interval(_), T::Interval) => Some(value),
        (value @ (Value::Date(_) | Value::Timestamp(_) | Value::TimestampTz(_)), t)
            if t.is_datetime() =>
        {
            // Exact only: a timestamp that is not midnight equals no date.
            let converted = value.clone().cast(t)?;
            (converted.compare(&value)? == Some(std::cmp::Ordering::Equal)).then_some(converted)
        }
        _ => None,
    })
}

/// Encodes a whole key.
pub fn encode(values: &[Value], types: &[DataType]) -> SqlResult<Vec<u8>> {
    let mut out = Vec::with_capacity(16 * values.len());
    for (value, data_type) in values.iter().zip(types) {
        encode_column(&mut out, value, *data_type)?;
    }
    Ok(out)
}

/// The smallest byte string greater than every string that starts with `prefix`, or None if
/// there is none (the prefix is all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut successor = prefix.to_vec();
    while let Some(last) = successor.pop() {
        if last < 0xFF {
            successor.push(last + 1);
            return Some(successor);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(value: Value, data_type: DataType) -> Vec<u8> {
        encode(&[value], &[data_type]).unwrap()
    }

    #[test]
    fn integers_sort_like_their_values() {
        let values = [i64::MIN, -300, -1, 0, 1, 255, 256, i64::MAX];
        let keys: Vec<_> = values
            .iter()
            .map(|v| key(Value::Int(*v), DataType::Int8))
            .collect();
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]));
        // Every integer width encodes alike, so an int4 key is found with an int8 value.
        assert_eq!(
            key(Value::Int(7), DataType::Int4),
            key(Value::Int(7), DataType::Int8)
        );
    }

    #[test]
    fn floats_and_text_sort_like_their_values() {
        let floats = [
            f64::NEG_INFINITY,
            -2.5,
            -0.0,
            1e-9,
            3.0,
            f64::INFINITY,
            f64::NAN,
        ];
        let keys: Vec<_> = floats
            .iter()
            .map(|v| key(Value::Float(*v), DataType::Float8))
            .collect();
        assert!(keys.windows(2).all(|pair| pair[0] <= pair[1]));
        let texts = ["", "a", "a\0", "a\0b", "ab", "b"];
        let keys: Vec<_> = texts
            .iter()
            .map(|t| key(Value::Text(t.to_string()), DataType::Text))
            .collect();
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn composite_keys_order_by_first_column_first() {
        let types = [DataType::Text, DataType::Int4];
        let a = encode(&[Value::Text("a".into()), Value::Int(9)], &types).unwrap();
        let b = encode(&[Value::Text("ab".into()), Value::Int(1)], &types).unwrap();
        assert!(a < b);
        let prefix = key(Value::Text("a".into()), DataType::Text);
        assert!(a.starts_with(&prefix) && !b.starts_with(&prefix));
        assert!(b < prefix_successor(&prefix).unwrap() || !b.starts_with(&prefix));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }

    mod order_preservation {
        use super::*;
        use crate::types::Decimal;
        use proptest::prelude::*;

        /// Encoded keys compare like the values: the property every key type must have.
        fn assert_order(a: Value, b: Value, data_type: DataType) {
            let (ka, kb) = (key(a.clone(), data_type), key(b.clone(), data_type));
            let expected = a.compare(&b).unwrap().unwrap();
            assert_eq!(ka.cmp(&kb), expected, "{a:?} vs {b:?} as {data_type}");
        }

        fn decimal() -> impl Strategy<Value = Decimal> {
            (any::<i64>(), 0u32..=12).prop_map(|(m, s)| Decimal::from_i128_with_scale(m as i128, s))
        }

        proptest! {
            #[test]
            fn numeric(a in decimal(), b in decimal()) {
                assert_order(Value::Numeric(a), Value::Numeric(b), DataType::Numeric(None));
            }

            #[test]
            fn float4(a in any::<f32>(), b in any::<f32>()) {
                assert_order(Value::Float4(a), Value::Float4(b), DataType::Float4);
            }

            #[test]
            fn date(a in any::<i32>(), b in any::<i32>()) {
                assert_order(Value::Date(a), Value::Date(b), DataType::Date);
            }

            #[test]
            fn timestamp(a in any::<i64>(), b in any::<i64>()) {
                assert_order(Value::Timestamp(a), Value::Timestamp(b), DataType::Timestamp);
            }

            #[test]
            fn bytea(a in proptest::collection::vec(any::<u8>(), 0..6),
                     b in proptest::collection::vec(any::<u8>(), 0..6)) {
                assert_order(Value::Bytes(a), Value::Bytes(b), DataType::Bytea);
            }

            #[test]
            fn char_ignores_trailing_spaces(a in "[ a-c]{0,5}", b in "[ a-c]{0,5}") {
                let a = Value::parse(&a, DataType::Char(Some(5))).unwrap();
                let b = Value::parse(&b, DataType::Char(Some(5))).unwrap();
                assert_order(a, b, DataType::Char(Some(5)));
            }

            /// Composite keys: the first column decides, a numeric prefix never
            /// swallows the next column.
            #[test]
            fn numeric_then_integer(a in decimal(), x in any::<i64>(), b in decimal(), y in any::<i64>()) {
                let types = [DataType::Numeric(None), DataType::Int8];
                let ka = encode(&[Value::Numeric(a), Value::Int(x)], &types).unwrap();
                let kb = encode(&[Value::Numeric(b), Value::Int(y)], &types).unwrap();
                let expected = a.cmp(&b).then(x.cmp(&y));
                prop_assert_eq!(ka.cmp(&kb), expected);
            }
        }
    }
}

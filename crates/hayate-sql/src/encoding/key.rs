//! Order-preserving (memcomparable) keys: comparing two encoded keys byte by byte gives the
//! order of the values, column by column. Primary key columns are never NULL.
//!
//! Per column:
//! - integers (every width): 8 bytes, big-endian, sign bit flipped;
//! - float8: 8 bytes, big-endian; positive values get their sign bit set, negative values
//!   have every bit inverted (so -inf < ... < -0 <= +0 < ... < inf < NaN);
//! - bool: one byte, 0 or 1;
//! - text: the UTF-8 bytes with 0x00 written as 0x00 0xFF, ended by 0x00 0x01. The terminator
//!   sorts below every escaped byte, so a prefix sorts first and each column is self-delimiting.

use crate::error::{SqlError, SqlResult};
use crate::types::{DataType, Value};

/// Appends the key encoding of `value`, already of column type `data_type`.
pub fn encode_column(out: &mut Vec<u8>, value: &Value, data_type: DataType) -> SqlResult<()> {
    match (value, data_type) {
        (Value::Int(v), t) if t.is_integer() => {
            out.extend_from_slice(&((*v as u64) ^ (1 << 63)).to_be_bytes())
        }
        (Value::Float(v), DataType::Float8) => {
            // -0.0 and 0.0 are equal in SQL: encode both as 0.0.
            let v = if *v == 0.0 { 0.0f64 } else { *v };
            let bits = v.to_bits();
            let ordered = if bits >> 63 == 0 {
                bits | (1 << 63)
            } else {
                !bits
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        (Value::Bool(v), DataType::Bool) => out.push(*v as u8),
        (Value::Text(text), t) if t.is_text() => {
            for &byte in text.as_bytes() {
                out.push(byte);
                if byte == 0 {
                    out.push(0xFF);
                }
            }
            out.extend_from_slice(&[0x00, 0x01]);
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
}

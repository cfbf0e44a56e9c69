//! The rows of temporary files and their cost in memory.
//!
//! 1. An operator that holds rows counts each at `row_bytes` against `work_mem`.
//! 2. Past `work_mem` it writes rows with `encode_row`: a self-describing encoding (a tag per
//!    value), since an operator's rows carry no column types.
//! 3. Reading a run back, `decode_row` checks every length and tag: the bytes passed the
//!    temporary block's checksum, so a failure is a bug or a damaged device, an error.

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::{numeric, Interval, Value};

/// What a row costs in memory beyond its values (the Vec and the allocator's rounding).
const ROW_OVERHEAD_BYTES: usize = 48;

/// The estimated memory of a row (see the module doc).
pub fn row_bytes(row: &[Value]) -> usize {
    let heap: usize = row
        .iter()
        .map(|value| match value {
            Value::Text(text) => text.len(),
            Value::Bytes(bytes) => bytes.len(),
            _ => 0,
        })
        .sum();
    ROW_OVERHEAD_BYTES + std::mem::size_of_val(row) + heap
}

/// Appends a row in the temporary encoding: u32 value count, then per value a tag byte and
/// its bytes (little-endian; text and bytea with a u32 length; numeric as in table rows).
pub fn encode_row(out: &mut Vec<u8>, row: &[Value]) {
    out.extend_from_slice(&(row.len() as u32).to_le_bytes());
    for value in row {
        match value {
            Value::Null => out.push(0),
            Value::Int(v) => put(out, 1, &v.to_le_bytes()),
            Value::Float(v) => put(out, 2, &v.to_bits().to_le_bytes()),
            Value::Float4(v) => put(out, 3, &v.to_bits().to_le_bytes()),
            Value::Numeric(v) => {
                out.push(4);
                numeric::encode_row(out, v);
            }
            Value::Bool(v) => put(out, 5, &[*v as u8]),
            Value::Text(text) => put_bytes(out, 6, text.as_bytes()),
            Value::Bytes(bytes) => put_bytes(out, 7, bytes),
            Value::Date(v) => put(out, 8, &v.to_le_bytes()),
            Value::Timestamp(v) => put(out, 9, &v.to_le_bytes()),
            Value::TimestampTz(v) => put(out, 10, &v.to_le_bytes()),
            Value::Interval(v) => {
                out.push(11);
                for field in [v.months, v.days, v.micros] {
                    out.extend_from_slice(&field.to_le_bytes());
                }
            }
        }
    }
}

fn put(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    out.extend_from_slice(bytes);
}

fn put_bytes(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Decodes `encode_row`. The bytes passed the temporary block's checksum, so a failure is a
/// bug or a damaged device: an error, never a panic.
pub fn decode_row(bytes: &[u8]) -> SqlResult<Vec<Value>> {
    let corrupt = || SqlError::new(sqlstate::DATA_CORRUPTED, "corrupt row in a temporary file");
    let mut at = 0usize;
    let mut take = |length: usize| -> SqlResult<&[u8]> {
        let end = at.checked_add(length).ok_or_else(corrupt)?;
        let slice = bytes.get(at..end).ok_or_else(corrupt)?;
        at = end;
        Ok(slice)
    };
    fn array<const N: usize>(slice: &[u8]) -> [u8; N] {
        slice.try_into().expect("take returns N bytes")
    }
    let count = u32::from_le_bytes(array(take(4)?)) as usize;
    let mut row = Vec::with_capacity(count.min(bytes.len()));
    for _ in 0..count {
        let value = match take(1)?[0] {
            0 => Value::Null,
            1 => Value::Int(i64::from_le_bytes(array(take(8)?))),
            2 => Value::Float(f64::from_bits(u64::from_le_bytes(array(take(8)?)))),
            3 => Value::Float4(f32::from_bits(u32::from_le_bytes(array(take(4)?)))),
            4 => Value::Numeric(numeric::decode_row(&array(take(17)?)).ok_or_else(corrupt)?),
            5 => Value::Bool(take(1)?[0] != 0),
            tag @ (6 | 7) => {
                let length = u32::from_le_bytes(array(take(4)?)) as usize;
                let payload = take(length)?.to_vec();
                if tag == 6 {
                    Value::Text(String::from_utf8(payload).map_err(|_| corrupt())?)
                } else {
                    Value::Bytes(payload)
                }
            }
            8 => Value::Date(i32::from_le_bytes(array(take(4)?))),
            9 => Value::Timestamp(i64::from_le_bytes(array(take(8)?))),
            10 => Value::TimestampTz(i64::from_le_bytes(array(take(8)?))),
            11 => Value::Interval(Interval {
                months: i64::from_le_bytes(array(take(8)?)),
                days: i64::from_le_bytes(array(take(8)?)),
                micros: i64::from_le_bytes(array(take(8)?)),
            }),
            _ => return Err(corrupt()),
        };
        row.push(value);
    }
    if at != bytes.len() {
        return Err(corrupt());
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_the_temporary_encoding() {
        let row = vec![
            Value::Null,
            Value::Int(-7),
            Value::Float(f64::NAN),
            Value::Float4(1.5),
            Value::Numeric(numeric::parse("-12.50").unwrap()),
            Value::Bool(true),
            Value::Text("héllo\0".into()),
            Value::Bytes(vec![0, 255]),
            Value::Date(-3),
            Value::Timestamp(1 << 40),
            Value::TimestampTz(-1),
            Value::Interval(Interval {
                months: -1,
                days: 2,
                micros: -3,
            }),
        ];
        let mut bytes = Vec::new();
        encode_row(&mut bytes, &row);
        let decoded = decode_row(&bytes).unwrap();
        assert_eq!(format!("{decoded:?}"), format!("{row:?}"));
        for cut in 0..bytes.len() {
            assert!(decode_row(&bytes[..cut]).is_err());
        }
        let mut bad_tag = bytes.clone();
        bad_tag[4] = 99;
        assert!(decode_row(&bad_tag).is_err());
    }
}

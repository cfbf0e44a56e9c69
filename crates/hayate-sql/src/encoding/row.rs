//! The value of a table row in its B+tree (format version 1), little-endian:
//!
//! ```text
//! u8  format version (1)
//! u16 column count n
//! [u8; ceil(n/8)] null bitmap (bit i set: column i is NULL)
//! then for each non-NULL column, by its type:
//!   int2/int4/int8 -> i64 (8 bytes)   float8 -> f64 bits (8 bytes)   bool -> u8
//!   float4         -> f32 bits (4 bytes)
//!   numeric        -> i128 mantissa (16 bytes) + u8 scale (value = mantissa / 10^scale)
//!   text/varchar/char(n) -> u32 length + UTF-8 bytes (char(n) without trailing spaces)
//!   bytea          -> u32 length + bytes
//!   date           -> i32 days since 2000-01-01
//!   timestamp/timestamptz -> i64 microseconds since 2000-01-01 00:00:00 (UTC for tz)
//!   uuid           -> its 16 bytes
//!   json/jsonb     -> as text (jsonb in its canonical text)
//!   interval       -> i32 months, i32 days, i64 microseconds (16 bytes)
//! ```
//!
//! Every column is stored, the primary key columns too, so a row decodes without its key.
//! A row with fewer columns than the table (none today: there is no ADD COLUMN yet) would
//! read the missing ones as NULL.

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::{numeric, uuid, DataType, Interval, Value};

const FORMAT_VERSION: u8 = 1;

pub fn encode(values: &[Value], types: &[DataType]) -> SqlResult<Vec<u8>> {
    assert_eq!(values.len(), types.len(), "a row has one value per column");
    let count = u16::try_from(values.len())
        .map_err(|_| SqlError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, "too many columns"))?;
    let mut out = Vec::with_capacity(8 + values.len() * 9);
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&count.to_le_bytes());
    let bitmap_start = out.len();
    out.resize(bitmap_start + values.len().div_ceil(8), 0);
    for (index, (value, data_type)) in values.iter().zip(types).enumerate() {
        if value.is_null() {
            out[bitmap_start + index / 8] |= 1 << (index % 8);
            continue;
        }
        encode_value(&mut out, value, *data_type)?;
    }
    Ok(out)
}

fn encode_value(out: &mut Vec<u8>, value: &Value, data_type: DataType) -> SqlResult<()> {
    let put_bytes = |out: &mut Vec<u8>, bytes: &[u8]| -> SqlResult<()> {
        let length = u32::try_from(bytes.len())
            .map_err(|_| SqlError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, "value too long"))?;
        out.extend_from_slice(&length.to_le_bytes());
        out.extend_from_slice(bytes);
        Ok(())
    };
    match (value, data_type) {
        (Value::Int(v), t) if t.is_integer() => out.extend_from_slice(&v.to_le_bytes()),
        (Value::Float(v), DataType::Float8) => out.extend_from_slice(&v.to_bits().to_le_bytes()),
        (Value::Float4(v), DataType::Float4) => out.extend_from_slice(&v.to_bits().to_le_bytes()),
        (Value::Numeric(v), DataType::Numeric(_)) => numeric::encode_row(out, v),
        (Value::Bool(v), DataType::Bool) => out.push(*v as u8),
        (Value::Text(text), t) if t.is_stored_as_text() => put_bytes(out, text.as_bytes())?,
        (Value::Text(text), DataType::Uuid) => out.extend_from_slice(&uuid::parse(text)?),
        (Value::Interval(v), DataType::Interval) => {
            let narrow = |field: i64| {
                i32::try_from(field).map_err(|_| {
                    SqlError::new(
                        sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
                        "interval out of range",
                    )
                })
            };
            out.extend_from_slice(&narrow(v.months)?.to_le_bytes());
            out.extend_from_slice(&narrow(v.days)?.to_le_bytes());
            out.extend_from_slice(&v.micros.to_le_bytes());
        }
        (Value::Bytes(bytes), DataType::Bytea) => put_bytes(out, bytes)?,
        (Value::Date(v), DataType::Date) => out.extend_from_slice(&v.to_le_bytes()),
        (Value::Timestamp(v), DataType::Timestamp)
        | (Value::TimestampTz(v), DataType::TimestampTz) => out.extend_from_slice(&v.to_le_bytes()),
        (value, t) => {
            return Err(SqlError::mismatch(format!(
                "value {value:?} does not match column type {t}"
            )))
        }
    }
    Ok(())
}

/// Decodes a row of a table whose columns have `types`. Bytes come from disk: a malformed
/// row is an error naming the table, never a panic.
pub fn decode(bytes: &[u8], types: &[DataType], table: &str) -> SqlResult<Vec<Value>> {
    decode_columns(bytes, types, None, table)
}

/// `decode` of the columns `wanted` marks only, the others read as NULL: what a scan's filter
/// reads, before it decodes the whole of the rows that pass (most rows of a selective scan
/// are never decoded further), and all a query reads of a table's rows (`count(*)` none).
/// Skipped text is not checked for UTF-8 here, and nothing after the last wanted column is
/// read.
pub fn decode_some(
    bytes: &[u8],
    types: &[DataType],
    wanted: &[bool],
    table: &str,
) -> SqlResult<Vec<Value>> {
    decode_columns(bytes, types, Some(wanted), table)
}

fn decode_columns(
    bytes: &[u8],
    types: &[DataType],
    wanted: Option<&[bool]>,
    table: &str,
) -> SqlResult<Vec<Value>> {
    let corrupt = |what: &str| {
        SqlError::new(
            sqlstate::DATA_CORRUPTED,
            format!("corrupt row in table \"{table}\": {what}"),
        )
    };
    let mut reader = Reader { bytes, offset: 0 };
    let version = reader.take(1).ok_or_else(|| corrupt("empty"))?[0];
    if version != FORMAT_VERSION {
        return Err(corrupt(&format!("unknown row format {version}")));
    }
    let count = reader
        .take(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
        .ok_or_else(|| corrupt("truncated header"))?;
    if count > types.len() {
        return Err(corrupt(&format!(
            "{count} columns, table has {}",
            types.len()
        )));
    }
    let bitmap = reader
        .take(count.div_ceil(8))
        .ok_or_else(|| corrupt("truncated null bitmap"))?;
    let mut values = Vec::with_capacity(types.len());
    // Past the last wanted column nothing more is read.
    let stored = count;
    let count = match wanted {
        Some(wanted) => wanted
            .iter()
            .rposition(|wanted| *wanted)
            .map_or(0, |last| count.min(last + 1)),
        None => count,
    };
    for (index, data_type) in types.iter().enumerate().take(count) {
        if bitmap[index / 8] & (1 << (index % 8)) != 0 {
            values.push(Value::Null);
            continue;
        }
        if wanted.is_some_and(|wanted| !wanted.get(index).copied().unwrap_or(true)) {
            skip_value(&mut reader, *data_type)
                .ok_or_else(|| corrupt(&format!("column {index} truncated")))?;
            values.push(Value::Null);
            continue;
        }
        let value = decode_value(&mut reader, *data_type)
            .ok_or_else(|| corrupt(&format!("column {index} truncated or invalid")))?;
        values.push(value);
    }
    // Not `resize`, which clones its value through `Value::clone` once per column.
    values.resize_with(types.len(), || Value::Null);
    if count == stored && reader.offset != bytes.len() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(values)
}

/// One non-NULL column (None: truncated or not a valid value of the type).
fn decode_value(reader: &mut Reader, data_type: DataType) -> Option<Value> {
    fn array<const N: usize>(reader: &mut Reader) -> Option<[u8; N]> {
        reader.take(N)?.try_into().ok()
    }
    Some(match data_type {
        t if t.is_integer() => Value::Int(i64::from_le_bytes(array(reader)?)),
        DataType::Float8 => Value::Float(f64::from_bits(u64::from_le_bytes(array(reader)?))),
        DataType::Float4 => Value::Float4(f32::from_bits(u32::from_le_bytes(array(reader)?))),
        DataType::Numeric(_) => Value::Numeric(numeric::decode_row(&array(reader)?)?),
        DataType::Bool => Value::Bool(reader.take(1)?[0] != 0),
        DataType::Date => Value::Date(i32::from_le_bytes(array(reader)?)),
        DataType::Timestamp => Value::Timestamp(i64::from_le_bytes(array(reader)?)),
        DataType::TimestampTz => Value::TimestampTz(i64::from_le_bytes(array(reader)?)),
        DataType::Bytea => {
            let length = u32::from_le_bytes(array(reader)?) as usize;
            Value::Bytes(reader.take(length)?.to_vec())
        }
        DataType::Uuid => Value::Text(uuid::format(&array(reader)?)),
        DataType::Interval => Value::Interval(Interval {
            months: i32::from_le_bytes(array(reader)?) as i64,
            days: i32::from_le_bytes(array(reader)?) as i64,
            micros: i64::from_le_bytes(array(reader)?),
        }),
        _ => {
            let length = u32::from_le_bytes(array(reader)?) as usize;
            Value::Text(std::str::from_utf8(reader.take(length)?).ok()?.to_string())
        }
    })
}

/// Moves past one non-NULL column without making its value (None: truncated).
fn skip_value(reader: &mut Reader, data_type: DataType) -> Option<()> {
    value_bytes(reader, data_type).map(drop)
}

/// The encoding of one non-NULL column, moving past it (None: truncated).
fn value_bytes<'a>(reader: &mut Reader<'a>, data_type: DataType) -> Option<&'a [u8]> {
    let fixed = match data_type {
        t if t.is_integer() => 8,
        DataType::Float8 | DataType::Timestamp | DataType::TimestampTz => 8,
        DataType::Float4 | DataType::Date => 4,
        DataType::Numeric(_) => 17,
        DataType::Bool => 1,
        DataType::Uuid | DataType::Interval => 16,
        // bytea, text and the text-like types: u32 length + bytes (as `decode_value`).
        _ => {
            let start = reader.offset;
            let length = u32::from_le_bytes(reader.take(4)?.try_into().ok()?) as usize;
            reader.take(length)?;
            return reader.bytes.get(start..reader.offset);
        }
    };
    reader.take(fixed)
}

/// Tests of `column = value` run on a row's encoding, nothing decoded: a scan refuses most
/// rows of a selective filter this way while they are still in their page. Only types whose
/// values are equal exactly when their encodings are take part (integers, text, varchar,
/// bool, dates, timestamps, uuid, bytea; not floats, numeric, char(n), intervals, json or
/// enums, whose equality is not their bytes').
#[derive(Debug)]
pub struct EqualColumns {
    /// (column, encoded value), by column.
    tests: Vec<(usize, Vec<u8>)>,
}

impl EqualColumns {
    /// The tests of `pairs` a row of `types` can be given; None if there are none.
    pub fn new<'v>(
        pairs: impl IntoIterator<Item = (usize, &'v Value)>,
        types: &[DataType],
    ) -> Option<EqualColumns> {
        let mut tests = Vec::new();
        for (column, value) in pairs {
            let Some(&data_type) = types.get(column) else {
                continue;
            };
            let bytes_equal = match (value, data_type) {
                (Value::Int(_), t) => t.is_integer(),
                (Value::Text(_), t) => {
                    matches!(t, DataType::Text | DataType::Varchar(_) | DataType::Uuid)
                }
                (Value::Bool(_), DataType::Bool)
                | (Value::Date(_), DataType::Date)
                | (Value::Timestamp(_), DataType::Timestamp)
                | (Value::TimestampTz(_), DataType::TimestampTz)
                | (Value::Bytes(_), DataType::Bytea) => true,
                _ => false,
            };
            let mut encoded = Vec::new();
            if bytes_equal && encode_value(&mut encoded, value, data_type).is_ok() {
                tests.push((column, encoded));
            }
        }
        tests.sort_by_key(|(column, _)| *column);
        (!tests.is_empty()).then_some(EqualColumns { tests })
    }

    /// True if a test fails for the row: its column holds another value. A NULL is not
    /// refused (the comparison is NULL, not false: the AND goes on to its other conjuncts,
    /// whose errors must still be raised), nor is a row that cannot be read (its decoding
    /// reports it).
    pub fn refuses(&self, bytes: &[u8], types: &[DataType]) -> bool {
        self.first_failure(bytes, types) == Some(true)
    }

    /// Some(true) at the first failing test, Some(false) if none fails, None if unreadable.
    fn first_failure(&self, bytes: &[u8], types: &[DataType]) -> Option<bool> {
        let mut reader = Reader { bytes, offset: 0 };
        if reader.take(1)?[0] != FORMAT_VERSION {
            return None;
        }
        let count = reader
            .take(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)?;
        let bitmap = reader.take(count.div_ceil(8))?;
        let mut tests = self.tests.iter().peekable();
        for (index, data_type) in types.iter().enumerate().take(count) {
            let Some((column, _)) = tests.peek() else {
                return Some(false);
            };
            let null = bitmap[index / 8] & (1 << (index % 8)) != 0;
            if index < *column {
                if !null {
                    value_bytes(&mut reader, *data_type)?;
                }
                continue;
            }
            let stored = match null {
                true => None,
                false => Some(value_bytes(&mut reader, *data_type)?),
            };
            while let Some((_, expected)) = tests.next_if(|(column, _)| *column == index) {
                if stored.is_some_and(|stored| stored != expected.as_slice()) {
                    return Some(true);
                }
            }
        }
        // Columns past those stored (added since the row was written) are not tested.
        Some(false)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, length: usize) -> Option<&'a [u8]> {
        let end = self.offset.checked_add(length)?;
        let slice = self.bytes.get(self.offset..end)?;
        self.offset = end;
        Some(slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let types = [
            DataType::Int4,
            DataType::Text,
            DataType::Float8,
            DataType::Bool,
        ];
        let values = vec![
            Value::Int(-5),
            Value::Text("héllo".into()),
            Value::Null,
            Value::Bool(true),
        ];
        let bytes = encode(&values, &types).unwrap();
        assert_eq!(decode(&bytes, &types, "t").unwrap(), values);
        assert_eq!(
            decode_some(&bytes, &types, &[false, false, true, true], "t").unwrap(),
            [Value::Null, Value::Null, Value::Null, Value::Bool(true)]
        );
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], &types, "t").is_err());
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert_eq!(
            decode(&extra, &types, "t").unwrap_err().code,
            sqlstate::DATA_CORRUPTED
        );
    }

    #[test]
    fn every_type_round_trips() {
        use crate::types::numeric;
        let types = [
            DataType::Float4,
            DataType::Numeric(Some((10, 2))),
            DataType::Char(Some(4)),
            DataType::Bytea,
            DataType::Date,
            DataType::Timestamp,
            DataType::TimestampTz,
            DataType::Numeric(None),
        ];
        let values = vec![
            Value::Float4(0.1),
            Value::Numeric(numeric::parse("-12.50").unwrap()),
            Value::Text("ab".into()),
            Value::Bytes(vec![0, 255, 7]),
            Value::Date(-36_000),
            Value::Timestamp(1_234_567_890_123),
            Value::TimestampTz(-5),
            Value::Null,
        ];
        let bytes = encode(&values, &types).unwrap();
        let decoded = decode(&bytes, &types, "t").unwrap();
        assert_eq!(decoded, values);
        assert_eq!(decoded[1].to_text().unwrap(), "-12.50");
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut], &types, "t").is_err());
        }
        // A numeric scale past the limit is corruption, not a panic.
        let mut bad = encode(&values[1..2], &types[1..2]).unwrap();
        *bad.last_mut().unwrap() = 200;
        assert!(decode(&bad, &types[1..2], "t").is_err());
    }

    /// Each column read alone, past every type before it: the skipped sizes match.
    #[test]
    fn decoding_some_columns_skips_every_type() {
        use crate::types::numeric;
        let types = [
            DataType::Int2,
            DataType::Int8,
            DataType::Float8,
            DataType::Float4,
            DataType::Numeric(None),
            DataType::Bool,
            DataType::Date,
            DataType::Timestamp,
            DataType::TimestampTz,
            DataType::Uuid,
            DataType::Interval,
            DataType::Bytea,
            DataType::Text,
            DataType::Varchar(Some(9)),
            DataType::Json,
            DataType::Jsonb,
            DataType::Int4,
        ];
        let values = vec![
            Value::Int(-2),
            Value::Int(1 << 40),
            Value::Float(2.5),
            Value::Float4(-0.5),
            Value::Numeric(numeric::parse("3.14").unwrap()),
            Value::Bool(false),
            Value::Date(7),
            Value::Timestamp(-9),
            Value::TimestampTz(11),
            Value::Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()),
            Value::Interval(Interval {
                months: 1,
                days: -2,
                micros: 3,
            }),
            Value::Bytes(vec![1, 2, 3]),
            Value::Text("héllo".into()),
            Value::Text("v".into()),
            Value::Text("{\"a\": 1}".into()),
            Value::Text("[1, 2]".into()),
            Value::Int(42),
        ];
        let bytes = encode(&values, &types).unwrap();
        for column in 0..types.len() {
            let mut wanted = vec![false; types.len()];
            wanted[column] = true;
            let some = decode_some(&bytes, &types, &wanted, "t").unwrap();
            for (index, value) in some.iter().enumerate() {
                match index == column {
                    true => assert_eq!(value, &values[index], "column {index}"),
                    false => assert_eq!(value, &Value::Null, "column {index}"),
                }
            }
        }
        // A truncated row is an error when the columns read reach its end; past the last
        // wanted column nothing is read (so nothing there is checked).
        let mut last = [false; 17];
        last[16] = true;
        assert!(decode_some(&bytes[..bytes.len() - 1], &types, &last, "t").is_err());
        let none = decode_some(&bytes[..bytes.len() - 1], &types, &[false; 17], "t").unwrap();
        assert_eq!(none, vec![Value::Null; 17]);
    }
}

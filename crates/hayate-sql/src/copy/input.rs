//! COPY FROM data: CopyData messages split into records, records into fields, fields into
//! values. The bytes come from the client, so nothing here trusts them: a malformed record
//! is an error with PostgreSQL's CONTEXT line, never a panic.
//!
//! 1. `find_record_end` finds where the first pending record ends (a newline outside CSV
//!    quotes), so a record may span messages; a record longer than `RECORD_BYTES_MAX` fails.
//! 2. `fields` splits a record by the format: text (`text_fields`, backslash escapes through
//!    `unescape_text`) or CSV (`csv_fields`, quotes and escapes).
//! 3. `values` turns the fields into values with the column types' text input, applying
//!    FORCE_NOT_NULL and FORCE_NULL.

use super::{CopyFailure, CopyFormat, CopyOptions, Field};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::session::Prepared;
use crate::types::{DataType, Value};

/// The longest record COPY FROM accepts (PostgreSQL's limit is 1 GB).
pub(super) const RECORD_BYTES_MAX: usize = 64 << 20;

/// A COPY FROM STDIN in progress on a session.
pub struct CopyIn {
    pub(super) table: String,
    /// The target columns: name, type, FORCE_NOT_NULL, FORCE_NULL.
    pub(super) columns: Vec<TargetColumn>,
    pub(super) options: CopyOptions,
    pub(super) insert: Prepared,
    /// True if the COPY runs in a transaction of its own (no client block).
    pub(super) implicit: bool,
    /// Received bytes not yet consumed: the start of an incomplete record.
    pub(super) pending: Vec<u8>,
    /// Where the search for the end of the first pending record resumes...
    pub(super) scanned: usize,
    /// ... and whether that point is inside a CSV quoted field.
    pub(super) in_quotes: bool,
    /// Records read so far (PostgreSQL's line number of the last one).
    pub(super) line: u64,
    pub(super) rows: u64,
    /// The end-of-data marker `\.` was read: the rest is ignored.
    pub(super) ended: bool,
}

pub(super) struct TargetColumn {
    pub(super) name: String,
    pub(super) data_type: DataType,
    /// The column's enum type: a field must be one of its labels.
    pub(super) enum_type: Option<std::sync::Arc<crate::types::enums::EnumType>>,
    pub(super) force_not_null: bool,
    pub(super) force_null: bool,
}

impl CopyIn {
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The number of columns a row has (for CopyInResponse).
    pub fn column_count(&self) -> usize {
        self.columns.len()
    }

    pub(super) fn context(&self) -> String {
        format!("COPY {}, line {}", self.table, self.line)
    }

    pub(super) fn failure(&self, error: SqlError) -> CopyFailure {
        CopyFailure {
            error,
            context: Some(self.context()),
        }
    }

    /// The end of the pending record that starts at or before `scanned`: (end of its text,
    /// start of the next), or None if it is not complete yet.
    pub(super) fn find_record_end(&mut self) -> Option<(usize, usize)> {
        let csv = self.options.format == CopyFormat::Csv;
        let (quote, escape) = (self.options.quote, self.options.escape);
        let bytes = &self.pending;
        let mut i = self.scanned;
        while i < bytes.len() {
            let byte = bytes[i];
            if csv && self.in_quotes && escape != quote && byte == escape {
                match bytes.get(i + 1) {
                    None => break, // the escaped byte has not arrived yet
                    Some(&next) if next == quote || next == escape => {
                        i += 2;
                        continue;
                    }
                    Some(_) => {}
                }
            }
            if csv && byte == quote {
                self.in_quotes = !self.in_quotes;
            } else if byte == b'\n' && !self.in_quotes {
                self.scanned = i + 1;
                let end = if i > 0 && bytes[i - 1] == b'\r' {
                    i - 1
                } else {
                    i
                };
                return Some((end, i + 1));
            }
            i += 1;
        }
        self.scanned = i;
        None
    }

    /// Splits a record into fields and decodes escapes and quotes.
    pub(super) fn fields(&self, record: &str) -> SqlResult<Vec<Field>> {
        match self.options.format {
            CopyFormat::Text => self.text_fields(record),
            CopyFormat::Csv => self.csv_fields(record),
        }
    }

    pub(super) fn text_fields(&self, record: &str) -> SqlResult<Vec<Field>> {
        let delimiter = self.options.delimiter;
        let bytes = record.as_bytes();
        let mut fields = Vec::new();
        let mut start = 0;
        let mut i = 0;
        loop {
            if i == bytes.len() || bytes[i] == delimiter {
                let raw = &record[start..i];
                fields.push(if raw == self.options.null {
                    None
                } else {
                    Some(unescape_text(raw)?)
                });
                if i == bytes.len() {
                    return Ok(fields);
                }
                start = i + 1;
                i += 1;
            } else if bytes[i] == b'\\' && i + 1 < bytes.len() {
                // The escaped byte is data even if it is the delimiter; skip a whole
                // character so that slicing stays on character boundaries.
                i += 1 + record[i + 1..].chars().next().map_or(1, char::len_utf8);
            } else {
                i += 1;
            }
        }
    }

    pub(super) fn csv_fields(&self, record: &str) -> SqlResult<Vec<Field>> {
        let CopyOptions {
            delimiter,
            quote,
            escape,
            ..
        } = self.options;
        let (delimiter, quote, escape) = (delimiter as char, quote as char, escape as char);
        let mut fields = Vec::new();
        let mut chars = record.chars().peekable();
        loop {
            let mut value = String::new();
            let mut raw_unquoted = true;
            let mut in_quotes = false;
            let mut at_end = true;
            while let Some(c) = chars.next() {
                if in_quotes {
                    if c == escape && chars.peek().is_some_and(|&n| n == quote || n == escape) {
                        value.push(chars.next().unwrap_or(c));
                    } else if c == quote {
                        in_quotes = false;
                    } else {
                        value.push(c);
                    }
                } else if c == delimiter {
                    at_end = false;
                    break;
                } else if c == quote {
                    in_quotes = true;
                    raw_unquoted = false;
                } else {
                    value.push(c);
                }
            }
            if in_quotes {
                return Err(SqlError::new(
                    sqlstate::BAD_COPY_FILE_FORMAT,
                    "unterminated CSV quoted field",
                ));
            }
            let column = self.columns.get(fields.len());
            let is_null = value == self.options.null
                && if raw_unquoted {
                    !column.is_some_and(|c| c.force_not_null)
                } else {
                    column.is_some_and(|c| c.force_null)
                };
            fields.push((!is_null).then_some(value));
            if at_end {
                return Ok(fields);
            }
        }
    }

    /// Decodes the fields into the column types, PostgreSQL's messages for a wrong count.
    pub(super) fn values(&self, fields: Vec<Field>) -> Result<Vec<Value>, CopyFailure> {
        if fields.len() > self.columns.len() {
            return Err(self.failure(SqlError::new(
                sqlstate::BAD_COPY_FILE_FORMAT,
                "extra data after last expected column",
            )));
        }
        if fields.len() < self.columns.len() {
            return Err(self.failure(SqlError::new(
                sqlstate::BAD_COPY_FILE_FORMAT,
                format!(
                    "missing data for column \"{}\"",
                    self.columns[fields.len()].name
                ),
            )));
        }
        fields
            .into_iter()
            .zip(&self.columns)
            .map(|(field, column)| match field {
                None => Ok(Value::Null),
                Some(text) => column
                    .enum_type
                    .as_ref()
                    .map_or(Ok(()), |enum_type| enum_type.check(&text))
                    .and_then(|_| Value::parse(&text, column.data_type))
                    .map_err(|error| CopyFailure {
                        error,
                        context: Some(format!(
                            "{}, column {}: \"{}\"",
                            self.context(),
                            column.name,
                            text
                        )),
                    }),
            })
            .collect()
    }
}

/// Decodes the backslash escapes of the text format.
pub(super) fn unescape_text(raw: &str) -> SqlResult<String> {
    if !raw.contains('\\') {
        return Ok(raw.to_string());
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        i += 1;
        if byte != b'\\' || i == bytes.len() {
            out.push(byte);
            continue;
        }
        let next = bytes[i];
        i += 1;
        match next {
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut value = u32::from(next - b'0');
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(&digit @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(digit - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push((value & 0xff) as u8);
            }
            b'x' if bytes.get(i).is_some_and(u8::is_ascii_hexdigit) => {
                let mut value = 0u32;
                for _ in 0..2 {
                    match bytes.get(i).and_then(|b| char::from(*b).to_digit(16)) {
                        Some(digit) => {
                            value = value * 16 + digit;
                            i += 1;
                        }
                        None => break,
                    }
                }
                out.push(value as u8);
            }
            other => out.push(other),
        }
    }
    if out.contains(&0) {
        return Err(invalid_utf8(&[0]));
    }
    String::from_utf8(out).map_err(|error| {
        let bytes = error.as_bytes();
        let start = error.utf8_error().valid_up_to();
        invalid_utf8(&bytes[start..(start + 2).min(bytes.len())])
    })
}

pub(super) fn invalid_utf8(bytes: &[u8]) -> SqlError {
    let shown: Vec<String> = bytes.iter().map(|b| format!("0x{b:02x}")).collect();
    SqlError::new(
        sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
        format!(
            "invalid byte sequence for encoding \"UTF8\": {}",
            shown.join(" ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn text_escapes_decode() {
        assert_eq!(unescape_text("a\\tb\\\\c\\nd").unwrap(), "a\tb\\c\nd");
        assert_eq!(unescape_text("\\303\\251\\x41\\q").unwrap(), "éAq");
        assert_eq!(
            unescape_text("\\0").unwrap_err().code,
            sqlstate::CHARACTER_NOT_IN_REPERTOIRE
        );
        assert_eq!(
            unescape_text("\\377").unwrap_err().code,
            sqlstate::CHARACTER_NOT_IN_REPERTOIRE
        );
    }
}

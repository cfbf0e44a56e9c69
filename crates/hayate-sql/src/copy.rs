//! COPY: rows in bulk between a table and the client, in PostgreSQL's text and CSV formats.
//!
//! COPY FROM STDIN streams:
//! 1. `parse_copy` reads the statement (sqlparser does not take every option spelling
//!    clients send, e.g. pgbench's `WITH (FREEZE ON)`, so COPY has its own small parser).
//! 2. `Session::copy_in` resolves the table and columns, prepares `INSERT INTO t (cols)
//!    VALUES ($1, ...)` (the ordinary insert path: defaults, NOT NULL, keys) and opens the
//!    transaction the rows go into: the client's block, or one of its own (autocommit).
//! 3. `Session::copy_data` takes each CopyData message as it arrives: it splits off the
//!    complete records, decodes their fields with the column types' text input and inserts
//!    them; a partial record waits for the next message.
//! 4. `Session::copy_done` inserts a last unterminated record and commits an autocommit
//!    transaction; an error or `copy_fail` (the client's CopyFail) aborts it (inside a block
//!    the block fails, as every error does). Errors carry PostgreSQL's CONTEXT, e.g.
//!    `COPY t, line 3, column id: "x"`.
//!
//! COPY TO STDOUT reads the table with a SELECT and formats its rows (`Session::copy_out`).

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::Outcome;
use crate::session::{Prepared, Session};
use crate::types::{DataType, Value};

/// The longest record COPY FROM accepts (PostgreSQL's limit is 1 GB).
const RECORD_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Csv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDirection {
    FromStdin,
    ToStdout,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOptions {
    pub format: CopyFormat,
    pub delimiter: u8,
    pub null: String,
    pub header: bool,
    pub quote: u8,
    pub escape: u8,
    /// CSV: columns whose unquoted null string is an empty string, not NULL.
    pub force_not_null: Vec<String>,
    /// CSV: columns whose quoted null string is NULL too.
    pub force_null: Vec<String>,
}

/// A parsed COPY statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyStatement {
    pub table: String,
    /// The listed columns; empty: every column in table order.
    pub columns: Vec<String>,
    pub direction: CopyDirection,
    pub options: CopyOptions,
}

/// An error of COPY with PostgreSQL's CONTEXT line (where in the data it happened).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyFailure {
    pub error: SqlError,
    pub context: Option<String>,
}

impl From<SqlError> for CopyFailure {
    fn from(error: SqlError) -> CopyFailure {
        CopyFailure {
            error,
            context: None,
        }
    }
}

/// True if `sql` is a COPY statement (its first word, after blanks and comments).
pub fn is_copy(sql: &str) -> bool {
    let mut rest = sql.trim_start();
    while let Some(comment) = rest.strip_prefix("--") {
        rest = comment
            .find('\n')
            .map_or("", |end| &comment[end + 1..])
            .trim_start();
    }
    rest.get(..4)
        .is_some_and(|word| word.eq_ignore_ascii_case("copy"))
        && !rest[4..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// An unquoted word, lowercased.
    Word(String),
    /// A double-quoted identifier.
    Quoted(String),
    /// A string literal.
    Str(String),
    Punct(char),
}

fn syntax(message: impl Into<String>) -> SqlError {
    SqlError::syntax(message)
}

fn tokenize(sql: &str) -> SqlResult<Vec<Token>> {
    let chars: Vec<char> = sql.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '"' {
            let mut value = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(syntax("unterminated quoted identifier")),
                    Some('"') if chars.get(i + 1) == Some(&'"') => {
                        value.push('"');
                        i += 2;
                    }
                    Some('"') => {
                        i += 1;
                        break;
                    }
                    Some(&other) => {
                        value.push(other);
                        i += 1;
                    }
                }
            }
            tokens.push(Token::Quoted(value));
        } else if c == '\'' || ((c == 'e' || c == 'E') && chars.get(i + 1) == Some(&'\'')) {
            let escapes = c != '\'';
            i += if escapes { 2 } else { 1 };
            let mut value = String::new();
            loop {
                match chars.get(i) {
                    None => return Err(syntax("unterminated quoted string")),
                    Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                        value.push('\'');
                        i += 2;
                    }
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some('\\') if escapes => {
                        let next = chars.get(i + 1).copied().unwrap_or('\\');
                        value.push(match next {
                            't' => '\t',
                            'n' => '\n',
                            'r' => '\r',
                            'b' => '\u{8}',
                            'f' => '\u{c}',
                            other => other,
                        });
                        i += 2;
                    }
                    Some(&other) => {
                        value.push(other);
                        i += 1;
                    }
                }
            }
            tokens.push(Token::Str(value));
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            tokens.push(Token::Word(word.to_lowercase()));
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w == word)
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let found = self.is_word(word);
        if found {
            self.at += 1;
        }
        found
    }

    fn eat_punct(&mut self, punct: char) -> bool {
        let found = self.peek() == Some(&Token::Punct(punct));
        if found {
            self.at += 1;
        }
        found
    }

    fn expect_word(&mut self, word: &str) -> SqlResult<()> {
        if self.eat_word(word) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("expected {}", word.to_uppercase())))
        }
    }

    fn unexpected(&self, what: &str) -> SqlError {
        match self.peek() {
            Some(token) => syntax(format!("syntax error at or near {}: {what}", show(token))),
            None => syntax(format!("syntax error at end of input: {what}")),
        }
    }

    fn identifier(&mut self) -> SqlResult<String> {
        match self.next() {
            Some(Token::Word(word)) => Ok(word),
            Some(Token::Quoted(name)) => Ok(name),
            _ => {
                self.at -= 1;
                Err(self.unexpected("expected a name"))
            }
        }
    }

    fn string(&mut self) -> SqlResult<String> {
        match self.next() {
            Some(Token::Str(value)) => Ok(value),
            _ => {
                self.at -= 1;
                Err(self.unexpected("expected a string"))
            }
        }
    }

    /// A parenthesized list of column names.
    fn column_list(&mut self) -> SqlResult<Vec<String>> {
        if !self.eat_punct('(') {
            return Err(self.unexpected("expected ("));
        }
        let mut columns = vec![self.identifier()?];
        while self.eat_punct(',') {
            columns.push(self.identifier()?);
        }
        if !self.eat_punct(')') {
            return Err(self.unexpected("expected )"));
        }
        Ok(columns)
    }

    /// An optional boolean option value (absent: true).
    fn optional_bool(&mut self) -> SqlResult<bool> {
        let value = match self.peek() {
            Some(Token::Word(word)) | Some(Token::Str(word)) => word.to_lowercase(),
            _ => return Ok(true),
        };
        let parsed = match value.as_str() {
            "on" | "true" | "1" | "yes" | "match" => true,
            "off" | "false" | "0" | "no" => false,
            _ => return Ok(true),
        };
        self.at += 1;
        Ok(parsed)
    }
}

fn show(token: &Token) -> String {
    match token {
        Token::Word(word) => format!("\"{word}\""),
        Token::Quoted(name) => format!("\"{name}\""),
        Token::Str(value) => format!("'{value}'"),
        Token::Punct(c) => format!("\"{c}\""),
    }
}

/// Options as written, before defaults.
#[derive(Default)]
struct RawOptions {
    format: Option<CopyFormat>,
    delimiter: Option<String>,
    null: Option<String>,
    header: Option<bool>,
    quote: Option<String>,
    escape: Option<String>,
    force_not_null: Vec<String>,
    force_null: Vec<String>,
}

/// Parses `COPY table [(columns)] {FROM STDIN | TO STDOUT} [[WITH] (options) | legacy
/// options]`.
pub fn parse_copy(sql: &str) -> SqlResult<CopyStatement> {
    let mut parser = Parser {
        tokens: tokenize(sql)?,
        at: 0,
    };
    parser.expect_word("copy")?;
    if parser.peek() == Some(&Token::Punct('(')) {
        return Err(SqlError::unsupported("COPY (query)"));
    }
    let mut table = parser.identifier()?;
    while parser.eat_punct('.') {
        table = parser.identifier()?; // schema-qualified: the schema is "public"
    }
    let columns = if parser.peek() == Some(&Token::Punct('(')) {
        parser.column_list()?
    } else {
        Vec::new()
    };
    let direction = if parser.eat_word("from") {
        if !parser.eat_word("stdin") {
            return Err(SqlError::unsupported(
                "COPY FROM a file or program (use COPY FROM STDIN, e.g. psql's \\copy)",
            ));
        }
        CopyDirection::FromStdin
    } else if parser.eat_word("to") {
        if !parser.eat_word("stdout") {
            return Err(SqlError::unsupported(
                "COPY TO a file or program (use COPY TO STDOUT, e.g. psql's \\copy)",
            ));
        }
        CopyDirection::ToStdout
    } else {
        return Err(parser.unexpected("expected FROM or TO"));
    };
    let mut raw = RawOptions::default();
    let with = parser.eat_word("with");
    if parser.eat_punct('(') {
        loop {
            option(&mut parser, &mut raw)?;
            if parser.eat_punct(')') {
                break;
            }
            if !parser.eat_punct(',') {
                return Err(parser.unexpected("expected , or )"));
            }
        }
    } else {
        while !matches!(parser.peek(), None | Some(Token::Punct(';'))) {
            legacy_option(&mut parser, &mut raw)?;
        }
        if with && raw.format.is_none() && raw.delimiter.is_none() && raw.null.is_none() {
            return Err(parser.unexpected("expected options after WITH"));
        }
    }
    parser.eat_punct(';');
    if parser.peek().is_some() {
        return Err(parser.unexpected("expected the end of the statement"));
    }
    Ok(CopyStatement {
        table,
        columns,
        direction,
        options: resolve(raw)?,
    })
}

fn option(parser: &mut Parser, raw: &mut RawOptions) -> SqlResult<()> {
    let name = parser.identifier()?;
    match name.as_str() {
        "format" => {
            let format = parser.identifier()?;
            raw.format = Some(match format.to_lowercase().as_str() {
                "text" => CopyFormat::Text,
                "csv" => CopyFormat::Csv,
                "binary" => return Err(SqlError::unsupported("COPY in binary format")),
                other => {
                    return Err(SqlError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        format!("COPY format \"{other}\" not recognized"),
                    ))
                }
            });
        }
        "freeze" => {
            parser.optional_bool()?; // rows are visible once committed either way
        }
        "delimiter" => raw.delimiter = Some(parser.string()?),
        "null" => raw.null = Some(parser.string()?),
        "header" => raw.header = Some(parser.optional_bool()?),
        "quote" => raw.quote = Some(parser.string()?),
        "escape" => raw.escape = Some(parser.string()?),
        "encoding" => check_encoding(&parser.string()?)?,
        "force_not_null" => raw.force_not_null = parser.column_list()?,
        "force_null" => raw.force_null = parser.column_list()?,
        "force_quote" => {
            if !parser.eat_punct('*') {
                parser.column_list()?; // COPY TO quotes every non-NULL CSV value it must
            }
        }
        other => {
            return Err(SqlError::syntax(format!(
                "option \"{other}\" not recognized"
            )))
        }
    }
    Ok(())
}

/// The options of PostgreSQL before 9.0: `[BINARY] DELIMITER [AS] 'c' NULL [AS] 's' CSV
/// [HEADER] [QUOTE [AS] 'q'] [ESCAPE [AS] 'e'] [FORCE NOT NULL cols]`.
fn legacy_option(parser: &mut Parser, raw: &mut RawOptions) -> SqlResult<()> {
    let name = parser.identifier()?;
    match name.as_str() {
        "binary" => return Err(SqlError::unsupported("COPY in binary format")),
        "csv" => raw.format = Some(CopyFormat::Csv),
        "header" => raw.header = Some(true),
        "delimiter" | "null" | "quote" | "escape" => {
            parser.eat_word("as");
            let value = parser.string()?;
            match name.as_str() {
                "delimiter" => raw.delimiter = Some(value),
                "null" => raw.null = Some(value),
                "quote" => raw.quote = Some(value),
                _ => raw.escape = Some(value),
            }
        }
        "force" => {
            if parser.eat_word("not") {
                parser.expect_word("null")?;
                raw.force_not_null = legacy_columns(parser)?;
            } else {
                parser.expect_word("quote")?;
                if !parser.eat_punct('*') {
                    legacy_columns(parser)?;
                }
            }
        }
        "freeze" => {}
        "encoding" => check_encoding(&parser.string()?)?,
        other => {
            return Err(SqlError::syntax(format!(
                "syntax error at or near \"{other}\""
            )))
        }
    }
    Ok(())
}

fn legacy_columns(parser: &mut Parser) -> SqlResult<Vec<String>> {
    let mut columns = vec![parser.identifier()?];
    while parser.eat_punct(',') {
        columns.push(parser.identifier()?);
    }
    Ok(columns)
}

fn check_encoding(name: &str) -> SqlResult<()> {
    let normalized: String = name
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase();
    if normalized == "utf8" || normalized == "unicode" || normalized == "sqlascii" {
        return Ok(());
    }
    Err(SqlError::unsupported(format!(
        "COPY encoding \"{name}\" (only UTF8)"
    )))
}

/// One single-byte character of an option.
fn one_byte(value: &str, what: &str) -> SqlResult<u8> {
    match value.as_bytes() {
        [byte] if byte.is_ascii() => Ok(*byte),
        _ => Err(SqlError::new(
            sqlstate::FEATURE_NOT_SUPPORTED,
            format!("COPY {what} must be a single one-byte character"),
        )),
    }
}

fn resolve(raw: RawOptions) -> SqlResult<CopyOptions> {
    let format = raw.format.unwrap_or(CopyFormat::Text);
    let csv = format == CopyFormat::Csv;
    let csv_only = |present: bool, what: &str| -> SqlResult<()> {
        if present && !csv {
            return Err(SqlError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                format!("COPY {what} available only in CSV mode"),
            ));
        }
        Ok(())
    };
    csv_only(raw.quote.is_some(), "quote")?;
    csv_only(raw.escape.is_some(), "escape")?;
    csv_only(!raw.force_not_null.is_empty(), "force not null")?;
    csv_only(!raw.force_null.is_empty(), "force null")?;
    let delimiter = match &raw.delimiter {
        Some(value) => one_byte(value, "delimiter")?,
        None if csv => b',',
        None => b'\t',
    };
    if delimiter == b'\n' || delimiter == b'\r' {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            "COPY delimiter cannot be newline or carriage return",
        ));
    }
    if !csv && (delimiter == b'\\' || delimiter.is_ascii_alphanumeric() || delimiter == b'.') {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!(
                "COPY delimiter cannot be \"{}\"",
                char::from(delimiter).escape_default()
            ),
        ));
    }
    let quote = match &raw.quote {
        Some(value) => one_byte(value, "quote")?,
        None => b'"',
    };
    let escape = match &raw.escape {
        Some(value) => one_byte(value, "escape")?,
        None => quote,
    };
    if csv && delimiter == quote {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            "COPY delimiter and quote must be different",
        ));
    }
    let null = raw
        .null
        .unwrap_or_else(|| if csv { String::new() } else { "\\N".into() });
    if null.contains(['\r', '\n']) {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            "COPY null representation cannot use newline or carriage return",
        ));
    }
    Ok(CopyOptions {
        format,
        delimiter,
        null,
        header: raw.header.unwrap_or(false),
        quote,
        escape,
        force_not_null: raw.force_not_null,
        force_null: raw.force_null,
    })
}

/// A COPY FROM STDIN in progress on a session.
pub struct CopyIn {
    table: String,
    /// The target columns: name, type, FORCE_NOT_NULL, FORCE_NULL.
    columns: Vec<TargetColumn>,
    options: CopyOptions,
    insert: Prepared,
    /// True if the COPY runs in a transaction of its own (no client block).
    implicit: bool,
    /// Received bytes not yet consumed: the start of an incomplete record.
    pending: Vec<u8>,
    /// Where the search for the end of the first pending record resumes...
    scanned: usize,
    /// ... and whether that point is inside a CSV quoted field.
    in_quotes: bool,
    /// Records read so far (PostgreSQL's line number of the last one).
    line: u64,
    rows: u64,
    /// The end-of-data marker `\.` was read: the rest is ignored.
    ended: bool,
}

struct TargetColumn {
    name: String,
    data_type: DataType,
    force_not_null: bool,
    force_null: bool,
}

/// A field of a record: its text (None: NULL).
type Field = Option<String>;

impl CopyIn {
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The number of columns a row has (for CopyInResponse).
    pub fn column_count(&self) -> usize {
        self.columns.len()
    }

    fn context(&self) -> String {
        format!("COPY {}, line {}", self.table, self.line)
    }

    fn failure(&self, error: SqlError) -> CopyFailure {
        CopyFailure {
            error,
            context: Some(self.context()),
        }
    }

    /// The end of the pending record that starts at or before `scanned`: (end of its text,
    /// start of the next), or None if it is not complete yet.
    fn find_record_end(&mut self) -> Option<(usize, usize)> {
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
    fn fields(&self, record: &str) -> SqlResult<Vec<Field>> {
        match self.options.format {
            CopyFormat::Text => self.text_fields(record),
            CopyFormat::Csv => self.csv_fields(record),
        }
    }

    fn text_fields(&self, record: &str) -> SqlResult<Vec<Field>> {
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

    fn csv_fields(&self, record: &str) -> SqlResult<Vec<Field>> {
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
    fn values(&self, fields: Vec<Field>) -> Result<Vec<Value>, CopyFailure> {
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
                Some(text) => Value::parse(&text, column.data_type).map_err(|error| CopyFailure {
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
fn unescape_text(raw: &str) -> SqlResult<String> {
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

fn invalid_utf8(bytes: &[u8]) -> SqlError {
    let shown: Vec<String> = bytes.iter().map(|b| format!("0x{b:02x}")).collect();
    SqlError::new(
        sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
        format!(
            "invalid byte sequence for encoding \"UTF8\": {}",
            shown.join(" ")
        ),
    )
}

fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Session {
    /// Starts COPY FROM STDIN: resolves the table and columns and opens the transaction
    /// the rows go into.
    pub fn copy_in(&mut self, statement: &CopyStatement) -> SqlResult<CopyIn> {
        if statement.direction != CopyDirection::FromStdin {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "copy_in of a COPY TO",
            ));
        }
        let prepared = self.copy_target(statement).and_then(|(columns, sql)| {
            let insert = crate::session::parse(&sql)?
                .pop()
                .ok_or_else(|| SqlError::syntax("empty query"))?;
            let types: Vec<DataType> = columns.iter().map(|c| c.data_type).collect();
            Ok((columns, self.prepare(insert, &types)?))
        });
        let (columns, insert) = prepared.inspect_err(|_| self.note_error())?;
        let implicit = self.begin_implicit()?;
        Ok(CopyIn {
            table: statement.table.clone(),
            columns,
            options: statement.options.clone(),
            insert,
            implicit,
            pending: Vec::new(),
            scanned: 0,
            in_quotes: false,
            line: 0,
            rows: 0,
            ended: false,
        })
    }

    /// Checks that the table and columns of a COPY exist (the extended protocol reports
    /// this at Parse, before the client starts sending data).
    pub fn check_copy(&self, statement: &CopyStatement) -> SqlResult<()> {
        self.copy_target(statement).map(|_| ())
    }

    /// The target columns of a COPY and the INSERT statement that stores a row.
    fn copy_target(&self, statement: &CopyStatement) -> SqlResult<(Vec<TargetColumn>, String)> {
        let table = self.catalog.table(&statement.table)?;
        let names: Vec<String> = if statement.columns.is_empty() {
            table.def.columns.iter().map(|c| c.name.clone()).collect()
        } else {
            statement.columns.clone()
        };
        let options = &statement.options;
        let mut columns: Vec<TargetColumn> = Vec::with_capacity(names.len());
        for name in &names {
            let index = table.def.column_index(name).ok_or_else(|| {
                SqlError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!(
                        "column \"{name}\" of relation \"{}\" does not exist",
                        statement.table
                    ),
                )
            })?;
            if columns.iter().any(|c| c.name == *name) {
                return Err(SqlError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{name}\" specified more than once"),
                ));
            }
            columns.push(TargetColumn {
                name: name.clone(),
                data_type: table.def.columns[index].data_type,
                force_not_null: options.force_not_null.contains(name),
                force_null: options.force_null.contains(name),
            });
        }
        for forced in options.force_not_null.iter().chain(&options.force_null) {
            if !names.contains(forced) {
                return Err(SqlError::new(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!("FORCE_NOT_NULL/FORCE_NULL column \"{forced}\" not referenced by COPY"),
                ));
            }
        }
        let quoted: Vec<String> = names.iter().map(|n| quote_identifier(n)).collect();
        let params: Vec<String> = (1..=names.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quote_identifier(&table.def.name),
            quoted.join(", "),
            params.join(", ")
        );
        Ok((columns, sql))
    }

    /// Takes one CopyData message: inserts every record it completes. On an error the
    /// COPY is over (its transaction aborted, or the client's block failed).
    pub fn copy_data(&mut self, copy: &mut CopyIn, data: &[u8]) -> Result<(), CopyFailure> {
        let result = self.copy_records(copy, data, false);
        if result.is_err() {
            self.copy_abort(copy);
        }
        result
    }

    /// Ends the data: inserts a last record without a newline and commits a COPY that runs
    /// in its own transaction. Returns the number of rows.
    pub fn copy_done(&mut self, mut copy: CopyIn) -> Result<u64, CopyFailure> {
        if let Err(failure) = self.copy_records(&mut copy, &[], true) {
            self.copy_abort(&copy);
            return Err(failure);
        }
        if copy.implicit {
            self.end_implicit(true)?;
        }
        Ok(copy.rows)
    }

    /// The client gave up (CopyFail): the COPY's rows are rolled back.
    pub fn copy_fail(&mut self, copy: CopyIn, message: &str) -> SqlError {
        self.copy_abort(&copy);
        SqlError::new(
            sqlstate::QUERY_CANCELED,
            format!("COPY from stdin failed: {message}"),
        )
    }

    fn copy_abort(&mut self, copy: &CopyIn) {
        if copy.implicit {
            let _ = self.end_implicit(false);
        } else {
            self.note_error();
        }
    }

    fn copy_records(
        &mut self,
        copy: &mut CopyIn,
        data: &[u8],
        last: bool,
    ) -> Result<(), CopyFailure> {
        crate::interrupt::check()?;
        if copy.ended {
            return Ok(());
        }
        copy.pending.extend_from_slice(data);
        // Records are taken from `start` on; the consumed bytes leave the buffer at the end.
        let mut start = 0;
        loop {
            let (end, next) = match copy.find_record_end() {
                Some((end, next)) => (end, next.max(start)),
                None if last && start < copy.pending.len() => {
                    if copy.in_quotes {
                        copy.line += 1;
                        return Err(copy.failure(SqlError::new(
                            sqlstate::BAD_COPY_FILE_FORMAT,
                            "unterminated CSV quoted field",
                        )));
                    }
                    let len = copy.pending.len();
                    copy.scanned = len;
                    let end = if copy.pending.ends_with(b"\r") {
                        len - 1
                    } else {
                        len
                    };
                    (end.max(start), len)
                }
                None => break,
            };
            let record = copy.pending[start..end].to_vec();
            start = next;
            copy.line += 1;
            crate::interrupt::check().map_err(|error| copy.failure(error))?;
            self.copy_record(copy, &record)?;
            if copy.ended {
                break;
            }
        }
        if copy.ended {
            copy.pending = Vec::new();
            copy.scanned = 0;
            return Ok(());
        }
        copy.pending.drain(..start);
        copy.scanned -= start;
        if copy.pending.len() > RECORD_BYTES_MAX {
            copy.line += 1;
            return Err(copy.failure(SqlError::new(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!("COPY record longer than {RECORD_BYTES_MAX} bytes"),
            )));
        }
        Ok(())
    }

    fn copy_record(&mut self, copy: &mut CopyIn, record: &[u8]) -> Result<(), CopyFailure> {
        if record == b"\\." {
            copy.ended = true;
            return Ok(());
        }
        if copy.line == 1 && copy.options.header {
            return Ok(());
        }
        let text = std::str::from_utf8(record).map_err(|error| {
            let start = error.valid_up_to();
            copy.failure(invalid_utf8(&record[start..(start + 2).min(record.len())]))
        })?;
        let fields = copy.fields(text).map_err(|error| copy.failure(error))?;
        let values = copy.values(fields)?;
        self.execute(&copy.insert, values)
            .map_err(|error| copy.failure(error))?;
        copy.rows += 1;
        Ok(())
    }

    /// COPY TO STDOUT: the number of columns, and the table's rows as encoded records
    /// (after a CSV header line if asked for).
    pub fn copy_out(&mut self, statement: &CopyStatement) -> SqlResult<(usize, Vec<Vec<u8>>)> {
        let table = self.catalog.table(&statement.table)?;
        let names: Vec<String> = if statement.columns.is_empty() {
            table.def.columns.iter().map(|c| c.name.clone()).collect()
        } else {
            statement.columns.clone()
        };
        let quoted: Vec<String> = names.iter().map(|n| quote_identifier(n)).collect();
        let sql = format!(
            "SELECT {} FROM {}",
            quoted.join(", "),
            quote_identifier(&table.def.name)
        );
        let mut outcomes = self.execute_sql(&sql);
        let rows = match outcomes.pop() {
            Some(Ok(Outcome::Rows { rows, .. })) => rows,
            Some(Err(error)) => return Err(error),
            _ => return Err(SqlError::new(sqlstate::INTERNAL_ERROR, "COPY TO: no rows")),
        };
        let options = &statement.options;
        let mut records = Vec::with_capacity(rows.len() + 1);
        if options.header && options.format == CopyFormat::Csv {
            let header: Vec<Field> = names.iter().cloned().map(Some).collect();
            records.push(encode_record(&header, options));
        }
        for row in rows {
            let fields: Vec<Field> = row.iter().map(Value::to_text).collect();
            records.push(encode_record(&fields, options));
        }
        Ok((names.len(), records))
    }
}

/// Encodes one record of COPY TO, newline included.
fn encode_record(fields: &[Field], options: &CopyOptions) -> Vec<u8> {
    let mut out = String::new();
    let delimiter = options.delimiter as char;
    for (index, field) in fields.iter().enumerate() {
        if index > 0 {
            out.push(delimiter);
        }
        let Some(text) = field else {
            out.push_str(&options.null);
            continue;
        };
        match options.format {
            CopyFormat::Text => {
                for c in text.chars() {
                    match c {
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        '\u{8}' => out.push_str("\\b"),
                        '\u{b}' => out.push_str("\\v"),
                        '\u{c}' => out.push_str("\\f"),
                        c if c == delimiter => {
                            out.push('\\');
                            out.push(c);
                        }
                        c => out.push(c),
                    }
                }
            }
            CopyFormat::Csv => {
                let quote = options.quote as char;
                let escape = options.escape as char;
                let needs_quotes = *text == options.null
                    || text.contains([delimiter, quote, '\n', '\r'])
                    || text == "\\.";
                if needs_quotes {
                    out.push(quote);
                    for c in text.chars() {
                        if c == quote || c == escape {
                            out.push(escape);
                        }
                        out.push(c);
                    }
                    out.push(quote);
                } else {
                    out.push_str(text);
                }
            }
        }
    }
    out.push('\n');
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spellings_clients_send() {
        let copy = parse_copy("copy pgbench_accounts from stdin with (freeze on)").unwrap();
        assert_eq!(copy.table, "pgbench_accounts");
        assert_eq!(copy.direction, CopyDirection::FromStdin);
        assert_eq!(copy.options.format, CopyFormat::Text);
        assert_eq!(copy.options.delimiter, b'\t');
        assert_eq!(copy.options.null, "\\N");

        let copy = parse_copy("COPY public.\"T\" (a, \"B\") FROM STDIN WITH CSV HEADER;").unwrap();
        assert_eq!(copy.table, "T");
        assert_eq!(copy.columns, vec!["a".to_string(), "B".to_string()]);
        assert_eq!(copy.options.format, CopyFormat::Csv);
        assert!(copy.options.header);
        assert_eq!(copy.options.delimiter, b',');
        assert_eq!(copy.options.null, "");

        let copy = parse_copy(
            "copy t from stdin (format csv, delimiter ';', null 'NULL', header true, quote '''', \
             escape E'\\\\', force_not_null (a))",
        )
        .unwrap();
        assert_eq!(copy.options.delimiter, b';');
        assert_eq!(copy.options.null, "NULL");
        assert_eq!(copy.options.quote, b'\'');
        assert_eq!(copy.options.escape, b'\\');
        assert_eq!(copy.options.force_not_null, vec!["a".to_string()]);

        let copy = parse_copy("copy t to stdout with delimiter as '|' null as ''").unwrap();
        assert_eq!(copy.direction, CopyDirection::ToStdout);
        assert_eq!(copy.options.delimiter, b'|');

        assert!(is_copy("  -- load\n COPY t FROM STDIN"));
        assert!(!is_copy("copyright"));
        for bad in [
            "copy t from '/etc/passwd'",
            "copy t from stdin (format binary)",
            "copy t from stdin (quote '\"')",
            "copy t from stdin (delimiter 'ab')",
            "copy t from stdin (bogus 1)",
            "copy (select 1) to stdout",
            "copy t from stdin junk",
        ] {
            assert!(parse_copy(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn text_escapes_decode() {
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

    #[test]
    fn records_encode_as_postgresql_does() {
        let text = parse_copy("copy t to stdout").unwrap().options;
        let fields = vec![Some("a\tb\\".to_string()), None, Some("x\ny".into())];
        assert_eq!(
            encode_record(&fields, &text),
            b"a\\tb\\\\\t\\N\tx\\ny\n".to_vec()
        );
        let csv = parse_copy("copy t to stdout csv").unwrap().options;
        let fields = vec![Some("a,\"b\"".to_string()), None, Some(String::new())];
        assert_eq!(
            encode_record(&fields, &csv),
            b"\"a,\"\"b\"\"\",,\"\"\n".to_vec()
        );
    }
}

//! Reading a COPY statement: sqlparser does not take every option spelling clients send (e.g.
//! pgbench's `WITH (FREEZE ON)`), so COPY has its own small parser.
//!
//! 1. `is_copy` tells a COPY statement by its first word, before any parse.
//! 2. `parse_copy` tokenizes the statement and reads the table, the columns, the direction
//!    and the options, in the current spelling `WITH (option value, ...)` or the legacy
//!    one (`WITH CSV HEADER`, `DELIMITER AS '|'`).
//! 3. `resolve` checks the options together and fills in the format's defaults.

use super::{CopyDirection, CopyFormat, CopyOptions, CopyStatement};
use crate::error::{sqlstate, SqlError, SqlResult};

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
}

//! COPY TO records: one row's fields formatted as PostgreSQL's text or CSV format writes them.
//!
//! 1. A NULL field is the null string.
//! 2. Text escapes backslash, the control characters and the delimiter with backslashes.
//! 3. CSV quotes a field that holds the delimiter, the quote, a line break, `\.` or the
//!    null string, doubling quotes and escapes inside.

use super::{CopyFormat, CopyOptions, Field};

/// Encodes one record of COPY TO, newline included.
pub(super) fn encode_record(fields: &[Field], options: &CopyOptions) -> Vec<u8> {
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
    use crate::copy::parse_copy;

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

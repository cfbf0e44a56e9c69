//! PostgreSQL's string functions beyond the basic ones of `functions`: padding, splitting,
//! character mapping, codes, hex, regular expression replacement and bytea encodings. The
//! binder has cast the arguments; NULL arguments never reach here (the result is NULL),
//! except for concat_ws, which skips them.

use base64::Engine;

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::pattern::{Pattern, PatternOptions};
use crate::types::{bytea, Value};

/// The longest text a padding function makes, as PostgreSQL's limit on a value (1 GB).
const PADDED_LENGTH_MAX: i64 = 1 << 28;

/// lpad/rpad: `source` filled on the left (or right) with `fill` repeated up to `length`
/// characters, or cut to `length`.
pub(super) fn pad(source: &str, length: i64, fill: &str, left: bool) -> SqlResult<Value> {
    if length > PADDED_LENGTH_MAX {
        return Err(SqlError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            "requested length too large",
        ));
    }
    let length = length.max(0) as usize;
    let chars: Vec<char> = source.chars().collect();
    if chars.len() >= length || fill.is_empty() {
        return Ok(Value::Text(chars.iter().take(length).collect()));
    }
    let padding: String = fill.chars().cycle().take(length - chars.len()).collect();
    Ok(Value::Text(match left {
        true => padding + source,
        false => source.to_string() + &padding,
    }))
}

/// split_part: the `field`th piece (from 1; from the end if negative) of `source` split at
/// `delimiter`; empty past the last.
pub(super) fn split_part(source: &str, delimiter: &str, field: i64) -> SqlResult<Value> {
    if field == 0 {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            "field position must not be zero",
        ));
    }
    let pieces: Vec<&str> = match delimiter.is_empty() {
        true => vec![source],
        false => source.split(delimiter).collect(),
    };
    let index = match field > 0 {
        true => usize::try_from(field - 1).ok(),
        false => pieces.len().checked_sub(field.unsigned_abs() as usize),
    };
    let piece = index.and_then(|index| pieces.get(index)).copied();
    Ok(Value::Text(piece.unwrap_or("").to_string()))
}

/// initcap: the first letter of each word upper case, the others lower case (words are
/// runs of letters and digits).
pub(super) fn initcap(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut in_word = false;
    for c in source.chars() {
        match in_word {
            true => out.extend(c.to_lowercase()),
            false => out.extend(c.to_uppercase()),
        }
        in_word = c.is_alphanumeric();
    }
    out
}

/// translate: each character of `source` found in `from` replaced by the one at the same
/// place in `to`, or removed if `to` is shorter.
pub(super) fn translate(source: &str, from: &str, to: &str) -> String {
    let (from, to): (Vec<char>, Vec<char>) = (from.chars().collect(), to.chars().collect());
    source
        .chars()
        .filter_map(|c| match from.iter().position(|f| *f == c) {
            Some(place) => to.get(place).copied(),
            None => Some(c),
        })
        .collect()
}

/// chr: the character of a code point (0 and surrogates refused, as PostgreSQL does).
pub(super) fn chr(code: i64) -> SqlResult<Value> {
    let character = u32::try_from(code)
        .ok()
        .filter(|code| *code != 0)
        .and_then(char::from_u32);
    match character {
        Some(c) => Ok(Value::Text(c.to_string())),
        None if code == 0 => Err(SqlError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            "null character not permitted",
        )),
        None if code < 0 => Err(SqlError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            "character number must be positive",
        )),
        None => Err(SqlError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            "requested character too large for encoding",
        )),
    }
}

/// ascii: the code point of the first character (0 for empty text).
pub(super) fn ascii(source: &str) -> Value {
    Value::Int(source.chars().next().map_or(0, |c| c as i64))
}

/// to_hex: an integer's two's complement in lower-case hex, of 32 bits for an integer (or
/// smallint) argument and 64 for a bigint, as PostgreSQL's two functions.
pub(super) fn to_hex(value: i64, wide: bool) -> Value {
    Value::Text(match wide {
        true => format!("{:x}", value as u64),
        false => format!("{:x}", value as i32 as u32),
    })
}

/// concat_ws: the non-NULL values after the first joined by the first (NULL if it is).
pub(super) fn concat_ws(values: &[Value]) -> Value {
    let Some(separator) = values.first().and_then(Value::to_text) else {
        return Value::Null;
    };
    let parts: Vec<String> = values[1..].iter().filter_map(Value::to_text).collect();
    Value::Text(parts.join(&separator))
}

/// regexp_replace(source, pattern, replacement [, flags]): the first match (every one with
/// flag g) replaced; \1..\9 in the replacement are the groups and \& the whole match, as in
/// PostgreSQL. Flags: g, i (ignore case), c (respect case), q (the pattern is literal text),
/// x (expanded: blanks and # comments ignored), n or m (newline-sensitive: ^ and $ match at
/// lines, . does not match a newline), s (the default), the last of n/m/s counting. The
/// pattern is read as `types::pattern` reads it.
pub(super) fn regexp_replace(
    source: &str,
    pattern: &str,
    replacement: &str,
    flags: &str,
) -> SqlResult<Value> {
    let mut global = false;
    let literal = flags.contains('q');
    let pattern = match literal {
        true => regex::escape(pattern),
        false => pattern.to_string(),
    };
    let mut options = PatternOptions::default();
    for flag in flags.chars() {
        match flag {
            'g' => global = true,
            'q' => {}
            'i' => options.case_insensitive = true,
            'c' => options.case_insensitive = false,
            'x' => options.ignore_whitespace = !literal,
            // Newline-sensitive (m is its old name); s, the default, undoes it.
            'n' | 'm' => {
                options.multi_line = true;
                options.dot_matches_new_line = false;
            }
            's' => {
                options.multi_line = false;
                options.dot_matches_new_line = true;
            }
            other => {
                return Err(SqlError::new(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!("invalid regular expression option: \"{other}\""),
                ))
            }
        }
    }
    let regex = Pattern::new(&pattern, options)?;
    let expand = |groups: &[Option<&str>], out: &mut String| {
        let group = |index: usize| groups.get(index).copied().flatten();
        let mut chars = replacement.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some(digit @ '1'..='9') => {
                    out.push_str(group(digit as usize - '0' as usize).unwrap_or(""));
                }
                Some('&') => out.push_str(group(0).unwrap_or("")),
                Some('\\') => out.push('\\'),
                // Any other backslash stays, with what follows (PostgreSQL's \t is "\t").
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            }
        }
    };
    let limit = if global { 0 } else { 1 };
    Ok(Value::Text(regex.replacen(source, limit, expand)?))
}

fn unknown_encoding(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_PARAMETER_VALUE,
        format!("unrecognized encoding: \"{name}\""),
    )
}

/// encode(bytea, format): hex, base64 or escape text of the bytes.
pub(super) fn encode(bytes: &[u8], format: &str) -> SqlResult<Value> {
    Ok(Value::Text(match format.to_ascii_lowercase().as_str() {
        "hex" => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        // Lines of 76 characters, as PostgreSQL writes them: a newline after each line that
        // whole groups of 3 bytes fill (so after the last one too if it is full), none after
        // a last group padded with '='.
        "base64" => {
            let whole = bytes.len() / 3 * 3;
            let mut out = String::new();
            for (group, chunk) in bytes[..whole].chunks(3).enumerate() {
                out.push_str(&base64::engine::general_purpose::STANDARD.encode(chunk));
                if (group + 1) % 19 == 0 {
                    out.push('\n');
                }
            }
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(&bytes[whole..]));
            out
        }
        "escape" => bytes
            .iter()
            .map(|b| match b {
                b'\\' => "\\\\".to_string(),
                0 | 0x80..=0xff => format!("\\{b:03o}"),
                b => (*b as char).to_string(),
            })
            .collect(),
        _ => return Err(unknown_encoding(format)),
    }))
}

/// decode(text, format): the bytes of hex, base64 or escape text.
pub(super) fn decode(text: &str, format: &str) -> SqlResult<Value> {
    let invalid = |what: &str| {
        SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("invalid {what} data"),
        )
    };
    Ok(Value::Bytes(match format.to_ascii_lowercase().as_str() {
        "hex" => bytea::from_hex(text).map_err(|_| invalid("hexadecimal"))?,
        "base64" => {
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|_| invalid("base64"))?
        }
        "escape" => bytea::from_escape(text).ok_or_else(|| {
            SqlError::new(
                sqlstate::INVALID_TEXT_REPRESENTATION,
                "invalid input syntax for type bytea",
            )
        })?,
        _ => return Err(unknown_encoding(format)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: SqlResult<Value>) -> String {
        match value.unwrap() {
            Value::Text(text) => text,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn padding_splitting_and_mapping_as_postgresql() {
        assert_eq!(text(pad("hi", 5, "xy", true)), "xyxhi");
        assert_eq!(text(pad("hi", 5, " ", false)), "hi   ");
        assert_eq!(text(pad("hello", 3, "x", true)), "hel");
        assert_eq!(text(pad("hi", 5, "", true)), "hi");
        assert_eq!(text(pad("hi", -1, "x", true)), "");
        assert_eq!(text(split_part("a,b,,c", ",", 2)), "b");
        assert_eq!(text(split_part("a,b,,c", ",", 3)), "");
        assert_eq!(text(split_part("a,b,,c", ",", 9)), "");
        assert_eq!(text(split_part("a,b,,c", ",", -1)), "c");
        assert_eq!(text(split_part("a,b", ",", -5)), "");
        assert!(split_part("a", ",", 0).is_err());
        assert_eq!(initcap("hello wORLD-foo1bar"), "Hello World-Foo1bar");
        assert_eq!(translate("12345", "143", "ax"), "a2x5");
        assert_eq!(text(chr(65)), "A");
        assert!(chr(0).is_err());
        assert_eq!(ascii("éa"), Value::Int(233));
        assert_eq!(to_hex(255, false), Value::Text("ff".into()));
        assert_eq!(to_hex(-1, false), Value::Text("ffffffff".into()));
        assert_eq!(to_hex(-1, true), Value::Text("ffffffffffffffff".into()));
        let values = [
            Value::Text(", ".into()),
            Value::Text("a".into()),
            Value::Null,
            Value::Int(3),
        ];
        assert_eq!(concat_ws(&values), Value::Text("a, 3".into()));
    }

    #[test]
    fn regexp_replace_groups_and_flags() {
        assert_eq!(
            text(regexp_replace("foobarbaz", "b(..)", "X\\1Y", "")),
            "fooXarYbaz"
        );
        assert_eq!(
            text(regexp_replace("foobarbaz", "b(..)", "X\\1Y", "g")),
            "fooXarYXazY"
        );
        assert_eq!(text(regexp_replace("ABC", "b", "[\\&]", "i")), "A[B]C");
        assert!(regexp_replace("a", "(", "", "").is_err());
        assert_eq!(text(regexp_replace("a.b", ".", "-", "qg")), "a-b");
        assert_eq!(text(regexp_replace("a\nb", "^b", "c", "n")), "a\nc");
        assert_eq!(text(regexp_replace("a\nb", "^b", "c", "")), "a\nb");
        assert_eq!(text(regexp_replace("a\nb", "^b", "c", "m")), "a\nc");
        assert_eq!(text(regexp_replace("a\nb", "^b", "c", "ns")), "a\nb");
        assert_eq!(text(regexp_replace("a/b", "/", "\\t", "")), "a\\tb");
        assert_eq!(text(regexp_replace("a/b", "/", "\\\\", "")), "a\\b");
        assert!(regexp_replace("a", "a", "", "z").is_err());
    }

    #[test]
    fn encodings_round_trip() {
        let bytes = [0u8, 1, 92, 65, 200, 255];
        for format in ["hex", "base64", "escape"] {
            let Value::Text(encoded) = encode(&bytes, format).unwrap() else {
                panic!()
            };
            assert_eq!(
                decode(&encoded, format).unwrap(),
                Value::Bytes(bytes.to_vec()),
                "{format}: {encoded}"
            );
        }
        assert_eq!(
            encode(b"\x01\xab", "hex").unwrap(),
            Value::Text("01ab".into())
        );
        assert_eq!(
            encode(b"a\\\x00", "escape").unwrap(),
            Value::Text("a\\\\\\000".into())
        );
        assert!(decode("abc", "hex").is_err());
        assert!(decode("+1", "hex").is_err());
        assert_eq!(
            decode("\\+17", "escape").unwrap_err().code,
            sqlstate::INVALID_TEXT_REPRESENTATION
        );
        let long = encode(&[0u8; 60], "base64").unwrap();
        let Value::Text(long) = long else { panic!() };
        assert_eq!(long.lines().map(str::len).collect::<Vec<_>>(), [76, 4]);
        let full = encode(&[7u8; 57], "base64").unwrap();
        let Value::Text(full) = full else { panic!() };
        assert!(full.len() == 77 && full.ends_with('\n'), "{full:?}");
        assert_eq!(decode(&long, "base64").unwrap(), Value::Bytes(vec![0; 60]));
        assert!(decode("ab", "rot13").is_err());
    }
}

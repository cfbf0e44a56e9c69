//! bytea text forms: output in PostgreSQL's hex format (`\x0a1b`), input in hex or in the
//! escape format (`\\` is a backslash, `\ooo` an octal byte, other bytes stand for
//! themselves).

use crate::error::{sqlstate, SqlError, SqlResult};

pub fn format(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 + 2 * bytes.len());
    text.push_str("\\x");
    for byte in bytes {
        text.push(HEX[(byte >> 4) as usize] as char);
        text.push(HEX[(byte & 15) as usize] as char);
    }
    text
}

pub fn parse(text: &str) -> SqlResult<Vec<u8>> {
    let invalid = |what: String| SqlError::new(sqlstate::INVALID_TEXT_REPRESENTATION, what);
    match text.strip_prefix("\\x") {
        Some(hex) => from_hex(hex).map_err(invalid),
        None => {
            from_escape(text).ok_or_else(|| invalid("invalid input syntax for type bytea".into()))
        }
    }
}

/// The bytes of hex digit pairs, blanks skipped; Err says what is wrong ("invalid ...").
pub fn from_hex(hex: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err("invalid hexadecimal data: odd number of digits".into());
    }
    let value = |digit: u8| {
        (digit as char)
            .to_digit(16)
            .map(|v| v as u8)
            .ok_or_else(|| format!("invalid hexadecimal digit: \"{}\"", digit as char))
    };
    digits
        .chunks(2)
        .map(|pair| Ok(value(pair[0])? << 4 | value(pair[1])?))
        .collect()
}

/// The bytes of the escape format (`\\` a backslash, `\ooo` an octal byte with the first
/// digit 0-3, other bytes themselves); None if a backslash starts neither.
pub fn from_escape(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'\\' {
            out.push(bytes[at]);
            at += 1;
        } else if bytes.get(at + 1) == Some(&b'\\') {
            out.push(b'\\');
            at += 2;
        } else {
            let octal = bytes.get(at + 1..at + 4).filter(|digits| {
                (b'0'..=b'3').contains(&digits[0])
                    && digits[1..].iter().all(|d| (b'0'..=b'7').contains(d))
            })?;
            out.push((octal[0] - b'0') << 6 | (octal[1] - b'0') << 3 | (octal[2] - b'0'));
            at += 4;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_input_formats() {
        assert_eq!(format(b"ab"), "\\x6162");
        assert_eq!(parse("\\x4142").unwrap(), b"AB");
        assert_eq!(parse("\\x41 42").unwrap(), b"AB");
        assert_eq!(parse("a\\\\b\\001").unwrap(), b"a\\b\x01");
        assert!(parse("\\x4").is_err());
        assert!(parse("\\xzz").is_err());
        assert!(parse("a\\9").is_err());
        for bytes in [&b""[..], b"\x00\xff\\", b"hello"] {
            assert_eq!(parse(&format(bytes)).unwrap(), bytes);
        }
    }
}

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
    let invalid = |what: &str| {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("invalid {what}"),
        )
    };
    if let Some(hex) = text.strip_prefix("\\x") {
        let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if !digits.len().is_multiple_of(2) {
            return Err(invalid("hexadecimal data: odd number of digits"));
        }
        let value = |digit: u8| {
            (digit as char)
                .to_digit(16)
                .map(|v| v as u8)
                .ok_or_else(|| invalid(&format!("hexadecimal digit: \"{}\"", digit as char)))
        };
        return digits
            .chunks(2)
            .map(|pair| Ok(value(pair[0])? << 4 | value(pair[1])?))
            .collect();
    }
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
            });
            let Some(octal) = octal else {
                return Err(SqlError::new(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    "invalid input syntax for type bytea",
                ));
            };
            out.push((octal[0] - b'0') << 6 | (octal[1] - b'0') << 3 | (octal[2] - b'0'));
            at += 4;
        }
    }
    Ok(out)
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

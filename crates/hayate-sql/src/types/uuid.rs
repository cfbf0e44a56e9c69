//! uuid: 128 bits, shown as 32 lowercase hex digits in groups of 8-4-4-4-12.
//!
//! A uuid value is a `Value::Text` in that canonical form (so it compares, hashes and sorts
//! as PostgreSQL's uuid does: byte by byte); table rows, index keys and the binary wire
//! format carry its 16 bytes.

use crate::error::{sqlstate, SqlError, SqlResult};

/// The canonical text of a uuid's 16 bytes.
pub fn format(bytes: &[u8; 16]) -> String {
    let mut text = String::with_capacity(36);
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// Parses what PostgreSQL's uuid input accepts: 32 hex digits, upper or lower case, with a
/// hyphen after any group of four digits and optionally in braces.
pub fn parse(text: &str) -> SqlResult<[u8; 16]> {
    let invalid = || {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type uuid: \"{text}\""),
        )
    };
    let trimmed = text.trim();
    let inner = match trimmed.strip_prefix('{') {
        Some(rest) => rest.strip_suffix('}').ok_or_else(invalid)?,
        None => trimmed,
    };
    let mut bytes = [0u8; 16];
    let mut digits = 0usize;
    let mut previous_hyphen = true;
    for c in inner.chars() {
        if c == '-' {
            // A hyphen only after a whole group of four digits, never two in a row.
            if previous_hyphen || !digits.is_multiple_of(4) || digits == 32 {
                return Err(invalid());
            }
            previous_hyphen = true;
            continue;
        }
        let nibble = c.to_digit(16).ok_or_else(invalid)? as u8;
        if digits == 32 {
            return Err(invalid());
        }
        bytes[digits / 2] |= nibble << if digits.is_multiple_of(2) { 4 } else { 0 };
        digits += 1;
        previous_hyphen = false;
    }
    if digits != 32 || previous_hyphen {
        return Err(invalid());
    }
    Ok(bytes)
}

/// A random (version 4) uuid: gen_random_uuid().
pub fn random() -> String {
    let mut bytes: [u8; 16] = rand::random();
    bytes[6] = (bytes[6] & 0x0F) | 0x40;
    bytes[8] = (bytes[8] & 0x3F) | 0x80;
    format(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_postgres_input_forms() {
        let canonical = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        for text in [
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
        ] {
            assert_eq!(format(&parse(text).unwrap()), canonical, "{text}");
        }
        for bad in [
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
            "a0eebc9-99c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
            "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            "",
        ] {
            assert_eq!(
                parse(bad).unwrap_err().code,
                sqlstate::INVALID_TEXT_REPRESENTATION,
                "{bad}"
            );
        }
    }

    #[test]
    fn random_ones_are_version_4_and_differ() {
        let a = random();
        let b = random();
        assert_ne!(a, b);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
        assert_eq!(format(&parse(&a).unwrap()), a);
    }
}

//! The numeric type: exact decimals on `rust_decimal::Decimal`.
//!
//! Limits (PostgreSQL's numeric is unbounded; ours is not): a 96-bit mantissa, so about 28
//! significant digits, and at most 28 digits after the point. A result outside these limits
//! is 22003 (numeric value out of range), never a silent rounding of the integer part. NaN
//! and infinities are not numerics here (22P02 on input). Declared precisions are 1..=28.
//!
//! Text form and the scale of results follow PostgreSQL: a value keeps the scale it was
//! written with (`1.50` prints as `1.50`), addition keeps the larger scale, multiplication
//! the sum of the scales, and division PostgreSQL's `select_div_scale` (at least 16
//! significant digits).

use rust_decimal::prelude::{FromPrimitive, ToPrimitive};
use rust_decimal::{Decimal, RoundingStrategy};

use crate::error::{sqlstate, SqlError, SqlResult};

/// The largest precision (total digits) a numeric(p, s) column may declare.
pub const PRECISION_MAX: u32 = 28;

pub fn out_of_range() -> SqlError {
    SqlError::new(
        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
        "value out of range: overflow",
    )
}

/// Parses PostgreSQL's numeric text form (`-12.50`, `1e3`, surrounding spaces).
pub fn parse(text: &str) -> SqlResult<Decimal> {
    let trimmed = text.trim();
    let invalid = || {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type numeric: \"{text}\""),
        )
    };
    let well_formed = {
        let body = trimmed.trim_start_matches(['+', '-']);
        let (mantissa, exponent) = match body.find(['e', 'E']) {
            Some(at) => (&body[..at], Some(&body[at + 1..])),
            None => (body, None),
        };
        let digits = mantissa.bytes().filter(u8::is_ascii_digit).count();
        let dots = mantissa.bytes().filter(|b| *b == b'.').count();
        trimmed.len() - body.len() <= 1
            && digits > 0
            && dots <= 1
            && digits + dots == mantissa.len()
            && exponent.is_none_or(|e| {
                let e = e.trim_start_matches(['+', '-']);
                !e.is_empty() && e.len() <= 4 && e.bytes().all(|b| b.is_ascii_digit())
            })
    };
    if !well_formed {
        return Err(invalid());
    }
    if trimmed.contains(['e', 'E']) {
        return Decimal::from_scientific(trimmed).map_err(|_| out_of_range());
    }
    // from_str_exact refuses to round: too many digits is out of range, not a silent change.
    Decimal::from_str_exact(trimmed).map_err(|_| out_of_range())
}

/// The text form: the digits with the value's scale.
pub fn format(value: &Decimal) -> String {
    value.to_string()
}

pub fn from_i64(value: i64) -> Decimal {
    Decimal::from(value)
}

/// A float as PostgreSQL converts it: through its shortest exact text form.
pub fn from_f64(value: f64) -> SqlResult<Decimal> {
    if !value.is_finite() {
        return Err(SqlError::new(
            sqlstate::FEATURE_NOT_SUPPORTED,
            "cannot convert NaN or infinity to numeric",
        ));
    }
    let text = super::format_float(value);
    parse(&text).or_else(|_| Decimal::from_f64(value).ok_or_else(out_of_range))
}

pub fn to_f64(value: &Decimal) -> f64 {
    value
        .to_string()
        .parse()
        .unwrap_or_else(|_| value.to_f64().unwrap_or(0.0))
}

/// Rounds half away from zero to an integer, as the numeric-to-integer cast does.
pub fn to_i64(value: &Decimal) -> Option<i64> {
    value
        .round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero)
        .to_i64()
}

/// Rounds half away from zero to `scale` digits after the point and shows exactly that many
/// (PostgreSQL's round(numeric, int) for scale >= 0).
pub fn round(value: &Decimal, scale: i32) -> Decimal {
    if scale < 0 {
        let factor = Decimal::from_i128_with_scale(10i128.pow((-scale).min(28) as u32), 0);
        let rounded =
            (value / factor).round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero);
        return rounded.checked_mul(factor).unwrap_or(*value);
    }
    let scale = (scale as u32).min(Decimal::MAX_SCALE);
    let mut rounded = value.round_dp_with_strategy(scale, RoundingStrategy::MidpointAwayFromZero);
    rounded.rescale(scale);
    rounded
}

/// Truncates toward zero to `scale` digits after the point.
pub fn trunc(value: &Decimal, scale: i32) -> Decimal {
    let scale = scale.clamp(0, Decimal::MAX_SCALE as i32) as u32;
    let mut truncated = value.round_dp_with_strategy(scale, RoundingStrategy::ToZero);
    truncated.rescale(scale);
    truncated
}

/// Applies a column's numeric(precision, scale): rounds to the scale, then checks that the
/// integer part fits (22003 "numeric field overflow" as in PostgreSQL).
pub fn apply_typmod(value: Decimal, precision: u32, scale: u32) -> SqlResult<Decimal> {
    let rounded = round(&value, scale as i32);
    let integer_digits_max = precision - scale;
    let limit = Decimal::from_i128_with_scale(10i128.pow(integer_digits_max), 0);
    if rounded.abs() >= limit {
        return Err(SqlError::new(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "numeric field overflow",
        )
        .with_detail(format!(
            "A field with precision {precision}, scale {scale} must round to an absolute value \
             less than 10^{integer_digits_max}."
        )));
    }
    Ok(rounded)
}

/// The base-10000 weight and first base-10000 digit of a non-zero value (PostgreSQL's
/// internal digit grouping, which its division scale depends on).
fn weight_and_first_digit(value: &Decimal) -> (i32, u32) {
    let mantissa = value.mantissa().unsigned_abs();
    if mantissa == 0 {
        return (0, 0);
    }
    let digits = mantissa.to_string();
    // 10^exponent <= |value| < 10^(exponent + 1)
    let exponent = digits.len() as i32 - value.scale() as i32 - 1;
    let weight = exponent.div_euclid(4);
    let leading = (exponent - 4 * weight + 1) as usize;
    let first: String = digits.chars().take(leading).collect();
    let first = format!("{first:0<leading$}");
    (weight, first.parse().unwrap_or(0))
}

/// Division with PostgreSQL's result scale (select_div_scale), capped at 28.
pub fn divide(left: &Decimal, right: &Decimal) -> SqlResult<Decimal> {
    if right.is_zero() {
        return Err(SqlError::new(
            sqlstate::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    let (weight_left, first_left) = weight_and_first_digit(left);
    let (weight_right, first_right) = weight_and_first_digit(right);
    let mut quotient_weight = weight_left - weight_right;
    if first_left <= first_right {
        quotient_weight -= 1;
    }
    let scale = (16 - quotient_weight * 4)
        .max(left.scale() as i32)
        .max(right.scale() as i32)
        .clamp(0, Decimal::MAX_SCALE as i32);
    let quotient = left.checked_div(*right).ok_or_else(out_of_range)?;
    Ok(round(&quotient, scale))
}

pub fn add(left: &Decimal, right: &Decimal) -> SqlResult<Decimal> {
    left.checked_add(*right).ok_or_else(out_of_range)
}

pub fn subtract(left: &Decimal, right: &Decimal) -> SqlResult<Decimal> {
    left.checked_sub(*right).ok_or_else(out_of_range)
}

pub fn multiply(left: &Decimal, right: &Decimal) -> SqlResult<Decimal> {
    let product = left.checked_mul(*right).ok_or_else(out_of_range)?;
    // rust_decimal drops digits after the point when the exact product needs more than
    // 28 of them; the integer part is always exact or an error.
    Ok(product)
}

pub fn modulo(left: &Decimal, right: &Decimal) -> SqlResult<Decimal> {
    if right.is_zero() {
        return Err(SqlError::new(
            sqlstate::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    left.checked_rem(*right).ok_or_else(out_of_range)
}

/// The row encoding: i128 mantissa (16 bytes, little-endian) and u8 scale.
pub fn encode_row(out: &mut Vec<u8>, value: &Decimal) {
    out.extend_from_slice(&value.mantissa().to_le_bytes());
    out.push(value.scale() as u8);
}

/// Decodes `encode_row`'s 17 bytes, checking the limits (None if they are broken).
pub fn decode_row(bytes: &[u8; 17]) -> Option<Decimal> {
    let mantissa = i128::from_le_bytes(bytes[..16].try_into().expect("16 bytes"));
    Decimal::try_from_i128_with_scale(mantissa, bytes[16] as u32).ok()
}

/// The order-preserving key encoding. The value is normalized (trailing zeros after the
/// point removed), so 1.5 and 1.50 are the same key, then:
/// - zero: the byte 0x80;
/// - positive: 0xC0, the decimal exponent (10^e <= v < 10^(e+1)) + 128 as one byte, the
///   digits each as 1..=10, and 0x00;
/// - negative: 0x40 and the positive form's exponent and digit bytes inverted, ended by 0xFF.
///
/// A longer digit string with the same prefix is a larger magnitude, and the terminator
/// sorts below (or, inverted, above) every digit, which gives the order in both signs.
pub fn encode_key(out: &mut Vec<u8>, value: &Decimal) {
    let normalized = value.normalize();
    let mantissa = normalized.mantissa();
    if mantissa == 0 {
        out.push(0x80);
        return;
    }
    let digits = mantissa.unsigned_abs().to_string();
    let exponent = digits.len() as i32 - normalized.scale() as i32 - 1;
    let negative = mantissa < 0;
    let flip = |byte: u8| if negative { !byte } else { byte };
    out.push(if negative { 0x40 } else { 0xC0 });
    out.push(flip((exponent + 128) as u8));
    for digit in digits.bytes() {
        out.push(flip(digit - b'0' + 1));
    }
    out.push(flip(0x00));
}

/// The binary wire form (PostgreSQL's numeric_send): i16 digit count, i16 weight, u16 sign,
/// u16 display scale, then base-10000 digits as i16, big-endian.
pub fn encode_binary(value: &Decimal) -> Vec<u8> {
    let scale = value.scale() as usize;
    let digits = value.mantissa().unsigned_abs().to_string();
    let (integer, fraction) = if digits.len() > scale {
        digits.split_at(digits.len() - scale)
    } else {
        ("", digits.as_str())
    };
    let fraction = format!("{fraction:0>scale$}");
    let integer_padded = format!("{integer:0>width$}", width = integer.len().div_ceil(4) * 4);
    let fraction_padded = format!("{fraction:0<width$}", width = scale.div_ceil(4) * 4);
    let group = |text: &str| -> Vec<i16> {
        text.as_bytes()
            .chunks(4)
            .map(|chunk| {
                std::str::from_utf8(chunk)
                    .unwrap_or("0")
                    .parse()
                    .unwrap_or(0)
            })
            .collect()
    };
    let mut groups = group(&integer_padded);
    let mut weight = groups.len() as i32 - 1;
    groups.extend(group(&fraction_padded));
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let sign: u16 = if value.is_sign_negative() && !groups.is_empty() {
        0x4000
    } else {
        0
    };
    let mut out = Vec::with_capacity(8 + 2 * groups.len());
    out.extend_from_slice(&(groups.len() as i16).to_be_bytes());
    out.extend_from_slice(&(weight as i16).to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&(scale as u16).to_be_bytes());
    for group in groups {
        out.extend_from_slice(&group.to_be_bytes());
    }
    out
}

/// Decodes the binary wire form (untrusted bytes: every field is checked).
pub fn decode_binary(bytes: &[u8]) -> SqlResult<Decimal> {
    let bad = |what: &str| SqlError::new("22P03", format!("invalid numeric binary data: {what}"));
    if bytes.len() < 8 {
        return Err(bad("too short"));
    }
    let field = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
    let count = field(0) as i16;
    let weight = field(2) as i16 as i32;
    let sign = field(4);
    let scale = field(6) as u32;
    if count < 0 || bytes.len() != 8 + 2 * count as usize {
        return Err(bad("wrong length"));
    }
    if sign == 0xC000 {
        return Err(SqlError::new(
            sqlstate::FEATURE_NOT_SUPPORTED,
            "numeric NaN is not supported",
        ));
    }
    if sign != 0 && sign != 0x4000 {
        return Err(bad("invalid sign"));
    }
    if scale > Decimal::MAX_SCALE {
        return Err(out_of_range());
    }
    let mut text = String::new();
    for index in 0..count as usize {
        let group = field(8 + 2 * index);
        if group > 9999 {
            return Err(bad("invalid digit"));
        }
        text.push_str(&format!("{group:04}"));
    }
    // The digits are 0.dddd... * 10000^(weight + 1).
    let exponent = 4 * (weight + 1) - text.len() as i32;
    let magnitude = if text.is_empty() {
        Decimal::ZERO
    } else {
        let scientific = format!("{text}e{exponent}");
        Decimal::from_scientific(&scientific).map_err(|_| out_of_range())?
    };
    let mut value = if sign == 0x4000 {
        -magnitude
    } else {
        magnitude
    };
    value = round(&value, scale as i32);
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        parse(text).unwrap()
    }

    #[test]
    fn text_forms_keep_their_scale() {
        assert_eq!(format(&d("1.50")), "1.50");
        assert_eq!(format(&d(" -0.5 ")), "-0.5");
        assert_eq!(format(&d("1e3")), "1000");
        for bad in ["", "abc", "1.2.3", "--1", "1e"] {
            assert_eq!(
                parse(bad).unwrap_err().code,
                sqlstate::INVALID_TEXT_REPRESENTATION,
                "{bad}"
            );
        }
        assert_eq!(
            parse("123456789012345678901234567890").unwrap_err().code,
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE
        );
    }

    #[test]
    fn division_uses_postgres_scale() {
        // Compared with PostgreSQL 15.
        assert_eq!(
            format(&divide(&d("1"), &d("3")).unwrap()),
            "0.33333333333333333333"
        );
        assert_eq!(
            format(&divide(&d("3"), &d("2")).unwrap()),
            "1.5000000000000000"
        );
        assert_eq!(
            format(&divide(&d("12345"), &d("1")).unwrap()),
            "12345.0000000000000000"
        );
        assert_eq!(
            format(&divide(&d("10"), &d("4")).unwrap()),
            "2.5000000000000000"
        );
    }

    #[test]
    fn typmod_rounds_and_checks() {
        assert_eq!(format(&apply_typmod(d("1.005"), 5, 2).unwrap()), "1.01");
        assert_eq!(format(&apply_typmod(d("7"), 5, 2).unwrap()), "7.00");
        assert_eq!(
            apply_typmod(d("1000"), 5, 2).unwrap_err().code,
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE
        );
    }

    #[test]
    fn binary_round_trip() {
        for text in [
            "0",
            "0.00",
            "1",
            "-1.5",
            "12345.6789",
            "10000",
            "0.0001",
            "-99999999.01",
        ] {
            let value = d(text);
            let decoded = decode_binary(&encode_binary(&value)).unwrap();
            assert_eq!(format(&decoded), format(&value), "{text}");
        }
        // 12345.678 as PostgreSQL sends it: 3 digits, weight 1, scale 3: 1 2345 6780.
        let bytes = encode_binary(&d("12345.678"));
        assert_eq!(
            bytes,
            [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1A, 0x7C]
        );
    }
}

//! ln, exp, log and sign of numeric arguments, as PostgreSQL computes them for numeric:
//! numeric results whose scale is PostgreSQL's (`numeric.c`: at least 16 significant digits
//! by an estimate of the result's decimal weight, never fewer decimals than an argument
//! has), here capped at 28 decimals as every numeric (`types::numeric`).
//!
//! The values are computed on `rust_decimal` (28 significant digits): ln by taking square
//! roots until the argument is within 10% of 1, then the atanh series; exp as e^k times the
//! Taylor series of the fraction. Results agree with PostgreSQL's to the digit where they
//! need fewer than about 26 significant digits (exp of arguments past about 40 may differ in
//! the last ones).

use rust_decimal::prelude::{FromPrimitive, ToPrimitive};
use rust_decimal::Decimal;

use super::numeric::{out_of_range, round};
use crate::error::{sqlstate, SqlError, SqlResult};

/// ln(10) and e to 28 digits.
fn ln_10() -> Decimal {
    Decimal::from_i128_with_scale(2_302_585_092_994_045_684_017_991_455, 27)
}

fn e() -> Decimal {
    Decimal::from_i128_with_scale(2_718_281_828_459_045_235_360_287_471, 27)
}

/// PostgreSQL's NUMERIC_MIN_SIG_DIGITS.
const SIGNIFICANT_DIGITS_MIN: i32 = 16;

/// sign(numeric): -1, 0 or 1.
pub fn sign(value: &Decimal) -> Decimal {
    match value.is_zero() {
        true => Decimal::ZERO,
        false if value.is_sign_negative() => Decimal::NEGATIVE_ONE,
        false => Decimal::ONE,
    }
}

/// ln(numeric) (2201E for zero or a negative argument).
pub fn ln(value: &Decimal) -> SqlResult<Decimal> {
    check_logarithm_argument(value)?;
    let scale = SIGNIFICANT_DIGITS_MIN - ln_weight_estimate(value);
    Ok(round(&ln_full(value), result_scale(scale, &[value])))
}

/// log(base, numeric), and log(numeric) and log10(numeric) as log(10, numeric): 2201E for
/// a zero or negative argument, 22012 for base 1.
pub fn log(base: &Decimal, value: &Decimal) -> SqlResult<Decimal> {
    check_logarithm_argument(base)?;
    check_logarithm_argument(value)?;
    let ln_base = ln_full(base);
    if ln_base.is_zero() {
        return Err(SqlError::new(
            sqlstate::DIVISION_BY_ZERO,
            "division by zero",
        ));
    }
    let weight = ln_weight_estimate(value) - ln_weight_estimate(base);
    let scale = result_scale(SIGNIFICANT_DIGITS_MIN - weight, &[base, value]);
    let quotient = ln_full(value)
        .checked_div(ln_base)
        .ok_or_else(out_of_range)?;
    Ok(round(&quotient, scale))
}

/// exp(numeric) (22003 when the result exceeds the numeric range).
pub fn exp(value: &Decimal) -> SqlResult<Decimal> {
    // The result's decimal weight is about value * log10(e).
    let weight = (value.to_f64().unwrap_or(0.0) * std::f64::consts::LOG10_E).clamp(-1000.0, 1000.0);
    let scale = result_scale(SIGNIFICANT_DIGITS_MIN - weight as i32, &[value]);
    let result = match value.is_sign_negative() {
        // A result below the smallest numeric rounds to zero at 28 decimals.
        true => match exp_of_positive(&-*value) {
            Some(inverse) => Decimal::ONE.checked_div(inverse).unwrap_or(Decimal::ZERO),
            None => Decimal::ZERO,
        },
        false => exp_of_positive(value).ok_or_else(out_of_range)?,
    };
    Ok(round(&result, scale))
}

/// The scale of a result: `wanted`, at least every argument's, within 0..=28.
fn result_scale(wanted: i32, arguments: &[&Decimal]) -> i32 {
    arguments
        .iter()
        .fold(wanted, |scale, argument| scale.max(argument.scale() as i32))
        .clamp(0, Decimal::MAX_SCALE as i32)
}

fn check_logarithm_argument(value: &Decimal) -> SqlResult<()> {
    let message = match () {
        _ if value.is_zero() => "cannot take logarithm of zero",
        _ if value.is_sign_negative() => "cannot take logarithm of a negative number",
        _ => return Ok(()),
    };
    Err(SqlError::new("2201E", message))
}

/// The decimal weight of a nonzero value: the power of ten of its first digit (0.05: -2).
fn decimal_weight(value: &Decimal) -> i32 {
    let digits = value
        .mantissa()
        .unsigned_abs()
        .checked_ilog10()
        .unwrap_or(0) as i32
        + 1;
    digits - 1 - value.scale() as i32
}

/// PostgreSQL's estimate_ln_dweight: the decimal weight of ln(value), from value - 1 near
/// 1, else from a floating-point logarithm (truncated toward zero, as C's cast is).
fn ln_weight_estimate(value: &Decimal) -> i32 {
    let near = Decimal::from_i128_with_scale(9, 1)..=Decimal::from_i128_with_scale(11, 1);
    if near.contains(value) {
        let distance = value - Decimal::ONE;
        return match distance.is_zero() {
            true => 0,
            false => decimal_weight(&distance),
        };
    }
    // value ~= digits * 10^shift, digits its first two base-10000 groups (what PostgreSQL's
    // estimate reads: 5 to 8 significant digits, by the groups' alignment).
    // Taken from the mantissa exactly: a floating-point division may fall just below a
    // whole quotient (1.2 / 10^-4 = 11999.99...).
    let groups = decimal_weight(value).div_euclid(4);
    let shift = 4 * (groups - 1);
    let mantissa = value.mantissa().unsigned_abs();
    let exponent = -(value.scale() as i32) - shift;
    let power = 10u128
        .checked_pow(exponent.unsigned_abs())
        .unwrap_or(u128::MAX);
    let digits = match exponent >= 0 {
        true => mantissa.saturating_mul(power),
        false => mantissa / power,
    };
    let ln = (digits.max(1) as f64).ln() + f64::from(shift) * std::f64::consts::LN_10;
    match ln == 0.0 {
        true => 0,
        false => ln.abs().log10() as i32,
    }
}

/// ln of a positive value to about 27 digits: value = m * 10^w with m in [1, 10) (or the
/// value itself within 10% of 1); square roots bring m within 10% of 1 (at most five),
/// where atanh's series converges fast.
fn ln_full(value: &Decimal) -> Decimal {
    // Within 10% of 1 the series takes the value as it is: scaling 0.99... up to 9.9... and
    // subtracting ln(10) again would cancel most of its digits.
    let near = Decimal::from_i128_with_scale(9, 1)..=Decimal::from_i128_with_scale(11, 1);
    let weight = match near.contains(value) {
        true => 0,
        false => decimal_weight(value),
    };
    let power = Decimal::from_i128_with_scale(10i128.pow(weight.unsigned_abs()), 0);
    let mut m = match weight >= 0 {
        true => value / power,
        false => value * power,
    };
    let mut doublings = 0;
    let (low, high) = (
        Decimal::from_i128_with_scale(9, 1),
        Decimal::from_i128_with_scale(11, 1),
    );
    while m < low || m > high {
        m = sqrt(&m);
        doublings += 1;
    }
    // ln(m) = 2 atanh(z), z = (m - 1) / (m + 1): 2 (z + z^3/3 + z^5/5 + ...).
    let z = (m - Decimal::ONE) / (m + Decimal::ONE);
    let z2 = z * z;
    let (mut power_of_z, mut sum, mut odd) = (z, z, 1i64);
    loop {
        power_of_z *= z2;
        odd += 2;
        let term = power_of_z / Decimal::from(odd);
        if term.is_zero() {
            break;
        }
        sum += term;
    }
    let ln_m = sum * Decimal::from(2i64 << doublings);
    ln_m + ln_10() * Decimal::from(weight)
}

/// The square root of a positive value: Newton's steps from the floating-point one.
fn sqrt(value: &Decimal) -> Decimal {
    let start = value.to_f64().map(f64::sqrt).and_then(Decimal::from_f64);
    let mut root = start.unwrap_or(Decimal::ONE);
    for _ in 0..4 {
        root = (root + value / root) / Decimal::TWO;
    }
    root
}

/// exp of a value >= 0: e^k (k its integer part) times the series of the fraction; None
/// past the numeric range.
fn exp_of_positive(value: &Decimal) -> Option<Decimal> {
    let whole = value.trunc();
    let fraction = value - whole;
    let mut power = Decimal::ONE;
    for _ in 0..whole.to_u32()? {
        power = power.checked_mul(e())?;
    }
    let (mut term, mut sum) = (Decimal::ONE, Decimal::ONE);
    for i in 1..200i64 {
        term = term * fraction / Decimal::from(i);
        if term.is_zero() {
            break;
        }
        sum += term;
    }
    power.checked_mul(sum)
}

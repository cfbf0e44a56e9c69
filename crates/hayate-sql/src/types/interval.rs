//! interval: (months, days, microseconds), as in PostgreSQL. Added to a timestamp, months
//! go on the calendar (the day clamped to the month's length), then days, then
//! microseconds. Intervals compare (and index) by their span with 30-day months and 24-hour
//! days, so `'1 mon' = '30 days'` as in PostgreSQL. Text input takes PostgreSQL's forms
//! (`1 year 2 mons -3 days 04:05:06.5`, `@ 1 day ago`, ISO 8601 `P1DT2H`); output is
//! PostgreSQL's default style.

use super::datetime::{
    civil_from_days, days_from_civil, days_in_month, timestamp_out_of_range, MICROS_PER_DAY,
    MICROS_PER_SECOND, TIMESTAMP_INFINITY, TIMESTAMP_NEG_INFINITY,
};
use crate::error::{sqlstate, SqlError, SqlResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Interval {
    pub months: i64,
    pub days: i64,
    pub micros: i64,
}

/// The days of a month and the microseconds of a day in an interval's span.
const DAYS_PER_MONTH: i128 = 30;

impl Interval {
    /// The interval if its fields are within PostgreSQL's range (months and days are i32
    /// there; microseconds stop short of i64::MIN so that every interval negates), else
    /// "interval out of range".
    pub fn checked(self) -> SqlResult<Interval> {
        let field = |v: i64| i32::try_from(v).is_ok();
        if field(self.months) && field(self.days) && self.micros != i64::MIN {
            Ok(self)
        } else {
            Err(interval_out_of_range())
        }
    }

    pub fn negate(self) -> Interval {
        Interval {
            months: -self.months,
            days: -self.days,
            micros: -self.micros,
        }
    }

    /// The span PostgreSQL compares intervals by: 30-day months, 24-hour days.
    pub fn span(self) -> i128 {
        (self.months as i128 * DAYS_PER_MONTH + self.days as i128) * MICROS_PER_DAY as i128
            + self.micros as i128
    }

    /// Field by field (interval + interval).
    pub fn checked_add(self, other: Interval) -> SqlResult<Interval> {
        let overflow = || interval_out_of_range();
        Interval {
            months: self.months.checked_add(other.months).ok_or_else(overflow)?,
            days: self.days.checked_add(other.days).ok_or_else(overflow)?,
            micros: self.micros.checked_add(other.micros).ok_or_else(overflow)?,
        }
        .checked()
    }

    /// interval / divisor, field by field as PostgreSQL's interval_div: the fraction of
    /// the months passes down as days (30 per month), that of the days as microseconds.
    pub fn divide(self, divisor: f64) -> SqlResult<Interval> {
        if divisor == 0.0 {
            return Err(SqlError::new(
                sqlstate::DIVISION_BY_ZERO,
                "division by zero",
            ));
        }
        if !divisor.is_finite() {
            return Err(interval_out_of_range());
        }
        // PostgreSQL's interval_div, step by step (TSROUND: to the microsecond).
        let round_micro = |v: f64| (v * 1e6).round() / 1e6;
        let months = (self.months as f64 / divisor).trunc();
        let days = (self.days as f64 / divisor).trunc();
        let month_days =
            round_micro((self.months as f64 / divisor - months) * DAYS_PER_MONTH as f64);
        let seconds_per_day = (MICROS_PER_DAY / MICROS_PER_SECOND) as f64;
        let mut seconds = round_micro(
            (self.days as f64 / divisor - days + month_days - month_days.trunc()) * seconds_per_day,
        );
        let mut days = days;
        // 24:00:00 from rounding, or more from the months' and days' cascade.
        if seconds.abs() >= seconds_per_day {
            let whole = (seconds / seconds_per_day).trunc();
            days += whole;
            seconds -= whole * seconds_per_day;
        }
        days += month_days.trunc();
        let micros = self.micros as f64 / divisor + seconds * MICROS_PER_SECOND as f64;
        if !(micros.abs() < 9.2e18 && months.abs() < 9.2e18 && days.abs() < 9.2e18) {
            return Err(interval_out_of_range());
        }
        let result = Interval {
            months: months as i64,
            days: days as i64,
            micros: micros.round() as i64,
        };
        result.checked()
    }

    /// interval * factor: fractions of months pass down to days (30 per month), of days to
    /// microseconds, as PostgreSQL's interval_mul does.
    pub fn scale(self, factor: f64) -> SqlResult<Interval> {
        if !factor.is_finite() {
            return Err(interval_out_of_range());
        }
        let months = self.months as f64 * factor;
        let whole_months = months.trunc();
        let days = self.days as f64 * factor + (months - whole_months) * DAYS_PER_MONTH as f64;
        let whole_days = days.trunc();
        let micros = self.micros as f64 * factor + (days - whole_days) * MICROS_PER_DAY as f64;
        let fits = |v: f64| v.abs() < 9.2e18;
        if !fits(whole_months) || !fits(whole_days) || !fits(micros) {
            return Err(interval_out_of_range());
        }
        Interval {
            months: whole_months as i64,
            days: whole_days as i64,
            micros: micros.round() as i64,
        }
        .checked()
    }

    /// The difference of two timestamps: whole days and the rest (timestamp - timestamp).
    pub fn between(later: i64, earlier: i64) -> SqlResult<Interval> {
        let infinite = [later, earlier]
            .iter()
            .any(|t| *t == TIMESTAMP_INFINITY || *t == TIMESTAMP_NEG_INFINITY);
        if infinite {
            return Err(SqlError::new(
                sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
                "cannot subtract infinite timestamps",
            ));
        }
        let difference = later
            .checked_sub(earlier)
            .ok_or_else(interval_out_of_range)?;
        Interval {
            months: 0,
            days: difference / MICROS_PER_DAY,
            micros: difference % MICROS_PER_DAY,
        }
        .checked()
    }
}

fn interval_out_of_range() -> SqlError {
    SqlError::new(
        sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
        "interval out of range",
    )
}

/// PostgreSQL's default output: `1 year 2 mons -3 days +04:05:06.5`, `00:00:00` for zero.
pub fn format(interval: Interval) -> String {
    let mut out = String::new();
    let mut negative_before = false;
    let mut field = |out: &mut String, value: i64, unit: &str| {
        if value == 0 {
            return;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        if negative_before && value > 0 {
            out.push('+');
        }
        out.push_str(&format!("{value} {unit}"));
        if value != 1 {
            out.push('s');
        }
        negative_before = value < 0;
    };
    field(&mut out, interval.months / 12, "year");
    field(&mut out, interval.months % 12, "mon");
    field(&mut out, interval.days, "day");
    if interval.micros != 0 || out.is_empty() {
        if !out.is_empty() {
            out.push(' ');
        }
        if interval.micros < 0 {
            out.push('-');
        } else if negative_before {
            out.push('+');
        }
        let micros = interval.micros.unsigned_abs();
        let seconds = micros / MICROS_PER_SECOND as u64;
        let fraction = micros % MICROS_PER_SECOND as u64;
        out.push_str(&format!(
            "{:02}:{:02}:{:02}",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        ));
        if fraction != 0 {
            let digits = format!("{fraction:06}");
            out.push('.');
            out.push_str(digits.trim_end_matches('0'));
        }
    }
    out
}

fn invalid(text: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_DATETIME_FORMAT,
        format!("invalid input syntax for type interval: \"{text}\""),
    )
}

/// Parses PostgreSQL's interval input: `<number> <unit>` pairs (`1 day`, `-2 hours`,
/// `3 mons`, `1.5 seconds`, units singular or plural or abbreviated) and an optional
/// `[-]hh:mm[:ss[.ffffff]]`; `unit` is the unit of a bare number (`interval '5' minute`).
pub fn parse(text: &str, unit: Option<&str>) -> SqlResult<Interval> {
    let trimmed = text.trim();
    if let Some(iso) = trimmed.strip_prefix('P') {
        return parse_iso(iso).ok_or_else(|| invalid(text));
    }
    let mut interval = Interval::default();
    let mut words: Vec<&str> = trimmed
        .strip_prefix('@')
        .unwrap_or(trimmed)
        .split_whitespace()
        .collect();
    let ago = words.last() == Some(&"ago");
    if ago {
        words.pop();
    }
    if words.is_empty() {
        return Err(invalid(text));
    }
    let mut index = 0;
    while index < words.len() {
        let word = words[index];
        if word.contains(':') {
            interval.micros = interval
                .micros
                .checked_add(clock(word).ok_or_else(|| invalid(text))?)
                .ok_or_else(|| invalid(text))?;
            index += 1;
            continue;
        }
        let number: f64 = word.parse().map_err(|_| invalid(text))?;
        let unit_word = match words.get(index + 1) {
            Some(next) => {
                index += 2;
                *next
            }
            None => {
                index += 1;
                unit.unwrap_or("second")
            }
        };
        add(&mut interval, number, unit_word).ok_or_else(|| invalid(text))?;
    }
    let interval = interval.checked().map_err(|_| {
        SqlError::new(
            sqlstate::DATETIME_FIELD_OVERFLOW,
            format!("interval field value out of range: \"{text}\""),
        )
    })?;
    Ok(if ago { interval.negate() } else { interval })
}

/// ISO 8601's `P[nY][nM][nW][nD][T[nH][nM][nS]]` (after the P).
fn parse_iso(text: &str) -> Option<Interval> {
    let mut interval = Interval::default();
    let (date, time) = match text.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let mut fields = |part: &str, units: &[(char, &str)]| -> Option<()> {
        let mut number = String::new();
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' || c == '-' {
                number.push(c);
                continue;
            }
            let unit = units.iter().find(|(letter, _)| *letter == c)?.1;
            add(&mut interval, number.parse().ok()?, unit)?;
            number.clear();
        }
        number.is_empty().then_some(())
    };
    fields(
        date,
        &[('Y', "year"), ('M', "month"), ('W', "week"), ('D', "day")],
    )?;
    if let Some(time) = time {
        fields(time, &[('H', "hour"), ('M', "minute"), ('S', "second")])?;
    }
    (!text.is_empty()).then_some(interval)?.checked().ok()
}

/// `hh:mm[:ss[.f]]` as microseconds.
fn clock(word: &str) -> Option<i64> {
    let (negative, word) = match word.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, word.strip_prefix('+').unwrap_or(word)),
    };
    let parts: Vec<&str> = word.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h, m] => (h.parse::<i64>().ok()?, m.parse::<i64>().ok()?, 0.0),
        [h, m, s] => (
            h.parse::<i64>().ok()?,
            m.parse::<i64>().ok()?,
            s.parse::<f64>().ok()?,
        ),
        _ => return None,
    };
    let seconds = seconds * MICROS_PER_SECOND as f64;
    if !seconds.is_finite() || seconds.abs() > 9.2e18 {
        return None;
    }
    let micros = hours
        .checked_mul(3600)?
        .checked_add(minutes.checked_mul(60)?)?
        .checked_mul(MICROS_PER_SECOND)?
        .checked_add(seconds.round() as i64)?;
    Some(if negative { -micros } else { micros })
}

/// Adds `number` `unit`s, as PostgreSQL reads them: a fraction of a year is rounded to
/// months; a fraction of a month passes down as days (30 per month), of a week or a day as
/// microseconds. None: an unknown unit, a number that is not finite, or an overflow.
fn add(interval: &mut Interval, number: f64, unit: &str) -> Option<()> {
    if !number.is_finite() {
        return None;
    }
    let second = MICROS_PER_SECOND as f64;
    let (months, days, micros) = match unit.to_ascii_lowercase().as_str() {
        "year" | "years" | "yr" | "yrs" | "y" => ((number * 12.0).round(), 0.0, 0.0),
        "mon" | "mons" | "month" | "months" => (number, 0.0, 0.0),
        "week" | "weeks" | "w" => (0.0, number * 7.0, 0.0),
        "day" | "days" | "d" => (0.0, number, 0.0),
        "hour" | "hours" | "hr" | "hrs" | "h" => (0.0, 0.0, number * 3600.0 * second),
        "minute" | "minutes" | "min" | "mins" | "m" => (0.0, 0.0, number * 60.0 * second),
        "second" | "seconds" | "sec" | "secs" | "s" => (0.0, 0.0, number * second),
        "millisecond" | "milliseconds" | "ms" => (0.0, 0.0, number * 1000.0),
        "microsecond" | "microseconds" | "us" => (0.0, 0.0, number),
        _ => return None,
    };
    let whole_months = months.trunc();
    let days = days + (months - whole_months) * DAYS_PER_MONTH as f64;
    let whole_days = days.trunc();
    let micros = micros + (days - whole_days) * MICROS_PER_DAY as f64;
    let limit = |v: f64, max: f64| (v.abs() <= max).then_some(v as i64);
    interval.months = interval
        .months
        .checked_add(limit(whole_months, i32::MAX as f64)?)?;
    interval.days = interval
        .days
        .checked_add(limit(whole_days, i32::MAX as f64)?)?;
    interval.micros = interval
        .micros
        .checked_add(limit(micros.round(), 9.2e18)?)?;
    Some(())
}

/// A timestamp (microseconds since 2000-01-01) plus an interval.
pub fn add_to_timestamp(timestamp: i64, interval: Interval) -> SqlResult<i64> {
    if timestamp == TIMESTAMP_INFINITY || timestamp == TIMESTAMP_NEG_INFINITY {
        return Ok(timestamp);
    }
    let mut days = timestamp.div_euclid(MICROS_PER_DAY);
    let time = timestamp.rem_euclid(MICROS_PER_DAY);
    if interval.months != 0 {
        // Dates count from 2000-01-01; civil dates from 1970-01-01.
        const EPOCH_2000: i64 = 10_957;
        let (year, month, day) = civil_from_days(days + EPOCH_2000);
        let total = year * 12 + (month as i64 - 1) + interval.months;
        let (year, month) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
        let day = day.min(days_in_month(year, month));
        days = days_from_civil(year, month, day) - EPOCH_2000;
    }
    days.checked_add(interval.days)
        .and_then(|days| days.checked_mul(MICROS_PER_DAY))
        .and_then(|micros| micros.checked_add(time))
        .and_then(|micros| micros.checked_add(interval.micros))
        .ok_or_else(timestamp_out_of_range)
}

/// timestamptz + interval, as PostgreSQL adds one: the months and days to the wall-clock
/// time in `zone` (a day across a change to summer time is 23 hours), then the time part
/// to the instant.
pub fn add_to_timestamptz(
    utc: i64,
    interval: Interval,
    zone: &super::zone::Zone,
) -> SqlResult<i64> {
    if utc == TIMESTAMP_INFINITY || utc == TIMESTAMP_NEG_INFINITY {
        return Ok(utc);
    }
    let calendar = Interval {
        micros: 0,
        ..interval
    };
    let moved = match calendar.months != 0 || calendar.days != 0 {
        true => zone.to_utc(add_to_timestamp(zone.to_local(utc), calendar)?),
        false => utc,
    };
    moved
        .checked_add(interval.micros)
        .ok_or_else(timestamp_out_of_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_postgres_forms() {
        let day = parse("1 day", None).unwrap();
        assert_eq!((day.months, day.days, day.micros), (0, 1, 0));
        let mixed = parse("1 year 2 mons -3 days 04:05:06.5", None).unwrap();
        assert_eq!(mixed.months, 14);
        assert_eq!(mixed.days, -3);
        assert_eq!(mixed.micros, (4 * 3600 + 5 * 60 + 6) * 1_000_000 + 500_000);
        assert_eq!(parse("5", Some("minute")).unwrap().micros, 300_000_000);
        assert_eq!(parse("2 hours", None).unwrap().micros, 7_200_000_000);
        assert!(parse("1 fortnight", None).is_err());
        assert!(parse("", None).is_err());
        let ago = parse("@ 1 day 2 hours ago", None).unwrap();
        assert_eq!((ago.days, ago.micros), (-1, -7_200_000_000));
        let iso = parse("P1Y2M3DT4H5M6.5S", None).unwrap();
        assert_eq!(iso, mixed_positive());
        assert_eq!(parse("PT0S", None).unwrap(), Interval::default());
        assert!(parse("P1X", None).is_err());
    }

    fn mixed_positive() -> Interval {
        Interval {
            months: 14,
            days: 3,
            micros: (4 * 3600 + 5 * 60 + 6) * 1_000_000 + 500_000,
        }
    }

    #[test]
    fn prints_and_compares_as_postgres() {
        let cases = [
            (
                "1 year 2 mons 3 days 04:05:06.5",
                "1 year 2 mons 3 days 04:05:06.5",
            ),
            ("0 seconds", "00:00:00"),
            ("-1 days 2 hours", "-1 days +02:00:00"),
            ("-2 hours", "-02:00:00"),
            ("1 mon -1 day", "1 mon -1 days"),
            ("36 hours", "36:00:00"),
            ("1 day 0.000001 seconds", "1 day 00:00:00.000001"),
        ];
        for (input, output) in cases {
            assert_eq!(format(parse(input, None).unwrap()), output, "{input}");
        }
        let month = parse("1 mon", None).unwrap();
        let days = parse("30 days", None).unwrap();
        assert_eq!(month.span(), days.span());
        assert_eq!(
            month.scale(1.5).unwrap(),
            Interval {
                months: 1,
                days: 15,
                micros: 0
            }
        );
        let difference = Interval::between(MICROS_PER_DAY + 5, 0).unwrap();
        assert_eq!((difference.days, difference.micros), (1, 5));
    }

    #[test]
    fn months_clamp_to_the_month_length() {
        // 2024-01-31 + 1 month = 2024-02-29 (leap year).
        let jan_31 = (days_from_civil(2024, 1, 31) - 10_957) * MICROS_PER_DAY;
        let one_month = Interval {
            months: 1,
            ..Interval::default()
        };
        let result = add_to_timestamp(jan_31, one_month).unwrap();
        assert_eq!(
            result,
            (days_from_civil(2024, 2, 29) - 10_957) * MICROS_PER_DAY
        );
    }
}

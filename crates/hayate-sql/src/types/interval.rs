//! Interval constants in date/time arithmetic: `timestamp ± interval '...'`,
//! `now() - interval '1 day'`, `date + interval '2 hours'`. An interval is (months, days,
//! microseconds), as in PostgreSQL: months are added on the calendar (the day clamped to the
//! month's length), then days, then microseconds. Intervals are not a column type yet:
//! an interval alone (`SELECT interval '1 day'`) is 0A000.

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

impl Interval {
    pub fn negate(self) -> Interval {
        Interval {
            months: -self.months,
            days: -self.days,
            micros: -self.micros,
        }
    }
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
    let mut interval = Interval::default();
    let words: Vec<&str> = text.split_whitespace().collect();
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
    Ok(interval)
}

/// `hh:mm[:ss[.f]]` as microseconds.
fn clock(word: &str) -> Option<i64> {
    let (negative, word) = match word.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, word),
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
    let micros = (hours * 3600 + minutes * 60) * MICROS_PER_SECOND
        + (seconds * MICROS_PER_SECOND as f64).round() as i64;
    Some(if negative { -micros } else { micros })
}

fn add(interval: &mut Interval, number: f64, unit: &str) -> Option<()> {
    let micros = |per: i64| (number * per as f64).round() as i64;
    match unit.to_ascii_lowercase().as_str() {
        "year" | "years" | "yr" | "yrs" | "y" => interval.months += (number * 12.0).round() as i64,
        "mon" | "mons" | "month" | "months" => interval.months += number.round() as i64,
        "week" | "weeks" | "w" => interval.days += (number * 7.0).round() as i64,
        "day" | "days" | "d" => interval.days += number.round() as i64,
        "hour" | "hours" | "hr" | "hrs" | "h" => {
            interval.micros += micros(3600 * MICROS_PER_SECOND)
        }
        "minute" | "minutes" | "min" | "mins" | "m" => {
            interval.micros += micros(60 * MICROS_PER_SECOND)
        }
        "second" | "seconds" | "sec" | "secs" | "s" => interval.micros += micros(MICROS_PER_SECOND),
        "millisecond" | "milliseconds" | "ms" => interval.micros += micros(1000),
        "microsecond" | "microseconds" | "us" => interval.micros += micros(1),
        _ => return None,
    }
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

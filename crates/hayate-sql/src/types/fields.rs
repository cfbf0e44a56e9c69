//! EXTRACT / date_part and date_trunc over dates, timestamps and intervals, as PostgreSQL
//! computes them: a timestamptz's fields are those of its wall-clock time in the session's
//! zone (`zone`), and date_trunc cuts that time and reads the result back in the zone.

use super::datetime::{
    civil_from_days, date_to_timestamp, days_from_civil, MICROS_PER_DAY, MICROS_PER_SECOND,
    TIMESTAMP_INFINITY, TIMESTAMP_NEG_INFINITY,
};
use super::interval::Interval;
use super::{numeric, zone, Decimal, Value};
use crate::error::{sqlstate, SqlError, SqlResult};

/// Days from 1970-01-01 to 2000-01-01 (dates and timestamps count from the latter).
const EPOCH_2000_DAYS: i64 = 10_957;

fn unsupported_unit(unit: &str, type_name: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_PARAMETER_VALUE,
        format!("unit \"{unit}\" not supported for type {type_name}"),
    )
}

fn unrecognized_unit(unit: &str, type_name: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_PARAMETER_VALUE,
        format!("unit \"{unit}\" not recognized for type {type_name}"),
    )
}

/// A unit's canonical name (PostgreSQL accepts plurals and abbreviations).
fn canonical(unit: &str) -> String {
    let lower = unit.trim().trim_matches('\'').to_ascii_lowercase();
    let name = match lower.as_str() {
        "microsecond" | "microseconds" | "us" | "usec" | "usecs" => "microseconds",
        "millisecond" | "milliseconds" | "ms" | "msec" | "msecs" => "milliseconds",
        "second" | "seconds" | "s" | "sec" | "secs" => "second",
        "minute" | "minutes" | "m" | "min" | "mins" => "minute",
        "hour" | "hours" | "h" | "hr" | "hrs" => "hour",
        "day" | "days" | "d" => "day",
        "week" | "weeks" | "w" => "week",
        "month" | "months" | "mon" | "mons" => "month",
        "quarter" | "qtr" => "quarter",
        "year" | "years" | "y" | "yr" | "yrs" => "year",
        "decade" | "decades" => "decade",
        "century" | "centuries" => "century",
        "millennium" | "millennia" | "millenniums" => "millennium",
        other => return other.to_string(),
    };
    name.to_string()
}

/// The calendar of a timestamp: (year, month, day, microseconds into the day, days since
/// 1970-01-01).
fn calendar(micros: i64) -> (i64, u32, u32, i64, i64) {
    let days = micros.div_euclid(MICROS_PER_DAY) + EPOCH_2000_DAYS;
    let time = micros.rem_euclid(MICROS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    (year, month, day, time, days)
}

/// The ISO 8601 (year, week) of a day count since 1970-01-01: weeks start on Monday and
/// week 1 holds the year's first Thursday.
fn iso_week(days: i64) -> (i64, i64) {
    let weekday = (days + 3).rem_euclid(7); // Monday = 0 (1970-01-01 was a Thursday)
    let thursday = days - weekday + 3;
    let (year, _, _) = civil_from_days(thursday);
    let first = days_from_civil(year, 1, 1);
    (year, (thursday - first) / 7 + 1)
}

fn number(value: i64) -> Decimal {
    numeric::from_i64(value)
}

/// `value` / 10^scale, keeping the scale (PostgreSQL prints seconds as 5.500000).
fn scaled(value: i128, scale: u32) -> SqlResult<Decimal> {
    Decimal::try_from_i128_with_scale(value, scale).map_err(|_| numeric::out_of_range())
}

/// EXTRACT(unit FROM value) as a numeric (date_part casts it to float8).
pub fn extract(unit: &str, value: &Value) -> SqlResult<Value> {
    let unit_name = canonical(unit);
    let unit = unit_name.as_str();
    let date = matches!(value, Value::Date(_));
    let micros = match value {
        Value::Null => return Ok(Value::Null),
        Value::Interval(interval) => return extract_interval(unit, *interval).map(Value::Numeric),
        Value::Date(days) => {
            if matches!(
                unit,
                "hour" | "minute" | "second" | "milliseconds" | "microseconds"
            ) {
                return Err(unsupported_unit(unit, "date"));
            }
            date_to_timestamp(*days)
        }
        Value::Timestamp(micros) => *micros,
        Value::TimestampTz(micros) => *micros,
        other => {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function extract(unknown, {other:?}) does not exist"),
            ))
        }
    };
    if micros == TIMESTAMP_INFINITY || micros == TIMESTAMP_NEG_INFINITY {
        return Ok(Value::Null);
    }
    // A timestamptz: the fields of the zone's wall clock, its offset, the epoch of the instant.
    let (local, offset) = match value {
        Value::TimestampTz(_) => {
            let zone = zone::current();
            (zone.to_local(micros), zone.offset_at(micros) as i64)
        }
        _ => (micros, 0),
    };
    let (year, month, day, time, days) = calendar(local);
    let within_minute = (time % (60 * MICROS_PER_SECOND)) as i128;
    let value = match unit {
        "microseconds" => number(within_minute as i64),
        "milliseconds" => scaled(within_minute, 3)?,
        "second" => scaled(within_minute, 6)?,
        "minute" => number(time / (60 * MICROS_PER_SECOND) % 60),
        "hour" => number(time / (3600 * MICROS_PER_SECOND)),
        "day" => number(day as i64),
        "month" => number(month as i64),
        "quarter" => number((month as i64 - 1) / 3 + 1),
        "year" => number(if year <= 0 { year - 1 } else { year }),
        "decade" => number(year.div_euclid(10)),
        "century" => number(if year > 0 {
            (year + 99) / 100
        } else {
            -((99 - (year - 1)) / 100)
        }),
        "millennium" => number(if year > 0 {
            (year + 999) / 1000
        } else {
            -((999 - (year - 1)) / 1000)
        }),
        "dow" => number((days + 4).rem_euclid(7)),
        "isodow" => number((days + 3).rem_euclid(7) + 1),
        "doy" => number(days - days_from_civil(year, 1, 1) + 1),
        "week" => number(iso_week(days).1),
        "isoyear" => number(iso_week(days).0),
        "epoch" => {
            let since_1970 = micros as i128 + EPOCH_2000_DAYS as i128 * MICROS_PER_DAY as i128;
            // A date's epoch is whole seconds; a timestamp's has six decimals.
            match date {
                true => scaled(since_1970 / MICROS_PER_SECOND as i128, 0)?,
                false => scaled(since_1970, 6)?,
            }
        }
        "julian" => number(days + 2_440_588),
        "timezone" => number(offset),
        "timezone_hour" => number(offset / 3600),
        "timezone_minute" => number(offset / 60 % 60),
        other => return Err(unrecognized_unit(other, "timestamp")),
    };
    Ok(Value::Numeric(value))
}

fn extract_interval(unit: &str, interval: Interval) -> SqlResult<Decimal> {
    let time = interval.micros;
    let within_minute = (time % (60 * MICROS_PER_SECOND)) as i128;
    Ok(match unit {
        "microseconds" => number(within_minute as i64),
        "milliseconds" => scaled(within_minute, 3)?,
        "second" => scaled(within_minute, 6)?,
        "minute" => number(time / (60 * MICROS_PER_SECOND) % 60),
        "hour" => number(time / (3600 * MICROS_PER_SECOND)),
        "day" => number(interval.days),
        "month" => number(interval.months % 12),
        "quarter" => number((interval.months % 12) / 3 + 1),
        "year" => number(interval.months / 12),
        "decade" => number(interval.months / 120),
        "century" => number(interval.months / 1200),
        "millennium" => number(interval.months / 12000),
        "epoch" => {
            // Years of 365.25 days, the rest of the months of 30 (as PostgreSQL).
            let day = MICROS_PER_DAY as i128;
            let micros = (interval.months / 12) as i128 * (day * 36_525 / 100)
                + (interval.months % 12) as i128 * 30 * day
                + interval.days as i128 * day
                + interval.micros as i128;
            scaled(micros, 6)?
        }
        other => return Err(unsupported_unit(other, "interval")),
    })
}

/// date_trunc(unit, value): a timestamp(tz) cut down to the unit's start (weeks start on
/// Monday), an interval's smaller fields dropped.
pub fn truncate(unit: &str, value: &Value) -> SqlResult<Value> {
    let unit_name = canonical(unit);
    let unit = unit_name.as_str();
    let (micros, tz) = match value {
        Value::Null => return Ok(Value::Null),
        Value::Interval(interval) => return truncate_interval(unit, *interval),
        Value::Date(days) => (date_to_timestamp(*days), true),
        Value::Timestamp(micros) => (*micros, false),
        Value::TimestampTz(micros) => (*micros, true),
        other => {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function date_trunc(unknown, {other:?}) does not exist"),
            ))
        }
    };
    let wrap = |micros: i64| {
        if tz {
            Value::TimestampTz(micros)
        } else {
            Value::Timestamp(micros)
        }
    };
    if micros == TIMESTAMP_INFINITY || micros == TIMESTAMP_NEG_INFINITY {
        return Ok(wrap(micros));
    }
    // A timestamptz is cut in the zone's wall-clock time and read back there (a date is
    // midnight in the zone already).
    let zone = tz.then(zone::current);
    let micros = match (&zone, value) {
        (Some(zone), Value::TimestampTz(_)) => zone.to_local(micros),
        _ => micros,
    };
    // Units of a day and more are read back in the zone (the offset of the new wall-clock
    // time); smaller ones keep the value's offset, as PostgreSQL's timestamptz_trunc: in the
    // hour repeated by the change back from summer time, the result is never after the value.
    let day_or_more = !matches!(
        unit,
        "microseconds" | "milliseconds" | "second" | "minute" | "hour"
    );
    let local = micros;
    let wrap = |truncated: i64| {
        wrap(match (&zone, value) {
            (Some(zone), _) if day_or_more => zone.to_utc(truncated),
            (Some(_), Value::TimestampTz(utc)) => utc - (local - truncated),
            // A date: its midnight in the zone, less what was cut.
            (Some(zone), _) => zone.to_utc(local) - (local - truncated),
            (None, _) => truncated,
        })
    };
    let (year, month, _, time, days) = calendar(micros);
    let day_start = micros - time;
    let at_date = |year: i64, month: u32| {
        (days_from_civil(year, month, 1) - EPOCH_2000_DAYS) * MICROS_PER_DAY
    };
    let cut = |size: i64| micros - time.rem_euclid(size);
    let truncated = match unit {
        "microseconds" => micros,
        "milliseconds" => cut(1000),
        "second" => cut(MICROS_PER_SECOND),
        "minute" => cut(60 * MICROS_PER_SECOND),
        "hour" => cut(3600 * MICROS_PER_SECOND),
        "day" => day_start,
        "week" => day_start - (days + 3).rem_euclid(7) * MICROS_PER_DAY,
        "month" => at_date(year, month),
        "quarter" => at_date(year, (month - 1) / 3 * 3 + 1),
        "year" => at_date(year, 1),
        "decade" => at_date(year.div_euclid(10) * 10, 1),
        "century" => at_date((year - 1).div_euclid(100) * 100 + 1, 1),
        "millennium" => at_date((year - 1).div_euclid(1000) * 1000 + 1, 1),
        other => return Err(unrecognized_unit(other, "timestamp")),
    };
    Ok(wrap(truncated))
}

fn truncate_interval(unit: &str, interval: Interval) -> SqlResult<Value> {
    let Interval {
        months,
        days,
        micros,
    } = interval;
    let cut = |size: i64| micros - micros % size;
    let (months, days, micros) = match unit {
        "microseconds" => (months, days, micros),
        "milliseconds" => (months, days, cut(1000)),
        "second" => (months, days, cut(MICROS_PER_SECOND)),
        "minute" => (months, days, cut(60 * MICROS_PER_SECOND)),
        "hour" => (months, days, cut(3600 * MICROS_PER_SECOND)),
        "day" => (months, days, 0),
        "month" => (months, 0, 0),
        "quarter" => (months - months % 3, 0, 0),
        "year" => (months - months % 12, 0, 0),
        "decade" => (months - months % 120, 0, 0),
        "century" => (months - months % 1200, 0, 0),
        "millennium" => (months - months % 12000, 0, 0),
        other => return Err(unsupported_unit(other, "interval")),
    };
    Ok(Value::Interval(Interval {
        months,
        days,
        micros,
    }))
}

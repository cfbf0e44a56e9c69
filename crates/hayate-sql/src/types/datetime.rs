//! date, timestamp and timestamptz as PostgreSQL stores them: days (i32) and microseconds
//! (i64) since 2000-01-01 (00:00:00 UTC for timestamptz), with the extreme values meaning
//! -infinity and infinity. A timestamptz's text is read and written in the session's zone
//! (`zone`): without a written offset or zone name its input is that zone's wall-clock time,
//! and it prints as the wall-clock time there with the offset (`+02`).
//!
//! Text forms are ISO 8601 as PostgreSQL's DateStyle ISO prints them: `2020-01-02`,
//! `2020-01-02 03:04:05.5`, `2020-01-02 03:04:05+00`, `0044-03-15 BC`.

use super::zone::{self, Zone};
use crate::error::{sqlstate, SqlError, SqlResult};

pub use super::units::{
    DATE_INFINITY, DATE_NEG_INFINITY, MICROS_PER_DAY, MICROS_PER_SECOND, TIMESTAMP_INFINITY,
    TIMESTAMP_NEG_INFINITY,
};
/// Days from 1970-01-01 (the Unix epoch) to 2000-01-01 (PostgreSQL's epoch).
const UNIX_EPOCH_DAYS: i64 = 10_957;
/// PostgreSQL's range: 4713 BC to 5874897 AD for dates, 294276 AD for timestamps. We keep
/// years 4713 BC ..= 294276 AD for both (the timestamp range), so every date converts.
const YEAR_MIN: i64 = -4712;
const YEAR_MAX: i64 = 294_276;

/// The days since 1970-01-01 of a proleptic Gregorian date (year 0 is 1 BC).
pub(super) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The (year, month, day) of a day count since 1970-01-01.
pub(super) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

pub(super) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

fn syntax_error(type_name: &str, text: &str) -> SqlError {
    let code = sqlstate::INVALID_DATETIME_FORMAT;
    SqlError::new(
        code,
        format!("invalid input syntax for type {type_name}: \"{text}\""),
    )
}

fn field_overflow(text: &str) -> SqlError {
    SqlError::new(
        sqlstate::DATETIME_FIELD_OVERFLOW,
        format!("date/time field value out of range: \"{text}\""),
    )
}

pub fn timestamp_out_of_range() -> SqlError {
    SqlError::new(
        sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
        "timestamp out of range",
    )
}

/// A zone written after a time.
enum Written {
    /// Seconds east of UTC.
    Offset(i64),
    /// A zone name or abbreviation (`America/New_York`, `PST`).
    Zone(Zone),
}

/// What a date/time text holds before it becomes one of the types.
enum Parsed {
    /// Microseconds since 2000-01-01 in the written time, and the zone if one was written.
    Finite {
        micros: i64,
        offset_seconds: Option<Written>,
    },
    Infinity,
    NegativeInfinity,
}

/// Reads `digits` as a number, if they are all ASCII digits.
fn number(digits: &str) -> Option<i64> {
    (!digits.is_empty() && digits.len() <= 9 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Parses `YYYY-MM-DD` (or `YYYYMMDD`), an optional time `HH:MM[:SS[.fraction]]` after a
/// space or `T`, an optional zone (`Z`, `UTC`, `+HH`, `+HH:MM`, `-HHMM`) and an optional
/// ` BC`; or `infinity`, `-infinity`, `epoch`, `now`-less special words.
fn parse(text: &str, type_name: &str) -> SqlResult<Parsed> {
    let lower = text.trim().to_ascii_lowercase();
    match lower.as_str() {
        "infinity" | "+infinity" => return Ok(Parsed::Infinity),
        "-infinity" => return Ok(Parsed::NegativeInfinity),
        "epoch" => {
            return Ok(Parsed::Finite {
                micros: -UNIX_EPOCH_DAYS * MICROS_PER_DAY,
                offset_seconds: Some(Written::Offset(0)),
            })
        }
        _ => {}
    }
    let syntax = || syntax_error(type_name, text);
    let (body, before_christ) = match lower.strip_suffix(" bc") {
        Some(body) => (body.trim_end(), true),
        None => (lower.as_str(), false),
    };
    let (date_part, rest) = match body.find([' ', 't']) {
        Some(at) => (&body[..at], body[at + 1..].trim_start()),
        None => (body, ""),
    };
    let (year, month, day) = if date_part.len() == 8 && !date_part.contains('-') {
        let year = number(&date_part[..4]).ok_or_else(syntax)?;
        let month = number(&date_part[4..6]).ok_or_else(syntax)?;
        let day = number(&date_part[6..]).ok_or_else(syntax)?;
        (year, month, day)
    } else {
        let mut fields = date_part.splitn(3, '-');
        let mut next = || fields.next().and_then(number).ok_or_else(syntax);
        (next()?, next()?, next()?)
    };
    let year = if before_christ { 1 - year } else { year };
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month as u32) as i64
        || (before_christ && year > 0)
    {
        return Err(field_overflow(text));
    }
    if !(YEAR_MIN..=YEAR_MAX).contains(&year) {
        return Err(SqlError::new(
            sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
            format!("{type_name} out of range: \"{text}\""),
        ));
    }
    let days = days_from_civil(year, month as u32, day as u32) - UNIX_EPOCH_DAYS;
    let (time_micros, offset_seconds) = parse_time(rest, text, type_name)?;
    Ok(Parsed::Finite {
        micros: days * MICROS_PER_DAY + time_micros,
        offset_seconds,
    })
}

/// Parses the time of day and zone after the date: (microseconds, zone offset).
fn parse_time(rest: &str, text: &str, type_name: &str) -> SqlResult<(i64, Option<Written>)> {
    let syntax = || syntax_error(type_name, text);
    if rest.is_empty() {
        return Ok((0, None));
    }
    // A date followed by a zone alone ('2026-11-25 +00', what BenchBase sends): midnight there.
    if !rest.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok((0, parse_zone(rest.trim()).ok_or_else(syntax)?));
    }
    let zone_at = rest.find(['+', '-', 'z', 'u', ' ']).unwrap_or(rest.len());
    let (time, zone) = (&rest[..zone_at], rest[zone_at..].trim());
    let mut fields = time.split(':');
    let hour = fields.next().and_then(number).ok_or_else(syntax)?;
    let minute = fields.next().and_then(number).ok_or_else(syntax)?;
    let (second, micros) = match fields.next() {
        None => (0, 0),
        Some(seconds) => {
            let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
            let whole = number(whole).ok_or_else(syntax)?;
            if !fraction.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            // Round to microseconds, half away from zero, as PostgreSQL does.
            let padded = format!("{fraction:0<7}");
            let seventh: i64 = padded[..7].parse().map_err(|_| syntax())?;
            (whole, (seventh + 5) / 10)
        }
    };
    if fields.next().is_some() {
        return Err(syntax());
    }
    let in_range = hour <= 23 && minute <= 59 && second <= 60
        || hour == 24 && minute == 0 && second == 0 && micros == 0;
    if !in_range {
        return Err(field_overflow(text));
    }
    let micros = ((hour * 60 + minute) * 60 + second) * MICROS_PER_SECOND + micros;
    Ok((micros, parse_zone(zone).ok_or_else(syntax)?))
}

/// A zone suffix (Some(None): no zone written): an offset, or a zone's name.
fn parse_zone(zone: &str) -> Option<Option<Written>> {
    match zone {
        "" => return Some(None),
        "z" | "utc" | "gmt" => return Some(Some(Written::Offset(0))),
        _ => {}
    }
    let sign = match zone.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return Zone::lookup(zone).map(|zone| Some(Written::Zone(zone))),
    };
    let digits = zone[1..].replace(':', "");
    if !digits.is_ascii() {
        return None;
    }
    // +h, +hh, +hhmm, +hh:mm and +hh:mm:ss (a zone's local mean time before ~1900 has
    // seconds, as PostgreSQL prints it: `+09:18:59`).
    let (hours, minutes, seconds) = match digits.len() {
        1 | 2 => (number(&digits)?, 0, 0),
        4 => (number(&digits[..2])?, number(&digits[2..])?, 0),
        6 => (
            number(&digits[..2])?,
            number(&digits[2..4])?,
            number(&digits[4..])?,
        ),
        _ => return None,
    };
    (hours <= 15 && minutes < 60 && seconds < 60).then_some(Some(Written::Offset(
        sign * (hours * 3600 + minutes * 60 + seconds),
    )))
}

pub fn parse_date(text: &str) -> SqlResult<i32> {
    match parse(text, "date")? {
        Parsed::Infinity => Ok(DATE_INFINITY),
        Parsed::NegativeInfinity => Ok(DATE_NEG_INFINITY),
        Parsed::Finite { micros, .. } => Ok(micros.div_euclid(MICROS_PER_DAY) as i32),
    }
}

pub fn parse_timestamp(text: &str) -> SqlResult<i64> {
    match parse(text, "timestamp")? {
        Parsed::Infinity => Ok(TIMESTAMP_INFINITY),
        Parsed::NegativeInfinity => Ok(TIMESTAMP_NEG_INFINITY),
        // A zone written after a timestamp without time zone is ignored, as in PostgreSQL.
        Parsed::Finite { micros, .. } => Ok(micros),
    }
}

/// A timestamptz's text: a written offset or zone applies, else the session zone's.
pub fn parse_timestamptz(text: &str) -> SqlResult<i64> {
    parse_timestamptz_in(text, &zone::current())
}

/// `parse_timestamptz` with `zone` for a text without one.
pub fn parse_timestamptz_in(text: &str, zone: &Zone) -> SqlResult<i64> {
    match parse(text, "timestamp with time zone")? {
        Parsed::Infinity => Ok(TIMESTAMP_INFINITY),
        Parsed::NegativeInfinity => Ok(TIMESTAMP_NEG_INFINITY),
        Parsed::Finite {
            micros,
            offset_seconds,
        } => Ok(match offset_seconds {
            Some(Written::Offset(seconds)) => micros - seconds * MICROS_PER_SECOND,
            Some(Written::Zone(written)) => written.to_utc(micros),
            None => zone.to_utc(micros),
        }),
    }
}

/// A timestamptz as text in `zone`: its wall-clock time there and the offset (`+02`).
pub fn format_timestamptz(utc: i64, zone: &Zone) -> String {
    let offset = zone::offset_text(zone.offset_at(utc));
    format_timestamp(zone.to_local(utc), &offset)
}

fn format_ymd(days_since_2000: i64) -> (String, bool) {
    let (year, month, day) = civil_from_days(days_since_2000 + UNIX_EPOCH_DAYS);
    let before_christ = year <= 0;
    let year = if before_christ { 1 - year } else { year };
    (format!("{year:04}-{month:02}-{day:02}"), before_christ)
}

pub fn format_date(days: i32) -> String {
    match days {
        DATE_INFINITY => "infinity".into(),
        DATE_NEG_INFINITY => "-infinity".into(),
        days => {
            let (text, before_christ) = format_ymd(days as i64);
            if before_christ {
                format!("{text} BC")
            } else {
                text
            }
        }
    }
}

/// `2020-01-02 03:04:05[.ffffff]` with trailing zeros of the fraction removed, then `zone`
/// (`+00` for timestamptz) and ` BC` before year 1.
pub fn format_timestamp(micros: i64, zone: &str) -> String {
    match micros {
        TIMESTAMP_INFINITY => return "infinity".into(),
        TIMESTAMP_NEG_INFINITY => return "-infinity".into(),
        _ => {}
    }
    let days = micros.div_euclid(MICROS_PER_DAY);
    let time = micros.rem_euclid(MICROS_PER_DAY);
    let (date, before_christ) = format_ymd(days);
    let seconds = time / MICROS_PER_SECOND;
    let fraction = time % MICROS_PER_SECOND;
    let mut text = format!(
        "{date} {:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction != 0 {
        let digits = format!("{fraction:06}");
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    text.push_str(zone);
    if before_christ {
        text.push_str(" BC");
    }
    text
}

pub fn date_to_timestamp(days: i32) -> i64 {
    match days {
        DATE_INFINITY => TIMESTAMP_INFINITY,
        DATE_NEG_INFINITY => TIMESTAMP_NEG_INFINITY,
        days => days as i64 * MICROS_PER_DAY,
    }
}

pub fn timestamp_to_date(micros: i64) -> i32 {
    match micros {
        TIMESTAMP_INFINITY => DATE_INFINITY,
        TIMESTAMP_NEG_INFINITY => DATE_NEG_INFINITY,
        micros => micros.div_euclid(MICROS_PER_DAY) as i32,
    }
}

/// Microseconds since 2000-01-01 UTC of the system clock.
pub fn now_micros() -> i64 {
    let since_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    since_unix - UNIX_EPOCH_DAYS * MICROS_PER_DAY
}

/// date + integer days (22008 past the range).
pub fn add_days(days: i32, delta: i64) -> SqlResult<i32> {
    if days == DATE_INFINITY || days == DATE_NEG_INFINITY {
        return Ok(days);
    }
    let result = days as i64 + delta;
    let limit = days_from_civil(YEAR_MAX, 12, 31) - UNIX_EPOCH_DAYS;
    let low = days_from_civil(YEAR_MIN, 1, 1) - UNIX_EPOCH_DAYS;
    if result < low || result > limit {
        return Err(SqlError::new(
            sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
            "date out of range",
        ));
    }
    Ok(result as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_postgres() {
        assert_eq!(parse_date("2000-01-01"), Ok(0));
        assert_eq!(format_date(parse_date("2020-02-29").unwrap()), "2020-02-29");
        assert_eq!(format_date(parse_date("20200102").unwrap()), "2020-01-02");
        assert_eq!(
            format_date(parse_date("0044-03-15 BC").unwrap()),
            "0044-03-15 BC"
        );
        assert_eq!(format_date(parse_date("infinity").unwrap()), "infinity");
        assert_eq!(
            format_date(parse_date("2020-01-01 10:00").unwrap()),
            "2020-01-01"
        );
        assert_eq!(
            parse_date("abc").unwrap_err().code,
            sqlstate::INVALID_DATETIME_FORMAT
        );
        assert_eq!(
            parse_date("2020-13-01").unwrap_err().code,
            sqlstate::DATETIME_FIELD_OVERFLOW
        );
        assert_eq!(
            parse_date("2021-02-29").unwrap_err().code,
            sqlstate::DATETIME_FIELD_OVERFLOW
        );
        // A date with a zone and no time is midnight there.
        assert_eq!(
            parse_timestamptz("2026-11-25 +00"),
            parse_timestamptz("2026-11-25 00:00:00+00")
        );
        assert_eq!(
            parse_timestamptz("2026-11-25 -02"),
            parse_timestamptz("2026-11-25 02:00:00+00")
        );
        assert_eq!(
            parse_timestamp("2026-11-25 +00"),
            parse_timestamp("2026-11-25 00:00")
        );
        assert!(parse_timestamp("2026-11-25 x").is_err());
    }

    #[test]
    fn timestamps_print_as_postgres() {
        let round_trip = |text: &str| format_timestamp(parse_timestamp(text).unwrap(), "");
        assert_eq!(
            round_trip("2020-01-01 10:00:00.123456789"),
            "2020-01-01 10:00:00.123457"
        );
        assert_eq!(round_trip("2020-01-01T10:00:00+05"), "2020-01-01 10:00:00");
        assert_eq!(round_trip("2020-01-01 1:2:3.5"), "2020-01-01 01:02:03.5");
        assert_eq!(
            round_trip("1999-12-31 23:59:59.9999995"),
            "2000-01-01 00:00:00"
        );
        assert_eq!(round_trip("epoch"), "1970-01-01 00:00:00");
        assert_eq!(
            round_trip("0001-01-01 00:00:00 BC"),
            "0001-01-01 00:00:00 BC"
        );
        // Offsets with seconds, as PostgreSQL prints a zone's local mean time.
        assert_eq!(
            parse_timestamptz("1890-01-01 00:00:00+09:18:59"),
            parse_timestamptz("1889-12-31 14:41:01+00")
        );
        assert_eq!(
            parse_timestamptz("1880-06-01 12:00:00-00:53:28"),
            parse_timestamptz("1880-06-01 12:53:28+00")
        );
        assert!(parse_timestamptz("2020-01-01 00:00:00+01:00:60").is_err());
        let zoned = parse_timestamptz("2020-01-01 10:00:00+05").unwrap();
        assert_eq!(format_timestamp(zoned, "+00"), "2020-01-01 05:00:00+00");
        assert_eq!(
            parse_timestamp("2020-01-01 25:00").unwrap_err().code,
            sqlstate::DATETIME_FIELD_OVERFLOW
        );
        assert_eq!(
            parse_timestamp("x").unwrap_err().code,
            sqlstate::INVALID_DATETIME_FORMAT
        );
    }

    #[test]
    fn civil_conversion_round_trips() {
        for days in (-2_500_000..2_500_000).step_by(997) {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
        }
    }
}

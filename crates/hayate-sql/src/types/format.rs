//! PostgreSQL's data type formatting functions: to_char of dates, timestamps, intervals and
//! numbers, and their inverses to_date, to_timestamp and to_number (PostgreSQL 15's
//! formatting.c is the reference; its templates and output are matched field by field).
//!
//! A template is read left to right: at each position the longest keyword (`YYYY`, `Month`,
//! `HH24`, `9`, `G` ...) is taken, with the prefix `FM` (no padding) and the suffixes
//! `TH`/`th` (ordinal); text in double quotes and a character after a backslash are copied,
//! as is any other character. Names follow the keyword's case (`MONTH`, `Month`, `month`).

use super::datetime::{civil_from_days, days_from_civil, timestamp_out_of_range};
use super::interval::Interval;
use super::units::{MICROS_PER_DAY, MICROS_PER_SECOND, TIMESTAMP_INFINITY, TIMESTAMP_NEG_INFINITY};
use super::{numeric, zone, Decimal, Value};
use crate::error::{sqlstate, SqlError, SqlResult};

/// Days from 1970-01-01 to 2000-01-01 (dates and timestamps count from the latter).
const EPOCH_2000_DAYS: i64 = 10_957;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const ROMAN_MONTHS: [&str; 12] = [
    "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII",
];

fn invalid_format(message: impl Into<String>) -> SqlError {
    SqlError::new(sqlstate::INVALID_DATETIME_FORMAT, message)
}

fn interval_format() -> SqlError {
    invalid_format("invalid format specification for an interval value")
}

/// Date and time keywords, longest first where one is a prefix of another.
const DATE_KEYWORDS: &[&str] = &[
    "A.D.", "A.M.", "AD", "AM", "B.C.", "BC", "CC", "DAY", "DDD", "DD", "DY", "D", "FF1", "FF2",
    "FF3", "FF4", "FF5", "FF6", "FX", "HH24", "HH12", "HH", "IDDD", "ID", "IW", "IYYY", "IYY",
    "IY", "I", "J", "MI", "MM", "MONTH", "MON", "MS", "OF", "P.M.", "PM", "Q", "RM", "SSSSS",
    "SSSS", "SS", "TZH", "TZM", "TZ", "US", "WW", "W", "Y,YYY", "YYYY", "YYY", "YY", "Y",
];

/// How a name keyword was written: its output follows.
#[derive(Clone, Copy, PartialEq)]
enum Case {
    Upper,
    Capital,
    Lower,
}

fn case_of(written: &str) -> Case {
    let mut letters = written.chars().filter(char::is_ascii_alphabetic);
    match (letters.next(), letters.any(|c| c.is_ascii_lowercase())) {
        (Some(first), _) if first.is_ascii_lowercase() => Case::Lower,
        (_, true) => Case::Capital,
        _ => Case::Upper,
    }
}

/// AM/PM or AD/BC: the second of `pair` when `second`, dotted (`A.M.`) when the keyword
/// is, in lower case when the keyword is (no capitalized form).
fn marker(pair: [&str; 2], second: bool, keyword: &str, case: Case) -> String {
    let plain = pair[usize::from(second)];
    let text = match keyword.contains('.') {
        true => plain.chars().flat_map(|c| [c, '.']).collect(),
        false => plain.to_string(),
    };
    match case {
        Case::Lower => text.to_lowercase(),
        _ => text,
    }
}

fn cased(name: &str, case: Case) -> String {
    match case {
        Case::Upper => name.to_uppercase(),
        Case::Capital => name.to_string(),
        Case::Lower => name.to_lowercase(),
    }
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    /// A keyword (upper case) as written, with fill mode and an ordinal suffix (`Some(true)`:
    /// upper case `TH`).
    Field {
        keyword: &'static str,
        written: String,
        fill: bool,
        ordinal: Option<bool>,
    },
    Literal(String),
}

/// Splits a template into keywords of `keywords` and literal text.
fn parse_template(template: &str, keywords: &[&'static str]) -> Vec<Piece> {
    let chars: Vec<char> = template.chars().collect();
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut fill = false;
    let literal = |pieces: &mut Vec<Piece>, c: char| match pieces.last_mut() {
        Some(Piece::Literal(text)) => text.push(c),
        _ => pieces.push(Piece::Literal(c.to_string())),
    };
    // Keywords match ASCII letters case-insensitively (other characters are never part of
    // one, and keep their length).
    let upper: Vec<char> = chars.iter().map(char::to_ascii_uppercase).collect();
    let starts = |at: usize, word: &str| {
        word.chars().count() <= upper.len() - at
            && word.chars().zip(&upper[at..]).all(|(a, b)| a == *b)
    };
    while at < chars.len() {
        if starts(at, "FM") {
            fill = true;
            at += 2;
            continue;
        }
        if let Some(keyword) = keywords.iter().find(|k| starts(at, k)) {
            let length = keyword.chars().count();
            let written: String = chars[at..at + length].iter().collect();
            at += length;
            let suffix: String = chars[at..].iter().take(2).collect();
            let ordinal = match suffix.as_str() {
                "TH" => Some(true),
                "th" => Some(false),
                _ => None,
            };
            if ordinal.is_some() {
                at += 2;
            }
            pieces.push(Piece::Field {
                keyword,
                written,
                fill,
                ordinal,
            });
            fill = false;
            continue;
        }
        fill = false;
        match chars[at] {
            '"' => {
                at += 1;
                while at < chars.len() && chars[at] != '"' {
                    if chars[at] == '\\' && at + 1 < chars.len() {
                        at += 1;
                    }
                    literal(&mut pieces, chars[at]);
                    at += 1;
                }
                at += 1;
            }
            '\\' if at + 1 < chars.len() && chars[at + 1] == '"' => {
                literal(&mut pieces, '"');
                at += 2;
            }
            c => {
                literal(&mut pieces, c);
                at += 1;
            }
        }
    }
    pieces
}

/// The English ordinal suffix of a number.
fn ordinal_suffix(number: i64, upper: bool) -> &'static str {
    let n = number.unsigned_abs();
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    match (upper, suffix) {
        (false, suffix) => suffix,
        (true, "st") => "ST",
        (true, "nd") => "ND",
        (true, "rd") => "RD",
        (true, _) => "TH",
    }
}

/// The broken-down time a template is filled from.
struct Moment {
    /// Astronomical year (0 is 1 BC); for an interval, whole years.
    year: i64,
    /// 1 to 12; for an interval, the months past whole years (negative for a negative one).
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
    /// Days since 1970-01-01 (None for an interval: no weekday or week).
    days: Option<i64>,
    /// Offset east of UTC in seconds and the zone's abbreviation (a timestamptz only).
    zone: Option<(i32, String)>,
    interval: bool,
}

impl Moment {
    fn of_timestamp(micros: i64, zone: Option<(i32, String)>) -> Moment {
        let days = micros.div_euclid(MICROS_PER_DAY) + EPOCH_2000_DAYS;
        let time = micros.rem_euclid(MICROS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let seconds = time / MICROS_PER_SECOND;
        Moment {
            year,
            month: i64::from(month),
            day: i64::from(day),
            hour: seconds / 3600,
            minute: seconds / 60 % 60,
            second: seconds % 60,
            micros: time % MICROS_PER_SECOND,
            days: Some(days),
            zone,
            interval: false,
        }
    }

    fn of_interval(interval: Interval) -> Moment {
        let seconds = interval.micros / MICROS_PER_SECOND;
        Moment {
            year: interval.months / 12,
            month: interval.months % 12,
            day: interval.days,
            hour: seconds / 3600,
            minute: seconds / 60 % 60,
            second: seconds % 60,
            micros: interval.micros % MICROS_PER_SECOND,
            days: None,
            zone: None,
            interval: true,
        }
    }

    /// The year as printed: BC years count up from 1.
    fn shown_year(&self) -> i64 {
        match self.year <= 0 && !self.interval {
            true => 1 - self.year,
            false => self.year,
        }
    }

    fn day_of_year(&self) -> i64 {
        match self.days {
            Some(days) => days - days_from_civil(self.year, 1, 1) + 1,
            None => 0,
        }
    }

    /// ISO 8601 (year, week, day of year): weeks start on Monday, week 1 holds January 4.
    fn iso(&self) -> (i64, i64, i64) {
        let Some(days) = self.days else {
            return (self.year, 0, 0);
        };
        let weekday = (days + 3).rem_euclid(7); // Monday = 0
        let thursday = days - weekday + 3;
        let (year, _, _) = civil_from_days(thursday);
        let week_one_monday = {
            let jan4 = days_from_civil(year, 1, 4);
            jan4 - (jan4 + 3).rem_euclid(7)
        };
        let week = (days - week_one_monday) / 7 + 1;
        (year, week, days - week_one_monday + 1)
    }

    /// Day of the week, Sunday = 0.
    fn weekday(&self) -> i64 {
        self.days.map_or(0, |days| (days + 4).rem_euclid(7))
    }
}

/// A number padded with zeros to `width` characters (a minus sign counting as one) unless
/// in fill mode.
fn padded(value: i64, width: usize, fill: bool) -> String {
    match fill {
        true => value.to_string(),
        false => format!("{value:0width$}"),
    }
}

/// A name padded to nine characters unless in fill mode.
fn padded_name(name: String, fill: bool) -> String {
    match fill {
        true => name,
        false => format!("{name:<9}"),
    }
}

fn format_moment(moment: &Moment, template: &str) -> SqlResult<String> {
    let mut out = String::new();
    for piece in parse_template(template, DATE_KEYWORDS) {
        let (keyword, written, fill, ordinal) = match piece {
            Piece::Literal(text) => {
                out.push_str(&text);
                continue;
            }
            Piece::Field {
                keyword,
                written,
                fill,
                ordinal,
            } => (keyword, written, fill, ordinal),
        };
        let case = case_of(&written);
        let year = moment.shown_year();
        let (iso_year, iso_week, iso_day_of_year) = moment.iso();
        let interval_days = (moment.year * 12 + moment.month) * 30 + moment.day;
        let hour12 = match moment.hour % 12 {
            0 => 12,
            hour => hour,
        };
        let number: Option<(i64, usize)> = match keyword {
            // A negative interval's years widen by the sign, as in PostgreSQL.
            "YYYY" => Some((year, 4 + usize::from(year < 0))),
            "YYY" => Some((year % 1000, 3 + usize::from(year < 0))),
            "YY" => Some((year % 100, 2 + usize::from(year < 0))),
            "Y" => Some((year % 10, 1)),
            "IYYY" => Some((iso_year, 4)),
            "IYY" => Some((iso_year % 1000, 3)),
            "IY" => Some((iso_year % 100, 2)),
            "I" => Some((iso_year % 10, 1)),
            // As PostgreSQL: a negative interval field widens by its sign here.
            "MM" => Some((moment.month, 2 + usize::from(moment.month < 0))),
            "DD" => Some((moment.day, 2)),
            "D" | "ID" if moment.interval => return Err(interval_format()),
            // An interval's days (months of 30), and weeks of them.
            "DDD" if moment.interval => Some((interval_days, 3)),
            "WW" if moment.interval => Some(((interval_days - 1) / 7 + 1, 2)),
            "Q" if moment.interval => None,
            "DDD" => Some((moment.day_of_year(), 3)),
            "IDDD" => Some((iso_day_of_year, 3)),
            "D" => Some((moment.weekday() + 1, 1)),
            "ID" => Some(((moment.weekday() + 6) % 7 + 1, 1)),
            "WW" => Some(((moment.day_of_year() - 1) / 7 + 1, 2)),
            "IW" => Some((iso_week, 2)),
            "W" => Some(((moment.day - 1) / 7 + 1, 1)),
            "Q" => Some(((moment.month + 2) / 3, 1)),
            "CC" => {
                let century = match moment.interval {
                    true => moment.year / 100,
                    false if moment.year > 0 => (moment.year + 99) / 100,
                    // BC: 1 BC is in century -1, 101 BC in -2.
                    false => -((1 - moment.year + 99) / 100),
                };
                Some((century, 2 + usize::from(century < 0)))
            }
            "J" => Some((moment.days.map_or(0, |days| days + 2_440_588), 1)),
            "HH" | "HH12" => Some((hour12, 2 + usize::from(moment.hour < 0))),
            "HH24" => Some((moment.hour, 2 + usize::from(moment.hour < 0))),
            "MI" => Some((moment.minute, 2 + usize::from(moment.minute < 0))),
            "SS" => Some((moment.second, 2 + usize::from(moment.second < 0))),
            "MS" => Some((moment.micros / 1000, 3)),
            "US" => Some((moment.micros, 6)),
            "FF1" => Some((moment.micros / 100_000, 1)),
            "FF2" => Some((moment.micros / 10_000, 2)),
            "FF3" => Some((moment.micros / 1000, 3)),
            "FF4" => Some((moment.micros / 100, 4)),
            "FF5" => Some((moment.micros / 10, 5)),
            "FF6" => Some((moment.micros, 6)),
            "SSSS" | "SSSSS" => Some((moment.hour * 3600 + moment.minute * 60 + moment.second, 1)),
            _ => None,
        };
        if let Some((value, width)) = number {
            out.push_str(&padded(value, width, fill));
            if let Some(upper) = ordinal {
                out.push_str(ordinal_suffix(value, upper));
            }
            continue;
        }
        // Month and day names of an interval mean nothing (PostgreSQL: 22007).
        if moment.interval && matches!(keyword, "MONTH" | "MON" | "DAY" | "DY") {
            return Err(interval_format());
        }
        // 1 to 12 (an interval's 0 months are December's numeral, as in PostgreSQL).
        let month_index = (moment.month.unsigned_abs() as usize + 11) % 12;
        let text = match keyword {
            "Y,YYY" => format!("{},{:03}", year / 1000, year % 1000),
            "MONTH" => padded_name(cased(MONTHS[month_index], case), fill),
            "MON" => cased(&MONTHS[month_index][..3], case),
            "DAY" => padded_name(cased(DAYS[moment.weekday() as usize], case), fill),
            "DY" => cased(&DAYS[moment.weekday() as usize][..3], case),
            "RM" if moment.interval && moment.month == 0 && moment.year == 0 => String::new(),
            "RM" => {
                let roman = ROMAN_MONTHS[month_index];
                let roman = match case {
                    Case::Lower => roman.to_lowercase(),
                    _ => roman.to_string(),
                };
                match fill {
                    true => roman,
                    false => format!("{roman:<4}"),
                }
            }
            "AM" | "PM" | "A.M." | "P.M." => marker(["AM", "PM"], moment.hour >= 12, keyword, case),
            "AD" | "BC" | "A.D." | "B.C." => marker(["AD", "BC"], moment.year <= 0, keyword, case),
            "TZ" => match &moment.zone {
                Some((_, abbreviation)) => cased(abbreviation, case),
                None => String::new(),
            },
            "OF" | "TZH" | "TZM" => {
                let offset = moment.zone.as_ref().map_or(0, |(offset, _)| *offset);
                let sign = if offset < 0 { '-' } else { '+' };
                let (hours, minutes) = (offset.abs() / 3600, offset.abs() / 60 % 60);
                match keyword {
                    "TZH" => format!("{sign}{hours:02}"),
                    "TZM" => format!("{minutes:02}"),
                    _ if minutes == 0 => format!("{sign}{hours:02}"),
                    _ => format!("{sign}{hours:02}:{minutes:02}"),
                }
            }
            // FX only matters to parsing; Q of an interval is empty.
            _ => String::new(),
        };
        out.push_str(&text);
    }
    Ok(out)
}

/// to_char(value, template): a date, timestamp, timestamptz (its wall-clock time in the
/// session's zone), interval or number formatted by the template.
pub fn to_char(value: &Value, template: &str) -> SqlResult<Value> {
    let text = match value {
        Value::Null => return Ok(Value::Null),
        Value::Timestamp(micros) | Value::TimestampTz(micros)
            if *micros == TIMESTAMP_INFINITY || *micros == TIMESTAMP_NEG_INFINITY =>
        {
            return Ok(Value::Null);
        }
        Value::Date(days) if *days == i32::MAX || *days == i32::MIN => return Ok(Value::Null),
        Value::Timestamp(micros) => format_moment(&Moment::of_timestamp(*micros, None), template)?,
        Value::TimestampTz(utc) => {
            let zone = zone::current();
            let moment = Moment::of_timestamp(
                zone.to_local(*utc),
                Some((zone.offset_at(*utc), zone.abbreviation_at(*utc))),
            );
            format_moment(&moment, template)?
        }
        Value::Date(days) => format_moment(
            &Moment::of_timestamp(i64::from(*days) * MICROS_PER_DAY, None),
            template,
        )?,
        Value::Interval(interval) => format_moment(&Moment::of_interval(*interval), template)?,
        Value::Int(value) => format_number(&numeric::from_i64(*value), template)?,
        Value::Numeric(value) => format_number(value, template)?,
        Value::Float(value) => format_float(*value, template, 15)?,
        Value::Float4(value) => format_float(f64::from(*value), template, 6)?,
        other => {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!(
                    "function to_char({}, unknown) does not exist",
                    other.type_name()
                ),
            ))
        }
    };
    Ok(Value::Text(text))
}

/// to_char of a float: as a numeric, with at most `significant` digits in all (C's DBL_DIG,
/// FLT_DIG: PostgreSQL shows no more fraction digits than that leaves) and the sign C's
/// printf gives it (-0.004 at two places is -.00).
fn format_float(value: f64, template: &str, significant: usize) -> SqlResult<String> {
    let read = parse_number_template(template);
    if read.scientific && value.is_finite() {
        return Ok(scientific(value, &read));
    }
    if value.is_nan() {
        // NaN right-aligned where the number would be.
        let width = format_number(&Decimal::ZERO, template)?.chars().count();
        return Ok(format!("{:>width$}", "NaN"));
    }
    // Infinities and values past numeric's range fill every digit position with '#'.
    if value.is_infinite() || value.abs() >= 1e27 {
        let bound = match value < 0.0 {
            true => Decimal::MIN,
            false => Decimal::MAX,
        };
        return format_number(&bound, template);
    }
    if read.shift > 0 {
        // V shifts before rounding, as PostgreSQL multiplies first.
        return format_number_as(
            &numeric::from_f64(value)?,
            template,
            usize::MAX,
            value.is_sign_negative(),
        );
    }
    // Rounded as C's printf rounds a double (ties to even on the exact binary value).
    let whole_digits = format!("{:.0}", value.abs()).len();
    let digits = read
        .fraction_digits
        .min(significant.saturating_sub(whole_digits));
    let decimal = numeric::parse(&format!("{value:.digits$}"))?;
    format_number_as(&decimal, template, digits, value.is_sign_negative())
}

/// EEEE: the value as `d.dde+NN` with the template's fraction digits.
fn scientific(float: f64, read: &NumberTemplate) -> String {
    let digits = read.fraction_digits;
    let text = format!("{float:.digits$e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    let body = format!("{mantissa}e{sign}{:02}", exponent.abs());
    match (read.fill, float < 0.0) {
        (true, _) | (false, true) => body,
        (false, false) => format!(" {body}"),
    }
}

/// Number keywords.
const NUMBER_KEYWORDS: &[&str] = &[
    "9", "0", ".", ",", "D", "G", "PR", "SG", "S", "MI", "PL", "L", "V", "EEEE", "RN",
];

/// A number template, read.
#[derive(Default)]
struct NumberTemplate {
    pieces: Vec<Piece>,
    /// Digit positions before and after the decimal point.
    integer_digits: usize,
    fraction_digits: usize,
    /// V: digits the value is multiplied by 10 to the power of.
    shift: usize,
    fill: bool,
    /// A sign keyword (S after the digits, MI, SG, PR) places the sign; else one leading
    /// position does (PL prints a plus besides).
    signed: bool,
    /// S before the digits: the sign (`+` or `-`) right before the first digit shown.
    anchored: bool,
    roman: bool,
    scientific: bool,
}

fn parse_number_template(template: &str) -> NumberTemplate {
    let mut read = NumberTemplate {
        pieces: parse_template(template, NUMBER_KEYWORDS),
        ..NumberTemplate::default()
    };
    let mut after_point = false;
    for piece in &read.pieces {
        let Piece::Field { keyword, fill, .. } = piece else {
            continue;
        };
        read.fill |= *fill;
        match *keyword {
            // Digits after V are integer positions, the value shifted left by as many.
            "9" | "0" if read.shift > 0 => {
                read.shift += 1;
                read.integer_digits += 1;
            }
            "9" | "0" if after_point => read.fraction_digits += 1,
            "9" | "0" => read.integer_digits += 1,
            "." | "D" => after_point = true,
            "S" if read.integer_digits == 0 && !after_point => read.anchored = true,
            "S" | "MI" | "SG" | "PR" => read.signed = true,
            "V" => read.shift = 1,
            "RN" => read.roman = true,
            "EEEE" => read.scientific = true,
            _ => {}
        }
    }
    if read.shift > 0 {
        read.shift -= 1;
    }
    read
}

fn roman(mut value: i64) -> String {
    const TABLE: [(i64, &str); 13] = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    let mut out = String::new();
    for (step, letters) in TABLE {
        while value >= step {
            out.push_str(letters);
            value -= step;
        }
    }
    out
}

/// to_char of a number: PostgreSQL's NUM formatting (9 0 . , D G S MI PL SG PR V RN EEEE FM
/// TH; L is the C locale's empty currency symbol).
fn format_number(value: &Decimal, template: &str) -> SqlResult<String> {
    format_number_as(value, template, usize::MAX, false)
}

/// `format_number` showing at most `fraction_cap` fraction digits (the template's positions
/// past it print nothing), negative when `negative` even if the rounded value is zero.
fn format_number_as(
    value: &Decimal,
    template: &str,
    fraction_cap: usize,
    negative: bool,
) -> SqlResult<String> {
    let mut read = parse_number_template(template);
    read.fraction_digits = read.fraction_digits.min(fraction_cap);
    if read.roman {
        let rounded = numeric::to_i64(&numeric::round(value, 0)).unwrap_or(0);
        let text = match (1..=3999).contains(&rounded) {
            true => roman(rounded),
            false => "###############".to_string(),
        };
        let lower = read.pieces.iter().any(
            |piece| matches!(piece, Piece::Field { keyword: "RN", written, .. } if written == "rn"),
        );
        let text = if lower { text.to_lowercase() } else { text };
        return Ok(match read.fill {
            true => text,
            false => format!("{text:>15}"),
        });
    }
    if read.scientific {
        return Ok(scientific(numeric::to_f64(value), &read));
    }
    let mut magnitude = value.abs();
    let mut shifted_past = false;
    for _ in 0..read.shift {
        // Past numeric's range the digits are all '#'.
        match numeric::multiply(&magnitude, &numeric::from_i64(10)) {
            Ok(shifted) => magnitude = shifted,
            Err(_) => shifted_past = true,
        }
    }
    let rounded = numeric::round(&magnitude, read.fraction_digits as i32);
    // The sign of what is shown: -0.004 at two places is 0.00.
    let negative = negative || value.is_sign_negative() && !rounded.is_zero();
    let text = format!("{rounded:.prec$}", prec = read.fraction_digits);
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let mut whole = whole.trim_start_matches('0');
    if whole.is_empty() && read.fraction_digits == 0 && read.integer_digits > 0 {
        whole = "0"; // a zero shows its last digit
    }
    let overflow = shifted_past || whole.len() > read.integer_digits;
    // Digits of the integer part, right-aligned to the template's positions.
    let whole_digits: Vec<char> = whole.chars().collect();
    let fraction_digits: Vec<char> = fraction.chars().collect();
    // The first integer position that shows a digit: the first digit of the number, or the
    // first 0 of the template if earlier.
    let mut zero_from = read.integer_digits.saturating_sub(whole_digits.len());
    {
        let mut position = 0;
        for piece in &read.pieces {
            if let Piece::Field { keyword, .. } = piece {
                match *keyword {
                    "0" if position < read.integer_digits => {
                        zero_from = zero_from.min(position);
                        position += 1;
                    }
                    "9" if position < read.integer_digits => position += 1,
                    _ => {}
                }
            }
        }
    }
    // The last fraction position shown in fill mode: trailing 9s that print 0 go.
    let fraction_kept = {
        let mut kept = 0;
        let mut position = 0;
        let mut after_point = false;
        for piece in &read.pieces {
            if let Piece::Field { keyword, .. } = piece {
                match *keyword {
                    "." | "D" => after_point = true,
                    "0" if after_point && read.shift == 0 => {
                        position += 1;
                        kept = position;
                    }
                    "9" if after_point && read.shift == 0 => {
                        position += 1;
                        if fraction_digits.get(position - 1).is_some_and(|d| *d != '0') {
                            kept = position;
                        }
                    }
                    _ => {}
                }
            }
        }
        kept
    };
    let mut out = String::new();
    let mut integer_position = 0;
    let mut fraction_position = 0;
    let mut after_point = false;
    let mut sign_written = read.signed;
    let sign_char = match (negative, read.anchored) {
        (true, _) => '-',
        (false, true) => '+',
        (false, false) => ' ',
    };
    let mut started = false;
    // Without a sign keyword the sign takes the position before the first digit shown.
    let place_sign = |out: &mut String, started: &mut bool, sign_written: &mut bool| {
        if !*sign_written {
            if !(read.fill && sign_char == ' ') {
                out.push(sign_char);
            }
            *sign_written = true;
        }
        *started = true;
    };
    for piece in &read.pieces {
        let keyword = match piece {
            Piece::Literal(text) => {
                out.push_str(text);
                continue;
            }
            Piece::Field { keyword, .. } => *keyword,
        };
        match keyword {
            "9" | "0" if !after_point => {
                let position = integer_position;
                integer_position += 1;
                if overflow {
                    if !started {
                        place_sign(&mut out, &mut started, &mut sign_written);
                    }
                    out.push('#');
                    continue;
                }
                let offset = read.integer_digits - whole_digits.len();
                if position < zero_from {
                    if !read.fill {
                        out.push(' ');
                    }
                    continue;
                }
                if !started {
                    place_sign(&mut out, &mut started, &mut sign_written);
                }
                match position.checked_sub(offset) {
                    Some(index) => out.push(whole_digits[index]),
                    None => out.push('0'),
                }
            }
            "9" | "0" => {
                fraction_position += 1;
                if fraction_position > read.fraction_digits {
                    continue; // past a float's significant digits
                }
                if overflow {
                    out.push('#');
                } else if !read.fill || fraction_position <= fraction_kept {
                    out.push(
                        fraction_digits
                            .get(fraction_position - 1)
                            .copied()
                            .unwrap_or('0'),
                    );
                }
            }
            "." | "D" => {
                after_point = true;
                if !started {
                    // No integer digit shown: the sign goes before the point.
                    place_sign(&mut out, &mut started, &mut sign_written);
                }
                out.push('.');
            }
            "," | "G" => {
                if started || overflow {
                    out.push(',');
                } else if !read.fill {
                    out.push(' ');
                }
            }
            "S" if read.anchored => {}
            "S" | "SG" => out.push(if negative { '-' } else { '+' }),
            "L" => out.push(' '),
            "MI" => {
                if negative {
                    out.push('-');
                } else if !read.fill {
                    out.push(' ');
                }
            }
            "PL" => {
                if !negative {
                    out.push('+');
                } else if !read.fill {
                    out.push(' ');
                }
            }
            "PR" => {
                if negative {
                    out.insert(out.find(|c: char| c != ' ').unwrap_or(out.len()), '<');
                    out.push('>');
                } else if !read.fill {
                    out.insert(0, ' ');
                    out.push(' ');
                }
            }
            _ => {} // V
        }
    }
    if !(sign_written || read.fill && sign_char == ' ') {
        out.insert(0, sign_char);
    }
    if let Some(upper) = read.pieces.iter().find_map(|piece| match piece {
        Piece::Field { ordinal, .. } => *ordinal,
        _ => None,
    }) {
        if !negative && read.fraction_digits == 0 {
            let value = numeric::to_i64(&rounded).unwrap_or(0);
            out.push_str(ordinal_suffix(value, upper));
        }
    }
    Ok(out)
}

/// Reads the digits of a number field: up to `width` digits (or, for the last field or one
/// followed by a separator, as many as there are), after optional spaces and a sign.
fn read_number(chars: &[char], at: &mut usize, width: usize, greedy: bool) -> Option<(i64, usize)> {
    while *at < chars.len() && chars[*at] == ' ' {
        *at += 1;
    }
    let mut negative = false;
    if *at < chars.len() && (chars[*at] == '-' || chars[*at] == '+') {
        negative = chars[*at] == '-';
        *at += 1;
    }
    let start = *at;
    while *at < chars.len() && chars[*at].is_ascii_digit() && (greedy || *at - start < width) {
        *at += 1;
    }
    if *at == start {
        return None;
    }
    let digits: String = chars[start..*at].iter().collect();
    // Too many digits for an i64 reads as out of range below.
    let value: i64 = digits.parse().unwrap_or(i64::MAX);
    Some((if negative { -value } else { value }, *at - start))
}

/// Reads one of `names` (case-insensitively) at `at`, by its full name or its first three
/// letters: its index.
fn read_name(chars: &[char], at: &mut usize, names: &[&str], short: bool) -> Option<usize> {
    while *at < chars.len() && chars[*at] == ' ' {
        *at += 1;
    }
    let rest: String = rest_upper(chars, *at).to_ascii_lowercase();
    for (index, name) in names.iter().enumerate() {
        let lower = name.to_lowercase();
        if !short && rest.starts_with(&lower) {
            *at += lower.chars().count();
            return Some(index);
        }
    }
    for (index, name) in names.iter().enumerate() {
        let lower = name.to_lowercase();
        if rest.starts_with(&lower[..3]) {
            *at += 3;
            return Some(index);
        }
    }
    None
}

/// An offset (TZH, TZM) past 15:59.
fn displacement(text: &str) -> SqlError {
    SqlError::new(
        "22009",
        format!("time zone displacement out of range: \"{text}\""),
    )
}

/// The text from `at` on, its ASCII letters in upper case.
fn rest_upper(chars: &[char], at: usize) -> String {
    chars
        .get(at..)
        .unwrap_or_default()
        .iter()
        .map(char::to_ascii_uppercase)
        .collect()
}

fn bad_value(chars: &[char], at: usize, what: &str) -> SqlError {
    invalid_format(format!(
        "invalid value \"{}\" for \"{what}\"",
        chars[at.min(chars.len())..].iter().collect::<String>()
    ))
}

/// A number field of the text (`read_number`), or the error naming the field; PostgreSQL's
/// fields are 32-bit.
fn field(chars: &[char], at: &mut usize, width: usize, greedy: bool, what: &str) -> SqlResult<i64> {
    Ok(field_digits(chars, at, width, greedy, what)?.0)
}

/// `field` with the number of digits read.
fn field_digits(
    chars: &[char],
    at: &mut usize,
    width: usize,
    greedy: bool,
    what: &str,
) -> SqlResult<(i64, usize)> {
    let (value, digits) =
        read_number(chars, at, width, greedy).ok_or_else(|| bad_value(chars, *at, what))?;
    if i32::try_from(value).is_err() {
        return Err(invalid_format(format!(
            "value for \"{what}\" in source string is out of range"
        ))
        .with_detail("Value must be in the range -2147483648 to 2147483647."));
    }
    Ok((value, digits))
}

/// A fraction of a second of `width` digits read as `digits` digits (`12.3` as SS.MS is
/// 300 ms), in microseconds.
fn fraction_micros(value: i64, digits: usize, width: usize) -> i64 {
    let scaled = value * 10i64.pow(width.saturating_sub(digits) as u32);
    scaled * 10i64.pow(6u32.saturating_sub(width as u32))
}

/// What to_date and to_timestamp read.
#[derive(Default)]
struct Fields {
    year: Option<i64>,
    month: Option<u32>,
    day: Option<u32>,
    day_of_year: Option<i64>,
    hour: i64,
    minute: i64,
    second: i64,
    micros: i64,
    pm: Option<bool>,
    bc: bool,
    offset: Option<i32>,
    julian: Option<i64>,
}

fn parse_moment(text: &str, template: &str) -> SqlResult<Fields> {
    let chars: Vec<char> = text.chars().collect();
    let pieces = parse_template(template, DATE_KEYWORDS);
    let mut fields = Fields::default();
    let mut at = 0;
    for (position, piece) in pieces.iter().enumerate() {
        // A field followed by a literal or nothing may take more digits than its width.
        let greedy = !matches!(pieces.get(position + 1), Some(Piece::Field { .. }));
        match piece {
            Piece::Literal(literal) => {
                // Separators in the template skip as many non-alphanumeric characters.
                for _ in literal.chars() {
                    if at < chars.len() && !chars[at].is_ascii_alphanumeric() {
                        at += 1;
                    }
                }
            }
            // Fields after the end of the text are left unset, as in PostgreSQL.
            Piece::Field { .. } if at >= chars.len() => break,
            Piece::Field { keyword, .. } => {
                // Any separator in the input before a field is skipped.
                while at < chars.len()
                    && !chars[at].is_ascii_alphanumeric()
                    && !matches!(chars[at], '-' | '+')
                {
                    at += 1;
                }
                match *keyword {
                    "YYYY" | "IYYY" => {
                        fields.year = Some(field(&chars, &mut at, 4, greedy, keyword)?)
                    }
                    "Y,YYY" => {
                        let thousands = field(&chars, &mut at, 1, greedy, keyword)?;
                        if at < chars.len() && chars[at] == ',' {
                            at += 1;
                        }
                        let rest = read_number(&chars, &mut at, 3, false)
                            .ok_or_else(|| bad_value(&chars, at, keyword))?;
                        fields.year = Some(thousands * 1000 + rest.0);
                    }
                    "YYY" | "IYY" => {
                        let year = field(&chars, &mut at, 3, greedy, keyword)?;
                        fields.year = Some(if year < 100 { year + 2000 } else { year + 1000 });
                    }
                    "YY" | "IY" => {
                        let year = field(&chars, &mut at, 2, greedy, keyword)?;
                        fields.year = Some(if year < 70 { year + 2000 } else { year + 1900 });
                    }
                    "Y" | "I" => {
                        fields.year = Some(field(&chars, &mut at, 1, greedy, keyword)? + 2000)
                    }
                    "MM" => fields.month = Some(field(&chars, &mut at, 2, greedy, keyword)? as u32),
                    "DD" => fields.day = Some(field(&chars, &mut at, 2, greedy, keyword)? as u32),
                    "DDD" | "IDDD" => {
                        fields.day_of_year = Some(field(&chars, &mut at, 3, greedy, keyword)?)
                    }
                    "HH" | "HH12" => {
                        let hour = field(&chars, &mut at, 2, greedy, keyword)?;
                        if !(1..=12).contains(&hour) {
                            return Err(SqlError::new(
                                sqlstate::DATETIME_FIELD_OVERFLOW,
                                format!("hour \"{hour}\" is invalid for the 12-hour clock"),
                            ));
                        }
                        fields.hour = hour;
                    }
                    "HH24" => fields.hour = field(&chars, &mut at, 2, greedy, keyword)?,
                    "MI" => fields.minute = field(&chars, &mut at, 2, greedy, keyword)?,
                    "SS" => fields.second = field(&chars, &mut at, 2, greedy, keyword)?,
                    "MS" | "FF1" | "FF2" | "FF3" | "FF4" | "FF5" | "US" | "FF6" => {
                        let width = match *keyword {
                            "MS" => 3,
                            "US" => 6,
                            ff => usize::from(ff.as_bytes()[2] - b'0'),
                        };
                        let (value, digits) =
                            field_digits(&chars, &mut at, width, greedy, keyword)?;
                        if digits > width {
                            return Err(SqlError::new(
                                sqlstate::DATETIME_FIELD_OVERFLOW,
                                format!("date/time field value out of range: \"{text}\""),
                            ));
                        }
                        fields.micros = fraction_micros(value.abs(), digits, width);
                    }
                    "SSSS" | "SSSSS" => {
                        let seconds = field(&chars, &mut at, 5, greedy, keyword)?;
                        fields.hour = seconds / 3600;
                        fields.minute = seconds / 60 % 60;
                        fields.second = seconds % 60;
                    }
                    "J" => fields.julian = Some(field(&chars, &mut at, 7, greedy, keyword)?),
                    "D" | "ID" | "W" | "WW" | "IW" | "Q" | "CC" => {
                        field(&chars, &mut at, 2, greedy, keyword)?;
                    }
                    "MONTH" | "MON" => {
                        let month = read_name(&chars, &mut at, &MONTHS, *keyword == "MON")
                            .ok_or_else(|| bad_value(&chars, at, keyword))?;
                        fields.month = Some(month as u32 + 1);
                    }
                    "DAY" | "DY" => {
                        read_name(&chars, &mut at, &DAYS, *keyword == "DY")
                            .ok_or_else(|| bad_value(&chars, at, keyword))?;
                    }
                    "RM" => {
                        let rest: String = rest_upper(&chars, at);
                        let month = (0..12)
                            .rev()
                            .max_by_key(|m| {
                                rest.starts_with(ROMAN_MONTHS[*m]) as usize * ROMAN_MONTHS[*m].len()
                            })
                            .filter(|m| rest.starts_with(ROMAN_MONTHS[*m]))
                            .ok_or_else(|| bad_value(&chars, at, keyword))?;
                        at += ROMAN_MONTHS[month].len();
                        fields.month = Some(month as u32 + 1);
                    }
                    "AM" | "PM" | "A.M." | "P.M." => {
                        let rest: String = rest_upper(&chars, at);
                        let (pm, length) = if rest.starts_with("P.M.") {
                            (true, 4)
                        } else if rest.starts_with("A.M.") {
                            (false, 4)
                        } else if rest.starts_with("PM") {
                            (true, 2)
                        } else if rest.starts_with("AM") {
                            (false, 2)
                        } else {
                            return Err(bad_value(&chars, at, keyword));
                        };
                        at += length;
                        fields.pm = Some(pm);
                    }
                    "AD" | "BC" | "A.D." | "B.C." => {
                        let rest = rest_upper(&chars, at);
                        let era = ["B.C.", "A.D.", "BC", "AD"]
                            .into_iter()
                            .find(|era| rest.starts_with(era))
                            .ok_or_else(|| bad_value(&chars, at, keyword))?;
                        fields.bc = era.starts_with('B');
                        at += era.len();
                    }
                    "TZH" => {
                        let hours = field(&chars, &mut at, 2, greedy, keyword)?;
                        if !(-15..=15).contains(&hours) {
                            return Err(displacement(text));
                        }
                        let minutes = fields.offset.map_or(0, |o| (o.abs() / 60 % 60) as i64);
                        let sign = if hours < 0 || chars.get(at.saturating_sub(3)) == Some(&'-') {
                            -1
                        } else {
                            1
                        };
                        let offset = sign * (hours.abs() * 3600 + minutes * 60);
                        fields.offset = Some(
                            i32::try_from(offset).map_err(|_| bad_value(&chars, at, keyword))?,
                        );
                    }
                    "TZM" => {
                        let minutes = field(&chars, &mut at, 2, greedy, keyword)?;
                        if !(0..60).contains(&minutes) {
                            return Err(displacement(text));
                        }
                        let current = fields.offset.unwrap_or(0);
                        let sign = if current < 0 { -1 } else { 1 };
                        let offset = i64::from(current) + sign * minutes * 60;
                        fields.offset = Some(
                            i32::try_from(offset).map_err(|_| bad_value(&chars, at, keyword))?,
                        );
                    }
                    "TZ" | "OF" => {
                        return Err(SqlError::unsupported(format!(
                            "formatting field \"{keyword}\" is only supported in to_char"
                        )))
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(fields)
}

/// The timestamp (microseconds since 2000-01-01, as a wall-clock time) the fields give.
fn fields_to_local(fields: &Fields, text: &str) -> SqlResult<i64> {
    let out_of_range = || {
        SqlError::new(
            sqlstate::DATETIME_FIELD_OVERFLOW,
            format!("date/time field value out of range: \"{text}\""),
        )
    };
    let days = if let Some(julian) = fields.julian {
        julian - 2_440_588
    } else {
        // No year is year 0, 1 BC, as in PostgreSQL.
        let mut year = fields.year.unwrap_or(0);
        if fields.bc {
            year = 1 - year;
        }
        match (fields.day_of_year, fields.month, fields.day) {
            (Some(day_of_year), None, None) => days_from_civil(year, 1, 1) + day_of_year - 1,
            (_, month, day) => {
                let month = month.unwrap_or(1);
                let day = day.unwrap_or(1);
                if !(1..=12).contains(&month) {
                    return Err(out_of_range());
                }
                let days = days_from_civil(year, month, day);
                if civil_from_days(days) != (year, month, day) {
                    return Err(out_of_range());
                }
                days
            }
        }
    };
    // The Julian calendar's day 0 (4714-11-24 BC) is the first day there is.
    if days + 2_440_588 < 0 {
        return Err(SqlError::new(
            sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
            format!("date out of range: \"{text}\""),
        ));
    }
    let mut hour = fields.hour;
    match fields.pm {
        Some(true) if hour < 12 => hour += 12,
        Some(false) if hour == 12 => hour = 0,
        _ => {}
    }
    if !(0..=24).contains(&hour)
        || !(0..60).contains(&fields.minute)
        || !(0..=60).contains(&fields.second)
    {
        return Err(out_of_range());
    }
    let seconds = hour * 3600 + fields.minute * 60 + fields.second;
    (days - EPOCH_2000_DAYS)
        .checked_mul(MICROS_PER_DAY)
        .and_then(|micros| micros.checked_add(seconds * MICROS_PER_SECOND + fields.micros))
        .ok_or_else(timestamp_out_of_range)
}

/// to_timestamp(text, template): a timestamptz, read in the session's zone unless the text
/// gives an offset (TZH/TZM).
pub fn to_timestamp(text: &str, template: &str) -> SqlResult<Value> {
    let fields = parse_moment(text, template)?;
    let local = fields_to_local(&fields, text)?;
    let utc = match fields.offset {
        Some(offset) => local
            .checked_sub(i64::from(offset) * MICROS_PER_SECOND)
            .ok_or_else(timestamp_out_of_range)?,
        None => zone::current().to_utc(local),
    };
    // PostgreSQL's last timestamp is in 294276 AD.
    let end = (days_from_civil(294_277, 1, 1) - EPOCH_2000_DAYS) * MICROS_PER_DAY;
    if utc >= end {
        return Err(timestamp_out_of_range());
    }
    Ok(Value::TimestampTz(utc))
}

/// to_timestamp(double precision): the Unix epoch plus that many seconds.
pub fn from_unix_seconds(seconds: f64) -> SqlResult<Value> {
    if seconds.is_nan() {
        return Err(SqlError::new(
            sqlstate::DATETIME_VALUE_OUT_OF_RANGE,
            "timestamp cannot be NaN",
        ));
    }
    if seconds == f64::INFINITY {
        return Ok(Value::TimestampTz(TIMESTAMP_INFINITY));
    }
    if seconds == f64::NEG_INFINITY {
        return Ok(Value::TimestampTz(TIMESTAMP_NEG_INFINITY));
    }
    let micros = (seconds * 1e6).round() - (EPOCH_2000_DAYS as f64) * (MICROS_PER_DAY as f64);
    if !(-2.1e17..=9.2e18).contains(&micros) {
        return Err(timestamp_out_of_range());
    }
    Ok(Value::TimestampTz(micros as i64))
}

/// to_date(text, template).
pub fn to_date(text: &str, template: &str) -> SqlResult<Value> {
    let fields = parse_moment(text, template)?;
    let local = fields_to_local(&fields, text)?;
    Ok(Value::Date(
        i32::try_from(local.div_euclid(MICROS_PER_DAY)).map_err(|_| timestamp_out_of_range())?,
    ))
}

/// to_number(text, template): the digits of the text with the template's decimal point, sign
/// (a leading or trailing minus, or angle brackets) and group separators skipped.
pub fn to_number(text: &str, template: &str) -> SqlResult<Value> {
    let read = parse_number_template(template);
    let has_point = read.pieces.iter().any(|piece| {
        matches!(
            piece,
            Piece::Field {
                keyword: "." | "D",
                ..
            }
        )
    });
    // At most as many digits as the template has on each side of its point.
    let mut digits = String::new();
    let (mut integer, mut fraction) = (0, 0);
    let mut after_point = false;
    let mut negative = false;
    for c in text.chars() {
        match c {
            '0'..='9' if after_point && fraction < read.fraction_digits => {
                digits.push(c);
                fraction += 1;
            }
            '0'..='9' if !after_point && integer < read.integer_digits => {
                digits.push(c);
                integer += 1;
            }
            '0'..='9' => {}
            '.' if has_point && !after_point => after_point = true,
            '.' => break, // a template without a point reads no fraction
            '-' | '<' => negative = true,
            _ => {}
        }
    }
    if digits.is_empty() {
        return Err(SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            "invalid input syntax for type numeric: \" \"".to_string(),
        ));
    }
    let mut value = numeric::parse(&digits)?;
    value
        .set_scale(fraction as u32)
        .map_err(|_| numeric::out_of_range())?;
    if negative {
        value.set_sign_negative(true);
    }
    Ok(Value::Numeric(value))
}

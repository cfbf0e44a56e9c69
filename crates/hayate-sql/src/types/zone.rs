//! Time zones: the session's (SET TIME ZONE, the TimeZone startup parameter, set_config), in
//! which a timestamptz written without an offset is read, and shown on output; and the zones
//! AT TIME ZONE names.
//!
//! A timestamptz is stored as microseconds since 2000-01-01 UTC; only reading, showing and
//! the calendar arithmetic of timestamptz (casts to and from timestamp and date, date_trunc,
//! extract, + interval of days and months) depend on the zone, as in PostgreSQL. Zones are
//! IANA names (jiff's tz database: the system's `/usr/share/zoneinfo`, else the copy built
//! into the binary), POSIX strings (`EST5EDT`, `UTC+3`: hours west, as POSIX writes them),
//! fixed offsets and a few abbreviations.
//!
//! The current session's zone is a thread-local (`enter`), made current by the server
//! around every resumption of a statement's fiber and around encoding its rows, like the
//! cancel flag (`interrupt`): the value code reads it (`current`) without a zone being
//! passed through every cast and format. Without one entered it is UTC.

use std::cell::RefCell;
use std::sync::Arc;

use jiff::tz::TimeZone;
use jiff::Timestamp;

use crate::error::{sqlstate, SqlError, SqlResult};

use super::units::{MICROS_PER_SECOND, TIMESTAMP_INFINITY, TIMESTAMP_NEG_INFINITY};

/// Seconds from 1970-01-01 to 2000-01-01 (PostgreSQL's epoch).
const EPOCH_SHIFT_SECONDS: i64 = 946_684_800;

/// A time zone and the name SHOW gives it.
#[derive(Debug, Clone)]
pub struct Zone {
    tz: TimeZone,
    name: String,
}

/// Abbreviations PostgreSQL's default set gives a fixed offset (seconds east of UTC), read
/// before the tz database in AT TIME ZONE and in timestamptz input.
const ABBREVIATIONS: &[(&str, i32)] = &[
    ("utc", 0),
    ("gmt", 0),
    ("ut", 0),
    ("z", 0),
    ("zulu", 0),
    ("est", -5 * 3600),
    ("edt", -4 * 3600),
    ("cst", -6 * 3600),
    ("cdt", -5 * 3600),
    ("mst", -7 * 3600),
    ("mdt", -6 * 3600),
    ("pst", -8 * 3600),
    ("pdt", -7 * 3600),
    ("akst", -9 * 3600),
    ("akdt", -8 * 3600),
    ("hst", -10 * 3600),
    ("wet", 0),
    ("west", 3600),
    ("bst", 3600),
    ("cet", 3600),
    ("cest", 2 * 3600),
    ("met", 3600),
    ("mest", 2 * 3600),
    ("eet", 2 * 3600),
    ("eest", 3 * 3600),
    ("msk", 3 * 3600),
    ("jst", 9 * 3600),
    ("kst", 9 * 3600),
    ("hkt", 8 * 3600),
    ("sgt", 8 * 3600),
    ("aest", 10 * 3600),
    ("aedt", 11 * 3600),
    ("acst", 9 * 3600 + 1800),
    ("awst", 8 * 3600),
    ("nzst", 12 * 3600),
    ("nzdt", 13 * 3600),
];

impl Zone {
    pub fn utc() -> Zone {
        Zone {
            tz: TimeZone::UTC,
            name: "UTC".into(),
        }
    }

    /// A fixed offset (seconds east of UTC), named as PostgreSQL names one: `<+09>-09`.
    pub fn fixed(seconds_east: i32) -> SqlResult<Zone> {
        let offset = jiff::tz::Offset::from_seconds(seconds_east).map_err(|_| {
            SqlError::new(
                sqlstate::INVALID_PARAMETER_VALUE,
                "time zone displacement out of range",
            )
        })?;
        let east = offset_text(seconds_east);
        let west = offset_text(-seconds_east);
        Ok(Zone {
            tz: TimeZone::fixed(offset),
            name: format!("<{east}>{west}"),
        })
    }

    /// The value of SET TIME ZONE (or the TimeZone parameter): `LOCAL`/`DEFAULT` (UTC), a
    /// number of hours east (`9`, `'+09'`, `-3.5`; ISO's sign), an interval (`'+05:30'`),
    /// an IANA name or a POSIX string; else 22023 as PostgreSQL's "invalid value for
    /// parameter".
    pub fn setting(text: &str) -> SqlResult<Zone> {
        let trimmed = text.trim();
        let lower = trimmed.to_ascii_lowercase();
        if matches!(lower.as_str(), "local" | "default") {
            return Ok(Zone::utc());
        }
        if let Ok(hours) = trimmed.parse::<f64>() {
            if hours.is_finite() && hours.abs() <= 15.0 {
                return Zone::fixed((hours * 3600.0).round() as i32);
            }
        }
        // SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE: the quoted offset.
        if let Some(quoted) = lower
            .strip_prefix("interval")
            .and_then(|rest| rest.trim_start().strip_prefix('\''))
            .and_then(|rest| rest.split('\'').next())
        {
            let bare = quoted.trim();
            let signed = match bare.starts_with(['+', '-']) {
                true => bare.to_string(),
                false => format!("+{bare}"),
            };
            if let Some(seconds) = interval_offset(&signed) {
                return Zone::fixed(seconds);
            }
        }
        // Not a number: a POSIX string ('+05:30' is five and a half hours west, as
        // PostgreSQL's pg_tzset reads it) or a name; abbreviations are not zones here.
        if let Some(seconds) = interval_offset(&lower) {
            let mut zone = Zone::fixed(-seconds)?;
            zone.name = trimmed.to_string();
            return Ok(zone);
        }
        Zone::named(trimmed).ok_or_else(|| {
            SqlError::new(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!("invalid value for parameter \"TimeZone\": \"{text}\""),
            )
        })
    }

    /// A zone AT TIME ZONE names, or that follows a timestamptz's time: an abbreviation,
    /// an IANA name or a POSIX string (`'+09'` is POSIX: 9 hours west, as in PostgreSQL);
    /// 22023 "time zone ... not recognized" otherwise.
    pub fn at(text: &str) -> SqlResult<Zone> {
        Zone::lookup(text).ok_or_else(|| {
            SqlError::new(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!("time zone \"{text}\" not recognized"),
            )
        })
    }

    /// `at`'s lookup without the error.
    pub fn lookup(text: &str) -> Option<Zone> {
        let trimmed = text.trim();
        let lower = trimmed.to_ascii_lowercase();
        if let Some((_, seconds)) = ABBREVIATIONS.iter().find(|(name, _)| *name == lower) {
            let mut zone = Zone::fixed(*seconds).ok()?;
            zone.name = trimmed.to_string();
            return Some(zone);
        }
        if let Some(seconds) = interval_offset(&lower) {
            // A bare offset is a POSIX zone: its sign counts hours west.
            let mut zone = Zone::fixed(-seconds).ok()?;
            zone.name = trimmed.to_string();
            return Some(zone);
        }
        Zone::named(trimmed)
    }

    /// An IANA name (any case; shown as the database spells it) or a POSIX string.
    fn named(text: &str) -> Option<Zone> {
        if text.is_empty() {
            return None;
        }
        // A fixed zone as `fixed` names it: `<+05:30>-05:30`.
        if let Some((inner, _)) = text.strip_prefix('<').and_then(|rest| rest.split_once('>')) {
            if let Some(seconds) = interval_offset(inner) {
                return Zone::fixed(seconds).ok();
            }
        }
        if let Ok(tz) = TimeZone::get(text) {
            let name = tz.iana_name().unwrap_or(text).to_string();
            return Some(Zone { tz, name });
        }
        // POSIX: a name of at least three letters (or <...>), an offset, maybe DST rules.
        let starts_posix = text.starts_with('<')
            || text.chars().take_while(|c| c.is_ascii_alphabetic()).count() >= 3;
        if starts_posix && text.chars().any(|c| c.is_ascii_digit()) {
            if let Ok(tz) = TimeZone::posix(text) {
                return Some(Zone {
                    tz,
                    name: text.to_string(),
                });
            }
        }
        None
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Seconds east of UTC at `utc` (microseconds since 2000-01-01 UTC).
    pub fn offset_at(&self, utc: i64) -> i32 {
        if let Some(offset) = self.fixed_offset() {
            return offset;
        }
        self.tz.to_offset(timestamp(utc)).seconds()
    }

    /// The zone's abbreviation at `utc` (`CEST`, or the offset for a fixed zone: `+09`).
    pub fn abbreviation_at(&self, utc: i64) -> String {
        let info = self.tz.to_offset_info(timestamp(utc));
        info.abbreviation().to_string()
    }

    fn fixed_offset(&self) -> Option<i32> {
        self.tz
            .to_fixed_offset()
            .ok()
            .map(|offset| offset.seconds())
    }

    /// The wall-clock time here of UTC instant `utc` (both in microseconds since
    /// 2000-01-01); infinities stay.
    pub fn to_local(&self, utc: i64) -> i64 {
        if utc == TIMESTAMP_INFINITY || utc == TIMESTAMP_NEG_INFINITY {
            return utc;
        }
        utc.saturating_add(self.offset_at(utc) as i64 * MICROS_PER_SECOND)
    }

    /// The UTC instant of wall-clock time `local` here. A time skipped by a change to
    /// summer time is read with the offset before it, one repeated by the change back with
    /// the later offset (standard time), as PostgreSQL reads them.
    pub fn to_utc(&self, local: i64) -> i64 {
        if local == TIMESTAMP_INFINITY || local == TIMESTAMP_NEG_INFINITY {
            return local;
        }
        if let Some(offset) = self.fixed_offset() {
            return local.saturating_sub(offset as i64 * MICROS_PER_SECOND);
        }
        let wall = TimeZone::UTC.to_datetime(timestamp(local));
        match self.tz.to_ambiguous_timestamp(wall).later() {
            Ok(instant)
                if timestamp(local) != Timestamp::MIN && timestamp(local) != Timestamp::MAX =>
            {
                let seconds = instant.as_second() - EPOCH_SHIFT_SECONDS;
                seconds * MICROS_PER_SECOND + local.rem_euclid(MICROS_PER_SECOND)
            }
            // Beyond jiff's years: the offset at the range's end.
            _ => local.saturating_sub(self.offset_at(local) as i64 * MICROS_PER_SECOND),
        }
    }
}

/// Every zone of the time zone database, by name, as pg_timezone_names lists them: (name,
/// abbreviation, seconds east of UTC, summer time in effect), now.
pub fn database_zones() -> Vec<(String, String, i32, bool)> {
    let now = Timestamp::now();
    let database = jiff::tz::db();
    let mut zones: Vec<(String, String, i32, bool)> = database
        .available()
        // PostgreSQL's view leaves out these two files of the database.
        .filter(|name| !matches!(name.as_str(), "localtime" | "posixrules"))
        .filter_map(|name| {
            let tz = database.get(name.as_str()).ok()?;
            let info = tz.to_offset_info(now);
            Some((
                name.as_str().to_string(),
                info.abbreviation().to_string(),
                info.offset().seconds(),
                info.dst().is_dst(),
            ))
        })
        .collect();
    zones.sort();
    zones
}

/// `+HH`, `+HH:MM` or `+HH:MM:SS` as PostgreSQL writes a zone offset.
pub fn offset_text(seconds_east: i32) -> String {
    let sign = if seconds_east < 0 { '-' } else { '+' };
    let total = seconds_east.unsigned_abs();
    let (hours, minutes, seconds) = (total / 3600, total / 60 % 60, total % 60);
    match (minutes, seconds) {
        (0, 0) => format!("{sign}{hours:02}"),
        (_, 0) => format!("{sign}{hours:02}:{minutes:02}"),
        _ => format!("{sign}{hours:02}:{minutes:02}:{seconds:02}"),
    }
}

/// `+HH[:MM[:SS]]` or `-HH[MM]` (lowercase text) as seconds east.
fn interval_offset(lower: &str) -> Option<i32> {
    if !lower.is_ascii() {
        return None;
    }
    let (sign, rest) = match lower.as_bytes().first()? {
        b'+' => (1, &lower[1..]),
        b'-' => (-1, &lower[1..]),
        _ => return None,
    };
    let parts: Vec<&str> = if rest.contains(':') {
        rest.split(':').collect()
    } else if rest.len() == 4 {
        vec![&rest[..2], &rest[2..]]
    } else {
        vec![rest]
    };
    if parts.len() > 3 || parts.iter().any(|p| p.is_empty() || p.len() > 2) {
        return None;
    }
    let mut seconds = 0;
    for (index, part) in parts.iter().enumerate() {
        let value: i32 = part.parse().ok()?;
        if index > 0 && value >= 60 {
            return None;
        }
        seconds += value * [3600, 60, 1][index];
    }
    (seconds <= 15 * 3600).then_some(sign * seconds)
}

/// A jiff instant for `utc`, clamped to jiff's range (years -9999..9999): the offsets
/// beyond it are those of its ends.
fn timestamp(utc: i64) -> Timestamp {
    let seconds = utc
        .div_euclid(MICROS_PER_SECOND)
        .saturating_add(EPOCH_SHIFT_SECONDS);
    let seconds = seconds.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH)
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Zone>>> = const { RefCell::new(None) };
}

/// The current thread's zone (UTC if none was entered).
pub fn current() -> Arc<Zone> {
    CURRENT.with(|current| {
        current
            .borrow()
            .clone()
            .unwrap_or_else(|| UTC.with(Arc::clone))
    })
}

thread_local! {
    static UTC: Arc<Zone> = Arc::new(Zone::utc());
}

/// Makes `zone` the current thread's zone until the guard drops.
pub fn enter(zone: Arc<Zone>) -> Entered {
    let previous = CURRENT.with(|current| current.replace(Some(zone)));
    Entered { previous }
}

/// Changes the zone of the current entry (a SET TIME ZONE inside a statement string: the
/// statements after it read the new zone); nothing if no zone is entered, so a session set
/// up outside a statement (the server's startup) leaves its thread's zone alone.
pub fn replace_current(zone: Arc<Zone>) {
    CURRENT.with(|current| {
        let mut current = current.borrow_mut();
        if current.is_some() {
            *current = Some(zone);
        }
    });
}

pub struct Entered {
    previous: Option<Arc<Zone>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

/// A session's zone, shared with the server that enters it (cheap to clone; clones share).
#[derive(Debug, Clone)]
pub struct SessionZone(Arc<parking_lot::Mutex<Arc<Zone>>>);

impl Default for SessionZone {
    fn default() -> Self {
        SessionZone(Arc::new(parking_lot::Mutex::new(Arc::new(Zone::utc()))))
    }
}

impl SessionZone {
    pub fn get(&self) -> Arc<Zone> {
        self.0.lock().clone()
    }

    pub fn set(&self, zone: Arc<Zone>) {
        *self.0.lock() = zone;
    }

    /// Makes this zone current until the guard drops.
    pub fn enter(&self) -> Entered {
        enter(self.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UTC time `YYYY-MM-DD HH:MM` in microseconds since 2000-01-01.
    fn micros(text: &str) -> i64 {
        let civil: jiff::civil::DateTime = text.replace(' ', "T").parse().unwrap();
        let instant = TimeZone::UTC
            .to_ambiguous_timestamp(civil)
            .unambiguous()
            .unwrap();
        (instant.as_second() - EPOCH_SHIFT_SECONDS) * MICROS_PER_SECOND
    }

    #[test]
    fn settings_read_as_postgresql_reads_them() {
        assert_eq!(Zone::setting("+09").unwrap().name(), "<+09>-09");
        assert_eq!(Zone::setting("9").unwrap().name(), "<+09>-09");
        assert_eq!(Zone::setting("-3.5").unwrap().name(), "<-03:30>+03:30");
        // Not a number: POSIX, hours west.
        let posix_offset = Zone::setting("+05:30").unwrap();
        assert_eq!(posix_offset.offset_at(0), -(5 * 3600 + 1800));
        assert_eq!(posix_offset.name(), "+05:30");
        assert!(Zone::setting("+a\u{e9}1").is_err());
        assert!(Zone::at("+a\u{e9}1").is_err());
        // A fixed zone's name reads back as the same zone.
        let named = Zone::setting("<+05:30>-05:30").unwrap();
        assert_eq!(named.offset_at(0), 5 * 3600 + 1800);
        assert_eq!(
            Zone::setting("INTERVAL '+05:30' HOUR TO MINUTE")
                .unwrap()
                .name(),
            "<+05:30>-05:30"
        );
        assert_eq!(
            Zone::setting("europe/berlin").unwrap().name(),
            "Europe/Berlin"
        );
        assert_eq!(Zone::setting("LOCAL").unwrap().name(), "UTC");
        let posix = Zone::setting("UTC+3").unwrap();
        assert_eq!(posix.offset_at(0), -3 * 3600);
        assert_eq!(
            Zone::setting("nowhere/x").unwrap_err().code,
            sqlstate::INVALID_PARAMETER_VALUE
        );
        // AT TIME ZONE '+09' is POSIX: nine hours west.
        assert_eq!(Zone::at("+09").unwrap().offset_at(0), -9 * 3600);
        assert_eq!(Zone::at("PST").unwrap().offset_at(0), -8 * 3600);
        assert!(Zone::at("nowhere").is_err());
    }

    #[test]
    fn summer_time_gaps_and_folds_read_as_postgresql() {
        let berlin = Zone::setting("Europe/Berlin").unwrap();
        // 02:30 on 2026-03-29 does not exist: read with +01, 01:30 UTC.
        let gap = micros("2026-03-29 02:30");
        assert_eq!(berlin.to_utc(gap), micros("2026-03-29 01:30"));
        // 02:30 on 2026-10-25 happens twice: the later (+01), 01:30 UTC.
        let fold = micros("2026-10-25 02:30");
        assert_eq!(berlin.to_utc(fold), micros("2026-10-25 01:30"));
        let summer = micros("2026-06-01 12:00");
        assert_eq!(berlin.to_utc(summer), micros("2026-06-01 10:00"));
        assert_eq!(berlin.to_local(micros("2026-06-01 10:00")), summer);
        // Before standard time, local mean time.
        assert_eq!(berlin.offset_at(micros("1890-01-01 00:00")), 3208);
        assert_eq!(offset_text(3208), "+00:53:28");
        assert_eq!(offset_text(-12600), "-03:30");
    }
}

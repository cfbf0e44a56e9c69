//! Evaluation of scalar functions. The binder has checked the arity and cast the arguments
//! to the types each function takes, so a value of an unexpected type here is our bug,
//! reported as an error rather than a panic.

use std::cell::Cell;
use std::cmp::Ordering;

use md5::{Digest, Md5};

use super::{float_result, out_of_range, strings, EvalContext, Expr, ScalarFunction};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::{datetime, numeric, numeric_math, DataType, Value};

/// The session setting that holds the connection's process id (pg_backend_pid).
pub(crate) const BACKEND_PID_SETTING: &str = "hayate.backend_pid";

/// Settings no session changes, with PostgreSQL's words for why: the session's own values
/// (`hayate.`), and those fixed when the server was built or started. RESET ALL leaves
/// them alone.
pub(crate) fn fixed_setting(name: &str) -> Option<&'static str> {
    match name {
        "server_version"
        | "server_version_num"
        | "server_encoding"
        | "integer_datetimes"
        | "max_identifier_length"
        | "max_index_keys"
        | "block_size"
        | "in_hot_standby" => Some("cannot be changed"),
        "shared_buffers" | "max_connections" => {
            Some("cannot be changed without restarting the server")
        }
        _ if name.starts_with("hayate.") => Some("cannot be changed"),
        _ => None,
    }
}

/// SET, RESET and set_config of a setting no session changes: 55P02.
pub(crate) fn check_settable(name: &str) -> SqlResult<()> {
    match fixed_setting(name) {
        Some(why) => Err(SqlError::new(
            sqlstate::CANT_CHANGE_RUNTIME_PARAM,
            format!("parameter \"{name}\" {why}"),
        )),
        None => Ok(()),
    }
}

pub(super) fn eval(
    function: ScalarFunction,
    args: &[Expr],
    row: &[Value],
    context: &EvalContext,
) -> SqlResult<Value> {
    use ScalarFunction as F;
    if let F::ExtremeByKey { greatest } = function {
        return extreme_by_key(greatest, args, row, context);
    }
    let mut values = Vec::with_capacity(args.len());
    for arg in args {
        values.push(arg.eval(row, context)?);
    }
    // Functions that look at NULL arguments themselves.
    match function {
        F::Coalesce => {
            return Ok(values
                .into_iter()
                .find(|v| !v.is_null())
                .unwrap_or(Value::Null))
        }
        F::Concat => {
            let text: String = values.iter().filter_map(Value::to_text).collect();
            return Ok(Value::Text(text));
        }
        F::ConcatWs => return Ok(strings::concat_ws(&values)),
        F::Json { function, binary } => return super::json::eval(function, binary, &values),
        F::NullIf => {
            let equal = values[0].compare(&values[1])? == Some(Ordering::Equal);
            return Ok(if equal {
                Value::Null
            } else {
                values.swap_remove(0)
            });
        }
        F::Greatest | F::Least => return extreme(function, values),
        _ => {}
    }
    if values.iter().any(Value::is_null) {
        return Ok(Value::Null);
    }
    let text = |index: usize| values[index].to_text().unwrap_or_default();
    let integer = |index: usize| match values[index] {
        Value::Int(v) => Ok(v),
        _ => Err(wrong_argument(function)),
    };
    Ok(match function {
        F::Lower => Value::Text(text(0).to_lowercase()),
        F::Upper => Value::Text(text(0).to_uppercase()),
        F::Length => match &values[0] {
            Value::Bytes(bytes) => Value::Int(bytes.len() as i64),
            _ => Value::Int(text(0).chars().count() as i64),
        },
        F::OctetLength => match &values[0] {
            Value::Bytes(bytes) => Value::Int(bytes.len() as i64),
            _ => Value::Int(text(0).len() as i64),
        },
        F::Abs => match &values[0] {
            Value::Int(v) => Value::Int(v.checked_abs().ok_or_else(out_of_range)?),
            Value::Float(v) => Value::Float(v.abs()),
            Value::Float4(v) => Value::Float4(v.abs()),
            Value::Numeric(v) => Value::Numeric(v.abs()),
            _ => return Err(wrong_argument(function)),
        },
        F::Substring => {
            let count = values.get(2).map(|_| integer(2)).transpose()?;
            substring(&text(0), integer(1)?, count)?
        }
        F::Position => {
            let (haystack, needle) = (text(0), text(1));
            match haystack.find(&needle) {
                Some(at) => Value::Int(haystack[..at].chars().count() as i64 + 1),
                None => Value::Int(0),
            }
        }
        F::BTrim | F::LTrim | F::RTrim => {
            let characters: Vec<char> = match values.get(1) {
                Some(_) => text(1).chars().collect(),
                None => vec![' '],
            };
            let source = text(0);
            let trimmed = match function {
                F::LTrim => source.trim_start_matches(characters.as_slice()),
                F::RTrim => source.trim_end_matches(characters.as_slice()),
                _ => source.trim_matches(characters.as_slice()),
            };
            Value::Text(trimmed.to_string())
        }
        F::Replace => {
            let (source, from) = (text(0), text(1));
            if from.is_empty() {
                Value::Text(source)
            } else {
                Value::Text(source.replace(&from, &text(2)))
            }
        }
        F::Left | F::Right => {
            let source: Vec<char> = text(0).chars().collect();
            let n = integer(1)?;
            let length = source.len() as i64;
            let keep = if n >= 0 {
                n.min(length)
            } else {
                (length + n).max(0)
            } as usize;
            let slice = if function == F::Left {
                &source[..keep]
            } else {
                &source[source.len() - keep..]
            };
            Value::Text(slice.iter().collect())
        }
        F::Repeat => {
            let count = integer(1)?.max(0) as usize;
            let source = text(0);
            if source.len().saturating_mul(count) > 1 << 30 {
                return Err(SqlError::new(
                    sqlstate::PROGRAM_LIMIT_EXCEEDED,
                    "requested length too large",
                ));
            }
            Value::Text(source.repeat(count))
        }
        F::QuoteIdent => Value::Text(crate::ident::quote_ident(&text(0))),
        F::Lpad | F::Rpad => {
            let fill = values.get(2).map_or(" ".to_string(), |_| text(2));
            strings::pad(&text(0), integer(1)?, &fill, function == F::Lpad)?
        }
        F::SplitPart => strings::split_part(&text(0), &text(1), integer(2)?)?,
        F::Initcap => Value::Text(strings::initcap(&text(0))),
        F::Translate => Value::Text(strings::translate(&text(0), &text(1), &text(2))),
        F::Reverse => Value::Text(text(0).chars().rev().collect()),
        F::StartsWith => Value::Bool(text(0).starts_with(&text(1))),
        F::Chr => strings::chr(integer(0)?)?,
        F::Ascii => strings::ascii(&text(0)),
        F::ToHex { wide } => strings::to_hex(integer(0)?, wide),
        F::RegexpReplace => {
            let flags = values.get(3).map_or(String::new(), |_| text(3));
            strings::regexp_replace(&text(0), &text(1), &text(2), &flags)?
        }
        F::Encode => match &values[0] {
            Value::Bytes(bytes) => strings::encode(bytes, &text(1))?,
            _ => return Err(wrong_argument(function)),
        },
        F::Decode => strings::decode(&text(0), &text(1))?,
        F::Sign | F::Ln | F::Exp | F::Log10 if matches!(values[0], Value::Numeric(_)) => {
            let Value::Numeric(value) = &values[0] else {
                unreachable!("matched above")
            };
            Value::Numeric(match function {
                F::Sign => numeric_math::sign(value),
                F::Ln => numeric_math::ln(value)?,
                F::Exp => numeric_math::exp(value)?,
                _ => numeric_math::log(&rust_decimal::Decimal::TEN, value)?,
            })
        }
        F::Log => match (&values[0], &values[1]) {
            (Value::Numeric(base), Value::Numeric(value)) => {
                Value::Numeric(numeric_math::log(base, value)?)
            }
            _ => return Err(wrong_argument(function)),
        },
        F::Sign | F::Ln | F::Exp | F::Log10 | F::Cbrt => {
            let value = float(&values[0])?;
            let undefined = |what: &str| Err(SqlError::new("2201E", what.to_string()));
            match function {
                F::Ln | F::Log10 if value == 0.0 => {
                    return undefined("cannot take logarithm of zero")
                }
                F::Ln | F::Log10 if value < 0.0 => {
                    return undefined("cannot take logarithm of a negative number")
                }
                _ => {}
            }
            let result = match function {
                // NaN and -0 have the sign 0, as PostgreSQL's.
                F::Sign => match value {
                    v if v > 0.0 => 1.0,
                    v if v < 0.0 => -1.0,
                    _ => 0.0,
                },
                F::Ln => value.ln(),
                F::Exp => value.exp(),
                F::Log10 => value.log10(),
                _ => value.cbrt(),
            };
            if function == F::Exp && result == 0.0 && value.is_finite() {
                return Err(SqlError::new(
                    sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                    "value out of range: underflow",
                ));
            }
            float_result(result, value.is_infinite(), DataType::Float8)?
        }
        F::Pi => Value::Float(std::f64::consts::PI),
        F::ArrayOrder { integers } => Value::Bytes(array_order(&text(0), integers)?),
        F::ArrayContains | F::ArrayOverlap => {
            let (first, second) = (array_elements(&text(0))?, array_elements(&text(1))?);
            let found = |element: &Option<String>| element.is_some() && first.contains(element);
            Value::Bool(match function {
                F::ArrayContains => second.iter().all(found),
                _ => second.iter().any(found),
            })
        }
        F::QuoteLiteral => {
            let source = text(0);
            let body = source.replace('\'', "''");
            Value::Text(if source.contains('\\') {
                format!("E'{}'", body.replace('\\', "\\\\"))
            } else {
                format!("'{body}'")
            })
        }
        F::Md5 => {
            let bytes = match &values[0] {
                Value::Bytes(bytes) => bytes.clone(),
                _ => text(0).into_bytes(),
            };
            let digest = Md5::digest(&bytes);
            Value::Text(digest.iter().map(|b| format!("{b:02x}")).collect())
        }
        F::Round | F::Trunc | F::Floor | F::Ceil => round(function, &values)?,
        F::Mod => match (&values[0], &values[1]) {
            (Value::Int(_), Value::Int(0)) => {
                return Err(SqlError::new(
                    sqlstate::DIVISION_BY_ZERO,
                    "division by zero",
                ))
            }
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_rem(*b).unwrap_or(0)),
            (a, b) => match (a.as_decimal(), b.as_decimal()) {
                (Some(a), Some(b)) => Value::Numeric(numeric::modulo(&a, &b)?),
                _ => return Err(wrong_argument(function)),
            },
        },
        F::Power => {
            let (base, exponent) = (float(&values[0])?, float(&values[1])?);
            if base == 0.0 && exponent < 0.0 {
                return Err(SqlError::new(
                    "2201F",
                    "zero raised to a negative power is undefined",
                ));
            }
            if base < 0.0 && exponent.fract() != 0.0 {
                return Err(SqlError::new(
                    "2201F",
                    "a negative number raised to a non-integer power yields a complex result",
                ));
            }
            let infinite = base.is_infinite() || exponent.is_infinite();
            float_result(base.powf(exponent), infinite, DataType::Float8)?
        }
        F::Sqrt => {
            let value = float(&values[0])?;
            if value < 0.0 {
                return Err(SqlError::new(
                    "2201F",
                    "cannot take square root of a negative number",
                ));
            }
            Value::Float(value.sqrt())
        }
        F::Random => Value::Float(random()),
        F::GenRandomUuid => Value::Text(crate::types::uuid::random()),
        F::Extract => crate::types::fields::extract(&text(0), &values[1])?,
        F::ToChar => crate::types::format::to_char(&values[0], &text(1))?,
        F::ToTimestamp => match &values[..] {
            [seconds] => crate::types::format::from_unix_seconds(float(seconds)?)?,
            _ => crate::types::format::to_timestamp(&text(0), &text(1))?,
        },
        F::ToDate => crate::types::format::to_date(&text(0), &text(1))?,
        F::ToNumber => crate::types::format::to_number(&text(0), &text(1))?,
        F::DateTrunc => match values.get(2) {
            None => crate::types::fields::truncate(&text(0), &values[1])?,
            Some(Value::Null) => Value::Null,
            Some(zone) => {
                let zone = named_zone(zone)?;
                let _in_zone = crate::types::zone::enter(std::sync::Arc::new(zone));
                crate::types::fields::truncate(&text(0), &values[1])?
            }
        },
        F::AtTimeZone => match (&values[0], &values[1]) {
            (Value::Null, _) | (_, Value::Null) => Value::Null,
            (zone, Value::TimestampTz(utc)) => Value::Timestamp(named_zone(zone)?.to_local(*utc)),
            (zone, Value::Timestamp(local)) => Value::TimestampTz(named_zone(zone)?.to_utc(*local)),
            (zone, Value::Date(days)) => {
                let midnight =
                    crate::types::zone::current().to_utc(datetime::date_to_timestamp(*days));
                Value::Timestamp(named_zone(zone)?.to_local(midnight))
            }
            (_, other) => {
                return Err(SqlError::mismatch(format!("{other:?} AT TIME ZONE")));
            }
        },
        F::Now => Value::TimestampTz(context.transaction_timestamp),
        // The wall-clock time and date of the transaction's start in the session's zone.
        F::LocalTimestamp => {
            Value::Timestamp(crate::types::zone::current().to_local(context.transaction_timestamp))
        }
        F::CurrentDate => Value::Date(datetime::timestamp_to_date(
            crate::types::zone::current().to_local(context.transaction_timestamp),
        )),
        F::ClockTimestamp => Value::TimestampTz(datetime::now_micros()),
        F::Version => Value::Text(crate::SERVER_VERSION_STRING.to_string()),
        F::CurrentDatabase => Value::Text(context.database_name.to_string()),
        F::CurrentSchema => Value::Text("public".into()),
        F::CurrentUser => Value::Text(context.user_name.to_string()),
        F::CurrentSetting => {
            let name = text(0).to_ascii_lowercase();
            let missing_ok = match values.get(1) {
                Some(Value::Bool(missing_ok)) => *missing_ok,
                _ => false,
            };
            let noted = context.setting_changes.and_then(|changes| {
                let changes = changes.borrow();
                changes
                    .iter()
                    .rev()
                    .find(|(n, _, _)| *n == name)
                    .map(|(_, v, _)| v.clone())
            });
            match noted.or_else(|| context.settings.and_then(|s| s.get(&name).cloned())) {
                Some(value) => Value::Text(value),
                None if missing_ok => Value::Null,
                None => {
                    return Err(SqlError::new(
                        sqlstate::UNDEFINED_OBJECT,
                        format!("unrecognized configuration parameter \"{name}\""),
                    ))
                }
            }
        }
        F::SetConfig => {
            let name = text(0).to_ascii_lowercase();
            let mut value = values[1].to_text().unwrap_or_default();
            check_settable(&name)?;
            if name == "timezone" {
                value = crate::types::zone::Zone::setting(&value)?
                    .name()
                    .to_string();
            }
            let changes = context.setting_changes.ok_or_else(|| {
                SqlError::unsupported("set_config outside a statement of a session")
            })?;
            let local = values
                .get(2)
                .map(crate::types::truth)
                .transpose()?
                .unwrap_or(false);
            changes.borrow_mut().push((name, value.clone(), local));
            Value::Text(value)
        }
        F::BackendPid => {
            let pid = context
                .settings
                .and_then(|settings| settings.get(BACKEND_PID_SETTING))
                .and_then(|pid| pid.parse().ok())
                .unwrap_or(0);
            Value::Int(pid)
        }
        F::Coalesce
        | F::Concat
        | F::ConcatWs
        | F::NullIf
        | F::Greatest
        | F::Least
        | F::ExtremeByKey { .. }
        | F::Json { .. } => {
            unreachable!("handled above")
        }
    })
}

fn wrong_argument(function: ScalarFunction) -> SqlError {
    SqlError::new(
        sqlstate::DATATYPE_MISMATCH,
        format!("wrong argument type for {function:?}"),
    )
}

fn float(value: &Value) -> SqlResult<f64> {
    value
        .as_f64()
        .ok_or_else(|| SqlError::mismatch("a number is expected"))
}

/// substring(text from start for count), PostgreSQL's rules: positions before 1 count
/// toward the length but select nothing.
fn substring(source: &str, start: i64, count: Option<i64>) -> SqlResult<Value> {
    if count.is_some_and(|count| count < 0) {
        return Err(SqlError::new(
            "22011",
            "negative substring length not allowed",
        ));
    }
    let end = count.map(|count| start.saturating_add(count));
    let first = start.max(1) as usize - 1;
    let taken: String = match end {
        Some(end) if end <= 1 => String::new(),
        Some(end) => source
            .chars()
            .skip(first)
            .take(end as usize - 1 - first.min(end as usize - 1))
            .collect(),
        None => source.chars().skip(first).collect(),
    };
    Ok(Value::Text(taken))
}

/// greatest/least: NULLs ignored, NULL only if every argument is NULL.
fn extreme(function: ScalarFunction, values: Vec<Value>) -> SqlResult<Value> {
    let wanted = if function == ScalarFunction::Greatest {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    let mut best = Value::Null;
    for value in values.into_iter().filter(|v| !v.is_null()) {
        if best.is_null() || value.compare(&best)? == Some(wanted) {
            best = value;
        }
    }
    Ok(best)
}

/// greatest/least by sort keys: `args` are the values, then the key of a value as an
/// expression over column 0 (`Binder::order_key`), evaluated on each value once computed, so
/// each argument is evaluated once; NULL values are ignored.
fn extreme_by_key(
    greatest: bool,
    args: &[Expr],
    row: &[Value],
    context: &EvalContext,
) -> SqlResult<Value> {
    let Some((key_of, values)) = args.split_last() else {
        return Ok(Value::Null);
    };
    let wanted = if greatest {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    let mut best: Option<(Value, Value)> = None;
    for arg in values {
        let value = arg.eval(row, context)?;
        if value.is_null() {
            continue;
        }
        let key = key_of.eval(std::slice::from_ref(&value), context)?;
        let better = match &best {
            None => true,
            Some((_, best_key)) => key.sort_order(best_key) == wanted,
        };
        if better {
            best = Some((value, key));
        }
    }
    Ok(best.map_or(Value::Null, |(value, _)| value))
}

/// round/trunc/floor/ceil of a numeric (with an optional scale) or a float.
fn round(function: ScalarFunction, values: &[Value]) -> SqlResult<Value> {
    use ScalarFunction as F;
    let scale = match values.get(1) {
        Some(Value::Int(scale)) => (*scale).clamp(-1000, 1000) as i32,
        Some(_) => return Err(wrong_argument(function)),
        None => 0,
    };
    Ok(match &values[0] {
        Value::Numeric(v) => Value::Numeric(match function {
            F::Round => numeric::round(v, scale),
            F::Trunc => numeric::trunc(v, scale),
            F::Floor => v.floor(),
            _ => v.ceil(),
        }),
        value => {
            let v = float(value)?;
            let result = match function {
                // PostgreSQL's round(float8) rounds half to even (rint).
                F::Round => v.round_ties_even(),
                F::Trunc => v.trunc(),
                F::Floor => v.floor(),
                _ => v.ceil(),
            };
            Value::Float(result)
        }
    })
}

/// random(): a uniform float in [0, 1) from a per-thread xorshift generator seeded by the
/// clock and the thread (not cryptographic, as PostgreSQL's is not).
fn random() -> f64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x9E37_79B9_7F4A_7C15);
            let thread = &nanos as *const u64 as u64;
            (nanos ^ thread.rotate_left(32)) | 1
        });
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// The zone AT TIME ZONE or date_trunc names: a name, abbreviation or POSIX string, or an
/// interval (hours east, ISO's sign).
fn named_zone(zone: &Value) -> SqlResult<crate::types::zone::Zone> {
    use crate::types::zone::Zone;
    match zone {
        Value::Interval(interval) if interval.months == 0 && interval.days == 0 => {
            let seconds = interval.micros / datetime::MICROS_PER_SECOND;
            Zone::fixed(i32::try_from(seconds).unwrap_or(i32::MAX))
        }
        Value::Interval(_) => Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            "interval time zone must not include months or days",
        )),
        other => Zone::at(&other.to_text().unwrap_or_default()),
    }
}

/// The elements of an array in its text form (22P02 if it is none).
fn array_elements(text: &str) -> SqlResult<Vec<Option<String>>> {
    crate::system::array::parse(text).ok_or_else(|| {
        SqlError::new(
            sqlstate::INVALID_TEXT_REPRESENTATION,
            format!("malformed array literal: \"{text}\""),
        )
    })
}

/// The memcomparable order key of an array in its text form (`ScalarFunction::ArrayOrder`):
/// per element 1 and the element's key (2 for NULL), then 0.
fn array_order(text: &str, integers: bool) -> SqlResult<Vec<u8>> {
    let elements = array_elements(text)?;
    let mut key = Vec::with_capacity(text.len() + 8);
    for element in elements {
        let Some(element) = element else {
            key.push(2);
            continue;
        };
        key.push(1);
        let (value, data_type) = match integers {
            true => (Value::parse(&element, DataType::Int8)?, DataType::Int8),
            false => (Value::Text(element), DataType::Text),
        };
        crate::encoding::key::encode_column(&mut key, &value, data_type)?;
    }
    key.push(0);
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substring_follows_postgres() {
        let text = |v: Value| v.to_text().unwrap();
        assert_eq!(text(substring("hello", 2, Some(3)).unwrap()), "ell");
        assert_eq!(text(substring("hello", 0, Some(3)).unwrap()), "he");
        assert_eq!(text(substring("hello", -5, Some(3)).unwrap()), "");
        assert_eq!(text(substring("hello", 3, None).unwrap()), "llo");
        assert_eq!(text(substring("héllo", 2, Some(1)).unwrap()), "é");
        assert!(substring("x", 1, Some(-1)).is_err());
    }

    #[test]
    fn random_is_in_range() {
        for _ in 0..1000 {
            let value = random();
            assert!((0.0..1.0).contains(&value));
        }
    }
}

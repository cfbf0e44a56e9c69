//! Sequences as PostgreSQL users see them: the implicit sequence of a SERIAL or identity
//! column (`<table>_<column>_seq`) and those of CREATE SEQUENCE, read through nextval,
//! currval, setval and lastval.
//!
//! A sequence's durable state is one row of the engine table `sql.sequence`, keyed by its
//! name: the next value no open of the database has handed out yet. nextval:
//! 1. When the values reserved in memory are used up (or after open), reserve up to
//!    `SEQUENCE_BATCH` more: move the row past them in a transaction of its own and commit
//!    it before handing out the first one.
//! 2. Hand out the reserved values from memory, one per call.
//! 3. A crash loses what was left of the batch: values are skipped, never handed out twice.
//!
//! The row is never written by a user's transaction, so a rollback gives no value back, as
//! in PostgreSQL. setval writes the row the same way and drops the reserved values.
//!
//! Row format (little-endian), by length:
//! - 8 bytes: i64 next value. A column's sequence; its options follow from the column type.
//! - format 3: u8 3, i64 next value, i64 increment, i64 minimum, i64 maximum, i64 start,
//!   i64 cache, u8 data type tag (`DataType::tag`), u8 flags (1: CYCLE; 2: called, the
//!   value before the next one was handed out: PostgreSQL's is_called), then the name of
//!   its engine tree (u32 length + UTF-8), then, if it is OWNED BY a column, that table's and
//!   column's names (rows without them are owned by nothing). A CREATE SEQUENCE sequence;
//!   the (empty) engine tree gives it a stable oid (`system` module comment) and is dropped
//!   with it. Format 2 is the same without the flags byte (NO CYCLE); it is still read.
//!   Without the called flag (format 2 and column sequences) a sequence counts as called
//!   once its next value is not its start.
//!
//! CYCLE: a sequence past its maximum (minimum, descending) starts again at its minimum
//! (maximum). ALTER SEQUENCE changes the options and, with RESTART, the next value: written
//! durably at once, the reserved values dropped.
//!
//! currval and lastval are per session (`SessionSequences`), kept by the session that calls.

use std::collections::HashMap;

use hayate_engine::{Database, TreeId};
use parking_lot::Mutex;

use super::reader::Reader;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::DataType;

/// Sequence values reserved per durable write: at most this many are skipped by a crash.
const SEQUENCE_BATCH: i64 = 1024;
const FORMAT_VERSION: u8 = 3;
/// The format before CYCLE (no flags byte): read, never written.
const FORMAT_WITHOUT_CYCLE: u8 = 2;
/// Flags of format 3.
const FLAG_CYCLE: u8 = 1;
const FLAG_CALLED: u8 = 2;

/// What CREATE SEQUENCE sets (PostgreSQL's defaults for a column sequence otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceOptions {
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    pub start: i64,
    /// Accepted and shown; values are reserved in batches of `SEQUENCE_BATCH` anyway.
    pub cache: i64,
    /// smallint, integer or bigint: bounds the default MINVALUE/MAXVALUE.
    pub data_type: DataType,
    /// Past its last value the sequence starts again from the other end.
    pub cycle: bool,
}

/// The options a CREATE or ALTER SEQUENCE names (None: not named). `min` and `max` are
/// `Some(None)` for NO MINVALUE / NO MAXVALUE (the default for the type and direction).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SequenceChanges {
    pub data_type: Option<DataType>,
    pub increment: Option<i64>,
    pub min: Option<Option<i64>>,
    pub max: Option<Option<i64>>,
    pub start: Option<i64>,
    pub cache: Option<i64>,
    pub cycle: Option<bool>,
}

impl SequenceOptions {
    /// The sequence of a SERIAL/identity column of this integer type: 1, 2, ... up to the
    /// type's largest value.
    pub fn for_column(data_type: DataType) -> SequenceOptions {
        SequenceOptions {
            increment: 1,
            min: 1,
            max: type_max(data_type),
            start: 1,
            cache: 1,
            data_type,
            cycle: false,
        }
    }

    /// CREATE SEQUENCE's options, defaults filled in and checked as PostgreSQL does.
    pub fn new(changes: SequenceChanges) -> SqlResult<SequenceOptions> {
        let data_type = changes.data_type.unwrap_or(DataType::Int8);
        let increment = changes.increment.unwrap_or(1);
        let (min, max) = default_bounds(data_type, increment);
        SequenceOptions {
            increment,
            min: changes.min.flatten().unwrap_or(min),
            max: changes.max.flatten().unwrap_or(max),
            start: 0,
            cache: changes.cache.unwrap_or(1),
            data_type,
            cycle: changes.cycle.unwrap_or(false),
        }
        .checked(changes.start)
    }

    /// ALTER SEQUENCE's options: these with `changes` applied, as PostgreSQL does (a bound
    /// that was the old type's default follows a new type; NO MINVALUE / NO MAXVALUE give
    /// the default), checked.
    pub fn altered(&self, changes: SequenceChanges) -> SqlResult<SequenceOptions> {
        let data_type = changes.data_type.unwrap_or(self.data_type);
        let increment = changes.increment.unwrap_or(self.increment);
        let (old_min, old_max) = (-type_max(self.data_type) - 1, type_max(self.data_type));
        let (min, max) = default_bounds(data_type, increment);
        let min = match changes.min {
            Some(min_value) => min_value.unwrap_or(min),
            None if changes.data_type.is_some() && self.min == old_min => min,
            None => self.min,
        };
        let max = match changes.max {
            Some(max_value) => max_value.unwrap_or(max),
            None if changes.data_type.is_some() && self.max == old_max => max,
            None => self.max,
        };
        SequenceOptions {
            increment,
            min,
            max,
            start: self.start,
            cache: changes.cache.unwrap_or(self.cache),
            data_type,
            cycle: changes.cycle.unwrap_or(self.cycle),
        }
        .checked(Some(changes.start.unwrap_or(self.start)))
    }

    /// These options with `start` (None: the first value in the direction), checked.
    fn checked(self, start: Option<i64>) -> SqlResult<SequenceOptions> {
        let invalid = |message: String| SqlError::new(sqlstate::INVALID_PARAMETER_VALUE, message);
        let SequenceOptions {
            increment,
            min,
            max,
            cache,
            data_type,
            ..
        } = self;
        if increment == 0 {
            return Err(invalid("INCREMENT must not be zero".into()));
        }
        let (type_min, type_max) = (-type_max(data_type) - 1, type_max(data_type));
        for (name, value) in [("MINVALUE", min), ("MAXVALUE", max)] {
            if value < type_min || value > type_max {
                return Err(invalid(format!(
                    "{name} ({value}) is out of range for sequence data type {data_type}"
                )));
            }
        }
        if min >= max {
            return Err(invalid(format!(
                "MINVALUE ({min}) must be less than MAXVALUE ({max})"
            )));
        }
        let start = start.unwrap_or(if increment > 0 { min } else { max });
        if start < min {
            return Err(invalid(format!(
                "START value ({start}) cannot be less than MINVALUE ({min})"
            )));
        }
        if start > max {
            return Err(invalid(format!(
                "START value ({start}) cannot be greater than MAXVALUE ({max})"
            )));
        }
        if cache < 1 {
            return Err(invalid(format!(
                "CACHE ({cache}) must be greater than zero"
            )));
        }
        Ok(SequenceOptions { start, ..self })
    }

    /// Where a sequence past its last value starts again (CYCLE).
    fn wrap_value(&self) -> i64 {
        if self.increment > 0 {
            self.min
        } else {
            self.max
        }
    }
}

/// MINVALUE and MAXVALUE when not given: 1 up to the type's largest ascending, the type's
/// smallest up to -1 descending.
fn default_bounds(data_type: DataType, increment: i64) -> (i64, i64) {
    let (type_min, type_max) = (-type_max(data_type) - 1, type_max(data_type));
    if increment > 0 {
        (1, type_max)
    } else {
        (type_min, -1)
    }
}

fn type_max(data_type: DataType) -> i64 {
    match data_type {
        DataType::Int2 => i16::MAX as i64,
        DataType::Int4 => i32::MAX as i64,
        _ => i64::MAX,
    }
}

/// The values reserved in memory: `left` of them, the first being `next`.
#[derive(Debug, Clone, Copy)]
struct Reserved {
    next: i64,
    left: i64,
}

/// A sequence (see the module comment).
pub struct Sequence {
    pub name: String,
    /// Changed by ALTER SEQUENCE (under `reserved`'s lock).
    options: Mutex<SequenceOptions>,
    /// A CREATE SEQUENCE sequence's engine tree (name, id); None for a column's sequence.
    pub tree: Option<(String, TreeId)>,
    db: Database,
    /// The engine table holding every sequence's row (`sql.sequence`).
    state_tree: TreeId,
    reserved: Mutex<Reserved>,
    /// ALTER SEQUENCE ... OWNED BY table.column (a CREATE SEQUENCE sequence only).
    owner: Mutex<Option<(String, String)>>,
}

impl std::fmt::Debug for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequence")
            .field("name", &self.name)
            .finish()
    }
}

impl Sequence {
    pub(crate) fn new(
        name: String,
        options: SequenceOptions,
        tree: Option<(String, TreeId)>,
        db: Database,
        state_tree: TreeId,
    ) -> Sequence {
        Sequence {
            name,
            options: Mutex::new(options),
            tree,
            db,
            state_tree,
            reserved: Mutex::new(Reserved { next: 0, left: 0 }),
            owner: Mutex::new(None),
        }
    }

    /// The sequence's options now.
    pub fn options(&self) -> SequenceOptions {
        *self.options.lock()
    }

    /// The (table, column) the sequence is OWNED BY.
    pub fn owner(&self) -> Option<(String, String)> {
        self.owner.lock().clone()
    }

    /// Sets the owner in memory (the row is read or written by the caller).
    pub(crate) fn set_owner_in_memory(&self, owner: Option<(String, String)>) {
        *self.owner.lock() = owner;
    }

    /// ALTER SEQUENCE ... OWNED BY: written durably at once, the next value kept.
    pub fn set_owner(&self, owner: Option<(String, String)>) -> SqlResult<()> {
        let _reserved = hayate_engine::fiber::lock(&self.reserved);
        let mut txn = self.db.begin();
        let stored = txn
            .get_for_update(self.state_tree, self.name.as_bytes())?
            .and_then(|bytes| decode_state(&bytes));
        let options = self.options();
        let (next, called) = self.stored_state(stored, &options);
        *self.owner.lock() = owner;
        self.write_row(&mut txn, next, &options, called)?;
        txn.commit()?;
        Ok(())
    }

    /// Writes the sequence's row: `next`, `options`, and whether the value before `next` was
    /// handed out.
    fn write_row(
        &self,
        txn: &mut hayate_engine::Transaction,
        next: i64,
        options: &SequenceOptions,
        called: bool,
    ) -> SqlResult<()> {
        let row = self.encode(next, options, called);
        Ok(txn.put(self.state_tree, self.name.as_bytes(), &row)?)
    }

    fn corrupt(&self) -> SqlError {
        SqlError::new(
            sqlstate::DATA_CORRUPTED,
            format!("corrupt sequence \"{}\"", self.name),
        )
    }

    /// The next value and whether the one before it was handed out, from the stored row's
    /// state (None: no row yet, the start).
    fn stored_state(
        &self,
        stored: Option<(i64, Option<bool>)>,
        options: &SequenceOptions,
    ) -> (i64, bool) {
        match stored {
            None => (options.start, false),
            Some((next, called)) => (next, called.unwrap_or(next != options.start)),
        }
    }

    /// The row that stores the sequence with `next` as its next value, `options`, and
    /// whether the value before `next` was handed out.
    pub(crate) fn encode(&self, next: i64, options: &SequenceOptions, called: bool) -> Vec<u8> {
        let Some((tree, _)) = &self.tree else {
            return next.to_le_bytes().to_vec();
        };
        let mut out = vec![FORMAT_VERSION];
        for value in [
            next,
            options.increment,
            options.min,
            options.max,
            options.start,
            options.cache,
        ] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.push(options.data_type.tag());
        let cycle = if options.cycle { FLAG_CYCLE } else { 0 };
        out.push(cycle | if called { FLAG_CALLED } else { 0 });
        out.extend_from_slice(&(tree.len() as u32).to_le_bytes());
        out.extend_from_slice(tree.as_bytes());
        if let Some((table, column)) = &*self.owner.lock() {
            for name in [table, column] {
                out.extend_from_slice(&(name.len() as u32).to_le_bytes());
                out.extend_from_slice(name.as_bytes());
            }
        }
        out
    }

    /// nextval: the next value, noted in the session's currval/lastval if there is one.
    pub fn next_value(&self, session: Option<&SessionSequences>) -> SqlResult<i64> {
        let value = {
            let mut reserved = hayate_engine::fiber::lock(&self.reserved);
            if reserved.left == 0 {
                *reserved = self.reserve()?;
            }
            let value = reserved.next;
            reserved.left -= 1;
            if reserved.left > 0 {
                // Inside the reserved range, so it cannot overflow.
                reserved.next += self.options().increment;
            }
            value
        };
        if let Some(session) = session {
            session.note(&self.name, value, true);
        }
        Ok(value)
    }

    /// Reserves the next batch by a durable write of the row past it.
    fn reserve(&self) -> SqlResult<Reserved> {
        let options = &self.options();
        let mut txn = self.db.begin();
        let mut stored = match txn.get_for_update(self.state_tree, self.name.as_bytes())? {
            Some(bytes) => decode_next(&bytes).ok_or_else(|| self.corrupt())?,
            None => options.start,
        };
        let increment = options.increment as i128;
        let available = |stored: i64| {
            let stored = stored as i128;
            if increment > 0 {
                (options.max as i128 - stored).div_euclid(increment) + 1
            } else {
                (stored - options.min as i128).div_euclid(-increment) + 1
            }
        };
        // Past the last value a CYCLE sequence starts again from the other end.
        if available(stored) <= 0 && options.cycle {
            stored = options.wrap_value();
        }
        let stored_wide = stored as i128;
        let available = available(stored);
        // The row must hold the value after the batch, so the batch stops where it would
        // leave i64 (only a sequence that runs to i64's end loses its last value).
        let mut count = available.clamp(0, SEQUENCE_BATCH as i128);
        // A CYCLE batch that runs to a bound at i64's end stores where the cycle starts
        // again: the value past the bound does not fit.
        let wraps = options.cycle
            && count > 0
            && count == available
            && i64::try_from(stored_wide + count * increment).is_err();
        while !wraps && count > 0 && i64::try_from(stored_wide + count * increment).is_err() {
            count -= 1;
        }
        if count == 0 {
            let (which, bound) = if increment > 0 {
                ("maximum", options.max)
            } else {
                ("minimum", options.min)
            };
            return Err(SqlError::new(
                sqlstate::SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                format!(
                    "nextval: reached {which} value of sequence \"{}\" ({bound})",
                    self.name
                ),
            ));
        }
        let end = if wraps {
            options.wrap_value()
        } else {
            (stored_wide + count * increment) as i64
        };
        // After a wrap the row holds the cycle's first value, not yet handed out: as
        // (value, false) it shows, and dumps, the next value right.
        self.write_row(&mut txn, end, options, !wraps)?;
        txn.commit()?;
        Ok(Reserved {
            next: stored,
            left: count as i64,
        })
    }

    /// The sequence's position as PostgreSQL shows it (`last_value`, `is_called` of
    /// `SELECT ... FROM s`; pg_sequence_last_value is the value if called, else NULL): the
    /// last value handed out and true, or the next value and false if none was since it
    /// (re)started. `setval(value, is_called)` on a copy makes it go on where this one does.
    pub fn last_value(&self) -> SqlResult<(i64, bool)> {
        let reserved = hayate_engine::fiber::lock(&self.reserved);
        let options = self.options();
        let (next, called) = self.current_state(&reserved, &options)?;
        Ok(if called {
            (next - options.increment, true)
        } else {
            (next, false)
        })
    }

    /// The next value and whether the one before it was handed out: the reserved values in
    /// memory, else the stored row (under `reserved`'s lock).
    fn current_state(
        &self,
        reserved: &Reserved,
        options: &SequenceOptions,
    ) -> SqlResult<(i64, bool)> {
        let mut row = None;
        if reserved.left == 0 {
            let txn = self.db.begin_read_only();
            row = txn.get(self.state_tree, self.name.as_bytes())?;
            txn.abort();
        }
        self.state_of(reserved, options, row)
    }

    /// `current_state` with the stored row already read (`row`).
    fn state_of(
        &self,
        reserved: &Reserved,
        options: &SequenceOptions,
        row: Option<Vec<u8>>,
    ) -> SqlResult<(i64, bool)> {
        if reserved.left > 0 {
            return Ok((reserved.next, true));
        }
        let stored = row
            .map(|bytes| decode_state(&bytes).ok_or_else(|| self.corrupt()))
            .transpose()?;
        Ok(self.stored_state(stored, options))
    }

    /// ALTER SEQUENCE: new options and, with `restart`, the next value (`Some(None)`: the
    /// start). Without it the sequence goes on from the last value handed out, by the new
    /// increment. Written durably at once; the values reserved in memory are dropped.
    pub fn alter(&self, options: SequenceOptions, restart: Option<Option<i64>>) -> SqlResult<()> {
        let mut reserved = hayate_engine::fiber::lock(&self.reserved);
        let old = self.options();
        let mut txn = self.db.begin();
        // The row, locked for the write.
        let row = txn.get_for_update(self.state_tree, self.name.as_bytes())?;
        let (next, called) = self.state_of(&reserved, &old, row)?;
        // The restart value, or the sequence's last_value (the last value handed out, or
        // the next one if none was), must lie within the new bounds, as PostgreSQL checks.
        let last = called.then(|| next - old.increment);
        let current = restart.map_or(last.unwrap_or(next), |value| value.unwrap_or(options.start));
        let invalid = |message: String| SqlError::new(sqlstate::INVALID_PARAMETER_VALUE, message);
        if current < options.min {
            return Err(invalid(format!(
                "RESTART value ({current}) cannot be less than MINVALUE ({})",
                options.min
            )));
        }
        if current > options.max {
            return Err(invalid(format!(
                "RESTART value ({current}) cannot be greater than MAXVALUE ({})",
                options.max
            )));
        }
        let (next, called) = match (restart, last) {
            (Some(_), _) => (current, false),
            // The new step from the last value handed out.
            (None, Some(last)) => {
                let stepped = last.checked_add(options.increment).ok_or_else(|| {
                    SqlError::new(
                        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                        format!(
                            "the next value of sequence \"{}\" would leave bigint",
                            self.name
                        ),
                    )
                })?;
                (stepped, true)
            }
            (None, None) => (next, false),
        };
        self.write_row(&mut txn, next, &options, called)?;
        txn.commit()?;
        *self.options.lock() = options;
        *reserved = Reserved { next, left: 0 };
        Ok(())
    }

    /// setval(value, is_called): the next nextval returns `value` (is_called false) or the
    /// one after it. Written durably at once; with is_called it is the session's currval.
    pub fn set_value(
        &self,
        value: i64,
        is_called: bool,
        session: Option<&SessionSequences>,
    ) -> SqlResult<i64> {
        // The options under the lock ALTER SEQUENCE changes them under: a concurrent ALTER
        // is either before this (its bounds checked here) or after (it sees this value).
        let mut reserved = hayate_engine::fiber::lock(&self.reserved);
        let options = &self.options();
        if value < options.min || value > options.max {
            return Err(SqlError::new(
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "setval: value {value} is out of bounds for sequence \"{}\" ({}..{})",
                    self.name, options.min, options.max
                ),
            ));
        }
        let next = if is_called {
            value.checked_add(options.increment).ok_or_else(|| {
                SqlError::new(
                    sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                    format!(
                        "setval: value {value} is the last of sequence \"{}\"",
                        self.name
                    ),
                )
            })?
        } else {
            value
        };
        let mut txn = self.db.begin();
        txn.get_for_update(self.state_tree, self.name.as_bytes())?;
        self.write_row(&mut txn, next, options, is_called)?;
        txn.commit()?;
        *reserved = Reserved { next, left: 0 };
        drop(reserved);
        if let (true, Some(session)) = (is_called, session) {
            session.note(&self.name, value, false);
        }
        Ok(value)
    }
}

/// The next value of a stored row (any format).
fn decode_next(bytes: &[u8]) -> Option<i64> {
    decode_state(bytes).map(|(next, _)| next)
}

/// The next value of a stored row and, in format 3, whether the value before it was handed
/// out (`FLAG_CALLED`).
fn decode_state(bytes: &[u8]) -> Option<(i64, Option<bool>)> {
    let mut reader = Reader::new(bytes);
    if bytes.len() == 8 {
        return Some((reader.i64()?, None));
    }
    let format = reader.u8()?;
    if !matches!(format, FORMAT_VERSION | FORMAT_WITHOUT_CYCLE) {
        return None;
    }
    let next = reader.i64()?;
    if format == FORMAT_WITHOUT_CYCLE {
        return Some((next, None));
    }
    for _ in 0..5 {
        reader.i64()?;
    }
    reader.u8()?;
    Some((next, Some(reader.u8()? & FLAG_CALLED != 0)))
}

/// What a CREATE SEQUENCE sequence's row stores besides its next value.
pub(crate) struct StoredDefinition {
    pub options: SequenceOptions,
    pub tree: String,
    pub owner: Option<(String, String)>,
}

/// A CREATE SEQUENCE sequence as its row stores it; None for a column's sequence (8-byte
/// row).
pub(crate) fn decode_definition(bytes: &[u8]) -> Option<SqlResult<StoredDefinition>> {
    if bytes.len() == 8 {
        return None;
    }
    let corrupt = || SqlError::new(sqlstate::DATA_CORRUPTED, "corrupt sequence definition");
    let parse = || -> Option<StoredDefinition> {
        let mut reader = Reader::new(bytes);
        let format = reader.u8()?;
        if !matches!(format, FORMAT_VERSION | FORMAT_WITHOUT_CYCLE) {
            return None;
        }
        let _next = reader.i64()?;
        let (increment, min, max) = (reader.i64()?, reader.i64()?, reader.i64()?);
        let (start, cache) = (reader.i64()?, reader.i64()?);
        let data_type = DataType::from_tag(reader.u8()?, 0)?;
        let cycle = match format {
            FORMAT_VERSION => match reader.u8()? {
                flags if flags & !(FLAG_CYCLE | FLAG_CALLED) != 0 => return None,
                flags => flags & FLAG_CYCLE != 0,
            },
            _ => false,
        };
        let tree = reader.string()?;
        let options = SequenceOptions {
            increment,
            min,
            max,
            start,
            cache,
            data_type,
            cycle,
        };
        let owner = match reader.at_end() {
            true => None,
            false => Some((reader.string()?, reader.string()?)),
        };
        reader.at_end().then_some(StoredDefinition {
            options,
            tree,
            owner,
        })
    };
    Some(parse().ok_or_else(corrupt))
}

/// One session's currval (per sequence name) and lastval.
#[derive(Debug, Default)]
pub struct SessionSequences {
    state: Mutex<SessionState>,
}

#[derive(Debug, Default)]
struct SessionState {
    current: HashMap<String, i64>,
    /// The sequence nextval last drew from.
    last: Option<String>,
}

impl SessionSequences {
    fn note(&self, name: &str, value: i64, by_nextval: bool) {
        let mut state = self.state.lock();
        state.current.insert(name.to_string(), value);
        if by_nextval {
            state.last = Some(name.to_string());
        }
    }

    /// currval: the value nextval last returned for the sequence in this session.
    pub fn current(&self, name: &str) -> SqlResult<i64> {
        self.state.lock().current.get(name).copied().ok_or_else(|| {
            SqlError::new(
                sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("currval of sequence \"{name}\" is not yet defined in this session"),
            )
        })
    }

    /// lastval: the value of this session's latest nextval, whatever the sequence.
    pub fn last(&self) -> SqlResult<i64> {
        let state = self.state.lock();
        state
            .last
            .as_ref()
            .and_then(|name| state.current.get(name).copied())
            .ok_or_else(|| {
                SqlError::new(
                    sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
                    "lastval is not yet defined in this session",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_follow_postgresql_defaults_and_checks() {
        let up = SequenceOptions::new(SequenceChanges::default()).unwrap();
        assert_eq!(
            (up.min, up.max, up.start, up.cycle),
            (1, i64::MAX, 1, false)
        );
        let down = SequenceOptions::new(SequenceChanges {
            data_type: Some(DataType::Int4),
            increment: Some(-2),
            ..SequenceChanges::default()
        })
        .unwrap();
        assert_eq!((down.min, down.max, down.start), (i32::MIN as i64, -1, -1));
        let change = |edit: fn(&mut SequenceChanges)| {
            let mut changes = SequenceChanges::default();
            edit(&mut changes);
            changes
        };
        let bad = [
            change(|c| c.increment = Some(0)),
            change(|c| (c.min, c.max) = (Some(Some(5)), Some(Some(5)))),
            change(|c| (c.min, c.start) = (Some(Some(5)), Some(4))),
            change(|c| (c.data_type, c.max) = (Some(DataType::Int2), Some(Some(40000)))),
            change(|c| c.cache = Some(0)),
        ];
        for changes in bad {
            let error = SequenceOptions::new(changes).unwrap_err();
            assert_eq!(error.code, sqlstate::INVALID_PARAMETER_VALUE);
        }
    }

    #[test]
    fn altered_options_keep_what_is_not_named_and_follow_a_new_type() {
        let int4 = SequenceOptions::new(SequenceChanges {
            data_type: Some(DataType::Int4),
            ..SequenceChanges::default()
        })
        .unwrap();
        // AS bigint: the type's default maximum follows; a chosen one would stay.
        let widened = int4
            .altered(SequenceChanges {
                data_type: Some(DataType::Int8),
                cycle: Some(true),
                ..SequenceChanges::default()
            })
            .unwrap();
        assert_eq!(
            (widened.max, widened.min, widened.cycle),
            (i64::MAX, 1, true)
        );
        let capped = widened
            .altered(SequenceChanges {
                max: Some(Some(100)),
                increment: Some(5),
                ..SequenceChanges::default()
            })
            .unwrap();
        assert_eq!((capped.max, capped.increment, capped.cycle), (100, 5, true));
        // NO MAXVALUE gives the default again; a start past a new maximum is refused.
        let reset = capped
            .altered(SequenceChanges {
                max: Some(None),
                ..SequenceChanges::default()
            })
            .unwrap();
        assert_eq!(reset.max, i64::MAX);
        let error = capped
            .altered(SequenceChanges {
                min: Some(Some(10)),
                ..SequenceChanges::default()
            })
            .unwrap_err();
        assert_eq!(error.code, sqlstate::INVALID_PARAMETER_VALUE);
    }

    #[test]
    fn definitions_round_trip_and_reject_damage() {
        // A row of format 2 (before CYCLE) is still read.
        let bytes = {
            let mut out = vec![FORMAT_WITHOUT_CYCLE];
            for value in [7i64, 5, 1, 20, 10, 1] {
                out.extend_from_slice(&value.to_le_bytes());
            }
            out.push(DataType::Int8.tag());
            out.extend_from_slice(&3u32.to_le_bytes());
            out.extend_from_slice(b"abc");
            out
        };
        let stored = decode_definition(&bytes).unwrap().unwrap();
        assert_eq!(
            (
                stored.options.increment,
                stored.options.max,
                stored.tree.as_str()
            ),
            (5, 20, "abc")
        );
        assert_eq!(stored.owner, None);
        let mut owned = bytes.clone();
        for name in ["t", "id"] {
            owned.extend_from_slice(&(name.len() as u32).to_le_bytes());
            owned.extend_from_slice(name.as_bytes());
        }
        let stored = decode_definition(&owned).unwrap().unwrap();
        assert_eq!(stored.owner, Some(("t".into(), "id".into())));
        assert!(decode_definition(&owned[..owned.len() - 1])
            .unwrap()
            .is_err());
        assert_eq!(decode_next(&bytes), Some(7));
        assert!(decode_definition(&7i64.to_le_bytes()).is_none());
        for cut in 1..bytes.len() {
            if cut != 8 {
                assert!(decode_definition(&bytes[..cut]).unwrap().is_err(), "{cut}");
            }
        }
    }
}

//! FULL [OUTER] JOIN: every matching pair, then each left row without a match padded with
//! NULLs on the right, then each right row without a match padded with NULLs on the left.
//!
//! 1. The right input is held in memory with a matched flag per row, indexed by a hash of
//!    `right_keys` when the join has equalities (a row with a NULL key matches nothing).
//! 2. Left rows stream: each is joined with its candidates (the rows of its key, or all
//!    rows without keys) that satisfy `condition`; without any it is padded and passed.
//! 3. The right rows never matched are padded and passed at the end.

use std::collections::HashMap;

use super::run::{hash_key, Run, Sink};
use crate::error::SqlResult;
use crate::plan::expr::truth;
use crate::plan::{Expr, Relation};
use crate::types::Value;

/// The hash key of a row on `keys` (None: a key is NULL, which matches nothing).
fn key_of(run: &Run, keys: &[Expr], row: &[Value]) -> SqlResult<Option<Vec<u8>>> {
    let mut values = Vec::with_capacity(keys.len());
    for key in keys {
        let value = key.eval(row, &run.context())?;
        if value.is_null() {
            return Ok(None);
        }
        values.push(value);
    }
    Ok(Some(hash_key(&values)))
}

pub(super) fn produce(
    run: &Run,
    left: &Relation,
    right: &Relation,
    (left_keys, right_keys): (&[Expr], &[Expr]),
    condition: Option<&Expr>,
    sink: &mut Sink,
) -> SqlResult<bool> {
    let inner = run.collect(right, None)?;
    let mut matched = vec![false; inner.len()];
    let mut table: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
    if !right_keys.is_empty() {
        for (position, row) in inner.iter().enumerate() {
            if let Some(key) = key_of(run, right_keys, row)? {
                table.entry(key).or_default().push(position);
            }
        }
    }
    let every_row: Vec<usize> = if right_keys.is_empty() {
        (0..inner.len()).collect()
    } else {
        Vec::new()
    };
    let (left_width, right_width) = (left.width(), right.width());
    let mut stopped = false;
    run.produce(left, &mut |outer| {
        let candidates = if right_keys.is_empty() {
            every_row.as_slice()
        } else {
            key_of(run, left_keys, &outer)?
                .and_then(|key| table.get(&key))
                .map_or(&[][..], Vec::as_slice)
        };
        let mut any = false;
        for &position in candidates {
            let mut joined = outer.clone();
            joined.extend(inner[position].iter().cloned());
            if let Some(condition) = condition {
                if !truth(&condition.eval(&joined, &run.context())?)? {
                    continue;
                }
            }
            any = true;
            matched[position] = true;
            if !sink(joined)? {
                stopped = true;
                return Ok(false);
            }
        }
        if !any {
            let mut padded = outer;
            padded.resize_with(left_width + right_width, || Value::Null);
            if !sink(padded)? {
                stopped = true;
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    if stopped {
        return Ok(false);
    }
    for (row, matched) in inner.into_iter().zip(matched) {
        if matched {
            continue;
        }
        let mut padded = vec![Value::Null; left_width];
        padded.extend(row);
        if !sink(padded)? {
            return Ok(false);
        }
    }
    Ok(true)
}

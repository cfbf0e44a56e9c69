//! INTERSECT and EXCEPT [ALL]: the right input is counted into a hash table (rows compared
//! as DISTINCT compares them, NULLs equal), then the left input streams through it.
//!
//! - INTERSECT: a left row is passed once if it occurs on the right;
//! - INTERSECT ALL: a left row is passed as often as it occurs on both sides (min of counts);
//! - EXCEPT: a left row is passed once if it does not occur on the right;
//! - EXCEPT ALL: a left row is passed as often as it occurs on the left beyond its count on
//!   the right.
//!
//! The right side is held in memory (as the build side of a hash join is).

use std::collections::{HashMap, HashSet};

use super::run::{hash_key, Run, Sink};
use crate::error::SqlResult;
use crate::plan::{Relation, SetOperator};

pub(super) fn produce(
    run: &Run,
    left: &Relation,
    right: &Relation,
    operator: SetOperator,
    all: bool,
    sink: &mut Sink,
) -> SqlResult<bool> {
    let mut right_counts: HashMap<Vec<u8>, u64> = HashMap::new();
    run.produce(right, &mut |row| {
        *right_counts.entry(hash_key(&row)).or_default() += 1;
        Ok(true)
    })?;
    // Rows already passed (the forms without ALL pass each row once).
    let mut passed: HashSet<Vec<u8>> = HashSet::new();
    run.produce(left, &mut |row| {
        let key = hash_key(&row);
        let count = right_counts.get_mut(&key);
        let keep = match (operator, all) {
            (SetOperator::Intersect, true) => match count {
                Some(count) if *count > 0 => {
                    *count -= 1;
                    true
                }
                _ => false,
            },
            (SetOperator::Except, true) => match count {
                Some(count) if *count > 0 => {
                    *count -= 1;
                    false
                }
                _ => true,
            },
            (SetOperator::Intersect, false) => count.is_some() && passed.insert(key),
            (SetOperator::Except, false) => count.is_none() && passed.insert(key),
        };
        if keep {
            sink(row)
        } else {
            Ok(true)
        }
    })
}

//! Spilling: the operators that hold their input (Sort, the merge join's inputs, the hash join's
//! build side, Aggregate and Distinct) keep it in memory up to the session's `work_mem`, then
//! move it to the engine's temporary space (`hayate_engine::temp`: files on the SSD written
//! and read through the engine's I/O layer, removed when dropped or at the next open).
//!
//! 1. Memory is an estimate, not an allocator count: a row costs `row_bytes` (its `Value`
//!    slots, the heap bytes of its text and bytea values and a fixed overhead), a hash table
//!    entry its key bytes plus `ENTRY_OVERHEAD_BYTES` on top. The temporary space's own block
//!    buffers (64 KiB per open run or partition, `READ_AHEAD` blocks per run being read) are
//!    not counted against `work_mem`; they are bounded by `MERGE_FAN_IN` and `FAN_OUT_MAX`.
//! 2. Sort (`SortBuffer`): rows are buffered with their sort keys; past `work_mem` the buffer
//!    is sorted (stably) and written as a run. `finish` merges the runs, at most
//!    `MERGE_FAN_IN` at once (in passes when there are more), a tie going to the earlier run,
//!    so the order is exactly the in-memory stable sort's.
//! 3. Hash join (`JoinBuild`): the build side is a hash table; past `work_mem` it and the probe
//!    side go to `FAN_OUT` partitions by key hash (a Grace hash join) and each partition pair
//!    is joined in turn, partitioned again (with another hash, into as many partitions as its
//!    size asks for, `fan_out`) while its build side is still too large, down to `LEVEL_MAX`.
//!    Rows come out partition by partition.
//! 4. Aggregate (`Aggregate`) and Distinct (`Distinct`): groups and seen keys stay in memory up
//!    to `work_mem`; past it, rows whose key is already in memory are still handled there and
//!    rows with a new key go to partitions by key hash, each handled the same way afterwards.
//!    Distinct tags a spilled row with its input position and sorts the survivors back into
//!    input order, so its output (and a DISTINCT ON over sorted rows) is the in-memory one.
//!
//! Runs hold rows in a self-describing encoding (`encode_row`: a tag per value), since an
//! operator's rows carry no column types.
//!
//! The folder: `row` (a row's memory estimate and its temporary encoding), `sort` (Sort and
//! the merge join's inputs), `join` (the hash join's build side) and `group` (Aggregate and
//! Distinct); this file holds the limits, `work_mem` and the partitioning they share.

mod group;
mod join;
pub(super) mod row;
mod sort;

use std::hash::{Hash, Hasher};

use hayate_engine::{Partitioner, TempRun, TempSpace};

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::Value;
use row::encode_row;

pub use group::{Aggregate, Distinct};
pub use join::{Built, JoinBuild};
pub use sort::{MatchingGroups, SortBuffer, SortedRows};

pub use crate::settings::WORK_MEM_DEFAULT;
/// PostgreSQL's limits of `work_mem`, in kB.
const WORK_MEM_KB_MIN: u64 = 64;
const WORK_MEM_KB_MAX: u64 = i32::MAX as u64;
/// What a hash table entry costs beyond its key bytes and row.
pub(super) const ENTRY_OVERHEAD_BYTES: usize = 48;
/// Runs merged at once.
pub(super) const MERGE_FAN_IN: usize = 16;
/// Partitions of the first spill of a hash join, aggregation or distinct (its input's size is
/// not known yet).
pub(super) const FAN_OUT: usize = 8;
/// Partitions of a partition that spills again, at most.
pub(super) const FAN_OUT_MAX: usize = 64;
/// Levels of partitioning before a partition is kept in memory however large it is (many
/// rows of one key cannot be split by hashing).
pub(super) const LEVEL_MAX: u32 = 4;

/// Bytes of a memory setting as PostgreSQL writes them ("64kB", "4MB", "1GB", "512B"; a
/// bare number is kB), or None if it is not one.
pub fn memory_size_bytes(text: &str) -> Option<u64> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit_bytes: u64 = match unit.trim() {
        "B" => 1,
        "" | "kB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => return None,
    };
    number.checked_mul(unit_bytes)
}

/// A memory setting as PostgreSQL shows it: in the largest unit that divides it exactly
/// ("128MB", "6GB", "8200kB"; bytes only below a kB or when no unit divides them).
pub fn memory_size_text(bytes: u64) -> String {
    let units = [
        ("TB", 1u64 << 40),
        ("GB", 1 << 30),
        ("MB", 1 << 20),
        ("kB", 1 << 10),
    ];
    for (unit, unit_bytes) in units {
        if bytes >= unit_bytes && bytes.is_multiple_of(unit_bytes) {
            return format!("{}{unit}", bytes / unit_bytes);
        }
    }
    format!("{bytes}B")
}

/// Bytes of `work_mem` ("64kB", "4MB", "1GB"; a bare number is kB), as PostgreSQL reads it.
pub fn parse_work_mem(text: &str) -> SqlResult<usize> {
    let bytes = memory_size_bytes(text).ok_or_else(|| {
        SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"work_mem\": \"{text}\""),
        )
        .with_detail(
            "Valid units for this parameter are \"B\", \"kB\", \"MB\", \"GB\", and \"TB\".",
        )
    })?;
    let kb = bytes / 1024;
    if !(WORK_MEM_KB_MIN..=WORK_MEM_KB_MAX).contains(&kb) {
        return Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!(
                "{kb} kB is outside the valid range for parameter \"work_mem\" \
                 ({WORK_MEM_KB_MIN} kB .. {WORK_MEM_KB_MAX} kB)"
            ),
        ));
    }
    Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
}

/// A new run: a one-partition `Partitioner` is a plain run writer with 64 KiB blocks.
pub(super) fn new_run(space: &TempSpace) -> SqlResult<Partitioner> {
    Ok(space.partitioner(1)?)
}

/// The run a one-partition `Partitioner` wrote.
pub(super) fn finish_run(writer: Partitioner) -> SqlResult<TempRun> {
    let mut runs = writer.finish()?;
    Ok(runs.pop().expect("one partition"))
}

/// The partition hash of a key at a level of partitioning (each level hashes differently, so
/// a partition splits again). Deterministic: `DefaultHasher::new` has fixed keys.
pub(super) fn partition_hash(level: u32, key: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    level.hash(&mut hasher);
    key.hash(&mut hasher);
    hasher.finish()
}

pub(super) fn partitions(space: &TempSpace, fan_out: usize) -> SqlResult<Partitioner> {
    Ok(space.partitioner(fan_out)?)
}

/// Partitions for a partition of `run_bytes` that spills again: enough for each to fit in
/// `work_mem` (a row takes about four times its encoded size in memory), 8 to `FAN_OUT_MAX`.
pub(super) fn fan_out(run_bytes: u64, work_mem_bytes: usize) -> usize {
    let needed = run_bytes.saturating_mul(4) / work_mem_bytes.max(1) as u64;
    (needed as usize).clamp(FAN_OUT, FAN_OUT_MAX)
}

/// Sends a row to its key's partition.
pub(super) fn push_partitioned(
    partitions: &mut Partitioner,
    level: u32,
    key: &[u8],
    row: &[Value],
) -> SqlResult<()> {
    let mut value = Vec::new();
    encode_row(&mut value, row);
    Ok(partitions.push(partition_hash(level, key), key, &value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_mem_reads_as_postgresql_reads_it() {
        assert_eq!(parse_work_mem("64kB").unwrap(), 64 << 10);
        assert_eq!(parse_work_mem("4MB").unwrap(), 4 << 20);
        assert_eq!(parse_work_mem("4096").unwrap(), 4 << 20);
        assert_eq!(parse_work_mem("1GB").unwrap(), 1 << 30);
        assert_eq!(parse_work_mem("1 MB").unwrap(), 1 << 20);
        for bad in ["", "4mb", "x", "-1", "63kB", "4 XB"] {
            let error = parse_work_mem(bad).unwrap_err();
            assert_eq!(error.code, sqlstate::INVALID_PARAMETER_VALUE, "{bad}");
        }
    }
}

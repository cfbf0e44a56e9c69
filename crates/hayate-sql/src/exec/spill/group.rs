//! Aggregate and Distinct past `work_mem` (module doc of `spill`, 4).
//!
//! 1. Groups and seen keys stay in memory up to `work_mem`.
//! 2. Past it, rows whose key is already in memory are still handled there; rows with a new
//!    key go to partitions by key hash.
//! 3. `finish` emits the groups in memory, then handles each partition the same way, one
//!    level down. Distinct tags a spilled row with its input position and sorts the
//!    survivors back into input order.

use std::collections::HashSet;

use hayate_engine::{Partitioner, TempRun, TempSpace};

use super::row::{decode_row, encode_row};
use super::sort::{Compare, SortBuffer};
use super::{
    fan_out, partition_hash, partitions, push_partitioned, ENTRY_OVERHEAD_BYTES, FAN_OUT, LEVEL_MAX,
};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::aggregate::Groups;
use crate::exec::run::Sink;
use crate::plan::{Aggregation, EvalContext};
use crate::types::Value;

/// Hash aggregation that spills the rows of new groups past `work_mem` (module doc, 4).
pub struct Aggregate<'a> {
    space: TempSpace,
    work_mem_bytes: usize,
    level: u32,
    fan_out: usize,
    aggregation: &'a Aggregation,
    groups: Groups<'a>,
    partitions: Option<Partitioner>,
}

impl<'a> Aggregate<'a> {
    pub fn new(space: &TempSpace, work_mem_bytes: usize, aggregation: &'a Aggregation) -> Self {
        Aggregate::at_level(space, work_mem_bytes, aggregation, 0, FAN_OUT)
    }

    fn at_level(
        space: &TempSpace,
        work_mem_bytes: usize,
        aggregation: &'a Aggregation,
        level: u32,
        fan_out: usize,
    ) -> Self {
        Aggregate {
            space: space.clone(),
            work_mem_bytes,
            level,
            fan_out,
            aggregation,
            groups: Groups::new(aggregation),
            partitions: None,
        }
    }

    pub fn push(&mut self, row: Vec<Value>, context: &EvalContext) -> SqlResult<()> {
        let may_add = self.level >= LEVEL_MAX || self.groups.bytes() <= self.work_mem_bytes;
        let Some((key, row)) = self.groups.add(row, may_add, context)? else {
            return Ok(());
        };
        let partitions = match &mut self.partitions {
            Some(partitions) => partitions,
            None => self
                .partitions
                .insert(partitions(&self.space, self.fan_out)?),
        };
        push_partitioned(partitions, self.level, &key, &row)
    }

    /// Sends the groups in memory, then those of each partition; false if `sink` stopped.
    pub fn finish(self, context: &EvalContext, sink: &mut Sink) -> SqlResult<bool> {
        for row in self.groups.finish()? {
            if !sink(row)? {
                return Ok(false);
            }
        }
        let Some(partitions) = self.partitions else {
            return Ok(true);
        };
        for run in partitions.finish()? {
            crate::interrupt::check()?;
            let mut aggregate = Aggregate::at_level(
                &self.space,
                self.work_mem_bytes,
                self.aggregation,
                self.level + 1,
                fan_out(run.bytes(), self.work_mem_bytes),
            );
            for record in run.reader() {
                aggregate.push(decode_row(&record?.1)?, context)?;
            }
            if !aggregate.finish(context, sink)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Duplicate elimination that spills rows with new keys past `work_mem` (module doc, 4).
pub struct Distinct {
    space: TempSpace,
    work_mem_bytes: usize,
    seen: HashSet<Vec<u8>>,
    seen_bytes: usize,
    /// Rows seen so far: the next row's input position.
    position: u64,
    partitions: Option<Partitioner>,
}

impl Distinct {
    pub fn new(space: &TempSpace, work_mem_bytes: usize) -> Distinct {
        Distinct {
            space: space.clone(),
            work_mem_bytes,
            seen: HashSet::new(),
            seen_bytes: 0,
            position: 0,
            partitions: None,
        }
    }

    /// The row if it is to be sent now: its key was not seen and there is memory to
    /// remember it. A row with a new key past `work_mem` waits in a partition.
    pub fn push(&mut self, key: Vec<u8>, row: Vec<Value>) -> SqlResult<Option<Vec<Value>>> {
        let position = self.position;
        self.position += 1;
        if self.seen.contains(&key) {
            return Ok(None);
        }
        if self.seen_bytes <= self.work_mem_bytes {
            self.seen_bytes += key.len() + ENTRY_OVERHEAD_BYTES;
            self.seen.insert(key);
            return Ok(Some(row));
        }
        let partitions = match &mut self.partitions {
            Some(partitions) => partitions,
            None => self.partitions.insert(partitions(&self.space, FAN_OUT)?),
        };
        let mut value = position.to_le_bytes().to_vec();
        encode_row(&mut value, &row);
        partitions.push(partition_hash(0, &key), &key, &value)?;
        Ok(None)
    }

    /// Sends the first row of each key that waited in a partition, in input order; false if
    /// `sink` stopped.
    pub fn finish(self, sink: &mut Sink) -> SqlResult<bool> {
        let Some(partitions) = self.partitions else {
            return Ok(true);
        };
        drop(self.seen);
        let by_position: Compare = Box::new(|a, b| a[0].sort_order(&b[0]));
        let mut survivors = SortBuffer::new(&self.space, self.work_mem_bytes, by_position);
        for run in partitions.finish()? {
            distinct_partition(&self.space, self.work_mem_bytes, 1, run, &mut survivors)?;
        }
        let mut sorted = survivors.finish()?;
        while let Some((_, row)) = sorted.next_row()? {
            if !sink(row)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The first row of each key of a Distinct's partition, with its input position, into
/// `survivors`; keys past `work_mem` go one level down.
fn distinct_partition(
    space: &TempSpace,
    work_mem_bytes: usize,
    level: u32,
    run: TempRun,
    survivors: &mut SortBuffer,
) -> SqlResult<()> {
    crate::interrupt::check()?;
    let fan_out = fan_out(run.bytes(), work_mem_bytes);
    let mut seen = HashSet::new();
    let mut seen_bytes = 0usize;
    let mut partitions: Option<Partitioner> = None;
    for record in run.reader() {
        let (key, value) = record?;
        if seen.contains(&key) {
            continue;
        }
        if level >= LEVEL_MAX || seen_bytes <= work_mem_bytes {
            let position = value
                .get(..8)
                .map(|bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
                .ok_or_else(|| {
                    SqlError::new(sqlstate::DATA_CORRUPTED, "corrupt row in a temporary file")
                })?;
            let row = decode_row(&value[8..])?;
            seen_bytes += key.len() + ENTRY_OVERHEAD_BYTES;
            seen.insert(key);
            survivors.push(vec![Value::Int(position as i64)], row)?;
            continue;
        }
        let partitions = match &mut partitions {
            Some(partitions) => partitions,
            None => partitions.insert(self::partitions(space, fan_out)?),
        };
        partitions.push(partition_hash(level, &key), &key, &value)?;
    }
    drop(seen);
    if let Some(partitions) = partitions {
        for run in partitions.finish()? {
            distinct_partition(space, work_mem_bytes, level + 1, run, survivors)?;
        }
    }
    Ok(())
}

//! The build side of a hash join past `work_mem` (module doc of `spill`, 3): a Grace hash
//! join.
//!
//! 1. `JoinBuild::push` keeps the build rows in a hash table up to `work_mem`; past it the
//!    table and the later build rows go to `FAN_OUT` partitions by key hash.
//! 2. `JoinBuild::finish` gives the table (`Built::Memory`) or a `SpilledJoin`, whose
//!    `probe` sends each probe row to its key's partition.
//! 3. `SpilledJoin::finish` joins each partition pair in turn, partitioning again a build
//!    side that is still too large, down to `LEVEL_MAX`.

use std::collections::HashMap;

use hayate_engine::{Partitioner, TempRun, TempSpace};

use super::row::{decode_row, row_bytes};
use super::{fan_out, partitions, push_partitioned, ENTRY_OVERHEAD_BYTES, FAN_OUT, LEVEL_MAX};
use crate::error::SqlResult;
use crate::types::Value;

/// Build rows by join key.
pub type JoinTable = HashMap<Vec<u8>, Vec<Vec<Value>>>;

/// The build side of a hash join (module doc, 3).
pub struct JoinBuild {
    space: TempSpace,
    work_mem_bytes: usize,
    level: u32,
    fan_out: usize,
    /// False keeps everything in memory (join kinds that track unmatched build rows).
    may_spill: bool,
    table: JoinTable,
    table_bytes: usize,
    partitions: Option<Partitioner>,
}

/// A finished build side.
pub enum Built {
    Memory(JoinTable),
    Spilled(SpilledJoin),
}

impl JoinBuild {
    pub fn new(space: &TempSpace, work_mem_bytes: usize, may_spill: bool) -> JoinBuild {
        JoinBuild::at_level(space, work_mem_bytes, may_spill, 0, FAN_OUT)
    }

    fn at_level(
        space: &TempSpace,
        work_mem_bytes: usize,
        may_spill: bool,
        level: u32,
        fan_out: usize,
    ) -> Self {
        JoinBuild {
            space: space.clone(),
            work_mem_bytes,
            level,
            fan_out,
            may_spill: may_spill && level < LEVEL_MAX,
            table: JoinTable::new(),
            table_bytes: 0,
            partitions: None,
        }
    }

    pub fn push(&mut self, key: Vec<u8>, row: Vec<Value>) -> SqlResult<()> {
        if let Some(partitions) = &mut self.partitions {
            return push_partitioned(partitions, self.level, &key, &row);
        }
        self.table_bytes += key.len() + ENTRY_OVERHEAD_BYTES + row_bytes(&row);
        self.table.entry(key).or_default().push(row);
        if self.may_spill && self.table_bytes > self.work_mem_bytes {
            let mut partitions = partitions(&self.space, self.fan_out)?;
            for (key, rows) in self.table.drain() {
                for row in rows {
                    push_partitioned(&mut partitions, self.level, &key, &row)?;
                }
            }
            self.table_bytes = 0;
            self.partitions = Some(partitions);
        }
        Ok(())
    }

    pub fn finish(self) -> SqlResult<Built> {
        let Some(partitions) = self.partitions else {
            return Ok(Built::Memory(self.table));
        };
        Ok(Built::Spilled(SpilledJoin {
            probe: self::partitions(&self.space, partitions.partitions())?,
            build: partitions.finish()?,
            space: self.space,
            work_mem_bytes: self.work_mem_bytes,
            level: self.level,
        }))
    }
}

/// Joins a probe row with its candidate build rows; false stops the join.
pub type Probe<'p> = dyn FnMut(Vec<Value>, &[Vec<Value>]) -> SqlResult<bool> + 'p;

/// A hash join whose build side went to partitions: probe rows follow them, then `finish`
/// joins each partition pair.
pub struct SpilledJoin {
    space: TempSpace,
    work_mem_bytes: usize,
    level: u32,
    build: Vec<TempRun>,
    probe: Partitioner,
}

impl SpilledJoin {
    /// Sends a probe row (its key not NULL) to its partition.
    pub fn probe(&mut self, key: &[u8], row: &[Value]) -> SqlResult<()> {
        push_partitioned(&mut self.probe, self.level, key, row)
    }

    /// Joins the partitions pair by pair; false if `probe` stopped the join.
    pub fn finish(self, probe: &mut Probe) -> SqlResult<bool> {
        let probe_runs = self.probe.finish()?;
        for (build_run, probe_run) in self.build.into_iter().zip(probe_runs) {
            crate::interrupt::check()?;
            let fan_out = fan_out(build_run.bytes(), self.work_mem_bytes);
            let level = self.level + 1;
            let mut build =
                JoinBuild::at_level(&self.space, self.work_mem_bytes, true, level, fan_out);
            for record in build_run.reader() {
                let (key, value) = record?;
                build.push(key, decode_row(&value)?)?;
            }
            let mut probes = probe_run.reader();
            match build.finish()? {
                Built::Memory(table) => {
                    while let Some((key, value)) = probes.next_record()? {
                        let candidates = table.get(&key).map_or(&[][..], Vec::as_slice);
                        if !probe(decode_row(&value)?, candidates)? {
                            return Ok(false);
                        }
                    }
                }
                Built::Spilled(mut spilled) => {
                    while let Some((key, value)) = probes.next_record()? {
                        spilled.probe(&key, &decode_row(&value)?)?;
                    }
                    if !spilled.finish(probe)? {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }
}

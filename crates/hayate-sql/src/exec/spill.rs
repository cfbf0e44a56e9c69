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

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use hayate_engine::{Partitioner, RunReader, TempRun, TempSpace};

use super::aggregate::Groups;
use super::query::{Run, Sink};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::{Aggregation, EvalContext};
use crate::types::{numeric, Value};

/// PostgreSQL's default `work_mem`.
pub const WORK_MEM_DEFAULT: &str = "4MB";
/// PostgreSQL's limits of `work_mem`, in kB.
const WORK_MEM_KB_MIN: u64 = 64;
const WORK_MEM_KB_MAX: u64 = i32::MAX as u64;
/// What a row costs in memory beyond its values (the Vec and the allocator's rounding).
const ROW_OVERHEAD_BYTES: usize = 48;
/// What a hash table entry costs beyond its key bytes and row.
const ENTRY_OVERHEAD_BYTES: usize = 48;
/// Runs merged at once.
const MERGE_FAN_IN: usize = 16;
/// Partitions of the first spill of a hash join, aggregation or distinct (its input's size is
/// not known yet).
const FAN_OUT: usize = 8;
/// Partitions of a partition that spills again, at most.
const FAN_OUT_MAX: usize = 64;
/// Levels of partitioning before a partition is kept in memory however large it is (many
/// rows of one key cannot be split by hashing).
const LEVEL_MAX: u32 = 4;

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

/// The estimated memory of a row (see the module doc).
pub fn row_bytes(row: &[Value]) -> usize {
    let heap: usize = row
        .iter()
        .map(|value| match value {
            Value::Text(text) => text.len(),
            Value::Bytes(bytes) => bytes.len(),
            _ => 0,
        })
        .sum();
    ROW_OVERHEAD_BYTES + std::mem::size_of_val(row) + heap
}

/// Appends a row in the temporary encoding: u32 value count, then per value a tag byte and
/// its bytes (little-endian; text and bytea with a u32 length; numeric as in table rows).
pub fn encode_row(out: &mut Vec<u8>, row: &[Value]) {
    out.extend_from_slice(&(row.len() as u32).to_le_bytes());
    for value in row {
        match value {
            Value::Null => out.push(0),
            Value::Int(v) => put(out, 1, &v.to_le_bytes()),
            Value::Float(v) => put(out, 2, &v.to_bits().to_le_bytes()),
            Value::Float4(v) => put(out, 3, &v.to_bits().to_le_bytes()),
            Value::Numeric(v) => {
                out.push(4);
                numeric::encode_row(out, v);
            }
            Value::Bool(v) => put(out, 5, &[*v as u8]),
            Value::Text(text) => put_bytes(out, 6, text.as_bytes()),
            Value::Bytes(bytes) => put_bytes(out, 7, bytes),
            Value::Date(v) => put(out, 8, &v.to_le_bytes()),
            Value::Timestamp(v) => put(out, 9, &v.to_le_bytes()),
            Value::TimestampTz(v) => put(out, 10, &v.to_le_bytes()),
        }
    }
}

fn put(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    out.extend_from_slice(bytes);
}

fn put_bytes(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Decodes `encode_row`. The bytes passed the temporary block's checksum, so a failure is a
/// bug or a damaged device: an error, never a panic.
pub fn decode_row(bytes: &[u8]) -> SqlResult<Vec<Value>> {
    let corrupt = || SqlError::new(sqlstate::DATA_CORRUPTED, "corrupt row in a temporary file");
    let mut at = 0usize;
    let mut take = |length: usize| -> SqlResult<&[u8]> {
        let end = at.checked_add(length).ok_or_else(corrupt)?;
        let slice = bytes.get(at..end).ok_or_else(corrupt)?;
        at = end;
        Ok(slice)
    };
    fn array<const N: usize>(slice: &[u8]) -> [u8; N] {
        slice.try_into().expect("take returns N bytes")
    }
    let count = u32::from_le_bytes(array(take(4)?)) as usize;
    let mut row = Vec::with_capacity(count.min(bytes.len()));
    for _ in 0..count {
        let value = match take(1)?[0] {
            0 => Value::Null,
            1 => Value::Int(i64::from_le_bytes(array(take(8)?))),
            2 => Value::Float(f64::from_bits(u64::from_le_bytes(array(take(8)?)))),
            3 => Value::Float4(f32::from_bits(u32::from_le_bytes(array(take(4)?)))),
            4 => Value::Numeric(numeric::decode_row(&array(take(17)?)).ok_or_else(corrupt)?),
            5 => Value::Bool(take(1)?[0] != 0),
            tag @ (6 | 7) => {
                let length = u32::from_le_bytes(array(take(4)?)) as usize;
                let payload = take(length)?.to_vec();
                if tag == 6 {
                    Value::Text(String::from_utf8(payload).map_err(|_| corrupt())?)
                } else {
                    Value::Bytes(payload)
                }
            }
            8 => Value::Date(i32::from_le_bytes(array(take(4)?))),
            9 => Value::Timestamp(i64::from_le_bytes(array(take(8)?))),
            10 => Value::TimestampTz(i64::from_le_bytes(array(take(8)?))),
            _ => return Err(corrupt()),
        };
        row.push(value);
    }
    if at != bytes.len() {
        return Err(corrupt());
    }
    Ok(row)
}

impl Run<'_, '_> {
    /// Where this statement's operators spill.
    pub(super) fn space(&self) -> &TempSpace {
        self.exec.db.temp()
    }

    pub(super) fn work_mem(&self) -> usize {
        self.exec.work_mem_bytes
    }
}

/// A new run: a one-partition `Partitioner` is a plain run writer with 64 KiB blocks.
fn new_run(space: &TempSpace) -> SqlResult<Partitioner> {
    Ok(space.partitioner(1)?)
}

/// The run a one-partition `Partitioner` wrote.
fn finish_run(writer: Partitioner) -> SqlResult<TempRun> {
    let mut runs = writer.finish()?;
    Ok(runs.pop().expect("one partition"))
}

/// The partition hash of a key at a level of partitioning (each level hashes differently, so
/// a partition splits again). Deterministic: `DefaultHasher::new` has fixed keys.
fn partition_hash(level: u32, key: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    level.hash(&mut hasher);
    key.hash(&mut hasher);
    hasher.finish()
}

fn partitions(space: &TempSpace, fan_out: usize) -> SqlResult<Partitioner> {
    Ok(space.partitioner(fan_out)?)
}

/// Partitions for a partition of `run_bytes` that spills again: enough for each to fit in
/// `work_mem` (a row takes about four times its encoded size in memory), 8 to `FAN_OUT_MAX`.
fn fan_out(run_bytes: u64, work_mem_bytes: usize) -> usize {
    let needed = run_bytes.saturating_mul(4) / work_mem_bytes.max(1) as u64;
    (needed as usize).clamp(FAN_OUT, FAN_OUT_MAX)
}

/// Orders sort keys.
pub type Compare<'c> = Box<dyn Fn(&[Value], &[Value]) -> Ordering + 'c>;

/// A row with its sort keys.
type Keyed = (Vec<Value>, Vec<Value>);

/// Sorts rows by their keys, spilling sorted runs past `work_mem` (module doc, 2).
pub struct SortBuffer<'c> {
    space: TempSpace,
    work_mem_bytes: usize,
    compare: Compare<'c>,
    buffered: Vec<Keyed>,
    buffered_bytes: usize,
    runs: Vec<TempRun>,
}

impl<'c> SortBuffer<'c> {
    pub fn new(space: &TempSpace, work_mem_bytes: usize, compare: Compare<'c>) -> SortBuffer<'c> {
        SortBuffer {
            space: space.clone(),
            work_mem_bytes,
            compare,
            buffered: Vec::new(),
            buffered_bytes: 0,
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, keys: Vec<Value>, row: Vec<Value>) -> SqlResult<()> {
        self.buffered_bytes += row_bytes(&keys) + row_bytes(&row);
        self.buffered.push((keys, row));
        if self.buffered_bytes > self.work_mem_bytes {
            self.spill()?;
        }
        Ok(())
    }

    fn sort_buffered(&mut self) {
        let compare = &self.compare;
        self.buffered.sort_by(|a, b| compare(&a.0, &b.0));
    }

    fn spill(&mut self) -> SqlResult<()> {
        self.sort_buffered();
        let mut writer = new_run(&self.space)?;
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for (keys, row) in self.buffered.drain(..) {
            write_keyed(&mut writer, &mut key, &mut value, &keys, &row)?;
        }
        self.runs.push(finish_run(writer)?);
        self.buffered_bytes = 0;
        Ok(())
    }

    /// The rows in key order, ties in the order they were pushed.
    pub fn finish(mut self) -> SqlResult<SortedRows<'c>> {
        if self.runs.is_empty() {
            self.sort_buffered();
            return Ok(SortedRows::Memory(self.buffered.into_iter()));
        }
        if !self.buffered.is_empty() {
            self.spill()?;
        }
        let mut runs = std::mem::take(&mut self.runs);
        while runs.len() > MERGE_FAN_IN {
            // One pass: consecutive groups of runs become one run each, so ties still go to
            // the rows pushed first.
            let mut merged = Vec::with_capacity(runs.len().div_ceil(MERGE_FAN_IN));
            let mut rest = runs.into_iter().peekable();
            while rest.peek().is_some() {
                let group: Vec<TempRun> = rest.by_ref().take(MERGE_FAN_IN).collect();
                let mut merge = Merge::new(group, &self.compare)?;
                let mut writer = new_run(&self.space)?;
                let (mut key, mut value) = (Vec::new(), Vec::new());
                while let Some((keys, row)) = merge.next_row()? {
                    write_keyed(&mut writer, &mut key, &mut value, &keys, &row)?;
                }
                merged.push(finish_run(writer)?);
            }
            runs = merged;
        }
        let readers = runs.into_iter().map(TempRun::reader).collect();
        let heads = Vec::new();
        let mut merge = OwnedMerge {
            readers,
            heads,
            compare: self.compare,
        };
        merge.start()?;
        Ok(SortedRows::Merge(merge))
    }
}

fn write_keyed(
    writer: &mut Partitioner,
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
    keys: &[Value],
    row: &[Value],
) -> SqlResult<()> {
    key.clear();
    value.clear();
    encode_row(key, keys);
    encode_row(value, row);
    Ok(writer.push(0, key, value)?)
}

fn read_keyed(reader: &mut RunReader) -> SqlResult<Option<Keyed>> {
    // Merges are long: a cancel request is honoured between rows.
    crate::interrupt::check()?;
    match reader.next_record()? {
        None => Ok(None),
        Some((key, value)) => Ok(Some((decode_row(&key)?, decode_row(&value)?))),
    }
}

/// The next row of a merge: the smallest head, the earliest run on ties.
fn take_smallest(
    readers: &mut [RunReader],
    heads: &mut [Option<Keyed>],
    compare: &dyn Fn(&[Value], &[Value]) -> Ordering,
) -> SqlResult<Option<Keyed>> {
    let mut smallest: Option<usize> = None;
    for (index, head) in heads.iter().enumerate() {
        let Some((keys, _)) = head else { continue };
        let better = match smallest.and_then(|at| heads[at].as_ref()) {
            None => true,
            Some((best, _)) => compare(keys, best) == Ordering::Less,
        };
        if better {
            smallest = Some(index);
        }
    }
    let Some(index) = smallest else {
        return Ok(None);
    };
    let row = heads[index].take();
    heads[index] = read_keyed(&mut readers[index])?;
    Ok(row)
}

/// A merge of runs borrowing its comparison (an intermediate pass).
struct Merge<'m, 'c> {
    readers: Vec<RunReader>,
    heads: Vec<Option<Keyed>>,
    compare: &'m Compare<'c>,
}

impl<'m, 'c> Merge<'m, 'c> {
    fn new(runs: Vec<TempRun>, compare: &'m Compare<'c>) -> SqlResult<Merge<'m, 'c>> {
        let mut readers: Vec<RunReader> = runs.into_iter().map(TempRun::reader).collect();
        let heads = readers
            .iter_mut()
            .map(read_keyed)
            .collect::<SqlResult<_>>()?;
        Ok(Merge {
            readers,
            heads,
            compare,
        })
    }

    fn next_row(&mut self) -> SqlResult<Option<Keyed>> {
        take_smallest(&mut self.readers, &mut self.heads, &**self.compare)
    }
}

/// The final merge, owning its comparison.
pub struct OwnedMerge<'c> {
    readers: Vec<RunReader>,
    heads: Vec<Option<Keyed>>,
    compare: Compare<'c>,
}

impl OwnedMerge<'_> {
    fn start(&mut self) -> SqlResult<()> {
        self.heads = self
            .readers
            .iter_mut()
            .map(read_keyed)
            .collect::<SqlResult<_>>()?;
        Ok(())
    }
}

/// Sorted rows with their keys, from memory or merged from runs.
pub enum SortedRows<'c> {
    Memory(std::vec::IntoIter<Keyed>),
    Merge(OwnedMerge<'c>),
}

impl SortedRows<'_> {
    pub fn next_row(&mut self) -> SqlResult<Option<Keyed>> {
        match self {
            SortedRows::Memory(rows) => Ok(rows.next()),
            SortedRows::Merge(merge) => {
                take_smallest(&mut merge.readers, &mut merge.heads, &*merge.compare)
            }
        }
    }
}

/// The inner side of a merge join read in key order, one group of equal keys at a time
/// (the group is held in memory). Rows with a NULL key are skipped: they match nothing.
pub struct MatchingGroups<'c> {
    sorted: SortedRows<'c>,
    compare: fn(&[Value], &[Value]) -> Ordering,
    /// Rows of one key, the smallest not below the last key asked for.
    group: Vec<Keyed>,
    /// The row after the group.
    next: Option<Keyed>,
}

impl<'c> MatchingGroups<'c> {
    pub fn new(
        sorted: SortedRows<'c>,
        compare: fn(&[Value], &[Value]) -> Ordering,
    ) -> SqlResult<MatchingGroups<'c>> {
        let mut groups = MatchingGroups {
            sorted,
            compare,
            group: Vec::new(),
            next: None,
        };
        groups.next = groups.next_keyed()?;
        Ok(groups)
    }

    fn next_keyed(&mut self) -> SqlResult<Option<Keyed>> {
        while let Some(keyed) = self.sorted.next_row()? {
            if !keyed.0.iter().any(Value::is_null) {
                return Ok(Some(keyed));
            }
        }
        Ok(None)
    }

    /// The rows whose key equals `key`; keys must be asked for in ascending order.
    pub fn matching(&mut self, key: &[Value]) -> SqlResult<&[Keyed]> {
        let compare = self.compare;
        loop {
            match self.group.first() {
                Some((group_key, _)) if compare(group_key, key) != Ordering::Less => break,
                None if self.next.is_none() => break,
                _ => {}
            }
            self.group.clear();
            if let Some(first) = self.next.take() {
                self.group.push(first);
                loop {
                    self.next = self.next_keyed()?;
                    match self.next.take() {
                        Some(row) if compare(&row.0, &self.group[0].0) == Ordering::Equal => {
                            self.group.push(row)
                        }
                        other => {
                            self.next = other;
                            break;
                        }
                    }
                }
            }
        }
        match self.group.first() {
            Some((group_key, _)) if compare(group_key, key) == Ordering::Equal => Ok(&self.group),
            _ => Ok(&[]),
        }
    }
}

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

fn push_partitioned(
    partitions: &mut Partitioner,
    level: u32,
    key: &[u8],
    row: &[Value],
) -> SqlResult<()> {
    let mut value = Vec::new();
    encode_row(&mut value, row);
    Ok(partitions.push(partition_hash(level, key), key, &value)?)
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

    #[test]
    fn rows_round_trip_through_the_temporary_encoding() {
        let row = vec![
            Value::Null,
            Value::Int(-7),
            Value::Float(f64::NAN),
            Value::Float4(1.5),
            Value::Numeric(numeric::parse("-12.50").unwrap()),
            Value::Bool(true),
            Value::Text("héllo\0".into()),
            Value::Bytes(vec![0, 255]),
            Value::Date(-3),
            Value::Timestamp(1 << 40),
            Value::TimestampTz(-1),
        ];
        let mut bytes = Vec::new();
        encode_row(&mut bytes, &row);
        let decoded = decode_row(&bytes).unwrap();
        assert_eq!(format!("{decoded:?}"), format!("{row:?}"));
        for cut in 0..bytes.len() {
            assert!(decode_row(&bytes[..cut]).is_err());
        }
        let mut bad_tag = bytes.clone();
        bad_tag[4] = 99;
        assert!(decode_row(&bad_tag).is_err());
    }
}

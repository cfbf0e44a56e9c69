//! Sorting past `work_mem` (module doc of `spill`, 2), and the merge join's inner side read
//! one group of equal keys at a time.
//!
//! 1. `SortBuffer::push` buffers rows with their sort keys; past `work_mem` it sorts the
//!    buffer (stably) and writes it as a run.
//! 2. `SortBuffer::finish` merges the runs, at most `MERGE_FAN_IN` at once (in passes when
//!    there are more), a tie going to the earlier run.
//! 3. `SortedRows::next_row` hands the rows out in order, from memory or from the merge.

use std::cmp::Ordering;

use hayate_engine::{Partitioner, RunReader, TempRun, TempSpace};

use super::row::{decode_row, encode_row, row_bytes};
use super::{finish_run, new_run, MERGE_FAN_IN};
use crate::error::SqlResult;
use crate::types::Value;

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

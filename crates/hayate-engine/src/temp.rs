//! Temporary space on flash: sorts and hash joins larger than their work memory spill here
//! (the SIGMOD 2008 finding that temporary space is among what gains most from flash).
//!
//! Everything goes through the engine's `Io` (O_DIRECT, io_uring batches, the lab's tracing and
//! device-class latency), in files named `temp.{number:016x}` in the data directory:
//! 1. A `RunWriter` packs records (key, value) into blocks of `BLOCK_BYTES` and writes each
//!    full block with one write; a record larger than a block gets a block of its own size.
//!    It never syncs: temporary data is worthless after a crash, and `TempSpace::open` removes
//!    every leftover file when the database opens.
//! 2. A finished run (`TempRun`) remembers where its blocks are; a `RunReader` reads them back
//!    in order, `READ_AHEAD_BLOCKS` blocks per batched read, and checks each block's CRC-32C.
//!    Dropping the run removes its file.
//! 3. `ExternalSorter`: records are kept in memory up to the work memory, then sorted and
//!    written as a run; `finish` merges the runs (k-way, a heap over the runs' next keys) or,
//!    when nothing spilled, just sorts in memory. Keys compare as bytes (the SQL layer's
//!    memcomparable encoding), ties keep insertion order.
//! 4. `Partitioner`: records go to one of N runs by the caller's hash.
//! 5. `HashJoin`: an equi-join on key bytes. The build side is hashed in memory; once it
//!    exceeds the work memory the join becomes a partitioned (Grace) hash join: build records
//!    go to partitions by key hash, probe records too, then each partition pair is joined in
//!    memory. Partitions are sized from the build side seen so far (twice as many as it needs
//!    work memories, at least 8).
//!
//! Block format: u32 little-endian payload length, u32 CRC-32C of the payload, the payload
//! (records: u32 key length, u32 value length, key, value), zero padding to `IO_ALIGN`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Location, Result};
use crate::io::{AlignedBuf, Io, IoFile, OpenOptions, ReadRequest, IO_ALIGN};

const FILE_PREFIX: &str = "temp.";
/// Bytes per block write of a sort run.
pub const BLOCK_BYTES: usize = 256 << 10;
/// Bytes per block write of a partition (many partitions are written at once).
const PARTITION_BLOCK_BYTES: usize = 64 << 10;
const BLOCK_HEADER_BYTES: usize = 8;
const RECORD_HEADER_BYTES: usize = 8;
/// Blocks a reader asks for in one batch.
const READ_AHEAD_BLOCKS: usize = 4;
/// What an in-memory record costs beyond its bytes (two Vecs and the tuple).
const RECORD_OVERHEAD_BYTES: usize = 64;

/// A key and a value.
pub type Record = (Vec<u8>, Vec<u8>);

/// A run's next record in a merge: (key, run index, value), smallest key (then run) first.
type MergeEntry = Reverse<(Vec<u8>, usize, Vec<u8>)>;

/// Counters of the temporary space since the database opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TempStats {
    /// Temporary files created (one per run or partition).
    pub files_created: u64,
    /// Bytes written to temporary files, block padding included.
    pub bytes_written: u64,
    /// Bytes read back from temporary files, block padding included.
    pub bytes_read: u64,
    /// Sorts that spilled at least one run.
    pub sorts_spilled: u64,
    /// Sorts done in memory.
    pub sorts_in_memory: u64,
}

#[derive(Default)]
struct Counters {
    next_file: AtomicU64,
    files_created: AtomicU64,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    sorts_spilled: AtomicU64,
    sorts_in_memory: AtomicU64,
}

/// The temporary space of one database. Cheap to clone.
#[derive(Clone)]
pub struct TempSpace {
    io: Arc<dyn Io>,
    counters: Arc<Counters>,
}

impl TempSpace {
    /// Opens the temporary space, removing the files a previous run left behind.
    pub fn open(io: Arc<dyn Io>) -> Result<TempSpace> {
        for name in io.list()? {
            if name.starts_with(FILE_PREFIX) {
                io.remove(&name)?;
            }
        }
        Ok(TempSpace {
            io,
            counters: Arc::default(),
        })
    }

    /// The temporary space's counters now.
    pub fn stats(&self) -> TempStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counters = &self.counters;
        TempStats {
            files_created: load(&counters.files_created),
            bytes_written: load(&counters.bytes_written),
            bytes_read: load(&counters.bytes_read),
            sorts_spilled: load(&counters.sorts_spilled),
            sorts_in_memory: load(&counters.sorts_in_memory),
        }
    }

    /// Starts a new run with blocks of `block_bytes`.
    fn run_writer(&self, block_bytes: usize) -> Result<RunWriter> {
        let number = self.counters.next_file.fetch_add(1, Ordering::Relaxed);
        let name = format!("{FILE_PREFIX}{number:016x}");
        let file = self.io.open(&name, OpenOptions::CREATE_DIRECT)?;
        self.counters.files_created.fetch_add(1, Ordering::Relaxed);
        Ok(RunWriter {
            run: TempRun {
                space: self.clone(),
                name,
                file,
                blocks: Vec::new(),
                records: 0,
            },
            block: AlignedBuf::new(block_bytes),
            used: BLOCK_HEADER_BYTES,
            end: 0,
        })
    }

    /// A sorter that keeps at most about `work_mem_bytes` of records in memory.
    pub fn sorter(&self, work_mem_bytes: usize) -> ExternalSorter {
        ExternalSorter {
            space: self.clone(),
            work_mem_bytes: work_mem_bytes.max(BLOCK_BYTES),
            buffered: Vec::new(),
            buffered_bytes: 0,
            runs: Vec::new(),
        }
    }

    /// A partitioner writing to `partitions` runs.
    pub fn partitioner(&self, partitions: usize) -> Result<Partitioner> {
        let writers = (0..partitions.max(1))
            .map(|_| self.run_writer(PARTITION_BLOCK_BYTES))
            .collect::<Result<Vec<_>>>()?;
        Ok(Partitioner { writers })
    }
}

/// A finished run in a temporary file, removed when dropped.
pub struct TempRun {
    space: TempSpace,
    name: String,
    file: Arc<dyn IoFile>,
    /// (offset, length) of each block.
    blocks: Vec<(u64, usize)>,
    records: u64,
}

impl TempRun {
    /// Records written to the run.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes the run occupies in its file.
    pub fn bytes(&self) -> u64 {
        self.blocks.iter().map(|(_, length)| *length as u64).sum()
    }

    /// Reads the run's records back in the order they were written.
    pub fn reader(self) -> RunReader {
        RunReader {
            run: self,
            next_block: 0,
            pending: VecDeque::new(),
            block: Vec::new(),
            position: 0,
        }
    }
}

impl Drop for TempRun {
    fn drop(&mut self) {
        if let Err(error) = self.space.io.remove(&self.name) {
            log::warn!("could not remove temporary file {}: {error}", self.name);
        }
    }
}

/// Appends records to a new run.
pub struct RunWriter {
    run: TempRun,
    block: AlignedBuf,
    /// Bytes of `block` filled, header included.
    used: usize,
    /// Where the next block goes in the file.
    end: u64,
}

impl RunWriter {
    /// Appends a record, writing the current block first if the record does not fit in it.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let length = RECORD_HEADER_BYTES + key.len() + value.len();
        if self.used + length > self.block.len() {
            self.flush()?;
            if BLOCK_HEADER_BYTES + length > self.block.len() {
                // A record larger than a block gets a block of its own size.
                self.block = AlignedBuf::new(BLOCK_HEADER_BYTES + length);
            }
        }
        let out = &mut self.block[self.used..self.used + length];
        out[0..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
        out[4..8].copy_from_slice(&(value.len() as u32).to_le_bytes());
        out[8..8 + key.len()].copy_from_slice(key);
        out[8 + key.len()..].copy_from_slice(value);
        self.used += length;
        self.run.records += 1;
        Ok(())
    }

    /// Writes the current block if it holds records.
    fn flush(&mut self) -> Result<()> {
        if self.used == BLOCK_HEADER_BYTES {
            return Ok(());
        }
        let payload_length = self.used - BLOCK_HEADER_BYTES;
        let crc = crc32c::crc32c(&self.block[BLOCK_HEADER_BYTES..self.used]);
        self.block[0..4].copy_from_slice(&(payload_length as u32).to_le_bytes());
        self.block[4..8].copy_from_slice(&crc.to_le_bytes());
        let write_length = self.used.div_ceil(IO_ALIGN) * IO_ALIGN;
        self.block[self.used..write_length].fill(0);
        self.run
            .file
            .write_at(&self.block[..write_length], self.end)?;
        self.run.blocks.push((self.end, write_length));
        self.run
            .space
            .counters
            .bytes_written
            .fetch_add(write_length as u64, Ordering::Relaxed);
        self.end += write_length as u64;
        self.used = BLOCK_HEADER_BYTES;
        Ok(())
    }

    /// Writes the last block and returns the run (not synced: see the module docs).
    pub fn finish(mut self) -> Result<TempRun> {
        self.flush()?;
        Ok(self.run)
    }
}

/// Reads a run's records in order.
pub struct RunReader {
    run: TempRun,
    next_block: usize,
    /// Blocks read ahead, not yet decoded.
    pending: VecDeque<(usize, AlignedBuf)>,
    /// The payload of the block being decoded.
    block: Vec<u8>,
    position: usize,
}

impl RunReader {
    /// The next record, or None at the end of the run.
    pub fn next_record(&mut self) -> Result<Option<Record>> {
        while self.position >= self.block.len() {
            if !self.load_block()? {
                return Ok(None);
            }
        }
        let at = self.position;
        let header = self
            .block
            .get(at..at + RECORD_HEADER_BYTES)
            .ok_or_else(|| self.corrupt("record header past the block's end"))?;
        let key_length = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
        let value_length = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
        let key_start = at + RECORD_HEADER_BYTES;
        let value_start = key_start + key_length;
        let end = value_start + value_length;
        if end > self.block.len() {
            return Err(self.corrupt("record past the block's end"));
        }
        let record = (
            self.block[key_start..value_start].to_vec(),
            self.block[value_start..end].to_vec(),
        );
        self.position = end;
        Ok(Some(record))
    }

    /// Makes the next block current; false at the end of the run.
    fn load_block(&mut self) -> Result<bool> {
        if self.pending.is_empty() {
            self.read_ahead()?;
        }
        let Some((index, buffer)) = self.pending.pop_front() else {
            return Ok(false);
        };
        let payload_length = u32::from_le_bytes(buffer[0..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(buffer[4..8].try_into().expect("4 bytes"));
        let payload = buffer
            .get(BLOCK_HEADER_BYTES..BLOCK_HEADER_BYTES + payload_length)
            .ok_or_else(|| self.corrupt(format!("block {index} claims {payload_length} bytes")))?;
        if crc32c::crc32c(payload) != crc {
            return Err(self.corrupt(format!("block {index} fails its checksum")));
        }
        self.block.clear();
        self.block.extend_from_slice(payload);
        self.position = 0;
        Ok(true)
    }

    /// Reads the next few blocks in one batch.
    fn read_ahead(&mut self) -> Result<()> {
        let first = self.next_block;
        let last = (first + READ_AHEAD_BLOCKS).min(self.run.blocks.len());
        let mut buffers: Vec<AlignedBuf> = self.run.blocks[first..last]
            .iter()
            .map(|(_, length)| AlignedBuf::new(*length))
            .collect();
        let mut requests: Vec<ReadRequest<'_>> = buffers
            .iter_mut()
            .zip(&self.run.blocks[first..last])
            .map(|(buf, (offset, _))| ReadRequest {
                offset: *offset,
                buf: &mut buf[..],
            })
            .collect();
        self.run.file.read_batch(&mut requests)?;
        let bytes: usize = buffers.iter().map(|buffer| buffer.len()).sum();
        self.run
            .space
            .counters
            .bytes_read
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.pending.extend((first..last).zip(buffers));
        self.next_block = last;
        Ok(())
    }

    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::corruption(
            Location {
                file: self.run.name.clone(),
                ..Location::default()
            },
            detail,
        )
    }
}

impl Iterator for RunReader {
    type Item = Result<Record>;
    fn next(&mut self) -> Option<Result<Record>> {
        self.next_record().transpose()
    }
}

/// Sorts records by key, spilling sorted runs to temporary files beyond its work memory.
pub struct ExternalSorter {
    space: TempSpace,
    work_mem_bytes: usize,
    buffered: Vec<Record>,
    buffered_bytes: usize,
    runs: Vec<TempRun>,
}

impl ExternalSorter {
    /// Adds a record; once the records held exceed the work memory they are sorted and
    /// written as a run.
    pub fn push(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.buffered_bytes += key.len() + value.len() + RECORD_OVERHEAD_BYTES;
        self.buffered.push((key, value));
        if self.buffered_bytes > self.work_mem_bytes {
            self.spill()?;
        }
        Ok(())
    }

    /// Runs written so far.
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    fn spill(&mut self) -> Result<()> {
        // Stable: equal keys keep their insertion order within a run.
        self.buffered.sort_by(|a, b| a.0.cmp(&b.0));
        let mut writer = self.space.run_writer(BLOCK_BYTES)?;
        for (key, value) in self.buffered.drain(..) {
            writer.push(&key, &value)?;
        }
        self.runs.push(writer.finish()?);
        self.buffered_bytes = 0;
        Ok(())
    }

    /// The records in key order.
    pub fn finish(mut self) -> Result<Sorted> {
        let counters = &self.space.counters;
        if self.runs.is_empty() {
            counters.sorts_in_memory.fetch_add(1, Ordering::Relaxed);
            self.buffered.sort_by(|a, b| a.0.cmp(&b.0));
            return Ok(Sorted::Memory(
                std::mem::take(&mut self.buffered).into_iter(),
            ));
        }
        counters.sorts_spilled.fetch_add(1, Ordering::Relaxed);
        if !self.buffered.is_empty() {
            self.spill()?;
        }
        let mut readers: Vec<RunReader> = self.runs.drain(..).map(TempRun::reader).collect();
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (index, reader) in readers.iter_mut().enumerate() {
            if let Some((key, value)) = reader.next_record()? {
                heap.push(Reverse((key, index, value)));
            }
        }
        Ok(Sorted::Merge { readers, heap })
    }
}

/// Sorted records, from memory or merged from runs.
pub enum Sorted {
    /// Nothing spilled: the records sorted in memory.
    Memory(std::vec::IntoIter<Record>),
    /// A k-way merge of the sorted runs.
    Merge {
        /// One reader per run, indexed by the run index in `heap`'s entries.
        readers: Vec<RunReader>,
        /// The next record of each run not yet exhausted.
        heap: BinaryHeap<MergeEntry>,
    },
}

impl Iterator for Sorted {
    type Item = Result<Record>;
    fn next(&mut self) -> Option<Result<Record>> {
        match self {
            Sorted::Memory(records) => records.next().map(Ok),
            Sorted::Merge { readers, heap } => {
                let Reverse((key, index, value)) = heap.pop()?;
                match readers[index].next_record() {
                    Ok(Some((next_key, next_value))) => {
                        heap.push(Reverse((next_key, index, next_value)))
                    }
                    Ok(None) => {}
                    Err(error) => return Some(Err(error)),
                }
                Some(Ok((key, value)))
            }
        }
    }
}

/// Writes records to one of N runs.
pub struct Partitioner {
    writers: Vec<RunWriter>,
}

impl Partitioner {
    /// Number of partitions (runs), at least 1.
    pub fn partitions(&self) -> usize {
        self.writers.len()
    }

    /// Adds a record to partition `hash % partitions`.
    pub fn push(&mut self, hash: u64, key: &[u8], value: &[u8]) -> Result<()> {
        let partition = (hash % self.writers.len() as u64) as usize;
        self.writers[partition].push(key, value)
    }

    /// The partitions' runs, in partition order.
    pub fn finish(self) -> Result<Vec<TempRun>> {
        self.writers.into_iter().map(RunWriter::finish).collect()
    }
}

/// Partitions of a hash join that spilled: at least this many.
const JOIN_PARTITIONS_MIN: usize = 8;

/// Build records by key; each key may have several values.
type BuildTable = HashMap<Vec<u8>, Vec<Vec<u8>>>;

/// An equi-join on key bytes that spills to partitions beyond its work memory.
pub struct HashJoin {
    space: TempSpace,
    work_mem_bytes: usize,
    hasher: RandomState,
    table: BuildTable,
    table_bytes: usize,
    /// Set once the build side outgrew the work memory.
    spilled: Option<SpilledJoin>,
}

struct SpilledJoin {
    build: Partitioner,
    probe: Partitioner,
}

impl HashJoin {
    /// A join whose in-memory build table may use about `work_mem_bytes` (at least
    /// `BLOCK_BYTES`) before it spills.
    pub fn new(space: &TempSpace, work_mem_bytes: usize) -> HashJoin {
        HashJoin {
            space: space.clone(),
            work_mem_bytes: work_mem_bytes.max(BLOCK_BYTES),
            hasher: RandomState::new(),
            table: HashMap::new(),
            table_bytes: 0,
            spilled: None,
        }
    }

    /// True once the join spills to partitions.
    pub fn is_spilled(&self) -> bool {
        self.spilled.is_some()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Adds a record of the build side.
    pub fn build(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        if let Some(spilled) = &mut self.spilled {
            let hash = self.hasher.hash_one(&key);
            return spilled.build.push(hash, &key, &value);
        }
        self.table_bytes += key.len() + value.len() + RECORD_OVERHEAD_BYTES;
        self.table.entry(key).or_default().push(value);
        if self.table_bytes > self.work_mem_bytes {
            self.spill()?;
        }
        Ok(())
    }

    /// Moves the build side to partitions.
    fn spill(&mut self) -> Result<()> {
        let needed = self.table_bytes.div_ceil(self.work_mem_bytes);
        let partitions = (needed * 2).max(JOIN_PARTITIONS_MIN);
        let mut build = self.space.partitioner(partitions)?;
        let probe = self.space.partitioner(partitions)?;
        for (key, values) in std::mem::take(&mut self.table) {
            let hash = self.hash(&key);
            for value in values {
                build.push(hash, &key, &value)?;
            }
        }
        self.table_bytes = 0;
        self.spilled = Some(SpilledJoin { build, probe });
        Ok(())
    }

    /// Joins a probe record: `emit(probe key, probe value, Some(build value))` for each match,
    /// or `emit(.., None)` when there is none (for outer joins; ignore it for inner joins).
    /// After a spill the matches come from `finish` instead.
    pub fn probe(
        &mut self,
        key: &[u8],
        value: &[u8],
        emit: &mut impl FnMut(&[u8], &[u8], Option<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        if let Some(spilled) = &mut self.spilled {
            let hash = self.hasher.hash_one(key);
            return spilled.probe.push(hash, key, value);
        }
        probe_table(&self.table, key, value, emit)
    }

    /// Joins what the probe side sent to partitions, one partition pair at a time.
    pub fn finish(
        self,
        emit: &mut impl FnMut(&[u8], &[u8], Option<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        let Some(spilled) = self.spilled else {
            return Ok(());
        };
        let build_runs = spilled.build.finish()?;
        let probe_runs = spilled.probe.finish()?;
        for (build_run, probe_run) in build_runs.into_iter().zip(probe_runs) {
            let mut table = BuildTable::new();
            for record in build_run.reader() {
                let (key, value) = record?;
                table.entry(key).or_default().push(value);
            }
            for record in probe_run.reader() {
                let (key, value) = record?;
                probe_table(&table, &key, &value, emit)?;
            }
        }
        Ok(())
    }
}

fn probe_table(
    table: &BuildTable,
    key: &[u8],
    value: &[u8],
    emit: &mut impl FnMut(&[u8], &[u8], Option<&[u8]>) -> Result<()>,
) -> Result<()> {
    match table.get(key) {
        Some(matches) => {
            for build_value in matches {
                emit(key, value, Some(build_value))?;
            }
            Ok(())
        }
        None => emit(key, value, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::{SimConfig, SimIo};

    fn space() -> (TempSpace, Arc<SimIo>) {
        let io = Arc::new(SimIo::new(SimConfig::with_seed(7)));
        (TempSpace::open(io.clone()).unwrap(), io)
    }

    fn temp_files(io: &SimIo) -> usize {
        io.list()
            .unwrap()
            .iter()
            .filter(|name| name.starts_with(FILE_PREFIX))
            .count()
    }

    /// A deterministic pseudo-random sequence (xorshift).
    fn keys(count: usize, seed: u64) -> Vec<Vec<u8>> {
        let mut state = seed;
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 5000).to_be_bytes().to_vec()
            })
            .collect()
    }

    #[test]
    fn spilled_sort_equals_in_memory_sort_and_is_stable() {
        let (space, io) = space();
        let input = keys(20_000, 42);
        // 20,000 records of ~90 bytes with 256 KiB of memory: several runs.
        let mut sorter = space.sorter(0);
        for (index, key) in input.iter().enumerate() {
            let value = format!("{index:0>80}").into_bytes();
            sorter.push(key.clone(), value).unwrap();
        }
        assert!(sorter.spilled_runs() >= 3, "{} runs", sorter.spilled_runs());
        let sorted: Vec<Record> = sorter.finish().unwrap().map(Result::unwrap).collect();
        let mut expected: Vec<Record> = input
            .iter()
            .enumerate()
            .map(|(index, key)| (key.clone(), format!("{index:0>80}").into_bytes()))
            .collect();
        expected.sort_by(|a, b| a.0.cmp(&b.0)); // stable, like the sorter
        assert_eq!(sorted, expected);
        let stats = space.stats();
        assert_eq!(stats.sorts_spilled, 1);
        assert!(stats.bytes_written > 20_000 * 90, "{stats:?}");
        assert_eq!(stats.bytes_read, stats.bytes_written);
        assert_eq!(temp_files(&io), 0, "runs are removed once merged");
    }

    #[test]
    fn spilled_sort_through_the_real_device() {
        // O_DIRECT on the real file system: blocks, offsets and buffers must be aligned.
        let dir = tempfile::tempdir().unwrap();
        let io = crate::io::open_default(dir.path()).unwrap();
        let space = TempSpace::open(io).unwrap();
        let mut sorter = space.sorter(0);
        for key in keys(10_000, 9) {
            sorter.push(key, vec![1u8; 100]).unwrap();
        }
        assert!(sorter.spilled_runs() >= 2);
        let sorted: Vec<Vec<u8>> = sorter.finish().unwrap().map(|r| r.unwrap().0).collect();
        assert_eq!(sorted.len(), 10_000);
        assert!(sorted.windows(2).all(|pair| pair[0] <= pair[1]));
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 0, "temporary files removed");
    }

    #[test]
    fn small_sort_stays_in_memory() {
        let (space, io) = space();
        let mut sorter = space.sorter(1 << 20);
        for key in keys(100, 3) {
            sorter.push(key, b"v".to_vec()).unwrap();
        }
        let sorted: Vec<Vec<u8>> = sorter.finish().unwrap().map(|r| r.unwrap().0).collect();
        assert!(sorted.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(sorted.len(), 100);
        assert_eq!(space.stats().sorts_in_memory, 1);
        assert_eq!(space.stats().bytes_written, 0);
        assert_eq!(temp_files(&io), 0);
    }

    #[test]
    fn records_larger_than_a_block_round_trip() {
        let (space, _io) = space();
        let mut writer = space.run_writer(BLOCK_BYTES).unwrap();
        let big = vec![7u8; BLOCK_BYTES * 2 + 5];
        writer.push(b"a", b"small").unwrap();
        writer.push(b"b", &big).unwrap();
        writer.push(b"", b"").unwrap();
        let run = writer.finish().unwrap();
        assert_eq!(run.records(), 3);
        let records: Vec<Record> = run.reader().map(Result::unwrap).collect();
        assert_eq!(
            records,
            vec![
                (b"a".to_vec(), b"small".to_vec()),
                (b"b".to_vec(), big),
                (Vec::new(), Vec::new())
            ]
        );
    }

    #[test]
    fn partitions_keep_every_record_once() {
        let (space, io) = space();
        let mut partitioner = space.partitioner(8).unwrap();
        for value in 0u64..10_000 {
            let hash = value.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            partitioner
                .push(hash, &value.to_be_bytes(), b"payload")
                .unwrap();
        }
        let runs = partitioner.finish().unwrap();
        assert_eq!(runs.len(), 8);
        let mut seen = Vec::new();
        for (partition, run) in runs.into_iter().enumerate() {
            for record in run.reader() {
                let value = u64::from_be_bytes(record.unwrap().0.try_into().unwrap());
                let hash = value.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                assert_eq!(hash % 8, partition as u64);
                seen.push(value);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..10_000).collect::<Vec<_>>());
        assert_eq!(temp_files(&io), 0);
    }

    /// Joins build keys 0..n (value = key * 10) with probe keys 0..2n (two values each
    /// for even keys): returns (matched pairs sorted, unmatched probe keys sorted).
    fn join(work_mem: usize, n: u64) -> (Vec<(u64, u64, u64)>, Vec<u64>, bool) {
        let (space, io) = space();
        let mut join = HashJoin::new(&space, work_mem);
        for key in 0..n {
            let value = format!("{:0>60}", key * 10);
            join.build(key.to_be_bytes().to_vec(), value.into_bytes())
                .unwrap();
        }
        let spilled = join.is_spilled();
        let mut matched = Vec::new();
        let mut unmatched = Vec::new();
        let mut emit = |key: &[u8], value: &[u8], build: Option<&[u8]>| -> Result<()> {
            let key = u64::from_be_bytes(key.try_into().unwrap());
            let probe = u64::from_be_bytes(value.try_into().unwrap());
            match build {
                Some(build) => matched.push((
                    key,
                    probe,
                    std::str::from_utf8(build).unwrap().parse().unwrap(),
                )),
                None => unmatched.push(key),
            }
            Ok(())
        };
        for key in 0..2 * n {
            join.probe(&key.to_be_bytes(), &1u64.to_be_bytes(), &mut emit)
                .unwrap();
            if key % 2 == 0 {
                join.probe(&key.to_be_bytes(), &2u64.to_be_bytes(), &mut emit)
                    .unwrap();
            }
        }
        join.finish(&mut emit).unwrap();
        matched.sort_unstable();
        unmatched.sort_unstable();
        assert_eq!(temp_files(&io), 0, "partitions removed");
        (matched, unmatched, spilled)
    }

    #[test]
    fn spilled_hash_join_equals_in_memory_hash_join() {
        let n = 20_000;
        let (in_memory, in_memory_unmatched, spilled) = join(1 << 30, n);
        assert!(!spilled);
        let (partitioned, partitioned_unmatched, spilled) = join(0, n);
        assert!(
            spilled,
            "20,000 build records exceed the minimum work memory"
        );
        assert_eq!(partitioned, in_memory);
        assert_eq!(partitioned_unmatched, in_memory_unmatched);
        // Every build key matched by its probe records, with its own value.
        let expected_matches = (0..n)
            .map(|key| if key % 2 == 0 { 2 } else { 1 })
            .sum::<u64>();
        assert_eq!(in_memory.len() as u64, expected_matches);
        assert!(in_memory.iter().all(|(key, _, build)| *build == key * 10));
        assert_eq!(in_memory_unmatched.len() as u64, n + n / 2);
    }

    #[test]
    fn a_damaged_block_is_reported_as_corruption() {
        let (space, io) = space();
        let mut writer = space.run_writer(BLOCK_BYTES).unwrap();
        writer.push(b"key", b"value").unwrap();
        let run = writer.finish().unwrap();
        let file = io.open(&run.name, OpenOptions::EXISTING_DIRECT).unwrap();
        let mut block = AlignedBuf::new(IO_ALIGN);
        file.read_at(&mut block, 0).unwrap();
        block[BLOCK_HEADER_BYTES + 9] ^= 0xff;
        file.write_at(&block, 0).unwrap();
        let error = run.reader().next().unwrap().unwrap_err();
        assert!(matches!(error, Error::Corruption { .. }), "{error}");
        assert!(error.to_string().contains("temp."), "{error}");
    }

    #[test]
    fn leftover_files_are_removed_at_open() {
        let io = Arc::new(SimIo::new(SimConfig::with_seed(1)));
        let space = TempSpace::open(io.clone()).unwrap();
        let mut writer = space.run_writer(BLOCK_BYTES).unwrap();
        writer.push(b"k", b"v").unwrap();
        let run = writer.finish().unwrap();
        std::mem::forget(run); // as if the process had died
        assert_eq!(temp_files(&io), 1);
        TempSpace::open(io.clone()).unwrap();
        assert_eq!(temp_files(&io), 0);
    }
}

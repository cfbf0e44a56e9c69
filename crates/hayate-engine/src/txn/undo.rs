//! The rollback segment: before-images of updated and deleted rows, for snapshot reads.
//!
//! A row in the B+tree holds the newest version and an undo pointer to the version it replaced;
//! each undo entry points to the one before, so a reader walks back until it finds a version
//! committed at or before its snapshot.
//!
//! Pointers are `(epoch << 40) | sequence`. The epoch changes at every start, so pointers left
//! in pages by an earlier run resolve to "no older version": after a restart no snapshot is
//! older than any version written before it.
//!
//! Lifecycle of an entry:
//! 1. `push` appends it in memory with the next sequence number.
//! 2. Spill: when the entries in memory exceed `UndoConfig::memory_bytes`, the oldest ones are
//!    encoded into an aligned batch and appended to the current spill segment file
//!    `undo.{number:016x}` through `Io` (O_DIRECT, one write per batch, never synced); their
//!    slots then keep only where the record is. Spilling goes in sequence order, so the entries
//!    before `first_in_memory` are all on flash and those from it on are all in memory.
//! 3. `get` of a spilled entry reads its record back with one synchronous read and checks it.
//! 4. Purge: an entry superseded at timestamp `t` is needed only by snapshots older than `t`;
//!    once the oldest active snapshot is at or past `t` it is dropped, in sequence order. A spill
//!    segment whose entries are all dropped is deleted.
//!
//! Spill files need no fsync and no recovery: undo serves only snapshots, and after a restart
//! no snapshot older than the restart exists. `UndoLog::open` deletes every spill file left by
//! an earlier run.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Location, Result};
use crate::io::{AlignedBuf, Io, IoFile, OpenOptions, IO_ALIGN};

const SEQUENCE_BITS: u32 = 40;
const SEQUENCE_MASK: u64 = (1 << SEQUENCE_BITS) - 1;
/// Memory charged per entry besides its value (timestamps, pointer, slot).
const ENTRY_OVERHEAD_BYTES: u64 = 40;
const SPILL_FILE_PREFIX: &str = "undo.";
/// Bytes of entries encoded per spill write (a larger single entry makes a larger batch).
const SPILL_BATCH_BYTES: usize = 1024 * 1024;
/// Spill record header: CRC-32C u32 | record length u32 | sequence u64 | commit ts u64 |
/// superseded ts u64 | undo pointer u64 | flags u8 (bit 0: a value follows).
const RECORD_HEADER_SIZE: usize = 41;
const FLAG_HAS_VALUE: u8 = 1;

/// Sizing of the rollback segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoConfig {
    /// Before-images kept in memory; beyond this the oldest are spilled to flash.
    pub memory_bytes: u64,
    /// A spill segment file is closed and a new one started once it reaches this size.
    pub spill_segment_bytes: u64,
}

impl Default for UndoConfig {
    fn default() -> UndoConfig {
        UndoConfig {
            memory_bytes: 64 << 20,
            spill_segment_bytes: 16 << 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoEntry {
    /// Commit timestamp of the before-image.
    pub commit_ts: u64,
    /// The before-image; None if the row did not exist or was a tombstone.
    pub value: Option<Vec<u8>>,
    /// Next older version.
    pub undo_pointer: u64,
    /// Commit timestamp of the version that replaced this one.
    pub superseded_ts: u64,
}

impl UndoEntry {
    fn memory_bytes(&self) -> u64 {
        self.value.as_ref().map_or(0, |v| v.len() as u64) + ENTRY_OVERHEAD_BYTES
    }
}

/// Counters and sizes of the rollback segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UndoStats {
    /// Entries held, in memory or spilled.
    pub entries: u64,
    /// Bytes of the entries held in memory.
    pub memory_bytes: u64,
    /// Bytes of spill records still needed (on flash).
    pub spilled_bytes: u64,
    /// Bytes of spill records written since open.
    pub spilled_bytes_total: u64,
    /// Spilled entries read back for a snapshot.
    pub spilled_reads: u64,
    /// Spill segment files on flash now.
    pub spill_segments: u64,
    /// Spill segment files deleted by purge since open.
    pub spill_segments_removed: u64,
}

/// Where a spilled entry's record is.
#[derive(Debug, Clone, Copy)]
struct SpillLocation {
    segment: u64,
    offset: u64,
    len: u32,
}

enum Slot {
    Memory(UndoEntry),
    /// `superseded_ts` stays in memory so purge needs no read.
    Spilled {
        superseded_ts: u64,
        location: SpillLocation,
    },
}

struct SpillSegment {
    number: u64,
    file: Arc<dyn IoFile>,
    /// Entries whose slot points into this segment.
    live_entries: u64,
    live_bytes: u64,
    /// The spill writer appends to it now; purge leaves it alone even when it holds nothing.
    in_use: bool,
}

struct Entries {
    /// Sequence number of `slots[0]`.
    base: u64,
    slots: VecDeque<Slot>,
    /// Every entry before this sequence is spilled; every one from it on is in memory.
    first_in_memory: u64,
    memory_bytes: u64,
    /// Segments holding live spilled entries, oldest first (plus the one being appended to).
    spill_segments: VecDeque<SpillSegment>,
}

impl Entries {
    fn segment(&mut self, number: u64) -> Option<&mut SpillSegment> {
        self.spill_segments
            .iter_mut()
            .find(|segment| segment.number == number)
    }
}

/// The appending side of the spill files; one spiller at a time.
struct SpillWriter {
    /// Number and end offset of the segment being appended to, if any.
    current: Option<(u64, u64)>,
    next_segment_number: u64,
    buffer: AlignedBuf,
}

#[derive(Default)]
struct Counters {
    spilled_bytes_total: AtomicU64,
    spilled_reads: AtomicU64,
    spill_segments_removed: AtomicU64,
}

pub struct UndoLog {
    epoch: u64,
    io: Arc<dyn Io>,
    config: UndoConfig,
    entries: RwLock<Entries>,
    spill: Mutex<SpillWriter>,
    counters: Counters,
}

pub fn spill_file_name(number: u64) -> String {
    format!("{SPILL_FILE_PREFIX}{number:016x}")
}

fn is_spill_file_name(name: &str) -> bool {
    name.strip_prefix(SPILL_FILE_PREFIX)
        .is_some_and(|digits| digits.len() == 16 && digits.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl UndoLog {
    /// Starts an empty rollback segment for run `epoch`, deleting spill files of earlier runs.
    pub fn open(epoch: u64, io: Arc<dyn Io>, config: UndoConfig) -> Result<UndoLog> {
        let stale: Vec<String> = io
            .list()?
            .into_iter()
            .filter(|name| is_spill_file_name(name))
            .collect();
        for name in &stale {
            io.remove(name)?;
        }
        Ok(UndoLog {
            epoch: epoch & 0xff_ffff,
            io,
            config,
            entries: RwLock::new(Entries {
                base: 1,
                slots: VecDeque::new(),
                first_in_memory: 1,
                memory_bytes: 0,
                spill_segments: VecDeque::new(),
            }),
            spill: Mutex::new(SpillWriter {
                current: None,
                next_segment_number: 0,
                buffer: AlignedBuf::new(SPILL_BATCH_BYTES),
            }),
            counters: Counters::default(),
        })
    }

    /// Stores a before-image and returns its pointer (never 0). Spills the oldest entries
    /// first if memory is over budget.
    pub fn push(&self, entry: UndoEntry) -> u64 {
        let mut entries = self.entries.write();
        entries.memory_bytes += entry.memory_bytes();
        let sequence = entries.base + entries.slots.len() as u64;
        entries.slots.push_back(Slot::Memory(entry));
        assert!(sequence <= SEQUENCE_MASK, "undo sequence overflow");
        let over_budget = entries.memory_bytes > self.config.memory_bytes;
        drop(entries);
        if over_budget {
            // Another thread already spilling will bring memory down; never wait for it.
            if let Some(mut writer) = self.spill.try_lock() {
                if let Err(error) = self.spill_to_budget(&mut writer) {
                    // Undo is not durable state: keep the entries in memory and go on.
                    log::warn!("rollback segment spill failed, entries stay in memory: {error}");
                }
            }
        }
        (self.epoch << SEQUENCE_BITS) | sequence
    }

    /// Finds an entry; None if it belongs to an earlier run or was purged.
    pub fn get(&self, pointer: u64) -> Result<Option<UndoEntry>> {
        if pointer == 0 || pointer >> SEQUENCE_BITS != self.epoch {
            return Ok(None);
        }
        let sequence = pointer & SEQUENCE_MASK;
        let entries = self.entries.read();
        let Some(index) = sequence.checked_sub(entries.base) else {
            return Ok(None);
        };
        let (location, file) = match entries.slots.get(index as usize) {
            None => return Ok(None),
            Some(Slot::Memory(entry)) => return Ok(Some(entry.clone())),
            Some(Slot::Spilled { location, .. }) => {
                let segment = entries
                    .spill_segments
                    .iter()
                    .find(|segment| segment.number == location.segment)
                    .expect("a live spilled entry keeps its segment");
                (*location, Arc::clone(&segment.file))
            }
        };
        // The snapshot that needs this entry keeps purge from dropping it meanwhile, and the
        // handle keeps the file readable even so.
        drop(entries);
        self.counters.spilled_reads.fetch_add(1, Ordering::Relaxed);
        read_record(&*file, location, sequence).map(Some)
    }

    /// True if the pointer was handed out by this run.
    pub fn is_current_epoch(&self, pointer: u64) -> bool {
        pointer >> SEQUENCE_BITS == self.epoch
    }

    /// Drops entries no snapshot at or after `oldest_snapshot_ts` needs, in sequence order (an
    /// entry still needed keeps the ones after it too), and deletes spill segments left with
    /// no live entry. Returns the number of entries dropped.
    pub fn purge(&self, oldest_snapshot_ts: u64) -> Result<u64> {
        let mut entries = self.entries.write();
        let mut purged = 0;
        while let Some(front) = entries.slots.front() {
            match front {
                Slot::Memory(entry) if entry.superseded_ts > oldest_snapshot_ts => break,
                Slot::Spilled { superseded_ts, .. } if *superseded_ts > oldest_snapshot_ts => break,
                Slot::Memory(entry) => entries.memory_bytes -= entry.memory_bytes(),
                Slot::Spilled { location, .. } => {
                    let location = *location;
                    let segment = entries
                        .segment(location.segment)
                        .expect("a live spilled entry keeps its segment");
                    segment.live_entries -= 1;
                    segment.live_bytes -= u64::from(location.len);
                }
            }
            entries.slots.pop_front();
            entries.base += 1;
            purged += 1;
        }
        entries.first_in_memory = entries.first_in_memory.max(entries.base);
        while let Some(segment) = entries.spill_segments.front() {
            if segment.live_entries > 0 || segment.in_use {
                break;
            }
            let name = spill_file_name(segment.number);
            entries.spill_segments.pop_front();
            self.io.remove(&name)?;
            self.counters
                .spill_segments_removed
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(purged)
    }

    pub fn stats(&self) -> UndoStats {
        let entries = self.entries.read();
        UndoStats {
            entries: entries.slots.len() as u64,
            memory_bytes: entries.memory_bytes,
            spilled_bytes: entries.spill_segments.iter().map(|s| s.live_bytes).sum(),
            spilled_bytes_total: self.counters.spilled_bytes_total.load(Ordering::Relaxed),
            spilled_reads: self.counters.spilled_reads.load(Ordering::Relaxed),
            spill_segments: entries.spill_segments.len() as u64,
            spill_segments_removed: self.counters.spill_segments_removed.load(Ordering::Relaxed),
        }
    }

    /// Spills batches of the oldest in-memory entries until memory is at most 3/4 of the
    /// budget (so that spills come in runs, not one per push).
    fn spill_to_budget(&self, writer: &mut SpillWriter) -> Result<()> {
        let target_bytes = self.config.memory_bytes / 4 * 3;
        while self.entries.read().memory_bytes > target_bytes {
            if !self.spill_batch(writer)? {
                break;
            }
        }
        Ok(())
    }

    /// Writes one batch of the oldest in-memory entries and points their slots at it.
    /// Returns false if there was nothing to spill.
    fn spill_batch(&self, writer: &mut SpillWriter) -> Result<bool> {
        let (segment_number, segment_offset) = self.spill_position(writer)?;
        // 1. Encode, under the read lock (entries are immutable once pushed).
        let mut records: Vec<(u64, SpillLocation)> = Vec::new();
        let mut encoded: Vec<u8> = Vec::new();
        {
            let entries = self.entries.read();
            let mut sequence = entries.first_in_memory;
            while encoded.is_empty() || encoded.len() < SPILL_BATCH_BYTES {
                let index = (sequence - entries.base) as usize;
                let Some(Slot::Memory(entry)) = entries.slots.get(index) else {
                    break;
                };
                let offset = segment_offset + encoded.len() as u64;
                let len = encode_record(&mut encoded, sequence, entry);
                let location = SpillLocation {
                    segment: segment_number,
                    offset,
                    len,
                };
                records.push((sequence, location));
                sequence += 1;
            }
        }
        if records.is_empty() {
            return Ok(false);
        }
        // 2. Write without locks: whole aligned blocks, zero padded.
        let write_len = encoded.len().div_ceil(IO_ALIGN) * IO_ALIGN;
        if writer.buffer.len() < write_len {
            writer.buffer = AlignedBuf::new(write_len);
        }
        writer.buffer[..encoded.len()].copy_from_slice(&encoded);
        writer.buffer[encoded.len()..write_len].fill(0);
        let file = {
            let mut entries = self.entries.write();
            let segment = entries.segment(segment_number).expect("segment in use");
            Arc::clone(&segment.file)
        };
        file.write_at(&writer.buffer[..write_len], segment_offset)?;
        writer.current = Some((segment_number, segment_offset + write_len as u64));
        self.counters
            .spilled_bytes_total
            .fetch_add(encoded.len() as u64, Ordering::Relaxed);
        // 3. Swap the slots still held (purge may have dropped some meanwhile).
        let mut entries = self.entries.write();
        let mut freed_bytes = 0;
        let (mut live_entries, mut live_bytes) = (0, 0);
        let last_sequence = records.last().expect("not empty").0;
        for (sequence, location) in records {
            let Some(index) = sequence.checked_sub(entries.base) else {
                continue;
            };
            let slot = &mut entries.slots[index as usize];
            let Slot::Memory(entry) = slot else {
                unreachable!("only the spiller moves entries out of memory");
            };
            freed_bytes += entry.memory_bytes();
            let superseded_ts = entry.superseded_ts;
            *slot = Slot::Spilled {
                superseded_ts,
                location,
            };
            live_entries += 1;
            live_bytes += u64::from(location.len);
        }
        entries.memory_bytes -= freed_bytes;
        entries.first_in_memory = entries.first_in_memory.max(last_sequence + 1);
        let segment = entries.segment(segment_number).expect("segment in use");
        segment.live_entries += live_entries;
        segment.live_bytes += live_bytes;
        Ok(true)
    }

    /// The segment and offset the next batch goes to; starts a new segment file when there is
    /// none, the current one is full, or purge deleted it.
    fn spill_position(&self, writer: &mut SpillWriter) -> Result<(u64, u64)> {
        let mut entries = self.entries.write();
        if let Some((number, offset)) = writer.current {
            let present = entries.segment(number).is_some();
            if present && offset < self.config.spill_segment_bytes {
                return Ok((number, offset));
            }
            if let Some(segment) = entries.segment(number) {
                segment.in_use = false;
            }
        }
        let number = writer.next_segment_number;
        writer.next_segment_number += 1;
        let options = OpenOptions {
            create: true,
            direct: true,
            dsync: false,
        };
        let file = self.io.open(&spill_file_name(number), options)?;
        entries.spill_segments.push_back(SpillSegment {
            number,
            file,
            live_entries: 0,
            live_bytes: 0,
            in_use: true,
        });
        writer.current = Some((number, 0));
        Ok((number, 0))
    }
}

/// Appends the spill record of `entry` to `out` and returns its length.
fn encode_record(out: &mut Vec<u8>, sequence: u64, entry: &UndoEntry) -> u32 {
    let start = out.len();
    let value_len = entry.value.as_ref().map_or(0, Vec::len);
    let len = RECORD_HEADER_SIZE + value_len;
    let len_field = u32::try_from(len).expect("undo values are limited to 16 MiB");
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&len_field.to_le_bytes());
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(&entry.commit_ts.to_le_bytes());
    out.extend_from_slice(&entry.superseded_ts.to_le_bytes());
    out.extend_from_slice(&entry.undo_pointer.to_le_bytes());
    out.push(if entry.value.is_some() {
        FLAG_HAS_VALUE
    } else {
        0
    });
    if let Some(value) = &entry.value {
        out.extend_from_slice(value);
    }
    let checksum = crc32c::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&checksum.to_le_bytes());
    len_field
}

/// Reads and checks the spill record of entry `sequence` at `location`.
fn read_record(file: &dyn IoFile, location: SpillLocation, sequence: u64) -> Result<UndoEntry> {
    let start = location.offset / IO_ALIGN as u64 * IO_ALIGN as u64;
    let end =
        (location.offset + u64::from(location.len)).div_ceil(IO_ALIGN as u64) * IO_ALIGN as u64;
    let mut buf = AlignedBuf::new((end - start) as usize);
    file.read_at(&mut buf[..(end - start) as usize], start)?;
    let first = (location.offset - start) as usize;
    let record = &buf[first..first + location.len as usize];
    decode_record(record, sequence).map_err(|detail| {
        let place = Location {
            file: file.name().to_string(),
            offset: Some(location.offset),
            ..Default::default()
        };
        Error::corruption(place, format!("undo record {sequence}: {detail}"))
    })
}

fn decode_record(record: &[u8], sequence: u64) -> std::result::Result<UndoEntry, String> {
    if record.len() < RECORD_HEADER_SIZE {
        return Err(format!("{} bytes is shorter than a header", record.len()));
    }
    let u32_at = |at: usize| u32::from_le_bytes(record[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(record[at..at + 8].try_into().expect("8 bytes"));
    if u32_at(0) != crc32c::crc32c(&record[4..]) {
        return Err("checksum mismatch".into());
    }
    if u32_at(4) as usize != record.len() || u64_at(8) != sequence {
        return Err(format!(
            "record claims length {} and sequence {}",
            u32_at(4),
            u64_at(8)
        ));
    }
    let flags = record[40];
    let value = match flags {
        0 if record.len() == RECORD_HEADER_SIZE => None,
        FLAG_HAS_VALUE => Some(record[RECORD_HEADER_SIZE..].to_vec()),
        _ => return Err(format!("bad flags {flags:#x}")),
    };
    Ok(UndoEntry {
        commit_ts: u64_at(16),
        superseded_ts: u64_at(24),
        undo_pointer: u64_at(32),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::{SimConfig, SimIo};

    fn undo_log(epoch: u64, memory_bytes: u64) -> (Arc<SimIo>, UndoLog) {
        let io = Arc::new(SimIo::new(SimConfig::default()));
        let config = UndoConfig {
            memory_bytes,
            spill_segment_bytes: 64 * 1024,
        };
        let undo = UndoLog::open(epoch, io.clone(), config).unwrap();
        (io, undo)
    }

    fn entry(superseded_ts: u64, value_len: usize) -> UndoEntry {
        UndoEntry {
            commit_ts: superseded_ts - 1,
            value: (value_len > 0).then(|| vec![superseded_ts as u8; value_len]),
            undo_pointer: superseded_ts * 3,
            superseded_ts,
        }
    }

    #[test]
    fn pointers_resolve_until_purged_and_not_across_epochs() {
        let (_io, undo) = undo_log(3, 1 << 20);
        let first = undo.push(entry(10, 1));
        let second = undo.push(entry(20, 1));
        assert_eq!(undo.get(first).unwrap().unwrap().superseded_ts, 10);
        let (_other_io, other) = undo_log(4, 1 << 20);
        assert!(other.get(first).unwrap().is_none(), "other epoch");
        assert_eq!(undo.purge(9).unwrap(), 0);
        assert_eq!(undo.purge(10).unwrap(), 1);
        assert!(undo.get(first).unwrap().is_none());
        assert_eq!(undo.get(second).unwrap().unwrap().superseded_ts, 20);
        assert_eq!(undo.stats().entries, 1);
        assert_eq!(undo.stats().spilled_bytes_total, 0);
    }

    #[test]
    fn spilled_entries_read_back_and_purge_deletes_their_segments() {
        let (io, undo) = undo_log(1, 16 * 1024);
        let pushed: Vec<(u64, UndoEntry)> = (1..=400u64)
            .map(|ts| {
                let entry = entry(ts + 1, (ts as usize * 37) % 900);
                (undo.push(entry.clone()), entry)
            })
            .collect();
        let stats = undo.stats();
        assert!(stats.memory_bytes <= 16 * 1024, "{stats:?}");
        assert!(
            stats.spilled_bytes > 0 && stats.spill_segments > 1,
            "{stats:?}"
        );
        for (pointer, expected) in &pushed {
            assert_eq!(undo.get(*pointer).unwrap().as_ref(), Some(expected));
        }
        assert!(undo.stats().spilled_reads > 0);
        // Purge half: the segments wholly before the cut go.
        assert_eq!(undo.purge(201).unwrap(), 200);
        assert!(undo.stats().spill_segments_removed > 0);
        for (pointer, expected) in &pushed[200..] {
            assert_eq!(undo.get(*pointer).unwrap().as_ref(), Some(expected));
        }
        assert_eq!(undo.purge(u64::MAX).unwrap(), 200);
        let stats = undo.stats();
        assert_eq!(
            (stats.entries, stats.memory_bytes, stats.spilled_bytes),
            (0, 0, 0)
        );
        assert_eq!(
            stats.spill_segments, 1,
            "only the segment being appended to stays"
        );
        // A new run deletes what the last one left.
        drop(undo);
        let dyn_io: Arc<dyn Io> = io.clone();
        let _undo = UndoLog::open(2, dyn_io, UndoConfig::default()).unwrap();
        assert!(!io
            .list()
            .unwrap()
            .iter()
            .any(|name| is_spill_file_name(name)));
    }

    #[test]
    fn corrupt_spill_record_is_an_error_naming_the_file() {
        let (io, undo) = undo_log(1, 0);
        let pointer = undo.push(entry(5, 100));
        assert_eq!(undo.stats().memory_bytes, 0);
        let name = spill_file_name(0);
        let mut bytes = io.file_contents(&name).unwrap();
        bytes[50] ^= 0xff;
        let file = io.open(&name, OpenOptions::EXISTING_DIRECT).unwrap();
        file.write_at(&bytes, 0).unwrap();
        let error = undo.get(pointer).unwrap_err();
        assert!(
            matches!(&error, Error::Corruption { location, .. } if location.file == name),
            "{error}"
        );
    }
}

//! The write-ahead log: redo-only logical records, group commit, recovery.
//!
//! The log is one byte stream addressed by LSN, the stream position of a record's first byte.
//! It is stored in segment files `wal.{first_lsn:016x}` (16 lowercase hex digits) of
//! `segment_size_bytes` each (default 64 MiB); a record may span two segments. Records are
//! framed as described in `record`; a zero length field marks the end of the log.
//!
//! Lifecycle:
//! 1. `Wal::open` reads the valid records from a start LSN (the checkpoint's redo LSN), cuts
//!    off a torn or stale tail, and returns them for replay in LSN order (`reader`).
//! 2. Committers `append` a record (a copy into the log buffer) and `flush_to` its end LSN;
//!    concurrent committers share one write + fdatasync, or one O_DSYNC write (leader/follower,
//!    `writer`). A commit larger than one frame is appended as contiguous parts
//!    (`commit_parts`) and read back as one record.
//! 3. After a checkpoint, `truncate_before(redo_lsn)` deletes segments wholly below it.
//! 4. Before dropping the `Wal`, `flush_to(end_lsn())` makes the remaining records durable;
//!    unflushed records are lost, which is correct for records nobody waited for.
//!
//! Durability protocol of one flush: write whole 4096-byte blocks (the last block of the
//! previous flush is rewritten with identical leading bytes), fdatasync every touched segment
//! (`SyncMode::Data`; with `SyncMode::Dsync` the O_DSYNC writes are durable when they complete),
//! fsync the directory if a segment was created, then advance the durable LSN. Assumed of the
//! device: a torn block write leaves each sector old or new; rewriting identical leading bytes
//! therefore never damages records acknowledged before.

mod commit_parts;
pub mod reader;
pub mod record;
pub mod segment;
pub mod stream;
pub mod writer;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

pub use reader::{Recovery, RecoveryReport};
pub use record::{patch_pieces, patched, LogRecord, Op};
pub use stream::StreamDecoder;

use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Io, OpenOptions, IO_ALIGN};
use writer::{SegmentWriter, WriterState};

/// A log sequence number: a byte position in the log stream.
pub type Lsn = u64;

pub const SEGMENT_SIZE_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;
pub const BUFFER_SIZE_BYTES_DEFAULT: usize = 16 * 1024 * 1024;

/// Where a primary's log goes besides its own files (replication, docs/design.md 5.6). The
/// flush leader calls `ship` with the bytes of each flush before writing them itself, so the
/// standby's write overlaps the local one, then `wait_replicated` once they are locally
/// durable; only then do the flush's commits count as durable (acknowledged, visible).
pub trait LogShipper: Send + Sync {
    /// Hands over the log bytes `[lsn, lsn + bytes.len())`, in stream order, with no gap
    /// after the position `Wal::set_shipper` returned. Must not wait for the network.
    fn ship(&self, lsn: Lsn, bytes: &[u8]);
    /// Returns once the synchronous standby made the log durable up to `lsn`. An error stops
    /// the primary (`Error::NotPrimary` from then on): it was fenced or gave up its role. It
    /// never poisons the engine: every byte is durable locally.
    fn wait_replicated(&self, lsn: Lsn) -> Result<()>;
}

/// How a flush makes written blocks durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// fdatasync of each written segment (and the directory after creating one).
    Data,
    /// Segment files are opened with O_DSYNC (and O_DIRECT when `direct`): each block write is
    /// durable when it completes, with no fdatasync; the directory is still fsynced after
    /// creating a segment. With preallocated segments a flush is one write to blocks the file
    /// already has, which the device can complete as a single FUA write.
    Dsync,
    /// Write only; a crash may lose acknowledged commits. For measurements, never for data.
    None,
}

impl SyncMode {
    /// Name as used on command lines and in reports: fdatasync, dsync, none.
    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Data => "fdatasync",
            SyncMode::Dsync => "dsync",
            SyncMode::None => "none",
        }
    }
}

/// How the log is stored and flushed; `Default` gives the production settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalConfig {
    /// Size of a segment file; a multiple of 4096. Default 64 MiB.
    pub segment_size_bytes: u64,
    /// Capacity of each of the two log buffers; bounds the largest frame (a larger commit is
    /// logged as several `CommitPart` frames). Default 16 MiB.
    pub buffer_size_bytes: usize,
    /// How a flush makes the log durable. Default `SyncMode::Data`.
    pub sync_mode: SyncMode,
    /// Time a flush leader waits before writing so more commits can join (0: none).
    pub group_commit_delay: Duration,
    /// Open segment files with O_DIRECT where the backend supports it.
    pub direct: bool,
    /// Zero-fill each segment to its full size when it is created (and the end segment after
    /// recovery), so flushes overwrite allocated blocks instead of growing the file: no
    /// file-size change to journal per flush. Zeros read as the end of the log.
    pub preallocate_segments: bool,
}

impl WalConfig {
    /// How segment files are opened for this configuration.
    pub(crate) fn segment_options(&self, create: bool) -> OpenOptions {
        OpenOptions {
            create,
            direct: self.direct,
            dsync: self.sync_mode == SyncMode::Dsync,
        }
    }
}

impl Default for WalConfig {
    fn default() -> WalConfig {
        WalConfig {
            segment_size_bytes: SEGMENT_SIZE_BYTES_DEFAULT,
            buffer_size_bytes: BUFFER_SIZE_BYTES_DEFAULT,
            sync_mode: SyncMode::Data,
            group_commit_delay: Duration::ZERO,
            direct: true,
            preallocate_segments: false,
        }
    }
}

/// Counters since open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WalStats {
    /// Successful write + sync rounds.
    pub flushes: u64,
    /// Records appended (a commit logged as parts counts once).
    pub records_appended: u64,
    /// `flush_to` calls that returned successfully.
    pub commits: u64,
    /// Bytes written to segment files, rewritten partial blocks included.
    pub bytes_written: u64,
    /// Sum of the time spent in successful `flush_to` calls.
    pub commit_wait_ns_total: u64,
    /// `commits / flushes` (0 before the first flush).
    pub commits_per_flush: f64,
}

#[derive(Default)]
struct Counters {
    flushes: AtomicU64,
    records_appended: AtomicU64,
    commits: AtomicU64,
    bytes_written: AtomicU64,
    commit_wait_ns_total: AtomicU64,
}

/// The write-ahead log. Shared by reference between committer threads.
pub struct Wal {
    io: Arc<dyn Io>,
    config: WalConfig,
    state: Mutex<WriterState>,
    /// Signalled after every flush, successful or not.
    flushed: Condvar,
    /// Committers waiting in `flush_to`, by the parity of the flush that will cover them
    /// (`WriterState::flush_parity`): a finished flush wakes only the committers it made
    /// durable, plus one of the rest to lead the next flush.
    committers: [Condvar; 2],
    segments: Mutex<SegmentWriter>,
    counters: Counters,
    /// Copies of `state` fields readable without the lock.
    end_lsn_published: AtomicU64,
    durable_lsn_published: AtomicU64,
    poisoned_published: AtomicBool,
    /// Every byte before this is durable in this node's files (ahead of `durable_lsn` while a
    /// flush waits for its replication).
    local_durable_lsn_published: AtomicU64,
    /// Set once replication stopped this primary (`WriterState::stopped`).
    stopped_published: AtomicBool,
    /// Where flushed bytes are shipped (a primary with standbys); None: standalone.
    shipper: RwLock<Option<Arc<dyn LogShipper>>>,
    /// Segments at or after this position are kept by `truncate_before` (a standby still
    /// needs them: a replication slot). `u64::MAX`: none.
    retain_lsn: AtomicU64,
}

impl Wal {
    /// Recovers the log from `start_lsn` (a record boundary, e.g. a checkpoint's redo LSN; for
    /// an empty directory the log begins at `start_lsn` rounded up to 4096) and opens it for
    /// appending at the end of the valid log.
    pub fn open(io: Arc<dyn Io>, config: WalConfig, start_lsn: Lsn) -> Result<(Wal, Recovery)> {
        writer::validate_config(&config)?;
        let segment_options = config.segment_options(false);
        let preallocated = config.preallocate_segments;
        let (recovery, tail) = reader::recover(&*io, segment_options, preallocated, start_lsn)?;
        let end_lsn = recovery.report.end_lsn;
        let mut active = AlignedBuf::new(config.buffer_size_bytes);
        active[..tail.tail_block.len()].copy_from_slice(&tail.tail_block);
        let current_end_lsn = match &tail.end_segment {
            // A smaller segment size than before must not cut the current segment short.
            Some((first_lsn, _)) => (first_lsn + config.segment_size_bytes).max(align_up(end_lsn)),
            None => 0,
        };
        let mut segments = SegmentWriter {
            io: Arc::clone(&io),
            segment_size_bytes: config.segment_size_bytes,
            sync_mode: config.sync_mode,
            options: config.segment_options(true),
            preallocate: config.preallocate_segments,
            current: tail.end_segment,
            current_end_lsn,
        };
        if config.preallocate_segments {
            segments.preallocate_current()?;
        }
        let state = WriterState {
            active,
            active_base_lsn: align_down(end_lsn),
            spare: Some(AlignedBuf::new(config.buffer_size_bytes)),
            end_lsn,
            durable_lsn: end_lsn,
            poisoned: None,
            stopped: None,
            group_open: false,
            flush_parity: 0,
            flushing_end_lsn: end_lsn,
            written_lsn: end_lsn,
        };
        let wal = Wal {
            io,
            config,
            state: Mutex::new(state),
            flushed: Condvar::new(),
            committers: [Condvar::new(), Condvar::new()],
            segments: Mutex::new(segments),
            counters: Counters::default(),
            end_lsn_published: AtomicU64::new(end_lsn),
            durable_lsn_published: AtomicU64::new(end_lsn),
            poisoned_published: AtomicBool::new(false),
            local_durable_lsn_published: AtomicU64::new(end_lsn),
            stopped_published: AtomicBool::new(false),
            shipper: RwLock::new(None),
            retain_lsn: AtomicU64::new(u64::MAX),
        };
        Ok((wal, recovery))
    }

    /// Position just past the last appended record (never inside a commit's part group).
    pub fn end_lsn(&self) -> Lsn {
        self.end_lsn_published.load(Ordering::Acquire)
    }

    /// Every byte before this position is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn_published.load(Ordering::Acquire)
    }

    /// True once a flush failed: every later append and flush fails with `Error::Poisoned`.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned_published.load(Ordering::Acquire)
    }

    /// Every byte before this is durable in this node's own files; a primary's commits count
    /// only up to `durable_lsn` (also durable on its synchronous standby).
    pub fn local_durable_lsn(&self) -> Lsn {
        self.local_durable_lsn_published
            .load(Ordering::Acquire)
            .max(self.durable_lsn())
    }

    /// True once replication stopped this primary: later appends and flushes fail with
    /// `Error::NotPrimary`.
    pub fn is_stopped(&self) -> bool {
        self.stopped_published.load(Ordering::Acquire)
    }

    /// Installs (or removes) the log shipper. Returns the position from which it will be handed
    /// every flushed byte: the bytes before it are read from the files (`read_stream`) once
    /// `local_durable_lsn` passed it.
    pub fn set_shipper(&self, shipper: Option<Arc<dyn LogShipper>>) -> Lsn {
        let state = self.state.lock();
        *self.shipper.write() = shipper;
        state.flushing_end_lsn
    }

    /// The log bytes `[from, to)` from this node's files; `to` must be locally durable.
    pub fn read_stream(&self, from: Lsn, to: Lsn) -> Result<Vec<u8>> {
        let durable = self.local_durable_lsn();
        if from > to || to > durable {
            return Err(Error::InvalidArgument(format!(
                "log bytes {from}..{to} requested, durable up to {durable}"
            )));
        }
        reader::read_stream(&*self.io, self.config.segment_options(false), from, to)
    }

    /// Keeps the segments at or after `lsn` through later `truncate_before` calls (a
    /// replication slot: a standby resumes there); `u64::MAX` keeps nothing.
    pub fn set_retain_lsn(&self, lsn: Lsn) {
        self.retain_lsn.store(lsn, Ordering::Release);
    }

    /// The configuration the log was opened with.
    pub fn config(&self) -> &WalConfig {
        &self.config
    }

    /// The log's counters now.
    pub fn stats(&self) -> WalStats {
        let flushes = self.counters.flushes.load(Ordering::Relaxed);
        let commits = self.counters.commits.load(Ordering::Relaxed);
        WalStats {
            flushes,
            records_appended: self.counters.records_appended.load(Ordering::Relaxed),
            commits,
            bytes_written: self.counters.bytes_written.load(Ordering::Relaxed),
            commit_wait_ns_total: self.counters.commit_wait_ns_total.load(Ordering::Relaxed),
            commits_per_flush: if flushes == 0 {
                0.0
            } else {
                commits as f64 / flushes as f64
            },
        }
    }

    /// Deletes the segment files that lie wholly below `lsn` (after a checkpoint whose redo
    /// LSN is `lsn`). The segment holding `lsn` stays. Returns the number of files deleted.
    pub fn truncate_before(&self, lsn: Lsn) -> Result<u64> {
        if lsn > self.durable_lsn() {
            return Err(Error::InvalidArgument(format!(
                "truncate before {lsn} beyond the durable log end {}",
                self.durable_lsn()
            )));
        }
        let lsn = lsn.min(self.retain_lsn.load(Ordering::Acquire));
        // Holding the segment writer keeps a flush from creating a segment meanwhile.
        let _segments = self.segments.lock();
        let firsts = segment::list_segments(&*self.io)?;
        let mut removed = 0;
        for pair in firsts.windows(2) {
            if pair[1] <= lsn {
                self.io.remove(&segment::segment_name(pair[0]))?;
                removed += 1;
            }
        }
        if removed > 0 {
            self.io.sync_dir()?;
        }
        Ok(removed)
    }
}

pub(crate) fn align_down(position: u64) -> u64 {
    position / IO_ALIGN as u64 * IO_ALIGN as u64
}

pub(crate) fn align_up(position: u64) -> u64 {
    position.div_ceil(IO_ALIGN as u64) * IO_ALIGN as u64
}

#[cfg(test)]
mod tests;

//! The appending side: a fixed log buffer and leader/follower group commit.
//!
//! Two aligned buffers of `buffer_size_bytes` each are allocated at open. One is `active`:
//! appenders copy framed records into it under the state mutex. A flush goes like this:
//!
//! 1. A committer whose LSN is not durable and finds no flush running becomes the leader; it
//!    takes the spare buffer (its absence marks "flush in progress").
//! 2. Optionally it sleeps `group_commit_delay` so more commits join.
//! 3. It swaps the buffers: the old active buffer, holding `[base, end)`, leaves the state;
//!    the last partial block of it is copied to the start of the new active buffer, whose base
//!    is that block's start, so the next flush rewrites the block whole (O_DIRECT writes only
//!    whole aligned blocks; the unused tail of a block is zeros, a zero length ends the log).
//! 4. Without the mutex, it writes the old buffer's blocks to the segment files and syncs
//!    them, while appenders keep filling the new active buffer.
//! 5. It takes the mutex again, returns the (re-zeroed) buffer as spare, advances the durable
//!    LSN and wakes the committers it covered, and one committer it did not cover, which
//!    leads the next flush (that flush covers every committer waiting then, since they all
//!    appended before it started).
//! 6. On a primary (a log shipper installed) step 5 wakes the next leader as soon as the
//!    local write is synced (`written_lsn`), and only then does this leader wait for the
//!    standby's acknowledgement, without the mutex; flushes overlap, so the next one writes
//!    while this one waits. The local writes stay one at a time and in order, and a standby
//!    acknowledges positions in order, so whichever wait ends advances the durable LSN to its
//!    own end (it only grows); the committers of a flush written but not yet acknowledged
//!    wait on `flushed`. Once a wait has failed (`stopped`), no later one advances it.
//!
//! Committers wait on one of two condition variables, by the parity of the flush that will
//! make them durable: the running one if their LSN is at or before its end, else the next.
//! Waking everyone after each flush would wake the committers of the next flush only for
//! them to sleep again: with 16 committers that was most of the context switches of a
//! durable single-row update through the server (4.4 voluntary switches per transaction).
//!
//! An appender that finds the active buffer full leads a flush or waits for the running one.
//! A commit too large for one frame is appended as a group of part frames (`commit_parts`);
//! while the group is open no other record is appended, so its parts are contiguous.
//! If a write or sync fails, the WAL is poisoned: the device's state of the unsynced bytes is
//! unknown and retrying fsync may report success for lost data, so every later call fails.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use super::commit_parts::CommitPartEncoder;
use super::record::{frame_seal, LogRecord, Op};
use super::segment::segment_name;
use super::{align_down, align_up, Lsn, SyncMode, Wal, WalConfig};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Io, IoFile, OpenOptions};

/// Mutable state of the writer, behind `Wal::state`.
pub(crate) struct WriterState {
    /// Buffer that appends go to; byte 0 is stream position `active_base_lsn`.
    pub active: AlignedBuf,
    /// Block-aligned stream position of `active[0]`.
    pub active_base_lsn: Lsn,
    /// All zeros when present; `None` while a leader is flushing.
    pub spare: Option<AlignedBuf>,
    pub end_lsn: Lsn,
    pub durable_lsn: Lsn,
    /// Set after a failed write or sync; the message of the first failure.
    pub poisoned: Option<String>,
    /// Set when replication stopped this primary (`LogShipper::wait_replicated` failed): the
    /// reason. Unlike `poisoned` the local log is sound; the node just may not acknowledge.
    pub stopped: Option<String>,
    /// A commit's parts are being appended: other appends wait (`GroupGuard`).
    pub group_open: bool,
    /// Parity (0 or 1) of the running flush, or of the last one; flushes alternate.
    pub flush_parity: usize,
    /// End LSN of the running flush, or of the last one.
    pub flushing_end_lsn: Lsn,
    /// End of the last flush written and synced here: `durable_lsn`, or past it while that
    /// flush waits for the standby (a primary's flushes overlap: the next one writes while
    /// the last one waits).
    pub written_lsn: Lsn,
}

/// Holds the log's part group open: while it lives, only its owner appends.
struct GroupGuard<'a> {
    wal: &'a Wal,
}

impl<'a> GroupGuard<'a> {
    /// Waits until no other group is open, then opens one.
    fn open(wal: &'a Wal) -> Result<GroupGuard<'a>> {
        let mut state = wal.state.lock();
        loop {
            check_poisoned(&state)?;
            if !state.group_open {
                break;
            }
            wal.flushed.wait(&mut state);
        }
        state.group_open = true;
        Ok(GroupGuard { wal })
    }
}

impl Drop for GroupGuard<'_> {
    /// Closes the group, also after a failed flush (the log is poisoned then), and wakes the
    /// appenders waiting for it.
    fn drop(&mut self) {
        self.wal.state.lock().group_open = false;
        self.wal.flushed.notify_all();
    }
}

/// Where flushed blocks go: the current segment file, and creation of the next one. Only the
/// flush leader (and `truncate_before`) lock it.
pub(crate) struct SegmentWriter {
    pub io: Arc<dyn Io>,
    pub segment_size_bytes: u64,
    pub sync_mode: SyncMode,
    /// How new segment files are opened (O_DIRECT, O_DSYNC).
    pub options: OpenOptions,
    /// Zero-fill new segments to their full size (`WalConfig::preallocate_segments`).
    pub preallocate: bool,
    /// First LSN and file of the segment being written, `None` for a log with no files yet.
    pub current: Option<(Lsn, Arc<dyn IoFile>)>,
    /// Stream position where the current segment ends and the next one begins.
    pub current_end_lsn: Lsn,
}

impl SegmentWriter {
    /// Writes `bytes` (whole blocks) at stream position `base_lsn` and makes them durable.
    fn write_and_sync(&mut self, base_lsn: Lsn, bytes: &[u8]) -> Result<()> {
        debug_assert_eq!(base_lsn, align_down(base_lsn));
        debug_assert_eq!(bytes.len() as u64, align_up(bytes.len() as u64));
        let mut touched: Vec<Arc<dyn IoFile>> = Vec::with_capacity(2);
        let mut created_segment = false;
        let mut position = base_lsn;
        let mut written = 0;
        while written < bytes.len() {
            if self.current.is_none() || position >= self.current_end_lsn {
                self.start_segment(position)?;
                created_segment = true;
            }
            let (first_lsn, file) = self.current.as_ref().expect("segment just ensured");
            let chunk = (bytes.len() - written).min((self.current_end_lsn - position) as usize);
            file.write_at(&bytes[written..written + chunk], position - first_lsn)?;
            if !touched.iter().any(|other| Arc::ptr_eq(other, file)) {
                touched.push(Arc::clone(file));
            }
            written += chunk;
            position += chunk as u64;
        }
        match self.sync_mode {
            SyncMode::Data => {
                for file in &touched {
                    file.sync_data()?;
                }
            }
            // Each write above was durable when it returned (O_DSYNC).
            SyncMode::Dsync => {}
            SyncMode::None => return Ok(()),
        }
        // A new segment's directory entry must be durable before its records count.
        if created_segment {
            self.io.sync_dir()?;
        }
        Ok(())
    }

    fn start_segment(&mut self, first_lsn: Lsn) -> Result<()> {
        debug_assert_eq!(first_lsn, align_down(first_lsn));
        let file = self.io.open(&segment_name(first_lsn), self.options)?;
        self.current = Some((first_lsn, file));
        self.current_end_lsn = first_lsn + self.segment_size_bytes;
        if self.preallocate {
            self.preallocate_current()?;
        }
        Ok(())
    }

    /// Zero-fills the current segment from its length to its end and makes the zeros durable,
    /// so later flushes overwrite allocated blocks. Zeros past the log end read as its end.
    pub(crate) fn preallocate_current(&mut self) -> Result<()> {
        const CHUNK_BYTES: usize = 1024 * 1024;
        let Some((first_lsn, file)) = &self.current else {
            return Ok(());
        };
        let end_offset = self.current_end_lsn - first_lsn;
        let mut offset = align_up(file.len()?);
        if offset >= end_offset {
            return Ok(());
        }
        let zeros = AlignedBuf::new(CHUNK_BYTES);
        while offset < end_offset {
            let chunk = (end_offset - offset).min(CHUNK_BYTES as u64) as usize;
            file.write_at(&zeros[..chunk], offset)?;
            offset += chunk as u64;
        }
        if self.sync_mode != SyncMode::None {
            file.sync_data()?;
        }
        Ok(())
    }
}

/// Where an appended record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Position of the record's first byte: its LSN.
    pub lsn: Lsn,
    /// Position just past the record; `flush_to(end_lsn)` makes the record durable.
    pub end_lsn: Lsn,
}

impl Wal {
    /// Copies a record into the log buffer and returns its position. Not durable until
    /// `flush_to(appended.end_lsn)` returns.
    ///
    /// A `Commit` whose frame would exceed `frame_size_limit_bytes` is appended as consecutive
    /// `CommitPart` frames instead (`commit_parts`); `lsn` is then the first part's position
    /// and `end_lsn` the last part's end.
    pub fn append(&self, record: &LogRecord) -> Result<Appended> {
        let limit = self.frame_size_limit_bytes();
        if record.frame_size_bytes() > limit as u64 {
            return match record {
                LogRecord::Commit {
                    txn_id,
                    commit_ts,
                    ops,
                } => self.append_commit_parts(*txn_id, *commit_ts, ops),
                _ => Err(Error::ValueTooLarge {
                    size: usize::try_from(record.frame_size_bytes()).unwrap_or(usize::MAX),
                    limit,
                }),
            };
        }
        let mut frame = record.encode_frame();
        debug_assert_eq!(frame.len() as u64, record.frame_size_bytes());
        let appended = self.place_frame(&mut frame, false)?;
        self.end_lsn_published
            .fetch_max(appended.end_lsn, Ordering::AcqRel);
        self.counters
            .records_appended
            .fetch_add(1, Ordering::Relaxed);
        Ok(appended)
    }

    /// Appends a commit as `CommitPart` frames, encoded one at a time, with no other record
    /// between them: other appenders wait while the group is open (flushes go on, also ones
    /// this appender leads when the buffer fills). The published end LSN moves only past the
    /// whole group, so no caller of `end_lsn` (a checkpoint's redo LSN) sees a position inside.
    fn append_commit_parts(&self, txn_id: u64, commit_ts: u64, ops: &[Op]) -> Result<Appended> {
        let frame_size_bytes = self.frame_size_limit_bytes();
        let mut encoder = CommitPartEncoder::new(txn_id, commit_ts, ops);
        let mut frame = Vec::with_capacity(frame_size_bytes);
        let group = GroupGuard::open(self)?;
        let mut first_lsn = None;
        let mut end_lsn = 0;
        while encoder.next_part(&mut frame, frame_size_bytes) {
            let appended = self.place_frame(&mut frame, true)?;
            first_lsn.get_or_insert(appended.lsn);
            end_lsn = appended.end_lsn;
        }
        drop(group);
        self.end_lsn_published.fetch_max(end_lsn, Ordering::AcqRel);
        self.counters
            .records_appended
            .fetch_add(1, Ordering::Relaxed);
        Ok(Appended {
            lsn: first_lsn.expect("a commit has at least one part"),
            end_lsn,
        })
    }

    /// Seals `frame` (made by `encode_frame` or `CommitPartEncoder`) at the log end and copies
    /// it into the active buffer, leading or waiting for flushes while the buffer is full.
    /// `in_group`: the caller holds the open part group; otherwise an open group is waited for.
    fn place_frame(&self, frame: &mut [u8], in_group: bool) -> Result<Appended> {
        // Most of the checksum is computed before taking the lock; only the LSN is added.
        let body_checksum = crc32c::crc32c(&frame[16..]);
        let mut state = self.state.lock();
        loop {
            check_poisoned(&state)?;
            if state.group_open && !in_group {
                self.flushed.wait(&mut state);
                continue;
            }
            let used = (state.end_lsn - state.active_base_lsn) as usize;
            if used + frame.len() <= state.active.len() {
                break;
            }
            if state.spare.is_some() {
                self.lead_flush(&mut state)?;
            } else {
                self.flushed.wait(&mut state);
            }
        }
        let lsn = state.end_lsn;
        frame_seal(frame, lsn, body_checksum);
        let start = (lsn - state.active_base_lsn) as usize;
        state.active[start..start + frame.len()].copy_from_slice(frame);
        state.end_lsn += frame.len() as u64;
        Ok(Appended {
            lsn,
            end_lsn: state.end_lsn,
        })
    }

    /// Returns once every byte before `lsn` is durable. Concurrent callers share flushes.
    pub fn flush_to(&self, lsn: Lsn) -> Result<()> {
        let started = Instant::now();
        let mut state = self.state.lock();
        if lsn > state.end_lsn {
            return Err(Error::InvalidArgument(format!(
                "flush to {lsn} beyond the log end {}",
                state.end_lsn
            )));
        }
        loop {
            check_poisoned(&state)?;
            if state.durable_lsn >= lsn {
                break;
            }
            if lsn <= state.written_lsn {
                // Written here; its leader waits for the standby and wakes `flushed`.
                self.flushed.wait(&mut state);
            } else if state.spare.is_some() {
                self.lead_flush(&mut state)?;
            } else {
                // The running flush covers `lsn`, or the next one will.
                let parity = state.flush_parity ^ usize::from(lsn > state.flushing_end_lsn);
                self.committers[parity].wait(&mut state);
            }
        }
        drop(state);
        let waited_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        self.counters
            .commit_wait_ns_total
            .fetch_add(waited_ns, Ordering::Relaxed);
        Ok(())
    }

    /// Flushes everything buffered so far (steps 1-5 of the module doc). Called with the state
    /// locked and no flush running; returns with the state locked.
    fn lead_flush(&self, state: &mut MutexGuard<'_, WriterState>) -> Result<()> {
        let mut next_active = state.spare.take().expect("no flush is running");
        let delay = self.config.group_commit_delay;
        if !delay.is_zero() {
            MutexGuard::unlocked(state, || std::thread::sleep(delay));
        }
        let flush_base_lsn = state.active_base_lsn;
        let flush_end_lsn = state.end_lsn;
        let used = (flush_end_lsn - flush_base_lsn) as usize;
        let next_base_lsn = align_down(flush_end_lsn);
        let carried = (flush_end_lsn - next_base_lsn) as usize;
        next_active[..carried].copy_from_slice(&state.active[used - carried..used]);
        let mut flushing = std::mem::replace(&mut state.active, next_active);
        state.active_base_lsn = next_base_lsn;
        let write_len = align_up(used as u64) as usize;
        // Bytes before the previous flush's end went to the shipper with that flush.
        let ship_from_lsn = state.flushing_end_lsn.max(flush_base_lsn);
        state.flush_parity ^= 1;
        state.flushing_end_lsn = flush_end_lsn;
        let shipper = self.shipper.read().clone();
        let result = MutexGuard::unlocked(state, || {
            if let Some(shipper) = &shipper {
                if ship_from_lsn < flush_end_lsn {
                    let start = (ship_from_lsn - flush_base_lsn) as usize;
                    shipper.ship(ship_from_lsn, &flushing[start..used]);
                }
            }
            let local = self
                .segments
                .lock()
                .write_and_sync(flush_base_lsn, &flushing[..write_len]);
            flushing[..write_len].fill(0);
            local.map_err(FlushFailure::Local)?;
            self.local_durable_lsn_published
                .fetch_max(flush_end_lsn, Ordering::AcqRel);
            Ok(())
        });
        state.spare = Some(flushing);
        let pipelined = result.is_ok() && shipper.is_some();
        let result = match (result, shipper) {
            (Ok(()), Some(shipper)) => {
                self.count_flush(write_len);
                state.written_lsn = state.written_lsn.max(flush_end_lsn);
                // The buffer is back: the next flush may write while this one waits for the
                // standby (its committers now wait on `flushed`).
                let parity = state.flush_parity;
                self.committers[parity].notify_all();
                self.committers[parity ^ 1].notify_one();
                self.flushed.notify_all();
                MutexGuard::unlocked(state, || shipper.wait_replicated(flush_end_lsn))
                    .map_err(FlushFailure::Replication)
                    .and_then(|()| match &state.stopped {
                        // An earlier flush's wait failed: this node acknowledges nothing more.
                        Some(reason) => {
                            Err(FlushFailure::Replication(Error::NotPrimary(reason.clone())))
                        }
                        None => {
                            self.publish_durable(state, flush_end_lsn);
                            Ok(())
                        }
                    })
            }
            (Ok(()), None) => {
                self.count_flush(write_len);
                state.written_lsn = state.written_lsn.max(flush_end_lsn);
                match &state.stopped {
                    // The shipper went while an overlapping flush's wait failed (a primary
                    // stopping): nothing more becomes durable.
                    Some(reason) => {
                        Err(FlushFailure::Replication(Error::NotPrimary(reason.clone())))
                    }
                    None => {
                        self.publish_durable(state, flush_end_lsn);
                        Ok(())
                    }
                }
            }
            (Err(error), _) => Err(error),
        };
        let result = match result {
            Ok(()) => Ok(()),
            Err(FlushFailure::Local(error)) => {
                log::error!("WAL flush to {flush_end_lsn} failed, WAL poisoned: {error}");
                state.poisoned = Some(error.to_string());
                self.poisoned_published.store(true, Ordering::Release);
                Err(error)
            }
            Err(FlushFailure::Replication(error)) => {
                log::error!("replication of the log to {flush_end_lsn} failed, stopping: {error}");
                let reason = match error {
                    Error::NotPrimary(reason) => reason,
                    other => other.to_string(),
                };
                state.stopped = Some(reason.clone());
                self.stopped_published.store(true, Ordering::Release);
                Err(Error::NotPrimary(reason))
            }
        };
        self.flushed.notify_all();
        let parity = state.flush_parity;
        if result.is_err() {
            self.committers[parity].notify_all();
            self.committers[parity ^ 1].notify_all();
        } else if !pipelined {
            self.committers[parity].notify_all();
            self.committers[parity ^ 1].notify_one();
        }
        result
    }

    fn count_flush(&self, write_len: usize) {
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_written
            .fetch_add(write_len as u64, Ordering::Relaxed);
    }

    /// Every byte before `lsn` is durable (here and, on a primary, on its standby). Flushes
    /// of a primary finish their waits out of order; the durable position only grows.
    fn publish_durable(&self, state: &mut WriterState, lsn: Lsn) {
        state.durable_lsn = state.durable_lsn.max(lsn);
        self.durable_lsn_published.fetch_max(lsn, Ordering::AcqRel);
    }

    /// A standby's append: copies the primary's log bytes `[lsn, lsn + bytes.len())` to the log
    /// end (which must be `lsn`: the log is byte-identical on both nodes), leading flushes
    /// while the buffer is full, and makes them durable. Returns the new durable end. The
    /// bytes are whole frames the primary sealed at these positions; a range may end inside a
    /// commit's parts, never inside a frame.
    pub fn append_stream(&self, lsn: Lsn, bytes: &[u8]) -> Result<Lsn> {
        let mut state = self.state.lock();
        check_poisoned(&state)?;
        if lsn != state.end_lsn {
            return Err(Error::InvalidArgument(format!(
                "log bytes shipped for {lsn}, but this log ends at {}",
                state.end_lsn
            )));
        }
        let mut offset = 0;
        while offset < bytes.len() {
            check_poisoned(&state)?;
            let used = (state.end_lsn - state.active_base_lsn) as usize;
            let room = state.active.len() - used;
            if room == 0 {
                if state.spare.is_some() {
                    self.lead_flush(&mut state)?;
                } else {
                    self.flushed.wait(&mut state);
                }
                continue;
            }
            let chunk = room.min(bytes.len() - offset);
            state.active[used..used + chunk].copy_from_slice(&bytes[offset..offset + chunk]);
            state.end_lsn += chunk as u64;
            offset += chunk;
        }
        let end_lsn = state.end_lsn;
        drop(state);
        self.end_lsn_published.fetch_max(end_lsn, Ordering::AcqRel);
        self.flush_to(end_lsn)?;
        Ok(end_lsn)
    }

    /// Cuts the log back to `lsn` (a record boundary before the end): a standby being promoted
    /// drops the parts of a commit whose last part never arrived (never acknowledged). The
    /// files are cut as recovery cuts a torn tail; appends continue at `lsn`. Only for a log
    /// nobody else appends to.
    pub(crate) fn cut_back(&self, lsn: Lsn) -> Result<()> {
        let mut state = self.state.lock();
        while state.spare.is_none() {
            self.flushed.wait(&mut state);
        }
        check_poisoned(&state)?;
        if lsn >= state.end_lsn {
            return Ok(());
        }
        if state.durable_lsn < state.end_lsn {
            return Err(Error::InvalidArgument(
                "cutting back a log with bytes not yet durable".into(),
            ));
        }
        let mut segments = self.segments.lock();
        let (tail_block, end_segment) = super::reader::cut_back(
            &*self.io,
            self.config.segment_options(false),
            self.config.preallocate_segments,
            lsn,
        )?;
        let segment_end_lsn = (end_segment.0 + self.config.segment_size_bytes).max(align_up(lsn));
        segments.current = Some(end_segment);
        segments.current_end_lsn = segment_end_lsn;
        drop(segments);
        state.active.fill(0);
        state.active[..tail_block.len()].copy_from_slice(&tail_block);
        state.active_base_lsn = align_down(lsn);
        state.end_lsn = lsn;
        state.durable_lsn = lsn;
        state.flushing_end_lsn = lsn;
        state.written_lsn = lsn;
        self.end_lsn_published.store(lsn, Ordering::Release);
        self.durable_lsn_published.store(lsn, Ordering::Release);
        self.local_durable_lsn_published
            .store(lsn, Ordering::Release);
        Ok(())
    }

    /// Fails as appends would: `Error::Poisoned` after a failed flush, `Error::NotPrimary` once
    /// replication stopped this primary.
    pub fn check_open(&self) -> Result<()> {
        if !self.is_poisoned() && !self.is_stopped() {
            return Ok(());
        }
        check_poisoned(&self.state.lock())
    }

    /// Largest frame an append accepts: it must fit in the buffer next to a carried block.
    pub(crate) fn frame_size_limit_bytes(&self) -> usize {
        let buffer_limit = self.config.buffer_size_bytes - crate::io::IO_ALIGN;
        buffer_limit.min(super::record::FRAME_SIZE_MAX as usize)
    }
}

/// Why a flush failed: the local write or sync (the log is poisoned), or the wait for the
/// standby (the primary stops; its own log is sound).
enum FlushFailure {
    Local(Error),
    Replication(Error),
}

fn check_poisoned(state: &WriterState) -> Result<()> {
    if let Some(message) = &state.poisoned {
        return Err(Error::Poisoned(format!(
            "WAL write failed earlier: {message}"
        )));
    }
    match &state.stopped {
        Some(reason) => Err(Error::NotPrimary(reason.clone())),
        None => Ok(()),
    }
}

/// Checks a configuration before anything is allocated.
pub(crate) fn validate_config(config: &WalConfig) -> Result<()> {
    let align = crate::io::IO_ALIGN as u64;
    if config.segment_size_bytes == 0 || !config.segment_size_bytes.is_multiple_of(align) {
        return Err(Error::InvalidArgument(format!(
            "WAL segment size {} is not a positive multiple of {align}",
            config.segment_size_bytes
        )));
    }
    if config.buffer_size_bytes < 4 * crate::io::IO_ALIGN
        || !config.buffer_size_bytes.is_multiple_of(crate::io::IO_ALIGN)
    {
        return Err(Error::InvalidArgument(format!(
            "WAL buffer size {} is not a multiple of {align} of at least 4 blocks",
            config.buffer_size_bytes
        )));
    }
    Ok(())
}

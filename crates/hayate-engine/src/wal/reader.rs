//! Recovery: reads the log stream from a start LSN to the end of the valid log and cuts off
//! whatever follows.
//!
//! 1. List the segment files and check that `start_lsn` lies inside the stream.
//! 2. Read frames one after another through a block-aligned window (`StreamReader`), so reads
//!    are O_DIRECT-friendly and a frame may span two segments.
//! 3. The log ends at the first frame that is not valid at its position: a zero length field
//!    (the normal end), an impossible length, a CRC mismatch, an LSN field that differs from the
//!    position (stale bytes), or a short read. Corruption in the middle of the log looks the
//!    same as a torn tail and is treated as the end: telling them apart would need a second copy
//!    of the data. A frame with a valid CRC whose payload does not decode is not a torn write
//!    but a bug or a bad format, and gives `Error::Corruption`.
//!    The parts of a multi-frame commit (`commit_parts`) are reassembled into one `Commit`; if
//!    the log ends before the last part, the commit was never durable and the end moves back
//!    to its first part, so the step below cuts the parts off too.
//! 4. Repair the tail (`cut_tail`): zero the rest of the block holding the end, shrink the end
//!    segment to that block boundary, delete later segments, sync. Stale bytes past the end can
//!    then never be misread, and appends continue at the end.

use std::sync::Arc;

use super::commit_parts::CommitAssembler;
use super::record::{
    frame_check, frame_size, DecodeError, FrameDefect, LogRecord, FRAME_HEADER_SIZE,
};
use super::segment::{list_segments, segment_name};
use super::{align_down, align_up, Lsn};
use crate::error::{Error, Location, Result};
use crate::io::{AlignedBuf, Io, IoFile, OpenOptions, IO_ALIGN};

/// Bytes read from disk per refill of the recovery window (grown for larger frames).
const READ_WINDOW_SIZE_BYTES: usize = 1024 * 1024;

/// Why recovery stopped where it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEnd {
    /// A zero length field: the end the writer leaves behind.
    ZeroLength,
    /// The stream's bytes ran out (end of the last segment, or a missing next segment).
    ShortRead,
    /// A frame that is not valid at its position (torn or stale).
    InvalidFrame(FrameDefect),
    /// The parts of a commit without its last part (the log ended inside them, for any of
    /// the reasons above): the log ends before the first part.
    IncompleteCommit,
}

/// What recovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Where reading started (the checkpoint's redo LSN).
    pub start_lsn: Lsn,
    /// LSN just past the last valid record (or the first part of an incomplete commit): where
    /// appends continue.
    pub end_lsn: Lsn,
    /// Valid records read, a commit logged as parts counted once.
    pub records_read: u64,
    /// Bytes of valid records read (`end_lsn - start_lsn`).
    pub bytes_read: u64,
    /// Why reading stopped at `end_lsn`.
    pub log_end: LogEnd,
    /// True if bytes past the end (torn or stale data, or later segments) were removed.
    pub tail_truncated: bool,
    /// Segment files wholly past the end that were deleted.
    pub segments_removed: u64,
}

/// Everything recovery read: the records in LSN order and the report.
#[derive(Debug, Clone)]
pub struct Recovery {
    pub records: Vec<(Lsn, LogRecord)>,
    pub report: RecoveryReport,
}

/// The segment holding the log's end: its first LSN and its file.
pub(crate) type EndSegment = (Lsn, Arc<dyn IoFile>);

/// State the writer takes over from recovery.
pub(crate) struct RecoveredTail {
    /// The segment holding the end LSN, if any segment exists.
    pub end_segment: Option<(Lsn, Arc<dyn IoFile>)>,
    /// Bytes of the block holding the end LSN that lie before it (rewritten on the next flush).
    pub tail_block: Vec<u8>,
}

struct SegmentFile {
    first_lsn: Lsn,
    file: Arc<dyn IoFile>,
    /// Stream position just past the readable bytes of this segment.
    readable_end_lsn: Lsn,
}

/// Reads stream bytes by LSN across segment files through an aligned window.
struct StreamReader {
    segments: Vec<SegmentFile>,
    window: AlignedBuf,
    window_lsn: Lsn,
    window_len: usize,
}

impl StreamReader {
    fn open(io: &dyn Io, options: OpenOptions) -> Result<StreamReader> {
        let firsts = list_segments(io)?;
        let mut segments = Vec::with_capacity(firsts.len());
        for (index, &first_lsn) in firsts.iter().enumerate() {
            let file = io.open(&segment_name(first_lsn), options)?;
            // A partial last block was never acknowledged (flushes write whole blocks).
            let mut readable_end_lsn = first_lsn + align_down(file.len()?);
            if let Some(&next_first_lsn) = firsts.get(index + 1) {
                readable_end_lsn = readable_end_lsn.min(next_first_lsn);
            }
            segments.push(SegmentFile {
                first_lsn,
                file,
                readable_end_lsn,
            });
        }
        Ok(StreamReader {
            segments,
            window: AlignedBuf::new(READ_WINDOW_SIZE_BYTES),
            window_lsn: 0,
            window_len: 0,
        })
    }

    fn stream_start_lsn(&self) -> Option<Lsn> {
        self.segments.first().map(|segment| segment.first_lsn)
    }

    fn stream_end_lsn(&self) -> Option<Lsn> {
        self.segments.last().map(|segment| segment.readable_end_lsn)
    }

    /// Returns the stream bytes `[lsn, lsn + len)`, or `None` if the stream ends before.
    fn read(&mut self, lsn: Lsn, len: usize) -> Result<Option<&[u8]>> {
        let window_end_lsn = self.window_lsn + self.window_len as u64;
        if lsn < self.window_lsn || lsn + len as u64 > window_end_lsn {
            self.refill(lsn, len)?;
        }
        if lsn < self.window_lsn || lsn + len as u64 > self.window_lsn + self.window_len as u64 {
            return Ok(None);
        }
        let start = (lsn - self.window_lsn) as usize;
        Ok(Some(&self.window[start..start + len]))
    }

    fn refill(&mut self, lsn: Lsn, len: usize) -> Result<()> {
        let start_lsn = align_down(lsn);
        let needed = (lsn - start_lsn) as usize + len;
        if needed > self.window.len() {
            self.window = AlignedBuf::new(needed);
        }
        self.window_lsn = start_lsn;
        self.window_len = 0;
        let mut position = start_lsn;
        while self.window_len < self.window.len() {
            let Some(segment) = self
                .segments
                .iter()
                .rev()
                .find(|segment| segment.first_lsn <= position)
            else {
                break;
            };
            if position >= segment.readable_end_lsn {
                break;
            }
            let chunk = (self.window.len() - self.window_len)
                .min((segment.readable_end_lsn - position) as usize);
            let target = &mut self.window[self.window_len..self.window_len + chunk];
            segment.file.read_at(target, position - segment.first_lsn)?;
            self.window_len += chunk;
            position += chunk as u64;
        }
        Ok(())
    }
}

/// Reads the valid log from `start_lsn`, then cuts off the tail behind it. Segment files are
/// opened with `options`; the writer goes on appending through the end segment's handle.
///
/// `preallocated`: segments are zero-filled to their full size, so zeros past the end of the
/// end segment are expected and are kept rather than cut (they read as the end of the log).
pub(crate) fn recover(
    io: &dyn Io,
    options: OpenOptions,
    preallocated: bool,
    start_lsn: Lsn,
) -> Result<(Recovery, RecoveredTail)> {
    let mut reader = StreamReader::open(io, options)?;
    let Some(stream_start_lsn) = reader.stream_start_lsn() else {
        return Ok(new_log(start_lsn));
    };
    let stream_end_lsn = reader.stream_end_lsn().unwrap_or(stream_start_lsn);
    if start_lsn < stream_start_lsn || start_lsn > stream_end_lsn {
        let file = segment_name(stream_start_lsn);
        let location = Location {
            file,
            lsn: Some(start_lsn),
            ..Default::default()
        };
        let detail = format!(
            "recovery must start at {start_lsn} but the log holds \
             {stream_start_lsn}..{stream_end_lsn}"
        );
        return Err(Error::corruption(location, detail));
    }
    let mut records = Vec::new();
    let (end_lsn, log_end) = scan(&mut reader, start_lsn, &mut records)?;
    let tail_block_lsn = align_down(end_lsn);
    let tail_block = match reader.read(tail_block_lsn, (end_lsn - tail_block_lsn) as usize)? {
        Some(bytes) => bytes.to_vec(),
        // Only possible when `start_lsn` falls into a hole between segment files.
        None => {
            return Err(Error::corruption(
                Location {
                    file: segment_name(stream_start_lsn),
                    lsn: Some(end_lsn),
                    ..Default::default()
                },
                "the log stream has a hole before its end",
            ))
        }
    };
    let cut = cut_tail(io, &reader.segments, end_lsn, &tail_block, preallocated)?;
    let report = RecoveryReport {
        start_lsn,
        end_lsn,
        records_read: records.len() as u64,
        bytes_read: end_lsn - start_lsn,
        log_end,
        tail_truncated: cut.tail_truncated,
        segments_removed: cut.segments_removed,
    };
    let tail = RecoveredTail {
        end_segment: Some(cut.end_segment),
        tail_block,
    };
    Ok((Recovery { records, report }, tail))
}

/// The stream bytes `[from, to)` from the segment files (a primary's sender catching a standby
/// up; the range is durable).
pub(crate) fn read_stream(
    io: &dyn Io,
    options: OpenOptions,
    from: Lsn,
    to: Lsn,
) -> Result<Vec<u8>> {
    let mut reader = StreamReader::open(io, options)?;
    let mut bytes = Vec::with_capacity((to - from) as usize);
    let mut lsn = from;
    while lsn < to {
        let chunk = (to - lsn).min(READ_WINDOW_SIZE_BYTES as u64 / 2) as usize;
        let Some(read) = reader.read(lsn, chunk)? else {
            return Err(Error::InvalidArgument(format!(
                "log bytes {lsn}..{} are no longer (or not yet) in the files",
                lsn + chunk as u64
            )));
        };
        bytes.extend_from_slice(read);
        lsn += chunk as u64;
    }
    Ok(bytes)
}

/// Cuts the stream's files back to `end_lsn` (`Wal::cut_back`): returns the bytes of the block
/// holding `end_lsn` before it and the end segment, as recovery leaves them.
pub(crate) fn cut_back(
    io: &dyn Io,
    options: OpenOptions,
    preallocated: bool,
    end_lsn: Lsn,
) -> Result<(Vec<u8>, EndSegment)> {
    let mut reader = StreamReader::open(io, options)?;
    let tail_block_lsn = align_down(end_lsn);
    let tail_block = match reader.read(tail_block_lsn, (end_lsn - tail_block_lsn) as usize)? {
        Some(bytes) => bytes.to_vec(),
        None => {
            return Err(Error::InvalidArgument(format!(
                "cannot cut the log back to {end_lsn}: not in the files"
            )))
        }
    };
    let cut = cut_tail(io, &reader.segments, end_lsn, &tail_block, preallocated)?;
    Ok((tail_block, cut.end_segment))
}

/// An empty directory: the log will begin at `start_lsn` rounded up to a block boundary, so
/// segment starts stay block-aligned.
fn new_log(start_lsn: Lsn) -> (Recovery, RecoveredTail) {
    let end_lsn = align_up(start_lsn);
    let report = RecoveryReport {
        start_lsn,
        end_lsn,
        records_read: 0,
        bytes_read: 0,
        log_end: LogEnd::ShortRead,
        tail_truncated: false,
        segments_removed: 0,
    };
    let recovery = Recovery {
        records: Vec::new(),
        report,
    };
    (
        recovery,
        RecoveredTail {
            end_segment: None,
            tail_block: Vec::new(),
        },
    )
}

/// Reads valid frames from `start_lsn` and returns the end LSN and why the log ended there.
/// Commit parts are reassembled into their `Commit`; parts whose last one is missing are the
/// torn tail of a multi-frame commit, and the log ends before the first of them.
fn scan(
    reader: &mut StreamReader,
    start_lsn: Lsn,
    records: &mut Vec<(Lsn, LogRecord)>,
) -> Result<(Lsn, LogEnd)> {
    let mut assembler = CommitAssembler::default();
    let mut lsn = start_lsn;
    let log_end = loop {
        let Some(header) = reader.read(lsn, FRAME_HEADER_SIZE)? else {
            break LogEnd::ShortRead;
        };
        let Some(size) = frame_size(header) else {
            break if header[0..4] == [0; 4] {
                LogEnd::ZeroLength
            } else {
                LogEnd::InvalidFrame(FrameDefect::Size)
            };
        };
        let Some(frame) = reader.read(lsn, size as usize)? else {
            break LogEnd::ShortRead;
        };
        if let Err(defect) = frame_check(frame, lsn) {
            break LogEnd::InvalidFrame(defect);
        }
        match assembler.push_frame(lsn, frame) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => {}
            Err(error) => return Err(undecodable(reader, lsn, error)),
        }
        lsn += u64::from(size);
    };
    match assembler.open_commit_lsn() {
        Some(first_part_lsn) => Ok((first_part_lsn, LogEnd::IncompleteCommit)),
        None => Ok((lsn, log_end)),
    }
}

/// A frame with a valid checksum that does not decode (or a misplaced commit part): a bug or
/// a bad format, not a torn write.
fn undecodable(reader: &StreamReader, lsn: Lsn, error: DecodeError) -> Error {
    let file = reader
        .segments
        .iter()
        .rev()
        .find(|segment| segment.first_lsn <= lsn)
        .map(|segment| segment_name(segment.first_lsn))
        .unwrap_or_default();
    Error::corruption(
        Location {
            file,
            lsn: Some(lsn),
            ..Default::default()
        },
        format!(
            "log record with a valid checksum does not decode: {}",
            error.0
        ),
    )
}

/// Result of `cut_tail`.
struct TailCut {
    end_segment: (Lsn, Arc<dyn IoFile>),
    tail_truncated: bool,
    segments_removed: u64,
}

/// Removes everything in the stream past `end_lsn`: stale bytes in the end block, the rest of
/// the end segment, and all later segments.
fn cut_tail(
    io: &dyn Io,
    segments: &[SegmentFile],
    end_lsn: Lsn,
    tail_block: &[u8],
    preallocated: bool,
) -> Result<TailCut> {
    let end_index = segments
        .iter()
        .rposition(|segment| segment.first_lsn <= end_lsn)
        .expect("recovery starts inside the stream");
    let segment = &segments[end_index];
    let mut tail_truncated = false;
    let keep_len_bytes = align_up(end_lsn) - segment.first_lsn;
    let tail_block_offset = align_down(end_lsn) - segment.first_lsn;
    if !tail_block.is_empty() {
        let mut block = AlignedBuf::new(IO_ALIGN);
        let current_len_bytes = segment.file.len()?;
        let readable = (current_len_bytes.saturating_sub(tail_block_offset) as usize).min(IO_ALIGN);
        if readable > 0 {
            segment.file.read_at(
                &mut block[..align_down(readable as u64) as usize],
                tail_block_offset,
            )?;
        }
        let clean = block[..tail_block.len()] == *tail_block
            && block[tail_block.len()..].iter().all(|&byte| byte == 0);
        if !clean {
            block.fill(0);
            block[..tail_block.len()].copy_from_slice(tail_block);
            segment.file.write_at(&block, tail_block_offset)?;
            tail_truncated = true;
        }
    }
    let current_len_bytes = segment.file.len()?;
    let zero_filled = preallocated
        && current_len_bytes > keep_len_bytes
        && current_len_bytes == align_down(current_len_bytes)
        && all_zero(&*segment.file, keep_len_bytes, current_len_bytes)?;
    if current_len_bytes != keep_len_bytes && !zero_filled {
        segment.file.set_len(keep_len_bytes)?;
        tail_truncated = true;
    }
    if tail_truncated {
        segment.file.sync_data()?;
    }
    let mut segments_removed = 0;
    for later in &segments[end_index + 1..] {
        io.remove(&segment_name(later.first_lsn))?;
        segments_removed += 1;
    }
    if segments_removed > 0 {
        io.sync_dir()?;
        tail_truncated = true;
    }
    let end_segment = (segment.first_lsn, Arc::clone(&segment.file));
    Ok(TailCut {
        end_segment,
        tail_truncated,
        segments_removed,
    })
}

/// True if the bytes `[start, end)` of `file` (block-aligned) are all zero: the
/// preallocated rest of a segment past the log end. Reads at most one segment.
fn all_zero(file: &dyn IoFile, start: u64, end: u64) -> Result<bool> {
    let mut buf = AlignedBuf::new(READ_WINDOW_SIZE_BYTES);
    let mut offset = start;
    while offset < end {
        let chunk = (end - offset).min(buf.len() as u64) as usize;
        file.read_at(&mut buf[..chunk], offset)?;
        if buf[..chunk].iter().any(|&byte| byte != 0) {
            return Ok(false);
        }
        offset += chunk as u64;
    }
    Ok(true)
}

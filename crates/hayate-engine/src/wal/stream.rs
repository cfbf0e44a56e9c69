//! Decoding a shipped log stream: a standby receives the primary's log bytes in order (the
//! ranges its flushes wrote, `LogShipper::ship`) and turns them into records to apply.
//!
//! 1. `push(lsn, bytes)` takes the next bytes of the stream; `lsn` must be where the previous
//!    push ended (`end_lsn`), since the stream is byte-identical on both nodes.
//! 2. Whole frames are checked (length, checksum, LSN field equal to their position) and
//!    decoded; a commit logged as parts comes out once its last part arrived (`CommitAssembler`).
//!    A frame cut by the end of the bytes waits for the next push.
//! 3. `resume_lsn` is the position of the first record not yet returned: where a restarted
//!    standby must resume decoding, and where its log must be cut if it is promoted with a
//!    commit's parts still open (that commit was never acknowledged).
//!
//! Unlike recovery, an invalid frame is not an end of the log here: the primary only ships
//! what it wrote, so a bad frame is corruption (or a stream resumed at the wrong position).

use super::commit_parts::CommitAssembler;
use super::record::{frame_check, frame_size, LogRecord, FRAME_HEADER_SIZE};
use super::Lsn;
use crate::error::{Error, Location, Result};

/// Turns the bytes of a log stream into records (see the module docs).
#[derive(Default)]
pub struct StreamDecoder {
    /// Stream position of `carry[0]`.
    next_lsn: Lsn,
    /// Bytes received that do not yet make a whole frame.
    carry: Vec<u8>,
    assembler: CommitAssembler,
}

impl StreamDecoder {
    /// A decoder for the stream from `lsn` (a record boundary).
    pub fn new(lsn: Lsn) -> StreamDecoder {
        StreamDecoder {
            next_lsn: lsn,
            ..StreamDecoder::default()
        }
    }

    /// Position just past the bytes pushed so far: where the next push must start.
    pub fn end_lsn(&self) -> Lsn {
        self.next_lsn + self.carry.len() as u64
    }

    /// Position of the first record not yet returned by `push` (the first part of an open
    /// commit, or a frame not yet whole).
    pub fn resume_lsn(&self) -> Lsn {
        self.assembler
            .open_commit_lsn()
            .map_or(self.next_lsn, |first| first.min(self.next_lsn))
    }

    /// Takes the stream bytes `[lsn, lsn + bytes.len())` and returns the records they complete,
    /// in log order, each with its LSN.
    pub fn push(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<Vec<(Lsn, LogRecord)>> {
        if lsn != self.end_lsn() {
            return Err(Error::InvalidArgument(format!(
                "log stream bytes at {lsn}, expected them at {}",
                self.end_lsn()
            )));
        }
        self.carry.extend_from_slice(bytes);
        let mut records = Vec::new();
        let mut offset = 0usize;
        loop {
            let rest = &self.carry[offset..];
            if rest.len() < FRAME_HEADER_SIZE {
                break;
            }
            let frame_lsn = self.next_lsn + offset as u64;
            let Some(size) = frame_size(rest) else {
                return Err(bad_stream(frame_lsn, "a frame of impossible length"));
            };
            let size = size as usize;
            if rest.len() < size {
                break;
            }
            let frame = &rest[..size];
            if let Err(defect) = frame_check(frame, frame_lsn) {
                return Err(bad_stream(frame_lsn, &format!("invalid frame: {defect:?}")));
            }
            match self.assembler.push_frame(frame_lsn, frame) {
                Ok(Some(record)) => records.push(record),
                Ok(None) => {}
                Err(error) => return Err(bad_stream(frame_lsn, &error.0)),
            }
            offset += size;
        }
        self.carry.drain(..offset);
        self.next_lsn += offset as u64;
        Ok(records)
    }
}

fn bad_stream(lsn: Lsn, detail: &str) -> Error {
    Error::corruption(
        Location {
            file: "replication stream".into(),
            lsn: Some(lsn),
            ..Default::default()
        },
        detail.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::record::frame_seal;
    use crate::wal::Op;

    fn sealed(record: &LogRecord, lsn: Lsn) -> Vec<u8> {
        let mut frame = record.encode_frame();
        let body = crc32c::crc32c(&frame[16..]);
        frame_seal(&mut frame, lsn, body);
        frame
    }

    fn commit(ts: u64) -> LogRecord {
        LogRecord::Commit {
            txn_id: ts,
            commit_ts: ts,
            ops: vec![Op::Put {
                tree_id: 1,
                key: ts.to_be_bytes().to_vec(),
                value: vec![7; 40],
            }],
        }
    }

    #[test]
    fn frames_cut_anywhere_decode_once_whole() {
        let start = 8192;
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for ts in 1..=5 {
            let lsn = start + stream.len() as u64;
            let record = commit(ts);
            stream.extend(sealed(&record, lsn));
            expected.push((lsn, record));
        }
        for step in [1, 7, 17, 50, stream.len()] {
            let mut decoder = StreamDecoder::new(start);
            let mut got = Vec::new();
            for (index, chunk) in stream.chunks(step).enumerate() {
                let lsn = start + (index * step) as u64;
                got.extend(decoder.push(lsn, chunk).unwrap());
            }
            assert_eq!(got, expected, "chunks of {step} bytes");
            assert_eq!(decoder.resume_lsn(), start + stream.len() as u64);
        }
    }

    #[test]
    fn a_gap_or_a_stale_frame_is_refused() {
        let mut decoder = StreamDecoder::new(4096);
        let frame = sealed(&commit(1), 4096);
        assert!(decoder.push(4097, &frame).is_err(), "a gap in the stream");
        // A frame sealed for another position: stale bytes, not this stream's.
        let stale = sealed(&commit(1), 8192);
        assert!(matches!(
            decoder.push(4096, &stale),
            Err(Error::Corruption { .. })
        ));
    }
}

//! Commits larger than one frame: the `CommitPart` records (type 5, see `record`).
//!
//! 1. The writer sees that a `Commit` frame would exceed its frame limit and encodes the
//!    commit's payload part by part (`CommitPartEncoder`): each part frame holds the next slice
//!    of the payload, copied straight from the write set, so no second copy of the whole
//!    payload is ever made. The first part is flagged first, the final one last.
//! 2. The writer appends the parts contiguously (`Wal::append`): no other record lies between
//!    them, and the commit counts as logged only when its last part is durable.
//! 3. Recovery hands every part to a `CommitAssembler`, which concatenates the slices and,
//!    at the last part, decodes them as one `Commit` reported at the first part's LSN. Parts
//!    without their last one can only be the torn tail of the log; the reader ends the log
//!    before the first of them.

use super::record::{
    encode_op, op_size_bytes, DecodeError, LogRecord, Op, RecordType, COMMIT_PART_FIRST,
    COMMIT_PART_LAST, COMMIT_PART_OVERHEAD_BYTES, FRAME_HEADER_SIZE,
};
use super::Lsn;

/// Encodes a `Commit`'s payload as a sequence of `CommitPart` frames, one at a time. Ops that
/// fit in the current part are encoded straight into it; an op that straddles two parts is
/// encoded once into `straddling` and copied from there, so the extra memory is one op.
pub(crate) struct CommitPartEncoder<'a> {
    txn_id: u64,
    ops: std::slice::Iter<'a, Op>,
    /// Encoded bytes not yet in a part: the payload head at first, later the rest of an op
    /// that did not fit.
    straddling: Vec<u8>,
    straddling_offset: usize,
    first: bool,
}

impl<'a> CommitPartEncoder<'a> {
    pub fn new(txn_id: u64, commit_ts: u64, ops: &'a [Op]) -> CommitPartEncoder<'a> {
        let mut head = Vec::with_capacity(20);
        head.extend_from_slice(&txn_id.to_le_bytes());
        head.extend_from_slice(&commit_ts.to_le_bytes());
        let op_count = u32::try_from(ops.len()).expect("more than u32::MAX ops in a commit");
        head.extend_from_slice(&op_count.to_le_bytes());
        CommitPartEncoder {
            txn_id,
            ops: ops.iter(),
            straddling: head,
            straddling_offset: 0,
            first: true,
        }
    }

    fn finished(&self) -> bool {
        self.straddling_offset == self.straddling.len() && self.ops.as_slice().is_empty()
    }

    /// Encodes the next part into `frame` (replacing its contents), at most `frame_size_bytes`
    /// long, with the LSN and CRC fields still zero (see `record::frame_seal`). Returns false
    /// once every part was encoded.
    pub fn next_part(&mut self, frame: &mut Vec<u8>, frame_size_bytes: usize) -> bool {
        assert!(frame_size_bytes > COMMIT_PART_OVERHEAD_BYTES);
        if self.finished() {
            return false;
        }
        frame.clear();
        frame.resize(COMMIT_PART_OVERHEAD_BYTES, 0);
        frame[16] = RecordType::CommitPart as u8;
        frame[17..25].copy_from_slice(&self.txn_id.to_le_bytes());
        loop {
            let room = frame_size_bytes - frame.len();
            let rest = &self.straddling[self.straddling_offset..];
            if !rest.is_empty() {
                let take = rest.len().min(room);
                frame.extend_from_slice(&rest[..take]);
                self.straddling_offset += take;
                if take < rest.len() {
                    break;
                }
                continue;
            }
            let Some(op) = self.ops.as_slice().first() else {
                break;
            };
            if op_size_bytes(op) > room as u64 {
                if room == 0 {
                    break;
                }
                self.straddling.clear();
                self.straddling_offset = 0;
                encode_op(op, &mut self.straddling);
            } else {
                encode_op(op, frame);
            }
            self.ops.next();
        }
        let mut flags = 0;
        if self.first {
            flags |= COMMIT_PART_FIRST;
        }
        if self.finished() {
            flags |= COMMIT_PART_LAST;
        }
        frame[FRAME_HEADER_SIZE + 8] = flags;
        self.first = false;
        let frame_size = u32::try_from(frame.len()).expect("frame size checked by the caller");
        frame[0..4].copy_from_slice(&frame_size.to_le_bytes());
        true
    }
}

/// Parts of one commit read so far.
struct Pending {
    first_lsn: Lsn,
    txn_id: u64,
    payload: Vec<u8>,
}

/// Reassembles commits from their parts during recovery. Parts of one commit are
/// consecutive records, so at most one commit is open at a time.
#[derive(Default)]
pub(crate) struct CommitAssembler {
    pending: Option<Pending>,
}

impl CommitAssembler {
    /// Takes one valid frame read at `lsn` (`record::frame_check` passed). Returns the record
    /// it completes, with its LSN: the frame's own record, or the reassembled `Commit` when it
    /// is a commit's last part; None while a commit's parts are still open.
    pub fn push_frame(
        &mut self,
        lsn: Lsn,
        frame: &[u8],
    ) -> Result<Option<(Lsn, LogRecord)>, DecodeError> {
        let payload = &frame[FRAME_HEADER_SIZE..];
        if frame[16] == RecordType::CommitPart as u8 {
            return self.push_part(lsn, payload);
        }
        self.check_closed()?;
        LogRecord::decode_payload(frame[16], payload).map(|record| Some((lsn, record)))
    }

    /// Takes the payload of a `CommitPart` read at `lsn`. Returns the reassembled `Commit`
    /// and its LSN (the first part's) when this was the last part.
    pub fn push_part(
        &mut self,
        lsn: Lsn,
        payload: &[u8],
    ) -> Result<Option<(Lsn, LogRecord)>, DecodeError> {
        if payload.len() < 9 {
            return Err(DecodeError(format!(
                "commit part payload of {} bytes",
                payload.len()
            )));
        }
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&payload[0..8]);
        let txn_id = u64::from_le_bytes(raw);
        let flags = payload[8];
        if flags & !(COMMIT_PART_FIRST | COMMIT_PART_LAST) != 0 {
            return Err(DecodeError(format!("commit part flags {flags:#x}")));
        }
        let slice = &payload[9..];
        match (&mut self.pending, flags & COMMIT_PART_FIRST != 0) {
            (None, true) => {
                self.pending = Some(Pending {
                    first_lsn: lsn,
                    txn_id,
                    payload: slice.to_vec(),
                });
            }
            (Some(pending), false) if pending.txn_id == txn_id => {
                pending.payload.extend_from_slice(slice);
            }
            (Some(pending), _) => {
                return Err(DecodeError(format!(
                    "commit part of txn {txn_id} inside the parts of txn {} (from lsn {})",
                    pending.txn_id, pending.first_lsn
                )))
            }
            (None, false) => {
                return Err(DecodeError(format!(
                    "commit part of txn {txn_id} without its first part"
                )))
            }
        }
        if flags & COMMIT_PART_LAST == 0 {
            return Ok(None);
        }
        let pending = self.pending.take().expect("a commit is open");
        let record = LogRecord::decode_payload(RecordType::Commit as u8, &pending.payload)
            .map_err(|error| DecodeError(format!("reassembled commit: {}", error.0)))?;
        match &record {
            LogRecord::Commit {
                txn_id: decoded, ..
            } if *decoded == txn_id => Ok(Some((pending.first_lsn, record))),
            _ => Err(DecodeError(format!(
                "reassembled commit does not belong to txn {txn_id}"
            ))),
        }
    }

    /// Checks that no commit is open before a record of another type.
    pub fn check_closed(&self) -> Result<(), DecodeError> {
        match &self.pending {
            Some(pending) => Err(DecodeError(format!(
                "record inside the parts of txn {} (from lsn {})",
                pending.txn_id, pending.first_lsn
            ))),
            None => Ok(()),
        }
    }

    /// LSN of the first part of a commit whose last part was not read.
    pub fn open_commit_lsn(&self) -> Option<Lsn> {
        self.pending.as_ref().map(|pending| pending.first_lsn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(count: usize, value_len: usize) -> Vec<Op> {
        (0..count)
            .map(|index| {
                if index % 7 == 3 {
                    Op::Delete {
                        tree_id: 2,
                        key: index.to_le_bytes().to_vec(),
                    }
                } else if index % 11 == 5 {
                    Op::Put {
                        tree_id: 3,
                        key: Vec::new(),
                        value: Vec::new(),
                    }
                } else {
                    Op::Put {
                        tree_id: 1,
                        key: index.to_le_bytes().to_vec(),
                        value: vec![index as u8; value_len + index % 13],
                    }
                }
            })
            .collect()
    }

    /// Encodes `ops` as parts of at most `frame_size` bytes and reassembles them.
    fn round_trip(ops: Vec<Op>, frame_size: usize) -> usize {
        let record = LogRecord::Commit {
            txn_id: 42,
            commit_ts: 77,
            ops,
        };
        let LogRecord::Commit { ops, .. } = &record else {
            unreachable!()
        };
        let mut encoder = CommitPartEncoder::new(42, 77, ops);
        let mut assembler = CommitAssembler::default();
        let mut frame = Vec::new();
        let mut parts = 0;
        let mut reassembled = None;
        let mut lsn = 4096;
        while encoder.next_part(&mut frame, frame_size) {
            assert!(frame.len() <= frame_size);
            assert!(frame.len() > COMMIT_PART_OVERHEAD_BYTES, "empty part");
            assert!(reassembled.is_none(), "a part after the last one");
            assert_eq!(frame[16], RecordType::CommitPart as u8);
            let size = u32::from_le_bytes(frame[0..4].try_into().unwrap());
            assert_eq!(size as usize, frame.len());
            reassembled = assembler
                .push_part(lsn, &frame[FRAME_HEADER_SIZE..])
                .unwrap();
            lsn += frame.len() as u64;
            parts += 1;
        }
        assert_eq!(reassembled, Some((4096, record.clone())));
        assert_eq!(assembler.open_commit_lsn(), None);
        // The slices concatenated are exactly the single-frame payload.
        let mut payload = Vec::new();
        record.encode_payload(&mut payload);
        let slice_capacity = frame_size - COMMIT_PART_OVERHEAD_BYTES;
        assert_eq!(parts, payload.len().div_ceil(slice_capacity));
        parts
    }

    #[test]
    fn parts_reassemble_to_the_commit() {
        assert_eq!(round_trip(ops(1, 10), 1000), 1);
        assert!(round_trip(ops(500, 100), 4096) > 10);
        // Parts smaller than a single op split keys and values.
        assert!(round_trip(ops(50, 3000), COMMIT_PART_OVERHEAD_BYTES + 1) > 50 * 1000);
        assert!(round_trip(ops(40, 300), 257) > 40);
        assert!(round_trip(Vec::new(), 64) == 1);
    }

    #[test]
    fn misplaced_parts_are_errors() {
        let ops = ops(100, 50);
        let mut encoder = CommitPartEncoder::new(9, 1, &ops);
        let mut frames = Vec::new();
        let mut frame = Vec::new();
        while encoder.next_part(&mut frame, 1024) {
            frames.push(frame[FRAME_HEADER_SIZE..].to_vec());
        }
        assert!(frames.len() >= 3);
        // A later part without the first one.
        assert!(CommitAssembler::default().push_part(0, &frames[1]).is_err());
        // A first part while another commit is open.
        let mut assembler = CommitAssembler::default();
        assembler.push_part(0, &frames[0]).unwrap();
        assert!(assembler.check_closed().is_err());
        assert_eq!(assembler.open_commit_lsn(), Some(0));
        assert!(assembler.push_part(1, &frames[0]).is_err());
        // A part of another transaction.
        let mut assembler = CommitAssembler::default();
        assembler.push_part(0, &frames[0]).unwrap();
        let mut foreign = frames[1].clone();
        foreign[0] ^= 1;
        assert!(assembler.push_part(1, &foreign).is_err());
        // Unknown flags, short payloads, a last part that cuts the payload short.
        let mut flagged = frames[0].clone();
        flagged[8] |= 4;
        assert!(CommitAssembler::default().push_part(0, &flagged).is_err());
        assert!(CommitAssembler::default().push_part(0, &[0; 8]).is_err());
        let mut assembler = CommitAssembler::default();
        assembler.push_part(0, &frames[0]).unwrap();
        let mut early_last = frames[1].clone();
        early_last[8] |= COMMIT_PART_LAST;
        assert!(assembler.push_part(1, &early_last).is_err());
    }
}

//! Log records: the logical payloads and the on-disk frame around them.
//!
//! Frame (little-endian), `FRAME_HEADER_SIZE` = 17 bytes before the payload:
//!
//! | offset | size | field                                                          |
//! |--------|------|----------------------------------------------------------------|
//! | 0      | 4    | total length of the frame in bytes, header included (>= 17)    |
//! | 4      | 4    | CRC-32C of bytes 8..total length                               |
//! | 8      | 8    | LSN: must equal the frame's position in the log stream         |
//! | 16     | 1    | record type (`RecordType`)                                     |
//! | 17     | ...  | payload of the record type                                     |
//!
//! Payloads (all integers little-endian, byte strings prefixed by a u32 length):
//! - `Commit` (type 1): txn_id u64, commit_ts u64, op count u32, then per op a kind u8
//!   (1 = put, 2 = delete), tree_id u32, key length u32, key bytes, and for a put value
//!   length u32, value bytes.
//! - `CreateTree` (type 2): tree_id u32, commit_ts u64, kind u8, unique u8 (0 or 1), name
//!   length u32, name bytes (UTF-8).
//! - `DropTree` (type 3): tree_id u32, commit_ts u64.
//! - `CheckpointMark` (type 4): checkpoint_id u64, redo_lsn u64.
//! - `CommitPart` (type 5): txn_id u64, flags u8 (bit 0: first part, bit 1: last part), then
//!   the rest of the frame is a slice of a `Commit` payload. A commit whose frame would exceed
//!   the writer's frame limit is logged as consecutive parts (nothing else between them) whose
//!   slices, concatenated, are exactly its `Commit` payload; the reader reassembles them
//!   (`commit_parts::CommitAssembler`) and reports one `Commit` at the first part's LSN. A part is never
//!   a record by itself: `decode_payload` rejects type 5.
//!
//! A payload must be consumed exactly; trailing bytes are corruption. Lifecycle: a record is
//! `encode_payload`d by the appender, framed (`frame_seal`) once its LSN is known, and on
//! recovery `frame_check`ed before `decode_payload` looks at it.

use super::Lsn;

pub const FRAME_HEADER_SIZE: usize = 17;

/// Largest frame the format allows; a length field above it marks the end of the log.
pub const FRAME_SIZE_MAX: u32 = 64 * 1024 * 1024;

const OP_KIND_PUT: u8 = 1;
const OP_KIND_DELETE: u8 = 2;
const OP_KIND_PATCH: u8 = 3;
/// Bytes a patch piece costs besides its bytes (offset and length).
const PATCH_PIECE_OVERHEAD_BYTES: usize = 8;
/// Equal bytes between two changed runs shorter than this join the runs into one piece
/// (cheaper than a second piece's overhead).
const PATCH_GAP_BYTES_MAX: usize = PATCH_PIECE_OVERHEAD_BYTES;

/// Flags of a `CommitPart`.
pub const COMMIT_PART_FIRST: u8 = 1;
pub const COMMIT_PART_LAST: u8 = 2;
/// Bytes of a `CommitPart` frame before its slice: header, txn_id, flags.
pub const COMMIT_PART_OVERHEAD_BYTES: usize = FRAME_HEADER_SIZE + 9;
/// Bytes of a `Commit` payload before its ops: txn_id, commit_ts, op count.
const COMMIT_PAYLOAD_HEAD_BYTES: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordType {
    Commit = 1,
    CreateTree = 2,
    DropTree = 3,
    CheckpointMark = 4,
    CommitPart = 5,
}

impl RecordType {
    pub fn from_u8(value: u8) -> Option<RecordType> {
        Some(match value {
            1 => RecordType::Commit,
            2 => RecordType::CreateTree,
            3 => RecordType::DropTree,
            4 => RecordType::CheckpointMark,
            5 => RecordType::CommitPart,
            _ => return None,
        })
    }
}

/// One write of a committed transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Sets the row `key` of a tree to `value`.
    Put {
        /// The tree written.
        tree_id: u32,
        /// The row's key.
        key: Vec<u8>,
        /// Its new value, as the transaction wrote it (the row header is added on apply).
        value: Vec<u8>,
    },
    /// Deletes the row `key` of a tree.
    Delete {
        /// The tree written.
        tree_id: u32,
        /// The row's key.
        key: Vec<u8>,
    },
    /// Changes some bytes of the row `key`, whose value keeps its length: the new value is the
    /// latest committed one with each piece's bytes written at its offset. Logged instead of a
    /// `Put` when a transaction rewrites few bytes of a row (an UPDATE of one column).
    Patch {
        /// The tree written.
        tree_id: u32,
        /// The row's key.
        key: Vec<u8>,
        /// Length of the value before and after.
        length: u32,
        /// (offset, bytes) pieces in ascending offset order, not overlapping, within `length`.
        pieces: Vec<(u32, Vec<u8>)>,
    },
}

impl Op {
    /// The tree the op writes.
    pub fn tree_id(&self) -> u32 {
        match self {
            Op::Put { tree_id, .. } | Op::Delete { tree_id, .. } | Op::Patch { tree_id, .. } => {
                *tree_id
            }
        }
    }

    /// The row key the op writes.
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put { key, .. } | Op::Delete { key, .. } | Op::Patch { key, .. } => key,
        }
    }
}

/// The pieces that turn `old` into `new`, if both have the same length and the pieces take
/// less than half the value's bytes to log; otherwise `None` (log the whole value).
pub fn patch_pieces(old: &[u8], new: &[u8]) -> Option<Vec<(u32, Vec<u8>)>> {
    if old.len() != new.len() || u32::try_from(new.len()).is_err() {
        return None;
    }
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    let mut index = 0;
    while index < new.len() {
        if old[index] == new[index] {
            index += 1;
            continue;
        }
        let start = index;
        while index < new.len() && old[index] != new[index] {
            index += 1;
        }
        match pieces.last_mut() {
            Some((_, end)) if start - *end < PATCH_GAP_BYTES_MAX => *end = index,
            _ => pieces.push((start, index)),
        }
    }
    let logged: usize = pieces
        .iter()
        .map(|(start, end)| end - start + PATCH_PIECE_OVERHEAD_BYTES)
        .sum();
    if logged * 2 >= new.len() {
        return None;
    }
    Some(
        pieces
            .into_iter()
            .map(|(start, end)| (start as u32, new[start..end].to_vec()))
            .collect(),
    )
}

/// `base` with the pieces written over it, or `None` if `base` is not `length` bytes long.
pub fn patched(base: &[u8], length: u32, pieces: &[(u32, Vec<u8>)]) -> Option<Vec<u8>> {
    if base.len() != length as usize {
        return None;
    }
    let mut value = base.to_vec();
    for (offset, bytes) in pieces {
        // Decoding checked that every piece lies within `length`.
        let offset = *offset as usize;
        value[offset..offset + bytes.len()].copy_from_slice(bytes);
    }
    Some(value)
}

/// A logical, redo-only log record. Replay applies records in LSN order and is idempotent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecord {
    /// The whole write set of one committed transaction.
    Commit {
        /// The transaction's id.
        txn_id: u64,
        /// Its commit timestamp; commit timestamps increase with LSN.
        commit_ts: u64,
        /// Its writes, at most one per (tree, key).
        ops: Vec<Op>,
    },
    /// A table or index was created (autocommitted DDL).
    CreateTree {
        /// The new tree's id.
        tree_id: u32,
        /// Its name.
        name: String,
        /// Its `TreeKind` as the catalog's byte (0 table, 1 index).
        kind: u8,
        /// Declared unique.
        unique: bool,
        /// The DDL's commit timestamp.
        commit_ts: u64,
    },
    /// A table or index was dropped (autocommitted DDL).
    DropTree {
        /// The dropped tree's id.
        tree_id: u32,
        /// The DDL's commit timestamp.
        commit_ts: u64,
    },
    /// Informational: a checkpoint finished and redo may start at `redo_lsn`.
    CheckpointMark {
        /// The checkpoint that finished.
        checkpoint_id: u64,
        /// Where its replay starts.
        redo_lsn: u64,
    },
}

/// Why a payload could not be decoded. The caller adds file and LSN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl LogRecord {
    /// The type byte of the record's frame.
    pub(crate) fn record_type(&self) -> RecordType {
        match self {
            LogRecord::Commit { .. } => RecordType::Commit,
            LogRecord::CreateTree { .. } => RecordType::CreateTree,
            LogRecord::DropTree { .. } => RecordType::DropTree,
            LogRecord::CheckpointMark { .. } => RecordType::CheckpointMark,
        }
    }

    /// Appends the payload (without the type byte) to `out`.
    pub fn encode_payload(&self, out: &mut Vec<u8>) {
        match self {
            LogRecord::Commit {
                txn_id,
                commit_ts,
                ops,
            } => {
                out.extend_from_slice(&txn_id.to_le_bytes());
                out.extend_from_slice(&commit_ts.to_le_bytes());
                out.extend_from_slice(&length_u32(ops.len()).to_le_bytes());
                for op in ops {
                    encode_op(op, out);
                }
            }
            LogRecord::CreateTree {
                tree_id,
                name,
                kind,
                unique,
                commit_ts,
            } => {
                out.extend_from_slice(&tree_id.to_le_bytes());
                out.extend_from_slice(&commit_ts.to_le_bytes());
                out.push(*kind);
                out.push(u8::from(*unique));
                put_bytes(out, name.as_bytes());
            }
            LogRecord::DropTree { tree_id, commit_ts } => {
                out.extend_from_slice(&tree_id.to_le_bytes());
                out.extend_from_slice(&commit_ts.to_le_bytes());
            }
            LogRecord::CheckpointMark {
                checkpoint_id,
                redo_lsn,
            } => {
                out.extend_from_slice(&checkpoint_id.to_le_bytes());
                out.extend_from_slice(&redo_lsn.to_le_bytes());
            }
        }
    }

    /// Decodes a payload of the given type byte. Never panics on untrusted bytes.
    pub fn decode_payload(record_type: u8, payload: &[u8]) -> Result<LogRecord, DecodeError> {
        let record_type = RecordType::from_u8(record_type)
            .ok_or_else(|| DecodeError(format!("unknown record type {record_type}")))?;
        let mut cursor = Cursor {
            bytes: payload,
            position: 0,
        };
        let record = match record_type {
            RecordType::Commit => {
                let txn_id = cursor.u64()?;
                let commit_ts = cursor.u64()?;
                let op_count = cursor.u32()?;
                // Each op takes at least 9 bytes, so a count beyond that is garbage; checking
                // first keeps a hostile count from reserving a huge Vec.
                if op_count as usize > cursor.remaining() / 9 {
                    return Err(DecodeError(format!("op count {op_count} exceeds payload")));
                }
                let mut ops = Vec::with_capacity(op_count as usize);
                for _ in 0..op_count {
                    ops.push(decode_op(&mut cursor)?);
                }
                LogRecord::Commit {
                    txn_id,
                    commit_ts,
                    ops,
                }
            }
            RecordType::CreateTree => {
                let tree_id = cursor.u32()?;
                let commit_ts = cursor.u64()?;
                let kind = cursor.u8()?;
                let unique = match cursor.u8()? {
                    0 => false,
                    1 => true,
                    other => return Err(DecodeError(format!("unique flag {other}"))),
                };
                let name = String::from_utf8(cursor.bytes()?.to_vec())
                    .map_err(|_| DecodeError("tree name is not UTF-8".into()))?;
                LogRecord::CreateTree {
                    tree_id,
                    name,
                    kind,
                    unique,
                    commit_ts,
                }
            }
            RecordType::DropTree => LogRecord::DropTree {
                tree_id: cursor.u32()?,
                commit_ts: cursor.u64()?,
            },
            RecordType::CheckpointMark => LogRecord::CheckpointMark {
                checkpoint_id: cursor.u64()?,
                redo_lsn: cursor.u64()?,
            },
            RecordType::CommitPart => {
                return Err(DecodeError(
                    "a commit part is only valid as a slice of a commit".into(),
                ))
            }
        };
        if cursor.remaining() != 0 {
            return Err(DecodeError(format!(
                "{} trailing payload bytes",
                cursor.remaining()
            )));
        }
        Ok(record)
    }

    /// Size of the record's frame in bytes, computed without encoding it.
    pub fn frame_size_bytes(&self) -> u64 {
        let payload_size_bytes = match self {
            LogRecord::Commit { ops, .. } => {
                COMMIT_PAYLOAD_HEAD_BYTES as u64 + ops.iter().map(op_size_bytes).sum::<u64>()
            }
            LogRecord::CreateTree { name, .. } => 18 + name.len() as u64,
            LogRecord::DropTree { .. } => 12,
            LogRecord::CheckpointMark { .. } => 16,
        };
        FRAME_HEADER_SIZE as u64 + payload_size_bytes
    }

    /// Encodes the record as a frame with the LSN and CRC fields still zero (see `frame_seal`).
    pub fn encode_frame(&self) -> Vec<u8> {
        let mut frame = vec![0u8; FRAME_HEADER_SIZE];
        frame[16] = self.record_type() as u8;
        self.encode_payload(&mut frame);
        let frame_size = length_u32(frame.len());
        frame[0..4].copy_from_slice(&frame_size.to_le_bytes());
        frame
    }
}

pub(crate) fn encode_op(op: &Op, out: &mut Vec<u8>) {
    match op {
        Op::Put {
            tree_id,
            key,
            value,
        } => {
            out.push(OP_KIND_PUT);
            out.extend_from_slice(&tree_id.to_le_bytes());
            put_bytes(out, key);
            put_bytes(out, value);
        }
        Op::Delete { tree_id, key } => {
            out.push(OP_KIND_DELETE);
            out.extend_from_slice(&tree_id.to_le_bytes());
            put_bytes(out, key);
        }
        Op::Patch {
            tree_id,
            key,
            length,
            pieces,
        } => {
            out.push(OP_KIND_PATCH);
            out.extend_from_slice(&tree_id.to_le_bytes());
            put_bytes(out, key);
            out.extend_from_slice(&length.to_le_bytes());
            out.extend_from_slice(&length_u32(pieces.len()).to_le_bytes());
            for (offset, bytes) in pieces {
                out.extend_from_slice(&offset.to_le_bytes());
                put_bytes(out, bytes);
            }
        }
    }
}

/// Bytes of an op's encoding (`encode_op`).
pub(crate) fn op_size_bytes(op: &Op) -> u64 {
    match op {
        Op::Put { key, value, .. } => 13 + key.len() as u64 + value.len() as u64,
        Op::Delete { key, .. } => 9 + key.len() as u64,
        Op::Patch { key, pieces, .. } => {
            17 + key.len() as u64
                + pieces
                    .iter()
                    .map(|(_, bytes)| (PATCH_PIECE_OVERHEAD_BYTES + bytes.len()) as u64)
                    .sum::<u64>()
        }
    }
}

fn decode_op(cursor: &mut Cursor<'_>) -> Result<Op, DecodeError> {
    let kind = cursor.u8()?;
    let tree_id = cursor.u32()?;
    let key = cursor.bytes()?.to_vec();
    match kind {
        OP_KIND_PUT => Ok(Op::Put {
            tree_id,
            key,
            value: cursor.bytes()?.to_vec(),
        }),
        OP_KIND_DELETE => Ok(Op::Delete { tree_id, key }),
        OP_KIND_PATCH => decode_patch(cursor, tree_id, key),
        other => Err(DecodeError(format!("unknown op kind {other}"))),
    }
}

/// The rest of a patch op: its pieces must be in ascending order, apart, and within the value.
fn decode_patch(cursor: &mut Cursor<'_>, tree_id: u32, key: Vec<u8>) -> Result<Op, DecodeError> {
    let length = cursor.u32()?;
    let count = cursor.u32()? as usize;
    // Each piece takes at least 8 bytes, which bounds the count by the bytes left.
    if count > cursor.remaining() / PATCH_PIECE_OVERHEAD_BYTES {
        return Err(DecodeError(format!(
            "patch of {count} pieces overruns its record"
        )));
    }
    let mut pieces = Vec::with_capacity(count);
    let mut end = 0u64;
    for _ in 0..count {
        let offset = cursor.u32()?;
        let bytes = cursor.bytes()?;
        if u64::from(offset) < end || u64::from(offset) + bytes.len() as u64 > u64::from(length) {
            return Err(DecodeError(format!(
                "patch piece at {offset} (+{}) out of order or past the value's {length} bytes",
                bytes.len()
            )));
        }
        end = u64::from(offset) + bytes.len() as u64;
        pieces.push((offset, bytes.to_vec()));
    }
    Ok(Op::Patch {
        tree_id,
        key,
        length,
        pieces,
    })
}

/// Converts an in-memory length to the u32 of the format. Lengths are bounded by
/// `FRAME_SIZE_MAX` before a frame is accepted, so overflow here is a caller bug.
fn length_u32(length: usize) -> u32 {
    u32::try_from(length).expect("log record field longer than u32::MAX")
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&length_u32(bytes.len()).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Bounds-checked reader over untrusted payload bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], DecodeError> {
        if count > self.remaining() {
            return Err(DecodeError(format!(
                "field of {count} bytes at payload offset {} overruns the payload",
                self.position
            )));
        }
        let slice = &self.bytes[self.position..self.position + count];
        self.position += count;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut raw = [0u8; 4];
        raw.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(raw))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(raw))
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let length = self.u32()?;
        self.take(length as usize)
    }
}

/// Fills in the LSN and CRC of a frame made by `encode_frame`. `body_checksum` is the CRC-32C
/// of `frame[16..]` (type and payload), computed before the LSN is known.
pub fn frame_seal(frame: &mut [u8], lsn: Lsn, body_checksum: u32) {
    debug_assert!(frame.len() >= FRAME_HEADER_SIZE);
    let lsn_bytes = lsn.to_le_bytes();
    frame[8..16].copy_from_slice(&lsn_bytes);
    let checksum =
        crate::checksum::combine(crc32c::crc32c(&lsn_bytes), body_checksum, frame.len() - 16);
    debug_assert_eq!(checksum, crc32c::crc32c(&frame[8..]));
    frame[4..8].copy_from_slice(&checksum.to_le_bytes());
}

/// Reads the length field of a frame header, or `None` if it cannot start a valid frame (zero
/// means end of log; anything below the header size or above `FRAME_SIZE_MAX` is garbage).
pub fn frame_size(header: &[u8]) -> Option<u32> {
    let mut raw = [0u8; 4];
    raw.copy_from_slice(header.get(0..4)?);
    let size = u32::from_le_bytes(raw);
    (size as usize >= FRAME_HEADER_SIZE && size <= FRAME_SIZE_MAX).then_some(size)
}

/// Why a frame is not a valid record at its position; recovery treats each as the log's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameDefect {
    Size,
    Checksum,
    LsnMismatch,
}

/// Checks a whole frame read at `lsn`: length, CRC, then the LSN field (stale bytes from an
/// older use of the space carry another LSN).
pub fn frame_check(frame: &[u8], lsn: Lsn) -> Result<(), FrameDefect> {
    match frame_size(frame) {
        Some(size) if size as usize == frame.len() => {}
        _ => return Err(FrameDefect::Size),
    }
    let mut raw = [0u8; 4];
    raw.copy_from_slice(&frame[4..8]);
    if crc32c::crc32c(&frame[8..]) != u32::from_le_bytes(raw) {
        return Err(FrameDefect::Checksum);
    }
    let mut raw_lsn = [0u8; 8];
    raw_lsn.copy_from_slice(&frame[8..16]);
    if u64::from_le_bytes(raw_lsn) != lsn {
        return Err(FrameDefect::LsnMismatch);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_records() -> Vec<LogRecord> {
        vec![
            LogRecord::Commit {
                txn_id: 7,
                commit_ts: 99,
                ops: vec![
                    Op::Put {
                        tree_id: 1,
                        key: b"alpha".to_vec(),
                        value: b"one".to_vec(),
                    },
                    Op::Delete {
                        tree_id: 2,
                        key: b"beta".to_vec(),
                    },
                    Op::Put {
                        tree_id: 3,
                        key: Vec::new(),
                        value: Vec::new(),
                    },
                    Op::Patch {
                        tree_id: 4,
                        key: b"gamma".to_vec(),
                        length: 4096,
                        pieces: vec![(8, vec![1, 2, 3, 4]), (4000, vec![9])],
                    },
                ],
            },
            LogRecord::Commit {
                txn_id: 0,
                commit_ts: u64::MAX,
                ops: Vec::new(),
            },
            LogRecord::CreateTree {
                tree_id: 5,
                name: "orders_by_date".into(),
                kind: 2,
                unique: true,
                commit_ts: 100,
            },
            LogRecord::DropTree {
                tree_id: 5,
                commit_ts: 101,
            },
            LogRecord::CheckpointMark {
                checkpoint_id: 3,
                redo_lsn: 8192,
            },
        ]
    }

    #[test]
    fn payload_round_trip() {
        for record in sample_records() {
            let mut payload = Vec::new();
            record.encode_payload(&mut payload);
            let decoded = LogRecord::decode_payload(record.record_type() as u8, &payload);
            assert_eq!(decoded, Ok(record));
        }
    }

    #[test]
    fn frame_round_trip_and_defects() {
        for record in sample_records() {
            let mut frame = record.encode_frame();
            let body_checksum = crc32c::crc32c(&frame[16..]);
            frame_seal(&mut frame, 4096, body_checksum);
            assert_eq!(frame_check(&frame, 4096), Ok(()));
            assert_eq!(frame_check(&frame, 4097), Err(FrameDefect::LsnMismatch));
            let decoded = LogRecord::decode_payload(frame[16], &frame[FRAME_HEADER_SIZE..]);
            assert_eq!(decoded, Ok(record));
            let last = frame.len() - 1;
            frame[last] ^= 0x40;
            assert_eq!(frame_check(&frame, 4096), Err(FrameDefect::Checksum));
            assert_eq!(frame_check(&frame[..last], 4096), Err(FrameDefect::Size));
        }
    }

    #[test]
    fn frame_size_matches_the_encoding() {
        for record in sample_records() {
            assert_eq!(
                record.frame_size_bytes(),
                record.encode_frame().len() as u64
            );
        }
        // A part is not a record by itself; the reader reassembles parts.
        assert!(LogRecord::decode_payload(RecordType::CommitPart as u8, &[0; 12]).is_err());
    }

    #[test]
    fn truncated_and_trailing_payloads_are_errors() {
        let record = &sample_records()[0];
        let mut payload = Vec::new();
        record.encode_payload(&mut payload);
        for cut in 0..payload.len() {
            assert!(
                LogRecord::decode_payload(1, &payload[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        payload.push(0);
        assert!(LogRecord::decode_payload(1, &payload).is_err());
        assert!(LogRecord::decode_payload(0, &[]).is_err());
        assert!(LogRecord::decode_payload(200, &[]).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(
            record_type in 0u8..6,
            bytes in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            // Decoding garbage may succeed by chance, but must never panic; a success must
            // re-encode to the very same bytes (the encoding is canonical).
            if let Ok(record) = LogRecord::decode_payload(record_type, &bytes) {
                let mut payload = Vec::new();
                record.encode_payload(&mut payload);
                prop_assert_eq!(&payload, &bytes);
            }
            let _ = frame_check(&bytes, 0);
        }

        #[test]
        fn mutated_payloads_never_panic(
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
            cut in any::<usize>(),
        ) {
            // Random bytes mostly fail at the first field; mutating a valid record reaches the
            // length fields deep inside it.
            for record in sample_records() {
                let mut payload = Vec::new();
                record.encode_payload(&mut payload);
                for &(position, mask) in &flips {
                    if !payload.is_empty() {
                        let index = position % payload.len();
                        payload[index] ^= mask;
                    }
                }
                let cut = cut % (payload.len() + 1);
                let _ = LogRecord::decode_payload(record.record_type() as u8, &payload[..cut]);
                let _ = LogRecord::decode_payload(record.record_type() as u8, &payload);
            }
        }

        #[test]
        fn commit_round_trip(
            txn_id in any::<u64>(),
            commit_ts in any::<u64>(),
            keys in proptest::collection::vec(
                (
                    any::<u32>(),
                    proptest::collection::vec(any::<u8>(), 0..20),
                    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                ),
                0..10,
            ),
        ) {
            let ops = keys.into_iter().map(|(tree_id, key, value)| match value {
                Some(value) => Op::Put { tree_id, key, value },
                None => Op::Delete { tree_id, key },
            }).collect();
            let record = LogRecord::Commit { txn_id, commit_ts, ops };
            let mut payload = Vec::new();
            record.encode_payload(&mut payload);
            prop_assert_eq!(LogRecord::decode_payload(1, &payload), Ok(record));
        }
    }

    #[test]
    fn a_patch_logs_the_changed_bytes_only() {
        let old = vec![7u8; 4096];
        let mut new = old.clone();
        new[8..12].copy_from_slice(&42u32.to_le_bytes());
        let pieces = patch_pieces(&old, &new).expect("a small change is a patch");
        assert_eq!(pieces, vec![(8, 42u32.to_le_bytes().to_vec())]);
        let op = Op::Patch {
            tree_id: 1,
            key: b"k".to_vec(),
            length: 4096,
            pieces,
        };
        assert!(op_size_bytes(&op) < 40, "{} bytes", op_size_bytes(&op));
        let Op::Patch { length, pieces, .. } = &op else {
            unreachable!()
        };
        assert_eq!(patched(&old, *length, pieces), Some(new.clone()));
        assert_eq!(
            patched(&old[1..], *length, pieces),
            None,
            "wrong base length"
        );
        // Whole rewrites and length changes are logged as whole values.
        assert_eq!(patch_pieces(&old, &vec![8u8; 4096]), None);
        assert_eq!(patch_pieces(&old, &old[1..]), None);
    }

    #[test]
    fn patch_pieces_out_of_order_or_past_the_value_are_rejected() {
        for pieces in [
            vec![(10u32, vec![1u8; 4]), (12, vec![2u8; 2])],
            vec![(4094, vec![1u8; 4])],
        ] {
            let record = LogRecord::Commit {
                txn_id: 1,
                commit_ts: 2,
                ops: vec![Op::Patch {
                    tree_id: 1,
                    key: b"k".to_vec(),
                    length: 4096,
                    pieces,
                }],
            };
            let mut payload = Vec::new();
            record.encode_payload(&mut payload);
            assert!(LogRecord::decode_payload(1, &payload).is_err());
        }
    }

    proptest! {
        #[test]
        fn patches_rebuild_the_new_value(
            old in proptest::collection::vec(any::<u8>(), 0..300),
            changes in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..20),
        ) {
            let mut new = old.clone();
            for (position, byte) in changes {
                if !new.is_empty() {
                    let index = position as usize % new.len();
                    new[index] = byte;
                }
            }
            if let Some(pieces) = patch_pieces(&old, &new) {
                prop_assert_eq!(patched(&old, old.len() as u32, &pieces), Some(new.clone()));
                let op = Op::Patch { tree_id: 1, key: vec![], length: old.len() as u32, pieces };
                let record = LogRecord::Commit { txn_id: 1, commit_ts: 1, ops: vec![op] };
                let mut payload = Vec::new();
                record.encode_payload(&mut payload);
                prop_assert_eq!(LogRecord::decode_payload(1, &payload), Ok(record));
            }
        }
    }
}

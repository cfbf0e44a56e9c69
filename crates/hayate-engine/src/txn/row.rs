//! The versioned row stored as a B+tree value.
//!
//! Layout (LE): commit timestamp u64 | undo pointer u64 (0: no older version) | flags u8
//! (bit 0: tombstone, the row was deleted) | the user's value bytes.

use crate::error::{Error, Location, Result};

pub const ROW_HEADER_SIZE: usize = 17;
const FLAG_TOMBSTONE: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowVersion {
    pub commit_ts: u64,
    pub undo_pointer: u64,
    /// None for a tombstone.
    pub value: Option<Vec<u8>>,
}

pub fn encode(commit_ts: u64, undo_pointer: u64, value: Option<&[u8]>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ROW_HEADER_SIZE + value.map_or(0, |v| v.len()));
    bytes.extend_from_slice(&commit_ts.to_le_bytes());
    bytes.extend_from_slice(&undo_pointer.to_le_bytes());
    bytes.push(if value.is_none() { FLAG_TOMBSTONE } else { 0 });
    if let Some(value) = value {
        bytes.extend_from_slice(value);
    }
    bytes
}

/// Decodes a stored row; bytes come from disk, so a malformed row is corruption.
pub fn decode(bytes: &[u8], tree_name: &str) -> Result<RowVersion> {
    let Some((commit_ts, undo_pointer, tombstone)) = header(bytes) else {
        return Err(malformed(bytes.len(), tree_name));
    };
    Ok(RowVersion {
        commit_ts,
        undo_pointer,
        value: (!tombstone).then(|| bytes[ROW_HEADER_SIZE..].to_vec()),
    })
}

/// The header of a stored row: (commit timestamp, undo pointer, tombstone); None if the
/// row is malformed (`malformed` is the error).
pub fn header(bytes: &[u8]) -> Option<(u64, u64, bool)> {
    if bytes.len() < ROW_HEADER_SIZE || bytes[16] & !FLAG_TOMBSTONE != 0 {
        return None;
    }
    let commit_ts = u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes"));
    let undo_pointer = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    Some((commit_ts, undo_pointer, bytes[16] & FLAG_TOMBSTONE != 0))
}

/// `keep` (a test of row values) as a test of stored rows, for `Cursor::next_batch_where` and
/// `BTree::get_sorted_where`: a row whose stored version a snapshot at `snapshot_ts` sees is
/// tested (refused if it is a tombstone); an older or malformed one is kept for the caller to
/// resolve through its undo chain or report.
pub fn keep_visible<'k>(
    snapshot_ts: u64,
    keep: &'k mut dyn FnMut(&[u8]) -> bool,
) -> impl FnMut(&[u8]) -> bool + 'k {
    move |raw: &[u8]| match header(raw) {
        Some((commit_ts, _, tombstone)) if commit_ts <= snapshot_ts => {
            !tombstone && keep(&raw[ROW_HEADER_SIZE..])
        }
        _ => true,
    }
}

/// The corruption error of a malformed row of `length_bytes` in tree `tree_name`.
pub fn malformed(length_bytes: usize, tree_name: &str) -> Error {
    let location = Location {
        file: format!("tree {tree_name}"),
        ..Default::default()
    };
    Error::corruption(location, format!("malformed row of {length_bytes} bytes"))
}

/// Reads only the commit timestamp and tombstone flag, without copying the value.
pub fn peek(bytes: &[u8]) -> Option<(u64, bool)> {
    if bytes.len() < ROW_HEADER_SIZE {
        return None;
    }
    let commit_ts = u64::from_le_bytes(bytes[0..8].try_into().ok()?);
    Some((commit_ts, bytes[16] & FLAG_TOMBSTONE != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_garbage() {
        let bytes = encode(5, 9, Some(b"abc"));
        let row = decode(&bytes, "t").unwrap();
        assert_eq!(
            row,
            RowVersion {
                commit_ts: 5,
                undo_pointer: 9,
                value: Some(b"abc".to_vec())
            }
        );
        let tombstone = decode(&encode(6, 0, None), "t").unwrap();
        assert_eq!(tombstone.value, None);
        assert!(decode(&bytes[..10], "t").is_err());
        let mut bad = bytes.clone();
        bad[16] = 0x80;
        assert!(decode(&bad, "t").is_err());
    }
}

//! Segment files: the log stream cut into files named `wal.{first_lsn:016x}`.
//!
//! A segment holds the stream bytes from its first LSN up to the next segment's first LSN (the
//! last segment: up to its file length). Records may span two segments. Segment starts are
//! multiples of `IO_ALIGN`, so a block-aligned LSN is a block-aligned file offset.

use super::Lsn;
use crate::error::Result;
use crate::io::Io;

const SEGMENT_PREFIX: &str = "wal.";

pub fn segment_name(first_lsn: Lsn) -> String {
    format!("{SEGMENT_PREFIX}{first_lsn:016x}")
}

/// Parses a segment file name; other files of the directory give `None`.
pub fn parse_segment_name(name: &str) -> Option<Lsn> {
    let digits = name.strip_prefix(SEGMENT_PREFIX)?;
    if digits.len() != 16 || !digits.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    Lsn::from_str_radix(digits, 16).ok()
}

/// First LSNs of all segment files, ascending.
pub fn list_segments(io: &dyn Io) -> Result<Vec<Lsn>> {
    let mut firsts: Vec<Lsn> = io
        .list()?
        .iter()
        .filter_map(|n| parse_segment_name(n))
        .collect();
    firsts.sort_unstable();
    Ok(firsts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(segment_name(0x1000), "wal.0000000000001000");
        assert_eq!(parse_segment_name(&segment_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_segment_name("wal.123"), None);
        assert_eq!(parse_segment_name("wal.000000000000100g"), None);
        assert_eq!(parse_segment_name("data.hyt"), None);
    }
}

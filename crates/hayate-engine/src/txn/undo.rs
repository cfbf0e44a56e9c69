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
//! Purge: an entry superseded at timestamp `t` is needed only by snapshots older than `t`; once
//! the oldest active snapshot is at or past `t` it is dropped. The segment lives in memory.

use std::collections::VecDeque;

use parking_lot::RwLock;

const SEQUENCE_BITS: u32 = 40;
const SEQUENCE_MASK: u64 = (1 << SEQUENCE_BITS) - 1;

#[derive(Debug, Clone)]
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

struct Segment {
    /// Sequence number of `entries[0]`.
    base: u64,
    /// Purged entries at the front are None until they can be popped.
    entries: VecDeque<Option<UndoEntry>>,
    bytes: u64,
}

pub struct UndoLog {
    epoch: u64,
    segment: RwLock<Segment>,
}

impl UndoLog {
    pub fn new(epoch: u64) -> UndoLog {
        UndoLog {
            epoch: epoch & 0xff_ffff,
            segment: RwLock::new(Segment {
                base: 1,
                entries: VecDeque::new(),
                bytes: 0,
            }),
        }
    }

    /// Stores a before-image and returns its pointer (never 0).
    pub fn push(&self, entry: UndoEntry) -> u64 {
        let mut segment = self.segment.write();
        segment.bytes += entry.value.as_ref().map_or(0, |v| v.len() as u64) + 40;
        let sequence = segment.base + segment.entries.len() as u64;
        segment.entries.push_back(Some(entry));
        assert!(sequence <= SEQUENCE_MASK, "undo sequence overflow");
        (self.epoch << SEQUENCE_BITS) | sequence
    }

    /// Finds an entry; None if it belongs to an earlier run or was purged.
    pub fn get(&self, pointer: u64) -> Option<UndoEntry> {
        if pointer == 0 || pointer >> SEQUENCE_BITS != self.epoch {
            return None;
        }
        let sequence = pointer & SEQUENCE_MASK;
        let segment = self.segment.read();
        let index = sequence.checked_sub(segment.base)?;
        segment.entries.get(index as usize)?.clone()
    }

    /// True if the pointer was handed out by this run.
    pub fn is_current_epoch(&self, pointer: u64) -> bool {
        pointer >> SEQUENCE_BITS == self.epoch
    }

    /// Drops entries no snapshot at or after `oldest_snapshot_ts` needs. Entries are purged in
    /// order; an entry still needed keeps the ones after it too (they are few and short-lived).
    pub fn purge(&self, oldest_snapshot_ts: u64) -> u64 {
        let mut segment = self.segment.write();
        let mut purged = 0;
        while let Some(front) = segment.entries.front() {
            match front {
                Some(entry) if entry.superseded_ts > oldest_snapshot_ts => break,
                Some(entry) => {
                    let size = entry.value.as_ref().map_or(0, |v| v.len() as u64) + 40;
                    segment.bytes -= size;
                    purged += 1;
                }
                None => {}
            }
            segment.entries.pop_front();
            segment.base += 1;
        }
        purged
    }

    /// (entries held, bytes held)
    pub fn size(&self) -> (u64, u64) {
        let segment = self.segment.read();
        (segment.entries.len() as u64, segment.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_resolve_until_purged_and_not_across_epochs() {
        let undo = UndoLog::new(3);
        let entry = |superseded_ts| UndoEntry {
            commit_ts: 1,
            value: Some(vec![7]),
            undo_pointer: 0,
            superseded_ts,
        };
        let first = undo.push(entry(10));
        let second = undo.push(entry(20));
        assert_eq!(undo.get(first).unwrap().superseded_ts, 10);
        assert!(UndoLog::new(4).get(first).is_none(), "other epoch");
        assert_eq!(undo.purge(9), 0);
        assert_eq!(undo.purge(10), 1);
        assert!(undo.get(first).is_none());
        assert_eq!(undo.get(second).unwrap().superseded_ts, 20);
        assert_eq!(undo.size().0, 1);
    }
}

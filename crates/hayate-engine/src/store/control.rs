//! The control file and checkpoint files, shared by both write policies.
//!
//! `control.hyt` holds two 4096-byte slots; a checkpoint writes the slot not holding the newest
//! valid record, so a torn control write leaves the other slot intact. Slot layout (LE):
//!
//! | offset | size | field                                       |
//! |--------|------|---------------------------------------------|
//! | 0      | 8    | magic "HAYATECT"                            |
//! | 8      | 4    | store format version (`STORE_FORMAT_VERSION`)|
//! | 12     | 4    | page size in bytes                          |
//! | 16     | 1    | write policy (0 out-of-place, 1 in-place)   |
//! | 17     | 7    | reserved, zero                              |
//! | 24     | 8    | sequence: increases with every write        |
//! | 32     | 8    | checkpoint id (0: none yet)                 |
//! | 40     | 8    | segment size in pages (out-of-place)        |
//! | 48     | 8    | checkpoint file length in bytes             |
//! | 56     | 4    | CRC-32C of the checkpoint file              |
//! | 60     | 4032 | reserved, zero                              |
//! | 4092   | 4    | CRC-32C of bytes 0..4092                    |
//!
//! A checkpoint file `checkpoint.{id:016x}` (see `CheckpointImage`) is written and synced
//! before the control slot that names it.

use std::sync::Arc;

use crate::error::{Error, Location, Result};
use crate::io::{AlignedBuf, Io, IoFile, OpenOptions};
use crate::page::PageId;

use super::CheckpointMeta;

/// Name of the control file in the data directory; its presence marks a Hayate database.
pub const CONTROL_FILE: &str = "control.hyt";
/// Format version of the control slot and the store's files, checked when a slot is read.
pub const STORE_FORMAT_VERSION: u32 = 1;
const CONTROL_MAGIC: &[u8; 8] = b"HAYATECT";
const CONTROL_SLOT_SIZE: usize = 4096;
const CHECKPOINT_MAGIC: &[u8; 8] = b"HYCKPT01";

/// Where a page store writes page images; fixed when the store is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePolicy {
    /// Every write goes to the next free slot of a segment written sequentially; a cleaner
    /// reclaims segments (`out_of_place`, the default).
    OutOfPlace,
    /// Every page has a fixed home, its checkpointed image journaled before the first
    /// overwrite after a checkpoint (`in_place`, the classic baseline).
    InPlace,
}

impl WritePolicy {
    fn to_u8(self) -> u8 {
        match self {
            WritePolicy::OutOfPlace => 0,
            WritePolicy::InPlace => 1,
        }
    }
    fn from_u8(value: u8) -> Option<WritePolicy> {
        match value {
            0 => Some(WritePolicy::OutOfPlace),
            1 => Some(WritePolicy::InPlace),
            _ => None,
        }
    }
}

/// The contents of one control slot (layout in the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlRecord {
    /// Bytes per page of the store.
    pub page_size: u32,
    /// The store's write policy.
    pub policy: WritePolicy,
    /// Increases with every write of a slot; the newer valid slot wins.
    pub sequence: u64,
    /// The durable checkpoint recovery starts from (0: none yet).
    pub checkpoint_id: u64,
    /// Pages per segment (out-of-place only).
    pub segment_pages: u64,
    /// Length in bytes of that checkpoint's file.
    pub checkpoint_length: u64,
    /// CRC-32C of that checkpoint's file.
    pub checkpoint_checksum: u32,
}

impl ControlRecord {
    fn encode(&self) -> AlignedBuf {
        let mut slot = AlignedBuf::new(CONTROL_SLOT_SIZE);
        slot[0..8].copy_from_slice(CONTROL_MAGIC);
        slot[8..12].copy_from_slice(&STORE_FORMAT_VERSION.to_le_bytes());
        slot[12..16].copy_from_slice(&self.page_size.to_le_bytes());
        slot[16] = self.policy.to_u8();
        slot[24..32].copy_from_slice(&self.sequence.to_le_bytes());
        slot[32..40].copy_from_slice(&self.checkpoint_id.to_le_bytes());
        slot[40..48].copy_from_slice(&self.segment_pages.to_le_bytes());
        slot[48..56].copy_from_slice(&self.checkpoint_length.to_le_bytes());
        slot[56..60].copy_from_slice(&self.checkpoint_checksum.to_le_bytes());
        let checksum = crc32c::crc32c(&slot[..CONTROL_SLOT_SIZE - 4]);
        slot[CONTROL_SLOT_SIZE - 4..].copy_from_slice(&checksum.to_le_bytes());
        slot
    }

    /// Decodes a slot; None when it is empty, torn or not ours.
    fn decode(slot: &[u8]) -> Option<ControlRecord> {
        let stored = u32::from_le_bytes(slot[CONTROL_SLOT_SIZE - 4..].try_into().ok()?);
        if crc32c::crc32c(&slot[..CONTROL_SLOT_SIZE - 4]) != stored || &slot[0..8] != CONTROL_MAGIC
        {
            return None;
        }
        let u64_at =
            |offset: usize| u64::from_le_bytes(slot[offset..offset + 8].try_into().unwrap());
        let u32_at =
            |offset: usize| u32::from_le_bytes(slot[offset..offset + 4].try_into().unwrap());
        if u32_at(8) != STORE_FORMAT_VERSION {
            return None;
        }
        Some(ControlRecord {
            page_size: u32_at(12),
            policy: WritePolicy::from_u8(slot[16])?,
            sequence: u64_at(24),
            checkpoint_id: u64_at(32),
            segment_pages: u64_at(40),
            checkpoint_length: u64_at(48),
            checkpoint_checksum: u32_at(56),
        })
    }
}

/// The control file: reads the newest valid slot, writes the other one.
pub struct ControlFile {
    file: Arc<dyn IoFile>,
    current: ControlRecord,
}

impl ControlFile {
    /// Opens an existing control file. Returns None if the file does not exist.
    pub fn open(io: &dyn Io) -> Result<Option<ControlFile>> {
        if !io.exists(CONTROL_FILE)? {
            return Ok(None);
        }
        let file = io.open(CONTROL_FILE, OpenOptions::EXISTING_DIRECT)?;
        if file.len()? < (2 * CONTROL_SLOT_SIZE) as u64 {
            return Ok(None);
        }
        let mut slots = AlignedBuf::new(2 * CONTROL_SLOT_SIZE);
        file.read_at(&mut slots, 0)?;
        let newest = [0, 1]
            .iter()
            .filter_map(|&index| {
                ControlRecord::decode(&slots[index * CONTROL_SLOT_SIZE..][..CONTROL_SLOT_SIZE])
            })
            .max_by_key(|record| record.sequence);
        match newest {
            Some(current) => Ok(Some(ControlFile { file, current })),
            None => Err(Error::corruption(
                Location {
                    file: CONTROL_FILE.into(),
                    ..Default::default()
                },
                "no valid control slot",
            )),
        }
    }

    /// Creates a control file for a new database (both slots written and synced).
    pub fn create(io: &dyn Io, record: ControlRecord) -> Result<ControlFile> {
        let file = io.open(CONTROL_FILE, OpenOptions::CREATE_DIRECT)?;
        let mut control = ControlFile {
            file,
            current: record.clone(),
        };
        control.current.sequence = 0;
        let mut first = record;
        first.sequence = 1;
        control.write(first.clone())?;
        control.write(first)?;
        io.sync_dir()?;
        Ok(control)
    }

    /// The newest valid control record.
    pub fn current(&self) -> &ControlRecord {
        &self.current
    }

    /// Steps 4-5 of a checkpoint: writes and syncs the checkpoint file, then the control slot
    /// naming it. From then on recovery starts at `image`. Returns the id of the checkpoint it
    /// replaced.
    pub fn publish(&mut self, io: &dyn Io, image: &CheckpointImage) -> Result<u64> {
        let previous_id = self.current.checkpoint_id;
        let (length, checksum) = image.write(io)?;
        let mut record = self.current.clone();
        record.checkpoint_id = image.meta.checkpoint_id;
        record.checkpoint_length = length;
        record.checkpoint_checksum = checksum;
        self.write(record)?;
        Ok(previous_id)
    }

    /// Removes the file of a replaced checkpoint; nothing refers to it any more. A failure only
    /// leaves a stale file behind.
    pub fn remove_replaced(&self, io: &dyn Io, previous_id: u64) {
        if previous_id != self.current.checkpoint_id {
            let _ = io.remove(&checkpoint_file_name(previous_id));
        }
    }

    /// Writes `record` (with the next sequence) into the older slot and syncs it.
    pub fn write(&mut self, mut record: ControlRecord) -> Result<()> {
        record.sequence = self.current.sequence + 1;
        let slot_index = record.sequence % 2;
        let bytes = record.encode();
        self.file
            .write_at(&bytes, slot_index * CONTROL_SLOT_SIZE as u64)?;
        self.file.sync_data()?;
        self.current = record;
        Ok(())
    }
}

/// Everything a checkpoint file holds. Layout (LE): magic "HYCKPT01"; checkpoint id u64;
/// redo LSN u64; next page id u64; free page count u64 then that many page ids u64; mapping
/// length u64 then that many u64 slots (`u64::MAX` = page not written; empty for in-place);
/// payload length u64 then the payload bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointImage {
    pub meta: CheckpointMeta,
    pub next_page_id: PageId,
    pub free_page_ids: Vec<PageId>,
    pub mapping: Vec<u64>,
}

pub fn checkpoint_file_name(checkpoint_id: u64) -> String {
    format!("checkpoint.{checkpoint_id:016x}")
}

impl CheckpointImage {
    pub fn encode(&self) -> Vec<u8> {
        let capacity = 64 + 8 * (self.free_page_ids.len() + self.mapping.len());
        let mut bytes = Vec::with_capacity(capacity + self.meta.payload.len());
        bytes.extend_from_slice(CHECKPOINT_MAGIC);
        for value in [
            self.meta.checkpoint_id,
            self.meta.redo_lsn,
            self.next_page_id,
        ] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes.extend_from_slice(&(self.free_page_ids.len() as u64).to_le_bytes());
        for page_id in &self.free_page_ids {
            bytes.extend_from_slice(&page_id.to_le_bytes());
        }
        bytes.extend_from_slice(&(self.mapping.len() as u64).to_le_bytes());
        for slot in &self.mapping {
            bytes.extend_from_slice(&slot.to_le_bytes());
        }
        bytes.extend_from_slice(&(self.meta.payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&self.meta.payload);
        bytes
    }

    pub fn decode(bytes: &[u8], file: &str) -> Result<CheckpointImage> {
        let corrupt = |detail: &str| {
            Error::corruption(
                Location {
                    file: file.into(),
                    ..Default::default()
                },
                detail,
            )
        };
        let mut reader = ByteReader { bytes, position: 0 };
        if reader.take(8).ok_or_else(|| corrupt("short"))? != CHECKPOINT_MAGIC {
            return Err(corrupt("bad checkpoint magic"));
        }
        let mut next = || reader.u64().ok_or_else(|| corrupt("truncated checkpoint"));
        let checkpoint_id = next()?;
        let redo_lsn = next()?;
        let next_page_id = next()?;
        let free_count = next()?;
        let free_page_ids = reader
            .u64_vec(free_count)
            .ok_or_else(|| corrupt("bad free list"))?;
        let mapping_count = reader
            .u64()
            .ok_or_else(|| corrupt("truncated checkpoint"))?;
        let mapping = reader
            .u64_vec(mapping_count)
            .ok_or_else(|| corrupt("bad mapping"))?;
        let payload_len = reader
            .u64()
            .ok_or_else(|| corrupt("truncated checkpoint"))?;
        let payload = usize::try_from(payload_len)
            .ok()
            .and_then(|len| reader.take(len))
            .ok_or_else(|| corrupt("bad payload"))?
            .to_vec();
        Ok(CheckpointImage {
            meta: CheckpointMeta {
                checkpoint_id,
                redo_lsn,
                payload,
            },
            next_page_id,
            free_page_ids,
            mapping,
        })
    }

    /// Writes the image as a new checkpoint file and syncs it; returns (length, checksum).
    pub fn write(&self, io: &dyn Io) -> Result<(u64, u32)> {
        let bytes = self.encode();
        let checksum = crc32c::crc32c(&bytes);
        let mut aligned = AlignedBuf::new(bytes.len());
        aligned[..bytes.len()].copy_from_slice(&bytes);
        let file = io.open(
            &checkpoint_file_name(self.meta.checkpoint_id),
            OpenOptions::CREATE_DIRECT,
        )?;
        file.write_at(&aligned, 0)?;
        file.sync_data()?;
        io.sync_dir()?;
        Ok((bytes.len() as u64, checksum))
    }

    /// Reads the checkpoint file named by a control record and checks its checksum.
    pub fn read(io: &dyn Io, control: &ControlRecord) -> Result<CheckpointImage> {
        let name = checkpoint_file_name(control.checkpoint_id);
        let file = io.open(&name, OpenOptions::EXISTING_DIRECT)?;
        let length = usize::try_from(control.checkpoint_length)
            .map_err(|_| Error::InvalidArgument("checkpoint too large".into()))?;
        let file_length = file.len()?;
        if file_length < control.checkpoint_length {
            let location = Location {
                file: name,
                ..Default::default()
            };
            return Err(Error::corruption(
                location,
                "checkpoint file shorter than recorded",
            ));
        }
        let mut aligned = AlignedBuf::new(length);
        let readable = (aligned.len() as u64).min(file_length) as usize;
        file.read_at(&mut aligned[..readable], 0)?;
        let bytes = &aligned[..length];
        if crc32c::crc32c(bytes) != control.checkpoint_checksum {
            let location = Location {
                file: name,
                ..Default::default()
            };
            return Err(Error::corruption(location, "checkpoint checksum mismatch"));
        }
        let image = CheckpointImage::decode(bytes, &name)?;
        if image.meta.checkpoint_id != control.checkpoint_id {
            let location = Location {
                file: name,
                ..Default::default()
            };
            return Err(Error::corruption(location, "checkpoint id mismatch"));
        }
        Ok(image)
    }
}

struct ByteReader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> ByteReader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.position.checked_add(len)?;
        let slice = self.bytes.get(self.position..end)?;
        self.position = end;
        Some(slice)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn u64_vec(&mut self, count: u64) -> Option<Vec<u64>> {
        let count = usize::try_from(count).ok()?;
        let bytes = self.take(count.checked_mul(8)?)?;
        Some(
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_image_round_trips_and_rejects_truncation() {
        let image = CheckpointImage {
            meta: CheckpointMeta {
                checkpoint_id: 3,
                redo_lsn: 4096,
                payload: vec![1, 2, 3],
            },
            next_page_id: 77,
            free_page_ids: vec![5, 9],
            mapping: vec![u64::MAX, 10, 11],
        };
        let bytes = image.encode();
        assert_eq!(CheckpointImage::decode(&bytes, "x").unwrap(), image);
        for cut in [0, 7, 20, bytes.len() - 1] {
            assert!(
                CheckpointImage::decode(&bytes[..cut], "x").is_err(),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn control_slot_detects_damage() {
        let record = ControlRecord {
            page_size: 4096,
            policy: WritePolicy::InPlace,
            sequence: 9,
            checkpoint_id: 2,
            segment_pages: 256,
            checkpoint_length: 100,
            checkpoint_checksum: 7,
        };
        let mut slot = record.encode();
        assert_eq!(ControlRecord::decode(&slot), Some(record));
        slot[33] ^= 0xff;
        assert_eq!(ControlRecord::decode(&slot), None);
    }
}

//! The in-place page store: the classic design, kept as the baseline the lab compares against.
//!
//! Page `p` lives at byte `p * page_size` of `data.hyt`. To keep the last checkpoint's page
//! images recoverable, the first overwrite of a page after a checkpoint is preceded by saving
//! its checkpointed image in `journal.hyt` (a rollback journal):
//!
//! 1. Read the page's current home image (the checkpointed one).
//! 2. Append `[magic u32 "HYJ1"][checkpoint id u64][page id u64][crc u32 of header+image]` and
//!    the image to the journal; fdatasync the journal (once per batch).
//! 3. Write the new image home.
//!
//! Recovery copies every valid journal entry of the current checkpoint back home, syncs the
//! data file and empties the journal: the data file is then exactly the checkpoint.
//! While a checkpoint writes its pages (between `begin_checkpoint` and `finish_checkpoint`)
//! other writes wait, so a page written by the checkpoint is never overtaken by an older copy.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::control::{CheckpointImage, ControlFile, ControlRecord, WritePolicy};
use super::page_ids::PageIdAllocator;
use super::{CheckpointMeta, PageStore, StoreSnapshot, StoreStats};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Io, IoFile, OpenOptions, ReadRequest, WriteRequest};
use crate::page::{self, PageId};

pub const DATA_FILE: &str = "data.hyt";
pub const JOURNAL_FILE: &str = "journal.hyt";
const JOURNAL_MAGIC: u32 = u32::from_le_bytes(*b"HYJ1");
const JOURNAL_HEADER_SIZE: usize = 24;

struct State {
    ids: PageIdAllocator,
    /// Page ids below this existed at the last checkpoint and need journaling.
    checkpoint_page_count: PageId,
    journaled: HashSet<PageId>,
    journal_length: u64,
    checkpoint_id: u64,
    writes_blocked: bool,
}

struct Snapshot {
    next_page_id: PageId,
    free_page_ids: Vec<PageId>,
}

#[derive(Default)]
struct Counters {
    pages_read: AtomicU64,
    pages_written: AtomicU64,
    pages_journaled: AtomicU64,
}

pub struct InPlaceStore {
    io: Arc<dyn Io>,
    file: Arc<dyn IoFile>,
    journal: Arc<dyn IoFile>,
    page_size: usize,
    state: Mutex<State>,
    unblocked: Condvar,
    /// Serializes journal appends and home writes.
    write_lock: Mutex<()>,
    control: Mutex<ControlFile>,
    opened: CheckpointMeta,
    counters: Counters,
}

impl InPlaceStore {
    pub fn create(io: Arc<dyn Io>, page_size: usize) -> Result<InPlaceStore> {
        page::validate_page_size(page_size)?;
        let image = CheckpointImage {
            meta: CheckpointMeta {
                checkpoint_id: 1,
                redo_lsn: 0,
                payload: Vec::new(),
            },
            next_page_id: 1,
            free_page_ids: Vec::new(),
            mapping: Vec::new(),
        };
        let (length, checksum) = image.write(io.as_ref())?;
        let record = ControlRecord {
            page_size: page_size as u32,
            policy: WritePolicy::InPlace,
            sequence: 0,
            checkpoint_id: 1,
            segment_pages: 0,
            checkpoint_length: length,
            checkpoint_checksum: checksum,
        };
        let control = ControlFile::create(io.as_ref(), record)?;
        Self::from_image(io, control, image)
    }

    /// Opens the store, rolling the data file back to the last checkpoint with the journal.
    pub fn open(io: Arc<dyn Io>, control: ControlFile) -> Result<InPlaceStore> {
        let image = CheckpointImage::read(io.as_ref(), control.current())?;
        Self::from_image(io, control, image)
    }

    fn from_image(
        io: Arc<dyn Io>,
        control: ControlFile,
        image: CheckpointImage,
    ) -> Result<InPlaceStore> {
        let page_size = control.current().page_size as usize;
        let file = io.open(DATA_FILE, OpenOptions::CREATE_DIRECT)?;
        let journal = io.open(
            JOURNAL_FILE,
            OpenOptions {
                create: true,
                direct: false,
                dsync: false,
            },
        )?;
        let restored = restore_journal(&*file, &*journal, page_size, image.meta.checkpoint_id)?;
        if restored > 0 {
            log::info!("in-place store: restored {restored} pages from the journal");
        }
        journal.set_len(0)?;
        journal.sync_data()?;
        io.sync_dir()?;
        let state = State {
            ids: PageIdAllocator::new(image.next_page_id, image.free_page_ids),
            checkpoint_page_count: image.next_page_id,
            journaled: HashSet::new(),
            journal_length: 0,
            checkpoint_id: image.meta.checkpoint_id,
            writes_blocked: false,
        };
        Ok(InPlaceStore {
            io,
            file,
            journal,
            page_size,
            state: Mutex::new(state),
            unblocked: Condvar::new(),
            write_lock: Mutex::new(()),
            control: Mutex::new(control),
            opened: image.meta,
            counters: Counters::default(),
        })
    }

    fn home(&self, page_id: PageId) -> u64 {
        page_id * self.page_size as u64
    }

    /// Saves the checkpointed images of pages about to be overwritten for the first time since
    /// the checkpoint, and syncs the journal. Caller holds `write_lock`.
    fn journal_before_images(&self, page_ids: &[PageId]) -> Result<()> {
        let (needed, offset, checkpoint_id) = {
            let state = self.state.lock();
            let needed: Vec<PageId> = page_ids
                .iter()
                .copied()
                .filter(|id| *id < state.checkpoint_page_count && !state.journaled.contains(id))
                .collect();
            (needed, state.journal_length, state.checkpoint_id)
        };
        if needed.is_empty() {
            return Ok(());
        }
        let file_length = self.file.len()?;
        let entry_size = JOURNAL_HEADER_SIZE + self.page_size;
        let mut entries = vec![0u8; needed.len() * entry_size];
        let mut image = AlignedBuf::new(self.page_size);
        let mut count = 0;
        for &page_id in &needed {
            if self.home(page_id) + self.page_size as u64 > file_length {
                continue; // never written home: nothing to restore
            }
            self.file.read_at(&mut image, self.home(page_id))?;
            let entry = &mut entries[count * entry_size..][..entry_size];
            entry[0..4].copy_from_slice(&JOURNAL_MAGIC.to_le_bytes());
            entry[4..12].copy_from_slice(&checkpoint_id.to_le_bytes());
            entry[12..20].copy_from_slice(&page_id.to_le_bytes());
            entry[JOURNAL_HEADER_SIZE..].copy_from_slice(&image);
            let checksum = journal_checksum(entry);
            entry[20..24].copy_from_slice(&checksum.to_le_bytes());
            count += 1;
        }
        if count > 0 {
            self.journal
                .write_at(&entries[..count * entry_size], offset)?;
            self.journal.sync_data()?;
        }
        let mut state = self.state.lock();
        state.journal_length = offset + (count * entry_size) as u64;
        state.journaled.extend(needed);
        self.counters
            .pages_journaled
            .fetch_add(count as u64, Ordering::Relaxed);
        Ok(())
    }

    fn write_home(&self, pages: &[(PageId, &[u8])]) -> Result<()> {
        let requests: Vec<WriteRequest<'_>> = pages
            .iter()
            .map(|(page_id, image)| WriteRequest {
                offset: self.home(*page_id),
                buf: image,
            })
            .collect();
        self.file.write_batch(&requests)?;
        self.counters
            .pages_written
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

fn journal_checksum(entry: &[u8]) -> u32 {
    let header = crc32c::crc32c(&entry[0..20]);
    crc32c::crc32c_append(header, &entry[JOURNAL_HEADER_SIZE..])
}

/// Copies valid journal entries of `checkpoint_id` back home; stops at the first invalid entry
/// (a torn append). Returns the number of pages restored.
fn restore_journal(
    file: &dyn IoFile,
    journal: &dyn IoFile,
    page_size: usize,
    checkpoint_id: u64,
) -> Result<u64> {
    let length = journal.len()?;
    let entry_size = (JOURNAL_HEADER_SIZE + page_size) as u64;
    let mut entry = vec![0u8; entry_size as usize];
    let mut image = AlignedBuf::new(page_size);
    let mut offset = 0;
    let mut restored = 0;
    while offset + entry_size <= length {
        journal.read_at(&mut entry, offset)?;
        let magic = u32::from_le_bytes(entry[0..4].try_into().unwrap());
        let entry_checkpoint = u64::from_le_bytes(entry[4..12].try_into().unwrap());
        let page_id = u64::from_le_bytes(entry[12..20].try_into().unwrap());
        let stored = u32::from_le_bytes(entry[20..24].try_into().unwrap());
        if magic != JOURNAL_MAGIC || stored != journal_checksum(&entry) {
            break;
        }
        if entry_checkpoint == checkpoint_id {
            image.copy_from_slice(&entry[JOURNAL_HEADER_SIZE..]);
            file.write_at(&image, page_id * page_size as u64)?;
            restored += 1;
        }
        offset += entry_size;
    }
    if restored > 0 {
        file.sync_data()?;
    }
    Ok(restored)
}

impl PageStore for InPlaceStore {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn read_page(&self, page_id: PageId, buf: &mut [u8]) -> Result<()> {
        let offset = self.home(page_id);
        self.file.read_at(buf, offset)?;
        self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
        page::verify(buf, page_id, DATA_FILE, offset)
    }

    fn read_pages(&self, pages: &mut [(PageId, &mut [u8])]) -> Result<()> {
        let mut requests: Vec<ReadRequest<'_>> = pages
            .iter_mut()
            .map(|(page_id, buf)| ReadRequest {
                offset: *page_id * self.page_size as u64,
                buf,
            })
            .collect();
        self.file.read_batch(&mut requests)?;
        drop(requests);
        self.counters
            .pages_read
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        for (page_id, buf) in pages.iter() {
            page::verify(buf, *page_id, DATA_FILE, self.home(*page_id))?;
        }
        Ok(())
    }

    fn write_pages(&self, pages: &[(PageId, &[u8])]) -> Result<()> {
        {
            let mut state = self.state.lock();
            while state.writes_blocked {
                self.unblocked.wait(&mut state);
            }
        }
        let _write = self.write_lock.lock();
        let page_ids: Vec<PageId> = pages.iter().map(|(id, _)| *id).collect();
        self.journal_before_images(&page_ids)?;
        self.write_home(pages)
    }

    fn allocate_page_id(&self) -> Result<PageId> {
        Ok(self.state.lock().ids.allocate().0)
    }

    fn free_page_id(&self, page_id: PageId) {
        self.state.lock().ids.free(page_id);
    }

    fn live_page_count(&self) -> u64 {
        self.state.lock().ids.live_count()
    }

    fn begin_checkpoint(&self) -> StoreSnapshot {
        let mut state = self.state.lock();
        assert!(!state.writes_blocked, "one checkpoint at a time");
        state.writes_blocked = true;
        let snapshot = Snapshot {
            next_page_id: state.ids.next(),
            free_page_ids: state.ids.free_ids().to_vec(),
        };
        StoreSnapshot {
            state: Box::new(snapshot),
        }
    }

    fn finish_checkpoint(
        &self,
        snapshot: StoreSnapshot,
        pages: &[(PageId, &[u8])],
        meta: &CheckpointMeta,
    ) -> Result<()> {
        let snapshot = *snapshot.state.downcast::<Snapshot>().expect("own snapshot");
        let result = self.write_checkpoint(snapshot, pages, meta);
        let mut state = self.state.lock();
        state.writes_blocked = false;
        self.unblocked.notify_all();
        result
    }

    fn opened_checkpoint(&self) -> Option<CheckpointMeta> {
        Some(self.opened.clone())
    }

    fn stats(&self) -> StoreStats {
        let state = self.state.lock();
        let written = self.counters.pages_written.load(Ordering::Relaxed);
        let journaled = self.counters.pages_journaled.load(Ordering::Relaxed);
        StoreStats {
            pages_read: self.counters.pages_read.load(Ordering::Relaxed),
            pages_written: written,
            pages_written_extra: journaled,
            write_amplification: if written == 0 {
                1.0
            } else {
                (written + journaled) as f64 / written as f64
            },
            file_size_bytes: self.file.len().unwrap_or(0),
            live_pages: state.ids.live_count(),
            live_bytes: state.ids.live_count() * self.page_size as u64,
            ..StoreStats::default()
        }
    }

    fn check(&self) -> Result<()> {
        let state = self.state.lock();
        state.ids.check().map_err(|detail| {
            Error::corruption(
                crate::error::Location {
                    file: DATA_FILE.into(),
                    ..Default::default()
                },
                detail,
            )
        })?;
        Ok(())
    }
}

impl InPlaceStore {
    /// Steps of an in-place checkpoint (writes of others are blocked meanwhile):
    /// 1. journal the checkpointed images of the pages about to be written, sync the journal;
    /// 2. write the pages home and sync the data file;
    /// 3. write and sync the checkpoint file, then the control slot naming it;
    /// 4. empty the journal: the new checkpoint needs none of its entries.
    fn write_checkpoint(
        &self,
        snapshot: Snapshot,
        pages: &[(PageId, &[u8])],
        meta: &CheckpointMeta,
    ) -> Result<()> {
        let _write = self.write_lock.lock();
        let page_ids: Vec<PageId> = pages.iter().map(|(id, _)| *id).collect();
        self.journal_before_images(&page_ids)?;
        self.write_home(pages)?;
        self.file.sync_data()?;
        let image = CheckpointImage {
            meta: meta.clone(),
            next_page_id: snapshot.next_page_id,
            free_page_ids: snapshot.free_page_ids,
            mapping: Vec::new(),
        };
        let previous_id = self.control.lock().publish(self.io.as_ref(), &image)?;
        self.journal.set_len(0)?;
        self.journal.sync_data()?;
        let mut state = self.state.lock();
        state.journal_length = 0;
        state.journaled.clear();
        state.checkpoint_page_count = snapshot.next_page_id;
        state.checkpoint_id = meta.checkpoint_id;
        drop(state);
        self.control
            .lock()
            .remove_replaced(self.io.as_ref(), previous_id);
        Ok(())
    }
}

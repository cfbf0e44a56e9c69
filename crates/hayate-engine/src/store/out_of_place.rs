//! The out-of-place (log-structured) page store.
//!
//! The data file `data.hyt` is a sequence of segments of `segment_pages` slots; slot `s` lives
//! at byte `s * page_size`. Every page write goes to the next free slot of the head segment, so
//! the device sees large sequential writes and never an overwrite of a live page.
//!
//! Invariants (checked by `check`):
//! - `mapping[page]` is the slot of the page's latest written copy, and `slot_owner[slot]` is
//!   that page; no slot is mapped twice.
//! - A segment is free only if no slot in it is referenced by the live mapping (`live`), by the
//!   last durable checkpoint (`durable`), by a checkpoint in progress (`pending`), and no write
//!   into it is in flight (`in_flight`). So the images a recovery would read are never
//!   overwritten.
//!
//! Cleaning: victims are chosen greedily (fewest live pages) or by Sprite LFS's cost-benefit
//! ratio `(1 - u) * age / (1 + u)`; their live pages are rewritten at the head. A cleaned segment
//! becomes free after the next checkpoint no longer references it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::control::{CheckpointImage, ControlFile, ControlRecord, WritePolicy};
use super::page_ids::PageIdAllocator;
use super::{CheckpointMeta, PageStore, StoreSnapshot, StoreStats};
use crate::error::{Error, Location, Result};
use crate::io::{AlignedBuf, Io, IoFile, OpenOptions, ReadRequest, WriteRequest};
use crate::page::{self, PageId, PAGE_ID_NONE};

pub const DATA_FILE: &str = "data.hyt";
const NO_SLOT: u64 = u64::MAX;
/// Bounds the time one `clean` call spends.
const CLEAN_PASSES_PER_CALL_MAX: usize = 16;

/// How the cleaner picks the segments to clean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VictimPolicy {
    /// Fewest live pages first.
    Greedy,
    /// Highest `(1 - u) * age / (1 + u)` first (Sprite LFS): old, emptier segments.
    CostBenefit,
}

/// Cleaner tunables, in the spirit of NILFS2's cleanerd.
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// How victims are chosen. Default `VictimPolicy::CostBenefit`.
    pub victim_policy: VictimPolicy,
    /// Segments written more recently than this are not cleaned (their pages may die soon).
    pub protection_period: Duration,
    /// Victim segments cleaned per pass (at least 1). Default 4. A pass runs once per
    /// maintenance round (`DatabaseConfig::maintenance_interval`).
    pub segments_per_pass: usize,
    /// Cleaning starts when fewer segments than this are free...
    pub free_segments_low: u64,
    /// ...and continues until this many are free (after the next checkpoint).
    pub free_segments_high: u64,
    /// Segments fuller than this are never victims (cleaning them frees almost nothing).
    pub victim_utilization_max: f64,
    /// The cleaner leaves the file alone until it is this many times the live data: below it,
    /// growing is cheaper than relocating pages out of nearly full segments.
    pub space_amplification_target: f64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            victim_policy: VictimPolicy::CostBenefit,
            protection_period: Duration::from_millis(200),
            segments_per_pass: 4,
            free_segments_low: 4,
            free_segments_high: 8,
            victim_utilization_max: 0.8,
            space_amplification_target: 2.0,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Segment {
    live: u32,
    durable: u32,
    pending: u32,
    in_flight: u32,
    cleaning: bool,
    free: bool,
    written_at_ms: u64,
}

impl Segment {
    fn reclaimable(&self) -> bool {
        !self.free
            && !self.cleaning
            && self.live + self.durable + self.pending + self.in_flight == 0
    }
}

struct State {
    mapping: Vec<u64>,
    slot_owner: Vec<PageId>,
    segments: Vec<Segment>,
    free_segments: VecDeque<u64>,
    head_segment: u64,
    head_next_slot: u64,
    ids: PageIdAllocator,
    checkpoint_in_progress: bool,
    relocated_since_checkpoint: u64,
}

struct Snapshot {
    mapping: Vec<u64>,
    original: Vec<u64>,
    next_page_id: PageId,
    free_page_ids: Vec<PageId>,
}

#[derive(Default)]
struct Counters {
    pages_read: AtomicU64,
    pages_written: AtomicU64,
    pages_relocated: AtomicU64,
    cleaner_passes: AtomicU64,
    segments_cleaned: AtomicU64,
}

pub struct OutOfPlaceStore {
    io: Arc<dyn Io>,
    file: Arc<dyn IoFile>,
    page_size: usize,
    segment_pages: u64,
    cleaner: CleanerConfig,
    state: Mutex<State>,
    control: Mutex<ControlFile>,
    opened: CheckpointMeta,
    counters: Counters,
    started: Instant,
}

impl OutOfPlaceStore {
    /// Creates a new, empty store (with an initial empty checkpoint).
    pub fn create(
        io: Arc<dyn Io>,
        page_size: usize,
        segment_pages: u64,
        cleaner: CleanerConfig,
    ) -> Result<OutOfPlaceStore> {
        page::validate_page_size(page_size)?;
        if !(8..=65536).contains(&segment_pages) {
            return Err(Error::InvalidArgument(
                "segment size must be 8..=65536 pages".into(),
            ));
        }
        let image = CheckpointImage {
            meta: CheckpointMeta {
                checkpoint_id: 1,
                redo_lsn: 0,
                payload: Vec::new(),
            },
            next_page_id: 1,
            free_page_ids: Vec::new(),
            mapping: vec![NO_SLOT],
        };
        let (length, checksum) = image.write(io.as_ref())?;
        let record = ControlRecord {
            page_size: page_size as u32,
            policy: WritePolicy::OutOfPlace,
            sequence: 0,
            checkpoint_id: 1,
            segment_pages,
            checkpoint_length: length,
            checkpoint_checksum: checksum,
        };
        let control = ControlFile::create(io.as_ref(), record)?;
        Self::from_image(io, control, image, cleaner)
    }

    /// Opens an existing store at its last durable checkpoint.
    pub fn open(io: Arc<dyn Io>, control: ControlFile, cleaner: CleanerConfig) -> Result<Self> {
        let image = CheckpointImage::read(io.as_ref(), control.current())?;
        Self::from_image(io, control, image, cleaner)
    }

    fn from_image(
        io: Arc<dyn Io>,
        control: ControlFile,
        image: CheckpointImage,
        cleaner: CleanerConfig,
    ) -> Result<OutOfPlaceStore> {
        let record = control.current().clone();
        let page_size = record.page_size as usize;
        let segment_pages = record.segment_pages;
        let file = io.open(DATA_FILE, OpenOptions::CREATE_DIRECT)?;
        let segment_bytes = segment_pages * page_size as u64;
        let file_segments = file.len()?.div_ceil(segment_bytes);
        let mut state = State {
            mapping: image.mapping.clone(),
            slot_owner: Vec::new(),
            segments: Vec::new(),
            free_segments: VecDeque::new(),
            head_segment: 0,
            head_next_slot: segment_pages,
            ids: PageIdAllocator::new(image.next_page_id, image.free_page_ids.clone()),
            checkpoint_in_progress: false,
            relocated_since_checkpoint: 0,
        };
        let highest_slot = image
            .mapping
            .iter()
            .filter(|&&s| s != NO_SLOT)
            .max()
            .copied();
        let segment_count = file_segments.max(highest_slot.map_or(0, |s| s / segment_pages + 1));
        state.segments = vec![Segment::default(); segment_count as usize];
        state.slot_owner = vec![PAGE_ID_NONE; (segment_count * segment_pages) as usize];
        state.mapping.resize(image.next_page_id as usize, NO_SLOT);
        for (page_id, &slot) in image.mapping.iter().enumerate() {
            if slot == NO_SLOT {
                continue;
            }
            let location = || Location {
                file: DATA_FILE.into(),
                page_id: Some(page_id as u64),
                ..Default::default()
            };
            if state.slot_owner[slot as usize] != PAGE_ID_NONE {
                return Err(Error::corruption(
                    location(),
                    "slot mapped twice in checkpoint",
                ));
            }
            state.slot_owner[slot as usize] = page_id as PageId;
            let segment = &mut state.segments[(slot / segment_pages) as usize];
            segment.live += 1;
            segment.durable += 1;
        }
        for index in 0..segment_count {
            if state.segments[index as usize].reclaimable() {
                state.segments[index as usize].free = true;
                state.free_segments.push_back(index);
            }
        }
        Ok(OutOfPlaceStore {
            io,
            file,
            page_size,
            segment_pages,
            cleaner,
            state: Mutex::new(state),
            control: Mutex::new(control),
            opened: image.meta,
            counters: Counters::default(),
            started: Instant::now(),
        })
    }

    /// True when the file holds more than `space_amplification_target` times the live pages.
    fn file_above_target(&self) -> bool {
        let state = self.state.lock();
        let live_pages = state.segments.iter().map(|s| s.live as u64).sum::<u64>();
        let file_pages = state.segments.len() as u64 * self.segment_pages;
        file_pages as f64 >= live_pages as f64 * self.cleaner.space_amplification_target
    }

    /// (free segments, segments free after the next checkpoint, low and high watermarks). The
    /// watermarks grow with the file: at least 5% and 10% of its segments.
    fn space_levels(&self) -> (u64, u64, u64, u64) {
        let state = self.state.lock();
        let total = state.segments.len() as u64;
        let awaiting = state
            .segments
            .iter()
            .filter(|s| !s.free && s.live == 0 && s.in_flight == 0 && !s.cleaning)
            .count() as u64;
        let low = self.cleaner.free_segments_low.max(total / 20);
        let high = self.cleaner.free_segments_high.max(total / 10).max(low + 1);
        (state.free_segments.len() as u64, awaiting, low, high)
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Hands out `count` slots at the head, opening free or new segments as needed.
    fn allocate_slots(&self, state: &mut State, count: usize) -> Vec<u64> {
        let now_ms = self.now_ms();
        let mut slots = Vec::with_capacity(count);
        while slots.len() < count {
            if state.head_next_slot >= self.segment_pages {
                let segment = match state.free_segments.pop_front() {
                    Some(segment) => segment,
                    None => {
                        state.segments.push(Segment::default());
                        let new_len = state.slot_owner.len() + self.segment_pages as usize;
                        state.slot_owner.resize(new_len, PAGE_ID_NONE);
                        state.segments.len() as u64 - 1
                    }
                };
                state.segments[segment as usize].free = false;
                state.head_segment = segment;
                state.head_next_slot = 0;
            }
            let segment = &mut state.segments[state.head_segment as usize];
            segment.in_flight += 1;
            segment.written_at_ms = now_ms;
            slots.push(state.head_segment * self.segment_pages + state.head_next_slot);
            state.head_next_slot += 1;
        }
        slots
    }

    /// Writes page images to the given slots, coalescing consecutive slots into one request.
    fn write_slots(&self, pages: &[(PageId, &[u8])], slots: &[u64]) -> Result<()> {
        let mut runs: Vec<(u64, AlignedBuf)> = Vec::new();
        let mut index = 0;
        while index < pages.len() {
            let mut end = index + 1;
            while end < pages.len() && slots[end] == slots[end - 1] + 1 && end - index < 256 {
                end += 1;
            }
            let mut run = AlignedBuf::new((end - index) * self.page_size);
            for (position, (_, image)) in pages[index..end].iter().enumerate() {
                run[position * self.page_size..][..self.page_size].copy_from_slice(image);
            }
            runs.push((slots[index] * self.page_size as u64, run));
            index = end;
        }
        let requests: Vec<WriteRequest<'_>> = runs
            .iter()
            .map(|(offset, buf)| WriteRequest {
                offset: *offset,
                buf,
            })
            .collect();
        self.file.write_batch(&requests)
    }

    /// Points `page_id` at `slot` (its newest copy), releasing its previous slot.
    fn remap(&self, state: &mut State, page_id: PageId, slot: u64) {
        let old = state.mapping[page_id as usize];
        if old != NO_SLOT {
            state.slot_owner[old as usize] = PAGE_ID_NONE;
            let segment = (old / self.segment_pages) as usize;
            state.segments[segment].live -= 1;
            self.release_if_reclaimable(state, segment as u64);
        }
        state.mapping[page_id as usize] = slot;
        state.slot_owner[slot as usize] = page_id;
        state.segments[(slot / self.segment_pages) as usize].live += 1;
    }

    fn finish_in_flight(&self, state: &mut State, slot: u64) {
        let segment = slot / self.segment_pages;
        state.segments[segment as usize].in_flight -= 1;
        self.release_if_reclaimable(state, segment);
    }

    fn release_if_reclaimable(&self, state: &mut State, segment: u64) {
        let head_open = segment == state.head_segment && state.head_next_slot < self.segment_pages;
        if !head_open && state.segments[segment as usize].reclaimable() {
            state.segments[segment as usize].free = true;
            state.free_segments.push_back(segment);
        }
    }

    fn slot_of(&self, page_id: PageId) -> u64 {
        let state = self.state.lock();
        state
            .mapping
            .get(page_id as usize)
            .copied()
            .unwrap_or(NO_SLOT)
    }

    fn corruption(&self, page_id: PageId, slot: u64, detail: &str) -> Error {
        let location = Location {
            file: DATA_FILE.into(),
            page_id: Some(page_id),
            offset: Some(slot * self.page_size as u64),
            lsn: None,
        };
        Error::corruption(location, detail)
    }

    /// One cleaner pass: picks victims and moves their live pages to the head.
    pub fn clean_pass(&self) -> Result<u64> {
        let victims = self.pick_victims();
        if victims.is_empty() {
            return Ok(0);
        }
        let result = self.relocate(&victims);
        let mut state = self.state.lock();
        for &segment in &victims {
            state.segments[segment as usize].cleaning = false;
            self.release_if_reclaimable(&mut state, segment);
        }
        drop(state);
        self.counters.cleaner_passes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .segments_cleaned
            .fetch_add(victims.len() as u64, Ordering::Relaxed);
        result.map(|()| victims.len() as u64)
    }

    fn pick_victims(&self) -> Vec<u64> {
        let mut state = self.state.lock();
        let now_ms = self.now_ms();
        let protection_ms = self.cleaner.protection_period.as_millis() as u64;
        let capacity = self.segment_pages as f64;
        let mut candidates: Vec<(f64, u64)> = Vec::new();
        for (index, segment) in state.segments.iter().enumerate() {
            let index = index as u64;
            let utilization = segment.live as f64 / capacity;
            let age_ms = now_ms.saturating_sub(segment.written_at_ms);
            let eligible = !segment.free
                && !segment.cleaning
                && segment.in_flight == 0
                && index != state.head_segment
                && segment.live > 0
                && utilization <= self.cleaner.victim_utilization_max
                && age_ms >= protection_ms;
            if !eligible {
                continue;
            }
            let score = match self.cleaner.victim_policy {
                VictimPolicy::Greedy => 1.0 - utilization,
                VictimPolicy::CostBenefit => {
                    (1.0 - utilization) * (age_ms as f64 + 1.0) / (1.0 + utilization)
                }
            };
            candidates.push((score, index));
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        candidates.truncate(self.cleaner.segments_per_pass.max(1));
        let victims: Vec<u64> = candidates.into_iter().map(|(_, index)| index).collect();
        for &segment in &victims {
            state.segments[segment as usize].cleaning = true;
        }
        victims
    }

    fn relocate(&self, victims: &[u64]) -> Result<()> {
        for &segment in victims {
            let (page_ids, old_slots): (Vec<PageId>, Vec<u64>) = {
                let state = self.state.lock();
                let first = segment * self.segment_pages;
                (first..first + self.segment_pages)
                    .filter(|&slot| state.slot_owner[slot as usize] != PAGE_ID_NONE)
                    .map(|slot| (state.slot_owner[slot as usize], slot))
                    .unzip()
            };
            if page_ids.is_empty() {
                continue;
            }
            let mut images = AlignedBuf::new(page_ids.len() * self.page_size);
            {
                let mut requests: Vec<ReadRequest<'_>> = images
                    .chunks_mut(self.page_size)
                    .zip(&old_slots)
                    .map(|(buf, slot)| ReadRequest {
                        offset: slot * self.page_size as u64,
                        buf,
                    })
                    .collect();
                self.file.read_batch(&mut requests)?;
            }
            for (position, (&page_id, &slot)) in page_ids.iter().zip(&old_slots).enumerate() {
                let image = &images[position * self.page_size..][..self.page_size];
                page::verify(image, page_id, DATA_FILE, slot * self.page_size as u64)?;
            }
            self.counters
                .pages_read
                .fetch_add(page_ids.len() as u64, Ordering::Relaxed);
            let pages: Vec<(PageId, &[u8])> = page_ids
                .iter()
                .zip(images.chunks(self.page_size))
                .map(|(&page_id, image)| (page_id, image))
                .collect();
            let new_slots = self.allocate_slots(&mut self.state.lock(), pages.len());
            let written = self.write_slots(&pages, &new_slots);
            let mut state = self.state.lock();
            for ((&page_id, &old_slot), &new_slot) in
                page_ids.iter().zip(&old_slots).zip(&new_slots)
            {
                // A newer copy written meanwhile wins; the relocated one is then garbage. So
                // does a checkpoint in progress: it remaps a page it writes only if the mapping
                // is still the one it captured, and a relocated copy holds the older image.
                if written.is_ok()
                    && !state.checkpoint_in_progress
                    && state.mapping[page_id as usize] == old_slot
                {
                    self.remap(&mut state, page_id, new_slot);
                    state.relocated_since_checkpoint += 1;
                    self.counters
                        .pages_relocated
                        .fetch_add(1, Ordering::Relaxed);
                }
                self.finish_in_flight(&mut state, new_slot);
            }
            written?;
        }
        Ok(())
    }
}

impl PageStore for OutOfPlaceStore {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn read_page(&self, page_id: PageId, buf: &mut [u8]) -> Result<()> {
        // The slot is looked up under the lock but read without it; if the cleaner moves the
        // page meanwhile, its old segment may be reused and overwritten, so the read counts only
        // if the mapping still points at the slot afterwards.
        for _ in 0..64 {
            let slot = self.slot_of(page_id);
            if slot == NO_SLOT {
                return Err(self.corruption(page_id, 0, "page has no stored copy"));
            }
            let offset = slot * self.page_size as u64;
            self.file.read_at(buf, offset)?;
            self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
            if self.slot_of(page_id) == slot {
                return page::verify(buf, page_id, DATA_FILE, offset);
            }
        }
        Err(self.corruption(page_id, 0, "page kept moving while being read"))
    }

    fn read_pages(&self, pages: &mut [(PageId, &mut [u8])]) -> Result<()> {
        let slots: Vec<u64> = pages
            .iter()
            .map(|(page_id, _)| self.slot_of(*page_id))
            .collect();
        if let Some(index) = slots.iter().position(|&slot| slot == NO_SLOT) {
            return Err(self.corruption(pages[index].0, 0, "page has no stored copy"));
        }
        let mut requests: Vec<ReadRequest<'_>> = pages
            .iter_mut()
            .zip(&slots)
            .map(|((_, buf), slot)| ReadRequest {
                offset: slot * self.page_size as u64,
                buf,
            })
            .collect();
        self.file.read_batch(&mut requests)?;
        drop(requests);
        self.counters
            .pages_read
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        for ((page_id, buf), &slot) in pages.iter_mut().zip(&slots) {
            if self.slot_of(*page_id) == slot {
                page::verify(buf, *page_id, DATA_FILE, slot * self.page_size as u64)?;
            } else {
                // Moved by the cleaner while in flight: read the new copy (see `read_page`).
                self.read_page(*page_id, buf)?;
            }
        }
        Ok(())
    }

    fn write_pages(&self, pages: &[(PageId, &[u8])]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let slots = self.allocate_slots(&mut self.state.lock(), pages.len());
        let written = self.write_slots(pages, &slots);
        let mut state = self.state.lock();
        for ((page_id, _), &slot) in pages.iter().zip(&slots) {
            if written.is_ok() {
                self.remap(&mut state, *page_id, slot);
            }
            self.finish_in_flight(&mut state, slot);
        }
        written?;
        self.counters
            .pages_written
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn allocate_page_id(&self) -> Result<PageId> {
        let mut state = self.state.lock();
        let (page_id, fresh) = state.ids.allocate();
        if fresh {
            state.mapping.push(NO_SLOT);
        }
        debug_assert_eq!(state.mapping.len() as u64, state.ids.next());
        Ok(page_id)
    }

    fn free_page_id(&self, page_id: PageId) {
        let mut state = self.state.lock();
        assert!(
            page_id != PAGE_ID_NONE && page_id < state.ids.next(),
            "bad free {page_id}"
        );
        let slot = state.mapping[page_id as usize];
        if slot != NO_SLOT {
            state.slot_owner[slot as usize] = PAGE_ID_NONE;
            state.mapping[page_id as usize] = NO_SLOT;
            let segment = (slot / self.segment_pages) as usize;
            state.segments[segment].live -= 1;
            self.release_if_reclaimable(&mut state, segment as u64);
        }
        state.ids.free(page_id);
    }

    fn live_page_count(&self) -> u64 {
        self.state.lock().ids.live_count()
    }

    fn begin_checkpoint(&self) -> StoreSnapshot {
        let mut state = self.state.lock();
        assert!(!state.checkpoint_in_progress, "one checkpoint at a time");
        state.checkpoint_in_progress = true;
        let mapping = state.mapping.clone();
        for &slot in &mapping {
            if slot != NO_SLOT {
                state.segments[(slot / self.segment_pages) as usize].pending += 1;
            }
        }
        let snapshot = Snapshot {
            original: mapping.clone(),
            mapping,
            next_page_id: state.ids.next(),
            free_page_ids: state.ids.free_ids().to_vec(),
        };
        state.relocated_since_checkpoint = 0;
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
        let mut snapshot = *snapshot.state.downcast::<Snapshot>().expect("own snapshot");
        let slots = self.allocate_slots(&mut self.state.lock(), pages.len());
        let written = self.write_slots(pages, &slots);
        {
            let mut state = self.state.lock();
            for ((page_id, _), &slot) in pages.iter().zip(&slots) {
                let index = *page_id as usize;
                if written.is_ok() {
                    let previous = snapshot.mapping[index];
                    if previous != NO_SLOT {
                        state.segments[(previous / self.segment_pages) as usize].pending -= 1;
                    }
                    snapshot.mapping[index] = slot;
                    state.segments[(slot / self.segment_pages) as usize].pending += 1;
                    if state.mapping.get(index) == Some(&snapshot.original[index]) {
                        self.remap(&mut state, *page_id, slot);
                    }
                }
                self.finish_in_flight(&mut state, slot);
            }
        }
        written?;
        self.counters
            .pages_written
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        self.file.sync_data()?;
        let image = CheckpointImage {
            meta: meta.clone(),
            next_page_id: snapshot.next_page_id,
            free_page_ids: snapshot.free_page_ids,
            mapping: snapshot.mapping,
        };
        let previous_id = self.control.lock().publish(self.io.as_ref(), &image)?;
        let mut state = self.state.lock();
        for index in 0..state.segments.len() {
            let segment = &mut state.segments[index];
            segment.durable = segment.pending;
            segment.pending = 0;
            self.release_if_reclaimable(&mut state, index as u64);
        }
        state.checkpoint_in_progress = false;
        drop(state);
        self.control
            .lock()
            .remove_replaced(self.io.as_ref(), previous_id);
        Ok(())
    }

    fn opened_checkpoint(&self) -> Option<CheckpointMeta> {
        Some(self.opened.clone())
    }

    /// Cleans while free segments, counting those a checkpoint would free, are below the high
    /// watermark; starts only below the low watermark (or when forced).
    fn clean(&self, force: bool) -> Result<u64> {
        let (free, awaiting, low, high) = self.space_levels();
        if !force && (free >= low || !self.file_above_target()) {
            return Ok(0);
        }
        let mut cleaned = 0;
        let mut reclaimable = free + awaiting;
        for _ in 0..CLEAN_PASSES_PER_CALL_MAX {
            let pass = self.clean_pass()?;
            cleaned += pass;
            let (free, awaiting, _, _) = self.space_levels();
            let now_reclaimable = free + awaiting;
            if pass == 0 || now_reclaimable >= high || now_reclaimable <= reclaimable {
                break;
            }
            reclaimable = now_reclaimable;
        }
        Ok(cleaned)
    }

    /// A checkpoint pays off once enough cleaned segments wait for it, or when space is short.
    fn wants_checkpoint(&self) -> bool {
        let (free, awaiting, low, high) = self.space_levels();
        awaiting > 0 && (awaiting >= high - low || free < low)
    }

    fn stats(&self) -> StoreStats {
        let state = self.state.lock();
        let written = self.counters.pages_written.load(Ordering::Relaxed);
        let relocated = self.counters.pages_relocated.load(Ordering::Relaxed);
        StoreStats {
            pages_read: self.counters.pages_read.load(Ordering::Relaxed),
            pages_written: written,
            pages_written_extra: relocated,
            write_amplification: if written == 0 {
                1.0
            } else {
                (written + relocated) as f64 / written as f64
            },
            file_size_bytes: state.segments.len() as u64
                * self.segment_pages
                * self.page_size as u64,
            live_pages: state.ids.live_count(),
            live_bytes: state.ids.live_count() * self.page_size as u64,
            free_segments: state.free_segments.len() as u64,
            total_segments: state.segments.len() as u64,
            cleaner_passes: self.counters.cleaner_passes.load(Ordering::Relaxed),
            segments_cleaned: self.counters.segments_cleaned.load(Ordering::Relaxed),
        }
    }

    fn check(&self) -> Result<()> {
        let state = self.state.lock();
        let mut live = vec![0u32; state.segments.len()];
        for (page_id, &slot) in state.mapping.iter().enumerate() {
            if slot == NO_SLOT {
                continue;
            }
            if state.slot_owner.get(slot as usize) != Some(&(page_id as PageId)) {
                return Err(self.corruption(
                    page_id as PageId,
                    slot,
                    "mapping and slot owner disagree",
                ));
            }
            live[(slot / self.segment_pages) as usize] += 1;
        }
        for (index, segment) in state.segments.iter().enumerate() {
            if segment.live != live[index] {
                return Err(Error::corruption(
                    Location {
                        file: DATA_FILE.into(),
                        ..Default::default()
                    },
                    format!(
                        "segment {index} counts {} live pages, mapping has {}",
                        segment.live, live[index]
                    ),
                ));
            }
            if segment.free && (segment.live + segment.durable + segment.pending > 0) {
                return Err(Error::corruption(
                    Location {
                        file: DATA_FILE.into(),
                        ..Default::default()
                    },
                    format!("segment {index} is free but referenced"),
                ));
            }
        }
        state.ids.check().map_err(|detail| {
            Error::corruption(
                Location {
                    file: DATA_FILE.into(),
                    ..Default::default()
                },
                detail,
            )
        })?;
        for &page_id in state.ids.free_ids() {
            if state.mapping.get(page_id as usize).copied() != Some(NO_SLOT) {
                return Err(self.corruption(page_id, 0, "free page still has a stored copy"));
            }
        }
        Ok(())
    }
}

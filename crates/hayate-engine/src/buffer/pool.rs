//! The buffer pool proper: page table, clock eviction, guards, write-back.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::frame::Frame;
use super::gate::{Gate, GateExclusive, GateShared};
use super::latch::{ExclusiveHold, LatchConfig, SharedHold};
use super::table::{Locked, PageTable};
use crate::error::{Error, Result};
use crate::io::AlignedBuf;
use crate::page::{self, PageHeaderAccessor, PageHeaderBuilder, PageId, PageKind, PAGE_ID_NONE};
use crate::store::PageStore;

/// The most dirty bytes the background writer lets stand (`BufferPool::dirty_target`).
const DIRTY_BYTES_TARGET_MAX: usize = 256 << 20;

/// How a `BufferPool` is sized and when it writes back.
#[derive(Debug, Clone)]
pub struct BufferPoolConfig {
    /// Page frames, allocated at start-up (at least 8). Default 4096.
    pub frame_count: usize,
    /// Keep inner B+tree pages resident (skip them in the first two clock rounds).
    pub keep_inner_resident: bool,
    /// The background writer starts when this fraction of frames is dirty (or 256 MiB of
    /// them, if less).
    pub dirty_fraction_target: f64,
    /// Frames written per background batch.
    pub write_batch_pages: usize,
    /// How threads wait for page latches.
    pub latch: LatchConfig,
}

impl Default for BufferPoolConfig {
    fn default() -> Self {
        BufferPoolConfig {
            frame_count: 4096,
            keep_inner_resident: true,
            dirty_fraction_target: 0.1,
            write_batch_pages: 64,
            latch: LatchConfig::default(),
        }
    }
}

/// Counters since the pool was created, and its current size.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BufferStats {
    /// Page accesses that found the page resident.
    pub hits: u64,
    /// Page loads from the store (single and batched).
    pub misses: u64,
    /// Pages read from the store.
    pub pages_read: u64,
    /// Pages written back to the store by eviction, the background writer and `flush_all`
    /// (not the images a checkpoint writes).
    pub pages_written: u64,
    /// Misses that had to write a dirty victim before reading.
    pub eviction_writes: u64,
    /// Pages written back by the background writer.
    pub background_writes: u64,
    /// Frames in the pool.
    pub frame_count: u64,
    /// Frames dirty at the time of `stats`.
    pub dirty_frames: u64,
}

impl BufferStats {
    /// `hits / (hits + misses)`; 1 before the first access.
    pub fn hit_ratio(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            1.0
        } else {
            self.hits as f64 / total as f64
        }
    }
}

/// A counter bumped by every page access: one cache line per stripe, a thread's stripe chosen
/// once, so threads do not take the line from each other.
#[derive(Default)]
struct StripedCounter {
    stripes: [PaddedCounter; 16],
}

#[derive(Default)]
#[repr(align(128))]
struct PaddedCounter(AtomicU64);

thread_local! {
    static STRIPE: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

impl StripedCounter {
    #[inline]
    fn add(&self, amount: u64) {
        let stripe = STRIPE.with(|stripe| *stripe) % self.stripes.len();
        self.stripes[stripe].0.fetch_add(amount, Ordering::Relaxed);
    }

    fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|stripe| stripe.0.load(Ordering::Relaxed))
            .sum()
    }
}

#[derive(Default)]
struct Counters {
    hits: StripedCounter,
    misses: AtomicU64,
    pages_read: AtomicU64,
    pages_written: AtomicU64,
    eviction_writes: AtomicU64,
    background_writes: AtomicU64,
}

/// Why a frame is claimed for a page.
/// Turns a fiber lets other tasks take while every frame is pinned, before the pool counts as
/// exhausted (an error, as off a fiber).
const EXHAUSTED_TURNS_MAX: u32 = 100_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// A read by a thread that holds the latch of a page pointing at it (the page is live).
    Load,
    /// A read asked for by a task that holds no latch (the page may have been freed).
    SpeculativeLoad,
    /// A page id just allocated.
    Allocate,
}

enum Victim {
    Clean(usize),
    Dirty(usize),
    /// Every unpinned frame is under write-back; one becomes free when that write ends.
    Busy,
}

/// Page frames over a page store: lookup, latching, eviction and write-back (see `buffer`).
pub struct BufferPool {
    pub(super) config: BufferPoolConfig,
    pub(super) store: Arc<dyn PageStore>,
    page_size: usize,
    /// Backing memory of all frames; accessed only through `frame_pointer`.
    arena: AlignedBuf,
    pub(super) frames: Box<[Frame]>,
    /// Page id -> frame; read without a lock, changed under `table_lock`.
    table: PageTable,
    table_lock: Mutex<Locked>,
    gate: Gate,
    /// Pages freed while a write-back of their frame was in flight: (frame, page id). Their
    /// ids go back to the store only when that write has landed, or the stale write could
    /// overwrite the next page given the same id. Changed together with `io_busy` clears.
    deferred_frees: Mutex<Vec<(usize, PageId)>>,
    pub(super) dirty_count: AtomicUsize,
    /// Frames whose images a checkpoint took and has not written yet; they stay `io_busy`
    /// (resident, not written back, not freed) until `finish_checkpoint_pages`.
    checkpoint_frames: Mutex<Vec<usize>>,
    counters: Counters,
    pub(super) writer: super::writer::WriterHandle,
}

// SAFETY: the arena's bytes are only accessed through guards, which hold the frame latch
// (shared for reads, exclusive for writes), or by write-back copies under a shared latch.
unsafe impl Sync for BufferPool {}
// SAFETY: see above; AlignedBuf is Send.
unsafe impl Send for BufferPool {}

impl BufferPool {
    /// Allocates every frame and starts the background writer. `Error::InvalidArgument` for
    /// fewer than 8 frames or more than the page table supports.
    pub fn new(store: Arc<dyn PageStore>, config: BufferPoolConfig) -> Result<Arc<BufferPool>> {
        if config.frame_count < 8 {
            return Err(Error::InvalidArgument(
                "buffer pool needs at least 8 frames".into(),
            ));
        }
        if config.frame_count > super::table::FRAME_COUNT_MAX {
            return Err(Error::InvalidArgument(format!(
                "buffer pool of {} frames; at most {} are supported",
                config.frame_count,
                super::table::FRAME_COUNT_MAX
            )));
        }
        let page_size = store.page_size();
        let frames: Vec<Frame> = (0..config.frame_count).map(|_| Frame::new()).collect();
        let pool = Arc::new(BufferPool {
            arena: AlignedBuf::new(page_size * config.frame_count),
            page_size,
            store,
            frames: frames.into_boxed_slice(),
            table: PageTable::new(config.frame_count),
            table_lock: Mutex::new(Locked {
                clock_hand: 0,
                freed: Default::default(),
            }),
            gate: Gate::default(),
            deferred_frees: Mutex::new(Vec::new()),
            dirty_count: AtomicUsize::new(0),
            checkpoint_frames: Mutex::new(Vec::new()),
            counters: Counters::default(),
            writer: super::writer::WriterHandle::default(),
            config,
        });
        let weak = Arc::downgrade(&pool);
        pool.writer
            .start(move || weak.upgrade().map(|pool| pool.write_back_to_target()));
        Ok(pool)
    }

    /// Bytes per page (and per frame): the store's page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Bytes of the pool's frames (the buffer's size).
    pub fn capacity_bytes(&self) -> u64 {
        self.frames.len() as u64 * self.page_size as u64
    }

    /// The store pages are loaded from and written back to.
    pub fn store(&self) -> &Arc<dyn PageStore> {
        &self.store
    }

    /// Held (shared) by every operation that changes pages, for its whole duration; see
    /// `gate` for why this is not an RwLock.
    pub fn operation(&self) -> OperationGuard<'_> {
        OperationGuard {
            _shared: self.gate.enter(),
        }
    }

    /// Held exclusively by a checkpoint while it captures dirty pages. The holder counts as
    /// holding `operation()` too, so it may change pages itself.
    pub fn quiesce(&self) -> QuiesceGuard<'_> {
        QuiesceGuard {
            _exclusive: self.gate.close(),
        }
    }

    fn frame_pointer(&self, frame_id: usize) -> *mut u8 {
        assert!(frame_id < self.frames.len());
        // SAFETY: frame_id * page_size + page_size <= arena length, checked above.
        unsafe { self.arena.as_ptr().add(frame_id * self.page_size) as *mut u8 }
    }

    /// The bytes of a frame. Callers must hold the frame latch in a mode matching their use.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn frame_bytes(&self, frame_id: usize) -> &mut [u8] {
        // SAFETY: the pointer is valid for page_size bytes; exclusivity is the caller's duty.
        unsafe { std::slice::from_raw_parts_mut(self.frame_pointer(frame_id), self.page_size) }
    }

    /// The page under a shared latch, loaded from the store on a miss (errors are the
    /// store's, or pool exhaustion when every frame is pinned).
    pub fn read(&self, page_id: PageId) -> Result<PageReadGuard<'_>> {
        loop {
            let frame_id = self.pin_page(page_id)?;
            let frame = &self.frames[frame_id];
            let latch = frame.latch.shared(&self.config.latch);
            if self.holds(frame_id, page_id) {
                return Ok(PageReadGuard {
                    pool: self,
                    frame_id,
                    latch: ManuallyDrop::new(latch),
                });
            }
            drop(latch);
            frame.pin_count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The page under an exclusive latch, loaded on a miss like `read`; the guard marks it
    /// dirty when dropped.
    pub fn write(&self, page_id: PageId) -> Result<PageWriteGuard<'_>> {
        loop {
            let frame_id = self.pin_page(page_id)?;
            let frame = &self.frames[frame_id];
            let latch = frame.latch.exclusive(&self.config.latch);
            if self.holds(frame_id, page_id) {
                return Ok(PageWriteGuard {
                    pool: self,
                    frame_id,
                    latch: ManuallyDrop::new(latch),
                });
            }
            drop(latch);
            frame.pin_count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Starts loading the first cache line of a frame's bytes into the cache.
    #[inline]
    fn prefetch(&self, frame_id: usize) {
        page::prefetch(self.frame_pointer(frame_id));
    }

    /// Whether a frame that the caller pinned and latched holds `page_id`, loaded. False if the
    /// frame went to another page before the pin (lock-free lookups can be stale) or its load
    /// failed; the caller unpins and asks again.
    fn holds(&self, frame_id: usize, page_id: PageId) -> bool {
        let frame = &self.frames[frame_id];
        frame.page_id.load(Ordering::Acquire) == page_id && frame.valid.load(Ordering::Acquire)
    }

    /// The page of `stamp` to read optimistically (as `optimistic`), if it is still in the
    /// same frame at the same version: nothing changed it since the stamp was taken.
    pub fn unchanged(&self, stamp: &PageStamp) -> Option<OptimisticPage<'_>> {
        let frame = self.frames.get(stamp.frame_id)?;
        if frame.page_id.load(Ordering::Acquire) != stamp.page_id
            || !frame.valid.load(Ordering::Acquire)
            || !frame.latch.validate(stamp.version)
        {
            return None;
        }
        Some(OptimisticPage {
            pool: self,
            frame_id: stamp.frame_id,
            version: stamp.version,
        })
    }

    /// A resident page to read without pinning or latching it (see `latch` for the protocol),
    /// or why not.
    pub fn optimistic(&self, page_id: PageId) -> Optimistic<'_> {
        let Some(frame_id) = self.table.lookup(page_id) else {
            return Optimistic::NotResident;
        };
        self.prefetch(frame_id);
        let frame = &self.frames[frame_id];
        let Some(version) = frame.latch.optimistic_version() else {
            return Optimistic::Busy;
        };
        if frame.page_id.load(Ordering::Acquire) != page_id {
            return Optimistic::NotResident;
        }
        if !frame.valid.load(Ordering::Acquire) {
            return Optimistic::Busy;
        }
        if !frame.referenced.load(Ordering::Relaxed) {
            frame.referenced.store(true, Ordering::Relaxed);
        }
        self.counters.hits.add(1);
        Optimistic::Page(OptimisticPage {
            pool: self,
            frame_id,
            version,
        })
    }

    /// Allocates a new page of the given kind; the guard holds a fresh header and zeroed body.
    pub fn allocate(&self, kind: PageKind) -> Result<PageWriteGuard<'_>> {
        let page_id = self.store.allocate_page_id()?;
        let (frame_id, latch) = self
            .claim_frame(page_id, Claim::Allocate)?
            .expect("a newly allocated page id is not in the page table");
        // SAFETY: we hold the frame latch exclusively.
        let bytes = unsafe { self.frame_bytes(frame_id) };
        PageHeaderBuilder::new(bytes).init(kind, page_id);
        let frame = &self.frames[frame_id];
        frame
            .inner
            .store(kind == PageKind::BtreeInner, Ordering::Relaxed);
        frame.valid.store(true, Ordering::Release);
        Ok(PageWriteGuard {
            pool: self,
            frame_id,
            latch: ManuallyDrop::new(latch),
        })
    }

    /// Frees a page: its frame becomes empty and its id goes back to the store.
    pub fn free(&self, guard: PageWriteGuard<'_>) {
        let frame_id = guard.frame_id;
        let frame = &self.frames[frame_id];
        let page_id = frame.page_id.load(Ordering::Acquire);
        {
            let mut locked = self.table_lock.lock();
            self.table.remove(&mut locked, page_id);
            locked.freed.insert(page_id);
            frame.page_id.store(PAGE_ID_NONE, Ordering::Release);
            frame.valid.store(false, Ordering::Release);
        }
        if frame.dirty.swap(false, Ordering::AcqRel) {
            self.dirty_count.fetch_sub(1, Ordering::Relaxed);
        }
        let mut guard = ManuallyDrop::new(guard);
        // SAFETY: taken once; the guard is not dropped normally (it would mark the frame dirty).
        unsafe { ManuallyDrop::drop(&mut guard.latch) };
        frame.pin_count.fetch_sub(1, Ordering::AcqRel);
        {
            let mut deferred = self.deferred_frees.lock();
            if frame.io_busy.load(Ordering::Acquire) {
                deferred.push((frame_id, page_id));
                return;
            }
        }
        self.store.free_page_id(page_id);
    }

    /// Ends the write-back of a frame and releases page ids freed meanwhile.
    fn finish_write_back(&self, frame_id: usize) {
        let mut released = Vec::new();
        {
            let mut deferred = self.deferred_frees.lock();
            self.frames[frame_id]
                .io_busy
                .store(false, Ordering::Release);
            deferred.retain(|&(deferred_frame_id, page_id)| {
                let keep = deferred_frame_id != frame_id;
                if !keep {
                    released.push(page_id);
                }
                keep
            });
        }
        for page_id in released {
            self.store.free_page_id(page_id);
        }
    }

    /// Returns the page if it is resident and loaded, without waiting for any I/O: None on a
    /// miss or while another thread loads it. The caller loads it with `load_batch` and retries.
    pub fn try_read(&self, page_id: PageId) -> Result<Option<PageReadGuard<'_>>> {
        Ok(self
            .latch_resident(page_id, |latch| latch.shared(&self.config.latch))
            .map(|(frame_id, latch)| PageReadGuard {
                pool: self,
                frame_id,
                latch: ManuallyDrop::new(latch),
            }))
    }

    /// `try_read` with an exclusive latch: the page if it is resident and loaded, else None.
    pub fn try_write(&self, page_id: PageId) -> Result<Option<PageWriteGuard<'_>>> {
        Ok(self
            .latch_resident(page_id, |latch| latch.exclusive(&self.config.latch))
            .map(|(frame_id, latch)| PageWriteGuard {
                pool: self,
                frame_id,
                latch: ManuallyDrop::new(latch),
            }))
    }

    /// Pins and latches (with `take`) the frame of a resident, loaded page; None otherwise.
    fn latch_resident<'p, H>(
        &'p self,
        page_id: PageId,
        take: impl Fn(&'p super::latch::Latch) -> H,
    ) -> Option<(usize, H)> {
        assert_ne!(page_id, PAGE_ID_NONE, "page id 0 is never a page");
        for _ in 0..2 {
            let frame_id = self.pin_resident(page_id)?;
            let frame = &self.frames[frame_id];
            if !frame.valid.load(Ordering::Acquire) {
                frame.pin_count.fetch_sub(1, Ordering::AcqRel);
                return None;
            }
            let latch = take(&frame.latch);
            if self.holds(frame_id, page_id) {
                self.counters.hits.add(1);
                return Some((frame_id, latch));
            }
            drop(latch);
            frame.pin_count.fetch_sub(1, Ordering::AcqRel);
        }
        None
    }

    /// Loads the pages not yet resident with one batched store read (one io_uring submission
    /// with every read in flight). Pages already resident or being loaded are skipped.
    pub fn load_batch(&self, page_ids: &[PageId]) -> Result<usize> {
        let mut claimed = Vec::with_capacity(page_ids.len());
        let mut seen = std::collections::HashSet::with_capacity(page_ids.len());
        for &page_id in page_ids {
            if !seen.insert(page_id) {
                continue;
            }
            match self.claim_frame(page_id, Claim::SpeculativeLoad) {
                Ok(Some(claim)) => claimed.push((page_id, claim)),
                Ok(None) => {} // resident or being loaded by someone else
                Err(error) => {
                    self.abandon_claims(claimed);
                    return Err(error);
                }
            }
        }
        if claimed.is_empty() {
            return Ok(0);
        }
        let result = {
            let _io = crate::fiber::allow_io();
            let mut reads: Vec<(PageId, &mut [u8])> = claimed
                .iter()
                // SAFETY: every claimed frame is latched exclusively by us and distinct.
                .map(|(page_id, (frame_id, _))| (*page_id, unsafe { self.frame_bytes(*frame_id) }))
                .collect();
            self.store.read_pages(&mut reads)
        };
        if let Err(error) = result {
            self.abandon_claims(claimed);
            return Err(error);
        }
        let loaded = claimed.len();
        self.counters
            .misses
            .fetch_add(loaded as u64, Ordering::Relaxed);
        self.counters
            .pages_read
            .fetch_add(loaded as u64, Ordering::Relaxed);
        for (_, (frame_id, latch)) in claimed {
            self.finish_load(frame_id, latch);
            self.frames[frame_id]
                .pin_count
                .fetch_sub(1, Ordering::AcqRel);
        }
        Ok(loaded)
    }

    /// Loads pages for a task that released its latches to wait for the first (a fiber's
    /// point lookup or scan step, the rest read ahead; see `BTree::descend_shared`), all in
    /// flight at once. If none needed loading (another task is loading the first), lets the
    /// other tasks run once instead, so the loader can finish.
    pub(crate) fn load_released(&self, page_ids: &[PageId]) -> Result<()> {
        if self.load_batch(page_ids)? == 0 {
            crate::fiber::pause();
        }
        Ok(())
    }

    /// Gives back frames claimed for loads that will not happen.
    fn abandon_claims(&self, claimed: Vec<(PageId, (usize, ExclusiveHold<'_>))>) {
        for (page_id, (frame_id, latch)) in claimed {
            self.abandon_claim(page_id, frame_id, latch);
        }
    }

    /// Pins the frame that the page table names for `page_id`: lock-free first, then under
    /// the table mutex if that missed. The frame may have gone to another page since (callers
    /// check `holds` once latched); None if the page is not in the table.
    fn pin_resident(&self, page_id: PageId) -> Option<usize> {
        if let Some(frame_id) = self.table.lookup(page_id) {
            // The page's first bytes are read next; fetch them while the frame is pinned.
            self.prefetch(frame_id);
            let frame = &self.frames[frame_id];
            frame.pin_count.fetch_add(1, Ordering::AcqRel);
            if frame.page_id.load(Ordering::Acquire) == page_id {
                if !frame.referenced.load(Ordering::Relaxed) {
                    frame.referenced.store(true, Ordering::Relaxed);
                }
                return Some(frame_id);
            }
            frame.pin_count.fetch_sub(1, Ordering::AcqRel);
        }
        let _locked = self.table_lock.lock();
        let frame_id = self.table.lookup(page_id)?;
        let frame = &self.frames[frame_id];
        frame.pin_count.fetch_add(1, Ordering::AcqRel);
        frame.referenced.store(true, Ordering::Relaxed);
        Some(frame_id)
    }

    /// Finds or loads a page and returns its pinned frame (callers latch it and check `holds`).
    fn pin_page(&self, page_id: PageId) -> Result<usize> {
        assert_ne!(page_id, PAGE_ID_NONE, "page id 0 is never a page");
        match self.pin_resident(page_id) {
            Some(frame_id) => {
                self.counters.hits.add(1);
                Ok(frame_id)
            }
            None => self.load_page(page_id),
        }
    }

    /// Reads a page from the store into a claimed frame.
    fn load_page(&self, page_id: PageId) -> Result<usize> {
        let Some((frame_id, latch)) = self.claim_frame(page_id, Claim::Load)? else {
            return self.pin_page(page_id);
        };
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        // SAFETY: we hold the frame latch exclusively.
        let bytes = unsafe { self.frame_bytes(frame_id) };
        let read_io = crate::phase::enter(crate::phase::Phase::ReadIo);
        let io = crate::fiber::allow_io();
        let read = self.store.read_page(page_id, bytes);
        drop(io);
        drop(read_io);
        match read {
            Ok(()) => {
                self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
                self.finish_load(frame_id, latch);
                Ok(frame_id)
            }
            Err(error) => {
                self.abandon_claim(page_id, frame_id, latch);
                Err(error)
            }
        }
    }

    /// Marks a claimed frame whose bytes were read and verified as loaded, and releases its
    /// latch; the pin stays with the caller.
    fn finish_load(&self, frame_id: usize, latch: ExclusiveHold<'_>) {
        let frame = &self.frames[frame_id];
        // SAFETY: we hold the frame latch exclusively.
        let kind = PageHeaderAccessor::new(unsafe { self.frame_bytes(frame_id) }).kind();
        frame
            .inner
            .store(kind == Some(PageKind::BtreeInner), Ordering::Relaxed);
        frame.valid.store(true, Ordering::Release);
        drop(latch);
    }

    /// Unmaps a claimed frame whose load failed or will not happen, and unpins it.
    fn abandon_claim(&self, page_id: PageId, frame_id: usize, latch: ExclusiveHold<'_>) {
        let frame = &self.frames[frame_id];
        let mut locked = self.table_lock.lock();
        self.table.remove(&mut locked, page_id);
        frame.page_id.store(PAGE_ID_NONE, Ordering::Release);
        frame.valid.store(false, Ordering::Release);
        drop(locked);
        drop(latch);
        frame.pin_count.fetch_sub(1, Ordering::AcqRel);
    }

    /// Maps `page_id` to a free or evicted frame, pinned and exclusively latched, not yet valid.
    /// Returns None if another thread mapped the page meanwhile (caller retries). An exhausted
    /// pool is an error, never a retry, so a caller that pins every frame cannot loop forever.
    fn claim_frame(
        &self,
        page_id: PageId,
        claim: Claim,
    ) -> Result<Option<(usize, ExclusiveHold<'_>)>> {
        let mut exhausted_turns = 0u32;
        loop {
            let mut locked = self.table_lock.lock();
            if self.table.lookup(page_id).is_some() {
                return Ok(None);
            }
            match claim {
                Claim::SpeculativeLoad if locked.freed.contains(&page_id) => return Ok(None),
                Claim::Allocate => {
                    locked.freed.remove(&page_id);
                }
                _ => {}
            }
            let victim = match self.find_victim(&mut locked) {
                // Every frame is pinned; on a fiber, other tasks of this thread may hold the
                // pins: let them run (for at most a lock timeout's worth of turns).
                Err(_) if crate::fiber::on_fiber() && exhausted_turns < EXHAUSTED_TURNS_MAX => {
                    exhausted_turns += 1;
                    drop(locked);
                    crate::fiber::pause();
                    continue;
                }
                victim => victim?,
            };
            match victim {
                Victim::Busy => {
                    drop(locked);
                    if !crate::fiber::pause() {
                        std::thread::yield_now();
                    }
                }
                Victim::Clean(frame_id) => {
                    let frame = &self.frames[frame_id];
                    // Lock-free readers pin without the mutex: the victim is ours only if its
                    // pin count goes from 0 to 1.
                    if frame
                        .pin_count
                        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                        .is_err()
                    {
                        continue;
                    }
                    // Write-back copies latch unpinned frames shared for a moment; if this
                    // victim is being copied, look for another one.
                    let Some(latch) = frame.latch.try_exclusive() else {
                        frame.pin_count.fetch_sub(1, Ordering::AcqRel);
                        drop(locked);
                        if !crate::fiber::pause() {
                            std::thread::yield_now();
                        }
                        continue;
                    };
                    // A writer may have pinned, changed and released it since `find_victim`
                    // looked; the exclusive latch makes its marks visible.
                    if frame.dirty.load(Ordering::Acquire) || frame.io_busy.load(Ordering::Acquire)
                    {
                        drop(latch);
                        frame.pin_count.fetch_sub(1, Ordering::AcqRel);
                        continue;
                    }
                    let old_page_id = frame.page_id.load(Ordering::Acquire);
                    if old_page_id != PAGE_ID_NONE {
                        self.table.remove(&mut locked, old_page_id);
                    }
                    self.table.insert(&mut locked, page_id, frame_id);
                    frame.page_id.store(page_id, Ordering::Release);
                    frame.valid.store(false, Ordering::Release);
                    frame.referenced.store(true, Ordering::Relaxed);
                    return Ok(Some((frame_id, latch)));
                }
                Victim::Dirty(frame_id) => {
                    let frame = &self.frames[frame_id];
                    frame.pin_count.fetch_add(1, Ordering::AcqRel);
                    // Write the dirty frames just ahead of the clock hand along with the
                    // victim, in one store write: the next claims then find clean frames
                    // instead of each writing one page and waiting (a pool whose every frame
                    // is dirty, as in an all-in-memory update load, otherwise pays one
                    // synchronous write per allocation).
                    let batch = self.dirty_ahead(&locked, frame_id);
                    drop(locked);
                    self.counters
                        .eviction_writes
                        .fetch_add(1, Ordering::Relaxed);
                    // The gate keeps a checkpoint from missing this write; try_read because
                    // the caller may hold latches of pages a latch holder of this frame wants.
                    let operation = OperationGuard {
                        _shared: self.gate.enter_holding_latches(),
                    };
                    let result = self.write_back(&batch, false);
                    drop(operation);
                    frame.pin_count.fetch_sub(1, Ordering::AcqRel);
                    result?;
                }
            }
        }
    }

    /// Clock sweep. Skips pinned frames, frames under write-back, recently referenced frames
    /// (clearing the bit) and, for the first two rounds, inner B+tree pages.
    /// The victim and up to `write_batch_pages - 1` more dirty frames that are neither pinned
    /// nor being written, from the clock hand on (a window of four batches).
    fn dirty_ahead(&self, table: &Locked, victim: usize) -> Vec<usize> {
        let frame_count = self.frames.len();
        let batch_pages = self.config.write_batch_pages.max(1);
        let mut batch = Vec::with_capacity(batch_pages);
        batch.push(victim);
        for step in 0..(batch_pages * 4).min(frame_count) {
            if batch.len() >= batch_pages {
                break;
            }
            let frame_id = (table.clock_hand + step) % frame_count;
            let frame = &self.frames[frame_id];
            if frame_id != victim
                && frame.dirty.load(Ordering::Acquire)
                && frame.pin_count.load(Ordering::Acquire) == 0
                && !frame.io_busy.load(Ordering::Acquire)
            {
                batch.push(frame_id);
            }
        }
        batch
    }

    fn find_victim(&self, table: &mut Locked) -> Result<Victim> {
        let frame_count = self.frames.len();
        let mut busy = false;
        for step in 0..frame_count * 4 {
            let frame_id = table.clock_hand;
            table.clock_hand = (table.clock_hand + 1) % frame_count;
            let frame = &self.frames[frame_id];
            if frame.pin_count.load(Ordering::Acquire) > 0 {
                continue;
            }
            if frame.io_busy.load(Ordering::Acquire) {
                busy = true;
                continue;
            }
            if frame.page_id.load(Ordering::Acquire) == PAGE_ID_NONE {
                return Ok(Victim::Clean(frame_id));
            }
            if frame.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            let early = step < frame_count * 2;
            if early && self.config.keep_inner_resident && frame.inner.load(Ordering::Relaxed) {
                continue;
            }
            if frame.dirty.load(Ordering::Acquire) {
                if self.dirty_count.load(Ordering::Relaxed) * 2 > frame_count || !early {
                    return Ok(Victim::Dirty(frame_id));
                }
                self.writer.wake();
                continue;
            }
            return Ok(Victim::Clean(frame_id));
        }
        if busy {
            return Ok(Victim::Busy);
        }
        Err(Error::InvalidArgument(format!(
            "buffer pool exhausted: all {frame_count} frames are pinned"
        )))
    }

    /// Copies dirty frames under shared latches and writes them to the store in one batch.
    /// Frames whose write-back is already in flight are skipped.
    /// Callers hold `operation()`. With `wait_for_latch` false, latched frames are skipped.
    ///
    /// A frame is marked `io_busy` only while its shared latch is held, and the batch copied
    /// so far is written before waiting for another latch, so this call never waits for a
    /// latch while holding claims a latch holder might be waiting on.
    pub(super) fn write_back(&self, frame_ids: &[usize], wait_for_latch: bool) -> Result<usize> {
        let mut copies: Vec<(PageId, usize, AlignedBuf)> = Vec::with_capacity(frame_ids.len());
        let mut written = 0;
        for &frame_id in frame_ids {
            let frame = &self.frames[frame_id];
            let latch = match frame.latch.try_shared() {
                Some(latch) => latch,
                None if wait_for_latch => {
                    written += self.write_copies(std::mem::take(&mut copies))?;
                    frame.latch.shared(&self.config.latch)
                }
                None => continue,
            };
            if frame.io_busy.swap(true, Ordering::AcqRel) {
                continue;
            }
            let page_id = frame.page_id.load(Ordering::Acquire);
            if !frame.valid.load(Ordering::Acquire) || !frame.dirty.swap(false, Ordering::AcqRel) {
                drop(latch);
                self.finish_write_back(frame_id);
                continue;
            }
            self.dirty_count.fetch_sub(1, Ordering::Relaxed);
            let mut copy = AlignedBuf::new(self.page_size);
            // SAFETY: shared latch held; we only read.
            copy.copy_from_slice(unsafe { self.frame_bytes(frame_id) });
            drop(latch);
            seal_for_write(&mut copy);
            copies.push((page_id, frame_id, copy));
        }
        written += self.write_copies(copies)?;
        Ok(written)
    }

    /// Writes page copies taken by `write_back` and clears their frames' `io_busy`; on failure
    /// the frames are dirty again.
    fn write_copies(&self, copies: Vec<(PageId, usize, AlignedBuf)>) -> Result<usize> {
        if copies.is_empty() {
            return Ok(0);
        }
        let pages: Vec<(PageId, &[u8])> = copies.iter().map(|(id, _, c)| (*id, &c[..])).collect();
        let write_io = crate::phase::enter(crate::phase::Phase::WriteIo);
        let result = self.store.write_pages(&pages);
        drop(write_io);
        for (_, frame_id, _) in &copies {
            let frame = &self.frames[*frame_id];
            if result.is_err() && !frame.dirty.swap(true, Ordering::AcqRel) {
                self.dirty_count.fetch_add(1, Ordering::Relaxed);
            }
            self.finish_write_back(*frame_id);
        }
        result?;
        self.counters
            .pages_written
            .fetch_add(copies.len() as u64, Ordering::Relaxed);
        Ok(copies.len())
    }

    /// Copies every dirty page and marks it clean. Call only while holding `quiesce()`, so no
    /// operation is half done and no write-back is in flight. The frames stay `io_busy` until
    /// `finish_checkpoint_pages`: until the store holds the copies, the frame is the only
    /// up-to-date image, so it must not be evicted (a re-read would find an older image or
    /// none).
    pub fn take_dirty_pages(&self) -> Vec<(PageId, AlignedBuf)> {
        let mut pages = Vec::new();
        let mut taken = self.checkpoint_frames.lock();
        assert!(taken.is_empty(), "one checkpoint at a time");
        for (frame_id, frame) in self.frames.iter().enumerate() {
            assert!(
                !frame.io_busy.load(Ordering::Acquire),
                "write-back during checkpoint"
            );
            if !frame.valid.load(Ordering::Acquire) || !frame.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            self.dirty_count.fetch_sub(1, Ordering::Relaxed);
            frame.io_busy.store(true, Ordering::Release);
            taken.push(frame_id);
            let latch = frame.latch.shared(&self.config.latch);
            let mut copy = AlignedBuf::new(self.page_size);
            // SAFETY: shared latch held; we only read.
            copy.copy_from_slice(unsafe { self.frame_bytes(frame_id) });
            drop(latch);
            seal_for_write(&mut copy);
            pages.push((frame.page_id.load(Ordering::Acquire), copy));
        }
        pages
    }

    /// Ends the checkpoint writes begun by `take_dirty_pages`: the frames may be evicted again;
    /// if the store did not take the pages (`written` false) they are dirty again.
    pub fn finish_checkpoint_pages(&self, written: bool) {
        let frame_ids: Vec<usize> = self.checkpoint_frames.lock().drain(..).collect();
        for frame_id in frame_ids {
            let frame = &self.frames[frame_id];
            if !written && !frame.dirty.swap(true, Ordering::AcqRel) {
                self.dirty_count.fetch_add(1, Ordering::Relaxed);
            }
            // Also gives back page ids freed while the checkpoint was writing the frame.
            self.finish_write_back(frame_id);
        }
    }

    /// Writes every dirty page to the store (not a checkpoint: nothing becomes durable).
    pub fn flush_all(&self) -> Result<()> {
        let _operation = self.operation();
        let dirty: Vec<usize> = (0..self.frames.len())
            .filter(|&id| self.frames[id].dirty.load(Ordering::Acquire))
            .collect();
        for chunk in dirty.chunks(self.config.write_batch_pages.max(1)) {
            self.write_back(chunk, true)?;
        }
        Ok(())
    }

    pub(super) fn count_background_writes(&self, pages: usize) {
        self.counters
            .background_writes
            .fetch_add(pages as u64, Ordering::Relaxed);
    }

    /// The pool's counters now.
    pub fn stats(&self) -> BufferStats {
        let counters = &self.counters;
        BufferStats {
            hits: counters.hits.sum(),
            misses: counters.misses.load(Ordering::Relaxed),
            pages_read: counters.pages_read.load(Ordering::Relaxed),
            pages_written: counters.pages_written.load(Ordering::Relaxed),
            eviction_writes: counters.eviction_writes.load(Ordering::Relaxed),
            background_writes: counters.background_writes.load(Ordering::Relaxed),
            frame_count: self.frames.len() as u64,
            dirty_frames: self.dirty_count.load(Ordering::Relaxed) as u64,
        }
    }

    /// Dirty frames past which the background writer runs: `dirty_fraction_target` of the
    /// frames, but never more than `DIRTY_BYTES_TARGET_MAX` of pages, so that what a
    /// checkpoint copies while operations wait stays bounded however large the buffer.
    fn dirty_target(&self) -> usize {
        let by_fraction = (self.frames.len() as f64 * self.config.dirty_fraction_target) as usize;
        by_fraction.min((DIRTY_BYTES_TARGET_MAX / self.page_size).max(1))
    }

    /// The background writer's work: writes batches of dirty, unpinned frames found ahead of
    /// the clock hand, each batch in one store call (one sequential segment write when out of
    /// place), until the dirty fraction is under half the target.
    fn write_back_to_target(&self) -> Result<()> {
        let frame_count = self.frames.len();
        let target = self.dirty_target();
        let batch_size = self.config.write_batch_pages.max(1);
        let mut scanned = 0;
        let mut position = 0;
        while self.dirty_count.load(Ordering::Relaxed) > target / 2 && scanned < frame_count {
            let mut batch = Vec::with_capacity(batch_size);
            while batch.len() < batch_size && scanned < frame_count {
                let frame = &self.frames[position];
                if frame.dirty.load(Ordering::Relaxed) && !frame.io_busy.load(Ordering::Relaxed) {
                    batch.push(position);
                }
                position = (position + 1) % frame_count;
                scanned += 1;
            }
            if batch.is_empty() {
                break;
            }
            let operation = self.operation();
            let written = self.write_back(&batch, true)?;
            drop(operation);
            self.count_background_writes(written);
        }
        Ok(())
    }

    /// Stops the background writer (idempotent). Dirty pages stay in memory.
    pub fn shutdown(&self) {
        self.writer.stop();
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        self.writer.stop();
    }
}

/// Shared hold of the checkpoint gate; see `BufferPool::operation`.
pub struct OperationGuard<'a> {
    _shared: GateShared<'a>,
}

/// Exclusive hold of the checkpoint gate; see `BufferPool::quiesce`.
pub struct QuiesceGuard<'a> {
    _exclusive: GateExclusive<'a>,
}

/// Bumps the write sequence and stores the checksum of a page copy about to be written.
fn seal_for_write(copy: &mut [u8]) {
    let sequence = PageHeaderAccessor::new(copy).write_sequence() + 1;
    PageHeaderBuilder::new(copy).set_write_sequence(sequence);
    page::seal(copy);
}

/// A pinned page under a shared latch.
pub struct PageReadGuard<'a> {
    pool: &'a BufferPool,
    frame_id: usize,
    latch: ManuallyDrop<SharedHold<'a>>,
}

impl PageReadGuard<'_> {
    /// The page the guard holds.
    pub fn page_id(&self) -> PageId {
        self.pool.frames[self.frame_id]
            .page_id
            .load(Ordering::Acquire)
    }

    /// The page as it is now (steady while the guard holds its shared latch), to ask later
    /// with `BufferPool::unchanged` whether it was changed since.
    pub fn stamp(&self) -> PageStamp {
        let frame = &self.pool.frames[self.frame_id];
        PageStamp {
            page_id: self.page_id(),
            frame_id: self.frame_id,
            version: frame
                .latch
                .optimistic_version()
                .expect("no exclusive hold while a shared one is held"),
        }
    }
}

/// A page at one version in one frame (`PageReadGuard::stamp`). A page leaves its frame,
/// is loaded again or changes only under the frame's exclusive latch, each of which moves
/// the frame's version: the same frame at the same version holds the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageStamp {
    page_id: PageId,
    frame_id: usize,
    version: u64,
}

impl Deref for PageReadGuard<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: shared latch held for the guard's lifetime.
        unsafe { self.pool.frame_bytes(self.frame_id) }
    }
}

impl Drop for PageReadGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, here; the latch is released before the unpin.
        unsafe { ManuallyDrop::drop(&mut self.latch) };
        self.pool.frames[self.frame_id]
            .pin_count
            .fetch_sub(1, Ordering::AcqRel);
    }
}

/// A pinned page under an exclusive latch; marks the page dirty when dropped.
pub struct PageWriteGuard<'a> {
    pool: &'a BufferPool,
    frame_id: usize,
    latch: ManuallyDrop<ExclusiveHold<'a>>,
}

impl PageWriteGuard<'_> {
    /// The page the guard holds.
    pub fn page_id(&self) -> PageId {
        self.pool.frames[self.frame_id]
            .page_id
            .load(Ordering::Acquire)
    }

    /// Records the log position of the change being applied.
    pub fn set_lsn(&mut self, lsn: u64) {
        PageHeaderBuilder::new(self).set_lsn(lsn);
    }
}

impl Deref for PageWriteGuard<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: exclusive latch held for the guard's lifetime.
        unsafe { self.pool.frame_bytes(self.frame_id) }
    }
}

impl DerefMut for PageWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: exclusive latch held for the guard's lifetime.
        unsafe { self.pool.frame_bytes(self.frame_id) }
    }
}

impl Drop for PageWriteGuard<'_> {
    fn drop(&mut self) {
        let frame = &self.pool.frames[self.frame_id];
        let kind = PageHeaderAccessor::new(self).kind();
        frame
            .inner
            .store(kind == Some(PageKind::BtreeInner), Ordering::Relaxed);
        if !frame.dirty.swap(true, Ordering::AcqRel) {
            self.pool.dirty_count.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: dropped exactly once, here; the latch is released before the unpin.
        unsafe { ManuallyDrop::drop(&mut self.latch) };
        frame.pin_count.fetch_sub(1, Ordering::AcqRel);
        if self.pool.dirty_count.load(Ordering::Relaxed) > self.pool.dirty_target() {
            self.pool.writer.wake();
        }
    }
}

/// Outcome of `BufferPool::optimistic`.
pub enum Optimistic<'a> {
    /// Resident: read it, then `validate`.
    Page(OptimisticPage<'a>),
    /// Latched exclusively or being loaded: retry, or wait with a latch.
    Busy,
    /// Not in the pool: take the latching path, which loads it.
    NotResident,
}

/// A resident page read without pin or latch, at a version (see `latch`).
pub struct OptimisticPage<'a> {
    pool: &'a BufferPool,
    frame_id: usize,
    version: u64,
}

impl<'a> OptimisticPage<'a> {
    /// The page's bytes, which may change while the caller reads them.
    ///
    /// # Safety
    /// The caller treats the bytes as untrusted (every access bounds-checked, no panic on any
    /// content) and uses nothing it derived from them before `validate` returns true. This is
    /// the seqlock pattern: the reads race with a writer only when validation then fails. The
    /// frame's memory itself stays valid: the arena lives as long as the pool.
    pub unsafe fn bytes(&self) -> &'a [u8] {
        // SAFETY: in bounds (frame id from our table); racy content is the caller's duty above.
        unsafe { self.pool.frame_bytes(self.frame_id) }
    }

    /// True if the page did not change since this view was taken.
    #[inline]
    pub fn validate(&self) -> bool {
        self.pool.frames[self.frame_id].latch.validate(self.version)
    }

    /// The page as this view saw it, for `BufferPool::unchanged`; `page_id` is the page asked
    /// of `BufferPool::optimistic` (a stamp is worth something once `validate` held).
    pub fn stamp(&self, page_id: PageId) -> PageStamp {
        PageStamp {
            page_id,
            frame_id: self.frame_id,
            version: self.version,
        }
    }
}

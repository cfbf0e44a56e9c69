//! The page table: page id -> frame, readable without a lock.
//!
//! An open-addressing hash table (linear probing) of atomic words, allocated once at start-up
//! with four slots per frame. A word is empty (0), a tombstone (`u64::MAX`), or
//! `page id << FRAME_BITS | frame id`, so a reader never sees half an entry.
//!
//! Writers (insert, remove, rebuild) run only under the pool's table mutex, which keeps the
//! table exact for them. Readers do not lock: `lookup_lock_free` may miss an entry that is
//! being inserted or moved by a rebuild, and may return a frame that has just been given to
//! another page. Both are harmless because every lock-free reader confirms what it found: it
//! pins and latches the frame (or validates its latch version) and checks the frame's page id,
//! and on a miss it asks again under the mutex.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::page::PageId;

const EMPTY: u64 = 0;
const TOMBSTONE: u64 = u64::MAX;
const FRAME_BITS: u32 = 24;
const FRAME_MASK: u64 = (1 << FRAME_BITS) - 1;
/// The largest frame count the entry encoding allows (64 GiB of 4 KiB frames).
pub const FRAME_COUNT_MAX: usize = 1 << FRAME_BITS;
/// The largest page id the entry encoding allows (keeps every entry below `TOMBSTONE`).
const PAGE_ID_MAX: PageId = (1 << (64 - FRAME_BITS)) - 2;

/// What the table mutex protects; a `&mut Locked` proves the caller holds it.
pub(super) struct Locked {
    /// The clock hand of eviction, which moves under the same mutex.
    pub clock_hand: usize,
    /// Page ids freed and not allocated again. A task that read a pointer, released its
    /// latches and asked for the page (`BufferPool::load_batch`) may ask for a page freed
    /// meanwhile; such a load is skipped, so it never reads a page with no stored copy nor
    /// claims an id the allocator is about to hand out.
    pub freed: std::collections::HashSet<PageId>,
}

pub(super) struct PageTable {
    slots: Box<[AtomicU64]>,
    /// log2 of the slot count.
    bits: u32,
    /// Live entries and tombstones; changed only under the table mutex (hence the atomics).
    used: AtomicU64,
}

impl PageTable {
    pub fn new(frame_count: usize) -> PageTable {
        assert!(frame_count <= FRAME_COUNT_MAX, "{frame_count} frames");
        let slot_count = (frame_count * 4).next_power_of_two().max(16);
        PageTable {
            slots: (0..slot_count).map(|_| AtomicU64::new(EMPTY)).collect(),
            bits: slot_count.trailing_zeros(),
            used: AtomicU64::new(0),
        }
    }

    /// The first slot to probe: a multiplicative (Fibonacci) hash of the page id. Page ids
    /// are dense, and an id's home must not be its own value: with linear probing, dense ids
    /// fill one long contiguous run, and looking up an absent id whose home falls inside it
    /// (a freed id the allocator hands out again, a page being loaded) scans the whole run,
    /// which made every allocation in an all-in-memory update load cost tens of thousands of
    /// probes. Hashed homes keep runs short at the table's load of at most one half.
    fn home(&self, page_id: PageId) -> usize {
        (page_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits)) as usize
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The frame of `page_id`, possibly stale or missing (see the module doc); exact when
    /// called under the table mutex.
    #[inline]
    pub fn lookup(&self, page_id: PageId) -> Option<usize> {
        let mut index = self.home(page_id);
        for _ in 0..self.slots.len() {
            let entry = self.slots[index].load(Ordering::Acquire);
            if entry == EMPTY {
                return None;
            }
            if entry != TOMBSTONE && entry >> FRAME_BITS == page_id {
                return Some((entry & FRAME_MASK) as usize);
            }
            index = (index + 1) & self.mask();
        }
        None
    }

    /// Maps an absent page. Call under the table mutex.
    pub fn insert(&self, locked: &mut Locked, page_id: PageId, frame_id: usize) {
        assert!(
            page_id != 0 && page_id <= PAGE_ID_MAX,
            "page id {page_id} out of range"
        );
        assert!(frame_id < FRAME_COUNT_MAX);
        debug_assert!(
            self.lookup(page_id).is_none(),
            "page {page_id} mapped twice"
        );
        if (self.used.load(Ordering::Relaxed) as usize + 1) * 2 > self.slots.len() {
            self.rebuild(locked);
        }
        let entry = page_id << FRAME_BITS | frame_id as u64;
        let mut index = self.home(page_id);
        loop {
            let current = self.slots[index].load(Ordering::Relaxed);
            if current == EMPTY || current == TOMBSTONE {
                if current == EMPTY {
                    self.used.fetch_add(1, Ordering::Relaxed);
                }
                self.slots[index].store(entry, Ordering::Release);
                return;
            }
            index = (index + 1) & self.mask();
        }
    }

    /// Unmaps a page; returns whether it was mapped. Call under the table mutex.
    pub fn remove(&self, _locked: &mut Locked, page_id: PageId) -> bool {
        let mut index = self.home(page_id);
        for _ in 0..self.slots.len() {
            let entry = self.slots[index].load(Ordering::Relaxed);
            if entry == EMPTY {
                return false;
            }
            if entry != TOMBSTONE && entry >> FRAME_BITS == page_id {
                self.slots[index].store(TOMBSTONE, Ordering::Release);
                return true;
            }
            index = (index + 1) & self.mask();
        }
        false
    }

    /// Drops the tombstones: empties the table and inserts the live entries again. Lock-free
    /// readers may miss entries meanwhile and then ask under the mutex.
    fn rebuild(&self, locked: &mut Locked) {
        let live: Vec<u64> = self
            .slots
            .iter()
            .map(|slot| slot.load(Ordering::Relaxed))
            .filter(|&entry| entry != EMPTY && entry != TOMBSTONE)
            .collect();
        for slot in self.slots.iter() {
            slot.store(EMPTY, Ordering::Release);
        }
        self.used.store(0, Ordering::Relaxed);
        for entry in live {
            self.insert(locked, entry >> FRAME_BITS, (entry & FRAME_MASK) as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn agrees_with_a_hash_map_under_churn() {
        let table = PageTable::new(64);
        let locked = &mut Locked {
            clock_hand: 0,
            freed: Default::default(),
        };
        let mut model: HashMap<PageId, usize> = HashMap::new();
        let mut random = rand::rngs::StdRng::seed_from_u64(7);
        for step in 0..200_000 {
            let page_id = random.gen_range(1..500u64);
            if model.len() < 64 && !model.contains_key(&page_id) && random.gen_bool(0.5) {
                let frame_id = step % 64;
                table.insert(locked, page_id, frame_id);
                model.insert(page_id, frame_id);
            } else if model.contains_key(&page_id) {
                assert!(table.remove(locked, page_id));
                model.remove(&page_id);
            } else {
                assert!(!table.remove(locked, page_id));
            }
            assert_eq!(table.lookup(page_id), model.get(&page_id).copied());
        }
        for page_id in 1..500 {
            assert_eq!(table.lookup(page_id), model.get(&page_id).copied());
        }
        assert!(table.used.load(Ordering::Relaxed) as usize * 2 <= table.slots.len());
    }
}

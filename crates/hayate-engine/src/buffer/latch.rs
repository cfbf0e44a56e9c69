//! Page latches: shared and exclusive holds, optimistic versioned reads, and our wait policy.
//!
//! One 64-bit word holds everything:
//!
//! | bits   | field                                                         |
//! |--------|---------------------------------------------------------------|
//! | 0..16  | shared holders                                                |
//! | 16     | held exclusively                                              |
//! | 17     | a waiter is parked (the releaser must wake the parked threads) |
//! | 18..64 | version: incremented by every exclusive release               |
//!
//! Lifecycle of an optimistic read (no write to shared memory, so readers of a hot page such as
//! a root do not take its cache line from each other):
//! 1. `optimistic_version` reads the word; if the latch is held exclusively there is no
//!    version to read at (the caller waits or takes the latch shared).
//! 2. The caller reads the bytes. They may change under it: it treats them as untrusted
//!    (bounds-checked, errors not panics) and keeps nothing yet.
//! 3. `validate(version)` is true only if no exclusive hold began since step 1: then what was
//!    read is a consistent image. Otherwise the result is thrown away and the read retried.
//!
//! Why this is correct (the seqlock argument): a writer sets the exclusive bit (acquire) before
//! changing bytes and bumps the version when clearing it (release). Step 1 loads with acquire,
//! step 3 issues an acquire fence before its load. If a write overlapped the reads, either step 1
//! saw the exclusive bit, or step 3 sees the bit or a newer version.
//!
//! Waits spin `LatchConfig::spin_count` times, then park for at most `park_time` at a time
//! (woken early by the release that makes progress possible). There is no queue and no
//! fairness: shared holders can delay an exclusive waiter while they keep coming, which page
//! accesses (short, bounded) do not do for long.

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SHARED_UNIT: u64 = 1;
const SHARED_MASK: u64 = 0xffff;
const EXCLUSIVE: u64 = 1 << 16;
const PARKED: u64 = 1 << 17;
const VERSION_SHIFT: u32 = 18;
const VERSION_UNIT: u64 = 1 << VERSION_SHIFT;

/// How a thread waits for a page latch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatchConfig {
    /// Polls (with a spin hint) before the waiter parks.
    pub spin_count: u32,
    /// Longest single park; the waiter re-checks the latch after it even if nobody woke it.
    pub park_time: Duration,
}

impl Default for LatchConfig {
    fn default() -> Self {
        LatchConfig {
            spin_count: 128,
            park_time: Duration::from_micros(500),
        }
    }
}

/// A shared/exclusive latch with a version for optimistic reads. Guards are the caller's duty:
/// every successful `lock_*` or `try_lock_*` is paired with one `unlock_*` of the same mode.
#[derive(Default)]
pub struct Latch {
    state: AtomicU64,
}

impl Latch {
    pub fn new() -> Latch {
        Latch::default()
    }

    /// The version to read at, or None while the latch is held exclusively.
    #[inline]
    pub fn optimistic_version(&self) -> Option<u64> {
        let state = self.state.load(Ordering::Acquire);
        if state & EXCLUSIVE != 0 {
            None
        } else {
            Some(state >> VERSION_SHIFT)
        }
    }

    /// True if no exclusive hold began since `optimistic_version` returned `version`.
    #[inline]
    pub fn validate(&self, version: u64) -> bool {
        fence(Ordering::Acquire);
        let state = self.state.load(Ordering::Relaxed);
        state & EXCLUSIVE == 0 && state >> VERSION_SHIFT == version
    }

    #[inline]
    pub fn try_lock_shared(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & EXCLUSIVE != 0 || state & SHARED_MASK == SHARED_MASK {
                return false;
            }
            match self.state.compare_exchange_weak(
                state,
                state + SHARED_UNIT,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(current) => state = current,
            }
        }
    }

    #[inline]
    pub fn try_lock_exclusive(&self) -> bool {
        let state = self.state.load(Ordering::Relaxed);
        if state & (EXCLUSIVE | SHARED_MASK) != 0 {
            return false;
        }
        self.state
            .compare_exchange(
                state,
                state | EXCLUSIVE,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    #[inline]
    pub fn lock_shared(&self, config: &LatchConfig) {
        if !self.try_lock_shared() {
            self.wait(config, Self::try_lock_shared, |state| {
                state & EXCLUSIVE != 0 || state & SHARED_MASK == SHARED_MASK
            });
        }
    }

    #[inline]
    pub fn lock_exclusive(&self, config: &LatchConfig) {
        if !self.try_lock_exclusive() {
            self.wait(config, Self::try_lock_exclusive, |state| {
                state & (EXCLUSIVE | SHARED_MASK) != 0
            });
        }
    }

    #[inline]
    pub fn unlock_shared(&self) {
        let previous = self.state.fetch_sub(SHARED_UNIT, Ordering::Release);
        debug_assert!(previous & SHARED_MASK != 0, "shared release without a hold");
        if previous & SHARED_MASK == SHARED_UNIT && previous & PARKED != 0 {
            self.wake();
        }
    }

    /// Releases an exclusive hold and bumps the version (readers at the old one fail).
    #[inline]
    pub fn unlock_exclusive(&self) {
        // Clears EXCLUSIVE (which is set) and adds one version in one step.
        let previous = self
            .state
            .fetch_add(VERSION_UNIT - EXCLUSIVE, Ordering::Release);
        debug_assert!(
            previous & EXCLUSIVE != 0,
            "exclusive release without a hold"
        );
        if previous & PARKED != 0 {
            self.wake();
        }
    }

    fn key(&self) -> usize {
        &self.state as *const AtomicU64 as usize
    }

    fn wake(&self) {
        self.state.fetch_and(!PARKED, Ordering::Relaxed);
        // SAFETY: the key is the address of our state word, which outlives every parked waiter
        // (they hold a reference to this latch); no callback runs here.
        unsafe {
            parking_lot_core::unpark_all(self.key(), parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }

    /// Spins, then parks until `attempt` succeeds. `blocked(state)` says whether the hold wanted
    /// is impossible in `state` (so parking makes sense).
    #[cold]
    fn wait(
        &self,
        config: &LatchConfig,
        attempt: impl Fn(&Latch) -> bool,
        blocked: impl Fn(u64) -> bool,
    ) {
        for _ in 0..config.spin_count {
            std::hint::spin_loop();
            if attempt(self) {
                return;
            }
        }
        loop {
            if attempt(self) {
                return;
            }
            // On a fiber the holder may be another fiber of this thread: suspend, never park.
            if crate::fiber::pause() {
                continue;
            }
            // Announce the waiter, then park only if the latch is still blocked and the
            // announcement still stands (a release in between cleared it and woke nobody).
            let state = self.state.fetch_or(PARKED, Ordering::Relaxed) | PARKED;
            if !blocked(state) {
                continue;
            }
            let deadline = Instant::now() + config.park_time;
            let validate = || {
                let state = self.state.load(Ordering::Relaxed);
                state & PARKED != 0 && blocked(state)
            };
            // SAFETY: the key is our state word's address (see `wake`); the callbacks neither
            // panic nor call into parking_lot_core.
            unsafe {
                parking_lot_core::park(
                    self.key(),
                    validate,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    Some(deadline),
                );
            }
        }
    }
}

/// A shared hold; released on drop.
pub struct SharedHold<'a> {
    latch: &'a Latch,
}

/// An exclusive hold; released on drop (bumping the version).
pub struct ExclusiveHold<'a> {
    latch: &'a Latch,
}

impl Latch {
    pub fn shared<'a>(&'a self, config: &LatchConfig) -> SharedHold<'a> {
        self.lock_shared(config);
        SharedHold { latch: self }
    }

    pub fn try_shared(&self) -> Option<SharedHold<'_>> {
        // `then`, not `then_some`: a hold built eagerly would be dropped, releasing a latch
        // that was never taken.
        self.try_lock_shared().then(|| SharedHold { latch: self })
    }

    pub fn exclusive<'a>(&'a self, config: &LatchConfig) -> ExclusiveHold<'a> {
        self.lock_exclusive(config);
        ExclusiveHold { latch: self }
    }

    pub fn try_exclusive(&self) -> Option<ExclusiveHold<'_>> {
        self.try_lock_exclusive()
            .then(|| ExclusiveHold { latch: self })
    }
}

impl Drop for SharedHold<'_> {
    fn drop(&mut self) {
        self.latch.unlock_shared();
    }
}

impl Drop for ExclusiveHold<'_> {
    fn drop(&mut self) {
        self.latch.unlock_exclusive();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn versions_move_only_on_exclusive_release() {
        let latch = Latch::new();
        let config = LatchConfig::default();
        let version = latch.optimistic_version().expect("free latch");
        latch.lock_shared(&config);
        assert!(latch.validate(version), "shared holds leave the version");
        assert!(!latch.try_lock_exclusive());
        latch.unlock_shared();
        latch.lock_exclusive(&config);
        assert_eq!(latch.optimistic_version(), None);
        assert!(!latch.validate(version), "an exclusive hold fails readers");
        assert!(!latch.try_lock_shared());
        latch.unlock_exclusive();
        assert!(!latch.validate(version));
        assert_eq!(latch.optimistic_version(), Some(version + 1));
    }

    #[test]
    fn failed_tries_leave_the_latch_alone() {
        let latch = Latch::new();
        let config = LatchConfig::default();
        let shared = latch.shared(&config);
        assert!(latch.try_exclusive().is_none());
        drop(shared);
        let exclusive = latch.exclusive(&config);
        assert!(latch.try_shared().is_none());
        assert!(latch.try_exclusive().is_none());
        drop(exclusive);
        assert_eq!(latch.optimistic_version(), Some(1));
        assert!(latch.try_exclusive().is_some());
        assert!(latch.try_shared().is_some());
        assert_eq!(latch.state.load(Ordering::Relaxed), 2 << VERSION_SHIFT);
    }

    /// Writers keep two halves of a buffer equal under the exclusive latch; shared and
    /// optimistic readers must never see them differ, and no increment may be lost. Short park
    /// times and few spins make the parking path run often.
    #[test]
    fn stress_shared_exclusive_and_optimistic() {
        struct Shared {
            latch: Latch,
            words: [std::cell::UnsafeCell<u64>; 2],
        }
        // SAFETY: the words are written only under the exclusive latch; optimistic readers read
        // them with volatile loads and discard what fails validation.
        unsafe impl Sync for Shared {}
        let shared = Arc::new(Shared {
            latch: Latch::new(),
            words: [std::cell::UnsafeCell::new(0), std::cell::UnsafeCell::new(0)],
        });
        let config = LatchConfig {
            spin_count: 4,
            park_time: Duration::from_micros(50),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let writers = 4;
        let increments = 20_000u64;
        let mut handles = Vec::new();
        for _ in 0..writers {
            let (shared, config) = (shared.clone(), config.clone());
            handles.push(std::thread::spawn(move || {
                for _ in 0..increments {
                    shared.latch.lock_exclusive(&config);
                    // SAFETY: exclusive latch held.
                    unsafe {
                        *shared.words[0].get() += 1;
                        std::hint::spin_loop();
                        *shared.words[1].get() += 1;
                    }
                    shared.latch.unlock_exclusive();
                }
                0u64
            }));
        }
        for reader in 0..4 {
            let (shared, config, stop) = (shared.clone(), config.clone(), stop.clone());
            handles.push(std::thread::spawn(move || {
                let mut validated = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if reader % 2 == 0 {
                        shared.latch.lock_shared(&config);
                        // SAFETY: shared latch held, writers excluded.
                        let (a, b) = unsafe { (*shared.words[0].get(), *shared.words[1].get()) };
                        shared.latch.unlock_shared();
                        assert_eq!(a, b, "torn read under a shared latch");
                    } else if let Some(version) = shared.latch.optimistic_version() {
                        // SAFETY: racy reads of plain words, discarded unless validated.
                        let (a, b) = unsafe {
                            (
                                std::ptr::read_volatile(shared.words[0].get()),
                                std::ptr::read_volatile(shared.words[1].get()),
                            )
                        };
                        if shared.latch.validate(version) {
                            assert_eq!(a, b, "validated optimistic read was torn");
                            validated += 1;
                        }
                    }
                }
                validated
            }));
        }
        let mut handles = handles.into_iter();
        for handle in handles.by_ref().take(writers) {
            handle.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for handle in handles {
            handle.join().unwrap();
        }
        shared.latch.lock_shared(&config);
        // SAFETY: shared latch held.
        let total = unsafe { *shared.words[0].get() };
        shared.latch.unlock_shared();
        assert_eq!(total, writers as u64 * increments);
        assert_eq!(
            shared.latch.optimistic_version(),
            Some(writers as u64 * increments),
            "one version per exclusive release"
        );
    }
}

//! Hayate's embedded drivers run their transactions on fibers (`hayate_engine::fiber`): each
//! worker thread gets its own io_uring ring and runs its terminals (TPC-C) or transactions in
//! flight (the primitive workload, `bench tasks`) as fibers of that thread with
//! `fiber::run_all`. The transactions are plain synchronous code; a page miss, a lock held by
//! another fiber or the wait for the log suspends the fiber, not the thread.
//!
//! Lifecycle of a worker thread:
//! 1. `run` installs the thread's ring (without one, page misses block the thread; logged);
//! 2. runs the fibers until all returned; when none can go on, the thread blocks in the
//!    ring's reaper (reads in flight) or sleeps (every fiber waits for the log or a lock);
//! 3. each transaction commits with `commit`: logged and applied, then the fiber sleeps until
//!    the log flusher made it durable (`Database::commit_on_fiber`).
//!
//! Time split (`phase`): on a fiber the engine's own phase marks do nothing (other fibers run
//! during a fiber's wait), so the host marks the thread's waits: blocked in the reaper is read
//! I/O; asleep while some fiber is committing is log wait, otherwise lock wait (row locks and
//! the commit order are the other waits that sleep); everything else is CPU.

use std::cell::Cell;

use hayate_engine::fiber::{self, Idle};
use hayate_engine::{Database, Phase, Transaction};

thread_local! {
    /// Fibers of this thread inside `commit`.
    static COMMITTING: Cell<u32> = const { Cell::new(0) };
}

/// Runs `works` as fibers of this thread (see the module docs); returns their results in order.
pub fn run<'a, R: 'a>(works: Vec<Box<dyn FnOnce() -> R + 'a>>) -> Vec<R> {
    if let Err(error) = hayate_engine::install_thread_ring() {
        log::warn!("no io_uring ring for a worker thread, its page misses block it: {error}");
    }
    hayate_engine::set_in_flight(works.len() as u32);
    let (results, _) = fiber::run_all(works, host);
    results
}

/// The host of a worker's fibers: reaps, blocks or sleeps as `run_all` asks, and marks the
/// thread's waits for the time split.
fn host(idle: Idle) {
    let _phase = match idle {
        Idle::Poll => None,
        Idle::Reads => Some(hayate_engine::enter_phase(Phase::ReadIo)),
        Idle::Until(_) if COMMITTING.with(Cell::get) > 0 => {
            Some(hayate_engine::enter_phase(Phase::LogWait))
        }
        Idle::Until(_) => Some(hayate_engine::enter_phase(Phase::LockWait)),
    };
    hayate_engine::reap_or_sleep(idle);
}

/// Commits `txn` (`Database::commit_on_fiber`): on a fiber, the wait for the log suspends it.
pub fn commit(db: &Database, txn: Transaction) -> hayate_engine::Result<Option<u64>> {
    COMMITTING.with(|count| count.set(count.get() + 1));
    let result = db.commit_on_fiber(txn);
    COMMITTING.with(|count| count.set(count.get() - 1));
    result
}

/// Lets the other fibers of the thread run once (between retries of a transaction); off a
/// fiber, does nothing.
pub fn pause() {
    fiber::pause();
}

//! Many transactions per thread without an OS thread switch per I/O.
//!
//! A task is a future (an `async` block using `Transaction::get_async`). Lifecycle:
//! 1. `run_tasks` polls every runnable task once, round-robin, on the calling thread.
//! 2. A task that needs a page which is not resident releases its latches, records the page
//!    (`PageWait`) and returns `Pending`; the next task runs at once.
//! 3. When every task has had its turn, the pages they wait for are loaded together with one
//!    batched read (`BufferPool::load_batch`: one io_uring submission, every read in flight),
//!    and the waiting tasks become runnable again; their lookups restart and now hit.
//!
//! 4. A commit logs and applies its writes, then waits on the log (`LogWait`); after the round
//!    the executor asks the database's log flusher (`flusher`) for the highest position asked
//!    for and goes on loading pages while the flusher's fdatasync runs, so every commit of the
//!    round shares one flush and the thread blocks on the log only when it has nothing else
//!    to do. A task that finds a row lock taken waits for the lock table's next release
//!    (`LockWait`); a round whose tasks all wait for locks sleeps until one is released.
//!
//! So one thread keeps as many reads in flight as it has waiting tasks and blocks once per
//! batch instead of once per read, and commits of all its tasks share flushes. Limits: applying
//! a commit and scans still read missing pages synchronously; lock waits between tasks are
//! bounded by the lock timeout, not by deadlock detection.

pub mod flusher;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::buffer::BufferPool;
use crate::error::Result;
use crate::page::PageId;
use crate::phase;

thread_local! {
    /// Pages the tasks polled in this round wait for.
    static WANTED: RefCell<Vec<PageId>> = const { RefCell::new(Vec::new()) };
    /// The lowest and highest log positions tasks polled in this round wait to be durable
    /// ((0, 0): none).
    static WANTED_LSN: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// The durable log position as of the start of the round.
    static DURABLE_LSN: Cell<u64> = const { Cell::new(0) };
    /// The lowest lock-release epoch tasks polled in this round wait to pass (`LockWait`).
    static LOCK_EPOCH: Cell<Option<u64>> = const { Cell::new(None) };
    /// Whether a task of this round yielded without saying what for (`Yield`).
    static YIELDED: Cell<bool> = const { Cell::new(false) };
}

/// A future that is ready once the log is durable up to `lsn`; until then it asks the
/// executor for it (the executor's log flusher then flushes for every commit of the round).
pub struct LogWait {
    lsn: u64,
}

impl LogWait {
    pub fn new(lsn: u64) -> LogWait {
        LogWait { lsn }
    }
}

impl Future for LogWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<()> {
        if DURABLE_LSN.with(Cell::get) >= self.lsn {
            return Poll::Ready(());
        }
        WANTED_LSN.with(|wanted| {
            let (low, high) = wanted.get();
            let low = if low == 0 {
                self.lsn
            } else {
                low.min(self.lsn)
            };
            wanted.set((low, high.max(self.lsn)));
        });
        Poll::Pending
    }
}

/// A future that is pending once and asks for nothing: lets other tasks run (lock waits,
/// waiting for an earlier commit to become visible).
#[derive(Default)]
pub struct Yield {
    yielded: bool,
}

impl Future for Yield {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        YIELDED.with(|yielded| yielded.set(true));
        Poll::Pending
    }
}

/// A future that is pending once, telling the executor the task waits for a row lock held by
/// another transaction: a round whose tasks wait only for locks sleeps until a lock is
/// released after `epoch` (the lock table's release count when the task found the lock
/// taken), instead of spinning and taking the CPU from the lock's holder.
pub struct LockWait {
    epoch: u64,
    waited: bool,
}

impl LockWait {
    pub fn new(epoch: u64) -> LockWait {
        LockWait {
            epoch,
            waited: false,
        }
    }
}

impl Future for LockWait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<()> {
        if self.waited {
            return Poll::Ready(());
        }
        self.waited = true;
        let epoch = self.epoch;
        LOCK_EPOCH.with(|lowest| lowest.set(Some(lowest.get().map_or(epoch, |e| e.min(epoch)))));
        Poll::Pending
    }
}

/// A future that is pending once, after asking the executor for a page.
pub struct PageWait {
    page_id: PageId,
    asked: bool,
}

impl PageWait {
    /// A wait for `page_id` (typically from `TryLookup::Missing`).
    pub fn new(page_id: PageId) -> PageWait {
        PageWait {
            page_id,
            asked: false,
        }
    }
}

impl Future for PageWait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<()> {
        if self.asked {
            return Poll::Ready(());
        }
        self.asked = true;
        WANTED.with(|wanted| wanted.borrow_mut().push(self.page_id));
        Poll::Pending
    }
}

/// A future that is pending once, after asking the executor for several pages (loaded in the
/// same batch).
pub struct PagesWait {
    pages: Vec<PageId>,
    asked: bool,
}

impl PagesWait {
    pub fn new(pages: Vec<PageId>) -> PagesWait {
        PagesWait {
            pages,
            asked: false,
        }
    }
}

impl Future for PagesWait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _context: &mut Context<'_>) -> Poll<()> {
        if self.asked {
            return Poll::Ready(());
        }
        self.asked = true;
        let pages = std::mem::take(&mut self.pages);
        WANTED.with(|wanted| wanted.borrow_mut().extend(pages));
        Poll::Pending
    }
}

/// What `run_tasks` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Tasks given to `run_tasks`.
    pub tasks: u64,
    /// Polls of a task, over all rounds.
    pub polls: u64,
    /// Batched loads issued (each one wait of the thread for I/O).
    pub batches: u64,
    /// Pages read by those batches (pages already resident are not counted).
    pub pages_loaded: u64,
    /// Rounds that asked the log flusher for a durable position (one per round at most).
    pub log_flushes: u64,
    /// Times the thread had nothing to do but wait for the log.
    pub log_waits: u64,
    /// Times the thread had nothing to do but wait for another thread to release a row lock.
    pub lock_waits: u64,
}

/// A transaction run as a task: a boxed future that `run_tasks` polls on one thread.
pub type Task<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Runs the tasks to completion on this thread; returns their outputs in order. At most
/// `batch_pages_max` pages are loaded per batch (bounded by the pool's size).
/// `wait_for_release(epoch)` blocks until a row lock is released after `epoch` (or briefly,
/// at most): it is called when the round's tasks wait for nothing but locks.
pub fn run_tasks<'a, T>(
    pool: &BufferPool,
    tasks: Vec<Task<'a, T>>,
    batch_pages_max: usize,
    log: &flusher::LogFlusher,
    wait_for_release: &dyn Fn(u64),
) -> Result<(Vec<T>, ExecStats)> {
    let mut stats = ExecStats {
        tasks: tasks.len() as u64,
        ..ExecStats::default()
    };
    let mut slots: Vec<Option<Task<'a, T>>> = tasks.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = slots.iter().map(|_| None).collect();
    let mut context = Context::from_waker(Waker::noop());
    let batch_pages_max = batch_pages_max.max(1);
    WANTED.with(|wanted| wanted.borrow_mut().clear());
    WANTED_LSN.with(|wanted| wanted.set((0, 0)));
    LOCK_EPOCH.with(|epoch| epoch.set(None));
    YIELDED.with(|yielded| yielded.set(false));
    loop {
        DURABLE_LSN.with(|durable| durable.set(log.durable_lsn()));
        let mut pending = 0;
        for (slot, output) in slots.iter_mut().zip(outputs.iter_mut()) {
            let Some(task) = slot else { continue };
            stats.polls += 1;
            match task.as_mut().poll(&mut context) {
                Poll::Ready(value) => {
                    *output = Some(value);
                    *slot = None;
                }
                Poll::Pending => pending += 1,
            }
        }
        if pending == 0 {
            break;
        }
        phase::set_in_flight(pending as u32);
        let (lowest_lsn, highest_lsn) = WANTED_LSN.with(|wanted| wanted.replace((0, 0)));
        if highest_lsn > 0 {
            // The flusher works while this thread reads pages and runs other tasks.
            log.request(highest_lsn);
            stats.log_flushes += 1;
        }
        let mut wanted = WANTED.with(|wanted| std::mem::take(&mut *wanted.borrow_mut()));
        let lock_epoch = LOCK_EPOCH.with(|epoch| epoch.replace(None));
        let yielded = YIELDED.with(|yielded| yielded.replace(false));
        if wanted.is_empty() {
            if lowest_lsn > 0 {
                // Nothing to read: wait until the first waiting commit is durable.
                let _log_wait = phase::enter(phase::Phase::LogWait);
                log.wait_durable(lowest_lsn)?;
                stats.log_waits += 1;
            } else if let (Some(epoch), false) = (lock_epoch, yielded) {
                // Every waiting task waits for a lock another thread's transaction holds.
                let _lock_wait = phase::enter(phase::Phase::LockWait);
                wait_for_release(epoch);
                stats.lock_waits += 1;
            } else {
                std::thread::yield_now(); // waiting for other threads; poll again
            }
            continue;
        }
        wanted.sort_unstable();
        wanted.dedup();
        let _read_io = phase::enter(phase::Phase::ReadIo);
        for chunk in wanted.chunks(batch_pages_max) {
            stats.pages_loaded += pool.load_batch(chunk)? as u64;
            stats.batches += 1;
        }
    }
    let outputs = outputs
        .into_iter()
        .map(|output| output.expect("every task finished"));
    Ok((outputs.collect(), stats))
}

//! The log flusher: threads of the database that make the log durable on request, so a
//! thread running many transactions (fibers, an event loop) never blocks on an fdatasync while
//! it has other work. There are two: on a primary, one leads the next flush while the other
//! waits for the standby's acknowledgement of the last (`Wal::flush_to` overlaps them; alone,
//! the second waits as a follower and takes the lead as soon as the flush ends).
//!
//! Protocol:
//! 1. A committer calls `request(lsn)` (non-blocking) for its commit's position.
//! 2. A flusher thread wakes, calls `Wal::flush_to` up to the highest position requested
//!    (group commit: every commit logged before the write shares the fdatasync), notifies, and
//!    goes on while requests are ahead of the durable position.
//! 3. Waiters (`Durable`, a future: a server's event loop awaits it for a `PendingCommit`, a
//!    fiber waits on it with a `fiber::Wakeup` as its waker, `Database::commit_on_fiber`)
//!    leave a waker with their position and wake a flusher thread; after each flush the
//!    thread first runs the `flushed` hook (the transaction manager publishes every commit the
//!    flush made durable, so readers see them without waiting for their committers to be
//!    polled), then wakes the waiters it covered. A thread that finds every request covered
//!    already (another thread's blocking commit flushed the log) wakes the covered waiters
//!    before it sleeps.
//!
//! A failed flush poisons the log (the WAL refuses further writes); waiters get the error.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result, SharedFailure};
use crate::wal::{Lsn, Wal};

struct State {
    requested: Lsn,
    /// The highest position a thread is flushing to now: another thread takes only a request
    /// beyond it (and leads the next flush while that one waits for a standby).
    in_flight: Lsn,
    stop: bool,
    /// Why flushing stopped.
    failure: Option<SharedFailure>,
    /// Async waiters: the position each waits for.
    wakers: Vec<(Lsn, Waker)>,
}

/// Called on the flusher thread after each successful flush.
pub type FlushedHook = Box<dyn Fn() + Send + Sync>;

struct Shared {
    wal: Arc<Wal>,
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    flushed: FlushedHook,
}

/// Flusher threads: a primary's flushes overlap two at a time (module documentation).
const FLUSHER_THREADS: usize = 2;

pub struct LogFlusher {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl LogFlusher {
    pub fn start(wal: Arc<Wal>, flushed: FlushedHook) -> LogFlusher {
        let shared = Arc::new(Shared {
            wal,
            state: Mutex::new(State {
                requested: 0,
                in_flight: 0,
                stop: false,
                failure: None,
                wakers: Vec::new(),
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            flushed,
        });
        let threads = (0..FLUSHER_THREADS)
            .map(|_| {
                let thread_shared = shared.clone();
                std::thread::Builder::new()
                    .name("hayate-log-flusher".into())
                    .spawn(move || run(&thread_shared))
                    .expect("spawn log flusher thread")
            })
            .collect();
        LogFlusher {
            shared,
            threads: Mutex::new(threads),
        }
    }

    pub fn durable_lsn(&self) -> Lsn {
        self.shared.wal.durable_lsn()
    }

    /// Asks for the log to be durable up to `lsn`; returns at once.
    pub fn request(&self, lsn: Lsn) {
        let mut state = self.shared.state.lock();
        if lsn > state.requested {
            state.requested = lsn;
            self.shared.work.notify_one();
        }
    }

    /// A future that is ready once the log is durable up to `lsn` (requesting it), or with
    /// the error of a failed flush.
    pub fn durable(&self, lsn: Lsn) -> Durable {
        Durable {
            shared: self.shared.clone(),
            lsn,
        }
    }

    /// Stops the thread (pending requests are flushed first).
    pub fn stop(&self) {
        self.shared.state.lock().stop = true;
        self.shared.work.notify_all();
        for thread in std::mem::take(&mut *self.threads.lock()) {
            let _ = thread.join();
        }
        self.shared.done.notify_all();
        let wakers = std::mem::take(&mut self.shared.state.lock().wakers);
        wakers.into_iter().for_each(|(_, waker)| waker.wake());
    }
}

impl Drop for LogFlusher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits for the log to be durable up to a position (`LogFlusher::durable`).
pub struct Durable {
    shared: Arc<Shared>,
    lsn: Lsn,
}

impl Future for Durable {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Result<()>> {
        let shared = &self.shared;
        if shared.wal.durable_lsn() >= self.lsn {
            return Poll::Ready(Ok(()));
        }
        let mut state = shared.state.lock();
        // Checked again under the mutex: the thread wakes waiters under it after a flush.
        if shared.wal.durable_lsn() >= self.lsn {
            return Poll::Ready(Ok(()));
        }
        if let Some(failure) = &state.failure {
            return Poll::Ready(Err(failure.error()));
        }
        if state.stop {
            return Poll::Ready(Err(Error::Poisoned("the database is closing".into())));
        }
        match state.wakers.iter_mut().find(|(lsn, _)| *lsn == self.lsn) {
            Some((_, waker)) if waker.will_wake(context.waker()) => {}
            _ => state.wakers.push((self.lsn, context.waker().clone())),
        }
        if self.lsn > state.requested {
            state.requested = self.lsn;
        }
        // Even when the position was requested already: a flush by another thread (not a
        // flusher) may cover it before any flusher flushes again, and only a flusher wakes
        // waiters (it does when it finds the requests covered).
        shared.work.notify_one();
        Poll::Pending
    }
}

/// Wakes the async waiters whose position is durable (all of them after a failure).
fn wake_covered(shared: &Shared, state: &mut State, all: bool) {
    let durable = shared.wal.durable_lsn();
    let mut index = 0;
    while index < state.wakers.len() {
        if all || state.wakers[index].0 <= durable {
            state.wakers.swap_remove(index).1.wake();
        } else {
            index += 1;
        }
    }
}

fn run(shared: &Shared) {
    loop {
        let target = {
            let mut state = shared.state.lock();
            let covered =
                |state: &State| state.requested <= shared.wal.durable_lsn().max(state.in_flight);
            while covered(&state) && !state.stop {
                // Another thread's flush (a blocking commit's) may have covered waiters.
                wake_covered(shared, &mut state, false);
                shared.work.wait(&mut state);
            }
            if covered(&state) {
                return; // stopping, nothing left to flush (or another thread flushes it)
            }
            state.in_flight = state.requested;
            state.requested
        };
        let result = shared.wal.flush_to(target);
        if result.is_ok() {
            (shared.flushed)();
        }
        let mut state = shared.state.lock();
        if let Err(error) = result {
            log::error!("log flush failed: {error}");
            state.failure = Some(SharedFailure::of(&error));
            state.requested = 0;
            wake_covered(shared, &mut state, true);
            shared.done.notify_all();
            drop(state);
            // The log is poisoned; serve no more requests but let waiters see the failure.
            let mut state = shared.state.lock();
            while !state.stop {
                shared.work.wait(&mut state);
            }
            return;
        }
        wake_covered(shared, &mut state, false);
        shared.done.notify_all();
    }
}

//! Commits of an event loop waiting for the log, with one waiter per loop on the engine.
//!
//! Every commit started on a loop (`hayate_sql::Session::take_pending_commit`) must wait
//! until the log is durable past its record. Waking a task of a loop from the log flusher's
//! thread costs a write to the loop's eventfd (and a context switch when the loop sleeps);
//! per commit, that was most of what a durable commit cost beyond the fdatasync. So:
//! 1. `durable` asks the flusher for the commit's position (`Database::request_log_flush`)
//!    and leaves the task's waker in its loop's list (a thread-local: a connection task
//!    never leaves its loop).
//! 2. One watcher task per loop (spawned by the first waiter, ending when the list is
//!    empty) awaits `Database::log_durable` for the lowest position listed; when the flusher
//!    wakes it, it wakes, inside the loop, every waiter the log now covers.
//! 3. A failed flush is kept: the waiters, and every later one, fail with it.

use std::cell::RefCell;
use std::future::poll_fn;
use std::task::{Poll, Waker};

use hayate_engine::{Database, Error, SharedFailure};

#[derive(Default)]
struct Waiters {
    /// Log position each waiting commit needs durable, and its task's waker.
    waiting: Vec<(u64, Waker)>,
    /// A watcher task is running on this loop.
    watching: bool,
    /// The error of a failed flush.
    failure: Option<SharedFailure>,
}

thread_local! {
    static WAITERS: RefCell<Waiters> = RefCell::new(Waiters::default());
}

/// Waits until the log is durable up to `lsn` (the flush failure otherwise). Call it on an
/// event loop's thread.
pub async fn durable(db: &Database, lsn: u64) -> Result<(), Error> {
    poll_fn(|context| {
        if db.log_durable_lsn() >= lsn {
            return Poll::Ready(Ok(()));
        }
        WAITERS.with(|waiters| {
            let mut waiters = waiters.borrow_mut();
            if let Some(failure) = &waiters.failure {
                return Poll::Ready(Err(failure.error()));
            }
            let waker = context.waker();
            if !waiters
                .waiting
                .iter()
                .any(|(waiting, other)| *waiting == lsn && other.will_wake(waker))
            {
                waiters.waiting.push((lsn, waker.clone()));
            }
            if !waiters.watching {
                waiters.watching = true;
                tokio::spawn(watch(db.clone()));
            }
            db.request_log_flush(lsn);
            Poll::Pending
        })
    })
    .await
}

/// The loop's watcher (step 2 of the module doc).
async fn watch(db: Database) {
    loop {
        let lowest = WAITERS.with(|waiters| {
            let mut waiters = waiters.borrow_mut();
            let lowest = waiters.waiting.iter().map(|(lsn, _)| *lsn).min();
            if lowest.is_none() {
                waiters.watching = false;
            }
            lowest
        });
        let Some(lowest) = lowest else {
            return;
        };
        let result = db.log_durable(lowest).await;
        let durable = db.log_durable_lsn();
        WAITERS.with(|waiters| {
            let mut waiters = waiters.borrow_mut();
            if let Err(error) = result {
                waiters.failure = Some(SharedFailure::of(&error));
            }
            let failed = waiters.failure.is_some();
            waiters.waiting.retain(|(lsn, waker)| {
                let done = failed || *lsn <= durable;
                if done {
                    waker.wake_by_ref();
                }
                !done
            });
        });
    }
}

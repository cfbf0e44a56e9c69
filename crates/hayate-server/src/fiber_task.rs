//! Statements as tasks of their event loop: each runs on a fiber (`hayate_engine::fiber`) that
//! the connection's task drives.
//!
//! The engine and the SQL executor stay synchronous; where they would block, on a fiber they
//! suspend instead, and `run` turns the reason into something the loop awaits:
//! - a page read queued on the loop's own io_uring ring: its completion. The loop's sender task
//!   (`crate::send_batch`), which runs after the connections ready this round, submits every
//!   read queued in the round with one system call; the reaper task (`reaper`) reaps the
//!   completions when the ring's eventfd turns readable;
//! - an instant (an emulated slow device): a timer;
//! - a wake-up (a row or table lock's release, the commit order's advance), which any thread
//!   may fire: the wake-up itself, a future, bounded by a timer;
//! - a turn (a latch or mutex held by someone else, polled): `yield_now`.
//!
//! Meanwhile the loop serves its other connections. The connection's interrupt flag is made
//! current for each stretch the fiber runs (`hayate_sql::interrupt`), so a cancel reaches the
//! statement it was meant for even when fibers of several connections interleave.

use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use hayate_engine::fiber::{Fiber, Step, Wait};
use hayate_sql::interrupt::{self, Interrupt};
use hayate_sql::types::zone::SessionZone;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Runs `work` on a fiber of this event loop, with `interrupt` and `zone` (the session's
/// time zone) current while it runs; the returned future is ready when `work` returned.
pub(crate) async fn run<T>(
    interrupt: &Interrupt,
    zone: &SessionZone,
    work: impl FnOnce() -> T,
) -> T {
    LoopBound::new(async move {
        let mut fiber = Fiber::new(work);
        loop {
            let step = {
                let _entered = interrupt::enter(interrupt);
                let _zone = zone.enter();
                fiber.resume()
            };
            match step {
                Step::Done(value) => return value,
                Step::Wait(Wait::Io(read)) => {
                    crate::send_batch::wake_sender();
                    read.await
                }
                Step::Wait(Wait::Until(deadline)) => {
                    tokio::time::sleep_until(deadline.into()).await
                }
                Step::Wait(Wait::Wakeup(wakeup, deadline)) => {
                    let _ = tokio::time::timeout_at(deadline.into(), wakeup).await;
                }
                Step::Wait(Wait::Yield) => tokio::task::yield_now().await,
            }
        }
    })
    .await
}

/// Gives the calling thread (an event loop, before it runs, after `send_batch::install`) its
/// read ring and returns the task that reaps the ring's completions. None if io_uring is
/// unavailable: reads then block. Reads are submitted per round by the sender task if the loop
/// has one, else each at once.
pub(crate) fn reaper() -> Option<impl Future<Output = ()> + Send> {
    let installed = if crate::send_batch::installed() {
        hayate_engine::install_thread_ring_deferred()
    } else {
        hayate_engine::install_thread_ring()
    };
    match installed {
        Ok(fd) => Some(reap(fd)),
        Err(error) => {
            log::warn!("no io_uring ring for the event loop, page misses block it: {error}");
            None
        }
    }
}

struct EventFd(RawFd);

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Wakes the fibers whose reads completed, each time the ring's eventfd signals. Readiness is
/// cleared before reaping: a completion posted after the reap signals again.
async fn reap(fd: RawFd) {
    // SAFETY: the eventfd belongs to this thread's ring, which lives until the thread ends,
    // after its runtime (and this task) was dropped.
    let eventfd = match unsafe { AsyncFd::register_with_interest(EventFd(fd), Interest::READABLE) }
    {
        Ok(eventfd) => eventfd,
        Err(error) => {
            log::error!("cannot watch the event loop's read ring: {error}");
            return;
        }
    };
    loop {
        match eventfd.readable().await {
            Ok(mut ready) => {
                ready.clear_ready();
                hayate_engine::reap_thread_ring(false);
            }
            Err(error) => {
                log::error!("watching the event loop's read ring failed: {error}");
                return;
            }
        }
    }
}

/// A future that must stay on the thread that created it (it holds a fiber, whose stack refers
/// to that thread's ring and completion slots).
struct LoopBound<F> {
    future: F,
    thread: std::thread::ThreadId,
}

impl<F> LoopBound<F> {
    fn new(future: F) -> LoopBound<F> {
        LoopBound {
            future,
            thread: std::thread::current().id(),
        }
    }
}

// SAFETY: a connection's task runs on a single-threaded runtime owned by its event loop's
// thread: it is polled and dropped only there (`poll` checks), so what it holds never crosses
// threads even though the task's type says it may.
unsafe impl<F> Send for LoopBound<F> {}

impl<F: Future> Future for LoopBound<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<F::Output> {
        assert_eq!(
            std::thread::current().id(),
            self.thread,
            "a statement's fiber left its event loop"
        );
        // SAFETY: `future` is pinned structurally: it is never moved out of `self`.
        unsafe { self.map_unchecked_mut(|bound| &mut bound.future) }.poll(context)
    }
}

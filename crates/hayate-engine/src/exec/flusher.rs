//! The log flusher: one thread per database that makes the log durable on request, so a task
//! executor never blocks on an fdatasync while it has other work (page reads, other tasks).
//!
//! Protocol:
//! 1. An executor whose tasks wait for commit positions calls `request(lsn)` (non-blocking).
//! 2. The flusher thread wakes, calls `Wal::flush_to` up to the highest position requested
//!    (group commit: every commit logged before the write shares the fdatasync), notifies, and
//!    goes on while requests are ahead of the durable position.
//! 3. Executors poll `durable_lsn()`; an executor with nothing else to do waits in
//!    `wait_durable` until the position it needs is durable.
//!
//! A failed flush poisons the log (the WAL refuses further writes); waiters get the error.

use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::wal::{Lsn, Wal};

struct State {
    requested: Lsn,
    stop: bool,
    failure: Option<String>,
}

struct Shared {
    wal: Arc<Wal>,
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
}

pub struct LogFlusher {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LogFlusher {
    pub fn start(wal: Arc<Wal>) -> LogFlusher {
        let shared = Arc::new(Shared {
            wal,
            state: Mutex::new(State {
                requested: 0,
                stop: false,
                failure: None,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("hayate-log-flusher".into())
            .spawn(move || run(&thread_shared))
            .expect("spawn log flusher thread");
        LogFlusher {
            shared,
            thread: Mutex::new(Some(thread)),
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

    /// Waits until the log is durable up to `lsn` (requesting it if needed).
    pub fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        self.request(lsn);
        let mut state = self.shared.state.lock();
        loop {
            if self.shared.wal.durable_lsn() >= lsn {
                return Ok(());
            }
            if let Some(failure) = &state.failure {
                return Err(Error::Poisoned(failure.clone()));
            }
            if state.stop {
                return Err(Error::Poisoned("the database is closing".into()));
            }
            self.shared.done.wait(&mut state);
        }
    }

    /// Stops the thread (pending requests are flushed first).
    pub fn stop(&self) {
        self.shared.state.lock().stop = true;
        self.shared.work.notify_all();
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
        self.shared.done.notify_all();
    }
}

impl Drop for LogFlusher {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared) {
    loop {
        let target = {
            let mut state = shared.state.lock();
            while state.requested <= shared.wal.durable_lsn() && !state.stop {
                shared.work.wait(&mut state);
            }
            if state.requested <= shared.wal.durable_lsn() {
                return; // stopping, nothing left to flush
            }
            state.requested
        };
        let result = shared.wal.flush_to(target);
        let mut state = shared.state.lock();
        if let Err(error) = result {
            log::error!("log flush failed: {error}");
            state.failure = Some(error.to_string());
            state.requested = 0;
            shared.done.notify_all();
            drop(state);
            // The log is poisoned; serve no more requests but let waiters see the failure.
            let mut state = shared.state.lock();
            while !state.stop {
                shared.work.wait(&mut state);
            }
            return;
        }
        shared.done.notify_all();
    }
}

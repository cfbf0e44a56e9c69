//! The background writer's thread: woken when the fraction of dirty frames passes the target
//! (and every 50 ms), it runs the pool's write-back (`BufferPool::write_back_to_target`), so
//! that a miss rarely has to write a victim.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub(crate) struct WriterHandle {
    shared: Arc<WriterShared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct WriterShared {
    state: Mutex<WriterState>,
    condvar: Condvar,
}

#[derive(Default)]
struct WriterState {
    wake: bool,
    stop: bool,
}

impl WriterHandle {
    pub fn wake(&self) {
        let mut state = self.shared.state.lock();
        if !state.wake {
            state.wake = true;
            self.shared.condvar.notify_one();
        }
    }

    /// Starts the thread. Each time it is woken (or every 50 ms) it runs `work`, which writes
    /// dirty pages back; `work` returns `None` once the pool is gone, and the thread ends.
    pub fn start(&self, work: impl Fn() -> Option<crate::Result<()>> + Send + 'static) {
        let shared = self.shared.clone();
        let thread = std::thread::Builder::new()
            .name("hayate-bgwriter".into())
            .spawn(move || run(work, shared))
            .expect("spawn background writer");
        *self.thread.lock() = Some(thread);
    }

    pub fn stop(&self) {
        self.shared.state.lock().stop = true;
        self.shared.condvar.notify_all();
        if let Some(thread) = self.thread.lock().take() {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

fn run(work: impl Fn() -> Option<crate::Result<()>>, shared: Arc<WriterShared>) {
    loop {
        {
            let mut state = shared.state.lock();
            if !state.wake && !state.stop {
                shared
                    .condvar
                    .wait_for(&mut state, Duration::from_millis(50));
            }
            if state.stop {
                return;
            }
            state.wake = false;
        }
        match work() {
            None => return,
            Some(Ok(())) => {}
            Some(Err(error)) => {
                log::error!("background write-back failed: {error}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

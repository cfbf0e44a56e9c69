//! The background writer: keeps the fraction of dirty frames below the target so that a miss
//! rarely has to write a victim. It writes batches of dirty, unpinned frames found ahead of the
//! clock hand, each batch in one store call (one sequential segment write when out of place).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::pool::BufferPool;

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

pub(super) fn start(pool: &Arc<BufferPool>) {
    let weak = Arc::downgrade(pool);
    let shared = pool.writer.shared.clone();
    let thread = std::thread::Builder::new()
        .name("hayate-bgwriter".into())
        .spawn(move || run(weak, shared))
        .expect("spawn background writer");
    *pool.writer.thread.lock() = Some(thread);
}

fn run(pool: Weak<BufferPool>, shared: Arc<WriterShared>) {
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
        let Some(pool) = pool.upgrade() else { return };
        if let Err(error) = write_some(&pool) {
            log::error!("background write-back failed: {error}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Writes batches until the dirty fraction is under the target.
fn write_some(pool: &BufferPool) -> crate::Result<()> {
    let frame_count = pool.frames.len();
    let target = (frame_count as f64 * pool.config.dirty_fraction_target) as usize;
    let batch_size = pool.config.write_batch_pages.max(1);
    let mut scanned = 0;
    let mut position = 0;
    while pool.dirty_count.load(Ordering::Relaxed) > target / 2 && scanned < frame_count {
        let mut batch = Vec::with_capacity(batch_size);
        while batch.len() < batch_size && scanned < frame_count {
            let frame = &pool.frames[position];
            if frame.dirty.load(Ordering::Relaxed) && !frame.io_busy.load(Ordering::Relaxed) {
                batch.push(position);
            }
            position = (position + 1) % frame_count;
            scanned += 1;
        }
        if batch.is_empty() {
            break;
        }
        let operation = pool.operation();
        let written = pool.write_back(&batch, true)?;
        drop(operation);
        pool.count_background_writes(written);
    }
    Ok(())
}

//! The checkpoint gate: operations that change pages hold it shared, a checkpoint's capture
//! holds it exclusively.
//!
//! Why not an RwLock: a thread that must write back a dirty victim may already hold page
//! latches (a lookup that misses). With a writer-preferring RwLock it would queue behind a
//! checkpoint waiting for the gate, the checkpoint waits for a writer still in its operation, and
//! that writer may wait for the lookup's latch: a cycle. So there are two ways in:
//! 1. `enter` (a new operation, holding no latches): waits while a checkpoint wants or holds the
//!    gate, so checkpoints are not starved;
//! 2. `enter_holding_latches` (an eviction write-back): waits only while a checkpoint holds the
//!    gate. The capture never waits for latched work, so it always finishes.
//!
//! Entries are re-entrant per task: nested calls do not count again. The nesting depth is the
//! running task's (`fiber::gate_depth`): fibers of one thread enter and leave independently.
//! On a fiber, a wait for the gate suspends the fiber instead of blocking its thread (the
//! operation the gate waits for may be another fiber of the same thread).

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::fiber;

/// Waits for a change of the gate: a suspension on a fiber (the mutex is released meanwhile),
/// the condition variable otherwise.
fn wait_for_change<'a>(gate: &'a Gate, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    if fiber::on_fiber() {
        drop(state);
        fiber::suspend(fiber::Wait::Yield);
        gate.state.lock()
    } else {
        let mut state = state;
        gate.changed.wait(&mut state);
        state
    }
}

#[derive(Default)]
struct State {
    readers: u32,
    wanted: bool,
    held: bool,
}

#[derive(Default)]
pub struct Gate {
    state: Mutex<State>,
    changed: Condvar,
}

/// A shared hold; released on drop.
pub struct GateShared<'a> {
    gate: Option<&'a Gate>,
}

/// The exclusive hold; released on drop.
pub struct GateExclusive<'a> {
    gate: &'a Gate,
}

impl Gate {
    pub fn enter(&self) -> GateShared<'_> {
        self.enter_shared(false)
    }

    pub fn enter_holding_latches(&self) -> GateShared<'_> {
        self.enter_shared(true)
    }

    fn enter_shared(&self, holding_latches: bool) -> GateShared<'_> {
        let depth = fiber::gate_depth();
        fiber::set_gate_depth(depth + 1);
        if depth > 0 {
            return GateShared { gate: None };
        }
        let mut state = self.state.lock();
        while state.held || (state.wanted && !holding_latches) {
            state = wait_for_change(self, state);
        }
        state.readers += 1;
        GateShared { gate: Some(self) }
    }

    /// Waits for every shared holder to leave and keeps new operations out. The holder counts
    /// as a shared holder too, so it may change pages itself.
    pub fn close(&self) -> GateExclusive<'_> {
        let mut state = self.state.lock();
        while state.wanted || state.held {
            state = wait_for_change(self, state);
        }
        state.wanted = true;
        while state.readers > 0 {
            state = wait_for_change(self, state);
        }
        state.wanted = false;
        state.held = true;
        fiber::set_gate_depth(fiber::gate_depth() + 1);
        GateExclusive { gate: self }
    }
}

impl Drop for GateShared<'_> {
    fn drop(&mut self) {
        fiber::set_gate_depth(fiber::gate_depth() - 1);
        if let Some(gate) = self.gate {
            let mut state = gate.state.lock();
            state.readers -= 1;
            if state.readers == 0 {
                gate.changed.notify_all();
            }
        }
    }
}

impl Drop for GateExclusive<'_> {
    fn drop(&mut self) {
        fiber::set_gate_depth(fiber::gate_depth() - 1);
        let mut state = self.gate.state.lock();
        state.held = false;
        self.gate.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn latched_entry_passes_a_waiting_checkpoint_but_not_a_holding_one() {
        let gate = Arc::new(Gate::default());
        let operation = gate.enter();
        let closed = Arc::new(AtomicBool::new(false));
        let checkpoint = {
            let gate = gate.clone();
            let closed = closed.clone();
            std::thread::spawn(move || {
                let hold = gate.close();
                closed.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                drop(hold);
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !closed.load(Ordering::SeqCst),
            "checkpoint waits for the operation"
        );
        // Another thread evicting while holding latches must get in although a checkpoint waits.
        let evictor = {
            let gate = gate.clone();
            std::thread::spawn(move || drop(gate.enter_holding_latches()))
        };
        evictor.join().unwrap();
        drop(operation);
        checkpoint.join().unwrap();
        assert!(closed.load(Ordering::SeqCst));
        drop(gate.enter());
    }

    #[test]
    fn nested_entries_do_not_block() {
        let gate = Gate::default();
        let hold = gate.close();
        let nested = gate.enter();
        drop(nested);
        drop(hold);
        let outer = gate.enter();
        let inner = gate.enter_holding_latches();
        drop(inner);
        drop(outer);
        assert_eq!(gate.state.lock().readers, 0);
    }
}

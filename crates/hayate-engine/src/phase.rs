//! Where a worker thread's time goes: CPU, waiting for page reads, waiting for page writes,
//! waiting for the log. The lab uses it for the time split of a run and for transaction
//! timelines.
//!
//! Accounting is per thread and off by default; when off, `enter` costs one thread-local
//! access. Lifecycle on a worker thread:
//! 1. `start_accounting(record_spans_until)`: the thread's time counts as `Phase::Cpu` from now on;
//!    spans are also recorded until the given instant (a short window: spans cost memory).
//! 2. The engine brackets its waits: `let _guard = phase::enter(Phase::ReadIo);` around a
//!    page read, `WriteIo` around a page write the thread does itself (an eviction of a dirty
//!    page), `LogWait` around waiting for the log to be durable. Guards nest: on drop the
//!    previous phase resumes.
//! 3. `finish_accounting()` stops accounting and returns the totals and the recorded spans.
//!
//! On a fiber, `enter` does nothing: a fiber's wait suspends it and other fibers run on the
//! thread meanwhile, so the host that drives the fibers enters the phases for the thread
//! (`fiber::Idle` says when it blocks and for what). Imports only `fiber`, a leaf.

use std::cell::RefCell;
use std::time::{Duration, Instant};

/// What a thread is doing; its value indexes `PhaseReport::totals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Running: any time not in one of the waits below.
    Cpu = 0,
    /// Waiting for page reads from the store.
    ReadIo = 1,
    /// Waiting for page writes the thread does itself (such as writing back a dirty victim).
    WriteIo = 2,
    /// Waiting for the log to be durable.
    LogWait = 3,
    /// Waiting for a row lock another thread's transaction holds.
    LockWait = 4,
}

impl Phase {
    /// Every phase, in index order.
    pub const ALL: [Phase; 5] = [
        Phase::Cpu,
        Phase::ReadIo,
        Phase::WriteIo,
        Phase::LogWait,
        Phase::LockWait,
    ];
}

/// A stretch of time a thread spent in one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseSpan {
    /// When the thread entered the phase.
    pub start: Instant,
    /// When it left it (for another phase, or at `finish_accounting`).
    pub end: Instant,
    /// The phase the thread was in.
    pub phase: Phase,
    /// Tasks the thread had in flight (as last set with `set_in_flight`).
    pub in_flight: u32,
}

/// What `finish_accounting` returns.
#[derive(Debug, Clone, Default)]
pub struct PhaseReport {
    /// Time per phase, indexed by `Phase as usize`.
    pub totals: [Duration; Phase::ALL.len()],
    /// The stretches that began before `start_accounting`'s `record_spans_until`, in order.
    pub spans: Vec<PhaseSpan>,
}

impl PhaseReport {
    /// Time spent in `phase`.
    pub fn total(&self, phase: Phase) -> Duration {
        self.totals[phase as usize]
    }

    /// Time in all phases together: the wall time from start to finish of accounting.
    pub fn wall(&self) -> Duration {
        self.totals.iter().sum()
    }

    /// Adds `other`'s totals to these (its spans are not copied).
    pub fn merge(&mut self, other: &PhaseReport) {
        for (total, other) in self.totals.iter_mut().zip(other.totals) {
            *total += other;
        }
    }
}

struct State {
    current: Phase,
    since: Instant,
    totals_ns: [u64; Phase::ALL.len()],
    spans: Vec<PhaseSpan>,
    record_until: Option<Instant>,
    in_flight: u32,
}

impl State {
    /// Closes the current phase's stretch at `now` and starts `next`.
    fn switch(&mut self, next: Phase, now: Instant) -> Phase {
        let previous = self.current;
        self.totals_ns[previous as usize] += now.duration_since(self.since).as_nanos() as u64;
        if self.record_until.is_some_and(|until| self.since < until) {
            self.spans.push(PhaseSpan {
                start: self.since,
                end: now,
                phase: previous,
                in_flight: self.in_flight,
            });
        }
        self.current = next;
        self.since = now;
        previous
    }
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Starts accounting on this thread (see the module docs).
pub fn start_accounting(record_spans_until: Option<Instant>) {
    STATE.with(|state| {
        *state.borrow_mut() = Some(State {
            current: Phase::Cpu,
            since: Instant::now(),
            totals_ns: [0; Phase::ALL.len()],
            spans: Vec::new(),
            record_until: record_spans_until,
            in_flight: 0,
        });
    });
}

/// Stops accounting on this thread and returns what it measured (empty if never started).
pub fn finish_accounting() -> PhaseReport {
    STATE.with(|state| {
        let Some(mut state) = state.borrow_mut().take() else {
            return PhaseReport::default();
        };
        let current = state.current;
        state.switch(current, Instant::now());
        PhaseReport {
            totals: state.totals_ns.map(Duration::from_nanos),
            spans: state.spans,
        }
    })
}

/// Records how many tasks the thread has in flight, for the spans that follow.
pub fn set_in_flight(tasks: u32) {
    STATE.with(|state| {
        if let Some(state) = state.borrow_mut().as_mut() {
            state.in_flight = tasks;
        }
    });
}

/// Enters `phase` until the guard drops; a no-op when accounting is off, and on a fiber: a
/// fiber's waits suspend it while other fibers run, so its host accounts the thread's time
/// (`fiber::run_all` tells the host when the thread would block, and for what).
#[must_use = "the phase ends when the guard drops"]
pub fn enter(phase: Phase) -> PhaseGuard {
    if crate::fiber::on_fiber() {
        return PhaseGuard { previous: None };
    }
    let previous = STATE.with(|state| {
        let mut state = state.borrow_mut();
        let state = state.as_mut()?;
        if state.current == phase {
            return None;
        }
        Some(state.switch(phase, Instant::now()))
    });
    PhaseGuard { previous }
}

/// The phase entered by `enter`; the previous one resumes when it drops.
pub struct PhaseGuard {
    previous: Option<Phase>,
}

impl Drop for PhaseGuard {
    fn drop(&mut self) {
        let Some(previous) = self.previous else {
            return;
        };
        STATE.with(|state| {
            if let Some(state) = state.borrow_mut().as_mut() {
                state.switch(previous, Instant::now());
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(duration: Duration) {
        let until = Instant::now() + duration;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn phases_nest_and_sum_to_the_wall_time() {
        let started = Instant::now();
        start_accounting(Some(started + Duration::from_secs(60)));
        busy(Duration::from_millis(2));
        {
            let _read = enter(Phase::ReadIo);
            busy(Duration::from_millis(3));
            {
                let _write = enter(Phase::WriteIo);
                busy(Duration::from_millis(4));
            }
            busy(Duration::from_millis(1));
        }
        set_in_flight(7);
        {
            let _log = enter(Phase::LogWait);
            let _again = enter(Phase::LogWait); // same phase: no new span
            busy(Duration::from_millis(2));
        }
        let report = finish_accounting();
        let wall = started.elapsed();
        assert!(report.total(Phase::ReadIo) >= Duration::from_millis(4));
        assert!(report.total(Phase::WriteIo) >= Duration::from_millis(4));
        assert!(report.total(Phase::LogWait) >= Duration::from_millis(2));
        assert!(report.total(Phase::Cpu) >= Duration::from_millis(2));
        assert!(report.wall() <= wall);
        let phases: Vec<Phase> = report.spans.iter().map(|span| span.phase).collect();
        assert_eq!(
            phases,
            [
                Phase::Cpu,
                Phase::ReadIo,
                Phase::WriteIo,
                Phase::ReadIo,
                Phase::Cpu,
                Phase::LogWait,
                Phase::Cpu
            ]
        );
        assert_eq!(report.spans[5].in_flight, 7);
        for pair in report.spans.windows(2) {
            assert_eq!(pair[0].end, pair[1].start, "spans must be contiguous");
        }
        // Off again: guards are no-ops and a second finish is empty.
        drop(enter(Phase::ReadIo));
        assert_eq!(finish_accounting().wall(), Duration::ZERO);
    }

    #[test]
    fn spans_stop_after_the_window_but_totals_go_on() {
        start_accounting(Some(Instant::now()));
        busy(Duration::from_millis(1));
        {
            let _read = enter(Phase::ReadIo);
            busy(Duration::from_millis(1));
        }
        let report = finish_accounting();
        assert!(report.spans.len() <= 1, "{:?}", report.spans);
        assert!(report.total(Phase::ReadIo) >= Duration::from_millis(1));
    }
}

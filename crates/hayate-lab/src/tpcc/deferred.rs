//! Deferred Delivery (clause 2.7.2): a terminal's Delivery queues a request and goes on; the
//! request's ten districts are delivered later, each as its own transaction (clause 2.7.4.2
//! lets the deferred execution be up to ten), by executors.
//!
//! Each district belongs to one executor (district `i` of the run, counted from warehouse 1
//! district 1, to executor `i % executors`), which serves its districts' requests in the order
//! they were queued. So no two Deliveries ever race for the same district's oldest order:
//! with the Delivery done inline, every terminal's Delivery claims district 1's oldest order
//! first and the others queue behind its row lock district after district (at a 5% buffer,
//! median 56 ms against 2.5 ms in memory); and skipping a held order instead lets a later
//! order be delivered first, leaving a gap when the holder crashes (consistency condition 3).
//!
//! A Delivery counts as committed when its last district committed; its latency runs from
//! the queueing to then. Executors stop at the run's deadline like the terminals; requests
//! not finished then are counted as pending, not committed. With zero think time nothing
//! else would hold the terminals back when the executors fall behind (the queue, and so the
//! latency, would grow for the whole run), so a terminal waits to queue while
//! `MAX_OUTSTANDING` Deliveries of its warehouse are queued or running (clause 2.7.2.2 asks
//! that 90% of them complete within 80 s; this keeps them within tens of milliseconds).
//!
//! Lifecycle: `DeliveryQueue::new` for a job; terminals `submit`; each executor runs
//! `run_executor` until the deadline (a fiber of a worker thread, or a thread with its own
//! session); `pending` after all stopped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hayate_engine::fiber::{self, Wakeup};
use parking_lot::{Condvar, Mutex, MutexGuard};

use super::metrics::TpccOutcome;
use super::spec::{Scale, DISTRICTS_PER_WAREHOUSE};
use super::txn::{DeliveryInput, TxnInput, TxnType};
use crate::driver::{DriverError, DriverResult};

/// Longest a fiber's wait for work or room lasts before it looks again.
const RECHECK: Duration = Duration::from_millis(5);

/// Executors of a run: one per district, at most `terminals` (peers give each its own
/// connection and thread).
pub fn executors_for(scale: &Scale, terminals: u32) -> u32 {
    scale.districts().min(terminals).max(1)
}

/// Deliveries of one warehouse queued or running before a terminal waits to queue another.
pub const MAX_OUTSTANDING: u32 = 10;

/// One queued Delivery.
struct Request {
    input: DeliveryInput,
    queued: Instant,
    /// Districts not delivered yet.
    remaining: AtomicU32,
}

/// Deliveries of one warehouse queued or running, and terminals waiting to queue one.
#[derive(Default)]
struct Outstanding {
    state: Mutex<(u32, Vec<Wakeup>)>,
    room: Condvar,
}

#[derive(Default)]
struct Inbox {
    /// (request, district) in queueing order.
    work: VecDeque<(Arc<Request>, u32)>,
    /// Executor fibers waiting for work.
    waiting: Vec<Wakeup>,
}

/// The work queues of one run's executors.
pub struct DeliveryQueue {
    inboxes: Vec<(Mutex<Inbox>, Condvar)>,
    /// By warehouse (W_ID - 1).
    outstanding: Vec<Outstanding>,
    /// An executor stopped on an error: its districts' Deliveries would never finish, so
    /// terminals stop queueing (and waiting for room).
    failed: std::sync::atomic::AtomicBool,
}

impl DeliveryQueue {
    pub fn new(scale: &Scale, executors: u32) -> DeliveryQueue {
        DeliveryQueue {
            inboxes: (0..executors.max(1))
                .map(|_| (Mutex::new(Inbox::default()), Condvar::new()))
                .collect(),
            outstanding: (0..scale.warehouses)
                .map(|_| Outstanding::default())
                .collect(),
            failed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// An executor failed: wakes every terminal waiting for room (`submit` fails from now).
    fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        for outstanding in &self.outstanding {
            wake(&mut outstanding.state.lock().1, &outstanding.room);
        }
    }

    pub fn executors(&self) -> u32 {
        self.inboxes.len() as u32
    }

    fn executor_of(&self, w_id: u32, d_id: u32) -> usize {
        let district = (w_id - 1) * DISTRICTS_PER_WAREHOUSE + (d_id - 1);
        district as usize % self.inboxes.len()
    }

    /// Queues a Delivery of all ten districts of `input.w_id` (clause 2.7.2.1: the terminal
    /// goes on at once), once fewer than `MAX_OUTSTANDING` of the warehouse's are (suspending
    /// on a fiber, blocking off one); false when the deadline came first (not queued). Its
    /// latency counts from the call, the wait for room included. Fails once an executor did.
    pub fn submit(&self, input: &DeliveryInput, deadline: Instant) -> DriverResult<bool> {
        let queued = Instant::now();
        let outstanding = &self.outstanding[input.w_id as usize - 1];
        loop {
            if self.failed.load(Ordering::Acquire) {
                return Err(DriverError::fatal(
                    "a Delivery executor failed (its error is reported with the run's)",
                ));
            }
            let mut state = outstanding.state.lock();
            if state.0 < MAX_OUTSTANDING {
                state.0 += 1;
                break;
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            wait(state, |state| &mut state.1, &outstanding.room, deadline);
        }
        let request = Arc::new(Request {
            input: *input,
            queued,
            remaining: AtomicU32::new(DISTRICTS_PER_WAREHOUSE),
        });
        for d_id in 1..=DISTRICTS_PER_WAREHOUSE {
            let (inbox, ready) = &self.inboxes[self.executor_of(input.w_id, d_id)];
            let mut inbox = inbox.lock();
            inbox.work.push_back((request.clone(), d_id));
            wake(&mut inbox.waiting, ready);
        }
        Ok(true)
    }

    /// A Delivery of the warehouse finished: a waiting terminal may queue one.
    fn finished(&self, w_id: u32) {
        let outstanding = &self.outstanding[w_id as usize - 1];
        let mut state = outstanding.state.lock();
        state.0 -= 1;
        wake(&mut state.1, &outstanding.room);
    }

    /// Requests queued and not finished (after the executors stopped: left undone).
    pub fn pending(&self) -> u64 {
        let mut pending = std::collections::HashSet::new();
        for (inbox, _) in &self.inboxes {
            for (request, _) in &inbox.lock().work {
                pending.insert(Arc::as_ptr(request));
            }
        }
        pending.len() as u64
    }

    /// The executor's next district to deliver, waiting for one until `deadline` (suspending
    /// on a fiber, blocking off one); `None` once the deadline passed.
    fn next(&self, executor: u32, deadline: Instant) -> Option<(Arc<Request>, u32)> {
        let (inbox, ready) = &self.inboxes[executor as usize];
        loop {
            if Instant::now() >= deadline {
                return None;
            }
            let guard = inbox.lock();
            if let Some(work) = guard.work.front() {
                return Some(work.clone());
            }
            wait(guard, |inbox| &mut inbox.waiting, ready, deadline);
        }
    }

    /// Takes the district `next` returned off the executor's queue (it stays queued while it
    /// runs, so that `pending` counts a request whose run was cut short).
    fn done(&self, executor: u32) {
        self.inboxes[executor as usize].0.lock().work.pop_front();
    }
}

/// Waits, at most until `deadline`, for a `wake` of the list `waiting` picks out of the
/// guarded state (a fiber suspends, for `RECHECK` at most) or of `signal` (a thread blocks).
fn wait<T>(
    mut guard: MutexGuard<'_, T>,
    waiting: fn(&mut T) -> &mut Vec<Wakeup>,
    signal: &Condvar,
    deadline: Instant,
) {
    if fiber::on_fiber() {
        let wakeup = Wakeup::new();
        let list = waiting(&mut guard);
        // Wake-ups of waits that ended by their timeout stay listed until the next event
        // fires them; past a few, they are fired now (their waits are over: nothing wakes).
        if list.len() >= 16 {
            fiber::fire_all(list);
        }
        list.push(wakeup.clone());
        drop(guard);
        fiber::wait_for_wakeup(wakeup, deadline.min(Instant::now() + RECHECK));
    } else {
        signal.wait_until(&mut guard, deadline);
    }
}

/// Ends the waits on `waiting` and `signal` (called under their mutex).
fn wake(waiting: &mut Vec<Wakeup>, signal: &Condvar) {
    fiber::fire_all(waiting);
    signal.notify_all();
}

/// Runs executor `executor` until `deadline`: each district with `deliver` (a Delivery of
/// that district alone, dated when it runs), retried on retryable failures; records a
/// Delivery when its last district committed. Returns what it measured and how many
/// districts it delivered (commits that wrote). An error makes `submit` fail too.
pub fn run_executor(
    queue: &DeliveryQueue,
    executor: u32,
    deadline: Instant,
    deliver: &mut dyn FnMut(&DeliveryInput) -> DriverResult<u32>,
) -> DriverResult<(TpccOutcome, u64)> {
    let result = execute(queue, executor, deadline, deliver);
    if result.is_err() {
        queue.fail();
    }
    result
}

fn execute(
    queue: &DeliveryQueue,
    executor: u32,
    deadline: Instant,
    deliver: &mut dyn FnMut(&DeliveryInput) -> DriverResult<u32>,
) -> DriverResult<(TpccOutcome, u64)> {
    let mut outcome = TpccOutcome::default();
    let mut delivered = 0;
    while let Some((request, d_id)) = queue.next(executor, deadline) {
        let input = DeliveryInput {
            d_id: Some(d_id),
            date: super::spec::now_micros(),
            ..request.input
        };
        loop {
            match deliver(&input) {
                Ok(count) => {
                    delivered += u64::from(count);
                    break;
                }
                Err(error) if error.retryable => {
                    if Instant::now() >= deadline {
                        return Ok((outcome, delivered));
                    }
                    outcome.retry(TxnType::Delivery, &error);
                    fiber::pause();
                }
                Err(error) => {
                    return Err(DriverError::fatal(format!("deferred delivery: {error}")));
                }
            }
        }
        queue.done(executor);
        if request.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            outcome.record(TxnType::Delivery, request.queued.elapsed());
            queue.finished(request.input.w_id);
        }
    }
    Ok((outcome, delivered))
}

/// Hands a Delivery to the executors when they run deferred (waiting for room until the
/// deadline); true when the terminal is done with it.
pub fn defer(
    input: &TxnInput,
    deliveries: Option<&DeliveryQueue>,
    deadline: Instant,
) -> DriverResult<bool> {
    match (input, deliveries) {
        (TxnInput::Delivery(delivery), Some(queue)) => {
            queue.submit(delivery, deadline)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(w_id: u32, carrier_id: u32) -> DeliveryInput {
        DeliveryInput {
            w_id,
            carrier_id,
            date: 0,
            d_id: None,
        }
    }

    #[test]
    fn each_district_goes_to_one_executor_in_queueing_order() {
        let queue = DeliveryQueue::new(&Scale::standard(2), 7);
        let later = Instant::now() + Duration::from_secs(5);
        for (w_id, carrier_id) in [(1, 1), (2, 2), (1, 3)] {
            assert!(queue.submit(&input(w_id, carrier_id), later).unwrap());
        }
        assert_eq!(queue.pending(), 3);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = Vec::new();
        for executor in 0..queue.executors() {
            let mut deliver = |input: &DeliveryInput| {
                seen.push((executor, input.w_id, input.d_id.unwrap(), input.carrier_id));
                Ok(1)
            };
            // Nothing more arrives: the executor drains its queue and stops at the deadline.
            let stop = Instant::now() + Duration::from_millis(300);
            run_executor(&queue, executor, stop.min(deadline), &mut deliver).unwrap();
        }
        assert_eq!(queue.pending(), 0);
        assert_eq!(seen.len(), 30);
        for w_id in 1..=2 {
            for d_id in 1..=DISTRICTS_PER_WAREHOUSE {
                let runs: Vec<_> = (seen.iter())
                    .filter(|run| run.1 == w_id && run.2 == d_id)
                    .collect();
                let executor = ((w_id - 1) * 10 + d_id - 1) % 7;
                assert!(runs.iter().all(|run| run.0 == executor), "{runs:?}");
                let carriers: Vec<u32> = runs.iter().map(|run| run.3).collect();
                let expected = if w_id == 1 { vec![1, 3] } else { vec![2] };
                assert_eq!(carriers, expected, "w {w_id} d {d_id}");
            }
        }
    }

    #[test]
    fn a_delivery_counts_once_its_last_district_committed() {
        let queue = DeliveryQueue::new(&Scale::standard(1), 2);
        assert!(queue.submit(&input(1, 1), Instant::now()).unwrap());
        let deadline = || Instant::now() + Duration::from_millis(300);
        let mut failures = 1;
        let mut deliver = |_: &DeliveryInput| {
            if failures > 0 {
                failures -= 1;
                return Err(DriverError::retryable("deadlock detected"));
            }
            Ok(1)
        };
        let (first, delivered) = run_executor(&queue, 0, deadline(), &mut deliver).unwrap();
        assert_eq!(delivered, 5);
        // Executor 0 did districts 1, 3, 5, 7, 9 (one retried): the request is not done.
        assert_eq!(first.per_type[TxnType::Delivery.index()].committed, 0);
        assert_eq!(first.retries.get("delivery: deadlock"), Some(&1));
        assert_eq!(queue.pending(), 1);
        let (second, _) = run_executor(&queue, 1, deadline(), &mut deliver).unwrap();
        assert_eq!(second.per_type[TxnType::Delivery.index()].committed, 1);
        assert_eq!(queue.pending(), 0);
    }

    #[test]
    fn a_waiting_executor_wakes_for_work_queued_by_another_thread() {
        let queue = DeliveryQueue::new(&Scale::standard(1), 1);
        let deadline = Instant::now() + Duration::from_secs(2);
        let outcome = std::thread::scope(|scope| {
            let runner = scope.spawn(|| run_executor(&queue, 0, deadline, &mut |_| Ok(1)));
            std::thread::sleep(Duration::from_millis(50));
            assert!(queue.submit(&input(1, 1), deadline).unwrap());
            runner.join().unwrap().unwrap().0
        });
        assert_eq!(outcome.per_type[TxnType::Delivery.index()].committed, 1);
        let latency = outcome.per_type[TxnType::Delivery.index()].latency_sum_ns;
        // Not woken, it would have found the work only at the deadline, 1.95 s after.
        assert!(latency < 1_500_000_000, "woken late: {latency} ns");
    }

    #[test]
    fn a_terminal_waits_to_queue_while_the_warehouse_has_its_maximum_outstanding() {
        let queue = DeliveryQueue::new(&Scale::standard(2), 10);
        let now = Instant::now;
        for carrier_id in 0..MAX_OUTSTANDING {
            assert!(queue.submit(&input(1, carrier_id), now()).unwrap());
        }
        // Warehouse 1 is full: not queued by the deadline. Warehouse 2 has room.
        let soon = now() + Duration::from_millis(30);
        assert!(!queue.submit(&input(1, 99), soon).unwrap());
        assert!(queue.submit(&input(2, 1), now()).unwrap());
        assert_eq!(queue.pending(), u64::from(MAX_OUTSTANDING) + 1);
        // A Delivery of warehouse 1 finished (its ten districts, one per executor, each
        // executor's first item): room for one.
        for executor in 0..10 {
            let (inbox, _) = &queue.inboxes[executor];
            let (request, _) = inbox.lock().work.front().cloned().unwrap();
            queue.done(executor as u32);
            if request.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                queue.finished(request.input.w_id);
            }
        }
        assert!(queue.submit(&input(1, 99), now()).unwrap());
        assert!(!queue
            .submit(&input(1, 100), now() + Duration::from_millis(10))
            .unwrap());
    }

    #[test]
    fn a_failed_executor_stops_the_terminals_waiting_for_room() {
        let queue = DeliveryQueue::new(&Scale::standard(1), 10);
        let later = Instant::now() + Duration::from_secs(30);
        for carrier_id in 0..MAX_OUTSTANDING {
            assert!(queue.submit(&input(1, carrier_id), later).unwrap());
        }
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| queue.submit(&input(1, 99), later));
            std::thread::sleep(Duration::from_millis(50));
            let mut broken = |_: &DeliveryInput| Err(DriverError::fatal("disk on fire"));
            assert!(run_executor(&queue, 0, later, &mut broken).is_err());
            // Woken at once rather than at the deadline 30 s away, and told why.
            assert!(waiting.join().unwrap().is_err());
        });
        assert!(queue.submit(&input(1, 100), later).is_err());
    }
}

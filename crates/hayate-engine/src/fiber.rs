//! Fibers: statements and transactions that suspend on a wait instead of blocking their thread.
//!
//! A fiber runs a closure on a stack of its own (a stackful coroutine, `corosensei`). The
//! engine's code stays synchronous; where it would block, it asks `on_fiber()` and, on a fiber,
//! suspends with a `Wait` that tells the host (the server's event loop, or any other driver of
//! `Fiber::resume`) when to resume it:
//! - `Wait::Io`: a read was submitted on this thread's ring (`io::uring`); resume once its
//!   completion has been reaped (`complete_io`, called by the host's reaper).
//! - `Wait::Until`: resume at an instant (simulated device latency).
//! - `Wait::Wakeup`: resume once another task fires the `Wakeup` the fiber left where it
//!   will be found (a row or table lock's release, the commit order's advance, the log's
//!   flush), or at a deadline that bounds the wait.
//! - `Wait::Yield`: resume after the other ready tasks had a turn (a latch, the checkpoint
//!   gate or a mutex held by someone else: short waits, polled).
//!
//! The same approach as LeanStore's user-space threads (Haas and Leis, "What Modern NVMe
//! Storage Can Do, And How To Exploit It", VLDB 2023): a page miss costs a stack switch, not an
//! OS context switch, and no access method is rewritten as a state machine.
//!
//! Rules that keep one thread's fibers from waiting on each other forever:
//! 1. On a fiber, every wait of the engine suspends (latches, the checkpoint gate, row locks,
//!    the commit order, page reads); blocking the thread would stop the fiber it waits for.
//! 2. Reads suspend only inside `allow_io` regions (page loads, undo and temporary-file reads),
//!    where the caller holds no mutex; other reads (the in-place journal, under its write lock)
//!    block as before.
//! 3. No mutex is held across a call that may suspend; a mutex that must be (a sequence's
//!    reservation, the catalog's DDL mutex) is taken with `lock`, which suspends while it is
//!    taken.
//! 4. State that belongs to the running task, not the thread (the checkpoint gate's nesting
//!    depth), lives in `FiberLocals`, swapped on every switch.
//!
//! A leaf: this module imports nothing of the engine (the I/O layer, the buffer pool, the lock
//! table and `phase` call it).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};

/// Stack of one fiber: room for the recursion of a long chain of operators in a statement
/// (the binder checks `stack_remaining` and fails before the end). Only the touched part is
/// backed by memory; stacks are reused per thread.
pub const STACK_BYTES: usize = 16 << 20;
/// Stacks kept per thread for reuse.
const STACKS_KEPT: usize = 256;

/// Why a fiber suspended, and when to resume it.
#[derive(Debug)]
pub enum Wait {
    /// A read on this thread's ring: resume when it completed.
    Io(IoWait),
    /// Resume at or after this instant.
    Until(Instant),
    /// Resume once the wake-up fired, or at the instant, whichever comes first.
    Wakeup(Wakeup, Instant),
    /// Resume after other tasks had a turn.
    Yield,
}

/// What `Fiber::resume` returns.
pub enum Step<R> {
    /// The fiber suspended; resume it once the wait is over.
    Wait(Wait),
    /// The fiber's closure returned.
    Done(R),
}

/// Per-task state swapped on every switch (rule 4).
#[derive(Default, Clone, Copy)]
struct FiberLocals {
    gate_depth: u32,
    io_allowed: u32,
    /// The lowest and highest addresses of the running fiber's stack (0 off a fiber).
    stack_limit: usize,
    stack_base: usize,
}

type FiberYielder = Yielder<(), Wait>;

thread_local! {
    static CURRENT: Cell<*const FiberYielder> = const { Cell::new(std::ptr::null()) };
    static LOCALS: Cell<FiberLocals> = const {
        Cell::new(FiberLocals { gate_depth: 0, io_allowed: 0, stack_limit: 0, stack_base: 0 })
    };
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
    static SLOTS: RefCell<IoSlots> = const { RefCell::new(IoSlots { slots: Vec::new(), free: Vec::new() }) };
}

/// A closure running on its own stack; see the module docs.
pub struct Fiber<'a, R> {
    coroutine: Option<Coroutine<(), Wait, R, DefaultStack>>,
    /// The fiber borrows what its closure borrows.
    _borrow: PhantomData<&'a mut ()>,
}

impl<'a, R> Fiber<'a, R> {
    /// A fiber that will run `work` when first resumed.
    pub fn new(work: impl FnOnce() -> R + 'a) -> Fiber<'a, R> {
        let stack = STACKS
            .with(|stacks| stacks.borrow_mut().pop())
            .map_or_else(|| DefaultStack::new(STACK_BYTES), Ok)
            .expect("a fiber stack can be mapped");
        // Boxed: what moves onto the new stack must be small (corosensei takes at most
        // 1 KiB), and a statement's closure may own large state (a COPY in progress).
        let work = Box::new(work);
        let (stack_limit, stack_base) = (stack.limit().get(), stack.base().get());
        let body = move |yielder: &FiberYielder, ()| {
            CURRENT.with(|current| current.set(yielder));
            LOCALS.with(|locals| {
                let mut mine = locals.get();
                mine.stack_limit = stack_limit;
                mine.stack_base = stack_base;
                locals.set(mine);
            });
            let result = work();
            CURRENT.with(|current| current.set(std::ptr::null()));
            result
        };
        // SAFETY: the closure borrows data of lifetime 'a. The coroutine runs only inside
        // `resume`, which borrows this Fiber, and the Fiber cannot outlive 'a; when dropped
        // unfinished it is unwound (its destructors run) before 'a ends. Leaked, it never runs
        // again, and its stack is leaked with it.
        let coroutine = unsafe { Coroutine::with_stack_unchecked(stack, body) };
        Fiber {
            coroutine: Some(coroutine),
            _borrow: PhantomData,
        }
    }

    /// Runs the fiber until it suspends or returns. Must not be called again after `Done`.
    pub fn resume(&mut self) -> Step<R> {
        let coroutine = self.coroutine.as_mut().expect("resumed after it returned");
        let outer = Switch::leave();
        let result = coroutine.resume(());
        drop(outer);
        match result {
            CoroutineResult::Yield(wait) => Step::Wait(wait),
            CoroutineResult::Return(value) => {
                let coroutine = self.coroutine.take().expect("present");
                let stack = coroutine.into_stack();
                STACKS.with(|stacks| {
                    let mut stacks = stacks.borrow_mut();
                    if stacks.len() < STACKS_KEPT {
                        stacks.push(stack);
                    }
                });
                Step::Done(value)
            }
        }
    }
}

impl<R> Drop for Fiber<'_, R> {
    fn drop(&mut self) {
        if let Some(coroutine) = self.coroutine.take() {
            // Unwinding runs the fiber's destructors on its stack (an in-flight read waits for
            // its completion there); the thread's own state is set aside meanwhile.
            let outer = Switch::leave();
            drop(coroutine);
            drop(outer);
        }
    }
}

/// The running context's `CURRENT` and `LOCALS`, set aside while another context runs and put
/// back on drop.
struct Switch {
    current: *const FiberYielder,
    locals: FiberLocals,
}

impl Switch {
    fn leave() -> Switch {
        Switch {
            current: CURRENT.with(|current| current.replace(std::ptr::null())),
            locals: LOCALS.with(|locals| locals.replace(FiberLocals::default())),
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        LOCALS.with(|locals| locals.set(self.locals));
        // A fiber being unwound (its Fiber dropped) must not suspend again: it stays off.
        if !std::thread::panicking() {
            CURRENT.with(|current| current.set(self.current));
        }
    }
}

/// True when more than half of the running fiber's stack (off a fiber: the thread's) is in
/// use: deep recursion (binding a long chain of operators) checks it and fails cleanly,
/// leaving the other half to what walks the same tree afterwards, instead of overflowing.
#[inline(never)]
pub fn stack_half_used() -> bool {
    let locals = LOCALS.with(|locals| locals.get());
    let (limit, base) = match locals.stack_limit {
        0 => match THREAD_STACK.with(|stack| *stack) {
            Some(bounds) => bounds,
            None => return false,
        },
        limit => (limit, locals.stack_base),
    };
    let marker = 0u8;
    let here = std::hint::black_box(&marker) as *const u8 as usize;
    // The stack grows down, from `base` toward `limit`.
    here < limit + (base.saturating_sub(limit)) / 2
}

thread_local! {
    /// This thread's own stack: (lowest usable address above its guard, highest address).
    static THREAD_STACK: Option<(usize, usize)> = thread_stack();
}

/// The calling thread's stack bounds, from its pthread attributes.
fn thread_stack() -> Option<(usize, usize)> {
    // SAFETY: pthread_getattr_np fills `attr` for the calling thread, which is then read
    // and destroyed; no pointer outlives the calls.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut address: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let found = libc::pthread_attr_getstack(&attr, &mut address, &mut size) == 0;
        let mut guard: libc::size_t = 0;
        libc::pthread_attr_getguardsize(&attr, &mut guard);
        libc::pthread_attr_destroy(&mut attr);
        found.then(|| (address as usize + guard, address as usize + size))
    }
}

/// True when running on a fiber (waits must suspend, see the module docs).
#[inline]
pub fn on_fiber() -> bool {
    CURRENT.with(|current| !current.get().is_null())
}

/// Suspends the running fiber until the host resumes it. Panics off a fiber.
pub fn suspend(wait: Wait) {
    let yielder = CURRENT.with(|current| current.get());
    assert!(!yielder.is_null(), "suspend called off a fiber");
    let mine = Switch::leave();
    // SAFETY: CURRENT points at the yielder of the fiber running on this thread, which lives
    // on that fiber's stack for as long as the fiber runs.
    unsafe { &*yielder }.suspend(wait);
    drop(mine);
}

/// On a fiber, lets the other tasks run once and returns true; off a fiber, false (the caller
/// waits its usual way).
#[inline]
pub fn pause() -> bool {
    if on_fiber() {
        suspend(Wait::Yield);
        true
    } else {
        false
    }
}

/// A one-shot wake-up for a suspended fiber, fired by any thread or task: the waiter leaves a
/// clone where the event's maker will find it (a lock's list of waiters, under the lock's
/// mutex, before letting go of the mutex), then suspends with `Wait::Wakeup`; the maker fires
/// every wake-up it finds. Fired before the waiter suspended, the wait ends at once. As a
/// future it is ready once fired; as a `Waker` (`waker`), waking it fires it.
#[derive(Clone, Default)]
pub struct Wakeup(Arc<WakeupState>);

#[derive(Default)]
struct WakeupState {
    /// Fired, and the waker of whoever awaits it (a host of the fiber).
    state: parking_lot::Mutex<(bool, Option<Waker>)>,
}

impl Wake for WakeupState {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let waker = {
            let mut state = self.state.lock();
            state.0 = true;
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Wakeup {
    /// A wake-up not fired yet.
    pub fn new() -> Wakeup {
        Wakeup::default()
    }

    /// Ends the wait (now, or as soon as it starts).
    pub fn fire(&self) {
        self.0.wake_by_ref();
    }

    /// True once fired.
    pub fn fired(&self) -> bool {
        self.0.state.lock().0
    }

    /// A waker that fires this wake-up (to wait on the engine's futures from a fiber).
    pub fn waker(&self) -> Waker {
        Waker::from(self.0.clone())
    }
}

impl std::fmt::Debug for Wakeup {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Wakeup(fired: {})", self.fired())
    }
}

impl Future for Wakeup {
    type Output = ();

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        let mut state = self.0.state.lock();
        if state.0 {
            return Poll::Ready(());
        }
        match &state.1 {
            Some(waker) if waker.will_wake(context.waker()) => {}
            _ => state.1 = Some(context.waker().clone()),
        }
        Poll::Pending
    }
}

/// Fires every wake-up of `waiting` and empties it (a lock released, an order advanced).
pub fn fire_all(waiting: &mut Vec<Wakeup>) {
    for wakeup in waiting.drain(..) {
        wakeup.fire();
    }
}

/// Suspends the running fiber until `wakeup` fired or `deadline` passed. Panics off a fiber.
pub fn wait_for_wakeup(wakeup: Wakeup, deadline: Instant) {
    suspend(Wait::Wakeup(wakeup, deadline));
}

/// On a fiber, waits for `future`, suspending while it is pending (its waker fires a
/// `Wakeup`); each wait is bounded by `recheck`, after which the future is polled again.
/// Panics off a fiber.
pub fn wait_on<F: Future + Unpin>(future: &mut F, recheck: std::time::Duration) -> F::Output {
    let mut wakeup = Wakeup::new();
    let mut waker = wakeup.waker();
    loop {
        if let Poll::Ready(value) = Pin::new(&mut *future).poll(&mut Context::from_waker(&waker)) {
            return value;
        }
        wait_for_wakeup(wakeup.clone(), Instant::now() + recheck);
        if wakeup.fired() {
            // A fresh one for the next wait. One that has not fired keeps its waker, which the
            // future already holds: polling again with it adds no second registration.
            wakeup = Wakeup::new();
            waker = wakeup.waker();
        }
    }
}

/// Waits until `deadline`: a suspension on a fiber inside an `allow_io` region, else false (the
/// caller blocks the thread).
pub fn sleep_until(deadline: Instant) -> bool {
    if io_may_suspend() {
        suspend(Wait::Until(deadline));
        true
    } else {
        false
    }
}

/// Takes `mutex`, suspending while another task holds it (rule 3); off a fiber, blocks.
pub fn lock<T>(mutex: &parking_lot::Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    loop {
        if let Some(guard) = mutex.try_lock() {
            return guard;
        }
        if !pause() {
            return mutex.lock();
        }
    }
}

/// Marks a region whose reads may suspend (rule 2); ends on drop.
pub struct AllowIo(());

/// Starts an `allow_io` region.
pub fn allow_io() -> AllowIo {
    LOCALS.with(|locals| {
        let mut value = locals.get();
        value.io_allowed += 1;
        locals.set(value);
    });
    AllowIo(())
}

impl Drop for AllowIo {
    fn drop(&mut self) {
        LOCALS.with(|locals| {
            let mut value = locals.get();
            value.io_allowed -= 1;
            locals.set(value);
        });
    }
}

/// True if a read here may suspend: on a fiber, inside an `allow_io` region.
#[inline]
pub fn io_may_suspend() -> bool {
    on_fiber() && LOCALS.with(|locals| locals.get().io_allowed > 0)
}

/// The checkpoint gate's nesting depth of the running task.
pub(crate) fn gate_depth() -> u32 {
    LOCALS.with(|locals| locals.get().gate_depth)
}

/// Sets the running task's gate depth.
pub(crate) fn set_gate_depth(depth: u32) {
    LOCALS.with(|locals| {
        let mut value = locals.get();
        value.gate_depth = depth;
        locals.set(value);
    });
}

// Completions of reads submitted by this thread's fibers.

#[derive(Default)]
struct IoSlot {
    in_use: bool,
    result: Option<i32>,
    waker: Option<Waker>,
}

struct IoSlots {
    slots: Vec<IoSlot>,
    free: Vec<usize>,
}

/// A slot for one read's completion; its index goes in the request's user data.
pub(crate) fn io_slot() -> usize {
    SLOTS.with(|slots| {
        let mut slots = slots.borrow_mut();
        let index = match slots.free.pop() {
            Some(index) => index,
            None => {
                slots.slots.push(IoSlot::default());
                slots.slots.len() - 1
            }
        };
        slots.slots[index] = IoSlot {
            in_use: true,
            result: None,
            waker: None,
        };
        index
    })
}

/// Records the result of the read in `slot` and wakes the task waiting for it.
pub(crate) fn complete_io(slot: usize, result: i32) {
    let waker = SLOTS.with(|slots| {
        let mut slots = slots.borrow_mut();
        let entry = slots.slots.get_mut(slot).filter(|entry| entry.in_use)?;
        entry.result = Some(result);
        entry.waker.take()
    });
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// The result of the read in `slot`, if it completed.
pub(crate) fn io_result(slot: usize) -> Option<i32> {
    SLOTS.with(|slots| slots.borrow().slots[slot].result)
}

/// Gives a completed slot back.
pub(crate) fn release_io_slot(slot: usize) {
    SLOTS.with(|slots| {
        let mut slots = slots.borrow_mut();
        slots.slots[slot] = IoSlot::default();
        slots.free.push(slot);
    });
}

/// A read the fiber waits for: a future, ready once its completion was reaped. Polled only on
/// the thread that submitted it.
#[derive(Debug)]
pub struct IoWait {
    slot: usize,
    /// Not Send: the slot belongs to this thread.
    _thread: PhantomData<*const ()>,
}

impl IoWait {
    pub(crate) fn new(slot: usize) -> IoWait {
        IoWait {
            slot,
            _thread: PhantomData,
        }
    }
}

impl Future for IoWait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        SLOTS.with(|slots| {
            let mut slots = slots.borrow_mut();
            let entry = &mut slots.slots[self.slot];
            if entry.result.is_some() || !entry.in_use {
                Poll::Ready(())
            } else {
                entry.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}

/// What `run_all` asks of its host after a round of its fibers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Some fiber ran: reap the completions there are, without waiting.
    Poll,
    /// No fiber can go on and some wait for reads: block until a read completes.
    Reads,
    /// No fiber can go on and all wait for instants or wake-ups (a lock, the commit order, the
    /// log, a slow device): sleep until this, the nearest deadline, or until a wake-up unparks
    /// the thread (`sleep_thread_until` does both).
    Until(Instant),
}

/// Unparks the thread running `run_all` when one of its fibers' wake-ups fires.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs fibers on this thread until all returned, round robin: each runs until it suspends; one
/// waiting for a read goes on once the host reaped it, one waiting for an instant once it
/// passed, one waiting for a wake-up once it fired (it unparks the thread) or its deadline
/// passed. After each round the host is told what to do (`Idle`): reap without waiting, block
/// in its reaper, or sleep. A wake-up that fires while the host blocks in its reaper is seen
/// when a read completes. Returns the results in order and the most fibers that waited for
/// reads at once (reads in flight).
pub fn run_all<'a, R: 'a>(
    works: Vec<Box<dyn FnOnce() -> R + 'a>>,
    mut host: impl FnMut(Idle),
) -> (Vec<R>, usize) {
    let mut fibers: Vec<(Fiber<'a, R>, Option<Wait>)> = works
        .into_iter()
        .map(|work| (Fiber::new(work), None))
        .collect();
    let mut results: Vec<Option<R>> = (0..fibers.len()).map(|_| None).collect();
    let mut most_reads = 0;
    let unpark = Waker::from(Arc::new(Unpark(std::thread::current())));
    loop {
        let mut progressed = false;
        for (index, (fiber, wait)) in fibers.iter_mut().enumerate() {
            if results[index].is_some() {
                continue;
            }
            let ready = match wait {
                None | Some(Wait::Yield) => true,
                Some(Wait::Io(io)) => io_result(io.slot).is_some(),
                Some(Wait::Until(deadline)) => Instant::now() >= *deadline,
                Some(Wait::Wakeup(wakeup, deadline)) => {
                    wakeup.fired() || Instant::now() >= *deadline
                }
            };
            if !ready {
                continue;
            }
            progressed = true;
            match fiber.resume() {
                Step::Done(value) => results[index] = Some(value),
                Step::Wait(mut next) => {
                    if let Wait::Wakeup(wakeup, _) = &mut next {
                        // Registers the thread's unparker (ready at once if already fired).
                        let _ = Pin::new(wakeup).poll(&mut Context::from_waker(&unpark));
                    }
                    *wait = Some(next)
                }
            }
        }
        let reads = fibers
            .iter()
            .filter(|(_, wait)| matches!(wait, Some(Wait::Io(_))))
            .count();
        most_reads = most_reads.max(reads);
        if results.iter().all(Option::is_some) {
            break;
        }
        if progressed {
            host(Idle::Poll);
        } else if reads > 0 {
            host(Idle::Reads);
        } else if let Some(deadline) = fibers
            .iter()
            .filter_map(|(_, wait)| match wait {
                Some(Wait::Until(deadline)) | Some(Wait::Wakeup(_, deadline)) => Some(*deadline),
                _ => None,
            })
            .min()
        {
            host(Idle::Until(deadline));
        }
    }
    (
        results.into_iter().map(Option::unwrap).collect(),
        most_reads,
    )
}

/// Parks the thread until `deadline` or until a fiber's wake-up unparks it (a host of
/// `run_all`, when every fiber waits for an instant or a wake-up; `run_all` looks again either
/// way). This module imports nothing of the engine, so it does not use `io::wait`, which uses
/// it.
pub fn sleep_thread_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::park_timeout(deadline - now);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_fiber_suspends_and_resumes_with_its_own_state() {
        let mut log = Vec::new();
        {
            let mut fiber = Fiber::new(|| {
                assert!(on_fiber());
                set_gate_depth(3);
                suspend(Wait::Yield);
                assert_eq!(gate_depth(), 3, "the fiber's locals come back");
                7
            });
            assert!(matches!(fiber.resume(), Step::Wait(Wait::Yield)));
            assert!(!on_fiber());
            assert_eq!(
                gate_depth(),
                0,
                "the thread does not see the fiber's locals"
            );
            log.push(1);
            match fiber.resume() {
                Step::Done(value) => log.push(value),
                Step::Wait(_) => panic!("should have returned"),
            }
        }
        assert_eq!(log, vec![1, 7]);
    }

    #[test]
    fn dropping_a_suspended_fiber_runs_its_destructors() {
        struct Flag<'a>(&'a Cell<bool>);
        impl Drop for Flag<'_> {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let dropped = Cell::new(false);
        {
            let mut fiber = Fiber::new(|| {
                let _flag = Flag(&dropped);
                suspend(Wait::Yield);
                unreachable!("never resumed");
            });
            assert!(matches!(fiber.resume(), Step::Wait(_)));
        }
        assert!(dropped.get());
        assert!(!on_fiber());
        assert_eq!(gate_depth(), 0);
    }

    #[test]
    fn a_fiber_may_own_large_state() {
        let big = [7u8; 4096];
        let mut fiber = Fiber::new(move || big.iter().map(|&byte| u64::from(byte)).sum::<u64>());
        assert!(matches!(fiber.resume(), Step::Done(28_672)));
    }

    #[test]
    fn a_wakeup_fired_by_another_thread_ends_the_wait_not_its_deadline() {
        let wakeup = Wakeup::new();
        let fired_early = Wakeup::new();
        fired_early.fire();
        let waiting = wakeup.clone();
        let work: Box<dyn FnOnce() -> bool> = Box::new(move || {
            // Fired before the wait: it ends at once.
            wait_for_wakeup(fired_early, Instant::now() + Duration::from_secs(60));
            wait_for_wakeup(waiting.clone(), Instant::now() + Duration::from_secs(60));
            waiting.fired()
        });
        let firer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            wakeup.fire();
        });
        let started = Instant::now();
        // The host parks the thread as `reap_or_sleep` does for `Idle::Until`.
        let (results, _) = run_all(vec![work], |idle| {
            if let Idle::Until(deadline) = idle {
                sleep_thread_until(deadline)
            }
        });
        firer.join().unwrap();
        assert_eq!(results, vec![true]);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the fiber slept until its deadline"
        );
    }

    #[test]
    fn lock_suspends_while_another_fiber_holds_the_mutex() {
        let mutex = parking_lot::Mutex::new(0);
        let mut first = Fiber::new(|| {
            let mut guard = lock(&mutex);
            suspend(Wait::Yield);
            *guard += 1;
        });
        let mut second = Fiber::new(|| {
            let mut guard = lock(&mutex);
            *guard *= 10;
        });
        assert!(matches!(first.resume(), Step::Wait(_)));
        // The second finds the mutex taken and suspends instead of blocking the thread.
        assert!(matches!(second.resume(), Step::Wait(Wait::Yield)));
        assert!(matches!(first.resume(), Step::Done(())));
        assert!(matches!(second.resume(), Step::Done(())));
        assert_eq!(*mutex.lock(), 10);
    }
}

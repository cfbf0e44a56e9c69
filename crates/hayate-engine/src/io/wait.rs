//! Precise short waits, for emulated device latency (the simulated disk here, the lab's
//! latency wrapper): `thread::sleep` overshoots by tens of microseconds, so waits below
//! `SLEEP_THRESHOLD` spin on `Instant`; longer ones sleep all but the tail, then spin.

use std::time::{Duration, Instant};

/// Waits at or above this length sleep; shorter ones spin.
pub const SLEEP_THRESHOLD: Duration = Duration::from_micros(200);

/// Blocks the calling thread for at least `duration` (spinning for short waits).
pub fn wait_for(duration: Duration) {
    wait_until(Instant::now() + duration);
}

/// Blocks the calling thread until `deadline` (spinning for the last part of the wait). A read
/// on a fiber suspends instead (`fiber::sleep_until`): an emulated slow device then delays the
/// fiber, not the thread, as a real read on the thread's ring would.
pub fn wait_until(deadline: Instant) {
    if Instant::now() < deadline && crate::fiber::sleep_until(deadline) {
        return;
    }
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let remaining = deadline - now;
        if remaining >= SLEEP_THRESHOLD {
            // Sleep for all but the tail, then spin the tail for precision.
            std::thread::sleep(remaining - SLEEP_THRESHOLD / 2);
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_for_spins_short_waits_precisely() {
        let start = Instant::now();
        wait_for(Duration::from_micros(20));
        assert!(start.elapsed() >= Duration::from_micros(20));
    }
}

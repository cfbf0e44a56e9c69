//! Row locks for writers.
//!
//! A writer locks a row before changing it and keeps the lock until it commits or aborts, so
//! two writers of one row never overlap. A shared lock (`lock_shared`: a foreign key's check
//! of its referenced row, as PostgreSQL's FOR KEY SHARE) is held by any number of
//! transactions at once and keeps writers out; a transaction that holds the only shared lock
//! may take the row exclusively. A thread's lock wait first spins (`spin_count` polls), then
//! parks on its shard's condition variable, which every release notifies, so a waiter wakes
//! as soon as the lock is free (a classic engine's 1 ms sleep per poll would cost more than
//! the microsecond I/O the owner waits for). `park_time` only bounds one park between checks
//! of the owner, the wait-for chain and the timeout: a short one (it was 20 us) woke every
//! waiter of a hot row dozens of times per wait, each a context switch. On a fiber the waiter
//! does not spin or park (the owner may be a fiber of the same thread): it leaves a
//! `fiber::Wakeup` in its shard's list and suspends; every release fires the shard's list.
//!
//! Deadlocks: before parking, the waiter records whom it waits for and follows the wait-for
//! chain; if the chain comes back to itself it fails with `Error::Deadlock`. Waits are also
//! bounded by `timeout`.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::fiber::{fire_all, Wakeup};

const SHARD_COUNT: usize = 64;

/// How a writer waits for a row lock (see the module docs).
#[derive(Debug, Clone)]
pub struct LockConfig {
    /// Polls of the lock before a thread parks (a fiber suspends at once). Default 200.
    pub spin_count: u32,
    /// Longest single park (or suspension) between checks of the owner, the wait-for chain
    /// and the timeout; a release wakes the waiter sooner. Default 10 ms.
    pub park_time: Duration,
    /// A wait longer than this fails with `Error::LockTimeout`. Default 5 s.
    pub timeout: Duration,
}

impl Default for LockConfig {
    fn default() -> Self {
        LockConfig {
            spin_count: 200,
            park_time: Duration::from_millis(10),
            timeout: Duration::from_secs(5),
        }
    }
}

pub type LockKey = (u32, Vec<u8>);

/// Who holds a row lock.
enum Holder {
    Exclusive(u64),
    /// Transactions holding it shared (at least one).
    Shared(Vec<u64>),
}

/// What a request found.
enum Grant {
    /// Taken; true if this request took it (false: the transaction already had it).
    Taken(bool),
    /// Held by another transaction, which the request waits for.
    Blocked(u64),
}

impl Holder {
    /// Grants `txn_id` the lock in the mode asked if the holders allow it.
    fn grant(&mut self, txn_id: u64, shared: bool) -> Grant {
        match self {
            Holder::Exclusive(owner) if *owner == txn_id => Grant::Taken(false),
            Holder::Exclusive(owner) => Grant::Blocked(*owner),
            Holder::Shared(owners) if shared => {
                if owners.contains(&txn_id) {
                    Grant::Taken(false)
                } else {
                    owners.push(txn_id);
                    Grant::Taken(true)
                }
            }
            Holder::Shared(owners) => match owners.iter().find(|owner| **owner != txn_id) {
                Some(other) => Grant::Blocked(*other),
                None => {
                    // The only shared holder upgrades; it is already in its list.
                    *self = Holder::Exclusive(txn_id);
                    Grant::Taken(false)
                }
            },
        }
    }
}

struct Shard {
    owners: Mutex<HashMap<LockKey, Holder>>,
    released: Condvar,
    /// Fibers waiting for a release in this shard. Added to with `owners` locked (after the
    /// request found the lock held) and taken after a release changed `owners`, so a release
    /// the waiter did not see finds its wake-up.
    waiting: Mutex<Vec<Wakeup>>,
}

impl Shard {
    /// Wakes every waiter of the shard: threads parked on `released` and suspended fibers.
    fn notify(&self) {
        self.released.notify_all();
        let mut waiting = std::mem::take(&mut *self.waiting.lock());
        fire_all(&mut waiting);
    }
}

/// Counters of the row lock table since the database opened.
#[derive(Default, Debug, Clone)]
pub struct LockStats {
    /// Locks granted (a transaction's repeat request for a lock it holds is not counted).
    pub acquired: u64,
    /// Requests that found the lock still held after spinning and parked.
    pub waits: u64,
    /// Requests that failed with `Error::Deadlock`.
    pub deadlocks: u64,
    /// Requests that failed with `Error::LockTimeout`.
    pub timeouts: u64,
}

pub struct LockTable {
    config: LockConfig,
    shards: Vec<Shard>,
    /// waiter transaction -> owner it waits for
    waits_for: Mutex<HashMap<u64, u64>>,
    hasher: std::collections::hash_map::RandomState,
    acquired: AtomicU64,
    waits: AtomicU64,
    deadlocks: AtomicU64,
    timeouts: AtomicU64,
}

impl LockTable {
    pub fn new(config: LockConfig) -> LockTable {
        let shards = (0..SHARD_COUNT)
            .map(|_| Shard {
                owners: Mutex::new(HashMap::new()),
                released: Condvar::new(),
                waiting: Mutex::new(Vec::new()),
            })
            .collect();
        LockTable {
            config,
            shards,
            waits_for: Mutex::new(HashMap::new()),
            hasher: Default::default(),
            acquired: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            deadlocks: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &LockKey) -> &Shard {
        &self.shards[self.hasher.hash_one(key) as usize % SHARD_COUNT]
    }

    /// Takes the lock without waiting. Returns true if `txn_id` now owns it (or already did).
    pub fn try_lock(&self, txn_id: u64, key: &LockKey) -> bool {
        self.try_take(txn_id, key).is_some()
    }

    /// Takes the lock without waiting: None if another transaction owns it, else whether this
    /// call took it (false: `txn_id` already owned it), as `lock` answers.
    pub fn try_take(&self, txn_id: u64, key: &LockKey) -> Option<bool> {
        self.try_request(txn_id, key, false)
    }

    /// `try_take` of a shared lock: None if another transaction holds it exclusively.
    pub fn try_take_shared(&self, txn_id: u64, key: &LockKey) -> Option<bool> {
        self.try_request(txn_id, key, true)
    }

    fn try_request(&self, txn_id: u64, key: &LockKey, shared: bool) -> Option<bool> {
        let mut owners = self.shard(key).owners.lock();
        match self.request(&mut owners, txn_id, key, shared) {
            Grant::Taken(took) => Some(took),
            Grant::Blocked(_) => None,
        }
    }

    /// One attempt of a request with the shard locked.
    fn request(
        &self,
        owners: &mut HashMap<LockKey, Holder>,
        txn_id: u64,
        key: &LockKey,
        shared: bool,
    ) -> Grant {
        match owners.get_mut(key) {
            None => {
                let holder = match shared {
                    true => Holder::Shared(vec![txn_id]),
                    false => Holder::Exclusive(txn_id),
                };
                owners.insert(key.clone(), holder);
                self.acquired.fetch_add(1, Ordering::Relaxed);
                Grant::Taken(true)
            }
            Some(holder) => holder.grant(txn_id, shared),
        }
    }

    /// Takes the lock exclusively, waiting for its holders to finish. Returns true if this
    /// call took it (false if `txn_id` already held it).
    pub fn lock(&self, txn_id: u64, key: &LockKey) -> Result<bool> {
        self.acquire(txn_id, key, false)
    }

    /// Takes the lock shared (other shared holders are no obstacle, an exclusive one is
    /// waited for). Returns true if this call took it (false if `txn_id` already held it,
    /// in either mode).
    pub fn lock_shared(&self, txn_id: u64, key: &LockKey) -> Result<bool> {
        self.acquire(txn_id, key, true)
    }

    fn acquire(&self, txn_id: u64, key: &LockKey, shared: bool) -> Result<bool> {
        let shard = self.shard(key);
        let on_fiber = crate::fiber::on_fiber();
        let spins = if on_fiber { 1 } else { self.config.spin_count };
        for _ in 0..spins {
            {
                let mut owners = shard.owners.lock();
                if let Grant::Taken(took) = self.request(&mut owners, txn_id, key, shared) {
                    return Ok(took);
                }
            }
            std::hint::spin_loop();
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.config.timeout;
        let mut owners = shard.owners.lock();
        // A fiber's wake-up while it is in the shard's list (not fired): a suspension that
        // ends at its deadline does not add another.
        let mut listed: Option<Wakeup> = None;
        loop {
            let owner = match self.request(&mut owners, txn_id, key, shared) {
                Grant::Taken(took) => {
                    self.waits_for.lock().remove(&txn_id);
                    return Ok(took);
                }
                Grant::Blocked(owner) => owner,
            };
            if self.closes_cycle(txn_id, owner) {
                self.deadlocks.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Deadlock);
            }
            let now = Instant::now();
            if now >= deadline {
                self.waits_for.lock().remove(&txn_id);
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                return Err(Error::LockTimeout(self.config.timeout.as_millis() as u64));
            }
            let park = self
                .config
                .park_time
                .max(Duration::from_micros(1))
                .min(deadline - now);
            if on_fiber {
                // The owner may be a fiber of this thread: suspend, with the shard unlocked,
                // until a release in the shard (or the park's end).
                let wakeup = match &listed {
                    Some(wakeup) if !wakeup.fired() => wakeup.clone(),
                    _ => {
                        let fresh = Wakeup::new();
                        shard.waiting.lock().push(fresh.clone());
                        listed = Some(fresh.clone());
                        fresh
                    }
                };
                drop(owners);
                crate::fiber::wait_for_wakeup(wakeup, now + park);
                owners = shard.owners.lock();
                continue;
            }
            shard.released.wait_for(&mut owners, park);
        }
    }

    /// Records that `waiter` waits for `owner`; true if that closes a cycle.
    fn closes_cycle(&self, waiter: u64, owner: u64) -> bool {
        let mut waits_for = self.waits_for.lock();
        waits_for.insert(waiter, owner);
        let mut current = owner;
        for _ in 0..waits_for.len() + 1 {
            match waits_for.get(&current) {
                Some(&next) if next == waiter => {
                    waits_for.remove(&waiter);
                    return true;
                }
                Some(&next) => current = next,
                None => return false,
            }
        }
        false
    }

    /// Releases the given locks of a finished transaction and wakes their waiters.
    pub fn release_all(&self, txn_id: u64, keys: &[LockKey]) {
        for key in keys {
            let shard = self.shard(key);
            let mut owners = shard.owners.lock();
            let free = match owners.get_mut(key) {
                Some(Holder::Exclusive(owner)) => *owner == txn_id,
                Some(Holder::Shared(holders)) => {
                    let before = holders.len();
                    holders.retain(|holder| *holder != txn_id);
                    if holders.len() != before && !holders.is_empty() {
                        // One fewer holder: a waiting upgrade may go on.
                        shard.notify();
                    }
                    holders.is_empty()
                }
                None => false,
            };
            if free {
                owners.remove(key);
                shard.notify();
            }
        }
        self.waits_for.lock().remove(&txn_id);
    }

    pub fn stats(&self) -> LockStats {
        LockStats {
            acquired: self.acquired.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            deadlocks: self.deadlocks.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn key(name: &str) -> LockKey {
        (1, name.as_bytes().to_vec())
    }

    #[test]
    fn waiter_gets_the_lock_after_release() {
        let table = Arc::new(LockTable::new(LockConfig::default()));
        assert!(table.lock(1, &key("a")).unwrap());
        assert!(!table.lock(1, &key("a")).unwrap(), "re-entrant");
        let waiter = {
            let table = table.clone();
            std::thread::spawn(move || table.lock(2, &key("a")))
        };
        std::thread::sleep(Duration::from_millis(20));
        table.release_all(1, &[key("a")]);
        assert!(waiter.join().unwrap().unwrap());
    }

    #[test]
    fn a_fiber_waiting_past_its_park_time_leaves_one_wakeup_in_the_list() {
        use crate::fiber::{Fiber, Step, Wait};

        let table = LockTable::new(LockConfig {
            park_time: Duration::from_millis(1),
            ..LockConfig::default()
        });
        assert!(table.lock(1, &key("a")).unwrap());
        let mut waiter = Fiber::new(|| table.lock(2, &key("a")));
        for _ in 0..5 {
            match waiter.resume() {
                Step::Wait(Wait::Wakeup(wakeup, deadline)) => {
                    assert!(!wakeup.fired());
                    crate::fiber::sleep_thread_until(deadline);
                }
                other => panic!(
                    "the waiter did not suspend on a wake-up: {:?}",
                    matches!(other, Step::Done(_))
                ),
            }
        }
        let waiting = table.shard(&key("a")).waiting.lock().len();
        assert_eq!(waiting, 1, "each recheck added a wake-up");
        table.release_all(1, &[key("a")]);
        assert!(matches!(waiter.resume(), Step::Done(Ok(true))));
    }

    #[test]
    fn deadlock_is_detected() {
        let table = Arc::new(LockTable::new(LockConfig::default()));
        table.lock(1, &key("a")).unwrap();
        table.lock(2, &key("b")).unwrap();
        let first = {
            let table = table.clone();
            std::thread::spawn(move || table.lock(1, &key("b")))
        };
        std::thread::sleep(Duration::from_millis(30));
        let second = table.lock(2, &key("a"));
        let first_result = if second.is_err() {
            table.release_all(2, &[key("b")]);
            first.join().unwrap()
        } else {
            first.join().unwrap()
        };
        assert!(
            matches!(second, Err(Error::Deadlock)) || matches!(first_result, Err(Error::Deadlock)),
            "one side must see a deadlock: {second:?} {first_result:?}"
        );
    }

    #[test]
    fn shared_holders_keep_writers_out_until_all_release() {
        let table = Arc::new(LockTable::new(LockConfig::default()));
        assert!(table.lock_shared(1, &key("p")).unwrap());
        assert!(table.lock_shared(2, &key("p")).unwrap());
        assert!(!table.lock_shared(2, &key("p")).unwrap(), "re-entrant");
        assert_eq!(table.try_take(3, &key("p")), None);
        let writer = {
            let table = table.clone();
            std::thread::spawn(move || table.lock(3, &key("p")))
        };
        std::thread::sleep(Duration::from_millis(20));
        table.release_all(1, &[key("p")]);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!writer.is_finished(), "one shared holder is left");
        table.release_all(2, &[key("p")]);
        assert!(writer.join().unwrap().unwrap());
        // A writer's lock keeps shared requests waiting; the only shared holder upgrades.
        assert_eq!(table.try_take(4, &key("p")), None);
        table.release_all(3, &[key("p")]);
        assert!(table.lock_shared(4, &key("p")).unwrap());
        assert!(!table.lock(4, &key("p")).unwrap());
        assert_eq!(table.try_take(5, &key("p")), None);
    }

    #[test]
    fn two_upgrades_of_one_shared_lock_deadlock() {
        let table = Arc::new(LockTable::new(LockConfig::default()));
        table.lock_shared(1, &key("p")).unwrap();
        table.lock_shared(2, &key("p")).unwrap();
        let first = {
            let table = table.clone();
            std::thread::spawn(move || table.lock(1, &key("p")))
        };
        std::thread::sleep(Duration::from_millis(30));
        let second = table.lock(2, &key("p"));
        if second.is_err() {
            table.release_all(2, &[key("p")]);
        }
        let first = first.join().unwrap();
        assert!(
            matches!(second, Err(Error::Deadlock)) || matches!(first, Err(Error::Deadlock)),
            "one side must see a deadlock: {second:?} {first:?}"
        );
    }

    #[test]
    fn wait_times_out() {
        let config = LockConfig {
            timeout: Duration::from_millis(30),
            ..LockConfig::default()
        };
        let table = LockTable::new(config);
        table.lock(1, &key("a")).unwrap();
        assert!(matches!(
            table.lock(2, &key("a")),
            Err(Error::LockTimeout(30))
        ));
        assert_eq!(table.stats().timeouts, 1);
    }
}

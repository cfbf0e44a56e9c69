//! Table locks between writers and DDL, so rows committed while a DDL rebuilds a table are
//! never lost (PostgreSQL's ROW EXCLUSIVE vs ACCESS EXCLUSIVE, reduced to what matters here):
//!
//! 1. A statement that writes a table (INSERT, UPDATE, DELETE, COPY, TRUNCATE in a block)
//!    takes the table's write lock before it runs, and its session keeps it until its
//!    transaction ends: the block's writes commit (or not) before any DDL can start.
//! 2. A DDL (CREATE/DROP TABLE, CREATE INDEX, ALTER TABLE, TRUNCATE outside a block) takes the
//!    exclusive lock: it waits until no other session holds the write lock, and new writers
//!    wait until the DDL's transaction ends. The rebuild's snapshot therefore holds every
//!    committed row, and no write reaches the trees it replaces.
//! 3. A session's locks are re-entrant (a block's writer may run DDL on its own table).
//!    Waits end after `LOCK_WAIT` with 55P03: a DDL and a block waiting for each other (one
//!    on a table, one on a row) cannot hang.
//!
//! Readers take no lock. Locks are by table name, so a table replaced by a DDL keeps them.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use hayate_engine::fiber::{fire_all, Wakeup};
use parking_lot::{Condvar, Mutex};

use crate::error::{sqlstate, SqlError, SqlResult};

/// The longest wait for a table lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

#[derive(Default)]
struct TableState {
    writers: HashSet<u64>,
    exclusive: Option<u64>,
}

/// The table locks of a database (one per catalog).
#[derive(Default)]
pub struct TableLocks {
    tables: Mutex<HashMap<String, TableState>>,
    released: Condvar,
    /// Sessions on fibers waiting for a release: added to with `tables` locked, fired by
    /// every release (as `released` is notified).
    waiting: Mutex<Vec<Wakeup>>,
}

impl TableLocks {
    /// Takes `table`'s write lock for `owner` (a session): waits while another owner holds
    /// the exclusive lock.
    pub fn lock_write(&self, owner: u64, table: &str) -> SqlResult<()> {
        self.acquire(table, |state| {
            state.exclusive.is_none_or(|holder| holder == owner)
        })?
        .writers
        .insert(owner);
        Ok(())
    }

    /// Takes `table`'s exclusive lock for `owner`: waits while another owner holds it or
    /// the write lock.
    pub fn lock_exclusive(&self, owner: u64, table: &str) -> SqlResult<()> {
        self.acquire(table, |state| {
            state.exclusive.is_none_or(|holder| holder == owner)
                && state.writers.iter().all(|writer| *writer == owner)
        })?
        .exclusive = Some(owner);
        Ok(())
    }

    /// Waits until `free` holds for the table's state; the state for the caller to update.
    fn acquire(
        &self,
        table: &str,
        free: impl Fn(&TableState) -> bool,
    ) -> SqlResult<parking_lot::MappedMutexGuard<'_, TableState>> {
        let deadline = Instant::now() + LOCK_WAIT;
        let mut tables = self.tables.lock();
        loop {
            let state = tables.entry(table.to_string()).or_default();
            if free(state) {
                return Ok(parking_lot::MutexGuard::map(tables, |tables| {
                    tables.get_mut(table).expect("inserted above")
                }));
            }
            if hayate_engine::fiber::on_fiber() {
                // The owner may be a session on another fiber of this thread: suspend until a
                // release.
                if Instant::now() >= deadline {
                    return Err(timed_out(table));
                }
                let wakeup = Wakeup::new();
                self.waiting.lock().push(wakeup.clone());
                drop(tables);
                hayate_engine::fiber::wait_for_wakeup(wakeup, deadline);
                tables = self.tables.lock();
                continue;
            }
            if self.released.wait_until(&mut tables, deadline).timed_out() {
                return Err(timed_out(table));
            }
        }
    }

    /// Releases `owner`'s locks on `tables` (its transaction ended).
    pub fn release(&self, owner: u64, tables: &[String]) {
        if tables.is_empty() {
            return;
        }
        let mut locks = self.tables.lock();
        for table in tables {
            if let Some(state) = locks.get_mut(table) {
                state.writers.remove(&owner);
                if state.exclusive == Some(owner) {
                    state.exclusive = None;
                }
                if state.writers.is_empty() && state.exclusive.is_none() {
                    locks.remove(table);
                }
            }
        }
        drop(locks);
        self.released.notify_all();
        fire_all(&mut self.waiting.lock());
    }
}

fn timed_out(table: &str) -> SqlError {
    SqlError::new(
        sqlstate::LOCK_NOT_AVAILABLE,
        format!("could not obtain lock on relation \"{table}\""),
    )
}

#[cfg(test)]
mod tests {
    use hayate_engine::fiber::{Fiber, Step, Wait};

    use super::*;

    #[test]
    fn a_session_on_a_fiber_sleeps_until_the_ddl_releases_the_table() {
        let locks = TableLocks::default();
        locks.lock_exclusive(1, "t").unwrap();
        let mut writer = Fiber::new(|| locks.lock_write(2, "t"));
        let wakeup = match writer.resume() {
            Step::Wait(Wait::Wakeup(wakeup, _)) => wakeup,
            Step::Wait(other) => panic!("the writer waits by {other:?}, not for a wake-up"),
            Step::Done(result) => panic!("the writer did not wait: {result:?}"),
        };
        assert!(!wakeup.fired(), "woken while the DDL holds the table");
        locks.release(1, &["t".to_string()]);
        assert!(wakeup.fired(), "the release did not wake the writer");
        assert!(matches!(writer.resume(), Step::Done(Ok(()))));
        assert!(locks.tables.lock()["t"].writers.contains(&2));
    }
}

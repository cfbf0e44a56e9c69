//! Query cancellation: a flag per connection that a cancel request sets and the running
//! statement polls.
//!
//! The server makes a connection's flag current on the thread that runs its statement
//! (`enter`), so the executor's loops and the COPY loop call `check` without the flag being
//! passed through every layer. A set flag makes `check` fail with 57014, as PostgreSQL's
//! "canceling statement due to user request"; the server clears it when the next statement
//! starts (a cancel that arrives while nothing runs is ignored, as in PostgreSQL).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{sqlstate, SqlError, SqlResult};

/// A connection's cancel flag (cheap to clone; clones share the flag).
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Asks the running statement to stop.
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn clear(&self) {
        self.0.store(false, Ordering::Relaxed);
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Fails with 57014 if the flag is set.
    pub fn check(&self) -> SqlResult<()> {
        if self.is_set() {
            return Err(canceled());
        }
        Ok(())
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Interrupt>> = const { RefCell::new(None) };
}

/// Makes `interrupt` the current thread's flag until the guard drops.
pub fn enter(interrupt: &Interrupt) -> Entered {
    let previous = CURRENT.with(|current| current.replace(Some(interrupt.clone())));
    Entered { previous }
}

pub struct Entered {
    previous: Option<Interrupt>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

/// Fails with 57014 if the current thread's statement was cancelled (no flag: never).
pub fn check() -> SqlResult<()> {
    CURRENT.with(|current| match &*current.borrow() {
        Some(interrupt) => interrupt.check(),
        None => Ok(()),
    })
}

pub fn canceled() -> SqlError {
    SqlError::new(
        sqlstate::QUERY_CANCELED,
        "canceling statement due to user request",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_sees_the_entered_flag_only() {
        let interrupt = Interrupt::new();
        assert!(check().is_ok());
        {
            let _entered = enter(&interrupt);
            assert!(check().is_ok());
            interrupt.interrupt();
            assert_eq!(check().unwrap_err().code, sqlstate::QUERY_CANCELED);
        }
        assert!(check().is_ok(), "the flag is no longer current");
        interrupt.clear();
        let _entered = enter(&interrupt);
        assert!(check().is_ok());
    }
}

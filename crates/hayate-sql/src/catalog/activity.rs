//! What every session of a cluster is doing (pg_stat_activity), and signals to another
//! session's backend (pg_cancel_backend, pg_terminate_backend).
//!
//! 1. A session with a backend pid (the server gives each connection one) is listed from
//!    then until it drops (`Session::set_backend_pid`, `Drop for Session`), in a slot of its
//!    own: the cluster-wide map is locked only to list, add and remove sessions.
//! 2. Each statement marks its slot active with its text on start and idle, idle in
//!    transaction or idle in transaction (aborted) on its end, with PostgreSQL's timestamps.
//! 3. The server installs a signaller (`Activities::set_signaller`) that interrupts a
//!    connection's statement (57014) or ends the connection (FATAL 57P01); embedded, with no
//!    connections, nothing can be signalled.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// One session as pg_stat_activity shows it; times in microseconds since 2000-01-01 UTC.
#[derive(Debug, Clone)]
pub struct Activity {
    pub pid: i32,
    pub database: String,
    pub user: String,
    pub application_name: String,
    /// The client's address and port (None for a Unix-domain socket).
    pub client: Option<(String, i32)>,
    pub backend_start: i64,
    pub xact_start: Option<i64>,
    pub query_start: Option<i64>,
    pub state_change: i64,
    /// `active`, `idle`, `idle in transaction`, `idle in transaction (aborted)`.
    pub state: &'static str,
    /// The running statement's text, else the last one's.
    pub query: Arc<str>,
}

/// A signal to a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendSignal {
    /// Cancel its running statement (57014).
    Cancel,
    /// End its connection (FATAL 57P01).
    Terminate,
}

/// Sends a signal to the backend with a pid; false if there is none.
pub type BackendSignaller = Arc<dyn Fn(i32, BackendSignal) -> bool + Send + Sync>;

/// One session's slot: the session changes it, the view reads it.
pub type ActivitySlot = Arc<Mutex<Activity>>;

/// The sessions of a cluster by pid.
#[derive(Default)]
pub struct Activities {
    sessions: Mutex<BTreeMap<i32, ActivitySlot>>,
    signaller: Mutex<Option<BackendSignaller>>,
}

impl std::fmt::Debug for Activities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Activities")
    }
}

impl Activities {
    /// Lists a session; the returned slot is what it updates.
    pub fn insert(&self, activity: Activity) -> ActivitySlot {
        let slot = Arc::new(Mutex::new(activity));
        let pid = slot.lock().pid;
        self.sessions.lock().insert(pid, slot.clone());
        slot
    }

    pub fn remove(&self, pid: i32) {
        self.sessions.lock().remove(&pid);
    }

    /// Every session, by pid.
    pub fn list(&self) -> Vec<Activity> {
        let slots: Vec<ActivitySlot> = self.sessions.lock().values().cloned().collect();
        slots.iter().map(|slot| slot.lock().clone()).collect()
    }

    pub fn set_signaller(&self, signaller: Option<BackendSignaller>) {
        *self.signaller.lock() = signaller;
    }

    /// Signals backend `pid`: false if no session has that pid (or nothing can signal).
    pub fn signal(&self, pid: i32, signal: BackendSignal) -> bool {
        if !self.sessions.lock().contains_key(&pid) {
            return false;
        }
        let signaller = self.signaller.lock().clone();
        signaller.is_some_and(|signaller| signaller(pid, signal))
    }
}

//! The session's row of pg_stat_activity (`catalog::activity`): listed under its backend
//! pid, marked active with each top-level statement's text (a query string, a protocol
//! Execute, a COPY) and idle, idle in transaction or idle in transaction (aborted) after.
//! Only the session's own slot is locked per statement.

use std::sync::Arc;

use super::{Session, State};
use crate::catalog::activity::Activity;
use crate::types::datetime::now_micros;

impl Session {
    pub(super) fn list_activity(&mut self, pid: i32) {
        let now = now_micros();
        if let Some(old) = self.activity.take() {
            let old_pid = old.lock().pid;
            self.catalog.cluster().activities().remove(old_pid);
        }
        let slot = self.catalog.cluster().activities().insert(Activity {
            pid,
            database: self.database.clone(),
            user: self.user.clone(),
            application_name: self
                .settings
                .get("application_name")
                .cloned()
                .unwrap_or_default(),
            client: None,
            backend_start: now,
            xact_start: None,
            query_start: None,
            state_change: now,
            state: "idle",
            query: Arc::from(""),
        });
        self.activity = Some(slot);
    }

    /// The client's address and port, for pg_stat_activity (the server sets it).
    pub fn set_client_address(&self, address: String, port: i32) {
        if let Some(slot) = &self.activity {
            slot.lock().client = Some((address, port));
        }
    }

    /// application_name changed: the row shows it.
    pub(super) fn note_application_name(&self) {
        if let (Some(slot), Some(name)) = (&self.activity, self.settings.get("application_name")) {
            let mut activity = slot.lock();
            if activity.application_name != *name {
                activity.application_name = name.clone();
            }
        }
    }

    /// A top-level statement with text `sql` starts.
    pub(crate) fn note_statement_start(&self, sql: &Arc<str>) {
        let Some(slot) = &self.activity else {
            return;
        };
        let now = now_micros();
        let mut activity = slot.lock();
        activity.state = "active";
        activity.query = sql.clone();
        activity.query_start = Some(now);
        activity.state_change = now;
        activity.xact_start.get_or_insert(now);
    }

    /// The statement ended: the session is idle, or idle inside its block.
    pub(crate) fn note_statement_end(&self) {
        let Some(slot) = &self.activity else {
            return;
        };
        let (state, in_transaction) = match self.state {
            State::Idle => ("idle", false),
            State::InBlock(_) => ("idle in transaction", true),
            State::Failed(_) => ("idle in transaction (aborted)", true),
        };
        let mut activity = slot.lock();
        activity.state = state;
        activity.state_change = now_micros();
        if !in_transaction {
            activity.xact_start = None;
        }
    }

    /// Leaves pg_stat_activity (the session drops).
    pub(super) fn unlist_activity(&mut self) {
        if let Some(slot) = self.activity.take() {
            let pid = slot.lock().pid;
            self.catalog.cluster().activities().remove(pid);
        }
    }
}

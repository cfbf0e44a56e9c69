//! The session's row of pg_stat_activity (`catalog::activity`): listed under its backend
//! pid, marked active with each statement's text and idle (in transaction, aborted) after.

use super::{Session, State};
use crate::catalog::activity::Activity;
use crate::types::datetime::now_micros;

impl Session {
    fn backend_pid(&self) -> Option<i32> {
        self.settings
            .get(crate::plan::expr::BACKEND_PID_SETTING)
            .and_then(|pid| pid.parse().ok())
    }

    pub(super) fn list_activity(&self, pid: i32) {
        let now = now_micros();
        self.catalog.cluster().activities().insert(Activity {
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
            query: String::new(),
        });
    }

    /// The client's address and port, for pg_stat_activity (the server sets it).
    pub fn set_client_address(&self, address: String, port: i32) {
        if let Some(pid) = self.backend_pid() {
            self.catalog
                .cluster()
                .activities()
                .update(pid, |activity| activity.client = Some((address, port)));
        }
    }

    /// A statement with text `sql` starts.
    pub(super) fn note_statement_start(&self, sql: &str) {
        let Some(pid) = self.backend_pid() else {
            return;
        };
        let now = now_micros();
        let application = self.settings.get("application_name").cloned();
        self.catalog.cluster().activities().update(pid, |activity| {
            activity.state = "active";
            activity.query = sql.to_string();
            activity.query_start = Some(now);
            activity.state_change = now;
            activity.xact_start.get_or_insert(now);
            if let Some(application) = application {
                activity.application_name = application;
            }
        });
    }

    /// The statement ended: the session is idle, or idle inside its block.
    pub(super) fn note_statement_end(&self) {
        let Some(pid) = self.backend_pid() else {
            return;
        };
        let (state, in_transaction) = match self.state {
            State::Idle => ("idle", false),
            State::InBlock(_) => ("idle in transaction", true),
            State::Failed(_) => ("idle in transaction (aborted)", true),
        };
        let application = self.settings.get("application_name").cloned();
        self.catalog.cluster().activities().update(pid, |activity| {
            activity.state = state;
            activity.state_change = now_micros();
            if !in_transaction {
                activity.xact_start = None;
            }
            if let Some(application) = application {
                activity.application_name = application;
            }
        });
    }

    /// Leaves pg_stat_activity (the session drops).
    pub(super) fn unlist_activity(&self) {
        if let Some(pid) = self.backend_pid() {
            self.catalog.cluster().activities().remove(pid);
        }
    }
}

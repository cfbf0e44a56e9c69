//! A session's settings: what SET changes and SHOW (and `current_setting`) reads.
//!
//! 1. A session starts with PostgreSQL's defaults and the connection's user and database
//!    (`crate::settings::default_settings`).
//! 2. SET (or the server, for startup parameters) changes a value (`set_setting`).
//! 3. After each change the values statements read on every run (`work_mem`, the default
//!    isolation) are worked out once (`settings_changed`), not parsed per statement.

use super::Session;
use crate::plan::expr::BACKEND_PID_SETTING;
use crate::plan::Isolation;
use crate::settings::default_settings;
use crate::types::zone::Zone;

/// What the server's database fixes for every session: the buffer's size and the page size,
/// as PostgreSQL's shared_buffers and block_size show them.
pub(super) fn server_settings(database: &hayate_engine::Database) -> [(String, String); 2] {
    [
        (
            "shared_buffers".into(),
            crate::exec::memory_size_text(database.buffer_bytes()),
        ),
        ("block_size".into(), database.page_size().to_string()),
    ]
}

impl Session {
    pub(super) fn with_settings_read(mut self) -> Session {
        self.settings_changed();
        self
    }

    /// Works out what statements read of the settings (see the fields).
    pub(super) fn settings_changed(&mut self) {
        self.default_isolation = self.read_default_isolation();
        if matches!(self.state, super::State::Idle) {
            let name = self.default_isolation.name();
            self.settings
                .insert("transaction_isolation".into(), name.into());
        }
        self.work_mem_bytes = self.read_work_mem_bytes();
        self.note_application_name();
        let zone = self
            .settings
            .get("timezone")
            .and_then(|name| Zone::setting(name).ok())
            .unwrap_or_else(Zone::utc);
        if zone.name() != self.zone.get().name() {
            let zone = std::sync::Arc::new(zone);
            self.zone.set(zone.clone());
            // The statements after a SET in the same string read the new zone.
            crate::types::zone::replace_current(zone);
        }
    }

    /// The settings PostgreSQL reports to the client whenever they change (GUC_REPORT) that a
    /// session can change: TimeZone and application_name, with their current values. The
    /// server compares them before each ReadyForQuery and sends a ParameterStatus for each
    /// that changed, as PostgreSQL does.
    pub fn reported_settings(&self) -> [(&'static str, String); 2] {
        [
            ("TimeZone", self.zone.get().name().to_string()),
            (
                "application_name",
                self.settings
                    .get("application_name")
                    .cloned()
                    .unwrap_or_default(),
            ),
        ]
    }

    /// The session's zone, for the server to make current around its statements and rows.
    pub fn zone(&self) -> crate::types::zone::SessionZone {
        self.zone.clone()
    }

    /// Makes the session's zone current until the guard drops (for callers that run the
    /// session without a server entering it).
    pub(super) fn enter_zone(&self) -> crate::types::zone::Entered {
        self.zone.enter()
    }

    /// SET TIME ZONE's value checked (22023 if no zone) and written as SHOW gives it.
    pub(super) fn time_zone_setting(value: &str) -> crate::error::SqlResult<String> {
        Ok(Zone::setting(value)?.name().to_string())
    }

    /// A setting's value as SHOW reads it: on a hot standby (which may be promoted while
    /// the session lasts) the read-only settings are on, as PostgreSQL reports them to
    /// libpq's and rust-postgres' `target_session_attrs` checks.
    pub(super) fn setting(&self, name: &str) -> Option<String> {
        let standby_on = matches!(
            name,
            "transaction_read_only" | "default_transaction_read_only" | "in_hot_standby"
        );
        if standby_on && self.catalog.database().is_standby() {
            return Some("on".into());
        }
        self.settings.get(name).cloned()
    }

    /// The connection's process id, as its cancel key gives it (pg_backend_pid()).
    /// The connection's backend pid: the session is listed in pg_stat_activity under it
    /// (and can be signalled) until it drops.
    pub fn set_backend_pid(&mut self, pid: i32) {
        self.settings
            .insert(BACKEND_PID_SETTING.into(), pid.to_string());
        self.list_activity(pid);
    }

    /// Sets a setting from outside SQL (the server's configuration and the client's
    /// startup parameters): as SET would, 22023 for a TimeZone that is no zone.
    pub fn set_setting(&mut self, name: &str, value: &str) -> crate::error::SqlResult<()> {
        let name = name.to_ascii_lowercase();
        let value = match name.as_str() {
            "timezone" => Self::time_zone_setting(value)?,
            _ => value.to_string(),
        };
        self.reset_values.insert(name.clone(), value.clone());
        self.settings.insert(name, value);
        self.settings_changed();
        Ok(())
    }

    /// Sets a setting the client sent at startup (`-c name=value` in its options): as
    /// `set_setting`, but 55P02 for one no session changes, as PostgreSQL refuses it.
    pub fn set_client_setting(&mut self, name: &str, value: &str) -> crate::error::SqlResult<()> {
        let name = name.to_ascii_lowercase();
        Self::check_settable(&name)?;
        self.set_setting(&name, value)
    }

    /// Sets (None: removes) a setting from SQL, as PostgreSQL scopes it: inside a block the
    /// old value is kept to be put back when the block rolls back, or, for a LOCAL one,
    /// whenever it ends; outside a block LOCAL changes nothing (PostgreSQL warns).
    pub(super) fn assign_setting(&mut self, name: &str, value: Option<String>, local: bool) {
        if name.starts_with("hayate.") {
            return; // the session's own values (`check_settable` refuses them from SQL)
        }
        let in_block = !matches!(self.state, super::State::Idle);
        if local && !in_block {
            log::warn!("SET LOCAL can only be used in transaction blocks");
            return;
        }
        let old = match value {
            Some(value) => self.settings.insert(name.to_string(), value),
            None => self.settings.remove(name),
        };
        if in_block {
            self.setting_undo.push((name.to_string(), old, local));
        }
        self.settings_changed();
    }

    /// ROLLBACK TO SAVEPOINT: the setting changes after the first `kept` go back.
    pub(super) fn undo_settings_after(&mut self, kept: usize) {
        if self.setting_undo.len() <= kept {
            return;
        }
        for (name, old, _) in self.setting_undo.split_off(kept).into_iter().rev() {
            match old {
                Some(value) => self.settings.insert(name, value),
                None => self.settings.remove(&name),
            };
        }
        self.settings_changed();
    }

    /// The block ends: its LOCAL settings go back, and all its settings if it rolled back.
    pub(super) fn end_block_settings(&mut self, committed: bool) {
        let undo = std::mem::take(&mut self.setting_undo);
        if undo.is_empty() {
            return;
        }
        // Each name goes back to its value before the block when it rolled back; when it
        // committed, to its value before the first LOCAL change after its last plain one.
        let mut before: std::collections::HashMap<String, Option<String>> = Default::default();
        for (name, old, local) in undo {
            match (committed, local) {
                (false, _) => {
                    before.entry(name).or_insert(old);
                }
                (true, true) => {
                    before.entry(name).or_insert(old);
                }
                (true, false) => {
                    before.remove(&name);
                }
            }
        }
        for (name, old) in before {
            match old {
                Some(value) => self.settings.insert(name, value),
                None => self.settings.remove(&name),
            };
        }
        self.settings_changed();
    }

    /// 55P02 for a setting SQL may not change: the session's own `hayate.*` values (its
    /// backend pid, its database).
    pub(super) fn check_settable(name: &str) -> crate::error::SqlResult<()> {
        crate::plan::expr::check_settable(name)
    }

    /// Whether RESET ALL leaves `name` alone: the transaction's settings and those no
    /// session changes.
    pub(super) fn kept_by_reset_all(name: &str) -> bool {
        name.starts_with("transaction_") || crate::plan::expr::fixed_setting(name).is_some()
    }

    /// The value RESET gives `name`: the starting one (`set_setting`), else PostgreSQL's
    /// default, else none.
    pub(super) fn reset_value(&self, name: &str) -> Option<String> {
        self.reset_values
            .get(name)
            .cloned()
            .or_else(|| default_settings(&self.user, &self.database).remove(name))
    }

    /// work_mem in bytes (checked when set; the default if unset or unreadable).
    pub(super) fn read_work_mem_bytes(&self) -> usize {
        let setting = self.settings.get("work_mem").map(String::as_str);
        crate::exec::parse_work_mem(setting.unwrap_or(crate::exec::WORK_MEM_DEFAULT))
            .or_else(|_| crate::exec::parse_work_mem(crate::exec::WORK_MEM_DEFAULT))
            .expect("the default work_mem is valid")
    }

    /// default_transaction_isolation (checked when set; READ COMMITTED if unreadable).
    pub(super) fn read_default_isolation(&self) -> Isolation {
        self.settings
            .get("default_transaction_isolation")
            .and_then(|level| Isolation::parse(level))
            .unwrap_or(Isolation::ReadCommitted)
    }
}

//! The settings a session starts with and those SHOW ALL and pg_settings list: shared by
//! the session (`session::settings`) and the system tables, and importing neither.

use std::collections::BTreeMap;

/// PostgreSQL's default `work_mem`.
pub const WORK_MEM_DEFAULT: &str = "4MB";

/// The settings SHOW ALL and pg_settings list (not the session's own `hayate.` values), by
/// the names PostgreSQL writes them with (`DateStyle`, `TimeZone`), in name order.
pub(crate) fn listed_settings(
    settings: &BTreeMap<String, String>,
) -> impl Iterator<Item = (&str, &str)> {
    settings
        .iter()
        .filter(|(name, _)| !name.starts_with("hayate."))
        .map(|(name, value)| {
            let shown = match name.as_str() {
                "datestyle" => "DateStyle",
                "intervalstyle" => "IntervalStyle",
                "timezone" => "TimeZone",
                other => other,
            };
            (shown, value.as_str())
        })
}

/// PostgreSQL's defaults, and the connection's user (`session_authorization`) and
/// database (`hayate.database`).
pub(crate) fn default_settings(user: &str, database: &str) -> BTreeMap<String, String> {
    let pairs = [
        ("server_version", crate::SERVER_VERSION),
        ("server_version_num", crate::SERVER_VERSION_NUM),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("datestyle", "ISO, MDY"),
        ("timezone", "UTC"),
        ("intervalstyle", "postgres"),
        ("integer_datetimes", "on"),
        ("standard_conforming_strings", "on"),
        ("transaction_isolation", "read committed"),
        ("default_transaction_isolation", "read committed"),
        ("search_path", "\"$user\", public"),
        ("application_name", ""),
        ("extra_float_digits", "1"),
        ("max_identifier_length", "63"),
        ("max_index_keys", "32"),
        ("lc_messages", "C"),
        ("synchronous_commit", "on"),
        ("transaction_read_only", "off"),
        ("default_transaction_read_only", "off"),
        ("in_hot_standby", "off"),
        ("work_mem", WORK_MEM_DEFAULT),
        // The server sets its own (`hayate serve --max-connections`).
        ("max_connections", "100"),
    ];
    let mut settings: BTreeMap<String, String> = pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    settings.insert("session_authorization".into(), user.into());
    settings.insert("hayate.database".into(), database.into());
    settings
}

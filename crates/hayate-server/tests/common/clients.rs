//! Third-party clients the tests run unmodified (psql, pgbench, sysbench, psycopg, JDBC).
//!
//! A client that is not installed makes its test print a loud notice and check nothing else;
//! with HAYATE_REQUIRE_CLIENTS=1 (CI sets it) a missing client fails the test instead.

use std::process::Command;

/// True when `program args...` runs and exits successfully (e.g. `psql --version`).
pub fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false)
}

/// Whether a test may go on: `available`, or else a loud notice (and a failure when
/// HAYATE_REQUIRE_CLIENTS is set) naming what to install.
pub fn require(available: bool, client: &str, install: &str) -> bool {
    if available {
        return true;
    }
    let message =
        format!("{client} NOT FOUND: its client test did NOT run (install {install} to run it)");
    eprintln!("\n!!!!!!!! {message} !!!!!!!!\n");
    assert!(
        std::env::var_os("HAYATE_REQUIRE_CLIENTS").is_none(),
        "{message}, and HAYATE_REQUIRE_CLIENTS is set"
    );
    false
}

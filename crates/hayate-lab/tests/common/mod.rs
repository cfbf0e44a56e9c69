//! Helpers shared by the `hayate-lab` binary's end-to-end tests.
// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::{Command, Output};

/// Runs the `hayate-lab` binary with `args` (logging at warn).
pub fn lab<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_hayate-lab"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run hayate-lab")
}

/// (stdout, stderr) as text.
pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs `hayate-lab` and returns its stdout, failing the test (with both outputs) if it
/// failed.
pub fn lab_ok<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let output = lab(args);
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "hayate-lab failed:\n{stdout}\n{stderr}"
    );
    stdout
}

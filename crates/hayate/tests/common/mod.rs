//! Helpers shared by the `hayate` binary's end-to-end tests.
// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::{Command, Output};

/// Runs the `hayate` binary with `args` (logging at warn).
pub fn hayate<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_hayate"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run hayate")
}

/// (stdout, stderr) as text.
pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs `hayate` and returns its stdout, failing the test (with both outputs) if it failed.
pub fn hayate_ok<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let output = hayate(args);
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "hayate failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// A TCP port of 127.0.0.1 free now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("free port")
}

//! The `hayate` binary end to end: demo, check and stats on its database, a tiny B+tree
//! benchmark, and user errors reported as `error: ...` with exit code 1.

use crate::common;

use common::{hayate, text};

#[test]
fn demo_then_check_and_stats_on_its_directory() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let dir = temporary.path().join("db");
    let dir = dir.to_str().expect("utf-8 path");

    let output = hayate(["demo", "--seconds", "1", "--rows", "2000", "--dir", dir]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("check: ok"), "no check result:\n{stdout}");
    assert!(
        stdout.contains("verified after reopening: 2,000 rows"),
        "{stdout}"
    );

    let output = hayate(["check", "--dir", dir]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "check failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("check: ok (1 trees, 2,000 rows"),
        "{stdout}"
    );

    let output = hayate(["stats", "--dir", dir]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "stats failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("buffer pool"), "{stdout}");

    // A second demo must not overwrite the database.
    let output = hayate(["demo", "--seconds", "1", "--dir", dir]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr.starts_with("error: ") && stderr.contains("already holds a database"));
}

#[test]
fn demo_crash_replays_the_log() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let dir = temporary.path().to_str().expect("utf-8 path");
    let output = hayate([
        "demo",
        "--seconds",
        "1",
        "--rows",
        "500",
        "--threads",
        "2",
        "--crash",
        "--dir",
        dir,
    ]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{stderr}");
    assert!(
        !stdout.contains(": 0 log records"),
        "nothing replayed:\n{stdout}"
    );
    assert!(
        stdout.contains("verified after reopening: 500 rows"),
        "{stdout}"
    );
}

#[test]
fn user_errors_exit_1_with_a_message() {
    let output = hayate(["demo", "--threads", "zero"]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: invalid value 'zero' for '--threads"),
        "{stderr}"
    );

    let output = hayate(["demo", "--page-size", "1000", "--seconds", "1"]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: invalid --page-size"), "{stderr}");

    let temporary = tempfile::tempdir().expect("tempdir");
    let dir = temporary.path().to_str().expect("utf-8 path");
    let output = hayate(["check", "--dir", dir]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: no Hayate database in"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

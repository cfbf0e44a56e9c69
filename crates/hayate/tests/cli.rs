//! The `hayate` binary end to end: demo, check and stats on its database, a tiny B+tree
//! benchmark, and user errors reported as `error: ...` with exit code 1.

mod common;

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
fn bench_btree_with_few_keys() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let json = temporary.path().join("bench.json");
    let json = json.to_str().expect("utf-8 path");
    let output = hayate(["bench", "btree", "--keys", "2000", "--json", json]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "bench failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("inserts/s") && stdout.contains("machine:"),
        "{stdout}"
    );
    let written = std::fs::read_to_string(json).expect("json written");
    assert!(written.contains("\"inserts_per_second\"") && written.contains("\"kernel\""));
}

#[test]
fn bench_tasks_runs_threads_and_tasks() {
    // On the real disk (the benchmark refuses tmpfs): under the crate's target directory.
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/cli-test");
    std::fs::create_dir_all(&base).expect("create test directory");
    let output = hayate([
        "bench",
        "tasks",
        "--seconds",
        "1",
        "--dir",
        base.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "bench failed:\n{stdout}\n{stderr}");
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|line| {
            line.trim_start().starts_with("threads") || line.trim_start().starts_with("tasks")
        })
        .collect();
    assert_eq!(
        rows.len(),
        5,
        "two thread runs and three task runs:\n{stdout}"
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

//! `hayate-lab bench`: the engine's micro benchmarks run, print their tables and write JSON.

use crate::common;

use common::{lab, text};

#[test]
fn bench_btree_with_few_keys() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let json = temporary.path().join("bench.json");
    let json = json.to_str().expect("utf-8 path");
    let output = lab(["bench", "btree", "--keys", "2000", "--json", json]);
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
fn bench_tasks_runs_threads_and_fibers() {
    // On the real disk (the benchmark refuses tmpfs): under the crate's target directory.
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/cli-test");
    std::fs::create_dir_all(&base).expect("create test directory");
    let output = lab([
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
            line.trim_start().starts_with("threads") || line.trim_start().starts_with("fibers")
        })
        .collect();
    assert_eq!(
        rows.len(),
        5,
        "two thread runs and three fiber runs:\n{stdout}"
    );
}

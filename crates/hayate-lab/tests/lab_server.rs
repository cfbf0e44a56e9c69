//! Hayate over the wire in the lab (feature `peers`): `hayate-lab primitive --peers hayate-wire`
//! starts `hayate serve` from the binary, loads the primitive tables through the PostgreSQL
//! protocol and runs both modes with the PostgreSQL peer's client code.
#![cfg(feature = "peers")]

use crate::common;

use common::lab_ok;

#[test]
fn primitive_workload_runs_through_hayate_serve() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let results = temporary.path().join("results");
    let dir = temporary.path().join("data");
    std::fs::create_dir(&dir).expect("data directory");
    let stdout = lab_ok([
        "primitive",
        "--no-hayate",
        "--peers",
        "hayate-wire",
        "--tables",
        "2",
        "--rows",
        "200",
        "--seconds",
        "1",
        "--warmup",
        "0",
        "--concurrency",
        "4",
        "--buffer-percent",
        "100",
        "--no-replay",
        "--dir",
        dir.to_str().unwrap(),
        "--results",
        results.to_str().unwrap(),
    ]);
    assert!(stdout.contains("hayate-wire"), "{stdout}");
    let file = std::fs::read_dir(&results)
        .expect("results directory")
        .map(|entry| entry.expect("entry").path())
        .find(|path| path.to_string_lossy().contains("primitive-"))
        .expect("a primitive results file");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).expect("read")).expect("JSON");
    let runs = json["results"]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "select and update");
    for run in runs {
        assert_eq!(run["engine"], "hayate-wire");
        assert!(run["transactions"].as_u64().unwrap() > 0, "{run}");
        assert!(run["engine_settings"]["commit"]
            .as_str()
            .unwrap()
            .starts_with("durable"));
    }
    // The server's directory is removed; only the results are left under the base directory.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .map(|entry| entry.expect("entry").file_name())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

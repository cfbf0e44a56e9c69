//! `hayate-lab temp` end to end on a small input: the in-memory baseline and a work memory
//! small enough to spill, on the real device and an emulated one; the spilled points wrote and
//! read temporary bytes (the command itself checks the sort order and the join's matches).

use crate::common;

use common::lab_ok;

#[test]
fn temp_experiment_spills_and_records_its_points() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let results = temporary.path().join("results");
    let stdout = lab_ok([
        "temp",
        "--records",
        "100000",
        "--work-mem",
        "unlimited,1",
        "--device-classes",
        "real,low-latency",
        "--sql-rows",
        "0",
        "--dir",
        temporary.path().to_str().unwrap(),
        "--results",
        results.to_str().unwrap(),
    ]);
    assert!(stdout.contains("vs in memory"), "{stdout}");
    let file = std::fs::read_dir(&results)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.to_string_lossy().ends_with(".json"))
        .expect("a results file");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let points = json["results"]["points"].as_array().expect("points");
    assert_eq!(
        points.len(),
        2 * 2 * 2,
        "2 classes x 2 operations x 2 memories"
    );
    for point in points {
        let written = point["temp_bytes_written"].as_u64().unwrap();
        let read = point["temp_bytes_read"].as_u64().unwrap();
        if point["work_mem_bytes"].is_null() {
            assert_eq!(written, 0, "the baseline stays in memory: {point}");
        } else {
            // 100,000 records of 108 bytes (10,000 on the join's build side) do not fit in
            // 1 MiB: everything goes through flash.
            assert!(written > 100_000 * 108 / 2, "{point}");
            assert_eq!(
                read, written,
                "every spilled byte is read back once: {point}"
            );
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(temporary.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with("hayate-lab-temp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The SQL part: each query with a 64kB work_mem spilled (the command itself checks that
/// its answer equals the in-memory baseline's) and left no temporary file behind.
#[test]
fn temp_experiment_runs_sql_queries_with_small_and_large_work_mem() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let results = temporary.path().join("results");
    let stdout = lab_ok([
        "temp",
        "--records",
        "1000",
        "--work-mem",
        "unlimited",
        "--device-classes",
        "real",
        "--sql-rows",
        "20000",
        "--sql-work-mem",
        "64kB",
        "--dir",
        temporary.path().to_str().unwrap(),
        "--results",
        results.to_str().unwrap(),
    ]);
    assert!(stdout.contains("sql query"), "{stdout}");
    let file = std::fs::read_dir(&results)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.to_string_lossy().ends_with(".json"))
        .expect("a results file");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let points = json["results"]["sql_points"]
        .as_array()
        .expect("sql points");
    assert_eq!(points.len(), 5 * 2, "5 queries x 2 work_mems");
    for point in points {
        let written = point["temp_bytes_written"].as_u64().unwrap();
        let read = point["temp_bytes_read"].as_u64().unwrap();
        if point["work_mem"] == "64kB" {
            assert!(written > 256 << 10, "{point}");
            assert_eq!(read, written, "{point}");
        } else {
            assert_eq!(written, 0, "the baseline stays in memory: {point}");
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(temporary.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with("hayate-lab-temp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

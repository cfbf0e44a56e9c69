//! `hayate-lab primitive --quick` end to end: loads, runs both modes at two buffer sizes,
//! replays each run's I/O trace and writes a complete results file and timelines.

use crate::common;

use common::lab_ok;

#[test]
fn quick_primitive_run_writes_complete_results() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let results = temporary.path().join("results");
    let stdout = lab_ok([
        "primitive".as_ref(),
        "--quick".as_ref(),
        "--dir".as_ref(),
        temporary.path().as_os_str(),
        "--results".as_ref(),
        results.as_os_str(),
    ]);
    assert!(stdout.contains("results: "), "{stdout}");

    let files: Vec<_> = std::fs::read_dir(&results)
        .expect("results directory")
        .map(|entry| entry.expect("entry").path())
        .collect();
    let primitive = files
        .iter()
        .find(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("primitive-") && name.ends_with(".json")
        })
        .expect("a primitive results file");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(primitive).expect("read")).expect("JSON");
    assert_eq!(json["kind"], "primitive");
    assert!(json["machine"]["cpu_count"].as_u64().unwrap() >= 1);
    let runs = json["results"]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 4, "2 buffer sizes x 2 modes");
    for run in runs {
        let what = format!("{} {}%", run["mode"], run["buffer_percent"]);
        assert_eq!(run["engine"], "hayate");
        assert!(run["transactions"].as_u64().unwrap() > 0, "{what}");
        assert!(run["latency"]["p99_us"].as_f64().unwrap() > 0.0, "{what}");
        assert!(run["engine_settings"]["commit"].is_string(), "{what}");
        let split = &run["time_split"];
        let total: f64 = ["cpu", "read_io", "write_io", "log_wait", "lock_wait"]
            .iter()
            .map(|part| split[part].as_f64().unwrap())
            .sum();
        assert!((total - 1.0).abs() < 1e-6, "{what}: split sums to {total}");
        // Alpha from the replay of the run's trace.
        let alpha = &run["alpha"];
        assert!(alpha["trace_records"].as_u64().unwrap() > 0, "{what}");
        assert!(alpha["replay_iops"].as_f64().unwrap() > 0.0, "{what}");
        assert!(alpha["alpha"].as_f64().unwrap() > 0.0, "{what}");
        // Every update is a durable commit: the log was flushed.
        if run["mode"] == "update" {
            assert!(run["log_flushes"].as_u64().unwrap() > 0, "{what}");
            assert!(
                run["io"]["writes_per_second"].as_f64().unwrap() > 0.0,
                "{what}"
            );
        }
        let timeline = run["timeline_file"].as_str().expect("timeline file");
        let timeline: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(results.join(timeline)).expect("timeline"),
        )
        .expect("timeline JSON");
        let workers = timeline["workers"].as_array().expect("workers");
        assert!(!workers.is_empty());
        assert!(workers
            .iter()
            .any(|worker| !worker["spans"].as_array().unwrap().is_empty()));
    }
    // The run ends with the HTML report of the results directory.
    let report = std::fs::read_to_string(results.join("report.html")).expect("report.html");
    assert!(report.contains("<svg"), "the report has no chart");
    assert!(stdout.contains("wrote "), "{stdout}");

    // The lab's temporary database is gone.
    let leftovers: Vec<_> = std::fs::read_dir(temporary.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".hayate-lab-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

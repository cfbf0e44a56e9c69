//! `hayate-lab device --quick` end to end: a results file with every section measured, and no
//! test file left behind.

use crate::common;

use common::{lab, lab_ok};

#[test]
fn quick_device_run_writes_every_section_and_cleans_up() {
    // On the disk (not tmpfs), so that O_DIRECT is what gets measured.
    let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let temporary = tempfile::tempdir_in(scratch).expect("tempdir");
    let dir = temporary.path().join("device");
    let results = temporary.path().join("results");
    let stdout = lab_ok([
        "device".as_ref(),
        "--quick".as_ref(),
        "--file-mib".as_ref(),
        "32".as_ref(),
        "--seconds-per-point".as_ref(),
        "0.05".as_ref(),
        "--dir".as_ref(),
        dir.as_os_str(),
        "--results".as_ref(),
        results.as_os_str(),
    ]);
    assert!(stdout.contains("random read"), "{stdout}");
    assert!(stdout.contains("append + fdatasync"), "{stdout}");

    let leftovers: Vec<_> = std::fs::read_dir(&dir).expect("dir").collect();
    assert!(
        leftovers.is_empty(),
        "test files left behind: {leftovers:?}"
    );

    let files: Vec<_> = std::fs::read_dir(&results)
        .expect("results dir")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).expect("read results");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(json["kind"], "device");
    assert_eq!(json["results"]["file_bytes"], 32 << 20);
    assert!(json["results"]["backend"]
        .as_str()
        .is_some_and(|b| b.contains("O_DIRECT")));
    assert_ne!(json["device"]["file_system"], "unknown");
    for section in [
        "random_read",
        "random_write",
        "sequential_write",
        "synced_write",
    ] {
        let points = json["results"][section].as_array().expect(section);
        assert!(!points.is_empty(), "{section} is empty");
        for point in points {
            assert!(
                point["operations"].as_u64().unwrap_or(0) > 0,
                "{section}: {point}"
            );
            assert!(
                point["ops_per_second"].as_f64().unwrap_or(0.0) > 0.0,
                "{point}"
            );
            assert!(
                point["latency"]["p50_us"].as_f64().unwrap_or(0.0) > 0.0,
                "{point}"
            );
        }
    }
    let depths: Vec<u64> = json["results"]["random_read"]
        .as_array()
        .expect("reads")
        .iter()
        .map(|point| point["queue_depth"].as_u64().expect("depth"))
        .collect();
    assert_eq!(depths, vec![1, 8, 64]);
}

#[test]
fn impossible_options_are_clear_errors() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let output = lab([
        "device".as_ref(),
        "--quick".as_ref(),
        "--page-size".as_ref(),
        "1000".as_ref(),
        "--dir".as_ref(),
        temporary.path().as_os_str(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--page-size 1000"), "{stderr}");
}

//! `hayate-lab report` end to end: its help, an empty results directory as a clear error, and
//! a page written from a device result while a broken file is listed as skipped.

use crate::common;
use std::path::Path;

use common::{lab, text};

fn write_device_result(dir: &Path) {
    let point = |queue_depth: u32, ops_per_second: f64| {
        serde_json::json!({
            "queue_depth": queue_depth,
            "block_bytes": 4096,
            "operations": 1000,
            "ops_per_second": ops_per_second,
            "mib_per_second": ops_per_second * 4096.0 / 1048576.0,
            "latency": {
                "mean_us": 80.0, "p50_us": 75.0, "p90_us": 100.0,
                "p99_us": 160.0, "p999_us": 300.0, "max_us": 900.0
            }
        })
    };
    let file = serde_json::json!({
        "kind": "device",
        "schema_version": 1,
        "hayate_version": "0.1.0",
        "started_unix": 1_714_571_100u64,
        "command_line": ["hayate-lab", "device"],
        "machine": {
            "cpu_count": 2, "cpu_model": "CLI Test CPU", "kernel": "Linux 6.1",
            "memory_bytes": 1u64 << 30
        },
        "device": {
            "directory": "/data", "block_device": "vda", "file_system": "ext4",
            "model": null, "rotational": false
        },
        "results": {
            "backend": "io_uring + O_DIRECT",
            "page_size": 4096,
            "file_bytes": 1u64 << 30,
            "seconds_per_point": 1.0,
            "random_read": [point(1, 12_000.0), point(2, 23_000.0), point(4, 41_000.0)],
            "random_write": [point(1, 9_000.0)],
            "sequential_write": [],
            "synced_write": [point(1, 2_000.0)]
        }
    });
    let text = serde_json::to_string_pretty(&file).expect("encode");
    std::fs::write(dir.join("device-1714571100.json"), text).expect("write");
}

#[test]
fn help_explains_every_option() {
    let output = lab(["report", "--help"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    for option in ["--results <DIR>", "--out <FILE>", "report.html", "skipped"] {
        assert!(stdout.contains(option), "help lacks {option}:\n{stdout}");
    }
}

#[test]
fn report_from_a_results_directory() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let dir = temporary.path();
    let dir_text = dir.to_str().expect("utf-8 path");

    let output = lab(["report", "--results", dir_text]);
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr.starts_with("error: no results (*.json)"), "{stderr}");

    write_device_result(dir);
    std::fs::write(dir.join("notes.json"), "not json").expect("write");
    let output = lab(["report", "--results", dir_text]);
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "report failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("skipped notes.json: not valid JSON"),
        "{stdout}"
    );
    let page = std::fs::read_to_string(dir.join("report.html")).expect("report written");
    assert_eq!(page.matches("<svg").count(), 2, "the device's two charts");
    assert!(page.contains("CLI Test CPU") && page.contains("Random I/O by queue depth"));

    let out = dir.join("elsewhere.html");
    let out_text = out.to_str().expect("utf-8 path");
    let output = lab(["report", "--results", dir_text, "--out", out_text]);
    assert!(output.status.success());
    assert!(out.exists(), "--out names the page");
}

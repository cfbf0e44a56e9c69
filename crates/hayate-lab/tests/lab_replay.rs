//! `hayate-lab replay --trace FILE` end to end: replays a CSV trace on its files, prints alpha,
//! writes a results file, and leaves the files byte for byte as they were.

use crate::common;

use common::{lab, lab_ok};

/// One line of the trace's CSV format, as `hayate-lab primitive --trace` writes it.
fn record(start_ns: u64, op: &str, file: &str, offset: u64, len: u64) -> String {
    format!("{start_ns},{op},{file},{offset},{len},50000\n")
}

/// The CSV file of a trace: its header line, then one line per I/O.
fn write_csv(records: &[String], path: &std::path::Path) {
    let text = format!(
        "start_ns,op,file,offset,len,latency_ns\n{}",
        records.concat()
    );
    std::fs::write(path, text).expect("write trace");
}

#[test]
fn replay_of_a_csv_trace_reports_alpha_and_keeps_the_files() {
    let scratch = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let temporary = tempfile::tempdir_in(scratch).expect("tempdir");
    let dir = temporary.path().join("db");
    std::fs::create_dir(&dir).expect("mkdir");
    let data: Vec<u8> = (0..64 * 4096u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("data.hyt"), &data).expect("write data");
    let mut records = Vec::new();
    for step in 0..100u64 {
        let op = if step % 4 == 0 { "write" } else { "read" };
        records.push(record(
            step * 1_000_000,
            op,
            "data.hyt",
            step % 64 * 4096,
            4096,
        ));
    }
    records.push(record(100_000_000, "sync", "data.hyt", 0, 0));
    records.push(record(100_000_000, "read", "wal.0000000000000000", 0, 4096));
    let trace = temporary.path().join("run.trace.csv");
    write_csv(&records, &trace);
    let results = temporary.path().join("results");

    let stdout = lab_ok([
        "replay".as_ref(),
        "--concurrency".as_ref(),
        "4".as_ref(),
        "--trace".as_ref(),
        trace.as_os_str(),
        "--dir".as_ref(),
        dir.as_os_str(),
        "--results".as_ref(),
        results.as_os_str(),
    ]);
    assert!(stdout.contains("replayed 102 of 102 records"), "{stdout}");
    assert!(stdout.contains("75 reads"), "{stdout}");
    assert!(stdout.contains("25 writes"), "{stdout}");
    assert!(stdout.contains("1 records of removed files"), "{stdout}");
    // 101 reads and writes (one of a removed file) from 0 to 100.05 ms.
    assert!(stdout.contains("alpha = run 1,009/s"), "{stdout}");
    assert_eq!(std::fs::read(dir.join("data.hyt")).expect("read"), data);

    let files: Vec<_> = std::fs::read_dir(&results).expect("results").collect();
    assert_eq!(files.len(), 1);
    let path = files
        .into_iter()
        .next()
        .expect("one")
        .expect("entry")
        .path();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
    assert_eq!(json["kind"], "replay");
    assert_eq!(json["results"]["report"]["writes"], 25);
    assert_eq!(json["results"]["alpha"]["trace_records"], 102);
    assert!(
        json["results"]["alpha"]["replay_iops"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0
    );
}

#[test]
fn a_malformed_trace_is_a_clear_error() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let trace = temporary.path().join("bad.csv");
    std::fs::write(&trace, "not a trace\n").expect("write");
    let output = lab([
        "replay".as_ref(),
        "--trace".as_ref(),
        trace.as_os_str(),
        "--dir".as_ref(),
        temporary.path().as_os_str(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot read trace"), "{stderr}");
}

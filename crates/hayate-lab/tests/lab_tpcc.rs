//! TPC-C end to end on a small database (1 warehouse, seconds): load with the consistency
//! check, a quick measured run, the check afterwards, a few crash cycles with SIGKILL, and a
//! check that fails on deliberately damaged data.

use crate::common;

use std::path::Path;

use common::{lab, lab_ok, text};

fn json_files(dir: &Path, prefix: &str) -> Vec<serde_json::Value> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("results directory")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(".json")
        })
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
        .collect()
}

/// Every condition of a JSON list of condition results passed.
fn all_pass(conditions: &serde_json::Value) -> bool {
    let conditions = conditions.as_array().expect("conditions");
    !conditions.is_empty()
        && conditions
            .iter()
            .all(|condition| condition["failures"].as_u64() == Some(0))
}

#[test]
fn tpcc_loads_runs_checks_and_survives_kills() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let db = temporary.path().join("tpcc");
    let results = temporary.path().join("results");

    // Load: 1 warehouse, every condition (11 included) holds.
    let stdout = lab_ok([
        "tpcc".as_ref(),
        "load".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
    ]);
    assert!(stdout.contains("loaded 1 warehouse(s)"), "{stdout}");
    assert_eq!(stdout.matches(" pass ").count(), 12, "{stdout}");

    // A quick run: all five transaction types commit; the check afterwards passes.
    let args = [
        "tpcc".as_ref(),
        "run".as_ref(),
        "--quick".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        "--dir".as_ref(),
        temporary.path().as_os_str(),
        "--results".as_ref(),
        results.as_os_str(),
    ];
    let stdout = lab_ok(args);
    assert!(stdout.contains("NOPM"), "{stdout}");
    let files = json_files(&results, "tpcc-");
    assert_eq!(files.len(), 1);
    let run = &files[0]["results"]["runs"][0];
    assert_eq!(run["engine"], "hayate");
    assert!(run["nopm"].as_f64().unwrap() > 0.0, "{run}");
    for typed in run["per_type"].as_array().unwrap() {
        assert!(typed["committed"].as_u64().unwrap() > 0, "{typed}");
    }
    let split = &run["time_split"];
    let shares: f64 = ["cpu", "read_io", "write_io", "log_wait", "lock_wait"]
        .iter()
        .map(|part| split[part].as_f64().unwrap())
        .sum();
    assert!((shares - 1.0).abs() < 0.05, "{split}");
    let check = &files[0]["results"]["checks"][0];
    assert_eq!(check["engine"], "hayate");
    assert!(all_pass(&check["conditions"]), "{check}");
    assert!(results.join("report.html").exists());

    // The check command: 11 is skipped after runs, the rest pass.
    let stdout = lab_ok([
        "tpcc".as_ref(),
        "check".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
    ]);
    assert!(stdout.contains("skipped"), "{stdout}");
    assert_eq!(stdout.matches(" pass ").count(), 11, "{stdout}");

    // Three kill-and-recover cycles: every acknowledged New-Order survives.
    let args = [
        "tpcc".as_ref(),
        "crash".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        "--cycles".as_ref(),
        "3".as_ref(),
        "--min-ms".as_ref(),
        "300".as_ref(),
        "--max-ms".as_ref(),
        "900".as_ref(),
        "--dir".as_ref(),
        temporary.path().as_os_str(),
        "--results".as_ref(),
        results.as_os_str(),
    ];
    let stdout = lab_ok(args);
    let crash = json_files(&results, "tpcc-crash-");
    let cycles = crash[0]["results"]["cycles"].as_array().unwrap().clone();
    assert_eq!(cycles.len(), 3, "{stdout}");
    let acknowledged: u64 = cycles
        .iter()
        .map(|cycle| cycle["acknowledged_new_orders"].as_u64().unwrap())
        .sum();
    assert!(acknowledged > 0, "{stdout}");
    for cycle in &cycles {
        assert_eq!(cycle["missing_new_orders"], 0, "{cycle}");
        assert!(all_pass(&cycle["conditions"]), "{cycle}");
        assert_eq!(cycle["passed"], true);
    }

    // Damage: remove one queued New-Order from the middle of district 1; condition 3 (and 5)
    // must fail and the command must fail.
    {
        let engine = hayate_engine::Database::open(&db, hayate_engine::DatabaseConfig::default())
            .expect("open");
        let tree = engine.table("tpcc_new_order").expect("new order table");
        let mut txn = engine.begin();
        let start: Vec<u8> = [1u32, 1].iter().flat_map(|id| id.to_be_bytes()).collect();
        let end: Vec<u8> = [1u32, 2].iter().flat_map(|id| id.to_be_bytes()).collect();
        let queued: Vec<Vec<u8>> = txn
            .scan(
                tree,
                std::ops::Bound::Included(&start[..]),
                std::ops::Bound::Excluded(&end[..]),
            )
            .expect("scan")
            .map(|row| row.expect("row").0)
            .collect();
        assert!(queued.len() > 100, "{} queued orders", queued.len());
        let key = &queued[queued.len() / 2];
        assert!(txn.delete(tree, key).expect("delete"));
        txn.commit().expect("commit");
        engine.close().expect("close");
    }
    let output = lab([
        "tpcc".as_ref(),
        "check".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
    ]);
    let (stdout, stderr) = text(&output);
    assert!(!output.status.success(), "{stdout}");
    assert!(
        stderr.contains("consistency conditions violated: 3, 5"),
        "{stderr}"
    );
    assert!(stdout.contains("FAIL"), "{stdout}");
}

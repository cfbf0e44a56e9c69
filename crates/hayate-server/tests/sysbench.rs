//! sysbench's PostgreSQL driver, unmodified: prepare (CREATE TABLE with SERIAL and CHAR(n),
//! multi-row INSERTs, CREATE INDEX) and runs of oltp_point_select, oltp_update_non_index,
//! oltp_read_only and oltp_read_write with 4 threads, each checked for the transactions it
//! reports and for errors. Throughput is the lab's business (README "Server"), not this test's.

use crate::common;

use std::process::{Command, Output};

use common::clients::{require, runs};
use common::TestServer;

const THREADS: u64 = 4;
const EVENTS: u64 = 200;

fn sysbench(server: &TestServer, workload: &str, command: &str, extra: &[&str]) -> Output {
    let output = Command::new("sysbench")
        .arg(workload)
        .args(["--db-driver=pgsql", "--pgsql-host=127.0.0.1"])
        .arg(format!("--pgsql-port={}", server.addr.port()))
        .args([
            "--pgsql-user=tester",
            "--pgsql-password=",
            "--pgsql-db=test",
        ])
        .args(["--tables=2", "--table-size=1000"])
        .args(extra)
        .arg(command)
        .output()
        .expect("run sysbench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !stdout.contains("FATAL") && !stderr.contains("FATAL"),
        "sysbench {workload} {command} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    output
}

/// The first number after `label` in sysbench's report.
fn reported(output: &Output, label: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .map(str::trim_start)
        .find(|line| line.starts_with(label))
        .unwrap_or_else(|| panic!("no '{label}' in sysbench's report:\n{stdout}"));
    let number: String = line[label.len()..]
        .trim_start_matches([':', ' '])
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    number.parse().expect("a number")
}

#[test]
fn sysbench_oltp_workloads_run() {
    if !require(runs("sysbench", &["--version"]), "sysbench", "sysbench") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    sysbench(&server, "oltp_common", "prepare", &[]);
    let mut client = server.connect();
    for table in ["sbtest1", "sbtest2"] {
        let rows: i64 = client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .unwrap()
            .get(0);
        assert_eq!(rows, 1000, "{table} loaded");
    }
    let k_before: i64 = client
        .query_one("SELECT sum(k)::int8 FROM sbtest1", &[])
        .unwrap()
        .get(0);

    let (threads, events) = (format!("--threads={THREADS}"), format!("--events={EVENTS}"));
    for workload in [
        "oltp_point_select",
        "oltp_update_non_index",
        "oltp_read_only",
        "oltp_read_write",
    ] {
        let output = sysbench(&server, workload, "run", &[&threads, &events, "--time=0"]);
        assert_eq!(reported(&output, "transactions:"), EVENTS, "{workload}");
        // sysbench retries a transaction that failed with 40001/40P01 ("ignored errors"):
        // the read-only workloads have none; oltp_read_write's conflicting updates under
        // snapshot isolation may (they are retried and counted, never lost).
        let ignored = reported(&output, "ignored errors:");
        if workload.contains("read_write") {
            assert!(
                ignored < EVENTS,
                "{workload}: {ignored} retried transactions"
            );
        } else {
            assert_eq!(ignored, 0, "{workload}");
        }
    }
    // oltp_read_write deletes and re-inserts rows: the row count stays, and its index
    // updates moved k.
    let rows: i64 = client
        .query_one("SELECT count(*) FROM sbtest1", &[])
        .unwrap()
        .get(0);
    let k_after: i64 = client
        .query_one("SELECT sum(k)::int8 FROM sbtest1", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        rows + client
            .query_one("SELECT count(*) FROM sbtest2", &[])
            .unwrap()
            .get::<_, i64>(0),
        2000
    );
    assert_ne!(
        k_before, k_after,
        "oltp_read_write's index updates changed k"
    );
    drop(client);
    sysbench(&server, "oltp_common", "cleanup", &[]);
    server.stop();
}

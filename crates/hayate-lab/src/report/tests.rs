//! The report from a results directory of synthetic but complete files: a device result, a
//! primitive sweep (two engines, two device classes) with a timeline, and broken files.

use std::collections::BTreeMap;
use std::path::Path;

use super::*;
use crate::machine::Machine;
use crate::results::{
    Alpha, CrashCycle, DeviceInfo, DevicePoint, IoRates, Percentiles, ServerBuffer, ServerEngine,
    ServerResults, ServerRun, Span, SpanKind, TimeSplit, TpccCheck, TpccCrashResults, TpccResults,
    TpccRun, TpccTypeRun, WorkerTimeline,
};
use crate::tpcc::check::ConditionResult;

fn envelope<T>(kind: &str, results: T) -> ResultFile<T> {
    ResultFile {
        kind: kind.to_string(),
        schema_version: results::SCHEMA_VERSION,
        hayate_version: "0.1.0-test".to_string(),
        started_unix: 1_714_571_100,
        command_line: vec!["hayate-lab".into(), kind.into(), "--sweep".into()],
        machine: Machine {
            cpu_count: 2,
            cpu_model: "Test CPU".to_string(),
            kernel: "Linux 6.1 x86_64".to_string(),
            memory_bytes: 24 << 30,
        },
        device: DeviceInfo {
            directory: "/data".to_string(),
            block_device: "vda".to_string(),
            file_system: "ext4".to_string(),
            model: None,
            rotational: Some(false),
        },
        results,
    }
}

fn latency(mean_us: f64) -> Percentiles {
    Percentiles {
        mean_us,
        p50_us: mean_us * 0.9,
        p90_us: mean_us * 1.3,
        p99_us: mean_us * 2.0,
        p999_us: mean_us * 4.0,
        max_us: mean_us * 10.0,
    }
}

fn device() -> DeviceResult {
    let point = |queue_depth: u32, ops_per_second: f64, block_bytes: u64| DevicePoint {
        queue_depth,
        block_bytes,
        operations: (ops_per_second * 2.0) as u64,
        ops_per_second,
        mib_per_second: ops_per_second * block_bytes as f64 / (1 << 20) as f64,
        latency: latency(f64::from(queue_depth) * 1e6 / ops_per_second),
    };
    let depths = [1u32, 2, 4, 8, 16, 32, 64, 128, 256];
    let reads = depths.map(|depth| point(depth, 12_000.0 * f64::from(depth).min(16.0), 4096));
    DeviceResult {
        backend: "io_uring + O_DIRECT".to_string(),
        page_size: 4096,
        file_bytes: 1 << 30,
        seconds_per_point: 2.0,
        random_read: reads.to_vec(),
        random_write: depths
            .map(|depth| point(depth, 9_000.0 * f64::from(depth).min(8.0), 4096))
            .to_vec(),
        sequential_write: vec![point(4, 1_500.0, 1 << 20)],
        synced_write: vec![point(1, 2_000.0, 4096), point(1, 1_800.0, 65_536)],
    }
}

fn primitive_run(engine: &str, class: &str, buffer_percent: f64) -> PrimitiveRun {
    let emulated = class != "real";
    let device_us = if emulated { 100.0 } else { 80.0 };
    let cpu_us = if engine == "hayate" { 10.0 } else { 40.0 };
    let reads_per_transaction = (1.0 - buffer_percent / 100.0) * 0.98;
    let tps = 2.0 * 1e6 / (cpu_us + reads_per_transaction * device_us);
    let mut settings = BTreeMap::new();
    if engine == "sqlite" {
        settings.insert("journal_mode".to_string(), "WAL".to_string());
        settings.insert(
            "synchronous".to_string(),
            "<script>alert(1)</script>".to_string(),
        );
    } else {
        settings.insert("commit".to_string(), "durable, group commit".to_string());
    }
    PrimitiveRun {
        engine: engine.to_string(),
        engine_version: format!("{engine} 1.0"),
        engine_settings: settings,
        device_class: class.to_string(),
        emulated,
        mode: "select".to_string(),
        buffer_percent,
        buffer_bytes: (buffer_percent * 1e7) as u64,
        page_size: 4096,
        write_policy: "out-of-place".to_string(),
        tables: 10,
        rows_per_table: 10_000,
        data_bytes: 1_000_000_000,
        concurrency: 64,
        worker_threads: 2,
        seconds: 10.0,
        transactions: (tps * 10.0) as u64,
        transactions_per_second: tps,
        retries: 0,
        latency: latency(64.0 * 1e6 / tps),
        io: IoRates {
            reads_per_second: tps * reads_per_transaction,
            writes_per_second: 10.0,
            read_mib_per_second: tps * reads_per_transaction * 4096.0 / (1 << 20) as f64,
            write_mib_per_second: 0.1,
            source: "diskstats".to_string(),
        },
        buffer_hit_ratio: Some(1.0 - reads_per_transaction / 3.0),
        log_flushes: Some(10),
        commits_per_flush: Some(tps),
        space_amplification: (engine == "hayate").then_some(1.23),
        cpu_us_per_transaction: cpu_us,
        time_split: (engine == "hayate").then_some(TimeSplit {
            cpu: 0.7,
            read_io: 0.25,
            write_io: 0.03,
            log_wait: 0.01,
            lock_wait: 0.01,
        }),
        alpha: (engine == "hayate").then_some(Alpha {
            run_iops: 100_000.0,
            replay_iops: 105_000.0,
            alpha: 0.95,
            trace_records: 1_000_000,
            replay_concurrency: 64,
        }),
        model: None,
        timeline_file: (engine == "hayate" && class == "real" && buffer_percent == 1.0)
            .then(|| "timeline-1.json".to_string()),
        trace_file: None,
    }
}

fn timeline() -> Timeline {
    let kinds = [
        SpanKind::Cpu,
        SpanKind::ReadIo,
        SpanKind::Cpu,
        SpanKind::LogWait,
        SpanKind::LockWait,
    ];
    let workers = (0..2)
        .map(|worker| WorkerTimeline {
            worker,
            spans: (0..200)
                .map(|index| Span {
                    start_us: f64::from(index) * 10.0,
                    end_us: f64::from(index) * 10.0 + 9.0,
                    kind: kinds[(index + worker) as usize % kinds.len()],
                    in_flight: 32,
                })
                .collect(),
        })
        .collect();
    Timeline {
        engine: "hayate".to_string(),
        mode: "select".to_string(),
        buffer_percent: 1.0,
        device_class: "real".to_string(),
        window_us: 2_000,
        workers,
    }
}

fn write_json(dir: &Path, name: &str, value: &impl serde::Serialize) {
    let text = serde_json::to_string_pretty(value).expect("encode");
    std::fs::write(dir.join(name), text).expect("write");
}

/// A results directory with everything the report draws, plus two files it must skip.
fn results_dir() -> tempfile::TempDir {
    let temporary = tempfile::tempdir().expect("tempdir");
    let dir = temporary.path();
    write_json(dir, "device-1.json", &envelope("device", device()));
    let mut runs = Vec::new();
    for engine in ["hayate", "sqlite"] {
        for class in ["real", "nand"] {
            for buffer in [1.0, 5.0, 100.0] {
                runs.push(primitive_run(engine, class, buffer));
            }
        }
    }
    let primitive = PrimitiveResults {
        runs,
        device_reference: None,
    };
    write_json(dir, "primitive-2.json", &envelope("primitive", primitive));
    write_json(dir, "timeline-1.json", &timeline());
    std::fs::write(dir.join("broken.json"), "{\"kind\": \"primitive\", ").expect("write");
    std::fs::write(dir.join("replay-3.json"), "{\"kind\": \"replay\"}").expect("write");
    temporary
}

#[test]
fn report_draws_every_chart_and_lists_what_it_skipped() {
    let temporary = results_dir();
    let collection = load(temporary.path()).expect("load");
    assert_eq!(collection.devices.len(), 1);
    assert_eq!(collection.runs().count(), 12);
    assert_eq!(collection.timelines.len(), 1);
    assert!(
        collection
            .runs()
            .all(|reference| reference.run.model.is_some()),
        "the report fills in the model"
    );
    let page = render(&collection, temporary.path());

    // device: 2; throughput: 1 (select); side by side: real, nand; model: real, nand;
    // alpha: 1; time split: 1; timeline: 1 and its zoom (9 us spans over 2 ms).
    assert_eq!(page.matches("<svg").count(), 11, "one SVG per chart");
    assert_eq!(page.matches("<figure>").count(), 11);
    for text in [
        "Random I/O by queue depth",
        "queue depth (I/Os in flight, log2 scale)",
        "select: throughput by buffer size",
        "buffer (% of table data, log scale)",
        "transactions per second (log scale)",
        "select, real device: engines side by side",
        "select, real device: model vs measured",
        "throughput relative to 100% buffer",
        "select: storage utilization (alpha)",
        "select: where the workers&#39; time went",
        "hayate select, 1% buffer, real: worker timeline",
        "hayate select, 1% buffer, real: worker timeline (first 200 µs)",
        "time in the window (µs)",
        // Legend entries.
        "hayate, real device",
        "sqlite, nand (emulated: every I/O ≥ 100 µs)",
        "hayate, measured",
        "sqlite, predicted",
        "read limit, real and nand at QD 64: 192k",
        "read I/O",
        "log wait",
        // Tables and header.
        "journal_mode = WAL",
        "Test CPU",
        "hayate-lab primitive --sweep",
        "Synced writes: up to <strong>2,000 per second</strong>",
        "space amplification",
        "<td>1.23</td>",
        "Some results are emulated",
    ] {
        assert!(page.contains(text), "the report lacks {text:?}");
    }
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(
        !page.contains("<script"),
        "no markup from a results file, and no script at all"
    );
    assert_eq!(
        page.matches("http").count(),
        page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
        "nothing fetched: the only URLs are the SVG namespace"
    );
    let skipped: Vec<&str> = collection.skipped.iter().map(|s| s.file.as_str()).collect();
    assert_eq!(skipped, ["broken.json", "replay-3.json"]);
    assert!(collection.skipped[0].reason.contains("not valid JSON"));
    assert!(collection.skipped[1].reason.contains("\"replay\""));
    assert!(page.contains("<code>broken.json</code>: not valid JSON"));
}

#[test]
fn a_missing_timeline_is_listed_and_an_empty_directory_is_an_error() {
    let temporary = results_dir();
    std::fs::remove_file(temporary.path().join("timeline-1.json")).expect("remove");
    let collection = load(temporary.path()).expect("load");
    let missing = (collection.skipped.iter())
        .find(|skipped| skipped.file == "timeline-1.json")
        .expect("missing timeline listed");
    assert!(missing.reason.contains("primitive-2.json"));
    assert!(!render(&collection, temporary.path()).contains("Transaction timelines"));

    let empty = tempfile::tempdir().expect("tempdir");
    let error = load(empty.path()).err().expect("empty directory fails");
    assert!(error.to_string().contains("no results (*.json)"), "{error}");
    std::fs::write(empty.path().join("broken.json"), "[").expect("write");
    let error = load(empty.path()).err().expect("nothing usable fails");
    assert!(
        error.to_string().contains("broken.json: not valid JSON"),
        "{error}"
    );
    let error = load(&empty.path().join("absent"))
        .err()
        .expect("no directory fails");
    assert!(
        error.to_string().contains("cannot read directory"),
        "{error}"
    );
}

#[test]
fn run_writes_the_page_where_asked() {
    let temporary = results_dir();
    let out = temporary.path().join("custom.html");
    run(&ReportArgs {
        results: temporary.path().to_path_buf(),
        out: Some(out.clone()),
    })
    .expect("report");
    let page = std::fs::read_to_string(&out).expect("read report");
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    run(&ReportArgs {
        results: temporary.path().to_path_buf(),
        out: None,
    })
    .expect("report");
    assert!(temporary.path().join("report.html").exists());
}

#[test]
fn command_lines_are_quoted_as_typed() {
    let arguments = ["hayate", "--dir", "/mnt/a b", "it's", ""].map(String::from);
    assert_eq!(
        shell_words(&arguments),
        "hayate --dir '/mnt/a b' 'it'\\''s' ''"
    );
}

fn tpcc_run(engine: &str, class: &str, buffer_percent: f64, tps: f64) -> TpccRun {
    TpccRun {
        engine: engine.to_string(),
        device_class: class.to_string(),
        emulated: class != "real",
        buffer_percent,
        warehouses: 1,
        terminals: 30,
        seconds: 10.0,
        nopm: tps * 0.45 * 60.0,
        transactions_per_second: tps,
        per_type: [
            "new-order",
            "payment",
            "order-status",
            "delivery",
            "stock-level",
        ]
        .iter()
        .map(|name| TpccTypeRun {
            name: name.to_string(),
            committed: (tps * 2.0) as u64,
            per_second: tps / 5.0,
            latency: latency(5_000.0),
        })
        .collect(),
        retries: BTreeMap::from([("delivery: serialization".to_string(), 3)]),
        time_split: (engine == "hayate").then_some(TimeSplit {
            cpu: 0.5,
            read_io: 0.3,
            write_io: 0.0,
            log_wait: 0.15,
            lock_wait: 0.05,
        }),
        alpha: (engine == "hayate").then_some(Alpha {
            run_iops: 20_000.0,
            replay_iops: 25_000.0,
            alpha: 0.8,
            trace_records: 200_000,
            replay_concurrency: 30,
        }),
        ..TpccRun::default()
    }
}

fn condition(number: u32, failures: u64) -> ConditionResult {
    ConditionResult {
        number,
        title: format!("condition {number}"),
        checked: 10,
        failures,
        example: None,
    }
}

#[test]
fn tpcc_results_get_their_section() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let dir = temporary.path();
    let mut runs = Vec::new();
    for (engine, class) in [
        ("hayate", "real"),
        ("hayate", "nand"),
        ("postgresql", "real"),
    ] {
        for (buffer, tps) in [(5.0, 1_000.0), (100.0, 4_000.0)] {
            runs.push(tpcc_run(engine, class, buffer, tps));
        }
    }
    let checks = vec![
        TpccCheck {
            engine: "hayate".into(),
            when: "after runs".into(),
            conditions: (1..=10).chain([12]).map(|n| condition(n, 0)).collect(),
        },
        TpccCheck {
            engine: "postgresql".into(),
            when: "after runs".into(),
            conditions: vec![condition(1, 0), condition(3, 2)],
        },
    ];
    write_json(
        dir,
        "tpcc-5.json",
        &envelope("tpcc", TpccResults { runs, checks }),
    );
    let crash = TpccCrashResults {
        warehouses: 1,
        terminals: 16,
        cycles: (1..=3)
            .map(|cycle| CrashCycle {
                cycle,
                ran_ms: 500,
                acknowledged_new_orders: 100,
                recovery_ms: 400 + u64::from(cycle),
                conditions: (1..=4).map(|n| condition(n, 0)).collect(),
                passed: true,
                ..CrashCycle::default()
            })
            .collect(),
    };
    write_json(dir, "tpcc-crash-6.json", &envelope("tpcc-crash", crash));
    let collection = load(dir).expect("TPC-C results alone make a report");
    assert_eq!(collection.tpcc.len(), 1);
    assert_eq!(collection.tpcc_crashes.len(), 1);
    let page = render(&collection, dir);
    for text in [
        "TPC-C: transactions per second by buffer size",
        "TPC-C on the real device: NOPM side by side",
        "TPC-C: storage utilization (alpha)",
        "TPC-C: where Hayate&#39;s workers&#39; time went",
        "lock wait",
        "delivery: serialization 3",
        "FAILED: 3",
        "all pass",
        "Crash loop: recovery time per cycle",
        "hayate, nand (emulated: every I/O ≥ 100 µs)",
        "postgresql, real device",
    ] {
        assert!(page.contains(text), "the report lacks {text:?}");
    }
    // Throughput, side by side, alpha, split and the crash chart.
    assert_eq!(page.matches("<svg").count(), 5);
}

#[test]
fn server_results_show_buffer_sizes_device_reads_and_utilization() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let dir = temporary.path();
    let buffer = Some(16u64 << 20);
    let run = |engine: &str, workload: &str, tps: f64, reads: Option<f64>| ServerRun {
        engine: engine.into(),
        workload: workload.into(),
        threads: 32,
        buffer_bytes: buffer,
        round: 1,
        transactions_per_second: tps,
        device_reads_per_s: reads,
        device_writes_per_s: reads.map(|_| 120.0),
        ..ServerRun::default()
    };
    let engine = |name: &str| ServerEngine {
        engine: name.into(),
        buffers: vec![ServerBuffer {
            buffer_bytes: 16 << 20,
            engine_settings: BTreeMap::from([("buffer_bytes".into(), "16777216".into())]),
            error: None,
        }],
        ..ServerEngine::default()
    };
    let results = ServerResults {
        client: "sysbench 1.0.20".into(),
        transport: "tcp".into(),
        rounds: 1,
        tables: 8,
        table_size: 100_000,
        seconds: 30,
        engines: vec![engine("hayate"), engine("mariadb")],
        runs: vec![
            run("hayate", "oltp_point_select", 37_000.0, Some(116_000.0)),
            run("mariadb", "oltp_point_select", 15_000.0, Some(16_700.0)),
            run("hayate", "oltp_read_only", 1_186.0, None),
        ],
        notes: vec!["Buffers of 16 MiB for every engine.".into()],
        diskstats_device: Some("vda".into()),
        device_read_iops_qd32: Some(145_000.0),
        rand_type: Some("uniform".into()),
    };
    write_json(dir, "server-7.json", &envelope("server", results));
    let collection = load(dir).expect("server results alone make a report");
    let page = render(&collection, dir);
    for text in [
        "Server: sysbench",
        "16 MiB",
        "116,000 reads/s, 80% dev",
        "16,700 reads/s, 12% dev",
        "2.47x",
        "restarted with a 16 MiB buffer:",
        "device reads/s",
        "dev%",
        "--rand-type=uniform",
    ] {
        assert!(page.contains(text), "the report lacks {text:?}");
    }
}

//! `hayate-lab server` end to end against a real PostgreSQL (feature `peers`): a tiny data set,
//! two seconds per run. Skipped with a message when PostgreSQL or sysbench is not installed.

use super::summary::{ratio, ratio_spread, target_line};
use super::*;
use crate::peers::postgres;
use crate::results::{self, median_runs};

#[test]
fn lab_server_runs_sysbench_against_postgresql() {
    if let Err(message) = postgres::find_binaries().and(sysbench::version().map(|_| ())) {
        eprintln!("skipping: {message}");
        return;
    }
    let parent = std::env::var_os("HAYATE_LAB_TEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let base = tempfile::Builder::new()
        .prefix("hayate-lab-server-test-")
        .tempdir_in(parent)
        .expect("test directory");
    let results_dir = base.path().join("results");
    let args = ServerArgs {
        common: CommonArgs {
            results: results_dir.clone(),
            dir: Some(base.path().to_path_buf()),
        },
        engines: vec!["postgresql".into()],
        workloads: vec!["oltp_point_select".into(), "oltp_update_non_index".into()],
        threads: vec![2],
        seconds: 2,
        warmup: 1,
        tables: 1,
        table_size: 100,
        transport: Transport::Unix,
        rounds: 2,
        buffer_size: Vec::new(),
        rand_type: None,
        no_device: true,
    };
    run(&args).expect("lab server");
    let files = results::list(&results_dir).expect("results");
    assert_eq!(files.len(), 1, "one results file: {files:?}");
    let file: ResultFile<ServerResults> = results::read(&files[0]).expect("read results");
    assert_eq!(file.kind, "server");
    let engine = &file.results.engines[0];
    assert_eq!(engine.engine, "postgresql");
    assert_eq!(engine.error, None);
    assert_eq!(engine.client_driver, "pgsql");
    assert!(
        engine.address.contains("/.s.PGSQL."),
        "sysbench went through the Unix-domain socket: {}",
        engine.address
    );
    assert_eq!(file.results.transport, "unix");
    assert_eq!(file.results.rounds, 2);
    assert_eq!(
        engine
            .engine_settings
            .get("synchronous_commit")
            .map(String::as_str),
        Some("on")
    );
    assert!(
        engine.isolation.contains("READ COMMITTED"),
        "{}",
        engine.isolation
    );
    let rounds: Vec<(u32, &str)> = (file.results.runs.iter())
        .map(|run| (run.round, run.workload.as_str()))
        .collect();
    assert_eq!(
        rounds,
        [
            (1, "oltp_point_select"),
            (1, "oltp_update_non_index"),
            (2, "oltp_point_select"),
            (2, "oltp_update_non_index")
        ]
    );
    for run in &file.results.runs {
        assert_eq!(run.error, None, "{} failed", run.workload);
        assert!(run.transactions > 0, "{} ran no transaction", run.workload);
        assert!(run.transactions_per_second > 0.0);
        assert!(run.latency_avg_ms > 0.0);
    }
    // The lab removed the server's directory: only the results are left.
    let left: Vec<_> = std::fs::read_dir(base.path())
        .expect("read dir")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("results")]);
}

#[test]
fn unknown_names_are_clear_errors() {
    let mut args = ServerArgs {
        common: CommonArgs {
            results: "unused".into(),
            dir: None,
        },
        engines: vec!["oracle".into()],
        workloads: vec!["oltp_point_select".into()],
        threads: vec![16],
        seconds: 1,
        warmup: 0,
        tables: 1,
        table_size: 1,
        transport: Transport::Tcp,
        rounds: 1,
        buffer_size: Vec::new(),
        rand_type: None,
        no_device: true,
    };
    let error = check_args(&args).expect_err("unknown engine").to_string();
    assert!(error.contains("unknown engine \"oracle\""), "{error}");
    args.engines = vec!["hayate".into()];
    args.workloads = vec!["tpcc".into()];
    let error = check_args(&args).expect_err("unknown workload").to_string();
    assert!(error.contains("unknown workload \"tpcc\""), "{error}");
    args.workloads = vec!["oltp_point_select".into()];
    args.rounds = 0;
    let error = check_args(&args).expect_err("no rounds").to_string();
    assert!(error.contains("--rounds must be at least 1"), "{error}");
}

#[test]
fn summary_gives_the_ratio_and_the_target() {
    let run = |engine: &str, workload: &str, tps: f64| ServerRun {
        engine: engine.into(),
        workload: workload.into(),
        threads: 16,
        transactions_per_second: tps,
        ..ServerRun::default()
    };
    let engine = |name: &str| ServerEngine {
        engine: name.into(),
        ..ServerEngine::default()
    };
    let mut results = ServerResults {
        engines: vec![engine("hayate"), engine("postgresql")],
        runs: vec![
            run("hayate", "oltp_point_select", 30_000.0),
            run("postgresql", "oltp_point_select", 15_000.0),
            run("hayate", "oltp_update_non_index", 5_000.0),
            run("postgresql", "oltp_update_non_index", 4_000.0),
        ],
        ..ServerResults::default()
    };
    assert_eq!(ratio(&results, "oltp_point_select", 16), Some(2.0));
    let text = summary(&results);
    assert!(text.contains("2.00x"), "{text}");
    assert!(text.contains("not met"), "{text}");
    results.runs[2].transactions_per_second = 6_000.0;
    assert!(
        target_line(&results).contains(": met"),
        "{}",
        target_line(&results)
    );
    results.runs.remove(0);
    assert!(target_line(&results).contains("not measured"));
}

#[test]
fn rounds_give_medians_and_the_spread_of_ratios() {
    let run = |engine: &str, round: u32, tps: f64| ServerRun {
        engine: engine.into(),
        workload: "oltp_point_select".into(),
        threads: 16,
        round,
        transactions_per_second: tps,
        ..ServerRun::default()
    };
    let results = ServerResults {
        transport: "unix".into(),
        rounds: 3,
        engines: vec![],
        runs: vec![
            run("hayate", 1, 90.0),
            run("postgresql", 1, 60.0),
            run("hayate", 2, 50.0),
            run("postgresql", 2, 50.0),
            run("hayate", 3, 80.0),
            run("postgresql", 3, 40.0),
        ],
        ..ServerResults::default()
    };
    // Medians 80 and 50, whatever round they came from.
    assert_eq!(ratio(&results, "oltp_point_select", 16), Some(1.6));
    assert_eq!(
        ratio_spread(&results, "oltp_point_select", 16),
        Some((1.0, 2.0))
    );
    let medians = median_runs(&results.runs, "hayate");
    assert_eq!(
        medians[&(None, "oltp_point_select".to_string(), 16)].round,
        3
    );
    let text = summary(&results);
    assert!(text.contains("Unix-domain sockets"), "{text}");
    assert!(text.contains("median of 3 rounds"), "{text}");
    assert!(text.contains("1.60x  (rounds 1.00x-2.00x)"), "{text}");
}

/// `hayate-lab server`'s options as clap reads them.
#[derive(Debug, clap::Parser)]
struct Command {
    #[command(flatten)]
    args: ServerArgs,
}

fn parse(arguments: &[&str]) -> Result<ServerArgs, clap::Error> {
    use clap::Parser;
    let line = std::iter::once("server").chain(arguments.iter().copied());
    Command::try_parse_from(line).map(|command| command.args)
}

#[test]
fn buffer_sizes_rand_type_and_no_device_are_options() {
    let args = parse(&[]).expect("defaults");
    assert!(args.buffer_size.is_empty());
    assert_eq!(buffer_sizes(&args), [None], "the data in memory");
    assert_eq!((args.rand_type, args.no_device), (None, false));

    let args = parse(&[
        "--engines",
        "hayate,mariadb",
        "--buffer-size",
        "16MB,1GB",
        "--rand-type",
        "uniform",
        "--tables",
        "8",
        "--table-size",
        "100000",
        "--no-device",
    ])
    .expect("the issue's options");
    assert_eq!(args.buffer_size, [16 << 20, 1 << 30]);
    assert_eq!(buffer_sizes(&args), [Some(16 << 20), Some(1 << 30)]);
    assert_eq!(args.rand_type.map(RandType::name), Some("uniform"));
    assert!(args.no_device);
    assert_eq!((args.tables, args.table_size), (8, 100_000));
    check_args(&args).expect("valid");

    let error = parse(&["--buffer-size", "16MB,lots"]).expect_err("not a size");
    assert!(error.to_string().contains("at least 1MB"), "{error}");
    let error = parse(&["--buffer-size", "512kB"]).expect_err("too small");
    assert!(error.to_string().contains("at least 1MB"), "{error}");
    assert!(parse(&["--rand-type", "zipf"]).is_err());
}

#[test]
fn notes_say_what_the_buffers_are() {
    let data_bytes = 8 * 100_000 * ROW_BYTES_ESTIMATE;
    assert_eq!(buffer_note(&[], data_bytes), None);
    let note = buffer_note(&[64 << 20, 16 << 20], data_bytes).expect("a note");
    assert!(note.contains("Buffers of 64 MiB, 16 MiB"), "{note}");
    assert!(note.contains("14.3x the smallest buffer"), "{note}");
    assert!(note.contains("innodb_flush_method=O_DIRECT"), "{note}");
    assert!(note.contains("OS page cache"), "{note}");
    let args = parse(&["--no-device"]).expect("options");
    let (iops, note) = measure_device(&args, Path::new("."));
    assert_eq!(iops, None);
    assert!(note.contains("--no-device"), "{note}");
}

#[test]
fn summary_shows_buffers_device_reads_and_utilization() {
    let buffer = Some(16u64 << 20);
    let run = |engine: &str, workload: &str, tps: f64, reads: f64| ServerRun {
        engine: engine.into(),
        workload: workload.into(),
        threads: 32,
        buffer_bytes: buffer,
        round: 1,
        transactions_per_second: tps,
        device_reads_per_s: Some(reads),
        device_writes_per_s: Some(10.0),
        ..ServerRun::default()
    };
    let engine = |name: &str| ServerEngine {
        engine: name.into(),
        ..ServerEngine::default()
    };
    let mut results = ServerResults {
        client: "sysbench 1.0.20".into(),
        transport: "tcp".into(),
        rounds: 1,
        tables: 8,
        table_size: 100_000,
        engines: vec![engine("hayate"), engine("mariadb")],
        runs: vec![
            run("hayate", "oltp_point_select", 37_000.0, 116_000.0),
            run("mariadb", "oltp_point_select", 15_000.0, 16_700.0),
        ],
        diskstats_device: Some("vda".into()),
        device_read_iops_qd32: Some(145_000.0),
        rand_type: Some("uniform".into()),
        ..ServerResults::default()
    };
    let text = summary(&results);
    for expected in [
        "--rand-type=uniform",
        "buffer",
        "16 MiB",
        "hayate/mariadb",
        "2.47x",
        "Device reads/s of vda",
        "145000 random 4 KiB reads/s at queue depth 32",
        "116000 80%",
        "16700 12%",
        "device utilization target",
        ": met (80% at 16 MiB, 32 threads)",
    ] {
        assert!(text.contains(expected), "lacks {expected:?}:\n{text}");
    }
    assert!(!text.contains("hayate/postgres"), "{text}");
    assert!(
        !text.contains("target (Hayate >= 1.5x"),
        "no in-memory runs, no issue 5 target:\n{text}"
    );
    results.device_read_iops_qd32 = None;
    results.rand_type = None;
    let text = summary(&results);
    assert!(text.contains("not measured: no dev%"), "{text}");
    assert!(text.contains("116000 "), "{text}");
    assert!(!text.contains("device utilization target"), "{text}");
    let line = run_line(&results.runs[0], 1);
    assert!(
        line.contains("32 threads, 16 MiB buffer: 37000 tps, device 116000 reads/s"),
        "{line}"
    );
}

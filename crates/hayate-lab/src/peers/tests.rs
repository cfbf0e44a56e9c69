//! Tests of the peers against the real databases (feature `peers`, not run in CI). A peer
//! whose package is not installed is skipped with a message. Set `HAYATE_LAB_TEST_DIR` to put
//! the databases on another device than the system temporary directory.
//!
//! `cargo test --release -p hayate --features peers peers::` runs them; the sanity numbers:
//! `cargo test --release -p hayate --features peers peers_sanity -- --ignored --nocapture`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::mariadb::MariadbDriver;
use super::postgres::PostgresDriver;
use super::sqlite::SqliteDriver;
use super::{available, open_peer, server, PEERS};
use crate::driver::{Driver, DriverResult};
use crate::primitive::driver::{
    run_one, Attempt, KeyGenerator, Mode, PrimitiveDriver, PrimitiveSpec, Session,
};

const MIB: u64 = 1024 * 1024;
const TINY: PrimitiveSpec = PrimitiveSpec {
    tables: 2,
    rows_per_table: 200,
};
const THREADS: i64 = 4;

/// An empty directory for one test's databases, removed at the end.
pub(super) fn test_base_dir() -> tempfile::TempDir {
    let parent = std::env::var_os("HAYATE_LAB_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    tempfile::Builder::new()
        .prefix("hayate-peers-test-")
        .tempdir_in(parent)
        .expect("test directory")
}

/// Whether `peer` is installed; prints why a test skips it when not.
pub(super) fn installed(peer: &str) -> bool {
    let (_, status) = available()
        .into_iter()
        .find(|(name, _)| *name == peer)
        .expect("peer");
    if let Err(message) = &status {
        eprintln!("skipping {peer}: {message}");
    }
    status.is_ok()
}

/// The value the tests write into C1 of a row.
fn test_c1(table: u32, sid: i64) -> i64 {
    sid * 10 + table as i64 + 1
}

/// Loads the tiny spec, then selects and updates every row from several threads, each on its
/// own session.
fn load_select_update(driver: &dyn PrimitiveDriver) {
    let loaded = AtomicU64::new(0);
    driver
        .load_primitive(&TINY, &|rows| loaded.store(rows, Ordering::Relaxed))
        .expect("load");
    assert_eq!(
        loaded.load(Ordering::Relaxed),
        400,
        "progress must reach every row"
    );
    thread::scope(|scope| {
        for worker in 0..THREADS {
            scope.spawn(move || {
                let mut session = driver.connect().expect("connect");
                for table in 0..TINY.tables {
                    for sid in (1..=200).filter(|sid| sid % THREADS == worker) {
                        assert!(session.select(table, sid).expect("select"), "row {sid}");
                        let c1 = test_c1(table, sid);
                        assert!(session.update(table, sid, c1).expect("update"), "row {sid}");
                    }
                }
                assert!(!session.select(0, 201).expect("select a missing row"));
                assert!(!session.update(1, 201, 5).expect("update a missing row"));
            });
        }
    });
}

fn check_c1<D>(driver: &D, read_c1: fn(&D, u32, i64) -> DriverResult<Option<i64>>) {
    for table in 0..TINY.tables {
        for sid in 1..=200 {
            let c1 = read_c1(driver, table, sid).expect("read C1");
            assert_eq!(
                c1,
                Some(test_c1(table, sid)),
                "C1 of row {sid} of table {table}"
            );
        }
    }
}

fn check_settings(driver: &dyn Driver, expected: &[(&str, &str)]) {
    let settings = driver.settings();
    for (name, value) in expected {
        let found = settings.get(*name).map(String::as_str);
        assert_eq!(found, Some(*value), "{name} in {settings:?}");
    }
}

/// True while `pid` is a process named `name` (a pid can be reused by another program).
fn process_alive(pid: u32, name: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|comm| comm.trim() == name)
        .unwrap_or(false)
}

fn assert_emptied(base: &tempfile::TempDir) {
    let left: Vec<_> = std::fs::read_dir(base.path())
        .expect("read dir")
        .flatten()
        .collect();
    assert!(left.is_empty(), "the driver left {left:?}");
}

#[test]
fn postgresql_loads_selects_updates_durably_and_stops() {
    if !installed("postgresql") {
        return;
    }
    let base = test_base_dir();
    let driver = PostgresDriver::open(base.path(), 8 * MIB).expect("open");
    check_settings(
        &driver,
        &[
            ("fsync", "on"),
            ("synchronous_commit", "on"),
            ("full_page_writes", "on"),
            ("shared_buffers_bytes", &(8 * MIB).to_string()),
        ],
    );
    assert!(driver.settings().contains_key("wal_sync_method"));
    assert!(
        driver.version().starts_with(char::is_numeric),
        "{}",
        driver.version()
    );
    load_select_update(&driver);
    check_c1(&driver, PostgresDriver::read_c1);
    // A restart with another buffer size keeps every committed update.
    driver.set_buffer_bytes(16 * MIB).expect("restart");
    check_settings(
        &driver,
        &[("shared_buffers_bytes", &(16 * MIB).to_string())],
    );
    check_c1(&driver, PostgresDriver::read_c1);
    let pids = driver.server_pids();
    assert!(pids.len() >= 2, "postmaster and its children: {pids:?}");
    assert!(
        pids.iter().all(|&pid| process_alive(pid, "postgres")),
        "{pids:?}"
    );
    driver.shutdown().expect("shutdown");
    assert!(
        pids.iter().all(|&pid| !process_alive(pid, "postgres")),
        "left running: {pids:?}"
    );
    assert!(driver.server_pids().is_empty());
    assert_emptied(&base);
}

#[test]
fn mariadb_loads_selects_updates_durably_and_stops() {
    if !installed("mariadb") {
        return;
    }
    let base = test_base_dir();
    let driver = MariadbDriver::open(base.path(), 8 * MIB).expect("open");
    check_settings(
        &driver,
        &[
            ("innodb_flush_log_at_trx_commit", "1"),
            ("innodb_doublewrite", "ON"),
            ("innodb_flush_method", "O_DIRECT"),
            ("log_bin", "OFF"),
            ("innodb_buffer_pool_size", &(8 * MIB).to_string()),
        ],
    );
    assert_eq!(driver.page_size(), 16384);
    load_select_update(&driver);
    check_c1(&driver, MariadbDriver::read_c1);
    driver.set_buffer_bytes(16 * MIB).expect("restart");
    check_settings(
        &driver,
        &[("innodb_buffer_pool_size", &(16 * MIB).to_string())],
    );
    check_c1(&driver, MariadbDriver::read_c1);
    let pids = driver.server_pids();
    assert!(!pids.is_empty());
    assert!(
        pids.iter().all(|&pid| process_alive(pid, "mariadbd")),
        "{pids:?}"
    );
    driver.shutdown().expect("shutdown");
    assert!(
        pids.iter().all(|&pid| !process_alive(pid, "mariadbd")),
        "left running: {pids:?}"
    );
    assert_emptied(&base);
}

#[test]
fn mariadb_records_the_effective_buffer_pool_below_its_minimum() {
    if !installed("mariadb") {
        return;
    }
    let base = test_base_dir();
    let driver = MariadbDriver::open(base.path(), MIB).expect("open");
    let settings = driver.settings();
    assert_eq!(
        settings["innodb_buffer_pool_size_requested"],
        MIB.to_string()
    );
    let effective: u64 = settings["innodb_buffer_pool_size"]
        .parse()
        .expect("a number");
    assert!(
        effective >= 6 * MIB,
        "InnoDB's minimum is 6 MiB: {effective}"
    );
    driver.shutdown().expect("shutdown");
}

#[test]
fn sqlite_loads_selects_updates_durably() {
    let base = test_base_dir();
    let driver = SqliteDriver::open(base.path(), 8 * MIB).expect("open");
    check_settings(
        &driver,
        &[
            ("journal_mode", "wal"),
            ("synchronous", "FULL"),
            ("cache_size", "-8192"),
            ("page_size", "8192"),
        ],
    );
    load_select_update(&driver);
    check_c1(&driver, SqliteDriver::read_c1);
    driver.set_buffer_bytes(16 * MIB).expect("resize");
    check_settings(&driver, &[("cache_size", "-16384")]);
    assert!(
        driver.server_pids().is_empty(),
        "SQLite runs in the lab's process"
    );
    driver.shutdown().expect("shutdown");
    assert_emptied(&base);
}

/// `path` relative to the current directory.
fn relative_path_to(path: &std::path::Path) -> PathBuf {
    let current = std::env::current_dir().expect("current directory");
    let ups = current.components().count() - 1;
    let mut relative: PathBuf = std::iter::repeat_n("..", ups).collect();
    relative.push(path.strip_prefix("/").expect("absolute"));
    relative
}

#[test]
fn dropping_a_driver_on_a_relative_dir_stops_its_server_and_removes_its_directory() {
    for peer in ["postgresql", "mariadb"] {
        if !installed(peer) {
            continue;
        }
        let base = test_base_dir();
        // A relative --dir (the lab's default is "."), while servers run from `/`.
        let relative = relative_path_to(base.path());
        let driver = open_peer(peer, &relative, 8 * MIB).expect("open");
        assert_eq!(std::fs::read_dir(base.path()).expect("read dir").count(), 1);
        let pids = driver.server_pids();
        let name = if peer == "postgresql" {
            "postgres"
        } else {
            "mariadbd"
        };
        assert!(pids.iter().all(|&pid| process_alive(pid, name)), "{pids:?}");
        drop(driver);
        assert!(
            pids.iter().all(|&pid| !process_alive(pid, name)),
            "left running: {pids:?}"
        );
        assert_emptied(&base);
    }
}

#[test]
fn a_server_that_cannot_start_reports_its_log_and_leaves_nothing() {
    // 4 TiB of shared buffers is a valid setting that no machine here can map.
    let buffer_bytes = 4 << 40;
    for peer in ["postgresql", "mariadb"] {
        if !installed(peer) {
            continue;
        }
        let base = test_base_dir();
        let error = open_peer(peer, base.path(), buffer_bytes)
            .err()
            .expect("an error");
        eprintln!("{peer}: {}", error.message);
        assert!(!error.retryable);
        assert!(error.message.contains("server.log"), "{}", error.message);
        assert!(
            error.message.lines().count() > 2,
            "no log tail: {}",
            error.message
        );
        assert_emptied(&base);
    }
}

#[test]
fn a_directory_the_server_user_cannot_reach_is_a_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !installed("postgresql") {
        return;
    }
    let base = test_base_dir();
    let private = base.path().join("private");
    std::fs::create_dir(&private).expect("mkdir");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let error = open_peer("postgresql", &private.join("lab"), MIB)
        .err()
        .expect("an error");
    eprintln!("{}", error.message);
    assert!(
        error.message.contains("user postgres cannot write"),
        "{}",
        error.message
    );
    assert!(error.message.contains("--dir"), "{}", error.message);
}

#[test]
fn unknown_peer_is_a_clear_error() {
    let base = test_base_dir();
    let error = open_peer("oracle", base.path(), MIB)
        .err()
        .expect("an error");
    assert!(!error.retryable);
    assert!(
        error.message.contains("postgresql, mariadb, sqlite"),
        "{}",
        error.message
    );
    let names: Vec<_> = available().into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, PEERS);
}

#[test]
fn a_failing_setup_program_reports_its_log() {
    let base = test_base_dir();
    let log = base.path().join("setup.log");
    let mut command = Command::new("sh");
    command.args([
        "-c",
        "echo first line; echo the reason it failed >&2; exit 3",
    ]);
    let error =
        server::run_setup("setup", command, &log, Duration::from_secs(30)).expect_err("an error");
    assert!(
        error.message.contains("the reason it failed"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("exit status: 3"),
        "{}",
        error.message
    );
}

/// Runs `mode` for `duration` with `concurrency` threads; returns transactions per second.
fn measure(
    driver: &dyn PrimitiveDriver,
    spec: &PrimitiveSpec,
    mode: Mode,
    concurrency: u32,
) -> f64 {
    let duration = Duration::from_secs(5);
    let start = Instant::now();
    let deadline = start + duration;
    let transactions = AtomicU64::new(0);
    thread::scope(|scope| {
        for worker in 0..concurrency {
            let transactions = &transactions;
            scope.spawn(move || {
                let mut session: Box<dyn Session> = driver.connect().expect("connect");
                let mut keys = KeyGenerator::new(spec, 42, worker as u64);
                let mut done = 0;
                while Instant::now() < deadline {
                    let (table, sid) = keys.next();
                    let attempt =
                        run_one(session.as_mut(), mode, table, sid, done as i64, deadline)
                            .expect("transaction");
                    if matches!(attempt, Attempt::Committed { .. }) {
                        done += 1;
                    }
                }
                transactions.fetch_add(done, Ordering::Relaxed);
            });
        }
    });
    transactions.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Sanity numbers (not a benchmark): 10 tables x 2,000 rows, 100% buffer, 5 s per mode at
/// concurrency 8; and the load time of 10 x 20,000 rows.
#[test]
#[ignore]
fn peers_sanity_numbers() {
    let small = PrimitiveSpec {
        tables: 10,
        rows_per_table: 2_000,
    };
    let large = PrimitiveSpec {
        tables: 10,
        rows_per_table: 20_000,
    };
    for peer in PEERS {
        if !installed(peer) {
            continue;
        }
        let base = test_base_dir();
        let driver = open_peer(peer, base.path(), small.data_bytes()).expect("open");
        driver.load_primitive(&small, &|_| {}).expect("load");
        driver.set_buffer_bytes(small.data_bytes()).expect("buffer");
        let update = measure(driver.as_ref(), &small, Mode::Update, 8);
        let select = measure(driver.as_ref(), &small, Mode::Select, 8);
        driver.shutdown().expect("shutdown");
        let driver = open_peer(peer, base.path(), large.data_bytes()).expect("open");
        let start = Instant::now();
        driver.load_primitive(&large, &|_| {}).expect("load");
        let load_seconds = start.elapsed().as_secs_f64();
        driver.shutdown().expect("shutdown");
        println!(
            "{peer}: update {update:.0} tx/s, select {select:.0} tx/s (10x2,000 rows, 100% \
             buffer, concurrency 8, 5 s); load of 10x20,000 rows {load_seconds:.1} s"
        );
    }
}

//! `hayate serve` as a user runs it: it creates its data directory, survives `kill -9` with
//! every acknowledged commit (and no uncommitted write), and stops cleanly on SIGTERM.

use crate::common;

use common::free_port;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `hayate serve` on `dir`, its Unix-domain socket in `dir`'s parent.
fn start(dir: &Path, port: u16) -> (Child, postgres::Client) {
    let child = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .args(["serve", "--port", &port.to_string(), "--data-dir"])
        .arg(dir)
        .arg("--unix-socket-dir")
        .arg(dir.parent().unwrap())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hayate serve");
    let config = format!("host=127.0.0.1 port={port} user=tester dbname=postgres");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match postgres::Client::connect(&config, postgres::NoTls) {
            Ok(client) => return (child, client),
            Err(error) if Instant::now() > deadline => panic!("server did not start: {error}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[test]
fn serve_survives_kill_and_stops_on_sigterm() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let port = free_port();
    let (mut child, mut client) = start(&dir, port);
    assert!(dir.is_dir(), "data directory created on first start");
    client
        .batch_execute("CREATE TABLE acked (id int8 PRIMARY KEY, note text)")
        .unwrap();
    let insert = client
        .prepare("INSERT INTO acked VALUES ($1, 'committed')")
        .unwrap();
    for id in 0..200i64 {
        client.execute(&insert, &[&id]).unwrap();
    }
    let mut open = client.transaction().unwrap();
    open.execute("INSERT INTO acked VALUES (100000, 'never committed')", &[])
        .unwrap();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    drop(open);
    drop(client);
    let socket = parent.path().join(format!(".s.PGSQL.{port}"));
    assert!(socket.exists(), "kill -9 leaves the socket file behind");

    let (child, mut client) = start(&dir, port);
    // The stale socket file was replaced by a live one.
    let local = format!(
        "host={} port={port} user=tester dbname=postgres",
        parent.path().display()
    );
    let mut local = postgres::Client::connect(&local, postgres::NoTls).expect("unix socket");
    let count: i64 = local
        .query_one("SELECT count(*) FROM acked", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 200, "every acknowledged commit survives kill -9");
    drop(local);
    let uncommitted = client
        .query("SELECT * FROM acked WHERE id = 100000", &[])
        .unwrap();
    assert!(uncommitted.is_empty(), "no uncommitted write survives");
    drop(client);

    // SAFETY: sending a signal to our own child process.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "clean exit on SIGTERM: {stderr}");
    assert!(stderr.contains("hayate: stopped"), "{stderr}");
    assert!(!socket.exists(), "a clean stop removes the socket file");
}

/// sum(abalance), sum(tbalance), sum(bbalance), sum(delta) and the history's row count.
fn pgbench_state(client: &mut postgres::Client) -> ([i64; 4], i64) {
    let mut sums = [0; 4];
    for (sum, (table, column)) in sums.iter_mut().zip([
        ("pgbench_accounts", "abalance"),
        ("pgbench_tellers", "tbalance"),
        ("pgbench_branches", "bbalance"),
        ("pgbench_history", "delta"),
    ]) {
        let query = format!("SELECT coalesce(sum({column}), 0)::int8 FROM {table}");
        *sum = client.query_one(&query, &[]).unwrap().get(0);
    }
    let rows = client
        .query_one("SELECT count(*) FROM pgbench_history", &[])
        .unwrap()
        .get(0);
    (sums, rows)
}

/// `kill -9` of the server during a pgbench tpcb-like run with 8 clients: after the restart
/// the balances still agree, and every transaction pgbench logged as committed (`-l`) left its
/// history row. When pgbench is missing the test says so loudly (HAYATE_REQUIRE_CLIENTS=1
/// makes that a failure).
#[test]
fn kill_during_pgbench_keeps_every_committed_transaction() {
    let available = Command::new("pgbench")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !available {
        let message = "pgbench NOT FOUND: the kill -9 during pgbench test did NOT run \
                       (install postgresql-15 to run it)";
        eprintln!("\n!!!!!!!! {message} !!!!!!!!\n");
        assert!(
            std::env::var_os("HAYATE_REQUIRE_CLIENTS").is_none(),
            "{message}"
        );
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let port = free_port();
    let (mut child, client) = start(&dir, port);
    drop(client);
    let pgbench = |args: &[&str]| {
        let mut command = Command::new("pgbench");
        command
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "tester"])
            .args(args)
            .arg("postgres")
            .current_dir(parent.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    let init = pgbench(&["-i", "-s", "1", "-q"]).output().unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );

    let run = pgbench(&["-c", "8", "-j", "2", "-T", "60", "-l", "--log-prefix=txn"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    child.kill().unwrap(); // SIGKILL mid-run
    child.wait().unwrap();
    let run = run.wait_with_output().unwrap();
    // pgbench's log: one line per finished transaction, its latency in the third field
    // ("failed"/"serialization"/"deadlock" there for the ones that did not commit).
    let mut committed = 0;
    for entry in std::fs::read_dir(parent.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("txn.") {
            let log = std::fs::read_to_string(&path).unwrap();
            committed += log
                .lines()
                .filter(|line| {
                    let latency = line.split_whitespace().nth(2).unwrap_or("");
                    latency.parse::<u64>().is_ok()
                })
                .count() as i64;
        }
    }
    assert!(
        committed > 0,
        "pgbench committed nothing before the kill:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let (child, mut client) = start(&dir, port);
    let ([accounts, tellers, branches, delta], history) = pgbench_state(&mut client);
    assert_eq!((accounts, tellers, branches), (delta, delta, delta));
    assert!(
        history >= committed,
        "{history} history rows after the restart, pgbench saw {committed} commits"
    );
    drop(client);
    let mut child = child;
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `hayate serve --config FILE` with a flag overriding the file: the port and data
/// directory from the flags, SCRAM authentication, users and work_mem from the file.
#[test]
fn serve_reads_its_config_file() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("data");
    let config = parent.path().join("hayate.toml");
    std::fs::write(
        &config,
        "port = 1\nauth = \"scram-sha-256\"\nwork_mem = \"32MB\"\nlog_level = \"info\"\n\
         [users]\nalice = \"wonderland\"\n",
    )
    .unwrap();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hayate"))
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--port", &port.to_string(), "--data-dir"])
        .arg(&dir)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hayate serve");
    let connect = |password: &str| {
        postgres::Config::new()
            .host("127.0.0.1")
            .port(port)
            .user("alice")
            .password(password)
            .dbname("postgres")
            .connect(postgres::NoTls)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut client = loop {
        match connect("wonderland") {
            Ok(client) => break client,
            Err(error) if Instant::now() > deadline => panic!("server did not start: {error}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let work_mem: String = client.query_one("SHOW work_mem", &[]).unwrap().get(0);
    assert_eq!(work_mem, "32MB");
    // A failed statement is logged with its SQLSTATE and text (simple and extended
    // protocols), as PostgreSQL logs it.
    assert!(client.batch_execute("SELECT * FROM no_such_table").is_err());
    assert!(client.query("SELECT 1 / $1::int4", &[&0i32]).is_err());
    // Each connection has its own process id.
    let mut pids = std::collections::HashSet::new();
    let mut others: Vec<postgres::Client> =
        (0..4).map(|_| connect("wonderland").unwrap()).collect();
    for other in others.iter_mut().chain([&mut client]) {
        let pid: i32 = other
            .query_one("SELECT pg_backend_pid()", &[])
            .unwrap()
            .get(0);
        pids.insert(pid);
    }
    assert_eq!(pids.len(), 5, "{pids:?}");
    drop(others);
    let error = connect("looking glass")
        .err()
        .expect("wrong password refused");
    assert_eq!(error.code().map(|c| c.code()), Some("28P01"), "{error:?}");
    drop(client);
    // SAFETY: sending a signal to our own child process.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("auth scram-sha-256"), "{stderr}");
    assert!(
        stderr.contains("password authentication failed for user \"alice\""),
        "one log line for the failed connection: {stderr}"
    );
    assert!(
        stderr.contains("ERROR 42P01: relation \"no_such_table\" does not exist; STATEMENT: SELECT * FROM no_such_table"),
        "{stderr}"
    );
    assert!(
        // The extended-protocol statement as the client sent it, as PostgreSQL logs it.
        stderr.contains("ERROR 22012: division by zero; STATEMENT: SELECT 1 / $1::int4"),
        "{stderr}"
    );
}

#[test]
fn trust_or_an_unauthenticated_replication_listener_beyond_loopback_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The refusal comes before anything listens; a server that started instead is killed
    // after 10 s (and the test fails).
    let run = |extra: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hayate"))
            .args(["serve", "--unix-socket-dir", "", "--port", "0"])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(extra)
            .env_remove("HAYATE_REPLICATION_SECRET")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        child.wait_with_output().unwrap()
    };
    let output = run(&["--listen", "0.0.0.0"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--allow-remote-trust"), "{stderr}");
    let output = run(&["--ha-replication-listen", "0.0.0.0:0"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ha_replication_secret"), "{stderr}");
}

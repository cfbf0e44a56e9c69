//! High availability through etcd, as a user runs it (issue 20): a real etcd (Debian's
//! etcd-server) and `hayate serve --ha-etcd ...` processes on empty data directories, reached
//! by a multi-host client (`target_session_attrs=read-write`, as psql, psycopg and pgJDBC
//! use it).
//!
//! - Two empty nodes: one takes the leader key, the other seeds itself by base backup and
//!   follows; after `kill -9` of the primary the synchronous standby takes over with every
//!   acknowledged commit, and the old primary rejoins as its standby; psql, psycopg and
//!   pgJDBC (`targetServerType=primary`) find the new primary through multi-host strings.
//! - An old primary with a logged but never acknowledged commit (its standby was gone) is
//!   rewound to the fork point when it rejoins, its data kept (not seeded again): the commit
//!   is gone, the new primary's commits are there.
//! - A primary cut off from etcd (etcd stopped with SIGSTOP) acknowledges no commit begun
//!   after its lease's TTL; once etcd is back the cluster takes writes again.
//! - The bank torture test: transfers (two balance updates and a row per transfer) through
//!   repeated `kill -9` of the primary, of the standby and of etcd; after each round every
//!   acknowledged transfer is there, balances agree with the transfer rows and the total is
//!   conserved, epochs only grow. `HAYATE_FAILOVERS` sets the rounds (10 by default, the
//!   README's long run 100); the failover times (kill to the first committed transfer) are
//!   printed.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::free_port;

/// Ends the whole test binary, and the servers it started, if a test runs past `limit`: a
/// hang (a commit waiting for a standby that never comes) fails instead of blocking CI.
fn watchdog(test: &'static str, limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("{test}: still running after {limit:?}: stopping the test binary");
        let _ = Command::new("pkill")
            .args(["-9", "-P", &std::process::id().to_string()])
            .status();
        std::process::exit(101);
    });
}

/// The test's directory (etcd's and the nodes' data, the nodes' logs); kept, and named on
/// stderr, with `HAYATE_KEEP_TEST_DIRS=1`.
struct TestDir {
    path: PathBuf,
    _removed_on_drop: Option<tempfile::TempDir>,
}

impl TestDir {
    fn path(&self) -> &Path {
        &self.path
    }
}

fn test_dir() -> TestDir {
    let dir = tempfile::tempdir().unwrap();
    if std::env::var_os("HAYATE_KEEP_TEST_DIRS").is_some() {
        let path = dir.keep();
        eprintln!("test directory kept: {}", path.display());
        return TestDir {
            path,
            _removed_on_drop: None,
        };
    }
    TestDir {
        path: dir.path().to_path_buf(),
        _removed_on_drop: Some(dir),
    }
}

/// A real etcd on free ports, its data in a directory that outlives restarts.
struct Etcd {
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

impl Etcd {
    fn start(dir: &Path) -> Etcd {
        let mut etcd = Etcd {
            dir: dir.to_path_buf(),
            client_port: free_port(),
            peer_port: free_port(),
            child: None,
        };
        etcd.spawn();
        etcd
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn spawn(&mut self) {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new("etcd")
            .arg("--data-dir")
            .arg(&self.dir)
            .args(["--listen-client-urls", &self.url()])
            .args(["--advertise-client-urls", &self.url()])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("default={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd runs (Debian's etcd-server; .ci/run installs it)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.client_port)).is_err() {
            assert!(Instant::now() < deadline, "etcd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, signal: libc::c_int) {
        let child = self.child.as_ref().expect("etcd runs");
        // SAFETY: a signal to our own child process.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // SAFETY: a signal to our own child process (it may be stopped).
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
        }
        self.kill();
    }
}

/// One `hayate serve` node of the cluster.
struct Node {
    name: String,
    dir: PathBuf,
    port: u16,
    replication_port: u16,
    etcd: String,
    cluster: String,
    child: Option<Child>,
}

impl Node {
    fn new(base: &Path, name: &str, etcd: &Etcd, cluster: &str) -> Node {
        Node {
            name: name.into(),
            dir: base.join(name),
            port: free_port(),
            replication_port: free_port(),
            etcd: etcd.url(),
            cluster: cluster.into(),
            child: None,
        }
    }

    fn start(&mut self) {
        assert!(self.child.is_none(), "{} runs already", self.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_hayate"))
            .args([
                "serve",
                "--unix-socket-dir",
                "",
                "--port",
                &self.port.to_string(),
            ])
            .arg("--data-dir")
            .arg(&self.dir)
            .args(["--ha-etcd", &self.etcd, "--ha-cluster", &self.cluster])
            .args(["--ha-node", &self.name, "--ha-ttl", "2"])
            .args([
                "--ha-replication-listen",
                &format!("127.0.0.1:{}", self.replication_port),
            ])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start hayate serve");
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Ok(true) if it answers as a primary, Ok(false) as a standby.
    fn is_primary(&self) -> Result<bool, postgres::Error> {
        let mut client = postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user("tester")
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(1))
            .connect(postgres::NoTls)?;
        let row = client.query_one("SELECT pg_is_in_recovery()", &[])?;
        Ok(!row.get::<_, bool>(0))
    }

    fn client(&self) -> postgres::Client {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match postgres::Config::new()
                .host("127.0.0.1")
                .port(self.port)
                .user("tester")
                .dbname("postgres")
                .connect_timeout(Duration::from_secs(1))
                .connect(postgres::NoTls)
            {
                Ok(client) => return client,
                Err(error) if Instant::now() > deadline => {
                    panic!("{} did not answer: {error}", self.name)
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A multi-host connection to whichever node takes writes.
fn read_write(nodes: &[&Node]) -> Result<postgres::Client, postgres::Error> {
    let mut config = postgres::Config::new();
    for node in nodes {
        config.host("127.0.0.1").port(node.port);
    }
    config
        .user("tester")
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(1))
        .target_session_attrs(postgres::config::TargetSessionAttrs::ReadWrite)
        .connect(postgres::NoTls)
}

/// Retries `work` on a fresh read-write connection until it succeeds (60 s at most).
fn with_primary<T>(
    nodes: &[&Node],
    mut work: impl FnMut(&mut postgres::Client) -> Result<T, postgres::Error>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let result = read_write(nodes).and_then(|mut client| work(&mut client));
        match result {
            Ok(value) => return value,
            Err(error) if Instant::now() > deadline => {
                panic!("no primary took the work: {error:?}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn wait_for(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !probe() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn keys(client: &mut postgres::Client, table: &str) -> BTreeSet<i64> {
    try_keys(client, table).unwrap()
}

/// `keys`, or the error a node that is still catching up (or restarting) gives.
fn try_keys(client: &mut postgres::Client, table: &str) -> Result<BTreeSet<i64>, postgres::Error> {
    Ok(client
        .query(&format!("SELECT id FROM {table}"), &[])?
        .iter()
        .map(|row| row.get(0))
        .collect())
}

/// `hayate status --json` (retried while etcd is restarting).
fn status_json(etcd: &Etcd, cluster: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let output = common::hayate([
            "status",
            "--ha-etcd",
            &etcd.url(),
            "--ha-cluster",
            cluster,
            "--json",
        ]);
        if output.status.success() {
            return serde_json::from_slice(&output.stdout).unwrap();
        }
        assert!(Instant::now() < deadline, "{:?}", common::text(&output));
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Whether a client program runs; without it a loud notice, or a failure when
/// HAYATE_REQUIRE_CLIENTS is set (CI).
fn client_runs(program: &str, args: &[&str], install: &str) -> bool {
    let runs = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|output| output.status.success());
    if !runs {
        let message = format!("{program} NOT FOUND: its multi-host check did NOT run ({install})");
        eprintln!("\n!!!!!!!! {message} !!!!!!!!\n");
        assert!(
            std::env::var_os("HAYATE_REQUIRE_CLIENTS").is_none(),
            "{message}"
        );
    }
    runs
}

/// Writes row `id` through psql, `id + 1` through psycopg (each given the multi-host
/// connection string with `target_session_attrs=read-write`) and `id + 2` through pgJDBC
/// (a multi-host URL with `targetServerType=primary`); returns the ids written.
fn write_through_multi_host_clients(nodes: &[&Node], id: i64) -> Vec<i64> {
    let conninfo = format!(
        "host={} port={} user=tester dbname=postgres target_session_attrs=read-write",
        vec!["127.0.0.1"; nodes.len()].join(","),
        nodes
            .iter()
            .map(|node| node.port.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut written = Vec::new();
    if client_runs("psql", &["--version"], "postgresql-client") {
        let output = Command::new("psql")
            .arg(&conninfo)
            .args(["-v", "ON_ERROR_STOP=1", "-c"])
            .arg(format!("INSERT INTO acked VALUES ({id}, 'psql')"))
            .output()
            .unwrap();
        assert!(output.status.success(), "psql: {output:?}");
        written.push(id);
    }
    let script = "import psycopg, sys\n\
                  with psycopg.connect(sys.argv[1], autocommit=True) as c:\n\
                  \x20   c.execute('INSERT INTO acked VALUES (%s, %s)', (int(sys.argv[2]), 'psycopg'))";
    if client_runs(
        "/usr/bin/python3",
        &["-c", "import psycopg"],
        "python3-psycopg",
    ) {
        let output = Command::new("/usr/bin/python3")
            .args(["-c", script, &conninfo, &(id + 1).to_string()])
            .output()
            .unwrap();
        assert!(output.status.success(), "psycopg: {output:?}");
        written.push(id + 1);
    }
    let jar = std::env::var("HAYATE_JDBC_JAR")
        .unwrap_or_else(|_| "/usr/share/java/postgresql.jar".into());
    let java = client_runs("java", &["-version"], "a Java runtime");
    if java && client_runs("test", &["-f", &jar], "libpostgresql-jdbc-java") {
        let hosts = nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port))
            .collect::<Vec<_>>()
            .join(",");
        let output = Command::new("java")
            .args(["-cp", &jar])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers/JdbcFailover.java"))
            .args([&hosts, &(id + 2).to_string()])
            .output()
            .unwrap();
        assert!(
            output.status.success() && String::from_utf8_lossy(&output.stdout).contains("jdbc ok"),
            "pgJDBC: {output:?}"
        );
        written.push(id + 2);
    }
    written
}

fn primary_index(nodes: &[&Node]) -> Option<usize> {
    nodes
        .iter()
        .position(|node| node.is_primary().unwrap_or(false))
}

#[test]
fn empty_nodes_seed_fail_over_with_every_acknowledged_commit_and_rejoin() {
    watchdog(
        "empty_nodes_seed_fail_over_with_every_acknowledged_commit_and_rejoin",
        Duration::from_secs(180),
    );
    let base = test_dir();
    let etcd = Etcd::start(&base.path().join("etcd"));
    let mut a = Node::new(base.path(), "a", &etcd, "pair");
    let mut b = Node::new(base.path(), "b", &etcd, "pair");
    a.start();
    std::thread::sleep(Duration::from_millis(300));
    b.start();
    with_primary(&[&a, &b], |client| {
        client.batch_execute("CREATE TABLE acked (id bigint PRIMARY KEY, note text)")
    });
    let mut acked = BTreeSet::new();
    for id in 0..200i64 {
        with_primary(&[&a, &b], |client| {
            client.execute("INSERT INTO acked VALUES ($1, 'before')", &[&id])
        });
        acked.insert(id);
    }
    let status = status_json(&etcd, "pair");
    let first = status["leader"]["node"].as_str().unwrap().to_string();
    assert_eq!(status["sync"]["primary"], first.as_str());
    let standby_name = if first == "a" { "b" } else { "a" };
    assert_eq!(status["sync"]["standby"], standby_name, "{status}");
    let (primary, standby) = if first == "a" {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    // The standby seeded itself (its directory was empty) and serves reads.
    let mut reader = standby.client();
    wait_for("the standby to apply", || {
        keys(&mut reader, "acked") == acked
    });
    assert!(reader
        .execute("INSERT INTO acked VALUES (-1, 'x')", &[])
        .is_err());

    primary.kill();
    let killed = Instant::now();
    wait_for("the standby to take over", || {
        standby.is_primary().unwrap_or(false)
    });
    eprintln!(
        "standby became primary {:?} after kill -9",
        killed.elapsed()
    );
    let mut client = standby.client();
    assert_eq!(
        keys(&mut client, "acked"),
        acked,
        "an acknowledged commit was lost"
    );
    // Strict: with its standby gone, the new primary acknowledges only once the old primary
    // is back as its standby.
    primary.start();
    for id in 200..220i64 {
        with_primary(&[&a, &b], |client| {
            client.execute("INSERT INTO acked VALUES ($1, 'after')", &[&id])
        });
        acked.insert(id);
    }
    // psql and psycopg find the new primary through a multi-host connection string.
    acked.extend(write_through_multi_host_clients(&[&a, &b], 1_000));
    let status = status_json(&etcd, "pair");
    assert_eq!(status["leader"]["node"], standby_name);
    assert_eq!(status["sync"]["standby"], first.as_str(), "{status}");
    assert!(status["leader"]["epoch"].as_u64().unwrap() >= 2);
    let (old, new) = if first == "a" { (&a, &b) } else { (&b, &a) };
    let mut reader = old.client();
    wait_for("the old primary to apply as a standby", || {
        keys(&mut reader, "acked") == acked
    });
    assert!(!old.is_primary().unwrap());
    // pg_stat_replication on the new primary shows its synchronous standby; a standby has none.
    let rows = new
        .client()
        .query(
            "SELECT application_name, state, sync_state, sent_lsn, flush_lsn \
             FROM pg_stat_replication",
            &[],
        )
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, String>(0), first);
    assert_eq!(rows[0].get::<_, String>(1), "streaming");
    assert_eq!(rows[0].get::<_, String>(2), "sync");
    assert!(rows[0].get::<_, String>(4).contains('/'));
    // The standby reports what it applied; the primary measures the lags of its reports.
    let mut observer = new.client();
    wait_for(
        "the standby's replay position to reach its flush position",
        || {
            observer
                .query(
                    "SELECT replay_lsn = flush_lsn AND flush_lag IS NOT NULL \
                 AND replay_lag IS NOT NULL AND replay_lag < interval '10 seconds' \
                 FROM pg_stat_replication",
                    &[],
                )
                .unwrap()[0]
                .get::<_, bool>(0)
        },
    );
    let none = reader
        .query("SELECT count(*) FROM pg_stat_replication", &[])
        .unwrap();
    assert_eq!(none[0].get::<_, i64>(0), 0);
}

#[test]
fn an_old_primary_with_an_unacknowledged_tail_is_rewound_and_follows() {
    watchdog(
        "an_old_primary_with_an_unacknowledged_tail_is_rewound_and_follows",
        Duration::from_secs(180),
    );
    let base = test_dir();
    let etcd = Etcd::start(&base.path().join("etcd"));
    let mut a = Node::new(base.path(), "a", &etcd, "tail");
    a.start();
    let mut client = a.client();
    wait_for("a to lead", || a.is_primary().unwrap_or(false));
    let mut b = Node::new(base.path(), "b", &etcd, "tail");
    b.start();
    client
        .batch_execute("CREATE TABLE t (id bigint PRIMARY KEY, note text)")
        .unwrap();
    client
        .execute("INSERT INTO t VALUES (1, 'acked')", &[])
        .unwrap();
    let mut reader = b.client();
    // A new standby may not have applied the table yet (42P01 until it has).
    wait_for("b to apply", || {
        try_keys(&mut reader, "t").is_ok_and(|keys| keys.len() == 1)
    });
    drop(reader);
    b.kill();
    // Logged and synced on a, never acknowledged: no standby holds it.
    let done = Arc::new(AtomicBool::new(false));
    let hung = {
        let done = done.clone();
        std::thread::spawn(move || {
            let result = client.execute("INSERT INTO t VALUES (2, 'never acknowledged')", &[]);
            done.store(true, Ordering::SeqCst);
            result.is_ok()
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !done.load(Ordering::SeqCst),
        "acknowledged without a standby"
    );
    a.kill();
    assert!(!hung.join().unwrap(), "the commit was acknowledged");
    b.start();
    wait_for("b to take over", || b.is_primary().unwrap_or(false));
    a.start();
    with_primary(&[&a, &b], |client| {
        client.execute("INSERT INTO t VALUES (3, 'after')", &[])
    });
    let mut old = a.client();
    // The old primary restarts as a standby once rewound: its connection may end.
    wait_for("a to follow b", || match try_keys(&mut old, "t") {
        Ok(keys) => keys == BTreeSet::from([1, 3]),
        Err(_) => {
            old = a.client();
            false
        }
    });
    assert!(!a.is_primary().unwrap());
    let log = std::fs::read_to_string(a.dir.with_extension("log")).unwrap();
    assert!(log.contains("rewound the log from position"), "{log}");
    assert!(
        !log.contains("seeded again") && !log.contains("seeding"),
        "the old primary was seeded again rather than rewound: {log}"
    );
}

#[test]
fn a_primary_cut_off_from_etcd_acknowledges_nothing_after_its_lease() {
    watchdog(
        "a_primary_cut_off_from_etcd_acknowledges_nothing_after_its_lease",
        Duration::from_secs(180),
    );
    let base = test_dir();
    let etcd = Etcd::start(&base.path().join("etcd"));
    let mut a = Node::new(base.path(), "a", &etcd, "cut");
    let mut b = Node::new(base.path(), "b", &etcd, "cut");
    a.start();
    wait_for("a to lead", || a.is_primary().unwrap_or(false));
    b.start();
    with_primary(&[&a, &b], |client| {
        client.batch_execute("CREATE TABLE t (id bigint PRIMARY KEY)")
    });
    with_primary(&[&a, &b], |client| {
        client.execute("INSERT INTO t VALUES (0)", &[])
    });
    // A partition from etcd: etcd stops answering.
    etcd.signal(libc::SIGSTOP);
    let cut = Instant::now();
    let ttl = Duration::from_secs(2);
    let mut late_acks = Vec::new();
    let mut id = 1i64;
    while cut.elapsed() < ttl * 3 {
        let started = cut.elapsed();
        let acked = read_write(&[&a, &b])
            .and_then(|mut client| client.execute("INSERT INTO t VALUES ($1)", &[&id]))
            .is_ok();
        if acked && started > ttl {
            late_acks.push((id, started));
        }
        id += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        late_acks.is_empty(),
        "acknowledged after the lease: {late_acks:?}"
    );
    etcd.signal(libc::SIGCONT);
    with_primary(&[&a, &b], |client| {
        client.execute("INSERT INTO t VALUES (-1)", &[])
    });
}

#[test]
fn a_node_waiting_for_a_primary_stops_cleanly_on_sigterm() {
    watchdog(
        "a_node_waiting_for_a_primary_stops_cleanly_on_sigterm",
        Duration::from_secs(120),
    );
    let base = test_dir();
    let etcd = Etcd::start(&base.path().join("etcd"));
    let mut a = Node::new(base.path(), "a", &etcd, "wait");
    a.start();
    wait_for("a to lead", || a.is_primary().unwrap_or(false));
    a.kill();
    // An empty node cannot lead (the sync set names a) and has no primary to seed from.
    let mut b = Node::new(base.path(), "b", &etcd, "wait");
    b.start();
    std::thread::sleep(Duration::from_secs(4));
    let mut child = b.child.take().unwrap();
    assert!(
        child.try_wait().unwrap().is_none(),
        "b gave up instead of waiting"
    );
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "SIGTERM did not stop a waiting node"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let log = std::fs::read_to_string(b.dir.with_extension("log")).unwrap();
    assert!(log.contains("not in the synchronous set"), "{log}");
}

/// The bank: accounts and a row per transfer.
const ACCOUNTS: i64 = 20;
const START_BALANCE: i64 = 1_000;

fn transfer(client: &mut postgres::Client, id: i64) -> Result<(), postgres::Error> {
    let from = id % ACCOUNTS;
    let to = (id * 7 + 3) % ACCOUNTS;
    let to = if to == from { (to + 1) % ACCOUNTS } else { to };
    let mut txn = client.transaction()?;
    txn.execute(
        "UPDATE accounts SET balance = balance - 1 WHERE id = $1",
        &[&from],
    )?;
    txn.execute(
        "UPDATE accounts SET balance = balance + 1 WHERE id = $1",
        &[&to],
    )?;
    txn.execute(
        "INSERT INTO transfers VALUES ($1, $2, $3)",
        &[&id, &from, &to],
    )?;
    txn.commit()
}

/// Every acknowledged transfer is there, balances agree with the transfer rows, the total
/// is conserved.
fn check_bank(
    client: &mut postgres::Client,
    acknowledged: &BTreeSet<i64>,
) -> Result<(), postgres::Error> {
    // One snapshot for both tables: transfers go on meanwhile. A connection lost to a
    // failover is an error to retry (`with_primary`), not a failed check.
    let mut client = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let transfers: Vec<(i64, i64, i64)> = client
        .query("SELECT id, src, dst FROM transfers", &[])?
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    let balances: Vec<i64> = client
        .query("SELECT balance FROM accounts ORDER BY id", &[])?
        .iter()
        .map(|row| row.get(0))
        .collect();
    client.commit()?;
    let present: BTreeSet<i64> = transfers.iter().map(|t| t.0).collect();
    let lost: Vec<_> = acknowledged.difference(&present).collect();
    assert!(lost.is_empty(), "acknowledged transfers lost: {lost:?}");
    let mut expected = vec![START_BALANCE; ACCOUNTS as usize];
    for (_, from, to) in &transfers {
        expected[*from as usize] -= 1;
        expected[*to as usize] += 1;
    }
    assert_eq!(
        balances, expected,
        "balances disagree with the transfer rows"
    );
    assert_eq!(balances.iter().sum::<i64>(), START_BALANCE * ACCOUNTS);
    Ok(())
}

#[test]
fn bank_torture_through_repeated_failovers() {
    let rounds: usize = std::env::var("HAYATE_FAILOVERS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(10);
    watchdog(
        "bank_torture_through_repeated_failovers",
        Duration::from_secs(120 + 30 * rounds as u64),
    );
    let base = test_dir();
    let mut etcd = Etcd::start(&base.path().join("etcd"));
    let mut nodes = [
        Node::new(base.path(), "a", &etcd, "bank"),
        Node::new(base.path(), "b", &etcd, "bank"),
    ];
    // Each node reaches etcd through a proxy of its own, which partition rounds cut.
    let etcd_address: std::net::SocketAddr =
        format!("127.0.0.1:{}", etcd.client_port).parse().unwrap();
    let links = [
        hayate::netproxy::Proxy::start(etcd_address).unwrap(),
        hayate::netproxy::Proxy::start(etcd_address).unwrap(),
    ];
    for (node, link) in nodes.iter_mut().zip(&links) {
        node.etcd = format!("http://{}", link.address());
    }
    nodes[0].start();
    std::thread::sleep(Duration::from_millis(300));
    nodes[1].start();
    let ports: Vec<u16> = nodes.iter().map(|node| node.port).collect();
    with_primary(&[&nodes[0], &nodes[1]], |client| {
        client.batch_execute(
            "CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL);
             CREATE TABLE transfers (id bigint PRIMARY KEY, src bigint, dst bigint)",
        )?;
        for id in 0..ACCOUNTS {
            client.execute(
                "INSERT INTO accounts VALUES ($1, $2)",
                &[&id, &START_BALANCE],
            )?;
        }
        Ok(())
    });

    // The workload: one client, transfers numbered in order, each acknowledged or not.
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let last_ack = Arc::new(Mutex::new(Instant::now()));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (acknowledged, last_ack, stop) = (acknowledged.clone(), last_ack.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut id = 0i64;
            let mut client: Option<postgres::Client> = None;
            while !stop.load(Ordering::Relaxed) {
                if client.is_none() {
                    let mut config = postgres::Config::new();
                    for port in &ports {
                        config.host("127.0.0.1").port(*port);
                    }
                    client = config
                        .user("tester")
                        .dbname("postgres")
                        .connect_timeout(Duration::from_secs(1))
                        .target_session_attrs(postgres::config::TargetSessionAttrs::ReadWrite)
                        .connect(postgres::NoTls)
                        .ok();
                    if client.is_none() {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                }
                id += 1;
                match transfer(client.as_mut().unwrap(), id) {
                    Ok(()) => {
                        acknowledged.lock().unwrap().insert(id);
                        *last_ack.lock().unwrap() = Instant::now();
                    }
                    Err(_) => client = None,
                }
            }
        })
    };

    let mut epochs = Vec::new();
    let mut failover_times = Vec::new();
    for round in 0..rounds {
        // Let transfers commit, then break something.
        let before = acknowledged.lock().unwrap().len();
        wait_for("transfers to commit", || {
            acknowledged.lock().unwrap().len() > before + 20
        });
        let refs = [&nodes[0], &nodes[1]];
        let Some(primary) = primary_index(&refs) else {
            panic!("no primary in round {round}");
        };
        let killed = Instant::now();
        match round % 6 {
            // The standby.
            3 => {
                nodes[1 - primary].kill();
                nodes[1 - primary].start();
            }
            // etcd: the primary's lease outlives a quick restart, or it fences.
            4 => {
                etcd.kill();
                etcd.spawn();
            }
            // A partition between the primary and etcd (the standby still reaches it): the
            // primary fences itself at its lease deadline and the standby takes over; healed,
            // the old primary rejoins as its standby (strict: the new primary's commits wait
            // for it).
            5 => {
                links[primary].partition();
                let other = &nodes[1 - primary];
                wait_for(
                    "the standby to take over from the partitioned primary",
                    || other.is_primary().unwrap_or(false),
                );
                links[primary].heal();
            }
            // The primary: the standby takes over; the old primary rejoins.
            _ => {
                nodes[primary].kill();
                std::thread::sleep(Duration::from_millis(200));
                nodes[primary].start();
            }
        }
        wait_for("a transfer after the failure", || {
            *last_ack.lock().unwrap() > killed
        });
        failover_times.push(killed.elapsed());
        let status = status_json(&etcd, "bank");
        let epoch = status["leader"]["epoch"].as_u64().unwrap_or(0);
        if let Some(last) = epochs.last() {
            assert!(
                epoch >= *last,
                "the epoch went back: {epochs:?} then {epoch}"
            );
        }
        epochs.push(epoch);
        let refs = [&nodes[0], &nodes[1]];
        let acked = acknowledged.lock().unwrap().clone();
        with_primary(&refs, |client| check_bank(client, &acked));
    }
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    let acked = acknowledged.lock().unwrap().clone();
    let refs = [&nodes[0], &nodes[1]];
    with_primary(&refs, |client| check_bank(client, &acked));
    failover_times.sort();
    let percentile = |p: f64| failover_times[((failover_times.len() - 1) as f64 * p) as usize];
    // How old primaries with a tail came back: rewound (data kept) or seeded again.
    let logged = |needle: &str| -> usize {
        nodes
            .iter()
            .map(|node| {
                std::fs::read_to_string(node.dir.with_extension("log"))
                    .unwrap_or_default()
                    .matches(needle)
                    .count()
            })
            .sum()
    };
    eprintln!(
        "bank torture: {rounds} rounds, {} transfers acknowledged, epochs {epochs:?}; time from \
         the failure to the next committed transfer: median {:?}, p99 {:?}, max {:?}; old \
         primaries rewound {} times, seeded again {} times",
        acked.len(),
        percentile(0.5),
        percentile(0.99),
        failover_times.last().unwrap(),
        logged("rewound the log from position"),
        logged("must be seeded again")
    );
}

#[test]
fn a_primary_partitioned_from_etcd_is_fenced_and_its_standby_takes_over() {
    watchdog(
        "a_primary_partitioned_from_etcd_is_fenced_and_its_standby_takes_over",
        Duration::from_secs(180),
    );
    let base = test_dir();
    let etcd = Etcd::start(&base.path().join("etcd"));
    // a reaches etcd through a proxy standing for its network; b directly.
    let link =
        hayate::netproxy::Proxy::start(format!("127.0.0.1:{}", etcd.client_port).parse().unwrap())
            .unwrap();
    let mut a = Node::new(base.path(), "a", &etcd, "part");
    a.etcd = format!("http://{}", link.address());
    let mut b = Node::new(base.path(), "b", &etcd, "part");
    a.start();
    wait_for("a to lead", || a.is_primary().unwrap_or(false));
    b.start();
    with_primary(&[&a, &b], |client| {
        client.batch_execute("CREATE TABLE t (id bigint PRIMARY KEY)")
    });
    let mut acked = BTreeSet::new();
    with_primary(&[&a, &b], |client| {
        client.execute("INSERT INTO t VALUES (0)", &[])
    });
    acked.insert(0i64);
    wait_for("b to be the synchronous standby", || {
        status_json(&etcd, "part")["sync"]["standby"] == "b"
    });

    link.partition();
    let cut = Instant::now();
    let ttl = Duration::from_secs(2);
    let mut late_acks = Vec::new();
    let mut id = 1i64;
    // Writes go to a alone (its lease runs out: it must acknowledge nothing begun after it).
    while cut.elapsed() < ttl * 2 {
        let started = cut.elapsed();
        let result = postgres::Config::new()
            .host("127.0.0.1")
            .port(a.port)
            .user("tester")
            .dbname("postgres")
            .connect_timeout(Duration::from_secs(1))
            .connect(postgres::NoTls)
            .and_then(|mut client| client.execute("INSERT INTO t VALUES ($1)", &[&id]));
        if result.is_ok() {
            acked.insert(id);
            if started > ttl {
                late_acks.push((id, started));
            }
        }
        id += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        late_acks.is_empty(),
        "acknowledged after the lease: {late_acks:?}"
    );
    wait_for("b to take over", || b.is_primary().unwrap_or(false));
    assert!(
        !a.is_primary().unwrap_or(false),
        "two primaries: a still takes writes"
    );
    let mut client = b.client();
    // A commit whose acknowledgement failed at the cut may be there too (its outcome was
    // unknown to its client); none acknowledged may be missing.
    let mut on_b = keys(&mut client, "t");
    assert!(
        acked.is_subset(&on_b),
        "acknowledged commits lost: {:?}",
        acked.difference(&on_b).collect::<Vec<_>>()
    );
    // Healed, a rejoins as b's standby, and writes are acknowledged again.
    link.heal();
    for id in 1_000..1_010i64 {
        with_primary(&[&a, &b], |client| {
            client.execute("INSERT INTO t VALUES ($1)", &[&id])
        });
        on_b.insert(id);
    }
    let mut reader = a.client();
    wait_for("a to apply as b's standby", || {
        try_keys(&mut reader, "t").is_ok_and(|keys| keys == on_b)
    });
}

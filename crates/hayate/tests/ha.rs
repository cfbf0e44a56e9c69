//! A primary and a synchronous standby, as a user runs them: two `hayate serve` processes,
//! the standby's data directory a copy of the primary's taken while it was stopped. Every
//! commit the primary acknowledges is on the standby; the standby serves read-only queries
//! (25006 on writes, `pg_is_in_recovery()`, the parameter statuses libpq's
//! `target_session_attrs` reads) and sees DDL; after `kill -9` of the primary and
//! `hayate promote`, the standby takes writes with every acknowledged commit, and psql with a
//! multi-host connection string finds it.

use crate::common;

use common::free_port;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn hayate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hayate"))
}

fn serve(dir: &Path, port: u16, extra: &[String]) -> Child {
    hayate()
        .args([
            "serve",
            "--port",
            &port.to_string(),
            "--unix-socket-dir",
            "",
        ])
        .arg("--data-dir")
        .arg(dir)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start hayate serve")
}

fn connect(port: u16) -> postgres::Client {
    connect_to(port, "postgres")
}

/// A connection to `database`, retried for a minute (the server starting, or a standby yet to
/// apply the database's creation).
fn connect_to(port: u16, database: &str) -> postgres::Client {
    let config = format!("host=127.0.0.1 port={port} user=tester dbname={database}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match postgres::Client::connect(&config, postgres::NoTls) {
            Ok(client) => return client,
            Err(error) if Instant::now() > deadline => panic!("server did not start: {error}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn stop(mut child: Child) {
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "clean stop");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A primary's database in `a` made with `ddl`, and its copy in `b` taken while it was
/// stopped (a standby's seed).
fn seed(a: &Path, b: &Path, port: u16, ddl: &str) {
    let child = serve(a, port, &[]);
    let mut client = connect(port);
    client.batch_execute(ddl).unwrap();
    drop(client);
    stop(child);
    copy_dir(a, b);
}

/// Waits until `probe` holds (the standby applies asynchronously after acknowledging).
fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !probe() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Inserts row 2 through `writer` while `link` is cut: the commit must still wait after
/// `hold` (else `early` is the failure), and be acknowledged once the link heals.
fn acknowledged_once_healed(
    mut writer: postgres::Client,
    link: &hayate::netproxy::Proxy,
    hold: Duration,
    early: &str,
) -> postgres::Client {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let committer = std::thread::spawn(move || {
        let result = writer.execute("INSERT INTO acked VALUES (2)", &[]);
        done_tx
            .send(result.map_err(|error| error.to_string()))
            .unwrap();
        writer
    });
    std::thread::sleep(hold);
    assert!(done_rx.try_recv().is_err(), "{early}");
    link.heal();
    let result = done_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(result.is_ok(), "{result:?}");
    committer.join().unwrap()
}

fn count(client: &mut postgres::Client, table: &str) -> i64 {
    client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .map(|row| row.get(0))
        .unwrap_or(-1)
}

#[test]
fn a_standby_follows_serves_reads_and_takes_over_with_every_acknowledged_commit() {
    let parent = tempfile::tempdir().unwrap();
    let (a, b) = (parent.path().join("a"), parent.path().join("b"));
    let (port_a, port_b, replication) = (free_port(), free_port(), free_port());

    seed(
        &a,
        &b,
        port_a,
        "CREATE TABLE acked (id int8 PRIMARY KEY, note text)",
    );

    let listen = format!("127.0.0.1:{replication}");
    let mut primary = serve(
        &a,
        port_a,
        &["--ha-replication-listen".into(), listen.clone()],
    );
    let standby = serve(&b, port_b, &["--ha-follow".into(), listen]);
    let mut writer = connect(port_a);
    let mut reader = connect(port_b);

    let insert = writer
        .prepare("INSERT INTO acked VALUES ($1, 'acknowledged')")
        .unwrap();
    for id in 0..300i64 {
        writer.execute(&insert, &[&id]).unwrap();
    }
    eventually("the standby to apply 300 rows", || {
        count(&mut reader, "acked") == 300
    });

    // A hot standby: read-only, and says so as PostgreSQL does.
    let in_recovery = |client: &mut postgres::Client| -> bool {
        client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .unwrap()
            .get(0)
    };
    assert!(in_recovery(&mut reader));
    assert!(!in_recovery(&mut writer));
    let refused = reader
        .execute("INSERT INTO acked VALUES (-1, 'on the standby')", &[])
        .unwrap_err();
    assert_eq!(
        refused.code().map(|code| code.code()),
        Some("25006"),
        "{refused}"
    );

    // DDL reaches the standby's catalog.
    writer
        .batch_execute("CREATE TABLE later (k int4 PRIMARY KEY); INSERT INTO later VALUES (1), (2)")
        .unwrap();
    eventually("the standby to see the new table", || {
        count(&mut reader, "later") == 2
    });

    // A second database and its tables reach the standby; the namespaces stay apart.
    writer.batch_execute("CREATE DATABASE shop").unwrap();
    let mut shop = connect_to(port_a, "shop");
    shop.batch_execute("CREATE TABLE later (k int4 PRIMARY KEY); INSERT INTO later VALUES (7)")
        .unwrap();
    let mut shop_reader = connect_to(port_b, "shop");
    eventually("the standby to see the second database's table", || {
        count(&mut shop_reader, "later") == 1
    });
    assert_eq!(
        count(&mut reader, "later"),
        2,
        "postgres.later is another table"
    );
    drop((shop, shop_reader));

    // Replay is complete: SERIAL, sequences, an index, COPY and a commit over 16 MiB (logged
    // in parts across flushes) read the same on both nodes.
    writer
        .batch_execute(
            "CREATE TABLE items (id serial PRIMARY KEY, tag text NOT NULL, body text); \
             CREATE INDEX items_tag ON items (tag); CREATE SEQUENCE tickets; \
             INSERT INTO items (tag) SELECT 'gen' || g FROM generate_series(1, 500) g; \
             SELECT nextval('tickets') FROM generate_series(1, 40)",
        )
        .unwrap();
    {
        use std::io::Write;
        let mut copy = writer.copy_in("COPY items (tag, body) FROM STDIN").unwrap();
        for line in 0..2_000 {
            writeln!(copy, "copied{line}\tline {line}").unwrap();
        }
        copy.finish().unwrap();
    }
    writer
        .batch_execute(
            "INSERT INTO items (tag, body) \
             SELECT 'big' || g, repeat('x', 100000) FROM generate_series(1, 180) g",
        )
        .unwrap();
    let dump = |client: &mut postgres::Client| -> Vec<(i32, String, i64)> {
        client
            .query(
                "SELECT id, tag, coalesce(length(body), -1)::int8 FROM items ORDER BY id",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect()
    };
    let expected = dump(&mut writer);
    assert_eq!(expected.len(), 2_680);
    eventually("the standby to apply the big commit", || {
        count(&mut reader, "items") == 2_680
    });
    assert_eq!(dump(&mut reader), expected);
    let by_index: i64 = reader
        .query_one("SELECT count(*) FROM items WHERE tag = 'copied1999'", &[])
        .unwrap()
        .get(0);
    assert_eq!(by_index, 1);
    // An enum type, its column and a label added before another: the standby's catalog
    // follows, and both order the values by the type.
    writer
        .batch_execute(
            "CREATE TYPE size AS ENUM ('big', 'huge'); \
             CREATE TABLE sized (s size PRIMARY KEY); INSERT INTO sized VALUES ('huge'), ('big'); \
             ALTER TYPE size ADD VALUE 'small' BEFORE 'big'; INSERT INTO sized VALUES ('small')",
        )
        .unwrap();
    let sizes = |client: &mut postgres::Client| -> String {
        let row = client
            .query_one("SELECT string_agg(s::text, ',' ORDER BY s) FROM sized", &[])
            .unwrap();
        row.get(0)
    };
    assert_eq!(sizes(&mut writer), "small,big,huge");
    eventually("the standby to apply the enum type", || {
        count(&mut reader, "sized") == 3
    });
    assert_eq!(sizes(&mut reader), "small,big,huge");
    let last_ticket: i64 = writer
        .query_one("SELECT nextval('tickets')", &[])
        .unwrap()
        .get(0);
    let last_id = expected.last().unwrap().0;

    // kill -9 of the primary, then promotion.
    primary.kill().unwrap();
    primary.wait().unwrap();
    drop(writer);
    let status = hayate()
        .args(["promote", "--dir"])
        .arg(&b)
        .status()
        .unwrap();
    assert!(status.success());
    let mut promoted = connect(port_b);
    eventually("the promoted standby to take writes", || {
        promoted
            .execute("INSERT INTO acked VALUES (1000, 'after failover')", &[])
            .is_ok()
    });
    assert_eq!(
        count(&mut promoted, "acked"),
        301,
        "every acknowledged commit"
    );
    assert!(!in_recovery(&mut promoted));
    // Sequences and SERIAL never hand out a value the old primary gave.
    let ticket: i64 = promoted
        .query_one("SELECT nextval('tickets')", &[])
        .unwrap()
        .get(0);
    assert!(ticket > last_ticket, "{ticket} after {last_ticket}");
    let id: i32 = promoted
        .query_one("INSERT INTO items (tag) VALUES ('after') RETURNING id", &[])
        .unwrap()
        .get(0);
    assert!(id > last_id, "{id} after {last_id}");

    // libpq's multi-host failover: the first host is down, the second takes writes.
    if let Ok(output) = Command::new("psql")
        .arg(format!(
            "host=127.0.0.1,127.0.0.1 port={port_a},{port_b} user=tester dbname=postgres \
             target_session_attrs=read-write connect_timeout=5"
        ))
        .args([
            "-X",
            "-A",
            "-t",
            "-c",
            "INSERT INTO acked VALUES (1001, 'psql'); SELECT count(*) FROM acked",
        ])
        .output()
    {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("302"), "{stdout}");
    } else {
        assert!(
            std::env::var_os("HAYATE_REQUIRE_CLIENTS").is_none(),
            "psql is required"
        );
    }
    drop(reader);
    drop(promoted);
    stop(standby);
}

#[test]
fn a_primary_without_its_standby_never_acknowledges_and_still_stops_on_sigterm() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("a");
    let (port, replication) = (free_port(), free_port());
    let child = serve(&dir, port, &[]);
    let mut client = connect(port);
    client.batch_execute("CREATE TABLE t (id int4)").unwrap();
    drop(client);
    stop(child);

    let listen = format!("127.0.0.1:{replication}");
    let child = serve(&dir, port, &["--ha-replication-listen".into(), listen]);
    let mut client = connect(port);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let committer = std::thread::spawn(move || {
        let result = client.execute("INSERT INTO t VALUES (1)", &[]);
        done_tx
            .send(result.map_err(|error| error.to_string()))
            .unwrap();
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(done_rx.try_recv().is_err(), "acknowledged with no standby");
    let started = Instant::now();
    stop(child);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the stop took {:?}",
        started.elapsed()
    );
    let result = done_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(result.is_err(), "the waiting commit was never acknowledged");
    committer.join().unwrap();

    // Restarted alone, the node recovers the logged commit (durable here, though never
    // acknowledged: an old primary's tail, which a standby would not have).
    let child = serve(&dir, port, &[]);
    let mut client = connect(port);
    let ids: Vec<i32> = client
        .query("SELECT id FROM t", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(ids.is_empty() || ids == [1], "{ids:?}");
    drop(client);
    stop(child);
}

#[test]
fn a_primary_cut_off_from_its_standby_acknowledges_nothing_until_the_link_heals() {
    let parent = tempfile::tempdir().unwrap();
    let (a, b) = (parent.path().join("a"), parent.path().join("b"));
    let (port_a, port_b, replication) = (free_port(), free_port(), free_port());
    seed(&a, &b, port_a, "CREATE TABLE acked (id int8 PRIMARY KEY)");

    // The standby reaches the primary through a proxy standing for the network.
    let listen = format!("127.0.0.1:{replication}");
    let primary = serve(
        &a,
        port_a,
        &["--ha-replication-listen".into(), listen.clone()],
    );
    let link = hayate::netproxy::Proxy::start(listen.parse().unwrap()).unwrap();
    let standby = serve(
        &b,
        port_b,
        &["--ha-follow".into(), link.address().to_string()],
    );
    let mut writer = connect(port_a);
    writer.execute("INSERT INTO acked VALUES (1)", &[]).unwrap();

    link.partition();
    let mut writer = acknowledged_once_healed(
        writer,
        &link,
        Duration::from_millis(1500),
        "acknowledged while the standby was cut off",
    );
    let mut reader = connect(port_b);
    eventually("the standby to hold both rows", || {
        count(&mut reader, "acked") == 2
    });
    writer.execute("INSERT INTO acked VALUES (3)", &[]).unwrap();
    drop((writer, reader));
    stop(standby);
    stop(primary);
}

#[test]
fn a_link_gone_silent_is_dropped_by_both_sides_and_replication_resumes_when_it_heals() {
    let parent = tempfile::tempdir().unwrap();
    let (a, b) = (parent.path().join("a"), parent.path().join("b"));
    let (port_a, port_b, replication) = (free_port(), free_port(), free_port());
    seed(&a, &b, port_a, "CREATE TABLE acked (id int8 PRIMARY KEY)");
    let listen = format!("127.0.0.1:{replication}");
    let timeout = ["--ha-peer-timeout".to_string(), "1".to_string()];
    let primary = serve(
        &a,
        port_a,
        &[
            &["--ha-replication-listen".into(), listen.clone()],
            &timeout[..],
        ]
        .concat(),
    );
    let link = hayate::netproxy::Proxy::start(listen.parse().unwrap()).unwrap();
    let standby = serve(
        &b,
        port_b,
        &[
            &["--ha-follow".into(), link.address().to_string()],
            &timeout[..],
        ]
        .concat(),
    );
    let mut writer = connect(port_a);
    writer.execute("INSERT INTO acked VALUES (1)", &[]).unwrap();
    let standbys = |client: &mut postgres::Client| -> i64 {
        client
            .query_one("SELECT count(*) FROM pg_stat_replication", &[])
            .unwrap()
            .get(0)
    };
    assert_eq!(standbys(&mut writer), 1);
    let connections = link.connections_accepted();

    // The link goes silent: no close reaches either side. The primary drops the standby
    // that stopped acknowledging, and the standby leaves the silent primary and tries again
    // (its new connections hang in the black hole).
    link.black_hole();
    let mut observer = connect(port_a);
    eventually("the primary to drop its silent standby", || {
        standbys(&mut observer) == 0
    });
    eventually("the standby to leave its silent primary", || {
        link.connections_accepted() > connections
    });
    let mut writer = acknowledged_once_healed(
        writer,
        &link,
        Duration::from_millis(1000),
        "acknowledged while the standby was silent",
    );
    assert_eq!(standbys(&mut writer), 1);
    let mut reader = connect(port_b);
    eventually("the standby to hold both rows", || {
        count(&mut reader, "acked") == 2
    });
    drop((writer, reader, observer));
    stop(standby);
    stop(primary);
}

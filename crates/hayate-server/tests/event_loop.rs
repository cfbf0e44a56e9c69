//! Connections share event loops: a statement that must wait (a page read, a row lock, a
//! DDL) suspends on its fiber, so the other connections of the loop, including the one it
//! waits for, go on; a statement is applied once; many commits awaiting the log at once on
//! one loop all complete. (That an acknowledged commit survives a kill -9 is tests/restart.rs.)

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use hayate_engine::{BufferSize, DatabaseConfig, SimConfig, SimIo};

#[test]
fn a_slow_read_suspends_its_statement_while_resident_queries_go_on() {
    // A simulated disk (device emulation) whose reads turn slow: 50 ms each.
    let disk = Arc::new(SimIo::new(SimConfig::default()));
    let db_config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(64 * 4096),
        ..DatabaseConfig::default()
    };
    let server = TestServer::start_on_io(disk.clone(), db_config, one_loop());
    let mut fast = server.connect();
    fast.batch_execute(
        "CREATE TABLE t (id int4 PRIMARY KEY, pad text);
         INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 6000) g",
    )
    .unwrap();
    let hot = "SELECT length(pad) FROM t WHERE id = 1";
    let length: i32 = fast.query_one(hot, &[]).unwrap().get(0);
    assert_eq!(length, 200);
    let mut slow = server.connect();
    disk.set_read_latency(Some(Duration::from_millis(50)));
    let slow_done = Arc::new(AtomicBool::new(false));
    let reader = {
        let slow_done = slow_done.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            // Far from the rows just touched: its leaf is not resident in 64 pages.
            let length: i32 = slow
                .query_one("SELECT length(pad) FROM t WHERE id = 3000", &[])
                .unwrap()
                .get(0);
            slow_done.store(true, Ordering::SeqCst);
            assert_eq!(length, 200);
            started.elapsed()
        })
    };
    // Give the slow statement time to reach its read, then count what completes meanwhile.
    std::thread::sleep(Duration::from_millis(5));
    let mut completed_meanwhile = 0;
    while !slow_done.load(Ordering::SeqCst) {
        let length: i32 = fast.query_one(hot, &[]).unwrap().get(0);
        assert_eq!(length, 200);
        if !slow_done.load(Ordering::SeqCst) {
            completed_meanwhile += 1;
        }
    }
    let slow_took = reader.join().unwrap();
    disk.set_read_latency(None);
    assert!(
        slow_took >= Duration::from_millis(50),
        "the slow statement took {slow_took:?}: it did not read the slow disk"
    );
    assert!(
        completed_meanwhile >= 10,
        "only {completed_meanwhile} queries on resident pages completed on the loop while \
         one statement waited {slow_took:?} for its read"
    );
    server.stop();
}

/// One event loop: every connection of a test shares its thread.
fn one_loop() -> hayate_server::ServerConfig {
    hayate_server::ServerConfig {
        event_loops: 1,
        ..hayate_server::ServerConfig::default()
    }
}

#[test]
fn a_commit_waiting_for_an_earlier_one_applying_on_the_same_loop_does_not_stop_it() {
    // A large update's commit applies its write set while its pages come from a slow disk
    // (1 ms per read), suspending its fiber between reads; meanwhile small commits of another
    // connection on the same loop take later timestamps, become durable and must wait for the
    // large one to be published. That wait must suspend: blocking the loop would keep the
    // large commit from ever finishing.
    let disk = Arc::new(SimIo::new(SimConfig::default()));
    let db_config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(64 * 4096),
        ..DatabaseConfig::default()
    };
    let server = TestServer::start_on_io(disk.clone(), db_config, one_loop());
    let mut large = server.connect();
    large
        .batch_execute(
            "CREATE TABLE t (id int4 PRIMARY KEY, pad text);
             INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g",
        )
        .unwrap();
    let mut small = server.connect();
    disk.set_read_latency(Some(Duration::from_millis(1)));
    let (done, finished) = std::sync::mpsc::channel();
    let large_done = Arc::new(AtomicBool::new(false));
    {
        let large_done = large_done.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let updated = large
                .execute("UPDATE t SET pad = repeat('z', 200) WHERE id > 1", &[])
                .unwrap();
            large_done.store(true, Ordering::SeqCst);
            done.send(("large", updated)).unwrap();
        });
    }
    std::thread::spawn(move || {
        let mut commits = 0;
        while !large_done.load(Ordering::SeqCst) {
            small
                .execute("UPDATE t SET pad = repeat('y', 200) WHERE id = 1", &[])
                .unwrap();
            commits += 1;
        }
        done.send(("small", commits)).unwrap();
    });
    let mut results = std::collections::BTreeMap::new();
    for _ in 0..2 {
        match finished.recv_timeout(Duration::from_secs(120)) {
            Ok((who, count)) => {
                results.insert(who, count);
            }
            Err(_) => {
                // The loop is stuck: stopping the server would hang as well.
                std::mem::forget(server);
                panic!("the commits on one loop did not finish: {results:?}");
            }
        }
    }
    disk.set_read_latency(None);
    assert_eq!(results["large"], 2999);
    assert!(results["small"] > 0);
    server.stop();
}

#[test]
fn a_lock_wait_does_not_stop_the_holder_on_the_same_loop() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), one_loop());
    let mut holder = server.connect();
    let mut waiter = server.connect();
    holder
        .batch_execute("CREATE TABLE t (id int4 PRIMARY KEY, n int4); INSERT INTO t VALUES (1, 0)")
        .unwrap();
    holder.batch_execute("BEGIN").unwrap();
    holder
        .execute("UPDATE t SET n = n + 1 WHERE id = 1", &[])
        .unwrap();
    let blocked = std::thread::spawn(move || {
        let updated = waiter
            .execute("UPDATE t SET n = n + 10 WHERE id = 1", &[])
            .unwrap();
        (waiter, updated)
    });
    std::thread::sleep(Duration::from_millis(300));
    // The waiter's statement waits for the holder's lock; the holder, on the same loop,
    // is still served (a loop blocked by the waiter would time this out).
    let n: i32 = holder
        .query_one("SELECT n FROM t WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "the holder reads its own write");
    holder.batch_execute("COMMIT").unwrap();
    let (mut waiter, updated) = blocked.join().unwrap();
    assert_eq!(updated, 1);
    let n: i32 = waiter
        .query_one("SELECT n FROM t WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 11, "both updates, each once");
    server.stop();
}

#[test]
fn a_statement_that_waited_for_a_lock_is_applied_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), one_loop());
    let mut a = server.connect();
    let mut b = server.connect();
    a.batch_execute(
        "CREATE TABLE t (id int4 PRIMARY KEY, n int4); \
         INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)",
    )
    .unwrap();
    b.batch_execute("BEGIN").unwrap();
    b.execute("UPDATE t SET n = n + 100 WHERE id = 3", &[])
        .unwrap();
    a.batch_execute("BEGIN").unwrap();
    a.execute("UPDATE t SET n = n + 1000 WHERE id = 1", &[])
        .unwrap();
    // Rows 1 and 2 are written in key order before row 3's lock suspends the statement; it
    // goes on where it stopped once b commits (no row is written twice).
    let blocked = std::thread::spawn(move || {
        let updated = a.execute("UPDATE t SET n = n + 1", &[]).unwrap();
        (a, updated)
    });
    std::thread::sleep(Duration::from_millis(300));
    b.batch_execute("COMMIT").unwrap();
    let (mut a, updated) = blocked.join().unwrap();
    assert_eq!(updated, 3);
    a.batch_execute("COMMIT").unwrap();
    let rows = a.query("SELECT n FROM t ORDER BY id", &[]).unwrap();
    let n: Vec<i32> = rows.iter().map(|row| row.get(0)).collect();
    assert_eq!(n, vec![1001, 1, 101]);
    server.stop();
}

#[test]
fn ddl_and_multi_statement_strings_run_on_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), one_loop());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE t (id int4 PRIMARY KEY, n int4); \
             INSERT INTO t VALUES (1, 1); INSERT INTO t VALUES (2, 2); \
             CREATE INDEX t_n ON t (n)",
        )
        .unwrap();
    client
        .batch_execute("BEGIN; ALTER TABLE t ADD COLUMN m int4 DEFAULT 7; COMMIT")
        .unwrap();
    let rows = client
        .query("SELECT id, n, m FROM t WHERE n = 2", &[])
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i32>(0), 2);
    assert_eq!(rows[0].get::<_, i32>(2), 7);
    server.stop();
}

#[test]
fn concurrent_commits_on_one_loop_all_complete() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_with(dir.path(), one_loop());
    let mut setup = server.connect();
    setup
        .batch_execute("CREATE TABLE c (id int4 PRIMARY KEY, n int8)")
        .unwrap();
    let threads: Vec<_> = (0..8)
        .map(|worker| {
            let mut client = server.connect();
            std::thread::spawn(move || {
                for i in 0..50 {
                    client
                        .execute(
                            "INSERT INTO c VALUES ($1, $2)",
                            &[&(worker * 1000 + i), &i64::from(i)],
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    threads
        .into_iter()
        .for_each(|thread| thread.join().unwrap());
    let row = setup
        .query_one("SELECT count(*), sum(n)::int8 FROM c", &[])
        .unwrap();
    let (count, sum): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!((count, sum), (400, 8 * (0..50).sum::<i64>()));
    server.stop();
}

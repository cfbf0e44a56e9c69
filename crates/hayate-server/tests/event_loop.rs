//! Connections share event loops: a statement that must wait (a row lock, a DDL) moves off
//! the loop, so the other connections of the loop, including the one it waits for, go on;
//! a statement undone to move is not applied twice; many commits awaiting the log at once on
//! one loop all complete. (That an acknowledged commit survives a kill -9 is tests/restart.rs.)

mod common;

use std::time::Duration;

use common::TestServer;

/// One event loop: every connection of a test shares its thread.
fn one_loop() -> hayate_server::ServerConfig {
    hayate_server::ServerConfig {
        event_loops: 1,
        ..hayate_server::ServerConfig::default()
    }
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
fn a_statement_moved_off_the_loop_is_applied_once() {
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
    // Rows 1 and 2 are written in key order before row 3's lock stops the statement: the
    // statement is undone (the block's earlier write stays) and runs again off the loop.
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
fn ddl_and_multi_statement_strings_run_off_the_loop() {
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

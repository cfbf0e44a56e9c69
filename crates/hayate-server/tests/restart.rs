//! Tables and committed rows survive clean restarts of the server; a dropped table stays
//! dropped. (A `kill -9` of `hayate serve` is tested in crates/hayate/tests/serve.rs.)

use crate::common;

use common::TestServer;

#[test]
fn tables_and_rows_survive_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE kv (k text PRIMARY KEY, v int4 NOT NULL DEFAULT 7); \
             CREATE TABLE log (msg text); \
             INSERT INTO kv VALUES ('a', 1), ('b', 2); INSERT INTO kv (k) VALUES ('c'); \
             INSERT INTO log VALUES ('one'), ('two')",
        )
        .unwrap();
    drop(client);
    server.stop();

    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    let rows = client.query("SELECT k, v FROM kv ORDER BY k", &[]).unwrap();
    let rows: Vec<(String, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        rows,
        vec![("a".into(), 1), ("b".into(), 2), ("c".into(), 7)]
    );
    // Hidden row ids continue after the largest one in use.
    client
        .execute("INSERT INTO log VALUES ('three')", &[])
        .unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM log", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 3);
    client.batch_execute("DROP TABLE log").unwrap();
    drop(client);
    server.stop();

    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    let count: i64 = client
        .query_one("SELECT count(*) FROM kv", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 3);
    let missing = client.query("SELECT * FROM log", &[]).expect_err("dropped");
    assert_eq!(common::sqlstate(&missing), "42P01");
    server.stop();
}

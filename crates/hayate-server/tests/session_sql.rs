//! The session's transaction features over the wire, with rust-postgres (extended protocol,
//! named statements): DEALLOCATE ALL drops the statements the driver prepared through Parse
//! (as psycopg's prepared-statement cache expects), savepoints, DDL inside a block.

mod common;

use common::{sqlstate, TestServer};

#[test]
fn deallocate_drops_protocol_level_statements() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE t (id int4 PRIMARY KEY); INSERT INTO t VALUES (1)")
        .unwrap();
    let select = client.prepare("SELECT id FROM t WHERE id = $1").unwrap();
    assert_eq!(client.query(&select, &[&1i32]).unwrap().len(), 1);
    client.batch_execute("DEALLOCATE ALL").unwrap();
    let error = client.query(&select, &[&1i32]).unwrap_err();
    assert_eq!(sqlstate(&error), "26000");

    let error = client.batch_execute("DEALLOCATE nosuch").unwrap_err();
    assert_eq!(sqlstate(&error), "26000");

    // SQL-level PREPARE/EXECUTE over the simple protocol.
    client
        .batch_execute("PREPARE p (int4) AS INSERT INTO t VALUES ($1); EXECUTE p(2); EXECUTE p(3)")
        .unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 3);
    server.stop();
}

#[test]
fn savepoints_and_ddl_in_a_block() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    let mut txn = client.transaction().unwrap();
    txn.batch_execute("CREATE TABLE t (id int4 PRIMARY KEY)")
        .unwrap();
    txn.execute("INSERT INTO t VALUES (1)", &[]).unwrap();
    {
        // rust-postgres's nested transaction is a savepoint.
        let mut nested = txn.transaction().unwrap();
        nested.execute("INSERT INTO t VALUES (2)", &[]).unwrap();
        let error = nested.execute("INSERT INTO t VALUES (1)", &[]).unwrap_err();
        assert_eq!(sqlstate(&error), "23505");
        nested.rollback().unwrap();
    }
    txn.execute("INSERT INTO t VALUES (3)", &[]).unwrap();
    txn.commit().unwrap();
    let ids: Vec<i32> = client
        .query("SELECT id FROM t ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(ids, vec![1, 3]);

    let mut txn = client.transaction().unwrap();
    txn.batch_execute("DROP TABLE t").unwrap();
    txn.rollback().unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 2);
    server.stop();
}

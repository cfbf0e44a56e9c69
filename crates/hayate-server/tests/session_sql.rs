//! The session's transaction features over the wire, with rust-postgres (extended protocol,
//! named statements): DEALLOCATE ALL drops the statements the driver prepared through Parse
//! (as psycopg's prepared-statement cache expects), savepoints, DDL inside a block; and the
//! ParameterStatus messages of changed settings, read off the wire by hand.

use crate::common;

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

/// A change of TimeZone or application_name is reported to the client with a ParameterStatus
/// before the ReadyForQuery that follows it, as PostgreSQL does (drivers keep the session's
/// zone from it): after SET TIME ZONE, SET LOCAL in a block (and again when the block ends),
/// RESET TIME ZONE and a SET through the extended protocol; nothing when the value ends where
/// it started.
#[test]
fn changed_settings_are_reported() {
    use std::io::Write;

    use common::raw::{message, read_messages, startup_message};

    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&startup_message()).unwrap();
    let mut statuses = Vec::new();
    read_messages(&mut stream, 1, &mut statuses);
    assert!(statuses.contains(&("TimeZone".into(), "UTC".into())));
    let mut run = |sql: &str| -> (Vec<(String, String)>, usize) {
        let mut body = sql.as_bytes().to_vec();
        body.push(0);
        stream.write_all(&message(b'Q', &body)).unwrap();
        let mut statuses = Vec::new();
        let (errors, rows) = read_messages(&mut stream, 1, &mut statuses);
        assert!(errors.is_empty(), "{sql}: {errors:?}");
        (statuses, rows)
    };
    let reported = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    };
    assert_eq!(
        run("SET TIME ZONE 'Asia/Tokyo'").0,
        reported(&[("TimeZone", "Asia/Tokyo")])
    );
    assert_eq!(run("SELECT 1").0, reported(&[]));
    assert_eq!(
        run("BEGIN; SET LOCAL application_name = 'brief'; COMMIT").0,
        reported(&[])
    );
    run("BEGIN");
    assert_eq!(
        run("SET LOCAL TIME ZONE 'Europe/Paris'").0,
        reported(&[("TimeZone", "Europe/Paris")])
    );
    assert_eq!(run("COMMIT").0, reported(&[("TimeZone", "Asia/Tokyo")]));
    assert_eq!(
        run("reset   time ZONE; SELECT 1"),
        (reported(&[("TimeZone", "UTC")]), 1)
    );

    let mut batch = message(b'P', b"\0SET application_name = 'app2'\0\0\0");
    batch.extend(message(b'B', b"\0\0\0\0\0\0\0\0"));
    batch.extend(message(b'E', b"\0\0\0\0\0"));
    batch.extend(message(b'S', b""));
    stream.write_all(&batch).unwrap();
    let mut statuses = Vec::new();
    let (errors, _) = read_messages(&mut stream, 1, &mut statuses);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(statuses, reported(&[("application_name", "app2")]));
    drop(stream);
    server.stop();
}

/// The rows of each statement of a query string are shown in the time zone current when
/// that statement ended, as PostgreSQL sends them before running the next statement.
#[test]
fn rows_of_a_query_string_in_their_statements_zone() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    let messages = client
        .simple_query(
            "SELECT TIMESTAMPTZ '2026-06-01 12:00+00'; SET TIME ZONE 'Asia/Tokyo'; \
             SELECT TIMESTAMPTZ '2026-06-01 12:00+00'; RESET TIME ZONE; \
             SELECT TIMESTAMPTZ '2026-06-01 12:00+00'",
        )
        .unwrap();
    let shown: Vec<String> = messages
        .iter()
        .filter_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
        .collect();
    assert_eq!(
        shown,
        [
            "2026-06-01 12:00:00+00",
            "2026-06-01 21:00:00+09",
            "2026-06-01 12:00:00+00"
        ]
    );
    drop(client);
    server.stop();
}

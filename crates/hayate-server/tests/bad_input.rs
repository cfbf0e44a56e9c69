//! Bad input never crashes the server or loses data: an SSL request (answered 'N'), garbage
//! on the socket, a malformed message after startup, oversized values and keys, and a client that disconnects in the
//! middle of a transaction (its transaction aborts and its row locks are released).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{sqlstate, TestServer};

/// Sends `bytes` on a fresh connection and reads until the server closes it (or 5 s pass).
fn send_raw(server: &TestServer, bytes: &[u8]) {
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.write_all(bytes);
    let mut buffer = [0u8; 4096];
    while let Ok(read) = stream.read(&mut buffer) {
        if read == 0 {
            break;
        }
    }
}

fn startup_message() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&196608u32.to_be_bytes()); // protocol 3.0
    for part in ["user", "tester", "database", "test", ""] {
        body.extend_from_slice(part.as_bytes());
        body.push(0);
    }
    let mut message = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    message
}

#[test]
fn server_survives_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE t (id int4 PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a')",
        )
        .unwrap();

    // Garbage before startup, a huge announced length, and garbage after a valid startup.
    let garbage: Vec<u8> = (0..2000u32).map(|i| (i * 7919 % 251) as u8).collect();
    send_raw(&server, &garbage);
    send_raw(&server, &[0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 0]);
    let mut after_startup = startup_message();
    after_startup.extend_from_slice(b"Q\x00\x00\x00\x02");
    after_startup.extend_from_slice(&garbage);
    send_raw(&server, &after_startup);

    // Oversized values and keys are errors, not crashes.
    let huge = "x".repeat(17 << 20);
    let error = client
        .execute("INSERT INTO t VALUES (2, $1)", &[&huge])
        .expect_err("value over the limit");
    assert_eq!(sqlstate(&error), "54000");
    client
        .batch_execute("CREATE TABLE k (name text PRIMARY KEY)")
        .unwrap();
    let long_key = "k".repeat(100_000);
    let error = client
        .execute("INSERT INTO k VALUES ($1)", &[&long_key])
        .expect_err("key over the limit");
    assert_eq!(sqlstate(&error), "54000");

    // A client that vanishes inside a transaction holding a row lock.
    let mut vanishing = server.connect();
    vanishing.batch_execute("BEGIN").unwrap();
    vanishing
        .execute("UPDATE t SET v = 'uncommitted' WHERE id = 1", &[])
        .unwrap();
    drop(vanishing); // closes the socket without COMMIT
    std::thread::sleep(Duration::from_millis(200));
    client
        .execute("UPDATE t SET v = 'b' WHERE id = 1", &[])
        .expect("the lock was released with the aborted transaction");
    let v: String = client
        .query_one("SELECT v FROM t WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(v, "b");

    // Several statements in one simple query are one transaction: all or nothing.
    let error = client
        .batch_execute("INSERT INTO t VALUES (5, 'e'); SELECT 1/0")
        .expect_err("division by zero");
    assert_eq!(sqlstate(&error), "22012");
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 1, "the batch's insert was rolled back with it");
    server.stop();
}

#[test]
fn ssl_request_is_refused_with_n() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut request = 8u32.to_be_bytes().to_vec();
    request.extend_from_slice(&80877103u32.to_be_bytes());
    stream.write_all(&request).unwrap();
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"N");
    server.stop();
}

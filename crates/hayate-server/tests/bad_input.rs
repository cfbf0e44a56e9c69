//! Bad input never crashes the server or loses data: an SSL request (answered 'N'), garbage
//! on the socket, a malformed message after startup, oversized values and keys, and a client that disconnects in the
//! middle of a transaction (its transaction aborts and its row locks are released).

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::raw::{message, read_until_ready, startup_message};
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

    // Chains of operators recurse as deep as they are long: a long one binds, a very long
    // one is 54001 (PostgreSQL's stack depth limit), and the server goes on (it crashed on
    // a 1,000-term sum before).
    let chain = |terms: usize, separator: &str| vec!["1"; terms].join(separator);
    let sum: i64 = client
        .query_one(&format!("SELECT ({})::int8", chain(2_000, "+")), &[])
        .unwrap()
        .get(0);
    assert_eq!(sum, 2_000);
    for separator in ["+", " = 1 OR 1"] {
        let error = client
            .batch_execute(&format!("SELECT {}", chain(200_000, separator)))
            .expect_err("too deep");
        assert_eq!(sqlstate(&error), "54001", "{separator}");
    }
    let one: i32 = client.query_one("SELECT 1", &[]).unwrap().get(0);
    assert_eq!(one, 1);
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

/// A Bind of statement "s" to the unnamed portal with these format codes and one text
/// parameter "1".
fn bind(parameter_formats: &[i16], result_formats: &[i16]) -> Vec<u8> {
    let mut body = b"\0s\0".to_vec(); // portal "", statement "s"
    let codes = |body: &mut Vec<u8>, codes: &[i16]| {
        body.extend_from_slice(&(codes.len() as i16).to_be_bytes());
        for code in codes {
            body.extend_from_slice(&code.to_be_bytes());
        }
    };
    codes(&mut body, parameter_formats);
    body.extend_from_slice(&1i16.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.push(b'1');
    codes(&mut body, result_formats);
    message(b'B', &body)
}

/// A Bind whose format codes do not match its parameters or the result's columns is a
/// protocol violation (08P01), an unknown format code 22023, as in PostgreSQL; the connection
/// goes on (and a Bind that is right then works).
#[test]
fn bind_with_wrong_format_codes_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE f (id int4 PRIMARY KEY, v text); INSERT INTO f VALUES (1, 'a')",
        )
        .unwrap();

    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&startup_message()).unwrap();
    read_until_ready(&mut stream, 1);
    let sync = message(b'S', b"");
    let execute = message(b'E', b"\0\0\0\0\0");
    let mut batch = message(b'P', b"s\0SELECT id, v FROM f WHERE id = $1\0\0\0");
    batch.extend(&sync);
    for (parameter_formats, result_formats) in [
        (&[0, 0, 0][..], &[][..]),  // three parameter formats, one parameter
        (&[0][..], &[1, 1, 1][..]), // three result formats, two columns
        (&[7][..], &[][..]),        // no such format
        (&[0][..], &[0, 1][..]),    // right: one format, one per column
    ] {
        batch.extend(bind(parameter_formats, result_formats));
        batch.extend(&execute);
        batch.extend(&sync);
    }
    stream.write_all(&batch).unwrap();
    let (errors, rows) = read_until_ready(&mut stream, 5);
    assert_eq!(errors, ["08P01", "08P01", "22023"]);
    assert_eq!(rows, 1, "the last Bind is right and its row comes back");
    server.stop();
}

/// Malformed extended-protocol messages, as PostgreSQL answers them: a body that ends early
/// or has bytes left over, or a name that is not UTF-8, is an error that skips to Sync, and
/// the connection goes on; unknown statements and portals are 26000 and 34000; a message
/// length below 4 is FATAL 08P01 and closes the connection.
#[test]
fn malformed_extended_messages_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE m (id int4 PRIMARY KEY); INSERT INTO m VALUES (1)")
        .unwrap();

    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&startup_message()).unwrap();
    read_until_ready(&mut stream, 1);
    let sync = message(b'S', b"");
    let execute = message(b'E', b"\0\0\0\0\0");
    let mut batch = Vec::new();
    for bad in [
        message(b'B', b"\0s"),               // ends inside the statement name
        message(b'S', b"x"),                 // Sync with a byte left over
        message(b'D', b"S\xff\xfe\0"),       // a name that is not UTF-8
        message(b'D', b"Snowhere\0"),        // no such statement
        message(b'E', b"nowhere\0\0\0\0\0"), // no such portal
        message(b'P', b"s\0SELECT id FROM m WHERE id = $1\0\0\0"), // a right one, then:
    ] {
        batch.extend(bad);
        batch.extend(&sync);
    }
    // Skipped up to its Sync: the Bind and Execute behind the failing Describe.
    batch.extend(message(b'D', b"Xs\0"));
    batch.extend(bind(&[], &[]));
    batch.extend(&execute);
    batch.extend(&sync);
    batch.extend(bind(&[], &[]));
    batch.extend(&execute);
    batch.extend(&sync);
    stream.write_all(&batch).unwrap();
    let (errors, rows) = read_until_ready(&mut stream, 8);
    assert_eq!(
        errors,
        ["08P01", "08P01", "22021", "26000", "34000", "08P01"]
    );
    assert_eq!(rows, 1, "only the last Bind and Execute ran");

    stream.write_all(b"S\0\0\0\x02").unwrap();
    let errors = read_until_closed(&mut stream);
    assert_eq!(errors, ["08P01"]);
    let count: i64 = client
        .query_one("SELECT count(*) FROM m", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 1, "the server goes on serving");
    server.stop();
}

/// The SQLSTATE of every ErrorResponse until the server closes the connection.
fn read_until_closed(stream: &mut TcpStream) -> Vec<String> {
    let mut errors = Vec::new();
    loop {
        let mut header = [0u8; 5];
        if stream.read_exact(&mut header).is_err() {
            return errors;
        }
        let length = u32::from_be_bytes(header[1..5].try_into().unwrap()) as usize;
        let mut body = vec![0u8; length - 4];
        stream.read_exact(&mut body).unwrap();
        if header[0] == b'E' {
            let code = (body.split(|byte| *byte == 0))
                .find(|field| field.first() == Some(&b'C'))
                .map(|field| String::from_utf8_lossy(&field[1..]).into_owned());
            errors.push(code.unwrap_or_default());
        }
    }
}

//! Cancel requests (BackendKeyData, CancelRequest on a new connection, 57014) and the
//! authentication methods (trust, cleartext password, MD5, SCRAM-SHA-256): each succeeds
//! with the right password and fails with 28P01 with a wrong one, and 28000 for an
//! unknown user. Also max_connections and work_mem from the server's configuration.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{sqlstate, TestServer};
use hayate_server::{AuthMethod, ServerConfig};

/// Keeps cancelling `client`'s statements until `done` is set.
fn cancel_until(
    token: postgres::CancelToken,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !done.load(Ordering::Relaxed) {
            let _ = token.cancel_query(postgres::NoTls);
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

#[test]
fn cancel_stops_a_scan_and_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE big (id int8 PRIMARY KEY, v text)")
        .unwrap();
    let data: Vec<u8> = (0..200_000)
        .flat_map(|i| format!("{i}\tsome text for row {i}\n").into_bytes())
        .collect();
    let mut writer = client.copy_in("COPY big FROM STDIN").unwrap();
    writer.write_all(&data).unwrap();
    assert_eq!(writer.finish().unwrap(), 200_000);

    // A scan cancelled from another thread (cancel requests repeat until the statement
    // ends, so it does not matter when the scan starts).
    let done = Arc::new(AtomicBool::new(false));
    let canceller = cancel_until(client.cancel_token(), done.clone());
    let mut result = Ok(0);
    for _ in 0..50 {
        result = client
            .query_one("SELECT count(*) FROM big WHERE v LIKE '%nothing%'", &[])
            .map(|row| row.get::<_, i64>(0));
        if result.is_err() {
            break;
        }
    }
    done.store(true, Ordering::Relaxed);
    canceller.join().unwrap();
    let error = result.expect_err("the scan was cancelled");
    assert_eq!(sqlstate(&error), "57014");
    assert_eq!(
        error.as_db_error().unwrap().message(),
        "canceling statement due to user request"
    );

    // The connection serves the next statement (a stale cancel is cleared at its start).
    let count: i64 = client
        .query_one("SELECT count(*) FROM big", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 200_000);

    // A COPY cancelled between two CopyData messages is rolled back.
    client
        .batch_execute("CREATE TABLE t (id int4 PRIMARY KEY)")
        .unwrap();
    let token = client.cancel_token();
    let mut writer = client.copy_in("COPY t FROM STDIN").unwrap();
    writer.write_all(b"1\n2\n").unwrap();
    writer.flush().unwrap();
    token.cancel_query(postgres::NoTls).unwrap();
    // The cancel request races the next CopyData: keep sending until the server notices.
    let mut sent = 3;
    let error = loop {
        if writer
            .write_all(format!("{sent}\n").as_bytes())
            .and_then(|_| writer.flush())
            .is_err()
        {
            break writer.finish().unwrap_err();
        }
        sent += 1;
        if sent > 200_000 {
            break writer.finish().unwrap_err();
        }
        if sent % 1000 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    assert_eq!(sqlstate(&error), "57014", "{error:?}");
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 0, "the cancelled COPY is rolled back");

    // A cancel request with a wrong key changes nothing (and the server keeps serving).
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    let mut request = vec![0, 0, 0, 16];
    request.extend_from_slice(&80877102u32.to_be_bytes());
    request.extend_from_slice(&12345i32.to_be_bytes());
    request.extend_from_slice(&0i32.to_be_bytes());
    stream.write_all(&request).unwrap();
    drop(stream);
    assert_eq!(
        client.query_one("SELECT 1", &[]).unwrap().get::<_, i32>(0),
        1
    );
}

fn password_server(dir: &std::path::Path, auth: AuthMethod) -> TestServer {
    let config = ServerConfig {
        auth,
        users: HashMap::from([
            ("alice".to_string(), "s3cret pass".to_string()),
            ("bob".to_string(), "other".to_string()),
        ]),
        ..ServerConfig::default()
    };
    TestServer::start_with(dir, config)
}

fn try_connect(
    server: &TestServer,
    user: &str,
    password: &str,
) -> Result<postgres::Client, postgres::Error> {
    postgres::Config::new()
        .host(&server.addr.ip().to_string())
        .port(server.addr.port())
        .user(user)
        .password(password)
        .dbname("test")
        .connect(postgres::NoTls)
}

#[test]
fn password_methods_accept_and_refuse() {
    for auth in [
        AuthMethod::Password,
        AuthMethod::Md5,
        AuthMethod::ScramSha256,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let server = password_server(dir.path(), auth);
        let mut client = try_connect(&server, "alice", "s3cret pass")
            .unwrap_or_else(|error| panic!("{auth:?}: {error:?}"));
        let user: String = client.query_one("SELECT current_user", &[]).unwrap().get(0);
        assert_eq!(user, "alice", "{auth:?}");
        let error = try_connect(&server, "alice", "wrong").err().unwrap();
        assert_eq!(sqlstate(&error), "28P01", "{auth:?}: {error:?}");
        let error = try_connect(&server, "bob", "s3cret pass").err().unwrap();
        assert_eq!(
            sqlstate(&error),
            "28P01",
            "{auth:?}: another user's password"
        );
        let error = try_connect(&server, "mallory", "s3cret pass")
            .err()
            .unwrap();
        assert_eq!(sqlstate(&error), "28000", "{auth:?}: {error:?}");
        // The server keeps serving after the failures.
        let mut again = try_connect(&server, "bob", "other").unwrap();
        assert_eq!(
            again.query_one("SELECT 1", &[]).unwrap().get::<_, i32>(0),
            1
        );
        drop(client);
    }
}

#[test]
fn trust_limits_and_settings() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        max_connections: 2,
        work_mem: "64MB".into(),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(dir.path(), config);
    // Trust: any user, any password.
    let mut first = try_connect(&server, "anyone", "whatever").unwrap();
    let work_mem: String = first.query_one("SHOW work_mem", &[]).unwrap().get(0);
    assert_eq!(work_mem, "64MB");
    let second = server.connect();
    let error = try_connect(&server, "third", "").err().unwrap();
    assert_eq!(sqlstate(&error), "53300");
    drop(second);
    // A closed connection frees its slot (its task ends shortly after the socket closes).
    let mut connected = None;
    for _ in 0..100 {
        match try_connect(&server, "fourth", "") {
            Ok(client) => {
                connected = Some(client);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    assert!(connected.is_some(), "the slot is free again");
    assert_eq!(
        first.query_one("SELECT 1", &[]).unwrap().get::<_, i32>(0),
        1
    );
}

//! A fuzz test of the message decoder over TCP: thousands of random byte streams and
//! mutations of valid protocol conversations (flipped bits, replaced and inserted bytes,
//! truncations, corrupted lengths) go to a running server. Afterwards it still answers a
//! normal client and the data committed before is intact. Seeded, so a failure repeats.
//! Also: a client that disconnects in the middle of a COPY releases its row locks.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use common::TestServer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CASES: usize = 1500;

fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn cstr(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(text.as_bytes());
    out.push(0);
}

fn startup() -> Vec<u8> {
    let mut body = 196608u32.to_be_bytes().to_vec();
    for part in [
        "user",
        "fuzzer",
        "database",
        "test",
        "application_name",
        "fuzz",
        "",
    ] {
        cstr(&mut body, part);
    }
    let mut out = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn query(sql: &str) -> Vec<u8> {
    let mut body = Vec::new();
    cstr(&mut body, sql);
    message(b'Q', &body)
}

/// A valid conversation after startup: simple queries, an extended query cycle with a
/// parameter, and a COPY.
fn conversation() -> Vec<u8> {
    let mut out = startup();
    out.extend(query("SELECT id, v FROM t WHERE id = 1"));
    out.extend(query(
        "BEGIN; INSERT INTO scratch VALUES (7, 'x'); ROLLBACK",
    ));
    let mut parse = Vec::new();
    cstr(&mut parse, "s1");
    cstr(&mut parse, "SELECT v FROM t WHERE id = $1");
    parse.extend_from_slice(&1i16.to_be_bytes());
    parse.extend_from_slice(&20u32.to_be_bytes()); // int8
    out.extend(message(b'P', &parse));
    let mut bind = Vec::new();
    cstr(&mut bind, "");
    cstr(&mut bind, "s1");
    bind.extend_from_slice(&1i16.to_be_bytes());
    bind.extend_from_slice(&0i16.to_be_bytes());
    bind.extend_from_slice(&1i16.to_be_bytes());
    bind.extend_from_slice(&1i32.to_be_bytes());
    bind.push(b'2');
    bind.extend_from_slice(&0i16.to_be_bytes());
    out.extend(message(b'B', &bind));
    let mut describe = vec![b'P'];
    cstr(&mut describe, "");
    out.extend(message(b'D', &describe));
    let mut execute = Vec::new();
    cstr(&mut execute, "");
    execute.extend_from_slice(&0i32.to_be_bytes());
    out.extend(message(b'E', &execute));
    out.extend(message(b'S', &[]));
    out.extend(query("COPY scratch FROM STDIN"));
    out.extend(message(b'd', b"100\tcopied\n101\t"));
    out.extend(message(b'd', b"more\n"));
    out.extend(message(b'c', &[]));
    out.extend(message(b'X', &[]));
    out
}

fn mutate(rng: &mut StdRng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..rng.gen_range(1..6) {
        if bytes.is_empty() {
            break;
        }
        let at = rng.gen_range(0..bytes.len());
        match rng.gen_range(0..6) {
            0 => bytes[at] ^= 1 << rng.gen_range(0..8),
            1 => bytes[at] = rng.gen(),
            2 => {
                let junk: Vec<u8> = (0..rng.gen_range(1..64)).map(|_| rng.gen()).collect();
                bytes.splice(at..at, junk);
            }
            3 => bytes.truncate(at),
            4 => {
                // A length field: huge, negative or zero.
                let value: u32 = [0, 3, 0x7fff_ffff, 0xffff_ffff, rng.gen()][rng.gen_range(0..5)];
                let end = (at + 4).min(bytes.len());
                bytes.splice(at..end, value.to_be_bytes());
            }
            _ => {
                let end = rng.gen_range(at..=bytes.len());
                bytes.drain(at..end);
            }
        }
    }
    bytes
}

/// Sends `bytes`, closes the sending side and reads until the server closes (or 5 s).
fn exchange(server: &TestServer, bytes: &[u8]) {
    let Ok(mut stream) = TcpStream::connect(server.addr) else {
        panic!("the server stopped accepting connections");
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(Shutdown::Write);
    let mut buffer = [0u8; 8192];
    while let Ok(read) = stream.read(&mut buffer) {
        if read == 0 {
            break;
        }
    }
}

#[test]
fn decoder_survives_random_and_mutated_streams() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE t (id int8 PRIMARY KEY, v text); \
             CREATE TABLE scratch (id int8 PRIMARY KEY, v text)",
        )
        .unwrap();
    for id in 1..=100i64 {
        client
            .execute("INSERT INTO t VALUES ($1, 'kept ' || $1)", &[&id])
            .unwrap();
    }

    let mut rng = StdRng::seed_from_u64(0x4861_7961_7465);
    let valid = conversation();
    exchange(&server, &valid); // the unmutated conversation works
    for case in 0..CASES {
        let bytes = match case % 4 {
            0 => (0..rng.gen_range(0..600)).map(|_| rng.gen()).collect(),
            1 => {
                let mut bytes = startup();
                bytes.extend((0..rng.gen_range(0..600)).map(|_| rng.gen::<u8>()));
                bytes
            }
            _ => mutate(&mut rng, valid.clone()),
        };
        exchange(&server, &bytes);
    }

    // A message far over any limit, and one that announces more than it sends.
    let mut oversized = startup();
    oversized.extend(query(&format!("SELECT '{}'", "y".repeat(8 << 20))));
    exchange(&server, &oversized);
    let mut short = startup();
    short.extend_from_slice(b"Q\x10\x00\x00\x00SELECT");
    exchange(&server, &short);

    // Still serving, and the committed data is intact.
    let mut after = server.connect();
    let rows = after.query("SELECT id, v FROM t ORDER BY id", &[]).unwrap();
    assert_eq!(rows.len(), 100);
    for (row, id) in rows.iter().zip(1i64..) {
        assert_eq!(row.get::<_, i64>(0), id);
        assert_eq!(row.get::<_, String>(1), format!("kept {id}"));
    }
    after
        .execute("UPDATE t SET v = 'updated' WHERE id = 1", &[])
        .unwrap();
    drop(client);
    drop(after);
    server.stop();
}

#[test]
fn disconnect_mid_copy_releases_locks() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE t (id int8 PRIMARY KEY, v text)")
        .unwrap();
    // A raw client: starts a COPY, sends a row, and vanishes.
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.write_all(&startup()).unwrap();
    stream.write_all(&query("COPY t FROM STDIN")).unwrap();
    stream
        .write_all(&message(b'd', b"1\tvanishing\n2\t"))
        .unwrap();
    stream.flush().unwrap();
    // Wait for CopyInResponse ('G') so the row was taken before the disconnect.
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !seen.contains(&b'G') {
        let read = stream.read(&mut buffer).unwrap();
        assert!(read > 0, "server closed the connection");
        seen.extend_from_slice(&buffer[..read]);
    }
    std::thread::sleep(Duration::from_millis(100));
    drop(stream);
    // The same key is free once the server has seen the disconnect.
    let mut inserted = false;
    for _ in 0..100 {
        match client.execute("INSERT INTO t VALUES (1, 'kept')", &[]) {
            Ok(_) => {
                inserted = true;
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    assert!(inserted, "the vanished COPY's row lock was released");
    let v: String = client
        .query_one("SELECT v FROM t WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(v, "kept");
}

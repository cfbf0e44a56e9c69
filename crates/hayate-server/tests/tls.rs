//! TLS of client connections, with psql (libpq over OpenSSL) as the client: the server's
//! certificate is checked (verify-full against the test CA, refused against another CA),
//! queries and a large result travel encrypted, `tls_required` refuses clients without TLS
//! (28000), a server without a certificate says it has no TLS, and bytes sent after an
//! SSLRequest before its answer are refused (08P01).
//!
//! When psql is not installed these tests say so loudly and check nothing else;
//! HAYATE_REQUIRE_CLIENTS=1 makes its absence a failure (common/clients.rs).

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{certificates, TestServer};
use hayate_server::ServerConfig;

fn psql_available() -> bool {
    common::clients::require(
        common::clients::runs("psql", &["--version"]),
        "psql",
        "postgresql-client",
    )
}

/// psql with `options` added to the server's connection string, running `commands`.
fn psql(server: &TestServer, options: &str, commands: &[&str]) -> Output {
    let mut command = Command::new("psql");
    command
        .arg(format!("{} {options}", server.connection_string()))
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1"]);
    for sql in commands {
        command.args(["-c", sql]);
    }
    // libpq would otherwise read ~/.postgresql's files.
    command
        .env("PGSSLCERT", "/nonexistent")
        .env("PGSSLKEY", "/nonexistent");
    command.output().expect("run psql")
}

fn tls_server(dir: &Path, required: bool) -> (TestServer, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (ca, certificate, key) = certificates(dir, "hayate");
    let config = ServerConfig {
        tls: Some(hayate_server::tls::load(&certificate, &key).expect("load the certificate")),
        tls_required: required,
        ..ServerConfig::default()
    };
    (TestServer::start_with(&dir.join("db"), config), ca)
}

#[test]
fn verify_full_checks_the_certificate_and_queries_and_a_large_result_travel_encrypted() {
    if !psql_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, ca) = tls_server(dir.path(), false);
    let options = format!("sslmode=verify-full sslrootcert={}", ca.display());
    let output = psql(
        &server,
        &options,
        &[
            "\\conninfo",
            "CREATE TABLE t (id int PRIMARY KEY, v text)",
            "INSERT INTO t SELECT i, repeat('x', i % 100) FROM generate_series(1, 20000) i",
            "SELECT count(*), sum(length(v)) FROM t",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("SSL connection (protocol: TLSv1.3"),
        "psql reports no TLS: {stdout}"
    );
    let expected_sum: usize = (1..=20000).map(|i| i % 100).sum();
    assert_eq!(
        stdout.lines().last(),
        Some(format!("20000|{expected_sum}").as_str())
    );
    // The whole table comes back in order: about 1 MB in TLS records.
    let output = psql(&server, &options, &["SELECT id, v FROM t ORDER BY id"]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let received: Vec<&str> = stdout.lines().collect();
    let expected: Vec<String> = (1..=20000)
        .map(|i| format!("{i}|{}", "x".repeat(i % 100)))
        .collect();
    assert_eq!(received, expected);
}

#[test]
fn a_certificate_from_another_ca_is_refused_by_the_client() {
    if !psql_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = tls_server(dir.path(), false);
    let (other_ca, _, _) = certificates(dir.path(), "other");
    let options = format!("sslmode=verify-full sslrootcert={}", other_ca.display());
    let output = psql(&server, &options, &["SELECT 1"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("certificate verify failed"),
        "unexpected error: {stderr}"
    );
    // The server goes on serving after the failed handshake.
    let output = psql(&server, "sslmode=require", &["SELECT 41 + 1"]);
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "42");
}

#[test]
fn without_tls_required_plain_clients_are_served_and_with_it_refused() {
    if !psql_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = tls_server(&dir.path().join("optional"), false);
    let output = psql(&server, "sslmode=disable", &["SELECT 'plain'"]);
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "plain");
    drop(server);

    let (server, ca) = tls_server(&dir.path().join("required"), true);
    let output = psql(&server, "sslmode=disable", &["SELECT 1"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("only with TLS"),
        "unexpected error: {stderr}"
    );
    let error = postgres::Client::connect(&server.connection_string(), postgres::NoTls)
        .err()
        .expect("refused without TLS");
    assert_eq!(common::sqlstate(&error), "28000");
    let options = format!("sslmode=verify-ca sslrootcert={}", ca.display());
    let output = psql(&server, &options, &["SELECT 'encrypted'"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "encrypted");
}

#[test]
fn a_server_without_a_certificate_says_it_has_no_tls() {
    if !psql_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let output = psql(&server, "sslmode=require", &["SELECT 1"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("server does not support SSL"),
        "unexpected error: {stderr}"
    );
    let output = psql(&server, "sslmode=prefer", &["SELECT 1"]);
    assert!(output.status.success());
}

#[test]
fn bytes_sent_after_an_ssl_request_before_its_answer_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = tls_server(dir.path(), false);
    let mut socket = std::net::TcpStream::connect(server.addr).unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    // SSLRequest (length 8, code 80877103) and, in the same write, a startup message's start.
    let mut bytes = vec![0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
    bytes.extend_from_slice(&[0, 0, 0, 9, 0, 3, 0, 0, 0]);
    socket.write_all(&bytes).unwrap();
    let mut answer = Vec::new();
    let _ = socket.read_to_end(&mut answer);
    assert_eq!(answer.first(), Some(&b'E'), "answer: {answer:?}");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains("08P01"), "answer: {text}");
    assert!(text.contains("unencrypted data after SSL request"));
}

//! Real drivers, unmodified, against the server: psycopg 3 (Python), the PostgreSQL JDBC
//! driver, SQLAlchemy's ORM and reflection and Django's migrations and ORM each run a
//! script of DDL, parameterized queries and transactions that checks every answer itself
//! (tests/drivers/). Missing drivers: see common/clients.rs.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::clients::{require, runs};
use common::TestServer;

/// Runs a driver's check script and fails with its output unless it succeeded.
fn run_check(mut command: Command, ok_line: &str) {
    let output = command.output().expect("run the driver check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(ok_line),
        "driver check failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
}

fn scripts() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/drivers"))
}

#[test]
fn psycopg() {
    // Debian's python3-psycopg installs for the system interpreter.
    let python = std::env::var("HAYATE_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
    let available = runs(&python, &["-c", "import psycopg"]);
    if !require(available, "psycopg", "python3-psycopg") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut command = Command::new(&python);
    command
        .arg(scripts().join("psycopg_check.py"))
        .arg(server.addr.port().to_string());
    run_check(command, "psycopg ok");
    server.stop();
}

#[test]
fn django() {
    // Debian's python3-django (3.2) and python3-psycopg2, for the system interpreter: the
    // project in tests/drivers/django migrates a fresh database (contenttypes, auth and its
    // own app's five migrations) and runs an ORM scenario that asserts every answer.
    let python = std::env::var("HAYATE_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
    let available = runs(&python, &["-c", "import django, psycopg2"]);
    if !require(available, "Django", "python3-django and python3-psycopg2") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    server
        .connect()
        .batch_execute("CREATE DATABASE djangoci")
        .unwrap();
    let project = scripts().join("django");
    let mut command = Command::new(&python);
    command
        .current_dir(&project)
        .arg(project.join("check.py"))
        .env("HAYATE_HOST", server.addr.ip().to_string())
        .env("HAYATE_PORT", server.addr.port().to_string())
        .env("HAYATE_DB", "djangoci")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_check(command, "DJANGO CHECK OK");
    server.stop();
}

#[test]
fn sqlalchemy() {
    // Debian's python3-sqlalchemy (1.4) and python3-psycopg2, for the system interpreter.
    let python = std::env::var("HAYATE_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
    let available = runs(&python, &["-c", "import sqlalchemy, psycopg2"]);
    if !require(
        available,
        "SQLAlchemy",
        "python3-sqlalchemy and python3-psycopg2",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut command = Command::new(&python);
    command
        .arg(scripts().join("sqlalchemy_check.py"))
        .arg(server.addr.port().to_string());
    run_check(command, "sqlalchemy ok");
    server.stop();
}

#[test]
fn jdbc() {
    let jar = std::env::var("HAYATE_JDBC_JAR")
        .unwrap_or_else(|_| "/usr/share/java/postgresql.jar".into());
    let available = runs("java", &["-version"]) && Path::new(&jar).exists();
    if !require(
        available,
        "JDBC",
        "a Java runtime and libpostgresql-jdbc-java",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut command = Command::new("java");
    command
        .args(["-cp", &jar])
        .arg(scripts().join("JdbcCheck.java"))
        .arg(server.addr.port().to_string());
    run_check(command, "jdbc ok");
    server.stop();
}

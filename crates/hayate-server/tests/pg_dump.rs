//! pg_dump and psql, unmodified (issue 21): a Hayate database dumped by pg_dump 15 restores
//! into another Hayate database with psql and dumps back to the same text; it restores into a
//! real PostgreSQL 15 server, and PostgreSQL's own dump of it restores into Hayate with the same
//! rows, sequences, enum types and objects.
//!
//! Without the PostgreSQL 15 client tools the test says so loudly and checks nothing; set
//! HAYATE_REQUIRE_CLIENTS=1 to make that a failure. The PostgreSQL part also needs the server
//! binaries and the `postgres` system user (Debian's postgresql-15, which .ci/run installs).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::clients::{require, runs};
use common::TestServer;

const SCHEMA: &str = "\
CREATE TYPE status AS ENUM ('new', 'paid', 'shipped');
ALTER TYPE status ADD VALUE 'lost' BEFORE 'paid';
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, note text, \
    joined timestamptz DEFAULT now(), credit numeric(10,2) DEFAULT 0 CHECK (credit >= 0));
CREATE INDEX customers_name ON customers (name);
CREATE INDEX customers_recent ON customers (joined DESC NULLS LAST, name NULLS FIRST);
CREATE UNIQUE INDEX customers_lower_name ON customers (lower(name));
CREATE TABLE orders (id bigint PRIMARY KEY, customer int NOT NULL REFERENCES customers (id), \
    total float8, paid bool DEFAULT false, state status DEFAULT 'new');
CREATE UNIQUE INDEX orders_unpaid ON orders (customer) WHERE NOT paid;
CREATE INDEX orders_gross ON orders ((total * 2), customer);
CREATE SEQUENCE tickets START 100 INCREMENT 5;
CREATE SEQUENCE laps INCREMENT 3 MAXVALUE 7 CYCLE;
CREATE VIEW big_orders AS SELECT o.id, c.name, o.total FROM orders o \
    JOIN customers c ON c.id = o.customer WHERE o.total > 10;
INSERT INTO customers (name, note, joined, credit) VALUES \
    ('ann', 'tab\tand ''quote''', '2026-11-26 10:00:00+00', 12.5), \
    ('bob', NULL, '2026-01-01 00:00:00+00', 0), ('cy', 'back\\\\slash', NULL, 3);
INSERT INTO orders VALUES (1, 1, 5.5, true, 'shipped'), (2, 1, 20, false, 'lost'), \
    (3, 2, NULL, NULL, DEFAULT);
SELECT nextval('tickets'), nextval('tickets');
SELECT nextval('laps'), nextval('laps'), nextval('laps');
";

/// Rows and sequence positions that must be equal in every copy.
const CHECKS: &[&str] = &[
    "SELECT id, name, note, joined::text, credit::text FROM customers ORDER BY id",
    "SELECT id::text, customer, total::text, paid::text FROM orders ORDER BY id",
    // An enum's values in the type's order (new < lost < paid < shipped), not the text's.
    "SELECT id::text FROM orders ORDER BY state DESC, id",
    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
     WHERE attrelid = 'orders'::regclass AND attname = 'state'",
    "SELECT id::text, name, total::text FROM big_orders ORDER BY id",
    "SELECT nextval('tickets')::text",
    // Past its maximum: only a copy that kept CYCLE starts again at 1.
    "SELECT nextval('laps')::text",
    "SELECT nextval('customers_id_seq')::text",
    "SELECT indexdef FROM pg_indexes WHERE indexname = 'orders_unpaid'",
    // DESC and NULLS FIRST/LAST as written (stored ascending, but kept for the dump).
    "SELECT indexdef FROM pg_indexes WHERE indexname = 'customers_recent'",
    // Expression indexes (PostgreSQL writes `total * 2` as `total * (2)::double precision`).
    "SELECT indexdef FROM pg_indexes WHERE indexname = 'customers_lower_name'",
    "SELECT indexname FROM pg_indexes WHERE indexdef LIKE '%USING btree (((total * %, customer)'",
];

fn psql(host: &str, port: u16, user: &str, database: &str, args: &[&str]) -> String {
    let output = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", host])
        .args(["-p", &port.to_string(), "-U", user, "-d", database])
        .args(args)
        .output()
        .expect("run psql");
    assert!(
        output.status.success(),
        "psql {args:?} on {database}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn pg_dump(host: &str, port: u16, user: &str, database: &str, out: &Path) {
    let output = Command::new("pg_dump")
        .args(["-h", host, "-p", &port.to_string(), "-U", user, "-f"])
        .arg(out)
        .arg(database)
        .output()
        .expect("run pg_dump");
    assert!(
        output.status.success(),
        "pg_dump {database}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A dump's text without what differs between two dumps of equal databases (pg_dump's
/// per-run \restrict key).
fn dump_text(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|line| !line.starts_with("\\restrict") && !line.starts_with("\\unrestrict"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rows of `CHECKS` in a database (each query's rows, unaligned), run in one psql session.
fn checked(host: &str, port: u16, user: &str, database: &str) -> Vec<String> {
    CHECKS
        .iter()
        .map(|query| psql(host, port, user, database, &["-A", "-t", "-c", query]))
        .collect()
}

#[test]
fn a_dump_restores_into_hayate_and_postgresql_and_back() {
    if !require(
        runs("pg_dump", &["--version"]),
        "pg_dump",
        "postgresql-client-15",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&dir.path().join("data"));
    let (host, port) = (server.addr.ip().to_string(), server.addr.port());
    psql(&host, port, "tester", "test", &["-c", SCHEMA]);
    let first = dir.path().join("first.sql");
    pg_dump(&host, port, "tester", "test", &first);
    // What every copy of the dump shows, and (the checks draw from the sequences) what a
    // copy taken after one round of checks shows.
    let expected = checked(&host, port, "tester", "test");
    let expected_after = checked(&host, port, "tester", "test");
    let dumped = std::fs::read_to_string(&first).unwrap();
    for kept in [
        "USING btree (joined DESC NULLS LAST, name NULLS FIRST)",
        "CREATE UNIQUE INDEX customers_lower_name ON public.customers USING btree (lower(name))",
        "CREATE INDEX orders_gross ON public.orders USING btree (((total * 2)), customer)",
        "CREATE TYPE public.status AS ENUM (\n    'new',\n    'lost',\n    'paid',\n    'shipped'\n);",
        "state public.status DEFAULT 'new'",
    ] {
        assert!(dumped.contains(kept), "the dump keeps {kept}:\n{dumped}");
    }

    // Hayate -> pg_dump -> psql -> Hayate: the same rows, and the same dump text.
    psql(
        &host,
        port,
        "tester",
        "test",
        &["-c", "CREATE DATABASE copy"],
    );
    psql(
        &host,
        port,
        "tester",
        "copy",
        &["-f", first.to_str().unwrap()],
    );
    let again = dir.path().join("again.sql");
    pg_dump(&host, port, "tester", "copy", &again);
    assert_eq!(dump_text(&first), dump_text(&again), "the dump of the copy");
    assert_eq!(checked(&host, port, "tester", "copy"), expected);
    assert_eq!(checked(&host, port, "tester", "copy"), expected_after);

    // Hayate -> PostgreSQL -> pg_dump -> Hayate.
    let Some(postgres) = Postgres::start(dir.path()) else {
        return;
    };
    let socket = postgres.socket.to_str().unwrap().to_string();
    // The dump names the objects' owner, the role the test connects as.
    psql(
        &socket,
        postgres.port,
        "postgres",
        "postgres",
        &["-c", "CREATE ROLE tester LOGIN"],
    );
    psql(
        &socket,
        postgres.port,
        "postgres",
        "postgres",
        &["-c", "CREATE DATABASE restored"],
    );
    psql(
        &socket,
        postgres.port,
        "postgres",
        "restored",
        &["-f", first.to_str().unwrap()],
    );
    assert_eq!(
        checked(&socket, postgres.port, "postgres", "restored"),
        expected
    );
    let from_postgres = dir.path().join("from_postgres.sql");
    pg_dump(
        &socket,
        postgres.port,
        "postgres",
        "restored",
        &from_postgres,
    );
    psql(
        &host,
        port,
        "tester",
        "test",
        &["-c", "CREATE DATABASE back"],
    );
    psql(
        &host,
        port,
        "tester",
        "back",
        &["-f", from_postgres.to_str().unwrap()],
    );
    assert_eq!(checked(&host, port, "tester", "back"), expected_after);
    let objects = "SELECT relname || ':' || relkind FROM pg_class \
                   WHERE relnamespace = 'public'::regnamespace ORDER BY 1";
    assert_eq!(
        psql(&host, port, "tester", "back", &["-A", "-t", "-c", objects]),
        psql(&host, port, "tester", "test", &["-A", "-t", "-c", objects]),
    );
    drop(postgres);
    server.stop();
}

/// A PostgreSQL 15 server of its own, run as the `postgres` system user, on a Unix socket.
struct Postgres {
    data: PathBuf,
    bin: PathBuf,
    socket: PathBuf,
    port: u16,
}

impl Postgres {
    fn start(base: &Path) -> Option<Postgres> {
        let bin = PathBuf::from("/usr/lib/postgresql/15/bin");
        let available = bin.join("initdb").exists() && runs("id", &["postgres"]);
        if !require(available, "PostgreSQL 15 server", "postgresql-15") {
            return None;
        }
        let root = base.join("postgresql");
        std::fs::create_dir_all(&root).unwrap();
        let as_postgres = |program: &Path, args: &[&str]| {
            let output = Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(program)
                .args(args)
                .output()
                .expect("run as postgres");
            assert!(
                output.status.success(),
                "{program:?} {args:?}:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        // The temporary directories above it must let the postgres user through.
        for dir in [base, &root] {
            Command::new("chmod").arg("755").arg(dir).status().unwrap();
        }
        Command::new("chown")
            .args(["-R", "postgres"])
            .arg(&root)
            .status()
            .unwrap();
        let data = root.join("data");
        let data_arg = data.to_str().unwrap();
        as_postgres(
            &bin.join("initdb"),
            &[
                "-D",
                data_arg,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        );
        let port = common::free_port();
        let options = format!("-p {port} -k {} -c listen_addresses=''", root.display());
        let log = root.join("server.log");
        as_postgres(
            &bin.join("pg_ctl"),
            &[
                "-D",
                data_arg,
                "-o",
                &options,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
        Some(Postgres {
            data,
            bin,
            socket: root,
            port,
        })
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args([
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "stop",
            ])
            .output();
    }
}

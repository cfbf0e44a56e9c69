//! psql, unmodified, against the server: a small script with DDL, `\dt`, `\d` and `\d t` (a
//! primary key, a secondary index, a default), inserts, a select, an explicit transaction and
//! errors; its output is compared line by line with PostgreSQL 15's psql transcript.
//!
//! When psql is not installed the test says so loudly on stderr and checks nothing else; set
//! HAYATE_REQUIRE_CLIENTS=1 to make its absence a failure (common/clients.rs).

use crate::common;

use std::process::Command;

use common::TestServer;

const SCRIPT: &str = "\
CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL, score float8 DEFAULT 0.5);
\\dt
\\d
CREATE INDEX t_name_idx ON t (name);
\\d t
INSERT INTO t VALUES (1, 'one', 1.5), (2, 'two', NULL);
SELECT * FROM t ORDER BY id;
BEGIN;
UPDATE t SET score = 2.5 WHERE id = 2;
SELECT score FROM t WHERE id = 2;
COMMIT;
INSERT INTO t VALUES (1, 'again', 0);
BEGIN;
SELECT * FROM nope;
SELECT 1;
ROLLBACK;
SELECT count(*), sum(score) FROM t;
";

const EXPECTED: &str = "\
CREATE TABLE
       List of relations
 Schema | Name | Type  | Owner  
--------+------+-------+--------
 public | t    | table | tester
(1 row)

       List of relations
 Schema | Name | Type  | Owner  
--------+------+-------+--------
 public | t    | table | tester
(1 row)

CREATE INDEX
                      Table \"public.t\"
 Column |       Type       | Collation | Nullable | Default 
--------+------------------+-----------+----------+---------
 id     | integer          |           | not null | 
 name   | text             |           | not null | 
 score  | double precision |           |          | 0.5
Indexes:
    \"t_pkey\" PRIMARY KEY, btree (id)
    \"t_name_idx\" btree (name)

INSERT 0 2
 id | name | score 
----+------+-------
  1 | one  |   1.5
  2 | two  |      
(2 rows)

BEGIN
UPDATE 1
 score 
-------
   2.5
(1 row)

COMMIT
psql:<stdin>:12: ERROR:  duplicate key value violates unique constraint \"t_pkey\"
DETAIL:  Key (id)=(1) already exists.
BEGIN
psql:<stdin>:14: ERROR:  relation \"nope\" does not exist
psql:<stdin>:15: ERROR:  current transaction is aborted, commands ignored until end of transaction block
ROLLBACK
 count | sum 
-------+-----
     2 |   4
(1 row)

";

#[test]
fn psql_script() {
    let available = common::clients::runs("psql", &["--version"]);
    if !common::clients::require(available, "psql", "postgresql-client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut child = Command::new("psql")
        .args(["-X", "-h", &server.addr.ip().to_string()])
        .args([
            "-p",
            &server.addr.port().to_string(),
            "-U",
            "tester",
            "-d",
            "test",
        ])
        .args(["-f", "-"])
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run psql");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(SCRIPT.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    // psql writes results to stdout and errors to stderr; merge them in script order by
    // comparing each stream with its part of the expected transcript.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let (expected_errors, expected_results): (Vec<&str>, Vec<&str>) = EXPECTED
        .lines()
        .partition(|line| line.starts_with("psql:") || line.starts_with("DETAIL:"));
    let errors: Vec<&str> = stderr.lines().collect();
    let results: Vec<&str> = stdout.lines().collect();
    assert_eq!(errors, expected_errors, "psql stderr:\n{stderr}");
    assert_eq!(results, expected_results, "psql stdout:\n{stdout}");
    server.stop();
}

/// psql and the Rust driver reach the server through its Unix-domain socket (`-h DIR`, as
/// with PostgreSQL), and the socket file goes away with the server.
#[test]
fn psql_over_the_unix_socket() {
    let available = common::clients::runs("psql", &["--version"]);
    if !common::clients::require(available, "psql", "postgresql-client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sockets = tempfile::tempdir().unwrap();
    let server = TestServer::start_local(dir.path(), sockets.path());
    let port = server.addr.port().to_string();
    let socket = sockets.path().join(format!(".s.PGSQL.{port}"));
    assert!(socket.exists(), "{} exists", socket.display());

    let socket_dir = sockets.path().to_str().unwrap();
    let output = Command::new("psql")
        .args(["-X", "-A", "-t", "-h", socket_dir, "-p", &port])
        .args(["-U", "tester", "-d", "test"])
        .args(["-c", "CREATE TABLE local_t (id int PRIMARY KEY, v text)"])
        .args(["-c", "INSERT INTO local_t VALUES (1, 'over the socket')"])
        .args(["-c", "SELECT v FROM local_t WHERE id = 1"])
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("run psql");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "psql failed: {stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["CREATE TABLE", "INSERT 0 1", "over the socket"],
        "stderr: {stderr}"
    );

    let mut client = postgres::Client::connect(
        &format!("host={socket_dir} port={port} user=tester dbname=test"),
        postgres::NoTls,
    )
    .expect("connect over the unix socket");
    let id = 1i32;
    let row = client
        .query_one("SELECT v FROM local_t WHERE id = $1", &[&id])
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "over the socket");
    drop(client);

    server.stop();
    assert!(!socket.exists(), "the socket file is removed on shutdown");
}

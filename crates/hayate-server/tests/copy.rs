//! COPY FROM STDIN and TO STDOUT through a real driver (rust-postgres, which runs COPY in
//! the extended protocol) and psql (simple protocol): text and CSV escaping, NULLs, data
//! split across messages at any byte, errors with their line number, CopyFail, and COPY
//! inside transaction blocks.

use crate::common;

use std::io::{Read, Write};

use common::{sqlstate, TestServer};

/// Sends `data` through COPY in pieces of `chunk` bytes (records split anywhere).
fn copy_in(client: &mut postgres::Client, sql: &str, data: &[u8], chunk: usize) -> u64 {
    let mut writer = client.copy_in(sql).unwrap();
    for piece in data.chunks(chunk) {
        writer.write_all(piece).unwrap();
        writer.flush().unwrap();
    }
    writer.finish().unwrap()
}

fn rows(client: &mut postgres::Client, sql: &str) -> Vec<(i32, Option<String>)> {
    client
        .query(sql, &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[test]
fn copy_text_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE t (id int4 PRIMARY KEY, v text, n int8)")
        .unwrap();

    // Text format: escapes, \N, a backslash-escaped delimiter, CRLF line ends, the
    // end-of-data marker; sent one byte per message and in one message.
    let text = b"1\tplain\t10\n2\ttab\\there\\\\back\t\\N\n3\t\\N\t30\r\n4\tline\\nbreak \\x41\\101\t40\n5\tescaped\\\tdelim\t50\n\\.\n9\tafter the end\t0\n";
    assert_eq!(copy_in(&mut client, "COPY t FROM STDIN", text, 1), 5);
    let expected = vec![
        (1, Some("plain".to_string())),
        (2, Some("tab\there\\back".to_string())),
        (3, None),
        (4, Some("line\nbreak AA".to_string())),
        (5, Some("escaped\tdelim".to_string())),
    ];
    assert_eq!(
        rows(&mut client, "SELECT id, v FROM t ORDER BY id"),
        expected
    );
    let n: Option<i64> = client
        .query_one("SELECT n FROM t WHERE id = 2", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, None, "\\N is NULL");

    // CSV: quoted delimiters, quotes, newlines inside quotes, NULL (unquoted empty) versus
    // the empty string (quoted), a header; column list (n gets NULL).
    client.batch_execute("DELETE FROM t").unwrap();
    let csv =
        b"id,v\n1,\"a,b\"\n2,\"say \"\"hi\"\"\"\n3,\"two\nlines\"\n4,\n5,\"\"\n6,  spaced  \n";
    for chunk in [1, 7, csv.len()] {
        client.batch_execute("DELETE FROM t").unwrap();
        let count = copy_in(
            &mut client,
            "COPY t (id, v) FROM STDIN WITH (FORMAT csv, HEADER true)",
            csv,
            chunk,
        );
        assert_eq!(count, 6);
    }
    assert_eq!(
        rows(&mut client, "SELECT id, v FROM t ORDER BY id"),
        vec![
            (1, Some("a,b".to_string())),
            (2, Some("say \"hi\"".to_string())),
            (3, Some("two\nlines".to_string())),
            (4, None),
            (5, Some(String::new())),
            (6, Some("  spaced  ".to_string())),
        ]
    );

    // The old syntax, other delimiter and null string, a last line without a newline.
    client.batch_execute("DELETE FROM t").unwrap();
    let old = b"1|NULL|7\n2|'q|uoted'|NULL";
    let count = copy_in(
        &mut client,
        "COPY t FROM STDIN WITH DELIMITER '|' NULL 'NULL' CSV QUOTE ''''",
        old,
        3,
    );
    assert_eq!(count, 2);
    assert_eq!(
        rows(&mut client, "SELECT id, v FROM t ORDER BY id"),
        vec![(1, None), (2, Some("q|uoted".to_string()))]
    );

    // COPY TO STDOUT reads back what COPY FROM wrote.
    let mut out = String::new();
    client
        .copy_out("COPY t TO STDOUT")
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines, vec!["1\t\\N\t7", "2\tq|uoted\t\\N"]);
    let mut csv_out = String::new();
    client
        .copy_out("COPY t (v, id) TO STDOUT WITH (FORMAT csv, HEADER)")
        .unwrap()
        .read_to_string(&mut csv_out)
        .unwrap();
    assert!(csv_out.starts_with("v,id\n"), "{csv_out}");
    assert!(
        csv_out.contains(",1\n") && csv_out.contains("q|uoted,2\n"),
        "{csv_out}"
    );
}

#[test]
fn copy_errors_and_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE t (id int4 PRIMARY KEY, v text NOT NULL)")
        .unwrap();

    // A bad value: 22P02 with the line and column, and none of the rows before it stay.
    let mut writer = client.copy_in("COPY t FROM STDIN").unwrap();
    writer.write_all(b"1\ta\n2\tb\nthree\tc\n4\td\n").unwrap();
    let error = writer.finish().unwrap_err();
    assert_eq!(sqlstate(&error), "22P02", "{error:?}");
    let db_error = error.as_db_error().unwrap();
    assert_eq!(
        db_error.where_(),
        Some("COPY t, line 3, column id: \"three\""),
        "{db_error:?}"
    );
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 0, "a failed COPY inserts nothing");

    // Wrong column counts, a NOT NULL column, a duplicate key: each its SQLSTATE.
    for (data, code, line) in [
        (&b"1\ta\textra\n"[..], "22P04", "line 1"),
        (&b"1\ta\n2\n"[..], "22P04", "line 2"),
        (&b"1\t\\N\n"[..], "23502", "line 1"),
        (&b"1\ta\n1\tb\n"[..], "23505", "line 2"),
        (&b"1\t\xff\n"[..], "22021", "line 1"),
    ] {
        let mut writer = client.copy_in("COPY t FROM STDIN").unwrap();
        writer.write_all(data).unwrap();
        let error = writer.finish().unwrap_err();
        assert_eq!(sqlstate(&error), code, "{error:?}");
        let place = error.as_db_error().unwrap().where_().unwrap_or_default();
        assert!(place.contains(line), "{place}");
    }
    let error = client.copy_in("COPY nosuch FROM STDIN").err().unwrap();
    assert_eq!(sqlstate(&error), "42P01");
    let error = client
        .copy_in("COPY t (id, nosuch) FROM STDIN")
        .err()
        .unwrap();
    assert_eq!(sqlstate(&error), "42703");
    let error = client.copy_in("COPY t FROM '/etc/passwd'").err().unwrap();
    assert_eq!(sqlstate(&error), "0A000");

    // CopyFail (the writer dropped unfinished): the rows sent so far are rolled back.
    {
        let mut writer = client.copy_in("COPY t FROM STDIN").unwrap();
        writer.write_all(b"1\ta\n2\tb\n").unwrap();
        writer.flush().unwrap();
    }
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 0, "CopyFail leaves nothing");

    // Inside a block: a rolled-back block leaves nothing, a committed one everything, as
    // pgbench loads: BEGIN; TRUNCATE/DELETE; COPY ... WITH (FREEZE ON); COMMIT.
    let mut transaction = client.transaction().unwrap();
    let mut writer = transaction.copy_in("COPY t FROM STDIN").unwrap();
    writer.write_all(b"1\ta\n2\tb\n").unwrap();
    assert_eq!(writer.finish().unwrap(), 2);
    let inside: i64 = transaction
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(inside, 2, "the block sees its COPY");
    transaction.rollback().unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 0, "a rolled-back block leaves nothing");

    client.batch_execute("BEGIN; DELETE FROM t").unwrap();
    let loaded: Vec<u8> = (0..5000)
        .flat_map(|i| format!("{i}\tvalue {i}\n").into_bytes())
        .collect();
    assert_eq!(
        copy_in(
            &mut client,
            "copy t from stdin with (freeze on)",
            &loaded,
            8192
        ),
        5000
    );
    client.batch_execute("COMMIT").unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 5000);

    // An error inside a block fails the block (25P02 until ROLLBACK).
    let mut transaction = client.transaction().unwrap();
    let mut writer = transaction.copy_in("COPY t FROM STDIN").unwrap();
    writer.write_all(b"x\ty\n").unwrap();
    assert_eq!(sqlstate(&writer.finish().unwrap_err()), "22P02");
    let error = transaction.query("SELECT 1", &[]).unwrap_err();
    assert_eq!(sqlstate(&error), "25P02");
    transaction.rollback().unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 5000, "the committed load is intact");
}

/// psql's \copy runs COPY in the simple query protocol.
#[test]
fn psql_copy_in_simple_protocol() {
    if std::process::Command::new("psql")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("psql not installed; skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE t (id int4 PRIMARY KEY, v text)")
        .unwrap();
    let data = dir.path().join("data.csv");
    std::fs::write(&data, "id,v\n1,\"x,y\"\n2,\n").unwrap();
    let script = format!(
        "\\copy t FROM '{}' WITH (FORMAT csv, HEADER)\nCOPY t FROM STDIN;\n3\tthree\n\\.\nSELECT count(*) FROM t;\n",
        data.display()
    );
    let output = std::process::Command::new("psql")
        .args([
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            &server.addr.ip().to_string(),
            "-p",
            &server.addr.port().to_string(),
            "-U",
            "tester",
            "-d",
            "test",
            "-f",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(script.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("COPY 2"), "{stdout}");
    assert!(stdout.contains("COPY 1"), "{stdout}");
    assert_eq!(
        rows(&mut client, "SELECT id, v FROM t ORDER BY id"),
        vec![
            (1, Some("x,y".to_string())),
            (2, None),
            (3, Some("three".to_string()))
        ]
    );
}

//! A real driver (rust-postgres, which uses the extended protocol with binary parameters and
//! results) against the server: DDL, prepared statements, types, transactions and SQLSTATEs.

use crate::common;

use common::{sqlstate, TestServer};

#[test]
fn driver_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE items (id int4 PRIMARY KEY, name varchar(10) NOT NULL, \
             price float8, qty int8 DEFAULT 1, ok bool)",
        )
        .unwrap();
    let insert = client
        .prepare("INSERT INTO items (id, name, price, qty, ok) VALUES ($1, $2, $3, $4, $5)")
        .unwrap();
    assert_eq!(
        insert.params(),
        &[
            postgres::types::Type::INT4,
            postgres::types::Type::VARCHAR,
            postgres::types::Type::FLOAT8,
            postgres::types::Type::INT8,
            postgres::types::Type::BOOL
        ]
    );
    for id in 1..=20i32 {
        let price = id as f64 * 1.5;
        let qty = id as i64;
        let ok = id % 2 == 0;
        let name = format!("item{id}");
        let inserted = client
            .execute(&insert, &[&id, &name, &price, &qty, &ok])
            .unwrap();
        assert_eq!(inserted, 1);
    }
    // A point query with an int8 parameter on an int4 key.
    let row = client
        .query_one(
            "SELECT name, price, qty, ok FROM items WHERE id = $1::int8",
            &[&7i64],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "item7");
    assert_eq!(row.get::<_, f64>(1), 10.5);
    assert_eq!(row.get::<_, i64>(2), 7);
    assert!(!row.get::<_, bool>(3));
    // Range scan, ORDER BY, LIMIT/OFFSET with parameters.
    let rows = client
        .query(
            "SELECT id FROM items WHERE id > $1 AND id <= $2 ORDER BY id DESC LIMIT $3 OFFSET 1",
            &[&5i32, &15i32, &3i64],
        )
        .unwrap();
    let ids: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, vec![14, 13, 12]);
    // Aggregates with GROUP BY.
    let rows = client
        .query(
            "SELECT ok, count(*), sum(qty)::int8 FROM items GROUP BY ok ORDER BY ok",
            &[],
        )
        .unwrap();
    let groups: Vec<(bool, i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(groups, vec![(false, 10, 100), (true, 10, 110)]);
    // UPDATE and DELETE with expressions; RETURNING.
    let updated = client
        .execute(
            "UPDATE items SET qty = qty * 2 WHERE id BETWEEN $1 AND $2",
            &[&1i32, &4i32],
        )
        .unwrap();
    assert_eq!(updated, 4);
    let returned = client
        .query("DELETE FROM items WHERE id = 2 RETURNING qty", &[])
        .unwrap();
    assert_eq!(returned[0].get::<_, i64>(0), 4);
    // NULL semantics.
    client
        .execute("INSERT INTO items (id, name) VALUES (100, 'nulls')", &[])
        .unwrap();
    let row = client
        .query_one(
            "SELECT price, qty, price IS NULL, price + 1 FROM items WHERE id = 100",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, Option<f64>>(0), None);
    assert_eq!(row.get::<_, i64>(1), 1, "DEFAULT applied");
    assert!(row.get::<_, bool>(2));
    assert_eq!(row.get::<_, Option<f64>>(3), None);
    let count: i64 = client
        .query_one("SELECT count(*) FROM items WHERE price = NULL", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 0);
    server.stop();
}

#[test]
fn errors_carry_sqlstates() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE t (k int8 PRIMARY KEY, v text)")
        .unwrap();
    client
        .execute("INSERT INTO t VALUES (1, 'a')", &[])
        .unwrap();
    let error = |client: &mut postgres::Client, sql: &str| {
        sqlstate(&client.batch_execute(sql).expect_err(sql))
    };
    assert_eq!(error(&mut client, "INSERT INTO t VALUES (1, 'b')"), "23505");
    assert_eq!(error(&mut client, "SELECT * FROM missing"), "42P01");
    assert_eq!(error(&mut client, "SELEC 1"), "42601");
    assert_eq!(
        error(&mut client, "SELECT * FROM t WHERE k = 'abc'"),
        "22P02"
    );
    assert_eq!(
        error(&mut client, "INSERT INTO t (k) VALUES (NULL)"),
        "23502"
    );
    assert_eq!(error(&mut client, "SELECT nosuch FROM t"), "42703");
    assert_eq!(
        error(&mut client, "CREATE INDEX i ON t USING hash (v)"),
        "0A000"
    );
    assert_eq!(
        error(&mut client, "CREATE TABLE t (k int8 PRIMARY KEY)"),
        "42P07"
    );
    // A parameter that is not a valid integer in text format.
    let statement = client.prepare("SELECT v FROM t WHERE k = $1").unwrap();
    assert_eq!(statement.params(), &[postgres::types::Type::INT8]);
    // An error inside a block aborts it until ROLLBACK.
    client.batch_execute("BEGIN").unwrap();
    client
        .execute("INSERT INTO t VALUES (2, 'b')", &[])
        .unwrap();
    assert_eq!(error(&mut client, "SELECT 1/0"), "22012");
    assert_eq!(error(&mut client, "SELECT 1"), "25P02");
    client.batch_execute("ROLLBACK").unwrap();
    let count: i64 = client
        .query_one("SELECT count(*) FROM t", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 1, "the aborted block's insert is gone");
    server.stop();
}

#[test]
fn write_conflict_is_a_serialization_failure() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut first = server.connect();
    let mut second = server.connect();
    first
        .batch_execute("CREATE TABLE c (id int4 PRIMARY KEY, n int8); INSERT INTO c VALUES (1, 0)")
        .unwrap();
    // REPEATABLE READ (snapshot isolation): a write conflict is the client's 40001.
    first.batch_execute("BEGIN").unwrap();
    second
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .unwrap();
    // Both take their snapshot; the first updates and commits.
    let _: i64 = second
        .query_one("SELECT n FROM c WHERE id = 1", &[])
        .unwrap()
        .get(0);
    first
        .execute("UPDATE c SET n = n + 1 WHERE id = 1", &[])
        .unwrap();
    first.batch_execute("COMMIT").unwrap();
    // The second's update conflicts with a version newer than its snapshot.
    let conflict = second
        .execute("UPDATE c SET n = n + 1 WHERE id = 1", &[])
        .expect_err("write conflict");
    assert_eq!(sqlstate(&conflict), "40001");
    second.batch_execute("ROLLBACK").unwrap();
    let n: i64 = first
        .query_one("SELECT n FROM c WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 1);

    // READ COMMITTED (the default, as in PostgreSQL): the same interleaving updates the newest
    // version, and neither update is lost.
    first.batch_execute("BEGIN").unwrap();
    second.batch_execute("BEGIN").unwrap();
    let _: i64 = second
        .query_one("SELECT n FROM c WHERE id = 1", &[])
        .unwrap()
        .get(0);
    first
        .execute("UPDATE c SET n = n + 1 WHERE id = 1", &[])
        .unwrap();
    first.batch_execute("COMMIT").unwrap();
    second
        .execute("UPDATE c SET n = n + 1 WHERE id = 1", &[])
        .unwrap();
    second.batch_execute("COMMIT").unwrap();
    let n: i64 = first
        .query_one("SELECT n FROM c WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 3, "both read-committed increments kept");

    // An autocommitted UPDATE that waits for a row lock and then finds a newer version is
    // run again on a fresh snapshot (as READ COMMITTED would), so it neither fails nor loses
    // the other update.
    first.batch_execute("BEGIN").unwrap();
    first
        .execute("UPDATE c SET n = n + 10 WHERE id = 1", &[])
        .unwrap();
    let waiter = std::thread::spawn(move || {
        second
            .execute("UPDATE c SET n = n + 100 WHERE id = 1", &[])
            .map_err(|error| sqlstate(&error))
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    first.batch_execute("COMMIT").unwrap();
    assert_eq!(waiter.join().unwrap(), Ok(1));
    let n: i64 = first
        .query_one("SELECT n FROM c WHERE id = 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 3 + 10 + 100);
    server.stop();
}

#[test]
fn deadlock_is_reported_and_the_survivor_commits() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut a = server.connect();
    let mut b = server.connect();
    a.batch_execute(
        "CREATE TABLE d (id int4 PRIMARY KEY, n int4); INSERT INTO d VALUES (1, 0), (2, 0)",
    )
    .unwrap();
    a.batch_execute("BEGIN").unwrap();
    b.batch_execute("BEGIN").unwrap();
    a.execute("UPDATE d SET n = 1 WHERE id = 1", &[]).unwrap();
    b.execute("UPDATE d SET n = 2 WHERE id = 2", &[]).unwrap();
    let waiter = std::thread::spawn(move || {
        let result = a
            .execute("UPDATE d SET n = 1 WHERE id = 2", &[])
            .map_err(|error| sqlstate(&error));
        (a, result)
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let b_result = b
        .execute("UPDATE d SET n = 2 WHERE id = 1", &[])
        .map_err(|error| sqlstate(&error));
    let (mut a, a_result) = waiter.join().unwrap();
    // Exactly one of the two is chosen as the victim.
    let results = [a_result.clone(), b_result.clone()];
    assert_eq!(
        results
            .iter()
            .filter(|r| **r == Err("40P01".to_string()))
            .count(),
        1,
        "{results:?}"
    );
    assert_eq!(
        results.iter().filter(|r| **r == Ok(1)).count(),
        1,
        "{results:?}"
    );
    a.batch_execute("COMMIT").unwrap();
    b.batch_execute("COMMIT").unwrap();
    let rows = a.query("SELECT n FROM d ORDER BY id", &[]).unwrap();
    let n: Vec<i32> = rows.iter().map(|row| row.get(0)).collect();
    let winner = if a_result.is_ok() { 1 } else { 2 };
    assert_eq!(
        n,
        vec![winner, winner],
        "the survivor's two updates, none of the victim's"
    );
    server.stop();
}

#[test]
fn named_portals_fetch_in_steps() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE p (id int8 PRIMARY KEY); INSERT INTO p VALUES (1), (2), (3), (4), (5)",
        )
        .unwrap();
    let mut transaction = client.transaction().unwrap();
    let portal = transaction
        .bind("SELECT id FROM p WHERE id >= $1 ORDER BY id", &[&2i64])
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let rows = transaction.query_portal(&portal, 2).unwrap();
        if rows.is_empty() {
            break;
        }
        assert!(rows.len() <= 2);
        seen.extend(rows.iter().map(|row| row.get::<_, i64>(0)));
    }
    assert_eq!(seen, vec![2, 3, 4, 5]);
    transaction.commit().unwrap();
    server.stop();
}

/// The session's time zone through a driver: the TimeZone startup parameter (libpq's and
/// pgJDBC's way, here in options) sets it; text results show it; binary timestamptz values
/// are instants, whatever the zone; SET TIME ZONE changes it mid-session; a zone that does
/// not exist refuses the connection with 22023.
#[test]
fn time_zone_from_the_startup_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let tokyo = format!(
        "{} options='-c TimeZone=Asia/Tokyo'",
        server.connection_string()
    );
    let mut client = postgres::Client::connect(&tokyo, postgres::NoTls).expect("connect");
    let row = client
        .query_one("SELECT current_setting('TimeZone')", &[])
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "Asia/Tokyo");
    client
        .batch_execute(
            "CREATE TABLE events (id int PRIMARY KEY, at timestamptz); \
             INSERT INTO events VALUES (1, '2026-06-01 09:00')",
        )
        .unwrap();
    // 09:00 in Tokyo is midnight UTC: the binary value is that instant.
    let at: std::time::SystemTime = client
        .query_one("SELECT at FROM events WHERE id = 1", &[])
        .unwrap()
        .get(0);
    let unix = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(unix, 1_780_272_000);
    let shown = |client: &mut postgres::Client| -> String {
        client
            .simple_query("SELECT at FROM events WHERE id = 1")
            .unwrap()
            .into_iter()
            .find_map(|message| match message {
                postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(shown(&mut client), "2026-06-01 09:00:00+09");
    client
        .batch_execute("SET TIME ZONE 'America/New_York'")
        .unwrap();
    assert_eq!(shown(&mut client), "2026-05-31 20:00:00-04");
    // A plain connection is in UTC and reads the same instant.
    let mut plain = server.connect();
    assert_eq!(shown(&mut plain), "2026-06-01 00:00:00+00");
    let nowhere = format!(
        "{} options='-c TimeZone=Nowhere/Else'",
        server.connection_string()
    );
    let Err(error) = postgres::Client::connect(&nowhere, postgres::NoTls) else {
        panic!("a connection in a zone that does not exist");
    };
    assert_eq!(sqlstate(&error), "22023", "{error}");
}

/// Settings the server fixes: SHOW gives the server's max_connections and buffer; a client
/// that sets one in its startup options is refused (FATAL 55P02), as PostgreSQL refuses it.
#[test]
fn fixed_settings_come_from_the_server_and_refuse_startup_options() {
    let dir = tempfile::tempdir().unwrap();
    let config = hayate_server::ServerConfig {
        max_connections: 37,
        ..hayate_server::ServerConfig::default()
    };
    let server = TestServer::start_with(dir.path(), config);
    let mut client = server.connect();
    let show = |client: &mut postgres::Client, name: &str| -> String {
        client
            .query_one(&format!("SHOW {name}"), &[])
            .unwrap()
            .get(0)
    };
    assert_eq!(show(&mut client, "max_connections"), "37");
    assert!(show(&mut client, "shared_buffers").ends_with("MB"));
    for option in [
        "shared_buffers=1GB",
        "max_connections=5",
        "server_version=9.6",
    ] {
        let connection = format!("{} options='-c {option}'", server.connection_string());
        let Err(error) = postgres::Client::connect(&connection, postgres::NoTls) else {
            panic!("a connection setting {option}");
        };
        assert_eq!(sqlstate(&error), "55P02", "{option}: {error}");
    }
    assert_eq!(show(&mut client, "max_connections"), "37");
}

#[test]
fn alter_sequence_through_prepared_statements_and_strings_of_several() {
    // JDBC and rust-postgres send every statement as Parse/Bind/Execute; migration tools
    // send scripts as one string.
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE t (id int8 PRIMARY KEY); CREATE SEQUENCE s")
        .unwrap();
    let altered = client
        .execute("ALTER SEQUENCE s RESTART WITH 100 INCREMENT BY 5", &[])
        .unwrap();
    assert_eq!(altered, 0);
    let next = |client: &mut postgres::Client| -> i64 {
        client.query_one("SELECT nextval('s')", &[]).unwrap().get(0)
    };
    assert_eq!(next(&mut client), 100);
    assert_eq!(next(&mut client), 105);
    // A prepared one describes no parameters and no columns, and runs each time executed.
    let restart = client.prepare("ALTER SEQUENCE s RESTART").unwrap();
    assert!(restart.params().is_empty() && restart.columns().is_empty());
    client.execute(&restart, &[]).unwrap();
    assert_eq!(next(&mut client), 1);
    client.execute(&restart, &[]).unwrap();
    assert_eq!(next(&mut client), 1);
    client
        .execute("ALTER SEQUENCE s OWNED BY t.id", &[])
        .unwrap();
    let owner: String = client
        .query_one(
            "SELECT d.refobjid::regclass::text FROM pg_depend d \
             WHERE d.objid = 's'::regclass AND d.deptype = 'a'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(owner, "t");
    // Errors keep their SQLSTATEs.
    let error = client
        .execute("ALTER SEQUENCE nowhere RESTART", &[])
        .unwrap_err();
    assert_eq!(sqlstate(&error), "42P01");
    // In a string of several statements, each runs in turn; the first error stops the rest.
    client
        .batch_execute(
            "ALTER SEQUENCE s RESTART WITH 7; INSERT INTO t VALUES (nextval('s')); \
             ALTER SEQUENCE s INCREMENT BY 10; INSERT INTO t VALUES (nextval('s'))",
        )
        .unwrap();
    let ids: Vec<i64> = client
        .query("SELECT id FROM t ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(ids, [7, 17]);
    let error = client
        .batch_execute(
            "ALTER SEQUENCE s RESTART WITH 50; ALTER SEQUENCE nowhere RESTART; \
             INSERT INTO t VALUES (1000)",
        )
        .unwrap_err();
    assert_eq!(sqlstate(&error), "42P01");
    assert_eq!(next(&mut client), 50);
    let count: i64 = client
        .query_one("SELECT count(*) FROM t WHERE id = 1000", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 0);
    // Each statement of such a string sees the ones before it (their commits are not held
    // back), and rows are shown in the time zone of their own statement.
    let values = |messages: Vec<postgres::SimpleQueryMessage>| -> Vec<String> {
        let mut values = Vec::new();
        for message in messages {
            match message {
                postgres::SimpleQueryMessage::Row(row) => {
                    values.push(row.get(0).unwrap_or("NULL").to_string())
                }
                postgres::SimpleQueryMessage::CommandComplete(count) => {
                    values.push(format!("complete {count}"))
                }
                _ => {}
            }
        }
        values
    };
    for id in 2000..2050 {
        let answers = values(
            client
                .simple_query(&format!(
                    "INSERT INTO t VALUES ({id}); ALTER SEQUENCE s RESTART; \
                     SELECT count(*) FROM t WHERE id = {id}; \
                     UPDATE t SET id = -id WHERE id = {id}"
                ))
                .unwrap(),
        );
        assert_eq!(
            answers,
            ["complete 1", "complete 0", "1", "complete 1", "complete 1"]
        );
    }
    let answers = values(
        client
            .simple_query(
                "SET TIME ZONE 'UTC'; ALTER SEQUENCE s RESTART; \
                 SELECT '2020-01-01 00:00+00'::timestamptz; SET TIME ZONE 'Asia/Tokyo'",
            )
            .unwrap(),
    );
    assert_eq!(answers[2], "2020-01-01 00:00:00+00");
}

//! Databases are namespaces (issue 21): CREATE/DROP DATABASE, a missing database is FATAL
//! 3D000, the same table name in two databases holds two tables, pg_database lists them,
//! and both survive a restart.

use crate::common;

use common::{sqlstate, TestServer};

fn connect_to(server: &TestServer, database: &str) -> Result<postgres::Client, postgres::Error> {
    let config = format!(
        "host={} port={} user=tester dbname='{database}'",
        server.addr.ip(),
        server.addr.port()
    );
    postgres::Client::connect(&config, postgres::NoTls)
}

/// The error connecting to `database` gives (a connection is a failure).
fn refused(server: &TestServer, database: &str) -> postgres::Error {
    match connect_to(server, database) {
        Ok(_) => panic!("connected to {database}"),
        Err(error) => error,
    }
}

fn values(client: &mut postgres::Client, sql: &str) -> Vec<String> {
    client
        .query(sql, &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[test]
fn databases_are_separate_namespaces_that_survive_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());

    let missing = refused(&server, "shop");
    assert_eq!(sqlstate(&missing), "3D000", "{missing}");

    let mut admin = server.connect(); // database "test"
    admin.batch_execute("CREATE DATABASE Shop").unwrap();
    let again = admin.batch_execute("CREATE DATABASE shop").unwrap_err();
    assert_eq!(sqlstate(&again), "42P04", "{again}");
    admin
        .batch_execute("CREATE DATABASE \"Mixed Case\" WITH OWNER = tester ENCODING = 'UTF8' TEMPLATE = template0")
        .unwrap();
    admin.batch_execute("BEGIN").unwrap();
    let in_block = admin.batch_execute("CREATE DATABASE later").unwrap_err();
    assert_eq!(sqlstate(&in_block), "25001", "{in_block}");
    admin.batch_execute("ROLLBACK").unwrap();

    // The same table name in two databases: two tables.
    let mut shop = connect_to(&server, "shop").unwrap();
    admin
        .batch_execute("CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'test db')")
        .unwrap();
    let none = shop.query("SELECT * FROM items", &[]).unwrap_err();
    assert_eq!(
        sqlstate(&none),
        "42P01",
        "a table of another database: {none}"
    );
    shop.batch_execute(
        "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL); \
         CREATE INDEX items_name ON items (name); \
         INSERT INTO items (name) VALUES ('apple'), ('pear')",
    )
    .unwrap();
    assert_eq!(values(&mut admin, "SELECT name FROM items"), ["test db"]);
    assert_eq!(
        values(&mut shop, "SELECT name FROM items ORDER BY id"),
        ["apple", "pear"]
    );
    assert_eq!(
        values(&mut shop, "SELECT current_database()::text"),
        ["shop"]
    );
    assert_eq!(
        values(
            &mut shop,
            "SELECT relname::text FROM pg_class WHERE relname LIKE 'items%' ORDER BY 1"
        ),
        ["items", "items_id_seq", "items_name", "items_pkey"]
    );
    assert_eq!(
        values(
            &mut admin,
            "SELECT datname::text FROM pg_database ORDER BY datname"
        ),
        ["Mixed Case", "postgres", "shop", "test"]
    );

    // DROP DATABASE: never one in use.
    let own = shop.batch_execute("DROP DATABASE shop").unwrap_err();
    assert_eq!(sqlstate(&own), "55006", "{own}");
    let in_use = admin.batch_execute("DROP DATABASE shop").unwrap_err();
    assert_eq!(sqlstate(&in_use), "55006", "{in_use}");
    let default = admin.batch_execute("DROP DATABASE postgres").unwrap_err();
    assert_eq!(sqlstate(&default), "0A000", "{default}");
    admin.batch_execute("DROP DATABASE \"Mixed Case\"").unwrap();
    let gone = admin
        .batch_execute("DROP DATABASE \"Mixed Case\"")
        .unwrap_err();
    assert_eq!(sqlstate(&gone), "3D000", "{gone}");
    admin
        .batch_execute("DROP DATABASE IF EXISTS \"Mixed Case\"")
        .unwrap();
    drop((admin, shop));
    server.stop();

    // After a restart: the databases, their tables and sequences.
    let server = TestServer::start(dir.path());
    let mut shop = connect_to(&server, "shop").unwrap();
    shop.batch_execute("INSERT INTO items (name) VALUES ('plum')")
        .unwrap();
    // The sequence goes on past what it handed out (a reopen skips the values it had
    // reserved, as a crash would: sequence.rs).
    let ids: Vec<i32> = shop
        .query("SELECT id FROM items ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids[2] > 2, "{ids:?}");
    let dropped = refused(&server, "Mixed Case");
    assert_eq!(sqlstate(&dropped), "3D000", "{dropped}");
    drop(shop);

    // Dropped with its tables: a new database of the same name starts empty.
    let mut admin = server.connect();
    admin.batch_execute("DROP DATABASE shop").unwrap();
    let dropped = refused(&server, "shop");
    assert_eq!(sqlstate(&dropped), "3D000", "{dropped}");
    admin.batch_execute("CREATE DATABASE shop").unwrap();
    let mut shop = connect_to(&server, "shop").unwrap();
    let none = shop.query("SELECT * FROM items", &[]).unwrap_err();
    assert_eq!(sqlstate(&none), "42P01", "{none}");
    assert_eq!(values(&mut admin, "SELECT name FROM items"), ["test db"]);
    drop((admin, shop));
    server.stop();
}

#[test]
fn drop_database_with_force_ends_the_sessions_using_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut admin = server.connect();
    admin.batch_execute("CREATE DATABASE victim").unwrap();
    let mut idle = connect_to(&server, "victim").unwrap();
    idle.batch_execute("CREATE TABLE t (a int); INSERT INTO t VALUES (1)")
        .unwrap();
    let mut in_block = connect_to(&server, "victim").unwrap();
    in_block
        .batch_execute("BEGIN; INSERT INTO t VALUES (2)")
        .unwrap();
    // Without FORCE the sessions keep it.
    let error = admin.batch_execute("DROP DATABASE victim").unwrap_err();
    assert_eq!(sqlstate(&error), "55006");
    admin
        .batch_execute("DROP DATABASE victim WITH (FORCE)")
        .unwrap();
    // Both sessions were ended (FATAL 57P01, or the connection is already closed).
    for client in [&mut idle, &mut in_block] {
        let error = client.simple_query("SELECT 1").unwrap_err();
        assert!(
            error.is_closed() || sqlstate(&error) == "57P01",
            "not ended: {error}"
        );
    }
    assert_eq!(sqlstate(&refused(&server, "victim")), "3D000");
    // The name is free again, for an empty database; the dropping session goes on.
    admin.batch_execute("CREATE DATABASE victim").unwrap();
    let mut fresh = connect_to(&server, "victim").unwrap();
    let error = fresh.simple_query("SELECT * FROM t").unwrap_err();
    assert_eq!(sqlstate(&error), "42P01");
    assert_eq!(values(&mut admin, "SELECT 'alive'"), ["alive"]);
    // A database nobody uses drops with FORCE too; a missing one is 3D000 unless IF EXISTS.
    drop(fresh);
    admin
        .batch_execute("DROP DATABASE victim WITH (FORCE)")
        .unwrap();
    let error = admin
        .batch_execute("DROP DATABASE victim WITH (FORCE)")
        .unwrap_err();
    assert_eq!(sqlstate(&error), "3D000");
    admin
        .batch_execute("DROP DATABASE IF EXISTS victim WITH (FORCE)")
        .unwrap();
}

/// pg_stat_activity lists every session of the server, in every database, with PostgreSQL's
/// states and times; pg_cancel_backend and pg_terminate_backend signal one by pid (false
/// for a pid no session has), and a terminated session's connection is ended (57P01) and
/// leaves the view.
#[test]
fn pg_stat_activity_lists_sessions_and_pg_terminate_backend_ends_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut admin = server.connect();
    admin.batch_execute("CREATE DATABASE other").unwrap();
    let config = format!(
        "host={} port={} user=tester dbname=other application_name=worker",
        server.addr.ip(),
        server.addr.port()
    );
    let mut worker = postgres::Client::connect(&config, postgres::NoTls).unwrap();
    worker
        .batch_execute("CREATE TABLE t (a int); BEGIN; INSERT INTO t VALUES (1)")
        .unwrap();
    let worker_pid: i32 = worker
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    let admin_pid: i32 = admin
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    let row = admin
        .query_one(
            "SELECT datname, usename, application_name, client_addr, state, query, \
             xact_start IS NOT NULL, backend_start <= now(), backend_type \
             FROM pg_stat_activity WHERE pid = $1",
            &[&worker_pid],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "other");
    assert_eq!(row.get::<_, String>(1), "tester");
    assert_eq!(row.get::<_, String>(2), "worker");
    assert_eq!(row.get::<_, String>(3), "127.0.0.1");
    assert_eq!(row.get::<_, String>(4), "idle in transaction");
    assert_eq!(row.get::<_, String>(5), "SELECT pg_backend_pid()");
    assert!(row.get::<_, bool>(6));
    assert!(row.get::<_, bool>(7));
    assert_eq!(row.get::<_, String>(8), "client backend");
    // The asking session is active, running the query that asks.
    let row = admin
        .query_one(
            "SELECT state, query, xact_start IS NOT NULL FROM pg_stat_activity WHERE pid = $1",
            &[&admin_pid],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "active");
    // The text as sent (an extended-protocol statement: not its parsed form reprinted).
    assert_eq!(
        row.get::<_, String>(1),
        "SELECT state, query, xact_start IS NOT NULL FROM pg_stat_activity WHERE pid = $1"
    );
    // An error in the block: aborted.
    assert!(worker.batch_execute("SELECT 1/0").is_err());
    let state: String = admin
        .query_one(
            "SELECT state FROM pg_stat_activity WHERE pid = $1",
            &[&worker_pid],
        )
        .unwrap()
        .get(0);
    assert_eq!(state, "idle in transaction (aborted)");
    // The backend pid is the session's own: SQL cannot change it (55P02).
    for sql in [
        "SET hayate.backend_pid = '1'",
        "SELECT set_config('hayate.backend_pid', '1', false)",
    ] {
        let error = admin.batch_execute(sql).unwrap_err();
        assert_eq!(sqlstate(&error), "55P02", "{sql}");
    }
    let still: i32 = admin
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    assert_eq!(still, admin_pid);
    // Signals: a pid no session has is false; a cancel of an idle session is harmless.
    let none: bool = admin
        .query_one("SELECT pg_terminate_backend(123456789)", &[])
        .unwrap()
        .get(0);
    assert!(!none);
    let cancelled: bool = admin
        .query_one("SELECT pg_cancel_backend($1)", &[&worker_pid])
        .unwrap()
        .get(0);
    assert!(cancelled);
    let ended: bool = admin
        .query_one("SELECT pg_terminate_backend($1)", &[&worker_pid])
        .unwrap()
        .get(0);
    assert!(ended);
    let error = worker.simple_query("SELECT 1").unwrap_err();
    assert!(
        error.is_closed() || sqlstate(&error) == "57P01",
        "not ended: {error}"
    );
    // It leaves the view once its connection is gone.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let listed: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                &[&worker_pid],
            )
            .unwrap()
            .get(0);
        if listed == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still listed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(values(&mut admin, "SELECT 'alive'"), ["alive"]);
}

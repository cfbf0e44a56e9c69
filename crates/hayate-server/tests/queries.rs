//! Queries over several tables through the wire protocol (rust-postgres, extended protocol
//! with binary parameters): INSERT ... SELECT from generate_series, a join with a correlated
//! subquery and parameters, EXPLAIN, and the SQLSTATEs of query errors.

use crate::common;

use common::{sqlstate, TestServer};

/// The lines EXPLAIN gives for `sql`.
fn explain(client: &mut postgres::Client, sql: &str) -> Vec<String> {
    (client.query(&format!("EXPLAIN {sql}"), &[]).unwrap().iter())
        .map(|row| row.get(0))
        .collect()
}

#[test]
fn joins_and_subqueries_with_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE branches (bid int4 PRIMARY KEY, name text); \
             CREATE TABLE accounts (aid int4 PRIMARY KEY, bid int4, balance int8); \
             INSERT INTO branches SELECT b, 'branch' || b::text FROM generate_series(1, 4) AS b; \
             INSERT INTO accounts (aid, bid, balance) \
               SELECT aid, (aid - 1) / 25 + 1, aid * 3 % 17 FROM generate_series(1, 100) AS aid",
        )
        .unwrap();

    // For each branch from $1: its name, its richest account above $2, and how many
    // accounts of the branch are above $2 (a correlated scalar subquery).
    let statement = client
        .prepare(
            "SELECT b.name, a.aid, a.balance, \
                    (SELECT count(*) FROM accounts x WHERE x.bid = b.bid AND x.balance > $2) \
             FROM branches b JOIN accounts a ON a.bid = b.bid \
             WHERE b.bid >= $1 AND a.balance = (SELECT max(balance) FROM accounts y WHERE y.bid = b.bid) \
               AND a.balance > $2 \
             ORDER BY b.bid, a.aid",
        )
        .unwrap();
    let rows = client.query(&statement, &[&3i32, &10i64]).unwrap();
    let mut expected = Vec::new();
    for bid in 3..=4i32 {
        let accounts: Vec<(i32, i64)> = (1..=100)
            .filter(|aid| (aid - 1) / 25 + 1 == bid)
            .map(|aid| (aid, (aid * 3 % 17) as i64))
            .collect();
        let max = accounts.iter().map(|(_, b)| *b).max().unwrap();
        let above = accounts.iter().filter(|(_, b)| *b > 10).count() as i64;
        for (aid, balance) in &accounts {
            if *balance == max && *balance > 10 {
                expected.push((format!("branch{bid}"), *aid, *balance, above));
            }
        }
    }
    let got: Vec<(String, i32, i64, i64)> = rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(got, expected);

    // IN (subquery) with a parameter inside, and the plan of a key join.
    let rows = client
        .query(
            "SELECT count(*) FROM accounts WHERE bid IN (SELECT bid FROM branches WHERE name = $1)",
            &[&"branch2"],
        )
        .unwrap();
    assert_eq!(rows[0].get::<_, i64>(0), 25);
    let plan = explain(
        &mut client,
        "SELECT a.aid, b.name FROM accounts a JOIN branches b ON b.bid = a.bid",
    );
    assert!(
        plan.iter()
            .any(|line| line.contains("Index Nested Loop Inner Join")),
        "{plan:?}"
    );

    let error = client
        .query("SELECT (SELECT aid FROM accounts WHERE bid = $1)", &[&1i32])
        .unwrap_err();
    assert_eq!(sqlstate(&error), "21000");
    let error = client
        .query("SELECT bid FROM accounts, branches", &[])
        .unwrap_err();
    assert_eq!(sqlstate(&error), "42702");
    server.stop();
}

/// The server's automatic analysis: a table enough of whose rows changed is analyzed by
/// the background worker (naptime shortened for the test), after which its plans show
/// estimates; ANALYZE by hand over the wire, and its errors' SQLSTATEs.
#[test]
fn tables_are_analyzed_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let config = hayate_server::ServerConfig {
        autoanalyze_naptime: Some(std::time::Duration::from_millis(100)),
        ..hayate_server::ServerConfig::default()
    };
    let server = TestServer::start_with(dir.path(), config);
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE events (id int4 PRIMARY KEY, kind text); \
             CREATE INDEX events_kind ON events (kind); \
             INSERT INTO events SELECT i, CASE WHEN i % 100 = 0 THEN 'rare' ELSE 'common' END \
               FROM generate_series(1, 2000) AS i",
        )
        .unwrap();
    let count = "SELECT autoanalyze_count FROM pg_stat_user_tables WHERE relname = 'events'";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let analyzed: i64 = client.query_one(count, &[]).unwrap().get(0);
        if analyzed >= 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never analyzed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let plan = explain(&mut client, "SELECT id FROM events WHERE kind = 'common'");
    assert!(
        plan.iter()
            .any(|line| line.contains("Full Scan on events (estimated 1980 rows)")),
        "{plan:?}"
    );
    let reltuples: f64 = (client.query_one(
        "SELECT reltuples FROM pg_class WHERE relname = 'events'",
        &[],
    ))
    .unwrap()
    .get(0);
    assert_eq!(reltuples, 2000.0);
    client.batch_execute("ANALYZE events").unwrap();
    let manual: i64 = (client.query_one(
        "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'events'",
        &[],
    ))
    .unwrap()
    .get(0);
    assert_eq!(manual, 1);
    let error = client.batch_execute("ANALYZE nosuch").unwrap_err();
    assert_eq!(sqlstate(&error), "42P01");
    let error = client.batch_execute("ANALYZE events (nope)").unwrap_err();
    assert_eq!(sqlstate(&error), "42703");
}

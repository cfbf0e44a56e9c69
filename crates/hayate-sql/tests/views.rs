//! Views (issue 21): CREATE [OR REPLACE] VIEW and DROP VIEW, read wherever a table can be
//! (joins, filters, aggregates, views of views), blind to the statement's WITH queries,
//! transactional inside a block, durable across a reopen, and listed by the system catalogs
//! psql, ORMs and pg_dump read.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Session, Value};

use crate::common;
use common::{error_code, open, rows, run};

fn texts(session: &mut Session, sql: &str) -> Vec<String> {
    rows(session, sql)
        .into_iter()
        .map(|row| match &row[0] {
            Value::Text(text) => text.clone(),
            Value::Int(value) => value.to_string(),
            other => panic!("{sql}: {other:?}"),
        })
        .collect()
}

#[test]
fn views_read_like_tables_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut session) = open(dir.path());
    run(
        &mut session,
        "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL); \
         CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, total numeric(10,2)); \
         INSERT INTO customers VALUES (1, 'ann'), (2, 'bob'), (3, 'cy'); \
         INSERT INTO orders VALUES (10, 1, 50), (11, 1, 250), (12, 2, 400), (13, 3, 20)",
    );
    run(
        &mut session,
        "CREATE VIEW big_orders AS SELECT o.id, c.name, o.total FROM orders o \
         JOIN customers c ON c.id = o.customer WHERE o.total > 100",
    );
    run(
        &mut session,
        "CREATE VIEW spend (who, orders, spent) AS \
         SELECT customer, count(*), sum(total) FROM orders GROUP BY customer",
    );
    assert_eq!(
        texts(&mut session, "SELECT name FROM big_orders ORDER BY id"),
        ["ann", "bob"]
    );
    // Filters, joins and aggregates over views; a view of a view; the list of names.
    assert_eq!(
        texts(
            &mut session,
            "SELECT c.name || ':' || s.orders FROM spend s JOIN customers c ON c.id = s.who \
             WHERE s.spent >= 50 ORDER BY s.spent DESC"
        ),
        ["bob:1", "ann:2"]
    );
    run(
        &mut session,
        "CREATE VIEW top_spender AS SELECT who FROM spend ORDER BY spent DESC LIMIT 1",
    );
    assert_eq!(texts(&mut session, "SELECT who FROM top_spender"), ["2"]);
    // The view reads the table as it is now.
    run(&mut session, "INSERT INTO orders VALUES (14, 3, 1000)");
    assert_eq!(texts(&mut session, "SELECT who FROM top_spender"), ["3"]);
    // A WITH query of the statement does not hide the view's table.
    assert_eq!(
        texts(
            &mut session,
            "WITH orders AS (SELECT 99 AS id) SELECT count(*) FROM big_orders"
        ),
        ["3"]
    );

    // Names: views share the namespace of tables.
    assert_eq!(
        error_code(&mut session, "CREATE VIEW orders AS SELECT 1"),
        "42809"
    );
    assert_eq!(
        error_code(&mut session, "CREATE VIEW spend AS SELECT 1"),
        "42P07"
    );
    assert_eq!(error_code(&mut session, "DROP TABLE spend"), "42809");
    assert_eq!(error_code(&mut session, "DROP VIEW orders"), "42809");
    assert_eq!(
        error_code(&mut session, "CREATE VIEW v (a, b) AS SELECT 1"),
        "42601"
    );
    assert_eq!(
        error_code(&mut session, "CREATE VIEW v AS SELECT 1 AS a, 2 AS a"),
        "42701"
    );
    assert_eq!(
        error_code(&mut session, "CREATE VIEW v AS SELECT * FROM nowhere"),
        "42P01"
    );

    // OR REPLACE; a cycle through views is found when used.
    run(&mut session, "CREATE VIEW a AS SELECT 1 AS x");
    run(&mut session, "CREATE VIEW b AS SELECT x FROM a");
    run(&mut session, "CREATE OR REPLACE VIEW a AS SELECT x FROM b");
    assert_eq!(error_code(&mut session, "SELECT * FROM a"), "42P17");
    run(&mut session, "CREATE OR REPLACE VIEW a AS SELECT 2 AS x");
    assert_eq!(texts(&mut session, "SELECT x FROM b"), ["2"]);

    // Transactional: rolled back with the block.
    run(
        &mut session,
        "BEGIN; CREATE VIEW later AS SELECT 1 AS one; DROP VIEW b",
    );
    assert_eq!(texts(&mut session, "SELECT one FROM later"), ["1"]);
    run(&mut session, "ROLLBACK");
    assert_eq!(error_code(&mut session, "SELECT * FROM later"), "42P01");
    assert_eq!(texts(&mut session, "SELECT x FROM b"), ["2"]);
    run(&mut session, "DROP VIEW IF EXISTS later, b");
    assert_eq!(error_code(&mut session, "DROP VIEW b"), "42P01");

    // The system catalogs.
    assert_eq!(
        texts(
            &mut session,
            "SELECT relname::text FROM pg_class WHERE relkind = 'v' AND relnamespace = 2200 \
             ORDER BY 1"
        ),
        ["a", "big_orders", "spend", "top_spender"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT attname::text FROM pg_attribute WHERE attrelid = 'spend'::regclass \
             ORDER BY attnum"
        ),
        ["who", "orders", "spent"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_type = 'VIEW' AND table_schema = 'public' ORDER BY 1"
        ),
        ["a", "big_orders", "spend", "top_spender"]
    );
    let definition = texts(
        &mut session,
        "SELECT pg_get_viewdef('top_spender'::regclass, true)",
    );
    assert!(definition[0].contains("FROM spend"), "{definition:?}");
    assert_eq!(
        texts(
            &mut session,
            "SELECT viewname::text FROM pg_views ORDER BY 1"
        ),
        ["a", "big_orders", "spend", "top_spender"]
    );

    drop(session);
    db.close().unwrap();
    let (db, mut session) = open(dir.path());
    assert_eq!(
        texts(&mut session, "SELECT name FROM big_orders ORDER BY id"),
        ["ann", "bob", "cy"]
    );
    assert_eq!(texts(&mut session, "SELECT x FROM a"), ["2"]);
    drop(session);
    db.close().unwrap();
}

#[test]
fn pg_tables_pg_indexes_and_pg_sequences_as_postgresql() {
    // Rows equal to PostgreSQL 15's for the same schema (checked through psql side by side).
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let mut s = Session::new(Catalog::open(db).unwrap(), "tester");
    for sql in [
        "CREATE TABLE p (id int PRIMARY KEY, code text UNIQUE)",
        "CREATE TABLE c (id serial PRIMARY KEY, pid int REFERENCES p (id))",
        "CREATE TABLE plain (x int)",
        "CREATE INDEX c_pid ON c (pid)",
        "CREATE SEQUENCE s START 10 INCREMENT 5 MAXVALUE 1000 CYCLE",
    ] {
        run(&mut s, sql);
    }
    let lines = |s: &mut Session, sql: &str| -> Vec<String> {
        rows(s, sql)
            .iter()
            .map(|row| {
                row.iter()
                    .map(|value| value.to_text().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect()
    };
    assert_eq!(
        lines(
            &mut s,
            "SELECT schemaname, tablename, tablespace, hasindexes, hasrules, hastriggers, \
             rowsecurity FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        ),
        [
            "public|c||t|f|t|f",
            "public|p||t|f|t|f",
            "public|plain||f|f|f|f"
        ]
    );
    assert_eq!(
        lines(
            &mut s,
            "SELECT tablename, indexname, indexdef FROM pg_indexes \
             WHERE schemaname = 'public' ORDER BY indexname"
        ),
        [
            "c|c_pid|CREATE INDEX c_pid ON public.c USING btree (pid)",
            "c|c_pkey|CREATE UNIQUE INDEX c_pkey ON public.c USING btree (id)",
            "p|p_code_key|CREATE UNIQUE INDEX p_code_key ON public.p USING btree (code)",
            "p|p_pkey|CREATE UNIQUE INDEX p_pkey ON public.p USING btree (id)",
        ]
    );
    let sequences = "SELECT sequencename, data_type, start_value, min_value, max_value, \
                     increment_by, cycle, cache_size, last_value FROM pg_sequences \
                     ORDER BY sequencename";
    assert_eq!(
        lines(&mut s, sequences),
        [
            "c_id_seq|integer|1|1|2147483647|1|f|1|",
            "s|bigint|10|1|1000|5|t|1|"
        ]
    );
    run(&mut s, "SELECT nextval('s')");
    run(&mut s, "INSERT INTO p VALUES (1, 'a')");
    run(&mut s, "INSERT INTO c (pid) VALUES (1)");
    assert_eq!(
        lines(
            &mut s,
            "SELECT sequencename, last_value FROM pg_sequences ORDER BY sequencename"
        ),
        ["c_id_seq|1", "s|10"]
    );
}

//! Sequences as PostgreSQL users see them: nextval/currval/setval/lastval on a SERIAL
//! column's sequence and on CREATE SEQUENCE ones, with PostgreSQL's SQLSTATEs, values that
//! never repeat across rollbacks, restarts and crashes, and the catalog rows psql reads.

use std::sync::Arc;

use hayate_engine::{Database, DatabaseConfig, SimConfig, SimIo};
use hayate_sql::{Catalog, Outcome, Session, Value};

use crate::common;
use common::{rows, run, try_run};

fn session_on(catalog: &Arc<Catalog>) -> Session {
    Session::new(catalog.clone(), "tester")
}

fn open(dir: &std::path::Path) -> Arc<Catalog> {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    Catalog::open(db).unwrap()
}

fn ints(session: &mut Session, sql: &str) -> Vec<i64> {
    rows(session, sql)
        .into_iter()
        .flatten()
        .map(|value| match value {
            Value::Int(v) => v,
            other => panic!("{sql}: {other:?}"),
        })
        .collect()
}

fn code(session: &mut Session, sql: &str) -> &'static str {
    try_run(session, sql)
        .map(|outcome| panic!("{sql}: expected an error, got {outcome:?}"))
        .unwrap_err()
        .code
}

#[test]
fn a_serial_columns_sequence_is_reachable_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let mut session = session_on(&catalog);
    run(
        &mut session,
        "CREATE TABLE t (id serial PRIMARY KEY, v text)",
    );
    assert_eq!(code(&mut session, "SELECT currval('t_id_seq')"), "55000");
    assert_eq!(code(&mut session, "SELECT lastval()"), "55000");
    run(&mut session, "INSERT INTO t (v) VALUES ('a')");
    // The column default counts as a nextval of the session.
    assert_eq!(ints(&mut session, "SELECT currval('t_id_seq')"), vec![1]);
    assert_eq!(ints(&mut session, "SELECT lastval()"), vec![1]);
    assert_eq!(
        ints(
            &mut session,
            "SELECT nextval('t_id_seq'), nextval('public.t_id_seq'::regclass)"
        ),
        vec![2, 3]
    );
    assert_eq!(
        ints(&mut session, "INSERT INTO t (v) VALUES ('b') RETURNING id"),
        vec![4]
    );
    assert_eq!(
        ints(&mut session, "SELECT currval('t_id_seq'), lastval()"),
        vec![4, 4]
    );
    // A value of one row per call, also as a parameter.
    assert_eq!(
        ints(
            &mut session,
            "SELECT nextval('t_id_seq') FROM generate_series(1, 3)"
        ),
        vec![5, 6, 7]
    );
    let prepared = session
        .prepare(
            hayate_sql::parse("SELECT nextval($1)").unwrap().remove(0),
            &[],
        )
        .unwrap();
    let outcome = session
        .execute(&prepared, vec![Value::Text("t_id_seq".into())])
        .unwrap();
    let Outcome::Rows { rows, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(rows, vec![vec![Value::Int(8)]]);
    // setval moves the column's default too.
    assert_eq!(
        ints(&mut session, "SELECT setval('t_id_seq', 100)"),
        vec![100]
    );
    assert_eq!(
        ints(&mut session, "INSERT INTO t (v) VALUES ('c') RETURNING id"),
        vec![101]
    );
    // currval and lastval belong to the session.
    let mut other = session_on(&catalog);
    assert_eq!(code(&mut other, "SELECT currval('t_id_seq')"), "55000");
    assert_eq!(code(&mut other, "SELECT lastval()"), "55000");
    // The sequence goes with its table only.
    assert_eq!(code(&mut session, "DROP SEQUENCE t_id_seq"), "2BP01");
    run(&mut session, "DROP TABLE t");
    assert_eq!(code(&mut session, "SELECT nextval('t_id_seq')"), "42P01");
}

#[test]
fn create_sequence_options_limits_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let mut session = session_on(&catalog);
    let tag = run(
        &mut session,
        "CREATE SEQUENCE s INCREMENT BY 5 MAXVALUE 20 START WITH 10 CACHE 10 NO CYCLE",
    );
    assert_eq!(
        tag,
        Outcome::Command {
            tag: "CREATE SEQUENCE".into()
        }
    );
    assert_eq!(code(&mut session, "CREATE SEQUENCE s"), "42P07");
    run(&mut session, "CREATE SEQUENCE IF NOT EXISTS s");
    assert_eq!(
        ints(
            &mut session,
            "SELECT nextval('s'), nextval('s'), nextval('s')"
        ),
        vec![10, 15, 20]
    );
    assert_eq!(code(&mut session, "SELECT nextval('s')"), "2200H");
    assert_eq!(ints(&mut session, "SELECT lastval()"), vec![20]);
    // setval(v) makes the next value v + increment; setval(v, false) makes it v.
    assert_eq!(
        ints(&mut session, "SELECT setval('s', 12), currval('s')"),
        vec![12, 12]
    );
    assert_eq!(ints(&mut session, "SELECT nextval('s')"), vec![17]);
    assert_eq!(
        ints(&mut session, "SELECT setval('s', 11, false), nextval('s')"),
        vec![11, 11]
    );
    assert_eq!(code(&mut session, "SELECT setval('s', 100)"), "22003");
    // Descending sequences count down from their MAXVALUE.
    run(
        &mut session,
        "CREATE SEQUENCE down INCREMENT -1 MINVALUE -2",
    );
    assert_eq!(
        ints(&mut session, "SELECT nextval('down'), nextval('down')"),
        vec![-1, -2]
    );
    assert_eq!(code(&mut session, "SELECT nextval('down')"), "2200H");
    // Bad definitions and unknown names.
    assert_eq!(
        code(&mut session, "CREATE SEQUENCE bad MINVALUE 5 MAXVALUE 5"),
        "22023"
    );
    assert_eq!(
        code(&mut session, "CREATE SEQUENCE bad INCREMENT 0"),
        "22023"
    );
    assert_eq!(code(&mut session, "SELECT nextval('nope')"), "42P01");
    assert_eq!(code(&mut session, "SELECT currval('nope')"), "42P01");
    // A sequence shares the relations' namespace.
    assert_eq!(code(&mut session, "CREATE TABLE s (a int)"), "42P07");
    run(&mut session, "DROP SEQUENCE s, down");
    assert_eq!(code(&mut session, "DROP SEQUENCE s"), "42P01");
    run(&mut session, "DROP SEQUENCE IF EXISTS s");
    assert_eq!(code(&mut session, "SELECT nextval('s')"), "42P01");
    run(&mut session, "CREATE SEQUENCE s");
    assert_eq!(ints(&mut session, "SELECT nextval('s')"), vec![1]);
}

#[test]
fn nextval_is_not_transactional_and_survives_restarts_and_crashes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let catalog = open(dir.path());
        let mut session = session_on(&catalog);
        run(&mut session, "CREATE SEQUENCE s INCREMENT BY 10");
        run(&mut session, "BEGIN");
        assert_eq!(ints(&mut session, "SELECT nextval('s')"), vec![1]);
        run(&mut session, "ROLLBACK");
        // The rolled back transaction did not give its value back.
        assert_eq!(ints(&mut session, "SELECT nextval('s')"), vec![11]);
        // CREATE SEQUENCE commits on its own: it outlives a rolled back block.
        run(&mut session, "BEGIN");
        run(&mut session, "CREATE SEQUENCE in_block");
        run(&mut session, "ROLLBACK");
    }
    let catalog = open(dir.path());
    let mut session = session_on(&catalog);
    // The options survive and no value is handed out again.
    let after = ints(&mut session, "SELECT nextval('s'), nextval('s')");
    assert!(after[0] > 11 && after[1] == after[0] + 10, "{after:?}");
    assert_eq!(ints(&mut session, "SELECT nextval('in_block')"), vec![1]);
    drop(session);
    drop(catalog);

    let io = Arc::new(SimIo::new(SimConfig::with_seed(7)));
    let db = Database::open_with_io(io.clone(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = session_on(&catalog);
    run(&mut session, "CREATE SEQUENCE c START 100");
    let before = ints(&mut session, "SELECT nextval('c'), nextval('c')");
    assert_eq!(before, vec![100, 101]);
    run(&mut session, "SELECT setval('c', 500)");
    let image = Arc::new(io.crash());
    drop(session);
    drop(catalog);
    let db = Database::open_with_io(image, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = session_on(&catalog);
    assert_eq!(ints(&mut session, "SELECT nextval('c')"), vec![501]);
}

#[test]
fn psql_sees_sequences_and_serial_defaults_as_postgresql_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let mut session = session_on(&catalog);
    run(
        &mut session,
        "CREATE TABLE t (id serial PRIMARY KEY, v text)",
    );
    run(&mut session, "CREATE SEQUENCE s");
    // psql's \ds.
    let listed = rows(
        &mut session,
        "SELECT c.relname FROM pg_catalog.pg_class c \
         LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE c.relkind IN ('S','') AND n.nspname <> 'pg_catalog' \
         AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1",
    );
    assert_eq!(
        listed,
        vec![
            vec![Value::Text("s".into())],
            vec![Value::Text("t_id_seq".into())]
        ]
    );
    // \d t's Default column (psql 15's query).
    let defaults = rows(
        &mut session,
        "SELECT a.attname, \
         (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true) \
          FROM pg_catalog.pg_attrdef d \
          WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef), \
         a.attidentity \
         FROM pg_catalog.pg_attribute a \
         WHERE a.attrelid = 't'::regclass AND a.attnum > 0 AND NOT a.attisdropped \
         ORDER BY a.attnum",
    );
    let text = |s: &str| Value::Text(s.into());
    assert_eq!(
        defaults,
        vec![
            vec![text("id"), text("nextval('t_id_seq'::regclass)"), text("")],
            vec![text("v"), Value::Null, text("")]
        ]
    );
    run(
        &mut session,
        "CREATE TABLE i (id int8 GENERATED ALWAYS AS IDENTITY, v text)",
    );
    let identity = rows(
        &mut session,
        "SELECT a.attidentity, a.atthasdef FROM pg_catalog.pg_attribute a \
         WHERE a.attrelid = 'i'::regclass AND a.attnum = 1",
    );
    assert_eq!(identity, vec![vec![text("a"), Value::Bool(false)]]);
    // The default as text works as an expression too.
    assert_eq!(
        ints(&mut session, "SELECT nextval('t_id_seq'::regclass)"),
        vec![1]
    );
}

#[test]
fn insert_select_fills_serial_columns() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let mut session = session_on(&catalog);
    run(
        &mut session,
        "CREATE TABLE t (id bigserial PRIMARY KEY, v int4)",
    );
    run(
        &mut session,
        "INSERT INTO t (v) SELECT g FROM generate_series(1, 3) g",
    );
    assert_eq!(
        ints(&mut session, "SELECT id, v FROM t ORDER BY id"),
        vec![1, 1, 2, 2, 3, 3]
    );
    assert_eq!(ints(&mut session, "SELECT currval('t_id_seq')"), vec![3]);
}

/// pg_get_serial_sequence names a SERIAL/identity column's sequence and an OWNED BY one
/// (NULL for a column without), and resets it as loaddata and sqlsequencereset do.
#[test]
fn pg_get_serial_sequence_finds_a_columns_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let mut session = session_on(&catalog);
    run(
        &mut session,
        "CREATE TABLE t (id serial PRIMARY KEY, n int GENERATED BY DEFAULT AS IDENTITY, v int)",
    );
    run(&mut session, "CREATE SEQUENCE own OWNED BY t.v");
    let names = rows(
        &mut session,
        "SELECT pg_get_serial_sequence('\"t\"', 'id'), pg_get_serial_sequence('public.t', 'v'), \
         pg_get_serial_sequence('T', 'n') IS NOT NULL, pg_get_serial_sequence('t', 'n') <> \
         pg_get_serial_sequence('t', 'id')",
    );
    assert_eq!(
        names,
        vec![vec![
            Value::Text("public.t_id_seq".into()),
            Value::Text("public.own".into()),
            Value::Bool(true),
            Value::Bool(true),
        ]]
    );
    run(&mut session, "INSERT INTO t (id) VALUES (5000)");
    run(
        &mut session,
        "SELECT setval(pg_get_serial_sequence('\"t\"','id'), coalesce(max(\"id\"), 1), \
         max(\"id\") IS NOT null) FROM \"t\"",
    );
    assert_eq!(
        ints(&mut session, "INSERT INTO t DEFAULT VALUES RETURNING id"),
        vec![5001]
    );
    assert_eq!(
        code(&mut session, "SELECT pg_get_serial_sequence('nope', 'id')"),
        "42P01"
    );
    // A name that needs quotes comes back quoted, so that setval can read it.
    run(&mut session, "CREATE TABLE \"Foo\" (id serial PRIMARY KEY)");
    assert_eq!(
        rows(
            &mut session,
            "SELECT pg_get_serial_sequence('\"Foo\"', 'id')"
        ),
        vec![vec![Value::Text("public.\"Foo_id_seq\"".into())]]
    );
    run(
        &mut session,
        "SELECT setval(pg_get_serial_sequence('\"Foo\"', 'id'), 41)",
    );
    assert_eq!(
        ints(
            &mut session,
            "INSERT INTO \"Foo\" DEFAULT VALUES RETURNING id"
        ),
        vec![42]
    );
    assert_eq!(
        code(&mut session, "SELECT pg_get_serial_sequence('t', 'ID')"),
        "42703"
    );
}

#[test]
fn alter_sequence_changes_options_restarts_and_cycles_as_postgresql_does() {
    // Every value and error below is what PostgreSQL 15 gives for the same statements.
    let dir = tempfile::tempdir().unwrap();
    {
        let catalog = open(dir.path());
        let mut session = session_on(&catalog);
        run(
            &mut session,
            "CREATE SEQUENCE c INCREMENT 2 MINVALUE 1 MAXVALUE 5 CYCLE",
        );
        assert_eq!(
            ints(
                &mut session,
                "SELECT nextval('c'), nextval('c'), nextval('c'), nextval('c'), nextval('c')"
            ),
            vec![1, 3, 5, 1, 3]
        );
        let catalog_row = rows(
            &mut session,
            "SELECT seqcycle, seqincrement, seqmax FROM pg_sequence \
             WHERE seqrelid = 'c'::regclass",
        );
        assert_eq!(
            catalog_row,
            vec![vec![Value::Bool(true), Value::Int(2), Value::Int(5)]]
        );
        run(&mut session, "ALTER SEQUENCE c NO CYCLE");
        assert_eq!(ints(&mut session, "SELECT nextval('c')"), vec![5]);
        assert_eq!(code(&mut session, "SELECT nextval('c')"), "2200H");
        run(&mut session, "ALTER SEQUENCE c RESTART");
        assert_eq!(ints(&mut session, "SELECT nextval('c')"), vec![1]);
        run(&mut session, "ALTER SEQUENCE c RESTART WITH 4");
        assert_eq!(ints(&mut session, "SELECT nextval('c')"), vec![4]);
        // A new increment steps from the last value handed out.
        run(
            &mut session,
            "ALTER SEQUENCE c INCREMENT BY 10 MAXVALUE 100",
        );
        assert_eq!(ints(&mut session, "SELECT nextval('c')"), vec![14]);
        // The current value and a restart must lie within the bounds.
        assert_eq!(code(&mut session, "ALTER SEQUENCE c MAXVALUE 3"), "22023");
        assert_eq!(
            code(&mut session, "ALTER SEQUENCE c RESTART WITH 200"),
            "22023"
        );
        // A new type keeps a chosen bound and moves a default one.
        run(&mut session, "ALTER SEQUENCE c AS smallint");
        run(&mut session, "CREATE SEQUENCE d AS integer");
        run(&mut session, "ALTER SEQUENCE d AS bigint");
        let bounds = rows(
            &mut session,
            "SELECT seqmax, seqtypid::regtype::text FROM pg_sequence \
             WHERE seqrelid IN ('c'::regclass, 'd'::regclass) ORDER BY seqmax",
        );
        assert_eq!(
            bounds,
            vec![
                vec![Value::Int(100), Value::Text("smallint".into())],
                vec![Value::Int(i64::MAX), Value::Text("bigint".into())],
            ]
        );
        // Descending and cycling.
        run(
            &mut session,
            "CREATE SEQUENCE down INCREMENT -1 MINVALUE -3 MAXVALUE -1 CYCLE",
        );
        assert_eq!(
            ints(
                &mut session,
                "SELECT nextval('down'), nextval('down'), nextval('down'), nextval('down')"
            ),
            vec![-1, -2, -3, -1]
        );
        run(&mut session, "ALTER SEQUENCE IF EXISTS nope RESTART");
        assert_eq!(code(&mut session, "ALTER SEQUENCE nope RESTART"), "42P01");
        // A SERIAL column's sequence restarts, but its options follow the column.
        run(&mut session, "CREATE TABLE t (id serial)");
        run(&mut session, "ALTER SEQUENCE t_id_seq RESTART WITH 50");
        run(&mut session, "INSERT INTO t DEFAULT VALUES");
        assert_eq!(ints(&mut session, "SELECT id FROM t"), vec![50]);
        assert_eq!(
            code(&mut session, "ALTER SEQUENCE t_id_seq INCREMENT 5"),
            "0A000"
        );
        assert_eq!(code(&mut session, "ALTER SEQUENCE c RENAME TO e"), "0A000");
    }
    // The options, CYCLE included, survive a restart (values reserved in memory are
    // skipped at a restart, so `down` starts its cycle again).
    let catalog = open(dir.path());
    let mut session = session_on(&catalog);
    assert_eq!(
        ints(
            &mut session,
            "SELECT nextval('down'), nextval('down'), nextval('down'), nextval('down')"
        ),
        vec![-1, -2, -3, -1]
    );
    let options = rows(
        &mut session,
        "SELECT seqincrement, seqmax, seqcycle, seqtypid::regtype::text FROM pg_sequence \
         WHERE seqrelid = 'c'::regclass",
    );
    assert_eq!(
        options,
        vec![vec![
            Value::Int(10),
            Value::Int(100),
            Value::Bool(false),
            Value::Text("smallint".into())
        ]]
    );
}

#[test]
fn last_value_and_is_called_follow_restarts_setval_and_alter_as_postgresql() {
    // What pg_dump reads (`SELECT last_value, is_called FROM s`), as PostgreSQL 15 gives it
    // for the same statements: a restarted or setval(.., false) sequence is not called, so
    // a dump restores it to the same next value.
    let dir = tempfile::tempdir().unwrap();
    let catalog = open(dir.path());
    let mut session = session_on(&catalog);
    let state = |session: &mut Session, name: &str| {
        rows(
            session,
            &format!("SELECT last_value, is_called FROM {name}"),
        )
    };
    let shown = |value: i64, called: bool| vec![vec![Value::Int(value), Value::Bool(called)]];
    run(&mut session, "CREATE SEQUENCE s2 START 100");
    assert_eq!(state(&mut session, "s2"), shown(100, false));
    run(&mut session, "ALTER SEQUENCE s2 INCREMENT 2");
    assert_eq!(state(&mut session, "s2"), shown(100, false));
    run(&mut session, "ALTER SEQUENCE s2 RESTART WITH 5 MINVALUE 1");
    assert_eq!(state(&mut session, "s2"), shown(5, false));
    assert_eq!(ints(&mut session, "SELECT nextval('s2')"), vec![5]);
    assert_eq!(state(&mut session, "s2"), shown(5, true));
    run(&mut session, "SELECT setval('s2', 7, false)");
    assert_eq!(state(&mut session, "s2"), shown(7, false));
    assert_eq!(
        rows(
            &mut session,
            "SELECT pg_sequence_last_value('s2'::regclass)"
        ),
        vec![vec![Value::Null]]
    );
    run(&mut session, "CREATE SEQUENCE s3 START 5");
    run(&mut session, "ALTER SEQUENCE s3 RESTART WITH 1");
    assert_eq!(state(&mut session, "s3"), shown(1, false));
    // A cycle whose bound is bigint's last value wraps instead of failing.
    run(
        &mut session,
        "CREATE SEQUENCE big MAXVALUE 9223372036854775807 START 9223372036854775806 CYCLE",
    );
    assert_eq!(
        ints(
            &mut session,
            "SELECT nextval('big'), nextval('big'), nextval('big')"
        ),
        vec![i64::MAX - 1, i64::MAX, 1]
    );
}

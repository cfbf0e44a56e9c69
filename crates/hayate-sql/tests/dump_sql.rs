//! The SQL pg_dump and PostgreSQL's dumps send, each able to fail on its own: WITH
//! RECURSIVE, array_agg, set-returning functions in FROM, LOCK TABLE, a sequence read as a
//! relation, ALTER TABLE ... ALTER COLUMN, ALTER SEQUENCE ... OWNED BY, CREATE SEQUENCE with
//! its options in any order, OWNER TO, quote_ident/quote_literal, tableoid and pg_depend.
//! (The whole pg_dump round trip, against real pg_dump, psql and PostgreSQL, is
//! crates/hayate-server/tests/pg_dump.rs.)

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Session};

use crate::common;
use common::{error_code, rows, run};

fn session(dir: &std::path::Path) -> Session {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    Session::new(Catalog::open(db).unwrap(), "tester")
}

fn texts(session: &mut Session, sql: &str) -> Vec<String> {
    rows(session, sql)
        .into_iter()
        .map(|row| {
            row.iter()
                .map(|value| value.to_text().unwrap_or_else(|| "NULL".into()))
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

#[test]
fn with_recursive_runs_to_a_fixed_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    assert_eq!(
        texts(
            &mut s,
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5) \
             SELECT sum(x) FROM n"
        ),
        ["15"]
    );
    // A tree walked from its root; UNION (not ALL) stops on a cycle.
    run(
        &mut s,
        "CREATE TABLE edge (parent int, child int); \
         INSERT INTO edge VALUES (1, 2), (1, 3), (3, 4), (4, 1)",
    );
    assert_eq!(
        texts(
            &mut s,
            "WITH RECURSIVE reach AS (SELECT 1 AS node UNION \
             SELECT e.child FROM reach r JOIN edge e ON e.parent = r.node) \
             SELECT node FROM reach ORDER BY node"
        ),
        ["1", "2", "3", "4"]
    );
    // An endless recursion ends at the LIMIT.
    assert_eq!(
        texts(
            &mut s,
            "WITH RECURSIVE forever AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM forever) \
             SELECT x FROM forever LIMIT 3"
        ),
        ["1", "2", "3"]
    );
    // Not recursive after all: an ordinary WITH query.
    assert_eq!(
        texts(
            &mut s,
            "WITH RECURSIVE t AS (SELECT 7 AS v) SELECT v FROM t"
        ),
        ["7"]
    );
}

#[test]
fn arrays_and_functions_in_from() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    run(
        &mut s,
        "CREATE TABLE t (k int PRIMARY KEY, v text); \
         INSERT INTO t VALUES (1, 'a'), (2, NULL), (3, 'c')",
    );
    assert_eq!(
        texts(
            &mut s,
            "SELECT array_agg(v) FROM (SELECT v FROM t ORDER BY k) s"
        ),
        ["{a,NULL,c}"]
    );
    assert_eq!(
        texts(&mut s, "SELECT array_agg(v) FROM t WHERE k > 9"),
        ["NULL"]
    );
    // unnest in FROM, joined; a scalar function's column takes the alias's name.
    assert_eq!(
        texts(
            &mut s,
            "SELECT t.v FROM unnest('{3,1}'::oid[]) AS src(id) JOIN t ON t.k = src.id \
             ORDER BY t.k"
        ),
        ["a", "c"]
    );
    assert_eq!(
        texts(&mut s, "SELECT o FROM unnest('{x,y}'::text[]) o"),
        ["x", "y"]
    );
    assert_eq!(
        texts(
            &mut s,
            "SELECT option_name || '=' || option_value FROM pg_options_to_table('{a=1,b=x=y}')"
        ),
        ["a=1", "b=x=y"]
    );
    assert_eq!(
        texts(&mut s, "SELECT array_remove('{1,2,1}', '1')"),
        ["{2}"]
    );
    assert_eq!(
        texts(
            &mut s,
            "SELECT quote_ident('plain') || ' ' || quote_ident('Mixed') || ' ' || \
             quote_ident('select') || ' ' || quote_literal('it''s')"
        ),
        ["plain \"Mixed\" \"select\" 'it''s'"]
    );
    assert_eq!(
        texts(&mut s, "SELECT true::text || false::text"),
        ["truefalse"]
    );
}

#[test]
fn sequences_locks_and_alter_column() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    // pg_dump's order of the options, and OWNED BY.
    run(
        &mut s,
        "CREATE TABLE a (id integer NOT NULL, name text); \
         CREATE SEQUENCE public.a_id_seq AS integer START WITH 10 INCREMENT BY 5 \
         NO MINVALUE NO MAXVALUE CACHE 1",
    );
    run(
        &mut s,
        "ALTER SEQUENCE public.a_id_seq OWNED BY public.a.id",
    );
    run(
        &mut s,
        "ALTER TABLE ONLY public.a ALTER COLUMN id SET DEFAULT nextval('a_id_seq'::regclass)",
    );
    run(&mut s, "ALTER TABLE public.a OWNER TO someone");
    run(&mut s, "ALTER TABLE public.a_id_seq OWNER TO someone");
    run(&mut s, "ALTER SCHEMA public OWNER TO someone");
    run(&mut s, "INSERT INTO a (name) VALUES ('x'), ('y')");
    assert_eq!(texts(&mut s, "SELECT id FROM a ORDER BY id"), ["10", "15"]);
    // The sequence as a relation, as pg_dump reads it.
    assert_eq!(
        texts(&mut s, "SELECT last_value, is_called FROM public.a_id_seq"),
        ["15|t"]
    );
    run(&mut s, "CREATE SEQUENCE fresh START 3");
    assert_eq!(
        texts(&mut s, "SELECT last_value, is_called FROM fresh"),
        ["3|f"]
    );
    // pg_depend: the sequence is owned by a.id ('a'), the default reads it ('n').
    assert_eq!(
        texts(
            &mut s,
            "SELECT d.deptype FROM pg_depend d WHERE d.objid = 'a_id_seq'::regclass \
             AND d.refobjid = 'a'::regclass AND d.refobjsubid = 1"
        ),
        ["a"]
    );
    assert_eq!(
        texts(
            &mut s,
            "SELECT count(*) FROM pg_depend WHERE classid = 'pg_attrdef'::regclass \
             AND refobjid = 'a_id_seq'::regclass AND deptype = 'n'"
        ),
        ["1"]
    );
    assert_eq!(
        texts(&mut s, "SELECT DISTINCT tableoid FROM pg_class"),
        ["1259"]
    );
    // ALTER COLUMN: DROP DEFAULT, SET NOT NULL checks the rows.
    run(&mut s, "ALTER TABLE a ALTER COLUMN id DROP DEFAULT");
    assert_eq!(
        error_code(&mut s, "INSERT INTO a (name) VALUES ('z')"),
        "23502"
    );
    run(&mut s, "INSERT INTO a VALUES (20, NULL)");
    assert_eq!(
        error_code(&mut s, "ALTER TABLE a ALTER COLUMN name SET NOT NULL"),
        "23502"
    );
    run(&mut s, "DELETE FROM a WHERE name IS NULL");
    run(&mut s, "ALTER TABLE a ALTER COLUMN name SET NOT NULL");
    assert_eq!(
        error_code(&mut s, "INSERT INTO a VALUES (1, NULL)"),
        "23502"
    );
    // LOCK TABLE: only in a block.
    assert_eq!(
        error_code(&mut s, "LOCK TABLE a IN ACCESS SHARE MODE"),
        "25P01"
    );
    run(
        &mut s,
        "BEGIN; LOCK TABLE a IN ACCESS SHARE MODE; LOCK TABLE public.a; COMMIT",
    );
    assert_eq!(error_code(&mut s, "BEGIN; LOCK TABLE nowhere"), "42P01");
    run(&mut s, "ROLLBACK");
    // DROP TABLE drops the sequences its columns own.
    run(&mut s, "DROP TABLE a");
    assert_eq!(error_code(&mut s, "SELECT nextval('a_id_seq')"), "42P01");
    assert_eq!(texts(&mut s, "SELECT nextval('fresh')"), ["3"]);
    assert_eq!(
        error_code(&mut s, "CREATE SEQUENCE s START 1 START 2"),
        "42601",
        "a repeated option"
    );
}

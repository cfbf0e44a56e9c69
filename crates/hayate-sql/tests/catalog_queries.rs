//! The catalog queries real tools send, captured from PostgreSQL 15 (`tests/fixtures/*.sql`:
//! psql -E for \d, \dt, \d t, \l, \dn, \di; log_statement=all for pgbench, JDBC 42.5 and
//! psycopg 3), run against Hayate with the same table the capture used. (sysbench's pgsql
//! driver sends no catalog queries: its prepare/run/cleanup logged only DDL and DML.)
//!
//! Every captured query is in `WORKING`: it runs here and its result is checked.

use std::collections::BTreeMap;

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{parse, Catalog, Outcome, Session, Value};

const FIXTURES: &[(&str, &str)] = &[
    ("psql15", include_str!("fixtures/psql15.sql")),
    ("pgbench15", include_str!("fixtures/pgbench15.sql")),
    ("jdbc42", include_str!("fixtures/jdbc42.sql")),
    ("psycopg3", include_str!("fixtures/psycopg3.sql")),
];

/// Captured queries that run; their results are checked.
const WORKING: &[&str] = &[
    "psql15/d_t_statistics",
    "psql15/l_databases",
    "psql15/dn_schemas",
    "pgbench15/run_scale",
    "psycopg3/type_info_fetch",
    "psql15/d_list",
    "psql15/dt_list",
    "psql15/d_t_lookup",
    "psql15/d_t_relation",
    "psql15/d_t_columns",
    "psql15/d_t_indexes",
    "psql15/d_t_inherits",
    "psql15/d_t_partitions",
    "psql15/di_indexes",
    "jdbc42/resultset_metadata_columns",
    "jdbc42/dbmd_get_tables",
    "jdbc42/type_by_oid",
    "jdbc42/type_is_array_by_oid",
    "psql15/d_t_policies",
    "psql15/d_t_publications",
    "pgbench15/run_partitions",
    "jdbc42/dbmd_get_columns",
    "jdbc42/dbmd_get_primary_keys",
];

/// The captured queries by "fixture/name".
fn fixtures() -> BTreeMap<String, String> {
    let mut queries = BTreeMap::new();
    for (fixture, text) in FIXTURES {
        let mut current: Option<(String, String)> = None;
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("-- query: ") {
                if let Some((name, sql)) = current.take() {
                    queries.insert(name, sql);
                }
                current = Some((format!("{fixture}/{}", name.trim()), String::new()));
            } else if let Some((_, sql)) = &mut current {
                sql.push_str(line);
                sql.push('\n');
            }
        }
        if let Some((name, sql)) = current {
            queries.insert(name, sql);
        }
    }
    queries
}

struct Setup {
    _dir: tempfile::TempDir,
    session: Session,
    /// The oid of table t.
    t_oid: i64,
}

/// The table of the capture (less its secondary index, which needs CREATE INDEX) and the
/// pgbench tables' branch table.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = Session::new(catalog, "tester");
    run(
        &mut session,
        "CREATE TABLE t (id int4 PRIMARY KEY, name varchar(20) NOT NULL DEFAULT 'x', v int8)",
    );
    run(
        &mut session,
        "CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int)",
    );
    run(&mut session, "INSERT INTO pgbench_branches VALUES (1, 0)");
    let rows = query(
        &mut session,
        "SELECT oid FROM pg_catalog.pg_class WHERE relname = 't'",
    );
    let [row] = rows.as_slice() else {
        panic!("one pg_class row for t: {rows:?}");
    };
    let Value::Int(t_oid) = row[0] else {
        panic!("oid {:?}", row[0]);
    };
    Setup {
        _dir: dir,
        session,
        t_oid,
    }
}

fn run(session: &mut Session, sql: &str) -> Outcome {
    let mut outcomes = session.execute_sql(sql);
    assert_eq!(outcomes.len(), 1, "{sql}");
    outcomes
        .pop()
        .unwrap()
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
}

fn query(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match run(session, sql) {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

fn text(value: &str) -> Value {
    Value::Text(value.into())
}

/// Runs a captured query with the capture's oid of t replaced by ours, and `params` bound.
fn run_captured(
    setup: &mut Setup,
    sql: &str,
    params: Vec<Value>,
) -> hayate_sql::SqlResult<Vec<Vec<Value>>> {
    let sql = sql.replace("16385", &setup.t_oid.to_string());
    let statement = parse(&sql)?.pop().expect("one statement");
    let prepared = setup.session.prepare(statement, &[])?;
    match setup.session.execute(&prepared, params)? {
        Outcome::Rows { rows, .. } => Ok(rows),
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

#[test]
fn every_captured_query_is_listed_once() {
    let queries = fixtures();
    assert!(queries.len() >= 20, "{queries:?}");
    for name in queries.keys() {
        let listed = WORKING.iter().filter(|w| **w == name.as_str()).count();
        assert_eq!(listed, 1, "{name} must be in WORKING once");
    }
    for name in WORKING {
        assert!(
            queries.contains_key(*name),
            "{name} is not a captured query"
        );
    }
}

#[test]
fn working_captured_queries_give_postgres_results() {
    let queries = fixtures();
    let mut setup = setup();
    let mut results = BTreeMap::new();
    for name in WORKING {
        let params = match *name {
            "psycopg3/type_info_fetch" => vec![text("text")],
            "jdbc42/type_by_oid" | "jdbc42/type_is_array_by_oid" => vec![Value::Int(2205)],
            _ => Vec::new(),
        };
        let rows = run_captured(&mut setup, &queries[*name], params)
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        results.insert(*name, rows);
    }
    // \d t: no extended statistics.
    assert_eq!(results["psql15/d_t_statistics"], Vec::<Vec<Value>>::new());
    // \l: one database, UTF8, owned by the session's user.
    let databases = &results["psql15/l_databases"];
    assert_eq!(databases.len(), 1);
    assert_eq!(
        databases[0][..3],
        [text("postgres"), text("tester"), text("UTF8")]
    );
    assert_eq!(databases[0][6], text("libc"));
    // \dn: public only (pg_* and information_schema are filtered by the regex).
    assert_eq!(
        results["psql15/dn_schemas"],
        vec![vec![text("public"), text("tester")]]
    );
    assert_eq!(results["pgbench15/run_scale"], vec![vec![Value::Int(1)]]);
    // JDBC's getPrimaryKeys: information_schema._pg_expandarray's records in a derived table.
    assert_eq!(
        results["jdbc42/dbmd_get_primary_keys"],
        vec![vec![
            Value::Null,
            text("public"),
            text("t"),
            text("id"),
            Value::Int(1),
            text("t_pkey")
        ]]
    );
    // \d and \dt: the user tables, sorted, as tables owned by the session's user.
    for name in ["psql15/d_list", "psql15/dt_list"] {
        assert_eq!(
            results[name],
            vec![
                vec![
                    text("public"),
                    text("pgbench_branches"),
                    text("table"),
                    text("tester")
                ],
                vec![text("public"), text("t"), text("table"), text("tester")],
            ],
            "{name}"
        );
    }
    // \d t: the table by name, its columns with PostgreSQL's type names, its primary key.
    assert_eq!(
        results["psql15/d_t_lookup"],
        vec![vec![Value::Int(setup.t_oid), text("public"), text("t")]]
    );
    let columns: Vec<&[Value]> = results["psql15/d_t_columns"]
        .iter()
        .map(|row| &row[..4])
        .collect();
    assert_eq!(
        columns,
        vec![
            &[text("id"), text("integer"), Value::Null, Value::Bool(true)][..],
            &[
                text("name"),
                text("character varying(20)"),
                text("'x'"),
                Value::Bool(true)
            ],
            &[text("v"), text("bigint"), Value::Null, Value::Bool(false)],
        ]
    );
    let indexes = &results["psql15/d_t_indexes"];
    assert_eq!(indexes.len(), 1);
    assert_eq!(indexes[0][0], text("t_pkey"));
    assert_eq!(
        indexes[0][5],
        text("CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id)")
    );
    assert_eq!(indexes[0][6], text("PRIMARY KEY (id)"));
    assert_eq!(results["psql15/d_t_relation"][0][1], text("r"));
    assert!(results["psql15/d_t_inherits"].is_empty());
    assert!(results["psql15/d_t_partitions"].is_empty());
    // \d t's footers: no row-level security policies, no publications.
    assert!(results["psql15/d_t_policies"].is_empty());
    assert!(results["psql15/d_t_publications"].is_empty());
    // pgbench's partition check: no pgbench_accounts yet, no row; once it exists, its
    // schema's position in the search path (pg_catalog, public), no partitioning, 0 children.
    assert!(results["pgbench15/run_partitions"].is_empty());
    run(
        &mut setup.session,
        "CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int)",
    );
    let partitions = run_captured(&mut setup, &queries["pgbench15/run_partitions"], vec![])
        .unwrap_or_else(|error| panic!("run_partitions: {error}"));
    assert_eq!(
        partitions,
        vec![vec![Value::Int(2), Value::Null, Value::Int(0)]]
    );
    // JDBC getColumns: t's columns numbered by row_number() in attnum order.
    let columns: Vec<(Value, Value, Value)> = results["jdbc42/dbmd_get_columns"]
        .iter()
        .map(|row| (row[2].clone(), row[8].clone(), row[11].clone()))
        .collect();
    assert_eq!(
        columns,
        vec![
            (text("id"), Value::Int(1), Value::Null),
            (text("name"), Value::Int(2), text("'x'")),
            (text("v"), Value::Int(3), Value::Null),
        ]
    );
    // \di: the primary-key indexes with their tables.
    let di: Vec<&Value> = results["psql15/di_indexes"]
        .iter()
        .map(|row| &row[1])
        .collect();
    assert_eq!(di, vec![&text("pgbench_branches_pkey"), &text("t_pkey")]);
    // JDBC: result-set metadata and getTables see the table; regclass's type row.
    assert_eq!(results["jdbc42/resultset_metadata_columns"].len(), 3);
    assert_eq!(results["jdbc42/dbmd_get_tables"].len(), 2);
    assert_eq!(results["jdbc42/type_by_oid"][0][2], text("regclass"));
    // psycopg's TypeInfo.fetch("text"): name, oid, array oid, regtype, delimiter.
    assert_eq!(
        results["psycopg3/type_info_fetch"],
        vec![vec![
            text("text"),
            Value::Int(25),
            Value::Int(1009),
            text("text"),
            text(",")
        ]]
    );
}

/// The pieces of psql's \d queries, one table at a time (the joins put them together).
#[test]
fn system_tables_describe_a_table() {
    let mut setup = setup();
    let oid = setup.t_oid;
    let session = &mut setup.session;
    // \dt's filter on pg_class alone.
    let tables = query(
        session,
        "SELECT c.relname, c.relkind, pg_catalog.pg_get_userbyid(c.relowner) \
         FROM pg_catalog.pg_class c WHERE c.relkind IN ('r','p','') \
         AND c.relnamespace = 2200 AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1",
    );
    assert_eq!(
        tables,
        vec![
            vec![text("pgbench_branches"), text("r"), text("tester")],
            vec![text("t"), text("r"), text("tester")],
        ]
    );
    // \d t's lookup by regex, in the OPERATOR() form with COLLATE.
    let found = query(
        session,
        "SELECT c.oid, c.relname FROM pg_catalog.pg_class c \
         WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default",
    );
    assert_eq!(found, vec![vec![Value::Int(oid), text("t")]]);
    // \d t's columns: name, type, default, not null.
    let columns = query(
        session,
        &format!(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, \
             a.atthasdef FROM pg_catalog.pg_attribute a \
             WHERE a.attrelid = '{oid}' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
        ),
    );
    assert_eq!(
        columns,
        vec![
            vec![
                text("id"),
                text("integer"),
                Value::Bool(true),
                Value::Bool(false)
            ],
            vec![
                text("name"),
                text("character varying(20)"),
                Value::Bool(true),
                Value::Bool(true)
            ],
            vec![
                text("v"),
                text("bigint"),
                Value::Bool(false),
                Value::Bool(false)
            ],
        ]
    );
    let defaults = query(
        session,
        &format!(
            "SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true), d.adnum \
             FROM pg_catalog.pg_attrdef d WHERE d.adrelid = {oid}"
        ),
    );
    assert_eq!(defaults, vec![vec![text("'x'"), Value::Int(2)]]);
    // \d t's indexes: the primary key.
    let indexes = query(
        session,
        &format!(
            "SELECT i.indisprimary, i.indisunique, i.indkey, \
             pg_catalog.pg_get_indexdef(i.indexrelid, 0, true), i.indexrelid::pg_catalog.regclass \
             FROM pg_catalog.pg_index i WHERE i.indrelid = '{oid}'"
        ),
    );
    assert_eq!(
        indexes,
        vec![vec![
            Value::Bool(true),
            Value::Bool(true),
            text("1"),
            text("CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id)"),
            text("t_pkey"),
        ]]
    );
    let constraints = query(
        session,
        &format!(
            "SELECT conname, contype, pg_catalog.pg_get_constraintdef(oid, true), conindid \
             FROM pg_catalog.pg_constraint WHERE conrelid = {oid}"
        ),
    );
    assert_eq!(
        constraints,
        vec![vec![
            text("t_pkey"),
            text("p"),
            text("PRIMARY KEY (id)"),
            Value::Int(oid + 1)
        ]]
    );
    // \di: the index is a relation of kind i.
    let index_class = query(
        session,
        "SELECT relname, relam FROM pg_catalog.pg_class WHERE relkind = 'i' ORDER BY 1",
    );
    assert_eq!(
        index_class,
        vec![
            vec![text("pgbench_branches_pkey"), Value::Int(403)],
            vec![text("t_pkey"), Value::Int(403)]
        ]
    );
}

#[test]
fn information_schema_lists_tables_and_columns() {
    let mut setup = setup();
    let session = &mut setup.session;
    let tables = query(
        session,
        "SELECT table_name, table_type FROM information_schema.tables \
         WHERE table_schema = 'public' ORDER BY table_name",
    );
    assert_eq!(
        tables,
        vec![
            vec![text("pgbench_branches"), text("BASE TABLE")],
            vec![text("t"), text("BASE TABLE")]
        ]
    );
    let columns = query(
        session,
        "SELECT column_name, data_type, is_nullable, character_maximum_length, column_default \
         FROM information_schema.columns WHERE table_name = 't' ORDER BY ordinal_position",
    );
    assert_eq!(
        columns,
        vec![
            vec![
                text("id"),
                text("integer"),
                text("NO"),
                Value::Null,
                Value::Null
            ],
            vec![
                text("name"),
                text("character varying"),
                text("NO"),
                Value::Int(20),
                text("'x'")
            ],
            vec![
                text("v"),
                text("bigint"),
                text("YES"),
                Value::Null,
                Value::Null
            ],
        ]
    );
    let schemata = query(
        session,
        "SELECT schema_name FROM information_schema.schemata ORDER BY 1",
    );
    assert_eq!(
        schemata,
        vec![
            vec![text("information_schema")],
            vec![text("pg_catalog")],
            vec![text("public")]
        ]
    );
}

#[test]
fn catalog_functions_and_casts() {
    let mut setup = setup();
    let oid = setup.t_oid;
    let session = &mut setup.session;
    let row = |session: &mut Session, sql: &str| -> Vec<Value> {
        let mut rows = query(session, sql);
        assert_eq!(rows.len(), 1, "{sql}");
        rows.pop().unwrap()
    };
    assert_eq!(
        row(
            session,
            "SELECT 't'::regclass, 'public.t'::pg_catalog.regclass, 'pg_class'::regclass"
        ),
        vec![Value::Int(oid), Value::Int(oid), Value::Int(1259)]
    );
    assert_eq!(
        row(
            session,
            &format!("SELECT {oid}::regclass, {oid}::regclass::text, 25::regtype::text")
        ),
        vec![text("t"), text("t"), text("text")]
    );
    let missing = session
        .execute_sql("SELECT 'nope'::regclass")
        .pop()
        .unwrap();
    assert_eq!(missing.unwrap_err().code, "42P01");
    assert_eq!(
        row(
            session,
            "SELECT current_schemas(true), current_schemas(false), \
             array_position(current_schemas(true), 'public'), \
             array_to_string(ARRAY['a', 'b'], ','), 'public' = ANY(current_schemas(false))"
        ),
        vec![
            text("{pg_catalog,public}"),
            text("{public}"),
            Value::Int(2),
            text("a,b"),
            Value::Bool(true)
        ]
    );
    assert_eq!(
        row(
            session,
            "SELECT 'pg_toast' ~ '^pg_', 'Abc' ~* '^a', 'abc' !~ 'b', 'ABC' !~* 'x', \
             pg_encoding_to_char(6), format_type(1043, 24), format_type(1007, -1)"
        ),
        vec![
            Value::Bool(true),
            Value::Bool(true),
            Value::Bool(false),
            Value::Bool(true),
            text("UTF8"),
            text("character varying(20)"),
            text("integer[]")
        ]
    );
    assert_eq!(
        row(
            session,
            "SELECT has_table_privilege('t', 'SELECT'), obj_description(1, 'pg_class'), \
             to_regtype('int4'), to_regclass('nope'), pg_get_userbyid(10), \
             CASE 'r' WHEN 'r' THEN 'table' WHEN 'i' THEN 'index' END, \
             (current_schemas(true))[1]"
        ),
        vec![
            Value::Bool(true),
            Value::Null,
            Value::Int(23),
            Value::Null,
            text("tester"),
            text("table"),
            text("pg_catalog")
        ]
    );
    let bad = session.execute_sql("SELECT 'a' ~ '('").pop().unwrap();
    assert_eq!(bad.unwrap_err().code, "2201B");
    // JDBC's type cache: the type of an oid; psycopg: a type by name.
    assert_eq!(
        row(
            session,
            "SELECT typname, typtype, typinput = 'pg_catalog.array_in'::regproc \
             FROM pg_catalog.pg_type WHERE oid = 2205"
        ),
        vec![text("regclass"), text("b"), Value::Bool(false)]
    );
    assert_eq!(
        row(
            session,
            "SELECT typname, typelem, typinput = 'pg_catalog.array_in'::regproc \
             FROM pg_catalog.pg_type WHERE oid = 1009"
        ),
        vec![text("_text"), Value::Int(25), Value::Bool(true)]
    );
}

#[test]
fn system_tables_cannot_be_written() {
    let mut setup = setup();
    for sql in [
        "INSERT INTO pg_catalog.pg_class (relname) VALUES ('x')",
        "DELETE FROM pg_catalog.pg_class",
        "UPDATE pg_catalog.pg_class SET relname = 'x'",
    ] {
        let result = setup.session.execute_sql(sql).pop().unwrap();
        assert!(result.is_err(), "{sql}");
    }
}

/// pg_dump's first statements: set_config changes the session's setting (SHOW and
/// current_setting read it), current_setting of an unknown name is 42704 unless missing_ok.
#[test]
fn set_config_and_current_setting_as_pg_dump_sends_them() {
    let mut setup = setup();
    let session = &mut setup.session;
    assert_eq!(
        query(
            session,
            "SELECT pg_catalog.set_config('search_path', '', false)"
        ),
        [[text("")]]
    );
    assert_eq!(query(session, "SHOW search_path"), [[text("")]]);
    assert_eq!(
        query(
            session,
            "SELECT set_config('application_name', 'dump', false), \
             current_setting('application_name')"
        ),
        [[text("dump"), text("dump")]]
    );
    assert_eq!(
        query(session, "SELECT current_setting('APPLICATION_NAME')"),
        [[text("dump")]]
    );
    assert_eq!(
        query(session, "SELECT current_setting('no.such', true)"),
        [[Value::Null]]
    );
    let error = session
        .execute_sql("SELECT current_setting('no_such')")
        .pop()
        .unwrap()
        .unwrap_err();
    assert_eq!(error.code, "42704");
    // A failed statement's set_config changes nothing.
    let failed = session
        .execute_sql("SELECT set_config('application_name', 'lost', false), 1 / 0")
        .pop()
        .unwrap();
    assert!(failed.is_err());
    assert_eq!(query(session, "SHOW application_name"), [[text("dump")]]);
    // SHOW ALL: every setting (BenchBase's collector reads it), in name order ignoring
    // case as PostgreSQL's, `DateStyle` and `TimeZone` written as PostgreSQL writes them.
    let all = query(session, "SHOW ALL");
    assert!(all.contains(&vec![text("application_name"), text("dump"), text("")]));
    assert!(all.iter().any(|row| row[0] == text("work_mem")));
    assert!(all.iter().any(|row| row[0] == text("DateStyle")));
    let lower = |value: &Value| value.to_text().unwrap_or_default().to_ascii_lowercase();
    assert!(all.windows(2).all(|w| lower(&w[0][0]) < lower(&w[1][0])));
}

/// Settings the server fixes: SHOW reads the buffer's size and the page size as PostgreSQL
/// shows shared_buffers and block_size; SET, set_config and RESET of them are 55P02, and
/// RESET ALL leaves them.
#[test]
fn server_settings_show_the_database_and_refuse_changes() {
    let dir = tempfile::tempdir().unwrap();
    let config = DatabaseConfig {
        buffer_size: hayate_engine::BufferSize::Bytes(24 << 20),
        ..DatabaseConfig::default()
    };
    let db = Database::open(dir.path(), config).unwrap();
    let mut session = Session::new(Catalog::open(db).unwrap(), "tester");
    assert_eq!(query(&mut session, "SHOW shared_buffers"), [[text("24MB")]]);
    assert_eq!(query(&mut session, "SHOW block_size"), [[text("4096")]]);
    assert_eq!(
        query(&mut session, "SELECT current_setting('shared_buffers')"),
        [[text("24MB")]]
    );
    for (sql, why) in [
        (
            "SET shared_buffers = '1GB'",
            "without restarting the server",
        ),
        ("SET block_size = 8192", "cannot be changed"),
        ("SET server_version = '9.6'", "cannot be changed"),
        ("RESET shared_buffers", "without restarting the server"),
        (
            "SELECT set_config('server_version_num', '1', false)",
            "cannot be changed",
        ),
    ] {
        let error = session.execute_sql(sql).pop().unwrap().unwrap_err();
        assert_eq!(error.code, "55P02", "{sql}");
        assert!(error.message.ends_with(why), "{sql}: {}", error.message);
    }
    run(&mut session, "SET work_mem = '8MB'");
    run(&mut session, "RESET ALL");
    assert_eq!(query(&mut session, "SHOW work_mem"), [[text("4MB")]]);
    assert_eq!(query(&mut session, "SHOW shared_buffers"), [[text("24MB")]]);
    assert_eq!(
        query(&mut session, "SHOW server_version_num"),
        [[text(hayate_sql::SERVER_VERSION_NUM)]]
    );
}

/// Set-returning functions in a SELECT list, as SQLAlchemy's reflection of a primary key
/// sends them (unnest of pg_index.indkey next to generate_subscripts), and `= ANY` of an
/// int2vector.
#[test]
fn set_returning_functions_in_the_select_list() {
    let mut setup = setup();
    let t_oid = setup.t_oid;
    let session = &mut setup.session;
    run(
        session,
        "CREATE TABLE pair (a int, b int, c int, PRIMARY KEY (c, a))",
    );
    let pk = query(
        session,
        "SELECT a.attname FROM pg_attribute a JOIN ( \
           SELECT unnest(ix.indkey) attnum, generate_subscripts(ix.indkey, 1) ord \
           FROM pg_index ix WHERE ix.indrelid = 'pair'::regclass AND ix.indisprimary \
         ) k ON a.attnum = k.attnum \
         WHERE a.attrelid = 'pair'::regclass ORDER BY k.ord",
    );
    assert_eq!(pk, [[text("c")], [text("a")]]);
    let rows = query(
        session,
        "SELECT unnest('{x,NULL,\"y z\"}'::text) AS e, generate_subscripts('{x,NULL,\"y z\"}'::text, 1) AS i, \
         generate_series(1, 2) AS s",
    );
    assert_eq!(
        rows,
        [
            [text("x"), Value::Int(1), Value::Int(1)],
            [Value::Null, Value::Int(2), Value::Int(2)],
            [text("y z"), Value::Int(3), Value::Null],
        ]
    );
    // A row whose set is empty gives no row; the calls see each input row.
    let rows = query(
        session,
        "SELECT g, generate_series(1, g) FROM generate_series(0, 2) AS g ORDER BY 1, 2",
    );
    assert_eq!(
        rows,
        [
            [Value::Int(1), Value::Int(1)],
            [Value::Int(2), Value::Int(1)],
            [Value::Int(2), Value::Int(2)],
        ]
    );
    let rows = query(
        session,
        &format!(
            "SELECT a.attname FROM pg_index ix JOIN pg_attribute a \
             ON a.attrelid = ix.indrelid AND a.attnum = ANY(ix.indkey) \
             WHERE ix.indrelid = {t_oid} AND ix.indisprimary"
        ),
    );
    assert_eq!(rows, [[text("id")]]);
    // Bitwise & and | on integers (getIndexInfo's `indoption[i] & 1`), records' fields.
    assert_eq!(
        query(session, "SELECT 6 & 3, 6 | 3::int2"),
        [[Value::Int(2), Value::Int(7)]]
    );
    let error = session
        .execute_sql("SELECT 'x'::text & 1")
        .pop()
        .unwrap()
        .unwrap_err();
    assert_eq!(error.code, "42883");
    let rows = query(
        session,
        "SELECT (r).x, (r).n FROM (SELECT information_schema._pg_expandarray('{7,9}'::text) AS r) s",
    );
    assert_eq!(
        rows,
        [
            [Value::Int(7), Value::Int(1)],
            [Value::Int(9), Value::Int(2)]
        ]
    );
}

/// Django's constraint and index introspection (`get_constraints`, PostgreSQL backend):
/// unnest(...) WITH ORDINALITY over catalog arrays, two arrays side by side, lateral to
/// the FROM item before it, and array_agg(... ORDER BY ...). Results as PostgreSQL 15's,
/// except index column ordering (ASC here: DESC is accepted by CREATE INDEX, not kept).
#[test]
fn django_constraint_introspection() {
    let mut setup = setup();
    let s = &mut setup.session;
    run(
        s,
        "CREATE TABLE ct2 (id serial PRIMARY KEY, app varchar(10), model varchar(10), \
         CONSTRAINT ct2_am UNIQUE (app, model))",
    );
    run(s, "CREATE INDEX ct2_model ON ct2 (model, app)");
    assert_eq!(
        query(
            s,
            "SELECT c.conname, array(SELECT attname FROM unnest(c.conkey) WITH ORDINALITY \
             cols(colid, arridx) JOIN pg_attribute AS ca ON cols.colid = ca.attnum \
             WHERE ca.attrelid = c.conrelid ORDER BY cols.arridx), c.contype \
             FROM pg_constraint AS c JOIN pg_class AS cl ON c.conrelid = cl.oid \
             WHERE cl.relname = 'ct2' AND pg_catalog.pg_table_is_visible(cl.oid) ORDER BY 1"
        ),
        vec![
            vec![text("ct2_am"), text("{app,model}"), text("u")],
            vec![text("ct2_pkey"), text("{id}"), text("p")],
        ]
    );
    assert_eq!(
        query(
            s,
            "SELECT indexname, array_agg(attname ORDER BY arridx), indisunique, indisprimary \
             FROM (SELECT c2.relname as indexname, idx.*, attr.attname \
             FROM (SELECT * FROM pg_index i, unnest(i.indkey, i.indoption) WITH ORDINALITY \
             koi(key, option, arridx)) idx \
             LEFT JOIN pg_class c ON idx.indrelid = c.oid \
             LEFT JOIN pg_class c2 ON idx.indexrelid = c2.oid \
             LEFT JOIN pg_attribute attr ON attr.attrelid = c.oid AND attr.attnum = idx.key \
             WHERE c.relname = 'ct2' AND pg_catalog.pg_table_is_visible(c.oid)) s2 \
             GROUP BY indexname, indisunique, indisprimary ORDER BY 1"
        ),
        vec![
            vec![
                text("ct2_am"),
                text("{app,model}"),
                Value::Bool(true),
                Value::Bool(false)
            ],
            vec![
                text("ct2_model"),
                text("{model,app}"),
                Value::Bool(false),
                Value::Bool(false)
            ],
            vec![
                text("ct2_pkey"),
                text("{id}"),
                Value::Bool(true),
                Value::Bool(true)
            ],
        ]
    );
    assert_eq!(
        query(
            s,
            "SELECT * FROM unnest(array[1,2,3], array['a','b']) WITH ORDINALITY AS t(x, y, n)"
        ),
        // Arrays are carried in their text form: unnest's elements are text here.
        vec![
            vec![text("1"), text("a"), Value::Int(1)],
            vec![text("2"), text("b"), Value::Int(2)],
            vec![text("3"), Value::Null, Value::Int(3)],
        ]
    );
}

/// The statistics views BenchBase's collector reads after each run (`SELECT * FROM` each):
/// PostgreSQL 15's columns in its order, a row per database, table and index; counters
/// Hayate does not keep are NULL, not zero.
#[test]
fn statistics_views_have_postgres_columns_and_list_the_objects() {
    let mut setup = setup();
    let s = &mut setup.session;
    run(s, "CREATE INDEX t_name_idx ON t (name)");
    let expected = [
        ("pg_stat_archiver", "archived_count,last_archived_wal,last_archived_time,failed_count,last_failed_wal,last_failed_time,stats_reset"),
        ("pg_stat_bgwriter", "checkpoints_timed,checkpoints_req,checkpoint_write_time,checkpoint_sync_time,buffers_checkpoint,buffers_clean,maxwritten_clean,buffers_backend,buffers_backend_fsync,buffers_alloc,stats_reset"),
        ("pg_stat_database", "datid,datname,numbackends,xact_commit,xact_rollback,blks_read,blks_hit,tup_returned,tup_fetched,tup_inserted,tup_updated,tup_deleted,conflicts,temp_files,temp_bytes,deadlocks,checksum_failures,checksum_last_failure,blk_read_time,blk_write_time,session_time,active_time,idle_in_transaction_time,sessions,sessions_abandoned,sessions_fatal,sessions_killed,stats_reset"),
        ("pg_stat_database_conflicts", "datid,datname,confl_tablespace,confl_lock,confl_snapshot,confl_bufferpin,confl_deadlock"),
        ("pg_stat_user_tables", "relid,schemaname,relname,seq_scan,seq_tup_read,idx_scan,idx_tup_fetch,n_tup_ins,n_tup_upd,n_tup_del,n_tup_hot_upd,n_live_tup,n_dead_tup,n_mod_since_analyze,n_ins_since_vacuum,last_vacuum,last_autovacuum,last_analyze,last_autoanalyze,vacuum_count,autovacuum_count,analyze_count,autoanalyze_count"),
        ("pg_statio_user_tables", "relid,schemaname,relname,heap_blks_read,heap_blks_hit,idx_blks_read,idx_blks_hit,toast_blks_read,toast_blks_hit,tidx_blks_read,tidx_blks_hit"),
        ("pg_stat_user_indexes", "relid,indexrelid,schemaname,relname,indexrelname,idx_scan,idx_tup_read,idx_tup_fetch"),
        ("pg_statio_user_indexes", "relid,indexrelid,schemaname,relname,indexrelname,idx_blks_read,idx_blks_hit"),
    ];
    for (view, columns) in expected {
        let sql = format!("SELECT * FROM {view}");
        let Outcome::Rows { columns: got, .. } = run(s, &sql) else {
            panic!("{sql}: no rows");
        };
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.join(","), columns, "{view}");
    }
    assert_eq!(
        query(s, "SELECT relname, schemaname, relid = 't'::regclass FROM pg_stat_user_tables ORDER BY relname"),
        [
            vec![text("pgbench_branches"), text("public"), Value::Bool(false)],
            vec![text("t"), text("public"), Value::Bool(true)],
        ]
    );
    assert_eq!(
        query(s, "SELECT indexrelname, seq_scan IS NULL FROM pg_stat_user_indexes JOIN pg_stat_user_tables USING (relid, relname) WHERE relname = 't' ORDER BY 1"),
        [vec![text("t_name_idx"), Value::Bool(true)], vec![text("t_pkey"), Value::Bool(true)]]
    );
    assert_eq!(
        query(
            s,
            "SELECT archived_count, failed_count FROM pg_stat_archiver"
        ),
        [vec![Value::Int(0), Value::Int(0)]]
    );
    assert_eq!(
        query(s, "SELECT count(*) FROM pg_stat_database d JOIN pg_database USING (datname) WHERE d.datid = pg_database.oid"),
        query(s, "SELECT count(*) FROM pg_database")
    );
}

/// psql 15's `\d` of a table that foreign keys reference (relhastriggers is true for it)
/// asks for the referencing keys and the triggers through pg_partition_ancestors (captured
/// with psql -E): both bind and answer, the first with the referencing key as PostgreSQL.
#[test]
fn psql_d_of_a_referenced_table() {
    let mut setup = setup();
    let s = &mut setup.session;
    run(
        s,
        "CREATE TABLE kid (id int PRIMARY KEY, t_id int4 REFERENCES t)",
    );
    let oid = setup.t_oid;
    let referenced_by = format!(
        "SELECT conname, conrelid::pg_catalog.regclass AS ontable,
       pg_catalog.pg_get_constraintdef(oid, true) AS condef
  FROM pg_catalog.pg_constraint c
 WHERE confrelid IN (SELECT pg_catalog.pg_partition_ancestors('{oid}')
                     UNION ALL VALUES ('{oid}'::pg_catalog.regclass))
       AND contype = 'f' AND conparentid = 0
ORDER BY conname;"
    );
    assert_eq!(
        query(s, &referenced_by),
        [vec![
            text("kid_t_id_fkey"),
            text("kid"),
            text("FOREIGN KEY (t_id) REFERENCES t(id)")
        ]]
    );
    let triggers = format!(
        "SELECT t.tgname, pg_catalog.pg_get_triggerdef(t.oid, true), t.tgenabled, t.tgisinternal,
  CASE WHEN t.tgparentid != 0 THEN
    (SELECT u.tgrelid::pg_catalog.regclass
     FROM pg_catalog.pg_trigger AS u,
          pg_catalog.pg_partition_ancestors(t.tgrelid) WITH ORDINALITY AS a(relid, depth)
     WHERE u.tgname = t.tgname AND u.tgrelid = a.relid
           AND u.tgparentid = 0
     ORDER BY a.depth LIMIT 1)
  END AS parent
FROM pg_catalog.pg_trigger t
WHERE t.tgrelid = '{oid}' AND (NOT t.tgisinternal OR (t.tgisinternal AND t.tgenabled = 'D'))
ORDER BY 1;"
    );
    assert_eq!(query(s, &triggers), Vec::<Vec<Value>>::new());
    assert_eq!(
        query(s, &format!("SELECT pg_partition_ancestors('{oid}')")),
        [vec![Value::Int(oid)]]
    );
    for (sql, columns) in [
        ("SELECT * FROM pg_partition_ancestors('{oid}')", "relid"),
        (
            "SELECT * FROM pg_partition_ancestors('{oid}') WITH ORDINALITY",
            "relid,ordinality",
        ),
    ] {
        let sql = sql.replace("{oid}", &oid.to_string());
        let Outcome::Rows { columns: got, .. } = run(s, &sql) else {
            panic!("{sql}: no rows");
        };
        let names: Vec<&str> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.join(","), columns, "{sql}");
    }
}

/// pg_settings lists what SHOW ALL lists, with the session's current values: a SET shows
/// there with `session` as its source and the default as its boot and reset values; what
/// no session changes is `internal` (or `postmaster`); names as PostgreSQL writes them.
#[test]
fn pg_settings_lists_the_sessions_settings_as_show_all() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut s) = crate::common::open(dir.path());
    crate::common::run(&mut s, "SET work_mem = '8MB'");
    crate::common::run(&mut s, "SET TIME ZONE 'Europe/Paris'");
    let show_all: Vec<String> = crate::common::rows(&mut s, "SHOW ALL")
        .into_iter()
        .map(|row| format!("{:?}={:?}", row[0], row[1]))
        .collect();
    let listed: Vec<String> = crate::common::rows(
        &mut s,
        "SELECT name, setting FROM pg_settings ORDER BY name",
    )
    .into_iter()
    .map(|row| format!("{:?}={:?}", row[0], row[1]))
    .collect();
    let mut sorted_show_all = show_all.clone();
    sorted_show_all.sort();
    let mut sorted_listed = listed.clone();
    sorted_listed.sort();
    assert_eq!(sorted_listed, sorted_show_all);
    assert!(listed.len() > 20, "{listed:?}");
    let row = |s: &mut Session, name: &str| {
        crate::common::rows(
            s,
            &format!(
                "SELECT setting, source, boot_val, reset_val, context, vartype \
                 FROM pg_settings WHERE name = '{name}'"
            ),
        )
        .pop()
        .unwrap_or_else(|| panic!("{name} not listed"))
    };
    assert_eq!(
        row(&mut s, "work_mem"),
        ["8MB", "session", "4MB", "4MB", "user", "string"].map(text)
    );
    assert_eq!(
        row(&mut s, "TimeZone")[..2],
        ["Europe/Paris", "session"].map(text)
    );
    assert_eq!(
        row(&mut s, "max_identifier_length"),
        ["63", "default", "63", "63", "internal", "integer"].map(text)
    );
    assert_eq!(row(&mut s, "max_connections")[4], text("postmaster"));
    assert_eq!(row(&mut s, "standard_conforming_strings")[5], text("bool"));
}

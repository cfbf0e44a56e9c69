//! The SQL types, functions and operators at the SQL level: every expected text below is
//! what PostgreSQL 15 prints for the same query (checked against a real server).

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session};

fn session(dir: &std::path::Path) -> Session {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    Session::new(catalog, "tester")
}

/// The rows of the last statement as PostgreSQL's text forms joined by `|`, NULL as empty,
/// and the result types' names.
fn query(session: &mut Session, sql: &str) -> (Vec<String>, Vec<String>) {
    let outcome = session
        .execute_sql(sql)
        .pop()
        .unwrap()
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
    let Outcome::Rows { columns, rows, .. } = outcome else {
        panic!("{sql}: no rows");
    };
    let text = rows
        .iter()
        .map(|row| {
            row.iter()
                .zip(&columns)
                .map(|(v, c)| v.to_text_typed(c.data_type).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    let types = columns.iter().map(|c| c.data_type.to_string()).collect();
    (text, types)
}

fn run(session: &mut Session, sql: &str) {
    if let Err(error) = session.execute_sql(sql).pop().unwrap() {
        panic!("{sql}: {error}");
    }
}

fn one(session: &mut Session, sql: &str) -> String {
    query(session, sql).0.join("\n")
}

fn error_code(session: &mut Session, sql: &str) -> &'static str {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(_) => panic!("{sql}: no error"),
        Err(error) => error.code,
    }
}

#[test]
fn values_print_as_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let cases = [
        ("SELECT 1.50", "1.50"),
        ("SELECT 1.5::numeric(10,3)", "1.500"),
        ("SELECT 10::numeric / 4", "2.5000000000000000"),
        ("SELECT 1::numeric / 3", "0.33333333333333333333"),
        ("SELECT 0.1::real", "0.1"),
        ("SELECT 1234567::real", "1.234567e+06"),
        ("SELECT 1e15::float8", "1e+15"),
        ("SELECT 0.00001::float8", "1e-05"),
        ("SELECT 1.1::real::float8", "1.100000023841858"),
        ("SELECT 'ab'::bytea", "\\x6162"),
        ("SELECT 'a\\\\b\\001'::bytea", "\\x615c6201"),
        ("SELECT 'abc'::char(5) || '|'", "abc|"),
        ("SELECT 'abc'::char(5)", "abc  "),
        ("SELECT length('ab  '::char(4))", "2"),
        ("SELECT '2020-02-29'::date + 1", "2020-03-01"),
        ("SELECT date '2020-03-01' - date '2020-02-01'", "29"),
        ("SELECT '0044-03-15 BC'::date", "0044-03-15 BC"),
        (
            "SELECT '2020-01-01 10:00:00.123456789'::timestamp",
            "2020-01-01 10:00:00.123457",
        ),
        (
            "SELECT '2020-01-01 10:00:00+05'::timestamptz",
            "2020-01-01 05:00:00+00",
        ),
        ("SELECT '2020-01-01 10:30'::timestamp::date", "2020-01-01"),
        ("SELECT CAST('7' AS numeric(4,1))", "7.0"),
        ("SELECT 'infinity'::timestamp", "infinity"),
    ];
    for (sql, expected) in cases {
        assert_eq!(one(&mut s, sql), expected, "{sql}");
    }
}

#[test]
fn bad_input_has_postgres_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let cases = [
        ("SELECT 'abc'::date", "22007"),
        ("SELECT '2020-13-01'::date", "22008"),
        ("SELECT '2021-02-29'::date", "22008"),
        ("SELECT 'x'::timestamp", "22007"),
        ("SELECT 'abc'::numeric", "22P02"),
        ("SELECT '1000'::numeric(5,2)", "22003"),
        ("SELECT '1e40'::real", "22003"),
        ("SELECT '\\xzz'::bytea", "22P02"),
        ("SELECT 'abcdef'::char(3)", "22001"),
        ("SELECT 1::numeric / 0", "22012"),
        ("SELECT sqrt(-1)", "2201F"),
    ];
    for (sql, code) in cases {
        assert_eq!(error_code(&mut s, sql), code, "{sql}");
    }
}

#[test]
fn functions_and_operators() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let cases = [
        ("SELECT 'ab' || 'cd' || 1", "abcd1"),
        ("SELECT 'Hello' LIKE 'H%o', 'Hello' ILIKE 'h%O', 'Hello' NOT LIKE 'x%'", "t|t|t"),
        ("SELECT length('héllo'), char_length('abc'), octet_length('é')", "5|3|2"),
        ("SELECT lower('AbC'), upper('AbC')", "abc|ABC"),
        ("SELECT substr('hello', 2, 3), substring('hello' from 2 for 3)", "ell|ell"),
        ("SELECT substring('hello', 0, 3), substr('hello', 3)", "he|llo"),
        ("SELECT position('l' in 'hello'), strpos('hello', 'z')", "3|0"),
        (
            "SELECT trim('  x  ') || '|', ltrim('xxyxx', 'x'), rtrim('xxyxx', 'x'), btrim('xyx', 'x')",
            "x||yxx|xxy|y",
        ),
        ("SELECT trim(both 'x' from 'xxaxx'), trim(leading 'x' from 'xxa')", "a|a"),
        ("SELECT replace('abcabc', 'b', 'X'), concat('a', NULL, 1, true)", "aXcaXc|a1t"),
        ("SELECT coalesce(NULL, 2, 3), nullif(1, 1), nullif(1, 2)", "2||1"),
        ("SELECT greatest(1, 5, 3), least(2.5, 1, 3), greatest(NULL, 1)", "5|1|1"),
        ("SELECT abs(-3), abs(-2.5), abs(-1.5::float8)", "3|2.5|1.5"),
        ("SELECT round(2.5), round(2.5::float8), round(3.14159, 2)", "3|2|3.14"),
        ("SELECT trunc(-2.7), floor(-2.5), ceil(2.1), ceiling(-2.1::float8)", "-2|-3|3|-2"),
        ("SELECT mod(7, 3), 7 % 3, mod(7.5, 2)", "1|1|1.5"),
        ("SELECT power(2, 10), sqrt(16)", "1024|4"),
        ("SELECT md5('abc')", "900150983cd24fb0d6963f7d28e17f72"),
        (
            "SELECT CASE WHEN 1 > 2 THEN 'a' WHEN 2 > 1 THEN 'b' ELSE 'c' END, \
             CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' END, CASE WHEN false THEN 1 END",
            "b|two|",
        ),
        (
            "SELECT NULL IS DISTINCT FROM NULL, 1 IS DISTINCT FROM NULL, 1 IS NOT DISTINCT FROM 1",
            "f|t|t",
        ),
        ("SELECT 5 BETWEEN 1 AND 10, 5 NOT BETWEEN 1 AND 4", "t|t"),
        ("SELECT 1 + 1.5, 2 * 1.5::real, 1.5::real * 2::real", "2.5|3|3"),
        ("SELECT random() < 1.0, random() >= 0", "t|t"),
        ("SELECT NULL::int + 1, 'a' || NULL", "|"),
        // pg_typeof names the argument's type as PostgreSQL 15 does.
        (
            "SELECT pg_typeof(1), pg_typeof(1.5), pg_typeof('a'::text), pg_typeof(now()), \
             pg_typeof(true), pg_typeof(2::int8 + 1), pg_typeof(1.5::float8), \
             pg_typeof('{}'::jsonb)",
            "integer|numeric|text|timestamp with time zone|boolean|bigint|double precision|jsonb",
        ),
        (
            "SELECT pg_typeof('a'::varchar(5)), pg_typeof('b'::char(2)), \
             pg_typeof(1::numeric(5,2)), pg_typeof(current_date)",
            "character varying|character|numeric|date",
        ),
    ];
    for (sql, expected) in cases {
        assert_eq!(one(&mut s, sql), expected, "{sql}");
    }
    let (_, types) = query(
        &mut s,
        "SELECT 1 + 1.5, 2 * 1.5::real, 1.5::real * 2::real, round(5), mod(5, 3)",
    );
    assert_eq!(
        types,
        [
            "numeric",
            "double precision",
            "real",
            "double precision",
            "integer"
        ]
    );
}

#[test]
fn now_is_one_value_per_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute_sql("BEGIN").pop().unwrap().unwrap();
    let first = one(
        &mut s,
        "SELECT now(), CURRENT_TIMESTAMP, LOCALTIMESTAMP, CURRENT_DATE",
    );
    std::thread::sleep(std::time::Duration::from_millis(5));
    let second = one(
        &mut s,
        "SELECT now(), CURRENT_TIMESTAMP, LOCALTIMESTAMP, CURRENT_DATE",
    );
    assert_eq!(first, second);
    let parts: Vec<&str> = first.split('|').collect();
    assert_eq!(parts[0], parts[1]);
    assert!(parts[0].ends_with("+00"), "{first}");
    assert_eq!(format!("{}+00", parts[2]), parts[0]);
    assert!(parts[2].starts_with(parts[3]));
    s.execute_sql("COMMIT").pop().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let after = one(&mut s, "SELECT now()");
    assert_ne!(after, parts[0]);
}

#[test]
fn aggregates_have_postgres_result_types() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    s.execute_sql(
        "CREATE TABLE a (k int4 PRIMARY KEY, i2 int2, i4 int4, i8 int8, r real, f float8, \
         n numeric(10,2))",
    );
    s.execute_sql(
        "INSERT INTO a VALUES (1, 1, 1, 1, 1.5, 1.5, 1.25), (2, 2, 2, 2, 2.5, 2.5, 2.50)",
    );
    let (rows, types) = query(
        &mut s,
        "SELECT count(*), sum(i2), sum(i4), sum(i8), sum(r), sum(f), sum(n), avg(i4), avg(f), \
         avg(n), min(n), max(r) FROM a",
    );
    assert_eq!(
        rows,
        ["2|3|3|3|4|4|3.75|1.5000000000000000|2|1.8750000000000000|1.25|2.5"]
    );
    assert_eq!(
        types,
        [
            "bigint",
            "bigint",
            "bigint",
            "numeric",
            "real",
            "double precision",
            "numeric",
            "numeric",
            "double precision",
            "numeric",
            "numeric(10,2)",
            "real"
        ]
    );
}

#[test]
fn new_types_as_keys_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    for ddl in [
        "CREATE TABLE c (id char(10) PRIMARY KEY, pad char(20))",
        "CREATE TABLE n (id numeric(8,2) PRIMARY KEY, v real)",
        "CREATE TABLE d (day date PRIMARY KEY, at timestamp, b bytea)",
        "CREATE TABLE bk (b bytea PRIMARY KEY)",
    ] {
        s.execute_sql(ddl).pop().unwrap().unwrap();
    }
    s.execute_sql("INSERT INTO c VALUES ('b', 'x'), ('a  ', NULL), ('c', 'zz')");
    assert_eq!(one(&mut s, "SELECT id || '|' FROM c WHERE id = 'a'"), "a|");
    assert_eq!(
        one(&mut s, "SELECT pad FROM c WHERE id = 'b    '"),
        "x                   "
    );
    assert_eq!(
        error_code(&mut s, "INSERT INTO c VALUES ('a', 'y')"),
        "23505"
    );
    assert_eq!(
        error_code(&mut s, "INSERT INTO c VALUES ('12345678901', 'y')"),
        "22001"
    );
    assert_eq!(
        query(&mut s, "SELECT id FROM c WHERE id > 'a' ORDER BY id").0,
        ["b         ", "c         "]
    );

    s.execute_sql("INSERT INTO n VALUES (1.5, 0.25), (-2, 1), (10.125, NULL)");
    assert_eq!(
        query(&mut s, "SELECT id, v FROM n ORDER BY id").0,
        ["-2.00|1", "1.50|0.25", "10.13|"]
    );
    assert_eq!(one(&mut s, "SELECT v FROM n WHERE id = 1.50"), "0.25");
    assert_eq!(one(&mut s, "SELECT v FROM n WHERE id = -2"), "1");
    assert_eq!(
        one(&mut s, "SELECT count(*) FROM n WHERE id BETWEEN -2 AND 1.5"),
        "2"
    );

    s.execute_sql(
        "INSERT INTO d VALUES ('2020-01-02', '2020-01-02 03:04:05', '\\x00ff'), \
         ('1999-12-31', NULL, NULL)",
    );
    assert_eq!(
        query(&mut s, "SELECT day, at, b FROM d ORDER BY day").0,
        ["1999-12-31||", "2020-01-02|2020-01-02 03:04:05|\\x00ff"]
    );
    assert_eq!(
        one(&mut s, "SELECT at FROM d WHERE day = '2020-01-02'"),
        "2020-01-02 03:04:05"
    );
    assert_eq!(
        one(&mut s, "SELECT count(*) FROM d WHERE day < '2000-01-01'"),
        "1"
    );
    assert_eq!(
        one(&mut s, "SELECT day FROM d WHERE at > '2020-01-01'"),
        "2020-01-02"
    );

    s.execute_sql("INSERT INTO bk VALUES ('\\x01'), ('\\x0100'), ('\\x00')");
    assert_eq!(
        query(&mut s, "SELECT b FROM bk ORDER BY b").0,
        ["\\x00", "\\x01", "\\x0100"]
    );
    assert_eq!(
        one(&mut s, "SELECT b FROM bk WHERE b = '\\x0100'"),
        "\\x0100"
    );
}

#[test]
fn uuid_json_and_interval_as_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let cases = [
        ("SELECT 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ("SELECT '{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}'::uuid = 'a0eebc999c0b4ef8bb6d6bb9bd380a11'::uuid", "t"),
        (r#"SELECT '{"b": 1, "a": [1, 2.50, 1e2], "b": 2}'::jsonb"#, r#"{"a": [1, 2.50, 100], "b": 2}"#),
        (r#"SELECT '{"b": 1,  "a": 2}'::json"#, r#"{"b": 1,  "a": 2}"#),
        (r#"SELECT '{"a": {"b": [10, 20, {"c": "x"}]}}'::jsonb -> 'a' -> 'b' -> -1"#, r#"{"c": "x"}"#),
        (r#"SELECT '{"a": {"b": [10, 20, {"c": "x"}]}}'::jsonb #>> '{a,b,2,c}'"#, "x"),
        (r#"SELECT '{"a": {"b": [10, 20, {"c": "x"}]}}'::jsonb #> '{a,b}'"#, r#"[10, 20, {"c": "x"}]"#),
        (r#"SELECT '{"a": 1, "tags": ["x", "y"]}'::jsonb @> '{"tags": ["y"]}'"#, "t"),
        (r#"SELECT '{"tags": ["y"]}'::jsonb <@ '{"a": 1, "tags": ["x", "y"]}'"#, "t"),
        (r#"SELECT '{"a": 1, "tags": ["x", "y"]}'::jsonb ? 'tags'"#, "t"),
        (r#"SELECT '{"a": 1, "tags": ["x", "y"]}'::jsonb ?| array['q', 'a']"#, "t"),
        (r#"SELECT '{"a": 1, "tags": ["x", "y"]}'::jsonb ?& array['q', 'a']"#, "f"),
        (r#"SELECT '{"a": 1}'::jsonb || '{"b": [true, null]}'"#, r#"{"a": 1, "b": [true, null]}"#),
        (r#"SELECT '{"a": 1, "b": 2}'::jsonb - 'a'"#, r#"{"b": 2}"#),
        ("SELECT '[1, 2, 3]'::jsonb - 1", "[1, 3]"),
        (r#"SELECT '{"z": 1, "a": {"y": 2}}'::json -> 'a'"#, r#"{"y": 2}"#),
        (r#"SELECT '{"z": 1, "a": "text"}'::json ->> 'a'"#, "text"),
        (r#"SELECT jsonb_build_object('a', 1, 'b', 'x', 'c', NULL, 'd', '{"q": 1}'::jsonb, 'e', true)"#, r#"{"a": 1, "b": "x", "c": null, "d": {"q": 1}, "e": true}"#),
        ("SELECT json_build_object('k', 2, 'l', 'v')", r#"{"k" : 2, "l" : "v"}"#),
        ("SELECT jsonb_build_array(1, 'two', 3.5, NULL)", r#"[1, "two", 3.5, null]"#),
        (r#"SELECT to_jsonb('he said "hi"'::text)"#, r#""he said \"hi\"""#),
        ("SELECT to_json(12.50)", "12.50"),
        // json_agg / jsonb_agg (outputs of PostgreSQL 15).
        ("SELECT json_agg(x) FROM generate_series(1,3) x", "[1, 2, 3]"),
        ("SELECT jsonb_agg(x ORDER BY x DESC) FROM (VALUES ('b'), (NULL), ('a')) v(x)", r#"[null, "b", "a"]"#),
        (r#"SELECT json_agg(j) FROM (VALUES ('{"b": 1,  "a": 2}'::json), (NULL)) v(j)"#, r#"[{"b": 1,  "a": 2}, null]"#),
        (r#"SELECT jsonb_agg(j) FROM (VALUES ('{"b": 1,  "a": 2}'::jsonb), ('[1]')) v(j)"#, r#"[{"a": 2, "b": 1}, [1]]"#),
        ("SELECT json_agg(x) IS NULL FROM generate_series(1,0) x", "t"),
        ("SELECT string_agg(k || ':' || a::text, ' ' ORDER BY k) FROM (SELECT k, jsonb_agg(v ORDER BY v) a FROM (VALUES (1, 2.50), (1, 1), (2, 3)) t(k, v) GROUP BY k) g", "1:[1, 2.50] 2:[3]"),
        ("SELECT jsonb_agg(x) @> '[2]', json_agg(x) -> 2 FROM generate_series(1,3) x", "t|3"),
        (r#"SELECT jsonb_typeof('[1]'), json_typeof('"s"'), jsonb_array_length('[1, [2, 3]]')"#, "array|string|2"),
        (r#"SELECT jsonb_set('{"a": {"b": 1}}', '{a,c}', '[5]')"#, r#"{"a": {"b": 1, "c": [5]}}"#),
        (r#"SELECT jsonb_set('{"a": {"b": 1}}', '{a,c}', '5', false)"#, r#"{"a": {"b": 1}}"#),
        (r#"SELECT jsonb_strip_nulls('{"a": null, "b": {"c": null, "d": 1}}')"#, r#"{"b": {"d": 1}}"#),
        (r#"SELECT jsonb_extract_path_text('{"a": {"b": "x"}}', 'a', 'b')"#, "x"),
        ("SELECT interval '1 year 2 mons 3 days 04:05:06.5'", "1 year 2 mons 3 days 04:05:06.5"),
        ("SELECT interval '-1 days 2 hours', interval '36 hours', interval '0 seconds'", "-1 days +02:00:00|36:00:00|00:00:00"),
        ("SELECT interval 'P1Y2M3DT4H5M6S', interval '@ 1 day 2 hours ago'", "1 year 2 mons 3 days 04:05:06|-1 days -02:00:00"),
        ("SELECT interval '1 day 2 hours' * 2, interval '1 day 2 hours' / 4, - interval '3 mons' / 4", "2 days 04:00:00|06:30:00|-22 days -12:00:00"),
        ("SELECT timestamp '2020-01-31 10:00' + interval '1 month', date '2020-01-31' - interval '1 day'", "2020-02-29 10:00:00|2020-01-30 00:00:00"),
        ("SELECT timestamp '2020-03-01 12:00' - timestamp '2020-02-28 06:30'", "2 days 05:30:00"),
        ("SELECT interval '1 mon' = interval '30 days', interval '2 days' > interval '47 hours'", "t|t"),
        ("SELECT interval '1 day' + interval '-3 hours' - interval '1 mon'", "-1 mons +1 day -03:00:00"),
    ];
    for (sql, expected) in cases {
        assert_eq!(one(&mut s, sql), expected, "{sql}");
    }
    assert_eq!(error_code(&mut s, "SELECT 'a0eebc99'::uuid"), "22P02");
    assert_eq!(error_code(&mut s, "SELECT '{bad'::jsonb"), "22P02");
    assert_eq!(
        error_code(&mut s, "SELECT '1 fortnight'::interval"),
        "22007"
    );
    assert_eq!(error_code(&mut s, "SELECT '[1]'::json @> '[1]'"), "42883");
    // Checked against PostgreSQL 15: fractions of units pass down, division is field by
    // field, DISTINCT takes equal spans as one, `->` with text finds no array element.
    for (sql, expected) in [
        (
            "SELECT interval '1.5 days', interval '1.5 mons', interval '1.5 weeks', \
             interval '1.5 years', interval '0.5 day'",
            "1 day 12:00:00|1 mon 15 days|10 days 12:00:00|1 year 6 mons|12:00:00",
        ),
        (
            "SELECT interval '49 days' / 49, interval '1 day 36 hours' / 2, \
             interval '1 mon' / 7, interval '-3 mons' / 4",
            "1 day|30:00:00|4 days 06:51:25.6896|-22 days -12:00:00",
        ),
        (
            "SELECT count(*) FROM (SELECT DISTINCT i FROM (VALUES (interval '1 mon'), \
             (interval '30 days'), (interval '1 day')) v(i)) s",
            "2",
        ),
        (
            "SELECT '[10, 20]'::jsonb -> '1', '[10, 20]'::jsonb -> 1, '[10, 20]'::jsonb #> '{1}'",
            "|20|20",
        ),
    ] {
        assert_eq!(one(&mut s, sql), expected, "{sql}");
    }
    // Out of range input is an error, never a wrapped value.
    for sql in [
        "SELECT interval '3000000000:00'",
        "SELECT interval '9223372036854775807 us 1 us'",
        "SELECT interval '1e30 days 1 day'",
        "SELECT interval 'NaN days'",
        "SELECT interval '3000000000 days'",
    ] {
        assert!(
            s.execute_sql(sql).pop().unwrap().is_err(),
            "{sql} must fail"
        );
    }
    assert_eq!(
        error_code(&mut s, "SELECT jsonb_array_length('{}')"),
        "22023"
    );
    assert_eq!(
        one(
            &mut s,
            "SELECT sum(d), avg(d), count(d) FROM (VALUES (interval '1 day 2 hours'), \
             (interval '3 hours'), (NULL), (interval '1 mon')) v(d)"
        ),
        "1 mon 1 day 05:00:00|10 days 09:40:00|3"
    );
}

/// Columns of the types: stored, indexed (a uuid key, an interval key equal by span),
/// grouped, and read back after a restart.
#[test]
fn uuid_json_and_interval_columns() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut s = session(dir.path());
        run(
            &mut s,
            "CREATE TABLE docs (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), body jsonb, \
             raw json, wait interval)",
        );
        run(&mut s, "CREATE INDEX docs_wait ON docs (wait)");
        run(
            &mut s,
            r#"INSERT INTO docs (body, raw, wait) VALUES
               ('{"kind": "a", "n": 1}', '{"z": 1, "a": 2}', '1 mon'),
               ('{"kind": "b", "n": 2}', '[1, 2]', '30 days'),
               ('{"kind": "a", "n": 3}', NULL, '2 hours')"#,
        );
        run(
            &mut s,
            "INSERT INTO docs (id, body) VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '[]')",
        );
        assert_eq!(
            error_code(
                &mut s,
                "INSERT INTO docs (id) VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11')"
            ),
            "23505"
        );
    }
    let mut s = session(dir.path());
    assert_eq!(one(&mut s, "SELECT count(DISTINCT id) FROM docs"), "4");
    assert_eq!(
        one(
            &mut s,
            "SELECT body FROM docs WHERE id = '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'"
        ),
        "[]"
    );
    assert_eq!(
        one(
            &mut s,
            "SELECT body ->> 'kind', sum((body ->> 'n')::int) FROM docs \
             WHERE body ? 'kind' GROUP BY 1 ORDER BY 1"
        ),
        "a|4\nb|2"
    );
    assert_eq!(
        one(&mut s, r#"SELECT raw FROM docs WHERE body @> '{"n": 1}'"#),
        r#"{"z": 1, "a": 2}"#
    );
    assert_eq!(
        one(
            &mut s,
            "SELECT count(*) FROM docs WHERE wait = interval '720 hours'"
        ),
        "2"
    );
    assert_eq!(
        one(
            &mut s,
            "SELECT wait = interval '30 days', count(*) FROM docs WHERE wait IS NOT NULL \
             GROUP BY wait ORDER BY 2"
        ),
        "f|1\nt|2"
    );
    let (_, types) = query(
        &mut s,
        "SELECT id, body, raw, wait, body -> 'n', raw -> 'z' FROM docs",
    );
    assert_eq!(
        types,
        ["uuid", "jsonb", "json", "interval", "jsonb", "json"]
    );
}

/// EXTRACT, date_part, date_trunc and AT TIME ZONE 'UTC' (what ORMs' date lookups send).
#[test]
fn date_fields_as_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let cases = [
        ("SELECT EXTRACT('month' FROM timestamp '2020-07-15 10:11:05.5'), EXTRACT(YEAR FROM date '2021-03-01'), extract(dow from date '2024-02-29'), extract(isodow from date '2024-03-03')", "7|2021|4|7"),
        ("SELECT extract(second from timestamp '2020-07-15 10:11:05.5'), extract(milliseconds from timestamp '2020-07-15 10:11:05.5'), extract(microseconds from timestamp '2020-07-15 10:11:05.5')", "5.500000|5500.000|5500000"),
        ("SELECT extract(epoch from timestamp '2020-01-01 00:00:01.25'), extract(epoch from date '2020-01-01'), extract(epoch from timestamptz '2020-01-01 00:00:00+00')", "1577836801.250000|1577836800|1577836800.000000"),
        ("SELECT extract(week from date '2021-01-03'), extract(isoyear from date '2021-01-03'), extract(doy from date '2020-12-31'), extract(quarter from date '2020-08-01')", "53|2020|366|3"),
        ("SELECT extract(century from date '2000-12-31'), extract(century from date '2001-01-01'), extract(decade from date '2019-05-05'), extract(millennium from date '2001-01-01')", "20|21|201|3"),
        ("SELECT date_part('hour', timestamp '2020-07-15 10:11:05'), date_part('day', interval '3 days 04:00'), extract(epoch from interval '1 year 2 mons 3 days 04:05:06.5')", "10|3|37015506.500000"),
        ("SELECT date_trunc('month', timestamp '2020-07-15 10:11:05'), date_trunc('week', timestamp '2024-02-29 10:00'), date_trunc('quarter', timestamptz '2020-08-15 10:00+00'), date_trunc('hour', interval '1 day 04:05:06')", "2020-07-01 00:00:00|2024-02-26 00:00:00|2020-07-01 00:00:00+00|1 day 04:00:00"),
        ("SELECT date_trunc('day', timestamptz '2020-07-15 10:11:05+00', 'UTC'), date_trunc('year', date '2020-07-15'), date_trunc('century', timestamp '2020-07-15'), date_trunc('decade', timestamp '2029-07-15')", "2020-07-15 00:00:00+00|2020-01-01 00:00:00+00|2001-01-01 00:00:00|2020-01-01 00:00:00"),
        ("SELECT (timestamptz '2020-07-15 23:30:00+00' AT TIME ZONE 'UTC')::date, timestamp '2020-07-15 23:30:00' AT TIME ZONE 'UTC', EXTRACT('hour' FROM timestamptz '2020-07-15 23:30:00+00' AT TIME ZONE 'UTC')", "2020-07-15|2020-07-15 23:30:00+00|23"),
    ];
    for (sql, expected) in cases {
        assert_eq!(one(&mut s, sql), expected, "{sql}");
    }
    assert_eq!(
        error_code(&mut s, "SELECT extract(hour from date '2020-01-01')"),
        "22023"
    );
    assert_eq!(
        error_code(&mut s, "SELECT date_trunc('fortnight', now())"),
        "22023"
    );
    assert_eq!(
        error_code(&mut s, "SELECT now() AT TIME ZONE 'Mars/Olympus'"),
        "22023"
    );
    let (_, types) = query(
        &mut s,
        "SELECT extract(year from now()), date_part('year', now()), date_trunc('day', now()), \
         date_trunc('day', localtimestamp), now() AT TIME ZONE 'UTC'",
    );
    assert_eq!(
        types,
        [
            "numeric",
            "double precision",
            "timestamp with time zone",
            "timestamp without time zone",
            "timestamp without time zone"
        ]
    );
}

#[test]
fn json_set_returning_functions_as_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    // Outputs of PostgreSQL 15 for the same statements (rows joined by newlines).
    for (sql, expected, types) in [
        (
            r#"SELECT jsonb_array_elements('[1, "a", {"b": 2}, null, [3]]')"#,
            "1\n\"a\"\n{\"b\": 2}\nnull\n[3]",
            "jsonb",
        ),
        (
            r#"SELECT jsonb_array_elements_text('[1, "a", {"b": 2}, null, [3]]')"#,
            "1\na\n{\"b\": 2}\n\n[3]",
            "text",
        ),
        (
            r#"SELECT json_array_elements('[1, "x"]')"#,
            "1\n\"x\"",
            "json",
        ),
        (
            r#"SELECT jsonb_object_keys('{"b": 1, "a": {"c": 2}, "aa": 3}')"#,
            "a\nb\naa",
            "text",
        ),
        (
            r#"SELECT json_object_keys('{"b": 1, "a": 2}')"#,
            "b\na",
            "text",
        ),
        (
            "SELECT value FROM jsonb_array_elements('[10, 20]')",
            "10\n20",
            "jsonb",
        ),
        (
            "SELECT e.value FROM jsonb_array_elements('[10, 20]') AS e",
            "10\n20",
            "jsonb",
        ),
        (
            r#"SELECT * FROM jsonb_array_elements_text('["p", "q"]') WITH ORDINALITY"#,
            "p|1\nq|2",
            "text,bigint",
        ),
        (
            r#"SELECT key, value FROM jsonb_each('{"b": 1, "a": {"c": [2]}}') ORDER BY key"#,
            "a|{\"c\": [2]}\nb|1",
            "text,jsonb",
        ),
        (
            r#"SELECT key, value FROM jsonb_each_text('{"b": 1, "a": "s", "n": null}') ORDER BY key"#,
            "a|s\nb|1\nn|",
            "text,text",
        ),
        (
            r#"SELECT k FROM jsonb_object_keys('{"x": 1, "y": 2}') AS k"#,
            "x\ny",
            "text",
        ),
    ] {
        let (rows, column_types) = query(&mut session, sql);
        assert_eq!(rows.join("\n"), expected, "{sql}");
        assert_eq!(column_types.join(","), types, "{sql}");
    }
    run(
        &mut session,
        "CREATE TABLE docs (id int PRIMARY KEY, d jsonb)",
    );
    run(
        &mut session,
        r#"INSERT INTO docs VALUES (1, '{"tags": ["a", "b"], "n": 1}'), (2, '{"tags": ["c"], "n": 2}'), (3, NULL)"#,
    );
    for (sql, expected) in [
        (
            "SELECT id, jsonb_array_elements_text(d -> 'tags') AS tag FROM docs ORDER BY id, tag",
            "1|a\n1|b\n2|c",
        ),
        (
            "SELECT id, t.value FROM docs, jsonb_array_elements(d -> 'tags') AS t ORDER BY id, t.value",
            "1|\"a\"\n1|\"b\"\n2|\"c\"",
        ),
        (
            "SELECT id, e.key FROM docs, jsonb_each(d) AS e ORDER BY id, e.key",
            "1|n\n1|tags\n2|n\n2|tags",
        ),
        ("SELECT count(*) FROM docs, jsonb_object_keys(d) AS k", "4"),
        // A document naming columns of the query (k, d) is evaluated once, in the query's
        // scope (the helper names of json(b)_each's derived table do not shadow them).
        (
            "SELECT e.key, e.value FROM (VALUES ('cfg', '{\"cfg\": {\"a\": 1}}'::jsonb)) \
             AS kv(k, d), jsonb_each(d -> k) AS e",
            "a|1",
        ),
    ] {
        assert_eq!(query(&mut session, sql).0.join("\n"), expected, "{sql}");
    }
    for sql in [
        r#"SELECT jsonb_array_elements('{"a": 1}')"#,
        "SELECT jsonb_array_elements('3')",
        "SELECT jsonb_object_keys('[1]')",
        r#"SELECT json_array_elements('{"a": 1}')"#,
        r#"SELECT json_object_keys('"s"')"#,
    ] {
        assert_eq!(error_code(&mut session, sql), "22023", "{sql}");
    }
}

/// Time zones (`fixtures/time_zones.sql`, one statement a line): SET TIME ZONE in its forms,
/// timestamptz read and shown in the session's zone across summer-time changes, casts,
/// date_trunc (below a day in the repeated hour too), extract, AT TIME ZONE, + interval,
/// comparisons with timestamp, set_config, RESET, SET LOCAL and a rolled-back SET, one group
/// for every NaN. The expected output is PostgreSQL 15's through `psql -A -t` (its default
/// zone, Etc/UTC, is UTC here).
#[test]
fn time_zones_as_postgresql() {
    assert_script_as_postgresql(
        include_str!("fixtures/time_zones.sql"),
        include_str!("fixtures/time_zones.expected"),
    );
}

/// A table's name as a whole-row value where JSON is built (`fixtures/whole_rows.sql`):
/// row_to_json, to_json(b), json(b)_agg with ORDER BY, an alias, a subquery's alias, and a
/// column of the table's name winning; PostgreSQL 15's output line for line.
#[test]
fn whole_rows_as_json_as_postgresql() {
    assert_script_as_postgresql(
        include_str!("fixtures/whole_rows.sql"),
        include_str!("fixtures/whole_rows.expected"),
    );
}

/// A script's output (`script_output`) equals PostgreSQL 15's, line for line.
fn assert_script_as_postgresql(script: &str, expected: &str) {
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(script_output(script), expected);
}

/// Runs a script of one statement a line on a fresh database and gives what `psql -A -t`
/// prints for it: rows as fields joined by `|` (lines of a value split), command tags,
/// errors as `ERROR:  message`; values shown in the session's zone.
fn script_output(script: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    let mut output = Vec::new();
    for sql in script.lines() {
        let outcome = session.execute_sql(sql).pop().unwrap();
        // Rows are shown in the session's zone, as the server shows them.
        let _zone = session.zone().enter();
        match outcome {
            Ok(Outcome::Rows {
                columns,
                rows,
                command,
            }) => {
                if command == "SHOW" || !rows.is_empty() {
                    for row in rows {
                        let fields: Vec<String> = row
                            .iter()
                            .zip(&columns)
                            .map(|(v, c)| v.to_text_typed(c.data_type).unwrap_or_default())
                            .collect();
                        output.extend(fields.join("|").lines().map(str::to_string));
                    }
                }
            }
            Ok(Outcome::Command { tag }) => output.push(tag),
            Err(error) => output.push(format!("ERROR:  {}", error.message)),
        }
    }
    output
}

/// The data type formatting functions (`fixtures/formatting.sql`): to_char of timestamps,
/// timestamptz in two zones, dates, intervals and numbers (every template keyword:
/// padding, fill mode, ordinals, names in three cases, signs, overflow, roman numerals,
/// V, EEEE), to_timestamp with a template and from Unix seconds, to_date, to_number, and
/// to_char in a GROUP BY; PostgreSQL 15's output line for line.
#[test]
fn formatting_functions_as_postgresql() {
    assert_script_as_postgresql(
        include_str!("fixtures/formatting.sql"),
        include_str!("fixtures/formatting.expected"),
    );
}

/// json(b)_each and json(b)_each_text in a SELECT list: records `(key,value)` quoted as
/// PostgreSQL's record_out quotes them, beside another set function, and their errors on an
/// array (`fixtures/json_each.sql`); PostgreSQL 15's output line for line.
#[test]
fn json_each_in_a_select_list_as_postgresql() {
    assert_script_as_postgresql(
        include_str!("fixtures/json_each.sql"),
        include_str!("fixtures/json_each.expected"),
    );
}

/// information_schema's constraint views (table_constraints, key_column_usage with
/// position_in_unique_constraint, referential_constraints with their rules,
/// constraint_column_usage, check_constraints) and the join schema tools run over them
/// (`fixtures/constraint_views.sql`); PostgreSQL 15's output line for line (its NOT NULL
/// pseudo-checks filtered out).
#[test]
fn constraint_views_as_postgresql() {
    assert_script_as_postgresql(
        include_str!("fixtures/constraint_views.sql"),
        include_str!("fixtures/constraint_views.expected"),
    );
}

/// pg_timezone_names lists the time zone database's zones with their abbreviation, offset
/// and summer time now (zones without summer time checked, as PostgreSQL 15 shows them).
#[test]
fn pg_timezone_names_lists_the_zones() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    let (rows, types) = query(
        &mut session,
        "SELECT name, abbrev, utc_offset, is_dst FROM pg_timezone_names \
         WHERE name IN ('Asia/Tokyo', 'Asia/Kolkata', 'UTC') ORDER BY name",
    );
    assert_eq!(
        rows,
        [
            "Asia/Kolkata|IST|05:30:00|f",
            "Asia/Tokyo|JST|09:00:00|f",
            "UTC|UTC|00:00:00|f"
        ]
    );
    assert_eq!(types, ["text", "text", "interval", "boolean"]);
    let (count, _) = query(&mut session, "SELECT count(*) > 300 FROM pg_timezone_names");
    assert_eq!(count, ["t"]);
}

/// A date or time constant DEFAULT is fixed when the DDL runs, as PostgreSQL stores it: in
/// the creating session's TimeZone, with its offset, so every inserting session gets the same
/// instant (and `'now'` is the DDL's time); it shows as PostgreSQL 15 prints it, in the
/// reading session's zone.
#[test]
fn a_timestamptz_default_is_fixed_in_the_creating_session_s_zone() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut tokyo = Session::new(catalog.clone(), "tester");
    let mut utc = Session::new(catalog, "tester");
    tokyo
        .execute_sql("SET TIME ZONE 'Asia/Tokyo'")
        .pop()
        .unwrap()
        .unwrap();
    for sql in [
        "CREATE TABLE t (id int, ts timestamptz DEFAULT '2026-01-01 00:00', d date DEFAULT '2026-02-03')",
        "ALTER TABLE t ADD COLUMN later timestamptz DEFAULT '2026-06-01 12:00'",
        "CREATE TABLE u (id int, ts timestamptz)",
        "ALTER TABLE u ALTER COLUMN ts SET DEFAULT '2026-01-01 00:00'",
        // A date cast to timestamptz is evaluated at each INSERT, in the inserting zone.
        "CREATE TABLE v (id int, ts timestamptz DEFAULT '2026-01-01'::date)",
        // Tokyo's local mean time (+09:18:59) does not print as an offset the parser reads
        // back: not fixed, still usable.
        "CREATE TABLE w (id int, ts timestamptz DEFAULT '1800-01-01 00:00')",
    ] {
        tokyo.execute_sql(sql).pop().unwrap().unwrap();
    }
    for sql in [
        "SET TIME ZONE 'UTC'",
        "INSERT INTO t (id) VALUES (1)",
        "INSERT INTO u (id) VALUES (1)",
        "INSERT INTO v (id) VALUES (1)",
        "INSERT INTO w (id) VALUES (1)",
    ] {
        utc.execute_sql(sql).pop().unwrap().unwrap();
    }
    let (rows, _) = query(&mut utc, "SELECT ts FROM v");
    assert_eq!(rows, ["2026-01-01 00:00:00+00"]);
    let (rows, _) = query(
        &mut utc,
        "SELECT column_default FROM information_schema.columns WHERE table_name = 'v' \
         AND column_name = 'ts'",
    );
    assert_eq!(rows, ["'2026-01-01'::date"]);
    let (rows, _) = query(&mut utc, "SELECT count(*) FROM w WHERE ts IS NOT NULL");
    assert_eq!(rows, ["1"]);
    let (rows, _) = query(&mut utc, "SELECT ts, d, later FROM t");
    assert_eq!(
        rows,
        ["2025-12-31 15:00:00+00|2026-02-03|2026-06-01 03:00:00+00"]
    );
    let (rows, _) = query(&mut utc, "SELECT ts FROM u");
    assert_eq!(rows, ["2025-12-31 15:00:00+00"]);
    let (rows, _) = query(
        &mut utc,
        "SELECT column_name, column_default FROM information_schema.columns \
         WHERE table_name = 't' AND column_default IS NOT NULL ORDER BY ordinal_position",
    );
    assert_eq!(
        rows,
        [
            "ts|'2025-12-31 15:00:00+00'::timestamp with time zone",
            "d|'2026-02-03'::date",
            "later|'2026-06-01 03:00:00+00'::timestamp with time zone",
        ]
    );
}

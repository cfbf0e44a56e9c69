//! Array column types (issue 21): one-dimensional text[], varchar(n)[], smallint[],
//! integer[] and bigint[] columns that take array literals and ARRAY[...] (checked and kept
//! in canonical form, so equal arrays are equal), compare and sort element by element as
//! PostgreSQL does (not as their text), grow with array_append/array_prepend/array_cat,
//! survive a reopen and show as ARRAY in information_schema.

use hayate_sql::Session;

use crate::common;
use common::{error_code, open, rows, run, texts};

fn setup(session: &mut Session) {
    run(
        session,
        "CREATE TABLE a (id int PRIMARY KEY, tags text[], n int[], b bigint[] DEFAULT '{}', \
         s smallint[], v varchar(10)[]); \
         CREATE INDEX a_n ON a (n); \
         INSERT INTO a VALUES (1, '{x,\"y z\"}', '{10,2}', '{1}', '{1}', '{a}'), \
         (2, ARRAY['a', 'c'], '{9}', DEFAULT, NULL, NULL), \
         (3, '{\"a b\",c}', '{01, +3}', '{3,NULL}', '{}', '{}'), \
         (4, '{a}', '{1,3,0}', '{}', '{}', '{}')",
    );
}

#[test]
fn values_are_checked_and_kept_in_canonical_form() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut session) = open(dir.path());
    setup(&mut session);
    assert_eq!(
        texts(&mut session, "SELECT n FROM a ORDER BY id"),
        ["{10,2}", "{9}", "{1,3}", "{1,3,0}"]
    );
    assert_eq!(
        texts(&mut session, "SELECT tags FROM a ORDER BY id"),
        ["{x,\"y z\"}", "{a,c}", "{\"a b\",c}", "{a}"]
    );
    // Equal arrays are equal whatever their input text; the index finds them.
    assert_eq!(
        texts(&mut session, "SELECT id FROM a WHERE n = '{1, 03}'"),
        ["3"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT id FROM a WHERE 'c' = ANY(tags) ORDER BY id"
        ),
        ["2", "3"]
    );
    for (statement, code) in [
        ("INSERT INTO a (id, n) VALUES (9, '{x}')", "22P02"),
        ("INSERT INTO a (id, n) VALUES (9, '{1')", "22P02"),
        ("INSERT INTO a (id, tags) VALUES (9, '{{a},{b}}')", "22P02"),
        ("INSERT INTO a (id, s) VALUES (9, '{70000}')", "22003"),
    ] {
        assert_eq!(error_code(&mut session, statement), code, "{statement}");
    }
    // min/max/greatest/least compare element by element, as PostgreSQL 15 does.
    assert_eq!(
        texts(
            &mut session,
            "SELECT min(n)::text || ' ' || max(n)::text || ' ' || min(tags)::text || ' ' \
             || max(tags)::text FROM a"
        ),
        ["{1,3} {10,2} {a} {x,\"y z\"}"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT greatest(n, '{1}')::text || '/' || least(n, '{1,3,0}')::text FROM a \
             ORDER BY id"
        ),
        [
            "{10,2}/{1,3,0}",
            "{9}/{1,3,0}",
            "{1,3}/{1,3}",
            "{1,3,0}/{1,3,0}"
        ]
    );
    // Arrays of different integer types meet at the wider one (int8[] here), compared as
    // numbers ({9} < {10}); text[] with int[] is no type (42804).
    assert_eq!(
        texts(
            &mut session,
            "SELECT greatest(n, b)::text || '/' || least(s, n)::text || '/'              || pg_typeof(coalesce(s, b)) FROM a ORDER BY id"
        ),
        [
            "{10,2}/{1}/bigint[]",
            "{9}/{9}/bigint[]",
            "{3,NULL}/{}/bigint[]",
            "{1,3,0}/{}/bigint[]"
        ]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT greatest(ARRAY[9], ARRAY[10::bigint])::text"
        ),
        ["{10}"]
    );
    assert_eq!(
        error_code(&mut session, "SELECT greatest(tags, n) FROM a"),
        "42804"
    );
}

#[test]
fn arrays_order_element_by_element() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut session) = open(dir.path());
    setup(&mut session);
    // As text {10,2} < {1,3} < {1,3,0} < {9}; element by element {1,3} < {1,3,0} < {9} <
    // {10,2}.
    assert_eq!(
        texts(&mut session, "SELECT id FROM a ORDER BY n"),
        ["3", "4", "2", "1"]
    );
    assert_eq!(
        texts(&mut session, "SELECT id FROM a WHERE n > '{9}' ORDER BY id"),
        ["1"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT id FROM a WHERE n <= '{1,3,0}' ORDER BY id"
        ),
        ["3", "4"]
    );
    // Text elements: {a} < {a,c} < {"a b",c} < {x,"y z"} ("a" < "a b"; as text the quote
    // of "a b" would sort first).
    assert_eq!(
        texts(&mut session, "SELECT id FROM a ORDER BY tags DESC"),
        ["1", "3", "2", "4"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT ('{1,10}'::int[] < '{1,9}'::int[])::text, pg_typeof('{1}'::bigint[])"
        ),
        ["false"]
    );
    assert_eq!(
        texts(&mut session, "SELECT pg_typeof('{1}'::bigint[])"),
        ["bigint[]"]
    );
}

#[test]
fn arrays_grow_persist_and_show_in_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (db, mut session) = open(dir.path());
        setup(&mut session);
        run(
            &mut session,
            "UPDATE a SET tags = array_append(tags, 'q'), n = array_prepend(7, n) WHERE id = 1; \
             UPDATE a SET b = array_cat(b, '{5,6}'), s = array_append(s, NULL) WHERE id = 2",
        );
        drop(session);
        db.close().unwrap();
    }
    let (_db, mut session) = open(dir.path());
    assert_eq!(
        rows(
            &mut session,
            "SELECT tags, n, b, s FROM a WHERE id IN (1, 2) ORDER BY id"
        )
        .into_iter()
        .map(|row| row
            .iter()
            .map(|v| v.to_text().unwrap_or_default())
            .collect())
        .collect::<Vec<Vec<String>>>(),
        [
            ["{x,\"y z\",q}", "{7,10,2}", "{1}", "{1}"],
            ["{a,c}", "{9}", "{5,6}", "{NULL}"],
        ]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT pg_typeof(array_append(n, 1)) FROM a WHERE id = 1"
        ),
        ["integer[]"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT data_type || ':' || udt_name FROM information_schema.columns \
             WHERE table_name = 'a' ORDER BY ordinal_position"
        ),
        [
            "integer:int4",
            "ARRAY:_text",
            "ARRAY:_int4",
            "ARRAY:_int8",
            "ARRAY:_int2",
            "ARRAY:_text"
        ]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'a'::regclass AND attnum = 3"
        ),
        ["integer[]"]
    );
}

/// The array operators as PostgreSQL has them: containment both ways, overlap, and `||`
/// with an array or an element (not the arrays' text run together); json's @> is unchanged.
#[test]
fn array_operators_contain_overlap_and_concatenate() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut session) = open(dir.path());
    setup(&mut session);
    assert_eq!(
        texts(
            &mut session,
            "SELECT id FROM a WHERE tags @> '{c}' ORDER BY id"
        ),
        ["2", "3"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT id FROM a WHERE '{1,3}' <@ n ORDER BY id"
        ),
        ["3", "4"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT id FROM a WHERE n && ARRAY[2, 9] ORDER BY id"
        ),
        ["1", "2"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT (ARRAY[1, NULL] @> ARRAY[NULL::int])::text || ',' || \
             (ARRAY[1] && ARRAY[NULL::int])::text"
        ),
        ["false,false"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT n || '{4}'::int[] || 5 FROM a WHERE id = 2 \
             UNION ALL SELECT 0 || n FROM a WHERE id = 2 \
             UNION ALL SELECT (tags || '{d}')::text::int[] FROM a WHERE id = 0"
        ),
        ["{9,4,5}", "{0,9}"]
    );
    assert_eq!(
        texts(&mut session, "SELECT tags || '{d}' FROM a WHERE id = 2"),
        ["{a,c,d}"]
    );
    // integer[] with text[] has no common type (42804); with bigint[] it is bigint[].
    assert_eq!(
        error_code(&mut session, "SELECT n FROM a UNION ALL SELECT tags FROM a"),
        "42804"
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT ARRAY[9] UNION SELECT ARRAY[10::bigint] ORDER BY 1"
        ),
        ["{9}", "{10}"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT ('{\"a\": 1, \"b\": 2}'::jsonb @> '{\"a\": 1}')::text"
        ),
        ["true"]
    );
    assert_eq!(error_code(&mut session, "SELECT 1 && 2"), "42883");
    // An untyped side of || next to an array is an array, as in PostgreSQL.
    assert_eq!(
        error_code(&mut session, "SELECT tags || 'd' FROM a"),
        "22P02"
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT (ARRAY[1, 2] || NULL)::text || (NULL || ARRAY['x'])::text"
        ),
        ["{1,2}{x}"]
    );
    // Built arrays are checked and canonical like stored ones; ARRAY[...] fits smallint[].
    assert_eq!(
        texts(
            &mut session,
            "SELECT array_append('{1}'::int[], '05')::text || ',' || \
             array_cat(ARRAY[1], ARRAY[5000000000])::text"
        ),
        ["{1,5},{1,5000000000}"]
    );
    assert_eq!(
        error_code(&mut session, "SELECT array_append('{1}'::int[], 'x')"),
        "22P02"
    );
    run(&mut session, "UPDATE a SET s = ARRAY[4, 5] WHERE id = 1");
    assert_eq!(
        texts(&mut session, "SELECT s FROM a WHERE id = 1"),
        ["{4,5}"]
    );
}

//! Enum types (issue 21): CREATE TYPE ... AS ENUM, columns of the type that take only its
//! labels (literals, casts, parameters, UPDATE, COPY), order by the labels' places in the
//! type (comparisons, ORDER BY, an index on the column), ALTER TYPE ADD VALUE BEFORE/AFTER,
//! DROP TYPE refused while a column uses it, RENAME TO of a type in use, RENAME VALUE (every
//! row, key and index rewritten in the same transaction) and ALTER COLUMN TYPE
//! ... USING c::text::t (Alembic's recipe), transactional inside a block, durable across a
//! reopen, and shown by pg_type, pg_enum, format_type and information_schema as PostgreSQL
//! shows them.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Session, Value};

use crate::common;
use common::{error_code, open, rows, run, texts};

fn setup(session: &mut Session) {
    run(
        session,
        "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy'); \
         CREATE TABLE people (id int PRIMARY KEY, name text, m mood NOT NULL DEFAULT 'ok'); \
         CREATE INDEX people_m ON people (m); \
         INSERT INTO people VALUES (1, 'ann', 'happy'), (2, 'bob', 'sad'), (3, 'cy', 'ok'); \
         INSERT INTO people (id, name) VALUES (4, 'di')",
    );
}

#[test]
fn labels_are_checked_everywhere_a_value_comes_in() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut session) = open(dir.path());
    setup(&mut session);
    for statement in [
        "INSERT INTO people VALUES (5, 'eve', 'angry')",
        "INSERT INTO people SELECT 6, 'fay', 'Happy'",
        "UPDATE people SET m = 'glad' WHERE id = 1",
        "SELECT 'nope'::mood",
        "SELECT CAST(name AS mood) FROM people",
        "SELECT * FROM people WHERE m = 'angry'",
    ] {
        assert_eq!(error_code(&mut session, statement), "22P02", "{statement}");
    }
    // A parameter is a label sent as text, checked as it is used.
    run(
        &mut session,
        "PREPARE add_person AS INSERT INTO people VALUES ($1, $2, $3)",
    );
    run(&mut session, "EXECUTE add_person(7, 'gus', 'sad')");
    assert_eq!(
        error_code(&mut session, "EXECUTE add_person(8, 'hal', 'bored')"),
        "22P02"
    );
    run(
        &mut session,
        "PREPARE by_mood AS SELECT name FROM people WHERE m = $1 ORDER BY id",
    );
    assert_eq!(
        texts(&mut session, "EXECUTE by_mood('sad')"),
        ["bob", "gus"]
    );
    assert_eq!(error_code(&mut session, "EXECUTE by_mood('meh')"), "22P02");
    // Only text converts to an enum; enums of two types do not compare.
    assert_eq!(error_code(&mut session, "SELECT 1::mood"), "42846");
    run(&mut session, "CREATE TYPE color AS ENUM ('red', 'ok')");
    assert_eq!(
        error_code(&mut session, "SELECT 'ok'::mood = 'ok'::color"),
        "42883"
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT count(*) FROM people WHERE m = 'happy'"
        ),
        ["1"]
    );
}

#[test]
fn values_order_by_the_labels_places_not_their_text() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut session) = open(dir.path());
    setup(&mut session);
    // Alphabetically: happy < ok < sad. By the type: sad < ok < happy.
    assert_eq!(
        texts(&mut session, "SELECT name FROM people ORDER BY m, id"),
        ["bob", "cy", "di", "ann"]
    );
    assert_eq!(
        texts(&mut session, "SELECT name FROM people ORDER BY m DESC, id"),
        ["ann", "cy", "di", "bob"]
    );
    assert_eq!(
        texts(&mut session, "SELECT name FROM people ORDER BY 1 LIMIT 1"),
        ["ann"]
    );
    assert_eq!(
        texts(&mut session, "SELECT m FROM people ORDER BY 1 LIMIT 1"),
        ["sad"]
    );
    // ORDER BY a name takes an output column first, as PostgreSQL does: `m::text` is named
    // m and orders as text.
    assert_eq!(
        texts(&mut session, "SELECT m::text FROM people ORDER BY m, id"),
        ["happy", "ok", "ok", "sad"]
    );
    assert_eq!(
        error_code(
            &mut session,
            "SELECT m, m::text AS m FROM people ORDER BY m"
        ),
        "42702"
    );
    // Comparisons through the index on m, and with the literal on either side.
    assert_eq!(
        texts(
            &mut session,
            "SELECT name FROM people WHERE m > 'sad' ORDER BY id"
        ),
        ["ann", "cy", "di"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT name FROM people WHERE 'ok' >= m ORDER BY id"
        ),
        ["bob", "cy", "di"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT name FROM people WHERE m BETWEEN 'ok' AND 'happy' ORDER BY id"
        ),
        ["ann", "cy", "di"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT name FROM people WHERE m IN ('sad', 'happy') ORDER BY id"
        ),
        ["ann", "bob"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT string_agg(name, ',' ORDER BY m DESC, name) FROM people"
        ),
        ["ann,cy,di,bob"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT m || ':' || count(*) FROM people GROUP BY m ORDER BY m"
        ),
        ["sad:1", "ok:2", "happy:1"]
    );
    // A label added BEFORE/AFTER sorts there; the others keep their orders.
    run(&mut session, "ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'");
    run(&mut session, "ALTER TYPE mood ADD VALUE 'glad' AFTER 'ok'");
    run(
        &mut session,
        "ALTER TYPE mood ADD VALUE IF NOT EXISTS 'glad'",
    );
    assert_eq!(
        error_code(&mut session, "ALTER TYPE mood ADD VALUE 'glad'"),
        "42710"
    );
    run(
        &mut session,
        "INSERT INTO people VALUES (5, 'eve', 'meh'), (6, 'fay', 'glad')",
    );
    assert_eq!(
        texts(&mut session, "SELECT m FROM people ORDER BY m, id"),
        ["sad", "meh", "ok", "ok", "glad", "happy"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT name FROM people WHERE m < 'ok' ORDER BY id"
        ),
        ["bob", "eve"]
    );
    // min/max/greatest/least by the labels' places too (PostgreSQL 15 gives the same).
    run(&mut session, "ALTER TABLE people ALTER m DROP NOT NULL");
    run(&mut session, "INSERT INTO people VALUES (7, 'gus', NULL)");
    assert_eq!(
        texts(&mut session, "SELECT min(m) || ',' || max(m) FROM people"),
        ["sad,happy"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT min(m) || ',' || max(m) FROM people WHERE m > 'sad' AND m < 'happy'"
        ),
        ["meh,glad"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT name || ':' || coalesce(max(m)::text, '-') FROM people \
             GROUP BY name HAVING count(*) = 1 ORDER BY name LIMIT 3"
        ),
        ["ann:happy", "bob:sad", "cy:ok"]
    );
    assert_eq!(
        rows(&mut session, "SELECT max(m) FROM people WHERE id > 100"),
        [[Value::Null]]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT greatest(m, 'ok') || '/' || least(m, 'ok', NULL) FROM people \
             WHERE id <= 6 ORDER BY id"
        ),
        ["happy/ok", "ok/sad", "ok/ok", "ok/ok", "ok/meh", "glad/ok"]
    );
    assert_eq!(
        rows(&mut session, "SELECT greatest(NULL::mood, NULL)"),
        [[Value::Null]]
    );
    assert_eq!(
        texts(&mut session, "SELECT least('glad'::mood, 'meh')"),
        ["meh"]
    );
    // Arrays compare element by element, as in PostgreSQL (not as their text).
    assert_eq!(
        texts(
            &mut session,
            "SELECT max(a)::text FROM (VALUES (ARRAY[9]), (ARRAY[10]), (ARRAY[9, 1])) v(a)"
        ),
        ["{10}"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT greatest(ARRAY[2, 1], ARRAY[10])::text"
        ),
        ["{10}"]
    );
    // Each argument is evaluated once: its key is computed from its value.
    run(&mut session, "CREATE SEQUENCE s");
    assert_eq!(
        texts(
            &mut session,
            "SELECT max(ARRAY[nextval('s')])::text || ' ' || currval('s') \
             FROM generate_series(1, 3)"
        ),
        ["{3} 3"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT greatest(ARRAY[nextval('s')], ARRAY[0])::text || ' ' || currval('s')"
        ),
        ["{4} 4"]
    );
}

#[test]
fn types_are_durable_transactional_and_guarded_by_their_columns() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (db, mut session) = open(dir.path());
        setup(&mut session);
        run(&mut session, "ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'");
        // Inside a block: gone with a rollback, there after a commit.
        run(
            &mut session,
            "BEGIN; CREATE TYPE gone AS ENUM ('x'); ALTER TYPE mood ADD VALUE 'never'; ROLLBACK",
        );
        assert_eq!(error_code(&mut session, "SELECT 'x'::gone"), "42704");
        assert_eq!(error_code(&mut session, "SELECT 'never'::mood"), "22P02");
        run(
            &mut session,
            "BEGIN; CREATE TYPE size AS ENUM ('s', 'm', 'l'); COMMIT",
        );
        // Types and relations share names, as PostgreSQL's row types make them.
        assert_eq!(
            error_code(&mut session, "CREATE TYPE people AS ENUM ('a')"),
            "42710"
        );
        assert_eq!(
            error_code(&mut session, "CREATE TABLE size (x int)"),
            "42710"
        );
        assert_eq!(
            error_code(&mut session, "CREATE TYPE twice AS ENUM ('a', 'a')"),
            "42710"
        );
        // A used type stays; an unused one goes.
        assert_eq!(error_code(&mut session, "DROP TYPE mood"), "2BP01");
        assert_eq!(error_code(&mut session, "DROP TYPE nope"), "42704");
        // CASCADE of a used type would drop its columns: not built (0A000), the type stays;
        // of an unused one it is a plain drop.
        assert_eq!(error_code(&mut session, "DROP TYPE mood CASCADE"), "0A000");
        run(&mut session, "DROP TYPE IF EXISTS nope, size CASCADE");
        assert_eq!(error_code(&mut session, "SELECT 's'::size"), "42704");
        // The column's DEFAULT 'ok' is SQL text: it would name no label after the rename.
        assert_eq!(
            error_code(&mut session, "ALTER TYPE mood RENAME VALUE 'ok' TO 'fine'"),
            "0A000"
        );
        // Stored SQL text that names a type in use (DEFAULT 'ok'::mood here) would not
        // follow a rename: refused. Nor may a table take a type's name.
        run(
            &mut session,
            "CREATE TABLE moods (m mood DEFAULT 'ok'::mood)",
        );
        assert_eq!(
            error_code(&mut session, "ALTER TYPE mood RENAME TO feeling"),
            "0A000"
        );
        run(&mut session, "DROP TABLE moods");
        assert_eq!(
            error_code(&mut session, "ALTER TABLE people RENAME TO mood"),
            "42710"
        );
        run(&mut session, "CREATE TYPE unused AS ENUM ('x')");
        run(&mut session, "ALTER TYPE unused RENAME TO renamed");
        run(&mut session, "ALTER TYPE renamed OWNER TO someone");
        drop(session);
        db.close().unwrap();
    }
    let (_db, mut session) = open(dir.path());
    assert_eq!(
        texts(&mut session, "SELECT m FROM people ORDER BY m DESC, id"),
        ["happy", "ok", "ok", "sad"]
    );
    run(&mut session, "INSERT INTO people VALUES (9, 'ida', 'meh')");
    assert_eq!(
        texts(
            &mut session,
            "SELECT name FROM people WHERE m < 'ok' ORDER BY m DESC"
        ),
        ["ida", "bob"]
    );
    assert_eq!(
        texts(&mut session, "SELECT pg_typeof(m) FROM people LIMIT 1"),
        ["mood"]
    );
    assert_eq!(texts(&mut session, "SELECT 'x'::renamed"), ["x"]);
    assert_eq!(error_code(&mut session, "SELECT 'x'::unused"), "42704");
    run(&mut session, "DROP TABLE people");
    run(&mut session, "DROP TYPE mood, renamed");
    assert!(texts(
        &mut session,
        "SELECT typname FROM pg_type WHERE typtype = 'e'"
    )
    .is_empty());
}

/// Alembic's recipe for changing an enum's labels, checked against PostgreSQL 15: rename
/// the type in use, create the new one, move each column to it with `USING c::text::new`,
/// drop the old one. Columns follow a rename; a value outside the new labels is 22P02; an
/// enum target without USING, or with a default still set, is 42804.
#[test]
fn an_enum_in_use_is_renamed_and_its_columns_moved_to_a_new_type() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut session) = open(dir.path());
    setup(&mut session);
    run(
        &mut session,
        "ALTER TABLE people ADD COLUMN was text; UPDATE people SET was = 'ok' WHERE id < 3",
    );
    run(&mut session, "ALTER TYPE mood RENAME TO mood_old");
    assert_eq!(
        texts(&mut session, "SELECT pg_typeof(m) FROM people LIMIT 1"),
        ["mood_old"]
    );
    run(
        &mut session,
        "CREATE TYPE mood AS ENUM ('sad', 'meh', 'ok', 'happy')",
    );
    assert_eq!(
        error_code(
            &mut session,
            "ALTER TABLE people ALTER COLUMN m TYPE mood USING m::text::mood"
        ),
        "42804"
    );
    run(
        &mut session,
        "ALTER TABLE people ALTER COLUMN m DROP DEFAULT",
    );
    assert_eq!(
        error_code(&mut session, "ALTER TABLE people ALTER COLUMN m TYPE mood"),
        "42804"
    );
    run(
        &mut session,
        "ALTER TABLE people ALTER COLUMN m TYPE mood USING m::text::mood;          ALTER TABLE people ALTER COLUMN m SET DEFAULT 'meh';          ALTER TABLE people ALTER COLUMN was TYPE mood USING (was)::mood;          DROP TYPE mood_old",
    );
    run(
        &mut session,
        "INSERT INTO people (id, name) VALUES (5, 'ed')",
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT name || ':' || m || ':' || coalesce(was::text, '-') FROM people \
             WHERE m > 'sad' ORDER BY m DESC, id"
        ),
        ["ann:happy:ok", "cy:ok:-", "di:ok:-", "ed:meh:-"]
    );
    // The index on m still finds rows by the new type's labels.
    assert_eq!(
        texts(&mut session, "SELECT name FROM people WHERE m = 'meh'"),
        ["ed"]
    );
    // Back to text and to an enum that lacks a stored value: 22P02, nothing changed.
    run(
        &mut session,
        "ALTER TABLE people ALTER COLUMN m DROP DEFAULT;          ALTER TABLE people ALTER COLUMN m TYPE text",
    );
    run(&mut session, "CREATE TYPE small AS ENUM ('ok', 'sad')");
    assert_eq!(
        error_code(
            &mut session,
            "ALTER TABLE people ALTER COLUMN m TYPE small USING m::small"
        ),
        "22P02"
    );
    assert_eq!(
        texts(&mut session, "SELECT pg_typeof(m) FROM people LIMIT 1"),
        ["text"]
    );
    // Labels and text order differently: a check reading the column would change meaning.
    run(
        &mut session,
        "CREATE TABLE graded (g small CHECK (g > 'ok')); \
         CREATE TABLE marked (t text DEFAULT 'ok'::small)",
    );
    assert_eq!(
        error_code(&mut session, "ALTER TABLE graded ALTER COLUMN g TYPE text"),
        "0A000"
    );
    // A default naming the type keeps it from being dropped.
    assert_eq!(error_code(&mut session, "DROP TYPE small"), "2BP01");
}

#[test]
fn a_renamed_value_is_renamed_in_every_row_key_and_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db.clone()).unwrap();
    let mut session = Session::new(catalog.clone(), "tester");
    setup(&mut session);
    run(
        &mut session,
        "CREATE TABLE tags (m mood PRIMARY KEY, note text); \
         INSERT INTO tags VALUES ('happy', 'h'), ('sad', 's')",
    );
    run(
        &mut session,
        "ALTER TYPE mood RENAME VALUE 'happy' TO 'glad'",
    );
    // Rows, the index on people.m and tags' primary key hold the new label, in the old place.
    assert_eq!(
        texts(&mut session, "SELECT name FROM people WHERE m = 'glad'"),
        ["ann"]
    );
    assert_eq!(
        texts(&mut session, "SELECT name FROM people ORDER BY m, id"),
        ["bob", "cy", "di", "ann"]
    );
    assert_eq!(
        texts(&mut session, "SELECT note FROM tags WHERE m = 'glad'"),
        ["h"]
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT enumlabel::text FROM pg_enum ORDER BY enumsortorder"
        ),
        ["sad", "ok", "glad"]
    );
    assert_eq!(error_code(&mut session, "SELECT 'happy'::mood"), "22P02");
    assert_eq!(
        error_code(&mut session, "ALTER TYPE mood RENAME VALUE 'nope' TO 'x'"),
        "22023"
    );
    assert_eq!(
        error_code(&mut session, "ALTER TYPE mood RENAME VALUE 'sad' TO 'ok'"),
        "42710"
    );
    let long = "x".repeat(64);
    let sql = format!("ALTER TYPE mood RENAME VALUE 'sad' TO '{long}'");
    assert_eq!(error_code(&mut session, &sql), "22023");
    // In a block: the label and the rows together, or neither.
    run(
        &mut session,
        "BEGIN; ALTER TYPE mood RENAME VALUE 'sad' TO 'blue'",
    );
    assert_eq!(
        texts(&mut session, "SELECT name FROM people WHERE m = 'blue'"),
        ["bob"]
    );
    run(&mut session, "ROLLBACK");
    assert_eq!(
        texts(&mut session, "SELECT name FROM people WHERE m = 'sad'"),
        ["bob"]
    );
    assert_eq!(error_code(&mut session, "SELECT 'blue'::mood"), "22P02");
    // A REPEATABLE READ block's snapshot would miss rows committed since it began: refused.
    run(&mut session, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(
        error_code(&mut session, "ALTER TYPE mood RENAME VALUE 'sad' TO 'blue'"),
        "0A000"
    );
    run(&mut session, "ROLLBACK");
    // Another session's snapshot from before a rename still orders the old rows it reads.
    let mut reader = Session::new(catalog.clone(), "reader");
    run(&mut reader, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(texts(&mut reader, "SELECT count(*) FROM people"), ["4"]);
    run(&mut session, "ALTER TYPE mood RENAME VALUE 'sad' TO 'blue'");
    assert_eq!(
        texts(
            &mut reader,
            "SELECT m::text FROM people ORDER BY people.m, id"
        ),
        ["sad", "ok", "ok", "glad"]
    );
    run(&mut reader, "COMMIT");
    run(&mut session, "ALTER TYPE mood RENAME VALUE 'blue' TO 'sad'");
    // A foreign key over the type would refuse the rows renamed table by table: refused.
    run(
        &mut session,
        "CREATE TABLE notes (m mood REFERENCES tags (m))",
    );
    assert_eq!(
        error_code(
            &mut session,
            "ALTER TYPE mood RENAME VALUE 'glad' TO 'joyful'"
        ),
        "0A000"
    );
    run(&mut session, "DROP TABLE notes");
    run(
        &mut session,
        "ALTER TYPE mood RENAME VALUE 'glad' TO 'joyful'",
    );
    drop((reader, session, catalog, db));
    let (_db, mut session) = open(dir.path());
    assert_eq!(
        texts(
            &mut session,
            "SELECT t.note FROM tags t JOIN people p USING (m) ORDER BY 1"
        ),
        ["h", "s"]
    );
    assert_eq!(
        texts(&mut session, "SELECT name FROM people WHERE m = 'joyful'"),
        ["ann"]
    );
}

#[test]
fn the_catalog_shows_enums_as_postgres_does() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut session) = open(dir.path());
    setup(&mut session);
    run(&mut session, "ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'");
    assert_eq!(
        texts(
            &mut session,
            "SELECT e.enumlabel || ':' || e.enumsortorder FROM pg_enum e \
             JOIN pg_type t ON t.oid = e.enumtypid \
             WHERE t.typname = 'mood' AND t.typtype = 'e' ORDER BY e.enumsortorder"
        ),
        ["sad:1", "meh:1.5", "ok:2", "happy:3"]
    );
    let type_oid = texts(
        &mut session,
        "SELECT oid FROM pg_type WHERE typname = 'mood'",
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT pg_type_is_visible(oid)::text FROM pg_type WHERE typname = 'mood'"
        ),
        ["true"]
    );
    assert_eq!(
        texts(&mut session, "SELECT 'mood'::regtype::oid"),
        type_oid.clone()
    );
    assert_eq!(
        texts(
            &mut session,
            "SELECT a.atttypid FROM pg_attribute a WHERE a.attrelid = 'people'::regclass \
             AND a.attname = 'm'"
        ),
        type_oid
    );
    let format = "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
                  WHERE a.attrelid = 'public.people'::regclass AND a.attname = 'm'";
    assert_eq!(texts(&mut session, format), ["mood"]);
    // pg_dump empties search_path: a type outside it is written with its schema.
    run(&mut session, "SET search_path = ''");
    assert_eq!(texts(&mut session, format), ["public.mood"]);
    run(&mut session, "RESET search_path");
    assert_eq!(
        rows(
            &mut session,
            "SELECT data_type, udt_schema, udt_name FROM information_schema.columns \
             WHERE table_name = 'people' AND column_name = 'm'"
        ),
        [vec![
            Value::Text("USER-DEFINED".into()),
            Value::Text("public".into()),
            Value::Text("mood".into())
        ]]
    );
    // Labels of the type in order, as SQLAlchemy's reflection asks for them.
    assert_eq!(
        texts(
            &mut session,
            "SELECT array_agg(e.enumlabel ORDER BY e.enumsortorder) FROM pg_type t \
             JOIN pg_enum e ON e.enumtypid = t.oid WHERE t.typname = 'mood'"
        ),
        ["{sad,meh,ok,happy}"]
    );
}

/// A block's uncommitted ALTER TYPE holds the type: another session's write of a column of
/// it waits, and after a rollback the label it used is no label (it never reaches a row).
#[test]
fn another_session_waits_for_a_blocks_type_change() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db.clone()).unwrap();
    let mut session = Session::new(catalog.clone(), "tester");
    setup(&mut session);
    run(&mut session, "BEGIN; ALTER TYPE mood ADD VALUE 'meh'");
    run(&mut session, "INSERT INTO people VALUES (7, 'own', 'meh')");
    let writer = std::thread::spawn(move || {
        let mut other = Session::new(catalog, "other");
        let started = std::time::Instant::now();
        let code = error_code(&mut other, "INSERT INTO people VALUES (8, 'eve', 'meh')");
        (code, started.elapsed())
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    run(&mut session, "ROLLBACK");
    let (code, waited) = writer.join().unwrap();
    assert_eq!(code, "22P02");
    assert!(
        waited >= std::time::Duration::from_millis(250),
        "{waited:?}"
    );
    assert_eq!(
        texts(&mut session, "SELECT count(*) FROM people WHERE id >= 7"),
        ["0"]
    );
    assert_eq!(error_code(&mut session, "SELECT 'meh'::mood"), "22P02");
}

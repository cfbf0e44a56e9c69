//! The new SQL types through a real driver (rust-postgres: binary parameters and binary
//! results) and through the simple protocol (text results): the bytes and texts must be
//! PostgreSQL's (the expected binary forms are what PostgreSQL 15 sends).

use crate::common;

use std::error::Error;

use bytes::BytesMut;
use common::{sqlstate, TestServer};
use postgres::types::{FromSql, IsNull, ToSql, Type};

/// A value in its raw binary wire form, of whatever type the server says.
#[derive(Debug, PartialEq)]
struct Raw(Vec<u8>);

impl ToSql for Raw {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for Raw {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Raw, Box<dyn Error + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// 12345.678 as numeric_send writes it: 3 base-10000 digits, weight 1, positive, scale 3.
const NUMERIC_12345_678: [u8; 14] = [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1A, 0x7C];
/// 2020-01-02: days since 2000-01-01.
const DATE_2020_01_02: i32 = 7306;
/// 2020-01-02 03:04:05.5: microseconds since 2000-01-01.
const TIMESTAMP: i64 = 7306 * 86_400_000_000 + ((3 * 60 + 4) * 60 + 5) * 1_000_000 + 500_000;

#[test]
fn new_types_round_trip_in_binary_and_text() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE t (id int4 PRIMARY KEY, c char(8), r real, n numeric(10,3), \
             b bytea, d date, ts timestamp, tz timestamptz)",
        )
        .unwrap();
    let insert = client
        .prepare("INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
        .unwrap();
    assert_eq!(
        insert.params(),
        &[
            Type::INT4,
            Type::BPCHAR,
            Type::FLOAT4,
            Type::NUMERIC,
            Type::BYTEA,
            Type::DATE,
            Type::TIMESTAMP,
            Type::TIMESTAMPTZ
        ]
    );
    client
        .execute(
            &insert,
            &[
                &1i32,
                &"ab",
                &1.5f32,
                &Raw(NUMERIC_12345_678.to_vec()),
                &vec![0u8, 1, 255],
                &Raw(DATE_2020_01_02.to_be_bytes().to_vec()),
                &Raw(TIMESTAMP.to_be_bytes().to_vec()),
                &Raw(TIMESTAMP.to_be_bytes().to_vec()),
            ],
        )
        .unwrap();

    // Binary results, and the types in the row description.
    let row = client
        .query_one(
            "SELECT c, r, n, b, d, ts, tz FROM t WHERE id = $1",
            &[&1i32],
        )
        .unwrap();
    let types: Vec<Type> = row.columns().iter().map(|c| c.type_().clone()).collect();
    assert_eq!(
        types,
        [
            Type::BPCHAR,
            Type::FLOAT4,
            Type::NUMERIC,
            Type::BYTEA,
            Type::DATE,
            Type::TIMESTAMP,
            Type::TIMESTAMPTZ
        ]
    );
    assert_eq!(row.get::<_, String>(0), "ab      ");
    assert_eq!(row.get::<_, f32>(1), 1.5);
    assert_eq!(row.get::<_, Raw>(2), Raw(NUMERIC_12345_678.to_vec()));
    assert_eq!(row.get::<_, Vec<u8>>(3), vec![0u8, 1, 255]);
    assert_eq!(
        row.get::<_, Raw>(4),
        Raw(DATE_2020_01_02.to_be_bytes().to_vec())
    );
    assert_eq!(row.get::<_, Raw>(5), Raw(TIMESTAMP.to_be_bytes().to_vec()));
    assert_eq!(row.get::<_, Raw>(6), Raw(TIMESTAMP.to_be_bytes().to_vec()));

    // Text results (simple protocol).
    let messages = client
        .simple_query("SELECT c, r, n, b, d, ts, tz FROM t WHERE id = 1")
        .unwrap();
    let row = messages
        .iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        })
        .expect("a row");
    let texts: Vec<&str> = (0..7).map(|i| row.get(i).unwrap()).collect();
    assert_eq!(
        texts,
        [
            "ab      ",
            "1.5",
            "12345.678",
            "\\x0001ff",
            "2020-01-02",
            "2020-01-02 03:04:05.5",
            "2020-01-02 03:04:05.5+00"
        ]
    );

    // Point lookups with binary parameters of the key types.
    client
        .batch_execute("CREATE TABLE k (n numeric(8,2) PRIMARY KEY, d date)")
        .unwrap();
    client
        .batch_execute("INSERT INTO k VALUES (12345.67, '2020-01-02'), (-1, NULL)")
        .unwrap();
    let found = client
        .query_one(
            "SELECT d FROM k WHERE n = $1",
            &[&Raw(vec![
                0, 3, 0, 1, 0, 0, 0, 2, 0, 1, 0x09, 0x29, 0x1A, 0x2C,
            ])],
        )
        .unwrap();
    assert_eq!(
        found.get::<_, Raw>(0),
        Raw(DATE_2020_01_02.to_be_bytes().to_vec())
    );

    // Errors keep their SQLSTATE through the wire.
    let too_long = client
        .execute("INSERT INTO t (id, c) VALUES (2, $1)", &[&"123456789"])
        .unwrap_err();
    assert_eq!(sqlstate(&too_long), "22001");
    let bad_date = client
        .simple_query("SELECT '2020-02-30'::date")
        .unwrap_err();
    assert_eq!(sqlstate(&bad_date), "22008");
}

/// uuid, json, jsonb and interval in PostgreSQL's binary forms: 16 bytes; the text; a
/// version byte 1 and the text; microseconds (i64), days (i32), months (i32).
#[test]
fn uuid_json_and_interval_in_binary() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE d (id uuid PRIMARY KEY, j json, b jsonb, i interval)")
        .unwrap();
    let insert = client
        .prepare("INSERT INTO d VALUES ($1, $2, $3, $4)")
        .unwrap();
    assert_eq!(
        insert.params(),
        &[Type::UUID, Type::JSON, Type::JSONB, Type::INTERVAL]
    );
    let uuid: Vec<u8> = (0u8..16).collect();
    let mut jsonb = vec![1u8];
    jsonb.extend_from_slice(br#"{"b":1,"a":[true]}"#);
    // 1 year 2 mons 3 days 04:00:00.5
    let mut interval = Vec::new();
    interval.extend_from_slice(&(4 * 3_600_000_000i64 + 500_000).to_be_bytes());
    interval.extend_from_slice(&3i32.to_be_bytes());
    interval.extend_from_slice(&14i32.to_be_bytes());
    client
        .execute(
            &insert,
            &[
                &Raw(uuid.clone()),
                &Raw(br#"{"z": 1, "a": 2}"#.to_vec()),
                &Raw(jsonb),
                &Raw(interval.clone()),
            ],
        )
        .unwrap();
    let row = client
        .query_one(
            "SELECT id, j, b, i FROM d WHERE id = $1",
            &[&Raw(uuid.clone())],
        )
        .unwrap();
    assert_eq!(row.get::<_, Raw>(0), Raw(uuid));
    assert_eq!(row.get::<_, Raw>(1), Raw(br#"{"z": 1, "a": 2}"#.to_vec()));
    let mut canonical = vec![1u8];
    canonical.extend_from_slice(br#"{"a": [true], "b": 1}"#);
    assert_eq!(row.get::<_, Raw>(2), Raw(canonical));
    assert_eq!(row.get::<_, Raw>(3), Raw(interval));
    let text = client
        .simple_query("SELECT id, i FROM d")
        .unwrap()
        .into_iter()
        .find_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => Some((
                row.get(0).unwrap().to_string(),
                row.get(1).unwrap().to_string(),
            )),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        text,
        (
            "00010203-0405-0607-0809-0a0b0c0d0e0f".to_string(),
            "1 year 2 mons 3 days 04:00:00.5".to_string()
        )
    );
    let error = client
        .execute(
            &insert,
            &[&Raw(vec![1, 2]), &Raw(vec![]), &Raw(vec![1]), &Raw(vec![])],
        )
        .unwrap_err();
    assert_eq!(sqlstate(&error), "22P03");
}

/// Array results (array_agg, ARRAY(subquery), ARRAY[...]) are typed text[], integer[] and
/// bigint[] on the wire, in both formats: drivers get lists, not '{a,b}' strings.
#[test]
fn array_results_are_typed_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TABLE a (id int PRIMARY KEY, big int8, name text); \
             INSERT INTO a VALUES (1, 10, 'x'), (2, NULL, 'y z'), (3, 30, NULL)",
        )
        .unwrap();
    // Binary results (rust-postgres asks for binary).
    let row = client
        .query_one(
            "SELECT array_agg(id ORDER BY id), array_agg(big ORDER BY id), \
             array_agg(name ORDER BY id), ARRAY(SELECT name FROM a WHERE id < 3 ORDER BY id), \
             ARRAY[7, 8] FROM a",
            &[],
        )
        .unwrap();
    let types: Vec<Type> = row.columns().iter().map(|c| c.type_().clone()).collect();
    assert_eq!(
        types,
        [
            Type::INT4_ARRAY,
            Type::INT8_ARRAY,
            Type::TEXT_ARRAY,
            Type::TEXT_ARRAY,
            Type::INT4_ARRAY
        ]
    );
    assert_eq!(row.get::<_, Vec<i32>>(0), vec![1, 2, 3]);
    assert_eq!(
        row.get::<_, Vec<Option<i64>>>(1),
        vec![Some(10), None, Some(30)]
    );
    assert_eq!(
        row.get::<_, Vec<Option<String>>>(2),
        vec![Some("x".into()), Some("y z".into()), None]
    );
    assert_eq!(row.get::<_, Vec<String>>(3), vec!["x", "y z"]);
    assert_eq!(row.get::<_, Vec<i32>>(4), vec![7, 8]);
    // Text results keep PostgreSQL's text form.
    let text = client
        .simple_query("SELECT array_agg(name ORDER BY id) FROM a")
        .unwrap()
        .into_iter()
        .find_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => Some(row.get(0).unwrap().to_string()),
            _ => None,
        })
        .unwrap();
    assert_eq!(text, "{x,\"y z\",NULL}");
}

/// An enum column through rust-postgres: results in text (the simple protocol) in the type's
/// order, and labels as text parameters of the extended protocol, checked (22P02). (Its
/// binary results are not read here: rust-postgres looks an unknown type oid up with an
/// oid-typed parameter, and oid columns are int8 in Hayate.)
#[test]
fn enum_columns_take_labels_from_a_driver() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute(
            "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy'); \
             ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'; \
             CREATE TABLE p (id int PRIMARY KEY, m mood); \
             INSERT INTO p VALUES (1, 'happy'), (2, 'sad')",
        )
        .unwrap();
    let insert = client.prepare("INSERT INTO p VALUES ($1, $2)").unwrap();
    assert_eq!(insert.params(), [Type::INT4, Type::TEXT]);
    client.execute(&insert, &[&3i32, &"meh"]).unwrap();
    let error = client.execute(&insert, &[&4i32, &"glad"]).unwrap_err();
    assert_eq!(sqlstate(&error), "22P02");
    let labels: Vec<String> = client
        .simple_query("SELECT m FROM p ORDER BY m DESC")
        .unwrap()
        .into_iter()
        .filter_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => Some(row.get(0).unwrap().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(labels, ["happy", "meh", "sad"]);
    let order: Vec<i32> = client
        .query("SELECT id FROM p WHERE m < $1 ORDER BY m", &[&"ok"])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(order, [2, 3]);
}

/// Array columns through rust-postgres, which sends and reads arrays in binary: Vec<i32>,
/// Vec<i64>, Vec<Option<String>> parameters land in int[], bigint[] and text[] columns and
/// come back equal; a NULL element and an empty array survive.
#[test]
fn array_columns_take_binary_array_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path());
    let mut client = server.connect();
    client
        .batch_execute("CREATE TABLE arr (id int PRIMARY KEY, n int[], b bigint[], t text[])")
        .unwrap();
    let insert = client
        .prepare("INSERT INTO arr VALUES ($1, $2, $3, $4)")
        .unwrap();
    assert_eq!(
        insert.params(),
        [
            Type::INT4,
            Type::INT4_ARRAY,
            Type::INT8_ARRAY,
            Type::TEXT_ARRAY
        ]
    );
    let tags = vec![Some("a b".to_string()), None, Some("{c}".to_string())];
    client
        .execute(&insert, &[&1i32, &vec![3i32, -1], &vec![1i64 << 40], &tags])
        .unwrap();
    client
        .execute(
            &insert,
            &[&2i32, &Vec::<i32>::new(), &Vec::<i64>::new(), &tags],
        )
        .unwrap();
    let rows = client
        .query("SELECT n, b, t FROM arr ORDER BY n", &[])
        .unwrap();
    assert_eq!(rows[0].get::<_, Vec<i32>>(0), Vec::<i32>::new());
    assert_eq!(rows[1].get::<_, Vec<i32>>(0), vec![3, -1]);
    assert_eq!(rows[1].get::<_, Vec<i64>>(1), vec![1i64 << 40]);
    assert_eq!(rows[1].get::<_, Vec<Option<String>>>(2), tags);
    let found: i32 = client
        .query_one("SELECT id FROM arr WHERE n = $1", &[&vec![3i32, -1]])
        .unwrap()
        .get(0);
    assert_eq!(found, 1);
}

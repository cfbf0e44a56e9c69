//! Access paths chosen for primary key predicates: equality on every key column is a point
//! lookup (also when the constant's type differs from the column's), a bound on the first
//! key column a range scan, anything else a full scan. Results are checked too.

use std::sync::Arc;

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::plan::{Access, Plan};
use hayate_sql::{parse, Catalog, DataType, Outcome, Session, Value};

fn session(dir: &std::path::Path) -> Session {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Arc::new(Catalog::open(db).unwrap());
    Session::new(catalog, "tester", "test")
}

fn run(session: &mut Session, sql: &str) -> Vec<Outcome> {
    session
        .execute_sql(sql)
        .into_iter()
        .map(|outcome| outcome.unwrap_or_else(|error| panic!("{sql}: {error}")))
        .collect()
}

fn access(session: &Session, sql: &str, declared: &[DataType]) -> Access {
    let statement = parse(sql).unwrap().pop().unwrap();
    let prepared = session.prepare(statement, declared).unwrap();
    match prepared.plan() {
        Plan::Select(select) => select.table_reads()[0].access.clone(),
        Plan::Update { read, .. } | Plan::Delete { read, .. } => read.access.clone(),
        other => panic!("not a read: {other:?}"),
    }
}

#[test]
fn primary_key_predicates_pick_lookups_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = session(dir.path());
    run(
        &mut session,
        "CREATE TABLE a (id int4 PRIMARY KEY, v text); \
         CREATE TABLE b (x text, y int8, z int2, PRIMARY KEY (x, y)); \
         INSERT INTO a VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    );
    let point = |access: Access| matches!(access, Access::Point(_));
    assert!(point(access(&session, "SELECT v FROM a WHERE id = 2", &[])));
    assert!(point(access(
        &session,
        "SELECT v FROM a WHERE id = $1",
        &[DataType::Int8]
    )));
    assert!(point(access(
        &session,
        "SELECT v FROM a WHERE $1 = id AND v = 'x'",
        &[]
    )));
    assert!(point(access(
        &session,
        "UPDATE a SET v = 'z' WHERE id = $1",
        &[]
    )));
    assert!(point(access(
        &session,
        "DELETE FROM a WHERE id = 5::int8",
        &[]
    )));
    assert!(point(access(
        &session,
        "SELECT * FROM b WHERE y = 1 AND x = 'k'",
        &[]
    )));
    assert!(matches!(
        access(&session, "SELECT * FROM b WHERE x = 'k'", &[]),
        Access::Range {
            lower: Some(_),
            upper: Some(_)
        }
    ));
    assert!(matches!(
        access(&session, "SELECT v FROM a WHERE id > 1 AND id <= $1", &[]),
        Access::Range {
            lower: Some(_),
            upper: Some(_)
        }
    ));
    assert_eq!(
        access(&session, "SELECT v FROM a WHERE v = 'one'", &[]),
        Access::Full
    );
    assert_eq!(
        access(&session, "SELECT v FROM a WHERE id = 1 OR id = 2", &[]),
        Access::Full
    );
    assert_eq!(
        access(&session, "SELECT * FROM b WHERE y = 1", &[]),
        Access::Full
    );

    // An int8 parameter finds the int4 key; a fractional one finds nothing.
    let statement = parse("SELECT v FROM a WHERE id = $1")
        .unwrap()
        .pop()
        .unwrap();
    let prepared = session.prepare(statement, &[DataType::Int8]).unwrap();
    let rows = |outcome: Outcome| match outcome {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{other:?}"),
    };
    let found = rows(session.execute(&prepared, vec![Value::Int(3)]).unwrap());
    assert_eq!(found, vec![vec![Value::Text("three".into())]]);
    let outcome = run(&mut session, "SELECT v FROM a WHERE id = 2.5");
    assert_eq!(
        rows(outcome.into_iter().next().unwrap()),
        Vec::<Vec<Value>>::new()
    );
    let outcome = run(
        &mut session,
        "SELECT id FROM a WHERE id >= 1.5 AND id < 3 ORDER BY id",
    );
    assert_eq!(
        rows(outcome.into_iter().next().unwrap()),
        vec![vec![Value::Int(2)]]
    );
}

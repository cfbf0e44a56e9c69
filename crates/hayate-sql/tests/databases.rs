//! The databases of one data directory (`Cluster`): sessions of two databases see their own
//! tables, and what a crash leaves of a CREATE or DROP DATABASE (trees under a prefix no
//! database names) is dropped at the next open.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Cluster, Session, Value};

use crate::common;
use common::{rows, run};

#[test]
fn leftovers_of_an_interrupted_create_or_drop_are_dropped_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let cluster = Cluster::open(db.clone()).unwrap();
    cluster.create_database("shop", false).unwrap();
    let mut shop = Session::new(cluster.catalog("shop").unwrap(), "tester");
    run(
        &mut shop,
        "CREATE TABLE t (k int PRIMARY KEY); INSERT INTO t VALUES (1), (2)",
    );
    let mut main = Session::new(cluster.catalog("postgres").unwrap(), "tester");
    run(
        &mut main,
        "CREATE TABLE t (k int PRIMARY KEY); INSERT INTO t VALUES (3)",
    );
    drop((shop, main, cluster));
    // What a crash after CREATE DATABASE's trees, before its row, leaves behind.
    db.create_table("db99999.sql.catalog").unwrap();
    db.create_table("db99999.sql.table.t").unwrap();
    db.close().unwrap();

    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let cluster = Cluster::open(db.clone()).unwrap();
    let names: Vec<String> = db.tables().into_iter().map(|info| info.name).collect();
    assert!(
        !names.iter().any(|name| name.starts_with("db99999.")),
        "orphans left: {names:?}"
    );
    let mut shop = Session::new(cluster.catalog("shop").unwrap(), "tester");
    assert_eq!(
        rows(&mut shop, "SELECT k FROM t ORDER BY k"),
        [[Value::Int(1)], [Value::Int(2)]]
    );
    let mut main = Session::new(cluster.catalog("postgres").unwrap(), "tester");
    assert_eq!(rows(&mut main, "SELECT k FROM t"), [[Value::Int(3)]]);
    drop(shop);
    // DROP DATABASE drops the database's trees, not the others'.
    run(&mut main, "DROP DATABASE shop");
    let names: Vec<String> = db.tables().into_iter().map(|info| info.name).collect();
    assert!(
        names.iter().all(|name| !name.starts_with("db")),
        "{names:?}"
    );
    assert!(names.iter().any(|name| name == "sql.table.t"), "{names:?}");
    assert_eq!(
        cluster.catalog("shop").err().map(|error| error.code),
        Some("3D000")
    );
    drop((main, cluster));
    db.close().unwrap();
}

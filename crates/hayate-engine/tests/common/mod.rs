//! Helpers shared by the engine's integration tests.

use std::ops::Bound;

use hayate_engine::{Database, TreeId};

/// Every row of `table` in key order, read in one read-only snapshot.
pub fn rows(db: &Database, table: TreeId) -> Vec<(Vec<u8>, Vec<u8>)> {
    let txn = db.begin_read_only();
    let rows = txn
        .scan(table, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect::<hayate_engine::Result<Vec<_>>>()
        .unwrap();
    txn.commit().unwrap();
    rows
}

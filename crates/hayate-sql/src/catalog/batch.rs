//! Filling engine trees that no definition names yet from a snapshot of a table's rows (DDL
//! step 2 in the `catalog` module doc): CREATE INDEX fills its index, a rebuild its new
//! table and indexes.
//!
//! 1. `for_each_row` reads every row of the old table from one snapshot: the transaction
//!    block's, with its own writes, if the DDL runs in one.
//! 2. `BatchWriter::write` puts each entry, committing whenever a batch reaches
//!    `BATCH_BYTES`, so no commit record outgrows the log's frame limit.
//! 3. `BatchWriter::finish` commits the last batch. The trees become visible only with the
//!    later commit of the definition, so the DDL stays atomic.

use std::ops::Bound;

use hayate_engine::{Database, Transaction, TreeId};

use super::table::Table;
use crate::encoding::row;
use crate::error::{SqlError, SqlResult};
use crate::types::Value;

/// Calls `f` with (engine key, values) of every row of a table, from one snapshot: the
/// transaction block's (with its own writes) if there is one.
pub(super) fn for_each_row(
    db: &Database,
    block: Option<&Transaction>,
    table: &Table,
    mut f: impl FnMut(Vec<u8>, Vec<Value>) -> SqlResult<()>,
) -> SqlResult<()> {
    let types = table.def.types();
    let own;
    let txn = match block {
        Some(txn) => txn,
        None => {
            own = db.begin_read_only();
            &own
        }
    };
    for entry in txn.scan(table.tree, Bound::Unbounded, Bound::Unbounded)? {
        let (key, raw) = entry?;
        f(key, row::decode(&raw, &types, &table.def.name)?)?;
    }
    Ok(())
}

/// Commit-record payload after which `BatchWriter` commits: well below the log's frame limit
/// (16 MiB with the default log buffer).
const BATCH_BYTES: usize = 4 << 20;

/// Fills engine trees that no definition names yet (so SQL cannot see them) in transactions
/// of bounded size: one commit of a whole table would outgrow a log record. The trees become
/// visible only with the later commit of the definition, so the DDL stays atomic.
pub(super) struct BatchWriter<'a> {
    db: &'a Database,
    txn: Transaction,
    bytes: usize,
}

impl<'a> BatchWriter<'a> {
    pub(super) fn new(db: &'a Database) -> BatchWriter<'a> {
        BatchWriter {
            db,
            txn: db.begin(),
            bytes: 0,
        }
    }

    /// Writes an entry; `checked`: it must be new (else the error of `duplicate`). A key
    /// written by an earlier batch counts: `insert` sees committed rows.
    pub(super) fn write(
        &mut self,
        tree: TreeId,
        key: &[u8],
        value: &[u8],
        checked: bool,
        duplicate: impl FnOnce() -> SqlError,
    ) -> SqlResult<()> {
        if checked {
            self.txn
                .insert(tree, key, value)
                .map_err(|error| match error {
                    hayate_engine::Error::DuplicateKey => duplicate(),
                    other => other.into(),
                })?;
        } else {
            self.txn.put(tree, key, value)?;
        }
        self.bytes += key.len() + value.len() + 32;
        if self.bytes >= BATCH_BYTES {
            // Commit before the next batch begins, so its snapshot sees this one's keys.
            let placeholder = self.db.begin_read_only();
            std::mem::replace(&mut self.txn, placeholder).commit()?;
            self.txn = self.db.begin();
            self.bytes = 0;
        }
        Ok(())
    }

    pub(super) fn finish(self) -> SqlResult<()> {
        self.txn.commit()?;
        Ok(())
    }
}

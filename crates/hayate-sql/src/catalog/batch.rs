//! Filling engine trees that no definition names yet from a snapshot of a table's rows (DDL
//! step 2 in the `catalog` module doc): CREATE INDEX fills its index, a rebuild its new
//! table and indexes.
//!
//! 1. `for_each_row` reads every row of the old table once every commit started before is
//!    visible: from a fresh snapshot, or in a transaction block the newest committed rows
//!    with the block's own writes.
//! 2. `BatchWriter::write` puts each entry, committing whenever a batch reaches
//!    `BATCH_BYTES`, so no commit record outgrows the log's frame limit. A table's rows come
//!    in key order (unless a rebuild gives the table a new primary key); an index's entries
//!    are gathered (`IndexBuild`, sorted in the temporary space) and written in key order
//!    once the rows were read.
//! 3. `BatchWriter::finish` commits the last batch. The trees become visible only with the
//!    later commit of the definition, so the DDL stays atomic.

use std::ops::Bound;

use hayate_engine::{Database, ExternalSorter, Transaction, TreeId};

use super::definition::{IndexDef, IndexKeys, TableDef};
use super::index_entry;
use super::table::Table;
use crate::encoding::row;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::Value;

/// Calls `f` with (engine key, values) of every row of a table (the DDL holds its exclusive
/// lock): every commit started before is waited for, then read from a fresh snapshot, or in
/// a transaction block as the newest committed rows with the block's own writes (the block's
/// snapshot may be older than the rows a rebuild must keep).
pub(super) fn for_each_row(
    db: &Database,
    block: Option<&Transaction>,
    table: &Table,
    mut f: impl FnMut(Vec<u8>, Vec<Value>) -> SqlResult<()>,
) -> SqlResult<()> {
    let types = table.def.types();
    let own;
    let scan = match block {
        Some(txn) => {
            // The block's snapshot may predate commits of writers the DDL's table lock waited
            // for: read the newest committed rows (and the block's own writes), once every
            // commit started before is visible. No other writer can touch the table now.
            db.wait_for_started_commits();
            txn.scan_latest(table.tree, Bound::Unbounded, Bound::Unbounded)?
        }
        None => {
            // Commits of writers whose table locks the DDL waited for are in the snapshot.
            own = db.begin_read_only_after_commits();
            own.scan(table.tree, Bound::Unbounded, Bound::Unbounded)?
        }
    };
    for entry in scan {
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
        duplicate: impl FnOnce(&Transaction) -> SqlError,
    ) -> SqlResult<()> {
        if checked {
            match self.txn.insert(tree, key, value) {
                Ok(_) => {}
                Err(hayate_engine::Error::DuplicateKey) => return Err(duplicate(&self.txn)),
                Err(other) => return Err(other.into()),
            }
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

/// Work memory of the index sorts of one DDL, shared by the indexes it builds at once;
/// beyond it sorted runs spill to the temporary space.
const INDEX_SORT_BYTES: usize = 64 << 20;
/// The least work memory one index's sort gets.
const INDEX_SORT_BYTES_MIN: usize = 4 << 20;

/// One index's entries, gathered while its table's rows are read and written in key order
/// afterwards (`write_to`). A B+tree filled in key order splits at its right edge and its
/// leaves end about 90% full; entries in row order (random for most indexes) split leaves in
/// the middle and leave them about two thirds full: a third more pages to store, cache and
/// read.
pub(super) struct IndexBuild {
    tree: TreeId,
    sorter: ExternalSorter,
}

impl IndexBuild {
    /// A build of the index `tree`, one of `builds` filled from the same rows at once (they
    /// share the work memory).
    pub(super) fn new(db: &Database, tree: TreeId, builds: usize) -> IndexBuild {
        let work_mem = (INDEX_SORT_BYTES / builds.max(1)).max(INDEX_SORT_BYTES_MIN);
        IndexBuild {
            tree,
            sorter: db.temp().sorter(work_mem),
        }
    }

    /// Adds the entry `key` -> `pk`; `checked`: its insert must check uniqueness.
    pub(super) fn push(&mut self, key: Vec<u8>, pk: &[u8], checked: bool) -> SqlResult<()> {
        let mut value = Vec::with_capacity(pk.len() + 1);
        value.push(u8::from(checked));
        value.extend_from_slice(pk);
        self.sorter.push(key, value)?;
        Ok(())
    }

    /// Writes the entries in key order. `duplicate(txn, pk)`: the error of a unique entry that
    /// repeats, for the row with primary key `pk` (read through `txn`, the writer's).
    pub(super) fn write_to(
        self,
        writer: &mut BatchWriter<'_>,
        mut duplicate: impl FnMut(&Transaction, &[u8]) -> SqlError,
    ) -> SqlResult<()> {
        for record in self.sorter.finish()? {
            let (key, value) = record?;
            let (&checked, pk) = value.split_first().expect("a flag and the primary key");
            writer.write(self.tree, &key, pk, checked == 1, |txn| duplicate(txn, pk))?;
        }
        Ok(())
    }
}

/// The 23505 of an index build whose unique key repeats, naming the key of the row `pk` of
/// `table_tree` as `txn` sees it.
pub(super) fn duplicated_row(
    txn: &Transaction,
    table_tree: TreeId,
    def: &TableDef,
    index: &IndexDef,
    pk: &[u8],
    keys_of: IndexKeys<'_>,
) -> SqlError {
    let row = txn.get(table_tree, pk).ok().flatten();
    let values = row.and_then(|raw| row::decode(&raw, &def.types(), &def.name).ok());
    match values.and_then(|values| keys_of(def, index, &values).ok().flatten()) {
        Some(keys) => index_entry::duplicated(def, index, &keys),
        None => SqlError::new(
            sqlstate::UNIQUE_VIOLATION,
            format!("could not create unique index \"{}\"", index.name),
        ),
    }
}

//! A table as statements use it: its definition with the engine trees and sequences it
//! names, and the engine key of its rows.
//!
//! 1. The catalog builds a `Table` when it opens the database or publishes a DDL, once the
//!    engine trees its definition names exist (`Catalog::load`).
//! 2. Statements share it through an `Arc` until a later DDL publishes a new one.
//! 3. A table without a primary key keys its rows by a hidden row id: the first insert after
//!    open finds the largest id in use, later ones count on from it in memory.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hayate_engine::{Database, TreeId};
use parking_lot::Mutex;

use super::definition::TableDef;
use super::sequence::Sequence;
use super::statistics::Statistics;
use crate::encoding::key;
use crate::error::SqlResult;
use crate::types::{DataType, Value};

/// `Table::index_ready` of an index an open transaction block made.
pub const NOT_READY: u64 = u64::MAX;

/// A table as statements use it: its definition, its engine trees and its sequences.
#[derive(Debug)]
pub struct Table {
    pub def: TableDef,
    pub tree: TreeId,
    /// The engine index of each of `def.indexes`.
    pub index_trees: Vec<TreeId>,
    /// The sequence of each identity column (None for the other columns).
    pub sequences: Vec<Option<Arc<Sequence>>>,
    /// Per index of `def.indexes`, the oldest snapshot that may read through it: one taken
    /// when the DDL that made it had committed (an index keeps the entries of the rows'
    /// versions from its build on; an older snapshot would miss rows through it), or
    /// `NOT_READY` while the transaction block that made it is open (its entries hold that
    /// block's writes). Statements of older snapshots are planned without it
    /// (`Binder::for_snapshot`). Kept from the table's previous definition for an index it
    /// had (by engine tree); for those found at open, a snapshot taken then.
    index_ready: Vec<AtomicU64>,
    /// What ANALYZE learned of the rows and the count of rows written since, shared by every
    /// definition of the same engine tree (`Catalog::load`).
    pub statistics: Arc<Statistics>,
    /// Next hidden row id (tables without a primary key); 0 until first used after open.
    next_row_id: AtomicU64,
    row_id_init: Mutex<bool>,
}

impl Table {
    /// The table of a definition whose engine trees are open.
    pub(super) fn new(
        def: TableDef,
        tree: TreeId,
        index_trees: Vec<TreeId>,
        sequences: Vec<Option<Arc<Sequence>>>,
        index_ready: Vec<u64>,
        statistics: Arc<Statistics>,
    ) -> Table {
        Table {
            def,
            tree,
            index_trees,
            sequences,
            index_ready: index_ready.into_iter().map(AtomicU64::new).collect(),
            statistics,
            next_row_id: AtomicU64::new(0),
            row_id_init: Mutex::new(false),
        }
    }

    /// The oldest snapshot that may read through the index at `position` (`index_ready`).
    pub fn index_ready(&self, position: usize) -> u64 {
        (self.index_ready.get(position)).map_or(0, |ready| ready.load(Ordering::SeqCst))
    }

    /// True if a transaction of snapshot `snapshot_ts` may read through the index at
    /// `position` (`index_ready`).
    pub fn index_readable(&self, position: usize, snapshot_ts: u64) -> bool {
        self.index_ready(position) <= snapshot_ts
    }

    /// Marks the indexes not in `before` (the table's engine trees before a DDL of a
    /// transaction block) as made by that open block: no statement reads through them.
    pub(super) fn mark_block_indexes(&self, before: &[TreeId]) {
        for (position, tree) in self.index_trees.iter().enumerate() {
            if !before.contains(tree) {
                self.index_ready[position].store(NOT_READY, Ordering::SeqCst);
            }
        }
    }

    /// Once the block that made them committed: its indexes are readable by snapshots from
    /// `now` on. True if there was one.
    pub(super) fn ready_block_indexes(&self, now: u64) -> bool {
        let mut any = false;
        for ready in &self.index_ready {
            if ready.load(Ordering::SeqCst) == NOT_READY {
                ready.store(now, Ordering::SeqCst);
                any = true;
            }
        }
        any
    }

    pub fn has_row_id(&self) -> bool {
        self.def.primary_key.is_empty()
    }

    /// Allocates a hidden row id. The first call after open finds the largest id in use by a
    /// scan of the table (its last key).
    pub fn allocate_row_id(&self, db: &Database) -> SqlResult<i64> {
        {
            let mut initialized = hayate_engine::fiber::lock(&self.row_id_init);
            if !*initialized {
                let txn = db.begin_read_only();
                let mut last = 0u64;
                for row in txn.scan(self.tree, Bound::Unbounded, Bound::Unbounded)? {
                    let (key, _) = row?;
                    if key.len() == 8 {
                        last =
                            u64::from_be_bytes(key[..8].try_into().expect("8 bytes")) ^ (1 << 63);
                    }
                }
                txn.abort();
                self.next_row_id.store(last + 1, Ordering::SeqCst);
                *initialized = true;
            }
        }
        Ok(self.next_row_id.fetch_add(1, Ordering::SeqCst) as i64)
    }

    /// The same table seen with another definition (a binder's scope with extra columns).
    pub fn with_def(&self, def: TableDef) -> Table {
        Table {
            def,
            tree: self.tree,
            index_trees: self.index_trees.clone(),
            sequences: self.sequences.clone(),
            index_ready: (0..self.index_ready.len())
                .map(|position| AtomicU64::new(self.index_ready(position)))
                .collect(),
            statistics: self.statistics.clone(),
            next_row_id: AtomicU64::new(0),
            row_id_init: Mutex::new(false),
        }
    }

    /// The engine key of a row: its primary key columns, or a new hidden row id.
    pub fn row_key(&self, db: &Database, values: &[Value]) -> SqlResult<Vec<u8>> {
        if self.has_row_id() {
            let id = self.allocate_row_id(db)?;
            return key::encode(&[Value::Int(id)], &[DataType::Int8]);
        }
        let mut out = Vec::new();
        for column in &self.def.primary_key {
            key::encode_column(
                &mut out,
                &values[*column],
                self.def.columns[*column].data_type,
            )?;
        }
        Ok(out)
    }
}

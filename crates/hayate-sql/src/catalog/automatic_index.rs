//! The index a foreign key gets when no index leads with its columns (as InnoDB makes one):
//! without it, deleting or re-keying a referenced row scans the referencing table for
//! children, and a query selecting a parent's children (`WHERE f_depart_ap_id = $1`, the
//! commonest join of all) has no path but a scan. It is an index like any other for the
//! planner and the writes, but no relation: the catalog views do not list it (so a dump
//! stays what PostgreSQL would dump) and no statement names it. It goes when no key needs
//! it any more: its key dropped, or another index (the primary key, a CREATE INDEX) leading
//! with the same columns. Dropping that other index later leaves the key without one, as in
//! PostgreSQL (DROP INDEX does not build another).

use std::cmp::Reverse;

use super::definition::{ForeignKeyDef, IndexDef, TableDef};

/// True if an index on `keys` leads with `columns`: its first `columns.len()` keys are
/// those columns, in any order.
fn leads(keys: &[usize], columns: &[usize]) -> bool {
    keys.len() >= columns.len() && keys[..columns.len()].iter().all(|c| columns.contains(c))
}

/// Where rows with given values of some columns are found without a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leading {
    PrimaryKey,
    /// The position in `TableDef::indexes` of a secondary index (not a partial one: it
    /// lacks the rows outside its predicate).
    Index(usize),
}

impl TableDef {
    /// The primary key or a full secondary index whose first `columns.len()` keys are
    /// `columns`, in any order (the primary key first); `except` is an index position not
    /// to count.
    fn leading_except(&self, columns: &[usize], except: Option<usize>) -> Option<Leading> {
        if !self.primary_key.is_empty() && leads(&self.primary_key, columns) {
            return Some(Leading::PrimaryKey);
        }
        let full = |(position, index): &(usize, &IndexDef)| {
            Some(*position) != except && index.predicate.is_none() && leads(&index.columns, columns)
        };
        let (position, _) = self.indexes.iter().enumerate().find(full)?;
        Some(Leading::Index(position))
    }

    /// The primary key or a full secondary index that leads with `columns` (in any order).
    pub fn leading_index(&self, columns: &[usize]) -> Option<Leading> {
        self.leading_except(columns, None)
    }

    /// The foreign keys no index leads with, each to get an automatic index; longer keys
    /// first, and none an earlier one's index would lead with (an index on (a, b) serves a
    /// key on (a), two keys on the same columns share one).
    pub fn unindexed_foreign_keys(&self) -> Vec<ForeignKeyDef> {
        let mut keys: Vec<&ForeignKeyDef> = self.foreign_keys.iter().collect();
        keys.sort_by_key(|key| Reverse(key.columns.len()));
        let mut unindexed: Vec<ForeignKeyDef> = Vec::new();
        for key in keys {
            let served = (unindexed.iter()).any(|chosen| leads(&chosen.columns, &key.columns));
            if !served && self.leading_index(&key.columns).is_none() {
                unindexed.push(key.clone());
            }
        }
        unindexed
    }

    /// Adds the automatic indexes the foreign keys lack (with no engine tree yet), then
    /// drops those no key needs (`drop_needless_automatic_indexes`).
    pub fn add_automatic_indexes(&mut self) -> Vec<String> {
        for key in self.unindexed_foreign_keys() {
            self.indexes.push(automatic_index(&key));
        }
        self.drop_needless_automatic_indexes()
    }

    /// Removes the automatic indexes no foreign key needs any more: every key they lead
    /// with is gone or has another index leading with its columns. Returns their engine
    /// trees, to drop once the definition without them is committed.
    pub fn drop_needless_automatic_indexes(&mut self) -> Vec<String> {
        let mut dropped = Vec::new();
        // One at a time: of two automatic indexes leading with each other's columns, one
        // stays.
        while let Some(position) = (0..self.indexes.len()).find(|p| self.needless(*p)) {
            dropped.push(self.indexes.remove(position).tree);
        }
        dropped.retain(|tree| !tree.is_empty());
        dropped
    }

    /// True if the index at `position` is automatic and no foreign key needs it: none it
    /// leads with lacks another index.
    fn needless(&self, position: usize) -> bool {
        let index = &self.indexes[position];
        let needs = |key: &ForeignKeyDef| {
            leads(&index.columns, &key.columns)
                && self.leading_except(&key.columns, Some(position)).is_none()
        };
        index.automatic && !self.foreign_keys.iter().any(needs)
    }
}

impl IndexDef {
    /// The index as EXPLAIN names it: a foreign key's automatic index by its key.
    pub fn explained(&self) -> String {
        match self.automatic {
            true => format!("{} (the foreign key's index)", self.name),
            false => self.name.clone(),
        }
    }
}

/// The automatic index of a foreign key: its columns in the key's order, named after it
/// (EXPLAIN shows the name; no statement can use it).
pub fn automatic_index(key: &ForeignKeyDef) -> IndexDef {
    IndexDef {
        name: key.name.clone(),
        columns: key.columns.clone(),
        unique: false,
        constraint: false,
        tree: String::new(),
        predicate: None,
        options: Vec::new(),
        expressions: Vec::new(),
        automatic: true,
    }
}

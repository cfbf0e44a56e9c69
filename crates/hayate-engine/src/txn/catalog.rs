//! The catalog of trees (tables and indexes): name, id, kind and root page.
//!
//! It is saved in every checkpoint's payload and changed by logged DDL records, so replay can
//! rebuild it. Payload layout (LE): version u8 = 2 | next commit ts u64 | next txn id u64 |
//! next tree id u32 | boot count u64 | covered LSN u64 | tree count u32 | per tree: id u32,
//! kind u8, unique u8, root page id u64, name length u32, name bytes (UTF-8). Version 1 had no
//! covered LSN (read as unknown: `u64::MAX`).

use std::collections::BTreeMap;

use crate::error::{Error, Location, Result};
use crate::page::PageId;

/// Identifies a table or index; assigned at creation, never reused.
pub type TreeId = u32;

/// What a tree holds; recorded in the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TreeKind {
    /// Rows keyed by primary key.
    #[default]
    Table,
    /// A secondary index the caller keeps in step with its table.
    Index,
}

impl TreeKind {
    /// The catalog's byte for this kind.
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            TreeKind::Table => 0,
            TreeKind::Index => 1,
        }
    }
    /// The kind a catalog byte stands for; None for an unknown byte.
    pub(crate) fn from_u8(value: u8) -> Option<TreeKind> {
        match value {
            0 => Some(TreeKind::Table),
            1 => Some(TreeKind::Index),
            _ => None,
        }
    }
}

/// A table or index as the catalog knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeInfo {
    /// Its id, used by transactions.
    pub id: TreeId,
    /// Its name, unique among tables and indexes.
    pub name: String,
    /// Table or index.
    pub kind: TreeKind,
    /// Declared unique at creation (`Database::create_index`); stored, not enforced here.
    pub unique: bool,
    /// The root page of its B+tree, which never changes.
    pub root: PageId,
}

/// Counters that survive restarts through checkpoints and replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    pub trees: BTreeMap<TreeId, TreeInfo>,
    pub next_commit_ts: u64,
    pub next_txn_id: u64,
    pub next_tree_id: TreeId,
    pub boot_count: u64,
    /// The log end when the checkpoint holding this payload quiesced the engine: its pages
    /// hold no effect of a record at or past it (a rewind to a fork point needs a checkpoint
    /// covering no more than the fork point). `u64::MAX`: unknown (an older payload).
    pub covered_lsn: u64,
}

impl Catalog {
    pub fn new() -> Catalog {
        Catalog {
            trees: BTreeMap::new(),
            next_commit_ts: 1,
            next_txn_id: 1,
            next_tree_id: 1,
            boot_count: 0,
            covered_lsn: 0,
        }
    }

    pub fn by_name(&self, name: &str) -> Option<&TreeInfo> {
        self.trees.values().find(|tree| tree.name == name)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![2u8];
        bytes.extend_from_slice(&self.next_commit_ts.to_le_bytes());
        bytes.extend_from_slice(&self.next_txn_id.to_le_bytes());
        bytes.extend_from_slice(&self.next_tree_id.to_le_bytes());
        bytes.extend_from_slice(&self.boot_count.to_le_bytes());
        bytes.extend_from_slice(&self.covered_lsn.to_le_bytes());
        bytes.extend_from_slice(&(self.trees.len() as u32).to_le_bytes());
        for tree in self.trees.values() {
            bytes.extend_from_slice(&tree.id.to_le_bytes());
            bytes.push(tree.kind.to_u8());
            bytes.push(tree.unique as u8);
            bytes.extend_from_slice(&tree.root.to_le_bytes());
            bytes.extend_from_slice(&(tree.name.len() as u32).to_le_bytes());
            bytes.extend_from_slice(tree.name.as_bytes());
        }
        bytes
    }

    /// Decodes a checkpoint payload; an empty payload is a new database.
    pub fn decode(bytes: &[u8]) -> Result<Catalog> {
        if bytes.is_empty() {
            return Ok(Catalog::new());
        }
        let corrupt = || {
            Error::corruption(
                Location {
                    file: "checkpoint catalog".into(),
                    ..Default::default()
                },
                "malformed catalog",
            )
        };
        let mut position = 0usize;
        let mut take = |len: usize| -> Result<&[u8]> {
            let slice = bytes.get(position..position + len).ok_or_else(corrupt)?;
            position += len;
            Ok(slice)
        };
        let version = take(1)?[0];
        if !matches!(version, 1 | 2) {
            return Err(corrupt());
        }
        let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
        let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap());
        let mut catalog = Catalog::new();
        catalog.next_commit_ts = u64_of(take(8)?);
        catalog.next_txn_id = u64_of(take(8)?);
        catalog.next_tree_id = u32_of(take(4)?);
        catalog.boot_count = u64_of(take(8)?);
        catalog.covered_lsn = if version >= 2 {
            u64_of(take(8)?)
        } else {
            u64::MAX
        };
        let count = u32_of(take(4)?);
        for _ in 0..count {
            let id = u32_of(take(4)?);
            let kind = TreeKind::from_u8(take(1)?[0]).ok_or_else(corrupt)?;
            let unique = take(1)?[0] != 0;
            let root = u64_of(take(8)?);
            let name_len = u32_of(take(4)?) as usize;
            let name = String::from_utf8(take(name_len)?.to_vec()).map_err(|_| corrupt())?;
            catalog.trees.insert(
                id,
                TreeInfo {
                    id,
                    name,
                    kind,
                    unique,
                    root,
                },
            );
        }
        Ok(catalog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_round_trips() {
        let mut catalog = Catalog::new();
        catalog.next_commit_ts = 42;
        catalog.boot_count = 3;
        catalog.covered_lsn = 12_288;
        catalog.trees.insert(
            7,
            TreeInfo {
                id: 7,
                name: "accounts".into(),
                kind: TreeKind::Table,
                unique: true,
                root: 9,
            },
        );
        let bytes = catalog.encode();
        assert_eq!(Catalog::decode(&bytes).unwrap(), catalog);
        assert!(Catalog::decode(&bytes[..bytes.len() - 1]).is_err());
        assert_eq!(Catalog::decode(&[]).unwrap(), Catalog::new());
        // A version-1 payload (no covered LSN) is read as covering an unknown extent.
        let mut old = bytes[..29].to_vec();
        old[0] = 1;
        old.extend_from_slice(&bytes[37..]);
        let decoded = Catalog::decode(&old).unwrap();
        assert_eq!(decoded.covered_lsn, u64::MAX);
        assert_eq!(decoded.trees, catalog.trees);
    }
}

//! Recovery: rebuild the in-memory state from the last checkpoint and the log.
//!
//! 1. The page store opened at its last durable checkpoint: every tree is exactly as it was
//!    when that checkpoint quiesced the engine (later page writes are ignored or rolled back).
//! 2. The catalog and counters come from the checkpoint's payload; the boot count is bumped so
//!    undo pointers left in pages by the previous run resolve to "no older version".
//! 3. Every log record from the checkpoint's redo LSN on is replayed in log order. Replay is
//!    idempotent: a `Put` writes the committed version (no undo, since no snapshot is older),
//!    a `Delete` removes the row, DDL is skipped when the catalog already reflects it. So a
//!    crash during recovery is survived by recovering again from the same checkpoint.
//! 4. The caller then takes a checkpoint, which makes the recovered state the new start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{row, Catalog, TreeId, TreeInfo, TreeKind, TxnManager};
use crate::btree::BTree;
use crate::buffer::BufferPool;
use crate::error::Result;
use crate::io::Io;
use crate::store::CheckpointMeta;
use crate::wal::{patched, LogRecord, Lsn, Op, Wal};

use super::locks::LockConfig;
use super::undo::{UndoConfig, UndoLog};

/// What recovery found and did.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    pub checkpoint_id: u64,
    pub redo_lsn: Lsn,
    pub end_lsn: Lsn,
    pub records_replayed: u64,
    pub operations_replayed: u64,
    pub trees_created: u64,
    pub trees_dropped: u64,
    pub log_tail_truncated: bool,
    pub duration: Duration,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "recovered from checkpoint {} (redo from lsn {} to {}): {} log records, {} row \
             operations, {} trees created, {} dropped, torn log tail {}, in {:.1} ms",
            self.checkpoint_id,
            self.redo_lsn,
            self.end_lsn,
            self.records_replayed,
            self.operations_replayed,
            self.trees_created,
            self.trees_dropped,
            if self.log_tail_truncated {
                "cut"
            } else {
                "none"
            },
            self.duration.as_secs_f64() * 1000.0
        )
    }
}

impl TxnManager {
    /// Replays `records` over the checkpoint state and returns the ready manager.
    pub fn recover(
        pool: Arc<BufferPool>,
        wal: Arc<Wal>,
        opened: &CheckpointMeta,
        records: Vec<(Lsn, LogRecord)>,
        lock_config: LockConfig,
        undo_io: Arc<dyn Io>,
        undo_config: UndoConfig,
    ) -> Result<(Arc<TxnManager>, RecoveryReport)> {
        let started = Instant::now();
        let mut catalog = Catalog::decode(&opened.payload)?;
        catalog.boot_count += 1;
        let mut report = RecoveryReport {
            checkpoint_id: opened.checkpoint_id,
            redo_lsn: opened.redo_lsn,
            end_lsn: wal.end_lsn(),
            ..RecoveryReport::default()
        };
        for (lsn, record) in records {
            replay(&pool, &mut catalog, lsn, record, &mut report)?;
            report.records_replayed += 1;
        }
        report.duration = started.elapsed();
        let undo = UndoLog::open(catalog.boot_count, undo_io, undo_config)?;
        let next_checkpoint_id = opened.checkpoint_id + 1;
        let manager = TxnManager::new(pool, wal, catalog, lock_config, undo, next_checkpoint_id);
        Ok((Arc::new(manager), report))
    }
}

fn replay(
    pool: &BufferPool,
    catalog: &mut Catalog,
    lsn: Lsn,
    record: LogRecord,
    report: &mut RecoveryReport,
) -> Result<()> {
    match record {
        LogRecord::Commit {
            txn_id,
            commit_ts,
            ops,
        } => {
            for op in ops {
                let Some(tree) = catalog.trees.get(&op.tree_id()) else {
                    continue;
                };
                let btree = BTree::open(tree.root);
                match op {
                    Op::Put { key, value, .. } => {
                        btree.put(pool, &key, &row::encode(commit_ts, 0, Some(&value)), lsn)?;
                    }
                    Op::Delete { key, .. } => {
                        btree.delete(pool, &key, lsn)?;
                    }
                    Op::Patch {
                        key,
                        length,
                        pieces,
                        ..
                    } => replay_patch(
                        pool,
                        &btree,
                        &tree.name,
                        &key,
                        (length, &pieces),
                        (commit_ts, lsn),
                    )?,
                }
                report.operations_replayed += 1;
            }
            catalog.next_commit_ts = catalog.next_commit_ts.max(commit_ts + 1);
            catalog.next_txn_id = catalog.next_txn_id.max(txn_id + 1);
        }
        LogRecord::CreateTree {
            tree_id,
            name,
            kind,
            unique,
            commit_ts,
        } => {
            if create_logged_tree(pool, catalog, tree_id, name, kind, unique)? {
                report.trees_created += 1;
            }
            catalog.next_commit_ts = catalog.next_commit_ts.max(commit_ts + 1);
        }
        LogRecord::DropTree { tree_id, commit_ts } => {
            if let Some(tree) = catalog.trees.remove(&tree_id) {
                BTree::open(tree.root).destroy(pool)?;
                report.trees_dropped += 1;
            }
            catalog.next_commit_ts = catalog.next_commit_ts.max(commit_ts + 1);
        }
        LogRecord::CheckpointMark { .. } => {}
    }
    Ok(())
}

/// Applies a logged `CreateTree` to `catalog` (recovery, and a standby's apply): the tree gets
/// the logged id and an empty root, unless the catalog has it already. Returns whether it was
/// created.
pub(super) fn create_logged_tree(
    pool: &BufferPool,
    catalog: &mut Catalog,
    tree_id: TreeId,
    name: String,
    kind: u8,
    unique: bool,
) -> Result<bool> {
    let created = match catalog.trees.entry(tree_id) {
        std::collections::btree_map::Entry::Vacant(entry) => {
            let root = BTree::create(pool)?;
            entry.insert(TreeInfo {
                id: tree_id,
                name,
                kind: TreeKind::from_u8(kind).unwrap_or(TreeKind::Table),
                unique,
                root,
            });
            true
        }
        std::collections::btree_map::Entry::Occupied(_) => false,
    };
    catalog.next_tree_id = catalog.next_tree_id.max(tree_id + 1);
    Ok(created)
}

/// Replays a patch on the row's current version. A version of another length, or none, can
/// only be a later state the checkpoint's pages already hold (a fuzzy checkpoint), and a later
/// record of this log sets the row again; so the patch is skipped. Patches are absolute writes,
/// so replaying one onto a version that already contains it changes nothing.
fn replay_patch(
    pool: &BufferPool,
    btree: &BTree,
    tree_name: &str,
    key: &[u8],
    (length, pieces): (u32, &[(u32, Vec<u8>)]),
    (commit_ts, lsn): (u64, Lsn),
) -> Result<()> {
    let Some(raw) = btree.get(pool, key)? else {
        return Ok(());
    };
    let current = row::decode(&raw, tree_name)?;
    let Some(value) = current
        .value
        .as_deref()
        .and_then(|base| patched(base, length, pieces))
    else {
        return Ok(());
    };
    btree.put(pool, key, &row::encode(commit_ts, 0, Some(&value)), lsn)?;
    Ok(())
}

//! The standby side of the transaction manager: applying the primary's committed records
//! through the same MVCC path as a local commit, so hot-standby readers get stable snapshots.
//!
//! 1. `set_standby(true)`: local writes, commits and DDL fail with `Error::Standby`.
//! 2. For each record the standby has made durable, in log order (the primary logs commits in
//!    timestamp order, so the visible timestamp only grows), `apply_replicated`:
//!    - a `Commit` is registered as being applied at its LSN (a checkpoint's redo starts at or
//!      before it), its operations applied with undo (readers at older snapshots read the
//!      versions they replace), and the visible timestamp moves to its commit timestamp;
//!    - `CreateTree` / `DropTree` change the catalog as on the primary, with the same ids.
//! 3. `set_replay_from(lsn)`: the first record not yet applied; a checkpoint's redo LSN never
//!    passes it, so a restarted standby replays what it had received but not applied.
//! 4. `set_standby(false)` (promotion): the counters continue from the last applied commit.
//!
//! A standby opened as one (`DatabaseConfig::standby`) may hold an old primary's tail that no
//! standby ever acknowledged; `set_log_unconfirmed(true)` holds checkpoints off until its
//! primary accepted its log (or it is promoted), so the last checkpoint stays one a rewind to
//! the fork point can start from.

use std::sync::atomic::Ordering;

use super::recovery::create_logged_tree;
use super::{Catalog, TxnManager};
use crate::btree::BTree;
use crate::error::{Error, Result};
use crate::wal::{LogRecord, Lsn};

impl TxnManager {
    /// Makes this manager a standby's (writes refused) or, with false, a primary's.
    pub fn set_standby(&self, standby: bool) {
        self.standby.store(standby, Ordering::Release);
        if !standby {
            self.replay_from.store(u64::MAX, Ordering::Release);
            self.set_log_unconfirmed(false);
        }
    }

    /// Holds checkpoints off (true) until the log is known to be the primary's (false).
    pub fn set_log_unconfirmed(&self, unconfirmed: bool) {
        self.log_unconfirmed.store(unconfirmed, Ordering::Release);
    }

    /// Whether checkpoints are held off (`set_log_unconfirmed`).
    pub fn log_unconfirmed(&self) -> bool {
        self.log_unconfirmed.load(Ordering::Acquire)
    }

    pub fn is_standby(&self) -> bool {
        self.standby.load(Ordering::Acquire)
    }

    /// Fails with `Error::Standby` on a standby: the only writer there is the log's apply.
    pub(crate) fn check_primary(&self) -> Result<()> {
        if self.is_standby() {
            return Err(Error::Standby);
        }
        Ok(())
    }

    /// Position of the first received record not yet applied (step 3 of the module docs).
    pub fn set_replay_from(&self, lsn: Lsn) {
        self.replay_from.store(lsn, Ordering::Release);
    }

    /// Applies one record of the primary's log, read at `lsn` and durable here (step 2).
    pub fn apply_replicated(&self, lsn: Lsn, record: LogRecord) -> Result<()> {
        let commit_ts = match &record {
            LogRecord::Commit { commit_ts, .. }
            | LogRecord::CreateTree { commit_ts, .. }
            | LogRecord::DropTree { commit_ts, .. } => *commit_ts,
            LogRecord::CheckpointMark { .. } => return Ok(()),
        };
        let visible = self.visible_ts();
        if commit_ts <= visible {
            return Err(Error::corruption(
                crate::error::Location {
                    file: "replication stream".into(),
                    lsn: Some(lsn),
                    ..Default::default()
                },
                format!("commit timestamp {commit_ts} after {visible} was already visible"),
            ));
        }
        let _operation = self.pool.operation();
        match record {
            LogRecord::Commit {
                txn_id,
                commit_ts,
                ops,
            } => {
                {
                    let mut order = self.commit_order.lock();
                    order.next_commit_ts = order.next_commit_ts.max(commit_ts + 1);
                    order.applying.insert(commit_ts, lsn);
                }
                let applied = self.apply_ops(commit_ts, lsn, &ops);
                self.commit_order.lock().applying.remove(&commit_ts);
                if let Err(error) = applied {
                    self.poison(&error);
                    return Err(error);
                }
                self.next_txn_id.fetch_max(txn_id + 1, Ordering::AcqRel);
            }
            LogRecord::CreateTree {
                tree_id,
                name,
                kind,
                unique,
                ..
            } => {
                let mut catalog = self.catalog.write();
                create_logged_tree(&self.pool, &mut catalog, tree_id, name, kind, unique)?;
                self.bump_commit_ts(&mut catalog, commit_ts);
            }
            LogRecord::DropTree { tree_id, .. } => {
                let mut catalog = self.catalog.write();
                if let Some(info) = catalog.trees.remove(&tree_id) {
                    drop(catalog);
                    BTree::open(info.root).destroy(&self.pool)?;
                    catalog = self.catalog.write();
                }
                self.bump_commit_ts(&mut catalog, commit_ts);
            }
            LogRecord::CheckpointMark { .. } => unreachable!("returned above"),
        }
        self.visible_ts.store(commit_ts, Ordering::Release);
        let mut order = self.commit_order.lock();
        self.notify_published(&mut order);
        Ok(())
    }

    fn bump_commit_ts(&self, catalog: &mut Catalog, commit_ts: u64) {
        catalog.next_commit_ts = catalog.next_commit_ts.max(commit_ts + 1);
        let mut order = self.commit_order.lock();
        order.next_commit_ts = order.next_commit_ts.max(commit_ts + 1);
    }
}

//! Transactions of a session (the steps in the `session` module doc): the engine transaction
//! of a statement or of a block, savepoints, the table locks its writes and DDL take, and the
//! DDL of a block finished when it ends.
//!
//! 1. `begin_transaction` opens an engine transaction; outside a block each statement gets
//!    its own, committed at its end (`commit_transaction`, or deferred to the caller in
//!    deferred-wait mode).
//! 2. BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE and ROLLBACK TO move the block's state
//!    (`transaction_control`); an error fails the block until it ends or rolls back to a
//!    savepoint taken before the error.
//! 3. When the block ends (`end_block`) its DDLs are finished (`Catalog::finish_ddl`) and its
//!    table locks released.

use hayate_engine::{PendingCommit, Transaction};

use super::{command, SavepointEntry, Session, State};
use crate::catalog::DdlUndo;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::Outcome;
use crate::exec::{ConstraintModes, PendingCheck};
use crate::plan::write::AlterAction;
use crate::plan::{Isolation, Plan, TransactionControl};

impl Session {
    /// Deferred-commit mode, for a server that runs many sessions on one thread (an event
    /// loop, each statement on a fiber, `hayate_engine::fiber`, where waits for locks and
    /// pages suspend the statement): a statement's commit is logged and applied but not
    /// awaited; `take_pending_commit` hands it to the caller, which awaits the log
    /// (`Database::log_durable`) without blocking and finishes it before answering the
    /// statement. A query string of several statements commits each the usual way.
    pub fn set_defer_commits(&mut self, defer: bool) {
        self.defer_commits = defer;
    }

    /// The commit the last statement started in deferred-wait mode, if any: the statement
    /// is acknowledged once this is durable and finished (`PendingCommit::finish`).
    pub fn take_pending_commit(&mut self) -> Option<PendingCommit> {
        self.pending_commit.take()
    }

    /// A new engine transaction at `isolation` (a read-only one never needs SERIALIZABLE's
    /// validation: its snapshot is already a serializable view).
    pub(super) fn begin_transaction(&self, read_only: bool, isolation: Isolation) -> Transaction {
        let db = self.catalog.database();
        if read_only {
            db.begin_read_only()
        } else if isolation == Isolation::Serializable {
            db.begin_serializable()
        } else {
            db.begin()
        }
    }

    /// Opens a block at `isolation`.
    pub(super) fn open_block(&mut self, isolation: Isolation) {
        self.block_isolation = isolation;
        self.block_queried = false;
        self.settings
            .insert("transaction_isolation".into(), isolation.name().into());
        self.state = State::InBlock(self.begin_transaction(false, isolation));
    }

    /// SET TRANSACTION [ISOLATION LEVEL ...]: the open block's level, before any statement
    /// ran in it (25001 after); outside a block it changes nothing (PostgreSQL warns).
    /// SET SESSION CHARACTERISTICS AS TRANSACTION sets default_transaction_isolation.
    pub(super) fn set_transaction(
        &mut self,
        isolation: Option<Isolation>,
        session: bool,
    ) -> SqlResult<Outcome> {
        let Some(isolation) = isolation else {
            return Ok(command("SET"));
        };
        if session {
            self.settings.insert(
                "default_transaction_isolation".into(),
                isolation.name().into(),
            );
            self.settings_changed();
            return Ok(command("SET"));
        }
        if let State::InBlock(_) = self.state {
            if self.block_queried && isolation != self.block_isolation {
                return Err(SqlError::new(
                    sqlstate::ACTIVE_SQL_TRANSACTION,
                    "SET TRANSACTION ISOLATION LEVEL must be called before any query",
                ));
            }
            if isolation != self.block_isolation {
                // Nothing ran in the block yet: its engine transaction is replaced.
                self.open_block(isolation);
            }
        }
        Ok(command("SET"))
    }

    /// Commits `txn`: at once (waiting for the log), or in deferred-commit mode by starting
    /// the commit and leaving it in `pending_commit`.
    pub(super) fn commit_transaction(&mut self, txn: Transaction) -> SqlResult<()> {
        if self.defer_commits {
            self.pending_commit = txn.commit_start()?;
        } else {
            txn.commit()?;
        }
        Ok(())
    }

    /// Runs the block's deferred foreign key checks (before its COMMIT).
    fn check_deferred(&mut self, txn: &mut Transaction) -> SqlResult<()> {
        let checks = std::mem::take(&mut self.deferred_checks);
        crate::exec::recheck(&self.catalog, &checks, txn)
    }

    /// SET CONSTRAINTS: the modes change for the rest of the block; the deferred checks of
    /// keys that become immediate run now. Outside a block it changes nothing (PostgreSQL
    /// warns).
    pub(super) fn set_constraints(
        &mut self,
        names: &[String],
        deferred: bool,
    ) -> SqlResult<Outcome> {
        let State::InBlock(txn) = &mut self.state else {
            return Ok(command("SET CONSTRAINTS"));
        };
        self.constraint_modes.set(names, deferred);
        let modes = &self.constraint_modes;
        let catalog = &self.catalog;
        let (still, now): (Vec<PendingCheck>, Vec<PendingCheck>) =
            std::mem::take(&mut self.deferred_checks)
                .into_iter()
                .partition(|check| {
                    let key = catalog.table(&check.table).ok().and_then(|table| {
                        table
                            .def
                            .foreign_keys
                            .iter()
                            .find(|k| k.name == check.key)
                            .cloned()
                    });
                    key.is_some_and(|key| modes.deferred(&key))
                });
        self.deferred_checks = still;
        crate::exec::recheck(catalog, &now, txn)?;
        Ok(command("SET CONSTRAINTS"))
    }

    /// Takes the table locks a plan needs (`table_lock`): the write lock on the tables it
    /// writes, the exclusive lock on those a DDL changes.
    pub(super) fn lock_tables(&mut self, plan: &Plan) -> SqlResult<()> {
        self.lock_enum_types(plan)?;
        let in_block = !matches!(self.state, State::Idle);
        let (tables, exclusive): (Vec<&str>, bool) = match plan {
            Plan::Insert { table, .. } => (vec![&table.def.name], false),
            Plan::InsertSelect(insert) => (vec![&insert.table.def.name], false),
            Plan::Update { read, .. } | Plan::Delete { read, .. } => {
                (vec![&read.table.def.name], false)
            }
            Plan::Truncate { tables, .. } => (
                tables.iter().map(|table| table.def.name.as_str()).collect(),
                !in_block,
            ),
            Plan::CreateTable { def, .. } => (vec![&def.name], true),
            Plan::DropTable { names, .. } => (names.iter().map(String::as_str).collect(), true),
            Plan::CreateIndex { table, .. }
            | Plan::AlterTable { table, .. }
            | Plan::RenameIndex { table, .. } => (vec![table], true),
            Plan::LockTables { .. } if !in_block => {
                return Err(SqlError::new(
                    sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                    "LOCK TABLE can only be used in transaction blocks",
                ))
            }
            Plan::LockTables { tables, exclusive } => {
                (tables.iter().map(String::as_str).collect(), *exclusive)
            }
            _ => return Ok(()),
        };
        for table in tables {
            let locks = &self.catalog.table_locks;
            if exclusive {
                locks.lock_exclusive(self.lock_owner, table)?;
            } else if !self.locked_tables.iter().any(|held| held == table) {
                locks.lock_write(self.lock_owner, table)?;
            } else {
                continue;
            }
            self.locked_tables.push(table.to_string());
        }
        // A rename also rewrites the tables that reference the table and takes a new name:
        // nobody else may change those until it commits or rolls back. Taken after the
        // table's own lock (the order every writer of the table takes), and the referencing
        // tables read under it.
        if let Plan::AlterTable { table, actions } = plan {
            let mut also = Vec::new();
            for action in actions {
                if let AlterAction::RenameTable(to) = action {
                    also.push(to.clone());
                }
                if matches!(
                    action,
                    AlterAction::RenameTable(_) | AlterAction::RenameColumn { .. }
                ) {
                    let children = self.catalog.referencing(table).into_iter();
                    also.extend(children.map(|(child, _)| child.def.name.clone()));
                }
            }
            also.retain(|name| name != table);
            also.dedup();
            for name in also {
                self.catalog
                    .table_locks
                    .lock_exclusive(self.lock_owner, &name)?;
                self.locked_tables.push(name);
            }
        }
        Ok(())
    }

    /// Enum types are locked by name as tables are (they share the name space): CREATE,
    /// ALTER and DROP TYPE take the exclusive lock; a statement that writes a column of a
    /// type, or creates, changes or drops a table with one, takes its write lock. A block's
    /// uncommitted type change is then never built on by another session (a label or a type
    /// that a rollback takes away never reaches a row or a definition), and a type is not
    /// dropped while a block may still put back a column of it.
    fn lock_enum_types(&mut self, plan: &Plan) -> SqlResult<()> {
        let catalog = self.catalog.clone();
        let types_of = |def: &crate::catalog::TableDef| -> Vec<String> {
            let types = def
                .columns
                .iter()
                .filter_map(|column| match column.data_type {
                    crate::types::DataType::Enum(oid) => catalog.enum_type_by_oid(oid),
                    _ => None,
                });
            types.map(|enum_type| enum_type.name.clone()).collect()
        };
        let (names, exclusive) = match plan {
            Plan::CreateEnum(enum_type) => (vec![enum_type.name.clone()], true),
            Plan::AlterEnum { name, change } => {
                let mut names = vec![name.clone()];
                if let crate::catalog::enum_type::EnumChange::Rename(to) = change {
                    names.push(to.clone());
                }
                (names, true)
            }
            Plan::DropEnum { names, .. } => (names.clone(), true),
            Plan::Insert { table, .. } => (types_of(&table.def), false),
            Plan::InsertSelect(insert) => (types_of(&insert.table.def), false),
            Plan::Update { read, .. } => (types_of(&read.table.def), false),
            Plan::CreateTable { def, .. } => (types_of(def), false),
            Plan::AlterTable { table, actions } => {
                let mut names = catalog
                    .table(table)
                    .map_or(Vec::new(), |t| types_of(&t.def));
                for action in actions {
                    let data_type = match action {
                        AlterAction::AddColumn { column, .. } => column.data_type,
                        AlterAction::SetType { data_type, .. } => *data_type,
                        _ => continue,
                    };
                    if let crate::types::DataType::Enum(oid) = data_type {
                        names.extend(catalog.enum_type_by_oid(oid).map(|t| t.name.clone()));
                    }
                }
                (names, false)
            }
            Plan::DropTable { names, .. } => {
                let tables = names.iter().filter_map(|name| catalog.table(name).ok());
                (
                    tables.flat_map(|table| types_of(&table.def)).collect(),
                    false,
                )
            }
            _ => return Ok(()),
        };
        for name in names {
            let locks = &catalog.table_locks;
            if exclusive {
                locks.lock_exclusive(self.lock_owner, &name)?;
            } else if !self.locked_tables.contains(&name) {
                locks.lock_write(self.lock_owner, &name)?;
                // A block that held the type may have rolled it back while this waited.
                if catalog.enum_type(&name).is_none() {
                    self.locked_tables.push(name.clone());
                    return Err(crate::catalog::enum_type::undefined_type(&name));
                }
            } else {
                continue;
            }
            self.locked_tables.push(name);
        }
        Ok(())
    }

    /// Releases the table locks once the transaction that took them ended.
    pub(super) fn release_tables(&mut self) {
        let tables = std::mem::take(&mut self.locked_tables);
        self.catalog.table_locks.release(self.lock_owner, &tables);
    }

    /// Ends the block's savepoints and DDLs after its engine transaction committed
    /// (`committed`) or was dropped.
    pub(super) fn end_block(&mut self, committed: bool) {
        let owners = std::mem::take(&mut self.owner_undo);
        if !committed {
            restore_owners(owners);
        }
        self.savepoints.clear();
        self.deferred_checks.clear();
        self.constraint_modes = ConstraintModes::default();
        self.close_block_cursors(committed);
        for table in std::mem::take(&mut self.pending_restarts) {
            if committed {
                // The block committed; a table dropped since simply has no sequences left.
                let _ = self.catalog.restart_identities(&table);
            }
        }
        self.end_block_settings(committed);
        self.settings.insert(
            "transaction_isolation".into(),
            self.default_isolation.name().into(),
        );
        let undo = std::mem::take(&mut self.ddl_undo);
        self.catalog.finish_ddl(undo, committed);
        self.release_tables();
        // now() of the next block is its own (an implicit block ends here too).
        self.block_timestamp = None;
    }

    /// Opens a transaction block for a statement that runs over several calls (COPY FROM
    /// STDIN) unless one is open; true if it opened one, which `end_implicit` then ends.
    pub(crate) fn begin_implicit(&mut self) -> SqlResult<bool> {
        match self.state {
            State::Idle => {
                self.open_block(self.default_isolation);
                Ok(true)
            }
            State::InBlock(_) => Ok(false),
            State::Failed(_) => Err(SqlError::new(
                sqlstate::IN_FAILED_SQL_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
            )),
        }
    }

    /// Ends the block `begin_implicit` opened: commits it if `commit` and it did not fail,
    /// else aborts it. The session is idle afterwards.
    pub(crate) fn end_implicit(&mut self, commit: bool) -> SqlResult<()> {
        let result = match std::mem::replace(&mut self.state, State::Idle) {
            State::InBlock(mut txn) if commit => self
                .check_deferred(&mut txn)
                .and_then(|_| Ok(txn.commit().map(|_| ())?)),
            _ => Ok(()), // a dropped transaction aborts
        };
        self.end_block(commit && result.is_ok());
        result
    }

    pub(super) fn transaction_control(
        &mut self,
        control: &TransactionControl,
    ) -> SqlResult<Outcome> {
        match control {
            TransactionControl::Savepoint(name) => return self.savepoint(name),
            TransactionControl::Release(name) => return self.release_savepoint(name),
            TransactionControl::RollbackTo(name) => return self.rollback_to_savepoint(name),
            _ => {}
        }
        if !matches!(control, TransactionControl::Begin(_)) {
            self.block_timestamp = None;
        }
        Ok(
            match (control, std::mem::replace(&mut self.state, State::Idle)) {
                (TransactionControl::Begin(isolation), State::Idle) => {
                    self.open_block(isolation.unwrap_or(self.default_isolation));
                    command("BEGIN")
                }
                (TransactionControl::Begin(_), state) => {
                    // PostgreSQL warns and stays in the block.
                    self.state = state;
                    command("BEGIN")
                }
                (TransactionControl::Commit, State::InBlock(mut txn)) => {
                    // The block is over either way (state is Idle already): a deferred key
                    // still broken fails the COMMIT, which rolls back.
                    let committed = self
                        .check_deferred(&mut txn)
                        .and_then(|_| self.commit_transaction(txn));
                    self.end_block(committed.is_ok());
                    committed?;
                    command("COMMIT")
                }
                (TransactionControl::Commit, State::Failed(txn)) => {
                    drop(txn);
                    self.end_block(false);
                    command("ROLLBACK")
                }
                (TransactionControl::Commit, State::Idle) => command("COMMIT"),
                (_, state) => {
                    drop(state); // aborts an open engine transaction
                    self.end_block(false);
                    command("ROLLBACK")
                }
            },
        )
    }

    /// SAVEPOINT name: marks the block's transaction (a name used before is shadowed).
    pub(super) fn savepoint(&mut self, name: &str) -> SqlResult<Outcome> {
        let State::InBlock(txn) = &mut self.state else {
            return Err(outside_block("SAVEPOINT"));
        };
        let mark = txn.savepoint();
        self.savepoints.push(SavepointEntry {
            name: name.to_string(),
            mark,
            ddl: self.ddl_undo.len(),
            deferred_checks: self.deferred_checks.clone(),
            constraint_modes: self.constraint_modes.clone(),
            owner_undo: self.owner_undo.len(),
            settings: self.setting_undo.len(),
        });
        Ok(command("SAVEPOINT"))
    }

    /// The newest savepoint of the name.
    pub(super) fn find_savepoint(&self, name: &str) -> SqlResult<usize> {
        self.savepoints
            .iter()
            .rposition(|savepoint| savepoint.name == name)
            .ok_or_else(|| {
                SqlError::new(
                    sqlstate::INVALID_SAVEPOINT_SPECIFICATION,
                    format!("savepoint \"{name}\" does not exist"),
                )
            })
    }

    /// RELEASE SAVEPOINT name: forgets it and every later one; the writes stay.
    pub(super) fn release_savepoint(&mut self, name: &str) -> SqlResult<Outcome> {
        if !matches!(self.state, State::InBlock(_)) {
            return Err(outside_block("RELEASE SAVEPOINT"));
        }
        let index = self.find_savepoint(name)?;
        self.savepoints.truncate(index);
        Ok(command("RELEASE"))
    }

    /// ROLLBACK TO SAVEPOINT name: undoes the writes and DDLs after it, forgets the later
    /// savepoints and keeps it; a block an error aborted goes on.
    pub(super) fn rollback_to_savepoint(&mut self, name: &str) -> SqlResult<Outcome> {
        let index = match self.state {
            State::Idle => return Err(outside_block("ROLLBACK TO SAVEPOINT")),
            // Without a kept transaction no savepoint exists: 3B001, the block stays failed.
            _ => self.find_savepoint(name)?,
        };
        let mut txn = match std::mem::replace(&mut self.state, State::Idle) {
            State::InBlock(txn) | State::Failed(Some(txn)) => txn,
            State::Failed(None) | State::Idle => unreachable!("savepoints exist only with one"),
        };
        self.savepoints.truncate(index + 1);
        let undone = self.undo_to_savepoint(&mut txn, index);
        self.state = State::InBlock(txn);
        undone?;
        Ok(command("ROLLBACK"))
    }

    /// Undoes everything after savepoint `index` (which stays, with the ones before it):
    /// the engine's writes and row locks, the DDLs, owners, settings and deferred checks.
    /// Doing it again for the same savepoint changes nothing.
    pub(super) fn undo_to_savepoint(
        &mut self,
        txn: &mut Transaction,
        index: usize,
    ) -> SqlResult<()> {
        let savepoint = &self.savepoints[index];
        let undone = txn.rollback_to(savepoint.mark);
        let ddl = self
            .ddl_undo
            .split_off(savepoint.ddl.min(self.ddl_undo.len()));
        self.deferred_checks = savepoint.deferred_checks.clone();
        self.constraint_modes = savepoint.constraint_modes.clone();
        let kept_owners = savepoint.owner_undo.min(self.owner_undo.len());
        let owners = self.owner_undo.split_off(kept_owners);
        restore_owners(owners);
        let settings = savepoint.settings;
        self.undo_settings_after(settings);
        self.catalog.finish_ddl(ddl, false);
        Ok(undone?)
    }

    /// The open block's engine transaction for a DDL, its snapshot refreshed at READ
    /// COMMITTED (a rebuild reads the rows through it); None outside a block.
    pub(super) fn ddl_block(&mut self) -> Option<&mut Transaction> {
        match &mut self.state {
            State::InBlock(txn) => {
                if self.block_isolation == Isolation::ReadCommitted {
                    txn.refresh_snapshot();
                }
                Some(txn)
            }
            _ => None,
        }
    }

    /// Keeps a DDL's undo until the block ends (outside a block it is empty: done).
    pub(super) fn note_ddl(&mut self, undo: DdlUndo) {
        if let State::InBlock(_) = self.state {
            self.ddl_undo.push(undo);
        }
    }
}

pub(super) fn outside_block(what: &str) -> SqlError {
    SqlError::new(
        sqlstate::NO_ACTIVE_SQL_TRANSACTION,
        format!("{what} can only be used in transaction blocks"),
    )
}

/// Puts back sequence owners a rolled-back DDL changed, newest change first (best effort: a
/// sequence dropped since has nothing to restore).
fn restore_owners(owners: Vec<super::OwnerUndo>) {
    for (sequence, owner) in owners.into_iter().rev() {
        let _ = sequence.set_owner(owner);
    }
}

//! A session: one client's state (its transaction, its settings) and the entry point for
//! statements.
//!
//! Transactions, as in PostgreSQL:
//! 1. Outside a transaction block each statement runs in its own engine transaction and
//!    commits at its end (autocommit); an error aborts it.
//! 2. BEGIN opens a block: statements share one engine transaction (snapshot isolation:
//!    PostgreSQL's REPEATABLE READ, where a write conflict is a serialization failure).
//! 3. An error inside a block aborts it: every later statement fails with 25P02 until COMMIT
//!    or ROLLBACK ends the block (COMMIT then reports ROLLBACK), or ROLLBACK TO a savepoint
//!    taken before the error undoes the writes after it (`Transaction::rollback_to`) and
//!    the block goes on.
//! 4. DDL inside a block writes its catalog rows in the block's transaction
//!    (`catalog` module comment): it commits or rolls back with the block, or with the part
//!    after a savepoint.
//!
//! Prepared statements: SQL-level PREPARE/EXECUTE/DEALLOCATE keep `Prepared`s by name; the
//! server tells the session the names of protocol-level (Parse) statements, which share the
//! namespace, so DEALLOCATE (ALL) drops them too (`take_deallocated`).
//!
//! The folder: `statement` (parsing, binding and running statements), `transaction`
//! (transaction blocks, savepoints, table locks and the DDL of a block), `prepared`
//! (PREPARE/EXECUTE/DEALLOCATE and the protocol-level statement names) and `settings`
//! (SET/SHOW values and what statements read of them); this file holds the session's state.

mod activity;
mod constraints;
mod cursor;
mod database;
mod prepared;
mod rewrite;
mod sequence;
mod settings;
mod statement;
mod transaction;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use hayate_engine::{PendingCommit, Transaction};
use sqlparser::ast::Statement;

use crate::catalog::{Catalog, DdlUndo};
use crate::exec::{ConstraintModes, Outcome, PendingCheck};
use crate::plan::{EvalContext, Isolation, OutputColumn, Plan};
use crate::types::DataType;

use crate::settings::default_settings;
pub use statement::{is_alter_sequence, parse};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionStatus {
    Idle,
    InBlock,
    Failed,
}

enum State {
    Idle,
    InBlock(Transaction),
    /// An error aborted the block; the transaction is kept while a savepoint could take the
    /// block back to before the error.
    Failed(Option<Transaction>),
}

/// A sequence and its OWNED BY (table, column) before a DDL of the open block changed it.
type OwnerUndo = (Arc<crate::catalog::Sequence>, Option<(String, String)>);

/// A SAVEPOINT of the open block.
struct SavepointEntry {
    name: String,
    mark: hayate_engine::Savepoint,
    /// The block's DDLs (`Session::ddl_undo`) and deferred checks before it, and its
    /// SET CONSTRAINTS modes then.
    ddl: usize,
    /// A copy, not a length: SET CONSTRAINTS ... IMMEDIATE takes checks from the middle.
    deferred_checks: Vec<PendingCheck>,
    constraint_modes: ConstraintModes,
    owner_undo: usize,
    /// The block's setting changes before it (`Session::setting_undo`).
    settings: usize,
}

/// A statement parsed and bound, ready to run many times with different parameters.
#[derive(Debug, Clone)]
pub struct Prepared {
    statement: Statement,
    /// Its text (pg_stat_activity's query), written when first asked for.
    text: std::sync::OnceLock<Arc<str>>,
    declared: Vec<DataType>,
    plan: Plan,
    catalog_version: u64,
    /// The snapshot the plan was made for when it left out indexes for it (`Binder::
    /// for_snapshot`); None: planned with every index.
    bound_for: Option<u64>,
    /// The newest index the plan could read (`Binder::newest_index_ready`): a statement
    /// whose snapshot is older is planned for it (`Prepared::planned_for`).
    newest_index_ready: u64,
    pub param_types: Vec<DataType>,
    pub columns: Vec<OutputColumn>,
    /// The statement bound again since (`Session::execute_locked`), for its later runs: a
    /// statement prepared before a DDL or an ANALYZE is bound once more, not at each run.
    rebound: Arc<parking_lot::Mutex<Option<Arc<Prepared>>>>,
}

impl Prepared {
    /// What a plan for `snapshot` leaves out: nothing (None) when the snapshot is newer than
    /// every index the statement could read.
    fn planned_for(&self, snapshot: Option<u64>) -> Option<u64> {
        snapshot.filter(|snapshot| *snapshot < self.newest_index_ready)
    }

    /// The statement as SQL text (for logs).
    pub fn sql(&self) -> String {
        self.text().to_string()
    }

    /// The statement's text, written once: the text the client sent when it was given
    /// (`with_text`), else the parsed statement printed.
    pub(crate) fn text(&self) -> &Arc<str> {
        self.text.get_or_init(|| self.statement.to_string().into())
    }

    /// Keeps `sql`, the text the statement was parsed from, as its text (pg_stat_activity's
    /// query and the log show what the client sent, as PostgreSQL's do).
    pub fn with_text(self, sql: &str) -> Prepared {
        let _ = self.text.set(sql.trim().into());
        self
    }

    /// The plan as bound (the access path of a read shows in it).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
}

pub struct Session {
    pub(crate) catalog: Arc<Catalog>,
    state: State,
    settings: BTreeMap<String, String>,
    user: String,
    database: String,
    /// The start of the open transaction block (now() within it).
    block_timestamp: Option<i64>,
    /// The open block's isolation level.
    block_isolation: Isolation,
    /// A statement ran in the open block (SET TRANSACTION must come before any).
    block_queried: bool,
    /// The open block's savepoints, oldest first.
    savepoints: Vec<SavepointEntry>,
    /// The open block's DDLs, to finish when it ends (`Catalog::finish_ddl`).
    ddl_undo: Vec<DdlUndo>,
    /// SQL-level prepared statements (PREPARE).
    prepared: HashMap<String, Prepared>,
    /// Names of the protocol-level statements the client parsed (`protocol_statement_parsed`).
    protocol_statements: HashSet<String>,
    /// Protocol-level statements DEALLOCATE dropped, for the server to forget.
    deallocated: Vec<String>,
    /// This session as the owner of table locks (`table_lock`).
    lock_owner: u64,
    /// The tables it holds locks on, until its transaction ends.
    locked_tables: Vec<String>,
    /// Deferred-commit mode (`set_defer_commits`).
    defer_commits: bool,
    /// What every statement reads of `settings`, worked out when a setting changes
    /// (`settings_changed`).
    default_isolation: Isolation,
    work_mem_bytes: usize,
    /// The TimeZone setting's zone, shared with the server, which makes it current around
    /// the session's statements and the encoding of their rows (`types::zone`).
    zone: crate::types::zone::SessionZone,
    /// The zone current at the end of each statement of the last query string, in order
    /// (`take_statement_zones`): the server shows each statement's rows in it.
    statement_zones: Vec<std::sync::Arc<crate::types::zone::Zone>>,
    /// What RESET goes back to where it is not PostgreSQL's default: the values the server's
    /// configuration and the client's startup parameters set (`set_setting`).
    reset_values: BTreeMap<String, String>,
    /// The open block's setting changes (name, value before, LOCAL), undone as
    /// `end_block_settings` says.
    setting_undo: Vec<(String, Option<String>, bool)>,
    /// Its row of pg_stat_activity, once it has a backend pid.
    activity: Option<crate::catalog::activity::ActivitySlot>,
    /// The commit a statement started in deferred-commit mode, for the caller to finish.
    pending_commit: Option<PendingCommit>,
    /// currval/lastval of this session.
    sequences: crate::catalog::SessionSequences,
    /// Tables of the open block's TRUNCATE ... RESTART IDENTITY: their sequences restart
    /// when the block commits.
    pending_restarts: Vec<String>,
    /// Open SQL-level cursors (DECLARE ... CURSOR), by name.
    cursors: HashMap<String, cursor::Cursor>,
    /// The open block's SET CONSTRAINTS modes.
    constraint_modes: ConstraintModes,
    /// The open block's checks of deferred foreign keys, run at COMMIT (or when SET
    /// CONSTRAINTS makes their key immediate).
    deferred_checks: Vec<PendingCheck>,
    /// Sequences whose OWNED BY a renaming DDL of the open block changed (at once, as
    /// sequences are not transactional), with their owner before: put back if the block
    /// rolls back.
    owner_undo: Vec<OwnerUndo>,
}

static NEXT_LOCK_OWNER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Drop for Session {
    /// A client gone in the middle of a block: its DDLs roll back with it.
    fn drop(&mut self) {
        self.unlist_activity();
        self.state = State::Idle;
        self.end_block(false);
        self.catalog
            .sessions
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Session {
    /// A session of `user` on the database of `catalog`.
    pub fn new(catalog: Arc<Catalog>, user: &str) -> Session {
        let database = catalog.name().to_string();
        // Counted before anything looks at `Catalog::is_dropped` (`Cluster::drop_database`).
        catalog
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let settings = default_settings(user, &database)
            .into_iter()
            .chain(settings::server_settings(catalog.database()))
            .collect();
        Session {
            catalog,
            state: State::Idle,
            settings,
            user: user.into(),
            database,
            block_timestamp: None,
            block_isolation: Isolation::ReadCommitted,
            block_queried: false,
            savepoints: Vec::new(),
            ddl_undo: Vec::new(),
            prepared: HashMap::new(),
            protocol_statements: HashSet::new(),
            deallocated: Vec::new(),
            lock_owner: NEXT_LOCK_OWNER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            locked_tables: Vec::new(),
            defer_commits: false,
            pending_commit: None,
            default_isolation: Isolation::ReadCommitted,
            work_mem_bytes: 0,
            zone: Default::default(),
            statement_zones: Vec::new(),
            reset_values: BTreeMap::new(),
            setting_undo: Vec::new(),
            activity: None,
            sequences: Default::default(),
            cursors: HashMap::new(),
            constraint_modes: ConstraintModes::default(),
            deferred_checks: Vec::new(),
            owner_undo: Vec::new(),
            pending_restarts: Vec::new(),
        }
        .with_settings_read()
    }

    /// The context that evaluates an expression outside a query (EXECUTE's arguments, ALTER
    /// TABLE ADD COLUMN's default): no parameters or subqueries, this session's names and
    /// sequences, and the current time.
    fn standalone_context(&self) -> EvalContext<'_> {
        EvalContext {
            params: &[],
            database_name: &self.database,
            user_name: &self.user,
            transaction_timestamp: crate::types::datetime::now_micros(),
            subqueries: None,
            sequences: Some(&self.sequences),
            settings: Some(&self.settings),
            setting_changes: None,
        }
    }

    pub fn status(&self) -> TransactionStatus {
        match self.state {
            State::Idle => TransactionStatus::Idle,
            State::InBlock(_) => TransactionStatus::InBlock,
            State::Failed(_) => TransactionStatus::Failed,
        }
    }

    /// Records an error that happened outside `execute` (e.g. parsing a prepared statement):
    /// inside a transaction block it aborts the block, as every error does.
    pub fn note_error(&mut self) {
        if let State::InBlock(_) = self.state {
            let State::InBlock(txn) = std::mem::replace(&mut self.state, State::Idle) else {
                unreachable!("matched above");
            };
            if self.savepoints.is_empty() {
                // Nothing can take the block back: abort the engine transaction now.
                drop(txn);
                self.end_block(false);
                self.state = State::Failed(None);
            } else {
                // As PostgreSQL aborts the innermost subtransaction at the error: what was
                // done since the newest savepoint (writes, row locks, DDLs, settings) is
                // undone now (ROLLBACK TO it or an older one undoes nothing more twice); what
                // was done before stays until ROLLBACK or ROLLBACK TO.
                let mut txn = txn;
                let newest = self.savepoints.len() - 1;
                if let Err(error) = self.undo_to_savepoint(&mut txn, newest) {
                    log::warn!("rolling back to the newest savepoint after an error: {error}");
                }
                self.state = State::Failed(Some(txn));
            }
        }
    }
}

/// The error of a statement in a block an earlier error aborted.
pub(super) fn in_failed_block() -> crate::error::SqlError {
    crate::error::SqlError::new(
        crate::error::sqlstate::IN_FAILED_SQL_TRANSACTION,
        "current transaction is aborted, commands ignored until end of transaction block",
    )
}

fn command(tag: &str) -> Outcome {
    Outcome::Command { tag: tag.into() }
}

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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use hayate_engine::{PendingCommit, Transaction};
use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use crate::catalog::{Catalog, DdlUndo, Rebuild};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::{Executor, Outcome};
use crate::plan::bind::Binder;
use crate::plan::write::AlterAction;
use crate::plan::{EvalContext, Isolation, OutputColumn, Plan, TransactionControl};
use crate::types::{DataType, Value};

/// How often an autocommitted statement is run again after a write conflict.
const AUTOCOMMIT_ATTEMPTS_MAX: u32 = 16;

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

/// A SAVEPOINT of the open block.
struct SavepointEntry {
    name: String,
    mark: hayate_engine::Savepoint,
    /// The block's DDLs (`Session::ddl_undo`) before it.
    ddl: usize,
}

/// A statement parsed and bound, ready to run many times with different parameters.
#[derive(Debug, Clone)]
pub struct Prepared {
    statement: Statement,
    declared: Vec<DataType>,
    plan: Plan,
    catalog_version: u64,
    pub param_types: Vec<DataType>,
    pub columns: Vec<OutputColumn>,
}

impl Prepared {
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
    /// The open block runs at READ COMMITTED (else REPEATABLE READ).
    block_read_committed: bool,
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
    /// Deferred-wait mode (`set_defer_waits`).
    defer_waits: bool,
    /// What every statement reads of `settings`, worked out when a setting changes
    /// (`settings_changed`).
    read_committed_default: bool,
    work_mem_bytes: usize,
    /// The commit a statement started in deferred-wait mode, for the caller to finish.
    pending_commit: Option<PendingCommit>,
    /// currval/lastval of this session.
    sequences: crate::catalog::SessionSequences,
}

static NEXT_LOCK_OWNER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Drop for Session {
    /// A client gone in the middle of a block: its DDLs roll back with it.
    fn drop(&mut self) {
        self.state = State::Idle;
        self.end_block(false);
    }
}

/// Parses a query string into its statements.
pub fn parse(sql: &str) -> SqlResult<Vec<Statement>> {
    if let Some(statement) = maintenance_statement(sql) {
        return Ok(vec![statement]);
    }
    Parser::parse_sql(&PostgreSqlDialect {}, sql).map_err(|error| {
        let message = error.to_string();
        let message = message
            .strip_prefix("sql parser error: ")
            .unwrap_or(&message);
        SqlError::syntax(format!("syntax error: {message}"))
    })
}

/// VACUUM and ANALYZE in PostgreSQL's forms (`vacuum analyze t`, `VACUUM (VERBOSE) t`,
/// `analyze t`), which sqlparser does not all accept: there is nothing for them to do here
/// (purge and statistics are the engine's own business), so they are accepted whole, as one
/// statement. Anything after a `;` makes it an ordinary parse.
fn maintenance_statement(sql: &str) -> Option<Statement> {
    let text = sql.trim().trim_end_matches(';').trim();
    if text.contains(';') {
        return None;
    }
    let first = text.split_whitespace().next()?.to_ascii_lowercase();
    let vacuum = sqlparser::ast::VacuumStatement {
        full: false,
        sort_only: false,
        delete_only: false,
        reindex: false,
        recluster: false,
        table_name: None,
        threshold: None,
        boost: false,
    };
    match first.as_str() {
        "vacuum" => Some(Statement::Vacuum(vacuum)),
        // An ANALYZE is told apart from a VACUUM by `reindex` (never set by VACUUM here).
        "analyze" | "analyse" => Some(Statement::Vacuum(sqlparser::ast::VacuumStatement {
            reindex: true,
            ..vacuum
        })),
        _ => None,
    }
}

fn default_settings(user: &str, database: &str) -> BTreeMap<String, String> {
    let pairs = [
        ("server_version", crate::SERVER_VERSION),
        ("server_version_num", crate::SERVER_VERSION_NUM),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("datestyle", "ISO, MDY"),
        ("timezone", "UTC"),
        ("intervalstyle", "postgres"),
        ("integer_datetimes", "on"),
        ("standard_conforming_strings", "on"),
        ("transaction_isolation", "read committed"),
        ("default_transaction_isolation", "read committed"),
        ("search_path", "\"$user\", public"),
        ("application_name", ""),
        ("extra_float_digits", "1"),
        ("max_identifier_length", "63"),
        ("lc_messages", "C"),
        ("synchronous_commit", "on"),
        ("work_mem", crate::exec::WORK_MEM_DEFAULT),
    ];
    let mut settings: BTreeMap<String, String> = pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    settings.insert("session_authorization".into(), user.into());
    settings.insert("hayate.database".into(), database.into());
    settings
}

impl Session {
    pub fn new(catalog: Arc<Catalog>, user: &str, database: &str) -> Session {
        Session {
            catalog,
            state: State::Idle,
            settings: default_settings(user, database),
            user: user.into(),
            database: database.into(),
            block_timestamp: None,
            block_read_committed: true,
            savepoints: Vec::new(),
            ddl_undo: Vec::new(),
            prepared: HashMap::new(),
            protocol_statements: HashSet::new(),
            deallocated: Vec::new(),
            lock_owner: NEXT_LOCK_OWNER.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            locked_tables: Vec::new(),
            defer_waits: false,
            pending_commit: None,
            read_committed_default: true,
            work_mem_bytes: 0,
            sequences: Default::default(),
        }
        .with_settings_read()
    }

    fn with_settings_read(mut self) -> Session {
        self.settings_changed();
        self
    }

    /// Works out what statements read of the settings (see the fields).
    fn settings_changed(&mut self) {
        self.read_committed_default = self.read_default_read_committed();
        self.work_mem_bytes = self.read_work_mem_bytes();
    }

    /// Deferred-wait mode, for a server that runs many sessions on one thread (an event
    /// loop): a statement never waits for another transaction or for the log there.
    /// - A write that meets a row or table lock held by someone else, or a row whose newer
    ///   version is not published yet, is undone (the statement's writes and locks; the block
    ///   goes on) and fails with `sqlstate::WOULD_BLOCK`; so does, before doing anything, a
    ///   statement that may wait by its nature (DDL, a query string of several statements,
    ///   COMMIT of a block with DDL). The caller runs it again with the mode off, on a thread
    ///   that may wait.
    /// - A commit is logged and applied but not awaited: `take_pending_commit` hands it to
    ///   the caller, which awaits the log (`Database::log_durable`) and finishes it before
    ///   answering the statement.
    pub fn set_defer_waits(&mut self, defer: bool) {
        self.defer_waits = defer;
        if let State::InBlock(txn) | State::Failed(Some(txn)) = &mut self.state {
            txn.set_nowait(defer);
        }
    }

    /// The commit the last statement started in deferred-wait mode, if any: the statement
    /// is acknowledged once this is durable and finished (`PendingCommit::finish`).
    pub fn take_pending_commit(&mut self) -> Option<PendingCommit> {
        self.pending_commit.take()
    }

    /// A new engine transaction, in no-wait mode when waits are deferred.
    fn begin_transaction(&self, read_only: bool) -> Transaction {
        let db = self.catalog.database();
        let mut txn = if read_only {
            db.begin_read_only()
        } else {
            db.begin()
        };
        txn.set_nowait(self.defer_waits);
        txn
    }

    /// Commits `txn`: at once (waiting for the log), or in deferred-wait mode by starting
    /// the commit and leaving it in `pending_commit`.
    fn commit_transaction(&mut self, txn: Transaction) -> SqlResult<()> {
        if self.defer_waits {
            self.pending_commit = txn.commit_start()?;
        } else {
            txn.commit()?;
        }
        Ok(())
    }

    /// Takes the table locks a plan needs (`table_lock`): the write lock on the tables it
    /// writes, the exclusive lock on those a DDL changes.
    fn lock_tables(&mut self, plan: &Plan) -> SqlResult<()> {
        let in_block = !matches!(self.state, State::Idle);
        let (tables, exclusive): (Vec<&str>, bool) = match plan {
            Plan::Insert { table, .. } => (vec![&table.def.name], false),
            Plan::InsertSelect(insert) => (vec![&insert.table.def.name], false),
            Plan::Update { read, .. } | Plan::Delete { read, .. } => {
                (vec![&read.table.def.name], false)
            }
            Plan::Truncate { tables } => (
                tables.iter().map(|table| table.def.name.as_str()).collect(),
                !in_block,
            ),
            Plan::CreateTable { def, .. } => (vec![&def.name], true),
            Plan::DropTable { names, .. } => (names.iter().map(String::as_str).collect(), true),
            Plan::CreateIndex { table, .. } | Plan::AlterTable { table, .. } => (vec![table], true),
            _ => return Ok(()),
        };
        for table in tables {
            let locks = &self.catalog.table_locks;
            if exclusive {
                locks.lock_exclusive(self.lock_owner, table)?;
            } else if !self.locked_tables.iter().any(|held| held == table) {
                if !self.defer_waits {
                    locks.lock_write(self.lock_owner, table)?;
                } else if !locks.try_lock_write(self.lock_owner, table) {
                    return Err(SqlError::would_block());
                }
            } else {
                continue;
            }
            self.locked_tables.push(table.to_string());
        }
        Ok(())
    }

    /// Releases the table locks once the transaction that took them ended.
    fn release_tables(&mut self) {
        let tables = std::mem::take(&mut self.locked_tables);
        self.catalog.table_locks.release(self.lock_owner, &tables);
    }

    /// The server parsed a named protocol-level statement: DEALLOCATE knows its name.
    pub fn protocol_statement_parsed(&mut self, name: &str) {
        if !name.is_empty() {
            self.protocol_statements.insert(name.to_string());
        }
    }

    /// The server closed a named protocol-level statement.
    pub fn protocol_statement_closed(&mut self, name: &str) {
        self.protocol_statements.remove(name);
    }

    /// The protocol-level statements DEALLOCATE dropped since the last call: the server
    /// removes them from its statement store.
    pub fn take_deallocated(&mut self) -> Vec<String> {
        std::mem::take(&mut self.deallocated)
    }

    /// Ends the block's savepoints and DDLs after its engine transaction committed
    /// (`committed`) or was dropped.
    fn end_block(&mut self, committed: bool) {
        self.savepoints.clear();
        let undo = std::mem::take(&mut self.ddl_undo);
        self.catalog.finish_ddl(undo, committed);
        self.release_tables();
    }

    pub fn status(&self) -> TransactionStatus {
        match self.state {
            State::Idle => TransactionStatus::Idle,
            State::InBlock(_) => TransactionStatus::InBlock,
            State::Failed(_) => TransactionStatus::Failed,
        }
    }

    /// Sets a setting's value for this session (the server's configured defaults).
    pub fn set_setting(&mut self, name: &str, value: &str) {
        self.settings
            .insert(name.to_ascii_lowercase(), value.into());
        self.settings_changed();
    }

    /// Opens a transaction block for a statement that runs over several calls (COPY FROM
    /// STDIN) unless one is open; true if it opened one, which `end_implicit` then ends.
    pub(crate) fn begin_implicit(&mut self) -> SqlResult<bool> {
        match self.state {
            State::Idle => {
                self.state = State::InBlock(self.begin_transaction(false));
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
            State::InBlock(txn) if commit => txn.commit().map(|_| ()),
            _ => Ok(()), // a dropped transaction aborts
        };
        self.end_block(commit && result.is_ok());
        Ok(result?)
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
                self.state = State::Failed(Some(txn));
            }
        }
    }

    /// Binds a parsed statement; `declared` holds the parameter types the client gave
    /// (`Unknown` where it gave none).
    pub fn prepare(&self, statement: Statement, declared: &[DataType]) -> SqlResult<Prepared> {
        let mut binder = Binder::new(&self.catalog, declared);
        let catalog_version = self.catalog.version();
        let plan = binder.bind(&statement)?;
        Ok(Prepared {
            columns: plan.columns(),
            param_types: binder.params,
            declared: declared.to_vec(),
            statement,
            plan,
            catalog_version,
        })
    }

    /// Runs every statement of a query string; stops at the first error. Several statements
    /// outside a block run as one implicit transaction, as in PostgreSQL, unless they contain
    /// transaction control or DDL (then each statement is its own transaction).
    pub fn execute_sql(&mut self, sql: &str) -> Vec<SqlResult<Outcome>> {
        let statements = match parse(sql) {
            Ok(statements) => statements,
            Err(error) => {
                self.note_error();
                return vec![Err(error)];
            }
        };
        if self.defer_waits && statements.len() > 1 {
            // Statements before one that would wait could not be taken back.
            return vec![Err(SqlError::would_block())];
        }
        let implicit = statements.len() > 1
            && matches!(self.state, State::Idle)
            && statements.iter().all(|statement| {
                !matches!(
                    statement,
                    Statement::StartTransaction { .. }
                        | Statement::Commit { .. }
                        | Statement::Rollback { .. }
                        | Statement::CreateTable(_)
                        | Statement::CreateIndex(_)
                        | Statement::AlterTable(_)
                        | Statement::Drop { .. }
                )
            });
        if implicit {
            self.state = State::InBlock(self.begin_transaction(false));
        }
        let mut outcomes = Vec::with_capacity(statements.len());
        for statement in statements {
            let outcome = self.execute_statement(statement);
            let failed = outcome.is_err();
            outcomes.push(outcome);
            if failed {
                break;
            }
        }
        if implicit {
            // A failed statement left the state Failed (its transaction aborted).
            let mut committed = false;
            if let State::InBlock(txn) = std::mem::replace(&mut self.state, State::Idle) {
                match txn.commit() {
                    Ok(_) => committed = true,
                    Err(error) => outcomes.push(Err(error.into())),
                }
            }
            self.end_block(committed);
        }
        outcomes
    }

    fn execute_statement(&mut self, statement: Statement) -> SqlResult<Outcome> {
        self.check_not_failed(&statement)?;
        crate::interrupt::check()?;
        let prepared = match self.prepare(statement, &[]) {
            Ok(prepared) => prepared,
            Err(error) => {
                self.note_error();
                return Err(error);
            }
        };
        self.execute(&prepared, Vec::new())
    }

    fn check_not_failed(&self, statement: &Statement) -> SqlResult<()> {
        let ends_block = matches!(
            statement,
            Statement::Commit { .. } | Statement::Rollback { .. }
        );
        if matches!(self.state, State::Failed(_)) && !ends_block {
            return Err(SqlError::new(
                sqlstate::IN_FAILED_SQL_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
            ));
        }
        Ok(())
    }

    /// Runs a prepared statement with parameter values (of `prepared.param_types`).
    pub fn execute(&mut self, prepared: &Prepared, params: Vec<Value>) -> SqlResult<Outcome> {
        self.execute_params(prepared, &params)
    }

    /// `execute` with borrowed parameter values.
    pub fn execute_params(&mut self, prepared: &Prepared, params: &[Value]) -> SqlResult<Outcome> {
        self.check_not_failed(&prepared.statement)?;
        let result = self.execute_locked(prepared, params);
        if !self.locked_tables.is_empty() && matches!(self.state, State::Idle) {
            self.release_tables(); // the statement's own transaction ended
        }
        result
    }

    /// `execute` with the plan's table locks taken first, so a DDL that changed a table
    /// while the statement waited for it is seen (the statement is bound again).
    fn execute_locked(&mut self, prepared: &Prepared, params: &[Value]) -> SqlResult<Outcome> {
        if self.defer_waits && self.may_wait(&prepared.plan) {
            return Err(SqlError::would_block());
        }
        self.lock_tables(&prepared.plan).inspect_err(|error| {
            if !error.is_would_block() {
                self.note_error()
            }
        })?;
        let rebound;
        let prepared = if prepared.catalog_version != self.catalog.version() {
            // A table changed since the statement was bound: bind it again.
            rebound = self
                .prepare(prepared.statement.clone(), &prepared.declared)
                .inspect_err(|_| self.note_error())?;
            &rebound
        } else {
            prepared
        };
        if params.len() != prepared.param_types.len() {
            return Err(SqlError::new(
                sqlstate::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement requires {}",
                    params.len(),
                    prepared.param_types.len()
                ),
            ));
        }
        let result = self.run_plan(&prepared.plan, params);
        if result.as_ref().is_err_and(|error| !error.is_would_block()) {
            self.note_error();
        }
        result
    }

    /// Statements that may wait by their nature (deferred-wait mode runs them elsewhere):
    /// DDL (table locks, rebuilds, a log flush of its own) and the COMMIT of a block that
    /// ran DDL (its catalog changes finish with the commit).
    fn may_wait(&self, plan: &Plan) -> bool {
        match plan {
            Plan::CreateTable { .. }
            | Plan::DropTable { .. }
            | Plan::CreateIndex { .. }
            | Plan::DropIndex { .. }
            | Plan::AlterTable { .. }
            | Plan::Truncate { .. } => true,
            Plan::Transaction(TransactionControl::Commit) => !self.ddl_undo.is_empty(),
            _ => false,
        }
    }

    fn run_plan(&mut self, plan: &Plan, params: &[Value]) -> SqlResult<Outcome> {
        match plan {
            Plan::Transaction(control) => self.transaction_control(control),
            Plan::Prepare {
                name,
                declared,
                statement,
            } => self.prepare_named(name, declared, statement),
            Plan::Execute { name, arguments } => self.execute_named(name, arguments),
            Plan::Deallocate { name } => self.deallocate(name.as_deref()),
            Plan::CreateTable { def, if_not_exists } => {
                let catalog = self.catalog.clone();
                let undo = catalog.create_table(def.clone(), *if_not_exists, self.ddl_block())?;
                self.note_ddl(undo);
                Ok(command("CREATE TABLE"))
            }
            Plan::DropTable { names, if_exists } => {
                for name in names {
                    let catalog = self.catalog.clone();
                    let undo = catalog.drop_table(name, *if_exists, self.ddl_block())?;
                    self.note_ddl(undo);
                }
                Ok(command("DROP TABLE"))
            }
            Plan::CreateIndex {
                table,
                name,
                columns,
                unique,
                if_not_exists,
            } => {
                let catalog = self.catalog.clone();
                let undo = catalog.create_index(
                    table,
                    name.as_deref(),
                    columns,
                    *unique,
                    *if_not_exists,
                    self.ddl_block(),
                )?;
                self.note_ddl(undo);
                Ok(command("CREATE INDEX"))
            }
            Plan::DropIndex { names, if_exists } => {
                for name in names {
                    let catalog = self.catalog.clone();
                    let undo = catalog.drop_index(name, *if_exists, self.ddl_block())?;
                    self.note_ddl(undo);
                }
                Ok(command("DROP INDEX"))
            }
            Plan::AlterTable { table, actions } => {
                for action in actions {
                    self.alter_table(table, action)?;
                }
                Ok(command("ALTER TABLE"))
            }
            Plan::Truncate { tables } if matches!(self.state, State::Idle) => {
                // Outside a block: swap in empty trees (inside, `run_data` deletes the rows).
                let changes = tables
                    .iter()
                    .map(|table| (table.def.name.clone(), Rebuild::Truncate))
                    .collect();
                self.catalog.rebuild(changes, None)?;
                Ok(command("TRUNCATE TABLE"))
            }
            Plan::Set { name, value } => {
                if name == "work_mem" {
                    crate::exec::parse_work_mem(value)?;
                }
                self.settings.insert(name.clone(), value.clone());
                self.settings_changed();
                Ok(command("SET"))
            }
            Plan::Show { name } => {
                let value = self.settings.get(name).cloned().ok_or_else(|| {
                    SqlError::new(
                        sqlstate::UNDEFINED_OBJECT,
                        format!("unrecognized configuration parameter \"{name}\""),
                    )
                })?;
                Ok(Outcome::Rows {
                    columns: plan.columns(),
                    rows: vec![vec![Value::Text(value)]],
                    command: "SHOW".into(),
                })
            }
            Plan::NoOp { tag } => Ok(command(tag)),
            data => self.run_data(data, params),
        }
    }

    fn alter_table(&mut self, name: &str, action: &AlterAction) -> SqlResult<()> {
        let table = self.catalog.table(name)?;
        let def = &table.def;
        let change = match action {
            AlterAction::AddPrimaryKey(columns) => {
                let columns = columns
                    .iter()
                    .map(|column| {
                        def.column_index(column)
                            .ok_or_else(|| undefined_column(column, name))
                    })
                    .collect::<SqlResult<Vec<usize>>>()?;
                Rebuild::AddPrimaryKey(columns)
            }
            AlterAction::AddColumn {
                column,
                fill,
                if_not_exists,
            } => {
                if def.column_index(&column.name).is_some() {
                    if *if_not_exists {
                        return Ok(());
                    }
                    return Err(SqlError::new(
                        sqlstate::DUPLICATE_COLUMN,
                        format!(
                            "column \"{}\" of relation \"{name}\" already exists",
                            column.name
                        ),
                    ));
                }
                let context = EvalContext {
                    params: &[],
                    database_name: &self.database,
                    user_name: &self.user,
                    transaction_timestamp: crate::types::datetime::now_micros(),
                    subqueries: None,
                    sequences: Some(&self.sequences),
                };
                let value = fill.eval(&[], &context)?.cast(column.data_type)?;
                Rebuild::AddColumn(column.clone(), value)
            }
            AlterAction::DropColumn {
                name: column,
                if_exists,
            } => match def.column_index(column) {
                Some(index) => Rebuild::DropColumn(index),
                None if *if_exists => return Ok(()),
                None => return Err(undefined_column(column, name)),
            },
        };
        let catalog = self.catalog.clone();
        let undo = catalog.rebuild(vec![(name.to_string(), change)], self.ddl_block())?;
        self.note_ddl(undo);
        Ok(())
    }

    /// The open block's engine transaction for a DDL, its snapshot refreshed at READ
    /// COMMITTED (a rebuild reads the rows through it); None outside a block.
    fn ddl_block(&mut self) -> Option<&mut Transaction> {
        match &mut self.state {
            State::InBlock(txn) => {
                if self.block_read_committed {
                    txn.refresh_snapshot();
                }
                Some(txn)
            }
            _ => None,
        }
    }

    /// Keeps a DDL's undo until the block ends (outside a block it is empty: done).
    fn note_ddl(&mut self, undo: DdlUndo) {
        if let State::InBlock(_) = self.state {
            self.ddl_undo.push(undo);
        }
    }

    fn run_data(&mut self, plan: &Plan, params: &[Value]) -> SqlResult<Outcome> {
        let db = self.catalog.database().clone();
        let transaction_timestamp = match self.state {
            State::InBlock(_) => *self
                .block_timestamp
                .get_or_insert_with(crate::types::datetime::now_micros),
            _ => crate::types::datetime::now_micros(),
        };
        let read_committed = match &mut self.state {
            State::InBlock(txn) if self.block_read_committed => {
                // Each statement of a READ COMMITTED block reads what was committed before it.
                txn.refresh_snapshot();
                true
            }
            State::InBlock(_) => false,
            _ => self.read_committed_default,
        };
        let executor = Executor {
            db: &db,
            catalog: &self.catalog,
            read_committed,
            work_mem_bytes: self.work_mem_bytes,
            context: EvalContext {
                params,
                database_name: &self.database,
                user_name: &self.user,
                transaction_timestamp,
                subqueries: None,
                sequences: Some(&self.sequences),
            },
        };
        match &mut self.state {
            State::InBlock(txn) if self.defer_waits && !plan.is_read_only() => {
                // A statement that would wait is undone, and runs again where it may wait.
                let mark = txn.savepoint();
                let result = executor.run(plan, txn);
                if result.as_ref().is_err_and(SqlError::is_would_block) {
                    txn.rollback_to(mark)?;
                }
                result
            }
            State::InBlock(txn) => executor.run(plan, txn),
            State::Failed(_) => unreachable!("checked by check_not_failed"),
            State::Idle => {
                // A single statement that lost a write conflict has shown nothing to the
                // client yet: run it again on a fresh snapshot, as PostgreSQL's READ COMMITTED
                // re-reads a row updated under it. Inside a block the conflict is the client's
                // (40001).
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let mut txn = self.begin_transaction(plan.is_read_only());
                    let result = executor.run(plan, &mut txn).and_then(|outcome| {
                        if self.defer_waits {
                            self.pending_commit = txn.commit_start()?;
                        } else {
                            txn.commit()?;
                        }
                        Ok(outcome)
                    });
                    match result {
                        Err(error)
                            if error.code == sqlstate::SERIALIZATION_FAILURE
                                && attempt < AUTOCOMMIT_ATTEMPTS_MAX =>
                        {
                            continue
                        }
                        result => return result,
                    }
                }
            }
        }
    }

    /// work_mem in bytes (checked when set; the default if unset or unreadable).
    fn read_work_mem_bytes(&self) -> usize {
        let setting = self.settings.get("work_mem").map(String::as_str);
        crate::exec::parse_work_mem(setting.unwrap_or(crate::exec::WORK_MEM_DEFAULT))
            .or_else(|_| crate::exec::parse_work_mem(crate::exec::WORK_MEM_DEFAULT))
            .expect("the default work_mem is valid")
    }

    /// default_transaction_isolation: READ COMMITTED unless set to REPEATABLE READ (a default
    /// of SERIALIZABLE is taken as REPEATABLE READ's snapshot isolation).
    fn read_default_read_committed(&self) -> bool {
        self.settings
            .get("default_transaction_isolation")
            .is_none_or(|level| {
                let level = level.to_ascii_lowercase();
                !(level.contains("repeatable") || level.contains("serializable"))
            })
    }

    fn transaction_control(&mut self, control: &TransactionControl) -> SqlResult<Outcome> {
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
                    self.block_read_committed = match isolation {
                        Some(isolation) => *isolation == Isolation::ReadCommitted,
                        None => self.read_committed_default,
                    };
                    self.state = State::InBlock(self.begin_transaction(false));
                    command("BEGIN")
                }
                (TransactionControl::Begin(_), state) => {
                    // PostgreSQL warns and stays in the block.
                    self.state = state;
                    command("BEGIN")
                }
                (TransactionControl::Commit, State::InBlock(txn)) => {
                    // The block is over either way (state is Idle already).
                    let committed = self.commit_transaction(txn);
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
    fn savepoint(&mut self, name: &str) -> SqlResult<Outcome> {
        let State::InBlock(txn) = &mut self.state else {
            return Err(outside_block("SAVEPOINT"));
        };
        let mark = txn.savepoint();
        self.savepoints.push(SavepointEntry {
            name: name.to_string(),
            mark,
            ddl: self.ddl_undo.len(),
        });
        Ok(command("SAVEPOINT"))
    }

    /// The newest savepoint of the name.
    fn find_savepoint(&self, name: &str) -> SqlResult<usize> {
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
    fn release_savepoint(&mut self, name: &str) -> SqlResult<Outcome> {
        if !matches!(self.state, State::InBlock(_)) {
            return Err(outside_block("RELEASE SAVEPOINT"));
        }
        let index = self.find_savepoint(name)?;
        self.savepoints.truncate(index);
        Ok(command("RELEASE"))
    }

    /// ROLLBACK TO SAVEPOINT name: undoes the writes and DDLs after it, forgets the later
    /// savepoints and keeps it; a block an error aborted goes on.
    fn rollback_to_savepoint(&mut self, name: &str) -> SqlResult<Outcome> {
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
        let savepoint = &self.savepoints[index];
        let undone = txn.rollback_to(savepoint.mark);
        let ddl = self.ddl_undo.split_off(savepoint.ddl);
        self.catalog.finish_ddl(ddl, false);
        self.state = State::InBlock(txn);
        undone?;
        Ok(command("ROLLBACK"))
    }

    /// PREPARE name AS statement.
    fn prepare_named(
        &mut self,
        name: &str,
        declared: &[DataType],
        statement: &Statement,
    ) -> SqlResult<Outcome> {
        if self.prepared.contains_key(name) || self.protocol_statements.contains(name) {
            return Err(SqlError::new(
                sqlstate::DUPLICATE_PREPARED_STATEMENT,
                format!("prepared statement \"{name}\" already exists"),
            ));
        }
        let prepared = self.prepare(statement.clone(), declared)?;
        self.prepared.insert(name.to_string(), prepared);
        Ok(command("PREPARE"))
    }

    /// EXECUTE name (arguments): the arguments are constant expressions of the parameters'
    /// types.
    fn execute_named(
        &mut self,
        name: &str,
        arguments: &[sqlparser::ast::Expr],
    ) -> SqlResult<Outcome> {
        let prepared = self.prepared.get(name).cloned().ok_or_else(|| {
            SqlError::new(
                sqlstate::INVALID_SQL_STATEMENT_NAME,
                format!("prepared statement \"{name}\" does not exist"),
            )
        })?;
        if arguments.len() != prepared.param_types.len() {
            return Err(SqlError::new(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "wrong number of parameters for prepared statement \"{name}\": expected {}, got {}",
                    prepared.param_types.len(),
                    arguments.len()
                ),
            ));
        }
        let context = EvalContext {
            params: &[],
            database_name: &self.database,
            user_name: &self.user,
            transaction_timestamp: crate::types::datetime::now_micros(),
            subqueries: None,
            sequences: Some(&self.sequences),
        };
        let params = arguments
            .iter()
            .zip(&prepared.param_types)
            .map(|(argument, data_type)| {
                let expr = Binder::new(&self.catalog, &[]).bind_typed(argument, *data_type)?;
                expr.eval(&[], &context)?.cast(*data_type)
            })
            .collect::<SqlResult<Vec<Value>>>()?;
        self.execute(&prepared, params)
    }

    /// DEALLOCATE name, or ALL (None): SQL-level and protocol-level statements alike.
    fn deallocate(&mut self, name: Option<&str>) -> SqlResult<Outcome> {
        let Some(name) = name else {
            self.prepared.clear();
            self.deallocated.extend(self.protocol_statements.drain());
            return Ok(command("DEALLOCATE ALL"));
        };
        if self.prepared.remove(name).is_none() {
            if !self.protocol_statements.remove(name) {
                return Err(SqlError::new(
                    sqlstate::INVALID_SQL_STATEMENT_NAME,
                    format!("prepared statement \"{name}\" does not exist"),
                ));
            }
            self.deallocated.push(name.to_string());
        }
        Ok(command("DEALLOCATE"))
    }
}

fn outside_block(what: &str) -> SqlError {
    SqlError::new(
        sqlstate::NO_ACTIVE_SQL_TRANSACTION,
        format!("{what} can only be used in transaction blocks"),
    )
}

fn undefined_column(column: &str, table: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_COLUMN,
        format!("column \"{column}\" of relation \"{table}\" does not exist"),
    )
}

fn command(tag: &str) -> Outcome {
    Outcome::Command { tag: tag.into() }
}

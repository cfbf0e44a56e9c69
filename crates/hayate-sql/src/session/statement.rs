//! Running statements: a query string parsed into statements, each bound into a plan (or
//! taken from a prepared one, bound again after DDL) and run.
//!
//! 1. `parse` turns the text into sqlparser's AST (PostgreSQL dialect; a few maintenance
//!    statements it does not know become no-ops).
//! 2. `prepare` binds a statement; `execute_locked` takes the table locks and runs it in
//!    the block's transaction or in one of its own, retrying an autocommitted statement
//!    after a write conflict up to `AUTOCOMMIT_ATTEMPTS_MAX` times.
//! 3. `run_plan` dispatches on the plan: transaction control, DDL through the catalog, SET
//!    and SHOW, or data statements through the executor (`run_data`).

use std::sync::Arc;

use sqlparser::ast::{self, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

use super::{command, in_failed_block, Prepared, Session, State};
use crate::catalog::enum_type::EnumChange;
use crate::catalog::{
    quote_literal, Catalog, IndexDef, IndexKey, IndexKeys, IndexKind, NewIndex, Rebuild, TableDef,
};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::{Executor, IndexTerms, Outcome};
use crate::plan::bind::Binder;
use crate::plan::write::AlterAction;
use crate::plan::{EvalContext, Isolation, Plan};
use crate::types::{DataType, Value};

/// How often an autocommitted statement is run again after a write conflict.
const AUTOCOMMIT_ATTEMPTS_MAX: u32 = 16;

/// Operators a query string may hold: sqlparser reads a chain of binary operators in a loop
/// but builds a tree as deep as the chain is long, which every later walk of it recurses
/// through; past this many, the string is refused before parsing (54001) rather than
/// risking the statement's stack (the binder's own check stops shorter chains).
const OPERATORS_MAX: usize = 50_000;

/// 54001 for a query string with more than `OPERATORS_MAX` operator characters or AND/OR
/// words outside quotes (an overestimate: commas, IN lists and VALUES rows do not count).
fn check_operator_count(sql: &str) -> SqlResult<()> {
    if sql.len() < OPERATORS_MAX {
        return Ok(());
    }
    let mut count = 0usize;
    let mut quote: Option<u8> = None;
    let bytes = sql.as_bytes();
    for (at, byte) in bytes.iter().enumerate() {
        match (quote, byte) {
            (Some(q), b) if *b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(*byte),
            (None, b'+' | b'-' | b'*' | b'/' | b'%' | b'=' | b'<' | b'>' | b'|' | b'&') => {
                count += 1
            }
            (None, b'o' | b'O' | b'a' | b'A') => {
                let word_start = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
                let rest = &bytes[at..];
                let is = |word: &[u8]| {
                    rest.len() >= word.len()
                        && rest[..word.len()].eq_ignore_ascii_case(word)
                        && rest
                            .get(word.len())
                            .is_none_or(|b| !b.is_ascii_alphanumeric())
                };
                if word_start && (is(b"or") || is(b"and")) {
                    count += 1;
                }
            }
            _ => {}
        }
    }
    match count > OPERATORS_MAX {
        true => Err(SqlError::new(
            sqlstate::STATEMENT_TOO_COMPLEX,
            "stack depth limit exceeded",
        )),
        false => Ok(()),
    }
}

/// Parses a query string into its statements. The forms read here rather than by sqlparser
/// (VACUUM/ANALYZE, CREATE/DROP DATABASE, CREATE SEQUENCE in any option order) are found in
/// each statement of the string.
pub fn parse(sql: &str) -> SqlResult<Vec<Statement>> {
    check_operator_count(sql)?;
    // Only a string that names one of those forms is split (the usual query is not).
    let lower = sql.to_ascii_lowercase();
    let special = [
        "vacuum",
        "analy",
        "database",
        "sequence",
        "constraints",
        "reset",
    ]
    .iter()
    .any(|word| lower.contains(word));
    let pieces = if special {
        split_statements(sql)
    } else {
        vec![sql]
    };
    if pieces.len() > 1 && pieces.iter().any(|piece| preparsed(piece).is_some()) {
        let mut statements = Vec::with_capacity(pieces.len());
        for piece in pieces {
            statements.extend(parse(piece)?);
        }
        return Ok(statements);
    }
    if let Some(statement) = preparsed(sql) {
        return statement.map(|statement| vec![statement]);
    }
    let parsed = Parser::parse_sql(&PostgreSqlDialect {}, sql);
    if parsed.is_err() {
        if let Some(rewritten) = super::rewrite::rewrite(sql) {
            if let Ok(statements) = Parser::parse_sql(&PostgreSqlDialect {}, &rewritten) {
                return Ok(statements);
            }
        }
    }
    parsed.map_err(|error| {
        let message = error.to_string();
        let message = message
            .strip_prefix("sql parser error: ")
            .unwrap_or(&message);
        SqlError::syntax(format!("syntax error: {message}"))
    })
}

/// Whether `sql` is one ALTER SEQUENCE statement of the forms the session runs from its text
/// (`Session::execute_sql`), not from a bound plan: a client's prepared statement of it is run
/// as a query of its own (the server's extended protocol).
pub fn is_alter_sequence(sql: &str) -> bool {
    matches!(
        super::sequence::sequence_statement(sql),
        Some(Ok(super::sequence::SequenceStatement::OwnedBy { .. }
            | super::sequence::SequenceStatement::Options { .. }))
    )
}

/// The statements of a string of several, if one of them is an ALTER SEQUENCE that runs from
/// its text (see `is_alter_sequence`).
fn pieces_with_alter_sequence(sql: &str) -> Option<Vec<&str>> {
    if !super::rewrite::contains_ignoring_case(sql, "sequence") {
        return None;
    }
    let pieces = split_statements(sql);
    (pieces.len() > 1 && pieces.iter().any(|piece| is_alter_sequence(piece))).then_some(pieces)
}

/// The statements of a query string as text: split at the semicolons outside literals,
/// quoted names and comments (empty ones dropped). A string the tokenizer rejects is one
/// piece (the parser reports the error).
fn split_statements(sql: &str) -> Vec<&str> {
    let Some(words) = super::rewrite::words(sql) else {
        return vec![sql];
    };
    let mut pieces = Vec::new();
    let mut from = 0;
    for (token, range) in &words {
        if *token == sqlparser::tokenizer::Token::SemiColon {
            pieces.push(&sql[from..range.start]);
            from = range.end;
        }
    }
    pieces.push(&sql[from..]);
    pieces.retain(|piece| !piece.trim().is_empty());
    pieces
}

/// A statement of the forms read here, not by sqlparser (see `parse`).
fn preparsed(sql: &str) -> Option<SqlResult<Statement>> {
    if let Some(statement) = maintenance_statement(sql) {
        return Some(Ok(statement));
    }
    if let Some(statement) = reset_time_zone(sql) {
        return Some(Ok(statement));
    }
    if let Some(statement) = alter_type_owner(sql) {
        return Some(statement);
    }
    if let Some(statement) = super::database::database_statement(sql) {
        return Some(statement);
    }
    if let Some(statement) = super::constraints::set_constraints_statement(sql) {
        return Some(statement);
    }
    match super::sequence::sequence_statement(sql)? {
        Ok(super::sequence::SequenceStatement::Create(statement)) => Some(Ok(*statement)),
        Ok(
            super::sequence::SequenceStatement::OwnedBy { .. }
            | super::sequence::SequenceStatement::Options { .. },
        ) => Some(Err(SqlError::unsupported(
            "ALTER SEQUENCE in PREPARE (send it as a query, or through the extended protocol)",
        ))),
        Err(error) => Some(Err(error)),
    }
}

/// `RESET TIME ZONE` (PostgreSQL's spelling of `RESET timezone`, which sqlparser does not
/// accept) as one statement.
fn reset_time_zone(sql: &str) -> Option<Statement> {
    let text = sql.trim().trim_end_matches(';');
    let words: Vec<String> = text
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    (words == ["reset", "time", "zone"]).then(|| {
        Statement::Reset(sqlparser::ast::ResetStatement {
            reset: sqlparser::ast::Reset::ConfigurationParameter(sqlparser::ast::ObjectName::from(
                vec![sqlparser::ast::Ident::new("timezone")],
            )),
        })
    })
}

/// `ALTER TYPE name OWNER TO role` (pg_dump writes one per type; sqlparser does not read
/// it), as a rename of the type to its own name, which binds to nothing to do (one role
/// owns every object).
fn alter_type_owner(sql: &str) -> Option<SqlResult<Statement>> {
    let text = sql.trim().trim_end_matches(';').trim();
    let words: Vec<&str> = text.split_whitespace().collect();
    let [alter, kind, name, owner, to, _role] = words.as_slice() else {
        return None;
    };
    let keywords = [alter, kind, owner, to].map(|word| word.to_ascii_lowercase());
    if keywords != ["alter", "type", "owner", "to"] {
        return None;
    }
    let own_name = name.rsplit('.').next().unwrap_or(name);
    let rename = format!("ALTER TYPE {name} RENAME TO {own_name}");
    Some(match Parser::parse_sql(&PostgreSqlDialect {}, &rename) {
        Ok(mut statements) if statements.len() == 1 => Ok(statements.remove(0)),
        _ => Err(SqlError::syntax(format!("syntax error in \"{text}\""))),
    })
}

/// VACUUM and ANALYZE in PostgreSQL's forms (`vacuum analyze t`, `VACUUM (VERBOSE,
/// ANALYZE) t, u`, `analyze t (a, b)`), which sqlparser does not all accept, as one
/// statement each (anything after a `;` makes it an ordinary parse). VACUUM has nothing to
/// do here (the engine purges and cleans on its own); an ANALYZE, or a VACUUM with the
/// ANALYZE option, becomes `Statement::Analyze` whose `partitions` hold the tables named
/// (none: every table; sqlparser's one `table_name` cannot hold PostgreSQL's list), each a
/// compound identifier, or with a column list a tuple of it and the columns' identifiers,
/// and whose `has_table_keyword` says it was a VACUUM. The columns are checked; every
/// column is analyzed.
fn maintenance_statement(sql: &str) -> Option<Statement> {
    let text = sql.trim().trim_end_matches(';').trim();
    if text.contains(';') {
        return None;
    }
    let first = text.split_whitespace().next()?.to_ascii_lowercase();
    let vacuum = match first.as_str() {
        "vacuum" => true,
        "analyze" | "analyse" => false,
        _ => return None,
    };
    let dialect = PostgreSqlDialect {};
    let mut parser = Parser::new(&dialect)
        .try_with_sql(&text[first.len()..])
        .ok()?;
    let mut analyze = !vacuum;
    let is_analyze = |token: &Token| {
        matches!(token, Token::Word(word) if ["analyze", "analyse"]
            .contains(&word.value.to_ascii_lowercase().as_str()))
    };
    // (option [value], ...)
    if parser.consume_token(&Token::LParen) {
        loop {
            match parser.next_token().token {
                Token::RParen => break,
                Token::EOF => return None,
                token => analyze |= is_analyze(&token),
            }
        }
    }
    // The older forms: VACUUM [FULL] [FREEZE] [VERBOSE] [ANALYZE], ANALYZE [VERBOSE].
    loop {
        let token = parser.peek_token().token;
        let Token::Word(word) = &token else { break };
        let option = word.quote_style.is_none()
            && [
                "full",
                "freeze",
                "verbose",
                "analyze",
                "analyse",
                "skip_locked",
            ]
            .contains(&word.value.to_ascii_lowercase().as_str());
        if !option {
            break;
        }
        analyze |= is_analyze(&token);
        parser.next_token();
    }
    let mut tables = Vec::new();
    if parser.peek_token().token != Token::EOF {
        loop {
            let name = parser.parse_object_name(false).ok()?;
            let name = ast::Expr::CompoundIdentifier(
                name.0
                    .iter()
                    .filter_map(|part| part.as_ident().cloned())
                    .collect(),
            );
            if parser.consume_token(&Token::LParen) {
                let columns = parser
                    .parse_comma_separated(|p| p.parse_identifier())
                    .ok()?;
                parser.expect_token(&Token::RParen).ok()?;
                let mut item = vec![name];
                item.extend(columns.into_iter().map(ast::Expr::Identifier));
                tables.push(ast::Expr::Tuple(item));
            } else {
                tables.push(name);
            }
            if !parser.consume_token(&Token::Comma) {
                break;
            }
        }
    }
    if parser.peek_token().token != Token::EOF {
        return None;
    }
    if !analyze {
        return Some(Statement::Vacuum(ast::VacuumStatement {
            full: false,
            sort_only: false,
            delete_only: false,
            reindex: false,
            recluster: false,
            table_name: None,
            threshold: None,
            boost: false,
        }));
    }
    Some(Statement::Analyze(ast::Analyze {
        table_name: None,
        partitions: Some(tables),
        for_columns: false,
        columns: Vec::new(),
        cache_metadata: false,
        noscan: false,
        compute_statistics: false,
        has_table_keyword: vacuum,
    }))
}

impl Session {
    /// The snapshot the next statement reads with when one older than the statement is
    /// kept: a REPEATABLE READ or SERIALIZABLE block's. None: one taken when it starts.
    fn statement_snapshot(&self) -> Option<u64> {
        match &self.state {
            State::InBlock(txn) if self.block_isolation != Isolation::ReadCommitted => {
                Some(txn.snapshot_ts())
            }
            _ => None,
        }
    }

    /// Binds a parsed statement; `declared` holds the parameter types the client gave
    /// (`Unknown` where it gave none).
    pub fn prepare(&self, statement: Statement, declared: &[DataType]) -> SqlResult<Prepared> {
        let _zone = self.enter_zone();
        let snapshot = self.statement_snapshot();
        let mut binder = Binder::new(&self.catalog, declared).for_snapshot(snapshot);
        let catalog_version = self.catalog.version();
        let plan = binder.bind(&statement)?;
        let mut prepared = Prepared {
            text: std::sync::OnceLock::new(),
            bound_for: None,
            newest_index_ready: binder.newest_index_ready,
            columns: plan.columns(),
            param_types: binder.params,
            declared: declared.to_vec(),
            statement,
            plan,
            catalog_version,
            rebound: Default::default(),
        };
        // What the plan left out, for `execute_locked` to bind it again when that differs.
        prepared.bound_for = prepared.planned_for(snapshot);
        Ok(prepared)
    }

    /// Runs every statement of a query string; stops at the first error. Several statements
    /// outside a block run as one implicit transaction, as in PostgreSQL, unless they contain
    /// transaction control or DDL (then each statement is its own transaction).
    pub fn execute_sql(&mut self, sql: &str) -> Vec<SqlResult<Outcome>> {
        let _zone = self.enter_zone();
        self.statement_zones.clear();
        if self.activity.is_some() {
            self.note_statement_start(&std::sync::Arc::from(sql));
        }
        let outcomes = self.execute_sql_listed(sql);
        self.note_statement_end();
        outcomes
    }

    /// The zone current at the end of each statement `execute_sql` ran last, in order (a
    /// string's rows are shown in the zone of their statement, as PostgreSQL sends each
    /// statement's rows before running the next); fewer than its outcomes when one was not
    /// a statement's (then the session's zone applies).
    pub fn take_statement_zones(&mut self) -> Vec<std::sync::Arc<crate::types::zone::Zone>> {
        std::mem::take(&mut self.statement_zones)
    }

    /// `execute_sql` once pg_stat_activity shows the statement.
    fn execute_sql_listed(&mut self, sql: &str) -> Vec<SqlResult<Outcome>> {
        let altered = match super::sequence::sequence_statement(sql) {
            Some(Ok(super::sequence::SequenceStatement::OwnedBy {
                name,
                owner,
                if_exists,
            })) => Some(self.set_sequence_owner(&name, owner, if_exists)),
            Some(Ok(super::sequence::SequenceStatement::Options {
                name,
                if_exists,
                options,
                restart,
            })) => Some(self.alter_sequence(&name, if_exists, &options, restart)),
            _ => None,
        };
        if let Some(outcome) = altered {
            if outcome.is_err() {
                self.note_error();
            }
            self.statement_zones.push(self.zone.get());
            return vec![outcome];
        }
        if let Some(pieces) = pieces_with_alter_sequence(sql) {
            // A string with DDL runs each statement as its own transaction (as
            // `execute_statements` does): one by one, stopping at the first error. Each
            // commits the usual way before the next starts (see below).
            let defer = std::mem::replace(&mut self.defer_commits, false);
            let mut outcomes = Vec::with_capacity(pieces.len());
            for piece in pieces {
                let mut outcome = self.execute_sql_listed(piece);
                let failed = outcome.iter().any(Result::is_err);
                outcomes.append(&mut outcome);
                if failed {
                    break;
                }
            }
            self.defer_commits = defer;
            return outcomes;
        }
        let statements = match parse(sql) {
            Ok(statements) => statements,
            Err(error) => {
                self.note_error();
                return vec![Err(error)];
            }
        };
        if statements.len() > 1 && self.defer_commits {
            // Each statement may commit: they commit the usual way, one after the other.
            self.defer_commits = false;
            let outcomes = self.execute_statements(statements);
            self.defer_commits = true;
            return outcomes;
        }
        self.execute_statements(statements)
    }

    /// `execute_sql` after parsing.
    fn execute_statements(&mut self, statements: Vec<Statement>) -> Vec<SqlResult<Outcome>> {
        let implicit = statements.len() > 1
            && matches!(self.state, State::Idle)
            && statements.iter().all(|statement| {
                !matches!(
                    statement,
                    Statement::StartTransaction { .. }
                        | Statement::Commit { .. }
                        | Statement::Rollback { .. }
                        | Statement::CreateTable(_)
                        | Statement::CreateDatabase { .. }
                        | Statement::CreateView(_)
                        | Statement::CreateType { .. }
                        | Statement::AlterType(_)
                        | Statement::CreateIndex(_)
                        | Statement::AlterTable(_)
                        | Statement::Drop { .. }
                )
            });
        if implicit {
            self.open_block(self.default_isolation);
        }
        let mut outcomes = Vec::with_capacity(statements.len());
        for statement in statements {
            let outcome = self.execute_statement(statement);
            let failed = outcome.is_err();
            outcomes.push(outcome);
            self.statement_zones.push(self.zone.get());
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

    pub(super) fn execute_statement(&mut self, statement: Statement) -> SqlResult<Outcome> {
        self.check_not_failed(&statement)?;
        crate::interrupt::check()?;
        let prepared = match self.prepare(statement, &[]) {
            Ok(prepared) => prepared,
            Err(error) => {
                self.note_error();
                return Err(error);
            }
        };
        self.execute_params_listed(&prepared, &[])
    }

    pub(super) fn check_not_failed(&self, statement: &Statement) -> SqlResult<()> {
        let ends_block = matches!(
            statement,
            Statement::Commit { .. } | Statement::Rollback { .. }
        );
        if matches!(self.state, State::Failed(_)) && !ends_block {
            return Err(in_failed_block());
        }
        Ok(())
    }

    /// Runs a prepared statement with parameter values (of `prepared.param_types`).
    pub fn execute(&mut self, prepared: &Prepared, params: Vec<Value>) -> SqlResult<Outcome> {
        self.execute_params(prepared, &params)
    }

    /// `execute` with borrowed parameter values.
    pub fn execute_params(&mut self, prepared: &Prepared, params: &[Value]) -> SqlResult<Outcome> {
        let _zone = self.enter_zone();
        if self.activity.is_some() {
            self.note_statement_start(prepared.text());
        }
        let outcome = self.execute_params_listed(prepared, params);
        self.note_statement_end();
        outcome
    }

    /// `execute_params` once pg_stat_activity shows the statement (statements inside another
    /// one: a query string's, EXECUTE's, COPY's rows).
    pub(crate) fn execute_params_listed(
        &mut self,
        prepared: &Prepared,
        params: &[Value],
    ) -> SqlResult<Outcome> {
        self.check_not_failed(&prepared.statement)?;
        let result = self.execute_locked(prepared, params);
        if !self.locked_tables.is_empty() && matches!(self.state, State::Idle) {
            self.release_tables(); // the statement's own transaction ended
        }
        result
    }

    /// `execute` with the plan's table locks taken first, so a DDL that changed a table
    /// while the statement waited for it is seen (the statement is bound again).
    pub(super) fn execute_locked(
        &mut self,
        prepared: &Prepared,
        params: &[Value],
    ) -> SqlResult<Outcome> {
        self.lock_tables(&prepared.plan)
            .inspect_err(|_| self.note_error())?;
        let rebound: Arc<Prepared>;
        let snapshot = self.statement_snapshot();
        let version = self.catalog.version();
        let current = |prepared: &Prepared| {
            prepared.catalog_version == version
                && prepared.planned_for(snapshot) == prepared.bound_for
        };
        let prepared = if current(prepared) {
            prepared
        } else {
            // A table changed since the statement was bound (DDL, ANALYZE), or the statement
            // reads with a snapshot that may read through other indexes: bind it again,
            // once (kept in the statement for its later runs).
            let kept = prepared.rebound.lock().clone().filter(|kept| current(kept));
            rebound = match kept {
                Some(kept) => kept,
                None => {
                    let fresh = Arc::new(
                        self.prepare(prepared.statement.clone(), &prepared.declared)
                            .inspect_err(|_| self.note_error())?,
                    );
                    *prepared.rebound.lock() = Some(fresh.clone());
                    fresh
                }
            };
            &rebound
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
        if result.is_err() {
            self.note_error();
        }
        result
    }

    pub(super) fn run_plan(&mut self, plan: &Plan, params: &[Value]) -> SqlResult<Outcome> {
        match plan {
            Plan::Transaction(control) => self.transaction_control(control),
            Plan::Prepare {
                name,
                declared,
                statement,
            } => self.prepare_named(name, declared, statement),
            Plan::Execute { name, arguments } => self.execute_named(name, arguments),
            Plan::Deallocate { name } => self.deallocate(name.as_deref()),
            Plan::DeclareCursor { name, query, hold } => {
                self.declare_cursor(name, query, *hold, params)
            }
            Plan::Fetch { name, count } => self.fetch(name, *count),
            Plan::CloseCursor { name } => self.close_cursor(name.as_deref()),
            Plan::CreateTable { def, if_not_exists } => {
                let catalog = self.catalog.clone();
                let undo = catalog.create_table(def.clone(), *if_not_exists, self.ddl_block())?;
                self.note_ddl(undo);
                Ok(command("CREATE TABLE"))
            }
            Plan::DropTable {
                names,
                if_exists,
                cascade,
            } => {
                self.drop_referencing_keys(names, *cascade)?;
                for name in names {
                    let catalog = self.catalog.clone();
                    let undo = catalog.drop_table(name, *if_exists, self.ddl_block())?;
                    self.note_ddl(undo);
                    // The sequences OWNED BY its columns go with it (at once: sequences are
                    // not transactional here).
                    for sequence in catalog.sequences() {
                        if sequence.owner().is_some_and(|(table, _)| table == *name) {
                            catalog.drop_sequence(&sequence.name, true)?;
                        }
                    }
                }
                Ok(command("DROP TABLE"))
            }
            Plan::CreateIndex {
                table,
                name,
                keys,
                unique,
                if_not_exists,
                predicate,
                options,
            } => {
                let catalog = self.catalog.clone();
                let block = self.ddl_block();
                let undo = with_index_keys(&catalog, |keys_of| {
                    let index = NewIndex {
                        table,
                        name: name.as_deref(),
                        keys,
                        kind: match unique {
                            true => IndexKind::Unique,
                            false => IndexKind::Plain,
                        },
                        if_not_exists: *if_not_exists,
                        predicate: predicate.clone(),
                        keys_of,
                        options,
                    };
                    catalog.create_index(index, block)
                })?;
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
            Plan::RenameIndex { table, from, to } => {
                let catalog = self.catalog.clone();
                let undo = catalog.rename_index(table, from, to, self.ddl_block())?;
                self.note_ddl(undo);
                Ok(command("ALTER INDEX"))
            }
            // Its locks were taken before it ran (`lock_tables`).
            Plan::LockTables { .. } => Ok(command("LOCK TABLE")),
            Plan::CreateView { def, or_replace } => {
                let catalog = self.catalog.clone();
                let undo = catalog.create_view(def.clone(), *or_replace, self.ddl_block())?;
                self.note_ddl(undo);
                Ok(command("CREATE VIEW"))
            }
            Plan::DropView { names, if_exists } => {
                for name in names {
                    let catalog = self.catalog.clone();
                    let undo = catalog.drop_view(name, *if_exists, self.ddl_block())?;
                    self.note_ddl(undo);
                }
                Ok(command("DROP VIEW"))
            }
            Plan::CreateEnum(enum_type) => {
                let catalog = self.catalog.clone();
                let undo = catalog.create_enum(enum_type.clone(), self.ddl_block())?;
                self.note_ddl(undo);
                Ok(command("CREATE TYPE"))
            }
            Plan::AlterEnum {
                name,
                change: EnumChange::RenameValue { from, to },
            } => {
                // A block's older snapshot would miss rows committed since: they would keep
                // a label that is no more.
                let in_block = matches!(self.state, State::InBlock(_));
                if in_block && self.block_isolation != Isolation::ReadCommitted {
                    return Err(SqlError::unsupported(
                        "ALTER TYPE ... RENAME VALUE in a REPEATABLE READ or SERIALIZABLE \
                         transaction (it rewrites the rows as READ COMMITTED sees them)",
                    ));
                }
                // The label and every stored value of it change in one transaction.
                let implicit = self.begin_implicit()?;
                let result = self.rename_enum_value(name, from, to);
                if implicit {
                    self.end_implicit(result.is_ok())?;
                }
                result?;
                Ok(command("ALTER TYPE"))
            }
            Plan::AlterEnum { name, change } => {
                let catalog = self.catalog.clone();
                let undo = catalog.alter_enum(name, change.clone(), self.ddl_block())?;
                self.note_ddl(undo);
                Ok(command("ALTER TYPE"))
            }
            Plan::DropEnum {
                names,
                if_exists,
                cascade,
            } => {
                for name in names {
                    let catalog = self.catalog.clone();
                    let undo = catalog.drop_enum(name, *if_exists, *cascade, self.ddl_block())?;
                    self.note_ddl(undo);
                }
                Ok(command("DROP TYPE"))
            }
            Plan::CreateDatabase {
                name,
                if_not_exists,
            } => self.create_database(name, *if_not_exists),
            Plan::DropDatabase {
                name,
                if_exists,
                force,
            } => self.drop_database(name, *if_exists, *force),
            Plan::AlterTable { table, actions } => {
                // Several actions are one statement: all or none (in an implicit block
                // when none is open; a failure in a block fails the block).
                // RENAME COLUMN changes the definitions of the tables referencing it too.
                let several = actions.len() > 1
                    || actions
                        .iter()
                        .any(|action| matches!(action, AlterAction::RenameColumn { .. }));
                let implicit = several && self.begin_implicit()?;
                let mut result = Ok(());
                for action in actions {
                    result = self.alter_table(table, action);
                    if result.is_err() {
                        break;
                    }
                }
                if implicit {
                    let ended = self.end_implicit(result.is_ok());
                    result = result.and(ended);
                }
                result?;
                Ok(command("ALTER TABLE"))
            }
            Plan::Truncate {
                tables,
                restart_identity,
            } if matches!(self.state, State::Idle) => {
                // Outside a block: swap in empty trees (inside, `run_data` deletes the rows).
                let changes = tables
                    .iter()
                    .map(|table| (table.def.name.clone(), Rebuild::Truncate))
                    .collect();
                with_index_keys(&self.catalog, |keys_of| {
                    self.catalog.rebuild(changes, keys_of, None)
                })?;
                if *restart_identity {
                    for table in tables {
                        self.catalog.restart_identities(&table.def.name)?;
                    }
                }
                Ok(command("TRUNCATE TABLE"))
            }
            Plan::Truncate {
                tables,
                restart_identity: true,
            } => {
                let outcome = self.run_data(plan, params)?;
                let names = tables.iter().map(|table| table.def.name.clone());
                self.pending_restarts.extend(names);
                Ok(outcome)
            }
            Plan::SetConstraints { names, deferred } => self.set_constraints(names, *deferred),
            Plan::SetTransaction { isolation, session } => {
                self.set_transaction(*isolation, *session)
            }
            Plan::Reset { name } => {
                if let Some(name) = name {
                    Self::check_settable(name)?;
                }
                // RESET ALL leaves the transaction's own settings, as PostgreSQL.
                let names: Vec<String> = match name {
                    Some(name) => vec![name.clone()],
                    None => self
                        .settings
                        .keys()
                        .filter(|name| !Self::kept_by_reset_all(name))
                        .cloned()
                        .collect(),
                };
                for name in names {
                    let value = self.reset_value(&name);
                    self.assign_setting(&name, value, false);
                }
                Ok(command("RESET"))
            }
            Plan::Set { name, .. } if Self::check_settable(name).is_err() => {
                Self::check_settable(name).map(|()| command("SET"))
            }
            Plan::Set { name, value, local } if name == "timezone" => {
                // DEFAULT and LOCAL go back to the session's starting zone.
                let value = match value.to_ascii_lowercase().as_str() {
                    "default" | "local" => self.reset_value(name).unwrap_or_default(),
                    _ => Self::time_zone_setting(value)?,
                };
                self.assign_setting(name, Some(value), *local);
                Ok(command("SET"))
            }
            Plan::Set { name, value, local } => {
                if name == "work_mem" {
                    crate::exec::parse_work_mem(value)?;
                }
                if name == "default_transaction_isolation" && Isolation::parse(value).is_none() {
                    return Err(SqlError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        format!(
                            "invalid value for parameter \"default_transaction_isolation\": \"{value}\""
                        ),
                    ));
                }
                if name == "transaction_isolation" {
                    let isolation = Isolation::parse(value).ok_or_else(|| {
                        SqlError::new(
                            sqlstate::INVALID_PARAMETER_VALUE,
                            format!(
                                "invalid value for parameter \"transaction_isolation\": \"{value}\""
                            ),
                        )
                    })?;
                    return self.set_transaction(Some(isolation), false);
                }
                self.assign_setting(name, Some(value.clone()), *local);
                Ok(command("SET"))
            }
            Plan::Show { name } if name == "all" => Ok(Outcome::Rows {
                columns: plan.columns(),
                rows: crate::settings::listed_settings(&self.settings)
                    .map(|(name, value)| {
                        vec![
                            Value::Text(name.into()),
                            Value::Text(value.into()),
                            Value::Text(String::new()),
                        ]
                    })
                    .collect(),
                command: "SHOW".into(),
            }),
            Plan::Show { name } => {
                let value = self.setting(name).ok_or_else(|| {
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
            Plan::Analyze { tables, tag } => {
                match tables.is_empty() {
                    true => self.catalog.analyze_all()?,
                    false => {
                        for table in tables {
                            self.catalog.analyze(table)?;
                        }
                    }
                }
                Ok(command(tag))
            }
            data => self.run_data(data, params),
        }
    }

    pub(super) fn alter_table(&mut self, name: &str, action: &AlterAction) -> SqlResult<()> {
        let table = self.catalog.table(name)?;
        let def = &table.def;
        let change = match action {
            AlterAction::AddPrimaryKey {
                columns,
                name: key_name,
            } => {
                let columns = columns
                    .iter()
                    .map(|column| {
                        def.column_index(column)
                            .ok_or_else(|| undefined_column(column, name))
                    })
                    .collect::<SqlResult<Vec<usize>>>()?;
                Rebuild::AddPrimaryKey(columns, key_name.clone())
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
                let context = self.standalone_context();
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
            AlterAction::SetConstraints {
                checks,
                foreign_keys,
            } => {
                for check in checks.iter().filter(|c| !def.checks.contains(c)) {
                    let sql = format!(
                        "SELECT 1 FROM {} WHERE NOT ({}) LIMIT 1",
                        quote(name),
                        check.expr
                    );
                    if self.any_row(&sql)? {
                        return Err(SqlError::new(
                            sqlstate::CHECK_VIOLATION,
                            format!(
                                "check constraint \"{}\" of relation \"{name}\" is violated by \
                                 some row",
                                check.name
                            ),
                        ));
                    }
                }
                for key in foreign_keys
                    .iter()
                    .filter(|k| !def.foreign_keys.contains(k))
                {
                    let columns: Vec<String> = key
                        .columns
                        .iter()
                        .map(|c| format!("c.{}", quote(&def.columns[*c].name)))
                        .collect();
                    let not_null: Vec<String> =
                        columns.iter().map(|c| format!("{c} IS NOT NULL")).collect();
                    let equal: Vec<String> = columns
                        .iter()
                        .zip(&key.referenced)
                        .map(|(c, p)| format!("p.{} = {c}", quote(p)))
                        .collect();
                    let sql = format!(
                        "SELECT 1 FROM {} AS c WHERE {} AND NOT EXISTS \
                         (SELECT 1 FROM {} AS p WHERE {}) LIMIT 1",
                        quote(name),
                        not_null.join(" AND "),
                        quote(&key.table),
                        equal.join(" AND ")
                    );
                    if self.any_row(&sql)? {
                        return Err(SqlError::new(
                            sqlstate::FOREIGN_KEY_VIOLATION,
                            format!(
                                "insert or update on table \"{name}\" violates foreign key \
                                 constraint \"{}\"",
                                key.name
                            ),
                        ));
                    }
                }
                let catalog = self.catalog.clone();
                let undo = catalog.alter_definition(
                    name,
                    |def| {
                        def.checks = checks.clone();
                        def.foreign_keys = foreign_keys.clone();
                    },
                    self.ddl_block(),
                )?;
                self.note_ddl(undo);
                return self.index_foreign_keys(name);
            }
            AlterAction::AddUnique {
                name: index_name,
                columns,
            } => {
                let catalog = self.catalog.clone();
                let keys: Vec<IndexKey> = columns.iter().cloned().map(IndexKey::Column).collect();
                let block = self.ddl_block();
                let undo = with_index_keys(&catalog, |keys_of| {
                    let index = NewIndex {
                        table: name,
                        name: Some(index_name),
                        keys: &keys,
                        kind: IndexKind::UniqueConstraint,
                        if_not_exists: false,
                        predicate: None,
                        keys_of,
                        options: &[],
                    };
                    catalog.create_index(index, block)
                })?;
                self.note_ddl(undo);
                return Ok(());
            }
            AlterAction::DropUnique(index_name) => {
                let catalog = self.catalog.clone();
                let undo = catalog.drop_index(index_name, false, self.ddl_block())?;
                self.note_ddl(undo);
                return Ok(());
            }
            AlterAction::SetType {
                name: column,
                data_type,
            } => return self.set_column_type(name, column, *data_type),
            AlterAction::RenameColumn { from, to } => return self.rename_column(name, from, to),
            AlterAction::RenameTable(to) => return self.rename_table(name, to),
            AlterAction::RenameConstraint { from, to } => {
                let catalog = self.catalog.clone();
                let block = self.ddl_block();
                let unique = def
                    .indexes
                    .iter()
                    .any(|index| index.constraint && index.name == *from)
                    || (!def.primary_key.is_empty() && def.primary_key_name() == *from);
                let foreign_key = def.foreign_keys.iter().any(|key| key.name == *from);
                let undo = if unique {
                    catalog.rename_index(name, from, to, block)?
                } else {
                    catalog.try_alter_definition(
                        name,
                        |def| {
                            if let Some(check) = def.checks.iter_mut().find(|c| c.name == *from) {
                                check.name = to.clone();
                            } else if let Some(key) =
                                def.foreign_keys.iter_mut().find(|k| k.name == *from)
                            {
                                key.name = to.clone();
                                // Its own index (EXPLAIN's name for it) follows.
                                for index in &mut def.indexes {
                                    if index.automatic && index.name == *from {
                                        index.name = to.clone();
                                    }
                                }
                            } else {
                                return Err(crate::catalog::undefined_constraint(from, name));
                            }
                            Ok(())
                        },
                        block,
                    )?
                };
                self.note_ddl(undo);
                // Checks deferred to COMMIT and SET CONSTRAINTS modes find a foreign key by
                // name: they follow it (the savepoints' copies keep the old name, as the
                // definition does after a ROLLBACK TO).
                if foreign_key {
                    for check in &mut self.deferred_checks {
                        check.rename_key(name, from, to);
                    }
                    self.constraint_modes.renamed(from, to);
                }
                return Ok(());
            }
            AlterAction::AlterColumn {
                name: column,
                default,
                not_null,
            } => {
                let index = def
                    .column_index(column)
                    .ok_or_else(|| undefined_column(column, name))?;
                if *not_null == Some(true) && !def.columns[index].not_null {
                    let sql = format!(
                        "SELECT 1 FROM {} WHERE {} IS NULL LIMIT 1",
                        quote(name),
                        quote(column)
                    );
                    if self.any_row(&sql)? {
                        return Err(SqlError::new(
                            sqlstate::NOT_NULL_VIOLATION,
                            format!(
                                "column \"{column}\" of relation \"{name}\" contains null values"
                            ),
                        ));
                    }
                }
                let catalog = self.catalog.clone();
                let undo = catalog.alter_definition(
                    name,
                    |def| {
                        let column = &mut def.columns[index];
                        if let Some(default) = default {
                            column.default = default.clone();
                        }
                        if let Some(not_null) = not_null {
                            column.not_null = *not_null;
                        }
                    },
                    self.ddl_block(),
                )?;
                self.note_ddl(undo);
                return Ok(());
            }
        };
        let catalog = self.catalog.clone();
        let block = self.ddl_block();
        let undo = with_index_keys(&catalog, |keys_of| {
            catalog.rebuild(vec![(name.to_string(), change)], keys_of, block)
        })?;
        self.note_ddl(undo);
        Ok(())
    }

    /// Builds the automatic index (`IndexDef::automatic`) of each foreign key of `table` no
    /// index leads with.
    fn index_foreign_keys(&mut self, table: &str) -> SqlResult<()> {
        let catalog = self.catalog.clone();
        let def = catalog.table(table)?.def.clone();
        for key in def.unindexed_foreign_keys() {
            let keys: Vec<IndexKey> = (key.columns.iter())
                .map(|column| IndexKey::Column(def.columns[*column].name.clone()))
                .collect();
            let block = self.ddl_block();
            let undo = with_index_keys(&catalog, |keys_of| {
                let index = NewIndex {
                    table,
                    name: Some(&key.name),
                    keys: &keys,
                    kind: IndexKind::Automatic,
                    if_not_exists: false,
                    predicate: None,
                    keys_of,
                    options: &[],
                };
                catalog.create_index(index, block)
            })?;
            self.note_ddl(undo);
        }
        Ok(())
    }

    /// RENAME COLUMN `from` TO `to` of `table`: its definition and CHECK texts, the foreign
    /// keys (of any table) that name it as a referenced column, and a sequence OWNED BY it.
    /// A view reading the table would keep the old name in its query text: refused (0A000).
    fn rename_column(&mut self, table: &str, from: &str, to: &str) -> SqlResult<()> {
        if self.catalog.read_by_view(table) {
            return Err(SqlError::unsupported(
                "renaming a column of a table a view reads (drop the view first)",
            ));
        }
        let index = self
            .catalog
            .table(table)?
            .def
            .column_index(from)
            .ok_or_else(|| undefined_column(from, table))?;
        let rename_referenced = |def: &mut crate::catalog::TableDef| {
            for key in def.foreign_keys.iter_mut().filter(|key| key.table == table) {
                for column in key.referenced.iter_mut().filter(|c| *c == from) {
                    *column = to.to_string();
                }
            }
        };
        let catalog = self.catalog.clone();
        let undo = catalog.alter_definition(
            table,
            |def| {
                // A constraint's index known by its name only keeps being one.
                let constraints: Vec<bool> = def
                    .indexes
                    .iter()
                    .map(|index| def.is_unique_constraint(index))
                    .collect();
                for (index, constraint) in def.indexes.iter_mut().zip(constraints) {
                    index.constraint = constraint;
                }
                // A SERIAL/identity column's sequence keeps its name.
                def.pin_sequence_names();
                def.columns[index].name = to.to_string();
                for check in &mut def.checks {
                    check.expr = crate::catalog::rename_column_in(&check.expr, from, to);
                }
                for index in &mut def.indexes {
                    if let Some(predicate) = &mut index.predicate {
                        *predicate = crate::catalog::rename_column_in(predicate, from, to);
                    }
                    for expression in &mut index.expressions {
                        expression.text =
                            crate::catalog::rename_column_in(&expression.text, from, to);
                    }
                }
                rename_referenced(def);
            },
            self.ddl_block(),
        )?;
        self.note_ddl(undo);
        for child in self.catalog.table_names() {
            let names_it = self
                .catalog
                .table(&child)?
                .def
                .foreign_keys
                .iter()
                .any(|key| key.table == table && key.referenced.iter().any(|c| c == from));
            if child != table && names_it {
                let undo = catalog.alter_definition(&child, rename_referenced, self.ddl_block())?;
                self.note_ddl(undo);
            }
        }
        for sequence in self.catalog.sequences() {
            if sequence.owner() == Some((table.to_string(), from.to_string())) {
                self.rename_sequence_owner(sequence, Some((table.to_string(), to.to_string())))?;
            }
        }
        Ok(())
    }

    /// ALTER TABLE `table` RENAME TO `to` (`Catalog::rename_table`); a sequence OWNED BY one
    /// of its columns follows. A view reading the table would keep the old name in its query
    /// text: refused (0A000).
    fn rename_table(&mut self, table: &str, to: &str) -> SqlResult<()> {
        if self.catalog.read_by_view(table) {
            return Err(SqlError::unsupported(
                "renaming a table a view reads (drop the view first)",
            ));
        }
        let catalog = self.catalog.clone();
        let undo = catalog.rename_table(table, to, self.ddl_block())?;
        self.note_ddl(undo);
        // The savepoints' copies keep the old name: a ROLLBACK TO before the rename undoes it.
        for check in &mut self.deferred_checks {
            check.rename_table(table, to);
        }
        for sequence in self.catalog.sequences() {
            if let Some((owner, column)) = sequence.owner() {
                if owner == table {
                    self.rename_sequence_owner(sequence, Some((to.to_string(), column)))?;
                }
            }
        }
        Ok(())
    }

    /// Changes a sequence's OWNED BY for a renaming DDL; in a block, the old owner comes back
    /// if the block rolls back.
    fn rename_sequence_owner(
        &mut self,
        sequence: std::sync::Arc<crate::catalog::Sequence>,
        owner: Option<(String, String)>,
    ) -> SqlResult<()> {
        if matches!(self.state, State::InBlock(_)) {
            self.owner_undo.push((sequence.clone(), sequence.owner()));
        }
        sequence.set_owner(owner)
    }

    /// ALTER COLUMN ... TYPE between types of one stored form: integers of any width (all
    /// stored as i64, keys alike), text and varchar(n) (length-prefixed UTF-8). A narrower
    /// type is checked against every row first; other changes would rewrite the rows, which
    /// is not done (0A000).
    fn set_column_type(&mut self, table: &str, column: &str, to: DataType) -> SqlResult<()> {
        let def = self.catalog.table(table)?.def.clone();
        let index = def
            .column_index(column)
            .ok_or_else(|| undefined_column(column, table))?;
        let from = def.columns[index].data_type;
        if from == to {
            return Ok(());
        }
        // Text, varchar and enums store the text itself: a change among them keeps the rows.
        let textual =
            |t: DataType| matches!(t, DataType::Text | DataType::Varchar(_) | DataType::Enum(_));
        if !(from.is_integer() && to.is_integer() || textual(from) && textual(to)) {
            return Err(SqlError::unsupported(format!(
                "ALTER COLUMN TYPE from {from} to {to} (only between integer widths, and \
                 among text, varchar and enum types, which keep the stored rows)"
            )));
        }
        // An enum orders by its labels, text by its characters: a check or partial index
        // reading the column would change meaning either way.
        if matches!(from, DataType::Enum(_)) || matches!(to, DataType::Enum(_)) {
            Self::refuse_readers_of(&def, index)?;
        }
        if let DataType::Enum(oid) = to {
            self.check_enum_column(&def, index, oid)?;
        }
        if self.catalog.read_by_view(table) {
            return Err(SqlError::unsupported(
                "cannot alter type of a column used by a view or rule",
            ));
        }
        // The stored type of a key expression over the column would change with it.
        if let Some(index) = def.indexes.iter().find(|i| i.expressions_mention(column)) {
            return Err(SqlError::unsupported(format!(
                "ALTER COLUMN TYPE of a column the expression index \"{}\" reads (drop the \
                 index, change the type, create it again)",
                index.name
            )));
        }
        let quoted = quote(column);
        let violation = match to {
            DataType::Int2 | DataType::Int4 if from.wider_integer(to) != to => {
                let (low, high) = if to == DataType::Int2 {
                    (i16::MIN as i64, i16::MAX as i64)
                } else {
                    (i32::MIN as i64, i32::MAX as i64)
                };
                Some((
                    format!("{quoted} < {low} OR {quoted} > {high}"),
                    SqlError::new(
                        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                        format!("{} out of range", to.name()),
                    ),
                ))
            }
            DataType::Varchar(Some(length)) => Some((
                format!("length({quoted}) > {length}"),
                SqlError::new(
                    sqlstate::STRING_DATA_RIGHT_TRUNCATION,
                    format!("value too long for type character varying({length})"),
                ),
            )),
            _ => None,
        };
        if let Some((condition, error)) = violation {
            let sql = format!("SELECT 1 FROM {} WHERE {condition} LIMIT 1", quote(table));
            if self.any_row(&sql)? {
                return Err(error);
            }
        }
        let catalog = self.catalog.clone();
        let undo = catalog.alter_definition(
            table,
            |def| def.columns[index].data_type = to,
            self.ddl_block(),
        )?;
        self.note_ddl(undo);
        Ok(())
    }

    /// ALTER TYPE name RENAME VALUE from TO to: the label in the catalog, then every column
    /// of the type in every table (values are stored as the labels' text), by UPDATEs of the
    /// session's own in its block.
    fn rename_enum_value(&mut self, name: &str, from: &str, to: &str) -> SqlResult<()> {
        let catalog = self.catalog.clone();
        let change = EnumChange::RenameValue {
            from: from.to_string(),
            to: to.to_string(),
        };
        let undo = catalog.alter_enum(name, change, self.ddl_block())?;
        self.note_ddl(undo);
        let oid = catalog.enum_type(name).map(|t| t.oid);
        let mut columns = Vec::new();
        for table in catalog.table_names() {
            let def = &catalog.table(&table)?.def;
            let of_type = (def.columns.iter())
                .filter(|column| Some(column.data_type) == oid.map(DataType::Enum));
            columns.extend(of_type.map(|column| (table.clone(), column.name.clone())));
        }
        let (from, to) = (quote_literal(from), quote_literal(to));
        for (table, column) in columns {
            let sql = format!(
                "UPDATE {} SET {column} = {to} WHERE {column}::text = {from}",
                quote(&table),
                column = quote(&column)
            );
            let statement = parse(&sql)?
                .pop()
                .ok_or_else(|| SqlError::syntax("empty"))?;
            let prepared = self.prepare(statement, &[])?;
            self.lock_tables(&prepared.plan)?;
            self.run_data(&prepared.plan, &[])?;
        }
        Ok(())
    }

    /// 0A000 if a check or an index predicate or expression reads column `index` of `def`
    /// (a type change to or from an enum would change what they mean: labels and text
    /// order differently).
    fn refuse_readers_of(def: &TableDef, index: usize) -> SqlResult<()> {
        let column = &def.columns[index];
        let check = (def.checks.iter())
            .find(|check| check.mentions(&column.name))
            .map(|check| &check.name);
        let index_reading = def.indexes.iter().find(|i| {
            i.expressions_mention(&column.name)
                || (i.predicate.as_deref())
                    .is_some_and(|p| crate::catalog::mentions(p, &column.name))
        });
        match check.or(index_reading.map(|index| &index.name)) {
            Some(name) => Err(SqlError::unsupported(format!(
                "ALTER COLUMN TYPE to or from an enum of a column \"{name}\" reads (drop it, \
                 change the type, create it again)"
            ))),
            None => Ok(()),
        }
    }

    /// Before column `index` of `def` becomes of enum type `oid`: its values must be the
    /// type's labels (22P02 naming the first that is not), and its default would need a
    /// cast (42804, as PostgreSQL refuses it: drop the default first).
    fn check_enum_column(&mut self, def: &TableDef, index: usize, oid: u32) -> SqlResult<()> {
        let column = &def.columns[index];
        let enum_type = self.catalog.existing_enum_type(oid)?;
        if column.default.is_some() {
            return Err(SqlError::new(
                sqlstate::DATATYPE_MISMATCH,
                format!(
                    "default for column \"{}\" cannot be cast automatically to type {}",
                    column.name, enum_type.name
                ),
            ));
        }
        let labels: Vec<String> = (enum_type.labels.iter())
            .map(|label| quote_literal(&label.label))
            .collect();
        let quoted = quote(&column.name);
        let outside = match labels.is_empty() {
            true => format!("{quoted} IS NOT NULL"),
            false => format!("{quoted}::text NOT IN ({})", labels.join(", ")),
        };
        let sql = format!(
            "SELECT {quoted}::text FROM {} WHERE {outside} LIMIT 1",
            quote(&def.name)
        );
        if let Some(row) = self.first_row(&sql)? {
            let value = row[0].to_text().unwrap_or_default();
            return Err(SqlError::new(
                sqlstate::INVALID_TEXT_REPRESENTATION,
                format!(
                    "invalid input value for enum {}: \"{value}\"",
                    enum_type.name
                ),
            ));
        }
        Ok(())
    }

    /// Before DROP TABLE `names`: the foreign keys of other tables that reference them are
    /// dropped with CASCADE, else they make the statement fail (2BP01), as in PostgreSQL.
    fn drop_referencing_keys(&mut self, names: &[String], cascade: bool) -> SqlResult<()> {
        for child_name in self.catalog.table_names() {
            if names.contains(&child_name) {
                continue;
            }
            let child = self.catalog.table(&child_name)?;
            let (dropped, kept): (Vec<_>, Vec<_>) = child
                .def
                .foreign_keys
                .iter()
                .cloned()
                .partition(|key| names.contains(&key.table));
            let Some(first) = dropped.first() else {
                continue;
            };
            if !cascade {
                return Err(SqlError::new(
                    sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                    format!(
                        "cannot drop table {} because other objects depend on it",
                        first.table
                    ),
                )
                .with_detail(format!(
                    "constraint {} on table {child_name} depends on table {}",
                    first.name, first.table
                )));
            }
            let catalog = self.catalog.clone();
            let undo = catalog.alter_definition(
                &child_name,
                |def| def.foreign_keys = kept,
                self.ddl_block(),
            )?;
            self.note_ddl(undo);
        }
        Ok(())
    }

    /// True if the query returns a row (run in the session's transaction, if open).
    fn any_row(&mut self, sql: &str) -> SqlResult<bool> {
        Ok(self.first_row(sql)?.is_some())
    }

    /// The first row of a query the session runs for itself.
    fn first_row(&mut self, sql: &str) -> SqlResult<Option<Vec<Value>>> {
        let statement = parse(sql)?.pop().ok_or_else(|| SqlError::syntax("empty"))?;
        let prepared = self.prepare(statement, &[])?;
        Ok(match self.run_data(&prepared.plan, &[])? {
            Outcome::Rows { rows, .. } => rows.into_iter().next(),
            Outcome::Command { .. } => None,
        })
    }

    pub(super) fn run_data(&mut self, plan: &Plan, params: &[Value]) -> SqlResult<Outcome> {
        let changes = std::cell::RefCell::new(Vec::new());
        let outcome = self.run_data_noting(plan, params, &changes)?;
        let changes = changes.into_inner();
        for (name, value, local) in changes {
            self.assign_setting(&name, Some(value), local);
        }
        Ok(outcome)
    }

    /// `run_data`, noting set_config's changes in `changes`.
    fn run_data_noting(
        &mut self,
        plan: &Plan,
        params: &[Value],
        changes: &crate::plan::expr::SettingChanges,
    ) -> SqlResult<Outcome> {
        let db = self.catalog.database().clone();
        let transaction_timestamp = match self.state {
            State::InBlock(_) => *self
                .block_timestamp
                .get_or_insert_with(crate::types::datetime::now_micros),
            _ => crate::types::datetime::now_micros(),
        };
        if let State::InBlock(_) = self.state {
            self.block_queried = true;
        }
        let read_committed = match &mut self.state {
            State::InBlock(txn) if self.block_isolation == Isolation::ReadCommitted => {
                // Each statement of a READ COMMITTED block reads what was committed before it.
                txn.refresh_snapshot();
                true
            }
            State::InBlock(_) => false,
            _ => self.default_isolation == Isolation::ReadCommitted,
        };
        let executor = Executor {
            db: &db,
            catalog: &self.catalog,
            read_committed,
            work_mem_bytes: self.work_mem_bytes,
            constraints: Default::default(),
            index_terms: Default::default(),
            constraint_modes: match self.state {
                State::InBlock(_) => Some(&self.constraint_modes),
                _ => None,
            },
            context: EvalContext {
                params,
                database_name: &self.database,
                user_name: &self.user,
                transaction_timestamp,
                subqueries: None,
                sequences: Some(&self.sequences),
                settings: Some(&self.settings),
                setting_changes: Some(changes),
            },
        };
        match &mut self.state {
            State::InBlock(txn) => {
                let outcome = executor.run(plan, txn)?;
                let deferred = executor.constraints.take_deferred();
                self.deferred_checks.extend(deferred);
                Ok(outcome)
            }
            State::Failed(_) => unreachable!("checked by check_not_failed"),
            State::Idle => {
                // A single statement that lost a write conflict has shown nothing to the
                // client yet: run it again on a fresh snapshot, as PostgreSQL's READ COMMITTED
                // re-reads a row updated under it. Inside a block the conflict is the client's
                // (40001).
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let mut txn =
                        self.begin_transaction(plan.is_read_only(), self.default_isolation);
                    let result = executor.run(plan, &mut txn).and_then(|outcome| {
                        if self.defer_commits {
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
}

/// A name as a quoted SQL identifier.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn undefined_column(column: &str, table: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_COLUMN,
        format!("column \"{column}\" of relation \"{table}\" does not exist"),
    )
}

/// Runs `f` (DDL that builds indexes) with the key of a row in an index (its expressions
/// evaluated; None when a partial index's predicate leaves it out). Predicates and key
/// expressions are immutable (`Expr::is_immutable`), so no session state is read.
fn with_index_keys<T>(catalog: &Catalog, f: impl FnOnce(IndexKeys<'_>) -> T) -> T {
    let terms = IndexTerms::default();
    let context = EvalContext {
        params: &[],
        database_name: "",
        user_name: "",
        transaction_timestamp: crate::types::datetime::now_micros(),
        subqueries: None,
        sequences: None,
        settings: None,
        setting_changes: None,
    };
    let keys_of = |def: &TableDef, index: &IndexDef, values: &[Value]| {
        terms.keys(catalog, def, index, values, &context)
    };
    f(&keys_of)
}

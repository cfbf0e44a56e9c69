//! The query handlers of one connection: simple query, extended query (parse, bind,
//! describe, execute, sync) and COPY, on top of a `hayate_sql::Session`.
//!
//! COPY FROM STDIN: the statement (simple or extended) starts a `hayate_sql::copy::CopyIn`
//! on the session and answers CopyInResponse; each CopyData message is handed to the
//! session as it arrives (rows are inserted as they come, not buffered); CopyDone commits
//! (autocommit) and answers `COPY n`, CopyFail or an error aborts.
//!
//! Cancellation: every statement runs with the connection's interrupt flag current
//! (`hayate_sql::interrupt`), cleared when a new statement starts.
//!
//! Waits: the connection is a task on an event loop shared with other connections, so a
//! statement must not block the loop's thread. Its session defers waits
//! (`Session::set_defer_waits`):
//! 1. The statement runs on the loop thread (`run_statement`); most finish there (reads,
//!    writes of unlocked rows).
//! 2. One that would wait for a row or table lock, or a row whose newer version is not
//!    published yet, was undone by the session; it runs again on a blocking thread of the
//!    runtime with waits allowed (so deadlock detection and lock timeouts work as before).
//!    DDL and query strings of several statements go there directly.
//! 3. A commit it started (`Session::take_pending_commit`) is awaited on the engine's log
//!    flusher (`crate::commit_wait`, one waiter per loop) and finished before the statement is
//!    answered: the commit is acknowledged only once durable, and the loop serves other
//!    connections during the fdatasync.
//!
//! COPY runs on the loop thread with waits allowed (rare lock waits there block the loop).
//! See docs/design.md, "The server".

use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use futures::{stream, Sink, SinkExt, StreamExt};
use hayate_sql::copy::{self, CopyDirection, CopyFailure, CopyIn, CopyStatement};
use hayate_sql::interrupt::{self, Interrupt};
use hayate_sql::{
    sqlstate, Catalog, Outcome, Prepared, Session, SqlError, SqlResult, TransactionStatus,
};
use parking_lot::Mutex;
use pgwire::api::copy::{send_copy_in_response, send_copy_out_response, CopyHandler};
use pgwire::api::portal::{Format, Portal, PortalExecutionState};
use pgwire::api::query::{
    send_execution_response, send_query_response, send_ready_for_query, ExtendedQueryHandler,
    SimpleQueryHandler,
};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeStatementResponse, FieldInfo, QueryResponse,
    Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, PgWireConnectionState, Type, DEFAULT_NAME, METADATA_DATABASE,
    METADATA_USER,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{
    Bind, BindComplete, Close, CloseComplete, Describe, Execute, Parse, ParseComplete,
    PortalSuspended, Sync as PgSync, TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::messages::response::{
    CommandComplete, EmptyQueryResponse, ReadyForQuery, TransactionStatus as Wire,
};
use pgwire::messages::simplequery::Query;
use pgwire::messages::PgWireBackendMessage;

use crate::{wire, ServerConfig};

/// The session of one connection, created when its first statement arrives (the user and
/// database names come from the startup message).
pub struct ConnectionState {
    /// This state itself, for statements moved to a blocking thread.
    me: Weak<ConnectionState>,
    catalog: Arc<Catalog>,
    config: Arc<ServerConfig>,
    session: Mutex<Option<Session>>,
    interrupt: Interrupt,
    /// The COPY FROM STDIN in progress, between CopyData messages.
    copy: Mutex<Option<CopyIn>>,
}

/// What a COPY statement starts.
enum CopyStart {
    In(Box<CopyIn>),
    Out(usize, Vec<Vec<u8>>),
}

impl ConnectionState {
    pub fn new(catalog: Arc<Catalog>, config: Arc<ServerConfig>) -> Arc<ConnectionState> {
        Arc::new_cyclic(|me| ConnectionState {
            me: me.clone(),
            catalog,
            config,
            session: Mutex::new(None),
            interrupt: Interrupt::new(),
            copy: Mutex::new(None),
        })
    }

    /// The flag a cancel request for this connection sets.
    pub fn interrupt(&self) -> &Interrupt {
        &self.interrupt
    }

    /// A new statement starts: an earlier cancel no longer applies, and a COPY the client
    /// left (by sending a query in its middle) is aborted.
    fn start_statement<C: ClientInfo>(&self, client: &C) {
        self.interrupt.clear();
        if let Some(copy) = self.copy.lock().take() {
            self.with_session_waiting(client, |session| {
                session.copy_fail(copy, "the client sent a new statement")
            });
        }
    }

    /// Starts a COPY statement on the session.
    fn start_copy<C: ClientInfo>(
        &self,
        client: &C,
        statement: &CopyStatement,
    ) -> SqlResult<CopyStart> {
        self.with_session_waiting(client, |session| match statement.direction {
            CopyDirection::FromStdin => session
                .copy_in(statement)
                .map(|copy| CopyStart::In(Box::new(copy))),
            CopyDirection::ToStdout => session
                .copy_out(statement)
                .map(|(columns, records)| CopyStart::Out(columns, records)),
        })
    }

    /// Runs a statement's `work` on the session, waits deferred (see the module doc): on
    /// this loop thread first; again on a blocking thread if it would have waited; then the
    /// commit it started is awaited and finished (a failure there becomes the result).
    async fn run_statement<C, T, W>(&self, client: &C, work: W) -> T
    where
        C: ClientInfo,
        T: StatementResult + Send + 'static,
        W: Fn(&mut Session) -> T + Send + 'static,
    {
        let (mut result, mut pending) = self.with_session(client, |session| {
            let result = work(session);
            (result, session.take_pending_commit())
        });
        if result.would_block() {
            result = self.run_waiting(work).await;
            pending = None; // waits allowed: the statement committed already
        }
        if let Some(pending) = pending {
            let durable = crate::commit_wait::durable(self.catalog.database(), pending.lsn()).await;
            let finished = durable.and_then(|()| pending.finish());
            if let Err(error) = finished {
                result.fail(error.into());
            }
        }
        result
    }

    /// Runs `work` on a blocking thread with waits allowed (the session exists: the first
    /// attempt created it).
    async fn run_waiting<T, W>(&self, work: W) -> T
    where
        T: StatementResult + Send + 'static,
        W: FnOnce(&mut Session) -> T + Send + 'static,
    {
        let Some(state) = self.me.upgrade() else {
            return T::from_error(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "the connection is closing",
            ));
        };
        let joined = tokio::task::spawn_blocking(move || {
            let _interruptible = interrupt::enter(&state.interrupt);
            let mut session = state.session.lock();
            let Some(session) = session.as_mut() else {
                return T::from_error(SqlError::new(
                    sqlstate::INTERNAL_ERROR,
                    "the connection has no session",
                ));
            };
            with_waits(session, work)
        })
        .await;
        joined.unwrap_or_else(|error| {
            T::from_error(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                format!("the statement's thread failed: {error}"),
            ))
        })
    }

    /// Runs `work` on the session on this thread with waits allowed (COPY).
    fn with_session_waiting<C: ClientInfo, T>(
        &self,
        client: &C,
        work: impl FnOnce(&mut Session) -> T,
    ) -> T {
        self.with_session(client, |session| with_waits(session, work))
    }

    /// Runs `work` on the session (on this thread; the session defers waits).
    fn with_session<C: ClientInfo, T>(
        &self,
        client: &C,
        work: impl FnOnce(&mut Session) -> T,
    ) -> T {
        {
            let _interruptible = interrupt::enter(&self.interrupt);
            let mut session = self.session.lock();
            let session = session.get_or_insert_with(|| {
                let metadata = client.metadata();
                let user = metadata
                    .get(METADATA_USER)
                    .map(String::as_str)
                    .unwrap_or("hayate");
                let database = metadata
                    .get(METADATA_DATABASE)
                    .map(String::as_str)
                    .unwrap_or(user);
                let mut session = Session::new(self.catalog.clone(), user, database);
                session.set_setting("work_mem", &self.config.work_mem);
                session.set_defer_waits(true);
                session
            });
            work(session)
        }
    }

    /// Removes the protocol-level statements a DEALLOCATE dropped from the statement store
    /// (they share PostgreSQL's namespace with PREPARE's).
    fn forget_deallocated<C: ClientPortalStore>(&self, client: &C)
    where
        C::PortalStore: PortalStore,
    {
        let names = self
            .session
            .lock()
            .as_mut()
            .map(Session::take_deallocated)
            .unwrap_or_default();
        for name in names {
            client.portal_store().rm_statement(&name);
        }
    }

    /// Tells the session a named protocol-level statement exists (Parse) or is gone (Close).
    fn note_statement_name<C: ClientInfo>(&self, client: &C, name: &str, parsed: bool) {
        self.with_session(client, |session| {
            if parsed {
                session.protocol_statement_parsed(name)
            } else {
                session.protocol_statement_closed(name)
            }
        });
    }

    /// The transaction status for ReadyForQuery (never blocks: no statement runs then).
    fn status(&self) -> Wire {
        match self.session.lock().as_ref().map(Session::status) {
            None | Some(TransactionStatus::Idle) => Wire::Idle,
            Some(TransactionStatus::InBlock) => Wire::Transaction,
            Some(TransactionStatus::Failed) => Wire::Error,
        }
    }
}

/// Runs `work` on a session that defers waits with waits allowed.
fn with_waits<T>(session: &mut Session, work: impl FnOnce(&mut Session) -> T) -> T {
    session.set_defer_waits(false);
    let result = work(session);
    session.set_defer_waits(true);
    result
}

/// What `run_statement` needs of a statement's result.
trait StatementResult {
    /// The statement would have waited (`sqlstate::WOULD_BLOCK`).
    fn would_block(&self) -> bool;
    /// Its commit failed: the statement fails.
    fn fail(&mut self, error: SqlError);
    fn from_error(error: SqlError) -> Self;
}

impl<T> StatementResult for SqlResult<T> {
    fn would_block(&self) -> bool {
        self.as_ref().is_err_and(SqlError::is_would_block)
    }

    fn fail(&mut self, error: SqlError) {
        *self = Err(error);
    }

    fn from_error(error: SqlError) -> Self {
        Err(error)
    }
}

/// The outcomes of a query string (`Session::execute_sql`): a string that would wait
/// answers one WOULD_BLOCK outcome, and only a single statement leaves a pending commit.
impl StatementResult for Vec<SqlResult<Outcome>> {
    fn would_block(&self) -> bool {
        matches!(self.as_slice(), [Err(error)] if error.is_would_block())
    }

    fn fail(&mut self, error: SqlError) {
        match self.last_mut() {
            Some(last) => *last = Err(error),
            None => self.push(Err(error)),
        }
    }

    fn from_error(error: SqlError) -> Self {
        vec![Err(error)]
    }
}

pub fn error_info(error: &SqlError) -> ErrorInfo {
    let mut info = ErrorInfo::new(
        "ERROR".to_string(),
        error.code.to_string(),
        error.message.clone(),
    );
    info.detail = error.detail.clone();
    info
}

fn user_error(error: SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(&error)))
}

/// A COPY error, with its CONTEXT (the line it happened on).
fn copy_error(failure: CopyFailure) -> PgWireError {
    let mut info = error_info(&failure.error);
    info.where_context = failure.context;
    PgWireError::UserError(Box::new(info))
}

fn copy_data_stream(
    records: Vec<Vec<u8>>,
) -> impl futures::Stream<Item = PgWireResult<CopyData>> + Send + 'static {
    stream::iter(
        records
            .into_iter()
            .map(|record| Ok(CopyData::new(bytes::Bytes::from(record)))),
    )
}

fn rows_response(
    columns: &[hayate_sql::OutputColumn],
    rows: Vec<Vec<hayate_sql::Value>>,
    command: &str,
    format: &Format,
) -> PgWireResult<QueryResponse> {
    let fields: Arc<Vec<FieldInfo>> = Arc::new(wire::fields(columns, format));
    let encoded: Vec<PgWireResult<_>> = rows
        .iter()
        .map(|row| wire::encode_row(row, columns, format).map_err(user_error))
        .collect();
    let mut response = QueryResponse::new(fields, stream::iter(encoded));
    response.set_command_tag(command);
    Ok(response)
}

/// CommandComplete for a command that returned `rows` rows ("SELECT 1"), without the
/// formatting machinery (this runs once per query).
fn command_complete(command: &str, rows: usize) -> CommandComplete {
    let mut digits = itoa::Buffer::new();
    let count = digits.format(rows);
    let mut tag = String::with_capacity(command.len() + 1 + count.len());
    tag.push_str(command);
    tag.push(' ');
    tag.push_str(count);
    CommandComplete::new(tag)
}

/// The answer to a Describe for a result with `fields`: RowDescription, or NoData.
fn row_description(fields: &[FieldInfo]) -> PgWireBackendMessage {
    if fields.is_empty() {
        PgWireBackendMessage::NoData(NoData::new())
    } else {
        PgWireBackendMessage::RowDescription(RowDescription::new(
            fields.iter().map(Into::into).collect(),
        ))
    }
}

fn outcome_response(outcome: Outcome, format: &Format) -> PgWireResult<Response> {
    match outcome {
        Outcome::Rows {
            columns,
            rows,
            command,
        } => Ok(Response::Query(rows_response(
            &columns, rows, &command, format,
        )?)),
        Outcome::Command { tag } => Ok(Response::Execution(Tag::new(&tag))),
    }
}

#[async_trait]
impl SimpleQueryHandler for ConnectionState {
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        self.start_statement(client);
        if copy::is_copy(&query.query) {
            return self.simple_copy(client, &query.query).await;
        }
        let responses = self.do_query(client, &query.query).await?;
        for response in responses {
            match response {
                Response::Query(results) => send_query_response(client, results, true).await?,
                Response::Execution(tag) => send_execution_response(client, tag).await?,
                Response::Error(error) => {
                    client
                        .feed(PgWireBackendMessage::ErrorResponse((*error).into()))
                        .await?
                }
                _ => {
                    client
                        .feed(PgWireBackendMessage::EmptyQueryResponse(
                            EmptyQueryResponse::new(),
                        ))
                        .await?
                }
            }
        }
        // The session, not the responses, knows the transaction state (an error inside a
        // block leaves it failed; one outside leaves it idle).
        let status = self.status();
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(status);
        send_ready_for_query(client, status).await
    }

    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if query.chars().all(|c| c == ';' || c.is_whitespace()) {
            return Ok(vec![Response::EmptyQuery]);
        }
        let query = query.to_owned();
        let outcomes = self
            .run_statement(client, move |session| session.execute_sql(&query))
            .await;
        self.forget_deallocated(client);
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok(outcome) => outcome_response(outcome, &Format::UnifiedText),
                Err(error) => Ok(Response::Error(Box::new(error_info(&error)))),
            })
            .collect()
    }
}

impl ConnectionState {
    /// COPY in the simple query protocol.
    async fn simple_copy<C>(&self, client: &mut C, sql: &str) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let started = copy::parse_copy(sql)
            .inspect_err(|_| self.with_session(client, Session::note_error))
            .and_then(|statement| self.start_copy(client, &statement));
        match started {
            Ok(CopyStart::In(copy)) => {
                let columns = copy.column_count();
                *self.copy.lock() = Some(*copy);
                client.set_state(PgWireConnectionState::CopyInProgress(false));
                // No ReadyForQuery: the copy-in sub-protocol follows.
                return send_copy_in_response(
                    client,
                    CopyResponse::new(0, columns, stream::empty()),
                )
                .await;
            }
            Ok(CopyStart::Out(columns, records)) => {
                let rows = records.len();
                client
                    .feed(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
                        0,
                        columns as i16,
                        vec![0; columns],
                    )))
                    .await?;
                for record in records {
                    client
                        .feed(PgWireBackendMessage::CopyData(CopyData::new(
                            bytes::Bytes::from(record),
                        )))
                        .await?;
                }
                client
                    .feed(PgWireBackendMessage::CopyDone(CopyDone::new()))
                    .await?;
                let tag = Tag::new("COPY").with_rows(rows);
                client
                    .feed(PgWireBackendMessage::CommandComplete(tag.into()))
                    .await?;
            }
            Err(error) => {
                client
                    .feed(PgWireBackendMessage::ErrorResponse(
                        error_info(&error).into(),
                    ))
                    .await?;
            }
        }
        let status = self.status();
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(status);
        send_ready_for_query(client, status).await
    }
}

#[async_trait]
impl CopyHandler for ConnectionState {
    async fn on_copy_data<C>(&self, client: &mut C, data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(mut copy) = self.copy.lock().take() else {
            return Ok(()); // the COPY failed already; the rest of its data is ignored
        };
        match self.with_session_waiting(client, |session| session.copy_data(&mut copy, &data.data))
        {
            Ok(()) => {
                *self.copy.lock() = Some(copy);
                Ok(())
            }
            Err(failure) => {
                client.set_transaction_status(self.status());
                Err(copy_error(failure))
            }
        }
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(copy) = self.copy.lock().take() else {
            return Err(user_error(SqlError::new(
                sqlstate::PROTOCOL_VIOLATION,
                "CopyDone without a COPY in progress",
            )));
        };
        let result = self.with_session_waiting(client, |session| session.copy_done(copy));
        client.set_transaction_status(self.status());
        let rows = result.map_err(copy_error)?;
        let tag = Tag::new("COPY").with_rows(rows as usize);
        client
            .send(PgWireBackendMessage::CommandComplete(tag.into()))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let error = match self.copy.lock().take() {
            Some(copy) => {
                self.with_session_waiting(client, |session| session.copy_fail(copy, &fail.message))
            }
            None => SqlError::new(
                sqlstate::QUERY_CANCELED,
                format!("COPY from stdin failed: {}", fail.message),
            ),
        };
        client.set_transaction_status(self.status());
        user_error(error)
    }
}

/// A statement of the extended protocol: SQL bound by the session, or a COPY. (Always in
/// an `Arc`, so the size difference of the variants costs nothing.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum ServerStatement {
    Sql(SqlStatement),
    Copy(CopyStatement),
}

/// SQL bound by the session, with its result's RowDescription fields in the two formats
/// clients use, worked out once rather than at every Describe.
#[derive(Debug)]
pub struct SqlStatement {
    prepared: Prepared,
    fields_text: Vec<FieldInfo>,
    fields_binary: Vec<FieldInfo>,
}

impl SqlStatement {
    fn new(prepared: Prepared) -> SqlStatement {
        SqlStatement {
            fields_text: wire::fields(&prepared.columns, &Format::UnifiedText),
            fields_binary: wire::fields(&prepared.columns, &Format::UnifiedBinary),
            prepared,
        }
    }
}

impl ServerStatement {
    fn param_types(&self) -> &[hayate_sql::DataType] {
        match self {
            ServerStatement::Sql(statement) => &statement.prepared.param_types,
            ServerStatement::Copy(_) => &[],
        }
    }

    fn columns(&self) -> &[hayate_sql::OutputColumn] {
        match self {
            ServerStatement::Sql(statement) => &statement.prepared.columns,
            ServerStatement::Copy(_) => &[],
        }
    }

    /// The RowDescription fields of the result in `format`.
    fn fields(&self, format: &Format) -> Cow<'_, [FieldInfo]> {
        match (self, format) {
            (ServerStatement::Sql(statement), Format::UnifiedText) => {
                Cow::Borrowed(&statement.fields_text)
            }
            (ServerStatement::Sql(statement), Format::UnifiedBinary) => {
                Cow::Borrowed(&statement.fields_binary)
            }
            _ => Cow::Owned(wire::fields(self.columns(), format)),
        }
    }
}

/// PostgreSQL's checks of a Bind's format codes: none (text), one for all, or one per
/// parameter and per result column, each 0 (text) or 1 (binary).
fn check_format_codes(bind: &Bind, columns: usize) -> Result<(), SqlError> {
    let codes = bind.parameter_format_codes.len();
    let parameters = bind.parameters.len();
    if codes > 1 && codes != parameters {
        return Err(SqlError::new(
            sqlstate::PROTOCOL_VIOLATION,
            format!("bind message has {codes} parameter formats but {parameters} parameters"),
        ));
    }
    let results = bind.result_column_format_codes.len();
    if results > 1 && results != columns {
        return Err(SqlError::new(
            sqlstate::PROTOCOL_VIOLATION,
            format!("bind message has {results} result formats but query has {columns} columns"),
        ));
    }
    let all = bind.parameter_format_codes.iter();
    match all
        .chain(&bind.result_column_format_codes)
        .find(|code| !matches!(code, 0 | 1))
    {
        Some(code) => Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("unsupported format code: {code}"),
        )),
        None => Ok(()),
    }
}

/// The most rows one Execute returns before PortalSuspended (see `on_execute`).
const FETCH_ROWS_MAX: i32 = 1 << 16;

/// Parses and binds statements of the extended protocol.
pub struct StatementParser {
    state: Arc<ConnectionState>,
}

#[async_trait]
impl QueryParser for StatementParser {
    type Statement = Arc<ServerStatement>;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        if copy::is_copy(sql) {
            // Unknown tables and columns are reported here rather than at Execute, where
            // rust-postgres would already have pipelined its CopyFail and Sync behind it.
            let checked = copy::parse_copy(sql).and_then(|statement| {
                self.state
                    .with_session(client, |session| session.check_copy(&statement))
                    .map(|()| statement)
            });
            return match checked {
                Ok(statement) => Ok(Some(Arc::new(ServerStatement::Copy(statement)))),
                Err(error) => {
                    self.state.with_session(client, Session::note_error);
                    Err(user_error(error))
                }
            };
        }
        let declared: Vec<_> = types
            .iter()
            .map(|t| wire::declared_type(t.as_ref()))
            .collect();
        let prepared = self.state.with_session(client, |session| {
            let result = hayate_sql::parse(sql).and_then(|mut statements| {
                if statements.len() > 1 {
                    return Err(SqlError::syntax(
                        "cannot insert multiple commands into a prepared statement",
                    ));
                }
                let statement = statements
                    .pop()
                    .ok_or_else(|| SqlError::syntax("empty query"))?;
                session.prepare(statement, &declared)
            });
            if result.is_err() {
                session.note_error();
            }
            result
        });
        prepared
            .map(|prepared| Some(Arc::new(ServerStatement::Sql(SqlStatement::new(prepared)))))
            .map_err(user_error)
    }

    fn get_parameter_types(&self, statement: &Self::Statement) -> PgWireResult<Vec<Type>> {
        Ok(statement
            .param_types()
            .iter()
            .map(|t| wire::pg_type(*t))
            .collect())
    }

    fn get_result_schema(
        &self,
        statement: &Self::Statement,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(statement
            .fields(format.unwrap_or(&Format::UnifiedText))
            .into_owned())
    }
}

pub struct ExtendedHandler {
    pub state: Arc<ConnectionState>,
    pub parser: Arc<StatementParser>,
}

impl ExtendedHandler {
    pub fn new(state: Arc<ConnectionState>) -> ExtendedHandler {
        ExtendedHandler {
            parser: Arc::new(StatementParser {
                state: state.clone(),
            }),
            state,
        }
    }
}

/// What running a portal gives: a statement's outcome, or the start of a COPY.
enum PortalRun {
    Outcome(Outcome),
    Copy(Response),
}

impl ExtendedHandler {
    /// Runs a portal's statement with its parameters (`do_query` without the response).
    async fn run_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<Arc<ServerStatement>>,
    ) -> PgWireResult<PortalRun>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Arc<ServerStatement>>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.state.start_statement(client);
        let prepared = match portal.statement.statement.as_ref() {
            ServerStatement::Sql(statement) => &statement.prepared,
            ServerStatement::Copy(statement) => {
                let response = match self
                    .state
                    .start_copy(client, statement)
                    .map_err(user_error)?
                {
                    CopyStart::In(copy) => {
                        let columns = copy.column_count();
                        *self.state.copy.lock() = Some(*copy);
                        Response::CopyIn(CopyResponse::new(0, columns, stream::empty()))
                    }
                    CopyStart::Out(columns, records) => {
                        Response::CopyOut(CopyResponse::new(0, columns, copy_data_stream(records)))
                    }
                };
                return Ok(PortalRun::Copy(response));
            }
        };
        let params = (0..prepared.param_types.len())
            .map(|index| {
                let bytes = portal.parameters.get(index).ok_or_else(|| {
                    SqlError::new(
                        sqlstate::PROTOCOL_VIOLATION,
                        format!(
                            "bind message supplies {} parameters, but prepared statement \
                             requires {}",
                            portal.parameters.len(),
                            prepared.param_types.len()
                        ),
                    )
                })?;
                wire::decode_parameter(
                    bytes.as_deref(),
                    portal.parameter_format.is_binary(index),
                    prepared.param_types[index],
                )
            })
            .collect::<Result<Vec<_>, SqlError>>();
        let outcome = match params {
            Ok(params) => {
                let statement = portal.statement.statement.clone();
                self.state
                    .run_statement(client, move |session| match statement.as_ref() {
                        ServerStatement::Sql(statement) => {
                            session.execute_params(&statement.prepared, &params)
                        }
                        ServerStatement::Copy(_) => {
                            Err(SqlError::new(sqlstate::INTERNAL_ERROR, "COPY runs as COPY"))
                        }
                    })
                    .await
            }
            Err(error) => {
                self.state.with_session(client, Session::note_error);
                Err(error)
            }
        };
        self.state.forget_deallocated(client);
        Ok(PortalRun::Outcome(outcome.map_err(user_error)?))
    }
}

#[async_trait]
impl ExtendedQueryHandler for ExtendedHandler {
    type Statement = Arc<ServerStatement>;
    type QueryParser = StatementParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self.run_portal(client, portal).await? {
            PortalRun::Outcome(outcome) => outcome_response(outcome, &portal.result_column_format),
            PortalRun::Copy(response) => Ok(response),
        }
    }

    /// As pgwire's default, and the session learns the statement's name (DEALLOCATE);
    /// ParseComplete is buffered (`feed`) and leaves with the rest at Sync or Flush.
    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        match StoredStatement::parse(client, &message, self.query_parser()).await? {
            Some(statement) => client.portal_store().put_statement(Arc::new(statement)),
            None => client.portal_store().put_empty_statement(name),
        }
        if name != DEFAULT_NAME {
            self.state.note_statement_name(client, name, true);
        }
        client
            .feed(PgWireBackendMessage::ParseComplete(ParseComplete::new()))
            .await?;
        Ok(())
    }

    /// As pgwire's default, and the session forgets a closed statement's name.
    async fn on_close<C>(&self, client: &mut C, message: Close) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        if message.target_type == TARGET_TYPE_BYTE_STATEMENT {
            client.portal_store().rm_statement(name);
            if name != DEFAULT_NAME {
                self.state.note_statement_name(client, name, false);
            }
        } else {
            client.portal_store().rm_portal(name);
        }
        client
            .send(PgWireBackendMessage::CloseComplete(CloseComplete::new()))
            .await?;
        Ok(())
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = &target.statement;
        let params = prepared
            .param_types()
            .iter()
            .map(|t| wire::pg_type(*t))
            .collect();
        let fields = prepared.fields(&Format::UnifiedText).into_owned();
        Ok(DescribeStatementResponse::new(params, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = &portal.statement.statement;
        Ok(DescribePortalResponse::new(
            prepared.fields(&portal.result_column_format).into_owned(),
        ))
    }

    /// As pgwire's default, but the answer is buffered (`feed`), not flushed: it leaves at
    /// Sync or Flush, one write per query (PostgreSQL buffers the same way).
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        let (params, rows) = match message.target_type {
            b'S' => match client.portal_store().get_statement(name) {
                Some(Entry::Value(statement)) => {
                    let statement = &statement.statement;
                    let params = statement.param_types().iter().map(|t| wire::pg_type(*t));
                    (
                        Some(params.collect::<Vec<_>>()),
                        row_description(&statement.fields(&Format::UnifiedText)),
                    )
                }
                Some(Entry::Empty) => (Some(Vec::new()), row_description(&[])),
                None => return Err(PgWireError::StatementNotFound(name.to_owned())),
            },
            b'P' => match client.portal_store().get_portal(name) {
                Some(Entry::Value(portal)) => (
                    None,
                    row_description(
                        &portal
                            .statement
                            .statement
                            .fields(&portal.result_column_format),
                    ),
                ),
                Some(Entry::Empty) => (None, row_description(&[])),
                None => return Err(PgWireError::PortalNotFound(name.to_owned())),
            },
            other => return Err(PgWireError::InvalidTargetType(other)),
        };
        if let Some(params) = params {
            let oids = params.iter().map(Type::oid).collect();
            client
                .feed(PgWireBackendMessage::ParameterDescription(
                    ParameterDescription::new(oids),
                ))
                .await?;
        }
        Ok(client.feed(rows).await?)
    }

    /// As pgwire's default (`_on_execute`), but every message is buffered (`feed`) and leaves
    /// at Sync or Flush: one write per Bind/Execute/Sync round instead of three. pgwire
    /// reserves room for `max_rows` rows before fetching: a negative count (no limit, like 0)
    /// or a huge one from a hostile client must not become an allocation that aborts the
    /// server, so it is capped (more rows come after PortalSuspended).
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let portal_name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        let max_rows = message.max_rows.clamp(0, FETCH_ROWS_MAX) as usize;
        let portal = match client.portal_store().get_portal(portal_name) {
            Some(Entry::Value(portal)) => portal,
            Some(Entry::Empty) => {
                client
                    .feed(PgWireBackendMessage::EmptyQueryResponse(
                        EmptyQueryResponse::new(),
                    ))
                    .await?;
                client.set_state(PgWireConnectionState::ReadyForQuery);
                return Ok(());
            }
            None => return Err(PgWireError::PortalNotFound(portal_name.to_owned())),
        };
        let state = portal.state();
        let mut execution = state.lock().await;
        let fetch = match *execution {
            PortalExecutionState::Initial => {
                let format = &portal.result_column_format;
                let response = match self.run_portal(client, portal.as_ref()).await? {
                    PortalRun::Outcome(Outcome::Rows {
                        columns,
                        rows,
                        command,
                    }) if max_rows == 0 || rows.len() < max_rows => {
                        // Every row fits this Execute: sent at once, and the portal is done.
                        *execution = PortalExecutionState::Finished;
                        for row in &rows {
                            let row =
                                wire::encode_row(row, &columns, format).map_err(user_error)?;
                            client.feed(PgWireBackendMessage::DataRow(row)).await?;
                        }
                        let done = command_complete(&command, rows.len());
                        client
                            .feed(PgWireBackendMessage::CommandComplete(done))
                            .await?;
                        None
                    }
                    PortalRun::Outcome(outcome) => Some(outcome_response(outcome, format)?),
                    PortalRun::Copy(response) => Some(response),
                };
                match response {
                    None => false, // answered already
                    Some(Response::Query(results)) => {
                        *execution = PortalExecutionState::Suspended(results);
                        true
                    }
                    Some(Response::Execution(tag)) => {
                        send_execution_response(client, tag).await?;
                        false
                    }
                    Some(Response::CopyIn(copy)) => {
                        client.set_state(PgWireConnectionState::CopyInProgress(true));
                        send_copy_in_response(client, copy).await?;
                        false
                    }
                    Some(Response::CopyOut(copy)) => {
                        send_copy_out_response(client, copy).await?;
                        false
                    }
                    Some(_) => {
                        client
                            .feed(PgWireBackendMessage::EmptyQueryResponse(
                                EmptyQueryResponse::new(),
                            ))
                            .await?;
                        false
                    }
                }
            }
            _ => true, // suspended earlier (or finished): the next rows
        };
        drop(execution);
        if fetch {
            let fetched = portal.fetch(max_rows).await?;
            let mut response = fetched.response;
            let command = response.command_tag().to_owned();
            let mut rows = 0;
            while let Some(row) = response.data_rows().next().await {
                client.feed(PgWireBackendMessage::DataRow(row?)).await?;
                rows += 1;
            }
            let done = if fetched.suspended {
                PgWireBackendMessage::PortalSuspended(PortalSuspended::new())
            } else {
                PgWireBackendMessage::CommandComplete(command_complete(&command, rows))
            };
            client.feed(done).await?;
        }
        if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
            client.set_state(PgWireConnectionState::ReadyForQuery);
            client.set_transaction_status(self.state.status());
        }
        Ok(())
    }

    /// As pgwire's default, but BindComplete is buffered (`feed`) instead of flushed: it
    /// leaves with the Execute's response or at Sync, one write per query instead of two.
    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statement_name = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
        let portal_name = message.portal_name.as_deref().unwrap_or(DEFAULT_NAME);
        match client.portal_store().get_statement(statement_name) {
            Some(Entry::Value(statement)) => {
                check_format_codes(&message, statement.statement.columns().len())
                    .map_err(user_error)?;
                let portal = Portal::try_new(&message, statement)?;
                client.portal_store().put_portal(Arc::new(portal));
            }
            Some(Entry::Empty) => {
                if !message.parameters.is_empty() {
                    return Err(user_error(SqlError::new(
                        sqlstate::PROTOCOL_VIOLATION,
                        format!(
                            "bind message supplies {} parameters, but prepared statement \
                             requires 0",
                            message.parameters.len()
                        ),
                    )));
                }
                client.portal_store().put_empty_portal(portal_name);
            }
            None => return Err(PgWireError::StatementNotFound(statement_name.to_owned())),
        }
        client
            .feed(PgWireBackendMessage::BindComplete(BindComplete::new()))
            .await?;
        Ok(())
    }

    async fn on_sync<C>(&self, client: &mut C, _message: PgSync) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        client.portal_store().rm_portal(DEFAULT_NAME);
        let status = self.state.status();
        client.set_transaction_status(status);
        client
            .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
                status,
            )))
            .await?;
        client.flush().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_tags_carry_the_row_count() {
        assert_eq!(command_complete("SELECT", 1).tag, "SELECT 1");
        assert_eq!(command_complete("SELECT", 0).tag, "SELECT 0");
        assert_eq!(
            command_complete("INSERT 0", 1234567).tag,
            "INSERT 0 1234567"
        );
        assert_eq!(command_complete("", 0).tag, " 0");
        let max = command_complete("SELECT", usize::MAX).tag;
        assert_eq!(max, format!("SELECT {}", usize::MAX));
    }
}

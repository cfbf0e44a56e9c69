//! The state and query handlers of one connection, on top of a `hayate_sql::Session`: simple
//! query and COPY (pgwire's handler traits), and how a statement runs (waits deferred, its
//! commit awaited), which the extended protocol (`crate::extended`) uses too.
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
//! statement must not block the loop's thread:
//! 1. The statement runs on a fiber of the loop (`crate::fiber_task`): a page miss, a row or
//!    table lock held by another transaction, a row whose newer version is not published
//!    yet, suspend the fiber and the loop serves its other connections meanwhile.
//! 2. A commit it started (`Session::take_pending_commit`; sessions defer commits,
//!    `Session::set_defer_commits`) is awaited on the engine's log flusher
//!    (`crate::commit_wait`, one waiter per loop) and finished before the statement is
//!    answered: the commit is acknowledged only once durable, and the loop serves other
//!    connections during the fdatasync.
//!
//! COPY's messages run on fibers the same way. See docs/design.md, "The server".

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{stream, Sink, SinkExt};
use hayate_sql::copy::{self, CopyDirection, CopyFailure, CopyIn, CopyStatement};
use hayate_sql::interrupt::{self, Interrupt};
use hayate_sql::types::zone::SessionZone;
use hayate_sql::{sqlstate, Outcome, Session, SqlError, SqlResult, TransactionStatus};
use parking_lot::Mutex;
use pgwire::api::copy::{send_copy_in_response, CopyHandler};
use pgwire::api::portal::Format;
use pgwire::api::query::{
    send_execution_response, send_query_response, send_ready_for_query, SimpleQueryHandler,
};
use pgwire::api::results::{CopyResponse, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::data::{NoData, RowDescription};
use pgwire::messages::response::{EmptyQueryResponse, TransactionStatus as Wire};
use pgwire::messages::simplequery::Query;
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;

use crate::databases::Databases;
use crate::{wire, ServerConfig};

/// The session of one connection, created once it authenticated (`attach`: the user and
/// database names come from the startup message).
pub struct ConnectionState {
    databases: Arc<Databases>,
    config: Arc<ServerConfig>,
    session: Mutex<Option<Session>>,
    interrupt: Interrupt,
    /// The COPY FROM STDIN in progress, between CopyData messages.
    copy: Mutex<Option<CopyIn>>,
    /// Notified to end the connection (`CancelRegistry::terminate_database`).
    terminate: Arc<tokio::sync::Notify>,
    /// The session's time zone (`Session::zone`), made current around its statements'
    /// fibers and the encoding of their rows.
    zone: Mutex<SessionZone>,
    /// The reported settings' values the client was last told (`Session::reported_settings`).
    reported: Mutex<Vec<(&'static str, String)>>,
}

/// What a COPY statement starts.
pub(crate) enum CopyStart {
    In(Box<CopyIn>),
    Out(usize, Vec<Vec<u8>>),
}

impl ConnectionState {
    /// The server's TLS configuration, if it offers TLS.
    pub(crate) fn tls(&self) -> Option<&crate::tls::TlsConfig> {
        self.config.tls.as_ref()
    }

    pub fn new(databases: Arc<Databases>, config: Arc<ServerConfig>) -> Arc<ConnectionState> {
        Arc::new(ConnectionState {
            databases,
            config,
            session: Mutex::new(None),
            interrupt: Interrupt::new(),
            copy: Mutex::new(None),
            terminate: Arc::new(tokio::sync::Notify::new()),
            zone: Mutex::new(SessionZone::default()),
            reported: Mutex::new(Vec::new()),
        })
    }

    /// Notified when the connection must end (FATAL 57P01).
    pub(crate) fn terminate_signal(&self) -> &Arc<tokio::sync::Notify> {
        &self.terminate
    }

    /// Starts the connection's session on the database it named: FATAL 3D000 if there is
    /// none (or DROP DATABASE is taking it).
    /// Starts the connection's session; `parameters` are the client's startup parameters
    /// (TimeZone, application_name, and `-c name=value` in options apply; a TimeZone that is
    /// no zone is 22023).
    pub(crate) fn attach(
        &self,
        user: &str,
        database: &str,
        pid: i32,
        parameters: &[(String, String)],
        peer: &crate::Peer,
    ) -> SqlResult<()> {
        let catalog = self.databases.catalog(database)?;
        let mut session = Session::new(catalog.clone(), user);
        if catalog.is_dropped() {
            return Err(SqlError::new(
                sqlstate::INVALID_CATALOG_NAME,
                format!("database \"{database}\" does not exist"),
            ));
        }
        session.set_setting("work_mem", &self.config.work_mem)?;
        session.set_setting("max_connections", &self.config.max_connections.to_string())?;
        for (name, value) in startup_settings(parameters) {
            session.set_client_setting(&name, &value)?;
        }
        session.set_backend_pid(pid);
        if let crate::Peer::Tcp(address) = peer {
            session.set_client_address(address.ip().to_string(), address.port().into());
        }
        session.set_defer_commits(true);
        *self.zone.lock() = session.zone();
        *self.reported.lock() = session.reported_settings().to_vec();
        *self.session.lock() = Some(session);
        Ok(())
    }

    /// The session's time zone handle.
    pub(crate) fn zone(&self) -> SessionZone {
        self.zone.lock().clone()
    }

    /// The flag a cancel request for this connection sets.
    pub fn interrupt(&self) -> &Interrupt {
        &self.interrupt
    }

    /// A new statement starts: an earlier cancel no longer applies, and a COPY the client
    /// left (by sending a query in its middle) is aborted.
    pub(crate) async fn start_statement<C: ClientInfo>(&self, client: &C) {
        self.interrupt.clear();
        let copy = self.copy.lock().take();
        if let Some(copy) = copy {
            self.on_fiber(client, |session| {
                session.copy_fail(copy, "the client sent a new statement")
            })
            .await;
        }
    }

    /// Starts a COPY statement on the session.
    pub(crate) async fn start_copy<C: ClientInfo>(
        &self,
        client: &C,
        statement: &CopyStatement,
    ) -> SqlResult<CopyStart> {
        self.on_fiber(client, |session| match statement.direction {
            CopyDirection::FromStdin => session
                .copy_in(statement)
                .map(|copy| CopyStart::In(Box::new(copy))),
            CopyDirection::ToStdout => session
                .copy_out(statement)
                .map(|(columns, records)| CopyStart::Out(columns, records)),
        })
        .await
    }

    /// Runs a statement's `work` on the session on a fiber of this loop (see the module doc),
    /// then awaits and finishes the commit it started (a failure there becomes the result).
    pub(crate) async fn run_statement<C, T, W>(&self, client: &C, work: W) -> T
    where
        C: ClientInfo,
        T: StatementResult,
        W: FnOnce(&mut Session) -> T,
    {
        let (mut result, pending) = self
            .on_fiber(client, |session| {
                let result = work(session);
                (result, session.take_pending_commit())
            })
            .await;
        if let Some(pending) = pending {
            let durable =
                crate::commit_wait::durable(self.databases.database(), pending.lsn()).await;
            // Publishing waits for every earlier commit to be published, and an earlier one
            // may belong to a fiber of this loop suspended in the middle of its apply step:
            // the wait must suspend, not block the loop.
            let finished = match durable {
                Ok(()) => {
                    crate::fiber_task::run(&self.interrupt, &self.zone(), || pending.finish()).await
                }
                Err(error) => Err(error),
            };
            if let Err(error) = finished {
                result.fail(error.into());
            }
        }
        result
    }

    /// Runs `work` on the session on a fiber of this loop: what it waits for suspends it, not
    /// the loop (`crate::fiber_task`).
    pub(crate) async fn on_fiber<C: ClientInfo, T>(
        &self,
        client: &C,
        work: impl FnOnce(&mut Session) -> T,
    ) -> T {
        crate::fiber_task::run(&self.interrupt, &self.zone(), || {
            self.session_do(client, work)
        })
        .await
    }

    /// Runs `work` on the session on this thread, for what never waits (bookkeeping of
    /// statement names, noting an error).
    pub(crate) fn with_session<C: ClientInfo, T>(
        &self,
        client: &C,
        work: impl FnOnce(&mut Session) -> T,
    ) -> T {
        let _interruptible = interrupt::enter(&self.interrupt);
        self.session_do(client, work)
    }

    /// Runs `work` on the session (`attach` made it before the first statement).
    fn session_do<C: ClientInfo, T>(&self, _client: &C, work: impl FnOnce(&mut Session) -> T) -> T {
        let mut session = self.session.lock();
        let session = session
            .as_mut()
            .expect("statements come only after the startup attached the session");
        work(session)
    }

    /// The names of the statements a DEALLOCATE dropped since the last call (the
    /// protocol's statements share PostgreSQL's namespace with PREPARE's).
    pub(crate) fn take_deallocated(&self) -> Vec<String> {
        self.session
            .lock()
            .as_mut()
            .map(Session::take_deallocated)
            .unwrap_or_default()
    }

    /// The COPY FROM STDIN an Execute started, receiving the CopyData that follows.
    pub(crate) fn set_copy(&self, copy: CopyIn) {
        *self.copy.lock() = Some(copy);
    }

    /// Tells the session a named protocol-level statement exists (Parse) or is gone (Close).
    pub(crate) fn note_statement_name<C: ClientInfo>(&self, client: &C, name: &str, parsed: bool) {
        self.with_session(client, |session| {
            if parsed {
                session.protocol_statement_parsed(name)
            } else {
                session.protocol_statement_closed(name)
            }
        });
    }

    /// A reported setting's value as the client is (or, at startup, is about to be) told.
    pub(crate) fn reported(&self, name: &str) -> String {
        self.reported
            .lock()
            .iter()
            .find(|(known, _)| *known == name)
            .map_or_else(String::new, |(_, value)| value.clone())
    }

    /// The reported settings (TimeZone, application_name) whose values changed since the
    /// client was last told, now noted as told: sent as ParameterStatus before ReadyForQuery.
    pub(crate) fn changed_parameters(&self) -> Vec<(&'static str, String)> {
        let Some(current) = self.session.lock().as_ref().map(Session::reported_settings) else {
            return Vec::new();
        };
        let mut reported = self.reported.lock();
        let changed: Vec<(&'static str, String)> = current
            .into_iter()
            .filter(|setting| !reported.contains(setting))
            .collect();
        for (name, value) in &changed {
            match reported.iter_mut().find(|(known, _)| known == name) {
                Some(entry) => entry.1 = value.clone(),
                None => reported.push((name, value.clone())),
            }
        }
        changed
    }

    /// Feeds a ParameterStatus for each reported setting that changed (PostgreSQL sends them
    /// just before ReadyForQuery).
    async fn report_changed<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: Sink<PgWireBackendMessage> + Unpin + Send,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        for (name, value) in self.changed_parameters() {
            client
                .feed(PgWireBackendMessage::ParameterStatus(ParameterStatus::new(
                    name.to_string(),
                    value,
                )))
                .await?;
        }
        Ok(())
    }

    /// The transaction status for ReadyForQuery (never blocks: no statement runs then).
    pub(crate) fn status(&self) -> Wire {
        match self.session.lock().as_ref().map(Session::status) {
            None | Some(TransactionStatus::Idle) => Wire::Idle,
            Some(TransactionStatus::InBlock) => Wire::Transaction,
            Some(TransactionStatus::Failed) => Wire::Error,
        }
    }
}

/// What `run_statement` needs of a statement's result.
pub(crate) trait StatementResult {
    /// Its commit failed: the statement fails.
    fn fail(&mut self, error: SqlError);
}

impl<T> StatementResult for SqlResult<T> {
    fn fail(&mut self, error: SqlError) {
        *self = Err(error);
    }
}

/// The outcomes of a query string (`Session::execute_sql`): only a single statement leaves a
/// pending commit (a string of several commits each statement itself).
impl StatementResult for Vec<SqlResult<Outcome>> {
    fn fail(&mut self, error: SqlError) {
        match self.last_mut() {
            Some(last) => *last = Err(error),
            None => self.push(Err(error)),
        }
    }
}

/// A query string's outcomes with the zone each statement left (`take_statement_zones`).
struct Outcomes {
    outcomes: Vec<SqlResult<Outcome>>,
    zones: Vec<std::sync::Arc<hayate_sql::types::zone::Zone>>,
}

impl StatementResult for Outcomes {
    fn fail(&mut self, error: SqlError) {
        self.outcomes.fail(error);
    }
}

/// Logs a failed statement with its SQLSTATE and text, as PostgreSQL's default
/// `log_min_error_statement = error` does.
pub(crate) fn log_failed(error: &SqlError, statement: &str) {
    log::error!(
        target: "hayate::statement",
        "ERROR {}: {}; STATEMENT: {}",
        error.code,
        error.message,
        statement.trim()
    );
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

pub(crate) fn user_error(error: SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(&error)))
}

/// A COPY error, with its CONTEXT (the line it happened on).
fn copy_error(failure: CopyFailure) -> PgWireError {
    let mut info = error_info(&failure.error);
    info.where_context = failure.context;
    PgWireError::UserError(Box::new(info))
}

pub(crate) fn copy_data_stream(
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

/// The answer to a Describe for a result with `fields`: RowDescription, or NoData.
pub(crate) fn row_description(fields: &[FieldInfo]) -> PgWireBackendMessage {
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
        self.start_statement(client).await;
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
        self.report_changed(client).await?;
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
        let owned = query.to_owned();
        let Outcomes { outcomes, zones } = self
            .run_statement(client, move |session| Outcomes {
                outcomes: session.execute_sql(&owned),
                zones: session.take_statement_zones(),
            })
            .await;
        outcomes
            .into_iter()
            .enumerate()
            .map(|(position, outcome)| match outcome {
                Ok(outcome) => {
                    // Each statement's rows in the zone its statement left.
                    let _zone = match zones.get(position) {
                        Some(zone) => hayate_sql::types::zone::enter(zone.clone()),
                        None => self.zone().enter(),
                    };
                    outcome_response(outcome, &Format::UnifiedText)
                }
                Err(error) => {
                    log_failed(&error, query);
                    Ok(Response::Error(Box::new(error_info(&error))))
                }
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
        let started = match copy::parse_copy(sql) {
            Ok(statement) => self.start_copy(client, &statement).await,
            Err(error) => {
                self.with_session(client, Session::note_error);
                Err(error)
            }
        };
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
                log_failed(&error, sql);
                client
                    .feed(PgWireBackendMessage::ErrorResponse(
                        error_info(&error).into(),
                    ))
                    .await?;
            }
        }
        self.report_changed(client).await?;
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
        let copied = self
            .on_fiber(client, |session| session.copy_data(&mut copy, &data.data))
            .await;
        match copied {
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
        let result = self
            .on_fiber(client, |session| session.copy_done(copy))
            .await;
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
        let copy = self.copy.lock().take();
        let error = match copy {
            Some(copy) => {
                self.on_fiber(client, |session| session.copy_fail(copy, &fail.message))
                    .await
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

/// The settings a client's startup parameters give: TimeZone (any case), application_name,
/// and `-c name=value` / `--name=value` in options.
fn startup_settings(parameters: &[(String, String)]) -> Vec<(String, String)> {
    let mut settings = Vec::new();
    for (name, value) in parameters {
        match name.to_ascii_lowercase().as_str() {
            "timezone" | "application_name" => {
                settings.push((name.to_ascii_lowercase(), value.clone()))
            }
            "options" => {
                let mut words = value.split_whitespace();
                while let Some(word) = words.next() {
                    let pair = match word {
                        "-c" => words.next(),
                        word => word.strip_prefix("-c").or(word.strip_prefix("--")),
                    };
                    if let Some((name, value)) = pair.and_then(|pair| pair.split_once('=')) {
                        settings.push((name.to_ascii_lowercase().replace('-', "_"), value.into()));
                    }
                }
            }
            _ => {}
        }
    }
    settings
}

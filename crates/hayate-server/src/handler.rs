//! The query handlers of one connection: simple query and extended query (parse, bind,
//! describe, execute, sync), on top of a `hayate_sql::Session`.
//!
//! Engine calls block (a commit waits for fdatasync), so statements run inside
//! `tokio::task::block_in_place`: the connection's task keeps its thread while the runtime
//! moves its other tasks to another worker (see docs/design.md, "The server").

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{stream, Sink, SinkExt};
use hayate_sql::{sqlstate, Catalog, Outcome, Prepared, Session, SqlError, TransactionStatus};
use parking_lot::Mutex;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{
    send_execution_response, send_query_response, send_ready_for_query, ExtendedQueryHandler,
    SimpleQueryHandler,
};
use pgwire::api::results::{
    DescribePortalResponse, DescribeStatementResponse, FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, PgWireConnectionState, Type, DEFAULT_NAME, METADATA_DATABASE,
    METADATA_USER,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::extendedquery::{Bind, BindComplete, Sync as PgSync};
use pgwire::messages::response::{EmptyQueryResponse, ReadyForQuery, TransactionStatus as Wire};
use pgwire::messages::simplequery::Query;
use pgwire::messages::PgWireBackendMessage;

use crate::wire;

/// The session of one connection, created when its first statement arrives (the user and
/// database names come from the startup message).
pub struct ConnectionState {
    catalog: Arc<Catalog>,
    session: Mutex<Option<Session>>,
}

impl ConnectionState {
    pub fn new(catalog: Arc<Catalog>) -> ConnectionState {
        ConnectionState {
            catalog,
            session: Mutex::new(None),
        }
    }

    /// Runs `work` on the session, off the async runtime's scheduling (it may block).
    fn with_session<C: ClientInfo, T>(
        &self,
        client: &C,
        work: impl FnOnce(&mut Session) -> T,
    ) -> T {
        tokio::task::block_in_place(|| {
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
                Session::new(self.catalog.clone(), user, database)
            });
            work(session)
        })
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

fn rows_response(
    columns: &[hayate_sql::OutputColumn],
    rows: Vec<Vec<hayate_sql::Value>>,
    command: &str,
    format: &Format,
) -> PgWireResult<QueryResponse> {
    let fields: Arc<Vec<FieldInfo>> = Arc::new(wire::fields(columns, format));
    let encoded: Vec<PgWireResult<_>> = rows
        .iter()
        .map(|row| wire::encode_row(row, columns, &fields).map_err(user_error))
        .collect();
    let mut response = QueryResponse::new(fields, stream::iter(encoded));
    response.set_command_tag(command);
    Ok(response)
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
        let outcomes = self.with_session(client, |session| session.execute_sql(query));
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Ok(outcome) => outcome_response(outcome, &Format::UnifiedText),
                Err(error) => Ok(Response::Error(Box::new(error_info(&error)))),
            })
            .collect()
    }
}

/// Parses and binds statements of the extended protocol.
pub struct StatementParser {
    state: Arc<ConnectionState>,
}

#[async_trait]
impl QueryParser for StatementParser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
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
            .map(|prepared| Some(Arc::new(prepared)))
            .map_err(user_error)
    }

    fn get_parameter_types(&self, statement: &Self::Statement) -> PgWireResult<Vec<Type>> {
        Ok(statement
            .param_types
            .iter()
            .map(|t| wire::pg_type(*t))
            .collect())
    }

    fn get_result_schema(
        &self,
        statement: &Self::Statement,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(wire::fields(
            &statement.columns,
            format.unwrap_or(&Format::UnifiedText),
        ))
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

#[async_trait]
impl ExtendedQueryHandler for ExtendedHandler {
    type Statement = Arc<Prepared>;
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
        let prepared = &portal.statement.statement;
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
        let outcome = self.state.with_session(client, |session| match params {
            Ok(params) => session.execute(prepared, params),
            Err(error) => {
                session.note_error();
                Err(error)
            }
        });
        outcome_response(outcome.map_err(user_error)?, &portal.result_column_format)
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
            .param_types
            .iter()
            .map(|t| wire::pg_type(*t))
            .collect();
        let fields = wire::fields(&prepared.columns, &Format::UnifiedText);
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
        Ok(DescribePortalResponse::new(wire::fields(
            &prepared.columns,
            &portal.result_column_format,
        )))
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

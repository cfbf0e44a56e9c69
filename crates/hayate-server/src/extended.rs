//! The extended query protocol: Parse, Bind, Describe, Execute, Close, Sync and Flush,
//! read straight from the message frames (`connection` hands each frame's body here).
//!
//! Why not pgwire's handlers: a point select is one Bind, Describe, Execute and Sync, and
//! pgwire's decoding and portal machinery cost more instructions than running the query
//! (every name a String through a lossy UTF-8 pass, the parameters and format codes in new
//! vectors, a portal with its own async mutex, each answer a message enum encoded later).
//! Here a message is read in place, parameters are decoded once at Bind (where PostgreSQL
//! reports their errors), and answers are written straight into the connection's output
//! buffer; a prepared statement keeps its RowDescription encoded.
//!
//! Lifecycle of a statement and its portals, as in PostgreSQL:
//! 1. Parse binds the SQL on the session and stores the statement under its name (the
//!    unnamed one is replaced by the next Parse).
//! 2. Bind checks the format codes, decodes the parameters and makes a portal.
//! 3. Execute runs the portal (`ConnectionState::run_statement`: waits deferred, a commit
//!    awaited on the log) and sends its rows; with a row limit the rest stay in the portal
//!    for the next Execute (PortalSuspended).
//! 4. Sync drops the unnamed portal and answers ReadyForQuery: the buffered answers leave in
//!    one write. Close drops a statement or portal; Flush sends what is buffered.
//!
//! An error answers ErrorResponse and the connection skips messages until Sync (the loop
//! does this, with pgwire's `process_error`). COPY started by Execute hands over to the copy
//! sub-protocol (pgwire's CopyIn/CopyOut responses and our `CopyHandler`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures::{stream, SinkExt};
use hayate_sql::copy::{self, CopyStatement};
use hayate_sql::{sqlstate, Outcome, OutputColumn, Prepared, Session, SqlError, SqlResult, Value};
use pgwire::api::copy::{send_copy_in_response, send_copy_out_response};
use pgwire::api::portal::Format;
use pgwire::api::results::{CopyResponse, FieldInfo};
use pgwire::api::{ClientInfo, PgWireConnectionState, Type};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::data::ParameterDescription;
use pgwire::messages::response::TransactionStatus as Wire;
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::{Message, PgWireBackendMessage};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::Framed;

use crate::handler::{
    copy_data_stream, log_failed, row_description, user_error, ConnectionState, CopyStart,
};
use crate::wire;

/// The name of the unnamed statement and portal.
const UNNAMED: &str = "";
/// Output buffered past this is written out before more rows are encoded.
const OUTPUT_FLUSH_BYTES: usize = 64 * 1024;

/// A statement of the extended protocol: SQL bound by the session, a COPY, or an empty
/// query string. (Always in an `Arc`, so the size difference of the variants costs
/// nothing.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum ServerStatement {
    Sql(SqlStatement),
    Copy(CopyStatement),
    /// A statement the session runs from its text only (ALTER SEQUENCE: no parameters, no
    /// rows), run at Execute as a query of its own.
    Text(String),
    Empty,
}

/// SQL bound by the session, with its RowDescription (or NoData) encoded once for each of
/// the two result formats clients use.
#[derive(Debug)]
pub(crate) struct SqlStatement {
    prepared: Prepared,
    description_text: Bytes,
    description_binary: Bytes,
}

impl SqlStatement {
    fn new(prepared: Prepared) -> SqlStatement {
        let encode = |format| encoded(row_description(&wire::fields(&prepared.columns, &format)));
        SqlStatement {
            description_text: encode(Format::UnifiedText),
            description_binary: encode(Format::UnifiedBinary),
            prepared,
        }
    }
}

impl ServerStatement {
    fn param_types(&self) -> &[hayate_sql::DataType] {
        match self {
            ServerStatement::Sql(statement) => &statement.prepared.param_types,
            ServerStatement::Copy(_) | ServerStatement::Text(_) | ServerStatement::Empty => &[],
        }
    }

    fn columns(&self) -> &[OutputColumn] {
        match self {
            ServerStatement::Sql(statement) => &statement.prepared.columns,
            ServerStatement::Copy(_) | ServerStatement::Text(_) | ServerStatement::Empty => &[],
        }
    }

    /// The encoded RowDescription (or NoData) of the result in `format`.
    fn description(&self, format: &Format) -> Cow<'_, [u8]> {
        match (self, format) {
            (ServerStatement::Sql(statement), Format::UnifiedText) => {
                Cow::Borrowed(&statement.description_text)
            }
            (ServerStatement::Sql(statement), Format::UnifiedBinary) => {
                Cow::Borrowed(&statement.description_binary)
            }
            _ => Cow::Owned(encoded(row_description(&fields(self, format))).to_vec()),
        }
    }
}

fn fields(statement: &ServerStatement, format: &Format) -> Vec<FieldInfo> {
    wire::fields(statement.columns(), format)
}

/// A backend message as bytes.
fn encoded(message: PgWireBackendMessage) -> Bytes {
    let mut bytes = BytesMut::new();
    message
        .encode(&mut bytes)
        .expect("a RowDescription or NoData encodes");
    bytes.freeze()
}

/// A statement bound to its parameters, and how far it has run.
struct Portal {
    statement: Arc<ServerStatement>,
    params: Vec<Value>,
    /// The result columns' formats.
    format: Format,
    run: PortalRun,
}

enum PortalRun {
    NotStarted,
    /// Rows left for the next Execute.
    Suspended {
        columns: Vec<OutputColumn>,
        rows: std::vec::IntoIter<Vec<Value>>,
        command: String,
    },
    /// Finished: another Execute answers this CommandComplete tag again (none for a COPY,
    /// which answered in its own sub-protocol).
    Done {
        tag: String,
    },
}

/// Names to statements or portals (foldhash: the names come from the connection's own
/// client, and SipHash cost more than the rest of a Bind).
type Named<T> = HashMap<String, T, foldhash::fast::RandomState>;

/// The protocol-level statements and portals of one connection.
pub(crate) struct Protocol {
    state: Arc<ConnectionState>,
    statements: Named<Arc<ServerStatement>>,
    /// The unnamed portal, which nearly every query uses, apart from the named ones.
    unnamed: Option<Portal>,
    portals: Named<Portal>,
}

/// The connection as the protocol writes to it.
pub(crate) type Client<S> = Framed<S, pgwire::tokio::server::PgWireMessageServerCodec<String>>;

impl Protocol {
    pub(crate) fn new(state: Arc<ConnectionState>) -> Protocol {
        Protocol {
            state,
            statements: Named::default(),
            unnamed: None,
            portals: Named::default(),
        }
    }

    /// Handles one extended-protocol message: `kind` is its type byte, `body` what follows
    /// the length.
    pub(crate) async fn handle<S>(
        &mut self,
        client: &mut Client<S>,
        kind: u8,
        body: &[u8],
    ) -> PgWireResult<()>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
    {
        let mut fields = Fields { bytes: body };
        match kind {
            b'P' => self.parse(client, &mut fields),
            b'B' => self.bind(client, &mut fields),
            b'D' => self.describe(client, &mut fields).await,
            b'E' => self.execute(client, &mut fields).await,
            b'C' => self.close(client, &mut fields),
            b'S' => {
                fields.end()?;
                self.sync(client).await
            }
            b'H' => {
                fields.end()?;
                Ok(SinkExt::<PgWireBackendMessage>::flush(client).await?)
            }
            other => Err(PgWireError::InvalidMessageType(other)),
        }
    }

    /// Whether `kind` is a message this protocol handles.
    pub(crate) fn handles(kind: u8) -> bool {
        matches!(kind, b'P' | b'B' | b'D' | b'E' | b'C' | b'S' | b'H')
    }

    /// Sync: ends the extended query's messages with ReadyForQuery, and sends.
    pub(crate) async fn sync<S>(&mut self, client: &mut Client<S>) -> PgWireResult<()>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
    {
        self.unnamed = None;
        let status = self.state.status();
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(status);
        let out = client.write_buffer_mut();
        for (name, value) in self.state.changed_parameters() {
            ParameterStatus::new(name.to_string(), value).encode(out)?;
        }
        out.put_u8(b'Z');
        out.put_i32(5);
        out.put_u8(match status {
            Wire::Idle => b'I',
            Wire::Transaction => b'T',
            Wire::Error => b'E',
        });
        Ok(SinkExt::<PgWireBackendMessage>::flush(client).await?)
    }

    /// Drops the statements a DEALLOCATE removed (PREPARE and Parse share PostgreSQL's
    /// namespace).
    pub(crate) fn forget_deallocated(&mut self) {
        for name in self.state.take_deallocated() {
            self.statements.remove(&name);
        }
    }

    fn parse<S: 'static>(
        &mut self,
        client: &mut Client<S>,
        fields: &mut Fields,
    ) -> PgWireResult<()> {
        let name = fields.str()?;
        let sql = fields.str()?;
        let count = fields.u16()?;
        let mut declared = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let oid = fields.i32()? as u32;
            declared.push(wire::declared_type(Type::from_oid(oid).as_ref()));
        }
        fields.end()?;
        let statement = if sql.chars().all(|c| c == ';' || c.is_whitespace()) {
            ServerStatement::Empty
        } else {
            self.prepare(client, sql, &declared).map_err(|error| {
                log_failed(&error, sql);
                user_error(error)
            })?
        };
        self.statements.insert(name.to_owned(), Arc::new(statement));
        if name != UNNAMED {
            self.state.note_statement_name(client, name, true);
        }
        put_empty_message(client.write_buffer_mut(), b'1'); // ParseComplete
        Ok(())
    }

    /// Binds `sql` on the session (a COPY is checked and kept as such). An error marks a
    /// transaction block failed.
    fn prepare<S: 'static>(
        &self,
        client: &Client<S>,
        sql: &str,
        declared: &[hayate_sql::DataType],
    ) -> SqlResult<ServerStatement> {
        self.state.with_session(client, |session| {
            let result = if hayate_sql::is_alter_sequence(sql) {
                Ok(ServerStatement::Text(sql.to_string()))
            } else if copy::is_copy(sql) {
                // Unknown tables and columns are reported here rather than at Execute, where
                // rust-postgres would already have pipelined its CopyFail and Sync behind it.
                copy::parse_copy(sql).and_then(|statement| {
                    session.check_copy(&statement)?;
                    Ok(ServerStatement::Copy(statement))
                })
            } else {
                hayate_sql::parse(sql).and_then(|mut statements| {
                    if statements.len() > 1 {
                        return Err(SqlError::syntax(
                            "cannot insert multiple commands into a prepared statement",
                        ));
                    }
                    let statement = statements
                        .pop()
                        .ok_or_else(|| SqlError::syntax("empty query"))?;
                    let prepared = session.prepare(statement, declared)?.with_text(sql);
                    Ok(ServerStatement::Sql(SqlStatement::new(prepared)))
                })
            };
            if result.is_err() {
                session.note_error();
            }
            result
        })
    }

    fn bind<S: 'static>(
        &mut self,
        client: &mut Client<S>,
        fields: &mut Fields,
    ) -> PgWireResult<()> {
        let portal_name = fields.str()?;
        let statement_name = fields.str()?;
        let parameter_formats = fields.codes()?;
        let count = fields.u16()? as usize;
        let mut parameters = Vec::with_capacity(count);
        for _ in 0..count {
            let length = fields.i32()?;
            parameters.push(match length {
                -1 => None,
                length if length < 0 => {
                    return Err(protocol_violation(format!(
                        "invalid parameter length {length}"
                    )))
                }
                length => Some(fields.take(length as usize)?),
            });
        }
        let result_formats = fields.codes()?;
        fields.end()?;
        let statement = self
            .statements
            .get(statement_name)
            .cloned()
            .ok_or_else(|| {
                user_error(SqlError::new(
                    sqlstate::INVALID_SQL_STATEMENT_NAME,
                    format!("prepared statement \"{statement_name}\" does not exist"),
                ))
            })?;
        let types = statement.param_types();
        let checked = check_format_codes(
            parameter_formats.len(),
            parameters.len(),
            result_formats.len(),
            statement.columns().len(),
            parameter_formats.iter().chain(result_formats.iter()),
        )
        .and_then(|()| {
            if parameters.len() != types.len() {
                return Err(protocol_violation_sql(format!(
                    "bind message supplies {} parameters, but prepared statement \
                     \"{statement_name}\" requires {}",
                    parameters.len(),
                    types.len()
                )));
            }
            // Text parameters are read in the session's zone (a timestamptz without offset).
            let _zone = self.state.zone().enter();
            parameters
                .iter()
                .zip(types)
                .enumerate()
                .map(|(index, (bytes, data_type))| {
                    let binary = match parameter_formats.len() {
                        0 => false,
                        1 => parameter_formats.get(0) == 1,
                        _ => parameter_formats.get(index) == 1,
                    };
                    wire::decode_parameter(*bytes, binary, *data_type)
                })
                .collect::<SqlResult<Vec<Value>>>()
        });
        let params = match checked {
            Ok(params) => params,
            Err(error) => {
                self.state.with_session(client, Session::note_error);
                return Err(user_error(error));
            }
        };
        let format = match result_formats.len() {
            0 => Format::UnifiedText,
            1 => Format::from(result_formats.get(0)),
            _ => Format::Individual(result_formats.iter().collect()),
        };
        let portal = Portal {
            statement,
            params,
            format,
            run: PortalRun::NotStarted,
        };
        if portal_name == UNNAMED {
            self.unnamed = Some(portal);
        } else {
            self.portals.insert(portal_name.to_owned(), portal);
        }
        put_empty_message(client.write_buffer_mut(), b'2'); // BindComplete
        Ok(())
    }

    async fn describe<S>(
        &mut self,
        client: &mut Client<S>,
        fields: &mut Fields<'_>,
    ) -> PgWireResult<()>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
    {
        let target = fields.u8()?;
        let name = fields.str()?;
        fields.end()?;
        match target {
            b'S' => {
                let statement = self.statement(name)?.clone();
                let oids = statement
                    .param_types()
                    .iter()
                    .map(|t| wire::pg_type(*t).oid());
                client
                    .feed(PgWireBackendMessage::ParameterDescription(
                        ParameterDescription::new(oids.collect()),
                    ))
                    .await?;
                let description = statement.description(&Format::UnifiedText);
                client.write_buffer_mut().put_slice(&description);
            }
            b'P' => {
                let portal = self.portal(name)?;
                let description = portal.statement.description(&portal.format);
                client.write_buffer_mut().put_slice(&description);
            }
            other => {
                return Err(protocol_violation(format!(
                    "invalid DESCRIBE message subtype {other}"
                )))
            }
        }
        Ok(())
    }

    fn statement(&self, name: &str) -> PgWireResult<&Arc<ServerStatement>> {
        self.statements.get(name).ok_or_else(|| {
            user_error(SqlError::new(
                sqlstate::INVALID_SQL_STATEMENT_NAME,
                format!("prepared statement \"{name}\" does not exist"),
            ))
        })
    }

    fn portal(&mut self, name: &str) -> PgWireResult<&mut Portal> {
        let portal = match name {
            UNNAMED => self.unnamed.as_mut(),
            _ => self.portals.get_mut(name),
        };
        portal.ok_or_else(|| {
            user_error(SqlError::new(
                sqlstate::INVALID_CURSOR_NAME,
                format!("portal \"{name}\" does not exist"),
            ))
        })
    }

    fn remove_portal(&mut self, name: &str) {
        match name {
            UNNAMED => self.unnamed = None,
            _ => {
                self.portals.remove(name);
            }
        }
    }

    /// Execute: runs the portal (the first time) and sends up to `max_rows` of its rows (all
    /// of them for 0), then CommandComplete, or PortalSuspended when rows are left.
    async fn execute<S>(
        &mut self,
        client: &mut Client<S>,
        fields: &mut Fields<'_>,
    ) -> PgWireResult<()>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
    {
        let name = fields.str()?;
        let requested = fields.i32()?;
        fields.end()?;
        // 0 (or a negative count) is no limit. Nothing is reserved for the count: the rows
        // are there already, and the output is written out as it grows.
        let max_rows = if requested > 0 {
            requested as usize
        } else {
            usize::MAX
        };
        let portal = self.portal(name)?;
        if let PortalRun::NotStarted = portal.run {
            let statement = portal.statement.clone();
            let params = std::mem::take(&mut portal.params);
            match self.run(client, statement, params).await {
                Ok(run) => self.portal(name)?.run = run,
                Err(error) => {
                    self.remove_portal(name);
                    return Err(error);
                }
            }
        }
        let zone = self.state.zone();
        let portal = self.portal(name)?;
        match &mut portal.run {
            PortalRun::Suspended {
                columns,
                rows,
                command,
            } => {
                let mut sent = 0;
                while sent < max_rows {
                    let Some(row) = rows.next() else { break };
                    let out = client.write_buffer_mut();
                    {
                        // Rows show in the session's zone; never held across the flush.
                        let _zone = zone.enter();
                        wire::put_data_row(out, &row, columns, &portal.format)
                            .map_err(user_error)?;
                    }
                    sent += 1;
                    if out.len() >= OUTPUT_FLUSH_BYTES {
                        SinkExt::<PgWireBackendMessage>::flush(client).await?;
                    }
                }
                if sent == max_rows {
                    put_empty_message(client.write_buffer_mut(), b's'); // PortalSuspended
                } else {
                    put_command_complete(client.write_buffer_mut(), command, Some(sent));
                    command.push_str(" 0");
                    portal.run = PortalRun::Done {
                        tag: std::mem::take(command),
                    };
                }
            }
            PortalRun::Done { tag } if !tag.is_empty() => {
                put_command_complete(client.write_buffer_mut(), tag, None);
            }
            PortalRun::Done { .. } | PortalRun::NotStarted => {}
        }
        Ok(())
    }

    /// Runs a portal's statement: what the portal holds afterwards (an empty query answers
    /// EmptyQueryResponse and stays unstarted; a COPY answers in its sub-protocol).
    async fn run<S>(
        &mut self,
        client: &mut Client<S>,
        statement: Arc<ServerStatement>,
        params: Vec<Value>,
    ) -> PgWireResult<PortalRun>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
    {
        let state = self.state.clone();
        state.start_statement(client).await;
        let outcome = match statement.as_ref() {
            ServerStatement::Empty => {
                put_empty_message(client.write_buffer_mut(), b'I'); // EmptyQueryResponse
                return Ok(PortalRun::NotStarted);
            }
            ServerStatement::Copy(copy) => {
                start_copy(&state, client, copy).await?;
                return Ok(PortalRun::Done { tag: String::new() });
            }
            ServerStatement::Text(sql) => {
                let text = sql.clone();
                state
                    .run_statement(client, move |session| {
                        session.execute_sql(&text).pop().unwrap_or_else(|| {
                            Err(SqlError::new(sqlstate::INTERNAL_ERROR, "no outcome"))
                        })
                    })
                    .await
                    .inspect_err(|error| log_failed(error, sql))
            }
            ServerStatement::Sql(_) => {
                let run = statement.clone();
                state
                    .run_statement(client, move |session| match run.as_ref() {
                        ServerStatement::Sql(statement) => {
                            session.execute_params(&statement.prepared, &params)
                        }
                        _ => Err(SqlError::new(sqlstate::INTERNAL_ERROR, "not SQL")),
                    })
                    .await
                    .inspect_err(|error| {
                        if let ServerStatement::Sql(statement) = statement.as_ref() {
                            log_failed(error, &statement.prepared.sql());
                        }
                    })
            }
        };
        self.after_statement(client);
        Ok(match outcome.map_err(user_error)? {
            Outcome::Rows {
                columns,
                rows,
                command,
            } => PortalRun::Suspended {
                columns,
                rows: rows.into_iter(),
                command,
            },
            Outcome::Command { tag } => PortalRun::Done { tag },
        })
    }

    /// After a statement ran: the transaction status, and statements a DEALLOCATE dropped.
    fn after_statement<S: 'static>(&mut self, client: &mut Client<S>) {
        client.set_transaction_status(self.state.status());
        self.forget_deallocated();
    }

    fn close<S: 'static>(
        &mut self,
        client: &mut Client<S>,
        fields: &mut Fields,
    ) -> PgWireResult<()> {
        let target = fields.u8()?;
        let name = fields.str()?;
        fields.end()?;
        match target {
            b'S' => {
                self.statements.remove(name);
                if name != UNNAMED {
                    self.state.note_statement_name(client, name, false);
                }
            }
            b'P' => self.remove_portal(name),
            other => {
                return Err(protocol_violation(format!(
                    "invalid CLOSE message subtype {other}"
                )))
            }
        }
        put_empty_message(client.write_buffer_mut(), b'3'); // CloseComplete
        Ok(())
    }
}

/// Starts the COPY an Execute ran: the copy sub-protocol follows (COPY FROM STDIN), or the
/// data is sent at once (COPY TO STDOUT).
async fn start_copy<S>(
    state: &ConnectionState,
    client: &mut Client<S>,
    statement: &CopyStatement,
) -> PgWireResult<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    match state
        .start_copy(client, statement)
        .await
        .map_err(user_error)?
    {
        CopyStart::In(copy) => {
            let columns = copy.column_count();
            state.set_copy(*copy);
            client.set_state(PgWireConnectionState::CopyInProgress(true));
            send_copy_in_response(client, CopyResponse::new(0, columns, stream::empty())).await
        }
        CopyStart::Out(columns, records) => {
            send_copy_out_response(
                client,
                CopyResponse::new(0, columns, copy_data_stream(records)),
            )
            .await
        }
    }
}

/// PostgreSQL's checks of a Bind's format codes: none (text), one for all, or one per
/// parameter and per result column, each 0 (text) or 1 (binary).
fn check_format_codes<'a>(
    parameter_codes: usize,
    parameters: usize,
    result_codes: usize,
    columns: usize,
    mut all: impl Iterator<Item = i16> + 'a,
) -> SqlResult<()> {
    if parameter_codes > 1 && parameter_codes != parameters {
        return Err(protocol_violation_sql(format!(
            "bind message has {parameter_codes} parameter formats but {parameters} parameters"
        )));
    }
    if result_codes > 1 && result_codes != columns {
        return Err(protocol_violation_sql(format!(
            "bind message has {result_codes} result formats but query has {columns} columns"
        )));
    }
    match all.find(|code| !matches!(code, 0 | 1)) {
        Some(code) => Err(SqlError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("unsupported format code: {code}"),
        )),
        None => Ok(()),
    }
}

fn protocol_violation_sql(message: String) -> SqlError {
    SqlError::new(sqlstate::PROTOCOL_VIOLATION, message)
}

fn protocol_violation(message: String) -> PgWireError {
    user_error(protocol_violation_sql(message))
}

/// A message of just its type byte and length.
fn put_empty_message(out: &mut BytesMut, kind: u8) {
    out.put_u8(kind);
    out.put_i32(4);
}

/// CommandComplete: `command` with the row count appended when there is one ("SELECT 1").
fn put_command_complete(out: &mut BytesMut, command: &str, rows: Option<usize>) {
    let mut digits = itoa::Buffer::new();
    let count = rows.map(|rows| digits.format(rows));
    let length = 4 + command.len() + count.map_or(0, |count| 1 + count.len()) + 1;
    out.put_u8(b'C');
    out.put_i32(length as i32);
    out.put_slice(command.as_bytes());
    if let Some(count) = count {
        out.put_u8(b' ');
        out.put_slice(count.as_bytes());
    }
    out.put_u8(0);
}

/// Format codes of a Bind, read in place.
struct Codes<'a>(&'a [u8]);

impl Codes<'_> {
    fn len(&self) -> usize {
        self.0.len() / 2
    }

    fn get(&self, index: usize) -> i16 {
        i16::from_be_bytes([self.0[2 * index], self.0[2 * index + 1]])
    }

    fn iter(&self) -> impl Iterator<Item = i16> + '_ {
        (0..self.len()).map(|index| self.get(index))
    }
}

/// A message body read field by field, as PostgreSQL's `pq_getmsg*`: running past its end
/// or leaving bytes unread is a protocol violation.
pub(crate) struct Fields<'a> {
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    fn take(&mut self, length: usize) -> PgWireResult<&'a [u8]> {
        if self.bytes.len() < length {
            return Err(protocol_violation(
                "insufficient data left in message".into(),
            ));
        }
        let (taken, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(taken)
    }

    fn u8(&mut self) -> PgWireResult<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> PgWireResult<u16> {
        let bytes = self.take(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn i32(&mut self) -> PgWireResult<i32> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// A count and that many 16-bit format codes.
    fn codes(&mut self) -> PgWireResult<Codes<'a>> {
        let count = self.u16()? as usize;
        Ok(Codes(self.take(2 * count)?))
    }

    /// A NUL-terminated string, which must be UTF-8 (the only client encoding).
    fn str(&mut self) -> PgWireResult<&'a str> {
        let Some(end) = self.bytes.iter().position(|byte| *byte == 0) else {
            return Err(protocol_violation("invalid string in message".into()));
        };
        let text = std::str::from_utf8(&self.bytes[..end]).map_err(|_| {
            user_error(SqlError::new(
                sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
                "invalid byte sequence for encoding \"UTF8\"",
            ))
        })?;
        self.bytes = &self.bytes[end + 1..];
        Ok(text)
    }

    fn end(&self) -> PgWireResult<()> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(protocol_violation("invalid message format".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_complete_carries_the_row_count() {
        let mut out = BytesMut::new();
        put_command_complete(&mut out, "SELECT", Some(1));
        assert_eq!(&out[..], b"C\0\0\0\x0dSELECT 1\0");
        out.clear();
        put_command_complete(&mut out, "CREATE TABLE", None);
        assert_eq!(&out[..], b"C\0\0\0\x11CREATE TABLE\0");
        out.clear();
        put_command_complete(&mut out, "INSERT 0", Some(usize::MAX));
        let tag = format!("INSERT 0 {}\0", usize::MAX);
        assert_eq!(&out[5..], tag.as_bytes());
        assert_eq!(
            u32::from_be_bytes(out[1..5].try_into().unwrap()) as usize,
            out.len() - 1
        );
    }

    #[test]
    fn fields_are_read_in_place_and_checked() {
        let body = b"portal\0stmt\0\0\x01\0\x01\0\x02\0\0\0\x017\0\0";
        let mut fields = Fields { bytes: body };
        assert_eq!(fields.str().unwrap(), "portal");
        assert_eq!(fields.str().unwrap(), "stmt");
        let codes = fields.codes().unwrap();
        assert_eq!(codes.iter().collect::<Vec<_>>(), [1]);
        assert_eq!(fields.u16().unwrap(), 2);
        assert_eq!(fields.i32().unwrap(), 1);
        assert_eq!(fields.take(1).unwrap(), b"7");
        assert!(fields.end().is_err(), "two bytes are left");
        assert_eq!(fields.u16().unwrap(), 0);
        assert!(fields.end().is_ok());
        assert!(fields.u8().is_err(), "past the end");

        let mut unterminated = Fields { bytes: b"abc" };
        assert!(unterminated.str().is_err());
        let mut invalid = Fields {
            bytes: b"\xff\xfe\0",
        };
        let error = invalid.str().unwrap_err();
        assert_eq!(error.code(), sqlstate::CHARACTER_NOT_IN_REPERTOIRE);
    }

    #[test]
    fn format_codes_follow_postgresql() {
        let codes = |list: &'static [i16]| list.iter().copied();
        assert!(check_format_codes(0, 2, 0, 3, codes(&[])).is_ok());
        assert!(check_format_codes(1, 2, 1, 3, codes(&[1, 0])).is_ok());
        assert_eq!(
            check_format_codes(3, 1, 0, 2, codes(&[0, 0, 0]))
                .unwrap_err()
                .code,
            sqlstate::PROTOCOL_VIOLATION
        );
        assert_eq!(
            check_format_codes(1, 1, 3, 2, codes(&[0, 1, 1, 1]))
                .unwrap_err()
                .code,
            sqlstate::PROTOCOL_VIOLATION
        );
        assert_eq!(
            check_format_codes(1, 1, 0, 2, codes(&[7]))
                .unwrap_err()
                .code,
            sqlstate::INVALID_PARAMETER_VALUE
        );
    }
}

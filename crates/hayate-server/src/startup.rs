//! Connection startup: protocol negotiation, authentication, and the parameter
//! statuses clients read (libpq, JDBC and psycopg check server_version, client_encoding,
//! DateStyle, integer_datetimes and standard_conforming_strings).

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use futures::{Sink, SinkExt};
use hayate_sql::interrupt::Interrupt;
use hayate_sql::sqlstate;
use parking_lot::Mutex;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata,
    ServerParameterProvider, StartupHandler,
};
use pgwire::api::{ClientInfo, PgWireConnectionState, METADATA_DATABASE, METADATA_USER};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::startup::{Authentication, PasswordMessageFamily};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use tokio::sync::OwnedSemaphorePermit;

use crate::auth::{self, Scram, ScramError};
use crate::cancel::CancelRegistry;
use crate::handler::ConnectionState;
use crate::{AuthMethod, Peer, ServerConfig};

/// The parameter statuses sent after authentication; `standby`: the server is a hot standby
/// (libpq's `target_session_attrs` and pgJDBC's `targetServerType` read `in_hot_standby` and
/// `default_transaction_read_only`).
pub struct ServerParameters {
    pub standby: bool,
    /// The session's TimeZone (UTC, or what the client's startup parameters set).
    pub time_zone: String,
    /// The session's application_name (its startup parameter, or `-c` in options).
    pub application_name: String,
}

impl ServerParameterProvider for ServerParameters {
    fn server_parameters<C>(&self, client: &C) -> Option<HashMap<String, String>>
    where
        C: ClientInfo,
    {
        let metadata = client.metadata();
        let user = metadata.get(METADATA_USER).cloned().unwrap_or_default();
        let application = self.application_name.clone();
        let pairs = [
            ("server_version", hayate_sql::SERVER_VERSION.to_string()),
            ("server_encoding", "UTF8".into()),
            ("client_encoding", "UTF8".into()),
            ("DateStyle", "ISO, MDY".into()),
            ("TimeZone", self.time_zone.clone()),
            ("IntervalStyle", "postgres".into()),
            ("integer_datetimes", "on".into()),
            ("standard_conforming_strings", "on".into()),
            ("is_superuser", "on".into()),
            ("in_hot_standby", on_off(self.standby)),
            ("default_transaction_read_only", on_off(self.standby)),
            ("search_path", "\"$user\", public".into()),
            ("session_authorization", user),
            ("application_name", application),
        ];
        Some(
            pairs
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect(),
        )
    }
}

fn on_off(value: bool) -> String {
    if value { "on" } else { "off" }.to_string()
}

/// Where one connection's authentication stands.
enum Step {
    /// Waiting for the startup message.
    Start,
    Cleartext {
        user: String,
        password: String,
    },
    Md5 {
        user: String,
        expected: String,
    },
    ScramInitial {
        user: String,
        password: String,
    },
    ScramFinal {
        user: String,
        scram: Box<Scram>,
    },
    Done,
}

/// The startup of one connection: protocol negotiation, authentication by the configured
/// method, the connection's cancel key, and the parameter statuses.
pub struct Startup {
    config: Arc<ServerConfig>,
    cancels: Arc<CancelRegistry>,
    interrupt: Interrupt,
    /// The connection's slot under max_connections (None: over the limit).
    slot: Option<OwnedSemaphorePermit>,
    peer: Peer,
    step: Mutex<Step>,
    pid: Mutex<Option<i32>>,
    /// The server is a hot standby (`ServerParameters`).
    standby: bool,
    /// The connection whose session starts once authenticated.
    connection: Arc<ConnectionState>,
}

impl Startup {
    pub fn new(
        config: Arc<ServerConfig>,
        cancels: Arc<CancelRegistry>,
        interrupt: Interrupt,
        slot: Option<OwnedSemaphorePermit>,
        peer: Peer,
        connection: Arc<ConnectionState>,
    ) -> Startup {
        Startup {
            config,
            cancels,
            interrupt,
            slot,
            peer,
            step: Mutex::new(Step::Start),
            pid: Mutex::new(None),
            standby: false,
            connection,
        }
    }

    /// Marks the server a hot standby in the parameter statuses.
    pub fn standby(mut self, standby: bool) -> Startup {
        self.standby = standby;
        self
    }

    /// A FATAL error (the connection closes after it), logged once.
    fn fatal(&self, code: &str, message: String) -> PgWireError {
        log::info!("connection from {}: {message}", self.peer);
        PgWireError::UserError(Box::new(ErrorInfo::new(
            "FATAL".into(),
            code.into(),
            message,
        )))
    }

    fn wrong_password(&self, user: &str) -> PgWireError {
        self.fatal(
            sqlstate::INVALID_PASSWORD,
            format!("password authentication failed for user \"{user}\""),
        )
    }

    /// The next step after the startup message.
    fn first_step(&self, user: &str) -> PgWireResult<(Step, Option<Authentication>)> {
        if self.config.auth == AuthMethod::Trust {
            return Ok((Step::Done, None));
        }
        let Some(password) = self.config.users.get(user).cloned() else {
            return Err(self.fatal(
                sqlstate::INVALID_AUTHORIZATION_SPECIFICATION,
                format!("role \"{user}\" does not exist"),
            ));
        };
        let user = user.to_string();
        Ok(match self.config.auth {
            AuthMethod::Trust => unreachable!("handled above"),
            AuthMethod::Password => (
                Step::Cleartext { user, password },
                Some(Authentication::CleartextPassword),
            ),
            AuthMethod::Md5 => {
                let salt: [u8; 4] = rand::random();
                let expected = auth::md5_response(&user, &password, &salt);
                (
                    Step::Md5 { user, expected },
                    Some(Authentication::MD5Password(salt.to_vec())),
                )
            }
            AuthMethod::ScramSha256 => (
                Step::ScramInitial { user, password },
                Some(Authentication::SASL(vec!["SCRAM-SHA-256".into()])),
            ),
        })
    }

    /// Takes a password message; returns the next step and what to send.
    fn password_step(
        &self,
        step: Step,
        message: PasswordMessageFamily,
    ) -> PgWireResult<(Step, Option<Authentication>)> {
        Ok(match step {
            Step::Cleartext { user, password } => {
                if message.into_password()?.password != password {
                    return Err(self.wrong_password(&user));
                }
                (Step::Done, None)
            }
            Step::Md5 { user, expected } => {
                if message.into_password()?.password != expected {
                    return Err(self.wrong_password(&user));
                }
                (Step::Done, None)
            }
            Step::ScramInitial { user, password } => {
                let initial = message.into_sasl_initial_response()?;
                if initial.auth_method != "SCRAM-SHA-256" {
                    return Err(self.fatal(
                        sqlstate::PROTOCOL_VIOLATION,
                        format!(
                            "client selected an invalid SASL authentication mechanism \"{}\"",
                            initial.auth_method
                        ),
                    ));
                }
                let salt: [u8; 16] = rand::random();
                let nonce_bytes: [u8; 18] = rand::random();
                let nonce = BASE64.encode(nonce_bytes);
                let data = initial.data.unwrap_or_default();
                let (scram, server_first) = Scram::start(&password, &data, &salt, &nonce)
                    .map_err(|error| self.scram_error(&user, error))?;
                (
                    Step::ScramFinal {
                        user,
                        scram: Box::new(scram),
                    },
                    Some(Authentication::SASLContinue(Bytes::from(server_first))),
                )
            }
            Step::ScramFinal { user, scram } => {
                let response = message.into_sasl_response()?;
                let server_final = scram
                    .finish(&response.data)
                    .map_err(|error| self.scram_error(&user, error))?;
                (
                    Step::Done,
                    Some(Authentication::SASLFinal(Bytes::from(server_final))),
                )
            }
            Step::Start | Step::Done => {
                return Err(self.fatal(
                    sqlstate::PROTOCOL_VIOLATION,
                    "unexpected password message".into(),
                ))
            }
        })
    }

    fn scram_error(&self, user: &str, error: ScramError) -> PgWireError {
        match error {
            ScramError::WrongPassword => self.wrong_password(user),
            ScramError::Malformed(message) => self.fatal(sqlstate::PROTOCOL_VIOLATION, message),
        }
    }

    /// Authentication succeeded: the cancel key, AuthenticationOk, parameters, ready.
    async fn finish<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (pid, secret_key) = self.cancels.issue(client);
        let metadata = client.metadata();
        let user = metadata.get(METADATA_USER).cloned().unwrap_or_default();
        let database = metadata.get(METADATA_DATABASE).unwrap_or(&user).clone();
        self.cancels.register(
            pid,
            secret_key.clone(),
            self.interrupt.clone(),
            &database,
            self.connection.terminate_signal().clone(),
        );
        *self.pid.lock() = Some(pid);
        let parameters: Vec<(String, String)> = metadata
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        self.connection
            .attach(&user, &database, pid, &parameters, &self.peer)
            .map_err(|error| self.fatal(error.code, error.message))?;
        client.set_pid_and_secret_key(pid, secret_key);
        finish_authentication(
            client,
            &ServerParameters {
                standby: self.standby,
                time_zone: self.connection.zone().get().name().to_string(),
                application_name: self.connection.reported("application_name"),
            },
        )
        .await
    }
}

impl Drop for Startup {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.lock().take() {
            self.cancels.unregister(pid);
        }
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let step = std::mem::replace(&mut *self.step.lock(), Step::Done);
        let (next, send) = match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                if !matches!(step, Step::Start) {
                    return Err(self.fatal(
                        sqlstate::PROTOCOL_VIOLATION,
                        "a second startup message".into(),
                    ));
                }
                if self.slot.is_none() {
                    return Err(self.fatal(
                        sqlstate::TOO_MANY_CONNECTIONS,
                        "sorry, too many clients already".into(),
                    ));
                }
                if self.config.tls_required
                    && matches!(self.peer, Peer::Tcp(_))
                    && !client.is_secure()
                {
                    return Err(self.fatal(
                        sqlstate::INVALID_AUTHORIZATION_SPECIFICATION,
                        "the server accepts TCP connections only with TLS (tls_required): \
                         connect with sslmode=require"
                            .into(),
                    ));
                }
                protocol_negotiation(client, startup).await?;
                save_startup_parameters_to_metadata(client, startup);
                let user = client
                    .metadata()
                    .get(METADATA_USER)
                    .cloned()
                    .unwrap_or_default();
                self.first_step(&user)?
            }
            PgWireFrontendMessage::PasswordMessageFamily(password) => {
                self.password_step(step, password)?
            }
            _ => {
                return Err(self.fatal(
                    sqlstate::PROTOCOL_VIOLATION,
                    "expected a startup or password message".into(),
                ))
            }
        };
        let done = matches!(next, Step::Done);
        *self.step.lock() = next;
        if let Some(request) = send {
            client
                .send(PgWireBackendMessage::Authentication(request))
                .await?;
        }
        if done {
            self.finish(client).await
        } else {
            client.set_state(PgWireConnectionState::AuthenticationInProgress);
            Ok(())
        }
    }
}

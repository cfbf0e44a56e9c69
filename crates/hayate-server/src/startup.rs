//! Connection startup: protocol negotiation, trust authentication, and the parameter
//! statuses clients read (libpq, JDBC and psycopg check server_version, client_encoding,
//! DateStyle, integer_datetimes and standard_conforming_strings).

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata,
    ServerParameterProvider, StartupHandler,
};
use pgwire::api::{
    ClientInfo, PidSecretKeyGenerator, RandomPidSecretKeyGenerator, METADATA_APPLICATION_NAME,
    METADATA_USER,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

pub struct ServerParameters;

impl ServerParameterProvider for ServerParameters {
    fn server_parameters<C>(&self, client: &C) -> Option<HashMap<String, String>>
    where
        C: ClientInfo,
    {
        let metadata = client.metadata();
        let user = metadata.get(METADATA_USER).cloned().unwrap_or_default();
        let application = metadata
            .get(METADATA_APPLICATION_NAME)
            .cloned()
            .unwrap_or_default();
        let pairs = [
            ("server_version", hayate_sql::SERVER_VERSION.to_string()),
            ("server_encoding", "UTF8".into()),
            ("client_encoding", "UTF8".into()),
            ("DateStyle", "ISO, MDY".into()),
            ("TimeZone", "UTC".into()),
            ("IntervalStyle", "postgres".into()),
            ("integer_datetimes", "on".into()),
            ("standard_conforming_strings", "on".into()),
            ("is_superuser", "on".into()),
            ("in_hot_standby", "off".into()),
            ("default_transaction_read_only", "off".into()),
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

/// Trust authentication: every user may connect (the server listens on localhost by
/// default; passwords come later).
pub struct TrustStartup {
    pub pids: Arc<RandomPidSecretKeyGenerator>,
}

#[async_trait]
impl StartupHandler for TrustStartup {
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
        if let PgWireFrontendMessage::Startup(ref startup) = message {
            protocol_negotiation(client, startup).await?;
            save_startup_parameters_to_metadata(client, startup);
            let (pid, secret_key) = self.pids.generate(client);
            client.set_pid_and_secret_key(pid, secret_key);
            finish_authentication(client, &ServerParameters).await?;
        }
        Ok(())
    }
}

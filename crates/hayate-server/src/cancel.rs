//! Cancel requests: each connection gets a process id and a secret key at startup
//! (BackendKeyData); a CancelRequest carrying both, on a new connection, sets that
//! connection's interrupt flag. A wrong secret is ignored, as in PostgreSQL.
//!
//! The registry also ends connections (DROP DATABASE ... WITH (FORCE)): it interrupts their
//! statement and wakes their message loop, which closes them with FATAL 57P01.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use hayate_sql::catalog::activity::BackendSignal;
use hayate_sql::interrupt::Interrupt;
use parking_lot::Mutex;
use pgwire::api::cancel::CancelHandler;
use pgwire::api::{ClientInfo, PidSecretKeyGenerator, RandomPidSecretKeyGenerator};
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::startup::SecretKey;

/// The connections that can be cancelled, by process id.
#[derive(Default)]
pub struct CancelRegistry {
    connections: Mutex<HashMap<i32, Registered>>,
    /// One for the server: each connection gets the next process id.
    pids: RandomPidSecretKeyGenerator,
}

/// A connection as the registry knows it.
struct Registered {
    secret: SecretKey,
    interrupt: Interrupt,
    /// The database the connection's session uses.
    database: String,
    /// Wakes the connection's message loop to end it.
    terminate: Arc<tokio::sync::Notify>,
}

impl CancelRegistry {
    /// A new connection's process id (unique while the server runs) and secret key.
    pub fn issue(&self, client: &dyn ClientInfo) -> (i32, SecretKey) {
        self.pids.generate(client)
    }

    pub fn register(
        &self,
        pid: i32,
        secret: SecretKey,
        interrupt: Interrupt,
        database: &str,
        terminate: Arc<tokio::sync::Notify>,
    ) {
        let registered = Registered {
            secret,
            interrupt,
            database: database.to_string(),
            terminate,
        };
        self.connections.lock().insert(pid, registered);
    }

    /// Ends every connection using `database` (its statement is interrupted, its loop woken
    /// to close it with FATAL 57P01); returns how many.
    pub fn terminate_database(&self, database: &str) -> usize {
        let connections = self.connections.lock();
        let mut ended = 0;
        for registered in connections.values().filter(|c| c.database == database) {
            registered.interrupt.interrupt();
            // A permit if the loop is not waiting now: it ends at its next wait.
            registered.terminate.notify_one();
            ended += 1;
        }
        ended
    }

    pub fn unregister(&self, pid: i32) {
        self.connections.lock().remove(&pid);
    }

    /// pg_cancel_backend / pg_terminate_backend: interrupts connection `pid`'s statement,
    /// and for Terminate ends the connection (FATAL 57P01); false if there is none.
    pub fn signal(&self, pid: i32, signal: BackendSignal) -> bool {
        let connections = self.connections.lock();
        let Some(registered) = connections.get(&pid) else {
            return false;
        };
        registered.interrupt.interrupt();
        if signal == BackendSignal::Terminate {
            registered.terminate.notify_one();
        }
        true
    }

    /// Interrupts the connection `pid` if `secret` is its key; true if it did.
    pub fn cancel(&self, pid: i32, secret: &SecretKey) -> bool {
        match self.connections.lock().get(&pid) {
            Some(registered) if registered.secret.eq_value(secret) => {
                registered.interrupt.interrupt();
                true
            }
            _ => false,
        }
    }
}

#[async_trait]
impl CancelHandler for CancelRegistry {
    async fn on_cancel_request(&self, request: CancelRequest) {
        if !self.cancel(request.pid, &request.secret_key) {
            log::info!(
                "cancel request for unknown process {} (or a wrong key)",
                request.pid
            );
        }
    }
}

//! Cancel requests: each connection gets a process id and a secret key at startup
//! (BackendKeyData); a CancelRequest carrying both, on a new connection, sets that
//! connection's interrupt flag. A wrong secret is ignored, as in PostgreSQL.

use std::collections::HashMap;

use async_trait::async_trait;
use hayate_sql::interrupt::Interrupt;
use parking_lot::Mutex;
use pgwire::api::cancel::CancelHandler;
use pgwire::api::{ClientInfo, PidSecretKeyGenerator, RandomPidSecretKeyGenerator};
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::startup::SecretKey;

/// The connections that can be cancelled, by process id.
#[derive(Default)]
pub struct CancelRegistry {
    connections: Mutex<HashMap<i32, (SecretKey, Interrupt)>>,
    /// One for the server: each connection gets the next process id.
    pids: RandomPidSecretKeyGenerator,
}

impl CancelRegistry {
    /// A new connection's process id (unique while the server runs) and secret key.
    pub fn issue(&self, client: &dyn ClientInfo) -> (i32, SecretKey) {
        self.pids.generate(client)
    }

    pub fn register(&self, pid: i32, secret: SecretKey, interrupt: Interrupt) {
        self.connections.lock().insert(pid, (secret, interrupt));
    }

    pub fn unregister(&self, pid: i32) {
        self.connections.lock().remove(&pid);
    }

    /// Interrupts the connection `pid` if `secret` is its key; true if it did.
    pub fn cancel(&self, pid: i32, secret: &SecretKey) -> bool {
        match self.connections.lock().get(&pid) {
            Some((key, interrupt)) if key.eq_value(secret) => {
                interrupt.interrupt();
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

//! What a TPC-C run asks of an engine (`TpccJob`) and what it measured (`TpccOutcome`):
//! transactions and latency per type, New-Orders rolled back by design, retries by cause.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::driver::DriverError;
use crate::tpcc::spec::Scale;
use crate::tpcc::txn::{NewOrderOutcome, TxnInput, TxnOutput, TxnType};
use hayate::report::Histogram;

/// Called with (W_ID, D_ID, O_ID) of every New-Order whose commit was acknowledged.
pub type AckSink = Arc<dyn Fn(u32, u32, u32) + Send + Sync>;

/// One measured (or warm-up) TPC-C run.
#[derive(Clone)]
pub struct TpccJob {
    pub scale: Scale,
    /// Terminals (transactions in flight), zero think time.
    pub terminals: u32,
    pub duration: Duration,
    pub seed: u64,
    /// Told of every acknowledged New-Order (the crash loop), when set.
    pub acknowledged: Option<AckSink>,
    /// Deliveries run deferred (`deferred`, clause 2.7.2), else inline in the terminal.
    pub deferred_delivery: bool,
}

/// Committed transactions of one type.
#[derive(Debug, Clone, Default)]
pub struct TypeOutcome {
    pub committed: u64,
    /// Latency of each committed transaction (retries included), nanoseconds.
    pub latency: Histogram,
    pub latency_sum_ns: u128,
}

#[derive(Debug, Clone, Default)]
pub struct TpccOutcome {
    /// Indexed by `TxnType::index`.
    pub per_type: [TypeOutcome; 5],
    /// New-Orders rolled back on their unused item (the 1% of clause 2.4.2.3); not in NOPM.
    pub rolled_back: u64,
    /// Retries of retryable failures, by transaction and cause ("payment: serialization").
    pub retries: BTreeMap<String, u64>,
    /// Transactions still failing with retryable errors when the run ended (not counted).
    pub gave_up: u64,
    /// Deferred Deliveries queued and not finished when the run ended (not counted).
    pub deliveries_pending: u64,
    pub worker_threads: u32,
}

impl TpccOutcome {
    pub fn record(&mut self, kind: TxnType, latency: Duration) {
        let outcome = &mut self.per_type[kind.index()];
        let nanos = latency.as_nanos();
        outcome.committed += 1;
        outcome.latency.record(nanos as u64);
        outcome.latency_sum_ns += nanos;
    }

    /// Counts a retry of a `kind` transaction, by the failure's cause.
    pub fn retry(&mut self, kind: TxnType, error: &DriverError) {
        let key = format!("{}: {}", kind.as_str(), retry_cause(error));
        *self.retries.entry(key).or_default() += 1;
    }

    pub fn merge(&mut self, other: &TpccOutcome) {
        for (mine, theirs) in self.per_type.iter_mut().zip(&other.per_type) {
            mine.committed += theirs.committed;
            mine.latency.merge(&theirs.latency);
            mine.latency_sum_ns += theirs.latency_sum_ns;
        }
        self.rolled_back += other.rolled_back;
        for (cause, count) in &other.retries {
            *self.retries.entry(cause.clone()).or_default() += count;
        }
        self.gave_up += other.gave_up;
        self.deliveries_pending += other.deliveries_pending;
        self.worker_threads += other.worker_threads;
    }

    /// Committed transactions of every type.
    pub fn committed(&self) -> u64 {
        self.per_type.iter().map(|outcome| outcome.committed).sum()
    }
}

/// The cause of a retryable failure, from the engine's message (every engine words it its own
/// way; the lab groups them).
pub fn retry_cause(error: &DriverError) -> &'static str {
    let message = error.message.to_lowercase();
    if message.contains("deadlock") {
        "deadlock"
    } else if message.contains("serializ") || message.contains("could not serialize") {
        "serialization"
    } else if message.contains("lock") && (message.contains("timeout") || message.contains("wait"))
    {
        "lock timeout"
    } else if message.contains("busy") || message.contains("locked") {
        "busy"
    } else {
        "other"
    }
}

/// Counts a finished transaction (and tells the acknowledgement sink of a New-Order).
pub fn record_output(
    outcome: &mut TpccOutcome,
    input: &TxnInput,
    output: TxnOutput,
    latency: Duration,
    job: &TpccJob,
) {
    match (input, output) {
        (_, TxnOutput::NewOrder(NewOrderOutcome::RolledBack)) => outcome.rolled_back += 1,
        (TxnInput::NewOrder(order), TxnOutput::NewOrder(NewOrderOutcome::Committed { o_id })) => {
            if let Some(acknowledged) = &job.acknowledged {
                acknowledged(order.w_id, order.d_id, o_id);
            }
            outcome.record(TxnType::NewOrder, latency);
        }
        (input, _) => outcome.record(input.kind(), latency),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_grouped_from_every_engines_wording() {
        let cause = |message: &str| retry_cause(&DriverError::retryable(message));
        assert_eq!(
            cause("could not serialize access due to concurrent update"),
            "serialization"
        );
        assert_eq!(
            cause("serialization failure: the row changed"),
            "serialization"
        );
        assert_eq!(cause("Deadlock found when trying to get lock"), "deadlock");
        assert_eq!(
            cause("Lock wait timeout exceeded; try restarting"),
            "lock timeout"
        );
        assert_eq!(cause("lock timeout after 1000 ms"), "lock timeout");
        assert_eq!(cause("database is locked"), "busy");
        assert_eq!(cause("something else"), "other");
    }
}

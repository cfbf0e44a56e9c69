//! A database as a node of a replicated pair (docs/design.md 5.6): the engine's side of log
//! shipping. The transport (network, authentication, fencing) is the caller's.
//!
//! Primary: `set_log_shipper` installs a `LogShipper`; every flush hands it its bytes and
//! waits for the standby's durability before its commits are acknowledged. A standby that
//! connects later gets the bytes before the shipper's start position from `read_log`.
//!
//! Standby:
//! 1. `start_standby` (after open, which recovered the node's own log): writes are refused
//!    (`Error::Standby`); returns the position from which the primary must send.
//! 2. `receive_log(lsn, bytes)`: appends the bytes to this node's log and makes them durable;
//!    returns the durable end, which the transport acknowledges.
//! 3. `apply_received`: decodes what was received (`wal::StreamDecoder`) and applies it
//!    through the MVCC path (`TxnManager::apply_replicated`): read-only transactions on the
//!    standby see each commit whole, in commit order, with stable snapshots.
//! 4. `promote`: applies what is left, cuts the parts of a commit that never got its last
//!    part (never acknowledged), and opens the node for writes.
//!
//! Rewind: an old primary may hold a tail of commits no standby acknowledged, past the point
//! where the new primary's log went on without them (the fork point). Opened as a standby
//! (`DatabaseConfig::standby`) it takes no checkpoint until its primary accepts its log
//! (`confirm_log`), so its last checkpoint covers no more than what its own standby had
//! acknowledged, which is at most the fork point. `Database::rewind` then cuts its log back
//! to the fork point; the next open replays the log from that checkpoint to the fork point,
//! and the node follows the new primary from there.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use super::{open_io, Database, DatabaseConfig};
use crate::error::{Error, Result};
use crate::io::Io;
use crate::store;
use crate::txn::{Catalog, TreeId};
use crate::wal::{LogRecord, LogShipper, Lsn, StreamDecoder, Wal};

/// What one `apply_received` applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Records applied (a commit logged in parts counts once).
    pub records: usize,
    /// Trees whose rows the applied commits changed.
    pub trees: BTreeSet<TreeId>,
    /// Whether a tree was created or dropped (a layer above with its own catalog reloads it).
    pub ddl: bool,
}

/// What `Database::rewind` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindReport {
    /// The checkpoint the next open recovers from.
    pub checkpoint_id: u64,
    /// How far that checkpoint's pages reflect the log.
    pub covered_lsn: Lsn,
    /// Where the log ended before the cut.
    pub old_end_lsn: Lsn,
    /// Where it ends now: the fork point.
    pub end_lsn: Lsn,
}

/// A standby's receiving state: bytes durable but not applied yet, and the decoder. Two
/// locks, so that receiving (and acknowledging) the next bytes never waits for applying the
/// previous ones.
pub(super) struct Receiver {
    incoming: parking_lot::Mutex<Incoming>,
    /// Held while applying: appliers take the received bytes in order, one at a time.
    decoder: parking_lot::Mutex<StreamDecoder>,
}

struct Incoming {
    /// Set by `promote`: nothing more is received.
    closed: bool,
    received: Vec<(Lsn, Vec<u8>)>,
    /// Position just past the last byte received (the log's end).
    received_end_lsn: Lsn,
}

impl Database {
    /// Makes this database a standby (step 1); returns the log position it needs next.
    pub fn start_standby(&self) -> Result<Lsn> {
        let manager = &self.inner.manager;
        let end_lsn = manager.wal().end_lsn();
        let mut standby = self.inner.standby.lock();
        if standby.is_some() {
            return Err(Error::InvalidArgument("already a standby".into()));
        }
        manager.set_standby(true);
        manager.set_replay_from(end_lsn);
        *standby = Some(Arc::new(Receiver {
            incoming: parking_lot::Mutex::new(Incoming {
                closed: false,
                received: Vec::new(),
                received_end_lsn: end_lsn,
            }),
            decoder: parking_lot::Mutex::new(StreamDecoder::new(end_lsn)),
        }));
        Ok(end_lsn)
    }

    /// This node's log is known to be held by whichever node may take over (a standby's
    /// primary accepted it as a prefix of its own; a primary's standby acknowledged past it,
    /// or it acknowledges alone): checkpoints may cover it from now on
    /// (`DatabaseConfig::hold_checkpoints`).
    pub fn confirm_log(&self) {
        self.inner.manager.set_log_unconfirmed(false);
    }

    /// Cuts the log of the closed database in `dir` back to `fork` (the position where the
    /// new primary's log left this one), so that it can follow the new primary: the commits
    /// logged past it here were never acknowledged. The last checkpoint must cover no more
    /// than `fork` (a node that took no checkpoint since its tail: opened as a standby, or
    /// closed without one after its standby was lost); otherwise nothing is changed and the
    /// error says the node must be seeded again.
    pub fn rewind(dir: &Path, config: &DatabaseConfig, fork: Lsn) -> Result<RewindReport> {
        Self::rewind_with_io(open_io(dir, config.io_backend)?, config, fork)
    }

    /// `rewind` on a given I/O backend.
    pub fn rewind_with_io(
        io: Arc<dyn Io>,
        config: &DatabaseConfig,
        fork: Lsn,
    ) -> Result<RewindReport> {
        if !io.exists(crate::store::control::CONTROL_FILE)? {
            return Err(Error::InvalidArgument(
                "no database to rewind in this directory".into(),
            ));
        }
        let (store, _) = store::open(io.clone(), &config.store)?;
        let opened = store.opened_checkpoint().unwrap_or_default();
        let covered_lsn = Catalog::decode(&opened.payload)?.covered_lsn;
        if covered_lsn > fork {
            let covered = if covered_lsn == u64::MAX {
                "an unknown extent of the log (a checkpoint of an older version)".to_string()
            } else {
                format!("the log up to {covered_lsn}")
            };
            return Err(Error::InvalidArgument(format!(
                "cannot rewind to {fork}: the last checkpoint covers {covered}"
            )));
        }
        let (wal, _) = Wal::open(io, config.wal.clone(), opened.redo_lsn)?;
        let old_end_lsn = wal.end_lsn();
        if old_end_lsn < fork {
            return Err(Error::InvalidArgument(format!(
                "cannot rewind to {fork}: the log ends before it, at {old_end_lsn}"
            )));
        }
        wal.cut_back(fork)?;
        Ok(RewindReport {
            checkpoint_id: opened.checkpoint_id,
            covered_lsn,
            old_end_lsn,
            end_lsn: wal.end_lsn(),
        })
    }

    /// True while this database is a standby.
    pub fn is_standby(&self) -> bool {
        self.inner.manager.is_standby()
    }

    /// Appends the primary's log bytes `[lsn, lsn + bytes.len())` and makes them durable
    /// (step 2); returns the durable end to acknowledge. Bytes already received (a resend
    /// after a reconnect) are skipped.
    pub fn receive_log(&self, lsn: Lsn, bytes: &[u8]) -> Result<Lsn> {
        let receiver = self.receiver()?;
        let mut incoming = receiver.incoming.lock();
        if incoming.closed {
            return Err(Error::InvalidArgument("not a standby any more".into()));
        }
        let end = lsn + bytes.len() as u64;
        if end <= incoming.received_end_lsn {
            return Ok(incoming.received_end_lsn);
        }
        let skip = incoming.received_end_lsn.saturating_sub(lsn) as usize;
        let (lsn, bytes) = (lsn + skip as u64, &bytes[skip..]);
        let durable = self.inner.manager.wal().append_stream(lsn, bytes)?;
        incoming.received.push((lsn, bytes.to_vec()));
        incoming.received_end_lsn = durable;
        Ok(durable)
    }

    fn receiver(&self) -> Result<Arc<Receiver>> {
        self.inner
            .standby
            .lock()
            .clone()
            .ok_or_else(|| Error::InvalidArgument("not a standby".into()))
    }

    /// Applies every record received so far (step 3); says what it applied.
    pub fn apply_received(&self) -> Result<ApplyReport> {
        match self.receiver() {
            Ok(receiver) => self.apply_received_from(&receiver),
            Err(_) => Ok(ApplyReport::default()),
        }
    }

    fn apply_received_from(&self, receiver: &Receiver) -> Result<ApplyReport> {
        let mut report = ApplyReport::default();
        let manager = &self.inner.manager;
        let mut decoder = receiver.decoder.lock();
        let received = std::mem::take(&mut receiver.incoming.lock().received);
        for (lsn, bytes) in received {
            for (record_lsn, record) in decoder.push(lsn, &bytes)? {
                match &record {
                    LogRecord::Commit { ops, .. } => {
                        report.trees.extend(ops.iter().map(|op| op.tree_id()));
                    }
                    LogRecord::CreateTree { .. } | LogRecord::DropTree { .. } => {
                        report.ddl = true;
                    }
                    LogRecord::CheckpointMark { .. } => {}
                }
                manager.apply_replicated(record_lsn, record)?;
                report.records += 1;
            }
            manager.set_replay_from(decoder.resume_lsn());
        }
        Ok(report)
    }

    /// Position just past the last record applied on this standby (the primary's log end on
    /// a primary).
    pub fn applied_lsn(&self) -> Lsn {
        match self.receiver() {
            Ok(receiver) => receiver.decoder.lock().resume_lsn(),
            Err(_) => self.inner.manager.wal().end_lsn(),
        }
    }

    /// Opens this standby for writes (step 4). The caller must know the old primary is gone
    /// (fenced) and that this node held every acknowledged commit (it was synchronous).
    pub fn promote(&self) -> Result<()> {
        self.promote_shipping_to(None).map(|_| ())
    }

    /// `promote`, installing `shipper` before the node takes its first write, so that no
    /// commit of the new primary is acknowledged before its standby has it; returns the
    /// position from which the shipper sees every flushed byte (`set_log_shipper`).
    pub fn promote_shipping_to(&self, shipper: Option<Arc<dyn LogShipper>>) -> Result<Lsn> {
        let mut standby = self.inner.standby.lock();
        let Some(receiver) = standby.take() else {
            return Err(Error::InvalidArgument("not a standby".into()));
        };
        let wal = self.inner.manager.wal();
        // Wait out a receive in progress; none follows.
        receiver.incoming.lock().closed = true;
        self.apply_received_from(&receiver)?;
        let resume = receiver.decoder.lock().resume_lsn();
        if resume < wal.end_lsn() {
            log::warn!(
                "promotion drops log bytes {resume}..{}: a commit whose last part never came",
                wal.end_lsn()
            );
            wal.cut_back(resume)?;
        }
        let shipped_from = wal.set_shipper(shipper);
        self.inner.manager.set_standby(false);
        Ok(shipped_from)
    }

    /// Installs (or, with None, removes) the shipper of this primary's log; returns the
    /// position from which it is handed every flushed byte (earlier bytes: `read_log`).
    pub fn set_log_shipper(&self, shipper: Option<Arc<dyn LogShipper>>) -> Lsn {
        self.inner.manager.wal().set_shipper(shipper)
    }

    /// The log bytes `[from, to)` from this node's files (`to` locally durable).
    pub fn read_log(&self, from: Lsn, to: Lsn) -> Result<Vec<u8>> {
        self.inner.manager.wal().read_stream(from, to)
    }

    /// Position just past the last record appended to the log.
    pub fn log_end_lsn(&self) -> Lsn {
        self.inner.manager.wal().end_lsn()
    }

    /// Every byte before this is durable in this node's own files.
    pub fn log_local_durable_lsn(&self) -> Lsn {
        self.inner.manager.wal().local_durable_lsn()
    }

    /// Keeps the log from `lsn` on through checkpoints (a replication slot); `u64::MAX`
    /// releases it.
    pub fn retain_log_from(&self, lsn: Lsn) {
        self.inner.manager.wal().set_retain_lsn(lsn);
    }
}

//! Group commit under load: 16 committers each append and flush 200 records; every
//! acknowledged record is found after reopening, and commits shared flushes. Runs with
//! fdatasync and with O_DSYNC writes into preallocated segments.

use std::sync::Arc;

use crate::Io;
use crate::SyncIo;
use crate::{LogRecord, Lsn, Op, SyncMode, Wal, WalConfig};

const COMMITTERS: u64 = 16;
const COMMITS_PER_COMMITTER: u64 = 200;

fn record(committer: u64, sequence: u64) -> LogRecord {
    LogRecord::Commit {
        txn_id: committer * 1_000_000 + sequence,
        commit_ts: sequence,
        ops: vec![Op::Put {
            tree_id: committer as u32,
            key: sequence.to_le_bytes().to_vec(),
            value: vec![committer as u8; 64],
        }],
    }
}

#[test]
fn wal_concurrent_committers_share_flushes_and_survive_reopen() {
    concurrent_committers(WalConfig::default());
}

#[test]
fn wal_concurrent_committers_dsync_preallocated() {
    concurrent_committers(WalConfig {
        sync_mode: SyncMode::Dsync,
        preallocate_segments: true,
        segment_size_bytes: 1 << 20,
        ..WalConfig::default()
    });
}

fn concurrent_committers(config: WalConfig) {
    let dir = tempfile::tempdir().expect("temp dir");
    let io: Arc<dyn Io> = Arc::new(SyncIo::new(dir.path()).expect("sync io"));
    let (wal, recovery) = Wal::open(Arc::clone(&io), config.clone(), 0).expect("open");
    assert!(recovery.records.is_empty());
    let wal = Arc::new(wal);
    let threads: Vec<_> = (0..COMMITTERS)
        .map(|committer| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for sequence in 0..COMMITS_PER_COMMITTER {
                    let record = record(committer, sequence);
                    let appended = wal.append(&record).expect("append");
                    wal.flush_to(appended.end_lsn).expect("flush");
                    assert!(wal.durable_lsn() >= appended.end_lsn);
                    acknowledged.push((appended.lsn, record));
                }
                acknowledged
            })
        })
        .collect();
    let mut acknowledged: Vec<(Lsn, LogRecord)> = threads
        .into_iter()
        .flat_map(|thread| thread.join().expect("committer"))
        .collect();
    acknowledged.sort_by_key(|(lsn, _)| *lsn);

    let stats = wal.stats();
    let total = COMMITTERS * COMMITS_PER_COMMITTER;
    assert_eq!(stats.commits, total);
    assert_eq!(stats.records_appended, total);
    assert!(stats.flushes > 0);
    assert!(
        stats.flushes < stats.commits,
        "group commit should batch: {} flushes for {} commits",
        stats.flushes,
        stats.commits
    );
    assert!(stats.commits_per_flush > 1.0);
    let end_lsn = wal.end_lsn();
    drop(wal);

    let (wal, recovery) = Wal::open(io, config, 0).expect("reopen");
    assert_eq!(recovery.report.end_lsn, end_lsn);
    assert_eq!(recovery.records.len(), acknowledged.len());
    assert!(
        recovery.records == acknowledged,
        "recovered records differ from acknowledged ones"
    );
    assert!(!recovery.report.tail_truncated);
    assert_eq!(wal.end_lsn(), end_lsn);
}

//! Unit tests of the WAL through the `Io` trait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::reader::LogEnd;
use super::segment::segment_name;
use super::*;
use crate::io::sim::{SimConfig, SimIo};
use crate::io::sync_file::SyncIo;
use crate::io::{IoFile, IoKind, OpenOptions};

fn temp_io() -> (tempfile::TempDir, Arc<dyn Io>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let io: Arc<dyn Io> = Arc::new(SyncIo::new(dir.path()).expect("sync io"));
    (dir, io)
}

fn small_config() -> WalConfig {
    WalConfig {
        segment_size_bytes: 16 * 4096,
        buffer_size_bytes: 8 * 4096,
        ..Default::default()
    }
}

fn commit(txn_id: u64, value_len: usize) -> LogRecord {
    LogRecord::Commit {
        txn_id,
        commit_ts: txn_id * 10,
        ops: vec![
            Op::Put {
                tree_id: 1,
                key: txn_id.to_le_bytes().to_vec(),
                value: vec![7; value_len],
            },
            Op::Delete {
                tree_id: 2,
                key: b"gone".to_vec(),
            },
        ],
    }
}

/// Compares record lists without printing whole payloads on failure.
#[track_caller]
fn assert_records(actual: &[(Lsn, LogRecord)], expected: &[(Lsn, LogRecord)]) {
    let actual_lsns: Vec<Lsn> = actual.iter().map(|(lsn, _)| *lsn).collect();
    let expected_lsns: Vec<Lsn> = expected.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(actual_lsns, expected_lsns, "record LSNs differ");
    for (index, (actual, expected)) in actual.iter().zip(expected).enumerate() {
        assert!(
            actual.1 == expected.1,
            "record {index} at lsn {} differs",
            actual.0
        );
    }
}

/// Appends records and flushes each; returns them with their LSNs.
fn append_all(wal: &Wal, records: &[LogRecord]) -> Vec<(Lsn, LogRecord)> {
    let mut written = Vec::new();
    for record in records {
        let appended = wal.append(record).expect("append");
        wal.flush_to(appended.end_lsn).expect("flush");
        written.push((appended.lsn, record.clone()));
    }
    written
}

/// The durability modes every mode-independent test runs in.
fn mode_configs() -> Vec<WalConfig> {
    let dsync = WalConfig {
        sync_mode: SyncMode::Dsync,
        ..small_config()
    };
    let preallocated = |config: &WalConfig| WalConfig {
        preallocate_segments: true,
        ..config.clone()
    };
    vec![
        small_config(),
        preallocated(&small_config()),
        dsync.clone(),
        preallocated(&dsync),
    ]
}

#[test]
fn append_flush_reopen_returns_same_records() {
    for config in mode_configs() {
        append_flush_reopen(config);
    }
}

fn append_flush_reopen(config: WalConfig) {
    let small_config = || config.clone();
    let (_dir, io) = temp_io();
    let (wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    assert!(recovery.records.is_empty());
    let records: Vec<_> = (1..=50)
        .map(|txn_id| commit(txn_id, 1000 * (txn_id as usize % 7)))
        .collect();
    let mut written = append_all(&wal, &records);
    let extra = LogRecord::CreateTree {
        tree_id: 9,
        name: "users".into(),
        kind: 1,
        unique: true,
        commit_ts: 1,
    };
    written.extend(append_all(
        &wal,
        &[
            extra,
            LogRecord::DropTree {
                tree_id: 9,
                commit_ts: 2,
            },
        ],
    ));
    assert_eq!(written[0].0, 0);
    let end_lsn = wal.end_lsn();
    assert_eq!(wal.durable_lsn(), end_lsn);
    drop(wal);
    // The records span several 64 KiB segments.
    assert!(segment::list_segments(&*io).unwrap().len() > 1);

    let (wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    assert_records(&recovery.records, &written);
    assert_eq!(recovery.report.end_lsn, end_lsn);
    assert_eq!(recovery.report.records_read, written.len() as u64);
    assert_eq!(recovery.report.log_end, LogEnd::ZeroLength);
    assert!(!recovery.report.tail_truncated);
    assert_eq!(wal.end_lsn(), end_lsn);
    let segment_len = |first_lsn| {
        io.open(&segment_name(first_lsn), OpenOptions::EXISTING_DIRECT)
            .unwrap()
            .len()
            .unwrap()
    };
    let last_first_lsn = *segment::list_segments(&*io).unwrap().last().unwrap();
    if config.preallocate_segments {
        // Recovery cut the tail and preallocation filled the segment again.
        assert_eq!(segment_len(last_first_lsn), config.segment_size_bytes);
    } else {
        assert_eq!(
            segment_len(last_first_lsn),
            align_up(end_lsn) - last_first_lsn
        );
    }

    // Appends continue at the end; reopening from a middle record reads the suffix.
    let more = append_all(&wal, &[commit(100, 10)]);
    assert_eq!(more[0].0, end_lsn);
    drop(wal);
    let middle_lsn = written[20].0;
    let (_wal, recovery) = Wal::open(io, small_config(), middle_lsn).unwrap();
    let mut expected = written[20..].to_vec();
    expected.extend(more);
    assert_records(&recovery.records, &expected);
}

#[test]
fn reopen_twice_is_idempotent() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let written = append_all(&wal, &(1..=5).map(|id| commit(id, 50)).collect::<Vec<_>>());
    drop(wal);
    for _ in 0..3 {
        let (wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
        assert_records(&recovery.records, &written);
        assert!(!recovery.report.tail_truncated);
        drop(wal);
    }
}

#[test]
fn torn_tail_is_cut_and_appends_continue() {
    for config in mode_configs() {
        torn_tail_is_cut(config);
    }
}

fn torn_tail_is_cut(config: WalConfig) {
    let small_config = || config.clone();
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let written = append_all(
        &wal,
        &(1..=10).map(|id| commit(id, 100)).collect::<Vec<_>>(),
    );
    drop(wal);
    let (last_lsn, _) = written[written.len() - 1];
    // Flip a byte inside the last record, through the Io trait.
    let file = io
        .open(&segment_name(0), OpenOptions::EXISTING_DIRECT)
        .unwrap();
    let block_offset = align_down(last_lsn + 30);
    let mut block = AlignedBuf::new(4096);
    file.read_at(&mut block, block_offset).unwrap();
    block[(last_lsn + 30 - block_offset) as usize] ^= 0xff;
    file.write_at(&block, block_offset).unwrap();
    file.sync_data().unwrap();
    drop(file);

    let (wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    assert_records(&recovery.records, &written[..written.len() - 1]);
    assert_eq!(recovery.report.end_lsn, last_lsn);
    assert_eq!(
        recovery.report.log_end,
        LogEnd::InvalidFrame(record::FrameDefect::Checksum)
    );
    assert!(recovery.report.tail_truncated);
    assert_eq!(wal.end_lsn(), last_lsn);
    let more = append_all(&wal, &[commit(77, 5), commit(78, 5)]);
    assert_eq!(more[0].0, last_lsn);
    drop(wal);

    let (_wal, recovery) = Wal::open(io, small_config(), 0).unwrap();
    let mut expected = written[..written.len() - 1].to_vec();
    expected.extend(more);
    assert_records(&recovery.records, &expected);
    assert!(
        !recovery.report.tail_truncated,
        "the cut tail must not come back"
    );
}

#[test]
fn cut_file_and_stale_segment_are_removed() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let written = append_all(
        &wal,
        &(1..=5).map(|id| commit(id, 2000)).collect::<Vec<_>>(),
    );
    drop(wal);
    // Cut the file in the middle of the last record's block and leave a stale later segment.
    let (last_lsn, _) = written[written.len() - 1];
    let cut_lsn = align_down(last_lsn + 100);
    let file = io
        .open(&segment_name(0), OpenOptions::EXISTING_DIRECT)
        .unwrap();
    file.set_len(cut_lsn).unwrap();
    let stale = io
        .open(&segment_name(1 << 20), OpenOptions::CREATE_DIRECT)
        .unwrap();
    stale.write_at(&AlignedBuf::new(4096), 0).unwrap();
    drop((file, stale));

    let (_wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let frame_size = commit(1, 2000).encode_frame().len() as u64;
    let surviving = written
        .iter()
        .filter(|(lsn, _)| lsn + frame_size <= cut_lsn)
        .count();
    assert!(surviving >= 1 && surviving < written.len());
    assert_records(&recovery.records, &written[..surviving]);
    assert_eq!(recovery.report.log_end, LogEnd::ShortRead);
    assert!(recovery.report.tail_truncated);
    assert_eq!(recovery.report.segments_removed, 1);
    assert!(!io.exists(&segment_name(1 << 20)).unwrap());
}

#[test]
fn stale_lsn_is_the_end() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let written = append_all(&wal, &[commit(1, 10), commit(2, 10)]);
    drop(wal);
    // A valid frame sealed for another position, placed at the end: stale bytes.
    let end_lsn = written[1].0 + commit(2, 10).encode_frame().len() as u64;
    let mut frame = commit(3, 10).encode_frame();
    let body_checksum = crc32c::crc32c(&frame[16..]);
    record::frame_seal(&mut frame, end_lsn + 4096, body_checksum);
    let file = io
        .open(&segment_name(0), OpenOptions::EXISTING_DIRECT)
        .unwrap();
    let mut block = AlignedBuf::new(4096);
    file.read_at(&mut block, 0).unwrap();
    block[end_lsn as usize..end_lsn as usize + frame.len()].copy_from_slice(&frame);
    file.write_at(&block, 0).unwrap();
    drop(file);
    let (_wal, recovery) = Wal::open(io, small_config(), 0).unwrap();
    assert_records(&recovery.records, &written);
    assert_eq!(
        recovery.report.log_end,
        LogEnd::InvalidFrame(record::FrameDefect::LsnMismatch)
    );
    assert!(recovery.report.tail_truncated);
}

#[test]
fn truncate_before_deletes_whole_segments_only() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let written = append_all(
        &wal,
        &(1..=60).map(|id| commit(id, 3000)).collect::<Vec<_>>(),
    );
    let segment_count = segment::list_segments(&*io).unwrap().len();
    assert!(segment_count >= 3);
    let (redo_lsn, _) = written[40];
    let removed = wal.truncate_before(redo_lsn).unwrap();
    assert!(removed >= 1);
    let remaining = segment::list_segments(&*io).unwrap();
    assert_eq!(remaining.len() as u64, segment_count as u64 - removed);
    assert!(remaining[0] <= redo_lsn);
    assert!(wal.truncate_before(wal.end_lsn() + 1).is_err());
    drop(wal);
    let (_wal, recovery) = Wal::open(Arc::clone(&io), small_config(), redo_lsn).unwrap();
    assert_records(&recovery.records, &written[40..]);
    // Recovery cannot start below the oldest remaining segment.
    assert!(matches!(
        Wal::open(io, small_config(), 0),
        Err(Error::Corruption { .. })
    ));
}

/// A commit of `op_count` puts of `value_len` bytes each.
fn large_commit(txn_id: u64, op_count: usize, value_len: usize) -> LogRecord {
    LogRecord::Commit {
        txn_id,
        commit_ts: txn_id * 10,
        ops: (0..op_count)
            .map(|index| Op::Put {
                tree_id: 1,
                key: (index as u64).to_be_bytes().to_vec(),
                value: vec![(txn_id as u8) ^ (index as u8); value_len],
            })
            .collect(),
    }
}

#[test]
fn commit_larger_than_a_frame_spans_frames() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let limit = wal.frame_size_limit_bytes() as u64;
    let mut records = vec![commit(1, 10), commit(2, 8 * 4096)];
    records.push(large_commit(3, 200, 1000));
    records.push(commit(4, 100));
    // One op larger than a frame: its value is split between parts.
    records.push(large_commit(5, 1, 3 * limit as usize));
    records.push(commit(6, 100));
    let written = append_all(&wal, &records);
    assert!(records[1].frame_size_bytes() > limit);
    assert!(records[2].frame_size_bytes() > 6 * limit);
    // A small commit keeps its single frame, byte for byte.
    assert_eq!(
        written[3].0 + records[3].frame_size_bytes(),
        written[4].0,
        "small commit is one frame"
    );
    assert_eq!(wal.stats().records_appended, records.len() as u64);
    let end_lsn = wal.end_lsn();
    drop(wal);
    let (_wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    assert_records(&recovery.records, &written);
    assert_eq!(recovery.report.end_lsn, end_lsn);
    // Recovery may start at a large commit's first part.
    drop(_wal);
    let (_wal, recovery) = Wal::open(io, small_config(), written[2].0).unwrap();
    assert_records(&recovery.records, &written[2..]);
}

#[test]
fn other_records_too_large_are_rejected() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(io, small_config(), 0).unwrap();
    let record = LogRecord::CreateTree {
        tree_id: 1,
        name: "n".repeat(40_000),
        kind: 0,
        unique: false,
        commit_ts: 1,
    };
    assert!(matches!(
        wal.append(&record),
        Err(Error::ValueTooLarge { .. })
    ));
}

/// Large commits appended while other threads append and flush small ones: every group of
/// parts stays contiguous (the reader rejects anything else) and all records come back.
#[test]
fn parts_stay_contiguous_under_concurrent_appends() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let wal = Arc::new(wal);
    let threads: Vec<_> = (0..3u64)
        .map(|thread| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                let mut written = Vec::new();
                for sequence in 0..60 {
                    let id = thread * 1000 + sequence;
                    let record = if thread == 0 && sequence % 6 == 0 {
                        large_commit(id, 150, 700)
                    } else {
                        commit(id, 300)
                    };
                    let appended = wal.append(&record).unwrap();
                    if sequence % 2 == 0 {
                        wal.flush_to(appended.end_lsn).unwrap();
                    }
                    written.push((appended.lsn, record));
                }
                written
            })
        })
        .collect();
    let mut written: Vec<_> = threads
        .into_iter()
        .flat_map(|thread| thread.join().unwrap())
        .collect();
    written.sort_by_key(|(lsn, _)| *lsn);
    wal.flush_to(wal.end_lsn()).unwrap();
    drop(wal);
    let (_wal, recovery) = Wal::open(io, small_config(), 0).unwrap();
    assert_records(&recovery.records, &written);
}

/// Damage inside the parts of the last commit: recovery ends the log at its first part,
/// cuts the parts off, and appends continue there.
#[test]
fn torn_parts_end_the_log_before_the_commit() {
    for damage_fraction in [0.02, 0.5, 0.97] {
        let (_dir, io) = temp_io();
        let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
        let written = append_all(&wal, &[commit(1, 100), commit(2, 5000)]);
        let large = wal.append(&large_commit(3, 300, 900)).unwrap();
        wal.flush_to(large.end_lsn).unwrap();
        drop(wal);
        // Overwrite a few bytes inside the group (a torn write of one of its blocks).
        let damaged_lsn = large.lsn + ((large.end_lsn - large.lsn) as f64 * damage_fraction) as u64;
        let segments = segment::list_segments(&*io).unwrap();
        let first_lsn = *segments
            .iter()
            .rev()
            .find(|&&first| first <= damaged_lsn)
            .unwrap();
        let file = io
            .open(&segment_name(first_lsn), OpenOptions::EXISTING_DIRECT)
            .unwrap();
        let mut block = crate::io::AlignedBuf::new(4096);
        let block_offset = align_down(damaged_lsn - first_lsn);
        file.read_at(&mut block, block_offset).unwrap();
        block[(damaged_lsn - first_lsn - block_offset) as usize] ^= 0x5a;
        file.write_at(&block, block_offset).unwrap();
        drop(file);

        let (wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
        assert_records(&recovery.records, &written);
        // Damage in the first part ends the log there as any torn frame does.
        if damage_fraction > 0.2 {
            assert_eq!(recovery.report.log_end, LogEnd::IncompleteCommit);
        }
        assert_eq!(recovery.report.end_lsn, large.lsn);
        assert!(recovery.report.tail_truncated);
        let more = append_all(&wal, &[commit(4, 100), large_commit(5, 100, 900)]);
        assert_eq!(more[0].0, large.lsn);
        drop(wal);
        let (_wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
        let mut expected = written.clone();
        expected.extend(more);
        assert_records(&recovery.records, &expected);
        assert_eq!(recovery.report.log_end, LogEnd::ZeroLength);
    }
}

#[test]
fn appends_without_flush_overflow_into_flushes() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let mut written = Vec::new();
    for id in 0..200 {
        let record = commit(id, 500);
        written.push((wal.append(&record).unwrap().lsn, record));
    }
    assert!(wal.stats().flushes > 0, "a full buffer forces flushes");
    wal.flush_to(wal.end_lsn()).unwrap();
    drop(wal);
    let (_wal, recovery) = Wal::open(io, small_config(), 0).unwrap();
    assert_records(&recovery.records, &written);
}

/// Wraps a file; once `fail` is set, every sync fails.
struct FailingFile {
    inner: Arc<dyn IoFile>,
    fail: Arc<AtomicBool>,
}

impl IoFile for FailingFile {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(Error::io(
                self.name(),
                std::io::Error::other("injected sync failure"),
            ));
        }
        self.inner.sync_data()
    }
    fn len(&self) -> Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
}

struct FailingIo {
    inner: Arc<dyn Io>,
    fail: Arc<AtomicBool>,
}

impl Io for FailingIo {
    fn kind(&self) -> IoKind {
        self.inner.kind()
    }
    fn open(&self, name: &str, options: OpenOptions) -> Result<Arc<dyn IoFile>> {
        let inner = self.inner.open(name, options)?;
        Ok(Arc::new(FailingFile {
            inner,
            fail: Arc::clone(&self.fail),
        }))
    }
    fn exists(&self, name: &str) -> Result<bool> {
        self.inner.exists(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, source: &str, target: &str) -> Result<()> {
        self.inner.rename(source, target)
    }
    fn list(&self) -> Result<Vec<String>> {
        self.inner.list()
    }
    fn sync_dir(&self) -> Result<()> {
        self.inner.sync_dir()
    }
}

#[test]
fn failed_sync_poisons_the_wal() {
    let (_dir, inner) = temp_io();
    let fail = Arc::new(AtomicBool::new(false));
    let io: Arc<dyn Io> = Arc::new(FailingIo {
        inner,
        fail: Arc::clone(&fail),
    });
    let (wal, _) = Wal::open(io, small_config(), 0).unwrap();
    append_all(&wal, &[commit(1, 10)]);
    let durable_before = wal.durable_lsn();
    fail.store(true, Ordering::SeqCst);
    let appended = wal.append(&commit(2, 10)).unwrap();
    assert!(matches!(
        wal.flush_to(appended.end_lsn),
        Err(Error::Io { .. })
    ));
    assert!(wal.is_poisoned());
    assert_eq!(wal.durable_lsn(), durable_before);
    // Even once the device "recovers", nothing is retried.
    fail.store(false, Ordering::SeqCst);
    assert!(matches!(
        wal.flush_to(appended.end_lsn),
        Err(Error::Poisoned(_))
    ));
    assert!(matches!(
        wal.append(&commit(3, 10)),
        Err(Error::Poisoned(_))
    ));
    assert!(matches!(
        wal.flush_to(durable_before),
        Err(Error::Poisoned(_))
    ));
}

#[test]
fn new_log_starts_at_aligned_start_lsn() {
    let (_dir, io) = temp_io();
    let (wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 5000).unwrap();
    assert_eq!(recovery.report.end_lsn, 8192);
    let written = append_all(&wal, &[commit(1, 1)]);
    assert_eq!(written[0].0, 8192);
    drop(wal);
    assert!(io.exists(&segment_name(8192)).unwrap());
    let (_wal, recovery) = Wal::open(io, small_config(), 8192).unwrap();
    assert_records(&recovery.records, &written);
}

#[test]
fn group_commit_shares_flushes() {
    for sync_mode in [SyncMode::Data, SyncMode::Dsync] {
        let config = WalConfig {
            sync_mode,
            ..WalConfig::default()
        };
        group_commit(config);
    }
}

fn group_commit(config: WalConfig) {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), config.clone(), 0).unwrap();
    let wal = Arc::new(wal);
    let threads: Vec<_> = (0..8u64)
        .map(|thread| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                let mut written = Vec::new();
                for sequence in 0..50 {
                    let record = commit(thread * 1000 + sequence, 20);
                    let appended = wal.append(&record).unwrap();
                    wal.flush_to(appended.end_lsn).unwrap();
                    assert!(wal.durable_lsn() >= appended.end_lsn);
                    written.push((appended.lsn, record));
                }
                written
            })
        })
        .collect();
    let mut written: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    written.sort_by_key(|(lsn, _)| *lsn);
    let stats = wal.stats();
    assert_eq!(stats.commits, 400);
    assert_eq!(stats.records_appended, 400);
    assert!(stats.flushes <= stats.commits);
    drop(wal);
    let (_wal, recovery) = Wal::open(io, config, 0).unwrap();
    assert_records(&recovery.records, &written);
}

#[test]
fn lost_last_segment_cuts_spanning_record() {
    let (_dir, io) = temp_io();
    let (wal, _) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let written = append_all(
        &wal,
        &(1..=40).map(|id| commit(id, 3000)).collect::<Vec<_>>(),
    );
    drop(wal);
    let segments = segment::list_segments(&*io).unwrap();
    let last_first_lsn = segments[segments.len() - 1];
    assert!(last_first_lsn > 0);
    io.remove(&segment_name(last_first_lsn)).unwrap();

    let (wal, recovery) = Wal::open(Arc::clone(&io), small_config(), 0).unwrap();
    let frame_size = commit(1, 3000).encode_frame().len() as u64;
    let surviving = written
        .iter()
        .filter(|(lsn, _)| lsn + frame_size <= last_first_lsn)
        .count();
    assert_records(&recovery.records, &written[..surviving]);
    assert_eq!(recovery.report.log_end, LogEnd::ShortRead);
    // The record that spanned into the lost segment is rewritten there by new appends.
    let more = append_all(
        &wal,
        &(41..=45).map(|id| commit(id, 3000)).collect::<Vec<_>>(),
    );
    assert!(io.exists(&segment_name(last_first_lsn)).unwrap());
    drop(wal);
    let (_wal, recovery) = Wal::open(io, small_config(), 0).unwrap();
    let mut expected = written[..surviving].to_vec();
    expected.extend(more);
    assert_records(&recovery.records, &expected);
}

#[test]
fn delay_and_no_sync_modes_work() {
    let (_dir, io) = temp_io();
    let config = WalConfig {
        sync_mode: SyncMode::None,
        group_commit_delay: std::time::Duration::from_micros(200),
        ..small_config()
    };
    let (wal, _) = Wal::open(Arc::clone(&io), config.clone(), 0).unwrap();
    let written = append_all(
        &wal,
        &(1..=10).map(|id| commit(id, 100)).collect::<Vec<_>>(),
    );
    assert_eq!(wal.stats().flushes, 10);
    drop(wal);
    let (_wal, recovery) = Wal::open(io, config, 0).unwrap();
    assert_records(&recovery.records, &written);
}

/// Appends and flushes records on a simulated disk that loses power at sync point `crash_at`;
/// returns the disk image after the crash, the records acknowledged before it and the number
/// of sync points passed.
fn run_until_crash(
    config: &WalConfig,
    crash_at: Option<u64>,
) -> (SimIo, Vec<(Lsn, LogRecord)>, u64) {
    let io = Arc::new(SimIo::new(SimConfig::with_seed(crash_at.unwrap_or(0))));
    let mut acknowledged = Vec::new();
    if let Some(n) = crash_at {
        io.crash_at_sync(n);
    }
    let dyn_io: Arc<dyn Io> = io.clone();
    if let Ok((wal, _)) = Wal::open(dyn_io, config.clone(), 0) {
        for id in 1..=40 {
            // Every eighth commit spans several frames (parts flushed while it is appended).
            let record = if id % 8 == 4 {
                large_commit(id, 90, 1000)
            } else {
                commit(id, 700 * (id as usize % 5))
            };
            let Ok(appended) = wal.append(&record) else {
                break;
            };
            if wal.flush_to(appended.end_lsn).is_err() {
                break;
            }
            acknowledged.push((appended.lsn, record));
        }
    }
    let sync_count = io.sync_count();
    (io.crash(), acknowledged, sync_count)
}

/// Power loss at every sync point (fdatasync, directory fsync, or O_DSYNC write): every
/// acknowledged record is recovered, and what follows is a prefix of the unacknowledged ones.
fn crash_at_every_sync(config: WalConfig) {
    let (_, all, total) = run_until_crash(&config, None);
    assert!(
        total > 40,
        "{:?}: only {total} sync points",
        config.sync_mode
    );
    let mut incomplete_commits_cut = 0;
    for n in 0..=total {
        let (image, acknowledged, _) = run_until_crash(&config, Some(n));
        let image: Arc<dyn Io> = Arc::new(image);
        let (_wal, recovery) = Wal::open(Arc::clone(&image), config.clone(), 0)
            .unwrap_or_else(|error| panic!("crash at sync {n}: {error}"));
        let found = &recovery.records;
        assert!(
            found.len() >= acknowledged.len() && all.starts_with(found),
            "{:?}, crash at sync {n}: {} records recovered, {} acknowledged",
            config.sync_mode,
            found.len(),
            acknowledged.len()
        );
        if recovery.report.log_end == LogEnd::IncompleteCommit {
            incomplete_commits_cut += 1;
        }
    }
    assert!(
        incomplete_commits_cut > 0,
        "{:?}: no crash fell between the parts of a commit",
        config.sync_mode
    );
}

#[test]
fn acknowledged_records_survive_every_crash_in_each_mode() {
    for config in mode_configs() {
        crash_at_every_sync(config);
    }
}

#[test]
fn dsync_mode_flushes_without_fdatasync() {
    let config = WalConfig {
        sync_mode: SyncMode::Dsync,
        ..small_config()
    };
    let io = Arc::new(SimIo::new(SimConfig::default()));
    let dyn_io: Arc<dyn Io> = io.clone();
    let (wal, _) = Wal::open(dyn_io, config, 0).unwrap();
    append_all(
        &wal,
        &(1..=30).map(|id| commit(id, 3000)).collect::<Vec<_>>(),
    );
    let stats = io.stats();
    assert_eq!(stats.syncs, 0, "no fdatasync in dsync mode");
    let segments = segment::list_segments(&*io).unwrap().len() as u64;
    assert!(segments > 1);
    // Each flush is one O_DSYNC write per touched segment (a sync point); new segments add a
    // directory fsync.
    assert_eq!(stats.dir_syncs, segments);
    assert!(io.sync_count() >= wal.stats().flushes + segments);
}

mod group_commit;

/// A standby stand-in whose acknowledgements the test gives by hand.
#[derive(Default)]
struct GatedShipper {
    /// Acknowledged position, and waits for positions up to this one fail.
    acked: parking_lot::Mutex<(Lsn, Lsn)>,
    changed: parking_lot::Condvar,
}

impl GatedShipper {
    fn acknowledge(&self, lsn: Lsn) {
        self.acked.lock().0 = lsn;
        self.changed.notify_all();
    }

    /// Waits for positions up to `lsn` fail (a lost lease).
    fn fail_up_to(&self, lsn: Lsn) {
        self.acked.lock().1 = lsn;
        self.changed.notify_all();
    }
}

impl LogShipper for GatedShipper {
    fn ship(&self, _lsn: Lsn, _bytes: &[u8]) {}

    fn wait_replicated(&self, lsn: Lsn) -> crate::error::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut acked = self.acked.lock();
        while acked.0 < lsn {
            if lsn <= acked.1 || self.changed.wait_until(&mut acked, deadline).timed_out() {
                return Err(crate::error::Error::NotPrimary("no acknowledgement".into()));
            }
        }
        Ok(())
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// A log with a gated shipper installed, as a primary's.
fn gated_primary() -> (tempfile::TempDir, Arc<Wal>, Arc<GatedShipper>) {
    let (dir, io) = temp_io();
    let (wal, _) = Wal::open(io, small_config(), 0).unwrap();
    let wal = Arc::new(wal);
    let shipper = Arc::new(GatedShipper::default());
    shipper.acknowledge(wal.set_shipper(Some(shipper.clone())));
    (dir, wal, shipper)
}

/// Appends a commit and flushes it on a thread of its own; returns once the flush is written
/// locally (its wait for the standby may go on).
fn flush_written(
    wal: &Arc<Wal>,
    txn_id: u64,
    what: &str,
) -> (Lsn, std::thread::JoinHandle<crate::error::Result<()>>) {
    let end = wal.append(&commit(txn_id, 100)).unwrap().end_lsn;
    let flush = {
        let wal = wal.clone();
        std::thread::spawn(move || wal.flush_to(end))
    };
    wait_for(what, || wal.local_durable_lsn() >= end);
    (end, flush)
}

#[test]
fn a_primary_writes_the_next_flush_while_the_last_waits_for_its_standby() {
    let (_dir, wal, shipper) = gated_primary();
    let (first, first_flush) = flush_written(&wal, 1, "the first flush written locally");
    assert!(
        wal.durable_lsn() < first,
        "durable before the standby acknowledged"
    );
    // The second flush is written while the first still waits for its acknowledgement.
    let (second, second_flush) =
        flush_written(&wal, 2, "the second flush written while the first waits");
    assert!(wal.durable_lsn() < first);
    // An acknowledgement of the first alone makes the first durable, not the second.
    shipper.acknowledge(first);
    first_flush.join().unwrap().unwrap();
    assert!(wal.durable_lsn() >= first);
    assert!(wal.durable_lsn() < second);
    shipper.acknowledge(second);
    second_flush.join().unwrap().unwrap();
    assert_eq!(wal.durable_lsn(), second);
}

#[test]
fn after_a_failed_wait_no_later_flush_becomes_durable() {
    let (_dir, wal, shipper) = gated_primary();
    let durable_before = wal.durable_lsn();
    let (first, first_flush) = flush_written(&wal, 1, "the first flush written locally");
    let (second, second_flush) = flush_written(&wal, 2, "the second flush written");
    // The first wait fails (a lost lease) before the standby acknowledges the second.
    shipper.fail_up_to(first);
    let failed = first_flush.join().unwrap();
    assert!(
        matches!(failed, Err(crate::error::Error::NotPrimary(_))),
        "{failed:?}"
    );
    shipper.acknowledge(second);
    let later = second_flush.join().unwrap();
    assert!(
        matches!(later, Err(crate::error::Error::NotPrimary(_))),
        "{later:?}"
    );
    assert_eq!(
        wal.durable_lsn(),
        durable_before,
        "nothing became durable after the failure"
    );
    assert!(wal.is_stopped());
}

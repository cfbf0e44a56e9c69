//! Replay on real files in a temporary directory: non-destructive, counts what it did, skips
//! what it cannot replay, and runs a sync only after every earlier write.

use std::collections::BTreeMap;
use std::path::Path;

use crate::io::trace::TracingIo;
use parking_lot::Mutex as PlainMutex;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use super::*;

fn record(op: TraceOp, file: &str, offset: u64, len: u64) -> TraceRecord {
    TraceRecord {
        start_ns: 0,
        op,
        file: file.to_string(),
        offset,
        len,
        latency_ns: 0,
    }
}

/// Creates `name` with `len` random bytes through `io`.
fn create_file(io: &dyn Io, name: &str, len: usize, rng: &mut StdRng) {
    let mut bytes = AlignedBuf::new(len);
    rng.fill_bytes(&mut bytes);
    let file = io.open(name, OpenOptions::CREATE_DIRECT).expect("create");
    file.write_at(&bytes, 0).expect("write");
    file.sync_data().expect("sync");
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read file"))
        })
        .collect()
}

/// A traced run on two files: random page reads, overwrites with new bytes, log appends and
/// syncs. Returns the records and the number of reads, writes and syncs it made.
fn traced_run(io: &Arc<dyn Io>, rng: &mut StdRng) -> (Vec<TraceRecord>, [u64; 3]) {
    let traced = TracingIo::new(io.clone());
    let data = traced
        .open("data.hyt", OpenOptions::EXISTING_DIRECT)
        .expect("open");
    let log = traced
        .open("wal.0001", OpenOptions::CREATE_DIRECT)
        .expect("open");
    traced.start();
    let mut page = AlignedBuf::new(4096);
    let mut counts = [0u64; 3];
    for step in 0..200u64 {
        let offset = rng.gen_range(0..64u64) * 4096;
        if step % 3 == 0 {
            rng.fill_bytes(&mut page);
            data.write_at(&page, offset).expect("write");
            counts[1] += 1;
        } else {
            data.read_at(&mut page, offset).expect("read");
            counts[0] += 1;
        }
        if step % 10 == 0 {
            log.write_at(&page, step / 10 * 4096).expect("append");
            log.sync_data().expect("sync");
            counts[1] += 1;
            counts[2] += 1;
        }
    }
    let mut pages: Vec<AlignedBuf> = (0..4).map(|_| AlignedBuf::new(4096)).collect();
    let mut batch: Vec<ReadRequest<'_>> = pages
        .iter_mut()
        .enumerate()
        .map(|(index, buf)| ReadRequest {
            offset: index as u64 * 8192,
            buf: &mut buf[..],
        })
        .collect();
    data.read_batch(&mut batch).expect("batch");
    counts[0] += 4;
    traced.stop();
    (traced.take_records(), counts)
}

#[test]
fn replay_is_non_destructive_and_counts_what_it_did() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let io = hayate_engine::open_default(temporary.path()).expect("io");
    let mut rng = StdRng::seed_from_u64(7);
    create_file(io.as_ref(), "data.hyt", 64 * 4096, &mut rng);
    let (mut records, [reads, writes, syncs]) = traced_run(&io, &mut rng);
    assert_eq!(records.len() as u64, reads + writes + syncs);
    // Records the replay must skip: a removed segment, past the end, empty.
    records.push(record(TraceOp::Read, "gone.seg", 0, 4096));
    records.push(record(TraceOp::Write, "gone.seg", 4096, 4096));
    records.push(record(TraceOp::Sync, "gone.seg", 0, 0));
    records.push(record(TraceOp::Read, "data.hyt", 64 * 4096, 4096));
    records.push(record(TraceOp::Write, "data.hyt", 63 * 4096, 8192));
    records.push(record(TraceOp::Write, "data.hyt", 4096, 0));
    let before = snapshot(temporary.path());

    let report = replay(&io, &records, 8, false).expect("replay");

    assert_eq!(
        snapshot(temporary.path()),
        before,
        "replay changed the files"
    );
    assert_eq!(report.trace_records, records.len() as u64);
    assert_eq!(report.replayed_records, records.len() as u64);
    assert_eq!(report.not_replayed_records, 0);
    assert_eq!(
        (report.reads, report.writes, report.syncs),
        (reads, writes, syncs)
    );
    assert_eq!(report.read_bytes, reads * 4096);
    assert_eq!(report.skipped_missing_file, 3);
    assert_eq!(report.skipped_out_of_range, 3);
    assert_eq!((report.concurrency, report.threads), (8, 4));
    assert!(report.iops > 0.0);
    assert!(!temporary.path().join("gone.seg").exists());
}

#[test]
fn unaligned_records_are_widened_to_whole_blocks() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let io = hayate_engine::open_default(temporary.path()).expect("io");
    let mut rng = StdRng::seed_from_u64(8);
    create_file(io.as_ref(), "data.hyt", 4 * 4096, &mut rng);
    let records = vec![
        record(TraceOp::Write, "data.hyt", 100, 50),
        record(TraceOp::Read, "data.hyt", 4000, 200),
    ];
    let before = snapshot(temporary.path());
    let report = replay(&io, &records, 1, false).expect("replay");
    assert_eq!(snapshot(temporary.path()), before);
    assert_eq!((report.reads, report.writes), (1, 1));
    assert_eq!((report.read_bytes, report.write_bytes), (8192, 4096));
}

#[test]
fn a_memory_limit_replays_a_prefix_and_says_so() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let io = hayate_engine::open_default(temporary.path()).expect("io");
    let mut rng = StdRng::seed_from_u64(9);
    create_file(io.as_ref(), "data.hyt", 16 * 4096, &mut rng);
    let mut records = Vec::new();
    for page in 0..8u64 {
        records.push(record(TraceOp::Read, "data.hyt", page * 4096, 4096));
        // The same extent twice needs memory once.
        records.push(record(TraceOp::Write, "data.hyt", page * 4096, 4096));
        records.push(record(TraceOp::Write, "data.hyt", page * 4096, 4096));
    }
    let before = snapshot(temporary.path());
    let options = ReplayOptions {
        concurrency: 4,
        memory_bytes_max: 3 * 4096,
        progress: false,
        block_device: None,
    };
    let report = replay_with(&io, &records, &options).expect("replay");
    assert_eq!(snapshot(temporary.path()), before);
    assert_eq!(report.captured_bytes, 3 * 4096);
    // Pages 0..3 fully, then the read of page 3 before its write needs memory.
    assert_eq!(report.replayed_records, 10);
    assert_eq!(report.not_replayed_records, 14);
    assert_eq!((report.reads, report.writes), (4, 6));
}

/// Events seen below the replay, in the order they happened.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    WriteDone,
    SyncStart,
}

/// Wraps the real `Io` and logs completed writes and started syncs.
struct RecordingIo {
    inner: Arc<dyn Io>,
    events: Arc<PlainMutex<Vec<Event>>>,
}

struct RecordingFile {
    inner: Arc<dyn IoFile>,
    events: Arc<PlainMutex<Vec<Event>>>,
}

impl Io for RecordingIo {
    fn kind(&self) -> hayate_engine::IoKind {
        self.inner.kind()
    }
    fn open(&self, name: &str, options: OpenOptions) -> hayate_engine::Result<Arc<dyn IoFile>> {
        Ok(Arc::new(RecordingFile {
            inner: self.inner.open(name, options)?,
            events: self.events.clone(),
        }))
    }
    fn exists(&self, name: &str) -> hayate_engine::Result<bool> {
        self.inner.exists(name)
    }
    fn remove(&self, name: &str) -> hayate_engine::Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, source: &str, target: &str) -> hayate_engine::Result<()> {
        self.inner.rename(source, target)
    }
    fn list(&self) -> hayate_engine::Result<Vec<String>> {
        self.inner.list()
    }
    fn sync_dir(&self) -> hayate_engine::Result<()> {
        self.inner.sync_dir()
    }
}

impl IoFile for RecordingFile {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> hayate_engine::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> hayate_engine::Result<()> {
        self.inner.write_at(buf, offset)?;
        self.events.lock().push(Event::WriteDone);
        Ok(())
    }
    fn read_batch(&self, requests: &mut [ReadRequest<'_>]) -> hayate_engine::Result<()> {
        self.inner.read_batch(requests)
    }
    fn write_batch(&self, requests: &[WriteRequest<'_>]) -> hayate_engine::Result<()> {
        self.inner.write_batch(requests)?;
        let mut events = self.events.lock();
        events.extend(requests.iter().map(|_| Event::WriteDone));
        Ok(())
    }
    fn sync_data(&self) -> hayate_engine::Result<()> {
        self.events.lock().push(Event::SyncStart);
        self.inner.sync_data()
    }
    fn len(&self) -> hayate_engine::Result<u64> {
        self.inner.len()
    }
    fn set_len(&self, len: u64) -> hayate_engine::Result<()> {
        self.inner.set_len(len)
    }
}

#[test]
fn a_sync_starts_only_after_every_earlier_write() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let real = hayate_engine::open_default(temporary.path()).expect("io");
    let mut rng = StdRng::seed_from_u64(10);
    create_file(real.as_ref(), "data.hyt", 256 * 4096, &mut rng);
    create_file(real.as_ref(), "wal.0001", 64 * 4096, &mut rng);
    let events = Arc::new(PlainMutex::new(Vec::new()));
    let io: Arc<dyn Io> = Arc::new(RecordingIo {
        inner: real,
        events: events.clone(),
    });
    // Group commits: a few large data writes and reads, a log write, a sync of the log.
    let mut records = Vec::new();
    let mut writes_before_sync = Vec::new();
    let mut writes = 0;
    for commit in 0..30u64 {
        for _ in 0..3 {
            let page = rng.gen_range(0..240u64);
            records.push(record(TraceOp::Write, "data.hyt", page * 4096, 16 * 4096));
            records.push(record(TraceOp::Read, "data.hyt", (page + 3) * 4096, 4096));
        }
        records.push(record(TraceOp::Write, "wal.0001", commit * 4096, 4096));
        writes += 4;
        records.push(record(TraceOp::Sync, "wal.0001", 0, 0));
        writes_before_sync.push(writes);
    }
    let before = snapshot(temporary.path());

    let report = replay(&io, &records, 16, false).expect("replay");

    assert_eq!(snapshot(temporary.path()), before);
    assert_eq!((report.writes, report.syncs), (writes, 30));
    let events = events.lock();
    let mut writes_done = 0;
    let mut syncs_started = 0;
    for event in events.iter() {
        match event {
            Event::WriteDone => writes_done += 1,
            Event::SyncStart => {
                // The latest (in trace order) of the syncs started so far is at least the
                // `syncs_started`-th, and all writes before it had completed.
                let needed = writes_before_sync[syncs_started];
                assert!(
                    writes_done >= needed,
                    "sync {syncs_started} started after {writes_done} writes, needs {needed}"
                );
                syncs_started += 1;
            }
        }
    }
    assert_eq!(syncs_started, 30);
}

#[test]
fn alpha_divides_run_by_replay_and_trace_iops_uses_the_trace_span() {
    let report = ReplayReport {
        trace_records: 1000,
        concurrency: 32,
        iops: 50_000.0,
        ..ReplayReport::default()
    };
    let value = alpha(45_000.0, &report);
    assert!((value.alpha - 0.9).abs() < 1e-12);
    assert_eq!((value.trace_records, value.replay_concurrency), (1000, 32));
    assert_eq!(alpha(1.0, &ReplayReport::default()).alpha, 0.0);

    let mut records = vec![
        record(TraceOp::Read, "a", 0, 4096),
        record(TraceOp::Write, "a", 0, 4096),
        record(TraceOp::Sync, "a", 0, 0),
    ];
    records[0].start_ns = 1_000_000_000;
    records[1].start_ns = 1_400_000_000;
    records[1].latency_ns = 100_000_000;
    records[2].start_ns = 9_000_000_000;
    assert_eq!(trace_iops(&records), Some(4.0));
    assert_eq!(trace_iops(&records[2..]), None);
}

#[test]
fn concurrency_out_of_range_is_an_error() {
    let temporary = tempfile::tempdir().expect("tempdir");
    let io = hayate_engine::open_default(temporary.path()).expect("io");
    let error = replay(&io, &[], 0, false).expect_err("concurrency 0");
    assert!(error.to_string().contains("concurrency"), "{error}");
}

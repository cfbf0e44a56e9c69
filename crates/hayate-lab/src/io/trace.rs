//! I/O tracing: `TracingIo` wraps any `Io` and records every read, write and sync of its files,
//! for the lab to study and replay access patterns.
//!
//! Lifecycle:
//! 1. `TracingIo::new(inner)`: tracing is off; an I/O costs one relaxed atomic load extra.
//! 2. `start()`: times are measured from now; every I/O appends a `TraceRecord` (a batch appends
//!    one record per request, all with the batch's start and latency).
//! 3. `stop()`, then `take_records()`; `write_csv` / `read_csv` store and load a trace.
//!
//! At most `TRACE_RECORDS_MAX` records are kept; later ones are counted as dropped.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use hayate_engine::{Error, Io, IoFile, IoKind, OpenOptions, ReadRequest, Result, WriteRequest};

/// Records kept before further ones are dropped (about 1 GiB of memory).
pub const TRACE_RECORDS_MAX: usize = 16 << 20;

/// Header line of the CSV form of a trace.
pub const CSV_HEADER: &str = "start_ns,op,file,offset,len,latency_ns";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceOp {
    Read,
    Write,
    Sync,
}

impl TraceOp {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceOp::Read => "read",
            TraceOp::Write => "write",
            TraceOp::Sync => "sync",
        }
    }

    fn parse(text: &str) -> Option<TraceOp> {
        match text {
            "read" => Some(TraceOp::Read),
            "write" => Some(TraceOp::Write),
            "sync" => Some(TraceOp::Sync),
            _ => None,
        }
    }
}

/// One traced I/O request. A sync has offset and length 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRecord {
    /// When the I/O was issued, since `start()`.
    pub start_ns: u64,
    pub op: TraceOp,
    /// File name relative to the data directory.
    pub file: String,
    pub offset: u64,
    pub len: u64,
    /// Time until the I/O (for a batch: the whole batch) completed.
    pub latency_ns: u64,
}

struct TraceShared {
    enabled: AtomicBool,
    origin: Instant,
    /// `start()` time, as nanoseconds since `origin`.
    start_offset_ns: AtomicU64,
    records: Mutex<Vec<TraceRecord>>,
    dropped_count: AtomicU64,
}

/// One request of a traced call: (offset, len).
type Extent = (u64, u64);

impl TraceShared {
    /// Takes the start time only when tracing is on.
    fn begin(&self) -> Option<Instant> {
        self.enabled.load(Ordering::Relaxed).then(Instant::now)
    }

    fn record(&self, started: Option<Instant>, op: TraceOp, file: &str, extents: &[Extent]) {
        let Some(started) = started else { return };
        let latency_ns = started.elapsed().as_nanos() as u64;
        let since_origin_ns = started.duration_since(self.origin).as_nanos() as u64;
        let start_ns = since_origin_ns.saturating_sub(self.start_offset_ns.load(Ordering::Relaxed));
        let mut records = self.records.lock();
        for &(offset, len) in extents {
            if records.len() >= TRACE_RECORDS_MAX {
                self.dropped_count.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let file = file.to_string();
            records.push(TraceRecord {
                start_ns,
                op,
                file,
                offset,
                len,
                latency_ns,
            });
        }
    }
}

/// An `Io` that records the I/O of its files (see the module docs).
pub struct TracingIo {
    inner: Arc<dyn Io>,
    shared: Arc<TraceShared>,
}

impl TracingIo {
    pub fn new(inner: Arc<dyn Io>) -> TracingIo {
        let shared = TraceShared {
            enabled: AtomicBool::new(false),
            origin: Instant::now(),
            start_offset_ns: AtomicU64::new(0),
            records: Mutex::new(Vec::new()),
            dropped_count: AtomicU64::new(0),
        };
        TracingIo {
            inner,
            shared: Arc::new(shared),
        }
    }

    /// Starts recording; record times count from now.
    pub fn start(&self) {
        let now_ns = self.shared.origin.elapsed().as_nanos() as u64;
        self.shared.start_offset_ns.store(now_ns, Ordering::Relaxed);
        self.shared.enabled.store(true, Ordering::Release);
    }

    /// Stops recording; I/Os already started may still add their records.
    pub fn stop(&self) {
        self.shared.enabled.store(false, Ordering::Release);
    }

    /// Returns the records so far, ordered by start time, and clears them.
    pub fn take_records(&self) -> Vec<TraceRecord> {
        let mut records = std::mem::take(&mut *self.shared.records.lock());
        records.sort_by_key(|record| record.start_ns);
        records
    }

    /// Records not kept because `TRACE_RECORDS_MAX` was reached.
    pub fn dropped_count(&self) -> u64 {
        self.shared.dropped_count.load(Ordering::Relaxed)
    }
}

impl Io for TracingIo {
    fn kind(&self) -> IoKind {
        self.inner.kind()
    }

    fn open(&self, name: &str, options: OpenOptions) -> Result<Arc<dyn IoFile>> {
        let inner = self.inner.open(name, options)?;
        Ok(Arc::new(TracingFile {
            inner,
            shared: self.shared.clone(),
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
        let started = self.shared.begin();
        let result = self.inner.sync_dir();
        self.shared.record(started, TraceOp::Sync, ".", &[(0, 0)]);
        result
    }
}

struct TracingFile {
    inner: Arc<dyn IoFile>,
    shared: Arc<TraceShared>,
}

impl IoFile for TracingFile {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let started = self.shared.begin();
        let result = self.inner.read_at(buf, offset);
        let extent = [(offset, buf.len() as u64)];
        self.shared
            .record(started, TraceOp::Read, self.name(), &extent);
        result
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let started = self.shared.begin();
        let result = self.inner.write_at(buf, offset);
        let extent = [(offset, buf.len() as u64)];
        self.shared
            .record(started, TraceOp::Write, self.name(), &extent);
        result
    }

    fn read_batch(&self, requests: &mut [ReadRequest<'_>]) -> Result<()> {
        let started = self.shared.begin();
        let result = self.inner.read_batch(requests);
        if started.is_some() {
            let extents: Vec<Extent> = requests
                .iter()
                .map(|r| (r.offset, r.buf.len() as u64))
                .collect();
            self.shared
                .record(started, TraceOp::Read, self.name(), &extents);
        }
        result
    }

    fn write_batch(&self, requests: &[WriteRequest<'_>]) -> Result<()> {
        let started = self.shared.begin();
        let result = self.inner.write_batch(requests);
        if started.is_some() {
            let extents: Vec<Extent> = requests
                .iter()
                .map(|r| (r.offset, r.buf.len() as u64))
                .collect();
            self.shared
                .record(started, TraceOp::Write, self.name(), &extents);
        }
        result
    }

    fn sync_data(&self) -> Result<()> {
        let started = self.shared.begin();
        let result = self.inner.sync_data();
        self.shared
            .record(started, TraceOp::Sync, self.name(), &[(0, 0)]);
        result
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
}

/// Quotes a CSV field if it holds a comma, quote or line break.
fn csv_field(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\"")).into()
    } else {
        text.into()
    }
}

/// Writes records as CSV, with the header line `CSV_HEADER`.
pub fn write_csv(records: &[TraceRecord], writer: impl Write) -> Result<()> {
    let mut writer = std::io::BufWriter::new(writer);
    let to_error = |error| Error::io("trace csv", error);
    writeln!(writer, "{CSV_HEADER}").map_err(to_error)?;
    for record in records {
        writeln!(
            writer,
            "{},{},{},{},{},{}",
            record.start_ns,
            record.op.as_str(),
            csv_field(&record.file),
            record.offset,
            record.len,
            record.latency_ns
        )
        .map_err(to_error)?;
    }
    writer.flush().map_err(to_error)
}

/// Splits one CSV line into fields, undoing `csv_field`'s quoting.
fn split_csv_line(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut characters = line.chars().peekable();
    let mut quoted = false;
    while let Some(character) = characters.next() {
        match (quoted, character) {
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (false, '"') if field.is_empty() => quoted = true,
            (true, '"') if characters.peek() == Some(&'"') => {
                characters.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (_, other) => field.push(other),
        }
    }
    if quoted {
        return None;
    }
    fields.push(field);
    Some(fields)
}

fn parse_record(line: &str) -> Option<TraceRecord> {
    let fields = split_csv_line(line)?;
    let [start_ns, op, file, offset, len, latency_ns] = <[String; 6]>::try_from(fields).ok()?;
    Some(TraceRecord {
        start_ns: start_ns.parse().ok()?,
        op: TraceOp::parse(&op)?,
        file,
        offset: offset.parse().ok()?,
        len: len.parse().ok()?,
        latency_ns: latency_ns.parse().ok()?,
    })
}

/// Reads a trace written by `write_csv`. A malformed line is an error naming its number.
pub fn read_csv(reader: impl BufRead) -> Result<Vec<TraceRecord>> {
    let mut records = Vec::new();
    let mut lines = reader.lines();
    let header = lines
        .next()
        .transpose()
        .map_err(|e| Error::io("trace csv", e))?;
    if header.as_deref().map(str::trim_end) != Some(CSV_HEADER) {
        return Err(Error::InvalidArgument(format!(
            "trace csv: expected header {CSV_HEADER:?}, found {header:?}"
        )));
    }
    for (index, line) in lines.enumerate() {
        let line = line.map_err(|e| Error::io("trace csv", e))?;
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        let record = parse_record(line).ok_or_else(|| {
            let line_number = index + 2;
            Error::InvalidArgument(format!("trace csv line {line_number}: malformed: {line:?}"))
        })?;
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hayate_engine::{SimConfig, SimIo};

    fn traced() -> TracingIo {
        TracingIo::new(Arc::new(SimIo::new(SimConfig::default())))
    }

    #[test]
    fn records_nothing_until_started() {
        let io = traced();
        let file = io.open("data", OpenOptions::CREATE_DIRECT).unwrap();
        file.write_at(&[1u8; 512], 0).unwrap();
        assert!(io.take_records().is_empty());
        io.start();
        file.write_at(&[1u8; 512], 512).unwrap();
        io.stop();
        file.write_at(&[1u8; 512], 1024).unwrap();
        let records = io.take_records();
        assert_eq!(records.len(), 1);
        assert_eq!((records[0].offset, records[0].len), (512, 512));
        assert!(io.take_records().is_empty(), "take_records clears");
    }

    #[test]
    fn captures_every_operation_with_batches_split_per_request() {
        let io = traced();
        let file = io.open("wal.000001", OpenOptions::CREATE_DIRECT).unwrap();
        io.start();
        file.write_at(&[1u8; 1024], 0).unwrap();
        let data = [2u8; 512];
        let writes = [
            WriteRequest {
                offset: 1024,
                buf: &data,
            },
            WriteRequest {
                offset: 4096,
                buf: &data,
            },
        ];
        file.write_batch(&writes).unwrap();
        file.sync_data().unwrap();
        let mut first = [0u8; 512];
        let mut second = [0u8; 512];
        let mut reads = [
            ReadRequest {
                offset: 0,
                buf: &mut first,
            },
            ReadRequest {
                offset: 1024,
                buf: &mut second,
            },
        ];
        file.read_batch(&mut reads).unwrap();
        assert!(
            file.read_at(&mut first, 1 << 20).is_err(),
            "failed reads are traced too"
        );
        let records = io.take_records();
        let summary: Vec<(TraceOp, u64, u64)> =
            records.iter().map(|r| (r.op, r.offset, r.len)).collect();
        assert_eq!(
            summary,
            vec![
                (TraceOp::Write, 0, 1024),
                (TraceOp::Write, 1024, 512),
                (TraceOp::Write, 4096, 512),
                (TraceOp::Sync, 0, 0),
                (TraceOp::Read, 0, 512),
                (TraceOp::Read, 1024, 512),
                (TraceOp::Read, 1 << 20, 512),
            ]
        );
        assert!(records.iter().all(|record| record.file == "wal.000001"));
        assert_eq!(
            records[1].start_ns, records[2].start_ns,
            "one batch, one start"
        );
        assert_eq!(
            records[1].latency_ns, records[2].latency_ns,
            "one batch, one latency"
        );
        assert!(records
            .windows(2)
            .all(|pair| pair[0].start_ns <= pair[1].start_ns));
    }

    #[test]
    fn csv_round_trip() {
        let io = traced();
        let file = io.open("data", OpenOptions::CREATE_DIRECT).unwrap();
        io.start();
        for index in 0..10u64 {
            file.write_at(&[index as u8; 512], index * 512).unwrap();
        }
        file.sync_data().unwrap();
        let mut records = io.take_records();
        records.push(TraceRecord {
            start_ns: u64::MAX,
            op: TraceOp::Read,
            file: "odd, \"name\"".to_string(),
            offset: 7,
            len: 8,
            latency_ns: 9,
        });
        let mut csv = Vec::new();
        write_csv(&records, &mut csv).unwrap();
        let text = String::from_utf8(csv.clone()).unwrap();
        assert!(text.starts_with("start_ns,op,file,offset,len,latency_ns\n"));
        assert_eq!(text.lines().count(), records.len() + 1);
        assert_eq!(read_csv(csv.as_slice()).unwrap(), records);
    }

    #[test]
    fn read_csv_rejects_malformed_input() {
        assert!(read_csv("nonsense\n".as_bytes()).is_err());
        let bad_op = format!("{CSV_HEADER}\n1,erase,data,0,4096,10\n");
        let error = read_csv(bad_op.as_bytes()).unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");
        let missing_field = format!("{CSV_HEADER}\n1,read,data,0,4096\n");
        assert!(read_csv(missing_field.as_bytes()).is_err());
        let open_quote = format!("{CSV_HEADER}\n1,read,\"data,0,4096,5\n");
        assert!(read_csv(open_quote.as_bytes()).is_err());
    }
}

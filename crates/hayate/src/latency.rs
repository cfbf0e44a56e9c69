//! Device emulation (the lab's device classes, and `hayate serve --emulate-device`, which
//! the lab's `ha` experiment gives a standby on a memory-backed file): `LatencyIo` wraps any `Io` and makes every I/O take at least a configured
//! latency, to compare the engine on device classes we do not have (a ~10 us low-latency SSD,
//! a ~100 us NAND SSD, a ~1 ms external/SAN volume).
//!
//! Lifecycle of one I/O through the wrapper:
//! 1. take one token per request from the IOPS token bucket (if a limit is set), waiting when
//!    the bucket is empty;
//! 2. run the I/O on the inner file;
//! 3. wait until the configured latency has passed since step 2 started. A batch of N requests
//!    costs one latency, because its requests are in flight together.
//!
//! Waits are the engine's precise waits (`hayate_engine::wait_until`): short ones spin.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use hayate_engine::{
    wait_for, wait_until, Error, Io, IoFile, IoKind, OpenOptions, ReadRequest, Result, WriteRequest,
};

/// Latencies and throughput limit of an emulated device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLatency {
    pub read: Duration,
    pub write: Duration,
    pub sync: Duration,
    /// Maximum requests per second, over all threads; `None` for no limit.
    pub iops_limit: Option<u64>,
}

impl DeviceLatency {
    pub const ZERO: DeviceLatency = DeviceLatency {
        read: Duration::ZERO,
        write: Duration::ZERO,
        sync: Duration::ZERO,
        iops_limit: None,
    };
}

/// Device classes the lab compares on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceClass {
    /// The real device underneath: no added latency.
    Real,
    /// A low-latency SSD (3D XPoint, Z-NAND class): 10 us read, write and sync.
    LowLatency,
    /// A datacenter NAND SSD with power-loss protection: 100 us read and write, 100 us sync
    /// (the flush is a round trip, not a media write).
    Nand,
    /// An external volume (SAN, cloud block storage): 1 ms read, write and sync, limited to
    /// 16,000 IOPS like a provisioned cloud volume.
    External,
}

impl DeviceClass {
    /// The default latencies of the class (see the variant docs).
    pub fn latency(self) -> DeviceLatency {
        let uniform = |latency: Duration, iops_limit: Option<u64>| DeviceLatency {
            read: latency,
            write: latency,
            sync: latency,
            iops_limit,
        };
        match self {
            DeviceClass::Real => DeviceLatency::ZERO,
            DeviceClass::LowLatency => uniform(Duration::from_micros(10), None),
            DeviceClass::Nand => uniform(Duration::from_micros(100), None),
            DeviceClass::External => uniform(Duration::from_millis(1), Some(16_000)),
        }
    }
}

/// A device class as a command-line value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceClassArg {
    /// The real device under --dir, no added latency.
    Real,
    /// Emulated low-latency SSD: +10 us per read, write and sync.
    LowLatency,
    /// Emulated NAND NVMe SSD: +100 us per I/O.
    Nand,
    /// Emulated external (SAN) storage: +1 ms per I/O, at most 16,000 IOPS.
    External,
}

impl DeviceClassArg {
    pub fn class(self) -> DeviceClass {
        match self {
            DeviceClassArg::Real => DeviceClass::Real,
            DeviceClassArg::LowLatency => DeviceClass::LowLatency,
            DeviceClassArg::Nand => DeviceClass::Nand,
            DeviceClassArg::External => DeviceClass::External,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DeviceClassArg::Real => "real",
            DeviceClassArg::LowLatency => "low-latency",
            DeviceClassArg::Nand => "nand",
            DeviceClassArg::External => "external",
        }
    }
}

/// Token bucket limiting requests per second; tokens may go negative, which makes later
/// callers wait for the debt to be repaid (a simple fair reservation scheme).
struct TokenBucket {
    rate_per_second: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

struct BucketState {
    tokens: f64,
    refilled_at: Instant,
}

impl TokenBucket {
    fn new(iops_limit: u64) -> TokenBucket {
        let rate_per_second = iops_limit.max(1) as f64;
        // Allow a burst of 10 ms worth of requests, at least one.
        let burst = (rate_per_second / 100.0).max(1.0);
        let state = BucketState {
            tokens: burst,
            refilled_at: Instant::now(),
        };
        TokenBucket {
            rate_per_second,
            burst,
            state: Mutex::new(state),
        }
    }

    /// Takes `count` tokens, waiting (outside the lock) if the bucket runs into debt.
    fn acquire(&self, count: usize) {
        let debt_seconds = {
            let mut state = self.state.lock();
            let now = Instant::now();
            let elapsed = now.duration_since(state.refilled_at).as_secs_f64();
            state.tokens = (state.tokens + elapsed * self.rate_per_second).min(self.burst);
            state.refilled_at = now;
            state.tokens -= count as f64;
            (-state.tokens / self.rate_per_second).max(0.0)
        };
        if debt_seconds > 0.0 {
            wait_for(Duration::from_secs_f64(debt_seconds));
        }
    }
}

struct Shared {
    latency: DeviceLatency,
    bucket: Option<TokenBucket>,
    /// Sleep through the added latency instead of spinning (`LatencyIo::sleeping`).
    sleep: bool,
}

/// Makes this thread's sleeps end within about a microsecond of their deadline (Linux's
/// default timer slack is 50 us, five times the low-latency class's latency).
fn precise_sleeps() {
    thread_local! {
        static SET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    SET.with(|set| {
        if !set.replace(true) {
            // SAFETY: PR_SET_TIMERSLACK takes a nanosecond count and changes only this
            // thread's timer slack.
            #[cfg(target_os = "linux")]
            unsafe {
                libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong)
            };
        }
    });
}

impl Shared {
    /// Runs `operation` as `requests` requests that together take at least `latency`.
    fn timed<T>(&self, requests: usize, latency: Duration, operation: impl FnOnce() -> T) -> T {
        if let Some(bucket) = &self.bucket {
            bucket.acquire(requests);
        }
        let start = Instant::now();
        let result = operation();
        if !latency.is_zero() {
            if self.sleep {
                precise_sleeps();
                std::thread::sleep((start + latency).saturating_duration_since(Instant::now()));
            } else {
                wait_until(start + latency);
            }
        }
        result
    }
}

/// An `Io` whose files take at least the configured latency per I/O.
pub struct LatencyIo {
    inner: Arc<dyn Io>,
    shared: Arc<Shared>,
}

impl LatencyIo {
    pub fn new(inner: Arc<dyn Io>, latency: DeviceLatency) -> LatencyIo {
        let bucket = latency.iops_limit.map(TokenBucket::new);
        LatencyIo {
            inner,
            shared: Arc::new(Shared {
                latency,
                bucket,
                sleep: false,
            }),
        }
    }

    /// Like `with_class`, but threads sleep through the added latency instead of spinning
    /// (precisely: their timer slack is set to 1 us): a node standing for a server of its own
    /// (`hayate serve --emulate-device`) leaves the CPU it does not use to the others.
    pub fn sleeping(inner: Arc<dyn Io>, class: DeviceClass) -> LatencyIo {
        let mut io = LatencyIo::with_class(inner, class);
        Arc::get_mut(&mut io.shared).expect("not shared yet").sleep = true;
        io
    }

    pub fn with_class(inner: Arc<dyn Io>, class: DeviceClass) -> LatencyIo {
        LatencyIo::new(inner, class.latency())
    }
}

impl Io for LatencyIo {
    fn kind(&self) -> IoKind {
        self.inner.kind()
    }

    fn open(&self, name: &str, options: OpenOptions) -> Result<Arc<dyn IoFile>> {
        let inner = self.inner.open(name, options)?;
        // A write through an O_DSYNC handle is a write and a sync on the device.
        let latency = self.shared.latency;
        let write_latency = if options.dsync {
            latency.write + latency.sync
        } else {
            latency.write
        };
        Ok(Arc::new(LatencyFile {
            inner,
            shared: self.shared.clone(),
            write_latency,
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
        self.shared
            .timed(1, self.shared.latency.sync, || self.inner.sync_dir())
    }
}

struct LatencyFile {
    inner: Arc<dyn IoFile>,
    shared: Arc<Shared>,
    write_latency: Duration,
}

impl IoFile for LatencyFile {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.shared.timed(1, self.shared.latency.read, || {
            self.inner.read_at(buf, offset)
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.shared
            .timed(1, self.write_latency, || self.inner.write_at(buf, offset))
    }

    fn read_batch(&self, requests: &mut [ReadRequest<'_>]) -> Result<()> {
        let count = requests.len();
        self.shared.timed(count, self.shared.latency.read, || {
            self.inner.read_batch(requests)
        })
    }

    fn write_batch(&self, requests: &[WriteRequest<'_>]) -> Result<()> {
        let count = requests.len();
        self.shared.timed(count, self.write_latency, || {
            self.inner.write_batch(requests)
        })
    }

    fn sync_data(&self) -> Result<()> {
        self.shared
            .timed(1, self.shared.latency.sync, || self.inner.sync_data())
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
}

/// Parses a device class name as used on command lines: real, low-latency, nand, external.
impl std::str::FromStr for DeviceClass {
    type Err = Error;

    fn from_str(text: &str) -> Result<DeviceClass> {
        match text {
            "real" => Ok(DeviceClass::Real),
            "low-latency" => Ok(DeviceClass::LowLatency),
            "nand" => Ok(DeviceClass::Nand),
            "external" | "san" => Ok(DeviceClass::External),
            other => Err(Error::InvalidArgument(format!(
                "unknown device class {other:?} (expected real, low-latency, nand or external)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hayate_engine::{SimConfig, SimIo};

    fn latency_io(latency: DeviceLatency) -> LatencyIo {
        LatencyIo::new(Arc::new(SimIo::new(SimConfig::default())), latency)
    }

    #[test]
    fn every_operation_takes_at_least_the_configured_latency() {
        let latency = DeviceLatency {
            read: Duration::from_micros(50),
            write: Duration::from_micros(300),
            sync: Duration::from_millis(1),
            iops_limit: None,
        };
        let io = latency_io(latency);
        let file = io.open("data", OpenOptions::CREATE_DIRECT).unwrap();
        let start = Instant::now();
        file.write_at(&[7u8; 512], 0).unwrap();
        assert!(start.elapsed() >= latency.write);
        let start = Instant::now();
        let mut buf = [0u8; 512];
        file.read_at(&mut buf, 0).unwrap();
        assert!(start.elapsed() >= latency.read);
        assert_eq!(buf, [7u8; 512]);
        let start = Instant::now();
        file.sync_data().unwrap();
        assert!(start.elapsed() >= latency.sync);
    }

    #[test]
    fn a_batch_costs_one_latency() {
        let latency = DeviceLatency {
            write: Duration::from_millis(20),
            ..DeviceLatency::ZERO
        };
        let io = latency_io(latency);
        let file = io.open("data", OpenOptions::CREATE_DIRECT).unwrap();
        let data = [1u8; 512];
        let requests: Vec<WriteRequest> = (0..10)
            .map(|index| WriteRequest {
                offset: index * 512,
                buf: &data,
            })
            .collect();
        let start = Instant::now();
        file.write_batch(&requests).unwrap();
        let elapsed = start.elapsed();
        assert!(elapsed >= latency.write);
        // Ten sequential latencies would take 200 ms; allow generous slack for slow machines.
        assert!(elapsed < latency.write * 5, "batch took {elapsed:?}");
    }

    #[test]
    fn iops_limit_throttles_requests() {
        let latency = DeviceLatency {
            iops_limit: Some(1000),
            ..DeviceLatency::ZERO
        };
        let io = latency_io(latency);
        let file = io.open("data", OpenOptions::CREATE_DIRECT).unwrap();
        let start = Instant::now();
        // Burst is 10 requests; the other 100 need 100 ms at 1000 IOPS.
        for index in 0..110u64 {
            file.write_at(&[0u8; 512], index * 512).unwrap();
        }
        assert!(
            start.elapsed() >= Duration::from_millis(95),
            "took {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn device_classes_have_increasing_latency() {
        let classes = [
            DeviceClass::Real,
            DeviceClass::LowLatency,
            DeviceClass::Nand,
            DeviceClass::External,
        ];
        for pair in classes.windows(2) {
            assert!(pair[0].latency().read < pair[1].latency().read);
        }
        assert_eq!("nand".parse::<DeviceClass>().unwrap(), DeviceClass::Nand);
        assert!("floppy".parse::<DeviceClass>().is_err());
    }
}

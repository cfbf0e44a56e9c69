//! `SimIo`: a simulated disk for crash and fault tests. It is a test device held in memory,
//! never a storage backend for users.
//!
//! Model:
//! 1. Every file (an inode, `FileId`) keeps a durable image, the current image that reads see,
//!    and the list of writes and `set_len` calls not yet synced. `sync_data` makes the file's
//!    current image durable.
//! 2. The directory (names -> inodes) has a durable view and a current one. Creations, removals
//!    and renames change the current view only; `sync_dir` makes it durable. A file created and
//!    synced but whose directory entry was never synced vanishes in a crash (strict POSIX).
//! 3. `crash` models a power loss: starting from the durable images, each unsynced write is,
//!    in a random (seeded) order, dropped, applied whole or torn (only some of its sectors
//!    reach the media); each unsynced `set_len` is dropped or applied. The result is a new
//!    `SimIo` with only durable data; the crashed one and all its open files fail every later
//!    operation, so a thread of the crashed engine cannot write into the new image.
//! 4. Sync points: `sync_data` and `sync_dir` calls are counted (`sync_count`). With
//!    `crash_at_sync(n)`, `n` more syncs succeed and the one after freezes the disk: it and
//!    every later operation fail and nothing more becomes durable; `crash` then gives the image
//!    as of that sync point.
//! 5. Faults: `fail_after` makes matching operations fail with EIO after a countdown;
//!    `set_capacity_bytes` makes growing writes fail with ENOSPC once the disk is full.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::wait::wait_for;
use super::{Io, IoFile, IoKind, OpenOptions, ReadRequest, WriteRequest};
use crate::error::{Error, Result};

/// Configuration of a simulated disk.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seed of every random choice (crash outcomes); same seed and same operations give the
    /// same crash image.
    pub seed: u64,
    /// Granularity of torn writes: a sector is either written whole or not at all.
    pub sector_size_bytes: usize,
    /// Added to every read or read batch (spin below 200 us, sleep above; see `wait_for`).
    pub latency_read: Option<Duration>,
    /// Added to every write, write batch and `set_len`.
    pub latency_write: Option<Duration>,
    /// Added to every `sync_data` and `sync_dir`, and to every write of an O_DSYNC file.
    pub latency_sync: Option<Duration>,
    /// Total bytes over all files; writes growing beyond it fail with ENOSPC.
    pub capacity_bytes: Option<u64>,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            seed: 0,
            sector_size_bytes: 512,
            latency_read: None,
            latency_write: None,
            latency_sync: None,
            capacity_bytes: None,
        }
    }
}

impl SimConfig {
    /// The default disk (512-byte sectors, no latency, unlimited) with this seed.
    pub fn with_seed(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            ..SimConfig::default()
        }
    }
}

/// Which operations an injected fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `read_at` and each request of `read_batch`.
    Read,
    /// `write_at`, each request of `write_batch`, and `set_len`.
    Write,
    /// `sync_data` and `sync_dir`.
    Sync,
    /// All of the above.
    Any,
}

/// Operation counters of a simulated disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Read requests (a batch counts each request).
    pub reads: u64,
    /// Write requests (a batch counts each request).
    pub writes: u64,
    /// `sync_data` calls that succeeded.
    pub syncs: u64,
    /// `sync_dir` calls that succeeded.
    pub dir_syncs: u64,
    /// Bytes of the read requests counted in `reads`.
    pub bytes_read: u64,
    /// Bytes of the write requests counted in `writes`.
    pub bytes_written: u64,
}

type FileId = u64;

#[derive(Debug, Clone)]
enum PendingChange {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Default)]
struct SimFileData {
    durable: Vec<u8>,
    current: Vec<u8>,
    pending: Vec<PendingChange>,
    /// Open handles; an inode without names and handles is freed.
    open_handles: usize,
}

#[derive(Debug, Clone, Copy)]
struct Fault {
    kind: FaultKind,
    /// Matching operations that still succeed before the fault fires.
    remaining: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiskCondition {
    Running,
    /// Frozen at a sync point (`crash_at_sync`).
    Frozen,
    /// Replaced by the image returned from `crash`.
    Crashed,
}

struct SimState {
    config: SimConfig,
    rng: StdRng,
    files: BTreeMap<FileId, SimFileData>,
    durable_directory: BTreeMap<String, FileId>,
    current_directory: BTreeMap<String, FileId>,
    next_file_id: FileId,
    condition: DiskCondition,
    faults: Vec<Fault>,
    /// Sync points that still succeed before the disk freezes.
    syncs_before_freeze: Option<u64>,
    sync_count: u64,
    stats: SimStats,
}

fn io_error(name: &str, kind: std::io::ErrorKind, message: &str) -> Error {
    Error::io(name, std::io::Error::new(kind, message.to_string()))
}

fn wait_optional(latency: Option<Duration>) {
    if let Some(latency) = latency {
        wait_for(latency);
    }
}

fn injected_error(name: &str) -> Error {
    Error::io(name, std::io::Error::from_raw_os_error(libc::EIO))
}

impl SimState {
    fn new(config: SimConfig) -> SimState {
        SimState {
            rng: StdRng::seed_from_u64(config.seed),
            config,
            files: BTreeMap::new(),
            durable_directory: BTreeMap::new(),
            current_directory: BTreeMap::new(),
            next_file_id: 1,
            condition: DiskCondition::Running,
            faults: Vec::new(),
            syncs_before_freeze: None,
            sync_count: 0,
            stats: SimStats::default(),
        }
    }

    /// Fails if the disk is frozen or crashed.
    fn check_running(&self, name: &str) -> Result<()> {
        match self.condition {
            DiskCondition::Running => Ok(()),
            DiskCondition::Frozen => Err(io_error(
                name,
                std::io::ErrorKind::Other,
                "simulated disk frozen at a crash point",
            )),
            DiskCondition::Crashed => Err(io_error(
                name,
                std::io::ErrorKind::Other,
                "simulated disk crashed; use the image returned by crash()",
            )),
        }
    }

    /// Counts one operation against the injected faults; fails if one fires.
    fn check_faults(&mut self, name: &str, kind: FaultKind) -> Result<()> {
        let mut fired = false;
        for fault in self.faults.iter_mut() {
            if fault.kind == kind || fault.kind == FaultKind::Any {
                if fault.remaining == 0 {
                    fired = true;
                } else {
                    fault.remaining -= 1;
                }
            }
        }
        if fired {
            return Err(injected_error(name));
        }
        Ok(())
    }

    /// Counts one sync point; freezes the disk when `crash_at_sync` says so.
    fn check_sync_point(&mut self, name: &str) -> Result<()> {
        if let Some(remaining) = self.syncs_before_freeze {
            if remaining == 0 {
                self.condition = DiskCondition::Frozen;
                return self.check_running(name);
            }
            self.syncs_before_freeze = Some(remaining - 1);
        }
        self.sync_count += 1;
        Ok(())
    }

    fn file(&mut self, id: FileId) -> &mut SimFileData {
        self.files
            .get_mut(&id)
            .expect("open handle keeps its inode alive")
    }

    fn used_bytes(&self) -> u64 {
        self.files
            .values()
            .map(|file| file.current.len() as u64)
            .sum()
    }

    /// Fails with ENOSPC if growing file `id` to `new_len` exceeds the capacity.
    fn check_capacity(&self, name: &str, id: FileId, new_len: u64) -> Result<()> {
        let Some(capacity) = self.config.capacity_bytes else {
            return Ok(());
        };
        let current_len = self.files[&id].current.len() as u64;
        if new_len > current_len && self.used_bytes() + (new_len - current_len) > capacity {
            return Err(Error::io(
                name,
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        Ok(())
    }

    fn read(&mut self, name: &str, id: FileId, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check_running(name)?;
        self.check_faults(name, FaultKind::Read)?;
        let current = &self.files[&id].current;
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= current.len() as u64 => {
                buf.copy_from_slice(&current[offset as usize..end as usize]);
            }
            _ => {
                let kind = std::io::ErrorKind::UnexpectedEof;
                return Err(io_error(name, kind, "read past the end of the file"));
            }
        }
        self.stats.reads += 1;
        self.stats.bytes_read += buf.len() as u64;
        Ok(())
    }

    fn write(&mut self, name: &str, id: FileId, data: &[u8], offset: u64) -> Result<()> {
        self.check_running(name)?;
        self.check_faults(name, FaultKind::Write)?;
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|end| usize::try_from(*end).is_ok())
            .ok_or_else(|| Error::InvalidArgument(format!("write to {name} beyond 2^64")))?;
        self.check_capacity(name, id, end)?;
        let file = self.file(id);
        apply_write(&mut file.current, offset, data);
        file.pending.push(PendingChange::Write {
            offset,
            data: data.to_vec(),
        });
        self.stats.writes += 1;
        self.stats.bytes_written += data.len() as u64;
        Ok(())
    }

    /// A write through an O_DSYNC handle: a sync point, and durable when it returns. Like
    /// fdatasync, it also makes the file's current length durable; pending writes it covers
    /// can no longer be replayed over it in a crash. If the disk freezes at this sync point,
    /// the write was in flight at the power loss: it stays pending (lost, applied or torn).
    fn write_durable(&mut self, name: &str, id: FileId, data: &[u8], offset: u64) -> Result<()> {
        self.write(name, id, data, offset)?;
        self.check_sync_point(name)?;
        let file = self.file(id);
        let written = file.pending.pop();
        debug_assert!(matches!(written, Some(PendingChange::Write { .. })));
        let end = offset + data.len() as u64;
        let pending = std::mem::take(&mut file.pending);
        for change in &pending {
            if let PendingChange::SetLen(len) = change {
                file.durable.resize(*len as usize, 0);
            }
        }
        let current_len = file.current.len();
        file.durable.resize(current_len, 0);
        apply_write(&mut file.durable, offset, data);
        for change in pending {
            match change {
                PendingChange::SetLen(_) => {}
                PendingChange::Write {
                    offset: other_offset,
                    data: other_data,
                } => file
                    .pending
                    .extend(write_outside(other_offset, &other_data, offset..end)),
            }
        }
        Ok(())
    }

    fn set_len(&mut self, name: &str, id: FileId, len: u64) -> Result<()> {
        self.check_running(name)?;
        self.check_faults(name, FaultKind::Write)?;
        let new_len = usize::try_from(len)
            .map_err(|_| Error::InvalidArgument(format!("length {len} of {name} too large")))?;
        self.check_capacity(name, id, len)?;
        let file = self.file(id);
        file.current.resize(new_len, 0);
        file.pending.push(PendingChange::SetLen(len));
        Ok(())
    }

    fn sync_data(&mut self, name: &str, id: FileId) -> Result<()> {
        self.check_running(name)?;
        self.check_faults(name, FaultKind::Sync)?;
        self.check_sync_point(name)?;
        let file = self.file(id);
        file.durable = file.current.clone();
        file.pending.clear();
        self.stats.syncs += 1;
        Ok(())
    }

    fn sync_dir(&mut self) -> Result<()> {
        self.check_running(".")?;
        self.check_faults(".", FaultKind::Sync)?;
        self.check_sync_point(".")?;
        let previous =
            std::mem::replace(&mut self.durable_directory, self.current_directory.clone());
        for id in previous.into_values() {
            self.free_if_unreferenced(id);
        }
        self.stats.dir_syncs += 1;
        Ok(())
    }

    fn free_if_unreferenced(&mut self, id: FileId) {
        let named = self.durable_directory.values().any(|&other| other == id)
            || self.current_directory.values().any(|&other| other == id);
        let open = self
            .files
            .get(&id)
            .is_some_and(|file| file.open_handles > 0);
        if !named && !open {
            self.files.remove(&id);
        }
    }
}

/// Writes `data` at `offset` into `image`, zero-filling any gap.
fn apply_write(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

/// The parts of the write `(offset, data)` outside `range`, as up to two writes.
fn write_outside(offset: u64, data: &[u8], range: std::ops::Range<u64>) -> Vec<PendingChange> {
    let end = offset + data.len() as u64;
    let mut parts = Vec::new();
    if offset < range.start {
        let cut = (range.start.min(end) - offset) as usize;
        parts.push(PendingChange::Write {
            offset,
            data: data[..cut].to_vec(),
        });
    }
    if end > range.end {
        let start = range.end.max(offset);
        parts.push(PendingChange::Write {
            offset: start,
            data: data[(start - offset) as usize..].to_vec(),
        });
    }
    parts
}

/// Applies a random subset of the sectors of a write (a torn write).
fn apply_torn_write(
    image: &mut Vec<u8>,
    offset: u64,
    data: &[u8],
    sector_size_bytes: u64,
    rng: &mut StdRng,
) {
    let end = offset + data.len() as u64;
    let mut sector_start = offset;
    while sector_start < end {
        // Sector boundaries are absolute on the device, not relative to the write.
        let sector_end = ((sector_start / sector_size_bytes + 1) * sector_size_bytes).min(end);
        if rng.gen_bool(0.5) {
            let range = (sector_start - offset) as usize..(sector_end - offset) as usize;
            apply_write(image, sector_start, &data[range]);
        }
        sector_start = sector_end;
    }
}

/// The durable image of one file after a power loss, with pending changes dropped, applied or
/// torn in random order.
fn crash_image(file: &SimFileData, sector_size_bytes: u64, rng: &mut StdRng) -> Vec<u8> {
    let mut image = file.durable.clone();
    let mut order: Vec<usize> = (0..file.pending.len()).collect();
    rand::seq::SliceRandom::shuffle(order.as_mut_slice(), rng);
    for index in order {
        match &file.pending[index] {
            PendingChange::Write { offset, data } => match rng.gen_range(0..3) {
                0 => {}
                1 => apply_write(&mut image, *offset, data),
                _ => apply_torn_write(&mut image, *offset, data, sector_size_bytes, rng),
            },
            PendingChange::SetLen(len) => {
                if rng.gen_bool(0.5) {
                    image.resize(*len as usize, 0);
                }
            }
        }
    }
    image
}

/// A simulated disk (see the module docs). Cheap to share: clones are not provided; wrap it in
/// an `Arc` to share.
pub struct SimIo {
    state: Arc<Mutex<SimState>>,
}

impl SimIo {
    /// An empty, healthy disk.
    pub fn new(config: SimConfig) -> SimIo {
        SimIo {
            state: Arc::new(Mutex::new(SimState::new(config))),
        }
    }

    /// Simulates a power loss and returns the disk as it comes back (see the module docs).
    /// This disk and its open files fail every operation afterwards. Capacity and latency
    /// settings carry over; faults, `crash_at_sync` and counters start afresh, so recovery
    /// runs on a healthy disk unless the test injects new faults.
    pub fn crash(&self) -> SimIo {
        let mut guard = self.state.lock();
        // Reborrow so that fields can be borrowed separately.
        let old = &mut *guard;
        let mut config = old.config.clone();
        config.seed = old.rng.gen();
        let sector_size_bytes = old.config.sector_size_bytes.max(1) as u64;
        let mut new = SimState::new(config);
        let names: Vec<(String, FileId)> = old
            .durable_directory
            .iter()
            .map(|(name, &id)| (name.clone(), id))
            .collect();
        let mut new_ids: BTreeMap<FileId, FileId> = BTreeMap::new();
        for (name, old_id) in names {
            let new_id = *new_ids.entry(old_id).or_insert_with(|| {
                let image = crash_image(&old.files[&old_id], sector_size_bytes, &mut old.rng);
                let id = new.next_file_id;
                new.next_file_id += 1;
                let data = SimFileData {
                    durable: image.clone(),
                    current: image,
                    ..Default::default()
                };
                new.files.insert(id, data);
                id
            });
            new.durable_directory.insert(name.clone(), new_id);
            new.current_directory.insert(name, new_id);
        }
        old.condition = DiskCondition::Crashed;
        SimIo {
            state: Arc::new(Mutex::new(new)),
        }
    }

    /// Makes matching operations fail with EIO after `ops` more of them succeed (so
    /// `fail_after(0, ..)` fails the next one), until `clear_faults`.
    pub fn fail_after(&self, ops: u64, kind: FaultKind) {
        self.state.lock().faults.push(Fault {
            kind,
            remaining: ops,
        });
    }

    /// Changes the latency added to every read from now on, for files open or opened later
    /// (a device that turns slow: a test of what waits for it and what does not).
    pub fn set_read_latency(&self, latency: Option<Duration>) {
        self.state.lock().config.latency_read = latency;
    }

    /// Removes every fault set with `fail_after`.
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Sets the disk capacity over all files (`None`: unlimited). Writes and `set_len` calls
    /// that would grow the total beyond it fail with ENOSPC (`Error::DiskFull`).
    pub fn set_capacity_bytes(&self, capacity_bytes: Option<u64>) {
        self.state.lock().config.capacity_bytes = capacity_bytes;
    }

    /// Bytes currently used over all files (unsynced data included).
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used_bytes()
    }

    /// Number of successful sync points (`sync_data` plus `sync_dir`) since creation.
    pub fn sync_count(&self) -> u64 {
        self.state.lock().sync_count
    }

    /// Lets `n` more sync points succeed, then freezes the disk at the next one: it and every
    /// later operation fail and nothing more becomes durable. Call `crash` to get the image.
    pub fn crash_at_sync(&self, n: u64) {
        self.state.lock().syncs_before_freeze = Some(n);
    }

    /// True once the disk froze at the sync point set with `crash_at_sync`.
    pub fn is_frozen(&self) -> bool {
        self.state.lock().condition == DiskCondition::Frozen
    }

    /// Counters of this disk's operations since it was created (or came back from `crash`).
    pub fn stats(&self) -> SimStats {
        self.state.lock().stats
    }

    /// Current contents of a file (unsynced data included), for test assertions.
    pub fn file_contents(&self, name: &str) -> Option<Vec<u8>> {
        let state = self.state.lock();
        let id = state.current_directory.get(name)?;
        Some(state.files[id].current.clone())
    }
}

impl Io for SimIo {
    fn kind(&self) -> IoKind {
        IoKind::Simulated
    }

    fn open(&self, name: &str, options: OpenOptions) -> Result<Arc<dyn IoFile>> {
        let mut state = self.state.lock();
        state.check_running(name)?;
        let id = match state.current_directory.get(name) {
            Some(&id) => id,
            None if options.create => {
                let id = state.next_file_id;
                state.next_file_id += 1;
                state.files.insert(id, SimFileData::default());
                state.current_directory.insert(name.to_string(), id);
                id
            }
            None => {
                return Err(io_error(name, std::io::ErrorKind::NotFound, "no such file"));
            }
        };
        state.file(id).open_handles += 1;
        let latency_write = state.config.latency_write;
        let latency_sync = state.config.latency_sync;
        Ok(Arc::new(SimFile {
            name: name.to_string(),
            id,
            state: self.state.clone(),
            latency_write,
            latency_sync,
            dsync: options.dsync,
        }))
    }

    fn exists(&self, name: &str) -> Result<bool> {
        let state = self.state.lock();
        state.check_running(name)?;
        Ok(state.current_directory.contains_key(name))
    }

    fn remove(&self, name: &str) -> Result<()> {
        let mut state = self.state.lock();
        state.check_running(name)?;
        let Some(id) = state.current_directory.remove(name) else {
            return Err(io_error(name, std::io::ErrorKind::NotFound, "no such file"));
        };
        state.free_if_unreferenced(id);
        Ok(())
    }

    fn rename(&self, source: &str, target: &str) -> Result<()> {
        let mut state = self.state.lock();
        state.check_running(source)?;
        let Some(id) = state.current_directory.remove(source) else {
            return Err(io_error(
                source,
                std::io::ErrorKind::NotFound,
                "no such file",
            ));
        };
        if let Some(replaced) = state.current_directory.insert(target.to_string(), id) {
            state.free_if_unreferenced(replaced);
        }
        Ok(())
    }

    fn list(&self) -> Result<Vec<String>> {
        let state = self.state.lock();
        state.check_running(".")?;
        Ok(state.current_directory.keys().cloned().collect())
    }

    fn sync_dir(&self) -> Result<()> {
        let latency_sync = self.state.lock().config.latency_sync;
        wait_optional(latency_sync);
        self.state.lock().sync_dir()
    }
}

/// An open file of a `SimIo`; refers to its inode, so it follows renames like a real handle.
struct SimFile {
    name: String,
    id: FileId,
    state: Arc<Mutex<SimState>>,
    latency_write: Option<Duration>,
    latency_sync: Option<Duration>,
    /// Opened with `dsync`: every write is a sync point and durable when it returns.
    dsync: bool,
}

impl SimFile {
    /// The disk's read latency now (`SimIo::set_read_latency` changes it).
    fn latency_read(&self) -> Option<Duration> {
        self.state.lock().config.latency_read
    }

    fn write_locked(&self, state: &mut SimState, buf: &[u8], offset: u64) -> Result<()> {
        if self.dsync {
            state.write_durable(&self.name, self.id, buf, offset)
        } else {
            state.write(&self.name, self.id, buf, offset)
        }
    }
}

impl IoFile for SimFile {
    fn name(&self) -> &str {
        &self.name
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        wait_optional(self.latency_read());
        self.state.lock().read(&self.name, self.id, buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        wait_optional(self.latency_write);
        if self.dsync {
            wait_optional(self.latency_sync);
        }
        self.write_locked(&mut self.state.lock(), buf, offset)
    }

    fn read_batch(&self, requests: &mut [ReadRequest<'_>]) -> Result<()> {
        // The requests of a batch are in flight together: one latency for all.
        wait_optional(self.latency_read());
        let mut state = self.state.lock();
        for request in requests.iter_mut() {
            state.read(&self.name, self.id, request.buf, request.offset)?;
        }
        Ok(())
    }

    fn write_batch(&self, requests: &[WriteRequest<'_>]) -> Result<()> {
        wait_optional(self.latency_write);
        if self.dsync {
            wait_optional(self.latency_sync);
        }
        let mut state = self.state.lock();
        for request in requests {
            self.write_locked(&mut state, request.buf, request.offset)?;
        }
        Ok(())
    }

    fn sync_data(&self) -> Result<()> {
        wait_optional(self.latency_sync);
        self.state.lock().sync_data(&self.name, self.id)
    }

    fn len(&self) -> Result<u64> {
        let state = self.state.lock();
        state.check_running(&self.name)?;
        Ok(state.files[&self.id].current.len() as u64)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        wait_optional(self.latency_write);
        self.state.lock().set_len(&self.name, self.id, len)
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        if let Some(file) = state.files.get_mut(&self.id) {
            file.open_handles -= 1;
        }
        state.free_if_unreferenced(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECTOR: usize = 512;

    fn open(io: &SimIo, name: &str) -> Arc<dyn IoFile> {
        io.open(name, OpenOptions::CREATE_DIRECT).unwrap()
    }

    fn read_all(io: &SimIo, name: &str) -> Vec<u8> {
        let file = io.open(name, OpenOptions::EXISTING_DIRECT).unwrap();
        let mut buf = vec![0u8; file.len().unwrap() as usize];
        file.read_at(&mut buf, 0).unwrap();
        buf
    }

    fn is_injected_eio(error: &Error) -> bool {
        matches!(error, Error::Io { source, .. } if source.raw_os_error() == Some(libc::EIO))
    }

    #[test]
    fn reads_see_unsynced_writes_and_past_end_is_an_error() {
        let io = SimIo::new(SimConfig::default());
        let file = open(&io, "a");
        file.write_at(&[1u8; 1024], 0).unwrap();
        let mut buf = [0u8; 1024];
        file.read_at(&mut buf, 0).unwrap();
        assert_eq!(buf, [1u8; 1024]);
        let error = file.read_at(&mut buf, 512).unwrap_err();
        assert!(matches!(error, Error::Io { ref source, .. }
            if source.kind() == std::io::ErrorKind::UnexpectedEof));
        let mut requests = [ReadRequest {
            offset: 512,
            buf: &mut [0u8; 512],
        }];
        file.read_batch(&mut requests).unwrap();
        assert_eq!(io.stats().reads, 2);
        assert_eq!(io.stats().bytes_written, 1024);
    }

    #[test]
    fn synced_data_survives_every_crash() {
        for seed in 0..50 {
            let io = SimIo::new(SimConfig::with_seed(seed));
            let file = open(&io, "a");
            io.sync_dir().unwrap();
            file.write_at(&[1u8; 4096], 0).unwrap();
            file.sync_data().unwrap();
            file.write_at(&[2u8; 4096], 4096).unwrap();
            let image = io.crash();
            let contents = read_all(&image, "a");
            assert_eq!(&contents[..4096], &[1u8; 4096][..], "seed {seed}");
        }
    }

    #[test]
    fn dsync_writes_survive_every_crash_and_are_sync_points() {
        let dsync = OpenOptions {
            dsync: true,
            ..OpenOptions::CREATE_DIRECT
        };
        for seed in 0..50 {
            let io = SimIo::new(SimConfig::with_seed(seed));
            let file = io.open("a", dsync).unwrap();
            io.sync_dir().unwrap();
            // A buffered write through another handle, then a dsync write covering part of it:
            // the crash may not replay the older write over the durable one.
            open(&io, "a").write_at(&[9u8; 8192], 0).unwrap();
            file.write_at(&[1u8; 4096], 0).unwrap();
            file.write_at(&[2u8; 4096], 8192).unwrap();
            assert_eq!(io.sync_count(), 3);
            let contents = read_all(&io.crash(), "a");
            assert_eq!(contents.len(), 12288, "seed {seed}");
            assert_eq!(&contents[..4096], &[1u8; 4096][..], "seed {seed}");
            assert_eq!(&contents[8192..], &[2u8; 4096][..], "seed {seed}");
        }
        // A dsync write at a crash point was in flight: lost, applied or torn, never an error
        // in the image.
        let (mut lost, mut present) = (0, 0);
        for seed in 0..50 {
            let io = SimIo::new(SimConfig::with_seed(seed));
            let file = io.open("a", dsync).unwrap();
            io.sync_dir().unwrap();
            file.write_at(&[1u8; 4096], 0).unwrap();
            io.crash_at_sync(0);
            assert!(file.write_at(&[2u8; 4096], 4096).is_err());
            let contents = read_all(&io.crash(), "a");
            assert_eq!(&contents[..4096], &[1u8; 4096][..], "seed {seed}");
            if contents.len() == 4096 {
                lost += 1;
            } else {
                present += 1;
            }
        }
        assert!(lost > 0 && present > 0, "lost {lost}, present {present}");
    }

    #[test]
    fn unsynced_writes_vanish_apply_or_tear_at_sector_granularity() {
        let (mut dropped, mut whole, mut torn) = (0, 0, 0);
        for seed in 0..200 {
            let io = SimIo::new(SimConfig::with_seed(seed));
            let file = open(&io, "a");
            file.write_at(&[0u8; 4096], 0).unwrap();
            file.sync_data().unwrap();
            io.sync_dir().unwrap();
            file.write_at(&[9u8; 4096], 0).unwrap();
            let contents = read_all(&io.crash(), "a");
            assert_eq!(contents.len(), 4096);
            let sectors: Vec<u8> = contents
                .chunks(SECTOR)
                .map(|sector| {
                    assert!(sector.iter().all(|&byte| byte == sector[0]), "sector mixed");
                    sector[0]
                })
                .collect();
            match sectors.iter().filter(|&&byte| byte == 9).count() {
                0 => dropped += 1,
                8 => whole += 1,
                _ => torn += 1,
            }
        }
        assert!(
            dropped > 0 && whole > 0 && torn > 0,
            "{dropped} {whole} {torn}"
        );
    }

    #[test]
    fn same_seed_gives_the_same_crash_image() {
        let image = |seed: u64| {
            let io = SimIo::new(SimConfig::with_seed(seed));
            let file = open(&io, "a");
            io.sync_dir().unwrap();
            for index in 0..32u64 {
                file.write_at(&[index as u8 + 1; 1024], index * 1024)
                    .unwrap();
            }
            read_all(&io.crash(), "a")
        };
        assert_eq!(image(7), image(7));
        let differing = (0..8).filter(|&seed| image(seed) != image(7)).count();
        assert!(differing >= 6, "crash images hardly depend on the seed");
    }

    #[test]
    fn directory_changes_need_sync_dir() {
        let io = SimIo::new(SimConfig::default());
        let file = open(&io, "a");
        file.write_at(&[1u8; 512], 0).unwrap();
        file.sync_data().unwrap();
        let image = io.crash();
        assert!(!image.exists("a").unwrap(), "creation was never dir-synced");

        let file = open(&image, "a");
        file.write_at(&[1u8; 512], 0).unwrap();
        file.sync_data().unwrap();
        image.sync_dir().unwrap();
        image.rename("a", "b").unwrap();
        assert_eq!(image.list().unwrap(), vec!["b".to_string()]);
        // The handle follows the inode across the rename.
        file.write_at(&[2u8; 512], 512).unwrap();
        file.sync_data().unwrap();
        let after = image.crash();
        assert_eq!(after.list().unwrap(), vec!["a".to_string()]);
        assert_eq!(read_all(&after, "a"), [[1u8; 512], [2u8; 512]].concat());

        after.rename("a", "b").unwrap();
        after.sync_dir().unwrap();
        after.remove("b").unwrap();
        let last = after.crash();
        assert_eq!(last.list().unwrap(), vec!["b".to_string()]);
    }

    #[test]
    fn old_handles_fail_after_a_crash() {
        let io = SimIo::new(SimConfig::default());
        let file = open(&io, "a");
        io.sync_dir().unwrap();
        let image = io.crash();
        assert!(file.write_at(&[1u8; 512], 0).is_err());
        assert!(file.sync_data().is_err());
        assert!(io.open("a", OpenOptions::EXISTING_DIRECT).is_err());
        assert_eq!(image.file_contents("a"), Some(Vec::new()));
    }

    #[test]
    fn crash_gives_a_healthy_disk() {
        let io = SimIo::new(SimConfig::default());
        let file = open(&io, "a");
        io.fail_after(0, FaultKind::Any);
        assert!(file.write_at(&[1u8; 512], 0).is_err());
        let image = io.crash();
        let file = open(&image, "a");
        file.write_at(&[1u8; 512], 0).unwrap();
        file.sync_data().unwrap();
        assert_eq!(image.stats().syncs, 1);
    }

    #[test]
    fn fail_after_injects_eio_until_cleared() {
        let io = SimIo::new(SimConfig::default());
        let file = open(&io, "a");
        io.fail_after(2, FaultKind::Write);
        file.write_at(&[1u8; 512], 0).unwrap();
        let mut buf = [0u8; 512];
        file.read_at(&mut buf, 0).unwrap();
        file.write_at(&[1u8; 512], 512).unwrap();
        assert!(is_injected_eio(
            &file.write_at(&[1u8; 512], 1024).unwrap_err()
        ));
        assert!(is_injected_eio(
            &file.write_at(&[1u8; 512], 1024).unwrap_err()
        ));
        file.read_at(&mut buf, 0).unwrap();
        file.sync_data().unwrap();
        io.clear_faults();
        file.write_at(&[1u8; 512], 1024).unwrap();

        io.fail_after(0, FaultKind::Any);
        assert!(is_injected_eio(&file.read_at(&mut buf, 0).unwrap_err()));
        assert!(is_injected_eio(&file.sync_data().unwrap_err()));
        io.clear_faults();
        io.fail_after(1, FaultKind::Sync);
        file.sync_data().unwrap();
        assert!(is_injected_eio(&io.sync_dir().unwrap_err()));
    }

    #[test]
    fn fault_inside_a_batch_keeps_the_earlier_requests() {
        let io = SimIo::new(SimConfig::default());
        let file = open(&io, "a");
        io.fail_after(1, FaultKind::Write);
        let data = [5u8; 512];
        let requests = [
            WriteRequest {
                offset: 0,
                buf: &data,
            },
            WriteRequest {
                offset: 512,
                buf: &data,
            },
        ];
        assert!(file.write_batch(&requests).is_err());
        assert_eq!(io.file_contents("a").unwrap(), data.to_vec());
    }

    #[test]
    fn crash_at_sync_freezes_the_disk_at_that_sync() {
        let run = |io: &SimIo| -> Result<()> {
            let file = io.open("a", OpenOptions::CREATE_DIRECT)?;
            io.sync_dir()?;
            for index in 0..5u8 {
                file.write_at(&[index + 1; 512], u64::from(index) * 512)?;
                file.sync_data()?;
            }
            Ok(())
        };
        let full = SimIo::new(SimConfig::default());
        run(&full).unwrap();
        assert_eq!(full.sync_count(), 6);
        for n in 0..full.sync_count() {
            let io = SimIo::new(SimConfig::with_seed(n));
            io.crash_at_sync(n);
            assert!(run(&io).is_err(), "sync point {n}");
            assert!(io.is_frozen());
            assert_eq!(io.sync_count(), n);
            assert!(io.list().is_err(), "every operation fails once frozen");
            let image = io.crash();
            if n == 0 {
                assert!(!image.exists("a").unwrap());
                continue;
            }
            let contents = read_all(&image, "a");
            // Writes synced before the freeze are there; the one whose sync froze may tear.
            let synced = (n - 1) as usize;
            for index in 0..synced {
                assert_eq!(contents[index * 512], index as u8 + 1, "sync point {n}");
            }
            assert!(contents.len() <= (synced + 1) * 512);
        }
    }

    #[test]
    fn disk_full_returns_disk_full_errors() {
        let io = SimIo::new(SimConfig {
            capacity_bytes: Some(8192),
            ..SimConfig::default()
        });
        let file = open(&io, "a");
        file.write_at(&[1u8; 4096], 0).unwrap();
        file.write_at(&[1u8; 4096], 4096).unwrap();
        let error = file.write_at(&[1u8; 512], 8192).unwrap_err();
        assert!(matches!(error, Error::DiskFull { .. }), "{error}");
        // Overwrites do not grow the file and still succeed.
        file.write_at(&[2u8; 4096], 0).unwrap();
        assert!(matches!(file.set_len(16384), Err(Error::DiskFull { .. })));
        file.set_len(4096).unwrap();
        file.write_at(&[3u8; 4096], 4096).unwrap();
        io.set_capacity_bytes(None);
        file.write_at(&[4u8; 4096], 8192).unwrap();
        assert_eq!(io.used_bytes(), 12288);
    }

    #[test]
    fn latency_is_added_per_operation() {
        let latency = Duration::from_millis(2);
        let config = SimConfig {
            latency_write: Some(latency),
            ..SimConfig::default()
        };
        let io = SimIo::new(config);
        let file = open(&io, "a");
        let start = std::time::Instant::now();
        file.write_at(&[1u8; 512], 0).unwrap();
        assert!(start.elapsed() >= latency);
    }

    #[test]
    fn removed_files_are_freed_once_closed_and_dir_synced() {
        let io = SimIo::new(SimConfig::default());
        let file = open(&io, "a");
        file.write_at(&[1u8; 4096], 0).unwrap();
        io.remove("a").unwrap();
        assert_eq!(io.used_bytes(), 4096, "an open handle keeps the inode");
        drop(file);
        assert_eq!(io.used_bytes(), 0);
        assert!(io.remove("a").is_err());
    }
}

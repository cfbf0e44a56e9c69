//! Device and CPU counters from /proc and /sys: the same measure for Hayate and every peer.
//! The records it fills (`DeviceInfo`, `IoRates`) are defined here and recorded by `results`.
//!
//! - `describe_device`: the block device and file system under a directory (st_dev of the
//!   directory -> /sys/dev/block/MAJ:MIN -> disk name, model, rotational; the file system from
//!   /proc/self/mountinfo; `hayate-lab bench` refuses tmpfs and ramfs by it).
//! - `DiskCounters`: completed reads and writes of a block device from /proc/diskstats; two
//!   readings around a run give its `IoRates`. `DiskstatsDevice` finds the line of the device
//!   (or partition) holding a directory by its number.
//! - CPU time: `self_cpu_seconds` (getrusage, every thread of the lab process),
//!   `process_cpu_seconds` (one process and its threads, /proc/<pid>/stat) and
//!   `process_tree_cpu_seconds` (server processes and all their descendants, for peers such as
//!   PostgreSQL that run one process per connection).
//!
//! Parsing is split from reading so that the parsers are tested on sample text.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Bytes of a sector in /proc/diskstats (always 512, whatever the device's sector size).
const DISKSTATS_SECTOR_BYTES: u64 = 512;

/// The block device and file system under a directory.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub directory: String,
    /// Block device name from /sys (e.g. "vda", "nvme0n1"), "unknown" when not found.
    pub block_device: String,
    pub file_system: String,
    /// Device model from /sys, when it has one.
    pub model: Option<String>,
    /// 1 for a rotating disk, 0 for flash (from /sys/block/<dev>/queue/rotational).
    pub rotational: Option<bool>,
}

/// Device I/O during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IoRates {
    pub reads_per_second: f64,
    pub writes_per_second: f64,
    pub read_mib_per_second: f64,
    pub write_mib_per_second: f64,
    /// "diskstats" (the block device's counters, any engine) or "engine" (Hayate's own).
    pub source: String,
}

/// Describes the device under `directory`. Never fails: what cannot be found is "unknown" or
/// `None` (e.g. overlay or network file systems have no block device of their own).
pub fn describe_device(directory: &Path) -> DeviceInfo {
    let canonical = std::fs::canonicalize(directory).unwrap_or_else(|_| directory.to_path_buf());
    let mut info = DeviceInfo {
        directory: canonical.display().to_string(),
        block_device: "unknown".into(),
        file_system: "unknown".into(),
        model: None,
        rotational: None,
    };
    let Some((major, minor)) = device_number(&canonical) else {
        return info;
    };
    if let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") {
        if let Some(file_system) = file_system_from_mountinfo(&mountinfo, major, minor, &canonical)
        {
            info.file_system = file_system;
        }
    }
    if let Some(disk) = disk_of(major, minor) {
        let queue = Path::new("/sys/block").join(&disk);
        info.model = read_trimmed(&queue.join("device/model")).filter(|model| !model.is_empty());
        info.rotational = read_trimmed(&queue.join("queue/rotational")).map(|flag| flag == "1");
        info.block_device = disk;
    }
    info
}

/// Major and minor number of the device holding `path`.
fn device_number(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let device = std::fs::metadata(path).ok()?.dev();
    Some((libc::major(device), libc::minor(device)))
}

/// The whole disk of a device number: "vda" for vda or for its partition vda1.
fn disk_of(major: u32, minor: u32) -> Option<String> {
    let link = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let target = std::fs::canonicalize(&link).ok()?;
    let disk_path = if target.join("partition").exists() {
        target.parent()?.to_path_buf()
    } else {
        target
    };
    Some(disk_path.file_name()?.to_string_lossy().into_owned())
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_string())
}

/// The file system type of the mount of device `major:minor` whose mount point is the longest
/// prefix of `path` (a device can be mounted in several places).
fn file_system_from_mountinfo(
    mountinfo: &str,
    major: u32,
    minor: u32,
    path: &Path,
) -> Option<String> {
    let device = format!("{major}:{minor}");
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        // "36 35 98:0 /root /mnt/point rw,noatime master:1 - ext4 /dev/vda1 rw"
        let Some((mount, file_system_part)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = mount.split_whitespace().collect();
        let (Some(&mount_device), Some(&mount_point)) = (fields.get(2), fields.get(4)) else {
            continue;
        };
        let Some(file_system) = file_system_part.split_whitespace().next() else {
            continue;
        };
        let mount_point = unescape_mount_path(mount_point);
        if mount_device != device || !path.starts_with(&mount_point) {
            continue;
        }
        let depth = Path::new(&mount_point).components().count();
        if best
            .as_ref()
            .is_none_or(|(best_depth, _)| depth > *best_depth)
        {
            best = Some((depth, file_system.to_string()));
        }
    }
    best.map(|(_, file_system)| file_system)
}

/// Undoes the octal escapes of mountinfo paths ("\040" is a space).
fn unescape_mount_path(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escape = bytes.get(index + 1..index + 4);
        let code = escape
            .filter(|_| bytes[index] == b'\\')
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(|digits| u8::from_str_radix(digits, 8).ok());
        match code {
            Some(code) => {
                out.push(code);
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------------------------
// /proc/diskstats

/// Completed I/O of one block device since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCounters {
    pub reads_completed: u64,
    pub sectors_read: u64,
    pub writes_completed: u64,
    pub sectors_written: u64,
}

impl DiskCounters {
    /// Reads the counters of `device` (e.g. "vda"); `None` when /proc/diskstats has no such line.
    pub fn read(device: &str) -> Option<DiskCounters> {
        let text = std::fs::read_to_string("/proc/diskstats").ok()?;
        parse_diskstats(&text, device)
    }

    /// Rates between an earlier reading and this one, `seconds` apart.
    pub fn rates_since(&self, earlier: &DiskCounters, seconds: f64) -> IoRates {
        let per_second = |later: u64, before: u64| {
            if seconds > 0.0 {
                later.saturating_sub(before) as f64 / seconds
            } else {
                0.0
            }
        };
        let mib = (1u64 << 20) as f64;
        let sector_mib = DISKSTATS_SECTOR_BYTES as f64 / mib;
        IoRates {
            reads_per_second: per_second(self.reads_completed, earlier.reads_completed),
            writes_per_second: per_second(self.writes_completed, earlier.writes_completed),
            read_mib_per_second: per_second(self.sectors_read, earlier.sectors_read) * sector_mib,
            write_mib_per_second: per_second(self.sectors_written, earlier.sectors_written)
                * sector_mib,
            source: "diskstats".into(),
        }
    }
}

/// One line of /proc/diskstats:
/// "major minor name reads merged sectors_read ms writes merged sectors_written ms ...".
struct DiskstatsLine<'a> {
    major: u32,
    minor: u32,
    name: &'a str,
    counters: DiskCounters,
}

fn parse_diskstats_line(line: &str) -> Option<DiskstatsLine<'_>> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let number = |index: usize| fields.get(index)?.parse::<u64>().ok();
    Some(DiskstatsLine {
        major: fields.first()?.parse().ok()?,
        minor: fields.get(1)?.parse().ok()?,
        name: fields.get(2)?,
        counters: DiskCounters {
            reads_completed: number(3)?,
            sectors_read: number(5)?,
            writes_completed: number(7)?,
            sectors_written: number(9)?,
        },
    })
}

/// Finds `device`'s line in /proc/diskstats text by its name.
pub fn parse_diskstats(text: &str, device: &str) -> Option<DiskCounters> {
    (text.lines())
        .filter_map(parse_diskstats_line)
        .find(|line| line.name == device)
        .map(|line| line.counters)
}

/// Finds the line of device `major:minor` (columns 1 and 2) in /proc/diskstats text: its name
/// and counters.
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
pub fn parse_diskstats_by_number(
    text: &str,
    major: u32,
    minor: u32,
) -> Option<(String, DiskCounters)> {
    (text.lines())
        .filter_map(parse_diskstats_line)
        .find(|line| line.major == major && line.minor == minor)
        .map(|line| (line.name.to_string(), line.counters))
}

/// The block device holding a directory, as /proc/diskstats lists it: the device of the
/// directory's st_dev, so a partition's own line when the file system is on a partition.
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskstatsDevice {
    pub major: u32,
    pub minor: u32,
    /// The name in /proc/diskstats, e.g. "vda1", "nvme0n1p2", "dm-0".
    pub name: String,
}

#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
impl DiskstatsDevice {
    /// The device of `directory`; `None` when it has no line in /proc/diskstats (tmpfs,
    /// overlay, btrfs and network file systems have anonymous device numbers).
    pub fn of_directory(directory: &Path) -> Option<DiskstatsDevice> {
        let (major, minor) = device_number(directory)?;
        let text = std::fs::read_to_string("/proc/diskstats").ok()?;
        let (name, _) = parse_diskstats_by_number(&text, major, minor)?;
        Some(DiskstatsDevice { major, minor, name })
    }

    /// The device's counters now.
    pub fn read(&self) -> Option<DiskCounters> {
        let text = std::fs::read_to_string("/proc/diskstats").ok()?;
        parse_diskstats_by_number(&text, self.major, self.minor).map(|(_, counters)| counters)
    }
}

// ---------------------------------------------------------------------------------------------
// CPU time

/// User plus system CPU seconds of every thread of this process so far (getrusage).
pub fn self_cpu_seconds() -> f64 {
    rusage_cpu_seconds(libc::RUSAGE_SELF)
}

/// User plus system CPU seconds of this process's children that have ended and been waited
/// for (getrusage RUSAGE_CHILDREN): a client program's CPU time, read before and after it ran.
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
pub fn children_cpu_seconds() -> f64 {
    rusage_cpu_seconds(libc::RUSAGE_CHILDREN)
}

fn rusage_cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: `rusage` is plain old data (all-zero is valid) and getrusage only writes it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` with a valid pointer to a rusage.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Busy and total CPU ticks of the whole machine (all cores) from /proc/stat's first line;
/// waiting for I/O counts as busy (a server flushing in the background is not done).
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
pub fn parse_machine_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let fields: Vec<u64> = (line.split_whitespace().skip(1))
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice, inside user/nice]
    let total: u64 = fields.iter().take(8).sum();
    let idle = *fields.get(3)?;
    Some((total - idle, total))
}

#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
fn machine_ticks() -> Option<(u64, u64)> {
    parse_machine_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Waits until the machine is quiet: a `window` in which at most `busy_max` of all cores'
/// time was busy, or `timeout`. Returns how long it waited and whether it became quiet.
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
pub fn wait_until_quiet(
    busy_max: f64,
    window: std::time::Duration,
    timeout: std::time::Duration,
) -> (std::time::Duration, bool) {
    let start = std::time::Instant::now();
    loop {
        let before = machine_ticks();
        std::thread::sleep(window);
        let (Some((busy_before, total_before)), Some((busy, total))) = (before, machine_ticks())
        else {
            return (start.elapsed(), false); // no /proc/stat: nothing to wait for
        };
        let total = total.saturating_sub(total_before).max(1);
        let fraction = busy.saturating_sub(busy_before) as f64 / total as f64;
        if fraction <= busy_max {
            return (start.elapsed(), true);
        }
        if start.elapsed() >= timeout {
            return (start.elapsed(), false);
        }
    }
}

/// CPU ticks of one process from its /proc/<pid>/stat line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessTicks {
    pub parent_pid: u32,
    /// User and system time of the process's threads.
    pub user: u64,
    pub system: u64,
    /// User and system time of its children that exited and were waited for.
    pub children_user: u64,
    pub children_system: u64,
}

/// Parses a /proc/<pid>/stat line. The command name (field 2) is in parentheses and may hold
/// spaces and parentheses, so the fields are counted from the last ')'.
pub fn parse_proc_stat(line: &str) -> Option<ProcessTicks> {
    let after_name = &line[line.rfind(')')? + 1..];
    // Fields from 3 (state) on; field n of proc(5) is index n - 3 here.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let number = |field: usize| fields.get(field - 3)?.parse::<u64>().ok();
    Some(ProcessTicks {
        parent_pid: u32::try_from(number(4)?).ok()?,
        user: number(14)?,
        system: number(15)?,
        children_user: number(16)?,
        children_system: number(17)?,
    })
}

fn read_process_ticks(pid: u32) -> Option<ProcessTicks> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_proc_stat(&line)
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// CPU seconds (user + system) of one process and its threads; `None` when it does not exist.
/// (The lab counts whole process trees, `process_tree_cpu_seconds`; this checks that one.)
#[cfg(test)]
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let ticks = read_process_ticks(pid)?;
    Some((ticks.user + ticks.system) as f64 / ticks_per_second())
}

/// The processes below `pid` (children, grandchildren, ...), from the parent pids in
/// /proc/*/stat, sorted.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ticks) = read_process_ticks(child) {
            children.entry(ticks.parent_pid).or_default().push(child);
        }
    }
    descendants_in(&children, pid)
}

/// Walks a parent -> children map from `root` (excluded); a loop in the map cannot hang it.
fn descendants_in(children: &BTreeMap<u32, Vec<u32>>, root: u32) -> Vec<u32> {
    let mut found = BTreeSet::new();
    let mut pending = vec![root];
    while let Some(parent) = pending.pop() {
        for &child in children.get(&parent).into_iter().flatten() {
            if child != root && found.insert(child) {
                pending.push(child);
            }
        }
    }
    found.into_iter().collect()
}

/// CPU seconds of processes and all their descendants (e.g. a PostgreSQL postmaster and its
/// backends). Each live process counts its own time plus that of its exited, waited-for
/// children, so a backend that exits between two readings keeps its time (it moves into its
/// parent's children time). Processes that no longer exist count 0.
pub fn process_tree_cpu_seconds(pids: &[u32]) -> f64 {
    let mut all: BTreeSet<u32> = BTreeSet::new();
    for &pid in pids {
        all.insert(pid);
        all.extend(descendants(pid));
    }
    let ticks: u64 = all
        .into_iter()
        .filter_map(read_process_ticks)
        .map(|t| t.user + t.system + t.children_user + t.children_system)
        .sum();
    ticks as f64 / ticks_per_second()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_ticks_count_iowait_as_busy() {
        let stat = "cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n";
        assert_eq!(parse_machine_ticks(stat), Some((200, 1000)));
        assert_eq!(parse_machine_ticks("intr 1 2 3\n"), None);
        let (waited, _) = wait_until_quiet(
            1.0,
            std::time::Duration::from_millis(20),
            std::time::Duration::from_secs(5),
        );
        assert!(
            waited < std::time::Duration::from_secs(1),
            "100% busy is quiet enough"
        );
    }

    const DISKSTATS: &str = "\
 253       0 zram0 97 0 776 0 2 0 16 0 0 4 4 0 0 0 0 0 0
 254       0 vda 1184531 18764 101239810 1013771 5443421 2374188 349318232 18232745 0 3251972 \
19500766 0 0 0 0 412390 254249
 254       1 vda1 1184000 18764 101200000 1013700 5443000 2374188 349300000 18232700 0 3251900 \
19500700 0 0 0 0 0 0
";

    #[test]
    fn diskstats_lines_parse_by_device_name() {
        let vda = parse_diskstats(DISKSTATS, "vda").expect("vda");
        assert_eq!(
            vda,
            DiskCounters {
                reads_completed: 1_184_531,
                sectors_read: 101_239_810,
                writes_completed: 5_443_421,
                sectors_written: 349_318_232,
            }
        );
        assert_eq!(
            parse_diskstats(DISKSTATS, "vda1").map(|c| c.reads_completed),
            Some(1_184_000)
        );
        assert_eq!(parse_diskstats(DISKSTATS, "sda"), None);
        assert_eq!(parse_diskstats("254 0 vda 1 2", "vda"), None, "short line");
    }

    #[test]
    fn diskstats_lines_parse_by_device_number() {
        let (name, vda1) = parse_diskstats_by_number(DISKSTATS, 254, 1).expect("254:1");
        assert_eq!(name, "vda1", "a partition's own line");
        assert_eq!(
            vda1,
            DiskCounters {
                reads_completed: 1_184_000,
                sectors_read: 101_200_000,
                writes_completed: 5_443_000,
                sectors_written: 349_300_000,
            }
        );
        let whole = parse_diskstats_by_number(DISKSTATS, 254, 0).expect("254:0");
        assert_eq!(whole.0, "vda");
        assert_eq!(whole.1.reads_completed, 1_184_531);
        assert_eq!(parse_diskstats_by_number(DISKSTATS, 0, 45), None);
        assert_eq!(parse_diskstats_by_number("254 1 vda1 1 2", 254, 1), None);
    }

    #[test]
    fn the_device_of_a_directory_is_found_when_it_has_diskstats() {
        let temporary = tempfile::tempdir().expect("tempdir");
        let Some(device) = DiskstatsDevice::of_directory(temporary.path()) else {
            return; // tmpfs, overlay: no block device of its own
        };
        assert_eq!(
            Some((device.major, device.minor)),
            device_number(temporary.path())
        );
        assert!(device.read().is_some(), "{device:?}");
    }

    #[test]
    fn rates_are_differences_per_second() {
        let before = DiskCounters {
            reads_completed: 1000,
            sectors_read: 0,
            writes_completed: 50,
            sectors_written: 2048,
        };
        let after = DiskCounters {
            reads_completed: 3000,
            sectors_read: 4096,
            writes_completed: 150,
            sectors_written: 2048 + 8192,
        };
        let rates = after.rates_since(&before, 2.0);
        assert_eq!(rates.reads_per_second, 1000.0);
        assert_eq!(rates.writes_per_second, 50.0);
        assert_eq!(rates.read_mib_per_second, 1.0);
        assert_eq!(rates.write_mib_per_second, 2.0);
        assert_eq!(rates.source, "diskstats");
        assert_eq!(after.rates_since(&before, 0.0).reads_per_second, 0.0);
    }

    #[test]
    fn proc_stat_fields_count_from_the_last_parenthesis() {
        let line = "4242 (post gres: (idle)) S 17 4242 4242 0 -1 4194560 1500 0 0 0 \
                    731 204 12 3 20 0 1 0 12345 219000000 3000 18446744073709551615 1 1 0 0";
        let ticks = parse_proc_stat(line).expect("parse");
        assert_eq!(
            ticks,
            ProcessTicks {
                parent_pid: 17,
                user: 731,
                system: 204,
                children_user: 12,
                children_system: 3,
            }
        );
        assert_eq!(parse_proc_stat("12 (cut) S 1 2 3"), None);
        assert_eq!(parse_proc_stat("no parenthesis"), None);
    }

    #[test]
    fn descendants_follow_the_whole_tree() {
        let children = BTreeMap::from([(1, vec![10, 11]), (10, vec![100]), (100, vec![1])]);
        assert_eq!(descendants_in(&children, 1), vec![10, 11, 100]);
        assert_eq!(descendants_in(&children, 11), Vec::<u32>::new());
    }

    #[test]
    fn live_processes_are_found_and_counted() {
        let pid = std::process::id();
        assert!(process_cpu_seconds(pid).is_some());
        assert_eq!(process_cpu_seconds(u32::MAX), None);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        let found = descendants(pid);
        child.kill().expect("kill");
        child.wait().expect("wait");
        assert!(
            found.contains(&child.id()),
            "{found:?} lacks {}",
            child.id()
        );
        // Spin so that this process has measurable CPU time (ticks are 10 ms).
        let started = std::time::Instant::now();
        let mut spin = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(50) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        assert!(self_cpu_seconds() > 0.0);
        // The process's own time first: other test threads keep adding to it, so reading
        // the tree first could see less than a later read of the process alone.
        let own = process_cpu_seconds(pid).unwrap_or(0.0);
        assert!(process_tree_cpu_seconds(&[pid]) >= own);
    }

    #[test]
    fn mountinfo_picks_the_deepest_mount_of_the_device() {
        let mountinfo = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 254:0 /srv /mnt/my\\040data rw,relatime - xfs /dev/vda rw
41 27 8:1 / /mnt/my\\040data/other rw - btrfs /dev/sda1 rw
";
        let pick = |path: &str| file_system_from_mountinfo(mountinfo, 254, 0, Path::new(path));
        assert_eq!(pick("/work/db").as_deref(), Some("ext4"));
        assert_eq!(pick("/mnt/my data/db").as_deref(), Some("xfs"));
        assert_eq!(
            file_system_from_mountinfo(mountinfo, 9, 9, Path::new("/")),
            None
        );
    }

    #[test]
    fn describe_device_finds_the_file_system_of_a_directory() {
        let temporary = tempfile::tempdir().expect("tempdir");
        let info = describe_device(temporary.path());
        assert_ne!(info.file_system, "unknown", "{info:?}");
        assert!(info.directory.starts_with('/'));
        // Where the directory is on a block device, it must be named.
        if device_number(temporary.path()).is_some_and(|(major, _)| major != 0) {
            assert_ne!(info.block_device, "unknown", "{info:?}");
        }
    }
}

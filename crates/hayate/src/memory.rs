//! The memory a server may use, for sizing its buffer when none is configured.
//!
//! The engine reads and writes with O_DIRECT, so no operating-system cache holds what its
//! buffer does not: PostgreSQL's 128MB of shared_buffers come with the page cache behind them,
//! Hayate's buffer is all the cache its data has. Unless configured, `hayate serve` takes a
//! quarter of the memory it may use: the machine's, or the lowest memory limit of its control
//! group and the groups above it (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`).

use std::path::Path;

/// The default buffer is at least this (the engine's own default).
const BUFFER_BYTES_DEFAULT_MIN: u64 = 128 << 20;
/// ... and at most this: the buffer pool holds at most 2^24 frames (64 GiB of 4 KiB pages).
const BUFFER_BYTES_DEFAULT_MAX: u64 = 64 << 30;
/// The share of the memory the default buffer takes.
const MEMORY_SHARE_DEFAULT: u64 = 4;

/// The buffer `hayate serve` uses when none is configured: a quarter of `available_bytes`,
/// rounded down to whole MiB, within 128MB and 64GB.
pub fn default_buffer_bytes() -> u64 {
    match available_bytes() {
        Some(memory) => (memory / MEMORY_SHARE_DEFAULT / (1 << 20) * (1 << 20))
            .clamp(BUFFER_BYTES_DEFAULT_MIN, BUFFER_BYTES_DEFAULT_MAX),
        None => BUFFER_BYTES_DEFAULT_MIN,
    }
}

/// The memory this process may use: the machine's, or its control groups' lowest limit.
pub fn available_bytes() -> Option<u64> {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total_bytes(&text));
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| cgroup_limit_bytes(&text, Path::new("/sys/fs/cgroup")));
    [machine, limit].into_iter().flatten().min()
}

/// MemTotal of a /proc/meminfo text, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The lowest memory limit on the path of each of this process's control groups (a
/// /proc/self/cgroup text) from the group up to the root, under the cgroup file system at
/// `root`: v2 (`0::path`, at `root` or `root/unified`) and v1 (a `memory` controller line).
fn cgroup_limit_bytes(cgroups: &str, root: &Path) -> Option<u64> {
    let mut lowest: Option<u64> = None;
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (bases, file) = if controllers.is_empty() {
            (vec![root.to_path_buf(), root.join("unified")], "memory.max")
        } else if controllers
            .split(',')
            .any(|controller| controller == "memory")
        {
            (vec![root.join("memory")], "memory.limit_in_bytes")
        } else {
            continue;
        };
        for base in bases {
            let mut group = Some(Path::new(path.trim_start_matches('/')));
            while let Some(relative) = group {
                let limit = std::fs::read_to_string(base.join(relative).join(file))
                    .ok()
                    .and_then(|text| text.trim().parse::<u64>().ok()); // "max": none
                if let Some(limit) = limit {
                    lowest = Some(lowest.map_or(limit, |lowest| lowest.min(limit)));
                }
                group = relative.parent();
            }
        }
    }
    lowest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_is_read_in_kib() {
        let text = "MemTotal:       24683108 kB\nMemFree:        1000 kB\n";
        assert_eq!(mem_total_bytes(text), Some(24683108 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn the_lowest_limit_from_the_group_up_to_the_root_counts() {
        let root = tempfile::tempdir().unwrap();
        let write = |relative: &str, text: &str| {
            let path = root.path().join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        // cgroup v2: the leaf has no limit, its parent slice has 2 GiB, the root none.
        write("memory.max", "max\n");
        write("system.slice/memory.max", "2147483648\n");
        write("system.slice/hayate.service/memory.max", "max\n");
        assert_eq!(
            cgroup_limit_bytes("0::/system.slice/hayate.service\n", root.path()),
            Some(2 << 30)
        );
        // cgroup v1: the memory controller's line, "unlimited" being a huge number.
        write("memory/docker/abc/memory.limit_in_bytes", "1073741824\n");
        write("memory/memory.limit_in_bytes", "9223372036854771712\n");
        assert_eq!(
            cgroup_limit_bytes(
                "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n",
                root.path()
            ),
            Some(1 << 30)
        );
        // No limit anywhere.
        assert_eq!(
            cgroup_limit_bytes("0::/\n", tempfile::tempdir().unwrap().path()),
            None
        );
    }

    #[test]
    fn the_default_is_a_quarter_within_bounds() {
        let bytes = default_buffer_bytes();
        assert!((BUFFER_BYTES_DEFAULT_MIN..=BUFFER_BYTES_DEFAULT_MAX).contains(&bytes));
        assert_eq!(bytes % (1 << 20), 0);
        if let Some(memory) = available_bytes() {
            assert!(bytes <= (memory / 4).max(BUFFER_BYTES_DEFAULT_MIN));
        }
    }
}

//! Device and CPU counters from /proc and /sys (being built).

use std::path::Path;

use super::results::DeviceInfo;

pub fn describe_device(directory: &Path) -> DeviceInfo {
    DeviceInfo {
        directory: directory.display().to_string(),
        block_device: "unknown".into(),
        file_system: "unknown".into(),
        model: None,
        rotational: None,
    }
}

// TEMPORARY minimal versions until the sysstat module lands (replaced at merge).
use super::results::IoRates;

pub fn self_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

pub fn process_cpu_seconds(_pid: u32) -> Option<f64> {
    None
}

#[derive(Debug, Clone, Copy)]
pub struct DiskCounters;

impl DiskCounters {
    pub fn read(_device: &str) -> Option<DiskCounters> {
        None
    }
    pub fn rates_since(&self, _before: &DiskCounters, _seconds: f64) -> IoRates {
        IoRates::default()
    }
}

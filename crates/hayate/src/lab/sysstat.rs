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

//! Options every experiment shares.

use std::path::PathBuf;

use clap::Args;

/// Options every experiment shares.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Directory the JSON results, traces and timelines are written to (created if missing).
    #[arg(long, value_name = "DIR", default_value = "lab-results")]
    pub results: PathBuf,

    /// Directory on the device to measure, under which the experiment's temporary files and
    /// databases are made (and removed afterwards). It must be on the real device, not tmpfs.
    /// Default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl CommonArgs {
    pub fn base_dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| PathBuf::from("."))
    }
}

/// The smallest buffer `--buffer-size` takes (`hayate serve`'s own floor).
const BUFFER_BYTES_MIN: u64 = 1 << 20;

/// Parses a buffer size as `hayate serve --buffer-size` does, PostgreSQL's way ("16MB",
/// "4GB", "512kB", "1048576B"; a bare number is kB), at least 1 MB.
#[cfg_attr(not(feature = "peers"), allow(dead_code))] // for `lab server`
pub fn parse_buffer_size(text: &str) -> Result<u64, String> {
    hayate_sql::exec::memory_size_bytes(text)
        .filter(|bytes| *bytes >= BUFFER_BYTES_MIN)
        .ok_or_else(|| {
            format!(
                "`{text}` is not a size of at least 1MB such as 16MB or 4GB (units B, kB, MB, \
                 GB, TB; a bare number is kB)"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_sizes_parse_like_hayate_serve() {
        assert_eq!(parse_buffer_size("16MB"), Ok(16 << 20));
        assert_eq!(parse_buffer_size(" 4GB "), Ok(4 << 30));
        assert_eq!(parse_buffer_size("2048kB"), Ok(2 << 20));
        assert_eq!(parse_buffer_size("1048576B"), Ok(1 << 20));
        assert_eq!(
            parse_buffer_size("1024"),
            Ok(1 << 20),
            "a bare number is kB"
        );
        for bad in ["", "16", "512kB", "16 MiB", "lots", "-1MB", "16mb"] {
            let error = parse_buffer_size(bad).expect_err(bad);
            assert!(error.contains("at least 1MB"), "{bad}: {error}");
        }
    }
}

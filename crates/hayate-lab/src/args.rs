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

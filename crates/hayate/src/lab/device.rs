//! `hayate lab device` (being built).

use clap::Args;

use crate::error::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct DeviceArgs {
    #[command(flatten)]
    pub common: super::CommonArgs,
}

pub fn run(_args: &DeviceArgs) -> CliResult<()> {
    Err(CliError::new("hayate lab device is not built yet"))
}

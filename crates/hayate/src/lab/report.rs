//! `hayate lab report` (being built).

use clap::Args;

use crate::error::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub common: super::CommonArgs,
}

pub fn run(_args: &ReportArgs) -> CliResult<()> {
    Err(CliError::new("hayate lab report is not built yet"))
}

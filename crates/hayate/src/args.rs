//! Command-line value types shared by `hayate` and the lab's `hayate-lab`.

use std::process::ExitCode;

use clap::{Parser, ValueEnum};

/// Parses the command line. Help and version are printed to stdout and end the program with
/// code 0; a usage error is printed to stderr and ends it with code 1 (`Err` holds that code).
pub fn parse_command_line<C: Parser>() -> Result<C, ExitCode> {
    C::try_parse().map_err(|error| {
        let _ = error.print();
        if error.use_stderr() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    })
}

/// Write policy of the page store, fixed when a database is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Append dirty pages to large sequential segments; a cleaner reclaims segments.
    OutOfPlace,
    /// Overwrite every page at its home, journaling the checkpointed image first.
    InPlace,
}

/// Parses a percentage in (0, 1000], as the buffer-size options take it.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let percent: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if percent.is_finite() && percent > 0.0 && percent <= 1000.0 {
        Ok(percent)
    } else {
        Err(format!("{percent} is not in (0, 1000]"))
    }
}

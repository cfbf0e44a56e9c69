//! The error of a command: a message for the user, with the engine's error (which names the
//! file, page and LSN of a corruption) kept as the cause.

use std::fmt;
use std::process::ExitCode;

#[derive(Debug)]
pub struct CliError {
    message: String,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn new(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<hayate_engine::Error> for CliError {
    fn from(error: hayate_engine::Error) -> CliError {
        CliError::new(error.to_string())
    }
}

/// The exit code of a command's result: 0, or 1 after printing `error: ...` on stderr.
pub fn exit_code(result: CliResult<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Adds what the command was doing to an error.
pub trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> CliResult<T>;
}

impl<T, E: fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> CliResult<T> {
        self.map_err(|error| CliError::new(format!("{}: {error}", what())))
    }
}

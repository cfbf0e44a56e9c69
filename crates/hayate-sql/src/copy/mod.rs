//! COPY: rows in bulk between a table and the client, in PostgreSQL's text and CSV formats.
//!
//! COPY FROM STDIN streams:
//! 1. `parse_copy` reads the statement (sqlparser does not take every option spelling
//!    clients send, e.g. pgbench's `WITH (FREEZE ON)`, so COPY has its own small parser).
//! 2. `Session::copy_in` resolves the table and columns, prepares `INSERT INTO t (cols)
//!    VALUES ($1, ...)` (the ordinary insert path: defaults, NOT NULL, keys) and opens the
//!    transaction the rows go into: the client's block, or one of its own (autocommit).
//! 3. `Session::copy_data` takes each CopyData message as it arrives: it splits off the
//!    complete records, decodes their fields with the column types' text input and inserts
//!    them; a partial record waits for the next message.
//! 4. `Session::copy_done` inserts a last unterminated record and commits an autocommit
//!    transaction; an error or `copy_fail` (the client's CopyFail) aborts it (inside a block
//!    the block fails, as every error does). Errors carry PostgreSQL's CONTEXT, e.g.
//!    `COPY t, line 3, column id: "x"`.
//!
//! COPY TO STDOUT reads the table with a SELECT and formats its rows (`Session::copy_out`).
//!
//! The folder: `statement` (reading the COPY statement and its options), `input` (splitting
//! COPY FROM data into records and fields, text and CSV), `output` (formatting COPY TO
//! records) and `session` (the `Session` methods that run a COPY); this file holds the
//! statement's types.

mod input;
mod output;
mod session;
mod statement;

use crate::error::SqlError;

/// A field of a record: its text (None: NULL).
type Field = Option<String>;

pub use input::CopyIn;
pub use statement::{is_copy, parse_copy};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyFormat {
    Text,
    Csv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDirection {
    FromStdin,
    ToStdout,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOptions {
    pub format: CopyFormat,
    pub delimiter: u8,
    pub null: String,
    pub header: bool,
    pub quote: u8,
    pub escape: u8,
    /// CSV: columns whose unquoted null string is an empty string, not NULL.
    pub force_not_null: Vec<String>,
    /// CSV: columns whose quoted null string is NULL too.
    pub force_null: Vec<String>,
}

/// A parsed COPY statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyStatement {
    pub table: String,
    /// The listed columns; empty: every column in table order.
    pub columns: Vec<String>,
    pub direction: CopyDirection,
    pub options: CopyOptions,
}

/// An error of COPY with PostgreSQL's CONTEXT line (where in the data it happened).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyFailure {
    pub error: SqlError,
    pub context: Option<String>,
}

impl From<SqlError> for CopyFailure {
    fn from(error: SqlError) -> CopyFailure {
        CopyFailure {
            error,
            context: None,
        }
    }
}

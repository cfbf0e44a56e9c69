//! What the `hayate` command shares with the lab's `hayate-lab`: the error of a command, the
//! printed reports (histograms, tables, engine statistics) and command-line value types.

pub mod args;
pub mod error;
pub mod report;

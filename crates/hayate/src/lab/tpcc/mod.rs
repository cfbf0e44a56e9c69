//! `hayate lab tpcc`: TPC-C (revision 5.11) on Hayate and its peers, with the consistency
//! conditions, a crash loop, and buffer sweeps on device classes.
//!
//! Modules:
//! - `spec`: sizes and the random functions of the specification (NURand, names, strings).
//! - `rows`: the nine tables as rows and the generator of the initial database.
//! - `txn`: the five transactions' inputs and outputs, the terminals that generate them and the
//!   session interface every engine implements them behind.
//! - `metrics`: what a run asks (`TpccJob`) and measures (`TpccOutcome`).
//! - `check`: consistency conditions 1 - 12.

pub mod check;
pub mod metrics;
pub mod rows;
pub mod spec;
pub mod txn;

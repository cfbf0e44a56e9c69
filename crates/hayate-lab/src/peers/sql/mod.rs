//! SQL that is the same for every SQL peer.
//!
//! - `primitive`: the primitive workload's session over a small per-client interface, and the
//!   threads that load tables in parallel.
//! - `tpcc_schema`: TPC-C's schema per dialect, rows as SQL values, the parallel loader.
//! - `tpcc_transactions`: the five transactions and the check's snapshot read over
//!   `SqlConnection`.

pub mod primitive;
pub mod tpcc_schema;
pub mod tpcc_transactions;

//! What the `hayate` command shares with the lab's `hayate-lab`: the error of a command, the
//! printed reports (histograms, tables, engine statistics), command-line value types, and the
//! latency-adding I/O wrapper of device emulation, and a TCP proxy emulating the network
//! between nodes (delay, partitions).

pub mod args;
pub mod error;
pub mod latency;
pub mod memory;
pub mod netproxy;
pub mod report;

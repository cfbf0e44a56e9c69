//! hayate-lab's integration tests, one module per file (described in the README's test table).

mod common;
mod lab_bench;
mod lab_cli;
mod lab_device;
mod lab_primitive;
mod lab_replay;
mod lab_report;
mod lab_server;
mod lab_temp;
mod lab_tpcc;

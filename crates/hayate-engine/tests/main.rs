//! hayate-engine's integration tests, one module per file (described in the README's test table).

mod backup;
mod cleaner;
mod common;
mod crash_kill;
mod crash_sim;
mod db_basic;
mod fiber_commits;
mod fibers;
mod io_errors;
mod isolation;
mod large_commit;
mod model;
mod read_committed;
mod replication;
mod savepoints;
mod undo_spill;

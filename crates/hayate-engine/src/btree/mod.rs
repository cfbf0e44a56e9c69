//! The B+tree access method: ordered maps from byte-string keys to byte-string values.
//!
//! Files follow the on-disk formats and the protocol phases:
//! - `node`: the slotted leaf and inner page layout (format version 1);
//! - `overflow`: chains of overflow pages for long values;
//! - `tree`: the handle, lookups, inserts, splits and the latching protocol;
//! - `rebalance`: deletes, merges and redistribution;
//! - `scan`: cursors that re-seek by key between batches;
//! - `check`: structural verification, page listing and destruction;
//!
//! Lifecycle of a tree:
//! 1. `BTree::create` allocates an empty root leaf; its page id names the tree for good.
//! 2. `BTree::open(root)` gives a cheap handle; `get`, `put`, `delete` and `scan` use it from
//!    any number of threads.
//! 3. `BTree::destroy` frees every page.

mod check;
mod node;
mod overflow;
mod rebalance;
mod scan;
mod tree;

pub use check::TreeCheckReport;
pub use node::{compare_keys, NodeLimits};
pub use overflow::VALUE_LENGTH_MAX;
pub use scan::Cursor;
pub use tree::{BTree, TryLookup};

#[cfg(test)]
mod tests;

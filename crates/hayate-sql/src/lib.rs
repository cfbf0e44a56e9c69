//! Hayate's SQL layer: a catalog of tables stored in the engine, SQL types, an
//! order-preserving key encoding, and a binder, planner and executor made for OLTP.
//!
//! A statement's life:
//! 1. `session::parse` turns text into sqlparser's AST (PostgreSQL dialect).
//! 2. `plan::bind` resolves names against the `catalog`, checks types, infers parameter
//!    types and picks the access path (`plan::access`): a primary key point lookup, a key
//!    range scan or a full scan.
//! 3. `exec` runs the plan inside an engine transaction owned by the `session`
//!    (autocommit, or the client's BEGIN ... COMMIT block).
//!
//! Layering: this crate uses only the engine's public API (`Database`, `Transaction`); the
//! server crate uses this one.

pub mod catalog;
pub mod copy;
pub mod encoding;
pub mod error;
pub mod exec;
pub mod ident;
pub mod interrupt;
pub mod plan;
pub mod session;
pub mod settings;
pub mod system;
pub mod table_lock;
pub mod types;

pub use catalog::{sequence, Catalog, Cluster};
pub use error::{sqlstate, SqlError, SqlResult};
pub use exec::Outcome;
pub use plan::OutputColumn;
pub use session::{is_alter_sequence, parse, Prepared, Session, TransactionStatus};
pub use types::{DataType, Value};

/// The PostgreSQL version the server reports (clients parse it to pick protocol features).
pub const SERVER_VERSION: &str = "15.0 (Hayate)";
pub const SERVER_VERSION_NUM: &str = "150000";
/// What `SELECT version()` returns.
pub const SERVER_VERSION_STRING: &str = concat!(
    "PostgreSQL 15.0 (Hayate ",
    env!("CARGO_PKG_VERSION"),
    ") on Linux"
);

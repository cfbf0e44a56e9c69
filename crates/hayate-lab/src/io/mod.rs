//! I/O wrappers of the lab, over the engine's public `Io` / `IoFile` traits: they wrap any of
//! the engine's backends and are handed to `Database::open_with_io`.
//!
//! - `latency::LatencyIo` (from the `hayate` crate, which `hayate serve --emulate-device`
//!   shares): adds a fixed latency per I/O, to emulate device classes.
//! - `trace::TracingIo`: records every I/O, for replay without database work (alpha).

pub use ::hayate::latency;
pub mod trace;

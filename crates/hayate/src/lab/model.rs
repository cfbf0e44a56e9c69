//! The latency model (being built).

//! Peers (being built).

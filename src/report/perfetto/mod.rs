//! Perfetto trace output (`.pftrace`).

pub mod proto;

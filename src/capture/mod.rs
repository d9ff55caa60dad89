//! Live recording from the kernel (tracefs).

pub mod blk_tracer;
pub mod instance;
pub mod journal;
pub mod pipe;
pub mod probe;
pub mod recorder;
pub mod snapshot;
pub mod tracefs;

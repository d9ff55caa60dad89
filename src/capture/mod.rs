//! Live recording from the kernel (tracefs).

pub mod blk_tracer;
pub mod instance;
pub mod journal;
pub mod pipe;
pub mod probe;
pub mod recorder;
pub mod snapshot;
pub mod symbols;
pub mod tracefs;
pub mod workload;

/// `PID-N`: a name no other session, and no other object of this one, uses
/// (instances, journals, lab directories).
pub fn unique_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

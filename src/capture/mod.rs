//! Live recording from the kernel, the first stage of DESIGN.md's pipeline
//! beside `ingest`: tracefs access whose every change is journalled and
//! restored (`tracefs`, `journal`), the private-instance recorder that
//! writes a capture directory (`recorder`, `pipe`, `symbols`, laid out as
//! `model::capture_layout` says), the kernel's `blk` tracer (`blk_tracer`),
//! the system snapshot (`snapshot`), the workload and Ctrl-C (`workload`),
//! and the built-in probes. Nothing here analyses: a capture is read back
//! through `ingest` like any other input.

pub mod blk_tracer;
pub mod build_ids;
pub mod cgroups;
pub mod functions;
pub mod journal;
pub mod light;
pub mod mapped_files;
pub mod memory_cgroups;
pub mod mount_option;
pub mod pipe;
pub mod probe;
pub mod proc_files;
pub mod recorder;
pub mod sampler;
pub mod snapshot;
pub mod symbols;
pub mod task_setting;
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

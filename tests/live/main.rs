//! Live tests: they record the real kernel (tracefs, BPF, perf, loop
//! devices, FUSE) and need root. Each is ignored under plain `cargo test`,
//! with the reason; `scripts/test` (as root) runs them all, and there a
//! missing capability is a failure. One at a time: they share the tracing
//! buffers and the CPUs, and each asserts a contrast between two runs.

#[path = "../common/mod.rs"]
mod common;

mod block;
mod cache;
mod cgroup;
mod event_sets;
mod faults;
mod interrupt;
mod io_uring;
mod iostat;
mod irq;
mod journal;
mod kernel_counts;
mod lab;
mod light;
mod perf_data;
mod record;
mod sched;
mod slow_device;
mod trial;
mod watch;

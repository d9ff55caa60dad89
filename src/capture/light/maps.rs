//! The BPF maps' keys and values as bpf/light.h lays them out: natural
//! alignment, no padding (abi_check.rs compares every field with light.h).

use crate::model::light::{CpuCounters, LightCounters, UringCounters, NBUCKET};

pub const NSLOT: u32 = 16;
pub const NOP: u32 = 4;
/// The device -> slot table: a dev_t's entry is
/// `dev * DEV_HASH_MUL >> DEV_HASH_SHIFT`, of NDEVIDX.
pub const DEV_HASH_MUL: u32 = 0x9E37_79B1;
pub const DEV_HASH_SHIFT: u32 = 20;
pub const NDEVIDX: u32 = 4096;
pub const NSTAGE: u32 = 3;
pub const NDEPTH: usize = 64;
pub const NSIZE: usize = 32;

/// The maps user space opens by name (bpf/light.bpf.c).
pub const MAP_DEV_SLOT: &str = "dev_slot";
pub const MAP_LATENCY: &str = "latency";
pub const MAP_SIZES: &str = "sizes";
pub const MAP_DEPTHS: &str = "depths";
pub const MAP_COUNTERS: &str = "counters";
/// The per-request state accounting's requests in flight by slot.
pub const MAP_INFLIGHT: &str = "inflight";
/// What every depth is read less (src/capture/light/inflight.rs).
pub const MAP_INFLIGHT_BIAS: &str = "inflight_bias";
pub const MAP_THRESHOLD: &str = "threshold";
pub const MAP_RECORDS: &str = "records";
pub const MAP_CPU_STATS: &str = "cpu_stats";
pub const MAP_CGROUPS: &str = "cgroups";
pub const MAP_CG_CACHE: &str = "cg_cache";
/// Bumped at each attachment of the scheduler's programs.
pub const MAP_SCHED_GEN: &str = "sched_gen";
pub const MAP_URING: &str = "uring";
pub const MAP_URING_LATENCY: &str = "uring_latency";
#[cfg(test)]
pub const MAPS: [&str; 14] = [
    MAP_DEV_SLOT,
    MAP_LATENCY,
    MAP_SIZES,
    MAP_DEPTHS,
    MAP_COUNTERS,
    MAP_INFLIGHT,
    MAP_INFLIGHT_BIAS,
    MAP_THRESHOLD,
    MAP_RECORDS,
    MAP_CPU_STATS,
    MAP_CGROUPS,
    MAP_CG_CACHE,
    MAP_URING,
    MAP_URING_LATENCY,
];

/// Entries of the cgroups map, and the bounds of its histograms (+Inf).
pub const NCGROUP: u32 = 4096;
pub const NCGCACHE: u32 = 256;
pub const NLE: usize = crate::model::light::LE_NS.len() + 1;

/// The stages of a request, in the order of `latency`'s keys.
pub const STAGE_QUEUED: u32 = 0;
pub const STAGE_DEVICE: u32 = 1;
pub const STAGE_TOTAL: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Hist {
    pub n: u64,
    pub sum: u64,
    pub b: [u32; NBUCKET],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DepthHist {
    pub b: [u32; NDEPTH],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct SizeHist {
    pub b: [u32; NSIZE],
}

/// light.h's `struct counters`: the requests by operation, then the
/// counters the model declares (laid out as light.h's), then the stamps
/// accounting's own.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Counters {
    pub ios: [u64; 4],
    pub bytes: [u64; 4],
    pub counts: LightCounters,
    pub issued: u64,
    pub retired: u64,
    /// Scratch of the issue program (the previous request's end), not a count.
    pub last_end: u64,
}

/// A (cgroup, device slot, operation) of the cgroups map.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct CgKey {
    pub id: u64,
    pub slot: u32,
    pub op: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CgStats {
    pub id: u64,
    pub slot: u32,
    pub op_used: u32,
    pub ios: u64,
    pub bytes: u64,
    pub time_ns: u64,
    pub le: [u32; NLE],
}

/// io_uring request groups (model::light::URING_OPS).
pub const NUOP: u32 = 8;
const _: () = assert!(crate::model::light::URING_OPS.len() == NUOP as usize);

/// light.h's `struct uring_stats`.
pub type UringStats = UringCounters;

pub const NSOFTIRQ: usize = 10;

/// light.h's `struct cpu_stats`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CpuStats {
    pub counts: CpuCounters,
    pub softirqs: [u64; NSOFTIRQ],
    pub softirq_ns: [u64; NSOFTIRQ],
}

// SAFETY: plain integers and arrays of them, every bit pattern valid.
unsafe impl aya::Pod for Hist {}
unsafe impl aya::Pod for DepthHist {}
unsafe impl aya::Pod for SizeHist {}
unsafe impl aya::Pod for Counters {}
unsafe impl aya::Pod for CpuStats {}
unsafe impl aya::Pod for CgKey {}
unsafe impl aya::Pod for CgStats {}
unsafe impl aya::Pod for UringStats {}

/// The key of a device slot's operation's stage in `latency`.
pub fn latency_key(slot: u32, op: u32, stage: u32) -> u32 {
    (slot * NOP + op) * NSTAGE + stage
}

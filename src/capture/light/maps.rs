//! The BPF maps' keys and values as bpf/light.h lays them out: natural
//! alignment, no padding (abi_check.rs compares every field with light.h).

use crate::model::light::NBUCKET;

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
pub const MAP_THRESHOLD: &str = "threshold";
pub const MAP_RECORDS: &str = "records";
pub const MAP_CPU_STATS: &str = "cpu_stats";
pub const MAP_CGROUPS: &str = "cgroups";
pub const MAP_CG_CACHE: &str = "cg_cache";
pub const MAP_URING: &str = "uring";
pub const MAP_URING_LATENCY: &str = "uring_latency";
#[cfg(test)]
pub const MAPS: [&str; 12] = [
    MAP_DEV_SLOT,
    MAP_LATENCY,
    MAP_SIZES,
    MAP_DEPTHS,
    MAP_COUNTERS,
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

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Counters {
    pub ios: [u64; 4],
    pub bytes: [u64; 4],
    pub back_merges: u64,
    pub front_merges: u64,
    pub rq_merges: u64,
    pub splits: u64,
    pub requeues: u64,
    pub errors: u64,
    pub partial: u64,
    pub no_state: u64,
    pub state_full: u64,
    pub slow_sent: u64,
    pub slow_capped: u64,
    pub ring_full: u64,
    pub seq_requests: u64,
    pub by_stamps: u64,
    pub issued: u64,
    pub retired: u64,
    pub cgroup_full: u64,
    pub throttled: u64,
    pub throttled_bytes: u64,
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

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct UringStats {
    pub requests: u64,
    pub more: u64,
    pub punted: u64,
    pub untimed: u64,
    pub errors: u64,
    pub state_full: u64,
}

pub const NSOFTIRQ: usize = 10;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CpuStats {
    pub switches: u64,
    pub wakeups: u64,
    pub long_waits: u64,
    pub waits_lost: u64,
    pub events: u64,
    pub events_lost: u64,
    pub hardirqs: u64,
    pub hardirq_ns: u64,
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

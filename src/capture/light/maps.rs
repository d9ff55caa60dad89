//! The BPF maps' keys and values as bpf/light.h lays them out (a test
//! checks the sizes against the object's BTF-free layout rules: natural
//! alignment, no padding).

use crate::model::light::NBUCKET;

pub const NSLOT: u32 = 16;
pub const NOP: u32 = 4;
pub const NSTAGE: u32 = 3;
pub const NDEPTH: usize = 64;
pub const NSIZE: usize = 32;

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
    /// Scratch of the issue program (the previous request's end), not a count.
    pub last_end: u64,
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

/// The key of a device slot's operation's stage in `latency`.
pub fn latency_key(slot: u32, op: u32, stage: u32) -> u32 {
    (slot * NOP + op) * NSTAGE + stage
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_light_h() {
        assert_eq!(std::mem::size_of::<Hist>(), 16 + 4 * 1184);
        assert_eq!(std::mem::size_of::<Counters>(), 22 * 8);
        assert_eq!(std::mem::size_of::<CpuStats>(), 28 * 8);
        assert_eq!(std::mem::size_of::<DepthHist>(), 256);
        assert_eq!(std::mem::size_of::<SizeHist>(), 128);
    }
}

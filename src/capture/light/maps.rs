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
}

// SAFETY: plain integers and arrays of them, every bit pattern valid.
unsafe impl aya::Pod for Hist {}
unsafe impl aya::Pod for DepthHist {}
unsafe impl aya::Pod for SizeHist {}
unsafe impl aya::Pod for Counters {}

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
        assert_eq!(std::mem::size_of::<Counters>(), 20 * 8);
        assert_eq!(std::mem::size_of::<DepthHist>(), 256);
        assert_eq!(std::mem::size_of::<SizeHist>(), 128);
    }
}

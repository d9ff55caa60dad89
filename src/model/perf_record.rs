//! The kernel's perf records as `capture::sampler` writes them into a
//! capture (`samples-cpuN.perf`) and `ingest::perf_samples` reads them:
//! `perf_event_header` (type, misc, size), then the record's body
//! (include/uapi/linux/perf_event.h). Shared, like blktrace_record.

/// The sample fields recorded, in `perf_event_attr.sample_type` bits: IP,
/// TID, TIME, CALLCHAIN, CPU. The manifest says it; the reader refuses
/// other layouts.
pub const SAMPLE_TYPE: u64 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 5) | (1 << 7);
/// Call-chain entries at or above this are context markers
/// (PERF_CONTEXT_KERNEL, _USER, …), not addresses.
pub const CONTEXT_MAX: u64 = -4095i64 as u64;
/// PERF_CONTEXT_KERNEL and PERF_CONTEXT_USER: the entries after them are
/// kernel, or user-space, addresses.
pub const CONTEXT_KERNEL: u64 = -128i64 as u64;
pub const CONTEXT_USER: u64 = -512i64 as u64;
/// PERF_CONTEXT_HV: hypervisor frames follow (perf names none).
pub const CONTEXT_HV: u64 = -32i64 as u64;
/// Kernel addresses start here on x86-64 and arm64 (the upper half).
pub const KERNEL_START: u64 = 0xffff_8000_0000_0000;
/// `perf_event_header`: u32 type, u16 misc, u16 size (header included).
pub const HEADER_LEN: usize = 8;
pub const RECORD_LOST: u32 = 2;
pub const RECORD_SAMPLE: u32 = 9;

/// A record's type and size (header included) from its first bytes.
pub fn header(b: &[u8]) -> Option<(u32, usize)> {
    let kind = u32::from_ne_bytes(b.get(0..4)?.try_into().ok()?);
    let size = u16::from_ne_bytes(b.get(6..8)?.try_into().ok()?) as usize;
    Some((kind, size))
}

/// The count of a PERF_RECORD_LOST body (`u64 id; u64 lost`).
pub fn lost(body: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(body.get(8..16)?.try_into().ok()?))
}

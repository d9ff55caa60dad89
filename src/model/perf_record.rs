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
pub const RECORD_MMAP: u32 = 1;
pub const RECORD_LOST: u32 = 2;
pub const RECORD_FORK: u32 = 7;
pub const RECORD_SAMPLE: u32 = 9;
/// PERF_RECORD_MISC_USER: a record about user space (an MMAP's misc).
pub const MISC_USER: u16 = 2;
/// The `sample_id` every other record ends with (`sample_id_all`), for
/// SAMPLE_TYPE's TID, TIME and CPU: u32 pid, u32 tid, u64 time, u32 cpu,
/// u32 reserved.
pub const SAMPLE_ID_LEN: usize = 24;

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

/// The time of a non-sample record's body, from its `sample_id`.
pub fn sample_id_time(body: &[u8]) -> Option<u64> {
    let at = body.len().checked_sub(SAMPLE_ID_LEN)? + 8;
    Some(u64::from_ne_bytes(body.get(at..at + 8)?.try_into().ok()?))
}

/// A PERF_RECORD_MMAP of an executable mapping as the kernel writes it
/// (`u32 pid, tid; u64 addr, len, pgoff; char filename[]` padded with
/// NULs to 8 bytes, then `sample_id`): how the recorder writes the
/// mappings of the processes that ran before sampling started.
pub fn mmap_record(pid: u32, addr: u64, len: u64, pgoff: u64, path: &[u8], time: u64) -> Vec<u8> {
    let name_len = (path.len() + 1).next_multiple_of(8);
    let size = HEADER_LEN + 32 + name_len + SAMPLE_ID_LEN;
    let mut r = Vec::with_capacity(size);
    r.extend(RECORD_MMAP.to_ne_bytes());
    r.extend(MISC_USER.to_ne_bytes());
    r.extend((size as u16).to_ne_bytes());
    r.extend(pid.to_ne_bytes());
    r.extend(pid.to_ne_bytes());
    r.extend(addr.to_ne_bytes());
    r.extend(len.to_ne_bytes());
    r.extend(pgoff.to_ne_bytes());
    r.extend(path);
    r.resize(HEADER_LEN + 32 + name_len, 0);
    r.extend(pid.to_ne_bytes());
    r.extend(pid.to_ne_bytes());
    r.extend(time.to_ne_bytes());
    r.extend([0u8; 8]);
    r
}

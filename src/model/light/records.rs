//! The records the light programs send through their ring buffer, as
//! bpf/light.h lays them out: slow requests, runqueue waits and
//! tracepoint events, parsed from their bytes.

use super::*;

/// One slow request, as `struct slow_rec` holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowRequest {
    pub dev: Dev,
    /// When the request was allocated (0 when the queue does not say).
    pub alloc_ns: u64,
    pub issue_ns: u64,
    pub complete_ns: u64,
    pub sector: u64,
    pub cgroup_id: u64,
    pub bytes: u32,
    pub cmd_flags: u32,
    /// The process and thread that issued it, and its name.
    pub pid: u32,
    pub tid: u32,
    pub issue_cpu: u32,
    pub complete_cpu: u32,
    /// Requests in flight on the device when it was issued, itself included.
    pub depth: u32,
    pub error: i32,
    pub comm: [u8; 16],
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

impl SlowRequest {
    /// A record of `SLOW_RECORD` bytes; `None` when it is not a slow
    /// request's (another kind, or a length that is not the record's).
    pub fn parse(b: &[u8]) -> Option<SlowRequest> {
        if b.len() < SLOW_RECORD
            || u16::from_le_bytes([b[0], b[1]]) != 1
            || u16::from_le_bytes([b[2], b[3]]) as usize != SLOW_RECORD
        {
            return None;
        }
        let raw = u32_at(b, 4);
        Some(SlowRequest {
            dev: Dev::new(raw >> 20, raw & 0xfffff),
            alloc_ns: u64_at(b, 8),
            issue_ns: u64_at(b, 16),
            complete_ns: u64_at(b, 24),
            sector: u64_at(b, 32),
            cgroup_id: u64_at(b, 40),
            bytes: u32_at(b, 48),
            cmd_flags: u32_at(b, 52),
            pid: u32_at(b, 56),
            tid: u32_at(b, 60),
            issue_cpu: u32_at(b, 64),
            complete_cpu: u32_at(b, 68),
            depth: u32_at(b, 72),
            error: u32_at(b, 76) as i32,
            comm: b[80..96].try_into().expect("16 bytes"),
        })
    }

    /// Allocation → completion, or issue → completion when the queue did
    /// not stamp the allocation.
    pub fn total_ns(&self) -> u64 {
        let from = if self.alloc_ns != 0 && self.alloc_ns <= self.issue_ns {
            self.alloc_ns
        } else {
            self.issue_ns
        };
        self.complete_ns.saturating_sub(from)
    }

    pub fn device_ns(&self) -> u64 {
        self.complete_ns.saturating_sub(self.issue_ns)
    }
}

/// A runqueue wait the kernel sent (`struct wait_rec`).
#[derive(Clone, Debug, PartialEq)]
pub struct WaitRecord {
    pub cpu: u32,
    pub start_ns: u64,
    pub wait_ns: u64,
    /// How much of the wait the task that ran just before it held the CPU.
    pub held_ns: u64,
    /// Real-time tasks' time on the CPU during the wait.
    pub rt_ns: u64,
    pub tid: u32,
    pub prio: i32,
    pub holder_tid: u32,
    pub holder_prio: i32,
    pub rt_tid: u32,
    pub rt_prio: i32,
    pub comm: [u8; 16],
    pub holder_comm: [u8; 16],
    pub rt_comm: [u8; 16],
}

impl WaitRecord {
    pub fn parse(b: &[u8]) -> Option<WaitRecord> {
        if b.len() < WAIT_RECORD || u16::from_le_bytes([b[0], b[1]]) != REC_WAIT {
            return None;
        }
        Some(WaitRecord {
            cpu: u32_at(b, 4),
            start_ns: u64_at(b, 8),
            wait_ns: u64_at(b, 16),
            held_ns: u64_at(b, 24),
            rt_ns: u64_at(b, 32),
            tid: u32_at(b, 40),
            prio: u32_at(b, 44) as i32,
            holder_tid: u32_at(b, 48),
            holder_prio: u32_at(b, 52) as i32,
            rt_tid: u32_at(b, 56),
            rt_prio: u32_at(b, 60) as i32,
            comm: b[64..80].try_into().expect("16 bytes"),
            holder_comm: b[80..96].try_into().expect("16 bytes"),
            rt_comm: b[96..112].try_into().expect("16 bytes"),
        })
    }
}

/// A tracepoint's raw record as the kernel sent it (`struct event_rec`).
#[derive(Clone, Debug, PartialEq)]
pub struct EventRecord<'a> {
    pub cpu: u32,
    pub ts_ns: u64,
    pub tid: u32,
    /// Its index in [`CONTEXT_EVENTS`].
    pub event: u16,
    pub comm: [u8; 16],
    /// The record as its tracefs `format` lays it out (common fields first).
    pub data: &'a [u8],
}

impl<'a> EventRecord<'a> {
    pub fn parse(b: &'a [u8]) -> Option<EventRecord<'a>> {
        if b.len() < EVENT_RECORD_BEFORE || u16::from_le_bytes([b[0], b[1]]) != REC_EVENT {
            return None;
        }
        Some(EventRecord {
            cpu: u32_at(b, 4),
            ts_ns: u64_at(b, 8),
            tid: u32_at(b, 16),
            event: u16::from_le_bytes([b[20], b[21]]),
            comm: b[24..40].try_into().expect("16 bytes"),
            data: &b[EVENT_DATA_AT..b.len().min(EVENT_RECORD)],
        })
    }
}

/// A NUL-padded kernel task name's bytes.
pub fn comm_str(c: &[u8]) -> &[u8] {
    c.split(|&x| x == 0).next().unwrap_or_default()
}

/// A NUL-padded kernel task name as text.
pub fn comm_string(c: &[u8]) -> String {
    String::from_utf8_lossy(comm_str(c)).into_owned()
}

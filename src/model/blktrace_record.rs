//! blktrace's binary record (`struct blk_io_trace`, version 7), shared by
//! the importer (ingest::blktrace_bin), the exporter (report::blktrace) and
//! the `blk` tracer recorder (capture::blk_tracer), which appends process
//! notes to what the kernel wrote.

use crate::model::{block::tc, Action, BlockEvent, Dev, Extra};

/// `BLK_IO_TRACE_MAGIC`, in the top 24 bits of the first word.
pub const MAGIC: u32 = 0x6561_7400;
/// The record version iosleuth reads and writes.
pub const VERSION: u32 = 0x07;
/// The fixed part of a record, before its payload.
pub const RECORD_LEN: usize = 48;
/// The `blk` tracer's binary container puts pid, cpu and time before each record.
pub const TRACER_HEADER_LEN: usize = 16;

/// The kernel's name of a device on this machine, if it exists here.
pub fn device_name(dev: Dev) -> Option<String> {
    let uevent = std::fs::read_to_string(format!(
        "/sys/dev/block/{}:{}/uevent",
        dev.major(),
        dev.minor()
    ))
    .ok()?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(|s| s.replace('/', "_"))
}

/// The category bits the kernel sets for this action.
fn categories(e: &BlockEvent) -> u32 {
    let mut c = e.rwbs.blktrace_categories();
    c |= match e.action {
        Action::Requeue => tc::REQUEUE,
        Action::Issue => tc::ISSUE,
        Action::Complete | Action::BioComplete => tc::COMPLETE,
        _ => tc::QUEUE,
    };
    if e.action.is_request_level() {
        c |= if e.passthrough { tc::PC } else { tc::FS };
    }
    if e.action == Action::BioComplete {
        // bio completions carry no FS bit.
        c &= !tc::FS;
    }
    c
}

/// Mirrors the fields of `struct blk_io_trace`, in its order.
#[allow(clippy::too_many_arguments)]
fn record(
    seq: u32,
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    dev: Dev,
    cpu: u32,
    error: u16,
    pdu: &[u8],
) -> Vec<u8> {
    let mut r = Vec::with_capacity(RECORD_LEN + pdu.len());
    r.extend_from_slice(&(MAGIC | VERSION).to_le_bytes());
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend_from_slice(&time.to_le_bytes());
    r.extend_from_slice(&sector.to_le_bytes());
    r.extend_from_slice(&bytes.to_le_bytes());
    r.extend_from_slice(&action.to_le_bytes());
    r.extend_from_slice(&pid.to_le_bytes());
    r.extend_from_slice(&dev.0.to_le_bytes());
    r.extend_from_slice(&cpu.to_le_bytes());
    r.extend_from_slice(&error.to_le_bytes());
    r.extend_from_slice(&(pdu.len() as u16).to_le_bytes());
    r.extend_from_slice(pdu);
    r
}

/// Encodes one block event as a blktrace record, or `None` where blktrace has
/// no such record (tracepoint-only events, plugs without a device).
pub fn encode(e: &BlockEvent, seq: u32) -> Option<Vec<u8>> {
    let ta = e.action.blktrace_code()?;
    if e.dev == Dev(0) {
        return None;
    }
    let mut pdu = Vec::new();
    match e.extra {
        Extra::Remap {
            from_dev,
            from_sector,
        } => {
            pdu.extend_from_slice(&from_dev.0.to_be_bytes());
            pdu.extend_from_slice(&e.dev.0.to_be_bytes());
            pdu.extend_from_slice(&from_sector.to_be_bytes());
        }
        Extra::Split { new_sector } => pdu.extend_from_slice(&new_sector.to_be_bytes()),
        Extra::Unplug { depth } => pdu.extend_from_slice(&(depth as u64).to_be_bytes()),
        Extra::None => {}
    }
    let action = (categories(e) << 16) | ta;
    Some(record(
        seq,
        e.ts,
        e.sector,
        e.bytes,
        action,
        e.pid,
        e.dev,
        e.cpu,
        e.error as u16,
        &pdu,
    ))
}

/// A process note in the `blk` tracer's binary container (16-byte header of
/// pid, cpu and time before the record), as `iosleuth record` appends them.
pub fn tracer_process_note(pid: u32, comm: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + RECORD_LEN + 16);
    v.extend_from_slice(&pid.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&0u64.to_le_bytes());
    v.extend_from_slice(&process_note(pid, comm, 0, Dev(0), 0, 0));
    v
}

pub fn process_note(pid: u32, comm: &str, time: u64, dev: Dev, cpu: u32, seq: u32) -> Vec<u8> {
    let mut name = comm.as_bytes().to_vec();
    name.resize(16, 0);
    record(seq, time, 0, 0, tc::NOTIFY << 16, pid, dev, cpu, 0, &name)
}

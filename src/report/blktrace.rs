//! Writes events as blktrace's per-CPU files (`NAME.blktrace.CPU`), so that
//! blkparse, btt, iowatcher and seekwatcher can read captures made with the
//! `blk` tracer or with tracepoints.

use crate::ingest::blktrace_bin::{MAGIC, RECORD_LEN, VERSION};
use crate::model::{block::tc, Action, BlockEvent, Dev, Event, Extra};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

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

fn process_note(pid: u32, comm: &str, time: u64, dev: Dev, cpu: u32, seq: u32) -> Vec<u8> {
    let mut name = comm.as_bytes().to_vec();
    name.resize(16, 0);
    record(seq, time, 0, 0, tc::NOTIFY << 16, pid, dev, cpu, 0, &name)
}

#[derive(Debug, Default)]
pub struct ExportSummary {
    pub files: Vec<PathBuf>,
    pub records: u64,
    pub skipped: u64,
}

struct Writer {
    file: BufWriter<File>,
    seq: u32,
}

/// Writes the block events of `events` into `dir`, one file per device and
/// CPU. `known_names` (pid → name) names processes whose names the stream
/// only gives later, or never.
pub fn export(
    events: impl Iterator<Item = Event>,
    dir: &Path,
    known_names: HashMap<u32, String>,
) -> std::io::Result<ExportSummary> {
    std::fs::create_dir_all(dir)?;
    let mut writers: HashMap<(Dev, u32), Writer> = HashMap::new();
    let mut names: HashMap<Dev, String> = HashMap::new();
    let mut comms: HashMap<u32, String> = known_names;
    let mut noted: HashSet<(Dev, u32)> = HashSet::new();
    let mut sum = ExportSummary::default();
    for ev in events {
        let e = match ev {
            Event::Block(b) => b,
            Event::ProcessName { pid, comm } => {
                comms.insert(pid, comm.to_string());
                continue;
            }
            Event::Other(_) => continue,
        };
        if !e.comm.is_empty() && e.action == Action::Queue {
            comms.entry(e.pid).or_insert_with(|| e.comm.to_string());
        }
        if e.action.blktrace_code().is_none() || e.dev == Dev(0) {
            sum.skipped += 1;
            continue;
        }
        let key = (e.dev, e.cpu);
        let w = match writers.entry(key) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let name = names.entry(e.dev).or_insert_with(|| {
                    device_name(e.dev)
                        .unwrap_or_else(|| format!("dev{}_{}", e.dev.major(), e.dev.minor()))
                });
                let path = dir.join(format!("{name}.blktrace.{}", e.cpu));
                let file = BufWriter::with_capacity(1 << 20, File::create(&path)?);
                sum.files.push(path);
                v.insert(Writer { file, seq: 0 })
            }
        };
        if noted.insert((e.dev, e.pid)) {
            let comm = comms.get(&e.pid).cloned().unwrap_or_else(|| {
                if e.comm.is_empty() {
                    format!("pid{}", e.pid)
                } else {
                    e.comm.to_string()
                }
            });
            w.seq += 1;
            w.file
                .write_all(&process_note(e.pid, &comm, e.ts, e.dev, e.cpu, w.seq))?;
        }
        w.seq += 1;
        if let Some(rec) = encode(&e, w.seq) {
            w.file.write_all(&rec)?;
            sum.records += 1;
        }
    }
    // blkparse reads CPUs 0..N until a file is missing: fill the gaps.
    let mut max_cpu: HashMap<Dev, u32> = HashMap::new();
    for (dev, cpu) in writers.keys() {
        let m = max_cpu.entry(*dev).or_default();
        *m = (*m).max(*cpu);
    }
    for (dev, max) in max_cpu {
        for cpu in 0..max {
            if !writers.contains_key(&(dev, cpu)) {
                let p = dir.join(format!("{}.blktrace.{cpu}", names[&dev]));
                File::create(&p)?;
                sum.files.push(p);
            }
        }
    }
    for (_, mut w) in writers {
        w.file.flush()?;
    }
    sum.files.sort();
    Ok(sum)
}

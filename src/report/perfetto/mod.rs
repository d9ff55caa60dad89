//! `iosleuth export --perfetto out.pftrace CAPTURE`: the capture as a
//! Perfetto trace (protobuf `TrackEvent`s, opened by ui.perfetto.dev and
//! trace_processor). Protobuf rather than Chrome's JSON trace events: a
//! third of the size, nanosecond timestamps at any uptime, and a track
//! tree (devices → request lanes, threads → their states).
//!
//! Tracks:
//! - "Block devices" → one track per device → "requests" lanes: each
//!   request is a slice from its first bio queued to its completion, with
//!   its stages and size as arguments; requests that overlap go on
//!   different lanes of one name (the UI shows them as one track of
//!   stacked rows); a "queue depth" counter of requests at the device.
//! - a thread track per thread: its syscalls as slices, probe operations
//!   on child tracks by kind, and a "state" child track (running, runnable,
//!   blocked, sleeping) from the scheduler events.
//! - "Journal" → a track per journal with each commit as a slice.
//! - "Interrupts" → per CPU, hard irq and softirq slices.
//!
//! Timestamps are the trace's own (no clock id: read as trace time).

pub mod proto;
mod tracks;

use crate::analyze::rows::{OperationRow, RequestRow, RowSinks, ThreadStateRow};
use crate::error::{Error, Result};
use crate::model::Event;
use crate::pipeline::Options;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use tracks::Writer;

/// What was written, by kind of slice.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub requests: u64,
    pub operations: u64,
    pub thread_states: u64,
    pub commits: u64,
    pub irqs: u64,
    pub softirqs: u64,
    pub tracks: u64,
    pub bytes: u64,
}

fn collect<T: Send + 'static>(rx: Receiver<T>) -> std::thread::JoinHandle<Vec<T>> {
    std::thread::spawn(move || rx.into_iter().collect())
}

pub fn export(input: &Path, out: &Path, base: &Options) -> Result<Summary> {
    const QUEUE: usize = 8192;
    let (req_tx, req_rx) = sync_channel(QUEUE);
    let (op_tx, op_rx) = sync_channel(QUEUE);
    let (st_tx, st_rx) = sync_channel(QUEUE);
    let (reqs, ops, states) = (collect(req_rx), collect(op_rx), collect(st_rx));
    let opts = Options {
        rows: RowSinks {
            requests: Some(req_tx),
            operations: Some(op_tx),
            thread_states: Some(st_tx),
        },
        ..base.clone()
    };
    let analysed = crate::pipeline::read(&[input.to_path_buf()], &opts);
    drop(opts);
    let mut requests: Vec<RequestRow> = reqs.join().expect("collector");
    let mut operations: Vec<OperationRow> = ops.join().expect("collector");
    let mut states: Vec<ThreadStateRow> = states.join().expect("collector");
    let (analysis, _) = analysed?;
    // The second pass: what no analysis sends rows of (irqs, commits).
    let spans = kernel_spans(input)?;

    let file = std::fs::File::create(out)
        .map_err(|e| Error::failed(format!("{}: cannot create: {e}", out.display())))?;
    let mut w = Writer::new(std::io::BufWriter::new(file));
    requests.sort_by_key(|r| (r.queued_ns, r.completed_ns));
    operations.sort_by_key(|o| (o.start_ns, std::cmp::Reverse(o.latency_ns)));
    states.sort_by_key(|s| (s.start_ns, s.pid));
    let names = device_names(&analysis);
    let mut sum = Summary::default();
    let written = (|| -> std::io::Result<()> {
        sum.requests = w.requests(&requests, &names)?;
        sum.operations = w.operations(&operations)?;
        sum.thread_states = w.thread_states(&states)?;
        let (commits, irqs, softirqs) = w.kernel_spans(&spans)?;
        sum.commits = commits;
        sum.irqs = irqs;
        sum.softirqs = softirqs;
        Ok(())
    })();
    let finished = written.and_then(|_| w.finish());
    match finished {
        Ok((tracks, bytes)) => {
            sum.tracks = tracks;
            sum.bytes = bytes;
            Ok(sum)
        }
        Err(e) => {
            let _ = std::fs::remove_file(out);
            Err(Error::failed(format!("{}: {e}", out.display())))
        }
    }
}

/// Device names from the snapshot (`7,0` → `loop0`), for track names.
fn device_names(a: &crate::analyze::Analysis) -> Vec<(String, String)> {
    let Some(s) = &a.snapshot else {
        return Vec::new();
    };
    s.before
        .block_devices
        .iter()
        .filter_map(|(name, d)| Some((d.dev.clone()?.replace(':', ","), name.clone())))
        .collect()
}

/// A span of kernel work the trace shows with an entry and an exit event.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelSpan {
    Commit {
        journal: String,
        transaction: i64,
        start: u64,
        end: u64,
    },
    Irq {
        cpu: u32,
        name: String,
        start: u64,
        end: u64,
    },
    Softirq {
        cpu: u32,
        name: String,
        start: u64,
        end: u64,
    },
}

/// Journal commits (jbd2_start_commit → jbd2_end_commit of the same
/// transaction) and irq/softirq entry → exit on each CPU, from the events.
fn kernel_spans(input: &Path) -> Result<Vec<KernelSpan>> {
    use std::collections::HashMap;
    let mut out = Vec::new();
    let mut commits: HashMap<(String, i64), u64> = HashMap::new();
    let mut irq: HashMap<u32, (u64, String)> = HashMap::new();
    let mut soft: HashMap<u32, (u64, String)> = HashMap::new();
    for ev in crate::pipeline::open(&[input.to_path_buf()])? {
        let Event::Other(o) = ev else { continue };
        let name = o.short_name();
        let f = &o.fields;
        match name {
            "jbd2_start_commit" | "jbd2_end_commit" => {
                let (Some(dev), Some(tid)) = (f.int("dev"), f.int("transaction")) else {
                    continue;
                };
                let dev = crate::model::Dev(dev as u32);
                let key = (format!("{},{}", dev.major(), dev.minor()), tid);
                if name == "jbd2_start_commit" {
                    commits.insert(key, o.ts);
                } else if let Some(start) = commits.remove(&key) {
                    out.push(KernelSpan::Commit {
                        journal: key.0,
                        transaction: tid,
                        start,
                        end: o.ts,
                    });
                }
            }
            "irq_handler_entry" => {
                let n = f.str("name").map_or_else(
                    || format!("irq {}", f.int("irq").unwrap_or(-1)),
                    str::to_string,
                );
                irq.insert(o.cpu, (o.ts, n));
            }
            "irq_handler_exit" => {
                if let Some((start, name)) = irq.remove(&o.cpu) {
                    out.push(KernelSpan::Irq {
                        cpu: o.cpu,
                        name,
                        start,
                        end: o.ts,
                    });
                }
            }
            "softirq_entry" => {
                let n = f
                    .str("action")
                    .map(str::to_string)
                    .or_else(|| f.int("vec").map(softirq_name))
                    .unwrap_or_else(|| "softirq".into());
                soft.insert(o.cpu, (o.ts, n));
            }
            "softirq_exit" => {
                if let Some((start, name)) = soft.remove(&o.cpu) {
                    out.push(KernelSpan::Softirq {
                        cpu: o.cpu,
                        name,
                        start,
                        end: o.ts,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The kernel's softirq names, by vector (include/linux/interrupt.h).
fn softirq_name(vec: i64) -> String {
    const NAMES: [&str; 10] = [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ];
    usize::try_from(vec)
        .ok()
        .and_then(|v| NAMES.get(v))
        .map_or_else(|| format!("softirq {vec}"), |n| n.to_string())
}

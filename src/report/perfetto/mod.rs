//! `iosleuth export --perfetto out.pftrace CAPTURE`: the capture as a
//! Perfetto trace (protobuf `TrackEvent`s, opened by ui.perfetto.dev and
//! trace_processor). Protobuf rather than Chrome's JSON trace events: a
//! third of the size, nanosecond timestamps at any uptime, and a track
//! tree (devices → request lanes, threads → their states).
//!
//! Tracks:
//! - "Block devices" → one track per device → "requests" lanes: each
//!   request is a slice from its first bio queued to its completion, with
//!   its stages and size as arguments, written as it completes; requests
//!   that overlap go on different lanes of one name (the UI shows them as
//!   one track of stacked rows); a "queue depth" counter of requests at
//!   the device.
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
use std::sync::{Arc, Mutex};
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

pub fn export(input: &Path, out: &Path, base: &Options) -> Result<Summary> {
    const QUEUE: usize = 8192;
    let file = std::fs::File::create(out)
        .map_err(|e| Error::failed(format!("{}: cannot create: {e}", out.display())))?;
    let failed = |e: std::io::Error| {
        let _ = std::fs::remove_file(out);
        Error::failed(format!("{}: {e}", out.display()))
    };
    // Every row is written as the analyses send it (Perfetto sorts events
    // by time itself): memory does not follow the number of rows, except
    // the queue depth's changes (see `Writer::queue_depths`).
    let names = device_names(input);
    let w = Arc::new(Mutex::new(Writer::new(
        std::io::BufWriter::new(file),
        names,
    )));
    let (req_tx, req_rx) = sync_channel::<RequestRow>(QUEUE);
    let (op_tx, op_rx) = sync_channel::<OperationRow>(QUEUE);
    let (st_tx, st_rx) = sync_channel::<ThreadStateRow>(QUEUE);
    let reqs = write_as_they_come(&w, req_rx, |w, r| w.request(&r));
    let ops = write_as_they_come(&w, op_rx, |w, o| w.operation(&o));
    let states = write_as_they_come(&w, st_rx, |w, s| w.thread_state(&s));
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
    let requests = reqs.join().expect("writer").map_err(failed)?;
    let operations = ops.join().expect("writer").map_err(failed)?;
    let thread_states = states.join().expect("writer").map_err(failed)?;
    analysed.inspect_err(|_| {
        let _ = std::fs::remove_file(out);
    })?;
    // The second pass: what no analysis sends rows of (irqs, commits).
    let spans = kernel_spans(input).inspect_err(|_| {
        let _ = std::fs::remove_file(out);
    })?;
    let mut w = Arc::try_unwrap(w)
        .ok()
        .expect("the writer threads ended")
        .into_inner()
        .expect("not poisoned");
    let mut sum = Summary {
        requests,
        operations,
        thread_states,
        ..Default::default()
    };
    let written = (|| -> std::io::Result<()> {
        w.queue_depths()?;
        let (commits, irqs, softirqs) = w.kernel_spans(&spans)?;
        sum.commits = commits;
        sum.irqs = irqs;
        sum.softirqs = softirqs;
        let (tracks, bytes) = w.finish()?;
        sum.tracks = tracks;
        sum.bytes = bytes;
        Ok(())
    })();
    written.map_err(failed)?;
    Ok(sum)
}

type Shared = Arc<Mutex<Writer<std::io::BufWriter<std::fs::File>>>>;

/// A thread that writes each row `rx` brings; the number written, or the
/// first error (the rows after it are drained and dropped).
fn write_as_they_come<T: Send + 'static>(
    w: &Shared,
    rx: Receiver<T>,
    write: fn(&mut Writer<std::io::BufWriter<std::fs::File>>, T) -> std::io::Result<()>,
) -> std::thread::JoinHandle<std::io::Result<u64>> {
    let w = Arc::clone(w);
    std::thread::spawn(move || {
        let mut n = 0;
        let mut error = None;
        for row in rx {
            if error.is_none() {
                let mut guard = w.lock().expect("not poisoned");
                match write(&mut guard, row) {
                    Ok(()) => n += 1,
                    Err(e) => error = Some(e),
                }
            }
        }
        error.map_or(Ok(n), Err)
    })
}

/// Device names from the input's snapshot (`7,0` → `loop0`), for track
/// names.
fn device_names(input: &Path) -> Vec<(String, String)> {
    let (snapshots, _) = crate::pipeline::snapshots_of(&[input.to_path_buf()]);
    let Some(s) = snapshots.into_iter().flatten().next() else {
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

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

use crate::analyze::rows::{OperationRow, RequestRow, RowSinks, SpanRow, ThreadStateRow};
use crate::error::Result;
use crate::pipeline::Options;
use crate::report::output_file::OutputFile;
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

/// Writes `input`'s Perfetto trace to `out`: checked before the analysis
/// (see [`OutputFile`]), written beside it and renamed over it when
/// complete; on any failure `out` is left as it was.
pub fn export(input: &Path, out: &Path, base: &Options) -> Result<Summary> {
    const QUEUE: usize = 8192;
    let staged = OutputFile::check(out, &[input.to_path_buf()])?.stage()?;
    let file = staged.file().try_clone().map_err(|e| staged.failed(e))?;
    let failed = |e: std::io::Error| staged.failed(e);
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
    let (span_tx, span_rx) = sync_channel::<SpanRow>(QUEUE);
    let reqs = write_as_they_come(&w, req_rx, |w, r| w.request(&r));
    let ops = write_as_they_come(&w, op_rx, |w, o| w.operation(&o));
    let states = write_as_they_come(&w, st_rx, |w, s| w.thread_state(&s));
    let spans = write_as_they_come(&w, span_rx, |w, s| w.span(&s));
    let rows = RowSinks {
        requests: Some(req_tx),
        operations: Some(op_tx),
        thread_states: Some(st_tx),
        spans: Some(span_tx),
    };
    let analysed = crate::pipeline::read_sending(input, base, rows);
    let requests = reqs.join().expect("writer").map_err(failed)?;
    let operations = ops.join().expect("writer").map_err(failed)?;
    let thread_states = states.join().expect("writer").map_err(failed)?;
    spans.join().expect("writer").map_err(failed)?;
    analysed?;
    let mut w = Arc::try_unwrap(w)
        .ok()
        .expect("the writer threads ended")
        .into_inner()
        .expect("not poisoned");
    let (commits, irqs, softirqs) = w.span_counts();
    let mut sum = Summary {
        requests,
        operations,
        thread_states,
        commits,
        irqs,
        softirqs,
        ..Default::default()
    };
    let written = (|| -> std::io::Result<()> {
        w.queue_depths()?;
        let (tracks, bytes) = w.finish()?;
        sum.tracks = tracks;
        sum.bytes = bytes;
        Ok(())
    })();
    written.map_err(failed)?;
    staged.commit()?;
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

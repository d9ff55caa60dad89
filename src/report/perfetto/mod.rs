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
//!   one track of stacked rows); a "queue depth" counter track (declared
//!   with its counter descriptor) of requests at the device.
//! - a process track per process, with a thread track per thread in it
//!   (the thread group from the snapshot; a thread of unknown process is a
//!   process of its own): its syscalls as slices, probe operations on child
//!   tracks by kind, and a "state" child track (running, runnable, blocked,
//!   sleeping) from the scheduler events. An operation's slice has a flow
//!   to each request it waited for (an instant on the request's lane).
//! - "CPUs" → a track per CPU: which thread ran there, from the switches.
//! - "Journal" → a track per journal with each commit as a slice.
//! - "Interrupts" → per CPU, hard irq and softirq slices.
//! - "Trace" → one slice from the trace's start (the report's time zero)
//!   to its last event, so that the UI's zero is the report's.
//!
//! Timestamps are the trace's own (no clock id: read as trace time).

pub mod proto;
mod tracks;

use crate::analyze::rows::{
    OperationRow, RequestRow, RowCounts, RowWriters, SpanRow, ThreadStateRow,
};
use crate::error::Result;
use crate::model::snapshot::Snapshot;
use crate::report::output_file::{Destination, Staged};
use std::io::{BufWriter, Write};
use std::sync::Mutex;
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

/// A Perfetto trace being written: `begin` checks and stages the output,
/// `writers` write each row as the analyses send it (Perfetto sorts events
/// by time itself, so memory does not follow the number of rows, except
/// the queue depth's changes, see `Writer::queue_depths`), `finish` adds
/// the tracks and renames the file over `out`. On any failure `out` is
/// left as it was.
pub struct Export {
    /// `None` for standard output, written as it comes.
    staged: Option<Staged>,
    writer: Mutex<Writer<BufWriter<Box<dyn Write + Send>>>>,
}

impl Export {
    /// Starts writing to `out`, checked before the analysis (see
    /// [`Destination`]); `devices` name the device tracks (`7,0` →
    /// `loop0`, from [`device_names`]); `processes`: thread → process,
    /// where known ([`Snapshot::thread_groups`]).
    pub fn begin(
        out: &Destination,
        devices: Vec<(String, String)>,
        processes: std::collections::HashMap<u32, u32>,
    ) -> Result<Export> {
        let (staged, sink): (Option<Staged>, Box<dyn Write + Send>) = match out.file() {
            Some(f) => {
                let staged = f.stage()?;
                let file = staged.file().try_clone().map_err(|e| staged.failed(e))?;
                (Some(staged), Box::new(file))
            }
            None => (None, Box::new(std::io::stdout())),
        };
        Ok(Export {
            writer: Mutex::new(Writer::new(BufWriter::new(sink), devices, processes)),
            staged,
        })
    }

    /// Requests, operations, thread states and spans, each written as it
    /// comes.
    pub fn writers(&self) -> RowWriters<'_> {
        let w = &self.writer;
        let lock = move || w.lock().expect("not poisoned");
        RowWriters {
            requests: Some(Box::new(move |r: RequestRow| lock().request(&r))),
            operations: Some(Box::new(move |o: OperationRow| lock().operation(&o))),
            thread_states: Some(Box::new(move |t: ThreadStateRow| lock().thread_state(&t))),
            spans: Some(Box::new(move |s: SpanRow| lock().span(&s))),
        }
    }

    /// After the analysis: a write error names the output; else the
    /// analysis' own error; else the queue depths and the track tree are
    /// written and the file put in place.
    pub fn finish(
        self,
        written: std::io::Result<RowCounts>,
        analyzed: Result<TraceSpan>,
    ) -> Result<Summary> {
        let staged = self.staged;
        let failed = |e: std::io::Error| match &staged {
            Some(s) => s.failed(e),
            None => crate::error::Error::Output(e),
        };
        let counts = written.map_err(failed)?;
        let span = analyzed?;
        let mut w = self.writer.into_inner().expect("not poisoned");
        let (commits, irqs, softirqs) = w.span_counts();
        let mut sum = Summary {
            requests: counts.requests,
            operations: counts.operations,
            thread_states: counts.thread_states,
            commits,
            irqs,
            softirqs,
            ..Default::default()
        };
        let tracks = (|| -> std::io::Result<()> {
            w.trace_span(span)?;
            w.queue_depths()?;
            let (tracks, bytes) = w.finish()?;
            sum.tracks = tracks;
            sum.bytes = bytes;
            Ok(())
        })();
        tracks.map_err(failed)?;
        if let Some(s) = staged {
            s.commit()?;
        }
        Ok(sum)
    }
}

/// The trace's time zero (the origin every other output counts from) and
/// its last event: a slice over them makes the Perfetto UI's zero the
/// report's zero, whatever the first slice is.
#[derive(Debug, Clone, Copy)]
pub struct TraceSpan {
    pub origin_ns: u64,
    pub last_ns: u64,
}

/// Device names from a snapshot (`7,0` → `loop0`), for track names.
pub fn device_names(snapshot: Option<&Snapshot>) -> Vec<(String, String)> {
    let Some(s) = snapshot else {
        return Vec::new();
    };
    s.before
        .block_devices
        .iter()
        .filter_map(|(name, d)| Some((d.dev.clone()?.replace(':', ","), name.clone())))
        .collect()
}

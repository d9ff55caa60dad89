//! A light capture's slow requests (`slow.bin`, model::light) as block
//! events: each request queued at its allocation, issued and completed,
//! in time order, by the process that issued it. What the histograms hold
//! is read beside the analysis (analyze::light), not as events.

use super::source::{InputError, Source, SourceStats};
use crate::model::light::{SlowRequest, SLOW, SLOW_HEADER, SLOW_MAGIC, SLOW_RECORD};
use crate::model::{Action, BlockEvent, Comm, Event, Rwbs};
use std::path::{Path, PathBuf};

/// The slow requests of a capture are capped per second; this many is
/// hours of them at the default cap.
const MAX_FILE: u64 = 4 << 30;

pub struct LightSource {
    path: PathBuf,
    /// Events in reverse time order (popped from the end).
    events: Vec<BlockEvent>,
    stats: SourceStats,
}

/// Opens the light capture `dir` (its manifest already checked).
pub fn open(dir: &Path) -> Result<Vec<Box<dyn Source>>, InputError> {
    let path = dir.join(SLOW);
    let bytes = super::files::read_small_bytes(&path, MAX_FILE)
        .map_err(|e| InputError::new(&path, format!("cannot read the slow requests: {e}")))?;
    let mut stats = SourceStats::default();
    let requests = parse(&path, &bytes, &mut stats)?;
    let mut events: Vec<BlockEvent> = requests.iter().flat_map(events_of).collect();
    events.sort_by_key(|e| std::cmp::Reverse((e.ts, e.action as u8)));
    Ok(vec![Box::new(LightSource {
        path,
        events,
        stats,
    })])
}

/// The records of `slow.bin`; a cut-short last record is a note, a wrong
/// header an error.
fn parse(path: &Path, b: &[u8], stats: &mut SourceStats) -> Result<Vec<SlowRequest>, InputError> {
    if b.len() < SLOW_HEADER || &b[..8] != SLOW_MAGIC {
        return Err(InputError::new(
            path,
            "not a light capture's slow requests (no IOSLSLOW header)",
        ));
    }
    let size = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) as usize;
    if size != SLOW_RECORD {
        return Err(InputError::new(
            path,
            format!("records of {size} bytes, where this iosleuth reads {SLOW_RECORD}-byte ones"),
        ));
    }
    let body = &b[SLOW_HEADER..];
    let mut out = Vec::with_capacity(body.len() / SLOW_RECORD);
    for (i, rec) in body.chunks(SLOW_RECORD).enumerate() {
        if rec.len() < SLOW_RECORD {
            stats.cut_short = Some(format!(
                "the last record is cut short ({} of {SLOW_RECORD} bytes)",
                rec.len()
            ));
            break;
        }
        match SlowRequest::parse(rec) {
            Some(r) if r.complete_ns >= r.issue_ns => out.push(r),
            _ => stats.skip(|| format!("record {i}")),
        }
    }
    Ok(out)
}

/// The request's queue (at its allocation, when the queue stamped it),
/// issue and completion.
fn events_of(r: &SlowRequest) -> [BlockEvent; 3] {
    let rwbs = Rwbs(match r.cmd_flags & 0xff {
        0 => Rwbs::READ,
        1 => Rwbs::WRITE,
        2 => Rwbs::FLUSH,
        3 | 5 => Rwbs::DISCARD,
        _ => Rwbs::NONE,
    });
    let queued = r.complete_ns - r.total_ns();
    let comm = Comm::new(r.comm.split(|&c| c == 0).next().unwrap_or_default());
    let at = |ts: u64, action: Action, cpu: u32| BlockEvent {
        ts,
        dev: r.dev,
        action,
        rwbs,
        sector: r.sector,
        bytes: r.bytes,
        pid: r.tid,
        cpu,
        error: if action == Action::Complete {
            r.error
        } else {
            0
        },
        comm,
        passthrough: false,
        extra: Default::default(),
    };
    [
        at(queued, Action::Queue, r.issue_cpu),
        at(r.issue_ns, Action::Issue, r.issue_cpu),
        at(r.complete_ns, Action::Complete, r.complete_cpu),
    ]
}

impl Source for LightSource {
    fn next_event(&mut self) -> Option<Event> {
        let e = self.events.pop()?;
        self.stats.events += 1;
        Some(Event::Block(e))
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn format(&self) -> &'static str {
        "iosleuth light capture"
    }

    fn stats(&self) -> &SourceStats {
        &self.stats
    }
}

//! A light capture (model::light) as events: its slow requests
//! (`slow.bin`) each queued at its allocation, issued and completed by the
//! thread that issued it, and the journal's events of the flight recorder
//! (`context.bin`) decoded by the format files the capture keeps, all in
//! time order. What only the kernel's maps hold (histograms, counters) and
//! the long runqueue waits are read by [`load`] for analyze::light, not as
//! events.

use super::capture_dir::{load_formats, Decoder};
use super::source::{InputError, Source, SourceStats};
use crate::model::light::{
    comm_str, EventRecord, LightDoc, SlowRequest, WaitRecord, CONTEXT, CONTEXT_EVENTS,
    CONTEXT_HEADER, CONTEXT_MAGIC, LIGHT, REC_EVENT, REC_WAIT, SLOW, SLOW_HEADER, SLOW_MAGIC,
    SLOW_RECORD,
};
use crate::model::{Action, BlockEvent, Comm, Event, Rwbs};
use std::path::{Path, PathBuf};

/// What a light capture holds beside its events.
pub struct LightInputs {
    pub doc: LightDoc,
    /// Runqueue waits of at least the capture's `wait_min_ns`.
    pub waits: Vec<WaitRecord>,
    /// The slowest requests, longest first.
    pub slowest: Vec<SlowRequest>,
}

/// How many of the slowest requests analyze::light keeps.
const SLOWEST_KEPT: usize = 20;

/// The slow requests of a capture are capped per second; this many is
/// hours of them at the default cap.
const MAX_FILE: u64 = 4 << 30;

pub struct LightSource {
    path: PathBuf,
    /// Events in reverse time order (popped from the end).
    events: Vec<Event>,
    stats: SourceStats,
}

/// Opens the light capture `dir` (its manifest already checked).
pub fn open(dir: &Path) -> Result<Vec<Box<dyn Source>>, InputError> {
    let path = dir.join(SLOW);
    let mut stats = SourceStats::default();
    let requests = read_slow(dir, &mut stats)?;
    let mut events: Vec<Event> = requests
        .iter()
        .flat_map(events_of)
        .map(Event::Block)
        .collect();
    events.extend(context_events(dir, &mut stats)?);
    events.sort_by_key(|e| std::cmp::Reverse((e.ts().unwrap_or(0), order(e))));
    Ok(vec![Box::new(LightSource {
        path,
        events,
        stats,
    })])
}

/// Ties in time: block stages in their order, other events after.
fn order(e: &Event) -> u8 {
    match e {
        Event::Block(b) => b.action as u8,
        _ => u8::MAX,
    }
}

/// The slow requests of `dir`.
fn read_slow(dir: &Path, stats: &mut SourceStats) -> Result<Vec<SlowRequest>, InputError> {
    let path = dir.join(SLOW);
    let bytes = super::files::read_small_bytes(&path, MAX_FILE)
        .map_err(|e| InputError::new(&path, format!("cannot read the slow requests: {e}")))?;
    parse(&path, &bytes, stats)
}

/// The histograms, the long runqueue waits and the slowest requests of the
/// light capture `dir`.
pub fn load(dir: &Path) -> Result<LightInputs, InputError> {
    let file = dir.join(LIGHT);
    let doc: LightDoc = super::files::read_small(&file, 64 << 20)
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| InputError::new(&file, format!("not a light capture's histograms: {e}")))?;
    let mut stats = SourceStats::default();
    let mut slowest = read_slow(dir, &mut stats)?;
    slowest.sort_by_key(|r| std::cmp::Reverse(r.total_ns()));
    slowest.truncate(SLOWEST_KEPT);
    let waits = context_records(dir, &mut stats)?
        .iter()
        .filter_map(|r| WaitRecord::parse(r))
        .collect();
    Ok(LightInputs {
        doc,
        waits,
        slowest,
    })
}

/// The records of `context.bin` (none in captures made before it
/// existed); a cut-short last record is a note.
fn context_records(dir: &Path, stats: &mut SourceStats) -> Result<Vec<Vec<u8>>, InputError> {
    let path = dir.join(CONTEXT);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let b = super::files::read_small_bytes(&path, MAX_FILE)
        .map_err(|e| InputError::new(&path, format!("cannot read the flight recorder: {e}")))?;
    if b.len() < CONTEXT_HEADER || &b[..8] != CONTEXT_MAGIC {
        return Err(InputError::new(
            &path,
            "not a light capture's flight recorder (no IOSLCTX1 header)",
        ));
    }
    let mut out = Vec::new();
    let mut at = CONTEXT_HEADER;
    while at < b.len() {
        let len = b
            .get(at + 2..at + 4)
            .map(|l| u16::from_le_bytes([l[0], l[1]]) as usize)
            .unwrap_or(0);
        if len < 4 || at + len > b.len() {
            stats.cut_short = Some(format!(
                "{}: the record at byte {at} is cut short or damaged; the flight recorder's later records are skipped",
                path.display()
            ));
            break;
        }
        out.push(b[at..at + len].to_vec());
        at += len;
    }
    Ok(out)
}

/// The journal's events of the flight recorder, decoded by the capture's
/// format files and named by the task they came from.
fn context_events(dir: &Path, stats: &mut SourceStats) -> Result<Vec<Event>, InputError> {
    let records = context_records(dir, stats)?;
    if !records
        .iter()
        .any(|r| r.first() == Some(&(REC_EVENT as u8)))
    {
        return Ok(Vec::new());
    }
    let (formats, page) = load_formats(dir)?;
    let decoder = Decoder::new(&formats, page);
    // The format id of each context event, by its index.
    let ids: Vec<Option<u16>> = CONTEXT_EVENTS
        .iter()
        .map(|(sys, name)| {
            formats
                .iter()
                .find(|f| f.system == *sys && f.name == *name)
                .map(|f| f.id)
        })
        .collect();
    let mut out = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let kind = u16::from_le_bytes([r[0], r[1]]);
        if kind == REC_WAIT {
            continue;
        }
        let decoded = EventRecord::parse(r).and_then(|e| {
            let id = (*ids.get(usize::from(e.event))?)?;
            let data = with_common_fields(e.data, id, e.tid);
            let mut ev = decoder.decode(e.ts_ns, e.cpu, &data)?;
            if let Event::Other(o) = &mut ev {
                o.comm = Comm::new(comm_str(&e.comm));
            }
            Some(ev)
        });
        match decoded {
            Some(e) => out.push(e),
            None => stats.skip(|| format!("flight recorder record {i}")),
        }
    }
    Ok(out)
}

/// The raw record with its common fields (`struct trace_entry`: type,
/// flags, preempt count, pid), which the kernel overwrote before the BPF
/// program copied it, put back.
fn with_common_fields(data: &[u8], id: u16, tid: u32) -> Vec<u8> {
    let mut rec = data.to_vec();
    rec[0..2].copy_from_slice(&id.to_le_bytes());
    rec[2..4].copy_from_slice(&[0, 0]);
    rec[4..8].copy_from_slice(&tid.to_le_bytes());
    rec
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
    let comm = Comm::new(comm_str(&r.comm));
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
        Some(e)
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

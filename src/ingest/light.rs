//! A light capture (model::light) as events: its slow requests
//! (`slow.bin`) each queued at its allocation, issued and completed by the
//! thread that issued it, and the events the flight recorder kept whole
//! (`context.bin`: the journal's, the dirty limit's pauses, writeback
//! throttling's steps) decoded by the format files the capture keeps, all in
//! time order. What only the kernel's maps hold (histograms, counters) and
//! the long runqueue waits are read by [`load`] for analyze::light, not as
//! events.

use super::capture_dir::load_formats;
use super::format_decoder::Decoder;
use super::reader::Chunked;
use super::source::{InputError, Source, SourceStats};
use crate::model::light::{
    comm_str, EventRecord, LightDoc, SlowRequest, WaitRecord, CONTEXT, CONTEXT_EVENTS,
    CONTEXT_HEADER, CONTEXT_MAGIC, LIGHT, REC_EVENT, REC_WAIT, SLOW, SLOW_HEADER, SLOW_MAGIC,
    SLOW_RECORD,
};
use crate::model::{Action, BlockEvent, Comm, Event, Rwbs};
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};

/// What a light capture holds beside its events.
pub struct LightInputs {
    pub doc: LightDoc,
    /// Runqueue waits of at least the capture's `wait_min_ns`.
    pub waits: Vec<WaitRecord>,
    /// The slowest requests, longest first.
    pub slowest: Vec<SlowRequest>,
    /// What was wrong in `light.json` and left out, and what was too
    /// many to keep.
    pub warnings: Vec<String>,
}

/// How many of each device's slowest requests analyze::light keeps: per
/// device, so that a busy disk's queued writes cannot hide another
/// disk's stalls.
const SLOWEST_KEPT: usize = 20;

/// Devices whose slowest requests are kept, the slowest devices first;
/// device numbers come from the file and are not trusted to be few.
const SLOWEST_DEVICES: usize = 64;

/// The slow requests of a capture are capped per second; this many is
/// hours of them at the default cap.
const MAX_FILE: u64 = 4 << 30;

/// How many slow requests, kept events and runqueue waits one capture
/// keeps in memory: the files are read record by record, and what is
/// past this is counted and said.
const MAX_KEPT: usize = 1 << 19;

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
    if !dir.join(LIGHT).exists() {
        stats.notes.push(format!(
            "{}: missing: this light capture's request counts, latency histograms, merges and losses are unknown; what follows is only its slow requests (slow.bin), not every request",
            dir.join(LIGHT).display()
        ));
    }
    let mut events: Vec<Event> = Vec::new();
    let mut left_out = 0u64;
    // Each issuing thread's process; `None` for a thread id seen with two
    // (reused): unknown rather than maybe wrong.
    let mut processes: FxHashMap<u32, Option<u32>> = FxHashMap::default();
    each_slow(dir, &mut stats, |r| {
        if events.len() < 3 * MAX_KEPT {
            events.extend(events_of(&r).map(Event::Block));
            if r.tid != 0 && r.pid != 0 {
                let p = processes.entry(r.tid).or_insert(Some(r.pid));
                if *p != Some(r.pid) {
                    *p = None;
                }
            }
        } else {
            left_out += 1;
        }
    })?;
    if left_out > 0 {
        stats.notes.push(format!(
            "{}: {left_out} slow requests past the first {MAX_KEPT} were left out",
            path.display()
        ));
    }
    events.extend(context_events(dir, &mut stats)?);
    events.sort_by_key(|e| std::cmp::Reverse((e.ts().unwrap_or(0), order(e))));
    // The threads' processes come first (popped from the end).
    let mut known: Vec<(u32, u32)> = processes
        .into_iter()
        .filter_map(|(tid, p)| Some((tid, p?)))
        .collect();
    known.sort_unstable_by(|a, b| b.cmp(a));
    events.extend(
        known
            .into_iter()
            .map(|(tid, tgid)| Event::ThreadGroup { tid, tgid }),
    );
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

/// A capture file read as a stream, after its header: `magic` and what
/// the file is, for messages.
fn open_records(
    path: &Path,
    what: &str,
    header: usize,
    magic: &[u8; 8],
    name: &str,
) -> Result<Chunked, InputError> {
    let (f, meta) = super::files::open_regular(path)
        .map_err(|e| InputError::new(path, format!("cannot read {what}: {e}")))?;
    if meta.len() > MAX_FILE {
        return Err(InputError::new(
            path,
            format!(
                "cannot read {what}: is {} bytes, more than the {MAX_FILE} such a file can have",
                meta.len()
            ),
        ));
    }
    let mut input = Chunked::from_file(f);
    if input.ensure(header) < header || &input.avail()[..8] != magic {
        if let Some(e) = input.take_error() {
            return Err(InputError::new(path, format!("cannot read {what}: {e}")));
        }
        return Err(InputError::new(
            path,
            format!("not a light capture's {what} (no {name} header)"),
        ));
    }
    Ok(input)
}

/// A read error that cut a capture file short, as a note.
fn note_read_error(path: &Path, input: &mut Chunked, stats: &mut SourceStats) {
    if let Some(e) = input.take_error() {
        stats.cut_short = Some(format!(
            "{}: cannot read past byte {}: {e}",
            path.display(),
            input.offset()
        ));
    }
}

/// Hands each slow request of `dir` to `keep`, in the file's order; a
/// cut-short last record is a note, a wrong header an error.
fn each_slow(
    dir: &Path,
    stats: &mut SourceStats,
    mut keep: impl FnMut(SlowRequest),
) -> Result<(), InputError> {
    let path = dir.join(SLOW);
    let mut input = open_records(&path, "slow requests", SLOW_HEADER, SLOW_MAGIC, "IOSLSLOW")?;
    let size = u32::from_le_bytes(input.avail()[8..12].try_into().expect("4 bytes")) as usize;
    if size != SLOW_RECORD {
        return Err(InputError::new(
            &path,
            format!("records of {size} bytes, where this iosleuth reads {SLOW_RECORD}-byte ones"),
        ));
    }
    input.consume(SLOW_HEADER);
    for i in 0.. {
        let have = input.ensure(SLOW_RECORD);
        if have == 0 {
            break;
        }
        if have < SLOW_RECORD {
            stats.cut_short = Some(format!(
                "the last record is cut short ({have} of {SLOW_RECORD} bytes)"
            ));
            break;
        }
        match SlowRequest::parse(&input.avail()[..SLOW_RECORD]) {
            Some(r) if r.complete_ns >= r.issue_ns => keep(r),
            _ => stats.skip(|| format!("record {i}")),
        }
        input.consume(SLOW_RECORD);
    }
    note_read_error(&path, &mut input, stats);
    Ok(())
}

/// The histograms, the long runqueue waits and the slowest requests of the
/// light capture `dir`.
pub fn load(dir: &Path) -> Result<LightInputs, InputError> {
    let file = dir.join(LIGHT);
    let doc: LightDoc = super::files::read_small(&file, 64 << 20)
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| InputError::new(&file, format!("not a light capture's histograms: {e}")))?;
    let (doc, mut warnings) = super::light_values::checked(doc, &file);
    let mut stats = SourceStats::default();
    let mut slowest = Vec::new();
    each_slow(dir, &mut stats, |r| {
        slowest.push(r);
        if slowest.len() >= 4 * SLOWEST_KEPT * SLOWEST_DEVICES {
            keep_slowest(&mut slowest);
        }
    })?;
    keep_slowest(&mut slowest);
    let mut waits = Vec::new();
    let mut left_out = 0u64;
    each_context(dir, &mut stats, |_, r, _| match WaitRecord::parse(r) {
        Some(w) if waits.len() < MAX_KEPT => waits.push(w),
        Some(_) => left_out += 1,
        None => {}
    })?;
    if left_out > 0 {
        warnings.push(format!(
            "{}: {left_out} runqueue waits past the first {MAX_KEPT} were left out",
            dir.join(CONTEXT).display()
        ));
    }
    Ok(LightInputs {
        doc,
        waits,
        slowest,
        warnings,
    })
}

/// The `SLOWEST_KEPT` longest of each device's `requests` (of at most
/// `SLOWEST_DEVICES` devices), longest first.
fn keep_slowest(requests: &mut Vec<SlowRequest>) {
    requests.sort_by_key(|r| std::cmp::Reverse(r.total_ns()));
    let mut kept: FxHashMap<crate::model::Dev, usize> = FxHashMap::default();
    requests.retain(|r| {
        let devices = kept.len();
        match kept.get_mut(&r.dev) {
            Some(n) if *n < SLOWEST_KEPT => {
                *n += 1;
                true
            }
            Some(_) => false,
            None if devices < SLOWEST_DEVICES => {
                kept.insert(r.dev, 1);
                true
            }
            None => false,
        }
    });
}

/// Hands each record of `context.bin` (none in captures made before it
/// existed) to `each` with its index; a cut-short last record is a note.
fn each_context(
    dir: &Path,
    stats: &mut SourceStats,
    mut each: impl FnMut(usize, &[u8], &mut SourceStats),
) -> Result<(), InputError> {
    let path = dir.join(CONTEXT);
    if !path.exists() {
        return Ok(());
    }
    let mut input = open_records(
        &path,
        "flight recorder",
        CONTEXT_HEADER,
        CONTEXT_MAGIC,
        "IOSLCTX1",
    )?;
    input.consume(CONTEXT_HEADER);
    for i in 0.. {
        let have = input.ensure(4);
        if have == 0 {
            break;
        }
        let b = input.avail();
        let len = if have >= 4 {
            u16::from_le_bytes([b[2], b[3]]) as usize
        } else {
            0
        };
        if len < 4 || input.ensure(len) < len {
            stats.cut_short = Some(format!(
                "{}: the record at byte {} is cut short or damaged; the flight recorder's later records are skipped",
                path.display(),
                input.offset()
            ));
            break;
        }
        each(i, &input.avail()[..len], stats);
        input.consume(len);
    }
    note_read_error(&path, &mut input, stats);
    Ok(())
}

/// The events the flight recorder kept whole, decoded by the capture's
/// format files (read at the first event) and named by the task they
/// came from.
fn context_events(dir: &Path, stats: &mut SourceStats) -> Result<Vec<Event>, InputError> {
    let mut decoding: Option<Result<ContextDecoder, InputError>> = None;
    let mut out = Vec::new();
    let (mut left_out, mut undecoded) = (0u64, None::<(u64, usize)>);
    let mut skip = |i: usize| {
        let (n, _) = undecoded.get_or_insert((0, i));
        *n += 1;
    };
    each_context(dir, stats, |i, r, _| {
        let kind = u16::from_le_bytes([r[0], r[1]]);
        if kind == REC_WAIT {
            return;
        }
        if kind != REC_EVENT {
            skip(i);
            return;
        }
        let Ok((decoder, ids)) = decoding.get_or_insert_with(|| context_decoder(dir)) else {
            return;
        };
        let decoded = EventRecord::parse(r).and_then(|e| {
            let id = (*ids.get(usize::from(e.event))?)?;
            let data = with_common_fields(e.data, id, e.tid);
            let mut ev = decoder.decode(e.ts_ns, e.cpu, &data)?;
            if let Event::Trace(o) = &mut ev {
                o.comm = Comm::new(comm_str(&e.comm));
            }
            Some(ev)
        });
        match decoded {
            Some(_) if out.len() >= MAX_KEPT => left_out += 1,
            Some(e) => out.push(e),
            None => skip(i),
        }
    })?;
    if let Some(Err(e)) = decoding {
        return Err(e);
    }
    if let Some((n, first)) = undecoded {
        stats.notes.push(format!(
            "{}: {n} records could not be decoded (the first: record {first})",
            dir.join(CONTEXT).display()
        ));
    }
    if left_out > 0 {
        stats.notes.push(format!(
            "{}: {left_out} kept events (journal, dirty limit, writeback throttling) past the first {MAX_KEPT} were left out",
            dir.join(CONTEXT).display()
        ));
    }
    Ok(out)
}

/// The decoder of the flight recorder's events, and the format id of
/// each context event by its index.
type ContextDecoder = (Decoder, Vec<Option<u16>>);

fn context_decoder(dir: &Path) -> Result<ContextDecoder, InputError> {
    let (formats, page) = load_formats(dir)?;
    let ids = CONTEXT_EVENTS
        .iter()
        .map(|(sys, name)| {
            formats
                .iter()
                .find(|f| f.system == *sys && f.name == *name)
                .map(|f| f.id)
        })
        .collect();
    Ok((Decoder::new(&formats, page), ids))
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
        // A thread's process is no event of the trace.
        if e.ts().is_some() {
            self.stats.events += 1;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Dev;

    fn request(dev: Dev, total_ms: u64) -> SlowRequest {
        SlowRequest {
            dev,
            alloc_ns: 1_000,
            issue_ns: 1_000,
            complete_ns: 1_000 + total_ms * 1_000_000,
            sector: 0,
            cgroup_id: 0,
            bytes: 4096,
            cmd_flags: 1,
            pid: 1,
            tid: 1,
            issue_cpu: 0,
            complete_cpu: 0,
            depth: 1,
            error: 0,
            comm: [0; 16],
        }
    }

    /// A busy disk's many queued writes (all slower than the stalls) do
    /// not push another disk's four stalls out of what is kept.
    #[test]
    fn a_busy_disk_does_not_hide_another_disks_stalls() {
        let (busy, stalling) = (Dev::new(254, 0), Dev::new(7, 0));
        let mut all: Vec<SlowRequest> = (0..50).map(|i| request(busy, 160 + i)).collect();
        all.extend((0..4).map(|_| request(stalling, 150)));
        all.push(request(stalling, 1));
        keep_slowest(&mut all);
        assert_eq!(all.iter().filter(|r| r.dev == busy).count(), SLOWEST_KEPT);
        assert_eq!(all.iter().filter(|r| r.dev == stalling).count(), 5);
        assert_eq!(all[0].total_ns(), 209_000_000, "longest first");
        assert!(all.windows(2).all(|w| w[0].total_ns() >= w[1].total_ns()));
    }

    /// Device numbers come from the file: past `SLOWEST_DEVICES` devices
    /// the rest are dropped, not kept without bound.
    #[test]
    fn devices_kept_are_bounded() {
        let mut all: Vec<SlowRequest> = (0..1000u32)
            .map(|d| request(Dev::new(8, d), 100 + d as u64))
            .collect();
        keep_slowest(&mut all);
        assert_eq!(all.len(), SLOWEST_DEVICES);
        assert_eq!(all[0].dev, Dev::new(8, 999));
    }
}

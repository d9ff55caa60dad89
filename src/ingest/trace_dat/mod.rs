//! trace-cmd's binary `trace.dat` (file versions 6 and 7, v7 uncompressed
//! or with zlib- or zstd-compressed sections): the kernel's event formats,
//! kallsyms and saved cmdlines, then each CPU's ring-buffer pages, as an
//! iosleuth capture directory holds them. Read the way `trace-cmd report`
//! reads it, so that both give the same events: every instance's CPUs
//! merged by time (ties: the top instance, then the lower CPU, first),
//! the DATE, OFFSET and TSC2NSEC options applied to the timestamps, and
//! each event's task named as report's line header names it — the saved
//! cmdlines, `<idle>` for pid 0, `<...>` for a pid they lack, plus the
//! names sched_switch and sched_wakeup events teach (libtraceevent's
//! sched_switch plugin registers them as it prints those events).
//!
//! The file is read where needed (pages one at a time, compressed chunks
//! one at a time), so memory does not grow with the trace.

mod file;
mod sections;

use super::compressed::Meter;
use super::format_decoder::Decoder;
use super::reader::Chunked;
use super::ring_buffer::{page_info, PageInfo, PageRecords};
use super::source::{InputError, Position, Source, SourceStats};
use crate::model::capture_layout::is_address;
use crate::model::tracepoint::Field;
use crate::model::{Comm, Event, Tracepoint, Value};
use crate::symbolize::kallsyms::KernelSymbols;
use file::{Backing, Codec};
use sections::{Buffer, Clock, CpuData};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use file::MAGIC;

/// Whether the bytes start like a trace.dat.
pub fn detect(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// The largest trace.dat read into memory (from standard input or a
/// compressed file: the file is read out of order).
const MAX_IN_MEMORY: u64 = 1 << 30;

/// What is read of a stream before its metadata is tried; four times
/// more each time the metadata runs past it.
const FIRST_READ: u64 = 1 << 20;

/// Opens a trace.dat: by its path, read where needed, when `path` is the
/// file `input` reads; otherwise (standard input, a compressed file) from
/// memory.
pub fn open(path: &Path, input: Chunked) -> Result<Box<dyn Source>, InputError> {
    if let Some(b) = same_file(path, input.avail()) {
        return Ok(Box::new(TraceDatSource::new(path, b)?));
    }
    let data = read_stream(input.into_reader()).map_err(|e| InputError::new(path, e))?;
    Ok(Box::new(TraceDatSource::new(path, Backing::Memory(data))?))
}

/// A trace.dat from a stream, in memory: its header and metadata read
/// and checked first, then only as far as its CPUs' data goes, refused
/// when that is more than [`MAX_IN_MEMORY`] (so that a compressed file
/// of zeros after a damaged header is not read into memory whole).
fn read_stream(mut r: Box<dyn std::io::Read>) -> Result<Vec<u8>, String> {
    let mut data = Vec::new();
    let mut want = FIRST_READ;
    let end = loop {
        let ended = fill(&mut r, &mut data, want)?;
        let b = Backing::Prefix(data, Default::default());
        let meta = sections::read_meta(&b);
        let short = b.too_short();
        let Backing::Prefix(d, _) = b else {
            unreachable!("made above")
        };
        data = d;
        match meta {
            Ok((_, m)) => break data_end(&m.buffers).max(data.len() as u64),
            Err(e) if !short || ended => return Err(e),
            Err(_) if want >= MAX_IN_MEMORY => return Err(too_large("its metadata")),
            Err(_) => want = (want * 4).min(MAX_IN_MEMORY),
        }
    };
    if end > MAX_IN_MEMORY {
        return Err(too_large(&format!("its CPUs' data, to byte {end},")));
    }
    fill(&mut r, &mut data, end)?;
    Ok(data)
}

fn too_large(what: &str) -> String {
    format!(
        "{what} runs past the {} MiB of a trace.dat iosleuth reads into memory when it is not a file it can seek in (a compressed file, standard input): save it, decompressed, to a file and give its path",
        MAX_IN_MEMORY >> 20
    )
}

/// Reads until `data` holds `want` bytes; true when the stream ended first.
fn fill(r: &mut dyn std::io::Read, data: &mut Vec<u8>, want: u64) -> Result<bool, String> {
    use std::io::Read;
    let more = want.saturating_sub(data.len() as u64);
    let got = r
        .take(more)
        .read_to_end(data)
        .map_err(|e| format!("cannot read: {e}"))?;
    Ok((got as u64) < more)
}

/// Where CPU `d` of `buf` keeps its pages: the bytes its size says, and
/// for compressed data the chunk count before them, which trace-cmd
/// leaves out of the size.
fn region(buf: &Buffer, d: &CpuData) -> (u64, u64) {
    let count = if buf.compressed { 4 } else { 0 };
    (
        d.offset,
        d.offset.saturating_add(d.size).saturating_add(count),
    )
}

/// Where the last CPU's data ends.
fn data_end(buffers: &[Buffer]) -> u64 {
    buffers
        .iter()
        .flat_map(|b| b.cpus.iter().filter(|d| d.size > 0).map(|d| region(b, d).1))
        .max()
        .unwrap_or(0)
}

/// "CPU 3", or "instance \"name\" CPU 3".
fn cpu_name(instance: &str, cpu: u32) -> String {
    if instance.is_empty() {
        format!("CPU {cpu}")
    } else {
        format!("instance {instance:?} CPU {cpu}")
    }
}

/// Two CPUs whose data are the same bytes would give every event there
/// twice (and a thousand CPUs on one compressed chunk would decompress it
/// a thousand times over): refused, whatever the instances.
fn refuse_shared_data(buffers: &[Buffer]) -> Result<(), String> {
    let mut regions: Vec<(u64, u64, String)> = buffers
        .iter()
        .flat_map(|b| {
            b.cpus.iter().filter(|d| d.size > 0).map(move |d| {
                let (from, to) = region(b, d);
                (from, to, cpu_name(&b.name, d.cpu))
            })
        })
        .collect();
    regions.sort_by_key(|r| r.0);
    // The region that reaches furthest of those before.
    let mut furthest: Option<&(u64, u64, String)> = None;
    for r in &regions {
        if let Some(f) = furthest.filter(|f| r.0 < f.1) {
            return Err(format!(
                "{}'s data (bytes {}..{}) and {}'s (bytes {}..{}) overlap: every event there would be read twice (a damaged or crafted file)",
                f.2, f.0, f.1, r.2, r.0, r.1
            ));
        }
        if furthest.is_none_or(|f| r.1 > f.1) {
            furthest = Some(r);
        }
    }
    Ok(())
}

/// The regular file at `path`, if it starts with `head`.
fn same_file(path: &Path, head: &[u8]) -> Option<Backing> {
    use std::os::unix::fs::FileExt;
    let (f, meta) = super::files::open_regular(path).ok()?;
    let n = head.len().min(4096);
    let mut first = vec![0u8; n];
    f.read_exact_at(&mut first, 0).ok()?;
    (first == head[..n]).then(|| Backing::File(f, meta.len()))
}

/// Where one CPU's pages are.
enum Pages {
    Plain {
        at: u64,
        end: u64,
    },
    /// trace-cmd's compressed chunks: u32 count, then each u32 compressed
    /// size, u32 size, data.
    Chunks {
        codec: Codec,
        /// The next chunk's header.
        next: u64,
        end: u64,
        left: u32,
        buf: Vec<u8>,
        pos: usize,
    },
    Done,
}

/// One CPU of one instance.
struct CpuStream {
    cpu: u32,
    /// Instance name, for messages.
    instance: Arc<str>,
    page_size: usize,
    pages: Pages,
    pending: VecDeque<Event>,
    /// Where the page the pending events come from starts: a file offset
    /// (uncompressed data) or none (inside a compressed chunk).
    page_at: Option<u64>,
}

impl CpuStream {
    fn new(
        path: &Path,
        b: &Backing,
        buf: &Buffer,
        d: CpuData,
        codec: Option<Codec>,
        stats: &mut SourceStats,
    ) -> CpuStream {
        let instance: Arc<str> = buf.name.as_str().into();
        let mut s = CpuStream {
            cpu: d.cpu,
            instance,
            page_size: buf.page_size,
            pages: Pages::Done,
            pending: VecDeque::new(),
            page_at: None,
        };
        let len = b.len();
        let wanted = d.offset.saturating_add(d.size);
        if d.offset >= len {
            s.cut(
                path,
                stats,
                format!(
                    "truncated: {}'s data should start at byte {} but the file ends at byte {len}: none of its events are in this report",
                    s.who(),
                    d.offset
                ),
            );
            return s;
        }
        let end = if wanted > len {
            s.cut(
                path,
                stats,
                format!(
                    "truncated: {}'s data should end at byte {wanted} but the file ends at byte {len}: its events after that are missing",
                    s.who()
                ),
            );
            len
        } else {
            wanted
        };
        s.pages = match (buf.compressed, codec) {
            // trace-cmd reads chunks as far as they go: the size it stores
            // for compressed data leaves out the chunk count.
            (true, Some(codec)) => match b.read(d.offset, 4) {
                Ok(c) => Pages::Chunks {
                    codec,
                    next: d.offset + 4,
                    end: region(buf, &d).1.min(len),
                    left: u32::from_le_bytes(c[..].try_into().unwrap()),
                    buf: Vec::new(),
                    pos: 0,
                },
                Err(e) => {
                    s.cut(path, stats, format!("{}: {e}", s.who()));
                    Pages::Done
                }
            },
            _ => Pages::Plain { at: d.offset, end },
        };
        s
    }

    fn who(&self) -> String {
        cpu_name(&self.instance, self.cpu)
    }

    /// Something cut this CPU's data short; the first such problem is
    /// kept as the source's, the others as notes (which name the file).
    fn cut(&mut self, path: &Path, stats: &mut SourceStats, what: String) {
        self.pages = Pages::Done;
        if stats.cut_short.is_none() {
            stats.cut_short = Some(what);
        } else {
            stats.notes.push(format!("{}: {what}", path.display()));
        }
    }

    /// The next page's bytes (a last page may be short), or `None` at the end.
    fn next_page(&mut self, r: &Reader, stats: &mut SourceStats) -> Option<Vec<u8>> {
        let b = &r.backing;
        let page_size = self.page_size as u64;
        loop {
            match &mut self.pages {
                Pages::Done => return None,
                Pages::Plain { at, end } => {
                    if *at >= *end {
                        self.pages = Pages::Done;
                        return None;
                    }
                    let n = (*end - *at).min(page_size);
                    let here = *at;
                    *at += n;
                    match b.read(here, n) {
                        Ok(p) => {
                            self.page_at = Some(here);
                            return Some(p.into_owned());
                        }
                        Err(e) => {
                            let who = self.who();
                            self.cut(&r.path, stats, format!("{who}: {e}"));
                            return None;
                        }
                    }
                }
                Pages::Chunks {
                    codec,
                    next,
                    end,
                    left,
                    buf,
                    pos,
                } => {
                    if *pos < buf.len() {
                        let n = (buf.len() - *pos).min(page_size as usize);
                        let p = buf[*pos..*pos + n].to_vec();
                        *pos += n;
                        self.page_at = None;
                        return Some(p);
                    }
                    // This chunk is read: what it held is given back.
                    r.held.set(r.held.get() - buf.len() as u64);
                    *buf = Vec::new();
                    if *left == 0 {
                        self.pages = Pages::Done;
                        return None;
                    }
                    let at = *next;
                    let (codec, limit) = (*codec, *end);
                    // Ok(None): --max-input is reached; Ok(Some(Err)): the
                    // chunks held would pass MAX_HELD.
                    type Chunk = Option<Result<(Vec<u8>, u64), String>>;
                    let chunk = (|| -> Result<Chunk, String> {
                        let h = b.read(at, 8)?;
                        let zsize = u64::from(u32::from_le_bytes(h[0..4].try_into().unwrap()));
                        let size = u64::from(u32::from_le_bytes(h[4..8].try_into().unwrap()));
                        if zsize > file::MAX_BLOCK {
                            return Err(format!(
                                "the compressed chunk at byte {at} says it is {zsize} bytes, more than the {} iosleuth reads at once",
                                file::MAX_BLOCK
                            ));
                        }
                        if at + 8 + zsize > limit {
                            return Err(format!(
                                "truncated: the compressed chunk at byte {at} ({zsize} bytes) runs past the end of the file (byte {limit})"
                            ));
                        }
                        if size > r.meter.room() {
                            r.meter.stop();
                            return Ok(None);
                        }
                        let held = r.held.get();
                        if held + size > MAX_HELD {
                            return Ok(Some(Err(format!(
                                "compressed chunk at byte {at} would decompress to {size} bytes while the other CPUs' chunks hold {held}"
                            ))));
                        }
                        let data = b.read(at + 8, zsize)?;
                        let out = file::decompress(codec, &data, size)
                            .map_err(|e| format!("the compressed chunk at byte {at}: {e}"))?;
                        r.meter.read_compressed(zsize);
                        r.meter.inflate(out.len() as u64);
                        Ok(Some(Ok((out, at + 8 + zsize))))
                    })();
                    match chunk {
                        Ok(Some(Ok((out, after)))) => {
                            *left -= 1;
                            *next = after;
                            r.held.set(r.held.get() + out.len() as u64);
                            *buf = out;
                            *pos = 0;
                        }
                        // --max-input is reached (the meter says it).
                        Ok(None) => {
                            self.pages = Pages::Done;
                            return None;
                        }
                        Ok(Some(Err(why))) => {
                            let mut over = r.over_held.borrow_mut();
                            if over.0 == 0 {
                                over.1 = format!("{}'s {why}", self.who());
                            }
                            over.0 += 1;
                            self.pages = Pages::Done;
                            return None;
                        }
                        Err(e) => {
                            let who = self.who();
                            self.cut(&r.path, stats, format!("{who}: {e}"));
                            return None;
                        }
                    }
                }
            }
        }
    }

    /// Decodes the next page into `pending`; false at the end.
    fn fill(&mut self, r: &Reader, stats: &mut SourceStats) -> bool {
        let Some(mut page) = self.next_page(r, stats) else {
            return false;
        };
        let hdr = r.decoder.page;
        let where_ = match self.page_at {
            Some(at) => format!("the page at byte {at}"),
            None => format!("a compressed page of {}", self.who()),
        };
        let have = page.len();
        if have < self.page_size {
            // A short last page: read the records it holds whole.
            page.resize(self.page_size, 0);
        }
        let Some(mut info) = page_info(&page, hdr) else {
            stats.skip(|| format!("{where_}: an impossible length"));
            return true;
        };
        if have < self.page_size {
            let fits = have.saturating_sub(hdr.data_offset);
            if info.data_len > fits {
                stats.skip(|| format!("{where_}: cut short ({have} of {} bytes)", self.page_size));
                info = PageInfo {
                    data_len: fits,
                    ..info
                };
            }
        }
        if info.missed {
            let n = info.missed_count.unwrap_or(0).max(1);
            stats.lost_events = stats.lost_events.saturating_add(n);
            stats
                .lost_reports
                .push((Some(r.clock.apply(info.base_ts)), n));
        }
        let mut recs = PageRecords::new(&page, hdr, &info);
        for (ts, rec) in recs.by_ref() {
            match r.decoder.decode(r.clock.apply(ts), self.cpu, rec) {
                Some(ev) => self.pending.push_back(ev),
                None => stats.skip(|| format!("{where_}: a record of an unknown event id")),
            }
        }
        if recs.damaged {
            stats.skip(|| format!("{where_}: damaged, the rest of it was skipped"));
        }
        true
    }

    fn next(&mut self, r: &Reader, stats: &mut SourceStats) -> Option<Event> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(ev);
            }
            if !self.fill(r, stats) {
                return None;
            }
        }
    }
}

/// The decompressed chunks all CPUs may hold at once (each holds the one
/// it reads; trace-cmd's are a few pages).
const MAX_HELD: u64 = 128 << 20;

/// What every CPU stream reads with.
struct Reader {
    path: PathBuf,
    backing: Backing,
    decoder: Decoder,
    clock: Clock,
    /// The bytes of the decompressed chunks the CPUs hold.
    held: std::cell::Cell<u64>,
    /// What the compressed chunks decompressed to, against --max-input.
    meter: Meter,
    /// CPUs whose next chunk would have passed MAX_HELD: how many, and
    /// what the first one's would have been.
    over_held: std::cell::RefCell<(u64, String)>,
}

/// Every CPU of every instance of one trace.dat, merged by time.
pub struct TraceDatSource {
    r: Reader,
    streams: Vec<CpuStream>,
    /// Each stream's next event and the file offset of its page (none
    /// inside a compressed chunk).
    heads: Vec<Option<(Event, Option<u64>)>>,
    order: BinaryHeap<Reverse<(u64, usize)>>,
    /// Processes' names as report's line headers give them.
    comms: HashMap<u32, Comm>,
    symbols: KernelSymbols,
    stats: SourceStats,
    last: Position,
}

/// `<idle>` and `<...>`, as libtraceevent names pid 0 and an unknown pid.
fn idle() -> Comm {
    Comm::new(b"<idle>")
}
fn unknown() -> Comm {
    Comm::new(b"<...>")
}

/// `saved_cmdlines`: `PID COMM` lines; of a pid listed twice, the first.
fn parse_cmdlines(text: &str) -> HashMap<u32, Comm> {
    let mut out = HashMap::new();
    for l in text.lines() {
        let l = l.trim_start();
        let (pid, comm) = l.split_once(' ').unwrap_or((l, ""));
        if let Ok(pid) = pid.parse::<u32>() {
            if pid != 0 && !comm.is_empty() {
                out.entry(pid).or_insert_with(|| Comm::new(comm.as_bytes()));
            }
        }
    }
    out
}

impl TraceDatSource {
    fn new(path: &Path, backing: Backing) -> Result<TraceDatSource, InputError> {
        let err = |e: String| InputError::new(path, e);
        let (header, meta) = sections::read_meta(&backing).map_err(err)?;
        refuse_shared_data(&meta.buffers).map_err(err)?;
        let page = meta.page;
        let ok = matches!(page.commit_size, 4 | 8)
            && page
                .commit_offset
                .checked_add(page.commit_size)
                .is_some_and(|end| end <= page.data_offset);
        let min_page = meta
            .buffers
            .iter()
            .map(|b| b.page_size)
            .min()
            .unwrap_or(header.page_size);
        if !ok || page.data_offset >= min_page {
            return Err(err(format!(
                "its header_page describes an impossible page: commit word at byte {} ({} bytes), data at byte {}, in pages of {min_page} bytes",
                page.commit_offset, page.commit_size, page.data_offset
            )));
        }
        let mut stats = SourceStats {
            notes: meta
                .notes
                .iter()
                .map(|n| format!("{}: {n}", path.display()))
                .collect(),
            ..SourceStats::default()
        };
        let mut streams = Vec::new();
        for buf in &meta.buffers {
            for d in &buf.cpus {
                if d.size == 0 {
                    continue;
                }
                streams.push(CpuStream::new(
                    path,
                    &backing,
                    buf,
                    *d,
                    header.codec,
                    &mut stats,
                ));
            }
        }
        let r = Reader {
            path: path.to_path_buf(),
            decoder: Decoder::new(&meta.formats, page),
            backing,
            clock: meta.clock,
            held: Default::default(),
            over_held: Default::default(),
            meter: Meter::new(format!(
                "{} data",
                header.codec.map_or("compressed", Codec::name)
            )),
        };
        let mut s = TraceDatSource {
            heads: (0..streams.len()).map(|_| None).collect(),
            streams,
            order: BinaryHeap::new(),
            comms: parse_cmdlines(&meta.cmdlines),
            symbols: KernelSymbols::parse(&meta.kallsyms),
            stats,
            last: Position::Event(0),
            r,
        };
        for i in 0..s.streams.len() {
            s.prime(i);
        }
        Ok(s)
    }

    /// Reads stream `i`'s next event into its head.
    fn prime(&mut self, i: usize) {
        let st = &mut self.streams[i];
        if let Some(ev) = st.next(&self.r, &mut self.stats) {
            let ts = ev.ts().unwrap_or(0);
            self.heads[i] = Some((ev, st.page_at));
            self.order.push(Reverse((ts, i)));
        }
    }

    /// The name report's line header gives the task.
    fn comm_of(&self, pid: u32) -> Comm {
        if pid == 0 {
            return idle();
        }
        self.comms.get(&pid).copied().unwrap_or_else(unknown)
    }

    /// Names the task, and the kernel addresses the event holds, as
    /// `trace-cmd report` prints them; learns the names a scheduler event
    /// tells (never replacing one known).
    fn name(&mut self, ev: &mut Event) {
        match ev {
            Event::Block(b) if b.comm.is_empty() => b.comm = self.comm_of(b.pid),
            Event::Trace(o) => {
                o.comm = self.comm_of(o.pid);
                if !self.symbols.is_empty() {
                    for (k, v) in &mut o.fields.0 {
                        if let (true, Value::Int(a)) = (is_address(k), &*v) {
                            if let Some((name, _)) = self.symbols.lookup(*a as u64) {
                                *v = Value::Str(name.into());
                            }
                        }
                    }
                }
                let pairs: &[(Field, Field)] = match o.kind {
                    Tracepoint::SchedSwitch => &[
                        (Field::PrevPid, Field::PrevComm),
                        (Field::NextPid, Field::NextComm),
                    ],
                    Tracepoint::SchedWakeup | Tracepoint::SchedWakeupNew => {
                        &[(Field::Pid, Field::Comm)]
                    }
                    _ => &[],
                };
                for (p, c) in pairs {
                    if let (Some(pid), Some(c)) = (o.fields.int(*p), o.fields.str(*c)) {
                        if pid > 0 && pid <= i64::from(u32::MAX) {
                            self.comms
                                .entry(pid as u32)
                                .or_insert_with(|| Comm::new(c.as_bytes()));
                        }
                    }
                }
            }
            Event::Stack(k) if !self.symbols.is_empty() => {
                let named: Vec<Arc<str>> = k
                    .frames
                    .iter()
                    .map(|f| {
                        f.strip_prefix("0x")
                            .and_then(|h| u64::from_str_radix(h, 16).ok())
                            .and_then(|a| self.symbols.resolve(a))
                            .map_or_else(|| f.clone(), Arc::from)
                    })
                    .collect();
                k.frames = named.into();
            }
            _ => {}
        }
    }
}

impl Source for TraceDatSource {
    fn next_event(&mut self) -> Option<Event> {
        let Reverse((_, i)) = self.order.pop()?;
        let (mut ev, pos) = self.heads[i].take()?;
        self.prime(i);
        self.name(&mut ev);
        self.stats.events += 1;
        self.last = match pos {
            Some(at) => Position::Page(at),
            None => Position::Event(self.stats.events),
        };
        Some(ev)
    }
    fn path(&self) -> &Path {
        &self.r.path
    }
    fn format(&self) -> &'static str {
        "trace-cmd trace.dat"
    }
    fn stats(&self) -> &SourceStats {
        &self.stats
    }
    fn position(&self) -> Position {
        self.last
    }
    fn input_notes(&self) -> Vec<String> {
        let mut out = self.r.meter.notes(&self.r.path);
        let (n, first) = &*self.r.over_held.borrow();
        if *n > 0 {
            out.push(format!(
                "{}: {first}, more than the {} MiB iosleuth holds at once{}: their events from there on are left out",
                self.r.path.display(),
                MAX_HELD >> 20,
                match n {
                    1 => String::new(),
                    n => format!(" (and so would {} other CPUs' chunks)", n - 1),
                }
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdlines_as_libtraceevent_reads_them() {
        let m = parse_cmdlines(
            "29696 dd\n21216 kworker/u8:1\n7 two words\n29696 other\nbad line\n0 swapper\n",
        );
        assert_eq!(m[&29696].as_str(), "dd");
        assert_eq!(m[&21216].as_str(), "kworker/u8:1");
        assert_eq!(m[&7].as_str(), "two words");
        assert!(!m.contains_key(&0));
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn not_a_trace_dat() {
        assert!(detect(b"\x17\x08\x44tracing6\0"));
        assert!(!detect(b"\x17\x08\x44trac"));
        let e = crate::ingest::open_bytes(Path::new("x.dat"), b"\x17\x08\x44tracing".to_vec())
            .err()
            .unwrap();
        assert!(e.to_string().starts_with("x.dat: "), "{e}");
    }
}

//! Line-oriented trace text: ftrace (`trace`, `trace_pipe`, tracepoints or
//! the `blk` tracer), `trace-cmd report`, `perf script` and blkparse's
//! default output.

use super::block_text::{parse_blk_action, parse_tracepoint, Context};
use super::perf_script_stack;
use super::reader::Chunked;
use super::source::{Position, Source, SourceStats};
use super::text_fields::{parse_ftrace_syscall, parse_payload};
use super::text_line::{
    event_name_byte, first_word, parse_ftrace_header, parse_header, parse_timestamp, parse_u32,
    split_event, split_event_word, trim, trim_start,
};
use crate::model::{
    Action, BlockEvent, Comm, Dev, Event, EventName, FieldName, StackEvent, TraceEvent, Tracepoint,
};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextFormat {
    /// ftrace's own text and `trace-cmd report` (same line shape).
    Ftrace,
    PerfScript,
    Blkparse,
}

impl TextFormat {
    pub fn name(self) -> &'static str {
        match self {
            TextFormat::Ftrace => "ftrace or trace-cmd text",
            TextFormat::PerfScript => "perf script text",
            TextFormat::Blkparse => "blkparse text",
        }
    }
}

/// What one line turned out to be.
enum Line {
    Event(Event),
    /// ftrace's `<stack trace>` (trace-cmd: `kernel_stack: <stack trace >`):
    /// its frames follow, one `=> function` line each.
    StackStart {
        ts: u64,
        cpu: u32,
        pid: u32,
        /// A perf sample (its frames are `pc function (module)` lines):
        /// its weight.
        sampled: Option<u64>,
        /// The task's name where the line prints it apart (perf script).
        comm: Comm,
    },
    /// Comments, headers, summaries: nothing to count.
    Ignore,
    Lost(Option<u64>, u64),
    Bad,
}

/// Text pasted from web pages and mail carries non-breaking spaces
/// (U+00A0) where the tool printed spaces; read them as spaces.
fn normalize(line: &[u8]) -> Cow<'_, [u8]> {
    // One search first: an iterator's setup cost more than the search on
    // lines that have none (nearly all).
    let has_nbsp = memchr::memchr(0xc2, line).is_some()
        && memchr::memchr_iter(0xc2, line).any(|i| line.get(i + 1) == Some(&0xa0));
    match has_nbsp {
        false => Cow::Borrowed(line),
        true => {
            let mut v = Vec::with_capacity(line.len());
            let mut i = 0;
            while i < line.len() {
                if line[i] == 0xc2 && line.get(i + 1) == Some(&0xa0) {
                    v.push(b' ');
                    i += 2;
                } else {
                    v.push(line[i]);
                    i += 1;
                }
            }
            Cow::Owned(v)
        }
    }
}

/// Guesses the format from the first lines; `None` if nothing looks like a
/// trace.
pub fn detect(data: &[u8]) -> Option<TextFormat> {
    let head = &data[..data.len().min(256 * 1024)];
    if head.iter().take(4096).filter(|&&b| b == 0).count() > 0 {
        return None;
    }
    let (mut ftrace, mut perf, mut blkparse) = (0, 0, 0);
    for line in head.split(|&b| b == b'\n').take(400) {
        let line = &*normalize(line);
        if line.starts_with(b"# tracer:") {
            ftrace += 5;
        }
        if parse_blkparse_line(line).is_some() {
            blkparse += 1;
        } else if perf_sample(line) {
            // A sample of `perf record` (`comm tid [cpu] time: period
            // cpu-clock:`), with or without its CPU.
            perf += 1;
        } else if let Some((h, rest)) = parse_header(line) {
            let named = split_event(rest).map(|(n, _)| memchr::memchr(b':', n).is_some());
            if !h.dashed && named == Some(true) {
                perf += 1;
            } else {
                ftrace += 1;
            }
        }
    }
    let best = ftrace.max(perf).max(blkparse);
    if best == 0 {
        None
    } else if best == blkparse {
        Some(TextFormat::Blkparse)
    } else if best == perf {
        Some(TextFormat::PerfScript)
    } else {
        Some(TextFormat::Ftrace)
    }
}

/// Whether a line is a perf script sample of a sampling event.
fn perf_sample(line: &[u8]) -> bool {
    std::str::from_utf8(line)
        .ok()
        .and_then(perf_script_stack::parse_sample_header)
        .is_some_and(|h| perf_script_stack::is_sampling_event(h.event))
}

/// `259,0    1       13     0.002545516  1579  A   R 280576 + 512 <- (252,0) 278528`
fn parse_blkparse_line(line: &[u8]) -> Option<BlockEvent> {
    let mut rest = trim_start(line);
    let mut field = || -> Option<&[u8]> {
        let end = rest.iter().position(|c| c.is_ascii_whitespace())?;
        let f = &rest[..end];
        rest = trim_start(&rest[end..]);
        Some(f)
    };
    let dev = Dev::parse_bytes(field()?)?;
    let cpu = parse_u32(field()?)?;
    let _seq = parse_u32(field()?)?;
    let ts = parse_timestamp(field()?)?;
    let pid = parse_u32(field()?)?;
    parse_blk_action(
        dev,
        rest,
        Context {
            ts,
            pid,
            cpu,
            comm: b"",
        },
    )
}

/// Built once: `memmem::find` builds a searcher per call, which was 4 %
/// of reading ftrace text.
static CPU_MARK: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"CPU:"));

/// Lost-event markers: ftrace's `CPU:1 [LOST 1234 EVENTS]` and
/// trace-cmd's `CPU:1 [1234 EVENTS DROPPED]` (after an optional
/// `BUFFER: ` prefix).
fn parse_lost(line: &[u8]) -> Option<u64> {
    let cpu = CPU_MARK.find(&line[..line.len().min(80)])?;
    let open = cpu + memchr::memchr(b'[', &line[cpu..])?;
    let inner = &line[open + 1..];
    fn digits(b: &[u8]) -> Option<(u64, &[u8])> {
        let end = b
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(b.len());
        super::text_line::parse_u64(&b[..end]).map(|n| (n, &b[end..]))
    }
    if let Some(rest) = inner.strip_prefix(b"LOST ") {
        let (n, tail) = digits(rest)?;
        return tail.starts_with(b" EVENTS").then_some(n);
    }
    let (n, tail) = digits(inner)?;
    tail.starts_with(b" EVENTS DROPPED").then_some(n)
}

pub struct TextSource {
    path: PathBuf,
    /// Boxed: taken out while lines borrow it and put back, a pointer's
    /// move per event.
    input: Option<Box<Chunked>>,
    line_no: u64,
    format: TextFormat,
    stats: SourceStats,
    last_ts: Option<u64>,
    in_summary: bool,
    /// Stack frames' names, events' names and fields' names met so far:
    /// each decided once (an event's kind, a field's `Field`).
    names: FxHashMap<Vec<u8>, Arc<str>>,
    event_names: FxHashMap<Vec<u8>, EventName>,
    keys: FxHashMap<Vec<u8>, FieldName>,
    /// A stack whose frame lines are being read, its frames so far, and
    /// whether they are perf's `pc function (module)` lines (else ftrace's
    /// `=> function`).
    stack: Option<(StackEvent, Vec<Arc<str>>, bool)>,
    /// The event line just read (perf script of `perf record -e … -g`
    /// follows it with its call chain): its stack should frames follow,
    /// and whether that stack is folded (a sched_switch's).
    after_event: Option<(EventLine, bool)>,
    /// Reading the call chain of a tracepoint other than sched_switch:
    /// passed over.
    passing_chain: bool,
    unfolded_chains: u64,
    /// Events read with the last one returned, returned next in order (an
    /// event read while ending a stack, a thread's process before it).
    queued: VecDeque<Event>,
    /// Each thread's process as the lines print it (ftrace's `(tgid)`,
    /// perf's `pid/tid`).
    processes: FxHashMap<u32, u32>,
    /// A thread's process the line just read told first (or changed):
    /// passed on before the line's event.
    new_process: Option<Event>,
    /// The file offset up to which the input holds no 0xc2 byte (the
    /// first of a non-breaking space's two), as far as it was looked at.
    nbsp_free_to: u64,
}

/// What a call chain that follows an event line takes from it. Kept
/// instead of a `StackEvent`, whose empty frame list is an allocation, on
/// every event line of which few have a chain.
#[derive(Clone, Copy)]
struct EventLine {
    ts: u64,
    cpu: u32,
    pid: u32,
    comm: Comm,
}

impl EventLine {
    fn stack(self) -> StackEvent {
        StackEvent {
            ts: self.ts,
            cpu: self.cpu,
            pid: self.pid,
            frames: Arc::from(Vec::new()),
            sampled: false,
            weight: 1,
            comm: self.comm,
        }
    }
}

/// Frames of a text stack beyond this are a damaged input (the kernel
/// writes at most 512).
const MAX_TEXT_FRAMES: usize = 512;

impl TextSource {
    pub fn new(path: &Path, input: Chunked, format: TextFormat) -> TextSource {
        TextSource {
            path: path.to_path_buf(),
            input: Some(Box::new(input)),
            line_no: 0,
            format,
            stats: SourceStats::default(),
            last_ts: None,
            in_summary: false,
            names: FxHashMap::default(),
            event_names: FxHashMap::default(),
            keys: FxHashMap::default(),
            stack: None,
            after_event: None,
            passing_chain: false,
            unfolded_chains: 0,
            queued: VecDeque::new(),
            processes: FxHashMap::default(),
            new_process: None,
            nbsp_free_to: 0,
        }
    }

    /// Thread `tid` is of process `tgid` where the line printed one: an
    /// `Event::ThreadGroup` goes before the line's event if that is news.
    fn saw_process(&mut self, tid: u32, tgid: Option<u32>) {
        let Some(tgid) = tgid else {
            return;
        };
        if tid != 0 && self.processes.insert(tid, tgid) != Some(tgid) {
            self.new_process = Some(Event::ThreadGroup { tid, tgid });
        }
    }

    /// A frame line of the stack being read: ftrace's `=> function`
    /// (without trace-cmd's `(ffffffff…)` address), or perf's `pc function
    /// (module)` for a sample. Whether it was one.
    fn stack_frame(&mut self, line: &[u8]) -> bool {
        if self.stack.is_none() {
            if let Some((k, folded)) = self.after_event.take() {
                if !perf_script_stack::is_frame_line(line) {
                    return false;
                }
                // A sched_switch's chain is where the thread blocked, as
                // the stacktrace trigger after it; other tracepoints'
                // chains count events, which nothing here folds.
                if folded {
                    self.stack = Some((k.stack(), Vec::new(), true));
                } else {
                    self.unfolded_chains += 1;
                    self.passing_chain = true;
                }
            }
        }
        if self.passing_chain {
            self.passing_chain = perf_script_stack::is_frame_line(line);
            return self.passing_chain;
        }
        let Some((_, _, perf_frames)) = &self.stack else {
            return false;
        };
        let frame = if *perf_frames {
            if !perf_script_stack::is_frame_line(line) {
                return false;
            }
            std::str::from_utf8(line)
                .ok()
                .and_then(perf_script_stack::parse_frame)
                .map(Arc::from)
        } else {
            let Some(rest) = trim(line).strip_prefix(b"=>") else {
                return false;
            };
            let name = trim(rest)
                .split(|c| c.is_ascii_whitespace())
                .next()
                .unwrap_or(b"");
            (!name.is_empty()).then(|| self.intern(name))
        };
        if let (Some(f), Some((_, frames, _))) = (frame, &mut self.stack) {
            if frames.len() < MAX_TEXT_FRAMES {
                frames.push(f);
            }
        }
        true
    }

    fn intern(&mut self, name: &[u8]) -> Arc<str> {
        intern(&mut self.names, name, |n| n)
    }

    fn classify(&mut self, line: &[u8]) -> Line {
        let t = trim(line);
        if t.is_empty() || t[0] == b'#' {
            return Line::Ignore;
        }
        // Cheap pre-check: markers are short and end so (a block event's
        // line ends with `]` too, so the word before counts).
        if t.len() < 120 && (t.ends_with(b"EVENTS]") || t.ends_with(b"DROPPED]")) {
            if let Some(n) = parse_lost(t) {
                return Line::Lost(self.last_ts, n);
            }
        }
        match self.format {
            TextFormat::Blkparse => self.classify_blkparse(t),
            TextFormat::PerfScript => self.classify_perf_line(line),
            // Trimmed once here: the header's parts trim again, cheaply.
            _ => self.classify_tracepoint_line(t),
        }
    }

    fn classify_blkparse(&mut self, t: &[u8]) -> Line {
        if self.in_summary {
            return Line::Ignore;
        }
        if let Some(ev) = parse_blkparse_line(t) {
            return Line::Event(Event::Block(ev));
        }
        // blkparse's per-CPU and total summaries close its output.
        if t.starts_with(b"CPU") || t.starts_with(b"Total (") {
            self.in_summary = true;
            return Line::Ignore;
        }
        if t.starts_with(b"Input file") {
            return Line::Ignore;
        }
        // A message (`m N ...`) is a valid line with nothing to analyze.
        let fields: Vec<&[u8]> = t
            .split(|c| c.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .take(6)
            .collect();
        if fields.len() == 6 && fields[5] == b"m" {
            return Line::Ignore;
        }
        Line::Bad
    }

    /// perf script: a sample of a sampling event (cpu-clock, cycles, …)
    /// starts a stack whose frame lines follow; the frames of any other
    /// event are passed over; tracepoint lines as ftrace's.
    fn classify_perf_line(&mut self, line: &[u8]) -> Line {
        if perf_script_stack::is_frame_line(line) {
            return Line::Ignore;
        }
        if let Some(h) = std::str::from_utf8(line)
            .ok()
            .and_then(perf_script_stack::parse_sample_header)
            .filter(|h| perf_script_stack::is_sampling_event(h.event))
        {
            self.saw_process(h.tid, h.pid);
            return Line::StackStart {
                ts: h.ts,
                cpu: h.cpu.unwrap_or(0),
                pid: h.tid,
                sampled: Some(h.period.unwrap_or(1)),
                comm: Comm::new(h.comm.as_bytes()),
            };
        }
        self.classify_tracepoint_line(line)
    }

    fn classify_tracepoint_line(&mut self, line: &[u8]) -> Line {
        let t = trim(line);
        // trace-cmd's preamble and per-CPU notes (the first byte tells
        // most lines apart at once).
        if matches!(t.first(), Some(b'c' | b'v' | b'C'))
            && (t.starts_with(b"cpus=")
                || t.starts_with(b"version =")
                || (t.starts_with(b"CPU ") && t.ends_with(b"is empty")))
        {
            return Line::Ignore;
        }
        let Some((h, rest)) = parse_ftrace_header(t).or_else(|| parse_header(t)) else {
            return Line::Bad;
        };
        self.saw_process(h.pid, h.tgid);
        let rest_t = trim_start(rest);
        let stack_payload = rest_t
            .strip_prefix(b"kernel_stack:")
            .map(trim_start)
            .unwrap_or(rest_t);
        if stack_payload.starts_with(b"<stack trace") {
            return Line::StackStart {
                ts: h.ts,
                cpu: h.cpu,
                pid: h.pid,
                sampled: None,
                comm: Comm::default(),
            };
        }
        // The `blk` tracer prints `MAJ,MIN ACTION RWBS ...` with no event
        // name (a word ending in `:` is a name, never a device).
        let (word, after_word) = first_word(rest_t);
        if word.last() != Some(&b':') {
            if let Some(dev) = Dev::parse_bytes(word) {
                if let Some(ev) = parse_blk_action(dev, after_word, h.context()) {
                    return Line::Event(Event::Block(ev));
                }
                // Notes and messages of the blk tracer.
                return Line::Ignore;
            }
        }
        // Block events first: their names are known words, so only a
        // perf `sys:` prefix is left to check.
        if let Some(name) = word.strip_suffix(b":") {
            // ftrace's names have no `sys:` (perf's do): the whole name
            // is tried first, without looking for a `:` in it.
            let action = Action::from_tracepoint_bytes(name)
                .map(|a| (a, &name[..0]))
                .or_else(|| {
                    let c = name.iter().rposition(|&c| c == b':')?;
                    Action::from_tracepoint_bytes(&name[c + 1..]).map(|a| (a, &name[..=c]))
                });
            if let Some((action, sys)) = action {
                if sys.iter().all(|&c| event_name_byte(c)) {
                    return match parse_tracepoint(action, trim(after_word), h.context()) {
                        Some(ev) => Line::Event(Event::Block(ev)),
                        None => Line::Bad,
                    };
                }
            }
        }
        let Some((name, payload)) = split_event_word(word, after_word) else {
            let comm = Comm::new(h.comm);
            let (ts, cpu, pid) = (h.ts, h.cpu, h.pid);
            let keys = &mut self.keys;
            let mut key = |b: &[u8]| intern(keys, b, FieldName::new);
            return match parse_ftrace_syscall(rest_t, &mut key) {
                Some((name, fields)) => Line::Event(Event::Trace(TraceEvent::named(
                    ts,
                    cpu,
                    pid,
                    &intern(&mut self.event_names, name.as_bytes(), EventName::new),
                    comm,
                    fields,
                ))),
                None => Line::Bad,
            };
        };
        // The event's short name and kind were found when its name was
        // first met; its fields are read by them.
        let mut e = TraceEvent::named(
            h.ts,
            h.cpu,
            h.pid,
            &intern(&mut self.event_names, name, EventName::new),
            Comm::new(h.comm),
            Default::default(),
        );
        let keys = &mut self.keys;
        e.fields = parse_payload(e.short_name(), payload, &mut |b: &[u8]| {
            intern(keys, b, FieldName::new)
        });
        Line::Event(Event::Trace(e))
    }
}

impl TextSource {
    /// The next event into `slot` (`None` at the end), written where the
    /// merger keeps it rather than returned through each step.
    fn next_from(&mut self, input: &mut Chunked, slot: &mut Option<Event>) {
        if let Some(ev) = self.queued.pop_front() {
            *slot = Some(ev);
            return;
        }
        loop {
            // Lines before the buffer's next 0xc2 byte hold no
            // non-breaking space: nearly every line, told without a look.
            self.nbsp_free_to = input.free_of(0xc2, self.nbsp_free_to);
            let start = input.offset();
            let Some((raw, too_long)) = input.next_line() else {
                break;
            };
            let plain = start + raw.len() as u64 <= self.nbsp_free_to;
            self.line_no += 1;
            if too_long {
                let no = self.line_no;
                let shown = String::from_utf8_lossy(raw).into_owned();
                self.stats.skip(|| {
                    format!(
                        "line {no}: longer than {} MiB, skipped whole (it starts {shown:?})",
                        super::reader::MAX_LINE >> 20
                    )
                });
                continue;
            }
            if raw.is_empty() || raw == b"\r" {
                // The blank lines after it read as one (a blank line ends
                // a stack; more do nothing): a run of them is one scan.
                // The input is borrowed by `raw` until here.
                let blank: &[u8] = b"";
                self.line_no += input.skip_blank_lines();
                if self.after_line(blank, slot) {
                    return;
                }
                continue;
            }
            let line = if plain {
                Cow::Borrowed(raw)
            } else {
                normalize(raw)
            };
            if self.after_line(&line, slot) {
                return;
            }
        }
        *slot = self.at_end(input);
    }

    /// An event of the input's own (not a thread's process) passed on:
    /// counted, its time the last one seen.
    #[inline]
    fn count(&mut self, ts: Option<u64>) {
        if let Some(ts) = ts {
            self.last_ts = Some(ts);
        }
        self.stats.events += 1;
    }

    /// What one line (not too long) gives: the first of its events in
    /// `slot` (the rest queued), and whether there was one.
    fn after_line(&mut self, line: &[u8], slot: &mut Option<Event>) -> bool {
        if self.stack_frame(line) {
            return false;
        }
        // Any other line ends the stack being read: it comes first,
        // then the process of the line's thread if that is news, then
        // the line's event.
        let ended = self.stack.take().map(finished_stack);
        let got = self.event_of(line, slot);
        let process = self.new_process.take();
        if ended.is_none() && process.is_none() {
            // Nearly every line: one event or none, nothing queued.
            if let (true, Some(e)) = (got, &*slot) {
                let ts = e.ts();
                self.count(ts);
            }
            return got;
        }
        let ev = if got { slot.take() } else { None };
        for e in ended.iter().chain(&ev) {
            self.count(e.ts());
        }
        let mut all = ended.into_iter().chain(process).chain(ev);
        *slot = all.next();
        self.queued.extend(all);
        slot.is_some()
    }

    /// What a line that is not a stack frame gives: an event (written to
    /// `slot`: true), or nothing (a stack begun, lost events counted, a
    /// line ignored or skipped).
    fn event_of(&mut self, line: &[u8], slot: &mut Option<Event>) -> bool {
        match self.classify(line) {
            Line::Event(ev) => {
                let (pid, comm, switch) = match &ev {
                    Event::Trace(o) => (o.pid, o.comm, o.kind == Tracepoint::SchedSwitch),
                    Event::Block(b) => (b.pid, b.comm, false),
                    _ => (0, Default::default(), false),
                };
                self.after_event = ev.ts().zip(ev.cpu()).map(|(ts, cpu)| {
                    let line = EventLine { ts, cpu, pid, comm };
                    (line, switch)
                });
                *slot = Some(ev);
                true
            }
            Line::StackStart {
                ts,
                cpu,
                pid,
                sampled,
                comm,
            } => {
                let k = StackEvent {
                    ts,
                    cpu,
                    pid,
                    frames: Arc::from(Vec::new()),
                    sampled: sampled.is_some(),
                    weight: sampled.unwrap_or(1),
                    comm,
                };
                self.stack = Some((k, Vec::new(), sampled.is_some()));
                false
            }
            Line::Ignore => false,
            Line::Lost(ts, n) => {
                self.stats.lost_events = self.stats.lost_events.saturating_add(n);
                self.stats.lost_reports.push((ts, n));
                false
            }
            Line::Bad => {
                let no = self.line_no;
                let shown = String::from_utf8_lossy(&line[..line.len().min(120)]).into_owned();
                self.stats.skip(|| format!("line {no}: {shown:?}"));
                false
            }
        }
    }

    /// At the end of the input: the read error and notes, and the stack
    /// still being read.
    fn at_end(&mut self, input: &mut Chunked) -> Option<Event> {
        if let Some(e) = input.take_error() {
            self.stats.cut_short = Some(format!("read error after line {}: {e}", self.line_no));
        }
        if self.unfolded_chains > 0 {
            self.stats.notes.push(format!(
                "{}: the call chains of {} tracepoint samples were not folded (only sched_switch's, as blocked time)",
                self.path.display(),
                std::mem::take(&mut self.unfolded_chains)
            ));
        }
        self.stack.take().map(|k| {
            self.stats.events += 1;
            finished_stack(k)
        })
    }
}

fn finished_stack((mut k, frames, _): (StackEvent, Vec<Arc<str>>, bool)) -> Event {
    k.frames = frames.into();
    Event::Stack(k)
}

impl Source for TextSource {
    fn next_event(&mut self) -> Option<Event> {
        let mut slot = None;
        self.next_into(&mut slot);
        slot
    }
    fn next_into(&mut self, slot: &mut Option<Event>) {
        // The input is moved out while lines borrow it, and put back after.
        let Some(mut input) = self.input.take() else {
            *slot = None;
            return;
        };
        self.next_from(&mut input, slot);
        self.input = Some(input);
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn format(&self) -> &'static str {
        self.format.name()
    }
    fn stats(&self) -> &SourceStats {
        &self.stats
    }
    fn position(&self) -> Position {
        Position::Line(self.line_no)
    }
}

/// The one value made of each distinct name met (a frame's name, an
/// event's name with its kind, a field's name with its `Field`): the
/// names of a text are few, so each is made once, then looked up.
fn intern<T: Clone>(
    names: &mut FxHashMap<Vec<u8>, T>,
    name: &[u8],
    make: impl FnOnce(Arc<str>) -> T,
) -> T {
    if let Some(n) = names.get(name) {
        return n.clone();
    }
    let n = make(String::from_utf8_lossy(name).into());
    names.insert(name.to_vec(), n.clone());
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both markers count their lost events; an event line that ends in
    /// `]` too (a block event's `[comm]`) stays an event.
    #[test]
    fn lost_event_markers_of_ftrace_and_trace_cmd() {
        let text = "CPU:1 [LOST 1234 EVENTS]\n\
                    CPU:0 [77 EVENTS DROPPED]\n             \
                    fio-200   [000] .....     1.000000: block_rq_issue: 7,0 R 4096 () 0 + 8 [fio]\n";
        let mut s = crate::ingest::open_bytes(Path::new("lost.txt"), text.as_bytes().to_vec())
            .expect("readable");
        let mut events = 0;
        while s.next_event().is_some() {
            events += 1;
        }
        assert_eq!(events, 1);
        assert_eq!(s.stats().lost_events, 1234 + 77);
        assert_eq!(s.stats().skipped, 0);
    }

    /// Non-breaking spaces read as spaces wherever they fall: on the
    /// first line, between lines without any, and after the buffer was
    /// refilled (a window of 256 bytes: a few lines each).
    #[test]
    fn non_breaking_spaces_read_as_spaces_across_refills() {
        let line = |i: u64| {
            format!(
                "             fio-200   [000] .....     1.{i:06}: block_rq_issue: 7,0 R 4096 () {} + 8 [fio]\n",
                i * 8
            )
        };
        let plain: String = (0..200).map(line).collect();
        let pasted: String = (0..200)
            .map(|i| match i {
                0 | 57 | 58 | 150 => line(i).replace(" R 4096", "\u{a0}R\u{a0}4096"),
                _ => line(i),
            })
            .collect();
        let read = |text: &str| {
            let bytes = std::io::Cursor::new(text.as_bytes().to_vec());
            let input = Chunked::from_reader(Box::new(bytes)).windowed(256);
            let mut s = TextSource::new(Path::new("pasted.txt"), input, TextFormat::Ftrace);
            let mut events = Vec::new();
            while let Some(e) = s.next_event() {
                events.push(format!("{e:?}"));
            }
            assert_eq!(s.stats().skipped, 0, "{text}");
            events
        };
        let (want, got) = (read(&plain), read(&pasted));
        assert_eq!(want.len(), 200);
        assert_eq!(got, want);
    }
}

//! `perf record` files (perf.data), read with the linux-perf-data crate
//! rather than through `perf script`: each sample's call chain becomes a
//! stack, weighted by its period, its frames named as `perf script`
//! names them and as the collapsers then shorten them (the same
//! `perf_script_stack::parse_frame`), so that `report perf.data --format
//! folded` equals `perf script | inferno-collapse-perf`.
//!
//! Names come from this machine, as perf's do: kernel addresses from
//! /proc/kallsyms (moved by the difference between the `_text` the file
//! recorded and today's, as perf relocates across reboots), user
//! addresses through the process's mappings (its MMAP records, inherited
//! on fork, replaced where a new one overlaps) and the binary's symbols (`elf_symbols`).
//! Tracepoint samples (`perf record -e block:…`) are decoded by the
//! format files perf stores in the file (`perf_tracing_data`), as the
//! events of a capture are.

use super::format_decoder::Decoder;
use super::perf_damage::{self, Overlay};
use super::perf_script_stack::parse_frame;
use super::source::{InputError, Source, SourceStats};
use crate::model::perf_record::{
    CONTEXT_HV, CONTEXT_KERNEL, CONTEXT_MAX, CONTEXT_USER, KERNEL_START,
};
use crate::model::{Comm, Event, StackEvent, Tracepoint};
use crate::symbolize::kallsyms::KernelSymbols;
use crate::symbolize::process_maps::SharedMappings;
use crate::symbolize::user_frames::{Mapping, UserFrames};
use linux_perf_data::linux_perf_event_reader::{
    EventRecord, RawEventRecord, RecordType, SampleRecord,
};
use linux_perf_data::{Feature, PerfFileReader, PerfFileRecord};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Whether the first bytes are a perf.data file's (`PERFILE2`).
pub fn detect(head: &[u8]) -> bool {
    head.starts_with(b"PERFILE2")
}

pub struct PerfDataSource {
    reader: PerfFileReader<BufReader<Overlay>>,
    /// Records the reader handed out, to skip when it is opened again
    /// past damage.
    handed_out: u64,
    /// It was (the damage found once is all there is to work around).
    reopened: bool,
    /// Apart from the reader, whose records borrow it while they are read.
    records: Records,
}

/// What reading the records learns and counts.
struct Records {
    path: PathBuf,
    stats: SourceStats,
    namer: Namer,
    /// Decodes tracepoint samples by the formats the file carries.
    decoder: Option<Decoder>,
    tracepoint_samples: u64,
    orphan_samples: u64,
    /// Call chains of tracepoint samples other than sched_switch's: not
    /// folded (they count events, neither CPU time nor blocked time).
    unfolded_chains: u64,
    /// What comes next, in order: the sample the process of its thread
    /// went before, the stack of the sched_switch sample just returned.
    pending: VecDeque<Event>,
    /// The call chain being read (reused).
    chain: Vec<u64>,
    /// Each thread's process (its sample's or record's pid).
    processes: FxHashMap<u32, u32>,
}

/// What names a sample's thread and frames, learnt from the records so far.
#[derive(Default)]
struct Namer {
    comms: FxHashMap<u32, Comm>,
    /// By process: its executable mappings, newest last; a forked
    /// process shares its parent's until either maps anew.
    maps: FxHashMap<u32, Arc<Vec<Mapping>>>,
    shared: SharedMappings,
    user: UserFrames,
    kernel: Option<KernelSymbols>,
    /// /proc/kallsyms being read and sorted (tens of ms) while the file's
    /// first records are parsed.
    kernel_loading: Option<std::thread::JoinHandle<KernelSymbols>>,
    /// The file's `_text` (its kernel MMAP record's page offset).
    recorded_text: Option<u64>,
    /// Today's `_text` minus the file's, once known.
    kernel_shift: Option<u64>,
    /// Frame names already made, by kernel address.
    kernel_names: FxHashMap<u64, Option<Arc<str>>>,
    /// Stacks already made, by call chain (`chain_key`): most samples
    /// repeat a chain seen before, and are then one lookup.
    chains: FxHashMap<Box<[u64]>, Arc<[Arc<str>]>>,
    /// By process: how many times its mappings changed, part of the key
    /// of its chains with user frames.
    generations: FxHashMap<u32, u64>,
    key: Vec<u64>,
}

/// Cached chains beyond this are dropped and made again (a bound on
/// memory for recordings of endlessly varied stacks).
const MAX_CACHED_CHAINS: usize = 1 << 20;

impl PerfDataSource {
    pub fn open(path: &Path) -> Result<PerfDataSource, InputError> {
        let mut f = std::fs::File::open(path)
            .map_err(|e| InputError::new(path, format!("cannot open: {e}")))?;
        super::perf_header::check_sections(path, &mut f)?;
        let (inflated, past_limit) = super::perf_compressed::measure(&mut f)
            .map_err(|e| InputError::new(path, format!("not read: {e}")))?;
        f.seek(SeekFrom::Start(0))
            .map_err(|e| InputError::new(path, format!("cannot read: {e}")))?;
        let reader = read_records(f, past_limit)
            .map_err(|e| InputError::new(path, format!("not a usable perf.data file: {e}")))?;
        let build_ids = build_ids(&reader.perf_file);
        let mut stats = SourceStats::default();
        stats
            .notes
            .extend(inflated.iter().flat_map(|m| m.notes(path)));
        let mut other_kernel = recorded_on_another_kernel(path, &build_ids);
        // perf's build-id cache may hold that kernel's symbols: perf
        // report names the frames from there, and so do we.
        let mut other_kernel_symbols = None;
        if other_kernel.is_some() {
            if let Some(k) = build_ids
                .get(&b"[kernel.kallsyms]"[..])
                .and_then(|id| cached_kallsyms(id))
            {
                other_kernel_symbols = Some(k);
                other_kernel = None;
            }
        }
        let other_kernel_symbols = other_kernel_symbols
            .or_else(|| other_kernel.as_ref().map(|_| KernelSymbols::default()));
        let kernel_loading = match other_kernel {
            Some(note) => {
                stats.notes.push(note);
                None
            }
            None => std::thread::Builder::new()
                .spawn(KernelSymbols::given_or_this_machine)
                .ok(),
        };
        let decoder = match reader.perf_file.feature_section_data(Feature::TRACING_DATA) {
            None => None,
            Some(d) => match super::perf_tracing_data::parse(d) {
                Ok((formats, page)) => Some(Decoder::new(&formats, page)),
                Err(e) => {
                    stats.notes.push(format!(
                        "{}: tracepoint samples left out: {e}",
                        path.display()
                    ));
                    None
                }
            },
        };
        Ok(PerfDataSource {
            reader,
            handed_out: 0,
            reopened: false,
            records: Records {
                path: path.to_path_buf(),
                stats,
                decoder,
                namer: Namer {
                    user: UserFrames::with_build_ids(build_ids),
                    // Another kernel's frames go unnamed, as perf leaves them.
                    kernel: other_kernel_symbols,
                    kernel_loading,
                    ..Default::default()
                },
                tracepoint_samples: 0,
                orphan_samples: 0,
                unfolded_chains: 0,
                pending: VecDeque::new(),
                processes: FxHashMap::default(),
                chain: Vec::new(),
            },
        })
    }
}

/// The crate's reader of `f`'s records, with the `damaged` stretch read
/// as round ends (perf_damage.rs).
fn read_records(
    f: std::fs::File,
    damaged: Option<(u64, u64)>,
) -> Result<PerfFileReader<BufReader<Overlay>>, linux_perf_data::Error> {
    let view = BufReader::with_capacity(1 << 20, Overlay::new(f, damaged));
    quietly(|| PerfFileReader::parse_file(view))
        .unwrap_or(Err(linux_perf_data::Error::NoAttributes))
}

impl PerfDataSource {
    /// After the crate stopped at damage: the file read again with the
    /// records from the damage on read as round ends, so that the good
    /// records of the round the crate held come out; those handed out
    /// already are skipped. Says what was left out; `None` when the
    /// damage is not one of framing.
    fn reopen_before_damage(&mut self) -> Option<String> {
        if std::mem::replace(&mut self.reopened, true) {
            return None;
        }
        let path = &self.records.path;
        let (from, to, what) = perf_damage::cut(&std::fs::File::open(path).ok()?)?;
        let f = std::fs::File::open(path).ok()?;
        let mut reader = read_records(f, Some((from, to))).ok()?;
        for _ in 0..self.handed_out {
            reader
                .record_iter
                .next_record(&mut reader.perf_file)
                .ok()??;
        }
        self.reader = reader;
        Some(format!(
            "{}: {what} at byte {from}: the {} bytes of records from there to the end of the data were skipped; the records before it are read",
            path.display(),
            to - from
        ))
    }
}

/// Runs `f`, turning a panic inside the perf.data crate (a damaged file
/// it did not check) into `None`, without the panic's message.
fn quietly<T>(f: impl FnOnce() -> T) -> Option<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
    std::panic::set_hook(hook);
    r
}

/// A note when the file's kernel is not the running one (their build ids
/// differ) and no `--kallsyms` names its frames: this machine's symbols
/// would name them wrongly, so perf leaves them `[unknown]`, and so do we.
fn recorded_on_another_kernel(
    path: &Path,
    build_ids: &FxHashMap<Vec<u8>, Vec<u8>>,
) -> Option<String> {
    if crate::symbolize::kallsyms::given_file().is_some() {
        return None;
    }
    let recorded = build_ids.get(&b"[kernel.kallsyms]"[..])?;
    let running = crate::symbolize::kallsyms::running_build_id()?;
    if crate::symbolize::kallsyms::same_build_id(recorded, &running) {
        return None;
    }
    Some(format!(
        "{}: kernel frames unresolved: recorded on another kernel (build id {}, the running one is {}) whose symbols perf's build-id cache does not hold (~/.debug/[kernel.kallsyms]/{}/kallsyms); they are left unnamed, as perf leaves them: pass --kallsyms FILE, a copy of the recording machine's /proc/kallsyms",
        path.display(),
        hex(recorded),
        hex(&running),
        hex(recorded)
    ))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The kernel symbols perf's build-id cache keeps for kernel `id`
/// (`perf record` copies /proc/kallsyms to
/// `~/.debug/[kernel.kallsyms]/ID/kallsyms`), when there.
fn cached_kallsyms(id: &[u8]) -> Option<KernelSymbols> {
    let home = std::env::var_os("HOME")?;
    let path = Path::new(&home)
        .join(".debug/[kernel.kallsyms]")
        .join(hex(id))
        .join("kallsyms");
    let text = crate::ingest::files::read_small(&path, 256 << 20).ok()?;
    let k = KernelSymbols::parse(&text);
    (!k.is_empty()).then_some(k)
}

/// Each binary's build id as `perf record` wrote them (its HEADER_BUILD_ID).
fn build_ids(f: &linux_perf_data::PerfFile) -> FxHashMap<Vec<u8>, Vec<u8>> {
    f.build_ids()
        .unwrap_or_default()
        .into_values()
        .map(|i| (i.path, i.build_id))
        .collect()
}

impl Namer {
    /// A kernel frame's name as the collapsers write it (`name`, or
    /// `[unknown]`), from perf script's line for it; named once per address.
    fn kernel_frame(&mut self, addr: u64) -> Option<Arc<str>> {
        if let Some(n) = self.kernel_names.get(&addr) {
            return n.clone();
        }
        let loading = &mut self.kernel_loading;
        let k = self.kernel.get_or_insert_with(|| {
            loading
                .take()
                .and_then(|t| t.join().ok())
                .unwrap_or_else(KernelSymbols::given_or_this_machine)
        });
        // Today's address of what the file recorded at `addr`.
        let shift = *self.kernel_shift.get_or_insert_with(|| {
            match (self.recorded_text, k.address_of("_text")) {
                (Some(then), Some(now)) => now.wrapping_sub(then),
                _ => 0,
            }
        });
        let line = match k.lookup(addr.wrapping_add(shift)) {
            Some((name, off)) => format!("\t{addr:x} {name}+{off:#x} ([kernel.kallsyms])"),
            None => format!("\t{addr:x} [unknown] ([kernel.kallsyms])"),
        };
        let n: Option<Arc<str>> = parse_frame(&line).map(Arc::from);
        self.kernel_names.insert(addr, n.clone());
        n
    }

    /// A user frame's name, through the process's mapping at `addr`.
    fn user_frame(&mut self, pid: u32, addr: u64) -> Option<Arc<str>> {
        let m = self
            .maps
            .get(&pid)
            .and_then(|v| v.iter().rev().find(|m| addr >= m.start && addr < m.end));
        self.user.name(m, addr)
    }

    /// The frames of a sample's call chain (`frames`), made once per
    /// distinct chain: keyed by the chain, and for one with user frames
    /// by its process and the state of its mappings too.
    fn stack(&mut self, pid: u32, chain: &[u64], ip: u64, kernel_ip: bool) -> Arc<[Arc<str>]> {
        let user = chain.contains(&CONTEXT_USER) || (chain.is_empty() && !kernel_ip);
        self.key.clear();
        if user {
            let generation = self.generations.get(&pid).copied().unwrap_or(0);
            self.key.extend([pid as u64, generation]);
        } else {
            self.key.extend([u64::MAX, 0]);
        }
        self.key.push(kernel_ip as u64);
        if chain.is_empty() {
            self.key.push(ip);
        }
        self.key.extend_from_slice(chain);
        if let Some(f) = self.chains.get(&self.key[..]) {
            return f.clone();
        }
        let f: Arc<[Arc<str>]> = self.frames(pid, chain, ip, kernel_ip).into();
        if self.chains.len() >= MAX_CACHED_CHAINS {
            self.chains.clear();
        }
        self.chains.insert(self.key.as_slice().into(), f.clone());
        f
    }

    /// The frames of a call chain, innermost first. Whether an address
    /// is the kernel's or user space's is the chain's context markers'
    /// to say (a user stack walked by frame pointers can hold any value).
    fn frames(&mut self, pid: u32, chain: &[u64], ip: u64, kernel_ip: bool) -> Vec<Arc<str>> {
        let mut out = Vec::with_capacity(chain.len());
        if chain.is_empty() {
            out.extend(if kernel_ip {
                self.kernel_frame(ip)
            } else {
                self.user_frame(pid, ip)
            });
        }
        let mut kernel = kernel_ip;
        for &a in chain {
            match a {
                CONTEXT_KERNEL => kernel = true,
                CONTEXT_USER => kernel = false,
                CONTEXT_HV => {}
                // perf drops a chain with any other marker ("invalid
                // callchain context"): the sample then has no stack.
                a if a >= CONTEXT_MAX => return Vec::new(),
                a if kernel => out.extend(self.kernel_frame(a)),
                a => out.extend(self.user_frame(pid, a)),
            }
        }
        out
    }

    fn mapping(&mut self, pid: i32, start: u64, len: u64, pgoff: u64, path: &[u8], exec: bool) {
        if path.starts_with(b"[kernel.kallsyms]") {
            self.recorded_text = Some(pgoff);
            return;
        }
        if !exec || pid < 0 {
            return;
        }
        let path = self.user.mapped_path(pid, path);
        *self.generations.entry(pid as u32).or_default() += 1;
        let v = self.shared.own(self.maps.entry(pid as u32).or_default());
        let end = start.saturating_add(len);
        v.retain(|m| m.end <= start || m.start >= end);
        v.push(Mapping {
            start,
            end,
            pgoff,
            path,
        });
    }
}

/// Whether a sample's call chain (its `nr` and the addresses) fits in
/// the record, for the sample layouts whose fields before it have fixed
/// sizes (all but PERF_SAMPLE_READ); the crate would multiply `nr`
/// unchecked.
fn callchain_fits(r: &linux_perf_data::linux_perf_event_reader::RawEventRecord) -> bool {
    use linux_perf_data::linux_perf_event_reader::SampleFormat as F;
    let f = r.parse_info.sample_format;
    if !f.contains(F::CALLCHAIN) || f.contains(F::READ) {
        return true;
    }
    let before = [
        F::IDENTIFIER,
        F::IP,
        F::TID,
        F::TIME,
        F::ADDR,
        F::ID,
        F::STREAM_ID,
        F::CPU,
        F::PERIOD,
    ]
    .iter()
    .filter(|x| f.contains(**x))
    .count()
        * 8;
    let data = r.data.as_slice();
    let Some(nr) = data.get(before..before + 8) else {
        return false;
    };
    let nr: [u8; 8] = nr.try_into().unwrap();
    let nr = match r.parse_info.endian {
        linux_perf_data::Endianness::LittleEndian => u64::from_le_bytes(nr),
        linux_perf_data::Endianness::BigEndian => u64::from_be_bytes(nr),
    };
    nr.checked_mul(8)
        .and_then(|b| b.checked_add(before as u64 + 8))
        .is_some_and(|end| end <= data.len() as u64)
}

/// An MMAP2 record that carries a build id (PERF_RECORD_MISC_MMAP_BUILD_ID)
/// gives its length in the byte after pid, tid, address, length and
/// offset: at most 20, which the crate asserts.
fn build_id_fits(r: &linux_perf_data::linux_perf_event_reader::RawEventRecord) -> bool {
    const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
    r.misc & MISC_MMAP_BUILD_ID == 0 || r.data.as_slice().get(32).is_some_and(|&n| n <= 20)
}

impl Source for PerfDataSource {
    fn next_event(&mut self) -> Option<Event> {
        let records = &mut self.records;
        if let Some(e) = records.pending.pop_front() {
            return Some(e);
        }
        loop {
            let record = match self
                .reader
                .record_iter
                .next_record(&mut self.reader.perf_file)
            {
                Ok(Some(PerfFileRecord::EventRecord { record, .. })) => {
                    self.handed_out += 1;
                    record
                }
                Ok(Some(_)) => {
                    self.handed_out += 1;
                    continue;
                }
                Ok(None) => {
                    records.note_left_out();
                    return None;
                }
                Err(e) => {
                    let e = e.to_string();
                    match self.reopen_before_damage() {
                        Some(note) => self.records.stats.notes.push(note),
                        None => {
                            self.records.stats.cut_short = Some(format!("stopped reading: {e}"))
                        }
                    }
                    if self.reopened && self.records.stats.cut_short.is_none() {
                        return self.next_event();
                    }
                    self.records.note_left_out();
                    return None;
                }
            };
            match records.parse(&record) {
                Some(EventRecord::Sample(s)) => {
                    if let Some(ev) = records.sample(&s) {
                        // The thread's process first, when it is news.
                        let (tid, pid) = (s.tid.unwrap_or(-1), s.pid.unwrap_or(-1));
                        if let Some(p) = records.process(tid, pid) {
                            records.pending.push_front(ev);
                            return Some(p);
                        }
                        return Some(ev);
                    }
                }
                Some(other) => {
                    records.namer.learn(&other);
                    let told = match &other {
                        EventRecord::Comm(c) => records.process(c.tid, c.pid),
                        EventRecord::Fork(f) => records.process(f.tid, f.pid),
                        _ => None,
                    };
                    if told.is_some() {
                        return told;
                    }
                }
                None => {}
            }
        }
    }

    fn path(&self) -> &Path {
        &self.records.path
    }

    fn format(&self) -> &'static str {
        "perf.data"
    }

    fn stats(&self) -> &SourceStats {
        &self.records.stats
    }
}

impl Records {
    /// Thread `tid` is of process `pid` (a sample's, a COMM or FORK
    /// record's): the `Event::ThreadGroup` to pass on if that is news.
    /// Not for -1 (a task already gone) or the idle task's 0.
    fn process(&mut self, tid: i32, pid: i32) -> Option<Event> {
        let (Ok(tid), Ok(tgid)) = (u32::try_from(tid), u32::try_from(pid)) else {
            return None;
        };
        (tid != 0 && tgid != 0 && self.processes.insert(tid, tgid) != Some(tgid))
            .then_some(Event::ThreadGroup { tid, tgid })
    }

    /// The notes on what was left out, once the file is read.
    fn note_left_out(&mut self) {
        let path = self.path.display();
        for why in self.namer.user.take_refused() {
            self.stats.notes.push(format!("{path}: {why}"));
        }
        if self.tracepoint_samples > 0 {
            self.stats.notes.push(format!(
                "{path}: {} tracepoint samples could not be decoded (no format for their event in the file's tracing data)",
                std::mem::take(&mut self.tracepoint_samples)
            ));
        }
        if self.unfolded_chains > 0 {
            self.stats.notes.push(format!(
                "{path}: the call chains of {} tracepoint samples were not folded (only sched_switch's, as blocked time)",
                std::mem::take(&mut self.unfolded_chains)
            ));
        }
        self.stats
            .notes
            .extend(self.namer.shared.warning(&self.path));
        if self.orphan_samples > 0 {
            self.stats.notes.push(format!(
                "{path}: {} samples of tasks that had exited (pid -1) are left out, as perf script | inferno-collapse-perf leaves them",
                std::mem::take(&mut self.orphan_samples)
            ));
        }
    }

    /// The record parsed, or `None` for a lost-events record (counted) and
    /// a damaged one (skipped, with its kind).
    fn parse<'a>(&mut self, record: &RawEventRecord<'a>) -> Option<EventRecord<'a>> {
        if record.record_type == RecordType::LOST {
            if let Ok(EventRecord::Lost(l)) = record.parse() {
                self.stats.lost_events = self.stats.lost_events.saturating_add(l.count);
                self.stats.lost_reports.push((None, l.count));
            }
            return None;
        }
        if record.record_type == RecordType::SAMPLE && !callchain_fits(record) {
            self.stats
                .skip(|| "a sample whose call chain is longer than its record".into());
            return None;
        }
        if record.record_type == RecordType::MMAP2 && !build_id_fits(record) {
            self.stats
                .skip(|| "an MMAP2 record with a build id over 20 bytes".into());
            return None;
        }
        // The crate multiplies a damaged call chain's length unchecked
        // (a panic where overflow is checked): a damaged record either way.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record.parse())) {
            Ok(Ok(p)) => Some(p),
            _ => {
                self.stats
                    .skip(|| format!("a {:?} record", record.record_type));
                None
            }
        }
    }

    /// A sample as an event: a tracepoint's (decoded by its format) or a
    /// CPU sample's stack; `None` when it gives none.
    fn sample(&mut self, s: &SampleRecord) -> Option<Event> {
        if let Some(raw) = &s.raw {
            return self.tracepoint_sample(s, &raw.as_slice());
        }
        let (Some(tid), Some(ip)) = (s.tid, s.ip) else {
            self.stats
                .skip(|| "a sample without thread or address".into());
            return None;
        };
        if tid < 0 {
            // A task already gone (pid -1): perf script names
            // it `:-1`, which the collapsers do not read.
            self.orphan_samples += 1;
            return None;
        }
        let pid = s.pid.unwrap_or(tid) as u32;
        self.chain.clear();
        if let Some(c) = &s.callchain {
            self.chain.extend((0..c.len()).filter_map(|i| c.get(i)));
        }
        let kernel_ip = ip >= KERNEL_START;
        let frames = self.namer.stack(pid, &self.chain, ip, kernel_ip);
        let tid = tid as u32;
        let comm = match self.namer.comms.get(&tid) {
            Some(c) => *c,
            None if tid == 0 => Comm::new(b"swapper"),
            None => Comm::new(format!(":{tid}").as_bytes()),
        };
        self.stats.events += 1;
        Some(Event::Stack(StackEvent {
            ts: s.timestamp.unwrap_or(0),
            cpu: s.cpu.unwrap_or(0),
            pid: tid,
            frames,
            sampled: true,
            weight: s.period.unwrap_or(1),
            comm,
        }))
    }

    /// A tracepoint sample decoded; a sched_switch's call chain is kept
    /// as the stack that comes next.
    fn tracepoint_sample(&mut self, s: &SampleRecord, raw: &[u8]) -> Option<Event> {
        let ts = s.timestamp.unwrap_or(0);
        let cpu = s.cpu.unwrap_or(0);
        let comm = s
            .tid
            .and_then(|t| self.namer.comms.get(&(t as u32)).copied());
        let Some(mut ev) = self.decoder.as_ref().and_then(|d| d.decode(ts, cpu, raw)) else {
            self.tracepoint_samples += 1;
            return None;
        };
        // perf names a sample's task as its thread was named then.
        if let (Event::Trace(o), Some(c)) = (&mut ev, comm) {
            o.comm = c;
        }
        let switch = match &ev {
            Event::Trace(o) if o.kind == Tracepoint::SchedSwitch => Some(o),
            _ => None,
        };
        match (switch, &s.callchain) {
            (_, None) => {}
            (None, Some(_)) => self.unfolded_chains += 1,
            (Some(o), Some(chain)) => {
                let chain: Vec<u64> = (0..chain.len()).filter_map(|i| chain.get(i)).collect();
                if !chain.is_empty() {
                    // The switching-away thread's stack, right after its
                    // switch: as the stacktrace trigger of a capture.
                    let pid = s.pid.unwrap_or(o.pid as i32) as u32;
                    let ip = s.ip.unwrap_or(0);
                    let frames = self.namer.frames(pid, &chain, ip, ip >= KERNEL_START);
                    self.pending.push_back(Event::Stack(StackEvent {
                        ts,
                        cpu,
                        pid: s.tid.map_or(o.pid, |t| t as u32),
                        frames: frames.into(),
                        sampled: false,
                        weight: 1,
                        comm: o.comm,
                    }));
                }
            }
        }
        self.stats.events += 1;
        Some(ev)
    }
}

impl Namer {
    /// What a non-sample record says of threads' names and mappings.
    fn learn(&mut self, record: &EventRecord) {
        match record {
            EventRecord::Comm(c) => {
                // On exec perf keeps the old mappings until new ones
                // overlap them (samples inside execve still name the
                // old program's frames).
                let name = Comm::new(&c.name.as_slice());
                self.comms.insert(c.tid as u32, name);
            }
            EventRecord::Fork(f) => {
                if let Some(c) = self.comms.get(&(f.ptid as u32)).copied() {
                    self.comms.insert(f.tid as u32, c);
                }
                if f.pid != f.ppid {
                    if let Some(m) = self.maps.get(&(f.ppid as u32)).cloned() {
                        self.maps.insert(f.pid as u32, m);
                        *self.generations.entry(f.pid as u32).or_default() += 1;
                    }
                }
            }
            EventRecord::Mmap(m) => self.mapping(
                m.pid,
                m.address,
                m.length,
                m.page_offset,
                &m.path.as_slice(),
                m.is_executable,
            ),
            EventRecord::Mmap2(m) => {
                let exec = m.protection & libc::PROT_EXEC as u32 != 0;
                let path = m.path.as_slice();
                self.mapping(m.pid, m.address, m.length, m.page_offset, &path, exec)
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_and_damaged_headers_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("perf.data");
        let mut h = b"PERFILE2".to_vec();
        h.extend([0u8; 8]);
        std::fs::write(&p, &h).unwrap();
        let e = PerfDataSource::open(&p).err().unwrap().to_string();
        assert!(e.contains("shorter than perf's 104-byte header"), "{e}");
        let mut h = b"PERFILE2".to_vec();
        h.resize(104, 0);
        h[8..16].copy_from_slice(&104u64.to_le_bytes());
        h[16..24].copy_from_slice(&136u64.to_le_bytes());
        // A data section of 1 TiB.
        h[40..48].copy_from_slice(&104u64.to_le_bytes());
        h[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes());
        std::fs::write(&p, &h).unwrap();
        let e = PerfDataSource::open(&p).err().unwrap().to_string();
        assert!(e.contains("data section") && e.contains("truncated"), "{e}");
    }
}

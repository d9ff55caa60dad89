//! Reads a capture written by `iosleuth record`: a directory with the
//! kernel's format files, a manifest, and one file of raw ring-buffer pages
//! per CPU. Self-describing: it decodes on any machine, without root.

use super::reader::Chunked;
use super::ring_buffer::{page_info, PageRecords};
use super::source::{InputError, Source, SourceStats};
use super::tracefs_format::{
    parse_format, parse_header_page, read_int, read_str, EventFormat, Field, FieldKind, PageHeader,
};
use crate::model::{Action, BlockEvent, Comm, Dev, Event, Extra, Fields, OtherEvent, Rwbs, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::capture_layout::{self as layout, ADDRESS_FIELDS, MANIFEST, SYMBOLS};

static RECORDER_SELF: std::sync::LazyLock<Arc<str>> =
    std::sync::LazyLock::new(|| "iosleuth:recorder_itself".into());

#[derive(Debug, Clone, Default)]
struct BlockFields {
    dev: Option<Field>,
    sector: Option<Field>,
    nr_sector: Option<Field>,
    bytes: Option<Field>,
    rwbs: Option<Field>,
    comm: Option<Field>,
    error: Option<Field>,
    old_dev: Option<Field>,
    old_sector: Option<Field>,
    new_sector: Option<Field>,
    nr_rq: Option<Field>,
}

#[derive(Debug, Clone)]
enum Kind {
    Block(Action, Box<BlockFields>),
    Other(Arc<str>, Arc<[(Arc<str>, Field)]>),
}

/// Turns raw records into events, by the format of their event id.
#[derive(Debug)]
pub struct Decoder {
    kinds: HashMap<u16, Kind>,
    common_type: Field,
    common_pid: Field,
    common_flags: Option<Field>,
    /// Threads of the recorder itself: their events in process context are
    /// the recording's own footprint, not the workload's.
    skip_tids: std::collections::HashSet<u32>,
    /// Events that describe the CPU rather than what a thread did (a
    /// switch, a wakeup, an interrupt): kept for the recorder's threads
    /// too, or the scheduler analysis would lose who ran on a CPU.
    scheduling: std::collections::HashSet<u16>,
    /// Names of kernel addresses (work functions), from `symbols.json`.
    symbols: HashMap<u64, Box<str>>,
    pub page: PageHeader,
}

impl Decoder {
    pub fn new(formats: &[EventFormat], page: PageHeader) -> Decoder {
        let mut kinds = HashMap::new();
        let mut scheduling = std::collections::HashSet::new();
        let mut common_type = Field {
            name: "common_type".into(),
            offset: 0,
            size: 2,
            signed: false,
            data_loc: false,
            kind: FieldKind::Int,
        };
        let mut common_pid = Field {
            name: "common_pid".into(),
            offset: 4,
            size: 4,
            signed: true,
            data_loc: false,
            kind: FieldKind::Int,
        };
        for f in formats {
            if let Some(t) = f.field("common_type") {
                common_type = t.clone();
            }
            if let Some(p) = f.field("common_pid") {
                common_pid = p.clone();
            }
            if matches!(
                f.system.as_str(),
                "sched" | "irq" | "workqueue" | "timer" | "irq_vectors"
            ) {
                scheduling.insert(f.id);
            }
            let action = (f.system == "block")
                .then(|| Action::from_tracepoint(&f.name))
                .flatten();
            let kind = match action {
                Some(a) => {
                    let g = |n: &str| f.field(n).cloned();
                    Kind::Block(
                        a,
                        Box::new(BlockFields {
                            dev: g("dev"),
                            sector: g("sector"),
                            nr_sector: g("nr_sector"),
                            bytes: g("bytes"),
                            rwbs: g("rwbs"),
                            comm: g("comm"),
                            error: g("error"),
                            old_dev: g("old_dev"),
                            old_sector: g("old_sector"),
                            new_sector: g("new_sector"),
                            nr_rq: g("nr_rq"),
                        }),
                    )
                }
                None => Kind::Other(
                    format!("{}:{}", f.system, f.name).into(),
                    f.fields
                        .iter()
                        .filter(|x| !x.name.starts_with("common_") && x.kind != FieldKind::Array)
                        .map(|x| (Arc::from(x.name.as_str()), x.clone()))
                        .collect(),
                ),
            };
            kinds.insert(f.id, kind);
        }
        let common_flags = formats
            .iter()
            .find_map(|f| f.field("common_flags").cloned());
        Decoder {
            kinds,
            common_type,
            common_pid,
            common_flags,
            skip_tids: Default::default(),
            scheduling,
            symbols: HashMap::new(),
            page,
        }
    }

    /// Decodes one record; `None` for an id without a format.
    pub fn decode(&self, ts: u64, cpu: u32, rec: &[u8]) -> Option<Event> {
        let id = read_int(rec, &self.common_type)? as u16;
        let pid = read_int(rec, &self.common_pid)? as u32;
        if self.skip_tids.contains(&pid) && !self.scheduling.contains(&id) {
            // trace_entry flags: hardirq 0x08, softirq 0x10, NMI 0x40.
            let flags = self
                .common_flags
                .as_ref()
                .and_then(|f| read_int(rec, f))
                .unwrap_or(0);
            if flags & (0x08 | 0x10 | 0x40) == 0 {
                return Some(Event::Other(OtherEvent {
                    ts,
                    cpu,
                    pid,
                    name: RECORDER_SELF.clone(),
                    comm: Comm::default(),
                    fields: Fields::default(),
                }));
            }
        }
        match self.kinds.get(&id)? {
            Kind::Other(name, layout) => {
                let mut fields = decode_fields(rec, layout);
                if !self.symbols.is_empty() {
                    for (k, v) in &mut fields.0 {
                        if let (true, Value::Int(a)) = (ADDRESS_FIELDS.contains(&&**k), &*v) {
                            if let Some(n) = self.symbols.get(&(*a as u64)) {
                                *v = Value::Str(n.clone());
                            }
                        }
                    }
                }
                Some(Event::Other(OtherEvent {
                    ts,
                    cpu,
                    pid,
                    name: name.clone(),
                    comm: Comm::default(),
                    fields,
                }))
            }
            Kind::Block(action, f) => {
                let int = |x: &Option<Field>| x.as_ref().and_then(|x| read_int(rec, x));
                let nr = int(&f.nr_sector).unwrap_or(0) as u32;
                let bytes_field = int(&f.bytes).unwrap_or(0) as u32;
                let rwbs = f
                    .rwbs
                    .as_ref()
                    .and_then(|x| read_str(rec, x))
                    .and_then(Rwbs::parse)
                    .unwrap_or(Rwbs(Rwbs::NONE));
                let comm = f
                    .comm
                    .as_ref()
                    .and_then(|x| read_str(rec, x))
                    .map(Comm::new)
                    .unwrap_or_default();
                let extra = if let (Some(d), Some(s)) = (int(&f.old_dev), int(&f.old_sector)) {
                    Extra::Remap {
                        from_dev: Dev(d as u32),
                        from_sector: s,
                    }
                } else if let Some(n) = int(&f.new_sector) {
                    Extra::Split { new_sector: n }
                } else if let Some(n) = int(&f.nr_rq) {
                    Extra::Unplug { depth: n as u32 }
                } else {
                    Extra::None
                };
                Some(Event::Block(BlockEvent {
                    ts,
                    dev: Dev(int(&f.dev).unwrap_or(0) as u32),
                    action: *action,
                    rwbs,
                    sector: crate::model::block::trace_sector(int(&f.sector).unwrap_or(0)),
                    bytes: if nr > 0 {
                        nr.saturating_mul(512)
                    } else {
                        bytes_field
                    },
                    pid,
                    cpu,
                    error: int(&f.error).unwrap_or(0) as i64 as i32,
                    comm,
                    passthrough: nr == 0 && bytes_field > 0,
                    extra,
                }))
            }
        }
    }
}

/// Every integer and text field of a record, by the event's format.
fn decode_fields(rec: &[u8], layout: &[(Arc<str>, Field)]) -> Fields {
    let mut out = Fields(Vec::with_capacity(layout.len()));
    for (name, f) in layout {
        let v = match f.kind {
            FieldKind::Text => {
                // trace_marker text keeps the writer's newline.
                read_str(rec, f).map(|b| {
                    let b = b.strip_suffix(b"\n").unwrap_or(b);
                    Value::Str(String::from_utf8_lossy(b).into())
                })
            }
            _ => read_int(rec, f).map(|n| Value::Int(n as i64)),
        };
        if let Some(v) = v {
            out.push(name.clone(), v);
        }
    }
    out
}

/// Reads every `format` file under `dir/formats/events`.
fn load_formats(dir: &Path) -> Result<(Vec<EventFormat>, PageHeader), InputError> {
    let header_page = dir.join(layout::HEADER_PAGE);
    let page = match std::fs::read_to_string(&header_page) {
        Ok(t) => parse_header_page(&t)
            .ok_or_else(|| InputError::new(&header_page, "cannot parse header_page"))?,
        Err(e) => return Err(InputError::new(&header_page, format!("missing: {e}"))),
    };
    let mut formats = Vec::new();
    let events = dir.join(layout::EVENT_FORMATS);
    let systems = std::fs::read_dir(&events)
        .map_err(|e| InputError::new(&events, format!("cannot list: {e}")))?;
    for sys in systems.flatten() {
        let sys_name = sys.file_name().to_string_lossy().into_owned();
        for ev in std::fs::read_dir(sys.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = ev.path().join("format");
            if let Ok(text) = std::fs::read_to_string(&p) {
                match parse_format(&sys_name, &text) {
                    Some(f) => formats.push(f),
                    None => return Err(InputError::new(&p, "cannot parse this format file")),
                }
            }
        }
    }
    Ok((formats, page))
}

/// Opens every per-CPU file of a capture directory as a source.
pub fn open_capture(dir: &Path) -> Result<Vec<Box<dyn Source>>, InputError> {
    let manifest_path = dir.join(MANIFEST);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&manifest_path)
            .map_err(|e| InputError::new(&manifest_path, format!("cannot read: {e}")))?,
    )
    .map_err(|e| InputError::new(&manifest_path, format!("not a capture manifest: {e}")))?;
    let page_size = manifest["page_size"].as_u64().unwrap_or(4096) as usize;
    let (formats, page) = load_formats(dir)?;
    let mut decoder = Decoder::new(&formats, page);
    decoder.skip_tids = manifest["recorder_tids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_u64())
                .map(|v| v as u32)
                .collect()
        })
        .unwrap_or_default();
    if let Ok(text) = std::fs::read_to_string(dir.join(SYMBOLS)) {
        let map: HashMap<String, String> = serde_json::from_str(&text).unwrap_or_default();
        decoder.symbols = map
            .into_iter()
            .filter_map(|(k, v)| {
                Some((
                    u64::from_str_radix(k.trim_start_matches("0x"), 16).ok()?,
                    v.into(),
                ))
            })
            .collect();
    }
    let decoder = Arc::new(decoder);
    let mut cpus: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| InputError::new(dir, format!("cannot list: {e}")))?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let cpu = layout::cpu_of_file(&name)?;
            Some((cpu, e.path()))
        })
        .collect();
    cpus.sort();
    if cpus.is_empty() {
        return Err(InputError::new(dir, "capture has no cpuN.raw files"));
    }
    let mut out: Vec<Box<dyn Source>> = Vec::new();
    for (cpu, path) in cpus {
        let f = std::fs::File::open(&path)
            .map_err(|e| InputError::new(&path, format!("cannot open: {e}")))?;
        // The kernel's own per-CPU counters, read when recording stopped:
        // the authoritative count of events lost on this CPU.
        let counters = &manifest["ring_buffer_stats"][cpu.to_string()];
        let lost = ["overrun", "dropped events"]
            .iter()
            .map(|k| counters[*k].as_f64().unwrap_or(0.0) as u64)
            .sum::<u64>();
        let mut stats = SourceStats::default();
        if lost > 0 {
            stats.lost_events = lost;
            stats.lost_reports.push((None, lost));
        }
        out.push(Box::new(RawCpuSource {
            counted_by_kernel: lost > 0,
            path,
            cpu,
            input: Chunked::from_file(f),
            page_size,
            decoder: decoder.clone(),
            pending: std::collections::VecDeque::new(),
            stats,
            last_ts: None,
        }));
    }
    Ok(out)
}

/// The raw ring-buffer pages of one CPU.
pub struct RawCpuSource {
    /// The manifest already counted this CPU's losses.
    counted_by_kernel: bool,
    path: PathBuf,
    cpu: u32,
    input: Chunked,
    page_size: usize,
    decoder: Arc<Decoder>,
    pending: std::collections::VecDeque<Event>,
    stats: SourceStats,
    last_ts: Option<u64>,
}

impl RawCpuSource {
    /// Decodes the next page into `pending`; false at the end.
    fn next_page(&mut self) -> bool {
        let have = self.input.ensure(self.page_size);
        if have == 0 {
            return false;
        }
        let at = self.input.offset();
        if have < self.page_size {
            self.stats.cut_short = Some(format!(
                "truncated: the last page at byte {at} has {have} of {} bytes",
                self.page_size
            ));
            self.input.consume(have);
            return false;
        }
        let page = &self.input.avail()[..self.page_size];
        let Some(info) = page_info(page, self.decoder.page) else {
            self.stats
                .skip(|| format!("page at byte {at} with an impossible length"));
            self.input.consume(self.page_size);
            return true;
        };
        if info.missed {
            let n = info.missed_count.unwrap_or(0);
            if self.counted_by_kernel {
                // Already counted: keep only when it happened.
                self.stats.lost_reports.push((Some(info.base_ts), n));
            } else {
                self.stats.lost_events += n.max(1);
                self.stats.lost_reports.push((Some(info.base_ts), n.max(1)));
            }
        }
        let mut recs = PageRecords::new(page, self.decoder.page, &info);
        for (ts, rec) in recs.by_ref() {
            match self.decoder.decode(ts, self.cpu, rec) {
                Some(ev) => self.pending.push_back(ev),
                None => self
                    .stats
                    .skip(|| format!("record of an unknown event id in the page at byte {at}")),
            }
        }
        if recs.damaged {
            self.stats
                .skip(|| format!("damaged page at byte {at}: the rest of it was skipped"));
        }
        self.input.consume(self.page_size);
        true
    }
}

impl Source for RawCpuSource {
    fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                self.stats.events += 1;
                self.last_ts = ev.ts().or(self.last_ts);
                return Some(ev);
            }
            if !self.next_page() {
                return None;
            }
        }
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn format(&self) -> &'static str {
        "iosleuth capture (ring-buffer pages)"
    }
    fn stats(&self) -> &SourceStats {
        &self.stats
    }
}

//! Turns raw tracefs records into events by the kernel's `format` of their
//! event id: the decoder every binary source shares (capture directories,
//! trace.dat, perf.data's tracepoint samples, light captures' context
//! records). An event's kind and its fields' positions are decided here
//! once per format; each record is then read by them.

use super::tracefs_format::{read_int, read_str, EventFormat, Field, FieldKind, PageHeader};
use crate::model::capture_layout::is_address;
use crate::model::{
    Action, BlockEvent, Comm, Dev, Event, EventName, Extra, FieldName, Fields, Rwbs, StackEvent,
    TraceEvent, Value,
};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

static RECORDER_SELF: std::sync::LazyLock<EventName> =
    std::sync::LazyLock::new(|| EventName::new("iosleuth:recorder_itself".into()));

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
    /// Any other event: its name and kind, decided here once, and its
    /// fields; `addresses` when one of them holds a kernel address.
    Other {
        name: EventName,
        layout: Arc<[(FieldName, Field)]>,
        addresses: bool,
    },
    /// ftrace's `kernel_stack`: `size` return addresses from `caller`.
    Stack {
        size: Field,
        caller: Field,
    },
}

/// More frames than a kernel stack trace holds (`FTRACE_STACK_ENTRIES`,
/// 512 per CPU context); a larger `size` is a damaged record.
const MAX_STACK_FRAMES: usize = 512;

/// Turns raw records into events, by the format of their event id.
#[derive(Debug)]
pub struct Decoder {
    kinds: FxHashMap<u16, Kind>,
    common_type: Field,
    common_pid: Field,
    common_flags: Option<Field>,
    /// Threads of the recorder itself: their events in process context are
    /// the recording's own footprint, not the workload's.
    pub(super) skip_tids: FxHashSet<u32>,
    /// Events that describe the CPU rather than what a thread did (a
    /// switch, a wakeup, an interrupt): kept for the recorder's threads
    /// too, or the scheduler analysis would lose who ran on a CPU.
    scheduling: FxHashSet<u16>,
    /// Names of kernel addresses (work functions, stack frames), from
    /// `symbols.json`.
    pub(super) symbols: FxHashMap<u64, Arc<str>>,
    /// Stacks decoded so far, by their return addresses: a workload
    /// blocks in the same few stacks again and again, which then cost no
    /// allocation and are stored once. Shared by the per-CPU sources.
    stacks: std::sync::Mutex<StacksByAddress>,
    pub page: PageHeader,
}

/// A stack's frames by its return addresses (the record's bytes).
type StacksByAddress = FxHashMap<Box<[u8]>, Arc<[Arc<str>]>>;

/// At most this many distinct stacks are remembered (each about 100
/// bytes and its frames); those after are decoded each time.
const STACKS_REMEMBERED: usize = 1 << 16;

impl Decoder {
    pub fn new(formats: &[EventFormat], page: PageHeader) -> Decoder {
        let mut kinds = FxHashMap::default();
        let mut scheduling = FxHashSet::default();
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
            let stack = (f.system == "ftrace" && f.name == "kernel_stack")
                .then(|| Some((f.field("size")?.clone(), f.field("caller")?.clone())))
                .flatten();
            let kind = match (action, stack) {
                (_, Some((size, caller))) => Kind::Stack { size, caller },
                (Some(a), None) => {
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
                (None, None) => {
                    let layout: Arc<[(FieldName, Field)]> = f
                        .fields
                        .iter()
                        .filter(|x| !x.name.starts_with("common_") && x.kind != FieldKind::Array)
                        .map(|x| (FieldName::from(x.name.as_str()), x.clone()))
                        .collect();
                    Kind::Other {
                        name: EventName::new(format!("{}:{}", f.system, f.name).into()),
                        addresses: layout.iter().any(|(n, _)| is_address(n)),
                        layout,
                    }
                }
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
            symbols: FxHashMap::default(),
            stacks: Default::default(),
            page,
        }
    }

    /// A stack record's return addresses as names: the symbol's name and
    /// offset, or the address in hex where `symbols.json` has none. The
    /// record holds `size` of them, however many `caller[8]` says: the
    /// kernel sizes the record to the stack.
    fn frames(&self, rec: &[u8], size: &Field, caller: &Field) -> Arc<[Arc<str>]> {
        let n = (read_int(rec, size).unwrap_or(0) as usize).min(MAX_STACK_FRAMES);
        let word = 8;
        let from = caller.offset;
        let available = rec.len().saturating_sub(from) / word;
        let n = n.min(available);
        let addr = |i: usize| {
            let at = from + i * word;
            u64::from_le_bytes(rec[at..at + word].try_into().unwrap_or([0; 8]))
        };
        let name_all = || (0..n).map(|i| self.frame_name(addr(i))).collect();
        // Keyed by the record's own bytes of the addresses: nothing is
        // copied to look a stack up.
        let raw = rec.get(from..from + n * word).unwrap_or_default();
        let Ok(mut known) = self.stacks.lock() else {
            return name_all();
        };
        if let Some(f) = known.get(raw) {
            return f.clone();
        }
        let frames: Arc<[Arc<str>]> = name_all();
        if known.len() < STACKS_REMEMBERED {
            known.insert(raw.into(), frames.clone());
        }
        frames
    }

    /// A thread of the recorder itself (its samples are its own footprint).
    pub fn is_recorder(&self, tid: u32) -> bool {
        self.skip_tids.contains(&tid)
    }

    /// A kernel address's name from `symbols.json`, or the address in hex.
    pub fn frame_name(&self, addr: u64) -> Arc<str> {
        self.symbols
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| format!("{addr:#x}").into())
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
                return Some(Event::Trace(TraceEvent::named(
                    ts,
                    cpu,
                    pid,
                    &RECORDER_SELF,
                    Comm::default(),
                    Fields::default(),
                )));
            }
        }
        match self.kinds.get(&id)? {
            Kind::Other {
                name,
                layout,
                addresses,
            } => {
                let mut fields = decode_fields(rec, layout);
                if *addresses && !self.symbols.is_empty() {
                    for (k, v) in &mut fields.0 {
                        if let (true, Value::Int(a)) = (is_address(k), &*v) {
                            if let Some(n) = self.symbols.get(&(*a as u64)) {
                                *v = Value::Str((**n).into());
                            }
                        }
                    }
                }
                Some(Event::Trace(TraceEvent::named(
                    ts,
                    cpu,
                    pid,
                    name,
                    Comm::default(),
                    fields,
                )))
            }
            Kind::Stack { size, caller } => Some(Event::Stack(StackEvent {
                ts,
                cpu,
                pid,
                frames: self.frames(rec, size, caller),
                sampled: false,
                weight: 1,
                comm: Default::default(),
            })),
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
fn decode_fields(rec: &[u8], layout: &[(FieldName, Field)]) -> Fields {
    let mut out = Fields::with_capacity(layout.len());
    for (name, f) in layout {
        let v = match f.kind {
            FieldKind::Text => {
                // trace_marker text keeps the writer's newline.
                read_str(rec, f).map(|b| {
                    let b = b.strip_suffix(b"\n").unwrap_or(b);
                    // Task names are UTF-8 but for a damaged record: the
                    // check alone is cheaper than the lossy walk.
                    Value::Str(match std::str::from_utf8(b) {
                        Ok(s) => s.into(),
                        Err(_) => String::from_utf8_lossy(b).into(),
                    })
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

//! The typed, time-ordered event stream that every importer produces and
//! every analysis consumes, and the formats that more than one stage
//! shares: the system snapshot as the later stages read it (`snapshot`),
//! the files of a capture directory (`capture_layout`), blktrace's record
//! (`blktrace_record`).

pub mod blktrace_record;
pub mod block;
pub mod capture_layout;
pub mod event_sets;
pub mod fields;
pub mod function_brackets;
pub mod light;
pub mod log_linear;
pub mod manifest;
pub mod perf_record;
pub mod snapshot;
pub mod tracepoint;
pub mod units;

pub use block::{Action, BlockEvent, Comm, Dev, Extra, Rwbs};
pub use fields::{FieldName, Fields, Value};
pub use tracepoint::Tracepoint;

/// One event of any kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Block(BlockEvent),
    /// A process name learnt from the trace (blktrace `BLK_TN_PROCESS` notes).
    ProcessName {
        pid: u32,
        comm: Comm,
    },
    /// The process (thread group) of a thread, learnt from the trace:
    /// ftrace's `(tgid)` column, `perf script`'s `pid/tid`, perf's
    /// samples and COMM and FORK records. Comes before the thread's
    /// events that the source read it with, and again when it changes.
    ThreadGroup {
        tid: u32,
        tgid: u32,
    },
    /// A tracepoint's event (or a function's entry or return) with its
    /// fields by name; `kind` says which.
    Trace(TraceEvent),
    /// A kernel call chain the tracer wrote right after an event (the
    /// `stacktrace` trigger, ftrace's `<stack trace>`).
    Stack(StackEvent),
}

impl Event {
    /// Timestamp in nanoseconds; `None` for events outside the timeline.
    pub fn ts(&self) -> Option<u64> {
        match self {
            Event::Block(b) => Some(b.ts),
            Event::Trace(o) => Some(o.ts),
            Event::Stack(k) => Some(k.ts),
            Event::ProcessName { .. } | Event::ThreadGroup { .. } => None,
        }
    }

    /// The CPU the event happened on; `None` for events outside the timeline.
    pub fn cpu(&self) -> Option<u32> {
        match self {
            Event::Block(b) => Some(b.cpu),
            Event::Trace(o) => Some(o.cpu),
            Event::Stack(k) => Some(k.cpu),
            Event::ProcessName { .. } | Event::ThreadGroup { .. } => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    pub ts: u64,
    pub cpu: u32,
    pub pid: u32,
    /// Event name as the source printed it, e.g. `ext4_sync_file_enter` or
    /// `sched:sched_switch`.
    pub name: std::sync::Arc<str>,
    /// Where `name` without its system begins, found once by
    /// `TraceEvent::new`.
    short_at: u32,
    /// Which tracepoint it is, decided once from the name.
    pub kind: Tracepoint,
    /// The task's name where the source prints it (text headers).
    pub comm: Comm,
    pub fields: Fields,
}

/// A kernel stack: the task it was taken in and its frames, innermost
/// first, as names (`[unknown]` where no symbol was known).
#[derive(Clone, Debug, PartialEq)]
pub struct StackEvent {
    pub ts: u64,
    pub cpu: u32,
    pub pid: u32,
    pub frames: std::sync::Arc<[std::sync::Arc<str>]>,
    /// An on-CPU sample (perf_event_open) rather than a stack the tracer
    /// wrote after an event (the thread was then switching away).
    pub sampled: bool,
    /// What a sample weighs: its period where the source gives one (perf
    /// script: CPU-clock ns, cycles), else 1.
    pub weight: u64,
    /// The task's name where the source prints it (perf script).
    pub comm: Comm,
}

/// An event's name and what is decided from it (its short name, its
/// kind): once per format or distinct name, not once per event.
#[derive(Clone, Debug)]
pub struct EventName {
    name: std::sync::Arc<str>,
    short_at: u32,
    kind: Tracepoint,
}

impl EventName {
    pub fn new(name: std::sync::Arc<str>) -> EventName {
        let short = fields::short_name(&name);
        let kind = Tracepoint::of(short);
        let short_at = (name.len() - short.len()) as u32;
        EventName {
            name,
            short_at,
            kind,
        }
    }
}

impl TraceEvent {
    pub fn new(
        ts: u64,
        cpu: u32,
        pid: u32,
        name: std::sync::Arc<str>,
        comm: Comm,
        fields: Fields,
    ) -> TraceEvent {
        TraceEvent::named(ts, cpu, pid, &EventName::new(name), comm, fields)
    }

    /// An event of a name decided before (`EventName::new`).
    pub fn named(
        ts: u64,
        cpu: u32,
        pid: u32,
        name: &EventName,
        comm: Comm,
        fields: Fields,
    ) -> TraceEvent {
        TraceEvent {
            ts,
            cpu,
            pid,
            name: name.name.clone(),
            short_at: name.short_at,
            kind: name.kind,
            comm,
            fields,
        }
    }

    /// The name without its system (`sched_switch`).
    pub fn short_name(&self) -> &str {
        self.name
            .get(self.short_at as usize..)
            .unwrap_or(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::{Comm, Fields, TraceEvent};

    #[test]
    fn the_short_name_is_found_once_and_agrees_with_the_scan() {
        for name in [
            "sched:sched_switch",
            "sys_enter_write",
            "a:b:c",
            ":",
            "",
            "x:",
        ] {
            let e = TraceEvent::new(1, 0, 1, name.into(), Comm::default(), Fields::default());
            assert_eq!(e.short_name(), super::fields::short_name(name), "{name}");
        }
        let e = TraceEvent::new(
            1,
            0,
            1,
            "block:block_rq_issue".into(),
            Comm::default(),
            Fields::default(),
        );
        assert_eq!(e.short_name(), "block_rq_issue");
        assert_eq!(e.kind, super::Tracepoint::Other);
        let e = TraceEvent::new(
            1,
            0,
            1,
            "sched:sched_switch".into(),
            Comm::default(),
            Fields::default(),
        );
        assert_eq!(e.kind, super::Tracepoint::SchedSwitch);
    }
}

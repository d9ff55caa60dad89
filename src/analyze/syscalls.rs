//! Syscall latency from `sys_enter_*`/`sys_exit_*` pairs per thread (like
//! bcc's funclatency on a syscall), and the probes' own operations from
//! their `trace_marker` marks (`iosleuth: OP N begin` … `end NS`).
//! Memory: one pending call per thread, fixed-size histograms per name.

use super::histogram::{LatencyDist, Log2Hist, Percentiles};
use super::names::ThreadNames;
use super::top::{keep_largest, qualifies};
use crate::model::tracepoint::syscall_of;
use crate::model::tracepoint::Field;
use crate::model::{TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

const SLOWEST_KEPT: usize = 10;

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    pub pid: u32,
    pub comm: String,
    pub start_ns: u64,
    pub latency_ns: u64,
    /// The return value (syscalls); absent for probe operations.
    pub ret: Option<i64>,
}

#[derive(Clone, Debug, Serialize, Default)]
pub struct CallStats {
    pub count: u64,
    pub total_ns: u64,
    /// Latency in µs, as bcc prints it.
    pub hist_us: Log2Hist,
    pub latency: Option<Percentiles>,
    #[serde(skip)]
    dist: LatencyDist,
}

impl CallStats {
    /// Fills `latency` from the distribution, at the end.
    pub(crate) fn summarize(&mut self) {
        self.latency = (self.dist.count() > 0).then(|| self.dist.summary());
    }

    /// Stats from a histogram kept elsewhere (a light capture's): `n`
    /// timed, their sum, the log2 µs view, the distribution summarized.
    pub(crate) fn from_dist(n: u64, total_ns: u64, hist_us: Log2Hist, dist: LatencyDist) -> Self {
        let mut s = CallStats {
            count: n,
            total_ns,
            hist_us,
            latency: None,
            dist,
        };
        s.summarize();
        s
    }

    pub(crate) fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns += ns;
        self.hist_us.add(ns / 1000);
        self.dist.add(ns);
    }
}

#[derive(Debug, Serialize, Default)]
pub struct SyscallSummary {
    /// By syscall name (`fsync`, `pwrite64`, …).
    pub by_name: BTreeMap<String, CallStats>,
    /// By process and syscall: `comm (pid)` → name → stats.
    pub by_process: BTreeMap<String, BTreeMap<String, CallStats>>,
    /// Probe operations (`fsync`, `read`, …) timed by their marks.
    pub operations: BTreeMap<String, CallStats>,
    /// The slowest calls and operations, slowest first.
    pub slowest: Vec<Call>,
    /// Exits without an entry (the trace began inside the call).
    pub unmatched_exits: u64,
    /// `by_name`, `operations` and `slowest` hold only the recorded
    /// command's processes and threads (the trace followed its forks), as
    /// the operations do; `by_process` holds every process.
    pub recorded_command_only: bool,
}

#[derive(Default)]
pub struct SyscallAnalysis {
    /// Per thread: the call in progress (its event's name, where the
    /// call's name begins in it, start): the name shared, not copied.
    pending: FxHashMap<u32, (std::sync::Arc<str>, usize, u64)>,
    /// Per thread: probe operations begun (`op n` → start), and the key
    /// of the mark at hand (made here, not allocated per mark).
    marks: FxHashMap<u32, FxHashMap<Box<str>, u64>>,
    mark_key: String,
    /// Per thread id; named at the end, when every name is known.
    by_pid: FxHashMap<u32, Calls>,
    /// The workload's calls and probe operations by name, sorted into
    /// the summary at the end.
    by_name: Calls,
    operations: Calls,
    /// The recorded command's processes and threads, followed through
    /// their forks, when known: only their calls are the workload's (by
    /// name, the slowest), as the operations are (`outliers`); `by_process`
    /// still lists every process.
    workload: crate::analyze::command::RecordedCommand,
    out: SyscallSummary,
}

impl SyscallAnalysis {
    pub fn new() -> SyscallAnalysis {
        SyscallAnalysis::default()
    }

    /// The recorded command's process (`None`: every thread's calls).
    pub fn with_workload(mut self, root: Option<u32>) -> Self {
        self.workload = crate::analyze::command::RecordedCommand::rooted_at(root);
        self
    }

    /// Feeds one event; returns false for events this analysis ignores.
    /// Inlined: most events are not syscalls', and a call to say so cost
    /// more than the question.
    #[inline]
    pub fn add(&mut self, e: &TraceEvent, names: &ThreadNames) -> bool {
        matches!(
            e.kind,
            Tracepoint::SchedProcessFork
                | Tracepoint::SysEnter
                | Tracepoint::SysExit
                | Tracepoint::Print
        ) && self.call_event(e, names)
    }

    /// One of the kinds `add` lets through.
    #[inline(never)]
    fn call_event(&mut self, e: &TraceEvent, names: &ThreadNames) -> bool {
        if e.kind == Tracepoint::SchedProcessFork {
            self.workload.fork(e);
            // The scheduler analysis uses it too.
            return false;
        }
        let name = || syscall_of(e.short_name()).unwrap_or_default();
        if e.kind == Tracepoint::SysEnter {
            // The call's name is the end of the event's.
            let at = e.name.len() - name().len();
            self.pending.insert(e.pid, (e.name.clone(), at, e.ts));
            return true;
        }
        if e.kind == Tracepoint::SysExit {
            let name = name();
            match self.pending.remove(&e.pid) {
                Some((n, at, start)) if &n[at..] == name && e.ts >= start => {
                    let ret = e.fields.int(Field::Ret);
                    self.record(name, e.pid, names, start, e.ts - start, ret, false);
                }
                _ => self.out.unmatched_exits += 1,
            }
            return true;
        }
        if e.kind == Tracepoint::Print {
            if let Some(buf) = e.fields.str(Field::Buf) {
                self.mark(e, names, buf.trim_end());
            }
            return true;
        }
        false
    }

    /// `iosleuth: fsync 3 begin` / `iosleuth: fsync 3 end 1234`.
    fn mark(&mut self, e: &TraceEvent, names: &ThreadNames, text: &str) {
        let Some(rest) = text.strip_prefix("iosleuth: ") else {
            return;
        };
        let mut w = rest.split_whitespace();
        let (Some(op), Some(n), Some(what)) = (w.next(), w.next(), w.next()) else {
            return;
        };
        let key = &mut self.mark_key;
        key.clear();
        key.push_str(op);
        key.push(' ');
        key.push_str(n);
        match what {
            "begin" => {
                let marks = self.marks.entry(e.pid).or_default();
                match marks.get_mut(key.as_str()) {
                    Some(t) => *t = e.ts,
                    None => {
                        marks.insert(key.as_str().into(), e.ts);
                    }
                }
            }
            "end" => {
                let begun = self.marks.get_mut(&e.pid);
                if let Some(start) = begun.and_then(|m| m.remove(key.as_str())) {
                    let ns = e.ts.saturating_sub(start);
                    self.record(op, e.pid, names, start, ns, None, true);
                }
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        name: &str,
        pid: u32,
        names: &ThreadNames,
        start: u64,
        ns: u64,
        ret: Option<i64>,
        op: bool,
    ) {
        if !names.keeps(pid) {
            return;
        }
        if !op {
            self.by_pid.entry(pid).or_default().add(name, ns);
        }
        if !self.workload.holds(pid) {
            return;
        }
        let table = if op {
            &mut self.operations
        } else {
            &mut self.by_name
        };
        table.add(name, ns);
        let slow = &mut self.out.slowest;
        if qualifies(slow, SLOWEST_KEPT, ns, |c| c.latency_ns) {
            let comm = names.get(pid);
            let call = Call {
                name: if op {
                    format!("probe {name}")
                } else {
                    name.to_string()
                },
                pid,
                comm,
                start_ns: start,
                latency_ns: ns,
                ret,
            };
            keep_largest(slow, call, SLOWEST_KEPT, |c| c.latency_ns, |c| c.start_ns);
        }
    }

    pub fn finish(mut self, names: &ThreadNames) -> SyscallSummary {
        self.out.recorded_command_only = self.workload.known();
        for (pid, calls) in self.by_pid.drain() {
            self.out
                .by_process
                .insert(names.process(pid), calls.sorted());
        }
        self.out.by_name = std::mem::take(&mut self.by_name).sorted();
        self.out.operations = std::mem::take(&mut self.operations).sorted();
        for c in &mut self.out.slowest {
            if c.comm.is_empty() {
                c.comm = names.get(c.pid);
            }
        }
        for s in self
            .out
            .by_name
            .values_mut()
            .chain(self.out.operations.values_mut())
            .chain(
                self.out
                    .by_process
                    .values_mut()
                    .flat_map(|m| m.values_mut()),
            )
        {
            s.summarize();
        }
        self.out
    }
}

/// Calls by name while the trace is read (a hash, not a sorted map: one
/// lookup per call), sorted by name at the end.
#[derive(Default)]
struct Calls(FxHashMap<Box<str>, CallStats>);

impl Calls {
    /// Adds a call of `name` to its row, naming a new row only.
    fn add(&mut self, name: &str, ns: u64) {
        match self.0.get_mut(name) {
            Some(s) => s.add(ns),
            None => self.0.entry(name.into()).or_default().add(ns),
        }
    }

    fn sorted(self) -> BTreeMap<String, CallStats> {
        self.0.into_iter().map(|(k, v)| (k.into(), v)).collect()
    }
}

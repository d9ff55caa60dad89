//! Gaps: the longest stretches without any event, per CPU and per thread.
//! The measured eMMC stall was found this way: 184 ms of silence on CPU 0 between an
//! I/O issue and its completion. Memory: the last event of each CPU and
//! thread, a few gaps each.

use super::top::{keep_largest, qualifies};
use crate::model::Action;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

const PER_CPU: usize = 3;
const THREADS: usize = 10;

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Gap {
    pub start_ns: u64,
    pub gap_ns: u64,
    /// The events on either side.
    pub before: String,
    pub after: String,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct ThreadGap {
    pub pid: u32,
    pub comm: String,
    pub gap: Gap,
}

#[derive(Debug, Serialize, Default)]
pub struct GapsSummary {
    /// Per CPU, its longest gaps, longest first.
    pub cpus: BTreeMap<u32, Vec<Gap>>,
    /// The threads with the longest gap between two of their own events,
    /// longest first (each thread once).
    pub threads: Vec<ThreadGap>,
}

/// An event's name, made into text only for the gaps kept.
#[derive(Clone)]
pub enum EventName {
    Named(Arc<str>),
    Block(Action),
}

impl EventName {
    /// The same name (the same interned string, or the same block action).
    fn same(&self, other: &EventName) -> bool {
        match (self, other) {
            (EventName::Named(a), EventName::Named(b)) => Arc::ptr_eq(a, b),
            (EventName::Block(a), EventName::Block(b)) => a == b,
            _ => false,
        }
    }
}

impl Gap {
    /// The gap of `gap_ns` from `start_ns`, between two events' names.
    fn between(start_ns: u64, gap_ns: u64, before: &EventName, after: &EventName) -> Gap {
        Gap {
            start_ns,
            gap_ns,
            before: before.to_string(),
            after: after.to_string(),
        }
    }
}

/// A CPU's gap from `last` to `ts` into its longest few (it qualified).
#[cold]
#[inline(never)]
fn keep_cpu_gap(gaps: &mut Vec<Gap>, last: u64, ts: u64, before: &EventName, after: &EventName) {
    let gap = Gap::between(last, ts - last, before, after);
    keep_largest(gaps, gap, PER_CPU, |g| g.gap_ns, |g| g.start_ns);
}

/// A thread's new longest gap: from its last event to `after`.
#[cold]
#[inline(never)]
fn keep_thread_gap(
    max: &mut FxHashMap<u32, Gap>,
    pid: u32,
    last: &ThreadLast,
    gap_ns: u64,
    after: &EventName,
) {
    max.insert(pid, Gap::between(last.ts, gap_ns, &last.name, after));
}

impl std::fmt::Display for EventName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventName::Named(n) => f.write_str(n),
            EventName::Block(a) => write!(f, "block {}", a.letter()),
        }
    }
}

/// A CPU's last event and its longest gaps so far.
#[derive(Default)]
struct CpuGaps {
    last: Option<(u64, EventName)>,
    gaps: Vec<Gap>,
}

/// A thread's last event and the length of its longest gap so far (the
/// gap itself is in `thread_max`): one lookup per event, not three.
struct ThreadLast {
    ts: u64,
    name: EventName,
    longest: u64,
}

/// CPUs are indexed directly up to this; a larger number (a corrupt
/// record) goes to a map.
const DIRECT_CPUS: u32 = 1024;

#[derive(Default)]
pub struct GapAnalysis {
    cpus: Vec<CpuGaps>,
    other_cpus: FxHashMap<u32, CpuGaps>,
    thread_last: FxHashMap<u32, ThreadLast>,
    thread_max: FxHashMap<u32, Gap>,
}

impl GapAnalysis {
    pub fn new() -> Self {
        Self::default()
    }

    fn cpu(&mut self, cpu: u32) -> &mut CpuGaps {
        if cpu < DIRECT_CPUS {
            let i = cpu as usize;
            if self.cpus.len() <= i {
                self.cpus.resize_with(i + 1, CpuGaps::default);
            }
            &mut self.cpus[i]
        } else {
            self.other_cpus.entry(cpu).or_default()
        }
    }

    /// One event: runs for every event of a trace, so the gaps that
    /// qualify are built out of line and a name is not cloned again while
    /// a CPU's events keep it.
    pub fn add(&mut self, ts: u64, cpu: u32, pid: u32, name: EventName) {
        let c = self.cpu(cpu);
        match &mut c.last {
            Some((last, before)) => {
                if ts > *last && qualifies(&c.gaps, PER_CPU, ts - *last, |g| g.gap_ns) {
                    keep_cpu_gap(&mut c.gaps, *last, ts, before, &name);
                }
                *last = ts;
                if !before.same(&name) {
                    *before = name.clone();
                }
            }
            None => c.last = Some((ts, name.clone())),
        }
        if pid == 0 {
            return;
        }
        match self.thread_last.get_mut(&pid) {
            Some(t) => {
                let gap = ts.saturating_sub(t.ts);
                if gap > t.longest {
                    t.longest = gap;
                    keep_thread_gap(&mut self.thread_max, pid, t, gap, &name);
                }
                t.ts = ts;
                t.name = name;
            }
            None => {
                self.thread_last.insert(
                    pid,
                    ThreadLast {
                        ts,
                        name,
                        longest: 0,
                    },
                );
            }
        }
    }

    pub fn finish(self, names: &super::names::ThreadNames) -> GapsSummary {
        let mut threads: Vec<ThreadGap> = self
            .thread_max
            .into_iter()
            .filter(|(pid, _)| names.keeps(*pid))
            .map(|(pid, gap)| ThreadGap {
                pid,
                comm: names.get(pid),
                gap,
            })
            .collect();
        threads.sort_by(|a, b| b.gap.gap_ns.cmp(&a.gap.gap_ns).then(a.pid.cmp(&b.pid)));
        threads.truncate(THREADS);
        let cpus = self
            .cpus
            .into_iter()
            .enumerate()
            .map(|(i, c)| (i as u32, c))
            .chain(self.other_cpus)
            .filter(|(_, c)| !c.gaps.is_empty())
            .map(|(i, c)| (i, c.gaps))
            .collect();
        GapsSummary { cpus, threads }
    }
}

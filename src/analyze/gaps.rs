//! Gaps: the longest stretches without any event, per CPU and per thread.
//! Case 4 found its spike this way: 184 ms of silence on CPU 0 between an
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

impl std::fmt::Display for EventName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventName::Named(n) => f.write_str(n),
            EventName::Block(a) => write!(f, "block {}", a.letter()),
        }
    }
}

#[derive(Default)]
pub struct GapAnalysis {
    cpu_last: FxHashMap<u32, (u64, EventName)>,
    cpu_gaps: FxHashMap<u32, Vec<Gap>>,
    thread_last: FxHashMap<u32, (u64, EventName)>,
    thread_max: FxHashMap<u32, Gap>,
}

impl GapAnalysis {
    pub fn new() -> GapAnalysis {
        GapAnalysis::default()
    }

    /// Any event: its time, CPU, thread (0 for the idle task) and name.
    pub fn add(&mut self, ts: u64, cpu: u32, pid: u32, name: EventName) {
        if let Some((last, before)) = self.cpu_last.insert(cpu, (ts, name.clone())) {
            if ts > last {
                let list = self.cpu_gaps.entry(cpu).or_default();
                if qualifies(list, PER_CPU, ts - last, |g| g.gap_ns) {
                    let gap = Gap {
                        start_ns: last,
                        gap_ns: ts - last,
                        before: before.to_string(),
                        after: name.to_string(),
                    };
                    keep_largest(list, gap, PER_CPU, |g| g.gap_ns, |g| g.start_ns);
                }
            }
        }
        if pid == 0 {
            return;
        }
        if let Some((last, before)) = self.thread_last.insert(pid, (ts, name.clone())) {
            let gap = ts.saturating_sub(last);
            if gap > self.thread_max.get(&pid).map_or(0, |g| g.gap_ns) {
                self.thread_max.insert(
                    pid,
                    Gap {
                        start_ns: last,
                        gap_ns: gap,
                        before: before.to_string(),
                        after: name.to_string(),
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
        GapsSummary {
            cpus: self.cpu_gaps.into_iter().collect(),
            threads,
        }
    }
}

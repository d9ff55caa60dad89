//! Workqueues: which work functions the kworkers ran, how often, for how
//! long, and how long each waited from being queued to starting (a delayed
//! kworker shows here). Memory: one entry per work item in flight, one row
//! per function.

use super::histogram::{LatencyDist, Percentiles};
use super::names::ThreadNames;
use crate::model::tracepoint::Field;
use crate::model::{TraceEvent, Tracepoint, Value};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, Serialize, Clone)]
pub struct WorkFunction {
    /// The function's name (from the capture's symbols or the text), or
    /// its address.
    pub function: String,
    pub runs: u64,
    pub run_time_ns: u64,
    pub max_run_ns: u64,
    /// Queued → started.
    pub wait: Option<Percentiles>,
    /// The worker threads that ran it, `comm (pid)`.
    pub workers: Vec<String>,
}

#[derive(Debug, Serialize, Default)]
pub struct WorkqueueSummary {
    /// By total run time, longest first.
    pub functions: Vec<WorkFunction>,
}

#[derive(Default)]
struct Row {
    runs: u64,
    run_time_ns: u64,
    max_run_ns: u64,
    wait: LatencyDist,
    workers: BTreeSet<u32>,
}

#[derive(Default)]
pub struct WorkqueueAnalysis {
    /// A row per function, found by its name (or, for an address, by the
    /// address first: named once, not at every run).
    rows: Vec<(String, Row)>,
    by_name: FxHashMap<Box<str>, usize>,
    by_addr: FxHashMap<i64, usize>,
    /// Work item → when queued.
    queued: FxHashMap<i64, u64>,
    /// Worker → (its function's row, started).
    running: FxHashMap<u32, (usize, u64)>,
}

impl WorkqueueAnalysis {
    pub fn new() -> WorkqueueAnalysis {
        WorkqueueAnalysis::default()
    }

    /// The row of the function an event names (its name, or its address
    /// printed in hex).
    fn row_of(&mut self, e: &TraceEvent) -> Option<usize> {
        let named =
            |rows: &mut Vec<(String, Row)>, ids: &mut FxHashMap<Box<str>, usize>, s: &str| {
                if let Some(&i) = ids.get(s) {
                    return i;
                }
                rows.push((s.to_string(), Row::default()));
                ids.insert(s.into(), rows.len() - 1);
                rows.len() - 1
            };
        Some(match e.fields.get(Field::Function)? {
            Value::Str(s) => named(&mut self.rows, &mut self.by_name, s),
            Value::Int(a) => match self.by_addr.get(a) {
                Some(&i) => i,
                None => {
                    let i = named(
                        &mut self.rows,
                        &mut self.by_name,
                        &format!("{:#x}", *a as u64),
                    );
                    self.by_addr.insert(*a, i);
                    i
                }
            },
        })
    }

    /// Inlined: most events are not the workqueues', and a call to say
    /// so cost more than the question.
    #[inline]
    pub fn add(&mut self, e: &TraceEvent) -> bool {
        e.kind.is_workqueue() && self.work_event(e)
    }

    /// One of the kinds `add` lets through.
    #[inline(never)]
    fn work_event(&mut self, e: &TraceEvent) -> bool {
        // `work=` in captures; `work struct=c63c21ac` (hex, no 0x) in old text.
        // Read only for the events that have it: read before the match, it
        // cost every event of every kind two field searches.
        let work = || {
            e.fields.int(Field::Work).or_else(|| {
                let s = e.fields.str(Field::Struct)?;
                u64::from_str_radix(s.trim_start_matches("0x"), 16)
                    .ok()
                    .map(|v| v as i64)
            })
        };
        match e.kind {
            Tracepoint::WorkqueueQueueWork => {
                if let Some(w) = work() {
                    self.queued.insert(w, e.ts);
                }
            }
            Tracepoint::WorkqueueExecuteStart => {
                let Some(f) = self.row_of(e) else {
                    return true;
                };
                let waited = work().and_then(|w| self.queued.remove(&w));
                let row = &mut self.rows[f].1;
                row.runs += 1;
                row.workers.insert(e.pid);
                if let Some(q) = waited {
                    row.wait.add(e.ts.saturating_sub(q));
                }
                self.running.insert(e.pid, (f, e.ts));
            }
            Tracepoint::WorkqueueExecuteEnd => {
                if let Some((f, start)) = self.running.remove(&e.pid) {
                    let ns = e.ts.saturating_sub(start);
                    let row = &mut self.rows[f].1;
                    row.run_time_ns += ns;
                    row.max_run_ns = row.max_run_ns.max(ns);
                }
            }
            Tracepoint::WorkqueueActivateWork => {}
            _ => return false,
        }
        true
    }

    pub fn finish(self, names: &ThreadNames) -> WorkqueueSummary {
        let mut functions: Vec<WorkFunction> = self
            .rows
            .into_iter()
            .map(|(function, r)| WorkFunction {
                function,
                runs: r.runs,
                run_time_ns: r.run_time_ns,
                max_run_ns: r.max_run_ns,
                wait: (r.wait.count() > 0).then(|| r.wait.summary()),
                workers: r.workers.into_iter().map(|p| names.process(p)).collect(),
            })
            .collect();
        functions.sort_by(|a, b| {
            b.run_time_ns
                .cmp(&a.run_time_ns)
                .then(b.runs.cmp(&a.runs))
                .then(a.function.cmp(&b.function))
        });
        WorkqueueSummary { functions }
    }
}

//! Cgroup I/O throttling (blk-throttle): a bio over its cgroup's limit is
//! held and later submitted by the `kthrotld` workqueue, so its Q event
//! comes from a kworker running `blk_throtl_dispatch_work_fn`. Counting
//! those bios per device measures what the limit held back.

use crate::model::tracepoint::Field;
use crate::model::{Action, BlockEvent, TraceEvent, Tracepoint};
use rustc_hash::FxHashSet;
use serde::Serialize;
use std::collections::BTreeMap;

const DISPATCH_FN: &str = "blk_throtl_dispatch_work_fn";

#[derive(Debug, Serialize, Default, Clone)]
pub struct ThrottledDevice {
    pub bios: u64,
    pub bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

#[derive(Debug, Serialize, Default)]
pub struct ThrottleSummary {
    /// Runs of the dispatch work seen (0 when the workqueue set was not
    /// recorded: then nothing can be told).
    pub dispatch_runs: u64,
    pub devices: BTreeMap<String, ThrottledDevice>,
}

#[derive(Default)]
pub struct ThrottleAnalysis {
    out: ThrottleSummary,
    /// Workers running the dispatch work now.
    dispatching: FxHashSet<u32>,
}

impl ThrottleAnalysis {
    pub fn new() -> ThrottleAnalysis {
        ThrottleAnalysis::default()
    }

    /// Work starts and ends (the workqueue analysis uses them too).
    pub fn add(&mut self, e: &TraceEvent) {
        let start = match e.kind {
            Tracepoint::WorkqueueExecuteStart => true,
            Tracepoint::WorkqueueExecuteEnd => false,
            _ => return,
        };
        let is_dispatch = e.fields.str(Field::Function) == Some(DISPATCH_FN);
        if start && is_dispatch {
            self.out.dispatch_runs += 1;
            self.dispatching.insert(e.pid);
        } else {
            self.dispatching.remove(&e.pid);
        }
    }

    /// Only bios the dispatch work queues: no per-event cost otherwise
    /// (the check inlined where every block event passes).
    #[inline]
    pub fn block(&mut self, b: &BlockEvent) {
        if b.action == Action::Queue && !self.dispatching.is_empty() {
            self.queued(b);
        }
    }

    fn queued(&mut self, b: &BlockEvent) {
        if !self.dispatching.contains(&b.pid) {
            return;
        }
        let d = self.out.devices.entry(b.dev.to_string()).or_default();
        if d.bios == 0 {
            d.first_ns = b.ts;
        }
        d.last_ns = b.ts;
        d.bios += 1;
        d.bytes += b.bytes as u64;
        if b.rwbs.is_write() {
            d.writes += 1;
        } else {
            d.reads += 1;
        }
    }

    pub fn finish(self) -> ThrottleSummary {
        self.out
    }
}

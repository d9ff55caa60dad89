//! Outliers explained: for the slowest operations (probe operations,
//! syscalls, fsyncs inside the filesystem), where their time went, as parts
//! that add up to the whole: on CPU; runnable, waiting for a CPU (and who
//! held it); blocked while the device worked on a request (by what the
//! request was: journal write, data write, flush, read); blocked while
//! requests waited in the queue; blocked while the journal committed;
//! blocked on something else. And how long the CPU sat idle meanwhile.
//!
//! Streaming: the state of the world (thread states from the scheduler
//! analysis, requests in flight, commits in flight) is piecewise constant
//! between events, so each open operation integrates it lazily, at events
//! that change it. Memory: the operations open now and the requests in
//! flight; the N slowest per kind are kept with their breakdown.
//!
//! The pieces:
//! - `touch`: which open operations an event may concern;
//! - `op`: one open operation's state, and `integrate`, which classifies a
//!   stretch of its time;
//! - `inflight`: requests in flight per device, and what waiting on a
//!   device means at a moment (`DevView`);
//! - `boundaries`: operations beginning and ending, journal commits and
//!   checkpoints;
//! - `explain`: an ended operation as an `Outlier` with its summary line;
//! - `summary`: the reported types and the arithmetic on breakdowns;
//! - `workload`: the workload's time, which findings take shares of;
//! - here: the analysis' state and the hooks around each event (`before`,
//!   `after_block`, `after`) that integrate the operations it touches.

mod boundaries;
mod explain;
mod inflight;
mod op;
mod summary;
mod touch;
mod workload;

pub use summary::{
    add_breakdown, describe_part, Breakdown, Holder, KindTotal, Outlier, OutliersSummary, Request,
};
pub use touch::{touch_of, touch_of_block, Touch};
pub use workload::{workload_kinds, workload_time, WorkloadTime};

use super::names::ThreadNames;
use super::sched::{SchedAnalysis, ThreadView};
use crate::model::Dev;
use inflight::{DevState, DevView, InFlight, ReqKey};
use op::{integrate, OpenOp};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use summary::percentages;
use touch::touched;

/// The streaming state: open operations, requests and commits in flight,
/// and what has been kept of the operations that ended.
#[derive(Default)]
pub struct OutlierAnalysis {
    top: usize,
    open: Vec<OpenOp>,
    /// Before a block event: the views of the devices blocked operations
    /// wait on, to see afterwards whether the event changed them.
    pending_views: Vec<(Option<Dev>, DevView)>,
    queued: FxHashMap<ReqKey, InFlight>,
    /// Per device: requests queued (not issued), and the issued ones by
    /// issue time (the oldest is the one a waiter waits for).
    devs: FxHashMap<Dev, DevState>,
    commits: FxHashMap<Dev, u32>,
    /// Threads checkpointing a journal (from `jbd2_checkpoint` to the end
    /// of their syscall): others on that device wait for journal space.
    checkpointing: FxHashMap<u32, Dev>,
    totals: BTreeMap<String, KindTotal>,
    /// Completed requests still referenced by open operations, by key and
    /// issue time: flushes all sit at sector 0, one after another.
    done: FxHashMap<(ReqKey, u64), (InFlight, u64)>,
    by_kind: BTreeMap<String, Vec<Outlier>>,
    rows: Option<std::sync::mpsc::SyncSender<super::rows::OperationRow>>,
}

impl OutlierAnalysis {
    pub fn new(top: usize) -> OutlierAnalysis {
        OutlierAnalysis {
            top,
            ..Default::default()
        }
    }

    /// Sends every operation that ends to `sink` (exports).
    pub fn with_rows(
        mut self,
        sink: Option<std::sync::mpsc::SyncSender<super::rows::OperationRow>>,
    ) -> Self {
        self.rows = sink;
        self
    }

    /// Before an event that may change the situation of some operations:
    /// brings those up to `ts`, with the situation that held until now.
    pub fn before(&mut self, ts: u64, t: &Touch) {
        if self.open.is_empty() {
            return;
        }
        if let Touch::Device(_) = t {
            // Most block events leave the oldest request at the device as
            // it was: remember the views, integrate only if they change.
            self.pending_views.clear();
            for i in 0..self.open.len() {
                let dev = self.open[i].dev;
                if touched(&self.open[i], t) && !self.pending_views.iter().any(|(d, _)| *d == dev) {
                    let v = self.dev_view(dev);
                    self.pending_views.push((dev, v));
                }
            }
            return;
        }
        let mut views: Vec<(Option<Dev>, DevView)> = Vec::new();
        for i in 0..self.open.len() {
            if !touched(&self.open[i], t) {
                continue;
            }
            let dev = self.open[i].dev;
            let view = match views.iter().find(|(d, _)| *d == dev) {
                Some((_, v)) => *v,
                None => {
                    let v = self.dev_view(dev);
                    views.push((dev, v));
                    v
                }
            };
            integrate(&mut self.open[i], ts, &view);
        }
    }

    /// After a block event: the blocked operations whose device view it
    /// changed are integrated up to it, with the view that held until now.
    pub fn after_block(&mut self, ts: u64) {
        for i in 0..self.pending_views.len() {
            let (dev, old) = self.pending_views[i];
            if self.dev_view(dev) == old {
                continue;
            }
            for op in self
                .open
                .iter_mut()
                .filter(|o| o.dev == dev && o.view == ThreadView::Off('D'))
            {
                integrate(op, ts, &old);
            }
        }
        self.pending_views.clear();
    }

    /// After the event: the touched operations learn their thread's new
    /// state.
    pub fn after(&mut self, t: &Touch, sched: &SchedAnalysis) {
        if let Touch::Threads { .. } = t {
            for op in self.open.iter_mut().filter(|o| touched(o, t)) {
                op.refresh(sched);
            }
        }
    }

    /// Integrates one operation (at its end).
    fn advance_one(&mut self, i: usize, ts: u64) {
        let view = self.dev_view(self.open[i].dev);
        integrate(&mut self.open[i], ts, &view);
    }

    pub fn finish(mut self, names: &ThreadNames) -> OutliersSummary {
        for t in self.totals.values_mut() {
            t.percent = percentages(&t.breakdown, t.latency_ns);
        }
        for o in self.by_kind.values_mut().flatten() {
            if o.comm.is_empty() {
                o.comm = names.get(o.pid);
            }
        }
        OutliersSummary {
            top: self.top,
            by_kind: self.by_kind,
            totals: self.totals,
        }
    }
}

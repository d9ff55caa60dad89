//! Analyses: consume the event stream once, produce plain data. They never
//! read files.

pub mod blkthrottle;
pub mod block;
pub mod fs;
pub mod gaps;
pub mod histogram;
pub mod irq;
pub mod names;
pub mod outliers;
pub mod readahead;
pub mod sched;
pub mod syscalls;
pub mod top;
pub mod wbt;
pub mod workqueue;

use crate::model::{Dev, Event};
use block::{BlockAnalysis, BlockConfig, BlockSummary};
use serde::Serialize;
use std::collections::BTreeMap;

/// What to look at.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub device: Option<Dev>,
    /// Inclusive time window, ns in the trace's clock.
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
    /// Outliers kept per kind.
    pub top: usize,
    /// Only these threads (by id or name) in the per-thread results.
    pub pids: Vec<u32>,
    pub comms: Vec<String>,
}

impl Filter {
    fn selects_threads(&self) -> bool {
        !self.pids.is_empty() || !self.comms.is_empty()
    }

    fn keeps_time(&self, ts: u64) -> bool {
        self.from_ns.is_none_or(|f| ts >= f) && self.to_ns.is_none_or(|t| ts <= t)
    }
}

#[derive(Debug, Serialize)]
pub struct InputSummary {
    pub path: String,
    pub format: String,
    pub events: u64,
    pub skipped: u64,
    pub lost_events: u64,
}

#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Span {
    pub first_ns: u64,
    pub last_ns: u64,
}

impl Span {
    fn add(&mut self, ts: u64) {
        if self.first_ns == 0 || ts < self.first_ns {
            self.first_ns = ts;
        }
        self.last_ns = self.last_ns.max(ts);
    }
}

/// The result of one analysis run, ready for any output format.
#[derive(Debug, Serialize)]
pub struct Analysis {
    pub inputs: Vec<InputSummary>,
    pub events: u64,
    /// First and last timestamp of the analysed events, ns.
    pub span: Span,
    pub block: BlockSummary,
    pub syscalls: syscalls::SyscallSummary,
    pub fs: fs::FsSummary,
    pub irq: irq::IrqSummary,
    pub gaps: gaps::GapsSummary,
    pub workqueue: workqueue::WorkqueueSummary,
    pub outliers: outliers::OutliersSummary,
    pub sched: sched::SchedSummary,
    pub wbt: wbt::WbtSummary,
    pub readahead: readahead::ReadaheadSummary,
    /// Bios held back by cgroup I/O limits.
    pub cgroup_throttle: blkthrottle::ThrottleSummary,
    /// Events iosleuth does not analyse yet, by name.
    pub unknown_events: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
    /// The system snapshot of a capture (`{before, workload, after}`), when
    /// the input carries one.
    pub snapshot: Option<crate::model::snapshot::Snapshot>,
}

/// Runs every analysis over a time-ordered stream of events.
pub fn analyze(
    events: impl Iterator<Item = Event>,
    filter: &Filter,
    block_cfg: BlockConfig,
) -> Analysis {
    analyze_with_names(events, filter, block_cfg, &[])
}

/// The same, knowing some threads' names beforehand (from a snapshot);
/// names the trace tells win. The inputs and what they could not read
/// are the caller's to add (`pipeline`): analyses never see files.
pub fn analyze_with_names(
    stream: impl Iterator<Item = Event>,
    filter: &Filter,
    block_cfg: BlockConfig,
    known: &[(u32, String)],
) -> Analysis {
    let mut cfg = block_cfg;
    if cfg.origin_ns.is_none() {
        cfg.origin_ns = filter.from_ns;
    }
    if cfg.end_ns.is_none() {
        cfg.end_ns = filter.to_ns;
    }
    let mut blk = BlockAnalysis::new(cfg);
    let mut unknown: BTreeMap<String, u64> = BTreeMap::new();
    let mut sched = sched::SchedAnalysis::new();
    let mut sys = syscalls::SyscallAnalysis::new();
    let mut fs = fs::FsAnalysis::new();
    let mut irq = irq::IrqAnalysis::new();
    let mut gaps = gaps::GapAnalysis::new();
    let mut wq = workqueue::WorkqueueAnalysis::new();
    let mut wbt = wbt::WbtAnalysis::new();
    let mut readahead = readahead::ReadaheadAnalysis::new();
    let mut throttle = blkthrottle::ThrottleAnalysis::new();
    let mut names = names::ThreadNames::default();
    for (pid, comm) in known {
        names.seed(*pid, comm);
    }
    let mut outliers = outliers::OutlierAnalysis::new(filter.top);
    if filter.selects_threads() {
        names.only(filter.pids.clone(), filter.comms.clone());
    }
    let mut events = 0u64;
    let mut span = Span::default();
    for ev in stream {
        match ev {
            Event::Block(b) => {
                if !filter.keeps_time(b.ts) {
                    continue;
                }
                if let Some(d) = filter.device {
                    let from_here = matches!(b.extra, crate::model::Extra::Remap { from_dev, .. } if from_dev == d);
                    if b.dev != d && !from_here {
                        continue;
                    }
                }
                events += 1;
                span.add(b.ts);
                names.learn_block(b.pid, b.comm);
                gaps.add(b.ts, b.cpu, b.pid, gaps::EventName::Block(b.action));
                if let Some(t) = outliers::touch_of_block(b.action, b.dev) {
                    outliers.before(b.ts, &t);
                    outliers.block(&b);
                    outliers.after_block(b.ts);
                }
                blk.add(&b);
                fs.block(&b);
                throttle.block(&b);
            }
            Event::ProcessName { pid, comm } => blk.process_name(pid, comm),
            Event::Other(o) => {
                if !filter.keeps_time(o.ts) {
                    continue;
                }
                events += 1;
                span.add(o.ts);
                names.learn(&o);
                gaps.add(o.ts, o.cpu, o.pid, gaps::EventName::Named(o.name.clone()));
                let touch = outliers::touch_of(&o);
                if let Some(t) = &touch {
                    outliers.before(o.ts, t);
                }
                let used = sched.add(&o)
                    | sys.add(&o, &names)
                    | fs.add(&o, &names)
                    | irq.add(&o)
                    | wq.add(&o)
                    | wbt.add(&o)
                    | readahead.add(&o);
                throttle.add(&o);
                // After the scheduler: an operation's end is integrated
                // with the state the scheduler analysis holds.
                outliers.add(&o, &names, &sched);
                if let Some(t) = &touch {
                    outliers.after(t, &sched);
                }
                if used {
                    continue;
                }
                match unknown.get_mut(&*o.name) {
                    Some(c) => *c += 1,
                    None => {
                        unknown.insert(o.name.to_string(), 1);
                    }
                }
            }
        }
    }
    let mut warnings = Vec::new();
    let block = blk.finish();
    warnings.extend(block.warnings.iter().cloned());
    if !unknown.is_empty() {
        let total: u64 = unknown.values().sum();
        warnings.push(format!(
            "{total} events of {} kinds are not analysed yet (kept and counted under unknown_events)",
            unknown.len()
        ));
    }
    Analysis {
        inputs: Vec::new(),
        events,
        span,
        block,
        syscalls: sys.finish(&names),
        fs: fs.finish(&names),
        gaps: gaps.finish(&names),
        workqueue: wq.finish(&names),
        irq: irq.finish(span.last_ns.saturating_sub(span.first_ns) as f64 / 1e9),
        outliers: outliers.finish(&names),
        sched: {
            let mut s = sched.finish();
            s.threads.retain(|t| names.keeps_named(t.pid, &t.comm));
            s.long_waits.retain(|w| names.keeps_named(w.pid, &w.comm));
            s
        },
        wbt: wbt.finish(span.last_ns),
        readahead: readahead.finish(),
        cgroup_throttle: throttle.finish(),
        unknown_events: unknown,
        warnings,
        snapshot: None,
    }
}

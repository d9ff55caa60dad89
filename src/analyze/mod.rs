//! Analyses: consume the event stream once, produce plain data. They never
//! read files.

pub mod blkthrottle;
pub mod block;
pub mod cache;
pub mod command;
pub mod coverage;
pub mod driver;
pub mod fs;
pub mod functions;
pub mod gaps;
pub mod histogram;
pub mod irq;
pub mod light;
pub mod names;
pub mod outliers;
pub mod readahead;
pub mod rows;
pub mod sched;
pub mod stacks;
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
    /// A device by name (`loop0`, `/dev/loop0`), until `pipeline::read`
    /// finds its `MAJ,MIN` for `device`.
    pub device_name: Option<String>,
    /// Inclusive time window, ns in the trace's clock; after the first
    /// event of the (merged) input while `relative_time`, until
    /// `pipeline::read` adds that event's time.
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
    pub relative_time: bool,
    /// Outliers kept per kind.
    pub top: usize,
    /// Only these threads (by id or name) in the per-thread results.
    pub pids: Vec<u32>,
    pub comms: Vec<String>,
    /// Kernel functions whose latency to measure (`analyze::functions`).
    pub functions: Vec<String>,
    /// The recorded command's process, when the trace holds the forks
    /// that follow it to its children: the syscalls of other processes
    /// (the shell that started it, a compiler beside it, a FUSE server)
    /// are then not the workload's operations.
    pub workload_root: Option<u32>,
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
    /// Whether an event was added: a trace may start at time 0 (blkparse
    /// and other tools print times relative to their first event).
    #[serde(skip)]
    seen: bool,
}

impl Span {
    fn add(&mut self, ts: u64) {
        if !self.seen || ts < self.first_ns {
            self.first_ns = ts;
        }
        self.seen = true;
        self.last_ns = self.last_ns.max(ts);
    }
}

/// The result of one analysis run, ready for any output format.
#[derive(Debug, Serialize)]
pub struct Analysis {
    pub inputs: Vec<InputSummary>,
    pub events: u64,
    /// First and last timestamp of the analyzed events, ns.
    pub span: Span,
    /// The first event of the whole input (before `--time`), ns: the
    /// origin of the relative times outputs print and `--time` takes
    /// (`None`: the input had no event).
    pub trace_start_ns: Option<u64>,
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
    /// The page cache's hits, misses, evictions and refaults.
    pub cache: cache::CacheSummary,
    /// Bios held back by cgroup I/O limits.
    pub cgroup_throttle: blkthrottle::ThrottleSummary,
    /// Driver commands (mmc, nvme, scsi events) matched to requests.
    pub driver: driver::DriverSummary,
    /// Latency of the kernel functions asked for (`--func`).
    pub functions: Vec<functions::FunctionLatency>,
    /// What a light capture's BPF programs counted (`record --light`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub light: Option<light::LightSummary>,
    /// Off-CPU time by kernel stack (`record --stacks`); in JSON as
    /// `off_cpu` (report::json).
    #[serde(skip)]
    pub stacks: stacks::StacksSummary,
    /// Events iosleuth does not analyze yet, by name.
    pub unknown_events: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
    /// The system snapshot of a capture (`{before, workload, after}`), when
    /// the input carries one.
    pub snapshot: Option<crate::model::snapshot::Snapshot>,
    /// The event sets the input recorded or holds (for the rules'
    /// coverage; in JSON as `rules`).
    #[serde(skip)]
    pub recorded: coverage::Recorded,
}

/// Runs every analysis over a time-ordered stream of events, in one go:
/// the rules' unit tests and the parser property tests (`pipeline` feeds
/// [`Analyzers`] in batches, with thread names from the snapshot). The
/// inputs and what they could not read are the caller's to add: analyses
/// never see files.
pub fn analyze(
    stream: impl Iterator<Item = Event>,
    filter: &Filter,
    block_cfg: BlockConfig,
) -> Analysis {
    let mut all = Analyzers::new(filter, block_cfg, &[]);
    for ev in stream {
        all.event(&ev);
    }
    all.finish()
}

/// [`analyze`] over batches of events, each handed to `done`
/// once analyzed: the thread that read them frees them, where their
/// memory came from (freeing it on another thread made a tenth of the
/// work malloc's).
pub fn analyze_batches(
    batches: impl Iterator<Item = Vec<Event>>,
    mut done: impl FnMut(Vec<Event>),
    filter: &Filter,
    block_cfg: BlockConfig,
    known: &[(u32, String)],
) -> Analysis {
    let mut all = Analyzers::new(filter, block_cfg, known);
    for batch in batches {
        for ev in &batch {
            all.event(ev);
        }
        done(batch);
    }
    all.finish()
}

/// Every analysis, fed one event at a time.
struct Analyzers<'f> {
    filter: &'f Filter,
    blk: BlockAnalysis,
    sched: sched::SchedAnalysis,
    sys: syscalls::SyscallAnalysis,
    fs: fs::FsAnalysis,
    irq: irq::IrqAnalysis,
    gaps: gaps::GapAnalysis,
    wq: workqueue::WorkqueueAnalysis,
    wbt: wbt::WbtAnalysis,
    readahead: readahead::ReadaheadAnalysis,
    cache: cache::CacheAnalysis,
    throttle: blkthrottle::ThrottleAnalysis,
    outliers: outliers::OutlierAnalysis,
    stacks: stacks::StackAnalysis,
    functions: functions::FunctionAnalysis,
    driver: driver::DriverAnalysis,
    names: names::ThreadNames,
    /// The threads' processes as the trace tells them, which the rows
    /// sent to exports carry.
    processes: rows::Processes,
    /// Events no analysis used, by name.
    unknown: BTreeMap<String, u64>,
    /// The kinds of events seen.
    recorded: coverage::Recorded,
    events: u64,
    span: Span,
    /// Operations can open (the inputs hold more than block events): only
    /// then does the outlier analysis follow requests.
    operations_possible: bool,
}

impl<'f> Analyzers<'f> {
    fn new(filter: &'f Filter, block_cfg: BlockConfig, known: &[(u32, String)]) -> Self {
        let mut cfg = block_cfg;
        if cfg.origin_ns.is_none() {
            cfg.origin_ns = filter.from_ns;
        }
        if cfg.end_ns.is_none() {
            cfg.end_ns = filter.to_ns;
        }
        let rows = cfg.rows.clone();
        let operations_possible = !cfg.block_only;
        let mut names = names::ThreadNames::default();
        for (pid, comm) in known {
            names.seed(*pid, comm);
        }
        if filter.selects_threads() {
            names.only(filter.pids.clone(), filter.comms.clone());
        }
        Analyzers {
            filter,
            blk: BlockAnalysis::new(cfg),
            sched: sched::SchedAnalysis::new()
                .with_rows(rows.thread_states, rows.processes.clone()),
            sys: syscalls::SyscallAnalysis::new().with_workload(filter.workload_root),
            fs: fs::FsAnalysis::new().with_rows(rows.spans.clone()),
            irq: irq::IrqAnalysis::new().with_rows(rows.spans.clone()),
            gaps: gaps::GapAnalysis::new(),
            wq: workqueue::WorkqueueAnalysis::new(),
            wbt: wbt::WbtAnalysis::new(),
            readahead: readahead::ReadaheadAnalysis::new(),
            cache: cache::CacheAnalysis::new(),
            throttle: blkthrottle::ThrottleAnalysis::new(),
            outliers: outliers::OutlierAnalysis::new(filter.top)
                .with_rows(rows.operations, rows.processes.clone())
                .with_workload(filter.workload_root),
            stacks: stacks::StackAnalysis::new(),
            functions: functions::FunctionAnalysis::new(&filter.functions),
            driver: driver::DriverAnalysis::new(),
            names,
            processes: rows.processes.clone(),
            unknown: BTreeMap::new(),
            recorded: coverage::Recorded::default(),
            events: 0,
            span: Span::default(),
            operations_possible,
        }
    }

    fn event(&mut self, ev: &Event) {
        match ev {
            Event::Block(b) => self.block(b),
            Event::ProcessName { pid, comm } => self.blk.process_name(*pid, *comm),
            Event::ThreadGroup { tid, tgid } => self.processes.learn(*tid, *tgid),
            Event::Trace(o) => self.other(o),
            Event::Stack(k) => self.stack(k),
        }
    }

    fn block(&mut self, b: &crate::model::BlockEvent) {
        if !self.filter.keeps_time(b.ts) {
            return;
        }
        if let Some(d) = self.filter.device {
            let from_here =
                matches!(b.extra, crate::model::Extra::Remap { from_dev, .. } if from_dev == d);
            if b.dev != d && !from_here {
                return;
            }
        }
        self.events += 1;
        self.span.add(b.ts);
        self.recorded.saw_action(b.action);
        self.names.learn_block(b.pid, b.comm);
        self.gaps
            .add(b.ts, b.cpu, b.pid, gaps::EventName::Block(b.action));
        // The block analysis numbers the requests: first, so that the
        // outlier analysis learns the id of each one issued.
        let issued = self.blk.add(b);
        if self.operations_possible {
            self.outliers.block_event(b, issued);
        }
        self.fs.block(b);
        self.throttle.block(b);
        self.driver.block(b);
    }

    fn other(&mut self, o: &crate::model::TraceEvent) {
        if !self.filter.keeps_time(o.ts) {
            return;
        }
        self.events += 1;
        self.span.add(o.ts);
        self.recorded.saw_kind(o.kind);
        self.names.learn(o);
        self.gaps
            .add(o.ts, o.cpu, o.pid, gaps::EventName::Named(o.name.clone()));
        let names = &self.names;
        let (sys, fs, irq, wq, wbt) = (
            &mut self.sys,
            &mut self.fs,
            &mut self.irq,
            &mut self.wq,
            &mut self.wbt,
        );
        let (readahead, driver, throttle) =
            (&mut self.readahead, &mut self.driver, &mut self.throttle);
        let cache = &mut self.cache;
        let mut added = None;
        let (functions, off_cpu) = (&mut self.functions, &mut self.stacks);
        let used = self
            .outliers
            .trace_event(o, names, &mut self.sched, |sched| {
                let used = sched.add(o)
                    | sys.add(o, names)
                    | fs.add(o, names)
                    | irq.add(o)
                    | wq.add(o)
                    | wbt.add(o)
                    | readahead.add(o)
                    | {
                        let (used, a) = cache.add(o, names);
                        added = a;
                        used
                    }
                    | driver.add(o);
                throttle.add(o);
                functions.add(o, names);
                if let Some((pid, ns, frames)) = off_cpu.add(o, names) {
                    let named = frames.iter().map(|f| stacks::function(f));
                    functions.blocked(pid, ns, named);
                }
                used
            });
        if let Some(a) = added {
            self.outliers.page_added(a.pid, a.pages, a.refault);
        }
        if used {
            return;
        }
        match self.unknown.get_mut(&*o.name) {
            Some(c) => *c += 1,
            None => {
                self.unknown.insert(o.name.to_string(), 1);
            }
        }
    }

    fn stack(&mut self, k: &crate::model::StackEvent) {
        if !self.filter.keeps_time(k.ts) {
            return;
        }
        self.events += 1;
        self.span.add(k.ts);
        if !k.comm.is_empty() {
            self.names.learn_block(k.pid, k.comm);
        }
        self.stacks.stack(k, &self.names);
    }

    fn finish(self) -> Analysis {
        let (span, names) = (self.span, &self.names);
        let stacks = self.stacks.finish(names);
        let block = self.blk.finish(span.last_ns);
        // Events no analysis reads are listed once, in the report's
        // coverage (text: "events not analyzed yet"; JSON:
        // unknown_events), not warned about on every run.
        let warnings: Vec<String> = block.warnings.clone();
        let mut a = Analysis {
            inputs: Vec::new(),
            events: self.events,
            span,
            trace_start_ns: None,
            block,
            syscalls: self.sys.finish(names),
            fs: self.fs.finish(names),
            gaps: self.gaps.finish(names),
            workqueue: self.wq.finish(names),
            irq: self
                .irq
                .finish(span.last_ns.saturating_sub(span.first_ns) as f64 / 1e9),
            outliers: {
                let mut o = self.outliers.finish(names);
                // Where each slow operation blocked most, by stack.
                for x in o.by_kind.values_mut().flatten() {
                    x.blocked_in =
                        stacks.most_blocked_in(x.pid, x.start_ns, x.start_ns + x.latency_ns);
                }
                o
            },
            sched: {
                let mut s = self.sched.finish();
                s.threads.retain(|t| names.keeps_named(t.pid, &t.comm));
                s.long_waits.retain(|w| names.keeps_named(w.pid, &w.comm));
                s
            },
            wbt: self.wbt.finish(span.last_ns),
            readahead: self.readahead.finish(names),
            cache: self.cache.finish(names),
            cgroup_throttle: self.throttle.finish(),
            functions: self.functions.finish(names),
            light: None,
            driver: self.driver.finish(),
            stacks,
            unknown_events: self.unknown,
            warnings,
            snapshot: None,
            recorded: self.recorded,
        };
        a.cache.operations_refaulting = a.outliers.refaulting.clone();
        // Per operation, the pages it missed are known only where the
        // page cache's events were recorded.
        if !a.cache.recorded {
            for o in a.outliers.by_kind.values_mut().flatten() {
                o.cache = None;
            }
        }
        a
    }
}

//! A light capture's histograms put where the block analysis keeps its
//! figures: each device's completions, bytes, merges and latencies come
//! from what the BPF programs counted in the kernel, not from the slow
//! requests that reached user space (those stay the outliers). What only
//! a full trace gives (btt's intervals, iostat's columns, per-process
//! figures) is left empty and said so.

use super::block::{requests::OpCounts, DeviceSummary};
use super::histogram::{LatencyDist, Log2Hist, Percentiles};
use super::irq::{HandlerStats, SoftirqCpu, VECTORS};
use super::sched::{Holder, LongWait};
use super::syscalls::CallStats;
use super::Analysis;
use crate::ingest::light::LightInputs;
use crate::model::light::{
    comm_string, CpuCounters, LightCgroups, LightCounters, LightDevice, LightDoc, LightOp,
    LightUring, ProgramStats, SlowPolicy, SlowRequest, StageHist, WaitRecord, OPS,
};
use serde::Serialize;

mod devices;
use devices::{apply_devices, log2_us};

#[derive(Clone, Debug, Default, Serialize)]
pub struct LightSummary {
    /// How the programs were attached (`tp_btf`).
    pub attach: String,
    /// How long they were attached.
    pub seconds: f64,
    pub slow: SlowPolicy,
    pub devices: Vec<LightDeviceSummary>,
    /// The programs' own run time (`record --light --bpf-stats`).
    pub programs: Vec<ProgramSummary>,
    /// The slowest requests the kernel sent, longest first.
    pub slowest: Vec<SlowRequestSummary>,
    /// The flight recorder: runqueue waits from this long were kept.
    pub wait_min_ns: u64,
    /// What the flight recorder kept, lost or could not attach to.
    pub long_waits: u64,
    pub waits_lost: u64,
    pub events: u64,
    pub events_lost: u64,
    /// Hard interrupts of every CPU, and their time (None: not recorded,
    /// `--irq off`).
    pub hardirqs: Option<u64>,
    pub hardirq_ns: Option<u64>,
    pub missing_events: Vec<String>,
    /// How the stages were measured: "stamps" or "state" (LightDoc).
    pub accounting: String,
    /// Whether runqueue waits were watched (the scheduler's hooks ran).
    pub runqueue: bool,
    /// Requests by the cgroup they were charged to.
    pub cgroups: CgroupsSummary,
    /// io_uring requests by group (None: the capture did not count them,
    /// made before it did).
    pub io_uring: Option<LightUringSummary>,
}

impl LightSummary {
    /// Whether the capture kept `system:event` whole in its flight
    /// recorder: its program was attached. One made before it kept the
    /// event, or on a kernel without it (or without tracefs), did not.
    pub fn kept(&self, system: &str, event: &str) -> bool {
        let program = format!("iosl_ev_{event}");
        let missing = format!("{system}:{event}");
        self.programs.iter().any(|p| p.name == program)
            && !self
                .missing_events
                .iter()
                .any(|m| *m == missing || m.starts_with(crate::model::light::EVERY_EVENT_MISSING))
    }
}

/// A light capture's io_uring requests.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LightUringSummary {
    /// Each group's counts (model::light::URING_OPS).
    pub groups: Vec<LightUring>,
    /// Each group's timed requests, submission to completion.
    pub by_op: std::collections::BTreeMap<String, CallStats>,
}

impl LightUringSummary {
    pub fn total(&self, f: impl Fn(&LightUring) -> u64) -> u64 {
        sum_of(self.groups.iter().map(f))
    }
}

fn uring(groups: &[LightUring]) -> LightUringSummary {
    let by_op = groups
        .iter()
        .filter(|g| g.latency.n > 0)
        .map(|g| {
            let hist = log2_us([&g.latency].into_iter());
            let stats = CallStats::from_dist(g.latency.n, g.latency.sum_ns, hist, dist(&g.latency));
            (g.op.clone(), stats)
        })
        .collect();
    LightUringSummary {
        groups: groups.to_vec(),
        by_op,
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CgroupsSummary {
    /// False: the capture did not count by cgroup (made before it did).
    pub counted: bool,
    /// The hierarchy the cgroups' paths are in.
    pub hierarchy: String,
    /// Whether writeback was charged to the cgroup that dirtied the pages;
    /// if not, the flusher's writes are the root cgroup's.
    pub writeback_charged: bool,
    /// The largest entries, most requests first.
    pub top: Vec<CgroupSummary>,
    /// The entries not kept: how many, their requests and bytes.
    pub rest_entries: u64,
    pub rest_ios: u64,
    pub rest_bytes: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CgroupSummary {
    /// Its path, or why there is none.
    pub cgroup: String,
    pub id: u64,
    pub device: String,
    pub op: String,
    pub ios: u64,
    pub bytes: u64,
    /// Mean total time of its timed requests (ns; None: none timed).
    pub mean_ns: Option<u64>,
    /// The `le` bound at or under which 99 % of them completed (ns; None:
    /// none timed, or over the last bound).
    pub p99_at_most_ns: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct SlowRequestSummary {
    pub device: String,
    /// read, write, flush, other.
    pub op: &'static str,
    pub sector: u64,
    pub bytes: u32,
    /// When it was issued (trace clock ns).
    pub issue_ns: u64,
    /// Allocation → completion, issue → completion.
    pub total_ns: u64,
    pub device_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub issue_cpu: u32,
    pub complete_cpu: u32,
    /// Requests in flight at its issue, itself included (0: not known:
    /// the stamps accounting keeps no per-request state, and reads the
    /// depth of a sample of the requests).
    pub depth: u32,
    pub cgroup_id: u64,
    /// The path of that cgroup, when the capture's cgroup table has it.
    pub cgroup: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LightDeviceSummary {
    pub device: String,
    pub ops: Vec<LightOpSummary>,
    /// Requests in flight at issue (the request included).
    pub depth: Percentiles,
    /// `depth` is of one request in this many (sampled by a hash of the
    /// sector and allocation stamp; 1: all).
    pub depth_sampled: u32,
    pub counters: LightCounters,
    /// Bios held back by a cgroup's I/O limit: (bios, bytes); None when
    /// the capture could not count them (unknown, not zero).
    pub throttled: Option<(u64, u64)>,
    /// Requests the kernel counted (diskstats) that the programs did not
    /// see: in no latency and no cgroup's figures. None where the capture
    /// has no diskstats (unknown, not zero).
    pub unseen: Option<u64>,
}

impl SlowRequestSummary {
    /// "by NAME", or that the issuer is not known (the stamps accounting
    /// keeps no per-request state, so who issued it is not recorded).
    pub fn issuer(&self) -> String {
        let who = if self.comm.is_empty() && self.tid == 0 {
            "issuer not recorded".to_string()
        } else {
            format!("by {}", self.comm)
        };
        match &self.cgroup {
            Some(c) => format!("{who}, cgroup {c}"),
            None => who,
        }
    }
}

impl LightDeviceSummary {
    /// Read and write requests completed, and their bytes (flushes and
    /// discards are no data to merge or split).
    pub fn data_requests(&self) -> (u64, u64) {
        self.ops
            .iter()
            .filter(|o| o.op == "read" || o.op == "write")
            .fold((0, 0), |(n, b), o| {
                (n.saturating_add(o.ios), b.saturating_add(o.bytes))
            })
    }

    /// Bios merged into requests and requests merged into others.
    pub fn merges(&self) -> u64 {
        let c = &self.counters;
        sum_of([c.back_merges, c.front_merges, c.rq_merges].into_iter())
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LightOpSummary {
    pub op: String,
    pub ios: u64,
    pub bytes: u64,
    /// Allocation → issue, issue → completion, allocation → completion (ns).
    pub queued: Percentiles,
    pub device: Percentiles,
    pub total: Percentiles,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ProgramSummary {
    pub name: String,
    /// Runs and ns per run: None when the kernel did not keep them
    /// (without `--bpf-stats`).
    pub runs: Option<u64>,
    pub ns_per_run: Option<f64>,
    /// Events the kernel did not run it for (None: not recorded).
    pub missed: Option<u64>,
}

fn cgroups(c: &LightCgroups) -> CgroupsSummary {
    CgroupsSummary {
        counted: c.counted,
        hierarchy: c.hierarchy.clone(),
        writeback_charged: c.writeback_charged,
        top: c
            .top
            .iter()
            .map(|e| CgroupSummary {
                cgroup: e.name(),
                id: e.id,
                device: e.dev.clone(),
                op: e.op.clone(),
                ios: e.ios,
                bytes: e.bytes,
                mean_ns: (e.timed > 0).then(|| e.time_ns / e.timed),
                p99_at_most_ns: e.quantile_bound_ns(0.99),
            })
            .collect(),
        rest_entries: c.rest.entries,
        rest_ios: c.rest.ios,
        rest_bytes: c.rest.bytes,
    }
}

fn dist(h: &StageHist) -> LatencyDist {
    LatencyDist::from_ranges(h.rows(), u128::from(h.sum_ns))
}

fn add_op(c: &mut OpCounts, op: &str, n: u64) {
    let count = match op {
        "read" => &mut c.read,
        "write" => &mut c.write,
        "flush" => &mut c.flush,
        _ => &mut c.discard,
    };
    *count = count.saturating_add(n);
}

/// A sum of counts read from a file: each was checked (ingest::light),
/// but many of them may still add up past a u64.
fn sum_of(counts: impl Iterator<Item = u64>) -> u64 {
    counts.fold(0, u64::saturating_add)
}

/// Puts a light capture's figures into the analysis (`a.light`, each
/// device's summary, the scheduler's long waits and the interrupts'
/// time), with a warning for what the capture could not keep.
pub fn apply(a: &mut Analysis, light: &LightInputs) {
    let doc = &light.doc;
    a.warnings.extend(light.warnings.iter().cloned());
    let cpus = CpuCounters::sum(doc.cpus.iter().map(|c| &c.counts));
    let mut summary = LightSummary {
        attach: doc.attach.clone(),
        seconds: doc.stopped_ns.saturating_sub(doc.started_ns) as f64 / 1e9,
        slow: doc.slow.clone(),
        devices: Vec::new(),
        programs: doc.programs.iter().map(program).collect(),
        slowest: light
            .slowest
            .iter()
            .map(|r| slow_request(r, &doc.cgroups))
            .collect(),
        wait_min_ns: doc.wait_min_ns,
        long_waits: cpus.long_waits,
        waits_lost: cpus.waits_lost,
        events: cpus.events,
        events_lost: cpus.events_lost,
        hardirqs: doc.irq.then_some(cpus.hardirqs),
        hardirq_ns: doc.irq.then_some(cpus.hardirq_ns),
        missing_events: doc.missing_events.clone(),
        accounting: doc.accounting.clone(),
        runqueue: doc.runqueue,
        cgroups: cgroups(&doc.cgroups),
        io_uring: doc.io_uring.as_deref().map(uring),
    };
    apply_devices(a, doc, &mut summary);
    apply_cpus(a, doc, &light.waits);
    // Stretches without events say nothing of a capture that keeps only
    // what is slow or rare.
    a.gaps = Default::default();
    warn_context(a, &summary);
    a.light = Some(summary);
}

/// The scheduler's switches and long runqueue waits, and each CPU's
/// interrupt time, as the flight recorder kept them.
fn apply_cpus(a: &mut Analysis, doc: &LightDoc, waits: &[WaitRecord]) {
    if doc.cpus.is_empty() {
        return;
    }
    // Added to, not replaced: several light inputs of one run add up.
    let cpus = CpuCounters::sum(doc.cpus.iter().map(|c| &c.counts));
    a.sched.switches = a.sched.switches.saturating_add(cpus.switches);
    a.sched.wakeups = a.sched.wakeups.saturating_add(cpus.wakeups);
    a.sched.long_waits.extend(waits.iter().map(long_wait));
    a.sched
        .long_waits
        .sort_by_key(|w| std::cmp::Reverse(w.wait_ns));
    if !doc.irq {
        // Not recorded (--irq off): no interrupt table, not one of zeros.
        return;
    }
    let seconds = doc.stopped_ns.saturating_sub(doc.started_ns) as f64 / 1e9;
    a.irq.seconds = seconds;
    a.irq.softirq = doc
        .cpus
        .iter()
        .map(|c| SoftirqCpu {
            cpu: c.cpu,
            counts: VECTORS
                .iter()
                .copied()
                .zip(c.softirqs.iter().copied())
                .collect(),
            per_s: VECTORS
                .iter()
                .copied()
                .zip(c.softirqs.iter().map(|&n| n as f64 / seconds.max(1e-9)))
                .collect(),
            time_ns: VECTORS
                .iter()
                .copied()
                .zip(c.softirq_ns.iter().copied())
                .collect(),
        })
        .collect();
    a.irq.softirq_total = VECTORS
        .iter()
        .enumerate()
        .map(|(v, name)| {
            let count = sum_of(
                doc.cpus
                    .iter()
                    .map(|c| c.softirqs.get(v).copied().unwrap_or(0)),
            );
            let time_ns = sum_of(
                doc.cpus
                    .iter()
                    .map(|c| c.softirq_ns.get(v).copied().unwrap_or(0)),
            );
            (
                *name,
                HandlerStats {
                    count,
                    time_ns,
                    max_ns: None,
                },
            )
        })
        .collect();
}

/// A kept wait as the scheduler analysis's: who held the CPU is the
/// real-time tasks' time during it on the CPU it queued on, and the task
/// that ran there just before it, longest first.
fn long_wait(w: &WaitRecord) -> LongWait {
    let holder = |tid: u32, comm: &[u8], prio: i32, ns: u64| Holder {
        pid: tid,
        comm: comm_string(comm),
        prio: i64::from(prio),
        policy: if tid == 0 {
            "idle"
        } else if prio < 100 {
            "RT"
        } else {
            "normal"
        },
        ns,
    };
    let mut held_by = Vec::new();
    if w.rt_ns > 0 {
        held_by.push(holder(w.rt_tid, &w.rt_comm, w.rt_prio, w.rt_ns));
    }
    // The task switched out for it, unless that was the idle task (an idle
    // CPU holds nobody: the wait was spent elsewhere), it held none of the
    // wait (captures made before waits were the scheduler's own stamps:
    // the thread ran elsewhere in the end), or it is the same real-time
    // task.
    if w.holder_tid != 0 && w.held_ns > 0 && (w.holder_tid != w.rt_tid || w.rt_ns == 0) {
        held_by.push(holder(
            w.holder_tid,
            &w.holder_comm,
            w.holder_prio,
            w.held_ns,
        ));
    }
    // Longest first; on a tie the real-time task, which caused it.
    held_by.sort_by_key(|h| (std::cmp::Reverse(h.ns), h.policy != "RT"));
    LongWait {
        pid: w.tid,
        comm: comm_string(&w.comm),
        cpu: w.cpu,
        start_ns: w.start_ns,
        wait_ns: w.wait_ns,
        held_by,
    }
}

fn warn_context(a: &mut Analysis, s: &LightSummary) {
    let refused = s
        .missing_events
        .iter()
        .any(|e| e.starts_with(crate::model::light::RUNQUEUE_MISSING));
    if !s.runqueue && !refused {
        a.warnings.push(
            "light capture: runqueue waits were not watched (recorded with --runqueue off): whether a thread waited for a CPU is unknown, not absent".into(),
        );
    }
    if s.waits_lost > 0 {
        a.warnings.push(format!(
            "light capture: {} long runqueue waits were lost: the ring buffer was full",
            s.waits_lost
        ));
    }
    if s.events_lost > 0 {
        a.warnings.push(format!(
            "light capture: {} kept events (journal, dirty limit, writeback throttling) were lost: the ring buffer was full",
            s.events_lost
        ));
    }
    if !s.missing_events.is_empty() {
        a.warnings.push(format!(
            "light capture: not recorded: {}",
            s.missing_events.join(", ")
        ));
    }
    for p in &s.programs {
        if let Some(m) = p.missed.filter(|&m| m > 0) {
            a.warnings.push(format!(
                "light capture: the kernel skipped {m} runs of {}: {}",
                p.name,
                skipped_means(&p.name)
            ));
        }
    }
}

/// What a program's skipped runs leave out. The kernel does not run a raw
/// tracepoint's program again on a CPU where it is running: an event
/// raised by an interrupt that came in meanwhile goes unseen.
fn skipped_means(program: &str) -> &'static str {
    if program.starts_with("iosl_complete") {
        "that many request completions, raised in an interrupt while it ran, are missing from the latencies and cgroups, and from the request counts unless the capture read the kernel's diskstats (they are the kernel's then)"
    } else if program.starts_with("iosl_issue") {
        "that many request issues are missing from the queue depths"
    } else {
        "that many of its events, raised in an interrupt while it ran, were not seen"
    }
}

fn slow_request(r: &SlowRequest, cgroups: &LightCgroups) -> SlowRequestSummary {
    SlowRequestSummary {
        device: r.dev.to_string(),
        op: crate::model::light::OPS[crate::model::light::op_group(r.cmd_flags)],
        sector: r.sector,
        bytes: r.bytes,
        issue_ns: r.issue_ns,
        total_ns: r.total_ns(),
        device_ns: r.device_ns(),
        pid: r.pid,
        tid: r.tid,
        comm: comm_string(&r.comm),
        issue_cpu: r.issue_cpu,
        complete_cpu: r.complete_cpu,
        depth: r.depth,
        cgroup_id: r.cgroup_id,
        cgroup: cgroups
            .top
            .iter()
            .find(|c| c.id == r.cgroup_id && c.path.is_some())
            .and_then(|c| c.path.clone()),
    }
}

fn program(p: &ProgramStats) -> ProgramSummary {
    ProgramSummary {
        name: p.name.clone(),
        runs: p.run_count,
        ns_per_run: match (p.run_count, p.run_time_ns) {
            (Some(n), Some(ns)) if n > 0 => Some(ns as f64 / n as f64),
            _ => None,
        },
        missed: p.missed,
    }
}

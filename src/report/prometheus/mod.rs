//! The Prometheus text exposition format (version 0.0.4) of what `watch`
//! counts: per device and operation histograms of each request's stages
//! and its counters, the flight recorder's, the daemon's own. Names and
//! units follow Prometheus' naming guide: base units (seconds, bytes),
//! `_total` on counters, one family per quantity whose sum over its labels
//! means something.
//!
//! The kernel's histograms are log-linear (32 buckets per power of two);
//! Prometheus' classic ones have fixed `le` bounds. A log-linear bucket
//! counts under the first bound at or above its highest value, so a
//! bucket's cumulative count never includes a request slower than its
//! bound (it may leave out a few just under it: at most 1/32 of the bound).

use crate::model::light::{
    CpuCounters, DiskstatsDelta, LightCgroup, LightCpu, LightDevice, LightOp, LightUring,
    ProgramStats, StageHist, UringCounters, OPS,
};
mod exposition;
mod families;

use exposition::{seconds, Family, Out};
use families::*;

/// The `le` bounds of every latency histogram (model::light::LE_NS, in
/// ns): 1-2.5-5 steps from 10 µs (below any device) to 10 s (past any
/// timeout worth a histogram). The kernel counts each cgroup's requests
/// under these same bounds.
pub use crate::model::light::LE_NS;

/// The content type Prometheus expects of this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Everything one scrape shows.
#[derive(Default)]
pub struct Scrape<'a> {
    pub devices: &'a [LightDevice],
    /// `maj,min` → the kernel's name of the disk (`loop0`); devices
    /// without one keep `maj,min` (and the catch-all is `other`).
    pub names: &'a [(String, String)],
    pub cpus: &'a [LightCpu],
    /// Whether bios held by blk-throttle are counted (else their families
    /// have no samples, and `not_watched` says why).
    pub throttle: bool,
    /// Per (cgroup label, device, operation): `other` sums the cgroups
    /// without their own series.
    pub cgroups: &'a [(String, &'a LightCgroup)],
    /// Whether the cgroups' latency histogram is served (`watch
    /// --cgroup-histograms`): 22 series per (cgroup, device, operation),
    /// where the counters take 2.
    pub cgroup_histograms: bool,
    /// Whether each CPU's interrupt time is watched (`watch --irq on`):
    /// else its families have no samples, and `not_watched` says so.
    pub irq: bool,
    /// Runqueue waits from this long are counted (ns).
    pub wait_min_ns: u64,
    pub ring: RingFigures,
    pub process: Option<ProcessFigures>,
    pub findings: &'a [ActiveFinding],
    /// By reason: how often a trigger fired, and how many of those were
    /// not acted on (rate limit, a capture already running).
    pub triggers: &'a [(String, u64, u64)],
    pub captures_kept: u64,
    pub captures_bytes: u64,
    /// What this daemon cannot see, each said as such (journal events this
    /// kernel lacks, ...).
    pub not_watched: &'a [String],
    /// The BPF programs attached, with what the kernel kept of them.
    pub programs: &'a [ProgramStats],
    /// io_uring requests by group (model::light::URING_OPS).
    pub io_uring: &'a [LightUring],
}

#[derive(Clone, Copy, Default)]
pub struct RingFigures {
    pub records: u64,
    pub bytes: u64,
    pub evicted_early: u64,
}

/// The daemon's own, under the names of Prometheus' process collector.
#[derive(Clone, Copy, Default)]
pub struct ProcessFigures {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    pub start_time_seconds: f64,
}

/// A finding of the last diagnosis still in force.
#[derive(Clone, Debug, PartialEq)]
pub struct ActiveFinding {
    pub rule: String,
    pub severity: String,
    pub device: String,
}

type Stage = fn(&LightOp) -> &StageHist;
type OpCount = fn(&LightOp) -> u64;
type KernelCount = fn(&DiskstatsDelta) -> [u64; 4];

/// Where each of a device's counters (model::light::LightCounters, by
/// name) is served: its family and the label that tells it from the
/// others of that family, if any. The counters not here are served
/// otherwise (the slow requests' outcomes, the untimed requests'
/// reasons) or are the capture's own bookkeeping (`by_stamps`): the
/// tests check that every counter is in one list or the other.
/// A counter's name, its family, and its label there if it shares it.
type Placed = (
    &'static str,
    &'static Family,
    Option<(&'static str, &'static str)>,
);

const DEVICE_COUNTERS: [Placed; 10] = [
    ("back_merges", &BLOCK_MERGES_TOTAL, Some(("kind", "back"))),
    ("front_merges", &BLOCK_MERGES_TOTAL, Some(("kind", "front"))),
    ("rq_merges", &BLOCK_MERGES_TOTAL, Some(("kind", "request"))),
    ("splits", &BLOCK_SPLITS_TOTAL, None),
    ("requeues", &BLOCK_REQUEUES_TOTAL, None),
    ("errors", &BLOCK_ERRORS_TOTAL, None),
    ("partial", &BLOCK_PARTIAL_COMPLETIONS_TOTAL, None),
    ("seq_requests", &BLOCK_SEQUENTIAL_REQUESTS_TOTAL, None),
    ("cgroup_full", &CGROUP_UNCOUNTED_REQUESTS_TOTAL, None),
    ("throttled", &BLOCK_THROTTLED_BIOS_TOTAL, None),
];

/// The device counters served by a family of their own below, or not
/// served (by_stamps: how the stages were measured, the capture's).
#[cfg(test)]
const DEVICE_COUNTERS_ELSEWHERE: [&str; 7] = [
    "throttled_bytes",
    "no_state",
    "state_full",
    "slow_sent",
    "slow_capped",
    "ring_full",
    "by_stamps",
];

/// What the kernel keeps of each program: the events it skipped always,
/// runs and run time only while `kernel.bpf_stats_enabled` (else no
/// samples, and `iosleuth_not_watched{what="bpf_run_time"}`), as
/// ebpf_exporter's `ebpf_exporter_ebpf_program_run_time_seconds`.
fn programs(o: &mut Out, programs: &[ProgramStats]) {
    let mut f = o.family(&BPF_PROGRAM_MISSED_TOTAL);
    for p in programs {
        if let Some(m) = p.missed {
            f.sample(&[("program", &p.name)], m);
        }
    }
    let mut f = o.family(&BPF_PROGRAM_RUNS_TOTAL);
    for p in programs {
        if let Some(n) = p.run_count {
            f.sample(&[("program", &p.name)], n);
        }
    }
    let mut f = o.family(&BPF_PROGRAM_RUN_SECONDS_TOTAL);
    for p in programs {
        if let Some(ns) = p.run_time_ns {
            f.sample(&[("program", &p.name)], seconds(ns));
        }
    }
}

/// io_uring requests by what they ask (`op`: read, write, fsync,
/// uring_cmd, net, wait, file, other), from submission to completion.
fn uring_families(o: &mut Out, groups: &[LightUring]) {
    let mut f = o.family(&IO_URING_REQUEST_SECONDS);
    for g in groups {
        f.histogram(&[("op", &g.op)], &g.latency);
    }
    type Count = fn(&UringCounters) -> u64;
    let counters: [(&Family, Count); 4] = [
        (&IO_URING_REQUESTS_TOTAL, |c| c.requests),
        (&IO_URING_UNTIMED_REQUESTS_TOTAL, |c| c.untimed),
        (&IO_URING_PUNTED_TOTAL, |c| c.punted),
        (&IO_URING_ERRORS_TOTAL, |c| c.errors),
    ];
    for (family, value) in counters {
        let mut f = o.family(family);
        for g in groups {
            f.sample(&[("op", &g.op)], value(&g.counts));
        }
    }
}

/// Per device and operation: the stages' histograms, requests and bytes.
fn block_families(o: &mut Out, devices: &[(String, &LightDevice)]) {
    let stages: [(&Family, Stage); 3] = [
        (&BLOCK_QUEUED_SECONDS, |o| &o.queued),
        (&BLOCK_DEVICE_SECONDS, |o| &o.device),
        (&BLOCK_REQUEST_SECONDS, |o| &o.total),
    ];
    for (family, stage) in stages {
        let mut f = o.family(family);
        for (dev, d) in devices {
            for op in OPS {
                if let Some(x) = d.ops.get(op) {
                    f.histogram(&[("device", dev), ("op", op)], stage(x));
                }
            }
        }
    }
    // The kernel's own counts where its diskstats were read, else the
    // programs'.
    let per_op: [(&Family, OpCount, KernelCount); 2] = [
        (&BLOCK_REQUESTS_TOTAL, |o| o.ios, DiskstatsDelta::completed),
        (&BLOCK_BYTES_TOTAL, |o| o.bytes, DiskstatsDelta::bytes),
    ];
    for (family, value, kernel) in per_op {
        let mut f = o.family(family);
        for (dev, d) in devices {
            for (i, op) in OPS.iter().enumerate() {
                let programs = d.ops.get(*op);
                let n = match &d.diskstats {
                    Some(k) if programs.is_some() || k.completed()[i] > 0 => kernel(k)[i],
                    _ => match programs {
                        Some(x) => value(x),
                        None => continue,
                    },
                };
                f.sample(&[("device", dev), ("op", op)], n);
            }
        }
    }
    // What the kernel counted that the programs did not see: in none of
    // the histograms nor cgroups (unknown where the kernel's counts are).
    let mut f = o.family(&BLOCK_UNSEEN_REQUESTS);
    for (dev, d) in devices {
        if let Some(n) = d.unseen() {
            f.sample(&[("device", dev)], n);
        }
    }
}

/// Per device: its counters (DEVICE_COUNTERS), the throttled bytes, the
/// untimed requests by reason and the slow ones by outcome. Throttled
/// bios have no samples where they are not counted (unknown).
fn device_counters(o: &mut Out, devices: &[(String, &LightDevice)], throttle: bool) {
    let mut families: Vec<&'static Family> = Vec::new();
    for (_, family, _) in DEVICE_COUNTERS {
        if !families.iter().any(|f| std::ptr::eq(*f, family)) {
            families.push(family);
        }
    }
    for family in families {
        let mut f = o.family(family);
        if std::ptr::eq(family, &BLOCK_THROTTLED_BIOS_TOTAL) && !throttle {
            continue;
        }
        for (dev, d) in devices {
            for (name, value) in d.counters.rows() {
                let Some((_, _, label)) = DEVICE_COUNTERS
                    .iter()
                    .find(|(n, fam, _)| *n == name && std::ptr::eq(*fam, family))
                else {
                    continue;
                };
                match label {
                    Some(l) => f.sample(&[("device", dev), *l], value),
                    None => f.sample(&[("device", dev)], value),
                }
            }
        }
    }
    let mut f = o.family(&BLOCK_THROTTLED_BYTES_TOTAL);
    for (dev, d) in devices.iter().filter(|_| throttle) {
        f.sample(&[("device", dev)], d.counters.throttled_bytes);
    }
    let mut f = o.family(&BLOCK_UNTIMED_REQUESTS_TOTAL);
    for (dev, d) in devices {
        let never_issued: u64 = d
            .ops
            .values()
            .map(|o| o.total.n.saturating_sub(o.device.n))
            .sum();
        for (reason, n) in [
            ("issued_before_start", d.counters.no_state),
            ("state_table_full", d.counters.state_full),
            ("never_issued", never_issued),
        ] {
            f.sample(&[("device", dev), ("reason", reason)], n);
        }
    }
}

/// The scrape's text.
pub fn render(s: &Scrape) -> String {
    let mut o = Out(String::new());
    let name_of = |dev: &str| -> String {
        s.names
            .iter()
            .find(|(d, _)| d == dev)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| dev.to_string())
    };
    let devices: Vec<(String, &LightDevice)> =
        s.devices.iter().map(|d| (name_of(&d.dev), d)).collect();
    block_families(&mut o, &devices);
    device_counters(&mut o, &devices, s.throttle);
    cgroup_families(&mut o, s.cgroups, s.cgroup_histograms, &name_of);
    uring_families(&mut o, s.io_uring);
    let mut f = o.family(&SLOW_REQUESTS_TOTAL);
    for (dev, d) in &devices {
        let c = &d.counters;
        for (outcome, n) in [
            ("kept", c.slow_sent),
            ("capped", c.slow_capped),
            ("ring_full", c.ring_full),
        ] {
            f.sample(&[("device", dev), ("outcome", outcome)], n);
        }
    }
    flight_recorder(&mut o, s);
    daemon(&mut o, s);
    o.0
}

/// The flight recorder's figures and each CPU's interrupt time.
fn flight_recorder(o: &mut Out, s: &Scrape) {
    let cpus = CpuCounters::sum(s.cpus.iter().map(|c| &c.counts));
    let mut f = o.family(&SCHED_RUNQUEUE_STALLS_TOTAL);
    f.sample(&[("outcome", "kept")], cpus.long_waits);
    f.sample(&[("outcome", "lost")], cpus.waits_lost);
    o.family(&SCHED_RUNQUEUE_STALL_THRESHOLD_SECONDS)
        .sample(&[], seconds(s.wait_min_ns));
    let mut f = o.family(&KEPT_EVENTS_TOTAL);
    f.sample(&[("outcome", "kept")], cpus.events);
    f.sample(&[("outcome", "lost")], cpus.events_lost);
    // Not watched (--irq off): the families without samples.
    let irq_cpus = if s.irq { s.cpus } else { &[] };
    let mut f = o.family(&CPU_HARDIRQ_SECONDS_TOTAL);
    for c in irq_cpus {
        f.sample(&[("cpu", &c.cpu.to_string())], seconds(c.counts.hardirq_ns));
    }
    let mut f = o.family(&CPU_SOFTIRQ_SECONDS_TOTAL);
    for c in irq_cpus {
        let cpu = c.cpu.to_string();
        for (vector, ns) in SOFTIRQS.iter().zip(&c.softirq_ns) {
            f.sample(&[("cpu", &cpu), ("vector", vector)], seconds(*ns));
        }
    }
}

/// The daemon's own: its memory of records, triggers, captures, findings,
/// programs, what it cannot see, its build and its process.
fn daemon(o: &mut Out, s: &Scrape) {
    o.family(&RING_RECORDS).sample(&[], s.ring.records);
    o.family(&RING_BYTES).sample(&[], s.ring.bytes);
    o.family(&RING_EVICTED_TOTAL)
        .sample(&[], s.ring.evicted_early);
    let mut f = o.family(&TRIGGERS_TOTAL);
    for (reason, acted, skipped) in s.triggers {
        f.sample(&[("reason", reason), ("outcome", "captured")], acted);
        f.sample(&[("reason", reason), ("outcome", "skipped")], skipped);
    }
    o.family(&CAPTURES_KEPT).sample(&[], s.captures_kept);
    o.family(&CAPTURES_BYTES).sample(&[], s.captures_bytes);
    let mut f = o.family(&FINDING);
    for x in s.findings {
        f.sample(
            &[
                ("rule", &x.rule),
                ("severity", &x.severity),
                ("device", &x.device),
            ],
            1,
        );
    }
    programs(o, s.programs);
    let mut f = o.family(&NOT_WATCHED);
    for what in s.not_watched {
        f.sample(&[("what", what)], 1);
    }
    o.family(&BUILD_INFO)
        .sample(&[("version", env!("CARGO_PKG_VERSION"))], 1);
    if let Some(p) = s.process {
        o.family(&PROCESS_CPU_SECONDS_TOTAL)
            .sample(&[], p.cpu_seconds);
        o.family(&PROCESS_RESIDENT_MEMORY_BYTES)
            .sample(&[], p.resident_bytes);
        o.family(&PROCESS_VIRTUAL_MEMORY_BYTES)
            .sample(&[], p.virtual_bytes);
        o.family(&PROCESS_OPEN_FDS).sample(&[], p.open_fds);
        o.family(&PROCESS_START_TIME_SECONDS)
            .sample(&[], p.start_time_seconds);
    }
}

/// Per cgroup, device and operation: the cgroup each request was charged
/// to (its first bio's), so writeback counts where the kernel charges it.
/// The counters always; the latency histogram (11 times their series)
/// only when asked for.
fn cgroup_families(
    o: &mut Out,
    cgroups: &[(String, &LightCgroup)],
    histograms: bool,
    name_of: &dyn Fn(&str) -> String,
) {
    let rows: Vec<(&str, String, &LightCgroup)> = cgroups
        .iter()
        .map(|(cg, e)| (cg.as_str(), name_of(&e.dev), *e))
        .collect();
    type CgCount = fn(&LightCgroup) -> u64;
    let counts: [(&Family, CgCount); 2] = [
        (&CGROUP_REQUESTS_TOTAL, |e| e.ios),
        (&CGROUP_BYTES_TOTAL, |e| e.bytes),
    ];
    for (family, value) in counts {
        let mut f = o.family(family);
        for (cg, dev, e) in &rows {
            f.sample(&[("cgroup", cg), ("device", dev), ("op", &e.op)], value(e));
        }
    }
    if !histograms {
        return;
    }
    let mut f = o.family(&CGROUP_REQUEST_SECONDS);
    for (cg, dev, e) in &rows {
        f.le_histogram(
            &[("cgroup", cg), ("device", dev), ("op", &e.op)],
            &e.le,
            e.time_ns,
        );
    }
}

/// The softirq vectors, as /proc/softirqs names them (lower case).
const SOFTIRQS: [&str; 10] = [
    "hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu",
];

#[cfg(test)]
mod tests;

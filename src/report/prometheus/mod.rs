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
    LightCgroup, LightCpu, LightDevice, LightOp, LightUring, ProgramStats, StageHist, OPS,
};
mod exposition;

use exposition::{seconds, Out};

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

/// What the kernel keeps of each program: the events it skipped always,
/// runs and run time only while `kernel.bpf_stats_enabled` (else no
/// samples, and `iosleuth_not_watched{what="bpf_run_time"}`), as
/// ebpf_exporter's `ebpf_exporter_ebpf_program_run_time_seconds`.
fn programs(o: &mut Out, programs: &[ProgramStats]) {
    o.family(
        "iosleuth_bpf_program_missed_total",
        "counter",
        "Events a BPF program was not run for: it was already running on that CPU when an interrupt raised its event again (the kernel's recursion_misses). A block program's misses are requests missing from these figures.",
    );
    for p in programs {
        if let Some(m) = p.missed {
            o.sample(
                "iosleuth_bpf_program_missed_total",
                &[("program", &p.name)],
                m,
            );
        }
    }
    o.family(
        "iosleuth_bpf_program_runs_total",
        "counter",
        "Runs of a BPF program, while the kernel counts them (kernel.bpf_stats_enabled).",
    );
    for p in programs {
        if let Some(n) = p.run_count {
            o.sample(
                "iosleuth_bpf_program_runs_total",
                &[("program", &p.name)],
                n,
            );
        }
    }
    o.family(
        "iosleuth_bpf_program_run_seconds_total",
        "counter",
        "Time a BPF program ran, while the kernel counts it (kernel.bpf_stats_enabled).",
    );
    for p in programs {
        if let Some(ns) = p.run_time_ns {
            o.sample(
                "iosleuth_bpf_program_run_seconds_total",
                &[("program", &p.name)],
                seconds(ns),
            );
        }
    }
}

/// io_uring requests by what they ask (`op`: read, write, fsync,
/// uring_cmd, net, wait, file, other), from submission to completion.
fn uring_families(o: &mut Out, groups: &[LightUring]) {
    o.family(
        "iosleuth_io_uring_request_seconds",
        "histogram",
        "Time from an io_uring request's submission to its completion queue entry, of requests completed whose submission was seen.",
    );
    for g in groups {
        o.histogram(
            "iosleuth_io_uring_request_seconds",
            &[("op", &g.op)],
            &g.latency,
        );
    }
    type Count = fn(&LightUring) -> u64;
    let counters: [(&str, &str, Count); 4] = [
        (
            "iosleuth_io_uring_requests_total",
            "io_uring requests completed (their last completion queue entry), timed or not.",
            |g| g.requests,
        ),
        (
            "iosleuth_io_uring_untimed_requests_total",
            "io_uring requests completed whose submission was not seen (submitted before the programs were attached, or no room for their state): not in the histogram.",
            |g| g.untimed,
        ),
        (
            "iosleuth_io_uring_punted_total",
            "io_uring requests handed to an io-wq worker thread: they could not be issued without blocking.",
            |g| g.punted,
        ),
        (
            "iosleuth_io_uring_errors_total",
            "io_uring completion queue entries with a negative result.",
            |g| g.errors,
        ),
    ];
    for (name, help, value) in counters {
        o.family(name, "counter", help);
        for g in groups {
            o.sample(name, &[("op", &g.op)], value(g));
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
    let stages: [(&str, &str, Stage); 3] = [
        (
            "iosleuth_block_queued_seconds",
            "Time from a request's allocation to its issue to the driver (blktrace's G to D), of requests completed.",
            |o| &o.queued,
        ),
        (
            "iosleuth_block_device_seconds",
            "Time from a request's issue to its completion (D2C), of requests completed.",
            |o| &o.device,
        ),
        (
            "iosleuth_block_request_seconds",
            "Time from a request's allocation to its completion, of requests completed.",
            |o| &o.total,
        ),
    ];
    for (name, help, stage) in stages {
        o.family(name, "histogram", help);
        for (dev, d) in &devices {
            for op in OPS {
                if let Some(x) = d.ops.get(op) {
                    o.histogram(name, &[("device", dev), ("op", op)], stage(x));
                }
            }
        }
    }
    let per_op: [(&str, &str, OpCount); 2] = [
        (
            "iosleuth_block_requests_total",
            "Requests completed (a request completed in parts counts once).",
            |o| o.ios,
        ),
        ("iosleuth_block_bytes_total", "Bytes completed.", |o| {
            o.bytes
        }),
    ];
    for (name, help, value) in per_op {
        o.family(name, "counter", help);
        for (dev, d) in &devices {
            for op in OPS {
                if let Some(x) = d.ops.get(op) {
                    o.sample(name, &[("device", dev), ("op", op)], value(x));
                }
            }
        }
    }
    o.family(
        "iosleuth_block_merges_total",
        "counter",
        "Merges: a bio into a request's back or front, or two requests.",
    );
    for (dev, d) in &devices {
        let c = &d.counters;
        for (kind, n) in [
            ("back", c.back_merges),
            ("front", c.front_merges),
            ("request", c.rq_merges),
        ] {
            o.sample(
                "iosleuth_block_merges_total",
                &[("device", dev), ("kind", kind)],
                n,
            );
        }
    }
    type Count = fn(&crate::model::light::LightCounters) -> u64;
    // The last: no samples where throttled bios are not counted (unknown).
    let per_device: [(&str, &str, Count, bool); 8] = [
        (
            "iosleuth_block_splits_total",
            "Bios split to fit the device's limits.",
            |c| c.splits,
            true,
        ),
        (
            "iosleuth_block_requeues_total",
            "Requests the driver gave back to be issued again.",
            |c| c.requeues,
            true,
        ),
        (
            "iosleuth_block_errors_total",
            "Requests completed with an error.",
            |c| c.errors,
            true,
        ),
        (
            "iosleuth_block_partial_completions_total",
            "Completions of part of a request.",
            |c| c.partial,
            true,
        ),
        (
            "iosleuth_block_sequential_requests_total",
            "Requests that began where the previous one issued on the same CPU to the same device ended.",
            |c| c.seq_requests,
            true,
        ),
        (
            "iosleuth_cgroup_uncounted_requests_total",
            "Completions in the device's figures but in no cgroup's: the kernel's cgroup table was full.",
            |c| c.cgroup_full,
            true,
        ),
        (
            "iosleuth_block_throttled_bios_total",
            "Bios held back by a cgroup's I/O limit (blk-throttle), counted as its dispatch work submits them.",
            |c| c.throttled,
            s.throttle,
        ),
        (
            "iosleuth_block_throttled_bytes_total",
            "Bytes of those bios.",
            |c| c.throttled_bytes,
            s.throttle,
        ),
    ];
    for (name, help, value, known) in per_device {
        o.family(name, "counter", help);
        for (dev, d) in devices.iter().filter(|_| known) {
            o.sample(name, &[("device", dev)], value(&d.counters));
        }
    }
    o.family(
        "iosleuth_block_untimed_requests_total",
        "counter",
        "Requests completed but not in the latency histograms: issued before the programs were attached, whose state did not fit the kernel's request table, or (never_issued) ended without reaching the driver, as an fsync's empty write is, timed in request_seconds only.",
    );
    for (dev, d) in &devices {
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
            o.sample(
                "iosleuth_block_untimed_requests_total",
                &[("device", dev), ("reason", reason)],
                n,
            );
        }
    }
    cgroup_families(&mut o, s.cgroups, s.cgroup_histograms, &name_of);
    uring_families(&mut o, s.io_uring);
    o.family(
        "iosleuth_slow_requests_total",
        "counter",
        "Slow requests (at least the running p99 of their device and operation): kept whole, over the per-second cap, or lost to a full ring buffer.",
    );
    for (dev, d) in &devices {
        let c = &d.counters;
        for (outcome, n) in [
            ("kept", c.slow_sent),
            ("capped", c.slow_capped),
            ("ring_full", c.ring_full),
        ] {
            o.sample(
                "iosleuth_slow_requests_total",
                &[("device", dev), ("outcome", outcome)],
                n,
            );
        }
    }
    let (waits, waits_lost, events, events_lost) = s.cpus.iter().fold((0, 0, 0, 0), |t, c| {
        (
            t.0 + c.long_waits,
            t.1 + c.waits_lost,
            t.2 + c.events,
            t.3 + c.events_lost,
        )
    });
    o.family(
        "iosleuth_sched_runqueue_stalls_total",
        "counter",
        "Threads that waited runnable at least iosleuth_sched_runqueue_stall_threshold_seconds: kept, or lost to a full ring buffer.",
    );
    o.sample(
        "iosleuth_sched_runqueue_stalls_total",
        &[("outcome", "kept")],
        waits,
    );
    o.sample(
        "iosleuth_sched_runqueue_stalls_total",
        &[("outcome", "lost")],
        waits_lost,
    );
    o.family(
        "iosleuth_sched_runqueue_stall_threshold_seconds",
        "gauge",
        "The runnable wait from which a thread counts as stalled.",
    );
    o.sample(
        "iosleuth_sched_runqueue_stall_threshold_seconds",
        &[],
        seconds(s.wait_min_ns),
    );
    o.family(
        "iosleuth_kept_events_total",
        "counter",
        "Events the flight recorder keeps whole (the journal's commits and checkpoints, balance_dirty_pages pauses, wbt steps): kept, or lost to a full ring buffer.",
    );
    o.sample("iosleuth_kept_events_total", &[("outcome", "kept")], events);
    o.sample(
        "iosleuth_kept_events_total",
        &[("outcome", "lost")],
        events_lost,
    );
    o.family(
        "iosleuth_cpu_hardirq_seconds_total",
        "counter",
        "Time in hard interrupt handlers, by CPU.",
    );
    for c in s.cpus {
        let cpu = c.cpu.to_string();
        o.sample(
            "iosleuth_cpu_hardirq_seconds_total",
            &[("cpu", &cpu)],
            seconds(c.hardirq_ns),
        );
    }
    o.family(
        "iosleuth_cpu_softirq_seconds_total",
        "counter",
        "Time in soft interrupts, by CPU and vector.",
    );
    for c in s.cpus {
        let cpu = c.cpu.to_string();
        for (vector, ns) in SOFTIRQS.iter().zip(&c.softirq_ns) {
            o.sample(
                "iosleuth_cpu_softirq_seconds_total",
                &[("cpu", &cpu), ("vector", vector)],
                seconds(*ns),
            );
        }
    }
    o.family(
        "iosleuth_ring_records",
        "gauge",
        "Slow requests and flight-recorder records kept in memory for the next trigger.",
    );
    o.sample("iosleuth_ring_records", &[], s.ring.records);
    o.family(
        "iosleuth_ring_bytes",
        "gauge",
        "Bytes of the records kept in memory.",
    );
    o.sample("iosleuth_ring_bytes", &[], s.ring.bytes);
    o.family(
        "iosleuth_ring_evicted_total",
        "counter",
        "Records pushed out of memory by its size bound before their time.",
    );
    o.sample("iosleuth_ring_evicted_total", &[], s.ring.evicted_early);
    o.family(
        "iosleuth_triggers_total",
        "counter",
        "Triggers that fired, by reason: acted on (a capture kept) or not (rate limit, a capture already running).",
    );
    for (reason, acted, skipped) in s.triggers {
        o.sample(
            "iosleuth_triggers_total",
            &[("reason", reason), ("outcome", "captured")],
            acted,
        );
        o.sample(
            "iosleuth_triggers_total",
            &[("reason", reason), ("outcome", "skipped")],
            skipped,
        );
    }
    o.family(
        "iosleuth_captures_kept",
        "gauge",
        "Captures kept on disk (each with its diagnosis).",
    );
    o.sample("iosleuth_captures_kept", &[], s.captures_kept);
    o.family(
        "iosleuth_captures_bytes",
        "gauge",
        "Bytes of the captures kept on disk.",
    );
    o.sample("iosleuth_captures_bytes", &[], s.captures_bytes);
    o.family(
        "iosleuth_finding",
        "gauge",
        "A finding of the last diagnosis (1 while it holds).",
    );
    for f in s.findings {
        o.sample(
            "iosleuth_finding",
            &[
                ("rule", &f.rule),
                ("severity", &f.severity),
                ("device", &f.device),
            ],
            1,
        );
    }
    programs(&mut o, s.programs);
    o.family(
        "iosleuth_not_watched",
        "gauge",
        "What this daemon cannot see on this machine (1 each): its figures are unknown, not zero. what: bpf_run_time, the programs' runs and run time (the kernel keeps them only while kernel.bpf_stats_enabled is 1); runqueue_off, runqueue waits not watched (--runqueue off); runqueue_auto, the scheduler hooks detached by --runqueue auto while they would cost over a point of CPU; throttled_bios, no blk-throttle dispatch work in /proc/kallsyms to count held bios by; queue_depth_past_cpu_limit, more than 256 CPUs: the queue depth at issue adds up the requests in flight of the first 256; event:SYSTEM:EVENT, a tracepoint this kernel lacks.",
    );
    for what in s.not_watched {
        o.sample("iosleuth_not_watched", &[("what", what)], 1);
    }
    o.family(
        "iosleuth_build_info",
        "gauge",
        "The iosleuth that serves these metrics.",
    );
    o.sample(
        "iosleuth_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    if let Some(p) = s.process {
        o.family(
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
        );
        o.sample("process_cpu_seconds_total", &[], p.cpu_seconds);
        o.family(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
        );
        o.sample("process_resident_memory_bytes", &[], p.resident_bytes);
        o.family(
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
        );
        o.sample("process_virtual_memory_bytes", &[], p.virtual_bytes);
        o.family(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
        );
        o.sample("process_open_fds", &[], p.open_fds);
        o.family(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
        );
        o.sample("process_start_time_seconds", &[], p.start_time_seconds);
    }
    o.0
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
    let counts: [(&str, &str, CgCount); 2] = [
        (
            "iosleuth_cgroup_requests_total",
            "Requests completed, by the cgroup they were charged to (\"other\": the cgroups without their own series).",
            |e| e.ios,
        ),
        (
            "iosleuth_cgroup_bytes_total",
            "Bytes completed, by the cgroup they were charged to.",
            |e| e.bytes,
        ),
    ];
    for (name, help, value) in counts {
        o.family(name, "counter", help);
        for (cg, dev, e) in &rows {
            o.sample(
                name,
                &[("cgroup", cg), ("device", dev), ("op", &e.op)],
                value(e),
            );
        }
    }
    if !histograms {
        return;
    }
    let name = "iosleuth_cgroup_request_seconds";
    o.family(
        name,
        "histogram",
        "Time from a request's allocation to its completion, by the cgroup it was charged to (counted under these bounds in the kernel: exact).",
    );
    for (cg, dev, e) in &rows {
        o.le_histogram(
            name,
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

//! How much of the workload's time a finding explains, and what no finding
//! explains.
//!
//! The workload's time is the time of the operations the trace follows
//! from begin to end: the probe's marked operations when there are any,
//! else every syscall (`outliers.totals`), each split by the outlier
//! analysis into on CPU, runnable, at the device, queued, journal space,
//! journal commit and other waits. A cause acts on one or more of these
//! parts (an RT task makes threads runnable, a small journal makes them
//! wait for journal space, a cgroup limit holds bios before the device,
//! which the workload sees as waiting with nothing at the device); its
//! share is those parts' time over the workload's time. The breakdown
//! needs scheduler events: without them there is no share.

use super::{Finding, Severity};
use crate::analyze::outliers::{Breakdown, Outlier};
use crate::analyze::Analysis;
use serde_json::json;

/// Parts of an operation's time, as the breakdown names them.
#[derive(Clone, Copy)]
enum Part {
    Device,
    Queued,
    JournalSpace,
    Journal,
    Runnable,
    OtherWait,
}

impl Part {
    fn ns(self, b: &Breakdown) -> u64 {
        match self {
            Part::Device => b.device_only_ns,
            Part::Queued => b.queued_ns,
            Part::JournalSpace => b.journal_space_ns,
            Part::Journal => b.journal_ns,
            Part::Runnable => b.runnable_ns,
            Part::OtherWait => b.other_wait_ns,
        }
    }
}

/// The parts of the workload's time each rule's cause produces.
fn parts_of(id: &str) -> &'static [Part] {
    match id {
        "journal_space_stall" => &[Part::JournalSpace],
        "rt_starvation" => &[Part::Runnable],
        "device_latency_spike" => &[Part::Device],
        // Held before the device: waiting with no request there.
        "cgroup_io_throttle" | "dirty_throttling" => &[Part::OtherWait],
        "wbt_throttling" => &[Part::OtherWait, Part::Queued],
        "queue_saturation" | "scheduler_overhead" => &[Part::Queued],
        // Journal writes and flushes per sync: commits and the device.
        "sync_write_amplification" => &[Part::Device, Part::Queued, Part::Journal],
        // Causes that make the device do more or smaller work: the time at
        // the device and queued for it (an upper bound of what they cost).
        _ => &[Part::Device, Part::Queued],
    }
}

/// The kinds of operations that make up the workload's time.
fn workload_kinds(a: &Analysis) -> Vec<&str> {
    let totals = &a.outliers.totals;
    let probes: Vec<&str> = totals
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("probe "))
        .collect();
    if !probes.is_empty() {
        return probes;
    }
    totals
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("syscall "))
        .collect()
}

/// The workload's time and its breakdown, when the capture can tell.
pub(in crate::diagnose) fn workload_time(a: &Analysis) -> Option<(u64, Breakdown)> {
    if a.sched.switches == 0 {
        return None;
    }
    let mut total = 0;
    let mut b = Breakdown::default();
    for k in workload_kinds(a) {
        let t = &a.outliers.totals[k];
        total += t.latency_ns;
        crate::analyze::outliers::add_breakdown(&mut b, &t.breakdown);
    }
    (total > 0).then_some((total, b))
}

/// The share of the workload's time, in percent, that the finding's
/// cause explains; also written into its evidence.
pub fn attach_shares(a: &Analysis, findings: &mut [Finding]) -> Vec<Option<f64>> {
    let Some((total, b)) = workload_time(a) else {
        return vec![None; findings.len()];
    };
    findings
        .iter_mut()
        .map(|f| {
            let ns: u64 = parts_of(f.id).iter().map(|p| p.ns(&b)).sum();
            let share = (ns as f64 * 1000.0 / total as f64).round() / 10.0;
            if let Some(e) = f.evidence.as_object_mut() {
                e.insert("share_of_workload_time_percent".into(), json!(share));
            }
            Some(share)
        })
        .collect()
}

/// Slow operations: at least this many times their kind's median…
const SLOW_TIMES_MEDIAN: u64 = 10;
/// …and at least this long (shorter ones are scheduling noise to a user).
const SLOW_MIN_NS: u64 = 5_000_000;

/// When the workload has slow operations and no rule named a cause: how
/// many, how slow, and where their time went, so the user knows where to
/// look next. An `info`: it names no cause.
pub fn unexplained(a: &Analysis) -> Option<Finding> {
    let mut slow: Vec<(&str, &Outlier, u64)> = Vec::new();
    for kind in workload_kinds(a) {
        let Some(median) = super::rules::median_of(a, kind) else {
            continue;
        };
        for o in a.outliers.by_kind.get(kind).into_iter().flatten() {
            if o.latency_ns >= SLOW_MIN_NS && o.latency_ns >= SLOW_TIMES_MEDIAN * median.max(1) {
                slow.push((kind, o, median));
            }
        }
    }
    let (kind, worst, median) = *slow.iter().max_by_key(|(_, o, _)| o.latency_ns)?;
    // Without scheduler events the breakdown cannot tell waiting from
    // running: say that there are slow operations, not where.
    let measured = a.sched.switches > 0;
    let total: u64 = slow.iter().map(|(_, o, _)| o.latency_ns).sum();
    let mut b = Breakdown::default();
    for (_, o, _) in &slow {
        crate::analyze::outliers::add_breakdown(&mut b, &o.breakdown);
    }
    let pct = |ns: u64| (ns as f64 * 1000.0 / total.max(1) as f64).round() / 10.0;
    let parts = [
        ("device", b.device_only_ns),
        ("queued", b.queued_ns),
        ("journal_space", b.journal_space_ns),
        ("journal", b.journal_ns),
        ("runnable", b.runnable_ns),
        ("on_cpu", b.on_cpu_ns),
        ("other_wait", b.other_wait_ns),
    ];
    let (top, top_ns) = parts.iter().max_by_key(|(_, ns)| *ns).copied()?;
    let ms = |ns: u64| (ns as f64 / 1e4).round() / 100.0;
    Some(Finding {
        id: "unexplained",
        severity: Severity::Info,
        title: format!(
            "{} slow operation{} that no rule explains (slowest: {kind} {} ms, {}x its median); {}",
            slow.len(),
            if slow.len() == 1 { "" } else { "s" },
            ms(worst.latency_ns),
            worst.latency_ns / median.max(1),
            if !measured {
                "the capture has no scheduler events to tell where their time went (record the sched set)".to_string()
            } else {
                format!(
                    "{}% of their time {}",
                    pct(top_ns),
                    match top {
                        "device" => "at the device",
                        "queued" => "queued for the device",
                        "journal_space" => "waiting for journal space",
                        "journal" => "waiting for a journal commit",
                        "runnable" => "runnable, waiting for a CPU",
                        "on_cpu" => "running on a CPU",
                        _ => "blocked on something else (locks, sleeps, pipes)",
                    }
                )
            }
        ),
        evidence: json!({
            "slow_operations": slow.len(),
            "slow_time_ms": ms(total),
            "slowest": {"kind": kind, "pid": worst.pid, "comm": worst.comm, "latency_ms": ms(worst.latency_ns), "median_ms": ms(median), "summary": worst.summary},
            "percent_of_slow_time": measured.then(|| parts.iter().map(|(n, ns)| (n.to_string(), json!(pct(*ns)))).collect::<serde_json::Map<_, _>>()),
        }),
        explanation: format!(
            "Operations at least {SLOW_TIMES_MEDIAN}x their median and {} ms took {} ms in all, and none of the rules found its cause in this capture. Their time is split as the outlier breakdowns measured it; the largest part says which layer to look at next (report's slowest operations list each one).",
            SLOW_MIN_NS / 1_000_000,
            ms(total)
        ),
        workaround: "look at the slowest operations in `iosleuth report` (their breakdown and the request or CPU holder they waited for); record the missing event sets (`--events all`) if a layer is not in the capture".into(),
    })
}

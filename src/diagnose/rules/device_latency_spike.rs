//! Case 4 of DESIGN.md: an operation far slower than usual, nearly all of
//! it spent waiting for the device.
//!
//! The outliers analysis follows the slowest operations of each kind
//! (syscalls, probe operations, ext4_sync_file) through the layers: how
//! long they were blocked with a request at the device, and the request
//! that held them longest. The rule takes the slowest of each kind and
//! asks, in turn: slow enough, mostly device time, one request holding it
//! (not a busy device: queue_saturation), far above its kind's median, and
//! not an RT-held wait of the thread that completes I/O (rt_starvation).

use super::helpers::{median_of, ms, not_any};
use super::rt_starvation::rt_held_waits;
use crate::analyze::outliers::Outlier;
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "device_latency_spike",
    looks_for: "an operation far slower than its median, nearly all of it device time",
    check,
};

/// Chosen between case 4's normal fsyncs (< 5 ms) and its spikes (150–270
/// ms); the workaround's `probe fsync --stop-above 50` uses the same bound.
const MIN_NS: u64 = 50_000_000;
/// Chosen: "nearly all" device time (case 4: CPU idle, the gap at the
/// device; slowdev-fsync.cap: 99.6 %).
const MIN_DEVICE_PERCENT: f64 = 80.0;
/// Commit 4302d61: a lab journal run's openat was 81 % device over 28.8 ms
/// but its longest request 1.2 ms (a busy device, busy-device.synthetic.txt).
const MIN_MAIN_REQUEST_SHARE: f64 = 0.5;
/// Chosen from case 4: under 5 ms normally, 150–270 ms in a spike (30x+).
const MIN_TIMES_MEDIAN: u64 = 10;

fn check(a: &Analysis) -> Verdict {
    let mut best: Option<(&str, &Outlier, u64)> = None;
    let mut why = Vec::new();
    for (kind, list) in &a.outliers.by_kind {
        let Some(o) = list.first() else { continue };
        let median = median_of(a, kind).unwrap_or(0);
        if o.latency_ns < MIN_NS {
            continue;
        }
        if let Err(reason) = held_by_one_request(a, kind, o, median) {
            why.push(reason);
            continue;
        }
        if best.is_none_or(|b| o.latency_ns > b.1.latency_ns) {
            best = Some((kind, o, median));
        }
    }
    let Some((kind, o, median)) = best else {
        return not_any(
            why,
            format!("no operation took {} ms or more", MIN_NS / 1_000_000),
        );
    };
    Verdict::Fired(finding(a, kind, o, median))
}

/// Whether the slowest operation of `kind` (at least MIN_NS) was a device
/// spike, or why not.
fn held_by_one_request(a: &Analysis, kind: &str, o: &Outlier, median: u64) -> Result<(), String> {
    // Blocked with a request at the device, inside a checkpoint or not.
    let device: u64 = o.breakdown.device_ns.values().sum();
    let share = device as f64 / o.latency_ns.max(1) as f64;
    if share < MIN_DEVICE_PERCENT / 100.0 {
        return Err(format!(
            "slowest {kind} ({} ms) was {:.0}% device time",
            ms(o.latency_ns),
            share * 100.0
        ));
    }
    // One request must have held it: device time spread over many
    // short requests is a busy device (queue_saturation), not a spike.
    let longest = o.main_request.as_ref().map(|r| r.overlap_ns).unwrap_or(0);
    if (longest as f64) < MIN_MAIN_REQUEST_SHARE * o.latency_ns as f64 {
        return Err(format!(
            "slowest {kind} ({} ms) was {:.0}% device time, but no one request held it: the longest it waited for covers {} ms ({:.0}%), a busy device rather than a slow request (see queue_saturation)",
            ms(o.latency_ns),
            share * 100.0,
            ms(longest),
            longest as f64 * 100.0 / o.latency_ns.max(1) as f64
        ));
    }
    if median > 0 && o.latency_ns < MIN_TIMES_MEDIAN * median {
        return Err(format!(
            "slowest {kind} ({} ms) is under {MIN_TIMES_MEDIAN}x its median ({} ms)",
            ms(o.latency_ns),
            ms(median)
        ));
    }
    // Time "at the device" while the thread that would complete the
    // request could not run: the CPU was the bottleneck, not the device.
    let (from, to) = (o.start_ns, o.start_ns + o.latency_ns);
    if let Some(w) = rt_held_waits(a).find(|w| w.start_ns < to && w.start_ns + w.wait_ns > from) {
        let h = &w.held_by[0];
        return Err(format!(
            "slowest {kind} ({} ms) overlaps {} ({})'s {} ms wait for CPU {} held by real-time {} ({}): completion work was starved (rt_starvation), not the device",
            ms(o.latency_ns),
            w.comm,
            w.pid,
            ms(w.wait_ns),
            w.cpu,
            h.comm,
            h.pid
        ));
    }
    Ok(())
}

/// The finding for the slowest spike, `o` of `kind`.
fn finding(a: &Analysis, kind: &str, o: &Outlier, median: u64) -> Finding {
    let spikes = a.outliers.by_kind[kind]
        .iter()
        .filter(|x| {
            x.latency_ns >= MIN_NS
                && x.percent.get("device").copied().unwrap_or(0.0) >= MIN_DEVICE_PERCENT
        })
        .count();
    let r = o.main_request.as_ref();
    Finding {
        id: RULE.id,
        severity: Severity::Critical,
        title: format!(
            "{kind}: {} ms instead of {} ms, {:.0}% of it waiting for the device{}",
            ms(o.latency_ns),
            ms(median),
            o.percent.get("device").copied().unwrap_or(0.0),
            r.map(|r| format!(" ({} {})", r.class, r.dev)).unwrap_or_default()
        ),
        evidence: json!({
            "operation": kind,
            "latency_ns": o.latency_ns,
            "median_ns": median,
            "spikes_in_top": spikes,
            "device_percent": o.percent.get("device"),
            "cpu_idle_percent": o.cpu_idle_percent,
            "request": r,
            "summary": o.summary,
        }),
        explanation: format!(
            "The operation was blocked while one request sat at the device{}, and its CPU was idle {:.0}% of that time: neither the CPU nor the scheduler held it up, the device did (case 4: an eMMC took 270 ms for one journal write).",
            r.and_then(|r| r.d2c_ns).map(|d| format!(" for {} ms", ms(d))).unwrap_or_default(),
            o.cpu_idle_percent
        ),
        workaround: "take the synchronous write off the latency-critical path (a separate I/O thread, or an asynchronous commit such as PostgreSQL's synchronous_commit=off), or replace the device; confirm with iosleuth probe fsync --path FILE --stop-above 50".into(),
    }
}

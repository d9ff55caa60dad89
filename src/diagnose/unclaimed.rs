//! Where the workload's time went when no rule names why: the finding
//! `unexplained`, which names the largest part of the time that no
//! finding's cause accounts for, and what held it there (the tasks on the
//! CPU, the kernel function the threads blocked in, the request at the
//! device).
//!
//! Two measures, as a user reads a breakdown: a part that holds ≥ 30 % of
//! the slow operations' time (10x their kind's median and 5 ms), or a wait
//! (runnable, blocked in the kernel) that holds ≥ 20 % of all the
//! workload's time. Time at the device and on the CPU is the work itself:
//! only slow operations make it a finding. Waits that are not I/O at all
//! (a pipe, a futex, poll, a timer: asleep by choice) are not the
//! workload's slow operations; with kernel stacks, a sleep in a function
//! that does I/O (a FUSE request, an NFS call) is.

use super::rules::{cpu_holders, holders_text, slow_operations, workload_ops, worth_naming, Slow};
use super::{impact, Finding, Severity};
use crate::analyze::outliers::{describe_part, Breakdown, Outlier};
use crate::analyze::stacks::function;
use crate::analyze::Analysis;
use crate::model::units::percent_1dp as pct;
use serde_json::json;

/// The id of the finding that names no cause, only where time went.
pub const UNEXPLAINED: &str = "unexplained";

/// A part this large of the slow operations' time is named.
const SLOW_PART_PERCENT: f64 = 30.0;
/// A wait this large of all the workload's time is named.
const WAIT_PART_PERCENT: f64 = 20.0;
/// A wait that costs the workload this share of its time (and 5 % of the
/// trace's span) is a warning; below, or the I/O's own time, an info: it
/// names no cause.
const WARNING_SHARE_PERCENT: f64 = 5.0;

/// Functions a thread blocks in while the I/O it asked for is done: the
/// time at the device (and in the journal commit an fsync needs) that the
/// block events would have measured as such, not a wait beside the I/O.
const IO_ITSELF: &[&str] = &[
    "jbd2_log_wait_commit",
    "folio_wait_writeback",
    "folio_wait_bit",
    "folio_wait_bit_common",
    "__folio_lock",
    "submit_bio_wait",
    "__filemap_fdatawait_range",
    "filemap_fdatawait",
    "bit_wait_io",
    "io_schedule",
    "io_schedule_timeout",
    "wait_for_completion_io",
    "__blkdev_direct_IO_simple",
    "iomap_dio_rw",
    "__iomap_dio_rw",
    "blk_mq_get_tag",
];

/// Functions a thread sleeps in when it waits for something other than
/// I/O: a pipe or socket, a futex, poll/select/epoll, a timer, a child, a
/// signal, a terminal (prefixes of kernel function names).
const NOT_IO: &[&str] = &[
    "pipe_",
    "futex_",
    "do_sys_poll",
    "do_select",
    "core_sys_select",
    "ep_poll",
    "do_epoll_wait",
    "hrtimer_nanosleep",
    "do_nanosleep",
    "common_nsleep",
    "do_wait",
    "kernel_wait4",
    "unix_",
    "sk_wait",
    "tcp_",
    "inet_",
    "n_tty_",
    "tty_",
    "do_sigtimedwait",
    "sigsuspend",
    "__x64_sys_pause",
];

/// Whether the operation's sleep (asleep by choice) was in a function
/// that does I/O: only kernel stacks tell.
fn sleeps_for_io(o: &Outlier) -> bool {
    o.blocked_in.as_ref().is_some_and(|b| {
        !b.frames
            .iter()
            .any(|f| NOT_IO.iter().any(|p| function(f).starts_with(p)))
    })
}

/// The operation's breakdown with its sleep counted only when it was for
/// I/O, and whether it is an operation of the workload at all (not mostly
/// a sleep for something else).
fn io_part(o: &Outlier) -> Option<Breakdown> {
    let mut b = o.breakdown.clone();
    if !sleeps_for_io(o) {
        if b.asleep_ns * 2 >= o.latency_ns {
            return None;
        }
        b.asleep_ns = 0;
    }
    Some(b)
}

/// `add_transaction_credits ← start_this_handle ← jbd2__journal_start`:
/// where the operations blocked longest, from their kernel stacks.
fn blocked_in(ops: &[&Outlier]) -> Option<(String, u64)> {
    let mut by: Vec<(String, u64)> = Vec::new();
    for o in ops {
        let Some(b) = &o.blocked_in else { continue };
        let chain = b
            .frames
            .iter()
            .map(|f| function(f))
            .filter(|f| !f.contains("schedule") && !f.starts_with("__wait") && *f != "[unknown]")
            .take(3)
            .collect::<Vec<_>>()
            .join(" ← ");
        match by.iter_mut().find(|(c, _)| *c == chain) {
            Some(x) => x.1 += b.ns,
            None => by.push((chain, b.ns)),
        }
    }
    by.into_iter().max_by_key(|(_, ns)| *ns)
}

/// What held the operations in `part`, for the title: the CPU's holders,
/// the kernel function, the request.
fn held_by(
    a: &Analysis,
    part: &str,
    ops: &[&Outlier],
    part_ns: u64,
) -> (String, serde_json::Value) {
    match part {
        "runnable" => {
            let h = cpu_holders(ops.iter().copied());
            let held: u64 = h.iter().map(|x| x.ns).sum();
            if h.is_empty() {
                return (String::new(), json!(null));
            }
            (
                format!(": the CPU held by {}", holders_text(&h, held)),
                json!(h.iter().take(5).map(|x| json!({"pid": x.pid, "comm": x.comm, "prio": x.prio, "ms": crate::model::units::ms_2dp(x.ns)})).collect::<Vec<_>>()),
            )
        }
        "other_wait" | "asleep" => match blocked_in(ops) {
            Some((chain, ns)) => (
                format!(
                    " in {chain} ({}% of that time)",
                    pct(ns, part_ns).min(100.0)
                ),
                json!({"kernel_stack": chain, "ms": crate::model::units::ms_2dp(ns)}),
            ),
            None if a.stacks.stacks == 0 => (
                "; record with --stacks to name the kernel function".into(),
                json!(null),
            ),
            None => (String::new(), json!(null)),
        },
        "device" | "queued" => match ops
            .iter()
            .filter_map(|o| o.main_request.as_ref())
            .max_by_key(|r| r.overlap_ns)
        {
            Some(r) => (
                format!(
                    ", longest behind a {} of {} KiB on {} issued by {}",
                    r.class,
                    r.bytes / 1024,
                    r.dev,
                    if r.comm.is_empty() { "?" } else { &r.comm }
                ),
                json!(r),
            ),
            None => (String::new(), json!(null)),
        },
        _ => (String::new(), json!(null)),
    }
}

/// The largest part of the workload's time that no finding claims, when
/// it is large enough to name; or, when no rule fired, the slow
/// operations and where their time went.
pub fn unexplained(a: &Analysis, findings: &[Finding]) -> Option<Finding> {
    let claimed = impact::claimed(findings);
    let measured = a.sched.switches > 0;
    let slow: Vec<(Slow, Breakdown)> = slow_operations(a)
        .into_iter()
        .filter_map(|s| io_part(s.op).map(|b| (s, b)))
        .collect();
    let slow_ns: u64 = slow.iter().map(|(s, _)| s.op.latency_ns).sum();
    let mut slow_b = Breakdown::default();
    for (_, b) in &slow {
        crate::analyze::outliers::add_breakdown(&mut slow_b, b);
    }
    let workload = impact::workload_time(a);
    let total = workload.as_ref().map_or(0, |(t, _)| *t);
    // Running on a CPU is the operation computing (a flame graph says
    // where), not a wait for I/O.
    let named = |n: &&str| !claimed.contains(n) && !matches!(*n, "not_recorded" | "on_cpu");
    // The candidates: (part, its ns, of what whole, over the slow ones?).
    let from_slow = measured
        .then(|| {
            slow_b
                .parts()
                .into_iter()
                .filter(|(n, _)| named(n))
                .max_by_key(|(_, ns)| *ns)
                .filter(|(_, ns)| pct(*ns, slow_ns) >= SLOW_PART_PERCENT)
        })
        .flatten();
    let from_all = workload.as_ref().and_then(|(t, b)| {
        [("runnable", b.runnable_ns), ("other_wait", b.other_wait_ns)]
            .into_iter()
            .filter(|(n, _)| named(n))
            .max_by_key(|(_, ns)| *ns)
            .filter(|(_, ns)| pct(*ns, *t) >= WAIT_PART_PERCENT && worth_naming(a, *ns))
    });
    let ms = crate::model::units::ms_2dp;
    // A wait beside the I/O, not the I/O's own time (at the device, in
    // the journal commit, or blocked in a function that waits for it).
    let is_wait = |part: &str, held: &serde_json::Value| {
        matches!(
            part,
            "runnable" | "queued" | "journal_space" | "other_wait" | "asleep"
        ) && !held["kernel_stack"]
            .as_str()
            .is_some_and(|chain| IO_ITSELF.contains(&chain.split(" ← ").next().unwrap_or("")))
    };
    let severity = |part: &str, held: &serde_json::Value, share: f64, ns: u64| {
        if is_wait(part, held) && share >= WARNING_SHARE_PERCENT && worth_naming(a, ns) {
            Severity::Warning
        } else {
            Severity::Info
        }
    };
    let kinds = crate::analyze::outliers::workload_kinds(&a.outliers).join(", ");
    // The slowest of the slow operations, and the words and evidence that
    // introduce them.
    let slowest = slow
        .iter()
        .map(|(s, _)| (s.kind, s.op, s.median))
        .max_by_key(|(_, o, _)| o.latency_ns);
    let slow_head = slowest.map(|(kind, worst, median)| {
        format!(
            "{} slow operation{} that no rule explains (slowest: {kind} {} ms, {}x its median)",
            slow.len(),
            if slow.len() == 1 { "" } else { "s" },
            ms(worst.latency_ns),
            worst.latency_ns / median.max(1),
        )
    });
    let slowest_json = slowest.map(|(kind, worst, median)| {
        json!({"kind": kind, "pid": worst.pid, "comm": worst.comm, "latency_ms": ms(worst.latency_ns), "median_ms": ms(median), "summary": worst.summary})
    });
    let explanation = "No rule of the catalog names a cause for this time. The part is measured from the scheduler's events (running, waiting for a CPU, asleep) and what the thread's device and journal did meanwhile; what held it there says which layer to look at next.".to_string();
    let workaround = "look at the slowest operations in `iosleuth report` (their breakdown and the request, CPU holder or kernel stack they waited for); record the missing event sets (`--events all`) or `--stacks` if a layer is not in the capture".to_string();
    match (from_all, from_slow) {
        // A wait over all the operations, larger than any slow part.
        (Some((part, ns)), s) if s.is_none_or(|(_, sns)| pct(ns, total) >= pct(sns, slow_ns)) => {
            let ops: Vec<&Outlier> = workload_ops(a).collect();
            let share = pct(ns, total);
            let (holder, held) = held_by(a, part, &ops, ops.iter().map(|o| part_ns(o, part)).sum());
            Some(Finding {
                remedy: None,
                id: UNEXPLAINED,
                severity: severity(part, &held, share, ns),
                title: format!("{kinds} spent {share}% of the workload's time {}{holder}, which no rule explains", describe(a, part)),
                evidence: json!({"part": part, "part_ms": ms(ns), "share_of_workload_time_percent": share, "held_by": held}),
                explanation,
                workaround,
            })
        }
        (_, Some((part, ns))) => {
            let ops: Vec<&Outlier> = slow.iter().map(|(s, _)| s.op).collect();
            let share = pct(ns, total);
            let (holder, held) = held_by(a, part, &ops, ns);
            Some(Finding {
                remedy: None,
                id: UNEXPLAINED,
                severity: severity(part, &held, share, ns),
                title: format!(
                    "{}: {}% of their time {}{holder}",
                    slow_head?,
                    pct(ns, slow_ns),
                    describe(a, part),
                ),
                evidence: json!({
                    "slow_operations": slow.len(),
                    "slow_time_ms": ms(slow_ns),
                    "part": part,
                    "share_of_workload_time_percent": (total > 0).then_some(share),
                    "held_by": held,
                    "slowest": slowest_json,
                    "percent_of_slow_time": slow_b.parts().iter().filter(|(n, _)| *n != "not_recorded").map(|(n, x)| (n.to_string(), json!(pct(*x, slow_ns)))).collect::<serde_json::Map<_, _>>(),
                }),
                explanation,
                workaround,
            })
        }
        // No rule fired and the capture cannot tell where the slow
        // operations' time went: say that there are some.
        _ if findings.is_empty() && !measured && !slow.is_empty() => {
            Some(Finding {
                remedy: None,
                id: UNEXPLAINED,
                severity: Severity::Info,
                title: format!(
                    "{}; the capture has no scheduler events to tell where their time went (record the sched set)",
                    slow_head?
                ),
                evidence: json!({
                    "slow_operations": slow.len(),
                    "slow_time_ms": ms(slow_ns),
                    "slowest": slowest_json,
                }),
                explanation,
                workaround,
            })
        }
        _ => None,
    }
}

/// Where `part` says the time went; without block events, blocked time
/// cannot be told from time at the device.
fn describe(a: &Analysis, part: &str) -> &'static str {
    match part {
        // Only sleeps the stacks show were for I/O are counted.
        "asleep" => "asleep in the kernel waiting for I/O (an interruptible wait)",
        "other_wait" if a.recorded.has_set("block").is_err() => {
            "blocked in the kernel (the block events were not recorded, so time at the device is not told apart)"
        }
        _ => describe_part(part),
    }
}

/// The time of `o` in `part` (`Breakdown::parts` names).
fn part_ns(o: &Outlier, part: &str) -> u64 {
    o.breakdown
        .parts()
        .into_iter()
        .find(|(n, _)| *n == part)
        .map_or(0, |(_, ns)| ns)
}

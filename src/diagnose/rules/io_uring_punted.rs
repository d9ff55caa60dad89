//! io_uring requests punted to io-wq workers, and slow because of it.
//!
//! io_uring issues a request inline when the file can take it without
//! blocking; otherwise it punts the request to an io-wq worker thread
//! (`io_uring_queue_async_work`). Buffered writes to a regular file are
//! hashed by inode there, so the punted writes to one file run one at a
//! time on one worker, whatever the queue depth. Measured on this kernel
//! (6.18, `lab run uring-punted`): fio's 4 KiB buffered random writes at
//! depth 16 on ext4 were all punted, p50 77 µs; on XFS, which writes into
//! the page cache without blocking, 21 of 4096 were, p50 3.3 µs (psync's
//! buffered write on ext4: 2.7 µs). The io_uring analysis gives each
//! punted request's wait from its punt to its first bio (to its completion
//! when it made none) as `other_wait`.

use super::helpers::not_any;
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "io_uring_punted",
    looks_for: "io_uring requests punted to io-wq worker threads (not issued inline) and slow because of it",
    fires_when: "≥ 256 requests punted (`io_uring` set), ≥ 50 % of those submitted, and the io_uring requests' time ≥ 50 % waiting for or in an io-wq worker with no request at the device; critical when that wait is ≥ 25 % of the workload's time",
    stays_silent: "requests issued inline (XFS's buffered writes, O_DIRECT reads and writes of a device that takes them without blocking); a few punts among many requests; punted requests whose time went to the device (their own block requests)",
    needs: &["io_uring"],
    light_lacks: Some("the time each punted request waited for an io-wq worker (it counts the punts; no tracepoint marks a worker taking a request: the full recorder infers it from the worker's scheduler and system call events)"),
    light_lacks_when: None,
    remedy: None,
    check,
};

/// A handful of punts is normal (a request that found a page locked); the
/// lab's ext4 run punted all 4096, its XFS run 21.
const MIN_PUNTED: u64 = 256;
const MIN_PUNTED_PERCENT: f64 = 50.0;
/// Of the io_uring requests' time, waiting for an io-wq worker (the lab's
/// ext4 run: 99 %).
const MIN_WAIT_PERCENT: f64 = 50.0;
const CRITICAL_SHARE_PERCENT: f64 = 25.0;

fn check(a: &Analysis) -> Verdict {
    let u = &a.outliers.io_uring;
    if !u.recorded {
        return not_any(Vec::new(), "no io_uring events in the trace");
    }
    let share_punted = u.punted as f64 * 100.0 / u.submitted.max(1) as f64;
    if u.punted < MIN_PUNTED || share_punted < MIN_PUNTED_PERCENT {
        return not_any(
            Vec::new(),
            format!(
                "{} of {} io_uring requests punted to io-wq ({share_punted:.0}%)",
                u.punted, u.submitted
            ),
        );
    }
    let (mut total, mut wait) = (0u64, 0u64);
    let mut ops: Vec<(&str, u64)> = Vec::new();
    for (kind, t) in &a.outliers.totals {
        if let Some(op) = kind.strip_prefix("io_uring ") {
            total += t.latency_ns;
            wait += t.breakdown.other_wait_ns;
            ops.push((op, t.count));
        }
    }
    let wait_percent = wait as f64 * 100.0 / total.max(1) as f64;
    if wait_percent < MIN_WAIT_PERCENT {
        return not_any(
            Vec::new(),
            format!(
                "{} of {} requests punted, but {wait_percent:.0}% of the requests' time was spent waiting for an io-wq worker",
                u.punted, u.submitted
            ),
        );
    }
    ops.sort_by_key(|x| std::cmp::Reverse(x.1));
    let (op, _) = ops.first().copied().unwrap_or(("request", 0));
    let p50 = u
        .by_op
        .get(op)
        .and_then(|c| c.latency.as_ref())
        .map(|l| l.p50);
    let share = crate::diagnose::impact::workload_time(a)
        .map(|(t, _)| wait as f64 * 100.0 / t.max(1) as f64);
    let writes = op.starts_with("write");
    Verdict::Fired(Finding {
        remedy: None,
        id: RULE.id,
        severity: if share.is_some_and(|s| s >= CRITICAL_SHARE_PERCENT) {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "io_uring {op}: {} of {} requests punted to io-wq workers, {wait_percent:.0}% of their time waiting for or in a worker{}",
            u.punted,
            u.submitted,
            p50.map(|p| format!(" (p50 {:.1} µs)", p as f64 / 1e3)).unwrap_or_default()
        ),
        evidence: json!({
            "submitted": u.submitted,
            "punted": u.punted,
            "punted_percent": share_punted,
            "operation": op,
            "p50_ns": p50,
            "io_wq_wait_ns": wait,
            "requests_ns": total,
            "wait_percent": wait_percent,
            "share_of_workload_percent": share,
        }),
        explanation: format!(
            "io_uring could not issue these requests without blocking, so it handed each to an io-wq worker thread{}: the request waits for a worker, then runs there as a blocking call would. Requests issued inline take microseconds.",
            if writes {
                "; buffered writes to one file are hashed by inode and run one at a time, so a deeper queue does not help"
            } else {
                ""
            }
        ),
        workaround: if writes {
            "keep the file on a file system that writes into the page cache without blocking (XFS, or btrfs, on kernels since 6.1) or open it O_DIRECT; confirm with fio --ioengine=io_uring --direct=0 on the file system: iosleuth's io_uring section should show few punted".into()
        } else {
            "open the file O_DIRECT, or use a file system or device whose reads io_uring can issue without blocking; confirm that the io_uring section shows few punted".into()
        },
    })
}

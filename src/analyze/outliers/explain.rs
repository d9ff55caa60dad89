//! An ended operation explained: percentages, CPU holders, the main
//! request it waited for, and the one-line summary.

use super::inflight::InFlight;
use super::op::OpenOp;
use super::summary::{percentages, Breakdown, Holder, Outlier, Request};
use super::OutlierAnalysis;
use crate::analyze::names::ThreadNames;
use std::collections::BTreeMap;

impl OutlierAnalysis {
    /// An ended operation as an outlier: its breakdown in percent, who held
    /// its CPU, the request it waited for longest, and a line for a person.
    pub(super) fn explain(
        &self,
        op: OpenOp,
        latency: u64,
        file: Option<super::FilePage>,
        names: &ThreadNames,
    ) -> Outlier {
        let b = op.b;
        let percent = percentages(&b, latency);
        let off = b.device_only_ns
            + b.journal_space_ns
            + b.queued_ns
            + b.journal_ns
            + b.other_wait_ns
            + b.asleep_ns;
        let cpu_idle_percent = if off == 0 {
            0.0
        } else {
            (b.cpu_idle_ns as f64 * 1000.0 / off as f64).round() / 10.0
        };
        let mut held_by: Vec<Holder> = op
            .held
            .holders()
            .map(|&(pid, (ns, comm, prio))| Holder {
                pid,
                comm: comm.as_str().to_string(),
                prio,
                ns,
            })
            .collect();
        held_by.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.pid.cmp(&b.pid)));
        held_by.truncate(5);
        let main_request = op
            .waited_on
            .iter()
            .max_by_key(|(k, ns)| (**ns, std::cmp::Reverse(**k)))
            .map(|(&(k, issued), &ns)| {
                let done = self.done.get(&(k, issued));
                // Still at the device (the same request, not a later one
                // at that sector).
                let still = self.queued.get(&k).filter(|r| r.issued_at == Some(issued));
                let (r, completed) = match (done, still) {
                    (Some((r, at)), _) => (r.clone(), Some(*at)),
                    (None, Some(r)) => (r.clone(), None),
                    (None, None) => (
                        InFlight {
                            class: "request",
                            comm: Default::default(),
                            bytes: 0,
                            issued_at: Some(issued),
                            id: None,
                        },
                        None,
                    ),
                };
                Request {
                    dev: format!("{},{}", k.0.major(), k.0.minor()),
                    sector: k.1,
                    bytes: r.bytes,
                    class: r.class,
                    comm: r.comm.as_str().to_string(),
                    d2c_ns: completed.map(|c| c.saturating_sub(issued)),
                    overlap_ns: ns,
                }
            });
        let comm = names.get(op.pid);
        let what = match &file {
            Some(f) => format!("{} in {}", self.kinds.name(op.kind), f.describe()),
            None => self.kinds.name(op.kind).to_string(),
        };
        let mut summary = summarize(
            &what,
            latency,
            &percent,
            cpu_idle_percent,
            &b,
            &held_by,
            &main_request,
        );
        if op.pages_added > 0 {
            summary.push_str(&format!(
                "; page cache: missed {} page{}",
                op.pages_added,
                if op.pages_added == 1 { "" } else { "s" }
            ));
            if op.pages_refaulted > 0 {
                summary.push_str(&format!(
                    ", {} of them evicted by reclaim earlier in the trace (refaults)",
                    op.pages_refaulted
                ));
            }
        }
        Outlier {
            kind: self.kinds.name(op.kind).to_string(),
            pid: op.pid,
            comm,
            start_ns: op.start,
            latency_ns: latency,
            breakdown: b,
            percent,
            cpu_idle_percent,
            held_by,
            main_request,
            // Filled in when the analysis ends, from the stacks.
            blocked_in: None,
            file,
            cache: Some(super::summary::PagesMissed {
                missed: op.pages_added,
                refaulted: op.pages_refaulted,
            }),
            summary,
        }
    }
}

/// `151.4 ms probe fsync: 99.6% device (journal write 7,0 +2048, 4 KiB by
/// jbd2/loop0-8, D2C 150.3 ms), CPU idle 99%`.
fn summarize(
    kind: &str,
    latency: u64,
    percent: &BTreeMap<&'static str, f64>,
    cpu_idle: f64,
    b: &Breakdown,
    held_by: &[Holder],
    req: &Option<Request>,
) -> String {
    let mut parts: Vec<(f64, String)> = Vec::new();
    for (&k, &p) in percent {
        if p < 1.0 {
            continue;
        }
        let what = match k {
            "device" => {
                let class = b
                    .device_ns
                    .iter()
                    .max_by_key(|(_, ns)| **ns)
                    .map(|(c, _)| *c)
                    .unwrap_or("request");
                match req {
                    Some(r) => format!(
                        "device ({} {} sector {}, {} KiB by {}{})",
                        class,
                        r.dev,
                        r.sector,
                        r.bytes / 1024,
                        if r.comm.is_empty() { "?" } else { &r.comm },
                        r.d2c_ns
                            .map(|d| format!(", D2C {:.1} ms", d as f64 / 1e6))
                            .unwrap_or_default()
                    ),
                    None => format!("device ({class})"),
                }
            }
            "runnable" => match held_by.first() {
                Some(h) => format!(
                    "runnable (CPU held by {} {} prio {}{})",
                    h.comm,
                    h.pid,
                    h.prio,
                    if h.prio < 100 { ", RT" } else { "" }
                ),
                None => "runnable".to_string(),
            },
            "on_cpu" => "on CPU".to_string(),
            "not_recorded" => "thread state not recorded (no sched events)".to_string(),
            "queued" => "queued before the device".to_string(),
            "journal" => "journal commit".to_string(),
            "journal_space" => "waiting for journal space (checkpoint)".to_string(),
            "asleep" => "asleep (interruptible wait)".to_string(),
            _ => "blocked in the kernel, no request seen at the device".to_string(),
        };
        parts.push((p, format!("{p:.1}% {what}")));
    }
    parts.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut s = format!(
        "{:.1} ms {kind}: {}",
        latency as f64 / 1e6,
        parts
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let off = 100.0
        - percent.get("on_cpu").copied().unwrap_or(0.0)
        - percent.get("not_recorded").copied().unwrap_or(0.0)
        - percent.get("runnable").copied().unwrap_or(0.0);
    if off >= 1.0 {
        s.push_str(&format!("; CPU idle {cpu_idle:.0}% of the wait"));
    }
    s
}

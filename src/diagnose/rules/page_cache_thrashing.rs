//! Reads slowed by re-reading what reclaim had just evicted.
//!
//! A page the workload reads again is a hit while it stays in the page
//! cache. When the memory the cache may use is smaller than the working
//! set (a memory cgroup's limit, the machine's free memory, a proactive
//! reclaimer), reclaim evicts pages the workload is about to read, and each
//! read of one goes to the device again: a refault (the kernel's
//! `workingset_refault_file`). The page cache analysis sees each eviction
//! and who made it, each page added again, and the operations that added
//! them; the rule takes the share of the workload's time those operations
//! took. Measured in the lab (`cache-refault`): a 16 MiB file read twice
//! at random under a 12 MiB memory cgroup limit.

use super::helpers::not_any;
use crate::analyze::cache::CacheSummary;
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "page_cache_thrashing",
    looks_for: "reads slowed by re-reading pages reclaim had just evicted from the page cache (refaults)",
    fires_when: "≥ 256 pages added again after reclaim evicted them in the trace (`cache` set), the operations that re-read them ≥ 10 % of the workload's time; critical from 25 %",
    stays_silent: "first reads of a file (misses, not refaults); pages removed by truncate, fadvise or drop_caches and read again; reclaim of pages nobody read again",
    needs: &["cache"],
    light_lacks: Some("the page cache events (one per page added to or removed from the cache: millions a second under streaming I/O, where a light capture must cost a point at most)"),
    light_lacks_when: None,
    remedy: None,
    check,
};

/// A working set that fits has none; the lab's thrashing run re-read
/// thousands. A few hundred pages (1 MiB) keeps a reclaim of a program's
/// own libraries out.
const MIN_REFAULTS: u64 = 256;
/// The operations that re-read evicted pages, in percent of the
/// workload's time: a tenth is worth naming, a quarter is the problem.
const MIN_SHARE_PERCENT: f64 = 10.0;
const CRITICAL_SHARE_PERCENT: f64 = 25.0;

fn check(a: &Analysis) -> Verdict {
    let c = &a.cache;
    let refaults: u64 = c.devices.values().map(|d| d.refaults).sum();
    if refaults < MIN_REFAULTS {
        return not_any(
            Vec::new(),
            format!("{refaults} pages refaulted (under {MIN_REFAULTS})"),
        );
    }
    let r = &c.operations_refaulting;
    let Some((total, _)) = crate::diagnose::impact::workload_time(a) else {
        return not_any(
            Vec::new(),
            "the workload's time is not known (no scheduler events)",
        );
    };
    let share = r.latency_ns as f64 * 100.0 / total.max(1) as f64;
    if share < MIN_SHARE_PERCENT {
        return not_any(
            Vec::new(),
            format!(
                "{refaults} pages refaulted, but the operations that re-read them took {share:.1}% of the workload's time"
            ),
        );
    }
    let (dev, d) = c
        .devices
        .iter()
        .max_by_key(|(_, d)| d.refaults)
        .expect("refaults come from a device");
    let by = evicted_by(c);
    let name = super::helpers::device_name(a, dev);
    let kernel = c
        .kernel
        .as_ref()
        .and_then(|k| k.get("workingset_refault_file").copied());
    Verdict::Fired(Finding {
        remedy: None,
        id: RULE.id,
        severity: if share >= CRITICAL_SHARE_PERCENT {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "{}: {} pages read again after reclaim evicted them ({} of {} misses), in {} operations that took {share:.0}% of the workload's time; evicted by {by}",
            name.as_deref().unwrap_or(dev),
            d.refaults,
            d.refaults,
            d.misses,
            r.count
        ),
        evidence: json!({
            "device": dev,
            "refaults": d.refaults,
            "misses": d.misses,
            "evicted": d.evicted,
            "hit_ratio": d.hit_ratio,
            "operations": r.count,
            "operations_latency_ns": r.latency_ns,
            "operations_device_ns": r.device_ns,
            "share_of_workload_percent": share,
            "evicted_by": c.evicted_by,
            "reclaimers": c.reclaimers,
            "kernel_workingset_refault_file": kernel,
        }),
        explanation: format!(
            "The pages the workload reads do not fit in the memory the page cache may use: reclaim ({by}) evicted pages that the workload then read again from the device, {} of them in this trace{}. Each such read waits for the device where a cached one would not.",
            refaults,
            kernel
                .map(|k| format!(" (the kernel counted {k} refaults on the whole machine over the recording, pages evicted before it began included)"))
                .unwrap_or_default()
        ),
        workaround: workaround(c),
    })
}

/// What evicted most, with the thread whose reclaim it was.
fn evicted_by(c: &CacheSummary) -> String {
    let what = c
        .evicted_by
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(k, _)| k.as_str())
        .unwrap_or("reclaim");
    let what = match what {
        "memcg limit" => "the memory cgroup limit",
        "direct reclaim" => "direct reclaim (the machine's free memory)",
        "kswapd" => "kswapd (the machine's free memory)",
        "DAMON" => "DAMON's proactive reclaim",
        other => other,
    };
    match c.reclaimers.first() {
        Some((who, _)) => format!("{what}, reclaim run by {who}"),
        None => what.to_string(),
    }
}

fn workaround(c: &CacheSummary) -> String {
    let top = c
        .evicted_by
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(k, _)| k.as_str());
    match top {
        Some("memcg limit") => "raise the memory limit of the workload's cgroup above its working set (memory.max in cgroup v2, memory.limit_in_bytes in v1), or make the working set smaller; confirm with the cgroup's memory.stat workingset_refault_file, which should stop growing".into(),
        Some("DAMON") => "let DAMON's reclaim spare the workload's pages (a larger min_age, or quotas, under /sys/module/damon_reclaim/parameters), or lock the hot file in memory (vmtouch -l, mlock); confirm with /proc/vmstat workingset_refault_file".into(),
        _ => "give the page cache more memory (less memory used elsewhere, or more memory), or lock the hot file in memory (vmtouch -l, mlock); confirm with /proc/vmstat workingset_refault_file, which should stop growing".into(),
    }
}

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
use crate::diagnose::{Finding, Remedy, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "page_cache_thrashing",
    looks_for: "reads slowed by re-reading pages reclaim had just evicted from the page cache (refaults)",
    fires_when: "≥ 256 pages added again after reclaim evicted them in the trace (`cache` set), the operations that re-read them ≥ 10 % of the workload's time; critical from 25 %",
    stays_silent: "first reads of a file (misses, not refaults); pages removed by truncate, fadvise or drop_caches and read again; reclaim of pages nobody read again",
    needs: &["cache"],
    light_lacks: Some("the page cache events (one per page added to or removed from the cache: millions a second under streaming I/O, where a light capture must cost a point at most)"),
    light_lacks_when: None,
    remedy: Some("the memory limits over the workload's cgroup (its own, then its ancestors': up to 2 cgroups, as the capture read them while it ran) lifted (`memory.max` and `memory.high` to `max`, v1's `memory.memsw.limit_in_bytes` and `memory.limit_in_bytes` to -1), when reclaim at a cgroup's limit evicted most; live"),
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
        remedy: remedy(a),
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

/// The limits over the workload lifted, innermost first, when reclaim at
/// a cgroup's limit evicted most; none when something else did, or when
/// the capture did not read the workload's cgroups.
fn remedy(a: &Analysis) -> Option<Remedy> {
    if top_evictor(&a.cache) != Some(MEMCG_LIMIT) {
        return None;
    }
    let mut limits: Vec<_> = a.snapshot.as_ref()?.workload.memory_limits.iter().collect();
    // The cgroups the workload ran in first, then their ancestors, deepest
    // first; within one, v1's memory+swap limit before the memory limit
    // (the kernel refuses a memory limit above it), so lifted first and
    // put back last.
    limits.sort_by_key(|l| {
        (
            !l.own,
            std::cmp::Reverse(l.cgroup.matches('/').count()),
            l.cgroup.clone(),
            l.file != "memory.memsw.limit_in_bytes",
        )
    });
    let mut cgroups: Vec<&str> = limits.iter().map(|l| l.cgroup.as_str()).collect();
    cgroups.dedup();
    cgroups.truncate(MAX_CGROUPS);
    Remedy::all(
        limits
            .iter()
            .filter(|l| cgroups.contains(&l.cgroup.as_str()))
            .map(|l| {
                let lifted = if l.file.ends_with("limit_in_bytes") {
                    "-1"
                } else {
                    "max"
                };
                (
                    format!("{}/{}", l.cgroup, l.file),
                    Some(l.value.clone()),
                    lifted.to_string(),
                )
            }),
    )
}

/// Cgroups whose limits the remedy lifts, at most (each with all its
/// limit files).
const MAX_CGROUPS: usize = 2;
/// The cache analysis' name for reclaim at a memory cgroup's limit.
const MEMCG_LIMIT: &str = "memcg limit";

/// What evicted most pages.
fn top_evictor(c: &CacheSummary) -> Option<&str> {
    c.evicted_by
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(k, _)| k.as_str())
}

/// What evicted most, with the thread whose reclaim it was.
fn evicted_by(c: &CacheSummary) -> String {
    let what = match top_evictor(c).unwrap_or("reclaim") {
        MEMCG_LIMIT => "the memory cgroup limit",
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
    match top_evictor(c) {
        Some(MEMCG_LIMIT) => "raise the memory limit of the workload's cgroup above its working set (memory.max in cgroup v2, memory.limit_in_bytes in v1), or make the working set smaller; confirm with the cgroup's memory.stat workingset_refault_file, which should stop growing".into(),
        Some("DAMON") => "let DAMON's reclaim spare the workload's pages (a larger min_age, or quotas, under /sys/module/damon_reclaim/parameters), or lock the hot file in memory (vmtouch -l, mlock); confirm with /proc/vmstat workingset_refault_file".into(),
        _ => "give the page cache more memory (less memory used elsewhere, or more memory), or lock the hot file in memory (vmtouch -l, mlock); confirm with /proc/vmstat workingset_refault_file, which should stop growing".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{analysis, knobs, line};

    /// An analysis whose evictions were made by `evictor`, with the
    /// memory limits a capture read over its workload.
    fn evicted(evictor: &str, limits: serde_json::Value) -> Analysis {
        let mut a = analysis(&line(
            1_000,
            "fio-200",
            0,
            "block_bio_queue",
            "7,0 R 0 + 8 [fio]",
        ));
        a.cache.evicted_by.insert(evictor.into(), 4096);
        a.snapshot = crate::model::snapshot::Snapshot::from_value(
            json!({ "workload": { "memory_limits": limits } }),
        );
        a
    }

    #[test]
    fn the_limits_over_the_workload_lifted_innermost_first() {
        let limits = json!([
            { "cgroup": "/sys/fs/cgroup/a", "file": "memory.max", "value": "1073741824", "own": false },
            { "cgroup": "/sys/fs/cgroup/a/b", "file": "memory.high", "value": "8388608", "own": true },
            { "cgroup": "/sys/fs/cgroup/a/b", "file": "memory.max", "value": "12582912", "own": true },
        ]);
        let r = remedy(&evicted(MEMCG_LIMIT, limits)).unwrap();
        assert_eq!(
            knobs(&r),
            [
                ("/sys/fs/cgroup/a/b/memory.high", Some("8388608"), "max"),
                ("/sys/fs/cgroup/a/b/memory.max", Some("12582912"), "max"),
                ("/sys/fs/cgroup/a/memory.max", Some("1073741824"), "max"),
            ]
        );
        assert!(r.live);
        // cgroup v1 lifts with -1.
        let v1 = json!([{ "cgroup": "/sys/fs/cgroup/memory/x", "file": "memory.limit_in_bytes", "value": "12582912", "own": true }]);
        let r = remedy(&evicted(MEMCG_LIMIT, v1)).unwrap();
        assert_eq!(
            r.settings[0].knob,
            "/sys/fs/cgroup/memory/x/memory.limit_in_bytes"
        );
        assert_eq!(r.settings[0].value, "-1");
        // Its memory+swap limit first: the kernel refuses a memory limit
        // above it.
        let v1 = json!([
            { "cgroup": "/sys/fs/cgroup/memory/x", "file": "memory.limit_in_bytes", "value": "12582912", "own": true },
            { "cgroup": "/sys/fs/cgroup/memory/x", "file": "memory.memsw.limit_in_bytes", "value": "25165824", "own": true },
        ]);
        assert_eq!(
            knobs(&remedy(&evicted(MEMCG_LIMIT, v1)).unwrap()),
            [
                (
                    "/sys/fs/cgroup/memory/x/memory.memsw.limit_in_bytes",
                    Some("25165824"),
                    "-1"
                ),
                (
                    "/sys/fs/cgroup/memory/x/memory.limit_in_bytes",
                    Some("12582912"),
                    "-1"
                ),
            ]
        );
        // A deeper cgroup the command started in (not its own) comes after
        // its own; a third cgroup is left.
        let limits = json!([
            { "cgroup": "/sys/fs/cgroup/u/s/x/y", "file": "memory.max", "value": "1", "own": true },
            { "cgroup": "/sys/fs/cgroup/u/s/x", "file": "memory.max", "value": "2", "own": false },
            { "cgroup": "/sys/fs/cgroup/a/b", "file": "memory.max", "value": "3", "own": true },
            { "cgroup": "/sys/fs/cgroup/a", "file": "memory.max", "value": "4", "own": false },
        ]);
        let r = remedy(&evicted(MEMCG_LIMIT, limits)).unwrap();
        assert_eq!(
            knobs(&r).iter().map(|k| k.0).collect::<Vec<_>>(),
            [
                "/sys/fs/cgroup/u/s/x/y/memory.max",
                "/sys/fs/cgroup/a/b/memory.max"
            ]
        );
    }

    #[test]
    fn no_remedy_when_something_else_evicted_or_no_limit_was_read() {
        let v1 = json!([{ "cgroup": "/sys/fs/cgroup/memory/x", "file": "memory.limit_in_bytes", "value": "12582912", "own": true }]);
        assert_eq!(remedy(&evicted("kswapd", v1)), None);
        assert_eq!(remedy(&evicted(MEMCG_LIMIT, json!([]))), None);
    }
}

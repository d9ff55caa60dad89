//! The machine-readable report. Top-level keys are stable: `devices`,
//! `findings`, `warnings`, `processes`, … (documented in docs/FORMATS.md).

use crate::analyze::Analysis;
use crate::diagnose::Finding;
use serde_json::{json, Value};

/// The layout of the JSON this iosleuth prints: raised when a key changes
/// meaning or goes away (added keys keep it).
pub const SCHEMA_VERSION: u32 = 1;

pub fn to_value(a: &Analysis, findings: &[Finding]) -> Value {
    let b = &a.block;
    let span = a.span;
    let (listed, not_listed) = super::busiest_devices(&b.devices, super::DEVICES_LISTED);
    json!({
        "schema_version": SCHEMA_VERSION,
        "iosleuth_version": env!("CARGO_PKG_VERSION"),
        "inputs": a.inputs,
        "events": a.events,
        "span": {
            "origin_ns": super::origin_ns(a),
            "first_ns": span.first_ns,
            "last_ns": span.last_ns,
            "seconds": (span.last_ns.saturating_sub(span.first_ns)) as f64 / 1e9,
        },
        "interval_s": b.interval_s,
        "devices": devices(a, &listed),
        "all_devices": { "btt": b.all_devices, "not_listed": not_listed },
        "processes": b.processes,
        "stack": b.stack,
        "syscalls": a.syscalls,
        "fs": fs(a),
        "irq": section(a, json!(a.irq), "irq"),
        "gaps": a.gaps,
        "workqueue": section(a, json!(a.workqueue), "workqueue"),
        "outliers": a.outliers,
        "sched": sched(a),
        "wbt": section(a, json!(a.wbt), "writeback"),
        "readahead": section(a, json!(a.readahead), "readahead"),
        "cache": cache(a),
        "cgroup_throttle": a.cgroup_throttle,
        "functions": a.functions,
        "driver": a.driver,
        "light": a.light,
        "off_cpu": off_cpu(a),
        "on_cpu": on_cpu(a),
        "unknown_events": a.unknown_events,
        "warnings": a.warnings,
        "findings": findings,
        "rules": crate::diagnose::coverage(a, findings),
        "not_recorded": a.not_recorded(),
        "snapshot": a.snapshot,
    })
}

// Unknown is not zero. A figure of an event set the input lacks (a
// capture's manifest, or, for other inputs, the events they hold) is
// null, and the section's `not_recorded` names what it lacked.

/// Sets `keys` of `v` (all of them when empty) to null.
fn unknown(v: &mut Value, keys: &[&str]) {
    if let Some(o) = v.as_object_mut() {
        for (k, x) in o.iter_mut() {
            if keys.is_empty() || keys.contains(&k.as_str()) {
                *x = Value::Null;
            }
        }
    }
}

/// Adds `not_recorded` to a section.
fn with_not_recorded(mut v: Value, missing: &[&str]) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.insert("not_recorded".into(), json!(missing));
    }
    v
}

/// A section made of one event set's events: all of it null without them.
fn section(a: &Analysis, mut v: Value, set: &'static str) -> Value {
    let missing: Vec<&str> = (!a.recorded_set(set)).then_some(set).into_iter().collect();
    if !missing.is_empty() {
        unknown(&mut v, &[]);
    }
    with_not_recorded(v, &missing)
}

/// The page cache: without its events nothing but the kernel's own
/// counters over the recording, which the snapshot holds.
fn cache(a: &Analysis) -> Value {
    let mut v = section(a, json!(a.cache), "cache");
    v["kernel"] = json!(a.cache.kernel);
    v
}

/// The scheduler: without its events nothing; without wakeups, neither
/// the wakeups nor a thread's blocked time (which ends at its wakeup).
fn sched(a: &Analysis) -> Value {
    use crate::model::Tracepoint::{SchedWakeup, SchedWakeupNew, SchedWaking};
    let mut v = section(a, json!(a.sched), "sched");
    let woken = [SchedWaking, SchedWakeup, SchedWakeupNew]
        .into_iter()
        .any(|k| a.recorded.saw(k));
    if a.recorded_set("sched") && !woken {
        unknown(&mut v, &["wakeups"]);
        for t in v["threads"].as_array_mut().into_iter().flatten() {
            unknown(t, &["blocked_ns"]);
        }
        v["not_recorded"] = json!(["sched/sched_wakeup"]);
    }
    v
}

/// The filesystem: fsyncs and journals need the `fs` set, the dirty page
/// pauses `writeback`, the writes per device and a journal's writes and
/// flushes `block`, a commit's phases jbd2_commit_locking and the rest.
fn fs(a: &Analysis) -> Value {
    let mut v = json!(a.fs);
    let r = &a.recorded;
    let mut missing = Vec::new();
    if !a.recorded_set("fs") {
        missing.push("fs");
        let keys = [
            "fsync",
            "fsync_by_process",
            "slowest_fsyncs",
            "unmatched_fsync_exits",
            "journals",
        ];
        unknown(&mut v, &keys);
    }
    if !a.recorded_set("writeback") {
        missing.push("writeback");
        unknown(&mut v, &["dirty_throttle"]);
    }
    let writes = a.recorded_set("block");
    if !writes {
        missing.push("block");
        unknown(&mut v, &["device_writes"]);
    }
    let phases = r.saw(crate::model::Tracepoint::Jbd2CommitLocking);
    for j in v["journals"]
        .as_object_mut()
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        let mut lacks = Vec::new();
        if !writes {
            lacks.push("block");
            unknown(j, &["journal_writes_per_commit", "flushes_per_commit"]);
        }
        if !phases {
            lacks.push("jbd2/jbd2_commit_locking");
        }
        for c in j["slowest_commits"].as_array_mut().into_iter().flatten() {
            if !writes {
                unknown(c, &["journal_writes", "journal_bytes", "flushes"]);
            }
            if !phases {
                unknown(c, &["locking_ns", "flushing_ns", "logging_ns"]);
            }
        }
        *j = with_not_recorded(j.take(), &lacks);
    }
    with_not_recorded(v, &missing)
}

/// What a light capture does not record of a device: bios one by one
/// (their queueing, merges and the btt intervals that start there), the
/// iostat counters; its own counters are in the `light` section.
const LIGHT_LACKS: &[&str] = &[
    "actions",
    "merges",
    "fua_requests",
    "btt",
    "btt_merge",
    "btt_overhead",
    "write_waits",
    "q2c",
    "q2c_hist_us",
    "q2c_without_flushes",
    "iostat_total",
    "iostat_active",
    "iostat",
    "sequential_bios",
    "back_to_back_sequential_bios",
];

fn devices(a: &Analysis, listed: &[&crate::analyze::block::DeviceSummary]) -> Value {
    let light = a.light.is_some();
    Value::Array(
        listed
            .iter()
            .map(|d| {
                let mut v = json!(d);
                if !light {
                    return with_not_recorded(v, &[]);
                }
                // A light capture that read the kernel's diskstats at its
                // ends has iostat's columns over it (not per interval).
                let lacks: Vec<&str> = LIGHT_LACKS
                    .iter()
                    .copied()
                    .filter(|k| {
                        d.iostat_total.seconds <= 0.0
                            || !matches!(*k, "iostat_total" | "iostat_active")
                    })
                    .collect();
                unknown(&mut v, &lacks);
                with_not_recorded(v, &lacks)
            })
            .collect(),
    )
}

/// Rows of the off-CPU stacks and functions in the JSON report (all of
/// them: `report --format folded --off-cpu`).
const OFF_CPU_TOP: usize = 20;

/// Blocked time by kernel stack (`record --stacks`): totals, the largest
/// stacks and each function's share.
fn off_cpu(a: &Analysis) -> Value {
    let s = &a.stacks;
    json!({
        "kernel_stacks": s.stacks,
        "total_ns": s.off_cpu_ns,
        "without_stack_ns": s.off_cpu_without_stack_ns,
        "top_stacks": top_stacks(&s.off_cpu, "ns"),
        "functions": functions(s.off_cpu_functions()),
    })
}

/// On-CPU samples by kernel stack (`record --stacks`).
fn on_cpu(a: &Analysis) -> Value {
    let s = &a.stacks;
    json!({
        "samples": s.samples,
        "top_stacks": top_stacks(&s.on_cpu, "samples"),
        "functions": functions(s.on_cpu_functions()),
    })
}

/// The largest folded stacks as `{stack, UNIT: count}`.
fn top_stacks(folded: &[(String, u64)], unit: &str) -> Vec<Value> {
    folded
        .iter()
        .take(OFF_CPU_TOP)
        .map(|(stack, n)| json!({"stack": stack, unit: n}))
        .collect()
}

/// The largest function shares as `{function, percent}`.
fn functions(shares: Vec<(String, f64)>) -> Vec<Value> {
    shares
        .into_iter()
        .take(OFF_CPU_TOP)
        .map(|(f, pct)| json!({"function": f, "percent": (pct * 100.0).round() / 100.0}))
        .collect()
}

pub fn render(a: &Analysis, findings: &[Finding]) -> String {
    let mut s =
        serde_json::to_string_pretty(&to_value(a, findings)).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// A diff of two sides of runs.
pub fn diff(d: &crate::compare::Diff) -> String {
    let mut v = serde_json::to_value(d).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("schema_version".into(), SCHEMA_VERSION.into());
    }
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

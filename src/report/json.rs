//! The machine-readable report. Top-level keys are stable: `devices`,
//! `findings`, `warnings`, `processes`, … (documented in the README).

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
            "first_ns": span.first_ns,
            "last_ns": span.last_ns,
            "seconds": (span.last_ns.saturating_sub(span.first_ns)) as f64 / 1e9,
        },
        "interval_s": b.interval_s,
        "devices": listed,
        "all_devices": { "btt": b.all_devices, "not_listed": not_listed },
        "processes": b.processes,
        "stack": b.stack,
        "syscalls": a.syscalls,
        "fs": a.fs,
        "irq": a.irq,
        "gaps": a.gaps,
        "workqueue": a.workqueue,
        "outliers": a.outliers,
        "sched": a.sched,
        "wbt": a.wbt,
        "readahead": a.readahead,
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

//! Writers paused because dirty pages reached the limit.
//!
//! A task that dirties page cache faster than writeback cleans it sleeps
//! in `balance_dirty_pages` (the `writeback:balance_dirty_pages` event and
//! its `pause`, in ms) once dirty pages near `vm.dirty_bytes` or
//! `vm.dirty_ratio`. No case of DESIGN.md; recorded in the lab as
//! dirty-throttle.cap (vm.dirty_bytes 4 MiB) against dirty-none.cap (the
//! default dirty ratio). The limit in force comes from the snapshot.

use super::helpers::{not, span_ns, vm_setting};
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "dirty_throttling",
    looks_for: "writers paused by balance_dirty_pages (the dirty page limit)",
    check,
};

/// Chosen (commit da41173 names no source); dirty-throttle.cap: 48 ms.
const MIN_PAUSE_MS: u64 = 20;
/// Chosen (no source named); dirty-throttle.cap: 30 %, dirty-none.cap: 0 %.
const MIN_PAUSE_PERCENT: f64 = 5.0;
/// Chosen (no source named): a fifth of the trace spent paused.
const CRITICAL_PAUSE_PERCENT: f64 = 20.0;

fn check(a: &Analysis) -> Verdict {
    let d = &a.fs.dirty_throttle;
    let recorded = d.events > 0
        || a.wbt.events > 0
        || a.unknown_events
            .keys()
            .any(|k| k.starts_with("writeback:") || k.starts_with("wbt:"));
    if !recorded {
        return not("no writeback events in the trace (record the `writeback` event set)");
    }
    let span_ms = span_ns(a) as f64 / 1e6;
    let share = if span_ms > 0.0 {
        d.pause_ms_total as f64 * 100.0 / span_ms
    } else {
        0.0
    };
    if d.pause_ms_total < MIN_PAUSE_MS || share < MIN_PAUSE_PERCENT {
        return not(format!(
            "writers were paused {} ms in all ({share:.1}% of the trace's {span_ms:.0} ms)",
            d.pause_ms_total
        ));
    }
    let (bytes, ratio) = (vm_setting(a, "dirty_bytes"), vm_setting(a, "dirty_ratio"));
    let (who, ms_most) = d
        .by_process
        .iter()
        .max_by_key(|(_, ms)| **ms)
        .map(|(w, ms)| (w.clone(), *ms))
        .unwrap_or_default();
    let limit = match (&bytes, &ratio) {
        (Some(b), _) if b != "0" => format!("vm.dirty_bytes = {b}"),
        (_, Some(r)) => format!("vm.dirty_ratio = {r}"),
        _ => "the dirty limit".into(),
    };
    Verdict::Fired(Finding {
        id: RULE.id,
        severity: if share >= CRITICAL_PAUSE_PERCENT {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "writers were paused {} ms by the dirty page limit ({share:.0}% of the trace), most of it {who} ({ms_most} ms)",
            d.pause_ms_total
        ),
        evidence: json!({
            "pauses": d.events,
            "pause_ms_total": d.pause_ms_total,
            "max_pause_ms": d.max_pause_ms,
            "percent_of_trace": share,
            "by_process": d.by_process,
            "limit_pages": d.limit_pages,
            "max_dirty_pages": d.max_dirty_pages,
            "vm_dirty_bytes": bytes,
            "vm_dirty_ratio": ratio,
        }),
        explanation: format!(
            "A task that dirties page cache faster than writeback cleans it is put to sleep in balance_dirty_pages once dirty pages near the limit ({} pages here, {limit}): buffered writes then go at the device's writeback speed, in pauses.",
            d.limit_pages
        ),
        workaround: format!(
            "if the limit is low on purpose, expect device speed; otherwise raise it: sysctl -w vm.dirty_bytes=0 vm.dirty_ratio=20 (now {limit})"
        ),
    })
}

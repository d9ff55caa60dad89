//! Writers paused because dirty pages reached the limit.
//!
//! A task that dirties page cache faster than writeback cleans it sleeps
//! in `balance_dirty_pages` (the `writeback:balance_dirty_pages` event and
//! its `pause`, in ms) once dirty pages near `vm.dirty_bytes` or
//! `vm.dirty_ratio`. Not one of the four measured slow-downs of DESIGN.md; recorded in the lab as
//! dirty-throttle.cap (vm.dirty_bytes 4 MiB) against dirty-none.cap (the
//! default dirty ratio). The limit in force comes from the snapshot.

use super::helpers::{light_lacks_event, not, span_ns, vm_setting};
use crate::analyze::Analysis;
use crate::diagnose::Remedy;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use crate::model::units::share_of;
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "dirty_throttling",
    looks_for: "writers paused by balance_dirty_pages (the dirty page limit)",
    fires_when: "writers paused by `balance_dirty_pages` ≥ 20 ms and ≥ 5 % of the trace (critical ≥ 20 %), with `vm.dirty_*` from the snapshot",
    stays_silent: "the same buffered writes under the default dirty ratio",
    needs: &["writeback"],
    light_lacks: None,
    light_lacks_when: Some(light_lacks_when),
    remedy: Some("`vm.dirty_ratio` to 20, which clears `vm.dirty_bytes` (put back with it); live"),
    check,
};

/// A pause long enough to be felt as latency; dirty-throttle.cap's
/// longest is 48 ms, dirty-none.cap has none.
const MIN_PAUSE_MS: u64 = 20;
/// Chosen (no source named); dirty-throttle.cap: 30 %, dirty-none.cap: 0 %.
const MIN_PAUSE_PERCENT: f64 = 5.0;
/// Chosen (no source named): a fifth of the trace spent paused.
const CRITICAL_PAUSE_PERCENT: f64 = 20.0;

fn check(a: &Analysis) -> Verdict {
    let d = &a.fs.dirty_throttle;
    let recorded = d.events > 0
        || a.wbt.events > 0
        || a.light.is_some() && light_lacks_when(a).is_none()
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
            "writers were paused {} ms in all ({})",
            d.pause_ms_total,
            share_of(share, 1, &format!("the trace's {span_ms:.0} ms"))
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
        remedy: Some(
            Remedy::set("vm.dirty_ratio", ratio.clone(), "20"),
        ),
        id: RULE.id,
        severity: if share >= CRITICAL_PAUSE_PERCENT {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "writers were paused {} ms by the dirty page limit ({}{}), most of it {who} ({ms_most} ms)",
            d.pause_ms_total,
            share_of(share, 0, "the trace"),
            if share > 100.0 { ": several paused at once" } else { "" }
        ),
        evidence: json!({
            "pauses": d.events,
            "pause_ms_total": d.pause_ms_total,
            "max_pause_ms": d.max_pause_ms,
            // Pauses of several writers add up past the trace: a ratio then.
            "percent_of_trace": (share <= 100.0).then_some(share),
            "pauses_per_trace_time": (share > 100.0).then_some(share / 100.0),
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
            "if the limit is low on purpose, expect device speed; otherwise raise it: sysctl -w vm.dirty_ratio=20, which also clears vm.dirty_bytes (now {limit})"
        ),
    })
}

/// A light capture keeps every balance_dirty_pages pause whole.
fn light_lacks_when(a: &Analysis) -> Option<String> {
    light_lacks_event(
        a,
        ("writeback", "balance_dirty_pages"),
        "the writers' pauses in balance_dirty_pages",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{analysis, fired, line, silent, with_snapshot};
    use serde_json::json;

    /// A 200 ms trace (two writeback events at its ends) in which dd (pid
    /// 500) is paused by balance_dirty_pages once per `pauses` entry.
    fn dirtying(pauses: &[u64]) -> String {
        let written = "name=7:0 nr_pages=1024 sb_dev=0 sync_mode=0 for_kupdate=0 range_cyclic=1 for_background=1 reason=0 cgroup_ino=1";
        let mut text = line(
            1_000_000,
            "kworker/u8:3-80",
            1,
            "writeback_written",
            written,
        );
        for (i, pause) in (0..).zip(pauses) {
            let bdp = format!("bdi=7:0 limit=1024 setpoint=832 dirty=800 wb_setpoint=24 wb_dirty=768 dirty_ratelimit=102400 task_ratelimit=89900 dirtied=256 dirtied_pause=16 paused=0 pause={pause} period={pause} think=0 cgroup_ino=1");
            text += &line(
                1_010_000 + i * 20_000,
                "dd-500",
                0,
                "balance_dirty_pages",
                &bdp,
            );
        }
        text + &line(
            1_200_000,
            "kworker/u8:3-80",
            1,
            "writeback_written",
            written,
        )
    }

    #[test]
    fn fires_when_writers_are_paused_for_a_quarter_of_the_trace() {
        let a = with_snapshot(
            analysis(&dirtying(&[10; 5])),
            json!({ "vm": { "dirty_bytes": "4194304\n", "dirty_ratio": "0" } }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "dirty_throttling");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "writers were paused 50 ms by the dirty page limit (25% of the trace), most of it dd (500) (50 ms)"
        );
        assert_eq!(f.evidence["pauses"], 5);
        assert_eq!(f.evidence["max_pause_ms"], 10);
        assert_eq!(f.evidence["limit_pages"], 1024);
        assert_eq!(f.evidence["vm_dirty_bytes"], "4194304");
        assert!(f
            .explanation
            .contains("(1024 pages here, vm.dirty_bytes = 4194304)"));
        assert!(f.workaround.ends_with("(now vm.dirty_bytes = 4194304)"));
    }

    #[test]
    fn warns_below_a_fifth_of_the_trace() {
        let f = fired(check(&analysis(&dirtying(&[10, 10, 10]))));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.evidence["percent_of_trace"], 15.0);
        assert!(f.workaround.ends_with("(now the dirty limit)"));
    }

    /// Pauses of writers paused at once add up past the trace's span: the
    /// title says the ratio, never a percentage above 100.
    #[test]
    fn pauses_longer_than_the_trace_are_a_ratio() {
        let f = fired(check(&analysis(&dirtying(&[100, 100, 100]))));
        assert_eq!(
            f.title,
            "writers were paused 300 ms by the dirty page limit (1.50x the trace: several paused at once), most of it dd (500) (300 ms)"
        );
        assert_eq!(f.evidence["percent_of_trace"], json!(null));
        assert_eq!(f.evidence["pauses_per_trace_time"], 1.5);
    }

    #[test]
    fn silent_for_short_pauses() {
        assert_eq!(
            silent(check(&analysis(&dirtying(&[4, 4])))),
            "writers were paused 8 ms in all (4.0% of the trace's 200 ms)"
        );
    }

    #[test]
    fn silent_without_writeback_events() {
        let text = line(1_000, "fio-200", 0, "block_bio_queue", "7,0 W 0 + 8 [fio]");
        assert_eq!(
            silent(check(&analysis(&text))),
            "no writeback events in the trace (record the `writeback` event set)"
        );
    }
}

//! Writeback throttling (blk-wbt) cut the writes a device may have in
//! flight.
//!
//! blk-wbt watches read latency in windows; when the fastest read of a
//! window is slower than `queue/wbt_lat_usec` it steps down (`wbt_step`,
//! scale step above 0), halving the writes allowed in flight, down to 1.
//! The wbt analysis measures how long each device stayed stepped down and
//! the read latencies wbt reported (`wbt_lat`); btt gives the write bios'
//! waits for a request. Not one of the four measured slow-downs of DESIGN.md; recorded in the lab as
//! wbt-target10us.cap against wbt-default.cap.

use super::helpers::{
    block_device, device_name, light_lacks_event, ms_2dp, not_any, queue_dir, queue_remedy,
    queue_setting, span_ns,
};
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "wbt_throttling",
    looks_for: "writeback throttling (wbt) holding writes to a small depth because reads look slow",
    fires_when: "wbt stepped below its default depth (`wbt_step` step > 0) for ≥ 100 ms and ≥ 10 % of the trace (critical at depth ≤ 2 for ≥ 25 %), with `wbt_lat_usec` from the snapshot and the read latencies wbt reported (`wbt_lat`)",
    stays_silent: "the same O_DSYNC writers and reads with the default target: wbt active, never stepped down",
    needs: &["writeback"],
    light_lacks: None,
    light_lacks_when: Some(light_lacks_when),
    remedy: Some("the device's `queue/wbt_lat_usec` to 0 (writeback throttling off); live"),
    check,
};

/// Time with wbt's limit below its default: wbt-target10us.cap spends
/// 1801 ms stepped down, wbt-default.cap none.
const MIN_STEPPED_DOWN_NS: u64 = 100_000_000;
/// Chosen (no source named); wbt-target10us.cap: 80 %, wbt-default.cap: 0 %.
const MIN_STEPPED_DOWN_PERCENT: f64 = 10.0;
/// Critical at this write depth or below (wbt's floor is 1); chosen.
const CRITICAL_MAX_DEPTH: u64 = 2;
/// Chosen (no source named): a quarter of the trace at that depth.
const CRITICAL_STEPPED_DOWN_PERCENT: f64 = 25.0;

fn check(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    let span = span_ns(a).max(1);
    for (dev, w) in &a.wbt.devices {
        if w.steps == 0 {
            continue;
        }
        let share = w.stepped_down_ns as f64 * 100.0 / span as f64;
        // Step 0 is wbt's default depth; above 0 it throttles harder.
        if w.max_step <= 0
            || w.stepped_down_ns < MIN_STEPPED_DOWN_NS
            || share < MIN_STEPPED_DOWN_PERCENT
        {
            why.push(format!(
                "{dev}: wbt stepped down {} ms ({share:.0}% of the trace; highest step {}, smallest write depth {})",
                ms_2dp(w.stepped_down_ns),
                w.max_step,
                w.min_max_depth.unwrap_or(0)
            ));
            continue;
        }
        let depth = w.min_max_depth.unwrap_or(0);
        // The write bios' waits for a request: only the full recorder
        // sees bios queue (a light capture counts requests).
        let writes = block_device(a, dev)
            .filter(|_| a.light.is_none())
            .map(|d| d.write_waits);
        let target = queue_setting(a, dev, "wbt_lat_usec");
        let name = device_name(a, dev);
        let queue = queue_dir(name.as_deref(), dev);
        return Verdict::Fired(Finding {
            // Judged by the workload's time: wbt trades the writers' time
            // for the reads' latency, and an average over both kinds of
            // request moves with their mix (the lab's reader, left more
            // often between writes, read 49 % more requests).
            remedy: queue_remedy(&queue, "wbt_lat_usec", target.clone(), "0"),
            id: RULE.id,
            severity: if depth <= CRITICAL_MAX_DEPTH && share >= CRITICAL_STEPPED_DOWN_PERCENT {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{}: writeback throttling cut writes in flight to {depth} for {} ms ({share:.0}% of the trace){}",
                name.as_deref().unwrap_or(dev),
                ms_2dp(w.stepped_down_ns),
                match &target {
                    Some(t) => format!(
                        ": reads took {} µs against its {t} µs target",
                        w.max_read_latency_us
                    ),
                    None => String::new(),
                }
            ),
            evidence: json!({
                "device": dev,
                "highest_step": w.max_step,
                "smallest_write_depth": depth,
                "smallest_background_depth": w.min_background_depth,
                "stepped_down_ms": ms_2dp(w.stepped_down_ns),
                "percent_of_trace": share,
                "windows_over_target": w.latency_exceeded,
                "max_read_latency_us": w.max_read_latency_us,
                "wbt_lat_usec": target,
                "write_bios": writes.map(|w| w.bios),
                "writes_waiting_1ms_or_more": writes.map(|w| w.over_1ms),
                "write_wait_ms": writes.map(|w| ms_2dp(w.q2g.total_ns)),
                "write_wait_max_ms": writes.map(|w| ms_2dp(w.q2g.max_ns)),
            }),
            explanation: format!(
                "blk-wbt watches read latency in windows; when the fastest read of a window is slower than wbt_lat_usec it halves the writes allowed in flight, step by step down to 1, and writers (sync writes and background writeback) sleep before they get a request. Here {} windows were over the target and writes were held to a depth of {depth}: write throughput falls to what one request at a time gives.",
                w.latency_exceeded
            ),
            workaround: format!(
                "if the reads' latency is normal for this device, the target is too low: echo 0 > {queue}/wbt_lat_usec (wbt off) or set a realistic target, e.g. echo 75000 > {queue}/wbt_lat_usec"
            ),
        });
    }
    not_any(why, "no wbt_step events: wbt never changed its limits (or the `writeback` event set was not recorded)")
}

/// A light capture keeps wbt's steps whole (the bios' waits for a
/// request it does not see: those are null in the evidence).
fn light_lacks_when(a: &Analysis) -> Option<String> {
    light_lacks_event(a, ("wbt", "wbt_step"), "wbt's steps")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, line, silent, with_snapshot,
    };
    use serde_json::json;

    /// One second of wbt on 7,0: at its default step (0, depth 16) until
    /// 100 ms, then at `step` with write depth `depth` until 700 ms.
    /// Written with the tracepoints' field names (a capture decodes them
    /// so; ftrace's own text prints them differently).
    fn wbt(step: i64, depth: u64) -> String {
        let step_line = |s: i64, max: u64| {
            format!(
                "name=7:0 msg=step step={s} window=100000 bg={} normal={} max={max}",
                max.div_ceil(2),
                max
            )
        };
        let mut text = line(1_000_000, "fio-200", 0, "wbt_step", &step_line(0, 16));
        text += &line(1_100_000, "<idle>-0", 0, "wbt_lat", "name=7:0 lat=58");
        text += &line(
            1_100_000,
            "<idle>-0",
            0,
            "wbt_step",
            &step_line(step, depth),
        );
        text += &line(1_700_000, "<idle>-0", 0, "wbt_step", &step_line(0, 16));
        text + &line(2_000_000, "<idle>-0", 0, "wbt_lat", "name=7:0 lat=40")
    }

    #[test]
    fn fires_when_wbt_holds_writes_to_depth_one() {
        let a = with_snapshot(
            analysis(&wbt(4, 1)),
            json!({ "block_devices": block_devices("loop0", "7,0", &[("wbt_lat_usec", "10")]) }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "wbt_throttling");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: writeback throttling cut writes in flight to 1 for 600 ms (60% of the trace): reads took 58 µs against its 10 µs target"
        );
        assert_eq!(f.evidence["highest_step"], 4);
        assert_eq!(f.evidence["windows_over_target"], 2);
        assert_eq!(f.evidence["wbt_lat_usec"], "10");
        assert!(f.workaround.starts_with(
            "if the reads' latency is normal for this device, the target is too low: echo 0 > /sys/block/loop0/queue/wbt_lat_usec"
        ));
    }

    #[test]
    fn warns_at_a_larger_depth() {
        let f = fired(check(&analysis(&wbt(1, 8))));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "7,0: writeback throttling cut writes in flight to 8 for 600 ms (60% of the trace)"
        );
    }

    #[test]
    fn silent_when_wbt_never_steps_down() {
        assert_eq!(
            silent(check(&analysis(&wbt(0, 16)))),
            "7,0: wbt stepped down 0 ms (0% of the trace; highest step 0, smallest write depth 16)"
        );
    }
}

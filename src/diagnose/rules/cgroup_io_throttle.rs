//! Bios held back by a cgroup's I/O limit (blk-throttle).
//!
//! A bio over its cgroup's bytes or IOs per second budget (`io.max` in
//! cgroup v2, `blkio.throttle.*_device` in v1) is not queued: blk-throttle
//! holds it and the `kthrotld` workqueue submits it later, so its Q event
//! comes from a kworker running `blk_throtl_dispatch_work_fn`. The
//! blkthrottle analysis counts those bios per device (it needs the
//! `workqueue` event set); the limit's line comes from the snapshot. Not
//! one of the four measured slow-downs of DESIGN.md; recorded in the lab as cgroup-throttled.cap against
//! cgroup-none.cap.

use super::helpers::{block_device, cgroup_limits, device_name, not, CgroupLimit};
use crate::analyze::Analysis;
use crate::diagnose::Remedy;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "cgroup_io_throttle",
    looks_for: "bios held by a cgroup I/O limit (blk-throttle) before they reach the device",
    fires_when: "bios queued by kthrotld (a kworker running `blk_throtl_dispatch_work_fn`: held by blk-throttle), with the cgroup's `io.max` / `blkio.throttle.*` line from the snapshot (critical ≥ 50 % of the device's bios, or when the workload spent ≥ 50 % of its time waiting with nothing at the device: blk-throttle passes a budget's worth of bios at once and holds the rest); on a light capture, the bios its programs saw the dispatch work queue, against the device's requests and merged bios (critical ≥ 50 %)",
    stays_silent: "the same reads without the limit; without the `workqueue` set it says so",
    needs: &["block", "workqueue"],
    // A light capture counts the held bios itself (the bio program knows
    // blk-throttle's dispatch work by its address); one made without that
    // count says so.
    light_lacks: None,
    light_lacks_when: Some(light_lacks_when),
    remedy: Some("the limit's line in the cgroup's `io.max` (or cgroup v1's `blkio.throttle.*_device`) for the device, lifted (`MAJ:MIN rbps=max wbps=max riops=max wiops=max`, or `MAJ:MIN 0`); live"),
    check,
};

/// Critical when the limit held at least half of the device's bios: then
/// the limit, not the device, sets the pace (cgroup-throttled.cap: 62 %,
/// 5 of 8; cgroup-none.cap: none held).
const CRITICAL_HELD_PERCENT: f64 = 50.0;
/// Critical too when the workload spent this share of its time blocked
/// with no request at the device while the limit released bios: blk-throttle
/// lets a budget's worth of bios pass at once and holds the rest, so few
/// held bios can stall most of the time (cgroup-iops-limit.cap: 29 of 600
/// bios held, the reads 99.5 % waiting, the throughput cut to 200 IOPS).
const CRITICAL_WAITING_PERCENT: f64 = 50.0;

fn check(a: &Analysis) -> Verdict {
    if let Some(light) = &a.light {
        return check_light(a, light);
    }
    let t = &a.cgroup_throttle;
    if t.dispatch_runs == 0 {
        return not(if a.workqueue.functions.is_empty() {
            "no workqueue events in the trace (record the `workqueue` event set): bios held by blk-throttle cannot be told apart".to_string()
        } else {
            "blk-throttle's dispatch work never ran: no bio was held by a cgroup limit".to_string()
        });
    }
    let Some((dev, d)) = t.devices.iter().max_by_key(|(_, d)| d.bios) else {
        return not(format!(
            "blk-throttle's dispatch work ran {} times but queued no bio",
            t.dispatch_runs
        ));
    };
    // Every bio the device queued, held or not.
    let all_bios = block_device(a, dev).map_or(d.bios, |x| x.actions.queued);
    let share = d.bios as f64 * 100.0 / all_bios.max(1) as f64;
    let secs = d.last_ns.saturating_sub(d.first_ns) as f64 / 1e9;
    let rate = (secs > 0.0).then(|| d.bytes as f64 / secs / 1024.0 / 1024.0);
    // What the workload felt: its time blocked with nothing at the device
    // (the breakdown's other waits), when the capture can tell.
    let waiting = crate::diagnose::impact::workload_time(a)
        .map(|(total, b)| b.other_wait_ns as f64 * 100.0 / total as f64);
    let limits = cgroup_limits(a, dev);
    let name = device_name(a, dev);
    let workaround = workaround(dev, &limits);
    Verdict::Fired(Finding {
        remedy: remedy(dev, &limits),
        id: RULE.id,
        severity: if share >= CRITICAL_HELD_PERCENT
            || waiting.is_some_and(|w| w >= CRITICAL_WAITING_PERCENT)
        {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "{}: {} of {} bios ({share:.0}%) were held by a cgroup I/O limit{}",
            name.as_deref().unwrap_or(dev),
            d.bios,
            all_bios,
            rate.map(|r| if r < 1.0 {
                format!(", released at {:.0} KiB/s", r * 1024.0)
            } else {
                format!(", released at {r:.1} MiB/s")
            })
            .unwrap_or_default()
        ) + &waiting
            .map(|w| {
                format!(
                    "; the workload spent {w:.0}% of its time waiting with nothing at the device"
                )
            })
            .unwrap_or_default(),
        evidence: json!({
            "device": dev,
            "throttled_bios": d.bios,
            "all_bios": all_bios,
            "throttled_bytes": d.bytes,
            "throttled_reads": d.reads,
            "throttled_writes": d.writes,
            "released_mib_per_s": rate,
            "dispatch_runs": t.dispatch_runs,
            "workload_waiting_percent": waiting,
            "limits": limits.iter().map(|l| json!({"cgroup": l.cgroup, "file": l.file, "line": l.line})).collect::<Vec<_>>(),
        }),
        explanation: EXPLANATION.into(),
        workaround,
    })
}

const EXPLANATION: &str = "A bio over its cgroup's bytes or IOs per second budget is not queued: blk-throttle holds it and the kthrotld workqueue submits it when the budget allows, so the submitter waits with no request at the device (the Q event comes from a kworker running blk_throtl_dispatch_work_fn). The device is idle while the application is slow.";

/// A light capture that did not count the held bios cannot judge.
fn light_lacks_when(a: &Analysis) -> Option<String> {
    let light = a.light.as_ref()?;
    (!light.devices.is_empty() && light.devices.iter().all(|d| d.throttled.is_none())).then(|| {
        "a light capture lacks the count of bios blk-throttle held when made before it counted them, or without the address of its dispatch work".to_string()
    })
}

/// The limit found in the snapshot, lifted for the device: the line of
/// the device in its file, written with no limit.
fn remedy(dev: &str, limits: &[CgroupLimit]) -> Option<Remedy> {
    let colon = dev.replace(',', ":");
    let l = limits.first()?;
    let lifted = if l.file == "io.max" {
        format!("{colon} rbps=max wbps=max riops=max wiops=max")
    } else {
        format!("{colon} 0")
    };
    Some(Remedy::set(
        format!("{}/{}", l.cgroup, l.file),
        Some(l.line.clone()),
        lifted,
    ))
}

/// How to lift the limit found in the snapshot.
fn workaround(dev: &str, limits: &[CgroupLimit]) -> String {
    let colon = dev.replace(',', ":");
    match limits.first() {
        Some(CgroupLimit { cgroup: cg, file, line }) if file == "io.max" => format!(
            "raise or lift the limit ({line} in {cg}/io.max): echo \"{colon} rbps=max wbps=max riops=max wiops=max\" > {cg}/io.max"
        ),
        Some(CgroupLimit { cgroup: cg, file, line }) => format!(
            "raise or lift the limit ({line} in {cg}/{file}): echo \"{colon} 0\" > {cg}/{file}"
        ),
        None => format!(
            "find the cgroup limit on {colon} (io.max in cgroup v2, blkio.throttle.* in v1) and raise it"
        ),
    }
}

/// Critical on a light capture too when, with bios held, the device ran at
/// this share of a limit or more over the whole capture: the limit set the
/// pace. Chosen: the capture's span includes the workload's start and end
/// (the lab's 600 reads under a 200 IOPS limit: 29 held, 164 reads a second
/// over a 3.66 s capture, 82 %), and a workload that only bursts past its
/// budget now and then averages far less.
const CRITICAL_PACE_PERCENT: f64 = 50.0;

/// A limit's rates: (`riops`, `rbps`, `wiops` or `wbps`, the limit), from
/// an `io.max` line or a v1 `blkio.throttle.*_device` line.
fn limit_rates(l: &CgroupLimit) -> Vec<(&'static str, f64)> {
    let mut fields = l.line.split_whitespace().skip(1);
    let v1 = [
        ("blkio.throttle.read_iops_device", "riops"),
        ("blkio.throttle.read_bps_device", "rbps"),
        ("blkio.throttle.write_iops_device", "wiops"),
        ("blkio.throttle.write_bps_device", "wbps"),
    ];
    if let Some((_, kind)) = v1.iter().find(|(f, _)| *f == l.file) {
        return fields
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| *v > 0.0)
            .map(|v| vec![(*kind, v)])
            .unwrap_or_default();
    }
    fields
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let kind = ["riops", "rbps", "wiops", "wbps"]
                .into_iter()
                .find(|x| *x == k)?;
            Some((kind, v.parse::<f64>().ok().filter(|v| *v > 0.0)?))
        })
        .collect()
}

/// A light capture: the bios its programs saw blk-throttle's dispatch
/// work queue (held by a limit), against the device's bios (its requests
/// and the bios merged into them, which is all of them unless bios were
/// split). The time the workload waited is not in a light capture: the
/// held share, or the device running at the limit's pace over the
/// capture, decides critical.
fn check_light(a: &Analysis, light: &crate::analyze::light::LightSummary) -> Verdict {
    let counted: Vec<_> = light
        .devices
        .iter()
        .filter_map(|d| Some((d, d.throttled?)))
        .collect();
    if counted.is_empty() {
        return not("no device's held bios were counted".to_string());
    }
    let Some((d, (held, held_bytes))) = counted
        .into_iter()
        .filter(|(_, (held, _))| *held > 0)
        .max_by_key(|(_, (held, _))| *held)
    else {
        return not(
            "no bio was held by a cgroup limit (blk-throttle's dispatch work queued none)"
                .to_string(),
        );
    };
    let dev = d.device.as_str();
    let requests: u64 = d.ops.iter().map(|o| o.ios).sum();
    let c = &d.counters;
    let all_bios = (requests + c.back_merges + c.front_merges + c.rq_merges).max(held);
    let share = held as f64 * 100.0 / all_bios as f64;
    let limits = cgroup_limits(a, dev);
    let name = device_name(a, dev);
    // The device's rate over the capture against each limit's.
    let op = |name: &str| d.ops.iter().find(|o| o.op == name);
    let secs = light.seconds.max(1e-3);
    let pace = limits
        .iter()
        .flat_map(limit_rates)
        .filter_map(|(kind, limit)| {
            let o = op(if kind.starts_with('r') {
                "read"
            } else {
                "write"
            })?;
            let rate = if kind.ends_with("iops") {
                o.ios as f64
            } else {
                o.bytes as f64
            } / secs;
            Some((kind, rate, limit, rate * 100.0 / limit))
        })
        .max_by(|x, y| x.3.total_cmp(&y.3));
    let at_pace = pace.is_some_and(|p| p.3 >= CRITICAL_PACE_PERCENT);
    Verdict::Fired(Finding {
        remedy: remedy(dev, &limits),
        id: RULE.id,
        severity: if share >= CRITICAL_HELD_PERCENT || at_pace {
            Severity::Critical
        } else {
            Severity::Warning
        },
        title: format!(
            "{}: {held} of {all_bios} bios ({share:.0}%) were held by a cgroup I/O limit{}",
            name.as_deref().unwrap_or(dev),
            match pace {
                Some((kind, rate, limit, pct)) if at_pace => format!(
                    "; the device ran at {pct:.0}% of the limit ({} {} a second against {})",
                    if kind.ends_with("iops") {
                        format!("{rate:.0}")
                    } else {
                        format!("{:.1} MiB", rate / 1048576.0)
                    },
                    if kind.ends_with("iops") {
                        if kind.starts_with('r') {
                            "reads"
                        } else {
                            "writes"
                        }
                    } else {
                        ""
                    },
                    if kind.ends_with("iops") {
                        format!("{limit:.0}")
                    } else {
                        format!("{:.1} MiB", limit / 1048576.0)
                    },
                ),
                _ => String::new(),
            }
        ),
        evidence: json!({
            "device": dev,
            "throttled_bios": held,
            "all_bios": all_bios,
            "throttled_bytes": held_bytes,
            "workload_waiting_percent": null,
            "pace": pace.map(|(kind, rate, limit, pct)| json!({"limit": kind, "rate_per_s": rate, "limit_per_s": limit, "percent_of_limit": pct})),
            "limits": limits.iter().map(|l| json!({"cgroup": l.cgroup, "file": l.file, "line": l.line})).collect::<Vec<_>>(),
        }),
        explanation: EXPLANATION.into(),
        workaround: workaround(dev, &limits),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, line, silent, with_snapshot,
    };
    use serde_json::json;

    const WORK: &str = "work struct 00000000c0ffee00: function";

    /// dd (pid 400) reads 8 bios of 256 KiB from 7,0; the last `held` of
    /// them are queued by kthrotld's dispatch work (kworker pid 77), one
    /// every 62.5 ms; `function` is the work the kworker runs.
    fn reads(held: u64, function: &str) -> String {
        let mut text = String::new();
        for i in 0..8 - held {
            let q = format!("7,0 R {} + 512 [dd]", i * 512);
            text += &line(1_000_000 + i * 1_000, "dd-400", 0, "block_bio_queue", &q);
        }
        for i in 0..held {
            let t = 1_100_000 + i * 62_500;
            let work = format!("{WORK} {function}");
            text += &line(t, "kworker/1:2-77", 1, "workqueue_execute_start", &work);
            let q = format!("7,0 R {} + 512 [dd]", (8 - held + i) * 512);
            text += &line(t + 10, "kworker/1:2-77", 1, "block_bio_queue", &q);
            text += &line(t + 20, "kworker/1:2-77", 1, "workqueue_execute_end", &work);
        }
        text
    }

    #[test]
    fn fires_for_bios_released_by_the_dispatch_work() {
        let limits = json!({ "/sys/fs/cgroup/blkio/slow": { "blkio.throttle.read_bps_device": "7:0 4194304" } });
        let a = with_snapshot(
            analysis(&reads(5, "blk_throtl_dispatch_work_fn")),
            json!({
                "block_devices": block_devices("loop0", "7,0", &[]),
                "cgroup_io_limits": limits,
            }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "cgroup_io_throttle");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: 5 of 8 bios (62%) were held by a cgroup I/O limit, released at 5.0 MiB/s"
        );
        assert_eq!(f.evidence["throttled_bytes"], 5 * 262_144);
        assert_eq!(f.evidence["dispatch_runs"], 5);
        assert_eq!(
            f.evidence["limits"][0],
            json!({"cgroup": "/sys/fs/cgroup/blkio/slow", "file": "blkio.throttle.read_bps_device", "line": "7:0 4194304"})
        );
        assert_eq!(
            f.workaround,
            "raise or lift the limit (7:0 4194304 in /sys/fs/cgroup/blkio/slow/blkio.throttle.read_bps_device): echo \"7:0 0\" > /sys/fs/cgroup/blkio/slow/blkio.throttle.read_bps_device"
        );
    }

    #[test]
    fn warns_for_a_few_held_bios_under_io_max() {
        let limits = json!({ "/sys/fs/cgroup/app": { "io.max": "7:0 rbps=4194304 wbps=max riops=max wiops=max" } });
        let a = with_snapshot(
            analysis(&reads(2, "blk_throtl_dispatch_work_fn")),
            json!({ "cgroup_io_limits": limits }),
        );
        let f = fired(check(&a));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "7,0: 2 of 8 bios (25%) were held by a cgroup I/O limit, released at 8.0 MiB/s"
        );
        assert_eq!(
            f.workaround,
            "raise or lift the limit (7:0 rbps=4194304 wbps=max riops=max wiops=max in /sys/fs/cgroup/app/io.max): echo \"7:0 rbps=max wbps=max riops=max wiops=max\" > /sys/fs/cgroup/app/io.max"
        );
    }

    #[test]
    fn silent_when_the_dispatch_work_never_ran() {
        assert_eq!(
            silent(check(&analysis(&reads(5, "flush_to_ldisc")))),
            "blk-throttle's dispatch work never ran: no bio was held by a cgroup limit"
        );
    }

    #[test]
    fn silent_without_workqueue_events() {
        assert_eq!(
            silent(check(&analysis(&reads(0, "")))),
            "no workqueue events in the trace (record the `workqueue` event set): bios held by blk-throttle cannot be told apart"
        );
    }

    #[test]
    fn limit_lines_give_their_rates_in_both_hierarchies() {
        let limit = |file: &str, line: &str| CgroupLimit {
            cgroup: "/sys/fs/cgroup/x".into(),
            file: file.into(),
            line: line.into(),
        };
        assert_eq!(
            limit_rates(&limit("blkio.throttle.read_iops_device", "7:0 200")),
            vec![("riops", 200.0)]
        );
        assert_eq!(
            limit_rates(&limit("blkio.throttle.write_bps_device", "7:0 1048576")),
            vec![("wbps", 1048576.0)]
        );
        assert_eq!(
            limit_rates(&limit(
                "io.max",
                "7:0 rbps=max wbps=4194304 riops=max wiops=100"
            )),
            vec![("wbps", 4194304.0), ("wiops", 100.0)]
        );
        assert!(limit_rates(&limit("io.max", "7:0 rbps=max")).is_empty());
    }
}

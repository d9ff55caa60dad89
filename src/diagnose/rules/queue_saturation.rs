//! A busy device whose requests spend most of their time waiting behind
//! others.
//!
//! iostat's service time (busy time per request: %util / IOPS) against
//! btt's Q2C (queue to completion) gives the share of a request's time
//! spent waiting; %util and aqu-sz say the device was busy with several
//! requests queued. All three over the device's active span (first
//! request to last), not the whole trace: a workload that starts a
//! quarter second after the recorder is no less saturated for it. Critical only when the request pool itself ran out
//! (bios waited for a tag, btt's Q2G): many busy submitters alone are a
//! load, not a misconfiguration. Not one of the four measured slow-downs of DESIGN.md; recorded in the lab
//! as queue-saturated.cap (nr_requests 4, 32 reads in flight) against
//! queue-depth1.cap.

use super::helpers::{device_name, not_any, queue_dir, queue_remedy, queue_setting};
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "queue_saturation",
    looks_for: "a busy device whose requests mostly wait behind others",
    fires_when: "over the device's active span (first request to last): `%util` ≥ 80, `aqu-sz` ≥ 2 and ≥ 50 % of a request's Q2C spent waiting (iostat's service time = busy time per request); critical ≥ 90 % / 75 % when bios also waited for a tag (Q2G ≥ 10 %); on a light capture, iostat's columns from the kernel's diskstats over the whole capture: `%util` ≥ 25, ≥ 2 requests in flight while busy (aqu-sz / %util) and at least 60 % of `nr_requests` (the pool ran out), ≥ 50 % waiting, a request's time from its allocation (a warning at most: the tag wait is not seen)",
    stays_silent: "`nr_requests` 4 with one read at a time; 64 fsync writers on a free tag pool stay a warning",
    needs: &["block"],
    light_lacks: None,
    light_lacks_when: Some(light_lacks_when),
    remedy: Some("the device's `queue/nr_requests` to 64 when the snapshot shows it lowered below that; live"),
    check,
};

/// Requests needed to judge: below 100, one request moves the waiting
/// share by more than a point (queue-saturated.cap and queue-depth1.cap
/// hold thousands).
const MIN_REQUESTS: u64 = 100;
/// The nr_requests to try when it was lowered below it: the queue depth
/// of most SATA disks and of a loop device (nr_requests' usual floor).
const DEFAULT_NR_REQUESTS: u64 = 64;
/// Chosen (no source named); queue-saturated.cap: 97, queue-depth1.cap: 84.
const MIN_UTIL_PERCENT: f64 = 80.0;
/// On a light capture, %util over the whole capture (its workload's start
/// and end included). Chosen: the lab's 32 reads in flight on 4 tags,
/// recorded with --light, 48 % on a device serving one request at a time
/// (fio ran 1 s of a 2.07 s capture), 50 % on one serving 32 at once;
/// one read at a time 33 % with 1.0 in flight.
const LIGHT_MIN_UTIL_PERCENT: f64 = 25.0;
/// On a light capture the queue counts only when the request pool was
/// nearly full whenever the device was busy (requests in flight while busy
/// at least this share of nr_requests): bios then waited for a tag, which
/// the capture does not see. A full pool reads below its size: a freed tag
/// waits for its waiter to be woken and run. Chosen: the lab's 32 reads on
/// 4 tags, 3.9 of 4 on a device serving 32 at once; on one serving a
/// request at a time, 3.4 of 4 (85 %) on an idle machine, 2.98 with CI's
/// other work on both CPUs; random reads 8 deep on 128 tags, 3.6 of 128
/// (3 %), a load on a free pool, stay silent.
const LIGHT_POOL_FULL: f64 = 0.6;
/// Chosen; queue-saturated.cap: 78 %, queue-depth1.cap: 1 %.
const MIN_WAITING_PERCENT: f64 = 50.0;
/// Chosen: at least two requests in the queue on average (depth-1 reads: 0.9).
const MIN_AQU_SZ: f64 = 2.0;
/// Critical: chosen (no source named); queue-saturated.cap is 97 % busy.
const CRITICAL_UTIL_PERCENT: f64 = 90.0;
/// Chosen (no source named); queue-saturated.cap: 78 % waiting.
const CRITICAL_WAITING_PERCENT: f64 = 75.0;
/// Chosen so that the request pool running out decides: queue-saturated.cap
/// (nr_requests 4) 19 %, the lab's nomerges-2 reads (50 queued) 0.07 %.
const CRITICAL_TAG_WAIT_PERCENT: f64 = 10.0;

/// A light capture made before it read diskstats has no iostat columns.
fn light_lacks_when(a: &Analysis) -> Option<String> {
    let light = a.light.as_ref()?;
    let read = a
        .block
        .devices
        .iter()
        .any(|d| d.iostat_active.seconds > 0.0);
    (!light.devices.is_empty() && !read).then(|| {
        "a light capture lacks iostat's columns when made before it read the kernel's diskstats at its ends".to_string()
    })
}

fn check(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    let light = a.light.is_some();
    for d in &a.block.devices {
        let io = &d.iostat_active;
        let iops = io.r_s + io.w_s + io.d_s;
        // A light capture times requests from their allocation (after any
        // wait for a tag) and reads iostat over the whole capture.
        let (n, q2c) = if light {
            (d.q2c.count, d.q2c.avg)
        } else {
            (d.btt.q2c.n, d.btt.q2c.avg_ns())
        };
        if n < MIN_REQUESTS || iops <= 0.0 {
            why.push(format!("{}: {n} requests completed", d.device));
            continue;
        }
        // iostat's service time: busy time per request.
        let service = io.util / 100.0 / iops * 1e9;
        let waiting = (1.0 - service / q2c.max(1.0)).max(0.0) * 100.0;
        // Unknown on a light capture (not zero): then never critical.
        let tag_wait = (!light).then(|| d.btt.q2g.avg_ns() * 100.0 / q2c.max(1.0));
        // A light capture's span includes the workload's start and end
        // (the device idle): the queue is judged while the device was busy
        // (aqu-sz over %util: requests in flight per busy second), and a
        // device busy a quarter of the capture is busy enough.
        let (min_util, queued) = if light {
            (
                LIGHT_MIN_UTIL_PERCENT,
                io.aqu_sz * 100.0 / io.util.max(1e-9),
            )
        } else {
            (MIN_UTIL_PERCENT, io.aqu_sz)
        };
        // A light capture does not see bios wait for a tag: it judges the
        // pool itself, nearly full whenever the device was busy.
        let nr = queue_setting(a, &d.device, "nr_requests");
        let pool: Option<f64> = nr
            .as_deref()
            .and_then(|n| n.trim().parse().ok())
            .filter(|n: &f64| *n > 0.0);
        let pool_full = pool.is_some_and(|n| queued >= LIGHT_POOL_FULL * n);
        if io.util < min_util
            || waiting < MIN_WAITING_PERCENT
            || queued < MIN_AQU_SZ
            || (light && !pool_full)
        {
            why.push(format!(
                "{}: %util {:.0}, aqu-sz {:.1}{}, {waiting:.0}% of a request's time spent waiting",
                d.device,
                io.util,
                io.aqu_sz,
                if light {
                    format!(
                        " ({queued:.1} while busy, of nr_requests {})",
                        pool.map_or("unknown".into(), |n| format!("{n:.0}"))
                    )
                } else {
                    String::new()
                }
            ));
            continue;
        }
        let name = device_name(a, &d.device);
        let queue = queue_dir(name.as_deref(), &d.device);
        let pool_ran_out = tag_wait.is_some_and(|t| t >= CRITICAL_TAG_WAIT_PERCENT);
        return Verdict::Fired(Finding {
            remedy: pool
                .filter(|&n| n < DEFAULT_NR_REQUESTS as f64)
                .and_then(|_| queue_remedy(&queue, "nr_requests", nr.clone(), &DEFAULT_NR_REQUESTS.to_string())),
            id: RULE.id,
            // Critical only when the request pool itself ran out (bios
            // waited for a tag): many busy submitters alone are a load,
            // not a misconfiguration.
            severity: if io.util >= CRITICAL_UTIL_PERCENT
                && waiting >= CRITICAL_WAITING_PERCENT
                && pool_ran_out
            {
                Severity::Critical
            } else {
                Severity::Warning
            },
            title: format!(
                "{}: busy {:.0}%{} with {queued:.1} requests queued on average{}: {waiting:.0}% of each request's {:.0} µs was waiting, {:.0} µs being served",
                name.as_deref().unwrap_or(&d.device),
                io.util,
                if light { " of the capture" } else { "" },
                if light { " while busy" } else { "" },
                q2c / 1e3,
                service / 1e3
            ),
            evidence: json!({
                "device": d.device,
                "util_percent": io.util,
                "aqu_sz": io.aqu_sz,
                "queued_while_busy": queued,
                "iops": iops,
                "q2c_avg_us": q2c / 1e3,
                "service_us": service / 1e3,
                "waiting_percent": waiting,
                "waiting_for_a_tag_percent": tag_wait,
                "nr_requests": nr,
            }),
            explanation: format!(
                "The device completes one request every {:.0} µs of busy time, but requests take {:.0} µs from queue to completion: the rest is waiting behind the others in flight{}. More concurrency only lengthens the queue.",
                service / 1e3,
                q2c / 1e3,
                match tag_wait {
                    Some(t) if pool_ran_out => format!(", {t:.0}% of it for a free request (tag), which nr_requests bounds"),
                    Some(_) => String::new(),
                    None => " (a light capture times a request from its allocation: a wait for a free request, a tag, before it is not seen)".to_string(),
                }
            ),
            workaround: format!(
                "submit fewer requests at once (lower the application's queue depth) or spread the load over more devices; if nr_requests was lowered (now {}), raise it: echo {DEFAULT_NR_REQUESTS} > {queue}/nr_requests",
                nr.as_deref().unwrap_or("unknown")
            ),
        });
    }
    not_any(why, "no block requests in the trace")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, silent, with_snapshot, Trace,
    };
    use serde_json::json;

    /// 128 random 64 KiB reads by fio (pid 200) on 7,0 in batches of
    /// `batch`, issued together; the device serves them one after another,
    /// 100 µs each, and issues the next batch when the last is done. Each
    /// bio was queued `tag_wait_us` before it got its request (while the
    /// previous batch was served).
    fn reads(batch: u64, tag_wait_us: u64) -> String {
        reads_after(batch, tag_wait_us, Trace::default())
    }

    /// [`reads`] added to `tr`, which may hold earlier events.
    fn reads_after(batch: u64, tag_wait_us: u64, mut tr: Trace) -> String {
        let mut t = 1_000_000 + tag_wait_us;
        for b in 0..128 / batch {
            for k in 0..batch {
                let s = (b * batch + k) * 4096;
                let bio = format!("7,0 R {s} + 128 [fio]");
                tr.add(t - tag_wait_us, "fio-200", 0, "block_bio_queue", &bio);
                tr.add(t, "fio-200", 0, "block_getrq", &bio);
                let rq = format!("7,0 R 65536 () {s} + 128 be,0,4 [fio]");
                tr.add(t, "fio-200", 0, "block_rq_issue", &rq);
                let done = format!("7,0 R () {s} + 128 be,0,4 [0]");
                tr.add(t + (k + 1) * 100, "<idle>-0", 0, "block_rq_complete", &done);
            }
            t += batch * 100;
        }
        tr.text()
    }

    #[test]
    fn fires_critical_when_bios_wait_for_a_tag() {
        let a = with_snapshot(
            analysis(&reads(8, 100)),
            json!({ "block_devices": block_devices("loop0", "7,0", &[("nr_requests", "4")]) }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "queue_saturation");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "loop0: busy 100% with 4.5 requests queued on average: 82% of each request's 550 µs was waiting, 100 µs being served"
        );
        assert_eq!(f.evidence["nr_requests"], "4");
        // 100 µs of each bio's 550 µs before it got a request.
        let tag = f.evidence["waiting_for_a_tag_percent"].as_f64().unwrap();
        assert!((tag - 100.0 * 100.0 / 550.0).abs() < 1e-9, "{tag}");
        assert!(f.explanation.contains("18% of it for a free request (tag)"));
        assert!(f
            .workaround
            .ends_with("(now 4), raise it: echo 64 > /sys/block/loop0/queue/nr_requests"));
    }

    /// The lab's queue scenario once had fio start 0.25 s after the
    /// recorder: over the whole trace the device looked 78 % busy. An
    /// unrelated request 50 ms before the reads must not hide them.
    #[test]
    fn judges_the_device_over_its_own_active_span() {
        let mut tr = Trace::default();
        tr.add(
            950_000,
            "jbd2/vda1-8",
            1,
            "block_bio_queue",
            "254,0 W 8 + 8 [jbd2/vda1-8]",
        );
        tr.add(
            950_010,
            "jbd2/vda1-8",
            1,
            "block_rq_issue",
            "254,0 W 4096 () 8 + 8 be,0,4 [jbd2/vda1-8]",
        );
        tr.add(
            950_300,
            "<idle>-0",
            1,
            "block_rq_complete",
            "254,0 W () 8 + 8 be,0,4 [0]",
        );
        let a = analysis(&reads_after(8, 100, tr));
        let loop0 = &a.block.devices.iter().find(|d| d.device == "7,0").unwrap();
        assert!(
            loop0.iostat_total.util < 50.0,
            "{}",
            loop0.iostat_total.util
        );
        let f = fired(check(&a));
        assert!(
            f.title
                .starts_with("7,0: busy 100% with 4.5 requests queued"),
            "{}",
            f.title
        );
    }

    #[test]
    fn warns_for_a_busy_queue_with_free_tags() {
        let f = fired(check(&analysis(&reads(4, 0))));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "7,0: busy 100% with 2.5 requests queued on average: 60% of each request's 250 µs was waiting, 100 µs being served"
        );
        assert!(!f.explanation.contains("tag"));
        assert_eq!(f.evidence["nr_requests"], serde_json::Value::Null);
    }

    #[test]
    fn silent_for_one_request_at_a_time() {
        assert_eq!(
            silent(check(&analysis(&reads(1, 0)))),
            "7,0: %util 100, aqu-sz 1.0, 0% of a request's time spent waiting"
        );
    }
}

//! A busy device whose requests spend most of their time waiting behind
//! others.
//!
//! iostat's service time (busy time per request: %util / IOPS) against
//! btt's Q2C (queue to completion) gives the share of a request's time
//! spent waiting; %util and aqu-sz say the device was busy with several
//! requests queued. Critical only when the request pool itself ran out
//! (bios waited for a tag, btt's Q2G): many busy submitters alone are a
//! load, not a misconfiguration. No case of DESIGN.md; recorded in the lab
//! as queue-saturated.cap (nr_requests 4, 32 reads in flight) against
//! queue-depth1.cap.

use super::helpers::{device_name, not_any, queue_dir, queue_setting};
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "queue_saturation",
    looks_for: "a busy device whose requests mostly wait behind others",
    check,
};

/// Requests needed to judge; chosen (commit ebd9cd0 names no source).
const MIN_REQUESTS: u64 = 100;
/// Chosen (no source named); queue-saturated.cap: 97, queue-depth1.cap: 84.
const MIN_UTIL_PERCENT: f64 = 80.0;
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

fn check(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for d in &a.block.devices {
        let io = &d.iostat_total;
        let iops = io.r_s + io.w_s + io.d_s;
        let q2c = d.btt.q2c.avg_ns();
        if d.btt.q2c.n < MIN_REQUESTS || iops <= 0.0 {
            why.push(format!("{}: {} requests completed", d.device, d.btt.q2c.n));
            continue;
        }
        // iostat's service time: busy time per request.
        let service = io.util / 100.0 / iops * 1e9;
        let waiting = (1.0 - service / q2c.max(1.0)).max(0.0) * 100.0;
        let tag_wait = d.btt.q2g.avg_ns() * 100.0 / q2c.max(1.0);
        if io.util < MIN_UTIL_PERCENT || waiting < MIN_WAITING_PERCENT || io.aqu_sz < MIN_AQU_SZ {
            why.push(format!(
                "{}: %util {:.0}, aqu-sz {:.1}, {waiting:.0}% of a request's time spent waiting",
                d.device, io.util, io.aqu_sz
            ));
            continue;
        }
        let nr = queue_setting(a, &d.device, "nr_requests");
        let name = device_name(a, &d.device);
        let queue = queue_dir(name.as_deref(), &d.device);
        let pool_ran_out = tag_wait >= CRITICAL_TAG_WAIT_PERCENT;
        return Verdict::Fired(Finding {
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
                "{}: busy {:.0}% with {:.1} requests queued on average: {waiting:.0}% of each request's {:.0} µs was waiting, {:.0} µs being served",
                name.as_deref().unwrap_or(&d.device),
                io.util,
                io.aqu_sz,
                q2c / 1e3,
                service / 1e3
            ),
            evidence: json!({
                "device": d.device,
                "util_percent": io.util,
                "aqu_sz": io.aqu_sz,
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
                if pool_ran_out {
                    format!(", {tag_wait:.0}% of it for a free request (tag), which nr_requests bounds")
                } else {
                    String::new()
                }
            ),
            workaround: format!(
                "submit fewer requests at once (lower the application's queue depth) or spread the load over more devices; if nr_requests was lowered (now {}), raise it: echo 64 > {queue}/nr_requests",
                nr.as_deref().unwrap_or("unknown")
            ),
        });
    }
    not_any(why, "no block requests in the trace")
}

//! An operation far slower than usual, nearly all of
//! it spent waiting for the device.
//!
//! The outliers analysis follows the slowest operations of each kind
//! (syscalls, probe operations, ext4_sync_file) through the layers: how
//! long they were blocked with a request at the device, and the request
//! that held them longest. The rule takes the slowest of each kind and
//! asks, in turn: slow enough, mostly device time, one request holding it
//! (not a busy device: queue_saturation), far above its kind's median, and
//! not an RT-held wait of the thread that completes I/O (rt_starvation).
//!
//! A light capture (`record --light`) has no operations, only the slow
//! requests the kernel sent and each device's histograms: there the rule
//! asks the same of the slowest requests themselves (slow enough, mostly
//! at the device, far above the median of their device and operation, not
//! overlapping an RT-held wait).

use super::helpers::{median_of, ms_2dp, not_any};
use super::rt_starvation::starved_completion;
use crate::analyze::light::{LightSummary, SlowRequestSummary};
use crate::analyze::outliers::Outlier;
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "device_latency_spike",
    looks_for: "an operation far slower than its median, nearly all of it device time",
    fires_when: "an operation ≥ 50 ms and ≥ 10× its median, ≥ 80 % device time, ≥ 50 % of it waiting for one request (an io_uring request is an operation too: its device time is that of the block requests it caused; so is a page fault, a read through a mapped file)",
    stays_silent: "slow operations that were runnable (RT burner), or whose device time overlaps an RT-held wait of the thread that completes I/O, or was spread over many short requests (a busy device)",
    needs: &["block"],
    light_lacks: None,
    light_lacks_when: None,
    remedy: None,
    check,
};

/// Chosen between the measured eMMC's normal fsyncs (< 5 ms) and its spikes (150–270
/// ms); the workaround's `probe fsync --stop-above 50` uses the same bound.
const MIN_NS: u64 = 50_000_000;
/// Chosen: "nearly all" device time (the measured eMMC: CPU idle, the gap at the
/// device; slowdev-fsync.cap: 99.6 %).
const MIN_DEVICE_PERCENT: f64 = 80.0;
/// Commit 4302d61: a lab journal run's openat was 81 % device over 28.8 ms
/// but its longest request 1.2 ms (a busy device, busy-device.synthetic.txt).
const MIN_MAIN_REQUEST_SHARE: f64 = 0.5;
/// Chosen from the measured eMMC: under 5 ms normally, 150–270 ms in a spike (30x+).
const MIN_TIMES_MEDIAN: u64 = 10;

/// A median in ms: two decimals, or three significant digits under 0.01
/// ms (a page-cache hit's 4 µs is not "0 ms").
fn median_ms(ns: u64) -> f64 {
    if ns >= 10_000 {
        return ms_2dp(ns);
    }
    let digits = 3 - (ns.max(1) as f64 / 1e6).log10().floor() as i32 - 1;
    let scale = 10f64.powi(digits);
    (ns as f64 / 1e6 * scale).round() / scale
}

/// A light capture's request spikes are critical from this many: the measured eMMC's
/// came every ~200 writes; one alone on a shared disk may be its noise.
const CRITICAL_LIGHT_SPIKES: usize = 2;

fn check(a: &Analysis) -> Verdict {
    if let (Some(light), true) = (&a.light, a.outliers.by_kind.is_empty()) {
        return check_light(a, light);
    }
    let mut best: Option<(&str, &Outlier, u64)> = None;
    let mut why = Vec::new();
    for (kind, list) in &a.outliers.by_kind {
        let Some(o) = list.first() else { continue };
        let median = median_of(a, kind).unwrap_or(0);
        if o.latency_ns < MIN_NS {
            continue;
        }
        if let Err(reason) = held_by_one_request(a, kind, o, median) {
            why.push(reason);
            continue;
        }
        if best.is_none_or(|b| o.latency_ns > b.1.latency_ns) {
            best = Some((kind, o, median));
        }
    }
    let Some((kind, o, median)) = best else {
        return not_any(
            why,
            format!("no operation took {} ms or more", MIN_NS / 1_000_000),
        );
    };
    Verdict::Fired(finding(a, kind, o, median))
}

/// Whether the slowest operation of `kind` (at least MIN_NS) was a device
/// spike, or why not.
fn held_by_one_request(a: &Analysis, kind: &str, o: &Outlier, median: u64) -> Result<(), String> {
    // Blocked with a request at the device, inside a checkpoint or not.
    let device: u64 = o.breakdown.device_ns.values().sum();
    let share = device as f64 / o.latency_ns.max(1) as f64;
    if share < MIN_DEVICE_PERCENT / 100.0 {
        return Err(format!(
            "slowest {kind} ({} ms) was {:.0}% device time",
            ms_2dp(o.latency_ns),
            share * 100.0
        ));
    }
    // One request must have held it: device time spread over many
    // short requests is a busy device (queue_saturation), not a spike.
    let longest = o.main_request.as_ref().map(|r| r.overlap_ns).unwrap_or(0);
    if (longest as f64) < MIN_MAIN_REQUEST_SHARE * o.latency_ns as f64 {
        return Err(format!(
            "slowest {kind} ({} ms) was {:.0}% device time, but no one request held it: the longest it waited for covers {} ms ({:.0}%), a busy device rather than a slow request (see queue_saturation)",
            ms_2dp(o.latency_ns),
            share * 100.0,
            ms_2dp(longest),
            longest as f64 * 100.0 / o.latency_ns.max(1) as f64
        ));
    }
    if median > 0 && o.latency_ns < MIN_TIMES_MEDIAN * median {
        return Err(format!(
            "slowest {kind} ({} ms) is under {MIN_TIMES_MEDIAN}x its median ({} ms)",
            ms_2dp(o.latency_ns),
            ms_2dp(median)
        ));
    }
    // Time "at the device" while the thread that would complete the
    // request could not run: the CPU was the bottleneck, not the device.
    let (from, to) = (o.start_ns, o.start_ns + o.latency_ns);
    if let Some((w, rt)) = starved_completion(a, from, to) {
        return Err(format!(
            "slowest {kind} ({} ms) overlaps {} ({})'s {} ms wait for CPU {} held by {}: completion work was starved ({}), not the device",
            ms_2dp(o.latency_ns),
            w.comm,
            w.pid,
            ms_2dp(w.wait_ns),
            w.cpu,
            holder(w, rt),
            if rt { "rt_starvation" } else { "cpu_contention" }
        ));
    }
    Ok(())
}

/// Who held a starved thread's CPU: `real-time burner (70)`.
fn holder(w: &crate::analyze::sched::LongWait, rt: bool) -> String {
    match w.held_by.first() {
        Some(h) if rt => format!("real-time {} ({})", h.comm, h.pid),
        Some(h) => format!("{} ({}, {})", h.comm, h.pid, h.policy),
        None => "tasks the trace did not name".into(),
    }
}

/// The finding for the slowest spike, `o` of `kind`.
fn finding(a: &Analysis, kind: &str, o: &Outlier, median: u64) -> Finding {
    let spikes = a.outliers.by_kind[kind]
        .iter()
        .filter(|x| {
            x.latency_ns >= MIN_NS
                && x.percent.get("device").copied().unwrap_or(0.0) >= MIN_DEVICE_PERCENT
        })
        .count();
    let r = o.main_request.as_ref();
    // An io_uring request's thread went on while it was in flight: no wait
    // of a thread, whose CPU could idle; its time is its block request's.
    let uring = kind.starts_with("io_uring ");
    let held = r
        .and_then(|r| r.d2c_ns)
        .map(|d| format!(" for {} ms", ms_2dp(d)))
        .unwrap_or_default();
    let fault = o.file.as_ref();
    let (explanation, workaround) = if let Some(page) = fault {
        (
            format!(
                "A read through a mapped file: the thread touched a page not in memory, and its fault read the page from the device, where the read sat{held} ({:.0}% of the fault's time; CPU idle {:.0}% of the wait): the device held it, not the CPU or the page cache's locks. The file is {}{}.",
                o.percent.get("device").copied().unwrap_or(0.0),
                o.cpu_idle_percent,
                page.describe(),
                match page.path {
                    Some(_) => String::new(),
                    None => format!(" (`find MOUNTPOINT -xdev -inum {}` names it)", page.inode),
                }
            ),
            "find why the device stalls (its own latency log, smartctl) or move the file to a faster device; keep the hot part of the mapping in memory (mlock, MAP_POPULATE, or a warm-up read at start) so that a stall is not paid on the request path; confirm with fio --ioengine=mmap on the file".to_string(),
        )
    } else if uring {
        (
            format!(
                "The request's own block request sat at the device{held} ({:.0}% of the request's time): not the submitting thread, which went on, nor an io-wq worker or the queue, the device held it ({}).",
                o.percent.get("device").copied().unwrap_or(0.0),
                o.summary
            ),
            "find why the device stalls (its own latency log, smartctl) or move the data to a faster device; for reads the application cannot wait for, issue a second read after a deadline (a hedged read); confirm with fio --ioengine=io_uring on the device".to_string(),
        )
    } else {
        (
            format!(
                "The operation was blocked while one request sat at the device{held}, and its CPU was idle {:.0}% of that time: neither the CPU nor the scheduler held it up, the device did (an eMMC has been measured taking 270 ms for one journal write).",
                o.cpu_idle_percent
            ),
            "take the synchronous write off the latency-critical path (a separate I/O thread, or an asynchronous commit such as PostgreSQL's synchronous_commit=off), or replace the device; confirm with iosleuth probe fsync --path FILE --stop-above 50".to_string(),
        )
    };
    let mut evidence = json!({
        "operation": kind,
        "latency_ns": o.latency_ns,
        "median_ns": median,
        "spikes_in_top": spikes,
        "device_percent": o.percent.get("device"),
        "cpu_idle_percent": (!uring).then_some(o.cpu_idle_percent),
        // The device that stalled, as the other device rules name it.
        "device": r.map(|r| &r.dev),
        "request": r,
        "summary": o.summary,
    });
    if let Some(p) = fault {
        evidence["file"] = json!(p);
    }
    Finding {
        remedy: None,
        id: RULE.id,
        severity: Severity::Critical,
        title: format!(
            "{kind}{}: {} ms instead of {} ms, {:.0}% of it waiting for the device{}",
            fault
                .map(|p| format!(" in {}", p.describe()))
                .unwrap_or_default(),
            ms_2dp(o.latency_ns),
            median_ms(median),
            o.percent.get("device").copied().unwrap_or(0.0),
            r.map(|r| format!(" ({} {})", r.class, r.dev))
                .unwrap_or_default()
        ),
        evidence,
        explanation,
        workaround,
    }
}

/// The light capture's version: the slowest requests themselves.
fn check_light(a: &Analysis, light: &LightSummary) -> Verdict {
    let mut why = Vec::new();
    let mut spikes = Vec::new();
    for r in &light.slowest {
        if r.total_ns < MIN_NS {
            // Longest first: the rest are shorter still.
            let other = if why.is_empty() && spikes.is_empty() {
                ""
            } else {
                "other "
            };
            why.push(format!(
                "the slowest {other}request the light capture kept took {} ms ({} on {})",
                ms_2dp(r.total_ns),
                r.op,
                r.device
            ));
            break;
        }
        match request_spike(a, light, r) {
            Ok(median) => spikes.push((r, median)),
            Err(reason) => why.push(reason),
        }
    }
    let Some(&(r, median)) = spikes.first() else {
        why.truncate(3);
        return not_any(
            why,
            format!(
                "no request the light capture kept took {} ms or more",
                MIN_NS / 1_000_000
            ),
        );
    };
    let severity = if spikes.len() >= CRITICAL_LIGHT_SPIKES {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let device_pct = r.device_ns as f64 * 100.0 / r.total_ns.max(1) as f64;
    Verdict::Fired(Finding {
        remedy: None,
        id: RULE.id,
        severity,
        title: format!(
            "{} requests on {}: {} ms instead of {} ms, {device_pct:.0}% of it at the device ({} KiB at sector {} {}); {} such spikes",
            r.op,
            r.device,
            ms_2dp(r.total_ns),
            ms_2dp(median),
            r.bytes / 1024,
            r.sector,
            r.issuer(),
            spikes.len()
        ),
        evidence: json!({
            "device": r.device,
            "request": r,
            "latency_ns": r.total_ns,
            "median_ns": median,
            "spikes": spikes.len(),
            "device_percent": device_pct,
        }),
        explanation: format!(
            "One request sat {} ms at the device while its device's {} requests usually take {} ms: the device stalled, not the queue or the CPU (an eMMC has been measured taking 270 ms for one journal write). A light capture has no system calls: the full recorder shows which operations waited for it.",
            ms_2dp(r.device_ns),
            r.op,
            ms_2dp(median)
        ),
        workaround: "take the synchronous write off the latency-critical path (a separate I/O thread, or an asynchronous commit such as PostgreSQL's synchronous_commit=off), or replace the device; confirm with iosleuth probe fsync --path FILE --stop-above 50, recorded without --light to see the operations that waited".into(),
    })
}

/// The median (ns) of the request's device and operation when the request
/// is a device spike, else why not.
fn request_spike(
    a: &Analysis,
    light: &LightSummary,
    r: &SlowRequestSummary,
) -> Result<u64, String> {
    let share = r.device_ns as f64 / r.total_ns.max(1) as f64;
    if share < MIN_DEVICE_PERCENT / 100.0 {
        return Err(format!(
            "a {} ms {} request on {} was {:.0}% device time (the rest queued)",
            ms_2dp(r.total_ns),
            r.op,
            r.device,
            share * 100.0
        ));
    }
    let median = light
        .devices
        .iter()
        .filter(|d| d.device == r.device)
        .flat_map(|d| d.ops.iter().filter(|o| o.op == r.op))
        .map(|o| o.total.p50)
        .next()
        .unwrap_or(0);
    if median > 0 && r.total_ns < MIN_TIMES_MEDIAN * median {
        return Err(format!(
            "a {} ms {} request on {} is under {MIN_TIMES_MEDIAN}x its median ({} ms)",
            ms_2dp(r.total_ns),
            r.op,
            r.device,
            ms_2dp(median)
        ));
    }
    let (from, to) = (r.issue_ns, r.issue_ns + r.device_ns);
    if let Some((w, rt)) = starved_completion(a, from, to) {
        return Err(format!(
            "a {} ms {} request on {} overlaps {} ({})'s {} ms wait for CPU {} held by {}: completion work was starved ({}), not the device",
            ms_2dp(r.total_ns),
            r.op,
            r.device,
            w.comm,
            w.pid,
            ms_2dp(w.wait_ns),
            w.cpu,
            holder(w, rt),
            if rt { "rt_starvation" } else { "cpu_contention" }
        ));
    }
    Ok(median)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::histogram::Percentiles;
    use crate::analyze::light::{LightDeviceSummary, LightOpSummary};
    use crate::diagnose::rules::testkit::{analysis, fired, line, silent, Trace};

    /// A light capture of 7,0 whose writes take 100 µs at the median, with
    /// these slow writes: (issue ms, total ms, device ms).
    fn light(slow: &[(u64, u64, u64)]) -> Analysis {
        let wakeup = "comm=probe pid=100 prio=120 target_cpu=000";
        let mut a = analysis(&line(1_000, "x-1", 0, "sched_wakeup", wakeup));
        let request = |&(at, total, device): &(u64, u64, u64)| SlowRequestSummary {
            device: "7,0".into(),
            op: "write",
            sector: 98308,
            bytes: 4096,
            issue_ns: at * 1_000_000,
            total_ns: total * 1_000_000,
            device_ns: device * 1_000_000,
            comm: "jbd2/loop0-8".into(),
            ..Default::default()
        };
        a.light = Some(LightSummary {
            devices: vec![LightDeviceSummary {
                device: "7,0".into(),
                ops: vec![LightOpSummary {
                    op: "write".into(),
                    ios: 1200,
                    total: Percentiles {
                        p50: 100_000,
                        ..Default::default()
                    },
                    ..Default::default()
                }],
                ..Default::default()
            }],
            slowest: slow.iter().map(request).collect(),
            ..Default::default()
        });
        a
    }

    #[test]
    fn fires_for_a_light_captures_stalled_requests() {
        let f = fired(check(&light(&[(1000, 150, 150), (3000, 151, 150)])));
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "write requests on 7,0: 150 ms instead of 0.1 ms, 100% of it at the device (4 KiB at sector 98308 by jbd2/loop0-8); 2 such spikes"
        );
        assert_eq!(f.evidence["median_ns"], 100_000);
        // One spike alone: a warning.
        let f = fired(check(&light(&[(1000, 150, 150), (3000, 2, 2)])));
        assert_eq!(f.severity, Severity::Warning);
    }

    #[test]
    fn a_light_requests_cgroup_is_named_where_the_capture_resolved_it() {
        let mut a = light(&[(1000, 150, 150), (3000, 151, 150)]);
        for r in &mut a.light.as_mut().unwrap().slowest {
            r.cgroup = Some("/system.slice/db.service".into());
        }
        let f = fired(check(&a));
        assert!(
            f.title
                .contains("by jbd2/loop0-8, cgroup /system.slice/db.service); 2 such spikes"),
            "{}",
            f.title
        );
    }

    #[test]
    fn silent_for_a_light_capture_whose_slow_requests_queued() {
        assert_eq!(
            silent(check(&light(&[(1000, 150, 20), (3000, 2, 2)]))),
            "a 150 ms write request on 7,0 was 13% device time (the rest queued); the slowest other request the light capture kept took 2 ms (write on 7,0)"
        );
    }

    const T0: u64 = 200_000_000;
    const ENTER: &str =
        "fd: 0x00000003, buf: 0x00007f0000000000, count: 0x00004000, pos: 0x00000000";

    /// tests/fixtures/busy-device.synthetic.txt's shape: ten 50 µs
    /// pwrites by probe (pid 100), then one blocked while the device
    /// serves `requests` writes of `each_us` back to back.
    fn blocked_write(requests: u64, each_us: u64) -> Trace {
        let mut tr = Trace::default();
        for i in 0..10 {
            let t = T0 - 10_000 + i * 500;
            tr.add(t, "probe-100", 0, "sys_enter_pwrite64", ENTER);
            tr.add(t + 50, "probe-100", 0, "sys_exit_pwrite64", "0x4000");
        }
        tr.add(T0, "probe-100", 0, "sys_enter_pwrite64", ENTER);
        tr.add(T0 + 100, "probe-100", 0, "sched_switch", "prev_comm=probe prev_pid=100 prev_prio=120 prev_state=D ==> next_comm=swapper/0 next_pid=0 next_prio=120");
        let mut t = T0 + 200;
        for i in 0..requests {
            let s = 1000 + i * 8;
            let issue = format!("7,0 W 4096 () {s} + 8 be,0,4 [kworker/1:1]");
            tr.add(t, "kworker/1:1-60", 1, "block_rq_issue", &issue);
            t += each_us;
            let done = format!("7,0 W () {s} + 8 be,0,4 [0]");
            tr.add(t, "<idle>-0", 1, "block_rq_complete", &done);
            t += 10;
        }
        tr.add(
            t + 50,
            "<idle>-0",
            0,
            "sched_wakeup",
            "comm=probe pid=100 prio=120 target_cpu=000",
        );
        tr.add(t + 60, "<idle>-0", 0, "sched_switch", "prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=probe next_pid=100 next_prio=120");
        tr.add(t + 100, "probe-100", 0, "sys_exit_pwrite64", "0x4000");
        tr
    }

    #[test]
    fn fires_for_one_slow_request() {
        let f = fired(check(&analysis(&blocked_write(1, 60_000).text())));
        assert_eq!(f.id, "device_latency_spike");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "syscall pwrite64: 60.31 ms instead of 0.05 ms, 100% of it waiting for the device (data write 7,0)"
        );
        assert_eq!(f.evidence["latency_ns"], 60_310_000);
        // The latency histogram's median of the ten 50 µs calls.
        assert_eq!(f.evidence["median_ns"], 50_047);
        assert_eq!(f.evidence["spikes_in_top"], 1);
        assert!(f.explanation.starts_with(
            "The operation was blocked while one request sat at the device for 60 ms"
        ));
    }

    #[test]
    fn silent_for_a_busy_device() {
        // Commit 4302d61's edge case: 30 requests of 2 ms, none holding it.
        assert_eq!(
            silent(check(&analysis(&blocked_write(30, 2_000).text()))),
            "slowest syscall pwrite64 (60.6 ms) was 99% device time, but no one request held it: the longest it waited for covers 2 ms (3%), a busy device rather than a slow request (see queue_saturation)"
        );
    }

    #[test]
    fn silent_when_completion_work_was_starved_by_a_real_time_task() {
        // The thread that completes I/O waits 30 ms for CPU 1 behind an
        // RT task (prio 49) while the write is "at the device".
        let mut tr = blocked_write(1, 60_000);
        tr.add(T0 + 1_000, "<idle>-0", 1, "sched_switch", "prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=burner next_pid=70 next_prio=49");
        tr.add(
            T0 + 1_100,
            "burner-70",
            1,
            "sched_wakeup",
            "comm=kworker/1:1 pid=60 prio=120 target_cpu=001",
        );
        tr.add(T0 + 31_100, "burner-70", 1, "sched_switch", "prev_comm=burner prev_pid=70 prev_prio=49 prev_state=S ==> next_comm=kworker/1:1 next_pid=60 next_prio=120");
        assert_eq!(
            silent(check(&analysis(&tr.text()))),
            "slowest syscall pwrite64 (60.31 ms) overlaps kworker/1:1 (60)'s 30 ms wait for CPU 1 held by real-time burner (70): completion work was starved (rt_starvation), not the device"
        );
    }

    #[test]
    fn silent_when_nothing_took_50_ms() {
        assert_eq!(
            silent(check(&analysis(&blocked_write(1, 2_000).text()))),
            "no operation took 50 ms or more"
        );
    }
}

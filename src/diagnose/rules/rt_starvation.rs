//! Runnable threads kept off their CPU by a real-time
//! task.
//!
//! A SCHED_FIFO/RR task runs until it blocks; a normal thread that shares
//! its CPU waits, runnable, however urgent its I/O (measured: the kernel
//! threads that complete I/O). The scheduler analysis keeps the longest
//! runqueue waits and who ran on that CPU meanwhile (RT: kernel priority
//! below 100 in `sched_switch`); a long wait held by an RT task is the
//! evidence. device_latency_spike uses the same waits to stay silent when
//! "device time" was really starved completion work.

use super::helpers::{kernel_thread, ms_2dp, not, sched_rt_runtime_us};
use crate::analyze::sched::LongWait;
use crate::analyze::Analysis;
use crate::compare::metrics::LONGEST_RUNQUEUE_WAIT;
use crate::diagnose::Remedy;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "rt_starvation",
    looks_for: "threads runnable for long while a real-time task held their CPU",
    fires_when: "runqueue waits ≥ 10 ms, ≥ 80 % of them on a CPU held by an RT task",
    stays_silent: "slow fsyncs blocked on a device",
    needs: &["sched"],
    light_lacks: None,
    light_lacks_when: None,
    remedy: Some("the real-time task that held the CPU made an ordinary one (`task/TID/policy` to `other`, as `chrt -o -p 0 TID`) when it is a user thread, after `kernel.sched_rt_runtime_us` 950000 when the snapshot shows RT throttling off (-1); live, while that thread still runs"),
    check,
};

/// Far below the measured 100–150 ms waits behind a real-time burner
/// (rt-burner.cap, light-rt.cap) and far above rt-short-bursts.cap's
/// longest, 1.19 ms.
const MIN_WAIT_NS: u64 = 10_000_000;
/// Chosen: the RT task held the CPU for most of the wait (no source named).
const MIN_RT_SHARE: f64 = 0.8;

/// Runqueue waits of at least 10 ms, mostly held by a real-time task.
pub(super) fn rt_held_waits(a: &Analysis) -> impl Iterator<Item = &LongWait> {
    a.sched.long_waits.iter().filter(|w| {
        w.wait_ns >= MIN_WAIT_NS
            && w.held_by
                .first()
                .is_some_and(|h| h.policy == "RT" && h.ns as f64 >= MIN_RT_SHARE * w.wait_ns as f64)
    })
}

/// Kernel threads that complete or carry I/O: the block layer's and
/// loop devices' workers, softirq threads, the journal, threaded irqs.
const COMPLETES_IO: &[&str] = &["kworker/", "ksoftirqd/", "loop", "jbd2/", "irq/"];

/// A runqueue wait of at least 10 ms overlapping `from..to` by a thread
/// that completes I/O: held by a real-time task, or by any task when the
/// waiting thread is a kernel thread that completes I/O (its wait is the
/// request's "device" time). The CPU, not the device, was the bottleneck.
pub(super) fn starved_completion(a: &Analysis, from: u64, to: u64) -> Option<(&LongWait, bool)> {
    let overlaps = |w: &&LongWait| w.start_ns < to && w.start_ns + w.wait_ns > from;
    if let Some(w) = rt_held_waits(a).find(overlaps) {
        return Some((w, true));
    }
    a.sched
        .long_waits
        .iter()
        .filter(|w| w.wait_ns >= MIN_WAIT_NS && COMPLETES_IO.iter().any(|p| w.comm.starts_with(p)))
        .find(overlaps)
        .map(|w| (w, false))
}

fn check(a: &Analysis) -> Verdict {
    let waits: Vec<_> = rt_held_waits(a).collect();
    if waits.is_empty() {
        if a.sched.switches == 0 {
            return not("no scheduler events in the trace (record the `sched` event set)");
        }
        return not(match a.sched.long_waits.first() {
            Some(w) => format!(
                "the longest runqueue wait, {} ms of {} ({}), was held by {}",
                ms_2dp(w.wait_ns),
                w.comm,
                w.pid,
                w.held_by
                    .first()
                    .map(|h| format!("{} {} ({}, prio {})", h.comm, h.pid, h.policy, h.prio))
                    .unwrap_or_else(|| "nobody seen".into())
            ),
            None => "no runqueue wait long enough to matter".into(),
        });
    }
    let w = waits[0];
    let h = &w.held_by[0];
    let rt = sched_rt_runtime_us(a);
    // The holder's policy, FIFO or RR, is not in sched_switch: unknown.
    // A real-time kernel thread (a threaded interrupt, a driver's worker)
    // is not the user's to lower: throttling is the remedy then, if off.
    let kernel = kernel_thread(a, &h.comm, h.pid);
    let lower = (!kernel).then(|| (format!("task/{}/policy", h.pid), None, "other"));
    let throttle = (rt.as_deref() == Some("-1"))
        .then(|| Remedy::set("kernel.sched_rt_runtime_us", rt.clone(), "950000"));
    let remedy = match (throttle, lower) {
        (Some(r), Some(l)) => Some(r.and(l.0, l.1, l.2)),
        (None, Some(l)) => Some(Remedy::set(l.0, l.1, l.2)),
        (r, None) => r,
    }
    // Judged by the wait itself: the workload's own time also moves with
    // whatever else the machine runs, the wait behind a real-time task
    // only with that task.
    .map(|r| r.judged_by(LONGEST_RUNQUEUE_WAIT.id("")));
    Verdict::Fired(Finding {
        remedy,
        id: RULE.id,
        severity: Severity::Critical,
        title: format!(
            "{} ({}) waited {} ms for CPU {} while real-time {} ({}, prio {}) ran: {} such waits",
            w.comm,
            w.pid,
            ms_2dp(w.wait_ns),
            w.cpu,
            h.comm,
            h.pid,
            h.prio,
            waits.len()
        ),
        evidence: json!({
            "victim": {"pid": w.pid, "comm": w.comm, "cpu": w.cpu},
            "longest_wait_ns": w.wait_ns,
            "waits_over_10ms": waits.len(),
            "held_by": w.held_by,
            "sched_rt_runtime_us": rt,
        }),
        explanation: "A real-time (SCHED_FIFO/RR) task runs until it blocks; a normal thread that shares its CPU waits, runnable, however urgent its I/O (measured: kernel threads that complete I/O starved by an RT task after a kernel upgrade changed where they run).".into(),
        workaround: if kernel {
            format!(
                "the RT task is a kernel thread ({} {}): find what makes it run so long on that CPU (its driver or interrupt; a threaded IRQ's affinity in /proc/irq/N/smp_affinity_list), or move the waiting work off that CPU; keep RT throttling on (sysctl kernel.sched_rt_runtime_us=950000)",
                h.comm, h.pid
            )
        } else {
            format!(
                "keep the RT task off that CPU or lower it: taskset -pc OTHER_CPUS {} / chrt -o -p 0 {}; keep RT throttling on (sysctl kernel.sched_rt_runtime_us=950000)",
                h.pid, h.pid
            )
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{analysis, fired, knobs, line, silent, with_snapshot};
    use serde_json::json;

    /// CPU 1 runs burner (pid 50, kernel priority `prio`) for 150 ms while
    /// victim (pid 60), woken onto that CPU, waits to run.
    fn burner(prio: u32) -> String {
        let mut text = line(1_000_000, "<idle>-0", 1, "sched_switch", &format!("prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=burner next_pid=50 next_prio={prio}"));
        text += &line(
            1_001_000,
            "burner-50",
            1,
            "sched_wakeup",
            "comm=victim pid=60 prio=120 target_cpu=001",
        );
        text += &line(1_151_000, "burner-50", 1, "sched_switch", &format!("prev_comm=burner prev_pid=50 prev_prio={prio} prev_state=S ==> next_comm=victim next_pid=60 next_prio=120"));
        text
    }

    #[test]
    fn fires_when_a_real_time_task_holds_a_waiting_thread_off_its_cpu() {
        let a = with_snapshot(
            analysis(&burner(49)),
            json!({ "sched": { "sched_rt_runtime_us": "950000", "sched_rt_period_us": "1000000" } }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "rt_starvation");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "victim (60) waited 150 ms for CPU 1 while real-time burner (50, prio 49) ran: 1 such waits"
        );
        assert_eq!(f.evidence["longest_wait_ns"], 150_000_000);
        assert_eq!(
            f.evidence["victim"],
            json!({"pid": 60, "comm": "victim", "cpu": 1})
        );
        assert_eq!(f.evidence["held_by"][0]["policy"], "RT");
        assert_eq!(f.evidence["sched_rt_runtime_us"], "950000");
        assert!(f
            .workaround
            .contains("taskset -pc OTHER_CPUS 50 / chrt -o -p 0 50"));
        // The holder made an ordinary thread; its policy now unknown (FIFO
        // or RR: sched_switch says only the priority), judged by the
        // longest runqueue wait.
        assert_eq!(
            f.remedy,
            Some(
                Remedy::set("task/50/policy", None, "other")
                    .judged_by("sched.longest_runqueue_wait_ms")
            )
        );
    }

    #[test]
    fn with_throttling_off_the_remedy_turns_it_on_first() {
        let a = with_snapshot(
            analysis(&burner(49)),
            json!({ "sched": { "sched_rt_runtime_us": "-1", "sched_rt_period_us": "1000000" } }),
        );
        let r = fired(check(&a)).remedy.unwrap();
        assert_eq!(
            knobs(&r),
            [
                ("kernel.sched_rt_runtime_us", Some("-1"), "950000"),
                ("task/50/policy", None, "other")
            ]
        );
        assert!(r.live);
    }

    #[test]
    fn a_real_time_kernel_thread_is_left_to_throttling() {
        let kernel = |rt: &str| {
            json!({
                "sched": { "sched_rt_runtime_us": rt },
                "kernel_threads": [{ "pid": 50, "tid": 50, "comm": "burner" }],
            })
        };
        let f = fired(check(&with_snapshot(
            analysis(&burner(49)),
            kernel("950000"),
        )));
        assert_eq!(f.remedy, None);
        assert!(
            f.workaround
                .starts_with("the RT task is a kernel thread (burner 50)")
                && !f.workaround.contains("chrt"),
            "{}",
            f.workaround
        );
        let f = fired(check(&with_snapshot(analysis(&burner(49)), kernel("-1"))));
        assert_eq!(
            f.remedy,
            Some(
                Remedy::set("kernel.sched_rt_runtime_us", Some("-1".into()), "950000")
                    .judged_by("sched.longest_runqueue_wait_ms")
            )
        );
    }

    #[test]
    fn silent_when_the_holder_is_a_normal_task() {
        assert_eq!(
            silent(check(&analysis(&burner(120)))),
            "the longest runqueue wait, 150 ms of victim (60), was held by burner 50 (normal, prio 120)"
        );
    }

    #[test]
    fn silent_without_scheduler_events() {
        let text = line(1_000, "fio-200", 0, "block_bio_queue", "7,0 W 0 + 8 [fio]");
        assert_eq!(
            silent(check(&analysis(&text))),
            "no scheduler events in the trace (record the `sched` event set)"
        );
    }
}

//! The workload's threads ready to run while other tasks held their CPU,
//! whatever those tasks' scheduling class.
//!
//! An ordinary (SCHED_OTHER) task shares its CPU by weight: a thread that
//! wakes when its I/O completes waits for the CPU's current task to use
//! its slice, more so when that task has a larger weight (a lower nice
//! value) or there are several. Each operation then carries that wait
//! however fast the device is. The outlier analysis measures it as the
//! "runnable" part of the workload's operations, with who ran meanwhile;
//! a real-time holder is `rt_starvation`'s cause and is left to it.

use super::helpers::{
    cpu_holders, holders_text, kernel_thread, not, slow_operations, span_ns, workload_ops,
    worth_naming, MIN_SPAN_PERCENT,
};
use crate::analyze::outliers::Holder;
use crate::analyze::sched::thread_kind;
use crate::analyze::Analysis;
use crate::diagnose::{impact, Finding, Remedy, Rule, Severity, Verdict};
use crate::model::units::percent_1dp as pct;
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "cpu_contention",
    looks_for: "the workload's operations waiting runnable while ordinary tasks held the CPU",
    fires_when: "operations runnable ≥ 20 % of the workload's time (or ≥ 30 % of its slow operations'), adding up to ≥ 5 % of the trace's span, the CPU held < 80 % by RT tasks",
    stays_silent: "the same fsyncs alone on their CPU; waits held by a real-time task (`rt_starvation`'s)",
    needs: &["sched"],
    light_lacks: Some("the operations' time, against which it weighs their runnable waits (it would take hooks on every system call's entry and exit, whose empty floor alone cost 9–15 % of a system-call-bound load: docs/BENCHMARKS.md; the flight recorder keeps runqueue waits of 5 ms and more)"),
    light_lacks_when: None,
    remedy: Some("each ordinary user thread beside the workload that held its CPU (up to 3, each ≥ 10 % of the time it waited) reniced to 10 (`task/TID/nice`, as `renice -n 10 -p TID`), unless the workload's own threads and the kernel threads doing its I/O held it; live, while those threads still run"),
    check,
};

/// A fifth of the workload's time waiting for a CPU is as much as the
/// measured causes it sits beside (the lab's journal and RT runs show
/// 11–31 % for their own parts); the lab's healthy runs show 0–5 %, the
/// fsync probe beside two CPU burners 1.2 %.
const MIN_SHARE_PERCENT: f64 = 20.0;
/// A holder named in the workaround and reniced by the remedy held at
/// least this share of the time the workload waited: the lab's two busy
/// loops hold 40–50 % each; a service's thread that ran in a gap beside
/// them (a thread of this VM's init, once) explains nothing, and a second
/// run may not see it at all.
const MIN_NAMED_HOLDER_PERCENT: u64 = 10;
/// The nice value the remedy gives the holders: a tenth of a nice-0
/// thread's weight (kernel/sched/core.c's table: 110 against 1024).
const RENICE_TO: &str = "10";
/// Over the slow operations only (10x their median and 5 ms): as the
/// `unexplained` finding names a part that large.
const MIN_SLOW_SHARE_PERCENT: f64 = 30.0;
/// Held mostly by real-time tasks: `rt_starvation` judges those waits.
const RT_HELD_SHARE: f64 = 0.8;

fn check(a: &Analysis) -> Verdict {
    let Some((total, b)) = impact::workload_time(a) else {
        return not(if a.sched.switches == 0 {
            "no scheduler events in the trace (record the `sched` event set)"
        } else {
            "the trace follows no operation of the workload"
        });
    };
    let share = pct(b.runnable_ns, total);
    let slow = slow_operations(a);
    let slow_ns: u64 = slow.iter().map(|s| s.op.latency_ns).sum();
    let slow_runnable: u64 = slow.iter().map(|s| s.op.breakdown.runnable_ns).sum();
    let slow_share = pct(slow_runnable, slow_ns);
    if share < MIN_SHARE_PERCENT && (slow_ns == 0 || slow_share < MIN_SLOW_SHARE_PERCENT) {
        return not(format!(
            "the workload's operations waited runnable {share}% of their time (fires at {MIN_SHARE_PERCENT} %){}",
            if slow_ns == 0 {
                String::new()
            } else {
                format!(", its slow operations {slow_share}% (fires at {MIN_SLOW_SHARE_PERCENT} %)")
            }
        ));
    }
    let waited = if share < MIN_SHARE_PERCENT {
        slow_runnable
    } else {
        b.runnable_ns
    };
    if !worth_naming(a, waited) {
        return not(format!(
            "the workload waited runnable {share}% of its time, but only {} ms over a {} ms trace (fires at {MIN_SPAN_PERCENT} % of it)",
            crate::model::units::ms_2dp(waited),
            crate::model::units::ms_2dp(span_ns(a))
        ));
    }
    // Who held the CPU: over the slow operations when they are what
    // fired, else over every kept operation of the workload.
    let kinds = crate::analyze::outliers::workload_kinds(&a.outliers);
    let holders = if share < MIN_SHARE_PERCENT {
        cpu_holders(slow.iter().map(|s| s.op))
    } else {
        cpu_holders(workload_ops(a))
    };
    let held: u64 = holders.iter().map(|h| h.ns).sum();
    let rt: u64 = holders.iter().filter(|h| h.prio < 100).map(|h| h.ns).sum();
    if held > 0 && rt as f64 >= RT_HELD_SHARE * held as f64 {
        return not(format!(
            "the workload waited runnable {share}% of its time, but real-time tasks held the CPU for {}% of it: rt_starvation judges that",
            pct(rt, held)
        ));
    }
    let workload: Vec<u32> = workload_ops(a).map(|o| o.pid).collect();
    // The workload's threads: those its kept operations ran on, and (only
    // the slowest are kept) the recorded command's threads of the same name.
    let mut comms: Vec<&str> = workload_ops(a).map(|o| o.comm.as_str()).collect();
    comms.sort_unstable();
    comms.dedup();
    let of_workload = |h: &Holder| {
        workload.contains(&h.pid)
            || (a.outliers.of_recorded_command(h.pid) != Some(false)
                && comms.binary_search(&h.comm.as_str()).is_ok())
    };
    let of_kernel = |h: &Holder| !matches!(thread_kind(&h.comm, h.pid), "task" | "idle");
    let sum = |keep: &dyn Fn(&Holder) -> bool| -> u64 {
        holders.iter().filter(|h| keep(h)).map(|h| h.ns).sum()
    };
    let own = sum(&of_workload);
    let kernel = sum(&|h| !of_workload(h) && of_kernel(h));
    // Held by processes the recorded command did not start (other work on
    // this machine), when the trace followed the command's forks.
    let outside: Option<u64> = holders
        .iter()
        .map(|h| {
            a.outliers
                .of_recorded_command(h.pid)
                .map(|inside| if inside { 0 } else { h.ns })
        })
        .sum();
    // Its own threads and the kernel threads doing its I/O: nothing to
    // move away, the cure is fewer busy threads than CPUs. Real time lost,
    // but the workload's shape rather than a cause beside it.
    let self_made = held > 0 && (own + kernel) * 2 > held;
    // Ordinary threads beside the workload, user threads only: those the
    // workaround and the remedy name.
    let beside = |h: &&Holder| {
        h.prio >= 100
            && !of_workload(h)
            && !kernel_thread(a, &h.comm, h.pid)
            && h.ns.saturating_mul(100) >= held.saturating_mul(MIN_NAMED_HOLDER_PERCENT)
    };
    let pids: Vec<String> = holders
        .iter()
        .filter(beside)
        .take(3)
        .map(|h| h.pid.to_string())
        .collect();
    let whom = if holders.is_empty() {
        "tasks the trace did not name".to_string()
    } else if own * 2 > held {
        format!(
            "the workload's own threads ({})",
            holders_text(&holders, held)
        )
    } else if self_made {
        format!(
            "the kernel threads doing its I/O{} ({})",
            if own > 0 { " and its own threads" } else { "" },
            holders_text(&holders, held)
        )
    } else if outside.is_some_and(|o| o * 2 > held) {
        format!(
            "processes outside the recorded command ({})",
            holders_text(&holders, held)
        )
    } else {
        holders_text(&holders, held)
    };
    let mut evidence = json!({
        "runnable_percent_of_workload_time": share,
        "runnable_ms": crate::model::units::ms_2dp(b.runnable_ns),
        "slow_operations": slow.len(),
        "runnable_percent_of_slow_time": (slow_ns > 0).then_some(slow_share),
        "held_by": holders.iter().take(5).map(|h| json!({
            "pid": h.pid, "comm": h.comm, "policy": super::helpers::policy_of(h.prio),
            "percent_of_held_time": pct(h.ns, held), "of_the_workload": of_workload(h),
            "kernel_thread": kernel_thread(a, &h.comm, h.pid),
            "of_the_recorded_command": a.outliers.of_recorded_command(h.pid),
        })).collect::<Vec<_>>(),
        "held_by_the_workload_percent": pct(own, held),
        "held_by_kernel_threads_percent": pct(kernel, held),
        "held_outside_the_recorded_command_percent": outside.map(|o| pct(o, held)),
        "real_time_percent_of_held_time": pct(rt, held),
    });
    if self_made {
        evidence[impact::AT_MOST_WARNING] = json!(
            "the workload's own threads and the kernel threads doing its I/O held the CPU: its shape, not a cause beside it"
        );
    }
    // The holders beside the workload, reniced as the workaround says;
    // an ordinary thread's kernel priority is 120 + its nice value.
    let remedy = Remedy::all(
        holders
            .iter()
            .filter(|h| !self_made && beside(h))
            .take(3)
            .map(|h| {
                (
                    format!("task/{}/nice", h.pid),
                    Some((h.prio - 120).to_string()),
                    RENICE_TO.to_string(),
                )
            }),
    );
    Verdict::Fired(Finding {
        remedy,
        id: RULE.id,
        severity: Severity::Warning,
        title: format!(
            "{} waited runnable for a CPU {share}% of its time{}: the CPU was held by {whom}",
            kinds.join(", "),
            if slow_ns > 0 {
                format!(" ({slow_share}% of its slow operations')")
            } else {
                String::new()
            },
        ),
        evidence,
        explanation: "The workload's threads were ready to run but their CPU ran other tasks. An ordinary (SCHED_OTHER) task shares a CPU by weight: a thread woken when its I/O completes waits for the running task's slice, longer behind tasks of lower nice value or behind several; each operation carries that wait however fast the device is (measured here as the runnable part of the operations' time).".into(),
        workaround: if self_made {
            "the workload's own threads and the kernel's work for them compete for the CPUs: run fewer busy threads than CPUs, or give it more CPUs".into()
        } else if pids.is_empty() {
            "give the workload its CPU: move the other tasks off its CPUs (taskset), lower their weight (renice, a cgroup's cpu.weight), or pin the workload where they do not run".into()
        } else {
            format!(
                "give the workload its CPU: move the holders off its CPUs (taskset -pc OTHER_CPUS {p}) or lower their weight (renice -n {RENICE_TO} -p {ps}; in a cgroup, cpu.weight), or pin the workload to CPUs they do not use",
                p = pids[0],
                ps = pids.join(" ")
            )
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{analysis, fired, silent, with_snapshot, Trace};
    use crate::model::Tracepoint;

    /// A thread (pid 60) whose reads (pread64) each wait `runnable_us` for CPU
    /// 1 behind `holder` (pid 50, kernel priority `prio`), after 100 µs
    /// blocked; ten of them.
    fn contended(holder: &str, prio: u32, runnable_us: u64) -> String {
        contended_by(&[(holder, 50, prio, 100, runnable_us); 10])
    }

    /// As `contended`, a read for each holder (comm, pid, priority, µs
    /// blocked, µs runnable).
    fn contended_by(reads: &[(&str, u32, u32, u64, u64)]) -> String {
        let mut t = Trace::default();
        let sw = Tracepoint::SchedSwitch.name();
        let mut at = 1_000_000;
        t.add(at, "<idle>-0", 1, sw, "prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=victim next_pid=60 next_prio=120");
        for &(holder, hpid, prio, blocked_us, runnable_us) in reads {
            t.add(
                at + 1,
                "victim-60",
                1,
                "sys_enter_pread64",
                "fd: 0x00000003, buf: 0x7f0000000000, count: 0x00001000, pos: 0x00000000",
            );
            t.add(at + 2, "victim-60", 1, sw, &format!("prev_comm=victim prev_pid=60 prev_prio=120 prev_state=D ==> next_comm={holder} next_pid={hpid} next_prio={prio}"));
            t.add(
                at + blocked_us,
                &format!("{holder}-{hpid}"),
                1,
                Tracepoint::SchedWakeup.name(),
                "comm=victim pid=60 prio=120 target_cpu=001",
            );
            t.add(at + blocked_us + runnable_us, &format!("{holder}-{hpid}"), 1, sw, &format!("prev_comm={holder} prev_pid={hpid} prev_prio={prio} prev_state=R ==> next_comm=victim next_pid=60 next_prio=120"));
            t.add(
                at + blocked_us + 10 + runnable_us,
                "victim-60",
                1,
                "sys_exit_pread64",
                "0x1000",
            );
            at += blocked_us + 100 + runnable_us;
        }
        t.text()
    }

    #[test]
    fn fires_when_ordinary_tasks_hold_the_cpu_and_names_them() {
        let f = fired(check(&analysis(&contended("yes", 110, 400))));
        assert!(
            f.title.starts_with("syscall pread64 waited runnable for a CPU 78.6% of its time: the CPU was held by yes 50 (nice -10) 100%"),
            "{}",
            f.title
        );
        assert_eq!(f.evidence["held_by"][0]["policy"], "nice -10");
        assert!(
            f.workaround.contains("renice -n 10 -p 50"),
            "{}",
            f.workaround
        );
        assert_eq!(
            f.remedy,
            Some(Remedy::set("task/50/nice", Some("-10".into()), "10"))
        );
    }

    #[test]
    fn a_thread_that_held_the_cpu_a_moment_is_not_named() {
        // yes held waits of 400 µs, a service's thread one of 100 µs, in
        // the slowest read.
        let mut reads = vec![("yes", 50, 110, 100, 400); 9];
        reads.insert(4, ("tokio-rt-worker", 69, 120, 2000, 100));
        let f = fired(check(&analysis(&contended_by(&reads))));
        assert_eq!(f.evidence["held_by"][1]["pid"], 69, "{}", f.evidence);
        let share = f.evidence["held_by"][1]["percent_of_held_time"]
            .as_f64()
            .unwrap();
        assert!(share > 0.0 && share < 10.0, "{share}");
        assert_eq!(
            f.remedy,
            Some(Remedy::set("task/50/nice", Some("-10".into()), "10"))
        );
        assert!(
            f.workaround.contains("renice -n 10 -p 50;"),
            "{}",
            f.workaround
        );
    }

    #[test]
    fn a_holder_the_snapshot_lists_as_a_kernel_thread_is_never_reniced() {
        // kdamond.0: a kernel thread its name does not tell.
        let kernel = json!({ "kernel_threads": [{ "pid": 50, "tid": 50, "comm": "kdamond.0" }] });
        let f = fired(check(&with_snapshot(
            analysis(&contended("kdamond.0", 110, 400)),
            kernel,
        )));
        assert_eq!(f.evidence["held_by"][0]["kernel_thread"], true);
        assert_eq!(f.remedy, None);
        assert!(!f.workaround.contains("-p 50"), "{}", f.workaround);
        // Another thread of that id in the snapshot is not it.
        let other = json!({ "kernel_threads": [{ "pid": 51, "tid": 51, "comm": "kdamond.0" }] });
        let f = fired(check(&with_snapshot(
            analysis(&contended("kdamond.0", 110, 400)),
            other,
        )));
        assert_eq!(
            f.remedy,
            Some(Remedy::set("task/50/nice", Some("-10".into()), "10"))
        );
    }

    #[test]
    fn kernel_threads_doing_the_io_make_it_the_workloads_shape_never_critical() {
        let f = fired(check(&analysis(&contended("kworker/u8:2", 120, 400))));
        assert!(
            f.title.ends_with("the CPU was held by the kernel threads doing its I/O (kworker/u8:2 50 (nice 0) 100%)"),
            "{}",
            f.title
        );
        assert_eq!(f.evidence["held_by_kernel_threads_percent"], 100.0);
        assert!(f.evidence.get(impact::AT_MOST_WARNING).is_some());
        assert!(
            f.workaround
                .starts_with("the workload's own threads and the kernel's work"),
            "{}",
            f.workaround
        );
        assert_eq!(f.remedy, None, "its own shape: nothing to renice");
        // The same wait behind an ordinary process is a cause beside it.
        let f = fired(check(&analysis(&contended("yes", 120, 400))));
        assert!(f.evidence.get(impact::AT_MOST_WARNING).is_none());
        assert_eq!(f.evidence["held_by_kernel_threads_percent"], 0.0);
    }

    #[test]
    fn silent_when_real_time_tasks_hold_it_or_the_wait_is_small() {
        let why = silent(check(&analysis(&contended("burner", 49, 400))));
        assert!(why.contains("rt_starvation judges that"), "{why}");
        let why = silent(check(&analysis(&contended("yes", 120, 10))));
        assert!(
            why.starts_with("the workload's operations waited runnable 8.4% of their time"),
            "{why}"
        );
    }
}

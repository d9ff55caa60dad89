//! The scheduler, interrupts, workqueues and CPU gaps.

use super::*;

/// Unknown is not zero: without wakeup events a thread's blocked time
/// (which ends at its wakeup) and the wakeups are not recorded, and the
/// runqueue latency holds only the waits after a preemption.
pub(super) fn sched(
    out: &mut String,
    s: &crate::analyze::sched::SchedSummary,
    recorded: &crate::analyze::coverage::Recorded,
    st: &Style,
) {
    use crate::model::Tracepoint;
    if s.switches == 0 {
        return;
    }
    let woken = [
        Tracepoint::SchedWaking,
        Tracepoint::SchedWakeup,
        Tracepoint::SchedWakeupNew,
    ]
    .into_iter()
    .any(|k| recorded.saw(k));
    let _ = writeln!(
        out,
        "==================== Scheduler ({} switches, {}) ====================\n",
        s.switches,
        match woken {
            true => format!("{} wakeups", s.wakeups),
            false => "wakeups not recorded".to_string(),
        }
    );
    if s.runqlat_us.total() > 0 {
        let _ = writeln!(
            out,
            "runqueue latency ({}), all threads:",
            match woken {
                true => "wakeup or preemption -> on CPU",
                false => "preemption -> on CPU only: wakeups not recorded",
            }
        );
        out.push_str(&s.runqlat_us.render("usecs"));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "{:>8} {:<16} {:<10} {:>5} {:>8} {:>11} {:>11} {:>11} {:>11}",
        "PID", "COMM", "KIND", "PRIO", "waits", "avg ms", "max ms", "runnable ms", "blocked ms"
    );
    for t in s.threads.iter().take(15) {
        let blocked = match woken {
            true => format!("{:.3}", ms(t.blocked_ns)),
            false => "—".to_string(),
        };
        let _ = writeln!(
            out,
            "{:>8} {:<16} {:<10} {:>5} {:>8} {:>11.3} {:>11.3} {:>11.3} {:>11}",
            t.pid,
            Esc(&t.comm),
            t.kind,
            t.prio,
            t.switches,
            ms(t.avg_delay_ns),
            ms(t.max_delay_ns),
            ms(t.runnable_ns),
            blocked
        );
    }
    if !woken {
        let _ = writeln!(
            out,
            "(—: blocked time ends at a wakeup; no wakeup events were recorded)"
        );
    }
    out.push('\n');
    if !s.long_waits.is_empty() {
        let _ = writeln!(out, "longest runnable waits, and who held the CPU:");
        for w in s.long_waits.iter().take(5) {
            let held: Vec<String> = w
                .held_by
                .iter()
                .map(|h| {
                    format!(
                        "{} ({}, {} prio {}) {:.3} ms",
                        Esc(&h.comm),
                        h.pid,
                        h.policy,
                        h.prio,
                        ms(h.ns)
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  {:>10.3} ms  {} ({}) on CPU {} at {}: {}",
                ms(w.wait_ns),
                Esc(&w.comm),
                w.pid,
                w.cpu,
                st.at(w.start_ns),
                if held.is_empty() {
                    "nothing recorded".to_string()
                } else {
                    held.join(", ")
                }
            );
        }
        out.push('\n');
    }
}

pub(super) fn interrupts(
    out: &mut String,
    irq: &crate::analyze::irq::IrqSummary,
    sched: &crate::analyze::sched::SchedSummary,
) {
    use crate::analyze::irq::VECTORS;
    if irq.softirq.is_empty() && irq.hardirq.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Interrupts ====================\n"
    );
    if !irq.softirq.is_empty() {
        let _ = writeln!(
            out,
            "softirqs per second over {:.3} s (the columns of mpstat -I SCPU):",
            irq.seconds
        );
        let mut head = format!("{:>4}", "CPU");
        for v in VECTORS {
            head.push_str(&format!(" {:>10}", format!("{v}/s")));
        }
        let _ = writeln!(out, "{head}");
        for c in &irq.softirq {
            let mut row = format!("{:>4}", c.cpu);
            for v in VECTORS {
                row.push_str(&format!(
                    " {:>10.2}",
                    c.per_s.get(v).copied().unwrap_or(0.0)
                ));
            }
            let _ = writeln!(out, "{row}");
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "{:<10} {:>10} {:>12} {:>10} {:>10}",
            "SOFTIRQ", "runs", "total ms", "avg µs", "max µs"
        );
        for (v, s) in &irq.softirq_total {
            let _ = writeln!(
                out,
                "{:<10} {:>10} {:>12.3} {:>10} {:>10}",
                Esc(v),
                s.count,
                ms(s.time_ns),
                us_or_dash(s.avg_us()),
                us_or_dash(s.max_ns.map(|m| m as f64 / 1e3))
            );
        }
        out.push('\n');
    }
    if !irq.hardirq.is_empty() {
        let _ = writeln!(
            out,
            "{:>5} {:<24} {:>10} {:>12} {:>10} {:>10}",
            "IRQ", "HANDLER", "count", "total ms", "avg µs", "max µs"
        );
        for h in irq.hardirq.iter().take(15) {
            let s = &h.stats;
            let _ = writeln!(
                out,
                "{:>5} {:<24} {:>10} {:>12.3} {:>10} {:>10}",
                h.irq,
                Esc(&h.name),
                s.count,
                ms(s.time_ns),
                us_or_dash(s.avg_us()),
                us_or_dash(s.max_ns.map(|m| m as f64 / 1e3))
            );
        }
        out.push('\n');
    }
    let ksoftirqd: Vec<_> = sched
        .threads
        .iter()
        .filter(|t| t.kind == "ksoftirqd")
        .collect();
    if !ksoftirqd.is_empty() {
        let _ = writeln!(out, "ksoftirqd (softirqs deferred to a thread):");
        for t in ksoftirqd {
            let _ = writeln!(
                out,
                "  {:<14} {:>8}  ran {:.3} ms in {} runs, waited up to {:.3} ms for its CPU",
                Esc(&t.comm),
                t.pid,
                ms(t.runtime_ns),
                t.switches,
                ms(t.max_delay_ns)
            );
        }
        out.push('\n');
    }
}

pub(super) fn workqueues(out: &mut String, w: &crate::analyze::workqueue::WorkqueueSummary) {
    if w.functions.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Workqueues ====================\n"
    );
    let _ = writeln!(
        out,
        "{:<34} {:>8} {:>11} {:>10} {:>12} {:>12}  WORKERS",
        "FUNCTION", "runs", "total ms", "max µs", "wait p50 µs", "wait max µs"
    );
    for f in w.functions.iter().take(15) {
        let (p50, max) = f
            .wait
            .as_ref()
            .map(|p| {
                (
                    format!("{:.1}", p.p50 as f64 / 1e3),
                    format!("{:.1}", p.max as f64 / 1e3),
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<34} {:>8} {:>11.3} {:>10.1} {:>12} {:>12}  {}",
            Esc(&f.function),
            f.runs,
            ms(f.run_time_ns),
            f.max_run_ns as f64 / 1e3,
            p50,
            max,
            join_escaped(&f.workers, ", ")
        );
    }
    out.push('\n');
}

pub(super) fn gaps(out: &mut String, g: &crate::analyze::gaps::GapsSummary, st: &Style) {
    if g.cpus.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Gaps: the longest stretches without events ====================\n"
    );
    for (cpu, list) in &g.cpus {
        for x in list {
            let _ = writeln!(
                out,
                "  CPU {:<3} {:>10.3} ms at {}  between {} and {}",
                cpu,
                ms(x.gap_ns),
                st.at(x.start_ns),
                Esc(&x.before),
                Esc(&x.after)
            );
        }
    }
    for t in &g.threads {
        let _ = writeln!(
            out,
            "  {:>7} {:<16} {:>10.3} ms at {}  between {} and {}",
            t.pid,
            Esc(&t.comm),
            ms(t.gap.gap_ns),
            st.at(t.gap.start_ns),
            Esc(&t.gap.before),
            Esc(&t.gap.after)
        );
    }
    out.push('\n');
}

/// µs with one decimal, or `—` for a figure not known (nothing ran, or
/// the capture kept no single run).
fn us_or_dash(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), |x| format!("{x:.1}"))
}

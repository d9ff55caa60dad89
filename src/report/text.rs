//! The report for people: btt's and iostat's tables, laid out the way those
//! tools lay them out, so that the numbers are found where one expects them.

use crate::analyze::block::btt::{Interval, Intervals};
use crate::analyze::block::DeviceSummary;
use crate::analyze::histogram::Percentiles;
use crate::analyze::Analysis;
use std::fmt::Write;

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// One btt row: `%-15s %13.9f %13.9f %13.9f %11d`.
fn btt_row(out: &mut String, name: &str, i: &Interval) {
    if i.n == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "{:<15} {:>13} {:>13.9} {:>13} {:>11}",
        name,
        secs(i.min_ns),
        i.avg_secs(),
        secs(i.max_ns),
        i.n
    );
}

fn btt_table(out: &mut String, a: &Intervals) {
    let _ = writeln!(
        out,
        "{:>15} {:>13} {:>13} {:>13} {:>11}",
        "", "MIN", "AVG", "MAX", "N"
    );
    let _ = writeln!(
        out,
        "--------------- ------------- ------------- ------------- -----------"
    );
    for (name, i) in [
        ("Q2Qdm", &a.q2q_dm),
        ("Q2Adm", &a.q2a_dm),
        ("Q2Cdm", &a.q2c_dm),
        ("Q2Q", &a.q2q),
        ("Q2A", &a.q2a),
        ("Q2G", &a.q2g),
        ("S2G", &a.s2g),
        ("G2I", &a.g2i),
        ("Q2M", &a.q2m),
        ("I2D", &a.i2d),
        ("M2D", &a.m2d),
        ("D2C", &a.d2c),
        ("Q2C", &a.q2c),
    ] {
        btt_row(out, name, i);
    }
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

fn pct_line(out: &mut String, name: &str, p: &Percentiles) {
    if p.count == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<4} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        name,
        p.count,
        us(p.avg as u64),
        us(p.p50),
        us(p.p90),
        us(p.p99),
        us(p.p999),
        us(p.max)
    );
}

fn device(out: &mut String, d: &DeviceSummary, interval_s: f64) {
    let _ = writeln!(
        out,
        "==================== Device {} ====================\n",
        d.device
    );
    let c = &d.completed;
    let b = &d.bytes_completed;
    let _ = writeln!(
        out,
        "requests completed: {} (read {}, write {}, discard {}, flush {}); {:.1} MiB read, {:.1} MiB written",
        c.total(),
        c.read,
        c.write,
        c.discard,
        c.flush,
        b.read as f64 / 1048576.0,
        b.write as f64 / 1048576.0
    );
    let a = &d.actions;
    let _ = writeln!(
        out,
        "bios queued {}, merged {} (back {}, front {}), requests merged {}, split {}, requeued {}, remapped {}, FUA {}, errors {}\n",
        a.queued,
        a.back_merged + a.front_merged,
        a.back_merged,
        a.front_merged,
        a.rq_merged,
        a.split,
        a.requeued,
        a.remapped,
        d.fua_requests,
        d.errors
    );
    let _ = writeln!(out, "btt intervals (seconds, per queued bio):");
    btt_table(out, &d.btt);
    if let Some(m) = &d.btt_merge {
        let _ = writeln!(
            out,
            "\n{:>10} | {:>8} {:>8} {:>7} | {:>8} {:>8} {:>8} {:>8}",
            "DEV", "#Q", "#D", "Ratio", "BLKmin", "BLKavg", "BLKmax", "Total"
        );
        let _ = writeln!(
            out,
            "{:>10} | {:>8} {:>8} {:>7.1} | {:>8} {:>8} {:>8} {:>8}",
            d.device, m.queued, m.issued, m.ratio, m.blk_min, m.blk_avg, m.blk_max, m.blk_total
        );
    }
    if let Some(o) = &d.btt_overhead {
        let _ = writeln!(
            out,
            "\n{:>10} | {:>9} {:>9} {:>9} {:>9} {:>9}",
            "DEV", "Q2G", "G2I", "Q2M", "I2D", "D2C"
        );
        let _ = writeln!(
            out,
            "{:>10} | {:>8.4}% {:>8.4}% {:>8.4}% {:>8.4}% {:>8.4}%",
            d.device, o.q2g_pct, o.g2i_pct, o.q2m_pct, o.i2d_pct, o.d2c_pct
        );
    }
    if d.d2c.count + d.q2c.count > 0 {
        let _ = writeln!(out, "\nlatency per request (µs):");
        let _ = writeln!(
            out,
            "  {:<4} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "", "count", "avg", "p50", "p90", "p99", "p99.9", "max"
        );
        pct_line(out, "D2C", &d.d2c);
        pct_line(out, "Q2C", &d.q2c);
    }
    let _ = writeln!(
        out,
        "\niostat -x, {interval_s} s intervals (time from the start of the report):"
    );
    let _ = writeln!(
        out,
        "{:>8} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7} {:>9} {:>9} {:>6}",
        "time",
        "r/s",
        "w/s",
        "rkB/s",
        "wkB/s",
        "rrqm/s",
        "wrqm/s",
        "r_await",
        "w_await",
        "aqu-sz",
        "rareq-sz",
        "wareq-sz",
        "%util"
    );
    let row = |out: &mut String, label: String, r: &crate::analyze::block::iostat::IostatRow| {
        let _ = writeln!(
            out,
            "{:>8} {:>9.2} {:>9.2} {:>10.2} {:>10.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7.2} {:>9.2} {:>9.2} {:>6.2}",
            label, r.r_s, r.w_s, r.rkb_s, r.wkb_s, r.rrqm_s, r.wrqm_s, r.r_await, r.w_await, r.aqu_sz, r.rareq_sz, r.wareq_sz, r.util
        );
    };
    const MAX_ROWS: usize = 30;
    for r in d.iostat.iter().take(MAX_ROWS) {
        row(out, format!("{:.1}", r.start_s), r);
    }
    if d.iostat.len() > MAX_ROWS {
        let _ = writeln!(
            out,
            "{:>8} ({} more intervals in --format json)",
            "...",
            d.iostat.len() - MAX_ROWS
        );
    }
    row(out, "all".into(), &d.iostat_total);
    if d.d2c_hist_us.total() > 0 {
        let _ = writeln!(out, "\nD2C per request:");
        out.push_str(&d.d2c_hist_us.render("usecs"));
    }
    if d.q2c_hist_us.total() > 0 {
        let _ = writeln!(out, "\nQ2C per request:");
        out.push_str(&d.q2c_hist_us.render("usecs"));
    }
    if d.request_size_hist_kib.total() > 0 {
        let _ = writeln!(out, "\nissued request sizes:");
        out.push_str(&d.request_size_hist_kib.render("KiB"));
    }
    out.push('\n');
}

/// The settings that matter for the devices of this report.
fn snapshot(out: &mut String, a: &Analysis) {
    let Some(s) = &a.snapshot else { return };
    let b = &s["before"];
    let _ = writeln!(
        out,
        "==================== System (snapshot before the run) ====================\n"
    );
    if let Some(r) = b["kernel"]["release"].as_str() {
        let _ = writeln!(
            out,
            "kernel {r}, CPUs {}",
            b["cpus"]["online"].as_str().unwrap_or("?")
        );
    }
    let devs = b["block_devices"].as_object();
    for d in &a.block.devices {
        let Some((name, info)) =
            devs.and_then(|m| m.iter().find(|(_, v)| v["dev"] == d.device.as_str()))
        else {
            continue;
        };
        let q = &info["queue"];
        let get = |k: &str| {
            q[k].as_str()
                .map(crate::capture::tracefs::current_value)
                .unwrap_or_else(|| "-".into())
        };
        let _ = writeln!(
            out,
            "{name} ({}): scheduler {}, nomerges {}, max_sectors_kb {}, read_ahead_kb {}, nr_requests {}, rotational {}, wbt_lat_usec {}, write_cache {}",
            d.device,
            get("scheduler"),
            get("nomerges"),
            get("max_sectors_kb"),
            get("read_ahead_kb"),
            get("nr_requests"),
            get("rotational"),
            get("wbt_lat_usec"),
            get("write_cache")
        );
        for (k, label) in [("holders", "used by"), ("slaves", "built on")] {
            if let Some(v) = info[k].as_array().filter(|v| !v.is_empty()) {
                let list: Vec<&str> = v.iter().filter_map(|x| x.as_str()).collect();
                let _ = writeln!(out, "  {label}: {}", list.join(", "));
            }
        }
    }
    let vm = &b["vm"];
    let _ = writeln!(
        out,
        "vm.dirty_ratio {}, dirty_background_ratio {}, dirty_bytes {}; sched_rt_runtime_us {} of {}",
        vm["dirty_ratio"].as_str().unwrap_or("-"),
        vm["dirty_background_ratio"].as_str().unwrap_or("-"),
        vm["dirty_bytes"].as_str().unwrap_or("-"),
        b["sched"]["sched_rt_runtime_us"].as_str().unwrap_or("-"),
        b["sched"]["sched_rt_period_us"].as_str().unwrap_or("-")
    );
    if let Some(ts) = s["workload"]["threads"].as_array() {
        for t in ts {
            let _ = writeln!(
                out,
                "workload thread {} {}: {} rt_priority {}, nice {}, CPUs {}",
                t["tid"],
                t["comm"].as_str().unwrap_or(""),
                t["policy"].as_str().unwrap_or(""),
                t["rt_priority"],
                t["nice"],
                t["cpus_allowed"].as_str().unwrap_or("?")
            );
        }
    }
    out.push('\n');
}

/// One finding, as a person reads it.
pub fn finding(out: &mut String, f: &crate::diagnose::Finding) {
    let sev = match f.severity {
        crate::diagnose::Severity::Critical => "CRITICAL",
        crate::diagnose::Severity::Warning => "WARNING",
        crate::diagnose::Severity::Info => "info",
    };
    let _ = writeln!(out, "{sev} {}: {}", f.id, f.title);
    if let Some(m) = f.evidence.as_object() {
        let parts: Vec<String> = m
            .iter()
            .filter(|(_, v)| !v.is_null() && !v.is_object() && !v.is_array())
            .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
            .collect();
        let _ = writeln!(out, "  evidence: {}", parts.join(" "));
    }
    let _ = writeln!(out, "  why: {}", f.explanation);
    let _ = writeln!(out, "  try: {}", f.workaround);
}

fn findings(out: &mut String, fs: &[crate::diagnose::Finding]) {
    if fs.is_empty() {
        let _ = writeln!(
            out,
            "findings: none ({} rules checked; `report --explain ID` says why each did not fire)\n",
            crate::diagnose::catalog().len()
        );
        return;
    }
    let _ = writeln!(out, "==================== Findings ====================\n");
    for f in fs {
        finding(out, f);
        out.push('\n');
    }
}

pub fn render(a: &Analysis, found: &[crate::diagnose::Finding]) -> String {
    let mut out = String::new();
    let b = &a.block;
    let _ = writeln!(
        out,
        "iosleuth: {} events from {} input(s), {} .. {} ({:.3} s)",
        a.events,
        a.inputs.len(),
        secs(a.span.first_ns),
        secs(a.span.last_ns),
        a.span.last_ns.saturating_sub(a.span.first_ns) as f64 / 1e9
    );
    for i in &a.inputs {
        let _ = writeln!(out, "  {} ({}, {} events)", i.path, i.format, i.events);
    }
    out.push('\n');
    findings(&mut out, found);
    snapshot(&mut out, a);
    if !b.stack.is_empty() {
        let _ = writeln!(out, "device stack (from remaps):");
        for chain in &b.stack {
            let _ = writeln!(out, "  {}", chain.join(" -> "));
        }
        out.push('\n');
    }
    for d in &b.devices {
        device(&mut out, d, b.interval_s);
    }
    if b.devices.len() > 1 {
        let _ = writeln!(
            out,
            "==================== All Devices ====================\n"
        );
        btt_table(&mut out, &b.all_devices);
        out.push('\n');
    }
    if !b.processes.is_empty() {
        let _ = writeln!(
            out,
            "==================== Processes (by bytes queued) ====================\n"
        );
        let _ = writeln!(
            out,
            "{:>8} {:<16} {:>9} {:>10} {:>10} {:>12} {:>12}",
            "PID", "COMM", "bios", "read MiB", "write MiB", "Q2C avg µs", "D2C avg µs"
        );
        for p in b.processes.iter().take(20) {
            let _ = writeln!(
                out,
                "{:>8} {:<16} {:>9} {:>10.1} {:>10.1} {:>12.1} {:>12.1}",
                p.pid,
                p.comm,
                p.bios_queued.total(),
                p.bytes_queued.read as f64 / 1048576.0,
                p.bytes_queued.write as f64 / 1048576.0,
                p.q2c.avg_ns() / 1000.0,
                p.d2c.avg_ns() / 1000.0
            );
        }
        out.push('\n');
    }
    outliers(&mut out, &a.outliers);
    syscalls(&mut out, &a.syscalls);
    filesystem(&mut out, &a.fs);
    sched(&mut out, &a.sched);
    interrupts(&mut out, &a.irq, &a.sched);
    workqueues(&mut out, &a.workqueue);
    gaps(&mut out, &a.gaps);
    if !a.unknown_events.is_empty() {
        let _ = writeln!(out, "events not analysed yet:");
        for (n, c) in &a.unknown_events {
            let _ = writeln!(out, "  {n:<40} {c:>10}");
        }
        out.push('\n');
    }
    if !a.warnings.is_empty() {
        let _ = writeln!(out, "\nwarnings:");
        for w in &a.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
    out
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn call_table(
    out: &mut String,
    title: &str,
    rows: &std::collections::BTreeMap<String, crate::analyze::syscalls::CallStats>,
) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "==================== {title} ====================\n");
    let _ = writeln!(
        out,
        "{:<24} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "NAME", "count", "total ms", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    for (name, s) in rows {
        let Some(l) = &s.latency else { continue };
        let _ = writeln!(
            out,
            "{:<24} {:>9} {:>11.3} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            name,
            s.count,
            ms(s.total_ns),
            l.p50 as f64 / 1e3,
            l.p99 as f64 / 1e3,
            l.p999 as f64 / 1e3,
            l.max as f64 / 1e3
        );
    }
    out.push('\n');
    for (name, s) in rows {
        let _ = writeln!(out, "{name}:");
        out.push_str(&s.hist_us.render("usecs"));
        out.push('\n');
    }
}

fn syscalls(out: &mut String, s: &crate::analyze::syscalls::SyscallSummary) {
    call_table(
        out,
        "Probe operations (from their trace marks)",
        &s.operations,
    );
    call_table(out, "Syscalls", &s.by_name);
    if !s.slowest.is_empty() {
        let _ = writeln!(out, "slowest calls:");
        for c in &s.slowest {
            let _ = writeln!(
                out,
                "  {:>12.3} ms  {:<16} {:>8} {:<16} at {}{}",
                ms(c.latency_ns),
                c.name,
                c.pid,
                c.comm,
                secs(c.start_ns),
                c.ret.map(|r| format!(" = {r}")).unwrap_or_default()
            );
        }
        out.push('\n');
    }
}

fn outliers(out: &mut String, o: &crate::analyze::outliers::OutliersSummary) {
    // The kinds whose slowest operation took at least 1 ms, slowest first.
    let mut kinds: Vec<(&String, &Vec<crate::analyze::outliers::Outlier>)> = o
        .by_kind
        .iter()
        .filter(|(_, l)| l.first().is_some_and(|x| x.latency_ns >= 1_000_000))
        .collect();
    if kinds.is_empty() {
        return;
    }
    kinds.sort_by_key(|(_, l)| std::cmp::Reverse(l[0].latency_ns));
    let _ = writeln!(
        out,
        "==================== Outliers: where the time of the slowest operations went ====================\n"
    );
    for (kind, list) in kinds {
        let _ = writeln!(out, "{kind} (slowest {}):", list.len());
        if let Some(t) = o.totals.get(kind.as_str()) {
            let mut parts: Vec<(&str, f64)> = t
                .percent
                .iter()
                .filter(|(_, p)| **p >= 0.1)
                .map(|(k, p)| (*k, *p))
                .collect();
            parts.sort_by(|a, b| b.1.total_cmp(&a.1));
            let parts: Vec<String> = parts.iter().map(|(k, p)| format!("{p:.1}% {k}")).collect();
            let _ = writeln!(
                out,
                "  all {} of them, {:.3} s in total: {}",
                t.count,
                t.latency_ns as f64 / 1e9,
                parts.join(", ")
            );
        }
        for x in list {
            let _ = writeln!(
                out,
                "  {:>8} {:<16} at {}  {}",
                x.pid,
                x.comm,
                secs(x.start_ns),
                x.summary
            );
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "(kinds whose slowest operation took under 1 ms are left out here; all are in --format json)\n"
    );
}

fn interrupts(
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
                "{:<10} {:>10} {:>12.3} {:>10.1} {:>10.1}",
                v,
                s.count,
                ms(s.time_ns),
                s.avg_us(),
                s.max_ns as f64 / 1e3
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
                "{:>5} {:<24} {:>10} {:>12.3} {:>10.1} {:>10.1}",
                h.irq,
                h.name,
                s.count,
                ms(s.time_ns),
                s.avg_us(),
                s.max_ns as f64 / 1e3
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
                t.comm,
                t.pid,
                ms(t.runtime_ns),
                t.switches,
                ms(t.max_delay_ns)
            );
        }
        out.push('\n');
    }
}

fn workqueues(out: &mut String, w: &crate::analyze::workqueue::WorkqueueSummary) {
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
            f.function,
            f.runs,
            ms(f.run_time_ns),
            f.max_run_ns as f64 / 1e3,
            p50,
            max,
            f.workers.join(", ")
        );
    }
    out.push('\n');
}

fn gaps(out: &mut String, g: &crate::analyze::gaps::GapsSummary) {
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
                secs(x.start_ns),
                x.before,
                x.after
            );
        }
    }
    for t in &g.threads {
        let _ = writeln!(
            out,
            "  {:>7} {:<16} {:>10.3} ms at {}  between {} and {}",
            t.pid,
            t.comm,
            ms(t.gap.gap_ns),
            secs(t.gap.start_ns),
            t.gap.before,
            t.gap.after
        );
    }
    out.push('\n');
}

fn filesystem(out: &mut String, f: &crate::analyze::fs::FsSummary) {
    call_table(
        out,
        "fsync in the filesystem (ext4_sync_file)",
        &f.fsync_by_process,
    );
    if !f.slowest_fsyncs.is_empty() {
        let _ = writeln!(out, "slowest fsyncs:");
        for c in &f.slowest_fsyncs {
            let _ = writeln!(
                out,
                "  {:>12.3} ms  {:>8} {:<16} dev {} ino {}{} at {}",
                ms(c.latency_ns),
                c.pid,
                c.comm,
                c.dev,
                c.ino,
                if c.datasync { " (datasync)" } else { "" },
                secs(c.start_ns)
            );
        }
        out.push('\n');
    }
    for (dev, j) in &f.journals {
        let _ = writeln!(
            out,
            "==================== Journal {dev} (jbd2) ====================\n"
        );
        let _ = writeln!(
            out,
            "commits: {} ({} sync), {:.1}/s; per commit: {:.1} handles (max {}), {:.1} blocks, {:.1} logged, {:.1} journal writes, {:.1} flushes",
            j.commits,
            j.sync_commits,
            j.commits_per_s,
            j.handles_per_commit,
            j.max_handles_per_commit,
            j.blocks_per_commit,
            j.blocks_logged_per_commit,
            j.journal_writes_per_commit,
            j.flushes_per_commit
        );
        let phases = [
            ("commit", &j.phases.total),
            ("  locking", &j.phases.locking),
            ("  flushing", &j.phases.flushing),
            ("  logging", &j.phases.logging),
        ];
        let _ = writeln!(
            out,
            "{:<12} {:>8} {:>10} {:>10} {:>10} {:>10}",
            "PHASE", "count", "avg ms", "p50 ms", "p99 ms", "max ms"
        );
        for (name, p) in phases {
            if let Some(p) = p {
                let _ = writeln!(
                    out,
                    "{:<12} {:>8} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
                    name,
                    p.count,
                    p.avg / 1e6,
                    ms(p.p50),
                    ms(p.p99),
                    ms(p.max)
                );
            }
        }
        let c = &j.checkpoints;
        let _ = writeln!(
            out,
            "checkpoints: {} passes, {} transactions ({} buffers written, {} dropped); log tail updates {}; buffer lock stalls {}",
            c.passes, c.transactions, c.written, c.dropped, j.log_tail_updates, j.lock_buffer_stalls
        );
        for (who, n) in &c.by_process {
            let _ = writeln!(out, "  checkpointed by {who}: {n}");
        }
        if !j.handle_starts.is_empty() {
            let list: Vec<String> = j
                .handle_starts
                .iter()
                .map(|(t, n)| format!("{t} {n}"))
                .collect();
            let _ = writeln!(out, "handle starts by type: {}", list.join(", "));
        }
        if !j.slowest_commits.is_empty() {
            let _ = writeln!(out, "slowest commits:");
            for c in j.slowest_commits.iter().take(5) {
                let _ = writeln!(
                    out,
                    "  {:>10.3} ms  transaction {} at {} (locking {:.3}, flushing {:.3}, logging {:.3} ms; {} journal writes, {} KiB, {} flushes)",
                    ms(c.total_ns),
                    c.transaction,
                    secs(c.start_ns),
                    ms(c.locking_ns),
                    ms(c.flushing_ns),
                    ms(c.logging_ns),
                    c.journal_writes,
                    c.journal_bytes / 1024,
                    c.flushes
                );
            }
        }
        out.push('\n');
    }
}

fn sched(out: &mut String, s: &crate::analyze::sched::SchedSummary) {
    if s.switches == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Scheduler ({} switches, {} wakeups) ====================\n",
        s.switches, s.wakeups
    );
    if s.runqlat_us.total() > 0 {
        let _ = writeln!(
            out,
            "runqueue latency (wakeup or preemption -> on CPU), all threads:"
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
        let _ = writeln!(
            out,
            "{:>8} {:<16} {:<10} {:>5} {:>8} {:>11.3} {:>11.3} {:>11.3} {:>11.3}",
            t.pid,
            t.comm,
            t.kind,
            t.prio,
            t.switches,
            ms(t.avg_delay_ns),
            ms(t.max_delay_ns),
            ms(t.runnable_ns),
            ms(t.blocked_ns)
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
                        h.comm,
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
                w.comm,
                w.pid,
                w.cpu,
                secs(w.start_ns),
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

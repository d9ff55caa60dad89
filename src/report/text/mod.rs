//! The report for people: btt's and iostat's tables, laid out the way those
//! tools lay them out, so that the numbers are found where one expects them.

use crate::analyze::block::btt::{Interval, Intervals};
use crate::analyze::block::DeviceSummary;
use crate::analyze::histogram::Percentiles;
use crate::analyze::light::{CgroupsSummary, LightDeviceSummary, LightSummary};
use crate::analyze::Analysis;
use crate::report::escape::{escape, join_escaped, Esc};
use std::fmt::Write;

mod block;
mod functions;
mod layers;
mod sched;
mod stacks;
mod summary;
mod system;

use block::*;
use functions::*;
use layers::*;
use sched::*;
use stacks::*;
use summary::*;
use system::*;

pub(super) fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

pub(super) fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

pub(super) use crate::model::units::ms;

/// How the sections are printed: every repeated line or the first few
/// (`--all`), and the clock's origin (times are seconds from it).
pub(super) struct Style {
    pub all: bool,
    pub origin: u64,
}

impl Style {
    /// A trace-clock time as seconds from the report's start, to the ns.
    pub fn at(&self, ns: u64) -> String {
        secs(ns.saturating_sub(self.origin))
    }
}

/// One finding, as a person reads it. Titles, evidence and advice quote
/// the trace (process and device names): printed escaped.
pub fn finding(out: &mut String, f: &crate::diagnose::Finding) {
    let sev = f.severity.name().to_ascii_uppercase();
    let _ = writeln!(out, "{sev} {}: {}", f.id, Esc(&f.title));
    if let Some(m) = f.evidence.as_object() {
        let parts: Vec<String> = m
            .iter()
            .filter(|(_, v)| !v.is_null() && !v.is_object() && !v.is_array())
            .map(|(k, v)| {
                let v = v.to_string();
                format!("{}={}", Esc(k), Esc(v.trim_matches('"')))
            })
            .collect();
        let _ = writeln!(out, "  evidence: {}", parts.join(" "));
    }
    let _ = writeln!(out, "  why: {}", Esc(&f.explanation));
    let _ = writeln!(out, "  try: {}", Esc(&f.workaround));
}

fn findings(out: &mut String, a: &Analysis, fs: &[crate::diagnose::Finding]) {
    let c = crate::diagnose::coverage(a, fs);
    if fs.is_empty() && c.not_judged.is_empty() {
        return;
    }
    let _ = writeln!(out, "==================== Findings ====================\n");
    for f in fs {
        finding(out, f);
        out.push('\n');
    }
    if fs.is_empty() {
        let _ = writeln!(
            out,
            "no finding: `report --explain all` says why each rule did not fire"
        );
    }
    if !c.not_judged.is_empty() {
        let lacks: Vec<String> = c
            .not_judged
            .iter()
            .map(|n| format!("{} ({})", n.id, n.lacks))
            .collect();
        let _ = writeln!(
            out,
            "not judged, {} of {} rules: {}{}",
            c.not_judged.len(),
            c.judged.len() + c.not_judged.len(),
            Esc(&lacks.join("; ")),
            c.record
                .as_ref()
                .map(|r| format!("; to judge them: {r}"))
                .unwrap_or_default()
        );
    }
    out.push('\n');
}

pub fn render(a: &Analysis, found: &[crate::diagnose::Finding]) -> String {
    render_with(a, found, false)
}

/// The report; `all` prints every thread's and every input's lines where
/// repeated ones are otherwise collapsed.
pub fn render_with(a: &Analysis, found: &[crate::diagnose::Finding], all: bool) -> String {
    let mut out = String::new();
    let b = &a.block;
    let st = Style {
        all,
        origin: super::origin_ns(a),
    };
    summary(&mut out, a, found);
    if all && a.inputs.len() > 1 {
        let _ = writeln!(out, "inputs:");
        for i in &a.inputs {
            input_line(&mut out, i);
        }
        out.push('\n');
    }
    findings(&mut out, a, found);
    snapshot(&mut out, a);
    if !b.stack.is_empty() {
        let _ = writeln!(out, "device stack (from remaps):");
        for chain in &b.stack {
            let _ = writeln!(out, "  {}", join_escaped(chain, " -> "));
        }
        out.push('\n');
    }
    let light = |dev: &str| {
        a.light
            .as_ref()
            .and_then(|l| l.devices.iter().find(|x| x.device == dev))
    };
    let (shown, rest) = super::busiest_devices(&b.devices, super::DEVICES_SHOWN);
    for d in shown {
        device(&mut out, d, b.interval_s, light(&d.device));
    }
    if let Some(line) = super::not_shown_line(&rest, super::DEVICES_SHOWN) {
        let _ = writeln!(out, "{line}\n");
    }
    if let Some(l) = &a.light {
        light_cgroups(&mut out, &l.cgroups);
        light_programs(&mut out, l);
    }
    if b.devices.len() > 1 && a.light.is_none() {
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
                "{:>8} {:<16} {:>9} {:>10.1} {:>10.1} {:>12} {:>12}",
                p.pid,
                Esc(&p.comm),
                p.bios_queued.total(),
                p.bytes_queued.read as f64 / 1048576.0,
                p.bytes_queued.write as f64 / 1048576.0,
                avg_us(&p.q2c),
                avg_us(&p.d2c)
            );
        }
        out.push('\n');
    }
    driver(&mut out, &a.driver, &st);
    outliers(&mut out, &a.outliers, &st);
    syscalls(&mut out, &a.syscalls, &st);
    layers::io_uring(&mut out, &a.outliers.io_uring, &st);
    if let Some(u) = a.light.as_ref().and_then(|l| l.io_uring.as_ref()) {
        layers::light_io_uring(&mut out, u, &st);
    }
    layers::faults(&mut out, &a.outliers.faults, &st);
    layers::page_cache(&mut out, &a.cache);
    filesystem(&mut out, &a.fs, &a.recorded, a.recorded_set("block"), &st);
    functions(&mut out, &a.functions);
    stacks(&mut out, &a.stacks);
    sched(&mut out, &a.sched, &a.recorded, &st);
    interrupts(&mut out, &a.irq, &a.sched);
    workqueues(&mut out, &a.workqueue);
    gaps(&mut out, &a.gaps, &st);
    not_recorded(&mut out, a);
    if !a.unknown_events.is_empty() {
        let total: u64 = a.unknown_events.values().sum();
        let _ = writeln!(
            out,
            "events not analyzed yet ({total} event{} of {} kind{}, counted here and under unknown_events in JSON):",
            if total == 1 { "" } else { "s" },
            a.unknown_events.len(),
            if a.unknown_events.len() == 1 { "" } else { "s" }
        );
        for (n, c) in &a.unknown_events {
            let _ = writeln!(out, "  {:<40} {c:>10}", Esc(n));
        }
        out.push('\n');
    }
    if !a.warnings.is_empty() {
        let _ = writeln!(out, "\nwarnings:");
        for w in &a.warnings {
            let _ = writeln!(out, "  - {}", escape(w));
        }
    }
    out
}

/// What each event set the capture lacks would have shown: a section
/// that is missing here is unknown, not empty.
fn not_recorded(out: &mut String, a: &Analysis) {
    let missing = a.not_recorded();
    if missing.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Not recorded ====================\n"
    );
    let _ = writeln!(
        out,
        "the capture holds no events of these sets: what they measure is unknown here, not 0"
    );
    for set in &missing {
        let shows = match *set {
            "block" => "requests at each device: btt's intervals, iostat -x, D2C and Q2C, merges and splits",
            "fs" => "fsync in the filesystem and the ext4 journal's commits and checkpoints",
            "writeback" => "dirty-page throttling (balance_dirty_pages) and writeback throttling (wbt)",
            "readahead" => "readahead windows and the page cache's misses",
            "sched" => "thread states (on CPU, runnable, blocked), who held the CPU, runqueue latency",
            "irq" => "hard and soft interrupt time per CPU",
            "workqueue" => "kernel work items (the cgroup throttle's dispatch, the loop device's work)",
            "faults" => "page faults: reads through mapped files, as operations, and the requests they waited for",
            "cache" => "the page cache: hits, misses and pages re-read after reclaim evicted them",
            "syscalls" => "system calls: which operations waited and for how long",
            "io_uring" => "io_uring requests: each from submission to completion, inline, punted to io-wq or by SQPOLL, and the block requests they caused",
            _ => "",
        };
        let _ = writeln!(out, "  {set:<10} {shows}");
    }
    let _ = writeln!(
        out,
        "(record them: iosleuth record --events {})\n",
        missing.join(",")
    );
}

/// Rows of the cgroup table printed, most requests first.
const CGROUPS_SHOWN: usize = 8;

/// A light capture's requests by the cgroup they were charged to.
fn light_cgroups(out: &mut String, c: &CgroupsSummary) {
    if !c.counted {
        let _ = writeln!(
            out,
            "requests by cgroup: not counted by this capture (made before iosleuth counted them)\n"
        );
        return;
    }
    let _ = writeln!(
        out,
        "requests by cgroup (the cgroup each request's first bio was charged to{}):",
        if c.hierarchy.is_empty() {
            "; no cgroup hierarchy mounted, so no paths".to_string()
        } else {
            format!(", paths in {}", Esc(&c.hierarchy))
        }
    );
    let _ = writeln!(
        out,
        "  {:<40} {:>8} {:>6} {:>9} {:>10} {:>10} {:>10}",
        "cgroup", "device", "op", "requests", "MiB", "avg µs", "p99 ≤ µs"
    );
    for e in c.top.iter().take(CGROUPS_SHOWN) {
        let _ = writeln!(
            out,
            "  {:<40} {:>8} {:>6} {:>9} {:>10.1} {:>10} {:>10}",
            Esc(&e.cgroup),
            Esc(&e.device),
            Esc(&e.op),
            e.ios,
            e.bytes as f64 / (1 << 20) as f64,
            e.mean_ns.map_or("-".into(), us),
            e.p99_at_most_ns.map_or_else(|| "-".into(), us),
        );
    }
    let hidden = c.top.len().saturating_sub(CGROUPS_SHOWN) as u64;
    let (n, ios) = (
        hidden + c.rest_entries,
        c.top.iter().skip(CGROUPS_SHOWN).map(|e| e.ios).sum::<u64>() + c.rest_ios,
    );
    if n > 0 {
        let _ = writeln!(out, "  ... {n} more entries with {ios} requests");
    }
    if !c.writeback_charged {
        let _ = writeln!(
            out,
            "  writeback by the kernel's flusher is charged to the root cgroup here (cgroup writeback needs cgroup v2 with the io and memory controllers): a buffered writer's cgroup shows only what it wrote back itself (fsync, O_SYNC, O_DIRECT)"
        );
    }
    out.push('\n');
}

/// The BPF programs' own cost (`record --light --bpf-stats`).
fn light_programs(out: &mut String, l: &LightSummary) {
    let _ = writeln!(
        out,
        "light capture: programs attached as {} for {:.3} s",
        Esc(&l.attach),
        l.seconds
    );
    if l.wait_min_ns > 0 {
        let _ = writeln!(
            out,
            "flight recorder: {} runqueue waits of {} ms or more ({} lost), {} events kept whole (journal, dirty limit, wbt; {} lost), {}{}",
            l.long_waits,
            l.wait_min_ns / 1_000_000,
            l.waits_lost,
            l.events,
            l.events_lost,
            match (l.hardirqs, l.hardirq_ns) {
                (Some(n), Some(ns)) => format!("{n} hard irqs ({:.3} ms)", ns as f64 / 1e6),
                _ => "interrupt time not recorded (--irq off)".into(),
            },
            if l.missing_events.is_empty() {
                String::new()
            } else {
                format!("; not recorded: {}", join_escaped(&l.missing_events, ", "))
            }
        );
    }
    for p in &l.programs {
        let runs = match (p.runs, p.ns_per_run) {
            (Some(n), Some(ns)) => format!("{n:>10} runs {ns:>8.0} ns each"),
            (Some(n), None) => format!("{n:>10} runs"),
            _ => String::new(),
        };
        let missed = match p.missed {
            Some(m) if m > 0 => format!("  {m} events skipped (it was running)"),
            _ => String::new(),
        };
        if !runs.is_empty() || !missed.is_empty() {
            let _ = writeln!(out, "  {:<16} {runs}{missed}", Esc(&p.name));
        }
    }
    out.push('\n');
}

/// An interval's average in µs, or `—` when it has no sample (a process
/// whose bios the trace saw queued but none complete: unknown, not 0).
fn avg_us(i: &crate::analyze::block::btt::Interval) -> String {
    if i.n == 0 {
        "—".into()
    } else {
        format!("{:.1}", i.avg_ns() / 1000.0)
    }
}

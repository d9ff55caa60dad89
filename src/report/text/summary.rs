//! The report's first screen: what was read, the workload's operations,
//! each device, the findings in one line each, and what the capture did
//! not record. The sections after it hold the detail.

use super::*;
use crate::analyze::syscalls::CallStats;
use crate::diagnose::Finding;

/// Inputs named on the first screen; the rest are counted.
const INPUTS_SHOWN: usize = 3;
/// Operation kinds and devices named on the first screen.
const ROWS_SHOWN: usize = 6;

pub(super) fn summary(out: &mut String, a: &Analysis, found: &[Finding]) {
    let span = a.span.last_ns.saturating_sub(a.span.first_ns);
    let origin = crate::report::origin_ns(a);
    let from = a.span.first_ns.saturating_sub(origin);
    let _ = writeln!(
        out,
        "iosleuth report: {:.3} s of trace{}, {} events from {} input{}; times are seconds from the trace's start ({} on the trace clock)",
        span as f64 / 1e9,
        if from > 0 {
            format!(" ({:.3}..{:.3} s)", from as f64 / 1e9, (from + span) as f64 / 1e9)
        } else {
            String::new()
        },
        a.events,
        a.inputs.len(),
        if a.inputs.len() == 1 { "" } else { "s" },
        secs(origin)
    );
    for i in a.inputs.iter().take(INPUTS_SHOWN) {
        input_line(out, i);
    }
    if a.inputs.len() > INPUTS_SHOWN {
        let rest = &a.inputs[INPUTS_SHOWN..];
        let _ = writeln!(
            out,
            "  … and {} more inputs ({} events)",
            rest.len(),
            rest.iter().map(|i| i.events).fold(0, u64::saturating_add)
        );
    }
    out.push('\n');
    operations(out, a);
    devices(out, a);
    findings(out, a, found);
    let missing = a.not_recorded();
    if !missing.is_empty() {
        let _ = writeln!(
            out,
            "not recorded: the {} events (the sections below say \"not recorded\" where they would count, never 0)",
            missing.join(", ")
        );
    }
    out.push('\n');
}

/// Per kind of operation, the way the trace times them: the probe's
/// marked operations, the system calls (the slowest in total), fsync in
/// the filesystem.
fn operations(out: &mut String, a: &Analysis) {
    let mut rows: Vec<(String, &CallStats)> = a
        .syscalls
        .operations
        .iter()
        .map(|(k, s)| (format!("probe {k}"), s))
        .collect();
    let mut calls: Vec<(&String, &CallStats)> = a.syscalls.by_name.iter().collect();
    calls.sort_by_key(|(_, s)| std::cmp::Reverse(s.total_ns));
    // io_uring's requests, which no syscall times one by one.
    rows.extend(
        a.outliers
            .io_uring
            .by_op
            .iter()
            .map(|(k, s)| (format!("io_uring {k}"), s)),
    );
    // A light capture's io_uring requests, by group.
    rows.extend(
        a.light
            .iter()
            .filter_map(|l| l.io_uring.as_ref())
            .flat_map(|u| u.by_op.iter())
            .map(|(k, s)| (format!("io_uring {k}"), s)),
    );
    // Reads through mapped files: their faults, which no syscall times.
    rows.extend(
        a.outliers
            .faults
            .by_kind
            .iter()
            .map(|(k, s)| (format!("fault {k}"), s)),
    );
    rows.extend(calls.into_iter().map(|(k, s)| (format!("syscall {k}"), s)));
    if a.fs.fsync.count > 0 {
        rows.push(("fsync in the filesystem".into(), &a.fs.fsync));
    }
    rows.retain(|(_, s)| s.latency.is_some());
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "operations: none timed (the trace has no system calls, probe marks or filesystem calls)"
        );
        return;
    }
    let _ = writeln!(
        out,
        "{:<32} {:>9} {:>10} {:>10} {:>10}",
        "operations", "count", "p50 ms", "p99 ms", "max ms"
    );
    for (name, s) in rows.iter().take(ROWS_SHOWN) {
        let Some(l) = &s.latency else { continue };
        let _ = writeln!(
            out,
            "  {:<30} {:>9} {:>10.3} {:>10.3} {:>10.3}",
            Esc(name),
            s.count,
            l.p50 as f64 / 1e6,
            l.p99 as f64 / 1e6,
            l.max as f64 / 1e6
        );
    }
    if rows.len() > ROWS_SHOWN {
        let _ = writeln!(
            out,
            "  … and {} more kinds (the Syscalls section below)",
            rows.len() - ROWS_SHOWN
        );
    }
}

/// Per device, the busiest first: its rate, its requests' p99 and how
/// busy and deep its queue was while it worked.
fn devices(out: &mut String, a: &Analysis) {
    let devs = &a.block.devices;
    if devs.is_empty() {
        let why = if a.recorded_set("block") {
            "no request seen at a device"
        } else {
            "the block events were not recorded"
        };
        let _ = writeln!(out, "devices: {why}");
        return;
    }
    let (shown, rest) = crate::report::busiest_devices(devs, ROWS_SHOWN);
    let _ = writeln!(
        out,
        "{:<20} {:>9} {:>9} {:>11} {:>11} {:>7} {:>7}",
        "devices", "IOPS", "MiB/s", "Q2C p99 ms", "D2C p99 ms", "%util", "aqu-sz"
    );
    let light = |dev: &str| {
        a.light
            .as_ref()
            .and_then(|l| l.devices.iter().find(|x| x.device == dev))
    };
    for d in shown {
        let name = a
            .snapshot
            .as_ref()
            .and_then(|s| s.device(&d.device))
            .map(|(n, _)| format!("{n} ({})", d.device))
            .unwrap_or_else(|| d.device.clone());
        // Rates over the trace's span, as iostat gives them over its
        // interval (not over the device's busy stretch only).
        let io = &d.iostat_total;
        let (mut iops, mut mib_s) = (
            io.r_s + io.w_s + io.d_s,
            (io.rkb_s + io.wkb_s + io.dkb_s) / 1024.0,
        );
        let p99 = |p: &Percentiles| {
            if p.count == 0 {
                "—".to_string()
            } else {
                format!("{:.3}", p.p99 as f64 / 1e6)
            }
        };
        let (q2c, d2c, util, aqu) = match light(&d.device) {
            // A light capture keeps each stage per operation: the busiest
            // operation's; it has no busy time or queue size.
            Some(l) => {
                // Its counts over the time the programs were attached.
                let secs = a.light.as_ref().map_or(0.0, |x| x.seconds);
                if secs > 0.0 {
                    let (n, bytes) = l.ops.iter().fold((0u64, 0u64), |(n, b), o| {
                        (n.saturating_add(o.ios), b.saturating_add(o.bytes))
                    });
                    iops = n as f64 / secs;
                    mib_s = bytes as f64 / secs / 1048576.0;
                }
                let op = l.ops.iter().max_by_key(|o| o.ios);
                // Busy time and queue size from the kernel's diskstats at
                // the capture's ends, when it read them.
                let read = io.seconds > 0.0;
                (
                    op.map(|o| p99(&o.total)).unwrap_or("—".into()),
                    op.map(|o| p99(&o.device)).unwrap_or("—".into()),
                    if read {
                        format!("{:.1}", io.util)
                    } else {
                        "—".into()
                    },
                    if read {
                        format!("{:.2}", io.aqu_sz)
                    } else {
                        "—".into()
                    },
                )
            }
            None => (
                p99(&d.q2c),
                p99(&d.d2c),
                format!("{:.1}", io.util),
                format!("{:.2}", io.aqu_sz),
            ),
        };
        let _ = writeln!(
            out,
            "  {:<18} {:>9.1} {:>9.2} {:>11} {:>11} {:>7} {:>7}",
            Esc(&name),
            iops,
            mib_s,
            q2c,
            d2c,
            util,
            aqu
        );
    }
    if let Some(line) = crate::report::not_shown_line(&rest, ROWS_SHOWN) {
        let _ = writeln!(out, "  {line}");
    }
    if a.light.is_some() {
        let read = a.block.devices.iter().any(|d| d.iostat_total.seconds > 0.0);
        let _ = writeln!(
            out,
            "  (light capture: rates over the {:.3} s the programs were attached; p99 of the busiest operation, within 1/32; {})",
            a.light.as_ref().map_or(0.0, |l| l.seconds),
            if read {
                "%util and aqu-sz from the kernel's diskstats over the capture"
            } else {
                "%util and aqu-sz not recorded"
            }
        );
    } else {
        let _ = writeln!(
            out,
            "  (IOPS, MiB/s, %util and aqu-sz over the trace's {:.3} s, as iostat over one interval)",
            a.span.last_ns.saturating_sub(crate::report::origin_ns(a)) as f64 / 1e9
        );
    }
}

/// Each finding's title and what to try; the rules that could not judge
/// and what would let them.
fn findings(out: &mut String, a: &Analysis, found: &[Finding]) {
    let c = crate::diagnose::coverage(a, found);
    let rules = c.judged.len() + c.not_judged.len();
    if found.is_empty() {
        let _ = match c.judged.len() {
            0 => writeln!(out, "findings: none: no rule could judge this input"),
            n => writeln!(
                out,
                "findings: none among the {n} rule{} this input lets judge",
                if n == 1 { "" } else { "s" }
            ),
        };
    } else {
        let _ = writeln!(out, "findings:");
        for f in found {
            let _ = writeln!(
                out,
                "  {} {}: {}",
                f.severity.name().to_ascii_uppercase(),
                f.id,
                Esc(&f.title)
            );
            let _ = writeln!(out, "    try: {}", Esc(&f.workaround));
        }
    }
    if !c.not_judged.is_empty() {
        let ids: Vec<&str> = c.not_judged.iter().map(|n| n.id).collect();
        let _ = writeln!(
            out,
            "  not judged, {} of {rules} rules: {} (the Findings section says what each lacked){}",
            c.not_judged.len(),
            ids.join(", "),
            c.record
                .as_ref()
                .map(|r| format!("; to judge them: {}", Esc(r)))
                .unwrap_or_default()
        );
    }
}

/// One input read: its path, format and events.
pub(super) fn input_line(out: &mut String, i: &crate::analyze::InputSummary) {
    let _ = writeln!(
        out,
        "  {} ({}, {} events)",
        Esc(&i.path),
        i.format,
        i.events
    );
}

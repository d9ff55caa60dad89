//! The diff page: the verdict, the settings that differ, and both sides'
//! requests on the same axes, then each side's findings and the text diff.

use super::device::hover;
use super::svg::{self, latency_ms, short, Axis, Point, Scale};
use super::{esc, findings_section_inner, page, MAX_DRAWN_POINTS};
use crate::analyze::block::timeline::RequestPoint;
use crate::analyze::histogram::{Log2Hist, Percentiles};
use crate::analyze::syscalls::CallStats;
use crate::analyze::Analysis;
use crate::compare::Diff;
use std::fmt::Write;

/// One run of a side: its analysis and the findings diagnosed from it.
pub struct Run<'a> {
    pub analysis: &'a Analysis,
    pub findings: &'a [crate::diagnose::Finding],
}

/// Runs compared: the verdict, what differs, and each side's findings
/// and latency on the same axes.
pub fn render(d: &Diff, base_runs: &[Run], cand_runs: &[Run]) -> String {
    let base: &[&Analysis] = &base_runs.iter().map(|r| r.analysis).collect::<Vec<_>>();
    let cand: &[&Analysis] = &cand_runs.iter().map(|r| r.analysis).collect::<Vec<_>>();
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>iosleuth diff</h1><p class=\"sub\">baseline: {} run(s) · candidate: {} run(s)</p><h2>Verdict</h2><p>{}</p><p class=\"sub\">check: {}: {} (what <code>iosleuth check</code> concludes of these sides)</p>",
        base.len(),
        cand.len(),
        esc(&d.verdict),
        esc(&d.check.verdict.replace('_', " ")),
        esc(&d.check.why)
    );
    body.push_str("<h2>Settings that differ</h2>");
    if d.settings.is_empty() {
        let without: Vec<&str> = [("baseline", base), ("candidate", cand)]
            .into_iter()
            .filter(|(_, side)| side.iter().any(|a| a.snapshot.is_none()))
            .map(|(name, _)| name)
            .collect();
        let _ = write!(
            body,
            "<p class=\"settings-none\">{}</p>",
            if without.is_empty() {
                "None: the two sides' system snapshots (block queues, file systems, sysctls, cgroups) agree.".to_string()
            } else {
                format!(
                    "Not compared: the {} has no system snapshot (only captures recorded by iosleuth carry one).",
                    without.join(" and the ")
                )
            }
        );
    } else {
        body.push_str("<table class=\"settings\"><tr><th>setting</th><th>baseline</th><th>candidate</th></tr>");
        for s in &d.settings {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&s.name),
                esc(&s.baseline),
                esc(&s.candidate)
            );
        }
        body.push_str("</table>");
    }
    operations_section(&mut body, base, cand);
    flame_section(&mut body, base, cand);
    // Both sides' request latency histograms on one axis per device.
    let mut devices: Vec<&str> = base
        .iter()
        .chain(cand)
        .flat_map(|a| a.block.devices.iter().map(|d| d.device.as_str()))
        .collect();
    devices.sort();
    devices.dedup();
    for dev in devices {
        let hist = |side: &[&Analysis]| {
            let mut h = Log2Hist::default();
            for a in side {
                for d in a.block.devices.iter().filter(|d| d.device == dev) {
                    h.merge(&d.q2c_hist_us);
                }
            }
            h
        };
        let (hb, hc) = (hist(base), hist(cand));
        let _ = write!(body, "<h2>Device {}</h2>", esc(dev));
        body.push_str(&share_lines(
            &format!("{dev}: requests by Q2C latency, share of each side"),
            "Q2C latency",
            "requests (%)",
            &hb,
            &hc,
        ));
        body.push_str(&sides_over_time(dev, base, cand));
    }
    for (side, runs) in [("baseline", base_runs), ("candidate", cand_runs)] {
        for (i, r) in runs.iter().enumerate() {
            let _ = write!(body, "<h2>Findings of the {side} (run {})</h2>", i + 1);
            findings_section_inner(&mut body, r.findings);
        }
    }
    let _ = write!(
        body,
        "<h2>Every figure</h2><details open><summary>The text diff</summary><pre>{}</pre></details>",
        esc(&crate::report::diff_text::render(d))
    );
    page("iosleuth diff", &body)
}

/// Both sides' requests on one device, Q2C against the time since each
/// run's first request: the first runs of each side, each thinned to
/// `MAX_DRAWN_POINTS / 2` points keeping its slowest.
fn sides_over_time(dev: &str, base: &[&Analysis], cand: &[&Analysis]) -> String {
    let mut points = Vec::new();
    for (side, class, runs) in [("baseline", "read", base), ("candidate", "write", cand)] {
        let Some(d) = runs
            .iter()
            .flat_map(|a| a.block.devices.iter())
            .find(|d| d.device == dev)
        else {
            continue;
        };
        let pts = &d.timeline.points;
        let first = pts
            .iter()
            .map(|p| p.done_ns.saturating_sub(p.q2c_ns))
            .min()
            .unwrap_or(0);
        let budget = MAX_DRAWN_POINTS / 2;
        let mut keep: Vec<&RequestPoint> = pts.iter().collect();
        if keep.len() > budget {
            // The slowest tenth of the budget, then evenly over the rest.
            let slow = budget / 10;
            keep.select_nth_unstable_by_key(slow, |p| std::cmp::Reverse(p.q2c_ns));
            let (top, rest) = keep.split_at(slow);
            let stride = rest.len().div_ceil(budget - slow).max(1);
            let mut chosen: Vec<&RequestPoint> = top.to_vec();
            chosen.extend(rest.iter().step_by(stride));
            keep = chosen;
        }
        for p in keep {
            points.push(Point {
                x: p.done_ns.saturating_sub(first) as f64 / 1e9,
                y: p.q2c_ns as f64 / 1e6,
                class,
                hover: format!("{side}: {}", hover(p, first)),
            });
        }
    }
    if points.is_empty() {
        return String::new();
    }
    let x = Axis {
        label: "time since the run's first request (s)",
        scale: Scale::linear(points.iter().map(|p| p.x)),
        tick: short,
    };
    let y = Axis {
        label: "Q2C (log scale)",
        scale: Scale::log(points.iter().map(|p| p.y)),
        tick: latency_ms,
    };
    svg::scatter(
        &format!("{dev}: every request's Q2C, both sides on the same axes"),
        &x,
        &y,
        &points,
        &[("baseline", "read"), ("candidate", "write")],
    )
}

/// Operations compared at most (the probe's, then the system calls with
/// the most time).
const OPERATIONS_COMPARED: usize = 6;

/// Each operation's latency on both sides: its distribution as shares of
/// each side's count on one axis, and its percentiles side by side. The
/// probe's operations first, then the system calls that took the most time.
fn operations_section(body: &mut String, base: &[&Analysis], cand: &[&Analysis]) {
    type Pick = fn(&Analysis) -> &std::collections::BTreeMap<String, CallStats>;
    let mut ops: Vec<(&str, String)> = Vec::new();
    let kinds: [(&str, Pick); 2] = [
        ("probe", |a| &a.syscalls.operations),
        ("syscall", |a| &a.syscalls.by_name),
    ];
    for (kind, pick) in kinds {
        let mut names: Vec<(String, u64)> = Vec::new();
        for a in base.iter().chain(cand) {
            for (name, s) in pick(a) {
                match names.iter_mut().find(|(n, _)| n == name) {
                    Some(e) => e.1 += s.total_ns,
                    None => names.push((name.clone(), s.total_ns)),
                }
            }
        }
        names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        ops.extend(names.into_iter().map(|(n, _)| (kind, n)));
    }
    ops.truncate(OPERATIONS_COMPARED);
    if ops.is_empty() {
        return;
    }
    body.push_str("<h2>Latency of each operation, both sides</h2><table class=\"operations\"><tr><th>operation</th><th>baseline count</th><th>p50</th><th>p99</th><th>max</th><th>candidate count</th><th>p50</th><th>p99</th><th>max</th></tr>");
    let side_of =
        |side: &[&Analysis], kind: &str, name: &str| -> (Log2Hist, Vec<Percentiles>, u64) {
            let (mut h, mut p, mut n) = (Log2Hist::default(), Vec::new(), 0);
            for a in side {
                let map = if kind == "probe" {
                    &a.syscalls.operations
                } else {
                    &a.syscalls.by_name
                };
                if let Some(s) = map.get(name) {
                    h.merge(&s.hist_us);
                    p.extend(s.latency);
                    n += s.count;
                }
            }
            (h, p, n)
        };
    let mut charts = String::new();
    for (kind, name) in &ops {
        let (hb, pb, nb) = side_of(base, kind, name);
        let (hc, pc, nc) = side_of(cand, kind, name);
        let _ = write!(body, "<tr><td>{kind} {}</td>", esc(name));
        for (p, n) in [(&pb, nb), (&pc, nc)] {
            let _ = write!(body, "<td>{n}</td>");
            // One run: its percentiles; several: the first run's, marked.
            match p.first() {
                Some(l) => {
                    let mark = if p.len() > 1 { " (run 1)" } else { "" };
                    for v in [l.p50, l.p99, l.max] {
                        let _ = write!(body, "<td>{}{mark}</td>", esc(&latency_ms(v as f64 / 1e6)));
                    }
                }
                None => body.push_str("<td>–</td><td>–</td><td>–</td>"),
            }
        }
        body.push_str("</tr>");
        charts.push_str(&share_lines(
            &format!("{kind} {name}: operations by latency, share of each side"),
            &format!("{kind} {name} latency"),
            "operations (%)",
            &hb,
            &hc,
        ));
    }
    body.push_str("</table>");
    body.push_str(&charts);
}

/// The differential off-CPU flame graph, when every run of both sides
/// has kernel stacks (recorded with --stacks).
fn flame_section(body: &mut String, base: &[&Analysis], cand: &[&Analysis]) {
    if base.iter().chain(cand).any(|a| a.stacks.off_cpu_ns == 0) {
        return;
    }
    let Ok(svg) = crate::report::flamegraph::differential_off_cpu_svg(
        base,
        cand,
        "red: blocked longer in the candidate, blue: shorter (baseline scaled to the candidate's total)",
    ) else {
        return;
    };
    body.push_str("<h2>Where the threads blocked: the candidate against the baseline</h2>");
    super::flame_frame(
        body,
        "Off CPU, differential: the candidate's stacks, red where a frame blocked longer than in the baseline (µs)",
        &svg,
    );
}

/// The two sides' log2 latency histograms as shares, one line each.
fn share_lines(title: &str, what: &str, y_label: &str, base: &Log2Hist, cand: &Log2Hist) -> String {
    let (rb, rc) = (base.rows(), cand.rows());
    let n = rb.len().max(rc.len());
    let share = |rows: &[(u64, u64, u64)]| -> Vec<(f64, f64)> {
        let total: u64 = rows.iter().map(|r| r.2).sum::<u64>().max(1);
        (0..n)
            .map(|i| {
                let c = rows.get(i).map_or(0, |r| r.2);
                (i as f64, c as f64 * 100.0 / total as f64)
            })
            .collect()
    };
    let x_label = format!("{what}, log2 bucket (lower edge, µs)");
    let x = Axis {
        label: &x_label,
        scale: Scale::Linear {
            min: 0.0,
            max: (n.max(2) - 1) as f64,
        },
        tick: |v| short(if v < 1.0 { 0.0 } else { 2f64.powf(v) }),
    };
    let y = Axis {
        label: y_label,
        scale: Scale::Linear {
            min: 0.0,
            max: 100.0,
        },
        tick: short,
    };
    svg::lines(
        title,
        &x,
        &y,
        &[
            ("baseline", "read", share(&rb)),
            ("candidate", "write", share(&rc)),
        ],
    )
}

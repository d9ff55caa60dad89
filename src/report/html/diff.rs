//! The diff page: the verdict, the settings that differ, and both sides'
//! requests on the same axes, then each side's findings and the text diff.

use super::device::hover;
use super::svg::{self, latency_ms, short, Axis, Point, Scale};
use super::{esc, findings_section_inner, page, MAX_DRAWN_POINTS};
use crate::analyze::block::timeline::RequestPoint;
use crate::analyze::histogram::Log2Hist;
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
        "<h1>iosleuth diff</h1><p class=\"sub\">baseline: {} run(s) · candidate: {} run(s)</p><h2>Verdict</h2><p>{}</p>",
        base.len(),
        cand.len(),
        esc(&d.verdict)
    );
    if !d.settings.is_empty() {
        body.push_str("<h2>Settings that differ</h2><table><tr><th>setting</th><th>baseline</th><th>candidate</th></tr>");
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

/// The two sides' log2 latency histograms as shares, one line each.
fn share_lines(title: &str, base: &Log2Hist, cand: &Log2Hist) -> String {
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
    let x = Axis {
        label: "Q2C latency, log2 bucket (lower edge, µs)",
        scale: Scale::Linear {
            min: 0.0,
            max: (n.max(2) - 1) as f64,
        },
        tick: |v| short(if v < 1.0 { 0.0 } else { 2f64.powf(v) }),
    };
    let y = Axis {
        label: "requests (%)",
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

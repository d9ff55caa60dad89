//! One self-contained HTML page for people to look at and share: the
//! findings on top, then per device every request's latency against time
//! (a heatmap with the slowest drawn over it when there are too many
//! points), queue depth, request size and iostat's columns over time,
//! latency histograms and btt's table; the scheduler's and interrupts'
//! views; flame graphs when the capture has stacks; and every figure of
//! the text report. Charts are SVG drawn here: no script of the page's
//! own, nothing fetched. Everything from the trace is escaped.

pub mod svg;

use crate::analyze::block::timeline::RequestPoint;
use crate::analyze::block::DeviceSummary;
use crate::analyze::histogram::Log2Hist;
use crate::analyze::Analysis;
use crate::compare::Diff;
use crate::diagnose::Finding;
use std::fmt::Write;
use svg::{latency_ms, short, Axis, Point, Scale};

/// Up to this many requests are drawn one by one; more make a heatmap.
const MAX_DRAWN_POINTS: usize = 4000;
/// The slowest requests drawn over a heatmap.
const OUTLIERS_DRAWN: usize = 300;

/// Text made safe inside HTML and SVG, text or attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:980px;color:#1d2330;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #d8dce3;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px}.sub{color:#5a6170}
.finding{border-left:5px solid #999;background:#f6f7f9;margin:10px 0;padding:8px 12px;border-radius:3px}
.finding.critical{border-color:#c62828}.finding.warning{border-color:#ef8f00}.finding.info{border-color:#1e6fd9}
.sev{font-weight:700;text-transform:uppercase;font-size:12px;margin-right:6px}
.critical .sev{color:#c62828}.warning .sev{color:#b86e00}.info .sev{color:#1e6fd9}
pre{background:#f6f7f9;padding:8px;overflow:auto;font-size:12px;border-radius:3px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}td,th{border:1px solid #d8dce3;padding:3px 8px;text-align:right}
th{background:#eef0f4}td:first-child,th:first-child{text-align:left}
svg.chart{display:block;margin:8px 0;max-width:100%;height:auto}
svg .title{font-weight:600;font-size:13px;fill:#1d2330}svg .tick{font-size:11px;fill:#5a6170}svg .axis{font-size:12px;fill:#1d2330}
svg .plot{fill:#fff;stroke:#c9ced8}svg .grid{stroke:#eceef2}
svg .read{fill:#1e6fd9;stroke:#1e6fd9}svg .write{fill:#e0720b;stroke:#e0720b}svg .flush{fill:#7b3fb8;stroke:#7b3fb8}svg .discard{fill:#2e8b57;stroke:#2e8b57}
svg .other{fill:#5a6170;stroke:#5a6170}svg .slow{fill:#c62828;stroke:#c62828}svg .cell{fill:#1e6fd9}svg .bar{fill:#1e6fd9}
svg .line{fill:none;stroke-width:1.6}
svg .on_cpu{fill:#2e8b57}svg .runnable{fill:#c62828}svg .device{fill:#e0720b}svg .journal_space{fill:#7b3fb8}
svg .queued{fill:#d9a400}svg .journal{fill:#1e6fd9}svg .other_wait{fill:#9aa1ad}svg .span{fill:#5a6170}svg .main{fill:#c62828}
iframe.flame{width:100%;height:520px;border:1px solid #d8dce3}
.warn{color:#8a5300}
"#;

/// One capture's report.
pub fn render(a: &Analysis, findings: &[Finding]) -> String {
    let mut body = String::new();
    let inputs: Vec<String> = a.inputs.iter().map(|i| i.path.clone()).collect();
    let _ = write!(
        body,
        "<h1>iosleuth report</h1><p class=\"sub\">{} · {} events over {:.3} s</p>",
        esc(&inputs.join(", ")),
        a.events,
        a.span.last_ns.saturating_sub(a.span.first_ns) as f64 / 1e9
    );
    findings_section(&mut body, findings);
    warnings_section(&mut body, &a.warnings);
    slow_operations_section(&mut body, a);
    for d in &a.block.devices {
        device_section(&mut body, d, a.block.first_ns);
    }
    scheduler_section(&mut body, a);
    flame_section(&mut body, a);
    let _ = write!(
        body,
        "<h2>Every figure</h2><details><summary>The text report (layers, slow operations and their stacks, settings)</summary><pre>{}</pre></details>",
        esc(&super::text::render(a, findings))
    );
    page("iosleuth report", &body)
}

/// Runs compared: the verdict, what differs, and each side's findings
/// and latency on the same axes.
pub fn render_diff(d: &Diff, base: &[&Analysis], cand: &[&Analysis]) -> String {
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
    for (side, runs) in [("baseline", base), ("candidate", cand)] {
        for (i, a) in runs.iter().enumerate() {
            let _ = write!(body, "<h2>Findings of the {side} (run {})</h2>", i + 1);
            findings_section_inner(&mut body, &crate::diagnose::diagnose(a));
        }
    }
    let _ = write!(
        body,
        "<h2>Every figure</h2><details open><summary>The text diff</summary><pre>{}</pre></details>",
        esc(&super::diff_text::render(d))
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
        tick: seconds_tick,
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

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head><body>\n{body}\n<p class=\"sub\">Made by iosleuth {}.</p></body></html>\n",
        esc(title),
        env!("CARGO_PKG_VERSION")
    )
}

fn findings_section(body: &mut String, findings: &[Finding]) {
    body.push_str("<h2>Findings</h2>");
    findings_section_inner(body, findings);
}

fn findings_section_inner(body: &mut String, findings: &[Finding]) {
    if findings.is_empty() {
        body.push_str("<p>No rule of the catalog fired.</p>");
    }
    for f in findings {
        let sev = f.severity.name();
        let _ = write!(
            body,
            "<div class=\"finding {sev}\"><div><span class=\"sev\">{sev}</span><b>{}</b>: {}</div><p>{}</p><p><b>Workaround:</b> {}</p><details><summary>Evidence</summary><pre>{}</pre></details></div>",
            esc(f.id),
            esc(&f.title),
            esc(&f.explanation),
            esc(&f.workaround),
            esc(&serde_json::to_string_pretty(&f.evidence).unwrap_or_default())
        );
    }
}

fn warnings_section(body: &mut String, warnings: &[String]) {
    if warnings.is_empty() {
        return;
    }
    body.push_str("<h2>What could not be seen</h2><ul>");
    for w in warnings {
        let _ = write!(body, "<li class=\"warn\">{}</li>", esc(w));
    }
    body.push_str("</ul>");
}

fn op_class(p: &RequestPoint) -> &'static str {
    use crate::analyze::block::iostat::OpKind;
    match p.op {
        OpKind::Read => "read",
        OpKind::Write => "write",
        OpKind::Flush => "flush",
        OpKind::Discard => "discard",
    }
}

fn hover(p: &RequestPoint, first_ns: u64) -> String {
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut s = format!(
        "{} {} KiB done at {:.6} s: Q2C {}",
        op_class(p),
        p.sectors / 2,
        p.done_ns.saturating_sub(first_ns) as f64 / 1e9,
        latency_ms(ms(p.q2c_ns))
    );
    if let Some(d) = p.d2c_ns {
        let _ = write!(
            s,
            " = {} before the device + D2C {}",
            latency_ms(ms(p.q2c_ns.saturating_sub(d))),
            latency_ms(ms(d))
        );
    }
    s
}

fn seconds_tick(v: f64) -> String {
    short(v)
}

fn device_section(body: &mut String, d: &DeviceSummary, first_ns: u64) {
    let t = &d.timeline;
    let _ = write!(
        body,
        "<h2>Device {}</h2><p class=\"sub\">{} requests completed{}</p>",
        esc(&d.device),
        t.seen,
        if t.complete() {
            String::new()
        } else {
            format!(
                "; {} kept for the plots (every slow one, the rest thinned)",
                t.points.len()
            )
        }
    );
    let secs = |p: &RequestPoint| p.done_ns.saturating_sub(first_ns) as f64 / 1e9;
    let x = Axis {
        label: "time (s)",
        scale: Scale::linear(t.points.iter().map(secs)),
        tick: seconds_tick,
    };
    for (name, of) in [
        (
            "Q2C: queued → complete",
            (|p: &RequestPoint| Some(p.q2c_ns)) as fn(&RequestPoint) -> Option<u64>,
        ),
        (
            "D2C: issued to the device → complete",
            |p: &RequestPoint| p.d2c_ns,
        ),
    ] {
        let pts: Vec<(&RequestPoint, f64)> = t
            .points
            .iter()
            .filter_map(|p| Some((p, of(p)? as f64 / 1e6)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let y = Axis {
            label: "latency (log scale)",
            scale: Scale::log(pts.iter().map(|(_, v)| *v)),
            tick: latency_ms,
        };
        let title = format!("{}: {name}, every request", d.device);
        body.push_str(&if pts.len() <= MAX_DRAWN_POINTS {
            let points: Vec<Point> = pts
                .iter()
                .map(|(p, v)| Point {
                    x: secs(p),
                    y: *v,
                    class: op_class(p),
                    hover: hover(p, first_ns),
                })
                .collect();
            let mut legend: Vec<(&str, &str)> = ["read", "write", "flush", "discard"]
                .into_iter()
                .filter(|c| points.iter().any(|p| p.class == *c))
                .map(|c| (c, c))
                .collect();
            legend.dedup();
            svg::scatter(&title, &x, &y, &points, &legend)
        } else {
            latency_heatmap(&title, &x, &y, &pts, first_ns)
        });
    }
    iostat_charts(body, d);
    for (name, h, unit) in [
        ("Q2C latency", &d.q2c_hist_us, "µs"),
        ("D2C latency", &d.d2c_hist_us, "µs"),
        ("request size", &d.request_size_hist_kib, "KiB"),
    ] {
        let rows: Vec<(String, u64)> = h
            .rows()
            .into_iter()
            .map(|(lo, hi, n)| (format!("{}-{}", short(lo as f64), short(hi as f64)), n))
            .collect();
        if rows.iter().any(|r| r.1 > 0) {
            body.push_str(&svg::bars(
                &format!("{}: {name} histogram", d.device),
                &format!("{name} ({unit}, log2 buckets)"),
                "requests",
                &rows,
            ));
        }
    }
    btt_table(body, d);
}

/// Many requests: counts per (time, log latency) cell, and the slowest
/// drawn one by one over them.
fn latency_heatmap(
    title: &str,
    x: &Axis,
    y: &Axis,
    pts: &[(&RequestPoint, f64)],
    first_ns: u64,
) -> String {
    const COLUMNS: usize = 120;
    const ROWS_PER_DECADE: usize = 8;
    let secs = |p: &RequestPoint| p.done_ns.saturating_sub(first_ns) as f64 / 1e9;
    let (Scale::Linear { min: x0, max: x1 }, Scale::Log { min: y0, max: y1 }) = (x.scale, y.scale)
    else {
        return String::new();
    };
    let decades = (y1.log10() - y0.log10()).round().max(1.0) as usize;
    let rows = decades * ROWS_PER_DECADE;
    let x_edges: Vec<f64> = (0..=COLUMNS)
        .map(|i| x0 + (x1 - x0) * i as f64 / COLUMNS as f64)
        .collect();
    let y_edges: Vec<f64> = (0..=rows)
        .map(|j| 10f64.powf(y0.log10() + j as f64 / ROWS_PER_DECADE as f64))
        .collect();
    let mut counts = vec![vec![0u64; rows]; COLUMNS];
    for (p, v) in pts {
        let i = (((secs(p) - x0) / (x1 - x0)) * COLUMNS as f64).floor() as usize;
        let j = (((v.max(y0)).log10() - y0.log10()) * ROWS_PER_DECADE as f64).floor() as usize;
        counts[i.min(COLUMNS - 1)][j.min(rows - 1)] += 1;
    }
    let mut slowest: Vec<&(&RequestPoint, f64)> = pts.iter().collect();
    let keep = OUTLIERS_DRAWN.min(slowest.len());
    if keep > 0 {
        slowest.select_nth_unstable_by(keep - 1, |a, b| b.1.total_cmp(&a.1));
    }
    let outliers: Vec<Point> = slowest[..keep]
        .iter()
        .map(|(p, v)| Point {
            x: secs(p),
            y: *v,
            class: "slow",
            hover: hover(p, first_ns),
        })
        .collect();
    svg::heatmap(title, x, y, &x_edges, &y_edges, &counts, &outliers)
}

fn iostat_charts(body: &mut String, d: &DeviceSummary) {
    let rows = &d.iostat;
    if rows.len() < 2 {
        return;
    }
    let mid = |r: &crate::analyze::block::iostat::IostatRow| r.start_s + r.seconds / 2.0;
    let x = Axis {
        label: "time (s)",
        scale: Scale::linear(rows.iter().map(mid)),
        tick: seconds_tick,
    };
    type Col = fn(&crate::analyze::block::iostat::IostatRow) -> f64;
    type Chart<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str, Col)]);
    let charts: [Chart; 4] = [
        (
            "requests per second",
            "requests/s",
            &[("r/s", "read", |r| r.r_s), ("w/s", "write", |r| r.w_s)],
        ),
        (
            "queue depth (aqu-sz) and utilization",
            "requests in the queue / %util ÷ 100",
            &[
                ("aqu-sz", "write", |r| r.aqu_sz),
                ("%util/100", "read", |r| r.util / 100.0),
            ],
        ),
        (
            "average request size",
            "KiB",
            &[
                ("rareq-sz", "read", |r| r.rareq_sz),
                ("wareq-sz", "write", |r| r.wareq_sz),
            ],
        ),
        (
            "average wait (await)",
            "ms",
            &[
                ("r_await", "read", |r| r.r_await),
                ("w_await", "write", |r| r.w_await),
            ],
        ),
    ];
    for (title, unit, cols) in charts {
        let series: Vec<svg::Series> = cols
            .iter()
            .map(|(n, c, f)| (*n, *c, rows.iter().map(|r| (mid(r), f(r))).collect()))
            .collect();
        let y = Axis {
            label: unit,
            scale: Scale::linear(series.iter().flat_map(|s| s.2.iter().map(|p| p.1))),
            tick: short,
        };
        body.push_str(&svg::lines(
            &format!(
                "{}: {title}, per {} s (iostat -x)",
                d.device,
                short(rows[0].seconds)
            ),
            &x,
            &y,
            &series,
        ));
    }
}

fn btt_table(body: &mut String, d: &DeviceSummary) {
    let b = &d.btt;
    let rows = [
        ("Q2Q", &b.q2q),
        ("Q2G", &b.q2g),
        ("G2I", &b.g2i),
        ("Q2M", &b.q2m),
        ("I2D", &b.i2d),
        ("M2D", &b.m2d),
        ("D2C", &b.d2c),
        ("Q2C", &b.q2c),
    ];
    if rows.iter().all(|(_, i)| i.n == 0) {
        return;
    }
    let _ = write!(
        body,
        "<h3>{}: btt's intervals (s)</h3><table><tr><th>ALL</th><th>MIN</th><th>AVG</th><th>MAX</th><th>N</th></tr>",
        esc(&d.device)
    );
    for (name, i) in rows.iter().filter(|(_, i)| i.n > 0) {
        let _ = write!(
            body,
            "<tr><td>{name}</td><td>{:.9}</td><td>{:.9}</td><td>{:.9}</td><td>{}</td></tr>",
            i.min_ns as f64 / 1e9,
            i.total_ns as f64 / 1e9 / i.n as f64,
            i.max_ns as f64 / 1e9,
            i.n
        );
    }
    body.push_str("</table>");
}

/// Requests drawn in one operation's timeline: the longest at the device
/// (a long operation on a busy device overlaps thousands).
const REQUESTS_PER_TIMELINE: usize = 100;

/// Operations drawn at most, slowest first.
const SLOW_OPERATIONS_DRAWN: usize = 5;

/// The slowest operations, each a timeline across the layers: the
/// operation, where its time went (its breakdown, in the order the report
/// lists the parts), and every request of the device it waited for that
/// was queued or at the device meanwhile (Q→D queued, D→C at the device;
/// the request it waited for longest in red).
fn slow_operations_section(body: &mut String, a: &Analysis) {
    let mut slow: Vec<&crate::analyze::outliers::Outlier> =
        a.outliers.by_kind.values().flatten().collect();
    if slow.is_empty() {
        return;
    }
    slow.sort_by_key(|x| std::cmp::Reverse(x.latency_ns));
    body.push_str("<h2>Slowest operations across the layers</h2>");
    let mut drawn: Vec<&crate::analyze::outliers::Outlier> = Vec::new();
    for o in slow.iter().copied() {
        let end = o.start_ns + o.latency_ns;
        let inside = |x: &crate::analyze::outliers::Outlier| {
            x.pid == o.pid && x.start_ns >= o.start_ns && x.start_ns + x.latency_ns <= end
        };
        if drawn.len() >= SLOW_OPERATIONS_DRAWN
            || drawn.iter().any(|d| {
                d.pid == o.pid
                    && o.start_ns >= d.start_ns
                    && o.start_ns + o.latency_ns <= d.start_ns + d.latency_ns
            })
        {
            continue;
        }
        drawn.push(o);
        let ms = |ns: u64| ns as f64 / 1e6;
        let rel = |t: u64| (t as f64 - o.start_ns as f64) / 1e6;
        // The operation and those of its thread inside it (the system
        // call in the probe's operation, the filesystem call in that).
        let mut layers: Vec<&crate::analyze::outliers::Outlier> =
            slow.iter().copied().filter(|x| inside(x)).collect();
        layers.sort_by_key(|x| (x.start_ns, std::cmp::Reverse(x.latency_ns)));
        layers.dedup_by(|a, b| a.kind == b.kind);
        let mut rows: Vec<(String, Vec<svg::Bar>)> = layers
            .iter()
            .map(|x| {
                (
                    x.kind.clone(),
                    vec![svg::Bar {
                        from: rel(x.start_ns),
                        to: rel(x.start_ns + x.latency_ns),
                        class: "span",
                        hover: x.summary.clone(),
                    }],
                )
            })
            .collect();
        let mut at = 0.0;
        let mut parts = Vec::new();
        for (name, ns) in o.breakdown.parts().into_iter().filter(|p| p.1 > 0) {
            parts.push(svg::Bar {
                from: at,
                to: at + ms(ns),
                class: name,
                hover: format!(
                    "{name}: {} ({:.0} %): {}",
                    latency_ms(ms(ns)),
                    ns as f64 * 100.0 / o.latency_ns.max(1) as f64,
                    crate::analyze::outliers::describe_part(name)
                ),
            });
            at += ms(ns);
        }
        rows.push(("where the time went (sums)".into(), parts));
        // When it blocked, and in what (captures recorded with --stacks).
        let blocked: Vec<svg::Bar> = a
            .stacks
            .stretches
            .get(&o.pid)
            .into_iter()
            .flatten()
            .filter(|b| b.to_ns > o.start_ns && b.from_ns < end)
            .map(|b| svg::Bar {
                from: rel(b.from_ns.max(o.start_ns)),
                to: rel(b.to_ns.min(end)),
                class: "other_wait",
                hover: format!(
                    "blocked {} in {}",
                    latency_ms(ms(b.to_ns - b.from_ns)),
                    blocked_in(&b.frames)
                ),
            })
            .collect();
        if !blocked.is_empty() {
            rows.push(("thread blocked (stacks)".into(), blocked));
        }
        if let Some(req) = &o.main_request {
            if let Some(d) = a.block.devices.iter().find(|d| d.device == req.dev) {
                let mut bars = Vec::new();
                let mut during: Vec<&RequestPoint> = d
                    .timeline
                    .points
                    .iter()
                    .filter(|p| {
                        p.done_ns >= o.start_ns && p.done_ns.saturating_sub(p.q2c_ns) <= end
                    })
                    .collect();
                let all = during.len();
                if all > REQUESTS_PER_TIMELINE {
                    // The longest at the device, the one waited for first.
                    during.sort_by_key(|p| (p.d2c_ns != req.d2c_ns, std::cmp::Reverse(p.d2c_ns)));
                    during.truncate(REQUESTS_PER_TIMELINE);
                }
                for p in during {
                    let queued = p.done_ns.saturating_sub(p.q2c_ns);
                    let issued = p.d2c_ns.map_or(queued, |d| p.done_ns.saturating_sub(d));
                    let rel = |t: u64| (t as f64 - o.start_ns as f64) / 1e6;
                    let main = p.d2c_ns.is_some() && p.d2c_ns == req.d2c_ns;
                    let what = hover(p, a.block.first_ns);
                    bars.push(svg::Bar {
                        from: rel(queued),
                        to: rel(issued),
                        class: "queued",
                        hover: format!("queued: {what}"),
                    });
                    bars.push(svg::Bar {
                        from: rel(issued),
                        to: rel(p.done_ns),
                        class: if main { "main" } else { "device" },
                        hover: format!("at the device: {what}"),
                    });
                }
                let label = if all > REQUESTS_PER_TIMELINE {
                    format!("device {} ({REQUESTS_PER_TIMELINE} of {all})", req.dev)
                } else {
                    format!("device {}", req.dev)
                };
                rows.push((label, bars));
            }
        }
        let x = Axis {
            label: "time since the operation started (ms)",
            scale: Scale::Linear {
                min: 0.0,
                max: ms(o.latency_ns).max(0.001),
            },
            tick: short,
        };
        body.push_str(&svg::timeline(
            &format!(
                "{}: {} ({}) took {}",
                o.kind,
                o.comm,
                o.pid,
                latency_ms(ms(o.latency_ns))
            ),
            &x,
            &rows,
        ));
        let _ = write!(body, "<p class=\"sub\">{}</p>", esc(&o.summary));
    }
}

/// Where a blocked stretch waited: its innermost frames past the
/// tracer's and the scheduler's own, innermost first.
fn blocked_in(frames: &[std::sync::Arc<str>]) -> String {
    use crate::analyze::stacks::{function, tracer_frame};
    frames
        .iter()
        .map(|f| function(f))
        .filter(|f| !tracer_frame(f) && !f.contains("schedule"))
        .take(6)
        .collect::<Vec<&str>>()
        .join(" ← ")
}

fn scheduler_section(body: &mut String, a: &Analysis) {
    let rows: Vec<(String, u64)> = a
        .sched
        .runqlat_us
        .rows()
        .into_iter()
        .map(|(lo, hi, n)| (format!("{}-{}", short(lo as f64), short(hi as f64)), n))
        .collect();
    let softirq = &a.irq.softirq;
    if rows.is_empty() && softirq.is_empty() {
        return;
    }
    body.push_str("<h2>Scheduler and interrupts</h2>");
    if !rows.is_empty() {
        body.push_str(&svg::bars(
            "run-queue latency (wakeup → running), like runqlat",
            "µs (log2 buckets)",
            "wakeups",
            &rows,
        ));
    }
    if !softirq.is_empty() {
        let mut vectors: Vec<&str> = softirq
            .iter()
            .flat_map(|c| c.time_ns.keys().copied())
            .collect();
        vectors.sort();
        vectors.dedup();
        body.push_str("<h3>Time in softirq handlers per CPU (ms)</h3><table><tr><th>CPU</th>");
        for v in &vectors {
            let _ = write!(body, "<th>{}</th>", esc(v));
        }
        body.push_str("</tr>");
        for c in softirq {
            let _ = write!(body, "<tr><td>{}</td>", c.cpu);
            for v in &vectors {
                let ns = c.time_ns.get(v).copied().unwrap_or(0);
                let _ = write!(body, "<td>{:.3}</td>", ns as f64 / 1e6);
            }
            body.push_str("</tr>");
        }
        body.push_str("</table>");
    }
}

/// Flame graphs, each in a sandboxed frame of its own: inferno's SVG
/// carries its script (search, zoom), which runs there and nowhere else.
fn flame_section(body: &mut String, a: &Analysis) {
    let graphs = [
        (
            "On CPU: where the CPUs ran (samples)",
            a.stacks.samples > 0,
            super::flamegraph::on_cpu_svg as fn(&Analysis, &str) -> std::io::Result<Vec<u8>>,
        ),
        (
            "Off CPU: where threads blocked (µs)",
            a.stacks.off_cpu_ns > 0,
            super::flamegraph::off_cpu_svg,
        ),
    ];
    if graphs.iter().all(|g| !g.1) {
        return;
    }
    body.push_str("<h2>Flame graphs</h2>");
    for (title, present, draw) in graphs {
        if !present {
            continue;
        }
        if let Ok(svg) = draw(a, "") {
            // A fixed width: inferno's fluid drawing sizes the graph from
            // its frame's width when its script runs, which a frame not
            // laid out yet (below the fold) reports as 0.
            let svg = String::from_utf8_lossy(&svg).replacen(
                "var fluiddrawing = true;",
                "var fluiddrawing = false;",
                1,
            );
            let svg = svg.as_bytes();
            let _ = write!(
                body,
                "<h3>{}</h3><iframe class=\"flame\" sandbox=\"allow-scripts\" title=\"{}\" src=\"data:image/svg+xml;base64,{}\"></iframe>",
                esc(title),
                esc(title),
                base64(svg)
            );
        }
    }
}

/// Standard base64 (RFC 4648, padded), for the data URL of an embedded
/// SVG document.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}

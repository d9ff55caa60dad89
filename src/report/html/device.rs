//! A device's section: every request's latency against time (points, or
//! a heatmap with the slowest over it), iostat's columns over time, the
//! latency and size histograms, and btt's table.

use super::svg::{self, latency_ms, short, Axis, Point, Scale};
use super::{esc, log2_buckets, MAX_DRAWN_POINTS, OUTLIERS_DRAWN};
use crate::analyze::block::timeline::RequestPoint;
use crate::analyze::block::DeviceSummary;
use std::fmt::Write;

fn op_class(p: &RequestPoint) -> &'static str {
    use crate::analyze::block::iostat::OpKind;
    match p.op {
        OpKind::Read => "read",
        OpKind::Write => "write",
        OpKind::Flush => "flush",
        OpKind::Discard => "discard",
    }
}

pub(super) fn hover(p: &RequestPoint, first_ns: u64) -> String {
    let ms = crate::model::units::ms;
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

pub(super) fn section(body: &mut String, d: &DeviceSummary, first_ns: u64) {
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
        tick: short,
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
            let legend: Vec<(&str, &str)> = ["read", "write", "flush", "discard"]
                .into_iter()
                .filter(|c| points.iter().any(|p| p.class == *c))
                .map(|c| (c, c))
                .collect();
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
        let rows = log2_buckets(h);
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
        tick: short,
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

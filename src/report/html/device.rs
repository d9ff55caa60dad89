//! A device's section: every request's latency against time (points, or
//! a heatmap with the slowest over it), iostat's columns over time, the
//! latency and size histograms, and btt's table.

use super::svg::{self, latency_ms, short, Axis, Point, Scale};
use super::{esc, log2_buckets, MAX_DRAWN_POINTS, OUTLIERS_DRAWN};
use crate::analyze::block::iostat::{IostatAccumulator, IostatRow};
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

/// `light`: the capture is a light one, whose requests were recorded one
/// by one only when slow (the rest are in the kernel's histograms).
pub(super) fn section(body: &mut String, d: &DeviceSummary, first_ns: u64, light: bool) {
    let t = &d.timeline;
    // The count every output gives (the text report's, the JSON's); the
    // plots draw what was recorded one by one, and say which.
    let completed = d.completed.total();
    let every = t.seen >= completed;
    let drawn = if every {
        "every request".to_string()
    } else if light {
        format!("the {} slow requests recorded", t.seen)
    } else {
        format!("the {} requests recorded one by one", t.seen)
    };
    let _ = write!(
        body,
        "<h2>Device {}</h2><p class=\"sub\">{} requests completed{}</p>",
        esc(&d.device),
        completed,
        if !every {
            format!(
                "; the latency plots below draw only {drawn}{}",
                if light {
                    " (a light capture keeps the others as the kernel's histograms: the text report below has them)"
                } else {
                    ""
                }
            )
        } else if t.complete() {
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
        let title = format!("{}: {name}", d.device);
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
            svg::scatter(&format!("{title}, {drawn}"), &x, &y, &points, &legend)
        } else {
            latency_heatmaps(&title, &x, &y, &pts, first_ns)
        });
    }
    iostat_charts(body, d, first_ns);
    for (name, h, unit) in [
        ("Q2C latency", &d.q2c_hist_us, "µs"),
        ("D2C latency", &d.d2c_hist_us, "µs"),
        ("request size", &d.request_size_hist_kib, "KiB"),
    ] {
        let rows = log2_buckets(h);
        if rows.iter().any(|r| r.count > 0) {
            body.push_str(&svg::bars(
                &format!("{}: {name} histogram", d.device),
                &format!(
                    "{name} ({unit}, log2 buckets, each from its low bound to twice it; Ki = 1024)"
                ),
                "requests",
                &rows,
            ));
        }
    }
    btt_table(body, d);
}

/// Many requests: counts per (time, log latency) cell, one heatmap for
/// each kind of request (reads, writes, …: their latencies differ, and
/// one shade cannot say which), and the slowest requests of all drawn one
/// by one over their kind's.
fn latency_heatmaps(
    title: &str,
    x: &Axis,
    y: &Axis,
    pts: &[(&RequestPoint, f64)],
    first_ns: u64,
) -> String {
    let mut slowest: Vec<&(&RequestPoint, f64)> = pts.iter().collect();
    let keep = OUTLIERS_DRAWN.min(slowest.len());
    if keep > 0 {
        slowest.select_nth_unstable_by(keep - 1, |a, b| b.1.total_cmp(&a.1));
    }
    slowest.truncate(keep);
    let mut out = String::new();
    for (class, plural) in [
        ("read", "reads"),
        ("write", "writes"),
        ("flush", "flushes"),
        ("discard", "discards"),
    ] {
        let of: Vec<(&RequestPoint, f64)> = pts
            .iter()
            .copied()
            .filter(|(p, _)| op_class(p) == class)
            .collect();
        if of.is_empty() {
            continue;
        }
        let outliers: Vec<Point> = slowest
            .iter()
            .filter(|(p, _)| op_class(p) == class)
            .map(|(p, v)| Point {
                x: p.done_ns.saturating_sub(first_ns) as f64 / 1e9,
                y: *v,
                class: "slow",
                hover: hover(p, first_ns),
            })
            .collect();
        out.push_str(&latency_heatmap(
            &format!("{title}: {} {plural}", of.len()),
            x,
            y,
            &of,
            class,
            &outliers,
            first_ns,
        ));
    }
    out
}

/// One kind's requests as a heatmap, its slowest (`outliers`) over it.
fn latency_heatmap(
    title: &str,
    x: &Axis,
    y: &Axis,
    pts: &[(&RequestPoint, f64)],
    class: &str,
    outliers: &[Point],
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
    svg::heatmap(title, x, y, &x_edges, &y_edges, &counts, class, outliers)
}

/// Charts over time need this many points at least.
const MIN_IOSTAT_POINTS: usize = 10;
/// … and this many requests to make rates of.
const MIN_IOSTAT_REQUESTS: usize = 20;

/// iostat's rows at an interval that gives the trace's span enough
/// points: the analysis' own (one second by default) when it does, else
/// computed again from every request's times at a shorter round interval
/// (or `Err` with the reason there is no chart).
fn iostat_rows(d: &DeviceSummary, first_ns: u64) -> Result<(Vec<IostatRow>, bool), String> {
    if d.iostat.len() >= MIN_IOSTAT_POINTS {
        return Ok((d.iostat.clone(), false));
    }
    let t = &d.timeline;
    if !t.complete() {
        return Err(format!(
            "No iostat chart: at the report's interval the trace gives {} point{}, and the requests kept for the plots are a sample, not every one, to compute shorter intervals from: `--interval SECONDS` sets a shorter one.",
            d.iostat.len(),
            if d.iostat.len() == 1 { "" } else { "s" }
        ));
    }
    if t.points.len() < MIN_IOSTAT_REQUESTS {
        return Err(format!(
            "No iostat chart: {} requests are too few for rates over time (iostat's figures for the whole trace are in the text report).",
            t.points.len()
        ));
    }
    let start = |p: &RequestPoint| p.done_ns.saturating_sub(p.q2c_ns);
    let from = t.points.iter().map(start).min().unwrap_or(first_ns);
    let to = t.points.iter().map(|p| p.done_ns).max().unwrap_or(from);
    // About 30 points over the device's active span, at a round interval.
    let interval = round_down((to.saturating_sub(from) / 30).max(1));
    // Whole intervals from the report's origin, so times read the same
    // as the other charts'.
    let origin = first_ns + (from.saturating_sub(first_ns) / interval) * interval;
    let mut acc = IostatAccumulator::new(origin, interval);
    // In time order: starts before ends at the same instant.
    let mut edges: Vec<(u64, bool, &RequestPoint)> = t
        .points
        .iter()
        .flat_map(|p| [(start(p), false, p), (p.done_ns, true, p)])
        .collect();
    edges.sort_by_key(|(ts, end, _)| (*ts, *end));
    for (ts, end, p) in edges {
        if end {
            acc.io_ended(ts);
            acc.io_done(ts, p.op, p.q2c_ns);
            acc.sectors_done(ts, p.op, p.sectors);
        } else {
            acc.io_started(ts);
        }
    }
    acc.finish(to);
    let offset = origin.saturating_sub(first_ns) as f64 / 1e9;
    let rows: Vec<IostatRow> = acc
        .rows(to)
        .into_iter()
        .map(|mut r| {
            r.start_s += offset;
            r
        })
        .collect();
    if rows.len() < MIN_IOSTAT_POINTS {
        return Err(format!(
            "No iostat chart: the device's requests span {} s, too short for {MIN_IOSTAT_POINTS} intervals.",
            short(to.saturating_sub(from) as f64 / 1e9)
        ));
    }
    Ok((rows, true))
}

/// The round interval (1, 2 or 5 × a power of ten ns) at most `ns`.
fn round_down(ns: u64) -> u64 {
    let mag = 10u64.pow(ns.max(1).ilog10());
    [5, 2, 1]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s <= ns)
        .unwrap_or(mag)
}

/// An interval in words: `20 ms`, `1 s`.
fn interval_words(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{} s", short(seconds))
    } else {
        latency_ms(seconds * 1e3)
    }
}

fn iostat_charts(body: &mut String, d: &DeviceSummary, first_ns: u64) {
    let (rows, recomputed) = match iostat_rows(d, first_ns) {
        Ok(r) => r,
        Err(why) => {
            let _ = write!(body, "<p class=\"sub iostat-none\">{}</p>", esc(&why));
            return;
        }
    };
    let rows = &rows;
    if recomputed {
        let _ = write!(
            body,
            "<p class=\"sub\">iostat's columns per {}, computed from every request's queue and completion times: at the report's interval the trace gives {} point{}, too few for a chart.</p>",
            interval_words(rows[0].seconds),
            d.iostat.len(),
            if d.iostat.len() == 1 { "" } else { "s" }
        );
    }
    let mid = |r: &IostatRow| r.start_s + r.seconds / 2.0;
    let x = Axis {
        label: "time (s)",
        scale: Scale::linear(rows.iter().map(mid)),
        tick: short,
    };
    type Col = fn(&IostatRow) -> f64;
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
                "{}: {title}, per {} (iostat -x)",
                d.device,
                interval_words(rows[0].seconds)
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

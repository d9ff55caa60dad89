//! The slowest operations, each a timeline across the layers.

use super::device::hover;
use super::esc;
use super::svg::{self, latency_ms, short, Axis, Scale};
use crate::analyze::block::timeline::RequestPoint;
use crate::analyze::outliers::Outlier;
use crate::analyze::Analysis;
use std::fmt::Write;

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
pub(super) fn section(body: &mut String, a: &Analysis) {
    let mut slow: Vec<&Outlier> = a.outliers.by_kind.values().flatten().collect();
    if slow.is_empty() {
        return;
    }
    slow.sort_by_key(|x| std::cmp::Reverse(x.latency_ns));
    body.push_str("<h2>Slowest operations across the layers</h2>");
    for o in slowest_apart(&slow) {
        let mut rows = layer_rows(o, &slow);
        rows.push(("where the time went (sums)".into(), breakdown_bars(o)));
        let blocked = blocked_bars(o, a);
        if !blocked.is_empty() {
            rows.push(("thread blocked (stacks)".into(), blocked));
        }
        rows.extend(device_row(o, a));
        let x = Axis {
            label: "time since the operation started (ms)",
            scale: Scale::Linear {
                min: 0.0,
                max: ms(o.latency_ns).max(0.001),
            },
            tick: short,
        };
        let key = key_of(&rows);
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
            &key,
        ));
        let _ = write!(body, "<p class=\"sub\">{}</p>", esc(&o.summary));
        stack_text(body, o);
    }
}

/// Every colour a timeline can draw, in the order its key lists them:
/// (class, name, what it means).
const COLOURS: &[(&str, &str, &str)] = &[
    ("span", "operation", "the operation, and the calls of its thread inside it"),
    ("on_cpu", "on CPU", "running on a CPU"),
    ("runnable", "runnable", "runnable, waiting for a CPU"),
    ("queued", "queued", "queued for the device"),
    ("device", "at the device", "at the device"),
    ("main", "the request waited for", "the request the operation waited for longest, at the device"),
    ("journal_space", "journal space", "waiting for journal space"),
    ("journal", "journal commit", "waiting for a journal commit"),
    ("other_wait", "blocked in the kernel", "blocked in the kernel with no request at the device (a lock, a throttle); on the stacks row, when the thread was off its CPU, and the function it waited in on hover"),
    ("asleep", "asleep", "asleep in an interruptible wait (a pipe, futex, poll, timer, or a user-space server's reply)"),
    ("not_recorded", "not recorded", "a thread state not recorded (no scheduler events): the trace cannot say"),
];

/// The key of a timeline: each colour its rows draw.
fn key_of(rows: &[Row]) -> Vec<svg::Key<'static>> {
    COLOURS
        .iter()
        .filter(|(class, _, _)| rows.iter().flat_map(|r| &r.1).any(|b| b.class == *class))
        .map(|&(class, name, means)| svg::Key { class, name, means })
        .collect()
}

/// The kernel stack the operation's thread spent most of its blocked time
/// in, as text (captures recorded with --stacks): innermost first, as the
/// kernel and perf print a stack.
fn stack_text(body: &mut String, o: &Outlier) {
    let Some(b) = &o.blocked_in else {
        return;
    };
    if b.frames.is_empty() {
        return;
    }
    let _ = write!(
        body,
        "<p class=\"stack\">Blocked {} of the {} in this kernel stack ({} {}), innermost first: <code>{}</code></p>",
        latency_ms(ms(b.ns)),
        latency_ms(ms(o.latency_ns)),
        b.stretches,
        if b.stretches == 1 { "time" } else { "times" },
        esc(&b.frames.join(" ← "))
    );
}

/// One timeline row: its label and its bars.
type Row = (String, Vec<svg::Bar>);

use crate::model::units::ms;

/// Milliseconds from the operation's start.
fn since(o: &Outlier, t: u64) -> f64 {
    (t as f64 - o.start_ns as f64) / 1e6
}

fn end_ns(o: &Outlier) -> u64 {
    o.start_ns + o.latency_ns
}

/// The slowest operations (sorted slowest first) to draw: at most
/// `SLOW_OPERATIONS_DRAWN`, none inside one already drawn of its thread.
fn slowest_apart<'a>(slow: &[&'a Outlier]) -> Vec<&'a Outlier> {
    let mut drawn: Vec<&Outlier> = Vec::new();
    for o in slow.iter().copied() {
        if drawn.len() >= SLOW_OPERATIONS_DRAWN {
            break;
        }
        let within =
            |d: &&Outlier| d.pid == o.pid && o.start_ns >= d.start_ns && end_ns(o) <= end_ns(d);
        if !drawn.iter().any(within) {
            drawn.push(o);
        }
    }
    drawn
}

/// The operation and those of its thread inside it (the system call in
/// the probe's operation, the filesystem call in that), a row each.
fn layer_rows(o: &Outlier, slow: &[&Outlier]) -> Vec<Row> {
    let mut layers: Vec<&Outlier> = slow
        .iter()
        .copied()
        .filter(|x| x.pid == o.pid && x.start_ns >= o.start_ns && end_ns(x) <= end_ns(o))
        .collect();
    layers.sort_by_key(|x| (x.start_ns, std::cmp::Reverse(x.latency_ns)));
    layers.dedup_by(|a, b| a.kind == b.kind);
    layers
        .iter()
        .map(|x| {
            let bar = svg::Bar {
                from: since(o, x.start_ns),
                to: since(o, end_ns(x)),
                class: "span",
                hover: x.summary.clone(),
            };
            (x.kind.clone(), vec![bar])
        })
        .collect()
}

/// The operation's breakdown as consecutive bars, one per part.
fn breakdown_bars(o: &Outlier) -> Vec<svg::Bar> {
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
    parts
}

/// When the thread blocked during the operation, and in what (captures
/// recorded with --stacks).
fn blocked_bars(o: &Outlier, a: &Analysis) -> Vec<svg::Bar> {
    let end = end_ns(o);
    a.stacks
        .stretches
        .get(&o.pid)
        .into_iter()
        .flatten()
        .filter(|b| b.to_ns > o.start_ns && b.from_ns < end)
        .map(|b| svg::Bar {
            from: since(o, b.from_ns.max(o.start_ns)),
            to: since(o, b.to_ns.min(end)),
            class: "other_wait",
            hover: format!(
                "blocked {} in {}",
                latency_ms(ms(b.to_ns - b.from_ns)),
                blocked_in(&b.frames)
            ),
        })
        .collect()
}

/// The requests of the device the operation waited for that were queued
/// or at the device meanwhile, the longest ones when there are many.
fn device_row(o: &Outlier, a: &Analysis) -> Option<Row> {
    let req = o.main_request.as_ref()?;
    let d = a.block.devices.iter().find(|d| d.device == req.dev)?;
    let end = end_ns(o);
    let mut during: Vec<&RequestPoint> = d
        .timeline
        .points
        .iter()
        .filter(|p| p.done_ns >= o.start_ns && p.done_ns.saturating_sub(p.q2c_ns) <= end)
        .collect();
    let all = during.len();
    if all > REQUESTS_PER_TIMELINE {
        // The longest at the device, the one waited for first.
        during.sort_by_key(|p| (p.d2c_ns != req.d2c_ns, std::cmp::Reverse(p.d2c_ns)));
        during.truncate(REQUESTS_PER_TIMELINE);
    }
    let mut bars = Vec::new();
    for p in during {
        let queued = p.done_ns.saturating_sub(p.q2c_ns);
        let issued = p.d2c_ns.map_or(queued, |d| p.done_ns.saturating_sub(d));
        let main = p.d2c_ns.is_some() && p.d2c_ns == req.d2c_ns;
        let what = hover(p, crate::report::origin_ns(a));
        bars.push(svg::Bar {
            from: since(o, queued),
            to: since(o, issued),
            class: "queued",
            hover: format!("queued: {what}"),
        });
        bars.push(svg::Bar {
            from: since(o, issued),
            to: since(o, p.done_ns),
            class: if main { "main" } else { "device" },
            hover: format!("at the device: {what}"),
        });
    }
    let label = if all > REQUESTS_PER_TIMELINE {
        format!("device {} ({REQUESTS_PER_TIMELINE} of {all})", req.dev)
    } else {
        format!("device {}", req.dev)
    };
    Some((label, bars))
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

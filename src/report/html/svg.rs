//! Charts as inline SVG, drawn here rather than by a JavaScript library:
//! the page works offline and runs no script of its own. Every axis
//! names its unit; a point's stages show on hover (SVG `<title>`). Every
//! string is escaped: trace data is untrusted.

use super::esc;
use std::fmt::Write;

const W: f64 = 920.0;
const H: f64 = 260.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 26.0;
const BOTTOM: f64 = 42.0;

/// How values map onto an axis.
#[derive(Clone, Copy)]
pub enum Scale {
    Linear {
        min: f64,
        max: f64,
    },
    /// Powers of ten; values at or below zero sit at `min`.
    Log {
        min: f64,
        max: f64,
    },
}

impl Scale {
    /// A linear scale from 0 (or the least value) to the largest.
    pub fn linear(values: impl Iterator<Item = f64>) -> Scale {
        let (mut lo, mut hi) = (0f64, f64::MIN);
        for v in values.filter(|v| v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        // The top at a round tick, so that the plot's edge is labelled.
        let step = nice_step((hi - lo) / 5.0);
        Scale::Linear {
            min: lo,
            max: (hi / step).ceil() * step,
        }
    }

    /// A log scale over whole decades around the positive values.
    pub fn log(values: impl Iterator<Item = f64>) -> Scale {
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for v in values.filter(|v| v.is_finite() && *v > 0.0) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if hi < lo {
            return Scale::Log {
                min: 1.0,
                max: 10.0,
            };
        }
        let (lo, hi) = (
            lo.log10().floor(),
            hi.log10().ceil().max(lo.log10().floor() + 1.0),
        );
        Scale::Log {
            min: 10f64.powf(lo),
            max: 10f64.powf(hi),
        }
    }

    /// Where `v` falls, 0 to 1.
    fn at(&self, v: f64) -> f64 {
        match *self {
            Scale::Linear { min, max } => ((v - min) / (max - min)).clamp(0.0, 1.0),
            Scale::Log { min, max } => {
                if v <= min {
                    return 0.0;
                }
                ((v.log10() - min.log10()) / (max.log10() - min.log10())).clamp(0.0, 1.0)
            }
        }
    }

    /// "log" or "linear", for the chart's `data-y-scale` (tests, and
    /// anyone reading the page's source).
    fn name(&self) -> &'static str {
        match self {
            Scale::Linear { .. } => "linear",
            Scale::Log { .. } => "log",
        }
    }

    fn ticks(&self) -> Vec<f64> {
        match *self {
            Scale::Log { min, max } => {
                let (a, b) = (min.log10().round() as i32, max.log10().round() as i32);
                (a..=b).map(|k| 10f64.powi(k)).collect()
            }
            Scale::Linear { min, max } => {
                let step = nice_step((max - min) / 5.0);
                let mut t = (min / step).ceil() * step;
                let mut out = Vec::new();
                while t <= max + step * 1e-9 && out.len() < 12 {
                    out.push(t);
                    t += step;
                }
                out
            }
        }
    }
}

/// The round step (1, 2, 2.5 or 5 times a power of ten) at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(raw)
}

/// A named line of a line chart: (name, CSS class, points).
pub type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

/// An axis: its scale and its label with the unit.
pub struct Axis<'a> {
    pub label: &'a str,
    pub scale: Scale,
    /// How a tick value is written (its unit added where it helps).
    pub tick: fn(f64) -> String,
}

impl Axis<'_> {
    /// Each tick with its label: the axis' own way of writing values, or,
    /// where that writes two ticks alike (0.0005 and 0.001 both "0.001"),
    /// as many decimals as the step needs, so that every label is distinct.
    fn tick_labels(&self) -> Vec<(f64, String)> {
        let ticks = self.scale.ticks();
        let labels: Vec<String> = ticks.iter().map(|&t| (self.tick)(t)).collect();
        // An axis without tick labels (a histogram's, whose buckets are
        // labelled one by one) has no ticks either.
        if labels.iter().all(String::is_empty) {
            return Vec::new();
        }
        if labels.windows(2).all(|w| w[0] != w[1]) {
            return ticks.into_iter().zip(labels).collect();
        }
        let step = ticks
            .windows(2)
            .map(|w| w[1] - w[0])
            .fold(f64::INFINITY, f64::min);
        let mut decimals = (-step.log10().floor()).max(0.0) as usize;
        let exact = |d: usize| {
            let k = step * 10f64.powi(d as i32);
            (k - k.round()).abs() < 1e-6
        };
        while !exact(decimals) && decimals < 12 {
            decimals += 1;
        }
        ticks
            .into_iter()
            .map(|t| (t, format!("{t:.decimals$}")))
            .collect()
    }
}

/// A number as short as it reads well.
pub fn short(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// A latency in ms written with the unit that suits it.
pub fn latency_ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{} s", short(v / 1000.0))
    } else if v >= 1.0 {
        format!("{} ms", short(v))
    } else {
        format!("{} µs", short(v * 1000.0))
    }
}

struct Frame {
    out: String,
}

impl Frame {
    fn new(title: &str, x: &Axis, y: &Axis) -> Frame {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{t}" data-y-scale="{s}"><text class="title" x="{LEFT}" y="16">{t}</text>"#,
            t = esc(title),
            s = y.scale.name()
        );
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let _ = write!(
            out,
            r#"<rect class="plot" x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}"/>"#
        );
        for (t, label) in x.tick_labels() {
            let px = LEFT + x.scale.at(t) * pw;
            let _ = write!(
                out,
                r#"<line class="grid" x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{y2}"/><text class="tick" x="{px:.1}" y="{ty}" text-anchor="middle">{l}</text>"#,
                y2 = TOP + ph,
                ty = TOP + ph + 14.0,
                l = esc(&label)
            );
        }
        for (t, label) in y.tick_labels() {
            let py = TOP + ph - y.scale.at(t) * ph;
            let _ = write!(
                out,
                r#"<line class="grid" x1="{LEFT}" y1="{py:.1}" x2="{x2}" y2="{py:.1}"/><text class="tick" x="{tx}" y="{ty:.1}" text-anchor="end">{l}</text>"#,
                x2 = LEFT + pw,
                tx = LEFT - 6.0,
                ty = py + 4.0,
                l = esc(&label)
            );
        }
        let _ = write!(
            out,
            r#"<text class="axis" x="{cx}" y="{by}" text-anchor="middle">{xl}</text><text class="axis" transform="translate(14,{cy}) rotate(-90)" text-anchor="middle">{yl}</text>"#,
            cx = LEFT + pw / 2.0,
            by = H - 6.0,
            xl = esc(x.label),
            cy = TOP + ph / 2.0,
            yl = esc(y.label)
        );
        Frame { out }
    }

    fn x(x: &Axis, v: f64) -> f64 {
        LEFT + x.scale.at(v) * (W - LEFT - RIGHT)
    }

    fn y(y: &Axis, v: f64) -> f64 {
        let ph = H - TOP - BOTTOM;
        TOP + ph - y.scale.at(v) * ph
    }

    /// Each point a circle of radius `r`, its hover text as its title.
    fn points(&mut self, x: &Axis, y: &Axis, points: &[Point], r: f64) {
        for p in points {
            let _ = write!(
                self.out,
                r#"<circle class="{}" cx="{:.1}" cy="{:.1}" r="{r}"><title>{}</title></circle>"#,
                p.class,
                Frame::x(x, p.x),
                Frame::y(y, p.y),
                esc(&p.hover)
            );
        }
    }

    fn legend(&mut self, names: &[(&str, &str)]) {
        let mut x = W - RIGHT - 10.0;
        for (name, class) in names.iter().rev() {
            x -= 12.0 + 7.0 * name.chars().count() as f64;
            let _ = write!(
                self.out,
                r#"<rect class="{class}" x="{x:.0}" y="7" width="9" height="9"/><text class="tick" x="{tx:.0}" y="15">{n}</text>"#,
                tx = x + 12.0,
                n = esc(name)
            );
        }
    }

    /// The heatmap's key, top right: what each shade counts (1 to `max`
    /// requests per cell, on the same log shading as the cells), and the
    /// red points.
    fn colour_scale(&mut self, class: &str, max: u64) {
        const STEPS: u32 = 6;
        let mut x = W - RIGHT - 10.0 - 70.0 - STEPS as f64 * 14.0 - 40.0 - 150.0;
        let _ = write!(
            self.out,
            r#"<text class="tick" x="{x:.0}" y="15">requests per cell: 1</text>"#
        );
        x += 124.0;
        let _ = write!(self.out, r#"<g class="cells {class}">"#);
        let mut seen = Vec::new();
        for k in 0..STEPS {
            // Counts spaced evenly in log: 1 … max.
            let n = ((max as f64).powf(k as f64 / (STEPS - 1) as f64)).round() as u64;
            if seen.contains(&n) {
                continue;
            }
            seen.push(n);
            let _ = write!(
                self.out,
                r#"<rect class="scale" x="{x:.0}" y="6" width="13" height="11" fill-opacity="{:.2}"><title>{n} requests</title></rect>"#,
                shade(n, max)
            );
            x += 14.0;
        }
        self.out.push_str("</g>");
        let _ = write!(
            self.out,
            r#"<text class="tick" x="{:.0}" y="15">{}</text>"#,
            x + 3.0,
            esc(&short(max as f64))
        );
        x += 14.0 + 7.0 * short(max as f64).len() as f64;
        let _ = write!(
            self.out,
            r#"<circle class="slow swatch" cx="{:.0}" cy="11.5" r="3"/><text class="tick" x="{:.0}" y="15">slowest</text>"#,
            x + 4.0,
            x + 11.0
        );
    }

    fn end(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// A point of a scatter plot, with what shows on hover.
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub class: &'static str,
    pub hover: String,
}

/// Points over an x and a y axis; `legend` names each class drawn.
pub fn scatter(
    title: &str,
    x: &Axis,
    y: &Axis,
    points: &[Point],
    legend: &[(&str, &str)],
) -> String {
    let mut f = Frame::new(title, x, y);
    f.points(x, y, points, 2.2);
    f.legend(legend);
    f.end()
}

/// Counts in cells of x buckets × y buckets (each bucket's lower edge in
/// axis units, the last's upper edge after it), darker for more, in the
/// colour of `class` (read, write, …); the outliers drawn over them as
/// points. A colour scale at the top says what a shade counts.
#[allow(clippy::too_many_arguments)]
pub fn heatmap(
    title: &str,
    x: &Axis,
    y: &Axis,
    x_edges: &[f64],
    y_edges: &[f64],
    counts: &[Vec<u64>],
    class: &str,
    outliers: &[Point],
) -> String {
    let mut f = Frame::new(title, x, y);
    let max = counts.iter().flatten().copied().max().unwrap_or(1).max(1);
    // The class on a group: its colour for the cells, which keep `cell`.
    let _ = write!(f.out, r#"<g class="cells {class}">"#);
    for (i, col) in counts.iter().enumerate() {
        let (x0, x1) = (Frame::x(x, x_edges[i]), Frame::x(x, x_edges[i + 1]));
        for (j, &n) in col.iter().enumerate().filter(|(_, n)| **n > 0) {
            let (y0, y1) = (Frame::y(y, y_edges[j]), Frame::y(y, y_edges[j + 1]));
            let _ = write!(
                f.out,
                r#"<rect class="cell" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill-opacity="{:.2}"><title>{n} requests, {} to {}</title></rect>"#,
                x0,
                y1,
                (x1 - x0).max(0.5),
                (y0 - y1).max(0.5),
                shade(n, max),
                esc(&(y.tick)(y_edges[j])),
                esc(&(y.tick)(y_edges[j + 1]))
            );
        }
    }
    f.out.push_str("</g>");
    f.points(x, y, outliers, 2.6);
    f.colour_scale(class, max);
    f.end()
}

/// A cell's opacity: log shading, so that one request still shows.
fn shade(n: u64, max: u64) -> f64 {
    0.15 + 0.85 * (n as f64).ln_1p() / (max as f64).ln_1p()
}

/// Lines over a shared x axis: (name, class, points).
pub fn lines(title: &str, x: &Axis, y: &Axis, series: &[Series]) -> String {
    let mut f = Frame::new(title, x, y);
    for (name, class, pts) in series {
        let mut d = String::new();
        for (i, (vx, vy)) in pts.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1}",
                if i == 0 { "M" } else { " L" },
                Frame::x(x, *vx),
                Frame::y(y, *vy)
            );
        }
        let _ = write!(
            f.out,
            r#"<path class="line {class}" d="{d}"><title>{}</title></path>"#,
            esc(name)
        );
        for (vx, vy) in pts {
            let _ = write!(
                f.out,
                r#"<circle class="{class}" cx="{:.1}" cy="{:.1}" r="1.8"><title>{}: {} at {} s</title></circle>"#,
                Frame::x(x, *vx),
                Frame::y(y, *vy),
                esc(name),
                short(*vy),
                short(*vx)
            );
        }
    }
    let legend: Vec<(&str, &str)> = series.iter().map(|(n, c, _)| (*n, *c)).collect();
    f.legend(&legend);
    f.end()
}

/// A histogram's bucket: its label under the bar, its exact range on
/// hover, its count.
pub struct Bucket {
    pub tick: String,
    pub range: String,
    pub count: u64,
}

/// A histogram: one bar per bucket, every bucket labelled under it, its
/// count over it. The count axis is logarithmic: a bucket of one or two
/// outliers beside one of thousands still shows.
pub fn bars(title: &str, x_label: &str, y_label: &str, buckets: &[Bucket]) -> String {
    let n = buckets.len().max(1) as f64;
    let x = Axis {
        label: x_label,
        scale: Scale::Linear { min: 0.0, max: n },
        tick: |_| String::new(),
    };
    let top = buckets.iter().map(|b| b.count).max().unwrap_or(1).max(1) as f64;
    let y_label = format!("{y_label} (log scale)");
    let y = Axis {
        label: &y_label,
        // From just under 1, so that a count of 1 has a bar.
        scale: Scale::Log {
            min: 0.5,
            max: 10f64.powf(top.log10().ceil().max(1.0)),
        },
        tick: short,
    };
    let mut f = Frame::new(title, &x, &y);
    let step = (W - LEFT - RIGHT) / n;
    // Labels too wide for their bucket are turned to fit.
    let widest = buckets.iter().map(|b| b.tick.len()).max().unwrap_or(1) as f64;
    let turned = widest * 6.5 > step;
    for (i, b) in buckets.iter().enumerate() {
        let (label, count) = (&b.range, &b.count);
        let x0 = LEFT + i as f64 * step;
        if *count > 0 {
            let y0 = Frame::y(&y, *count as f64);
            let _ = write!(
                f.out,
                r#"<rect class="bar" x="{:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}"><title>{}: {count}</title></rect>"#,
                x0 + 1.0,
                (step - 2.0).max(0.5),
                (H - BOTTOM - y0).max(0.0),
                esc(label)
            );
            if step >= 24.0 {
                let _ = write!(
                    f.out,
                    r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                    x0 + step / 2.0,
                    y0 - 3.0,
                    esc(&short(*count as f64))
                );
            }
        }
        let (x, y) = (x0 + step / 2.0, H - BOTTOM + 14.0);
        if turned {
            let _ = write!(
                f.out,
                r#"<text class="tick" x="{x:.1}" y="{y}" text-anchor="end" transform="rotate(-45 {x:.1} {y})">{}</text>"#,
                esc(&b.tick)
            );
        } else {
            let _ = write!(
                f.out,
                r#"<text class="tick" x="{x:.1}" y="{y}" text-anchor="middle">{}</text>"#,
                esc(&b.tick)
            );
        }
    }
    f.end()
}

/// A bar of a timeline row, in the x axis' units.
pub struct Bar {
    pub from: f64,
    pub to: f64,
    pub class: &'static str,
    pub hover: String,
}

/// A colour's entry in a legend: its CSS class, its name, and what it
/// means (on hover).
pub struct Key<'a> {
    pub class: &'a str,
    pub name: &'a str,
    pub means: &'a str,
}

/// Rows of bars over one time axis (an operation's timeline across the
/// layers): each row labelled on the left, a key under the axis naming
/// every colour drawn.
pub fn timeline(title: &str, x: &Axis, rows: &[(String, Vec<Bar>)], key: &[Key]) -> String {
    const ROW: f64 = 22.0;
    const LABELS: f64 = 170.0;
    const KEY_LINE: f64 = 18.0;
    // The key's entries, laid out left to right, wrapping.
    let mut placed = Vec::new();
    let (mut kx, mut line) = (LABELS, 0usize);
    for k in key {
        let w = 26.0 + 6.1 * k.name.chars().count() as f64;
        if kx + w > W - RIGHT && kx > LABELS {
            kx = LABELS;
            line += 1;
        }
        placed.push((kx, line, k));
        kx += w;
    }
    let key_height = if key.is_empty() {
        0.0
    } else {
        KEY_LINE * (line + 1) as f64 + 4.0
    };
    let axis_bottom = TOP + BOTTOM + ROW * rows.len().max(1) as f64;
    let height = axis_bottom + key_height;
    let pw = W - LABELS - RIGHT;
    let at = |v: f64| LABELS + x.scale.at(v) * pw;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart" viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" aria-label="{t}"><text class="title" x="{LABELS}" y="16">{t}</text><rect class="plot" x="{LABELS}" y="{TOP}" width="{pw}" height="{ph}"/>"#,
        t = esc(title),
        ph = ROW * rows.len() as f64
    );
    for (t, label) in x.tick_labels() {
        let px = at(t);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{y2}"/><text class="tick" x="{px:.1}" y="{ty}" text-anchor="middle">{l}</text>"#,
            y2 = axis_bottom - BOTTOM,
            ty = axis_bottom - BOTTOM + 14.0,
            l = esc(&label)
        );
    }
    for (i, (label, bars)) in rows.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let _ = write!(
            out,
            r#"<text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            LABELS - 6.0,
            y + ROW / 2.0 + 4.0,
            esc(label)
        );
        for b in bars {
            let (x0, x1) = (at(b.from), at(b.to));
            let _ = write!(
                out,
                r#"<rect class="{}" x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>{}</title></rect>"#,
                b.class,
                y + 3.0,
                (x1 - x0).max(1.0),
                ROW - 6.0,
                esc(&b.hover)
            );
        }
    }
    let _ = write!(
        out,
        r#"<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LABELS + pw / 2.0,
        axis_bottom - 6.0,
        esc(x.label)
    );
    for (kx, line, k) in placed {
        let ky = axis_bottom + KEY_LINE * line as f64;
        let _ = write!(
            out,
            r#"<g class="key"><title>{n}: {m}</title><rect class="{c}" x="{kx:.1}" y="{ry:.1}" width="12" height="11"/><text class="tick" x="{tx:.1}" y="{ty:.1}">{n}</text></g>"#,
            n = esc(k.name),
            m = esc(k.means),
            c = k.class,
            ry = ky + 2.0,
            tx = kx + 15.0,
            ty = ky + 11.5
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_scales_span_whole_decades_and_ticks_read_well() {
        let s = Scale::log([0.03, 250.0].into_iter());
        assert!(
            matches!(s, Scale::Log { min, max } if (min - 0.01).abs() < 1e-12 && (max - 1000.0).abs() < 1e-9)
        );
        assert_eq!(s.ticks().len(), 6);
        assert_eq!(latency_ms(0.01), "10 µs");
        assert_eq!(latency_ms(250.0), "250 ms");
        assert_eq!(latency_ms(1500.0), "1.5 s");
        let l = Scale::linear([3.0, 97.0].into_iter());
        assert_eq!(l.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        // Ticks 0.0005 apart are labelled apart.
        let a = Axis {
            label: "",
            scale: Scale::Linear {
                min: 0.0,
                max: 0.0025,
            },
            tick: short,
        };
        let labels: Vec<String> = a.tick_labels().into_iter().map(|(_, l)| l).collect();
        assert_eq!(
            labels,
            ["0.0000", "0.0005", "0.0010", "0.0015", "0.0020", "0.0025"]
        );
    }

    #[test]
    fn trace_strings_are_text() {
        let x = Axis {
            label: "time (s)",
            scale: Scale::linear([0.0, 1.0].into_iter()),
            tick: short,
        };
        let svg = scatter(
            "<script>t</script>",
            &x,
            &x,
            &[Point {
                x: 0.5,
                y: 0.5,
                class: "read",
                hover: "<img src=x onerror=alert(1)>".into(),
            }],
            &[("\"a\"", "read")],
        );
        assert!(!svg.contains("<script>") && !svg.contains("<img"));
        assert!(svg.contains("&lt;img src=x onerror=alert(1)&gt;"));
    }
}

//! One self-contained HTML page for people to look at and share: the
//! findings on top, then per device every request's latency against time
//! (a heatmap with the slowest drawn over it when there are too many
//! points), queue depth, request size and iostat's columns over time,
//! latency histograms and btt's table; the scheduler's and interrupts'
//! views; flame graphs when the capture has stacks; and every figure of
//! the text report. Charts are SVG drawn here: no script of the page's
//! own, nothing fetched. Everything from the trace is escaped.

mod device;
mod diff;
mod operations;
pub mod svg;

pub use diff::{render as render_diff, Run as DiffRun};

use crate::analyze::histogram::Log2Hist;
use crate::analyze::Analysis;
use crate::diagnose::Finding;
use std::fmt::Write;

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
.coverage{border:1px dashed #999;background:#fafafa;margin:10px 0;padding:4px 12px;border-radius:3px;font-size:90%}
.sev{font-weight:700;text-transform:uppercase;font-size:12px;margin-right:6px}
.critical .sev{color:#c62828}.warning .sev{color:#b86e00}.info .sev{color:#1e6fd9}
pre{background:#f6f7f9;padding:8px;overflow:auto;font-size:12px;border-radius:3px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}td,th{border:1px solid #d8dce3;padding:3px 8px;text-align:right}
th{background:#eef0f4}td:first-child,th:first-child{text-align:left}
svg.chart{display:block;margin:8px 0;max-width:100%;height:auto}
svg .title{font-weight:600;font-size:13px;fill:#1d2330}svg .tick{font-size:11px;fill:#5a6170}svg .axis{font-size:12px;fill:#1d2330}
svg .plot{fill:#fff;stroke:#c9ced8}svg .grid{stroke:#eceef2}
svg .read{fill:#1e6fd9;stroke:#1e6fd9}svg .write{fill:#e0720b;stroke:#e0720b}svg .flush{fill:#7b3fb8;stroke:#7b3fb8}svg .discard{fill:#2e8b57;stroke:#2e8b57}
svg .other{fill:#5a6170;stroke:#5a6170}svg .slow{fill:#c62828;stroke:#fff;stroke-width:0.7}svg .bar{fill:#1e6fd9}
svg g.cells{stroke:none}svg g.cells .cell,svg g.cells .scale{fill:inherit}
svg .line{fill:none;stroke-width:1.6}
svg .on_cpu{fill:#2e8b57}svg .runnable{fill:#c62828}svg .device{fill:#e0720b}svg .journal_space{fill:#7b3fb8}
svg .queued{fill:#d9a400}svg .journal{fill:#1e6fd9}svg .other_wait{fill:#9aa1ad}svg .asleep{fill:#cfd3da}svg .not_recorded{fill:#e3e5e8;stroke:#9aa1ad;stroke-dasharray:2 2}svg .span{fill:#5a6170}svg .main{fill:#7a1010}
p.stack{font-size:13px;color:#3a4150;margin-top:-4px}p.stack code{font-size:12px;background:#f6f7f9;padding:1px 3px;line-height:1.7}.note{background:#fff8e6;border-left:4px solid #ef8f00;padding:6px 10px}
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
    findings_section(&mut body, a, findings);
    warnings_section(&mut body, &a.warnings);
    operations::section(&mut body, a);
    let (shown, rest) =
        crate::report::busiest_devices(&a.block.devices, crate::report::DEVICES_SHOWN);
    for d in shown {
        device::section(&mut body, d, crate::report::origin_ns(a), a.light.is_some());
    }
    if let Some(line) = crate::report::not_shown_line(&rest, crate::report::DEVICES_SHOWN) {
        let _ = write!(body, "<p class=\"sub\">{}</p>", esc(&line));
    }
    scheduler_section(&mut body, a);
    flame_section(&mut body, a);
    let _ = write!(
        body,
        "<h2>Every figure</h2><details><summary>The text report (layers, slow operations and their stacks, settings)</summary><pre>{}</pre></details>",
        esc(&crate::report::text::render(a, findings))
    );
    page("iosleuth report", &body)
}

pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head><body>\n{body}\n<p class=\"sub\">Made by iosleuth {}.</p></body></html>\n",
        esc(title),
        env!("CARGO_PKG_VERSION")
    )
}

fn findings_section(body: &mut String, a: &Analysis, findings: &[Finding]) {
    body.push_str("<h2>Findings</h2>");
    let coverage = crate::diagnose::coverage(a, findings);
    if findings.is_empty() && coverage.judged.is_empty() {
        body.push_str("<p>No rule could judge this input.</p>");
    } else {
        findings_section_inner(body, findings);
    }
    coverage_box(body, &coverage);
}

/// Which rules the input let judge; the others and what each lacked.
fn coverage_box(body: &mut String, c: &crate::diagnose::Coverage) {
    let total = c.judged.len() + c.not_judged.len();
    let _ = write!(
        body,
        "<div class=\"coverage\"><p>{} of {total} rules judged this input",
        c.judged.len()
    );
    if c.not_judged.is_empty() {
        body.push_str(".</p></div>");
        return;
    }
    let _ = write!(body, "; {} could not:</p><ul>", c.not_judged.len());
    for n in &c.not_judged {
        let _ = write!(body, "<li><b>{}</b>: {}</li>", esc(n.id), esc(&n.lacks));
    }
    body.push_str("</ul>");
    if let Some(r) = &c.record {
        let _ = write!(body, "<p>To judge them: <code>{}</code></p>", esc(r));
    }
    body.push_str("</div>");
}

pub(crate) fn findings_section_inner(body: &mut String, findings: &[Finding]) {
    if findings.is_empty() {
        body.push_str("<p>No rule that judged fired.</p>");
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

/// A log2 histogram's buckets as bars: `low-high` and the count.
/// bcc's slots as bars: each labelled by its low bound in binary units
/// (`64Ki` is 65536: the bounds are powers of two, not of ten), its exact
/// range on hover.
fn log2_buckets(h: &Log2Hist) -> Vec<svg::Bucket> {
    h.rows()
        .into_iter()
        .map(|(lo, hi, count)| svg::Bucket {
            tick: binary(lo),
            range: format!("{lo}-{hi}"),
            count,
        })
        .collect()
}

/// A power of two (or 0) in binary units: 512, 1Ki, 64Ki, 2Mi.
fn binary(v: u64) -> String {
    match v {
        v if v >= 1 << 30 && v % (1 << 30) == 0 => format!("{}Gi", v >> 30),
        v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{}Mi", v >> 20),
        v if v >= 1 << 10 && v % (1 << 10) == 0 => format!("{}Ki", v >> 10),
        v => v.to_string(),
    }
}

fn scheduler_section(body: &mut String, a: &Analysis) {
    let rows = log2_buckets(&a.sched.runqlat_us);
    let softirq = &a.irq.softirq;
    if rows.is_empty() && softirq.is_empty() {
        return;
    }
    body.push_str("<h2>Scheduler and interrupts</h2>");
    if !rows.is_empty() {
        body.push_str(&svg::bars(
            "run-queue latency (wakeup → running), like runqlat",
            "µs (log2 buckets, each from its low bound to twice it; Ki = 1024)",
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
    use crate::report::flamegraph::{off_cpu_svg, on_cpu_svg, on_cpu_unit};
    let on_title = format!("On CPU: where the CPUs ran ({})", on_cpu_unit(a).count_name);
    let graphs = [
        (
            on_title.as_str(),
            a.stacks.samples > 0,
            on_cpu_svg as fn(&Analysis, &str) -> std::io::Result<Vec<u8>>,
        ),
        (
            "Off CPU: where threads blocked (µs)",
            a.stacks.off_cpu_ns > 0,
            off_cpu_svg,
        ),
    ];
    if graphs.iter().all(|g| !g.1) {
        return;
    }
    body.push_str("<h2>Flame graphs</h2>");
    if a.stacks.samples > 0 {
        if let Some(note) = crate::report::flamegraph::unresolved_kernel_note(a) {
            let _ = write!(body, "<p class=\"note\">{}</p>", esc(&note));
        }
    }
    for (title, present, draw) in graphs {
        if !present {
            continue;
        }
        if let Ok(svg) = draw(a, "") {
            flame_frame(body, title, &svg);
        }
    }
}

/// A flame graph in a sandboxed frame of its own, under its title.
pub(crate) fn flame_frame(body: &mut String, title: &str, svg: &[u8]) {
    // A fixed width: inferno's fluid drawing sizes the graph from its
    // frame's width when its script runs, which a frame not laid out yet
    // (below the fold) reports as 0.
    let svg = String::from_utf8_lossy(svg).replacen(
        "var fluiddrawing = true;",
        "var fluiddrawing = false;",
        1,
    );
    let _ = write!(
        body,
        "<h3>{}</h3><iframe class=\"flame\" sandbox=\"allow-scripts\" title=\"{}\" src=\"data:image/svg+xml;base64,{}\"></iframe>",
        esc(title),
        esc(title),
        base64(svg.as_bytes())
    );
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

//! Flame graphs as interactive SVG (search, zoom, a title per frame, like
//! flamegraph.pl), drawn by the inferno crate from the folded stacks.
//! Frame names, comms and file names are anyone's text: their control
//! characters are escaped (`\x1b`) before inferno draws them, since XML
//! allows no C0 control and a browser refuses an SVG that holds one.

use super::folded::{off_cpu_lines, on_cpu_lines};
use crate::analyze::stacks::SCHEDULER_FRAMES;
use crate::analyze::Analysis;
use crate::report::escape;
use inferno::flamegraph::{self, color::BasicPalette, Options, Palette};

/// Draws folded lines (`stack COUNT`, or `stack BEFORE AFTER` for a
/// differential graph).
fn draw<'a>(
    title: &str,
    subtitle: &str,
    count_name: &str,
    palette: Option<Palette>,
    lines: impl IntoIterator<Item = &'a str>,
) -> std::io::Result<Vec<u8>> {
    let mut opts = Options::default();
    opts.title = title.into();
    opts.subtitle = Some(escape(subtitle).into());
    opts.count_name = count_name.into();
    if let Some(p) = palette {
        opts.colors = p;
    }
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut opts, lines, &mut svg).map_err(std::io::Error::other)?;
    Ok(svg)
}

/// The on-CPU flame graph: frame widths are samples, in the "hot"
/// palette of flamegraph.pl.
pub fn on_cpu_svg(a: &Analysis, subtitle: &str) -> std::io::Result<Vec<u8>> {
    let lines: Vec<String> = on_cpu_lines(a)
        .map(|(s, n)| format!("{} {n}", escape(s)))
        .collect();
    draw(
        "Flame Graph",
        subtitle,
        "samples",
        None,
        lines.iter().map(String::as_str),
    )
}

/// The off-CPU flame graph: frame widths are blocked time (µs), in the
/// blue "io" palette flamegraph.pl uses for off-CPU graphs.
pub fn off_cpu_svg(a: &Analysis, subtitle: &str) -> std::io::Result<Vec<u8>> {
    let lines: Vec<String> = off_cpu_lines(a)
        .map(|(s, us)| format!("{} {us}", escape(s)))
        .collect();
    draw(
        "Off-CPU Time Flame Graph",
        subtitle,
        "us",
        Some(Palette::Basic(BasicPalette::Io)),
        lines.iter().map(String::as_str),
    )
}

/// A folded stack without the scheduler frames at its inner end. A
/// differential flame graph colours only the frame a stack ends in
/// (difffolded.pl and inferno alike): with every stack ending in
/// `__schedule`, nothing else would show its change. Cut there, the frame
/// that waited (add_transaction_credits, jbd2_log_wait_commit) ends it.
fn without_scheduler_leaf(stack: &str) -> String {
    let mut frames: Vec<&str> = stack.split(';').collect();
    while frames.len() > 2 && frames.last().is_some_and(|f| SCHEDULER_FRAMES.contains(f)) {
        frames.pop();
    }
    frames.join(";")
}

/// The differential off-CPU flame graph, as difffolded.pl + flamegraph.pl
/// draw it: the candidate's stacks, red where a frame's blocked time grew
/// against the baseline, blue where it shrank. The baseline is scaled to
/// the candidate's total first (difffolded -n), so that colours show the
/// change of shape, not of length. Several runs a side add up. The
/// scheduler's frames are cut from the inner end (see
/// [`without_scheduler_leaf`]).
pub fn differential_off_cpu_svg(
    base: &[&Analysis],
    cand: &[&Analysis],
    subtitle: &str,
) -> std::io::Result<Vec<u8>> {
    let folded = |side: &[&Analysis]| -> Vec<u8> {
        let mut text = String::new();
        for a in side {
            for (stack, us) in off_cpu_lines(a) {
                let stack = without_scheduler_leaf(stack);
                text.push_str(&format!("{} {us}\n", escape(&stack)));
            }
        }
        text.into_bytes()
    };
    let mut lines = Vec::new();
    let opts = inferno::differential::Options {
        normalize: true,
        strip_hex: false,
    };
    inferno::differential::from_readers(opts, &folded(base)[..], &folded(cand)[..], &mut lines)?;
    let text = String::from_utf8_lossy(&lines);
    draw(
        "Differential Off-CPU Flame Graph",
        subtitle,
        "us",
        None,
        text.lines(),
    )
}

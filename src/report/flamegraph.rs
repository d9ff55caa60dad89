//! Flame graphs as interactive SVG (search, zoom, a title per frame, like
//! flamegraph.pl), drawn by the inferno crate from the folded stacks.

use crate::analyze::Analysis;
use inferno::flamegraph::{self, color::BasicPalette, Options, Palette};

/// The off-CPU flame graph: frame widths are blocked time (µs), in the
/// blue "io" palette flamegraph.pl uses for off-CPU graphs.
pub fn off_cpu_svg(a: &Analysis, subtitle: &str) -> std::io::Result<Vec<u8>> {
    let lines: Vec<String> = a
        .stacks
        .off_cpu
        .iter()
        .filter(|(_, ns)| *ns >= 1000)
        .map(|(stack, ns)| format!("{stack} {}", ns / 1000))
        .collect();
    let mut opts = Options::default();
    opts.title = "Off-CPU Time Flame Graph".into();
    opts.subtitle = Some(subtitle.into());
    opts.count_name = "us".into();
    opts.colors = Palette::Basic(BasicPalette::Io);
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut svg)
        .map_err(std::io::Error::other)?;
    Ok(svg)
}

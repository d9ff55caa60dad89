//! Output: text for people, JSON for programs, pages, flame graphs, and
//! files for the tools people already use (blktrace, Parquet, Perfetto).
//! One file per format; [`Format`] is the registry of what `--format`
//! writes. The exporters (`parquet`, `perfetto`) are row writers that the
//! pipeline drives (`pipeline::analyze_writing`); nothing here runs an
//! analysis.

pub mod blktrace;
pub mod diff_text;
pub mod dump;
pub mod escape;
pub mod flamegraph;
pub mod folded;
pub mod html;
pub mod json;
pub mod output_file;
pub mod parquet;
pub mod perfetto;
pub mod prometheus;
pub mod text;

use crate::analyze::block::DeviceSummary;
use crate::analyze::Analysis;
use crate::compare::Diff;
use crate::diagnose::Finding;
pub use escape::{escape, Esc};

/// Devices the text and HTML reports show each in full: the busiest;
/// the rest are one line (20,000 devices made a 301 MB page).
pub const DEVICES_SHOWN: usize = 64;
/// Devices the JSON report lists; the rest are counted in
/// `all_devices.not_listed`.
pub const DEVICES_LISTED: usize = 1024;

/// What the devices left out of a report add up to.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct NotListed {
    pub devices: usize,
    pub requests_completed: u64,
}

/// The `n` busiest of `devices` (most requests completed, then most bios
/// queued), in their order, and what the others add up to.
pub fn busiest_devices(devices: &[DeviceSummary], n: usize) -> (Vec<&DeviceSummary>, NotListed) {
    if devices.len() <= n {
        return (devices.iter().collect(), NotListed::default());
    }
    let busy = |d: &DeviceSummary| (d.completed.total(), d.actions.queued);
    let mut order: Vec<usize> = (0..devices.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(busy(&devices[i])));
    let (kept, rest) = order.split_at_mut(n);
    kept.sort_unstable();
    let requests_completed = rest
        .iter()
        .map(|&i| devices[i].completed.total())
        .fold(0, u64::saturating_add);
    (
        kept.iter().map(|&i| &devices[i]).collect(),
        NotListed {
            devices: rest.len(),
            requests_completed,
        },
    )
}

/// The origin of the times outputs print: the whole input's first event
/// (what `--time` counts from), else the analyzed events' first.
pub fn origin_ns(a: &Analysis) -> u64 {
    match a.trace_start_ns {
        None => a.span.first_ns,
        Some(t) => t.min(a.span.first_ns),
    }
}

/// The line that stands for the devices a report does not show.
pub fn not_shown_line(rest: &NotListed, shown: usize) -> Option<String> {
    (rest.devices > 0).then(|| {
        format!(
            "… and {} more devices ({} requests completed), not shown: the {shown} busiest are; `--format json` lists {DEVICES_LISTED}",
            rest.devices, rest.requests_completed
        )
    })
}

/// Every format an analysis is written in, known in one place: its name
/// (`--format`), which commands write it, whether it suits a terminal,
/// and its renderer of a report (one capture's analysis and findings) and
/// of a diff. A new format is a variant here, its arms below and a file
/// beside text.rs and json.rs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    // No doc comments: clap would turn them into a longer --help.
    // For people: findings first, then every layer.
    Text,
    // For programs: one object with stable top-level keys (docs/FORMATS.md).
    Json,
    // Folded stacks for flame graphs (FlameGraph, inferno, speedscope).
    Folded,
    // One self-contained page: findings, plots, flame graphs (-o FILE).
    Html,
}

/// The commands that take `--format`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Report,
    Diff,
    Dump,
}

impl Format {
    /// Whether `command` writes this format.
    pub const fn written_by(self, command: Command) -> bool {
        match self {
            Format::Text | Format::Json => true,
            Format::Folded => matches!(command, Command::Report),
            Format::Html => matches!(command, Command::Report | Command::Diff),
        }
    }

    /// A page for a browser, not for a terminal: written to a file (`-o`)
    /// or a pipe, never printed on a terminal.
    pub const fn for_terminal(self) -> bool {
        !matches!(self, Format::Html)
    }

    /// `--format`'s parser for `command`: it offers (and `--help` lists)
    /// only the formats that command writes.
    pub fn parser(command: Command) -> impl clap::builder::TypedValueParser<Value = Format> {
        use clap::builder::TypedValueParser;
        use clap::ValueEnum;
        let offered: Vec<clap::builder::PossibleValue> = Format::value_variants()
            .iter()
            .filter(|f| f.written_by(command))
            .filter_map(|f| f.to_possible_value())
            .collect();
        clap::builder::PossibleValuesParser::new(offered)
            .map(|name: String| Format::from_str(&name, false).expect("one of the offered names"))
    }

    /// One capture's report; `off_cpu` picks the blocked-time stacks for
    /// `folded`.
    pub fn report(self, a: &Analysis, findings: &[Finding], off_cpu: bool) -> String {
        match self {
            Format::Text => text::render(a, findings),
            Format::Json => json::render(a, findings),
            Format::Folded if off_cpu => folded::text(folded::off_cpu_lines(a)),
            Format::Folded => folded::text(folded::on_cpu_lines(a)),
            Format::Html => html::render(a, findings),
        }
    }

    /// Two sides of runs compared (each side's runs for the page's plots);
    /// `None` for a format `diff` does not write.
    pub fn diff(self, d: &Diff, base: &[html::DiffRun], cand: &[html::DiffRun]) -> Option<String> {
        match self {
            Format::Text => Some(diff_text::render(d)),
            Format::Json => Some(json::diff(d)),
            Format::Html => Some(html::render_diff(d, base, cand)),
            Format::Folded => None,
        }
    }
}

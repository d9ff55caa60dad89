//! Output: text for people, JSON for programs, blktrace files for the tools
//! people already use. One file per format; [`Format`] picks the renderer
//! of a report (one capture's analysis and findings) or of a diff.
//! A new format is a variant here and a file beside text.rs and json.rs.

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

/// The line that stands for the devices a report does not show.
pub fn not_shown_line(rest: &NotListed, shown: usize) -> Option<String> {
    (rest.devices > 0).then(|| {
        format!(
            "… and {} more devices ({} requests completed), not shown: the {shown} busiest are; `--format json` lists {DEVICES_LISTED}",
            rest.devices, rest.requests_completed
        )
    })
}

/// The formats of `report`, `diff` and `dump` (`--format`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    // For people: findings first, then every layer (no doc comment:
    // clap would turn it into a longer --help).
    Text,
    // For programs: one object with stable top-level keys (README).
    Json,
}

impl Format {
    /// One capture's report.
    pub fn report(self, a: &Analysis, findings: &[Finding]) -> String {
        match self {
            Format::Text => text::render(a, findings),
            Format::Json => json::render(a, findings),
        }
    }

    /// Two sides of runs compared.
    pub fn diff(self, d: &Diff) -> String {
        match self {
            Format::Text => diff_text::render(d),
            Format::Json => json::diff(d),
        }
    }
}

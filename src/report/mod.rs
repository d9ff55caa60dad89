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

use crate::analyze::Analysis;
use crate::compare::Diff;
use crate::diagnose::Finding;
pub use escape::{escape, Esc};

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

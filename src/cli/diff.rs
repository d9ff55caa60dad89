//! `iosleuth diff GOOD BAD` (or `GOOD... -- BAD...`): figures, settings
//! and findings side by side, and a verdict.

use super::args::SidesArgs;
use crate::error::{ExitStatus, Result};
use crate::pipeline::{self, Options, Run};
use crate::report::Format;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    sides: SidesArgs,
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// Each run analysed and diagnosed on its own; its warnings said.
fn runs(paths: &[PathBuf]) -> Result<Vec<Run>> {
    paths
        .iter()
        .map(|p| {
            let r = pipeline::diagnosed(p, &Options::default())?;
            for w in &r.analysis.warnings {
                super::warn(w);
            }
            Ok(r)
        })
        .collect()
}

pub fn run(args: DiffArgs) -> Result<ExitStatus> {
    let (base, cand) = args.sides.split("diff")?;
    let (base, cand) = super::args::both(runs(&base), runs(&cand))?;
    for w in pipeline::comparison_warnings(&sides(&base), &sides(&cand)) {
        super::warn(&w);
    }
    let d = crate::compare::diff_runs(&pairs(&base), &pairs(&cand));
    std::io::stdout()
        .lock()
        .write_all(args.format.diff(&d).as_bytes())?;
    Ok(ExitStatus::SUCCESS)
}

/// What compare takes: each run's analysis with its findings.
pub fn pairs(runs: &[Run]) -> Vec<(&crate::analyze::Analysis, &[crate::diagnose::Finding])> {
    runs.iter()
        .map(|r| (&r.analysis, r.findings.as_slice()))
        .collect()
}

/// What [`pipeline::comparison_warnings`] takes: each run's analysis with
/// what its inputs were.
fn sides(runs: &[Run]) -> Vec<(&crate::analyze::Analysis, &pipeline::Inputs)> {
    runs.iter().map(|r| (&r.analysis, &r.inputs)).collect()
}

//! `iosleuth check GOOD BAD` (or `GOOD... -- BAD...`): exit 0 when the
//! candidate is no worse, 1 when it regressed, 125 when it cannot tell —
//! what `git bisect run` expects.

use super::args::SidesArgs;
use crate::analyze::{Analysis, Filter};
use crate::compare::Check;
use crate::error::{Error, ExitStatus, Result};
use crate::pipeline::Options;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    sides: SidesArgs,
    /// A figure of `iosleuth diff` (default: the first probe's p99, else
    /// the first device's D2C p99).
    #[arg(long)]
    metric: Option<String>,
    /// How much worse, in percent, counts as a regression.
    #[arg(long, default_value = "10")]
    threshold: f64,
}

/// The headline figures need no outlier breakdowns (top 0), the costliest
/// analysis with many threads.
fn analyses(paths: &[PathBuf]) -> Result<Vec<Analysis>> {
    let opts = Options {
        filter: Filter::default(),
        interval_s: 1.0,
    };
    paths
        .iter()
        .map(|p| crate::pipeline::analyse(std::slice::from_ref(p), &opts))
        .collect()
}

pub fn run(args: CheckArgs) -> Result<ExitStatus> {
    // Unusable input is "cannot tell" (125) for git bisect, not a failure.
    let said = |e: Error| -> Result<ExitStatus> {
        if e.is_quiet() {
            return Err(e);
        }
        let msg = e.to_string();
        eprintln!("iosleuth: {}", crate::report::escape::escape_lines(&msg));
        Ok(ExitStatus::CANNOT_TELL)
    };
    let (base, cand) = match args.sides.split("check") {
        Ok(s) => s,
        Err(e) => return said(e),
    };
    let (a, b) = match super::args::both(analyses(&base), analyses(&cand)) {
        Ok(x) => x,
        Err(e) => return said(e),
    };
    let (a, b): (Vec<&Analysis>, Vec<&Analysis>) = (a.iter().collect(), b.iter().collect());
    let (status, line) =
        match crate::compare::check_runs(&a, &b, args.metric.as_deref(), args.threshold) {
            Check::Good(l) => (ExitStatus::SUCCESS, format!("good: {l}")),
            Check::Regressed(l) => (ExitStatus::REGRESSED, format!("regressed: {l}")),
            Check::CannotTell(why) => (ExitStatus::CANNOT_TELL, format!("cannot tell: {why}")),
        };
    writeln!(std::io::stdout().lock(), "{}", crate::report::escape(&line))?;
    Ok(status)
}

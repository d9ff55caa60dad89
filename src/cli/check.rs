//! `iosleuth check GOOD BAD` (or `GOOD... -- BAD...`): exit 0 when the
//! candidate is no worse, 1 when it regressed, 125 when it cannot tell —
//! what `git bisect run` expects — and 128 when called wrongly, which
//! aborts the bisect ([`ExitStatus::CHECK_USAGE`]).

use super::args::SidesArgs;
use crate::analyze::Analysis;
use crate::compare::Check;
use crate::error::{Error, ExitStatus, Result};
use crate::pipeline::{Inputs, Options, Run};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    sides: SidesArgs,
    /// Judge by this figure of `iosleuth diff` alone, by id:
    /// workload.ms_per_op, probe.OP.p99_ms, dev.MAJ,MIN.d2c.p99_ms, …
    /// (docs/report.md). Default: a critical finding new in the candidate,
    /// else the workload's time per operation and first probe p99, else
    /// (no operations) the first device's Q2C p99. An unknown one exits 128.
    #[arg(long, value_parser = parse_metric)]
    metric: Option<(String, bool)>,
    /// How much worse, in percent, counts as a regression (a number of 0
    /// or more).
    #[arg(long, default_value_t = crate::compare::DEFAULT_THRESHOLD_PCT, value_parser = parse_threshold)]
    threshold: f64,
    #[command(flatten)]
    input: super::args::InputArgs,
}

/// A metric id, or an old label with spaces (`true`: said with a
/// warning); anything else is a usage error listing the ids (128).
fn parse_metric(s: &str) -> std::result::Result<(String, bool), String> {
    crate::compare::metrics::parse(s)
}

/// A percentage of 0 or more. NaN compares false with everything (a
/// +15,000 % regression would be "no worse"), an infinite one never fires
/// and a negative one fires on an improvement: all refused.
fn parse_threshold(s: &str) -> std::result::Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("not a number: {s:?}"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!(
            "expected a percentage of 0 or more, such as 10; got {s:?}"
        ));
    }
    Ok(v)
}

/// Each run analysed and diagnosed, as `diff` reads it: `check` judges
/// by the same rule, so the two give the same verdict.
fn runs(paths: &[PathBuf]) -> Result<Vec<Run>> {
    let opts = Options::default();
    paths
        .iter()
        .map(|p| crate::pipeline::diagnosed(p, &opts))
        .collect()
}

/// What `comparison_warnings` takes.
fn sides(runs: &[Run]) -> Vec<(&Analysis, &Inputs)> {
    runs.iter().map(|r| (&r.analysis, &r.inputs)).collect()
}

pub fn run(args: CheckArgs) -> Result<ExitStatus> {
    args.input.apply();
    // Unusable input is "cannot tell" (125) for git bisect, not a failure.
    let said = |e: Error| -> Result<ExitStatus> {
        if e.is_quiet() {
            return Err(e);
        }
        let msg = e.to_string();
        eprintln!("iosleuth: {}", crate::report::escape::escape_lines(&msg));
        Ok(ExitStatus::CANNOT_TELL)
    };
    // A wrong number of paths is a usage error: it must abort a bisect,
    // not skip (125) or fail (2, "bad") every commit.
    let (base, cand) = args
        .sides
        .split("check")
        .map_err(|e| Error::CheckUsage(Some(e.to_string())))?;
    let metric = args.metric.map(|(id, old)| {
        if old {
            super::warn(&format!(
                "--metric: a figure's old name with spaces; its id is {id}"
            ));
        }
        id
    });
    let (a, b) = match super::args::both(runs(&base), runs(&cand)) {
        Ok(x) => x,
        Err(e) => return said(e),
    };
    for w in crate::pipeline::comparison_warnings(&sides(&a), &sides(&b)) {
        super::warn(&w);
    }
    let d = crate::compare::diff_runs(&super::diff::pairs(&a), &super::diff::pairs(&b));
    let (status, line) = match d.judged(metric.as_deref(), args.threshold) {
        Check::Good(l) => (ExitStatus::SUCCESS, format!("good: {l}")),
        Check::Regressed(l) => (ExitStatus::REGRESSED, format!("regressed: {l}")),
        Check::CannotTell(why) => (ExitStatus::CANNOT_TELL, format!("cannot tell: {why}")),
    };
    writeln!(std::io::stdout().lock(), "{}", crate::report::escape(&line))?;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        assert_eq!(parse_threshold("10"), Ok(10.0));
        assert_eq!(parse_threshold("0"), Ok(0.0));
        assert_eq!(parse_threshold("2.5"), Ok(2.5));
        for bad in [
            "NaN", "nan", "inf", "-inf", "infinity", "-1", "-0.5", "x", "",
        ] {
            assert!(parse_threshold(bad).is_err(), "{bad}");
        }
    }
}

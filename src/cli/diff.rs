//! `iosleuth diff GOOD BAD` (or `GOOD... -- BAD...`): figures, settings
//! and findings side by side, and a verdict.

use super::args::SidesArgs;
use crate::error::{Error, ExitStatus, Result};
use crate::pipeline::{self, Options, Run};
use crate::report::output_file::{Destination, NotForTerminal};
use crate::report::{Command, Format};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    sides: SidesArgs,
    /// text: a table of figures and the verdict; json: the same for
    /// programs; html: one page for a browser (with -o FILE).
    #[arg(long, value_parser = Format::parser(Command::Diff), default_value = "text")]
    format: Format,
    /// Write the diff to this file rather than to standard output (`-`:
    /// standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Also write a differential off-CPU flame graph (red: blocked time
    /// grew, blue: shrank) of captures recorded with --stacks.
    #[arg(long, value_name = "SVG")]
    flamegraph: Option<PathBuf>,
    /// Kernel functions whose latency to compare (see `report --func`);
    /// captures recorded with --func compare theirs without this.
    #[arg(long = "func", value_delimiter = ',', value_name = "FUNCTIONS")]
    functions: Vec<String>,
    #[command(flatten)]
    input: super::args::InputArgs,
}

/// Each run analyzed and diagnosed on its own; its warnings said.
fn runs(paths: &[PathBuf], opts: &Options) -> Result<Vec<Run>> {
    paths
        .iter()
        .map(|p| {
            let r = pipeline::diagnosed(p, opts)?;
            for w in &r.analysis.warnings {
                super::warn(w);
            }
            Ok(r)
        })
        .collect()
}

pub fn run(args: DiffArgs) -> Result<ExitStatus> {
    args.input.apply();
    let (base_paths, cand_paths) = args.sides.split("diff")?;
    let inputs: Vec<PathBuf> = base_paths.iter().chain(&cand_paths).cloned().collect();
    let output = Destination::check(
        args.output.as_deref(),
        &inputs,
        "diff",
        super::page(args.format, "-o diff.html"),
    )?;
    let svg = NotForTerminal {
        what: "SVG",
        instead: "--flamegraph diff.svg",
    };
    let svg_output = args
        .flamegraph
        .as_deref()
        .map(|f| Destination::check(Some(f), &inputs, "diff --flamegraph", Some(svg)))
        .transpose()?;
    if matches!(
        (&output, &svg_output),
        (Destination::Stdout, Some(Destination::Stdout))
    ) {
        return Err(Error::bad_input(
            "--flamegraph - and the diff would both go to standard output: give -o FILE for the diff",
        ));
    }
    let mut opts = Options::default();
    opts.filter.functions = args.functions.clone();
    opts.request_timeline = args.format == Format::Html;
    let (base, cand) = super::args::both(runs(&base_paths, &opts), runs(&cand_paths, &opts))?;
    for w in pipeline::comparison_warnings(&sides(&base), &sides(&cand)) {
        super::warn(&w);
    }
    let d = crate::compare::diff_runs(&pairs(&base), &pairs(&cand));
    if let Some(svg) = &svg_output {
        let paths: Vec<&PathBuf> = base_paths.iter().chain(&cand_paths).collect();
        differential_flamegraph(svg, &base, &cand, &paths)?;
    }
    let out = args
        .format
        .diff(&d, &html_side(&base), &html_side(&cand))
        .ok_or_else(|| Error::bad_input("diff writes text, json or html"))?;
    super::write_output(&output, &out)?;
    Ok(ExitStatus::SUCCESS)
}

/// A side's runs for the HTML page: each analysis with the findings
/// already diagnosed from it.
fn html_side(runs: &[Run]) -> Vec<crate::report::html::DiffRun<'_>> {
    runs.iter()
        .map(|r| crate::report::html::DiffRun {
            analysis: &r.analysis,
            findings: &r.findings,
        })
        .collect()
}

/// `--flamegraph SVG`: refused when a side has no stacks.
fn differential_flamegraph(
    svg: &Destination,
    base: &[Run],
    cand: &[Run],
    paths: &[&PathBuf],
) -> Result<()> {
    let b: Vec<&crate::analyze::Analysis> = base.iter().map(|r| &r.analysis).collect();
    let c: Vec<&crate::analyze::Analysis> = cand.iter().map(|r| &r.analysis).collect();
    if let Some((_, p)) = base
        .iter()
        .chain(cand)
        .zip(paths)
        .find(|(r, _)| r.analysis.stacks.off_cpu_ns == 0)
    {
        return Err(Error::bad_input(format!(
            "{}: no kernel stacks for a flame graph (record with `iosleuth record --stacks`)",
            p.display()
        )));
    }
    let drawn = crate::report::flamegraph::differential_off_cpu_svg(
        &b,
        &c,
        "red: blocked longer in the candidate, blue: shorter (baseline scaled to the candidate's total)",
    );
    super::stacks::write_svg(svg, drawn)
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

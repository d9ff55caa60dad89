//! `iosleuth report`: every layer's figures and the findings, or
//! `--explain` what each rule found and why the others did not fire.

use super::args::{FilterArgs, InputArgs};
use crate::analyze::Analysis;
use crate::diagnose::{catalog, Verdict};
use crate::error::{Error, ExitStatus, Result};
use crate::report::output_file::OutputFile;
use crate::report::{self, Format};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Trace files, directories of blktrace files, captures, or `-` for
    /// standard input.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    format: ReportFormat,
    /// Write the report to this file rather than to standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// With --format folded: blocked (off-CPU) time per kernel stack, in
    /// microseconds, from a capture recorded with --stacks.
    #[arg(long)]
    off_cpu: bool,
    /// With --func: each function's latency by thread too (funclatency -P).
    #[arg(long)]
    by_process: bool,
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    input: InputArgs,
    /// Say what rule ID (or `all`) found, or why it did not fire.
    #[arg(long, value_name = "ID")]
    explain: Option<String>,
}

/// What `report` prints.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ReportFormat {
    Text,
    Json,
    // Folded stacks for flame graphs (FlameGraph, inferno, speedscope).
    Folded,
    // One self-contained page: findings, plots, flame graphs (-o FILE).
    Html,
}

pub fn run(args: ReportArgs) -> Result<ExitStatus> {
    if args.off_cpu && args.format != ReportFormat::Folded {
        return Err(Error::bad_input(
            "--off-cpu goes with --format folded (or `iosleuth flamegraph --off-cpu`)",
        ));
    }
    let output = output_file(args.output.as_deref(), &args.paths, &args.filter)?;
    args.input.apply();
    let mut opts = args.filter.options()?;
    opts.request_timeline = args.format == ReportFormat::Html;
    let mut a = crate::pipeline::analyse(&args.paths, &opts)?;
    if !args.by_process {
        for f in &mut a.functions {
            f.by_process.clear();
        }
    }
    for w in &a.warnings {
        super::warn(w);
    }
    let out = match (&args.explain, args.format) {
        (Some(id), _) => explain(&a, id)?,
        (None, ReportFormat::Folded) => folded(&a, &args.paths, args.off_cpu)?,
        (None, ReportFormat::Html) => report::html::render(&a, &crate::diagnose::diagnose(&a)),
        (None, f) => {
            let found = crate::diagnose::diagnose(&a);
            let f = if f == ReportFormat::Json {
                Format::Json
            } else {
                Format::Text
            };
            f.report(&a, &found)
        }
    };
    super::write_output(output.as_ref(), &out)?;
    Ok(ExitStatus::SUCCESS)
}

/// `-o FILE`, checked before the work against the trace files and the
/// `--kallsyms` file read.
fn output_file(
    output: Option<&std::path::Path>,
    paths: &[PathBuf],
    filter: &FilterArgs,
) -> Result<Option<OutputFile>> {
    let inputs: Vec<PathBuf> = paths.iter().chain(&filter.kallsyms).cloned().collect();
    output.map(|o| OutputFile::check(o, &inputs)).transpose()
}

/// `--explain ID|all`: each rule's finding, or why it did not fire.
fn explain(a: &Analysis, id: &str) -> Result<String> {
    let rules: Vec<_> = catalog()
        .iter()
        .filter(|r| id == "all" || r.id == id)
        .collect();
    if rules.is_empty() {
        let ids: Vec<&str> = catalog().iter().map(|r| r.id).collect();
        return Err(Error::bad_input(format!(
            "no rule {id:?}; the rules are: {}",
            ids.join(", ")
        )));
    }
    let mut out = String::new();
    for r in rules {
        match crate::diagnose::verdict(a, r) {
            Verdict::Fired(f) => report::text::finding(&mut out, &f),
            Verdict::NotFired(why) => out.push_str(&format!(
                "{}: not found ({}): {}\n",
                r.id,
                r.looks_for,
                report::escape(&why)
            )),
        }
    }
    Ok(out)
}

/// `--format folded`: on-CPU samples, or blocked time with `--off-cpu`.
fn folded(a: &Analysis, paths: &[PathBuf], off_cpu: bool) -> Result<String> {
    super::stacks::require(a, paths, off_cpu)?;
    Ok(match off_cpu {
        true => report::folded::text(report::folded::off_cpu_lines(a)),
        false => report::folded::text(report::folded::on_cpu_lines(a)),
    })
}

//! `iosleuth report`: every layer's figures and the findings, or
//! `--explain` what each rule found and why the others did not fire.

use super::args::{FilterArgs, InputArgs};
use crate::analyze::Analysis;
use crate::diagnose::{catalog, Verdict};
use crate::error::{Error, ExitStatus, Result};
use crate::report::output_file::Destination;
use crate::report::{self, Command, Format};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The traces to diagnose: captures of `iosleuth record`, blktrace
    /// files or directories of them, blkparse, ftrace, `trace-cmd report`
    /// or `perf script` text, trace-cmd's trace.dat, perf.data (any but
    /// perf.data also as .gz or .zst), or `-` for standard input.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// text: findings first, then every layer; json: one object for
    /// programs; html: one page for a browser (with -o FILE); folded:
    /// stacks for flame graph tools.
    #[arg(long, value_parser = Format::parser(Command::Report), default_value = "text")]
    format: Format,
    /// Write the report to this file rather than to standard output (`-`:
    /// standard output).
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
    /// Print every thread's and every input's lines in the text report,
    /// where it otherwise shows the first few and sums up the rest.
    #[arg(long)]
    all: bool,
    /// Say what rule ID (or `all`) found, or why it did not fire.
    #[arg(long, value_name = "ID")]
    explain: Option<String>,
}

pub fn run(args: ReportArgs) -> Result<ExitStatus> {
    if args.off_cpu && args.format != Format::Folded {
        return Err(Error::bad_input(
            "--off-cpu goes with --format folded (or `iosleuth flamegraph --off-cpu`)",
        ));
    }
    let output = output_file(
        args.output.as_deref(),
        &args.paths,
        &args.filter,
        args.format,
    )?;
    args.input.apply();
    let mut opts = args.filter.options()?;
    opts.request_timeline = args.format == Format::Html;
    let mut a = crate::pipeline::analyze(&args.paths, &opts)?;
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
        (None, Format::Folded) => {
            super::stacks::require(&a, &args.paths, args.off_cpu)?;
            Format::Folded.report(&a, &[], args.off_cpu)
        }
        (None, Format::Text) => {
            report::text::render_with(&a, &crate::diagnose::diagnose(&a), args.all)
        }
        (None, f) => f.report(&a, &crate::diagnose::diagnose(&a), args.off_cpu),
    };
    super::write_output(&output, &out)?;
    Ok(ExitStatus::SUCCESS)
}

/// `-o FILE` (or `-`), checked before the work against the trace files
/// and the `--kallsyms` file read.
fn output_file(
    output: Option<&std::path::Path>,
    paths: &[PathBuf],
    filter: &FilterArgs,
    format: Format,
) -> Result<Destination> {
    let inputs: Vec<PathBuf> = paths
        .iter()
        .chain(&filter.symbols.kallsyms)
        .cloned()
        .collect();
    let page = super::page(format, "-o report.html");
    Destination::check(output, &inputs, "report", page)
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
                "{}: not found ({}): {}\n  fires when: {}\n",
                r.id,
                r.looks_for,
                report::escape(&why),
                r.fires_when
            )),
        }
    }
    Ok(out)
}

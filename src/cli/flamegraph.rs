//! `iosleuth flamegraph CAPTURE -o out.svg [--off-cpu]`: a flame graph of
//! where the CPUs ran (samples) or where the threads blocked, as an
//! interactive SVG.

use super::args::{FilterArgs, InputArgs};
use crate::error::{ExitStatus, Result};
use crate::report::output_file::Destination;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct FlamegraphArgs {
    /// Captures recorded with `iosleuth record --stacks`, `perf script`
    /// output of `perf record -g`, or ftrace text with stack traces.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The SVG to write (`-`: standard output).
    #[arg(short, long, value_name = "SVG")]
    output: PathBuf,
    /// Blocked (off-CPU) time per kernel stack instead of on-CPU samples.
    #[arg(long)]
    off_cpu: bool,
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    input: InputArgs,
}

pub fn run(args: FlamegraphArgs) -> Result<ExitStatus> {
    let inputs: Vec<PathBuf> = args
        .paths
        .iter()
        .chain(&args.filter.kallsyms)
        .cloned()
        .collect();
    let output = Destination::check(
        Some(&args.output),
        &inputs,
        "flamegraph",
        Some(super::stacks::SVG),
    )?;
    args.input.apply();
    let a = crate::pipeline::analyze(&args.paths, &args.filter.options()?)?;
    // What leaves the graph unreadable (kernel frames unnamed) first.
    let (first, rest): (Vec<&String>, Vec<&String>) = a
        .warnings
        .iter()
        .partition(|w| w.contains("kernel frames unresolved"));
    for w in first.into_iter().chain(rest) {
        super::warn(w);
    }
    super::stacks::require(&a, &args.paths, args.off_cpu)?;
    let inputs = super::args::named(&args.paths);
    let drawn = if args.off_cpu {
        crate::report::flamegraph::off_cpu_svg(&a, &inputs)
    } else {
        crate::report::flamegraph::on_cpu_svg(&a, &inputs)
    };
    super::stacks::write_svg(&output, drawn)?;
    Ok(ExitStatus::SUCCESS)
}

//! `iosleuth flamegraph CAPTURE -o out.svg [--off-cpu]`: a flame graph of
//! where the CPUs ran (samples) or where the threads blocked, as an
//! interactive SVG.

use super::args::{InputArgs, SymbolArgs, WindowArgs};
use crate::error::{ExitStatus, Result};
use crate::report::output_file::Destination;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct FlamegraphArgs {
    /// Traces with kernel stacks: captures recorded with `iosleuth record
    /// --stacks`, perf.data or `perf script` text of `perf record -g`,
    /// ftrace or `trace-cmd report` text or trace-cmd's trace.dat with
    /// stack traces (any but perf.data also as .gz or .zst), or `-` for
    /// standard input.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The SVG to write (`-`: standard output).
    #[arg(short, long, value_name = "SVG")]
    output: PathBuf,
    /// Blocked (off-CPU) time per kernel stack instead of on-CPU samples.
    #[arg(long)]
    off_cpu: bool,
    // No device, iostat interval, outliers or function latency: a flame
    // graph draws stacks, which belong to threads, not to a device.
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    symbols: SymbolArgs,
    #[command(flatten)]
    input: InputArgs,
}

pub fn run(args: FlamegraphArgs) -> Result<ExitStatus> {
    let inputs: Vec<PathBuf> = args
        .paths
        .iter()
        .chain(&args.symbols.kallsyms)
        .cloned()
        .collect();
    let output = Destination::check(
        Some(&args.output),
        &inputs,
        "flamegraph",
        Some(super::stacks::SVG),
    )?;
    args.input.apply();
    args.symbols.apply()?;
    let opts = crate::pipeline::Options {
        filter: args.window.filter(),
        ..Default::default()
    };
    let a = crate::pipeline::analyze(&args.paths, &opts)?;
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

//! Command line, in the style of `perf`: one binary, subcommands. Each
//! subcommand has its own module with its arguments (shared groups
//! flattened in, as samply and ripgrep do) and a `run` that calls the
//! pipeline and writes the output; `main` maps the outcome to an exit code.

mod args;
mod check;
mod diff;
mod dump;
mod export;
mod export_tables;
mod flamegraph;
mod lab;
mod probe;
mod record;
mod record_light;
mod report;
mod stacks;

use crate::error::{Error, ExitStatus, Result};
use crate::report::output_file::Destination;
use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "iosleuth", version, about = "Find out why Linux I/O got slow", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Analyze traces: btt intervals, iostat columns, latency, sizes, processes.
    ///
    /// Reads blktrace files (per-CPU DEV.blktrace.N or `blkparse -d` output),
    /// the blk tracer's binary or text output, ftrace/trace-cmd text, perf
    /// script text and blkparse text; the format is detected from the content
    /// and several inputs are merged by time.
    Report(report::ReportArgs),
    /// Print every decoded event, one per line in time order, with its
    /// fields (like `perf script` or `trace-cmd report`).
    Dump(dump::DumpArgs),
    /// Convert traces into files that blkparse, btt, iowatcher and
    /// seekwatcher read.
    Export(export::ExportArgs),
    /// Draw a flame graph (interactive SVG) of where the CPUs ran, or with
    /// --off-cpu where threads blocked: `flamegraph CAPTURE -o out.svg`.
    Flamegraph(flamegraph::FlamegraphArgs),
    /// Built-in workloads that time each operation (and mark it in the
    /// trace when run under `iosleuth record`).
    Probe(probe::ProbeArgs),
    /// Compare a good run with a bad one: figures side by side, settings
    /// that differ, findings in one and not the other, and a verdict.
    /// `diff GOOD BAD`, or several runs a side: `diff GOOD... -- BAD...`
    /// (a change then counts only when the two sides' ranges do not
    /// overlap).
    Diff(diff::DiffArgs),
    /// For `git bisect run` and upgrade pipelines: exit 0 when CANDIDATE is
    /// no worse than BASELINE, 1 when it regressed, 125 when it cannot tell.
    ///
    /// `check GOOD BAD`, or several runs a side: `check GOOD... -- BAD...`
    /// (means compared; a change counts only when the ranges do not overlap).
    ///
    /// Exit codes: 0 no worse (git bisect: good); 1 regressed by more than
    /// the threshold (bad); 125 cannot tell: a figure missing on one side,
    /// an unreadable input (skip); 128 `check` itself was called wrongly:
    /// bad arguments or a wrong number of paths (aborts the bisect, which
    /// would otherwise count every commit bad).
    Check(check::CheckArgs),
    /// Reproductions of the known pathologies on disks iosleuth makes (and
    /// removes) itself.
    Lab(lab::LabArgs),
    /// Record kernel events around a workload: tracepoints through a private
    /// tracefs instance into a capture directory (default), or the kernel's
    /// `blk` tracer into one file (`--blk DEV`).
    Record(record::RecordArgs),
    /// Print a shell completion script: `iosleuth completions bash >
    /// /etc/bash_completion.d/iosleuth` (also zsh, fish, elvish,
    /// powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `iosleuth man > iosleuth.1; man
    /// ./iosleuth.1`.
    Man,
}

/// Parses the command line and runs the command.
pub fn run() -> Result<ExitStatus> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            // clap prints usage errors and --help/--version itself.
            let _ = e.print();
            return if e.use_stderr() {
                Err(usage_error(&args))
            } else {
                Ok(ExitStatus::SUCCESS)
            };
        }
    };
    match cli.cmd {
        Cmd::Report(a) => report::run(a),
        Cmd::Dump(a) => dump::run(a),
        Cmd::Export(a) => export::run(a),
        Cmd::Flamegraph(a) => flamegraph::run(a),
        Cmd::Probe(a) => probe::run(a),
        Cmd::Diff(a) => diff::run(a),
        Cmd::Check(a) => check::run(a),
        Cmd::Lab(a) => lab::run(a),
        Cmd::Record(a) => record::run(a),
        Cmd::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "iosleuth", &mut out);
            write_output(&Destination::Stdout, &String::from_utf8_lossy(&out))?;
            Ok(ExitStatus::SUCCESS)
        }
        Cmd::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut out)?;
            write_output(&Destination::Stdout, &String::from_utf8_lossy(&out))?;
            Ok(ExitStatus::SUCCESS)
        }
    }
}

/// The error for arguments clap rejected, by subcommand: `check`'s
/// usage errors must abort `git bisect run` (128), every other command's
/// exit 2. The subcommand is the first argument: `iosleuth` itself takes
/// no option before it but --help and --version.
fn usage_error(args: &[std::ffi::OsString]) -> Error {
    let named = args.get(1).and_then(|a| a.to_str()).and_then(|a| {
        Cli::command()
            .find_subcommand(a)
            .map(|c| c.get_name().to_string())
    });
    match named.as_deref() {
        Some("check") => Error::CheckUsage(None),
        _ => Error::Usage,
    }
}

/// What the user should know but does not stop the command. Warnings
/// quote traces: printed escaped.
fn warn(w: &str) {
    eprintln!("iosleuth: warning: {}", crate::report::escape(w));
}

/// What a terminal must not get of `format` (an HTML page): `instead`
/// is the option to suggest.
fn page(
    format: crate::report::Format,
    instead: &'static str,
) -> Option<crate::report::output_file::NotForTerminal> {
    (!format.for_terminal()).then_some(crate::report::output_file::NotForTerminal {
        what: "HTML",
        instead,
    })
}

/// The command's output: to a file (checked before the work; said on
/// stderr), or to standard output.
fn write_output(to: &Destination, out: &str) -> crate::error::Result<()> {
    to.write(out.as_bytes())
}

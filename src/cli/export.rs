//! `iosleuth export --blktrace DIR`: per-CPU blktrace files for blkparse,
//! btt, iowatcher and seekwatcher, written all or nothing; `--parquet DIR`
//! and `--perfetto FILE` are in `export_tables`.

use crate::capture::workload::{install_signal_handlers, interrupted};
use crate::error::{Error, ExitStatus, Result};
use crate::model::Event;
use crate::report::blktrace::{ExportSummary, Target, TargetError, MAX_CPUS};
use clap::{ArgGroup, Args};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("to").required(true).args(["blktrace", "parquet", "perfetto"])))]
pub struct ExportArgs {
    /// Directory for per-CPU blktrace files (NAME.blktrace.CPU): a new or
    /// empty one, unless --force.
    #[arg(long, value_name = "DIR")]
    blktrace: Option<PathBuf>,
    /// Directory of Parquet tables for DuckDB, Spark, Trino: each input is
    /// one capture, written to DIR/TABLE/host=HOST/capture=NAME/part-0.parquet
    /// (requests, operations, sched_waits, iostat, findings, settings);
    /// exporting a capture again replaces it.
    #[arg(long, value_name = "DIR")]
    pub parquet: Option<PathBuf>,
    /// A Perfetto trace (open it at ui.perfetto.dev): a track per device
    /// with its requests, a track per thread with its operations and
    /// states, journal commits, irq and softirq.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,
    /// The host partition of --parquet (default: the host name in the
    /// capture's snapshot, else none: NULL, `host=__HIVE_DEFAULT_PARTITION__`).
    #[arg(long, value_name = "NAME", requires = "parquet")]
    pub host: Option<String>,
    /// Write into a DIR that holds files: its blktrace files are replaced,
    /// or removed when this export has none of that name (`report DIR`
    /// would merge them in); other files stay.
    #[arg(long, requires = "blktrace")]
    force: bool,
    /// The traces to convert: captures of `iosleuth record`, blktrace files
    /// or directories of them, blkparse, ftrace, `trace-cmd report` or
    /// `perf script` text, trace-cmd's trace.dat, perf.data (any but
    /// perf.data also as .gz or .zst). With --parquet each is one capture.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub input: super::args::InputArgs,
}

pub fn run(args: ExportArgs) -> Result<ExitStatus> {
    args.input.apply();
    let Some(dir) = &args.blktrace else {
        return super::export_tables::run(args);
    };
    if args
        .inputs
        .iter()
        .any(|p| crate::ingest::files::is_stdin(p))
    {
        return Err(Error::bad_input(
            "export reads its inputs twice (process names first) and cannot read standard input (`-`): save the trace to a file first",
        ));
    }
    crate::report::output_file::refuse_inputs_in(dir, &args.inputs)?;
    let target = prepare_target(dir, args.force)?;
    // From here on, Ctrl-C stops at the next event and `target` removes
    // what was written; so does any error on the way.
    install_signal_handlers();
    let stopped = || {
        Error::Interrupted(format!(
            "interrupted; nothing was written to {}",
            dir.display()
        ))
    };
    let names = first_pass(&args.inputs)?;
    if interrupted() {
        return Err(stopped());
    }
    let merged = crate::pipeline::open(&args.inputs)?.take_while(|_| !interrupted());
    let written = |e: std::io::Error| Error::failed(format!("writing {}: {e}", dir.display()));
    let sum = crate::report::blktrace::export(merged, &target, names).map_err(written)?;
    if interrupted() {
        return Err(stopped());
    }
    if sum.records == 0 {
        return Err(Error::bad_input(
            "no block events that blktrace can represent in the inputs; nothing written",
        ));
    }
    let removed = target.commit(&sum).map_err(written)?;
    say_what_was_written(dir, &sum, &removed);
    Ok(ExitStatus::SUCCESS)
}

/// The target directory, new or empty (or with `--force`, whatever
/// blktrace files it holds, replaced on commit).
fn prepare_target(dir: &Path, force: bool) -> Result<Target> {
    Target::prepare(dir, force).map_err(|e| {
        let msg = format!("{}: {e}", dir.display());
        match e {
            TargetError::NotEmpty(..) => Error::bad_input(format!(
                "{msg}; export writes into a new or empty directory, or give --force to replace its blktrace files"
            )),
            TargetError::NotADirectory => Error::bad_input(msg),
            TargetError::Io(_) => Error::failed(msg),
        }
    })
}

/// Process names may come at the end (the blk tracer's notes): a first
/// pass reads them so that every file names its processes from the start.
/// It also tells what the inputs are: one run twice is refused, different
/// recordings merged get a warning. Stops early on Ctrl-C.
fn first_pass(inputs: &[PathBuf]) -> Result<HashMap<u32, String>> {
    let mut first = crate::pipeline::open_marked(inputs)?;
    let names = first
        .events()
        .take_while(|_| !interrupted())
        .filter_map(|e| match e {
            Event::ProcessName { pid, comm } => Some((pid, comm.to_string())),
            _ => None,
        })
        .collect();
    if interrupted() {
        return Ok(names);
    }
    // Snapshots only date the inputs here: one that cannot be read is
    // left out without a word, as export writes no settings.
    let inputs = first.tap.inputs(&crate::pipeline::snapshots_of(inputs).0);
    inputs.refuse_one_run_twice()?;
    if let Some(w) = inputs.different_recordings() {
        super::warn(&w);
    }
    Ok(names)
}

/// What was written, what `--force` removed, and what was left out.
fn say_what_was_written(dir: &Path, sum: &ExportSummary, removed: &[PathBuf]) {
    note!(
        "iosleuth: wrote {} records to {} files in {} (read with: blkparse -D {} -i NAME -d out.bin; btt -i out.bin)",
        sum.records,
        sum.files.len(),
        dir.display(),
        dir.display()
    );
    if !removed.is_empty() {
        let names: Vec<String> = removed
            .iter()
            .take(3)
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        super::warn(&format!(
            "--force: removed {} blktrace {} that this export did not replace from {} ({}{})",
            removed.len(),
            if removed.len() == 1 { "file" } else { "files" },
            dir.display(),
            names.join(", "),
            if removed.len() > names.len() {
                ", ..."
            } else {
                ""
            }
        ));
    }
    if sum.skipped > 0 {
        super::warn(&format!(
            "{} events have no blktrace equivalent and were left out",
            sum.skipped
        ));
    }
    for r in &sum.renumbered {
        let files = match r.cpus {
            1 => format!("{}.blktrace.0", r.device),
            n => format!("{}.blktrace.0 to .{}", r.device, n - 1),
        };
        super::warn(&format!(
            "{}: its block events come from {} {} up to CPU {}: written as {files} in CPU order, not by CPU number (blkparse reads NAME.blktrace.0, .1, ... until one is missing, and by CPU number would take {} empty files); each record keeps its CPU number, blkparse's per-CPU totals go by file",
            r.device,
            r.cpus,
            if r.cpus == 1 { "CPU" } else { "CPUs" },
            r.highest,
            u64::from(r.highest) + 1 - r.cpus as u64,
        ));
    }
    if sum.bad_cpu > 0 {
        super::warn(&format!(
            "{} block events have a CPU number of {MAX_CPUS} or more, more than any kernel's NR_CPUS allows (corrupt records), and were left out",
            sum.bad_cpu
        ));
    }
}

//! `iosleuth export --blktrace DIR`: per-CPU blktrace files for blkparse,
//! btt, iowatcher and seekwatcher.

use crate::error::{Error, ExitStatus, Result};
use crate::model::Event;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Directory for per-CPU blktrace files (NAME.blktrace.CPU).
    #[arg(long, value_name = "DIR")]
    blktrace: PathBuf,
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
}

pub fn run(args: ExportArgs) -> Result<ExitStatus> {
    let dir = &args.blktrace;
    if args
        .inputs
        .iter()
        .any(|p| crate::ingest::files::is_stdin(p))
    {
        return Err(Error::bad_input(
            "export reads its inputs twice (process names first) and cannot read standard input (`-`): save the trace to a file first",
        ));
    }
    // Process names may come at the end (the blk tracer's notes): read them
    // first so that every file names its processes from the start.
    let names: std::collections::HashMap<u32, String> = crate::pipeline::open(&args.inputs)?
        .filter_map(|e| match e {
            Event::ProcessName { pid, comm } => Some((pid, comm.to_string())),
            _ => None,
        })
        .collect();
    let merged = crate::pipeline::open(&args.inputs)?;
    let sum = crate::report::blktrace::export(merged, dir, names)
        .map_err(|e| Error::failed(format!("writing {}: {e}", dir.display())))?;
    if sum.records == 0 {
        return Err(Error::bad_input(
            "no block events that blktrace can represent in the inputs; nothing written",
        ));
    }
    eprintln!(
        "iosleuth: wrote {} records to {} files in {} (read with: blkparse -D {} -i NAME -d out.bin; btt -i out.bin)",
        sum.records,
        sum.files.len(),
        dir.display(),
        dir.display()
    );
    if sum.skipped > 0 {
        super::warn(&format!(
            "{} events have no blktrace equivalent and were left out",
            sum.skipped
        ));
    }
    Ok(ExitStatus::SUCCESS)
}

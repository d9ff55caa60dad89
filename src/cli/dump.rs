//! `iosleuth dump`: every decoded event, one per line, in time order.

use crate::error::{Error, ExitStatus, Result};
use crate::model::Event;
use crate::report::{dump, Command, Format};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// The traces to print: captures of `iosleuth record`, blktrace files
    /// or directories of them, blkparse, ftrace, `trace-cmd report` or
    /// `perf script` text, trace-cmd's trace.dat, perf.data (any but
    /// perf.data also as .gz or .zst), or `-` for standard input.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Only events whose name (with or without its system) is one of these.
    #[arg(long, value_delimiter = ',')]
    events: Vec<String>,
    /// Stop after this many events.
    #[arg(long)]
    limit: Option<u64>,
    /// `json`: one JSON object per line.
    #[arg(long, value_parser = Format::parser(Command::Dump), default_value = "text")]
    format: Format,
    #[command(flatten)]
    input: super::args::InputArgs,
}

/// Whether `ev` is one of the events asked for. Compared in place: this
/// runs for every event of the trace.
fn wanted(only: &[String], ev: &Event) -> bool {
    if only.is_empty() {
        return true;
    }
    match ev {
        Event::Block(b) => {
            let letter = b.action.letter();
            only.iter()
                .any(|w| w.strip_prefix("block:").unwrap_or(w) == letter)
        }
        Event::Trace(o) => only.iter().any(|w| **w == *o.name || w == o.short_name()),
        Event::Stack(k) => {
            let names: &[&str] = match k.sampled {
                true => &["cpu-clock", "perf:cpu-clock"],
                false => &["kernel_stack", "ftrace:kernel_stack"],
            };
            only.iter().any(|w| names.contains(&&**w))
        }
        Event::ProcessName { .. } => false,
    }
}

pub fn run(args: DumpArgs) -> Result<ExitStatus> {
    args.input.apply();
    let mut merged = crate::pipeline::open(&args.paths)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut n = 0u64;
    for ev in merged.by_ref() {
        if args.limit.is_some_and(|l| n >= l) {
            break;
        }
        if !wanted(&args.events, &ev) {
            continue;
        }
        let line = match args.format {
            Format::Json => dump::json(&ev).map(|j| j.to_string()),
            _ => dump::line(&ev),
        };
        if let Some(l) = line {
            n += 1;
            writeln!(out, "{l}")?;
        }
    }
    out.flush()?;
    for w in merged.warnings() {
        super::warn(&w);
    }
    if n == 0 && args.limit != Some(0) {
        return Err(Error::bad_input(format!(
            "no events to print in {}",
            super::args::named(&args.paths)
        )));
    }
    Ok(ExitStatus::SUCCESS)
}

//! `iosleuth dump`: every decoded event, one per line, in time order.

use crate::error::{Error, ExitStatus, Result};
use crate::model::tracepoint::Tracepoint;
use crate::model::{Action, Event};
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
    /// Only these events: blkparse's letters (Q, G, I, D, C, …),
    /// tracepoint names with or without their system (block_rq_issue,
    /// sched:sched_switch, …), or any event as SYSTEM:NAME.
    #[arg(long, value_delimiter = ',')]
    events: Vec<String>,
    /// Stop after this many events.
    #[arg(long)]
    limit: Option<u64>,
    /// Times on the trace's own clock (to match other logs of the
    /// machine), not in seconds from the trace's start as every other
    /// output prints them.
    #[arg(long)]
    absolute: bool,
    /// `json`: one JSON object per line.
    #[arg(long, value_parser = Format::parser(Command::Dump), default_value = "text")]
    format: Format,
    #[command(flatten)]
    input: super::args::InputArgs,
}

/// One of `--events`, checked before the trace is read.
#[derive(Debug, PartialEq)]
enum Wanted {
    /// A blkparse letter (`D`): every block action printed with it.
    Letter(String),
    /// A block tracepoint (`block_rq_issue`): its action.
    Block(Action),
    /// Any other event, by its name with or without its system.
    Name(String),
    /// Stack events: on-CPU samples or where a thread blocked.
    Stack { sampled: bool },
}

impl Wanted {
    /// `w` as one of the events iosleuth knows, or a name with its
    /// system (`kmem:kmalloc`: an event it does not analyze is still
    /// dumped); else exit 2 listing the names it takes.
    fn parse(w: &str) -> Result<Wanted> {
        // As `dump` prints them: `block:D`.
        let letter = w.strip_prefix("block:").unwrap_or(w);
        if Action::ALL.iter().any(|a| a.letter() == letter) {
            return Ok(Wanted::Letter(letter.to_string()));
        }
        let short = w.rsplit_once(':').map_or(w, |(_, s)| s);
        if let Some(a) = Action::from_tracepoint(short) {
            return Ok(Wanted::Block(a));
        }
        match short {
            "cpu-clock" => return Ok(Wanted::Stack { sampled: true }),
            "kernel_stack" => return Ok(Wanted::Stack { sampled: false }),
            _ => {}
        }
        if Tracepoint::of(short) != Tracepoint::Other || w.contains(':') {
            return Ok(Wanted::Name(w.to_string()));
        }
        let mut letters: Vec<&str> = Vec::new();
        for l in Action::ALL.iter().map(|a| a.letter()) {
            if !letters.contains(&l) {
                letters.push(l);
            }
        }
        let named: Vec<&str> = Tracepoint::NAMED.iter().map(|t| t.name()).collect();
        Err(Error::bad_input(format!(
            "--events: no event {w:?}; give blkparse's letters ({}), block tracepoints ({}), the tracepoints iosleuth reads ({}, sys_enter_NAME, sys_exit_NAME), cpu-clock, kernel_stack, or any event with its system (kmem:kmalloc)",
            letters.join(", "),
            BLOCK_TRACEPOINTS.join(", "),
            named.join(", ")
        )))
    }
}

/// The block layer's tracepoints (`Action::from_tracepoint` knows each).
const BLOCK_TRACEPOINTS: [&str; 20] = [
    "block_bio_queue",
    "block_bio_backmerge",
    "block_bio_frontmerge",
    "block_getrq",
    "block_sleeprq",
    "block_rq_requeue",
    "block_rq_issue",
    "block_rq_complete",
    "block_plug",
    "block_unplug",
    "block_rq_insert",
    "block_split",
    "block_bio_bounce",
    "block_bio_remap",
    "block_rq_remap",
    "block_rq_merge",
    "block_bio_complete",
    "block_rq_error",
    "block_io_start",
    "block_io_done",
];

/// Whether `ev` is one of the events asked for. Compared in place: this
/// runs for every event of the trace.
fn wanted(only: &[Wanted], ev: &Event) -> bool {
    if only.is_empty() {
        return true;
    }
    match ev {
        Event::Block(b) => only.iter().any(|w| match w {
            Wanted::Letter(l) => l == b.action.letter(),
            Wanted::Block(a) => *a == b.action,
            _ => false,
        }),
        Event::Trace(o) => only.iter().any(|w| match w {
            Wanted::Name(n) => **n == *o.name || n == o.short_name(),
            _ => false,
        }),
        Event::Stack(k) => only.contains(&Wanted::Stack { sampled: k.sampled }),
        Event::ProcessName { .. } | Event::ThreadGroup { .. } => false,
    }
}

pub fn run(args: DumpArgs) -> Result<ExitStatus> {
    let only = args
        .events
        .iter()
        .map(|w| Wanted::parse(w))
        .collect::<Result<Vec<_>>>()?;
    args.input.apply();
    let mut merged = crate::pipeline::open(&args.paths)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut n = 0u64;
    // The trace's start: its first event, whichever `--events` keeps.
    let mut origin: Option<u64> = None;
    for ev in merged.by_ref() {
        if args.limit.is_some_and(|l| n >= l) {
            break;
        }
        if origin.is_none() {
            if let Some(ts) = ev.ts() {
                origin = Some(if args.absolute { 0 } else { ts });
                if !args.absolute {
                    note!(
                        "iosleuth dump: times are seconds from the trace's start ({}.{:09} on the trace clock; --absolute prints that clock)",
                        ts / 1_000_000_000,
                        ts % 1_000_000_000
                    );
                }
            }
        }
        if !wanted(&only, &ev) {
            continue;
        }
        let at = origin.unwrap_or(0);
        let line = match args.format {
            Format::Json => dump::json(&ev, at).map(|j| j.to_string()),
            _ => dump::line(&ev, at),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_tracepoints_and_names_with_a_system() {
        let p = |w: &str| Wanted::parse(w).unwrap();
        assert_eq!(p("D"), Wanted::Letter("D".into()));
        assert_eq!(p("block_rq_issue"), Wanted::Block(Action::Issue));
        assert_eq!(
            p("block:block_rq_complete"),
            Wanted::Block(Action::Complete)
        );
        assert_eq!(p("sched_switch"), Wanted::Name("sched_switch".into()));
        assert_eq!(p("kmem:kmalloc"), Wanted::Name("kmem:kmalloc".into()));
        assert_eq!(p("cpu-clock"), Wanted::Stack { sampled: true });
        let e = Wanted::parse("block_rq_isue").unwrap_err().to_string();
        assert!(e.contains("no event \"block_rq_isue\""), "{e}");
        assert!(e.contains("Q, M, F, G"), "{e}");
        assert!(e.contains("block_rq_issue, block_rq_complete"), "{e}");
        assert!(e.contains("sched_switch"), "{e}");
        for n in BLOCK_TRACEPOINTS {
            assert!(Action::from_tracepoint(n).is_some(), "{n}");
        }
    }
}

//! Command line, in the style of `perf`: one binary, subcommands. Each
//! subcommand has its own module with its arguments (shared groups
//! flattened in, as samply and ripgrep do) and a `run` that calls the
//! pipeline and writes the output; `main` maps the outcome to an exit code.

/// The inputs of the commands that read traces, for their long help and
/// manual pages (a macro: clap's attributes take it where a const would
/// not be a literal).
macro_rules! inputs {
    () => {
        "Inputs, told apart by their content, not their name:
  - a capture directory written by `iosleuth record` (also --light)
  - blktrace's per-CPU files DEV.blktrace.N: a directory of them, or one
    of them (its siblings are read with it); a `blkparse -d` dump; the
    blk tracer's binary output (`iosleuth record --blk`)
  - blkparse or btrace text
  - ftrace text (`trace`, `trace_pipe`): tracepoints or the blk tracer
  - trace-cmd's trace.dat (versions 6 and 7), or `trace-cmd report` text
  - perf.data (`perf record`), or `perf script` text
  - any of these files compressed with gzip or zstd (.gz, .zst), except
    perf.data"
    };
}

/// A note for the person at the terminal (what was written, what a
/// choice means): left out under `-q`, which keeps only errors.
macro_rules! note {
    ($($t:tt)*) => {
        if !crate::cli::quiet() {
            eprintln!($($t)*);
        }
    };
}

mod args;
mod check;
mod diff;
mod dump;
mod export;
mod export_tables;
mod flamegraph;
mod lab;
mod man;
mod probe;
mod record;
mod record_light;
mod report;
mod stacks;
mod try_cmd;
mod watch;

use crate::error::{Error, ExitStatus, Result};
use crate::report::output_file::Destination;
use clap::{CommandFactory, Parser, Subcommand};

/// Find out why Linux I/O got slow
#[derive(Parser, Debug)]
#[command(
    name = "iosleuth",
    version,
    long_about = "Find out why Linux I/O got slow.

iosleuth reads the traces you already have (blktrace, ftrace, trace-cmd,
perf, blkparse text) or records its own (`iosleuth record`), follows every
request through the block layer and gives btt's and iostat's numbers,
latency distributions, request sizes, processes and the device stack. With
syscall, ext4/jbd2, scheduler and interrupt events it follows each slow
operation through the layers and says where its time went.

`iosleuth report` names the root cause with its evidence and a
workaround; `iosleuth diff` compares a good run with a bad one, and
`iosleuth check` answers `git bisect run`."
)]
struct Cli {
    /// Print only errors: no warnings, notes or progress.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Say more on stderr: each input's format and events, how long the
    /// reading took, the event sets recorded and the events not analyzed.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `-q` asked for errors only.
pub(crate) fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether `-v` asked for what was read and how.
pub(crate) fn verbose() -> bool {
    VERBOSE.load(std::sync::atomic::Ordering::Relaxed)
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Diagnose slow I/O from traces: name the root cause with its
    /// evidence and a workaround, then every layer's figures.
    ///
    /// Findings come first, most important first: each names a cause (such
    /// as merges_disabled or journal_space_stall) with this trace's numbers
    /// as evidence, says why it slows the I/O, and gives a command to try;
    /// `--explain` says what each rule found or why it did not fire. Then
    /// per device btt's intervals, iostat's columns, latency distributions
    /// and request sizes; the processes and the device stack; syscalls,
    /// fsyncs, journal commits, scheduler waits and interrupts; and where
    /// each slow operation's time went. Several inputs are merged by time
    /// into one trace; the format of each is detected from its content.
    #[command(after_long_help = inputs!())]
    Report(report::ReportArgs),
    /// Print every decoded event, one per line in time order, with its
    /// fields (like `perf script` or `trace-cmd report`).
    ///
    /// `--format json` prints one JSON object per line. Several inputs are
    /// merged by time.
    #[command(after_long_help = inputs!())]
    Dump(dump::DumpArgs),
    /// Convert traces into blktrace files (for blkparse, btt, iowatcher,
    /// seekwatcher), Parquet tables or a Perfetto trace.
    #[command(
        long_about = "Convert traces into files that other tools read, one of:
  - --blktrace DIR: per-CPU blktrace files (NAME.blktrace.CPU) for
    blkparse, btt, iowatcher and seekwatcher
  - --parquet DIR: Parquet tables (requests, operations, sched_waits,
    iostat, findings, settings) for DuckDB, Spark or Trino
  - --perfetto FILE: a Perfetto trace, to open at ui.perfetto.dev

Inputs are read by name, not from standard input.",
        after_long_help = inputs!()
    )]
    Export(export::ExportArgs),
    /// Draw a flame graph (interactive SVG) of where the CPUs ran or, with
    /// --off-cpu, where threads blocked.
    ///
    /// `flamegraph CAPTURE -o out.svg`. The stacks come from a capture
    /// recorded with `iosleuth record --stacks`, perf.data or `perf script`
    /// text of `perf record -g`, or ftrace or trace-cmd traces with kernel
    /// stack traces.
    #[command(after_long_help = inputs!())]
    Flamegraph(flamegraph::FlamegraphArgs),
    /// Run a built-in workload that times each operation (and marks it in
    /// the trace when run under `iosleuth record`).
    Probe(probe::ProbeArgs),
    /// Compare a good run with a bad one: figures side by side, settings
    /// that differ, findings in one and not the other, and a verdict.
    ///
    /// `diff GOOD BAD`, or several runs a side: `diff GOOD... -- BAD...`
    /// (a change then counts only when the two sides' ranges do not
    /// overlap).
    #[command(after_long_help = inputs!())]
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
    #[command(after_long_help = inputs!())]
    Check(check::CheckArgs),
    /// Reproductions of the known pathologies on disks iosleuth makes (and
    /// removes) itself.
    ///
    /// Each scenario builds its disks (loop devices, ext4, a FUSE disk that
    /// stalls), records a good and a bad run, diagnoses and compares them,
    /// and removes what it made. Needs root.
    Lab(lab::LabArgs),
    /// Record kernel events around a workload: tracepoints into a capture
    /// directory, or the kernel's `blk` tracer into one file (`--blk DEV`)
    ///
    /// By default the tracepoints go through a private tracefs instance
    /// into a capture directory with a snapshot of the system's settings;
    /// `--light` keeps per-request state in BPF and sends only slow
    /// requests; `--blk DEV` records what blktrace records into one file.
    /// `report`, `diff`, `check` and the other commands read all three.
    /// Needs root.
    Record(record::RecordArgs),
    /// Stay on: count every request in BPF histograms, serve them as
    /// Prometheus metrics, and keep a diagnosed capture when a trigger fires
    ///
    /// `watch --dir /var/lib/iosleuth` serves http://127.0.0.1:19690/metrics
    /// (per device and operation histograms of queued, device and total
    /// time; counters; the flight recorder's; the findings of the last
    /// capture). A trigger (a device's p99 far above its baseline, a
    /// request over a bound, a thread waiting runnable too long) writes
    /// the seconds around it as a light capture with report.json and
    /// report.html beside it, under a disk quota. SIGTERM or SIGINT stop
    /// it and leave nothing loaded; SIGHUP reopens --log. Needs root.
    Watch(watch::WatchArgs),
    /// Prove a workaround on your own workload: apply a finding's remedy
    /// (or --set KNOB=VALUE), run the workload in interleaved rounds with
    /// and without it, compare, and put every setting back
    ///
    /// `try CAPTURE -- WORKLOAD...` takes the remedy of the capture's first
    /// finding that has one (--finding ID to choose); `try --set
    /// vm.dirty_ratio=20 -- WORKLOAD...` takes yours. Without --apply it
    /// prints the plan and changes nothing. With --apply the workload runs
    /// --rounds times a side (A B B A A B ...), each round a light capture; the
    /// settings are applied just before each candidate round and put back
    /// just after (also on an error and Ctrl-C; after a SIGKILL, `record
    /// --cleanup` puts them back). The verdict: the medians, the change
    /// with a 95 % bootstrap interval, how many paired rounds agree, and in
    /// how many rounds of each side the finding showed.
    ///
    /// Exit codes: 0 better; 1 not better (worse, or no change); 125
    /// inconclusive (the rounds vary more than the change); 2 could not
    /// run (a setting the kernel refuses, a workload that failed).
    Try(try_cmd::TryArgs),
    /// Print a shell completion script: `iosleuth completions bash >
    /// /etc/bash_completion.d/iosleuth` (also zsh, fish, elvish,
    /// powershell)
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one per command:
    /// `iosleuth man --dir DIR`
    ///
    /// `iosleuth man > iosleuth.1; man ./iosleuth.1` for the top page,
    /// `iosleuth man report` for one command's; `iosleuth man --dir
    /// /usr/local/share/man/man1` writes iosleuth.1, iosleuth-report.1,
    /// iosleuth-record.1, ... (one for every command and subcommand).
    Man(man::ManArgs),
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
    QUIET.store(cli.quiet, std::sync::atomic::Ordering::Relaxed);
    VERBOSE.store(cli.verbose, std::sync::atomic::Ordering::Relaxed);
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
        Cmd::Watch(a) => watch::run(a),
        Cmd::Try(a) => try_cmd::run(a),
        Cmd::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "iosleuth", &mut out);
            write_output(&Destination::Stdout, &String::from_utf8_lossy(&out))?;
            Ok(ExitStatus::SUCCESS)
        }
        Cmd::Man(a) => man::run(a, Cli::command()),
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
    note!("iosleuth: warning: {}", crate::report::escape(w));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument, command and subcommand that lacks a description.
    fn undescribed(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        if cmd.get_about().is_none() {
            out.push(format!("{path}: the command"));
        }
        for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if a.get_help().is_none() {
                out.push(format!("{path}: {}", a.get_id()));
            }
        }
        for s in cmd.get_subcommands() {
            undescribed(s, &format!("{path} {}", s.get_name()), out);
        }
    }

    /// The long options of the command at `path` (`["probe", "fsync"]`).
    fn long_options(path: &[&str]) -> Vec<String> {
        let mut cmd = Cli::command();
        cmd.build();
        let mut c = &cmd;
        for p in path {
            c = c.find_subcommand(p).expect(p);
        }
        c.get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(String::from))
            .collect()
    }

    /// Each command offers what its code reads, nothing more: a shared
    /// group flattened where it does nothing shows in --help and does
    /// nothing (flamegraph had iostat's --interval).
    #[test]
    fn each_command_offers_only_the_options_it_uses() {
        let window = ["time", "pid", "comm"];
        let expected: &[(&[&str], &[&str])] = &[
            (
                &["report"],
                &[
                    "format",
                    "output",
                    "off-cpu",
                    "by-process",
                    "device",
                    "time",
                    "pid",
                    "comm",
                    "interval",
                    "top",
                    "func",
                    "kallsyms",
                    "max-input",
                    "all",
                    "explain",
                ],
            ),
            (
                &["flamegraph"],
                &[
                    "output",
                    "off-cpu",
                    "time",
                    "pid",
                    "comm",
                    "kallsyms",
                    "max-input",
                ],
            ),
            (
                &["dump"],
                &["events", "limit", "absolute", "format", "max-input"],
            ),
            (
                &["export"],
                &[
                    "blktrace",
                    "parquet",
                    "perfetto",
                    "host",
                    "force",
                    "max-input",
                ],
            ),
            (
                &["diff"],
                &["format", "output", "flamegraph", "func", "max-input"],
            ),
            (&["check"], &["metric", "threshold", "max-input"]),
            (&["man"], &["dir"]),
        ];
        for (path, want) in expected {
            let mut got = long_options(path);
            // -q is every command's (global).
            got.retain(|o| o != "help" && o != "quiet" && o != "verbose");
            assert_eq!(got, *want, "{path:?}");
        }
        // Where a trace is not read, nothing about reading one.
        for path in [&["probe", "fsync"][..], &["lab", "run"], &["completions"]] {
            let got = long_options(path);
            for o in window.iter().chain(&["device", "interval", "max-input"]) {
                assert!(!got.iter().any(|g| g == o), "{path:?} offers --{o}");
            }
        }
    }

    /// `record`'s options that one way of recording does not read are
    /// refused with it, not ignored; their defaults are no conflict.
    /// Parsed only: nothing is recorded.
    #[test]
    fn record_refuses_what_its_chosen_recorder_does_not_read() {
        let parses = |args: &str| {
            let argv = format!("iosleuth record -o x {args}");
            Cli::try_parse_from(argv.split_whitespace()).is_ok()
        };
        for fine in [
            "",
            "--light",
            "--blk sda",
            "--blk sda --text --buffer-kb 64",
            "--stacks --freq 199",
            "--events block,sched --buffer-kb 64",
        ] {
            assert!(parses(fine), "{fine}");
        }
        for refused in [
            "--light --events block",
            "--light --buffer-kb 64",
            "--blk sda --events block",
            "--blk sda --stacks",
            "--blk sda --func ext4_sync_file",
            "--text",
            "--freq 199",
        ] {
            assert!(!parses(refused), "{refused}");
        }
    }

    #[test]
    fn every_command_and_argument_says_what_it_takes() {
        let mut cmd = Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        undescribed(&cmd, "iosleuth", &mut missing);
        assert!(missing.is_empty(), "no description: {missing:#?}");
    }

    /// The systemd unit in contrib/ starts watch with options it has.
    #[test]
    fn the_service_unit_runs_a_valid_watch_command() {
        let unit = include_str!("../../contrib/iosleuth-watch.service");
        let exec = unit
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .expect("ExecStart");
        let argv: Vec<&str> = exec.split_whitespace().collect();
        assert!(
            argv[0].ends_with("/iosleuth") && argv[1] == "watch",
            "{exec}"
        );
        if let Err(e) = Cli::try_parse_from(&argv) {
            panic!("{exec}: {e}");
        }
    }
}

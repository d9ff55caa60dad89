//! `iosleuth man`: manual pages made from the definitions `--help` shows
//! (clap_mangen renders NAME, SYNOPSIS, OPTIONS and SUBCOMMANDS), with what
//! clap has no field for: EXIT STATUS, EXAMPLES and SEE ALSO. One page per
//! command and subcommand (iosleuth.1, iosleuth-report.1, …,
//! iosleuth-probe-fsync.1), so that every page another names exists.

use crate::error::{Error, ExitStatus, Result};
use crate::report::output_file::OutputFile;
use clap::Args;
use clap_mangen::roff::{bold, roman, Inline, Roff};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ManArgs {
    /// The command whose page to print, e.g. `report` or `probe fsync`
    /// (default: the top page, iosleuth(1)).
    #[arg(value_name = "COMMAND", conflicts_with = "dir")]
    command: Vec<String>,
    /// Write every page into this directory (made if missing) instead of
    /// printing one: iosleuth.1, iosleuth-report.1, iosleuth-record.1, …
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// One manual page: `iosleuth-report` and its roff.
pub struct Page {
    pub name: String,
    pub roff: String,
}

pub fn run(args: ManArgs, cli: clap::Command) -> Result<ExitStatus> {
    let pages = pages(cli);
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::failed(format!("{}: {e}", dir.display())))?;
        for p in &pages {
            OutputFile::check(&dir.join(format!("{}.1", p.name)), &[])?.write(p.roff.as_bytes())?;
        }
        note!(
            "iosleuth: wrote {} manual pages to {} (iosleuth.1, iosleuth-report.1, …)",
            pages.len(),
            dir.display()
        );
        return Ok(ExitStatus::SUCCESS);
    }
    let name = std::iter::once("iosleuth")
        .chain(args.command.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-");
    let Some(page) = pages.iter().find(|p| p.name == name) else {
        let names: Vec<&str> = pages.iter().map(|p| p.name.as_str()).collect();
        return Err(Error::bad_input(format!(
            "no manual page {name}; there are: {}",
            names.join(", ")
        )));
    };
    super::write_output(&super::Destination::Stdout, &page.roff)?;
    Ok(ExitStatus::SUCCESS)
}

/// Every page: the top one first, then each command's, depth first.
pub fn pages(cli: clap::Command) -> Vec<Page> {
    // `help` is a command line's way to ask, not a page of its own.
    let mut cli = cli.disable_help_subcommand(true);
    cli.build();
    let mut out = Vec::new();
    collect(&cli, &[], &mut out);
    out
}

fn collect<'a>(cmd: &'a clap::Command, path: &[&'a str], out: &mut Vec<Page>) {
    out.push(Page {
        name: page_name(path),
        roff: page(cmd, path),
    });
    for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut sub = path.to_vec();
        sub.push(s.get_name());
        collect(s, &sub, out);
    }
}

/// `iosleuth`, `iosleuth-report`, `iosleuth-probe-fsync`.
fn page_name(path: &[&str]) -> String {
    std::iter::once("iosleuth")
        .chain(path.iter().copied())
        .collect::<Vec<_>>()
        .join("-")
}

/// SYNOPSIS with each option's value named (`[--format FORMAT]`), which
/// clap_mangen's leaves out: `--format` alone reads as a flag.
fn synopsis(cmd: &clap::Command, path: &[&str]) -> Roff {
    let mut line: Vec<Inline> = vec![bold(
        std::iter::once("iosleuth")
            .chain(path.iter().copied())
            .collect::<Vec<_>>()
            .join(" "),
    )];
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let takes_value = a.get_action().takes_values();
        let value = a
            .get_value_names()
            .and_then(|v| v.first())
            .map(|v| v.to_string())
            .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
        if a.is_positional() {
            let dots = if matches!(a.get_num_args(), Some(n) if n.max_values() > 1) {
                "..."
            } else {
                ""
            };
            line.push(roman(format!(" <{value}>{dots}")));
            continue;
        }
        let mut names = Vec::new();
        if let Some(c) = a.get_short() {
            names.push(format!("-{c}"));
        }
        if let Some(l) = a.get_long() {
            names.push(format!("--{l}"));
        }
        line.push(roman(" ["));
        line.push(bold(names.join("|")));
        if takes_value {
            line.push(roman(" "));
            line.push(clap_mangen::roff::italic(value));
        }
        line.push(roman("]"));
    }
    if cmd.has_subcommands() {
        line.push(roman(" <COMMAND>"));
    }
    let mut r = Roff::new();
    r.control("SH", ["SYNOPSIS"]);
    r.text(line);
    r
}

fn page(cmd: &clap::Command, path: &[&str]) -> String {
    let name = page_name(path);
    let man = clap_mangen::Man::new(cmd.clone());
    // clap_mangen leaves .TH's date out without an empty argument in its
    // place, so the version would be read as the date: written here.
    let title = format!(
        ".TH {name} 1 \"\" \"iosleuth {}\" \"User Commands\"\n",
        env!("CARGO_PKG_VERSION")
    );
    let mut out = String::new();
    // Each part clap_mangen renders starts with the same preamble (the
    // apostrophe string); the page needs it once, first.
    let preamble = Roff::new().render();
    let part = |f: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        let mut buf = Vec::new();
        f(&mut buf).expect("writing to memory");
        let s = String::from_utf8(buf).expect("roff of UTF-8 text");
        without(&s, &preamble)
    };
    out.push_str(&preamble);
    out.push_str(&title);
    out.push_str(&part(&|w| man.render_name_section(w)));
    out.push_str(&without(&synopsis(cmd, path).render(), &preamble));
    let mut roff = Roff::new();
    roff.control("SH", ["DESCRIPTION"]);
    let about = cmd.get_long_about().or(cmd.get_about());
    for (i, text) in [about, cmd.get_after_long_help()]
        .into_iter()
        .flatten()
        .enumerate()
    {
        if i > 0 {
            roff.control("PP", []);
        }
        description(&mut roff, &text.to_string());
    }
    out.push_str(&without(&roff.render(), &preamble));
    out.push_str(&part(&|w| man.render_options_section(w)));
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        out.push_str(&part(&|w| man.render_subcommands_section(w)));
    }
    let more = extra(&path.join(" "));
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    list(&mut roff, more.exit);
    roff.control("SH", ["EXAMPLES"]);
    examples(&mut roff, more.examples);
    roff.control("SH", ["SEE ALSO"]);
    // Page names are not hyphenated (iosleuth-com-pletions).
    roff.control("nh", []);
    roff.text(see_also(cmd, path, more.see_also));
    out.push_str(&without(&roff.render(), &preamble));
    ascii(&out)
}

/// Characters past ASCII as groff's escapes (`…` is `\[u2026]`): groff
/// reads its input as Latin-1 unless a preprocessor converts it first.
fn ascii(roff: &str) -> String {
    let mut out = String::with_capacity(roff.len());
    for c in roff.chars() {
        match c.is_ascii() {
            true => out.push(c),
            false => out.push_str(&format!("\\[u{:04X}]", c as u32)),
        }
    }
    out
}

fn without(roff: &str, preamble: &str) -> String {
    roff.strip_prefix(preamble).unwrap_or(roff).to_string()
}

/// Help text as roff: a blank line starts a paragraph, `  - ` a bullet
/// (its continuation lines indented), `code` in bold.
fn description(roff: &mut Roff, text: &str) {
    let mut in_list = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            roff.control("PP", []);
            in_list = false;
        } else if let Some(item) = line.strip_prefix("  - ") {
            roff.control("IP", ["\\(bu", "2"]);
            roff.text(code(item));
            in_list = true;
        } else if in_list && line.starts_with("    ") {
            roff.text(code(line.trim_start()));
        } else {
            if in_list {
                roff.control("PP", []);
                in_list = false;
            }
            roff.text(code(line));
        }
    }
}

/// `code` spans in bold, the rest roman.
fn code(s: &str) -> Vec<Inline> {
    s.split('`')
        .enumerate()
        .filter(|(_, t)| !t.is_empty())
        .map(|(i, t)| if i % 2 == 1 { bold(t) } else { roman(t) })
        .collect()
}

/// A tagged paragraph per entry: the tag in bold.
fn list(roff: &mut Roff, entries: &[(&str, &str)]) {
    for (tag, text) in entries {
        roff.control("TP", []);
        roff.text([bold(*tag)]);
        roff.text(code(text));
    }
}

/// Each command as typed (not filled: long ones stay one line to copy),
/// then what it does.
fn examples(roff: &mut Roff, entries: &[(&str, &str)]) {
    for (command, text) in entries {
        roff.control("PP", []);
        roff.control("EX", []);
        roff.text([bold(*command)]);
        roff.control("EE", []);
        roff.control("RS", ["4"]);
        roff.text(code(text));
        roff.control("RE", []);
    }
}

/// iosleuth(1), the parent's and the subcommands' pages, then the related
/// ones.
fn see_also(cmd: &clap::Command, path: &[&str], related: &[&str]) -> Vec<Inline> {
    let mut names: Vec<String> = (0..path.len())
        .map(|n| format!("{}(1)", page_name(&path[..n])))
        .collect();
    for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut sub = path.to_vec();
        sub.push(s.get_name());
        names.push(format!("{}(1)", page_name(&sub)));
    }
    names.extend(related.iter().map(|r| r.to_string()));
    let mut out = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            out.push(roman(", "));
        }
        let (page, section) = n.split_once('(').expect("NAME(SECTION)");
        out.push(bold(page));
        out.push(roman(format!("({section}")));
    }
    out
}

/// What a page says beyond the command's definition.
struct Extra {
    exit: &'static [(&'static str, &'static str)],
    examples: &'static [(&'static str, &'static str)],
    see_also: &'static [&'static str],
}

const READS: &[(&str, &str)] = &[
    ("0", "Done."),
    (
        "1",
        "Writing the output failed (a reader that went away, as with `| head`, is not a failure).",
    ),
    (
        "2",
        "The command line is wrong, or no input could be used: the message names the file and what is wrong with it.",
    ),
];

const EXPORTS: &[(&str, &str)] = &[
    ("0", "Done."),
    ("1", "Writing the files failed: nothing is left of them."),
    (
        "2",
        "The command line is wrong, or no input could be used: the message names the file and what is wrong with it.",
    ),
    (
        "130",
        "Interrupted (SIGINT, SIGTERM or SIGHUP): nothing was written.",
    ),
];

const CHECKS: &[(&str, &str)] = &[
    (
        "0",
        "The candidate is no worse than the baseline (git bisect: good).",
    ),
    (
        "1",
        "The candidate regressed by more than the threshold (git bisect: bad).",
    ),
    (
        "125",
        "Cannot tell: a figure missing on one side, an input that cannot be read (git bisect: skip).",
    ),
    (
        "128 or more",
        "The command line is wrong (unknown metric, malformed threshold): `git bisect run` stops instead of counting every commit bad.",
    ),
];

const RECORDS: &[(&str, &str)] = &[
    (
        "0",
        "Recorded (with a command: the command exited with 0).",
    ),
    (
        "1",
        "Recording failed, e.g. writing the trace; or the command exited with 1.",
    ),
    (
        "2",
        "Cannot record here: not root, no tracefs or BPF, an unknown event, function or device, an output in use, or a wrong command line.",
    ),
    (
        "130",
        "Interrupted (SIGINT, SIGTERM or SIGHUP): tracing stopped and what iosleuth changed was restored.",
    ),
    (
        "other",
        "With a command: its exit status, passed on.",
    ),
];

const PROBES: &[(&str, &str)] = &[
    ("0", "Done: the timings are printed."),
    (
        "1",
        "The workload's I/O failed: the message names the call and the file.",
    ),
    ("2", "The command line is wrong."),
];

const LABS: &[(&str, &str)] = &[
    (
        "0",
        "Every scenario went as expected, or was skipped (the machine lacks what it needs) or inconclusive (the machine was too noisy to tell).",
    ),
    ("1", "A scenario did not go as expected."),
    (
        "2",
        "Not root, an unknown scenario, or a wrong command line.",
    ),
    (
        "130",
        "Interrupted (SIGINT, SIGTERM or SIGHUP): everything the lab made is removed.",
    ),
];

const WATCHES: &[(&str, &str)] = &[
    ("0", "Stopped by SIGTERM or SIGINT (or --duration), the programs detached."),
    (
        "1",
        "Reading the programs' maps failed, or the BPF programs could not be loaded (the message says why).",
    ),
    (
        "2",
        "Not root, a port in use, a --dir that is not empty and not one watch made, or a wrong command line.",
    ),
];

const TRIES: &[(&str, &str)] = &[
    ("0", "Better: the change's 95 % interval excludes zero on the better side (also a dry run)."),
    ("1", "Not better: worse, or no change (the whole interval within 3 %)."),
    ("125", "Inconclusive: the rounds vary more than the change."),
    (
        "2",
        "Could not run: a setting that does not exist or that the kernel refuses, a device the workload did not touch (without --force), a workload that failed in a round; every setting is back.",
    ),
    ("130", "Interrupted (SIGINT, SIGTERM, SIGHUP); every setting is back."),
];

const PRINTS: &[(&str, &str)] = &[
    ("0", "Done."),
    ("1", "Writing failed."),
    (
        "2",
        "The command line is wrong, or a page cannot be written where asked (a device, a directory in its place).",
    ),
];

const TOP: &[(&str, &str)] = &[
    ("0", "Success."),
    (
        "1",
        "Failure: writing the output or recording failed; `check`: the candidate regressed; `lab run`: a scenario did not go as expected.",
    ),
    (
        "2",
        "The command line is wrong, or an input cannot be used.",
    ),
    ("125", "`check`: cannot tell."),
    (
        "128 or more",
        "`check`: the command line is wrong (unknown metric, malformed threshold).",
    ),
    (
        "130",
        "Interrupted (SIGINT, SIGTERM or SIGHUP), after cleaning up.",
    ),
    (
        "other",
        "`record` with a command: the command's exit status.",
    ),
];

const RECORD_FSYNC: (&str, &str) = (
    "sudo iosleuth record -o bad.cap -- iosleuth probe fsync --path /var/tmp/f",
    "Record everything the kernel's tracepoints say while the fsync probe runs.",
);

/// Each page's exit statuses, examples and related pages, by command path.
fn extra(path: &str) -> Extra {
    let (exit, examples, see_also): (_, &'static [(&str, &str)], &'static [&str]) = match path {
        "" => (
            TOP,
            &[
                (
                    "sudo iosleuth lab run all",
                    "The built-in lab: every known pathology recorded good and bad on disks it makes, diagnosed and compared.",
                ),
                RECORD_FSYNC,
                ("iosleuth report bad.cap", "Findings first, then every layer."),
                (
                    "iosleuth diff good.cap bad.cap",
                    "Figures, settings and findings of a good and a bad run side by side.",
                ),
                (
                    "iosleuth check good.cap bad.cap",
                    "Exit 0 (no worse), 1 (regressed) or 125 (cannot tell), for `git bisect run`.",
                ),
            ],
            &["blktrace(8)", "blkparse(1)", "btt(1)", "iostat(1)", "perf(1)", "trace-cmd(1)"],
        ),
        "report" => (
            READS,
            &[
                ("iosleuth report bad.cap", "Findings first, then every layer."),
                (
                    "iosleuth report bad.cap --explain all",
                    "What each rule found, or why it did not fire.",
                ),
                (
                    "iosleuth report bad.cap --format html -o report.html",
                    "One self-contained page to look at and share.",
                ),
                (
                    "sudo blktrace -d /dev/sda -w 10 && iosleuth report sda.blktrace.0",
                    "Ten seconds of blktrace on /dev/sda, read with all its per-CPU files.",
                ),
                (
                    "sudo trace-cmd record -e block -e sched sleep 10 && iosleuth report trace.dat",
                    "trace-cmd's trace.dat, read directly.",
                ),
                (
                    "sudo cat /sys/kernel/tracing/trace | iosleuth report -",
                    "The tracepoints in ftrace's buffer, from standard input.",
                ),
            ],
            &["iosleuth-record(1)", "iosleuth-diff(1)", "blkparse(1)", "btt(1)", "iostat(1)"],
        ),
        "dump" => (
            READS,
            &[
                ("iosleuth dump bad.cap | less", "Every event of a capture."),
                (
                    "iosleuth dump --events block:D,sched_switch --limit 20 trace.dat",
                    "The first 20 requests issued (blkparse's D) and context switches.",
                ),
                ("iosleuth dump --format json trace.txt.gz", "One JSON object per event."),
            ],
            &["iosleuth-report(1)", "perf-script(1)", "trace-cmd-report(1)"],
        ),
        "export" => (
            EXPORTS,
            &[
                (
                    "iosleuth export --blktrace out cap.blk && blkparse -D out -i loop0 -d dump.bin && btt -i dump.bin",
                    "blktrace files of loop0's events, then blkparse and btt on them.",
                ),
                (
                    "iosleuth export --parquet tables good.cap bad.cap",
                    "Two captures as Parquet tables (tables/requests/host=…/capture=bad.cap/part-0.parquet, …) for DuckDB or Spark.",
                ),
                (
                    "iosleuth export --perfetto bad.pftrace bad.cap",
                    "A Perfetto trace to open at ui.perfetto.dev.",
                ),
            ],
            &["blkparse(1)", "btt(1)", "iowatcher(1)", "seekwatcher(1)"],
        ),
        "flamegraph" => (
            READS,
            &[
                (
                    "sudo iosleuth record --stacks -o stacks.cap -- iosleuth probe fsync --path /var/tmp/f",
                    "A capture with on-CPU samples and the stacks where threads blocked.",
                ),
                ("iosleuth flamegraph stacks.cap -o cpu.svg", "Where the CPUs ran."),
                (
                    "iosleuth flamegraph --off-cpu stacks.cap -o blocked.svg",
                    "Where the threads blocked, by time blocked.",
                ),
                (
                    "iosleuth flamegraph perf.data -o cpu.svg",
                    "The samples of `perf record -g -a -F 99`, read directly.",
                ),
            ],
            &["iosleuth-record(1)", "iosleuth-report(1)", "perf(1)"],
        ),
        "probe" | "probe fsync" => (
            PROBES,
            &[
                (
                    "iosleuth probe fsync --path /var/tmp/f --count 200",
                    "200 writes of 8 KiB at one offset, each followed by fsync: the latency of each.",
                ),
                RECORD_FSYNC,
            ],
            &["iosleuth-record(1)"],
        ),
        "probe seqread" => (
            PROBES,
            &[(
                "iosleuth probe seqread --path /var/tmp/big --bs 4k --depth 32",
                "4 KiB direct reads of a file, 32 at a time.",
            )],
            &["iosleuth-record(1)"],
        ),
        "probe randwrite" => (
            PROBES,
            &[(
                "iosleuth probe randwrite --dir /var/tmp/rw --threads 8 --fsync --duration 5",
                "8 threads of random 16 KiB writes, each followed by fsync, for 5 seconds.",
            )],
            &["iosleuth-record(1)"],
        ),
        "probe burn" => (
            PROBES,
            &[(
                "sudo iosleuth probe burn --cpu 1 --fifo 49 --duration 3",
                "A real-time task on CPU 1 that runs 300 ms of every 600 for 3 seconds.",
            )],
            &["iosleuth-record(1)"],
        ),
        "diff" => (
            READS,
            &[
                (
                    "iosleuth diff good.cap bad.cap",
                    "Figures, settings and findings side by side, and a verdict.",
                ),
                (
                    "iosleuth diff good1.cap good2.cap good3.cap -- bad1.cap bad2.cap bad3.cap",
                    "Three runs a side: a change counts only when the two sides' ranges do not overlap.",
                ),
                (
                    "iosleuth diff good.cap bad.cap --format html -o diff.html",
                    "One page with both sides' latency distributions.",
                ),
                (
                    "iosleuth diff good.cap bad.cap --flamegraph diff.svg",
                    "Also a differential flame graph of blocked time (captures recorded with --stacks).",
                ),
            ],
            &["iosleuth-check(1)", "iosleuth-report(1)"],
        ),
        "check" => (
            CHECKS,
            &[
                (
                    "iosleuth check good.cap bad.cap",
                    "Exit 0, 1 or 125, with one line saying which figure decided.",
                ),
                (
                    "iosleuth check --threshold 20 good1.cap good2.cap -- bad1.cap bad2.cap",
                    "Two runs a side; regressed only by more than 20 % and when the ranges do not overlap.",
                ),
                (
                    "git bisect run ./bisect.sh",
                    "Where bisect.sh builds the commit, records a run (`rm -rf run.cap; sudo iosleuth record -o run.cap -- ./workload`) and ends with `exec iosleuth check good.cap run.cap`.",
                ),
            ],
            &["iosleuth-diff(1)", "git-bisect(1)"],
        ),
        "lab" | "lab run" => (
            LABS,
            &[
                ("iosleuth lab list", "The scenarios."),
                (
                    "sudo iosleuth lab run all",
                    "Every scenario, recorded good and bad, diagnosed and compared (about a minute).",
                ),
                (
                    "sudo iosleuth lab run journal --keep",
                    "One scenario, keeping its captures (their directory is printed).",
                ),
                (
                    "sudo iosleuth lab run merges --light",
                    "One scenario recorded with `record --light`.",
                ),
                (
                    "sudo iosleuth lab run all --try",
                    "Each scenario's remedy measured by `iosleuth try` on its own workload; a table at the end.",
                ),
            ],
            &["iosleuth-record(1)", "iosleuth-diff(1)"],
        ),
        "try" => (
            TRIES,
            &[
                (
                    "iosleuth try run.cap -- ./bench",
                    "The plan of the first finding's remedy: each knob, its value now, the value tried; nothing changed.",
                ),
                (
                    "sudo iosleuth try run.cap --apply -- ./bench",
                    "Five rounds a side, interleaved, each recorded; the verdict with its interval; every setting put back.",
                ),
                (
                    "sudo iosleuth try --apply --set vm.dirty_ratio=20 --metric 'stdout:tps = ' --higher-is-better -- pgbench -T 10 db",
                    "Your own setting, judged by the throughput pgbench prints.",
                ),
            ],
            &["iosleuth-report(1)", "iosleuth-record(1)", "iosleuth-lab(1)"],
        ),
        "lab list" => (
            PRINTS,
            &[("iosleuth lab list", "The scenarios, what each does and its good and bad runs.")],
            &[],
        ),
        "record" => (
            RECORDS,
            &[
                RECORD_FSYNC,
                (
                    "sudo iosleuth record -o idle.cap --duration 10",
                    "Ten seconds of the whole machine.",
                ),
                (
                    "sudo iosleuth record --events block,sched -o dd.cap -- dd if=/dev/zero of=/var/tmp/f bs=1M count=256 oflag=direct",
                    "Only the block layer's and the scheduler's events.",
                ),
                (
                    "sudo iosleuth record --stacks -o stacks.cap -- iosleuth probe fsync --path /var/tmp/f",
                    "With on-CPU samples and the stacks where threads blocked.",
                ),
                (
                    "sudo iosleuth record --light -o light.cap --duration 60",
                    "A minute of the light capture: histograms in the kernel, only the slow requests sent.",
                ),
                (
                    "sudo iosleuth record --blk sda -o cap.blk --duration 10",
                    "What blktrace records, into one file (its settings in cap.blk.snapshot.json).",
                ),
                ("iosleuth record --list-events", "The event sets and their tracepoints."),
            ],
            &["iosleuth-report(1)", "iosleuth-probe(1)", "blktrace(8)", "trace-cmd(1)"],
        ),
        "watch" => (
            WATCHES,
            &[
                (
                    "sudo iosleuth watch --dir /var/lib/iosleuth-watch",
                    "Metrics on http://127.0.0.1:19690/metrics; a diagnosed capture kept in the directory each time a trigger fires.",
                ),
                (
                    "sudo iosleuth watch --listen 0.0.0.0:19690 --trigger-p99 0 --trigger-slow 50",
                    "Scraped from other hosts; keep a capture on any request of 50 ms, not on p99 changes (counted only: no --dir).",
                ),
                (
                    "sudo iosleuth lab run slow-device --watch",
                    "Watch beside the lab's stalling device: its trigger keeps a capture diagnosed with device_latency_spike.",
                ),
            ],
            &["iosleuth-record(1)", "iosleuth-report(1)", "prometheus(1)"],
        ),
        "completions" => (
            PRINTS,
            &[
                (
                    "iosleuth completions bash > /etc/bash_completion.d/iosleuth",
                    "Completion for bash, for every user.",
                ),
                (
                    "iosleuth completions fish > ~/.config/fish/completions/iosleuth.fish",
                    "Completion for fish.",
                ),
            ],
            &[],
        ),
        "man" => (
            PRINTS,
            &[
                (
                    "iosleuth man > /usr/local/share/man/man1/iosleuth.1",
                    "The top page.",
                ),
                (
                    "sudo iosleuth man --dir /usr/local/share/man/man1",
                    "Every page: iosleuth.1, iosleuth-report.1, …",
                ),
                ("iosleuth man report | man -l -", "Read one command's page."),
            ],
            &[],
        ),
        _ => (READS, &[], &[]),
    };
    Extra {
        exit,
        examples,
        see_also,
    }
}

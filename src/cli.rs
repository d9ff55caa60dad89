//! Command line, in the style of `perf`: one binary, subcommands.

use crate::analyze::{block::BlockConfig, Analysis, Filter};
use crate::capture::blk_tracer::{sysfs_name, BlkTracerOptions, BlkTracerSession};
use crate::ingest::{open_inputs, Merger};
use crate::model::Dev;
use crate::report;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Exit code for unusable input (as documented in the README).
pub const EXIT_BAD_INPUT: i32 = 2;

#[derive(Parser, Debug)]
#[command(name = "iosleuth", version, about = "Find out why Linux I/O got slow", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq)]
enum Format {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Analyse traces: btt intervals, iostat columns, latency, sizes, processes.
    ///
    /// Reads blktrace files (per-CPU DEV.blktrace.N or `blkparse -d` output),
    /// the blk tracer's binary or text output, ftrace/trace-cmd text, perf
    /// script text and blkparse text; the format is detected from the content
    /// and several inputs are merged by time.
    Report {
        /// Trace files, or directories of blktrace files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
        /// Only this device, as MAJ,MIN (e.g. 7,0).
        #[arg(long, value_parser = parse_dev)]
        device: Option<Dev>,
        /// Only events between FROM and TO seconds (trace clock), e.g. 12.5..20.
        #[arg(long, value_parser = parse_range)]
        time: Option<(Option<u64>, Option<u64>)>,
        /// Length of one iostat interval, in seconds.
        #[arg(long, default_value = "1")]
        interval: f64,
        /// How many of the slowest operations of each kind to explain.
        #[arg(long, default_value = "5")]
        top: usize,
        /// Only these threads' operations, syscalls, fsyncs and scheduler
        /// rows (thread ids, comma-separated).
        #[arg(long, value_delimiter = ',')]
        pid: Vec<u32>,
        /// Only threads with these names (comma-separated, exact).
        #[arg(long, value_delimiter = ',')]
        comm: Vec<String>,
        /// Say what rule ID (or `all`) found, or why it did not fire.
        #[arg(long, value_name = "ID")]
        explain: Option<String>,
    },
    /// Print every decoded event, one per line in time order, with its
    /// fields (like `perf script` or `trace-cmd report`).
    Dump {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Only events whose name (with or without its system) is one of these.
        #[arg(long, value_delimiter = ',')]
        events: Vec<String>,
        /// Stop after this many events.
        #[arg(long)]
        limit: Option<u64>,
        /// `json`: one JSON object per line.
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Convert traces into files that blkparse, btt, iowatcher and
    /// seekwatcher read.
    Export {
        /// Directory for per-CPU blktrace files (NAME.blktrace.CPU).
        #[arg(long, value_name = "DIR")]
        blktrace: PathBuf,
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Built-in workloads that time each operation (and mark it in the
    /// trace when run under `iosleuth record`).
    Probe {
        #[command(subcommand)]
        kind: ProbeKind,
    },
    /// Compare a good run with a bad one: figures side by side, settings
    /// that differ, findings in one and not the other, and a verdict.
    /// `diff GOOD BAD`, or several runs a side: `diff GOOD... -- BAD...`
    /// (a change then counts only when the two sides' ranges do not
    /// overlap).
    Diff {
        #[arg(required = true)]
        baseline: Vec<PathBuf>,
        /// After `--`: the candidate's runs.
        #[arg(last = true)]
        candidate: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// For `git bisect run` and upgrade pipelines: exit 0 when CANDIDATE is
    /// no worse than BASELINE, 1 when it regressed, 125 when it cannot tell.
    ///
    /// `check GOOD BAD`, or several runs a side: `check GOOD... -- BAD...`
    /// (means compared; a change counts only when the ranges do not overlap).
    Check {
        #[arg(required = true)]
        baseline: Vec<PathBuf>,
        /// After `--`: the candidate's runs.
        #[arg(last = true)]
        candidate: Vec<PathBuf>,
        /// A figure of `iosleuth diff` (default: the first probe's p99, else
        /// the first device's D2C p99).
        #[arg(long)]
        metric: Option<String>,
        /// How much worse, in percent, counts as a regression.
        #[arg(long, default_value = "10")]
        threshold: f64,
    },
    /// Reproductions of the known pathologies on disks iosleuth makes (and
    /// removes) itself.
    Lab {
        #[command(subcommand)]
        action: LabAction,
    },
    /// Record kernel events around a workload: tracepoints through a private
    /// tracefs instance into a capture directory (default), or the kernel's
    /// `blk` tracer into one file (`--blk DEV`).
    Record {
        /// Output: a capture directory, or a file with --blk.
        #[arg(short, long, required_unless_present_any = ["list_events", "cleanup"])]
        output: Option<PathBuf>,
        /// Undo what killed iosleuth sessions left behind (instances,
        /// tracer settings), and exit. Every recording does this first.
        #[arg(long)]
        cleanup: bool,
        /// Event sets, comma-separated (see --list-events), `all`, or single
        /// tracepoints such as `block:block_rq_issue`.
        #[arg(long, default_value = "all")]
        events: String,
        /// List the event sets and their tracepoints, and exit.
        #[arg(long)]
        list_events: bool,
        /// Trace these block devices with the blk tracer instead (loop0, /dev/loop0 or 7,0).
        #[arg(long = "blk")]
        blk: Vec<String>,
        /// Write the tracer's text lines instead of binary records.
        #[arg(long)]
        text: bool,
        /// Per-CPU ring buffer size.
        #[arg(long, default_value = "16384")]
        buffer_kb: u64,
        /// Record for this many seconds when no command is given.
        #[arg(long)]
        duration: Option<f64>,
        /// The workload; its exit status becomes iosleuth's.
        #[arg(last = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
enum ProbeKind {
    /// write + fsync in a loop at the same offset (the test program of case 4).
    Fsync {
        #[arg(long)]
        path: PathBuf,
        #[arg(long, default_value = "8k", value_parser = crate::capture::probe::parse_size)]
        size: u64,
        #[arg(long, default_value = "1000")]
        count: u64,
        /// Stop after the first operation slower than this (ms).
        #[arg(long)]
        stop_above: Option<f64>,
        /// Write at growing offsets instead of rewriting the same one, so
        /// that every fsync commits the journal.
        #[arg(long)]
        append: bool,
    },
    /// Sequential direct reads submitted in batches through io_uring (case 1's pattern).
    Seqread {
        /// A file or a block device.
        #[arg(long)]
        path: PathBuf,
        #[arg(long, default_value = "4k", value_parser = crate::capture::probe::parse_size)]
        bs: u64,
        #[arg(long, default_value = "32")]
        depth: u32,
        /// How much to read (default: all of it).
        #[arg(long, value_parser = crate::capture::probe::parse_size)]
        size: Option<u64>,
    },
    /// N threads of random buffered writes, each followed by fsync (case 2's fio job).
    Randwrite {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value = "4")]
        threads: usize,
        #[arg(long, default_value = "16k", value_parser = crate::capture::probe::parse_size)]
        bs: u64,
        #[arg(long, default_value = "64m", value_parser = crate::capture::probe::parse_size)]
        file_size: u64,
        /// fsync after every write.
        #[arg(long)]
        fsync: bool,
        /// Seconds to run.
        #[arg(long, default_value = "5")]
        duration: f64,
    },
    /// Burn a CPU in bursts, optionally as a SCHED_FIFO task pinned to one
    /// CPU (case 3's real-time task).
    Burn {
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// Run as SCHED_FIFO with this priority (1-99).
        #[arg(long)]
        fifo: Option<i32>,
        #[arg(long, default_value = "300")]
        on_ms: f64,
        #[arg(long, default_value = "300")]
        off_ms: f64,
        #[arg(long, default_value = "3")]
        duration: f64,
    },
}

#[derive(Subcommand, Debug)]
enum LabAction {
    /// The scenarios.
    List,
    /// Build, record a good and a bad run, diagnose and compare them, clean up.
    Run {
        /// A scenario, or `all`.
        name: String,
        /// Keep the captures (their directory is printed).
        #[arg(long)]
        keep: bool,
    },
}

fn parse_dev(s: &str) -> Result<Dev, String> {
    Dev::parse(&s.replace(':', ","))
        .ok_or_else(|| format!("expected MAJ,MIN such as 8,0; got {s:?}"))
}

fn secs_to_ns(s: &str) -> Result<u64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("not a number of seconds: {s:?}"))?;
    if v.is_nan() || v < 0.0 || !v.is_finite() {
        return Err(format!("not a time in seconds: {s:?}"));
    }
    Ok((v * 1e9).round() as u64)
}

fn parse_range(s: &str) -> Result<(Option<u64>, Option<u64>), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("expected FROM..TO in seconds, got {s:?}"))?;
    let from = if a.is_empty() {
        None
    } else {
        Some(secs_to_ns(a)?)
    };
    let to = if b.is_empty() {
        None
    } else {
        Some(secs_to_ns(b)?)
    };
    Ok((from, to))
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
        }
    };
    match cli.cmd {
        Cmd::Report {
            paths,
            format,
            device,
            time,
            interval,
            top,
            pid,
            comm,
            explain,
        } => {
            let (from_ns, to_ns) = time.unwrap_or((None, None));
            let filter = Filter {
                device,
                from_ns,
                to_ns,
                top,
                pids: pid,
                comms: comm,
            };
            cmd_report(&paths, format, filter, interval, explain)
        }
        Cmd::Export { blktrace, inputs } => cmd_export(&blktrace, &inputs),
        Cmd::Diff {
            baseline,
            candidate,
            format,
        } => {
            let Some((base, cand)) = sides("diff", baseline, candidate) else {
                return EXIT_BAD_INPUT;
            };
            cmd_diff(&base, &cand, format)
        }
        Cmd::Lab { action } => cmd_lab(action),
        Cmd::Check {
            baseline,
            candidate,
            metric,
            threshold,
        } => {
            // Unreadable input is "cannot tell" (125) for git bisect.
            let Some((base, cand)) = sides("check", baseline, candidate) else {
                return 125;
            };
            // The headline figures need no outlier breakdowns (top 0),
            // the costliest analysis with many threads.
            let load = |paths: &[PathBuf]| -> Option<Vec<Analysis>> {
                paths
                    .iter()
                    .map(|p| {
                        load_analysis(std::slice::from_ref(p), &Filter::default(), 1.0, false).ok()
                    })
                    .collect()
            };
            let (Some(a), Some(b)) = (load(&base), load(&cand)) else {
                return 125;
            };
            let (a, b): (Vec<&Analysis>, Vec<&Analysis>) = (a.iter().collect(), b.iter().collect());
            match crate::compare::check_runs(&a, &b, metric.as_deref(), threshold) {
                crate::compare::Check::Good(l) => {
                    println!("good: {l}");
                    0
                }
                crate::compare::Check::Regressed(l) => {
                    println!("regressed: {l}");
                    1
                }
                crate::compare::Check::CannotTell(why) => {
                    println!("cannot tell: {why}");
                    125
                }
            }
        }
        Cmd::Probe { kind } => {
            use crate::capture::probe;
            let (what, target, result) = match kind {
                ProbeKind::Fsync {
                    path,
                    size,
                    count,
                    stop_above,
                    append,
                } => (
                    "fsync on",
                    path.clone(),
                    probe::fsync_loop(&path, size as usize, count, stop_above, append),
                ),
                ProbeKind::Seqread {
                    path,
                    bs,
                    depth,
                    size,
                } => (
                    "seqread on",
                    path.clone(),
                    probe::seqread(&path, bs as usize, depth, size),
                ),
                ProbeKind::Randwrite {
                    dir,
                    threads,
                    bs,
                    file_size,
                    fsync,
                    duration,
                } => (
                    "randwrite in",
                    dir.clone(),
                    probe::randwrite(
                        &dir,
                        threads.max(1),
                        bs as usize,
                        file_size,
                        fsync,
                        duration,
                    ),
                ),
                ProbeKind::Burn {
                    cpu,
                    fifo,
                    on_ms,
                    off_ms,
                    duration,
                } => (
                    "burn on CPU",
                    PathBuf::from(cpu.map(|c| c.to_string()).unwrap_or_else(|| "any".into())),
                    probe::burn(cpu, fifo, on_ms, off_ms, duration),
                ),
            };
            match result {
                Ok(r) => {
                    print!("{}", r.render());
                    0
                }
                Err(e) => {
                    eprintln!("iosleuth: probe {what} {}: {e}", target.display());
                    1
                }
            }
        }
        Cmd::Dump {
            paths,
            events,
            limit,
            format,
        } => cmd_dump(&paths, &events, limit, format),
        Cmd::Record {
            output,
            events,
            list_events,
            cleanup,
            blk,
            text,
            buffer_kb,
            duration,
            command,
        } => {
            if list_events {
                for (set, evs) in crate::capture::recorder::EVENT_SETS {
                    println!("{set}:");
                    for e in *evs {
                        println!("  {e}");
                    }
                }
                return 0;
            }
            // First thing: a signal during setup must still end in a clean stop.
            install_signal_handlers();
            if cleanup || unsafe { libc::geteuid() } == 0 {
                let root = crate::capture::tracefs::Tracefs::open().ok();
                for line in
                    crate::capture::journal::cleanup_stale(root.as_ref().map(|t| t.root.as_path()))
                {
                    eprintln!("iosleuth: cleanup: {line}");
                }
                if cleanup {
                    return 0;
                }
            }
            let output = output.expect("clap requires --output");
            if blk.is_empty() {
                cmd_record_capture(&output, &events, buffer_kb, duration, &command)
            } else {
                cmd_record(&output, &blk, text, buffer_kb, duration, &command)
            }
        }
    }
}

fn open_merged(paths: &[PathBuf]) -> Result<Merger, i32> {
    match open_inputs(paths) {
        Ok(s) if s.is_empty() => {
            eprintln!("iosleuth: no input files to read");
            Err(EXIT_BAD_INPUT)
        }
        Ok(s) => Ok(Merger::new(s)),
        Err(e) => {
            eprintln!("iosleuth: {e}");
            Err(EXIT_BAD_INPUT)
        }
    }
}

/// Reads, analyses and checks `paths` as one trace (with the snapshot a
/// capture carries); on failure, the exit code after saying why.
pub fn load_analysis(
    paths: &[PathBuf],
    filter: &Filter,
    interval: f64,
    warn: bool,
) -> Result<crate::analyze::Analysis, i32> {
    if interval.is_nan() || interval <= 0.0 || !interval.is_finite() {
        eprintln!("iosleuth: --interval must be a positive number of seconds");
        return Err(EXIT_BAD_INPUT);
    }
    let merged = open_merged(paths)?;
    let cfg = BlockConfig {
        interval_ns: ((interval * 1e9).round() as u64).max(1),
        origin_ns: filter.from_ns,
        end_ns: filter.to_ns,
    };
    let snapshot: Option<serde_json::Value> = paths.iter().find_map(|p| {
        use crate::ingest::capture_dir::{snapshot_beside, SNAPSHOT};
        let text = std::fs::read_to_string(p.join(SNAPSHOT))
            .or_else(|_| std::fs::read_to_string(snapshot_beside(p)))
            .ok()?;
        serde_json::from_str(&text).ok()
    });
    // Thread names the snapshot knows (the workload's threads, kernel
    // threads with their workqueue), for threads the trace never names.
    let known = snapshot
        .as_ref()
        .map(crate::capture::snapshot::thread_names)
        .unwrap_or_default();
    let mut a = crate::analyze::analyze_with_names(merged, filter, cfg, &known);
    a.snapshot = snapshot;
    if a.events == 0 {
        let what: Vec<String> = a
            .inputs
            .iter()
            .map(|i| {
                format!(
                    "{} ({}, {} entries could not be decoded)",
                    i.path, i.format, i.skipped
                )
            })
            .collect();
        eprintln!(
            "iosleuth: no usable events{} in {}",
            if filter.device.is_some() || filter.from_ns.is_some() || filter.to_ns.is_some() {
                " matching the filters"
            } else {
                ""
            },
            what.join(", ")
        );
        for w in &a.warnings {
            eprintln!("iosleuth: warning: {w}");
        }
        return Err(EXIT_BAD_INPUT);
    }
    if warn {
        for w in &a.warnings {
            eprintln!("iosleuth: warning: {w}");
        }
    }
    Ok(a)
}

fn cmd_report(
    paths: &[PathBuf],
    format: Format,
    filter: Filter,
    interval: f64,
    explain: Option<String>,
) -> i32 {
    let a = match load_analysis(paths, &filter, interval, true) {
        Ok(a) => a,
        Err(code) => return code,
    };
    if let Some(id) = explain {
        return explain_rules(&a, &id);
    }
    let found = crate::diagnose::diagnose(&a);
    let out = match format {
        Format::Text => report::text::render(&a, &found),
        Format::Json => report::json::render(&a, &found),
    };
    print!("{out}");
    0
}

fn default_filter() -> Filter {
    Filter {
        top: 5,
        ..Default::default()
    }
}

/// One run, analysed and diagnosed.
fn load_diagnosed(
    path: &std::path::Path,
    warn: bool,
) -> Result<(crate::analyze::Analysis, Vec<crate::diagnose::Finding>), i32> {
    let a = load_analysis(&[path.to_path_buf()], &default_filter(), 1.0, warn)?;
    let f = crate::diagnose::diagnose(&a);
    Ok((a, f))
}

/// `GOOD BAD`, or `GOOD... -- BAD...`: the two sides of diff and check.
fn sides(
    cmd: &str,
    baseline: Vec<PathBuf>,
    candidate: Vec<PathBuf>,
) -> Option<(Vec<PathBuf>, Vec<PathBuf>)> {
    if !candidate.is_empty() {
        return Some((baseline, candidate));
    }
    if baseline.len() != 2 {
        eprintln!(
            "iosleuth: {cmd} takes GOOD BAD, or GOOD... -- BAD... (got {} paths and no --)",
            baseline.len()
        );
        return None;
    }
    let mut it = baseline.into_iter();
    Some((it.next().into_iter().collect(), it.collect()))
}

/// `iosleuth diff BASELINE... [-- CANDIDATE...]`.
fn cmd_diff(baseline: &[PathBuf], candidate: &[PathBuf], format: Format) -> i32 {
    // Each run is analysed on its own.
    let load = |paths: &[PathBuf]| -> Result<Vec<_>, i32> {
        paths.iter().map(|p| load_diagnosed(p, true)).collect()
    };
    let (base, cand) = match (load(baseline), load(candidate)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(c), _) | (_, Err(c)) => return c,
    };
    let b: Vec<_> = base.iter().map(|(a, f)| (a, f.as_slice())).collect();
    let c: Vec<_> = cand.iter().map(|(a, f)| (a, f.as_slice())).collect();
    let d = crate::compare::diff_runs(&b, &c);
    match format {
        Format::Text => print!("{}", crate::compare::render_text(&d)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&d).unwrap_or_default()),
    }
    0
}

/// `iosleuth lab list` and `lab run NAME|all [--keep]`.
fn cmd_lab(action: LabAction) -> i32 {
    use crate::lab::scenarios::{find, Lab, SCENARIOS};
    match action {
        LabAction::List => {
            for s in SCENARIOS {
                println!(
                    "{:<14} {:<8} {} — good: {}; bad: {}",
                    s.name, s.case, s.about, s.good, s.bad
                );
            }
            0
        }
        LabAction::Run { name, keep } => {
            if unsafe { libc::geteuid() } != 0 {
                eprintln!("iosleuth: the lab needs root (loop devices, mounts, tracefs)");
                return EXIT_BAD_INPUT;
            }
            let chosen: Vec<_> = if name == "all" {
                SCENARIOS.iter().collect()
            } else {
                match find(&name) {
                    Some(s) => vec![s],
                    None => {
                        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
                        eprintln!(
                            "iosleuth: no lab scenario {name:?}; there are: {}, all",
                            names.join(", ")
                        );
                        return EXIT_BAD_INPUT;
                    }
                }
            };
            install_signal_handlers();
            let exe = match std::env::current_exe() {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("iosleuth: cannot find my own binary: {e}");
                    return 1;
                }
            };
            let work = crate::lab::WorkDir {
                path: std::path::PathBuf::from("/var/tmp").join(format!(
                    "iosleuth-lab-run-{}",
                    crate::capture::unique_name()
                )),
                keep,
            };
            let base = &work.path;
            let mut failed = 0;
            for s in chosen {
                if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let lab = Lab {
                    exe: exe.clone(),
                    dir: base.join(s.name),
                    stop: || INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst),
                };
                if let Err(e) = std::fs::create_dir_all(&lab.dir) {
                    eprintln!("iosleuth: {}: {e}", lab.dir.display());
                    return 1;
                }
                println!(
                    "==================== lab {} ({}) ====================",
                    s.name, s.case
                );
                println!("{}; good: {}; bad: {}\n", s.about, s.good, s.bad);
                let t = std::time::Instant::now();
                if let Err(e) = s.record(&lab) {
                    eprintln!("iosleuth: lab {}: {}", s.name, e.0);
                    failed += 1;
                    continue;
                }
                // The lab's own runs: their warnings are noise here.
                let good = load_diagnosed(&lab.good(), false);
                let ((a, fa), (b, fb)) = match (good, load_diagnosed(&lab.bad(), false)) {
                    (Ok(x), Ok(y)) => (x, y),
                    _ => {
                        failed += 1;
                        continue;
                    }
                };
                for (label, f) in [
                    (format!("good ({})", s.good), &fa),
                    (format!("bad ({})", s.bad), &fb),
                ] {
                    println!("{label}:");
                    if f.is_empty() {
                        println!("  no findings");
                    }
                    for x in f {
                        let mut one = String::new();
                        report::text::finding(&mut one, x);
                        for l in one.lines() {
                            println!("  {l}");
                        }
                    }
                    println!();
                }
                let d = crate::compare::diff(&a, &fa, &b, &fb);
                println!("diff (good -> bad):\n{}", crate::compare::render_text(&d));
                let as_expected = s.as_expected(&fa, &fb, &d);
                println!(
                    "lab {}: {} ({:.1} s){}\n",
                    s.name,
                    if as_expected {
                        "as expected"
                    } else {
                        "NOT as expected"
                    },
                    t.elapsed().as_secs_f64(),
                    match s.expect {
                        Some(id) => format!("; expected the bad run's top finding to be {id}"),
                        None => String::new(),
                    }
                );
                if !as_expected {
                    failed += 1;
                }
            }
            if keep {
                println!("captures kept in {}", base.display());
            }
            drop(work);
            if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!("iosleuth: interrupted; everything the lab made is removed");
                return 130;
            }
            (failed > 0) as i32
        }
    }
}

/// `report --explain ID|all`: each rule's finding, or why it did not fire.
fn explain_rules(a: &crate::analyze::Analysis, id: &str) -> i32 {
    use crate::diagnose::{catalog, Verdict};
    let rules: Vec<_> = catalog()
        .iter()
        .filter(|r| id == "all" || r.id == id)
        .collect();
    if rules.is_empty() {
        let ids: Vec<&str> = catalog().iter().map(|r| r.id).collect();
        eprintln!(
            "iosleuth: no rule {id:?}; the rules are: {}",
            ids.join(", ")
        );
        return EXIT_BAD_INPUT;
    }
    let mut out = String::new();
    for r in rules {
        match (r.check)(a) {
            Verdict::Fired(f) => report::text::finding(&mut out, &f),
            Verdict::NotFired(why) => {
                out.push_str(&format!("{}: not found ({}): {why}\n", r.id, r.looks_for))
            }
        }
    }
    print!("{out}");
    0
}

fn cmd_dump(paths: &[PathBuf], only: &[String], limit: Option<u64>, format: Format) -> i32 {
    use std::io::Write;
    let mut merged = match open_merged(paths) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let wanted = |ev: &crate::model::Event| -> bool {
        if only.is_empty() {
            return true;
        }
        // Compared in place: this runs for every event of the trace.
        match ev {
            crate::model::Event::Block(b) => {
                let letter = b.action.letter();
                only.iter()
                    .any(|w| w.strip_prefix("block:").unwrap_or(w) == letter)
            }
            crate::model::Event::Other(o) => {
                only.iter().any(|w| **w == *o.name || w == o.short_name())
            }
            crate::model::Event::ProcessName { .. } => false,
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut n = 0u64;
    for ev in merged.by_ref() {
        if limit.is_some_and(|l| n >= l) {
            break;
        }
        if !wanted(&ev) {
            continue;
        }
        let l = match format {
            Format::Text => report::dump::line(&ev),
            Format::Json => report::dump::json(&ev).map(|j| j.to_string()),
        };
        if let Some(l) = l {
            n += 1;
            if writeln!(out, "{l}").is_err() {
                // A closed pipe (`| head`) ends the dump quietly.
                return 0;
            }
        }
    }
    let _ = out.flush();
    for s in merged.sources() {
        for w in crate::ingest::warnings_for(s.as_ref()) {
            eprintln!("iosleuth: warning: {w}");
        }
    }
    if n == 0 && limit != Some(0) {
        eprintln!(
            "iosleuth: no events to print in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return EXIT_BAD_INPUT;
    }
    0
}

fn cmd_export(dir: &std::path::Path, inputs: &[PathBuf]) -> i32 {
    // Process names may come at the end (the blk tracer's notes): read them
    // first so that every file names its processes from the start.
    let names: std::collections::HashMap<u32, String> = match open_merged(inputs) {
        Ok(m) => m
            .filter_map(|e| match e {
                crate::model::Event::ProcessName { pid, comm } => Some((pid, comm.to_string())),
                _ => None,
            })
            .collect(),
        Err(code) => return code,
    };
    let merged = match open_merged(inputs) {
        Ok(m) => m,
        Err(code) => return code,
    };
    match report::blktrace::export(merged, dir, names) {
        Ok(sum) if sum.records == 0 => {
            eprintln!("iosleuth: no block events that blktrace can represent in the inputs; nothing written");
            EXIT_BAD_INPUT
        }
        Ok(sum) => {
            eprintln!(
                "iosleuth: wrote {} records to {} files in {} (read with: blkparse -D {} -i NAME -d out.bin; btt -i out.bin)",
                sum.records,
                sum.files.len(),
                dir.display(),
                dir.display()
            );
            if sum.skipped > 0 {
                eprintln!(
                    "iosleuth: warning: {} events have no blktrace equivalent and were left out",
                    sum.skipped
                );
            }
            0
        }
        Err(e) => {
            eprintln!("iosleuth: writing {}: {e}", dir.display());
            1
        }
    }
}

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

fn cmd_record(
    output: &std::path::Path,
    devs: &[String],
    text: bool,
    buffer_kb: u64,
    duration: Option<f64>,
    command: &[String],
) -> i32 {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("iosleuth: recording needs root (tracefs and the blk tracer are root-only): run it with sudo");
        return EXIT_BAD_INPUT;
    }
    let mut names = Vec::new();
    for d in devs {
        match sysfs_name(d) {
            Some(n) => names.push(n),
            None => {
                eprintln!("iosleuth: no block device {d:?} on this machine");
                return EXIT_BAD_INPUT;
            }
        }
    }
    install_signal_handlers();
    let before = crate::capture::snapshot::take();
    let opts = BlkTracerOptions {
        devices: names,
        binary: !text,
        buffer_kb,
        ..Default::default()
    };
    let session = match BlkTracerSession::start(&opts, output) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("iosleuth: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    let mut workload = serde_json::Value::Null;
    let status = run_workload(
        duration,
        command,
        &mut |pid| workload = crate::capture::snapshot::workload(pid),
        &|_| String::new(),
        &[],
    );
    let stopped = session.stop();
    // The settings go next to the trace, where `report` looks for them.
    let snapshot = crate::capture::snapshot::document(before, workload);
    let side = crate::ingest::capture_dir::snapshot_beside(output);
    if let Err(e) = std::fs::write(
        &side,
        serde_json::to_string_pretty(&snapshot).unwrap_or_default(),
    ) {
        eprintln!("iosleuth: warning: cannot write {}: {e}", side.display());
    }
    match stopped {
        Ok(bytes) => eprintln!(
            "iosleuth: wrote {bytes} bytes to {} (settings in {})",
            output.display(),
            side.display()
        ),
        Err(e) => {
            eprintln!("iosleuth: {e}");
            return 1;
        }
    }
    status
}

fn cmd_record_capture(
    output: &std::path::Path,
    sets: &str,
    buffer_kb: u64,
    duration: Option<f64>,
    command: &[String],
) -> i32 {
    use crate::capture::recorder::{expand_sets, RecordOptions, Recorder};
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("iosleuth: recording needs root (tracefs is root-only): run it with sudo");
        return EXIT_BAD_INPUT;
    }
    let events = match expand_sets(sets) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("iosleuth: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    install_signal_handlers();
    let opts = RecordOptions {
        events,
        buffer_kb,
        clock: "mono".into(),
    };
    let rec = match Recorder::start(&opts, output) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("iosleuth: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    if !rec.missing.is_empty() {
        eprintln!(
            "iosleuth: this kernel lacks {} of the requested events; skipped: {}",
            rec.missing.len(),
            rec.missing.join(", ")
        );
    }
    let mut rec = rec;
    let mut workload = None;
    let status = run_workload(
        duration,
        command,
        &mut |pid| workload = Some(crate::capture::snapshot::workload(pid)),
        &|t| rec.progress(t),
        &[(crate::capture::probe::MARKER_ENV, rec.trace_marker())],
    );
    if let Some(w) = workload {
        rec.set_workload(w);
    }
    match rec.stop() {
        Ok(bytes) => eprintln!(
            "iosleuth: wrote {bytes} bytes of trace to {}",
            output.display()
        ),
        Err(e) => {
            eprintln!("iosleuth: {e}");
            return 1;
        }
    }
    status
}

/// Runs the workload in its own process group (killed on Ctrl-C), or waits
/// for `duration` or Ctrl-C. Returns the exit status to report.
fn run_workload(
    duration: Option<f64>,
    command: &[String],
    on_start: &mut dyn FnMut(u32),
    progress: &dyn Fn(f64) -> String,
    envs: &[(&str, PathBuf)],
) -> i32 {
    let started = std::time::Instant::now();
    let tty = unsafe { libc::isatty(2) } == 1;
    let mut last_progress = started;
    let mut tick = || {
        if tty && last_progress.elapsed() >= std::time::Duration::from_millis(500) {
            last_progress = std::time::Instant::now();
            eprint!("\r\x1b[K{}", progress(started.elapsed().as_secs_f64()));
        }
    };
    let status = run_workload_inner(duration, command, on_start, &mut tick, envs);
    if tty {
        eprint!("\r\x1b[K");
    }
    status
}

fn run_workload_inner(
    duration: Option<f64>,
    command: &[String],
    on_start: &mut dyn FnMut(u32),
    tick: &mut dyn FnMut(),
    envs: &[(&str, PathBuf)],
) -> i32 {
    let mut status = 0;
    if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        return 130;
    }
    if !command.is_empty() {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(&command[0]);
        cmd.args(&command[1..]).process_group(0);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        // SAFETY: prctl is async-signal-safe; it runs in the child between
        // fork and exec. The workload dies with iosleuth even on SIGKILL.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn();
        if let Ok(c) = &child {
            on_start(c.id());
        }
        match child {
            Ok(mut c) => loop {
                match c.try_wait() {
                    Ok(Some(s)) => {
                        status = s.code().unwrap_or(1);
                        break;
                    }
                    Ok(None) => {}
                    Err(_) => break,
                }
                if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
                    unsafe {
                        libc::kill(-(c.id() as i32), libc::SIGTERM);
                    }
                    let _ = c.wait();
                    status = 130;
                    break;
                }
                tick();
                std::thread::sleep(std::time::Duration::from_millis(10));
            },
            Err(e) => {
                eprintln!("iosleuth: cannot run {:?}: {e}", command[0]);
                status = 127;
            }
        }
    } else {
        let end =
            duration.map(|d| std::time::Instant::now() + std::time::Duration::from_secs_f64(d));
        while !INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
            && end.is_none_or(|e| std::time::Instant::now() < e)
        {
            tick();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    status
}

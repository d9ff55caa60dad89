//! `iosleuth record`: tracepoints through a private tracefs instance into
//! a capture directory, or the kernel's `blk` tracer into one file.

use crate::capture::blk_tracer::{sysfs_name, BlkTracerOptions, BlkTracerSession};
use crate::capture::mapped_files::MappedFiles;
use crate::capture::memory_cgroups::MemoryCgroups;
use crate::capture::proc_files::process_tree;
use crate::capture::recorder::{expand_sets, RecordOptions, Recorder};
use crate::capture::workload::{self, Workload};
use crate::capture::{journal, probe, snapshot, tracefs::Tracefs};
use crate::error::{Error, ExitStatus, Result};
use crate::model::event_sets::EVENT_SETS;
use crate::report::output_file::OutputFile;
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct RecordArgs {
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
    // The blk tracer records block events alone: no event sets, stacks
    // or functions to ask for.
    #[arg(long = "blk", conflicts_with_all = ["events", "stacks", "functions"])]
    blk: Vec<String>,
    /// With --blk: write the tracer's text lines instead of binary records.
    #[arg(long, requires = "blk")]
    text: bool,
    /// Also record kernel stacks: on-CPU samples of every CPU (--freq,
    /// through perf_event_open) and where threads block (the stack of
    /// every switch away from a CPU while not runnable: a `stacktrace`
    /// trigger on sched_switch in the private instance; adds the sched
    /// events), for `report --format folded [--off-cpu]` and `flamegraph`.
    #[arg(long)]
    stacks: bool,
    /// Kernel functions whose latency to measure (comma-separated), shown
    /// by `report` as funclatency's histograms: every call, through the
    /// function's entry and return tracepoints where it has them
    /// (ext4_sync_file, ext4_writepages, …); any other function, by the
    /// time threads blocked inside it (adds the off-CPU stacks of
    /// --stacks). An unknown name stops before the workload starts.
    #[arg(long = "func", value_delimiter = ',', value_name = "FUNCTIONS")]
    functions: Vec<String>,
    /// On-CPU sampling frequency of --stacks (Hz), as perf's -F.
    #[arg(long, requires = "stacks", default_value = "99", value_parser = clap::value_parser!(u64).range(1..=10000))]
    freq: u64,
    /// A capture that can stay on: BPF programs keep each request's state
    /// and histograms of its stages in the kernel, and send only the slow
    /// requests (see --slow). Needs the kernel's BTF; `report`, `diff` and
    /// `check` read the capture.
    #[arg(long, conflicts_with_all = ["blk", "stacks", "functions", "text", "events", "buffer_kb"])]
    light: bool,
    /// With --light: a request is slow from this many milliseconds
    /// (allocation to completion); by default from the running p99 of its
    /// device and operation (10 ms until it has 100 requests, never under 1 ms).
    #[arg(long, requires = "light", value_name = "MS")]
    slow: Option<f64>,
    /// With --light: slow requests sent per second at most; the others are
    /// counted, and the report says how many.
    #[arg(long, requires = "light", default_value = "1000", value_name = "N")]
    slow_cap: u32,
    /// With --light: also measure the BPF programs' own run time
    /// (BPF_ENABLE_STATS; costs two clock reads per run).
    #[arg(long, requires = "light")]
    bpf_stats: bool,
    /// With --light: load only empty programs on the issue and complete
    /// hooks (the overhead benchmark's floor); the capture has no data.
    #[arg(long, requires = "light", hide = true)]
    light_floor: bool,
    /// With --light: also empty programs on the hooks timing page faults
    /// would need (page_fault_user, mm_filemap_fault, sys_enter): the
    /// benchmark's measure of their floor.
    #[arg(long, requires = "light", hide = true)]
    light_floor_faults: bool,
    /// With --light: how a request's stages are measured (see
    /// docs/recording.md): from the request's own timestamps (`stamps`,
    /// the cheaper) or from per-request state (`state`).
    #[arg(long, requires = "light", value_enum, default_value = "stamps")]
    accounting: super::args::AccountingArg,
    /// With --light: watch runqueue waits (the scheduler's hooks); `off`
    /// saves their cost and the report says they were not watched.
    #[arg(long, requires = "light", value_enum, default_value = "on")]
    runqueue: super::args::OnOff,
    /// With --light: record hard and soft interrupt time per CPU (the
    /// interrupts' hooks: two clock reads per interrupt, about 45 ns per
    /// I/O here); `off` (the default) leaves them unknown.
    #[arg(long, requires = "light", value_enum, default_value = "off")]
    irq: super::args::OnOff,
    /// Per-CPU ring buffer size, in KiB (not with --light, whose BPF ring
    /// has a size of its own).
    #[arg(long, default_value = "16384")]
    buffer_kb: u64,
    /// Record for this many seconds when no command is given.
    #[arg(long)]
    duration: Option<f64>,
    /// The workload; its exit status becomes iosleuth's.
    #[arg(last = true)]
    command: Vec<String>,
}

impl RecordArgs {
    fn light_options(&self) -> crate::capture::light::LightOptions {
        crate::capture::light::LightOptions {
            slow_ns: self.slow.map(|ms| (ms * 1e6) as u64),
            cap_per_s: self.slow_cap,
            bpf_stats: self.bpf_stats,
            floor: self.light_floor,
            fault_floor: self.light_floor_faults,
            accounting: self.accounting.into(),
            runqueue: self.runqueue == super::args::OnOff::On,
            irq: self.irq == super::args::OnOff::On,
            ..Default::default()
        }
    }
}

pub(super) fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

pub fn run(args: RecordArgs) -> Result<ExitStatus> {
    if args.list_events {
        let mut out = std::io::stdout().lock();
        for (set, evs) in EVENT_SETS {
            writeln!(out, "{set}:")?;
            for e in *evs {
                writeln!(out, "  {e}")?;
            }
        }
        return Ok(ExitStatus::SUCCESS);
    }
    // First thing: a signal during setup must still end in a clean stop.
    workload::install_signal_handlers();
    if args.cleanup || is_root() {
        let root = Tracefs::open().ok();
        for line in journal::cleanup_stale(root.as_ref().map(|t| t.root.as_path())) {
            note!("iosleuth: cleanup: {line}");
        }
        if args.cleanup {
            return Ok(ExitStatus::SUCCESS);
        }
    }
    let output = args.output.clone().expect("clap requires --output");
    let status = if args.light {
        super::record_light::record(&output, &args.light_options(), &args.command, args.duration)?
    } else if args.blk.is_empty() {
        record_capture(&output, &args)?
    } else {
        record_blk(&output, &args)?
    };
    Ok(ExitStatus(status))
}

/// One round of `iosleuth try --full`: the full recorder with `events`
/// (sets as `--events` takes them) around `command`; its exit status and
/// wall time (s).
pub(super) fn full_round(
    output: &Path,
    events: &str,
    command: &[String],
    stdout: &Path,
) -> Result<(i32, f64)> {
    #[derive(clap::Parser)]
    struct Record {
        #[command(flatten)]
        args: RecordArgs,
    }
    let mut argv: Vec<std::ffi::OsString> = vec!["record".into(), "-o".into(), output.into()];
    argv.extend(["--events".into(), events.into(), "--".into()]);
    argv.extend(command.iter().map(Into::into));
    let r = <Record as clap::Parser>::try_parse_from(argv)
        .map_err(|e| Error::bad_input(format!("--events {events}: {e}")))?;
    record_capture_timed(output, &r.args, Some(stdout))
}

/// The full recorder: every event set asked for, the snapshot, the
/// workload's threads.
fn record_capture(output: &Path, args: &RecordArgs) -> Result<i32> {
    record_capture_timed(output, args, None).map(|(status, _)| status)
}

/// `record_capture`, also returning the workload's wall time (s); the
/// command's standard output into `stdout` when given.
fn record_capture_timed(
    output: &Path,
    args: &RecordArgs,
    stdout: Option<&Path>,
) -> Result<(i32, f64)> {
    if !is_root() {
        return Err(Error::bad_input(
            "recording needs root (tracefs is root-only): run it with sudo",
        ));
    }
    // Before anything is set up: what is there is not ours to write over.
    crate::report::output_file::refuse_used_directory(output)?;
    let mut events = expand_sets(&args.events).map_err(Error::BadInput)?;
    let (brackets, blocked) = plan_functions(&args.functions)?;
    events.extend(brackets);
    let off_cpu_stacks = args.stacks || blocked;
    if off_cpu_stacks && !events.contains(&"sched/sched_switch") {
        events.push("sched/sched_switch");
    }
    workload::install_signal_handlers();
    let opts = RecordOptions {
        events,
        buffer_kb: args.buffer_kb,
        clock: "mono".into(),
        off_cpu_stacks,
        sample_freq: args.stacks.then_some(args.freq),
        functions: args.functions.clone(),
    };
    let mut rec = Recorder::start(&opts, output)?;
    if !rec.missing.is_empty() {
        note!(
            "iosleuth: this kernel lacks {} of the requested events; skipped: {}",
            rec.missing.len(),
            rec.missing.join(", ")
        );
    }
    let mut sample = None;
    let marker = [(probe::MARKER_ENV, rec.trace_marker())];
    // The files the command maps, read while it runs (every half second):
    // a page fault's events name its file by device and inode only. The
    // memory cgroups it runs in, whose limits bound its page cache: its
    // own process's at each look (it may move itself into one).
    let mapped = std::cell::RefCell::new(MappedFiles::default());
    let memcg = std::cell::RefCell::new(MemoryCgroups::default());
    let poll = |pid| memcg.borrow_mut().sample_one(pid);
    let w = Workload {
        command: &args.command,
        duration: args.duration,
        envs: &marker,
        stdout,
        poll: Some(&poll),
    };
    let root = std::cell::Cell::new(None);
    let started = std::time::Instant::now();
    // One walk of /proc for both.
    let sample_tree = |pid| {
        let tree = process_tree(pid);
        mapped.borrow_mut().sample(&tree);
        memcg.borrow_mut().sample(&tree);
    };
    let status = workload::run(
        &w,
        &mut |pid| {
            root.set(Some(pid));
            sample_tree(pid);
            sample = Some(snapshot::workload(pid));
        },
        &|t| {
            if let Some(pid) = root.get() {
                sample_tree(pid);
            }
            rec.progress(t)
        },
    );
    let seconds = started.elapsed().as_secs_f64();
    if let Some(mut s) = sample {
        if let Some(o) = s.as_object_mut() {
            o.insert("mapped_files".into(), mapped.borrow().to_json());
            o.insert("memory_limits".into(), memcg.borrow().to_json());
        }
        rec.set_workload(s);
    }
    let bytes = rec.stop().map_err(|e| Error::failed(e.message()))?;
    note!(
        "iosleuth: wrote {bytes} bytes of trace to {}",
        output.display()
    );
    Ok((status, seconds))
}

/// `--func`: the entry and return tracepoints to add, and whether any
/// function is measured from off-CPU stacks (each said on stderr).
fn plan_functions(functions: &[String]) -> Result<(Vec<&'static str>, bool)> {
    use crate::capture::functions::{plan, Plan};
    if functions.is_empty() {
        return Ok((Vec::new(), false));
    }
    let tracefs = Tracefs::open()?;
    let kallsyms = std::fs::read_to_string("/proc/kallsyms")
        .map_err(|e| Error::bad_input(format!("--func: cannot read /proc/kallsyms: {e}")))?;
    let (mut events, mut blocked) = (Vec::new(), false);
    for (name, p) in plan(functions, &tracefs.root, &kallsyms).map_err(Error::BadInput)? {
        match p {
            Plan::Calls { entry, exit } => {
                note!("iosleuth: --func {name}: every call, from {entry} to {exit}");
                events.extend(expand_sets(&format!("{entry},{exit}")).map_err(Error::BadInput)?);
            }
            Plan::Blocked => {
                blocked = true;
                note!(
                    "iosleuth: --func {name}: no entry/return tracepoints; measured where threads block inside it (off-CPU stacks)"
                );
            }
        }
    }
    Ok((events, blocked))
}

/// The kernel's `blk` tracer (what blktrace records) into one file, the
/// snapshot beside it.
fn record_blk(output: &Path, args: &RecordArgs) -> Result<i32> {
    if !is_root() {
        return Err(Error::bad_input(
            "recording needs root (tracefs and the blk tracer are root-only): run it with sudo",
        ));
    }
    let devices = args
        .blk
        .iter()
        .map(|d| {
            sysfs_name(d)
                .ok_or_else(|| Error::bad_input(format!("no block device {d:?} on this machine")))
        })
        .collect::<Result<Vec<_>>>()?;
    // The trace and the settings beside it are written under temporary
    // names and renamed into place when the recording stops.
    let side = crate::model::capture_layout::snapshot_beside(output);
    let (trace, settings) = (
        OutputFile::check(output, &[])?,
        OutputFile::check(&side, &[])?,
    );
    let staged = trace.stage()?;
    workload::install_signal_handlers();
    let before = snapshot::take();
    let opts = BlkTracerOptions {
        devices,
        binary: !args.text,
        buffer_kb: args.buffer_kb,
        ..Default::default()
    };
    let session = BlkTracerSession::start(&opts, staged.path())?;
    let mut sample = serde_json::Value::Null;
    let w = Workload {
        command: &args.command,
        duration: args.duration,
        envs: &[],
        stdout: None,
        poll: None,
    };
    let status = workload::run(&w, &mut |pid| sample = snapshot::workload(pid), &|_| {
        String::new()
    });
    let stopped = session.stop();
    // What was recorded goes in place even when stopping failed, as it
    // would have had it been written there.
    let placed = staged.commit();
    // The settings go next to the trace, where `report` looks for them.
    let doc = snapshot::document(before, sample);
    let json = serde_json::to_string_pretty(&doc).unwrap_or_default();
    if let Err(e) = settings.write(json.as_bytes()) {
        super::warn(&e.to_string());
    }
    placed?;
    let bytes = stopped.map_err(|e| Error::failed(e.message()))?;
    note!(
        "iosleuth: wrote {bytes} bytes to {} (settings in {})",
        output.display(),
        side.display()
    );
    Ok(status)
}

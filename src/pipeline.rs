//! The one place that wires the stages of DESIGN.md together: paths →
//! sources (ingest) → one time-ordered stream → analyses (with the
//! snapshot a capture carries and the thread names it knows) → findings
//! (diagnose). The command line only calls these.

use crate::analyze::rows::{self, RowCounts, RowSinks, RowWriters};
use crate::analyze::{self, block::BlockConfig, Analysis, Filter, InputSummary};
use crate::diagnose::{self, Finding};
use crate::error::{Error, Result};
use crate::ingest::{self, Merger};
use crate::model::snapshot::Snapshot;
use crate::model::{Dev, Event};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};

mod provenance;
pub use provenance::{comparison_warnings, Inputs, Tap};

/// How to read and analyze the inputs.
#[derive(Clone, Debug)]
pub struct Options {
    pub filter: Filter,
    /// Length of one iostat interval, seconds.
    pub interval_s: f64,
    /// Where exports receive rows while the analyses run (nothing by
    /// default). The channels close when these options are dropped.
    pub rows: RowSinks,
    /// Keep every request's latency for the HTML page's plots (up to a
    /// million points a device: 32 MiB); other outputs need none.
    pub request_timeline: bool,
}

impl Default for Options {
    /// What `diff`, `check` and the lab use: five outliers of each kind,
    /// 1 s iostat intervals, nothing filtered.
    fn default() -> Options {
        Options {
            filter: Filter {
                top: 5,
                ..Default::default()
            },
            interval_s: 1.0,
            rows: Default::default(),
            request_timeline: false,
        }
    }
}

/// One run: its analysis, the findings of the rule catalog, and what its
/// inputs were (for [`comparison_warnings`]).
pub struct Run {
    pub analysis: Analysis,
    pub findings: Vec<Finding>,
    pub inputs: Inputs,
}

/// Every input opened and merged by time, as blkparse merges per-CPU files.
pub fn open(paths: &[PathBuf]) -> Result<Merger> {
    let sources = ingest::open_inputs(paths)?;
    if sources.is_empty() {
        return Err(Error::bad_input("no input files to read"));
    }
    Ok(Merger::new(sources))
}

/// Like [`open`], each source noted with its input: the events of
/// [`Marked::events`] leave their marks, and once the stream is read
/// [`Tap::inputs`] tells what the inputs were (one run twice, different
/// recordings).
pub fn open_marked(paths: &[PathBuf]) -> Result<Marked> {
    open_sampling(paths, true)
}

/// [`open_marked`]; `sample`: whether block events are sampled to tell
/// one run from another (only what compares inputs needs them).
fn open_sampling(paths: &[PathBuf], sample: bool) -> Result<Marked> {
    let (sources, tap) = provenance::open(paths, sample)?;
    if sources.is_empty() {
        return Err(Error::bad_input("no input files to read"));
    }
    Ok(Marked {
        merger: Merger::new(sources),
        tap,
    })
}

/// The merged inputs, and the record of what each input's events were.
pub struct Marked {
    pub merger: Merger,
    pub tap: Tap,
}

impl Marked {
    /// Fills `batch` with the next [`BATCH`] events in time order (fewer
    /// only at the end), each marking its input's record, and counts them
    /// on `progress`.
    fn fill(&mut self, batch: &mut Vec<Event>, progress: &crate::progress::Progress) {
        let Marked { merger, tap } = self;
        merger.fill(batch, BATCH, |source, e| tap.see(source, e));
        progress.add_events(batch.len() as u64);
    }

    /// The events in time order, each marking its input's record on the
    /// way (no wrapper around each source: one call and one copy less
    /// per event).
    pub fn events(&mut self) -> impl Iterator<Item = Event> + '_ {
        let Marked { merger, tap } = self;
        std::iter::from_fn(move || {
            let (source, e) = merger.next_sourced()?;
            tap.see(source, &e);
            Some(e)
        })
    }
}

/// Each input's system snapshot (a capture directory's, or the one
/// `record --blk` writes beside its file), and a warning for each snapshot
/// that is there but cannot be read (the report then goes without the
/// settings it holds). Read once: the report takes the first input's that
/// has one, provenance each input's times and system.
pub fn snapshots_of(paths: &[PathBuf]) -> (Vec<Option<Snapshot>>, Vec<String>) {
    use crate::model::capture_layout::{snapshot_beside, SNAPSHOT};
    /// A snapshot is a few hundred KiB; more is not one.
    const LIMIT: u64 = 256 << 20;
    let mut warnings = Vec::new();
    let mut of_path = |p: &PathBuf| -> Option<Snapshot> {
        if ingest::files::is_stdin(p) {
            return None;
        }
        for file in [p.join(SNAPSHOT), snapshot_beside(p)] {
            // No snapshot is no problem: most traces come without one.
            if std::fs::symlink_metadata(&file).is_err() {
                continue;
            }
            match ingest::files::read_small(&file, LIMIT).and_then(|t| Snapshot::read(&t)) {
                Ok(s) => return Some(s),
                Err(e) => warnings.push(format!(
                    "{}: unreadable snapshot, ignored ({e}); the report goes without the system's settings",
                    file.display()
                )),
            }
        }
        None
    };
    let snapshots = paths.iter().map(&mut of_path).collect();
    (snapshots, warnings)
}

/// Reads and analyses `paths` as one trace. Fails with a message naming
/// the files when nothing usable is left.
pub fn analyze(paths: &[PathBuf], opts: &Options) -> Result<Analysis> {
    // One input is never one run twice: its block events need no sample.
    read_sampling(paths, opts, paths.len() > 1).map(|(a, _)| a)
}

/// [`analyze`], with what the inputs were. Refuses two inputs that are one
/// run recorded twice (every request would count twice) and warns, first,
/// when the inputs are different recordings merged as one trace.
pub fn read(paths: &[PathBuf], opts: &Options) -> Result<(Analysis, Inputs)> {
    read_sampling(paths, opts, true)
}

/// [`read`]; `sample` as [`open_sampling`] takes it: without it the
/// inputs tell no run from another.
fn read_sampling(paths: &[PathBuf], opts: &Options, sample: bool) -> Result<(Analysis, Inputs)> {
    let started = std::time::Instant::now();
    let interval = opts.interval_s;
    if interval.is_nan() || interval <= 0.0 || !interval.is_finite() {
        return Err(Error::bad_input(
            "--interval must be a positive number of seconds",
        ));
    }
    let (functions, enabled) = recorded(paths);
    let (snapshots, snapshot_warnings) = snapshots_of(paths);
    let mut filter = opts.filter.clone();
    if filter.functions.is_empty() {
        filter.functions = functions;
    }
    // The workload is the recorded command's process tree when the trace
    // holds the forks to follow it; else every thread's syscalls.
    let forks = enabled
        .as_ref()
        .is_some_and(|e| e.iter().any(|x| x.ends_with("sched_process_fork")));
    if forks && paths.len() == 1 {
        filter.workload_root = snapshots
            .iter()
            .flatten()
            .next()
            .and_then(|s| s.workload.pid)
            .and_then(|p| u32::try_from(p).ok());
    }
    if let Some(name) = filter.device_name.take() {
        filter.device = Some(device_named(&name, paths, &snapshots)?);
    }
    let mut marked = open_sampling(paths, sample)?;
    let progress = crate::progress::Progress::new("reading");
    // The first batch is read before the analysis starts: its first event
    // is the trace's start, which a relative `--time` counts from.
    let mut first = Vec::with_capacity(BATCH);
    marked.fill(&mut first, &progress);
    let start = first.iter().find_map(Event::ts);
    let mut whole_last_ns = 0;
    if filter.relative_time {
        let at = |s: Option<u64>| s.map(|s| s.saturating_add(start.unwrap_or(0)));
        (filter.from_ns, filter.to_ns) = (at(filter.from_ns), at(filter.to_ns));
        filter.relative_time = false;
    }
    let filter = &filter;
    // The time window's start and end come from the filter (analyze).
    let cfg = BlockConfig {
        interval_ns: ((interval * 1e9).round() as u64).max(1),
        // iostat's intervals count from the trace's start (or the time
        // window's), the clock every output prints times in.
        origin_ns: filter.from_ns.or(start),
        rows: opts.rows.clone(),
        request_timeline: opts.request_timeline,
        block_only: marked.merger.sources().iter().all(|s| s.block_only()),
        ..Default::default()
    };
    // Thread names the snapshot knows (the workload's threads, kernel
    // threads with their workqueue), for threads the trace never names.
    let known = snapshots
        .iter()
        .flatten()
        .next()
        .map(Snapshot::thread_names)
        .unwrap_or_default();
    let mut first = Some(first);
    let mut a = analyze_beside(
        |batch| {
            match first.take() {
                Some(f) => *batch = f,
                None => marked.fill(batch, &progress),
            }
            // The trace's end, for a filter that keeps nothing.
            if let Some(ts) = batch.iter().rev().find_map(Event::ts) {
                whole_last_ns = whole_last_ns.max(ts);
            }
        },
        |batches, done| {
            let done = |b| {
                let _ = done.send(b);
            };
            analyze::analyze_batches(batches.into_iter(), done, filter, cfg, &known)
        },
    );
    drop(progress);
    let Marked { merger, tap } = marked;
    account_for_sources(&mut a, &merger);
    let lights = light_inputs(paths)?;
    for light in &lights {
        analyze::light::apply(&mut a, light);
    }
    a.warnings.extend(snapshot_warnings);
    a.trace_start_ns = start;
    a.recorded.enabled = enabled;
    // Faults the kernel took: none is 0 only where their event was recorded.
    let faults = &mut a.outliers.faults;
    if faults.recorded && a.recorded.has_event("exceptions/page_fault_kernel") == Some(true) {
        faults.in_kernel.get_or_insert(0);
    }
    let inputs = tap.inputs(&snapshots);
    a.snapshot = snapshots.into_iter().flatten().next();
    a.cache.kernel = a
        .snapshot
        .as_ref()
        .and_then(crate::analyze::cache::kernel_counts);
    if let Some(s) = &a.snapshot {
        a.outliers.name_files(&s.workload.mapped_files);
    }
    // A light capture without a slow request still has its histograms.
    if a.events == 0 && lights.is_empty() {
        let whole = start.map(|first| (first, whole_last_ns));
        return Err(nothing_usable(&a, filter, whole, paths));
    }
    inputs.refuse_one_run_twice()?;
    if let Some(w) = inputs.different_recordings() {
        a.warnings.insert(0, w);
    }
    if crate::cli::verbose() {
        eprint!("{}", read_details(&a, started.elapsed()));
    }
    Ok((a, inputs))
}

/// What `-v` says about a read: each input, the speed, the event sets and
/// the events no analysis used.
fn read_details(a: &Analysis, took: std::time::Duration) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for i in &a.inputs {
        let _ = writeln!(
            out,
            "iosleuth: read {} ({}): {} events, {} skipped, {} lost",
            crate::report::escape(&i.path),
            i.format,
            i.events,
            i.skipped,
            i.lost_events
        );
    }
    let secs = took.as_secs_f64();
    let _ = writeln!(
        out,
        "iosleuth: analyzed {} events in {:.3} s ({:.2} M events/s); time zero {} on the trace clock",
        a.events,
        secs,
        a.events as f64 / secs.max(1e-9) / 1e6,
        {
            let o = crate::report::origin_ns(a);
            format!("{}.{:09}", o / 1_000_000_000, o % 1_000_000_000)
        }
    );
    let sets: Vec<&str> = crate::model::event_sets::EVENT_SETS
        .iter()
        .map(|(set, _)| *set)
        .filter(|s| a.recorded_set(s))
        .collect();
    let missing = a.not_recorded();
    let _ = writeln!(
        out,
        "iosleuth: event sets recorded: {}; not recorded: {}",
        if sets.is_empty() {
            "none".to_string()
        } else {
            sets.join(", ")
        },
        if missing.is_empty() {
            "none".to_string()
        } else {
            missing.join(", ")
        }
    );
    if !a.unknown_events.is_empty() {
        let names: Vec<String> = a
            .unknown_events
            .iter()
            .map(|(n, c)| format!("{} ({c})", crate::report::escape(n)))
            .collect();
        let _ = writeln!(out, "iosleuth: events not analyzed: {}", names.join(", "));
    }
    out
}

/// Events handed from the reading thread to the analyzing one at a time
/// (4096 rather than 1024: a tenth less CPU on blktrace files, fewer
/// wake-ups of the other thread).
const BATCH: usize = 4096;
/// Batches on their way at most: bounds the memory between the two
/// (about 1.4 MB).
const BATCHES_IN_FLIGHT: usize = 4;

/// Runs `analyze` on its own thread over the batches `fill` fills (with
/// [`BATCH`] events, fewer only at the end) on this one, which reads:
/// decoding and merging the inputs, and analyzing their events, each take a
/// core (on blktrace files they take 40 % and 60 % of the time). The order
/// of the events is unchanged. `analyze` hands each batch back once done
/// (an unbounded channel: it never waits for this thread, which may be
/// waiting for it); this thread empties it for the next batch, so that the
/// events are freed where they were allocated.
fn analyze_beside<T: Send>(
    mut fill: impl FnMut(&mut Vec<Event>),
    analyze: impl FnOnce(Receiver<Vec<Event>>, Sender<Vec<Event>>) -> T + Send,
) -> T {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Event>>(BATCHES_IN_FLIGHT);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<Vec<Event>>();
        let analyzing = scope.spawn(move || analyze(rx, done_tx));
        loop {
            let mut batch = match done_rx.try_recv() {
                Ok(mut used) => {
                    used.clear();
                    used
                }
                Err(_) => Vec::with_capacity(BATCH),
            };
            fill(&mut batch);
            let last = batch.len() < BATCH;
            // Only a panicking analysis hangs up; join says why.
            if batch.is_empty() || tx.send(batch).is_err() || last {
                break;
            }
        }
        drop(tx);
        let result = analyzing
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        drop(done_rx);
        result
    })
}

/// One input analyzed with `base`'s options while `writers` write the
/// rows it sends (exports), each kind on a thread of its own
/// ([`rows::drive`]). Returns the analysis and, apart, the rows written or
/// the first write error, which the exporter names its output with.
pub fn analyze_writing(
    input: &Path,
    base: &Options,
    writers: RowWriters<'_>,
) -> (Result<(Analysis, Inputs)>, std::io::Result<RowCounts>) {
    rows::drive(writers, |sinks| read_sending(input, base, sinks))
}

/// One input analyzed with `base`'s options while its rows go to `rows`.
/// The senders are dropped on return, which ends the writers' loops.
fn read_sending(input: &Path, base: &Options, rows: RowSinks) -> Result<(Analysis, Inputs)> {
    let opts = Options {
        rows,
        ..base.clone()
    };
    read(&[input.to_path_buf()], &opts)
}

/// What the captures among `paths` were recorded with, from their
/// manifests: the functions to measure (`record --func`), in order, once
/// each; and the events enabled, when every input is a capture that
/// lists them (else `None`: the inputs do not say).
fn recorded(paths: &[PathBuf]) -> (Vec<String>, Option<Vec<String>>) {
    use crate::model::capture_layout::{is_capture, MANIFEST};
    let (mut functions, mut enabled): (Vec<String>, Option<Vec<String>>) =
        (Vec::new(), Some(Vec::new()));
    for p in paths {
        // An unreadable manifest is the capture reader's to report.
        let manifest = is_capture(p)
            .then(|| ingest::files::read_small(&p.join(MANIFEST), 1 << 20).ok())
            .flatten()
            .and_then(|text| crate::model::manifest::Manifest::parse(&text).ok());
        let Some(m) = manifest else {
            enabled = None;
            continue;
        };
        for f in m.functions {
            if !functions.contains(&f) {
                functions.push(f);
            }
        }
        match (&mut enabled, m.events.is_empty()) {
            (Some(all), false) => all.extend(m.events),
            _ => enabled = None,
        }
    }
    (functions, enabled.filter(|e| !e.is_empty()))
}

/// What the light captures among `paths` counted in the kernel
/// (`light.json`), their long runqueue waits and slowest requests; an
/// unreadable one stops the report, since its requests would otherwise go
/// uncounted.
fn light_inputs(paths: &[PathBuf]) -> Result<Vec<ingest::light::LightInputs>> {
    use crate::model::capture_layout::is_capture;
    use crate::model::light::LIGHT;
    paths
        .iter()
        .filter(|p| is_capture(p) && p.join(LIGHT).exists())
        .map(|p| ingest::light::load(p).map_err(Error::from))
        .collect()
}

/// The inputs' summaries, and what they could not read first among the
/// warnings.
fn account_for_sources(a: &mut Analysis, merged: &Merger) {
    for s in merged.sources() {
        let st = s.stats();
        a.inputs.push(InputSummary {
            path: s.path().display().to_string(),
            format: s.format().to_string(),
            events: st.events,
            skipped: st.skipped,
            lost_events: st.lost_events,
        });
    }
    a.warnings.splice(0..0, merged.warnings());
}

/// `whole`: the input's first and last event, if it had one.
fn nothing_usable(
    a: &Analysis,
    filter: &Filter,
    whole: Option<(u64, u64)>,
    paths: &[PathBuf],
) -> Error {
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
    let mut msg = format!(
        "no usable events{} in {}",
        if filter.device.is_some() || filter.from_ns.is_some() || filter.to_ns.is_some() {
            " matching the filters"
        } else {
            ""
        },
        what.join(", ")
    );
    // Which window would have held events.
    let timed = filter.from_ns.is_some() || filter.to_ns.is_some();
    if let (true, Some((first, last))) = (timed, whole) {
        let abs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
        msg.push_str(&format!(
            "; the trace spans --time 0..{:.6} (seconds after its start), abs:{}..{} in its clock",
            last.saturating_sub(first) as f64 / 1e9,
            abs(first),
            abs(last)
        ));
    }
    if filter.device.is_some() {
        msg.push_str(&format!(
            "; {}",
            devices_in(paths, a.snapshot.iter().collect::<Vec<_>>().as_slice())
        ));
    }
    // The warnings say why (undecodable lines, lost events).
    for w in &a.warnings {
        msg.push_str(&format!("\niosleuth: warning: {w}"));
    }
    Error::bad_input(msg)
}

/// `--device NAME`'s `MAJ,MIN`: from the inputs' own settings when they
/// have any (a capture names the devices of the machine it was recorded
/// on), else from this machine's `/sys/class/block/NAME/dev`. An unknown
/// name is exit 2, listing the devices of the trace.
fn device_named(name: &str, paths: &[PathBuf], snapshots: &[Option<Snapshot>]) -> Result<Dev> {
    let known: Vec<&Snapshot> = snapshots
        .iter()
        .flatten()
        .filter(|s| !s.before.block_devices.is_empty())
        .collect();
    let found = match known.is_empty() {
        false => known.iter().find_map(|s| s.dev_named(name)),
        // sysfs names have no `/` (and `..` must not climb out of it).
        true if name.contains('/') || name == ".." => None,
        true => std::fs::read_to_string(Path::new("/sys/class/block").join(name).join("dev"))
            .ok()
            .map(|d| d.trim().to_string()),
    };
    if let Some(d) = found
        .as_deref()
        .and_then(|d| Dev::parse(&d.replace(':', ",")))
    {
        return Ok(d);
    }
    let whose = match known.is_empty() {
        false => "in the settings the trace was recorded with",
        true => "on this machine (the trace has no settings that name its devices)",
    };
    Err(Error::bad_input(format!(
        "--device {name}: no such device {whose}; {}",
        devices_in(paths, &known)
    )))
}

/// What devices the trace's block events are on, named by `snapshots`:
/// read again, for a message only.
fn devices_in(paths: &[PathBuf], snapshots: &[&Snapshot]) -> String {
    use std::collections::BTreeSet;
    if paths.iter().any(|p| ingest::files::is_stdin(p)) {
        return "give the device as MAJ,MIN".into();
    }
    let Ok(merged) = open(paths) else {
        return "give the device as MAJ,MIN".into();
    };
    let mut seen = BTreeSet::new();
    for e in merged {
        if let Event::Block(b) = e {
            seen.insert(b.dev);
            if let crate::model::Extra::Remap { from_dev, .. } = b.extra {
                seen.insert(from_dev);
            }
        }
    }
    // Plugs and unplugs name no device (0,0).
    seen.remove(&Dev(0));
    if seen.is_empty() {
        return "the trace has no block events".into();
    }
    let named: Vec<String> = seen
        .iter()
        .map(|d| {
            let dev = d.to_string();
            match snapshots.iter().find_map(|s| s.name_of(&dev)) {
                Some(n) => format!("{dev} ({n})"),
                None => dev,
            }
        })
        .collect();
    format!("the trace's devices: {}", named.join(", "))
}

/// One run, analyzed with `opts` and diagnosed.
pub fn diagnosed(path: &Path, opts: &Options) -> Result<Run> {
    let (analysis, inputs) = read(&[path.to_path_buf()], opts)?;
    let findings = diagnose::diagnose(&analysis);
    Ok(Run {
        analysis,
        findings,
        inputs,
    })
}

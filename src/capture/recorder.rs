//! Records tracepoints through a private tracefs instance
//! (`instances/iosleuth-PID-N`), reading every CPU's `trace_pipe_raw`
//! (binary ring-buffer pages) on its own thread. The capture directory
//! carries the kernel's format files, so it decodes anywhere.
//!
//! Everything is undone when the recorder stops or is dropped: events are
//! disabled and the instance removed.

use super::journal::{remove_instance, Journal};
use super::pipe::PipeReader;
use super::tracefs::{CaptureError, Tracefs};
use crate::model::capture_layout::{
    self as layout, EVENT_FORMATS, HEADER_EVENT, HEADER_PAGE, MANIFEST, SNAPSHOT,
};
use crate::model::event_sets::EVENT_SETS;
use crate::model::manifest::{Manifest, Samples};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Expands set names (`block,sched`, or `all`) and single tracepoints
/// (`block:block_rq_issue` or `block/block_rq_issue`, as perf and tracefs
/// name them) into tracepoints.
pub fn expand_sets(sets: &str) -> Result<Vec<&'static str>, String> {
    let mut out = Vec::new();
    for s in sets.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some((sys, name)) = s.split_once([':', '/']) {
            let ok =
                |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok(sys) || !ok(name) {
                return Err(format!("{s:?} is not a tracepoint name (SYSTEM:EVENT)"));
            }
            // Leaked once per named tracepoint: a handful per run.
            out.push(&*Box::leak(format!("{sys}/{name}").into_boxed_str()));
            continue;
        }
        if s == "all" {
            out.extend(EVENT_SETS.iter().flat_map(|(_, e)| e.iter().copied()));
            continue;
        }
        match EVENT_SETS.iter().find(|(n, _)| *n == s) {
            Some((_, evs)) => out.extend(evs.iter().copied()),
            None => {
                let names: Vec<&str> = EVENT_SETS.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown event set {s:?} (known: {}, all)",
                    names.join(", ")
                ));
            }
        }
    }
    out.dedup();
    Ok(out)
}

pub struct RecordOptions {
    pub events: Vec<&'static str>,
    pub buffer_kb: u64,
    pub clock: String,
    /// The kernel stack of every switch away from a CPU while blocked.
    pub off_cpu_stacks: bool,
    /// On-CPU samples of every CPU at this frequency (Hz), with kernel
    /// call chains.
    pub sample_freq: Option<u64>,
    /// Kernel functions to measure (`record --func`), for the manifest.
    pub functions: Vec<String>,
}

/// The trigger that writes a blocked thread's kernel stack after its
/// `sched_switch`: `prev_state` 1 (S) or 2 (D), as bcc's offcputime
/// counts by default. It lives in the private instance and goes with it.
pub const OFF_CPU_TRIGGER: &str = "stacktrace if prev_state & 3";

pub struct Recorder {
    instance: PathBuf,
    out: PathBuf,
    readers: Vec<(u32, PipeReader)>,
    enabled: Vec<&'static str>,
    pub missing: Vec<&'static str>,
    /// The stack triggers set, for the manifest.
    triggers: Vec<String>,
    functions: Vec<String>,
    sampler: Option<(u64, super::sampler::Sampler)>,
    clock: String,
    stopped: bool,
    own_tids: Vec<u32>,
    snapshot_before: serde_json::Value,
    workload: serde_json::Value,
    journal: Journal,
    tracefs: Tracefs,
}

fn write(p: &Path, v: &str) -> Result<(), CaptureError> {
    std::fs::write(p, v)
        .map_err(|e| CaptureError::Unusable(format!("cannot write {v:?} to {}: {e}", p.display())))
}

impl Recorder {
    pub fn start(opts: &RecordOptions, out: &Path) -> Result<Recorder, CaptureError> {
        let tracefs = Tracefs::open()?;
        std::fs::create_dir_all(out.join(EVENT_FORMATS))
            .map_err(|e| CaptureError::Failed(format!("cannot create {}: {e}", out.display())))?;
        let instance = tracefs.path(&format!("instances/iosleuth-{}", super::unique_name()));
        let mut journal = Journal::new();
        journal.record_instance(&instance);
        std::fs::create_dir(&instance).map_err(|e| {
            CaptureError::Unusable(format!("cannot create {}: {e}", instance.display()))
        })?;
        let mut r = Recorder {
            instance,
            out: out.to_path_buf(),
            readers: Vec::new(),
            enabled: Vec::new(),
            missing: Vec::new(),
            triggers: Vec::new(),
            functions: opts.functions.clone(),
            sampler: None,
            clock: opts.clock.clone(),
            stopped: false,
            own_tids: Vec::new(),
            snapshot_before: super::snapshot::take(),
            workload: serde_json::Value::Null,
            journal,
            tracefs,
        };
        let i = r.instance.clone();
        write(&i.join("tracing_on"), "0")?;
        write(&i.join("trace_clock"), &opts.clock)?;
        write(&i.join("buffer_size_kb"), &opts.buffer_kb.to_string())?;
        for (src, dst) in [
            ("events/header_page", HEADER_PAGE),
            ("events/header_event", HEADER_EVENT),
        ] {
            std::fs::copy(r.tracefs.path(src), out.join(dst))
                .map_err(|e| CaptureError::Unusable(format!("cannot copy {src}: {e}")))?;
        }
        for ev in &opts.events {
            let dir = i.join("events").join(ev);
            if !dir.join("enable").exists() {
                r.missing.push(ev);
                continue;
            }
            write(&dir.join("enable"), "1")?;
            r.enabled.push(ev);
            let fdir = out.join(EVENT_FORMATS).join(ev);
            std::fs::create_dir_all(&fdir)?;
            std::fs::copy(dir.join("format"), fdir.join("format"))?;
        }
        r.stack_trigger_and_internal_formats(opts.off_cpu_stacks)?;
        if r.enabled.is_empty() {
            return Err(CaptureError::Unusable(
                "none of the requested events exists on this kernel".into(),
            ));
        }
        let mut cpus: Vec<u32> = std::fs::read_dir(i.join("per_cpu"))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort();
        for cpu in cpus {
            let file = File::create(out.join(layout::cpu_file(cpu)))?;
            let reader = PipeReader::spawn_raw(
                &i.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw")),
                file,
                std::time::Duration::from_millis(50),
            )?;
            r.readers.push((cpu, reader));
        }
        // Writing the capture makes events of its own (syscalls, ext4,
        // block); the decoder drops those of our threads by their ids. (A
        // pid filter in the kernel would also drop interrupts that happen
        // to arrive while our threads run, such as I/O completions.)
        r.own_tids = std::fs::read_dir("/proc/self/task")?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        if let Some(freq) = opts.sample_freq {
            let cpus: Vec<u32> = r.readers.iter().map(|(c, _)| *c).collect();
            let dir = r.out.clone();
            let sampler = super::sampler::Sampler::start(&cpus, freq, |cpu| {
                File::create(dir.join(layout::samples_file(cpu)))
            })?;
            let start_maps = |dir: &Path| -> std::io::Result<()> {
                let mut maps = std::io::BufWriter::new(File::create(dir.join(layout::START_MAPS))?);
                super::sampler::write_start_maps(&mut maps)?;
                std::io::Write::flush(&mut maps)?;
                super::sampler::write_vdso(&mut File::create(dir.join(layout::VDSO))?).map(drop)
            };
            start_maps(&dir).map_err(|e| {
                CaptureError::Unusable(format!("writing the running processes' mappings: {e}"))
            })?;
            r.sampler = Some((freq, sampler));
        }
        write(&i.join("tracing_on"), "1")?;
        Ok(r)
    }

    /// The off-CPU stack trigger when asked, and the formats of the
    /// tracer's own records: trace_marker writes are recorded whatever is
    /// enabled, stack traces when a trigger asks.
    fn stack_trigger_and_internal_formats(
        &mut self,
        off_cpu_stacks: bool,
    ) -> Result<(), CaptureError> {
        let i = self.instance.clone();
        let mut internal = vec!["ftrace/print"];
        if off_cpu_stacks {
            write(
                &i.join("events/sched/sched_switch/trigger"),
                OFF_CPU_TRIGGER,
            )?;
            self.triggers
                .push(format!("sched/sched_switch: {OFF_CPU_TRIGGER}"));
            internal.push("ftrace/kernel_stack");
        }
        for ev in internal {
            let format = i.join("events").join(ev).join("format");
            if format.exists() {
                let fdir = self.out.join(EVENT_FORMATS).join(ev);
                std::fs::create_dir_all(&fdir)?;
                std::fs::copy(&format, fdir.join("format"))?;
            }
        }
        Ok(())
    }

    /// `12.3 MB, 4.1 MB/s, 0 lost` for the progress line.
    pub fn progress(&self, elapsed_s: f64) -> String {
        let bytes: u64 = self.readers.iter().map(|(_, r)| r.copied()).sum();
        let lost: u64 = self
            .readers
            .iter()
            .filter_map(|(cpu, _)| {
                std::fs::read_to_string(self.instance.join(format!("per_cpu/cpu{cpu}/stats"))).ok()
            })
            .flat_map(|t| {
                t.lines()
                    .filter(|l| l.starts_with("overrun:") || l.starts_with("dropped events:"))
                    .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum();
        let mb = bytes as f64 / 1e6;
        format!(
            "recording: {:.1} s, {mb:.1} MB, {:.1} MB/s, ~{:.0}k events/s, {lost} lost",
            elapsed_s,
            mb / elapsed_s.max(0.001),
            // A record averages about 48 bytes in the ring buffer.
            bytes as f64 / 48.0 / 1000.0 / elapsed_s.max(0.001)
        )
    }

    /// Where the workload may write operation marks.
    pub fn trace_marker(&self) -> PathBuf {
        self.instance.join("trace_marker")
    }

    /// Stores a workload sample taken with `snapshot::workload`.
    pub fn set_workload(&mut self, w: serde_json::Value) {
        self.workload = w;
    }

    /// Stops tracing, drains every CPU, writes the manifest and removes the
    /// instance. Returns the bytes recorded.
    pub fn stop(mut self) -> Result<u64, CaptureError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<u64, CaptureError> {
        if self.stopped {
            return Ok(0);
        }
        self.stopped = true;
        let _ = write(&self.instance.join("tracing_on"), "0");
        let samples = self.sampler.take().map(|(freq, s)| {
            let lost = s.lost.clone();
            let written = s.stop();
            Samples {
                freq_hz: freq,
                sample_type: crate::model::perf_record::SAMPLE_TYPE,
                bytes: written.as_ref().ok().copied(),
                error: written.as_ref().err().map(|e| e.to_string()),
                lost: lost.load(std::sync::atomic::Ordering::Relaxed),
                user_frames: true,
            }
        });
        let mut bytes = 0;
        let mut result = Ok(());
        for (_, r) in &mut self.readers {
            match r.finish() {
                Ok(n) => bytes += n,
                Err(e) => {
                    result = Err(CaptureError::Failed(format!("reading trace_pipe_raw: {e}")))
                }
            }
        }
        // Ring-buffer losses, per CPU, before the instance goes away.
        let mut stats = std::collections::BTreeMap::new();
        for (cpu, _) in &self.readers {
            if let Ok(t) =
                std::fs::read_to_string(self.instance.join(format!("per_cpu/cpu{cpu}/stats")))
            {
                let counters = t
                    .lines()
                    .filter_map(|line| {
                        let (k, v) = line.split_once(':')?;
                        Some((k.trim().to_string(), v.trim().parse::<f64>().ok()?))
                    })
                    .collect();
                stats.insert(cpu.to_string(), counters);
            }
        }
        let removed = remove_instance(&self.instance);
        if removed.is_ok() {
            self.journal.close();
        }
        let manifest = Manifest {
            page_size: Some(page_size() as u64),
            cpus: self.readers.iter().map(|(c, _)| *c).collect(),
            events: self.enabled.iter().map(|e| e.to_string()).collect(),
            missing_events: self.missing.iter().map(|e| e.to_string()).collect(),
            triggers: self.triggers.clone(),
            functions: self.functions.clone(),
            samples: samples.clone(),
            recorder_tids: self.own_tids.clone(),
            ring_buffer_stats: stats,
            ..Manifest::new(&self.clock)
        };
        let snapshot = super::snapshot::document(
            std::mem::take(&mut self.snapshot_before),
            std::mem::take(&mut self.workload),
        );
        std::fs::write(
            self.out.join(SNAPSHOT),
            serde_json::to_string_pretty(&snapshot).unwrap_or_default(),
        )?;
        std::fs::write(self.out.join(MANIFEST), manifest.to_json())?;
        if self.enabled.iter().any(|e| e.starts_with("workqueue"))
            || !self.triggers.is_empty()
            || samples.is_some()
        {
            // Work functions and stack frames are addresses in the ring
            // buffer: name them while this machine's symbols are at hand.
            let _ = super::symbols::write_for_capture(&self.out);
        }
        if samples.is_some() {
            // And user frames by the binaries that ran, which may change.
            let _ = super::build_ids::write_for_capture(&self.out);
        }
        removed.map_err(|e| {
            CaptureError::Failed(format!("cannot remove {}: {e}", self.instance.display()))
        })?;
        result.map(|_| bytes)
    }
}

/// The machine's page size: ring-buffer pages and perf mmap pages.
pub(crate) fn page_size() -> usize {
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

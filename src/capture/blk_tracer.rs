//! Records the kernel's `blk` tracer, the tracefs twin of blktrace that works
//! where the `blktrace` program cannot open its debugfs relay files.
//!
//! The `blk` tracer only runs in the top-level instance, so a session holds
//! the global tracing lock, and every knob it touches is restored when the
//! session ends or is dropped.

use super::journal::Journal;
use super::pipe::PipeReader;
use super::tracefs::{CaptureError, GlobalLock, Knob, Tracefs};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct BlkTracerOptions {
    /// `/sys/block/NAME` entries to trace, e.g. `loop0`.
    pub devices: Vec<String>,
    /// Binary records (`options/bin`) or text lines.
    pub binary: bool,
    pub buffer_kb: u64,
    pub clock: String,
}

impl Default for BlkTracerOptions {
    fn default() -> Self {
        BlkTracerOptions {
            devices: Vec::new(),
            binary: true,
            buffer_kb: 16384,
            clock: "mono".into(),
        }
    }
}

pub struct BlkTracerSession {
    // Restored in reverse order of creation (fields drop in declaration
    // order, so the knobs are listed last-set first).
    knobs: Vec<Knob>,
    reader: PipeReader,
    journal: Journal,
    output: PathBuf,
    /// Text output names its tasks itself.
    output_binary_names_done: bool,
    _tracefs: Tracefs,
    _lock: GlobalLock,
}

/// Resolves `/dev/loop0`, `loop0` or `7,0` to the sysfs name.
pub fn sysfs_name(dev: &str) -> Option<String> {
    if let Some(d) = crate::model::Dev::parse(dev) {
        return crate::model::blktrace_record::device_name(d);
    }
    let name = dev.trim_start_matches("/dev/").to_string();
    Path::new("/sys/block").join(&name).exists().then_some(name)
}

impl BlkTracerSession {
    pub fn start(opts: &BlkTracerOptions, output: &Path) -> Result<BlkTracerSession, CaptureError> {
        let lock = GlobalLock::acquire()?;
        let tracefs = Tracefs::open()?;
        let t = |p: &str| tracefs.path(p);
        if !std::fs::read_to_string(t("available_tracers"))?
            .split_whitespace()
            .any(|x| x == "blk")
        {
            return Err(CaptureError::Unusable(
                "the kernel has no `blk` tracer (it needs CONFIG_BLK_DEV_IO_TRACE)".into(),
            ));
        }
        let mut journal = Journal::new();
        let mut knobs = Vec::new();
        knobs.push(Knob::set_recorded(t("tracing_on"), "0", &mut journal)?);
        knobs.push(Knob::set_recorded(
            t("current_tracer"),
            "nop",
            &mut journal,
        )?);
        knobs.push(Knob::set_recorded(
            t("trace_clock"),
            &opts.clock,
            &mut journal,
        )?);
        knobs.push(Knob::set_recorded(
            t("buffer_size_kb"),
            &opts.buffer_kb.to_string(),
            &mut journal,
        )?);
        knobs.push(Knob::set_recorded(
            t("options/bin"),
            if opts.binary { "1" } else { "0" },
            &mut journal,
        )?);
        knobs.push(Knob::set_recorded(
            t("options/context-info"),
            "1",
            &mut journal,
        )?);
        for d in &opts.devices {
            let trace_dir = Path::new("/sys/block").join(d).join("trace");
            if !trace_dir.exists() {
                return Err(CaptureError::Unusable(format!(
                    "no such block device to trace: {d} ({} is missing)",
                    trace_dir.display()
                )));
            }
            // Only `enable`: writing the other attributes after it is turned
            // off again would set blk_trace up anew and leave it behind.
            knobs.push(Knob::set_recorded(
                trace_dir.join("enable"),
                "1",
                &mut journal,
            )?);
        }
        knobs.push(Knob::set_recorded(
            t("current_tracer"),
            "blk",
            &mut journal,
        )?);
        std::fs::write(t("trace"), "")?;

        let out = File::create(output).map_err(|e| {
            CaptureError::Failed(format!("cannot create {}: {e}", output.display()))
        })?;
        let reader = PipeReader::spawn(&t("trace_pipe"), out)?;
        knobs.push(Knob::set_recorded(t("tracing_on"), "1", &mut journal)?);
        knobs.reverse();
        Ok(BlkTracerSession {
            knobs,
            reader,
            journal,
            output: output.to_path_buf(),
            output_binary_names_done: !opts.binary,
            _tracefs: tracefs,
            _lock: lock,
        })
    }

    /// Stops tracing, drains what is buffered, restores every setting.
    /// Returns the number of bytes written.
    pub fn stop(mut self) -> Result<u64, CaptureError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<u64, CaptureError> {
        if !self.reader.is_running() && self.knobs.is_empty() {
            return Ok(0);
        }
        // tracing_on was the last knob set: restoring it first stops tracing.
        if !self.knobs.is_empty() {
            self.knobs.remove(0).restore()?;
        }
        let written = self.reader.finish().map_err(|e| {
            CaptureError::Failed(format!(
                "reading trace_pipe into {}: {e}",
                self.output.display()
            ))
        })?;
        let names = self.append_process_names().unwrap_or(0);
        for k in self.knobs.drain(..) {
            k.restore()?;
        }
        self.journal.close();
        Ok(written + names)
    }

    /// The binary records carry pids only; the tracer keeps the names of
    /// the tasks it saw in `saved_cmdlines`. Appends them as blktrace
    /// process notes (`BLK_TN_PROCESS`) so that reports and blkparse name
    /// the processes.
    fn append_process_names(&self) -> std::io::Result<u64> {
        if self.output_binary_names_done {
            return Ok(0);
        }
        // Only the tasks this capture saw: read it back for their pids.
        let mut seen = std::collections::HashSet::new();
        if let Ok(mut src) = crate::ingest::open_file(&self.output) {
            while let Some(ev) = src.next_event() {
                if let crate::model::Event::Block(b) = ev {
                    seen.insert(b.pid);
                }
            }
        }
        let list = std::fs::read_to_string(self._tracefs.path("saved_cmdlines"))?;
        let mut out = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.output)?;
        let mut n = 0u64;
        for line in list.lines() {
            let Some((pid, comm)) = line.split_once(' ') else {
                continue;
            };
            let Ok(pid) = pid.trim().parse::<u32>() else {
                continue;
            };
            if !seen.contains(&pid) {
                continue;
            }
            let rec = crate::model::blktrace_record::tracer_process_note(pid, comm.trim());
            out.write_all(&rec)?;
            n += rec.len() as u64;
        }
        Ok(n)
    }
}

impl Drop for BlkTracerSession {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

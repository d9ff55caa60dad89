//! A private tracefs instance (`instances/iosleuth-PID-N`) that records
//! tracepoints as text through its `trace_pipe`, without touching the
//! top-level instance: what live tests compare iosleuth's own recordings
//! with. Removed when the session ends or is dropped.

use iosleuth::testing::{remove_instance, unique_name, CaptureError, PipeReader, Tracefs};
use std::fs::File;
use std::path::{Path, PathBuf};

pub struct InstanceSession {
    dir: PathBuf,
    /// The events lost per CPU, read as the session stops.
    lost: Vec<(u32, u64)>,
    reader: Option<PipeReader>,
    _tracefs: Tracefs,
}

impl InstanceSession {
    /// Enables `events` (such as `block` or `block/block_rq_issue`) in a new
    /// instance and copies its text output to `output` until stopped.
    pub fn start(
        events: &[&str],
        buffer_kb: u64,
        clock: &str,
        output: &Path,
    ) -> Result<InstanceSession, CaptureError> {
        let tracefs = Tracefs::open()?;
        let dir = tracefs.path(&format!("instances/iosleuth-{}", unique_name()));
        std::fs::create_dir(&dir)
            .map_err(|e| CaptureError::Unusable(format!("cannot create {}: {e}", dir.display())))?;
        let mut s = InstanceSession {
            dir,
            lost: Vec::new(),
            reader: None,
            _tracefs: tracefs,
        };
        let w = |rel: &str, v: &str| -> Result<(), CaptureError> {
            std::fs::write(s.dir.join(rel), v)
                .map_err(|e| CaptureError::Unusable(format!("cannot write {v:?} to {rel}: {e}")))
        };
        w("tracing_on", "0")?;
        // A new instance inherits the top-level output flags: a concurrent
        // binary `blk` tracer session must not turn this one binary too.
        for (opt, v) in [
            ("bin", "0"),
            ("raw", "0"),
            ("hex", "0"),
            ("context-info", "1"),
        ] {
            w(&format!("options/{opt}"), v)?;
        }
        w("trace_clock", clock)?;
        w("buffer_size_kb", &buffer_kb.to_string())?;
        for ev in events {
            w(&format!("events/{ev}/enable"), "1")?;
        }
        let out = File::create(output).map_err(|e| {
            CaptureError::Failed(format!("cannot create {}: {e}", output.display()))
        })?;
        s.reader = Some(PipeReader::spawn(&s.dir.join("trace_pipe"), out)?);
        w("tracing_on", "1")?;
        Ok(s)
    }

    /// Stops and removes the instance: the bytes of text written, and the
    /// events each CPU lost (its ring buffer overran before `trace_pipe`
    /// was read, or an event found no room), CPUs that lost none left out.
    pub fn stop(mut self) -> Result<(u64, Vec<(u32, u64)>), CaptureError> {
        let n = self.finish()?;
        Ok((n, std::mem::take(&mut self.lost)))
    }

    fn finish(&mut self) -> Result<u64, CaptureError> {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        let n = match self.reader.as_mut() {
            Some(r) => r
                .finish()
                .map_err(|e| CaptureError::Unusable(format!("reading trace_pipe: {e}")))?,
            None => 0,
        };
        self.lost = lost_per_cpu(&self.dir);
        remove_instance(&self.dir).map_err(|e| {
            CaptureError::Unusable(format!("cannot remove {}: {e}", self.dir.display()))
        })?;
        Ok(n)
    }
}

/// `overrun` plus `dropped events` of each CPU's `per_cpu/cpuN/stats`.
fn lost_per_cpu(dir: &Path) -> Vec<(u32, u64)> {
    let Ok(cpus) = std::fs::read_dir(dir.join("per_cpu")) else {
        return Vec::new();
    };
    let mut lost: Vec<(u32, u64)> = cpus
        .filter_map(|e| {
            let e = e.ok()?;
            let cpu = e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok()?;
            let stats = std::fs::read_to_string(e.path().join("stats")).ok()?;
            let n: u64 = stats
                .lines()
                .filter_map(|l| {
                    let (key, v) = l.split_once(':')?;
                    matches!(key, "overrun" | "dropped events")
                        .then(|| v.trim().parse::<u64>().ok())?
                })
                .sum();
            (n > 0).then_some((cpu, n))
        })
        .collect();
    lost.sort_unstable();
    lost
}

impl Drop for InstanceSession {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

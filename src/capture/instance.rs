//! A private tracefs instance (`instances/iosleuth-PID-N`) that records
//! tracepoints as text through its `trace_pipe`, without touching the
//! top-level instance. Removed when the session ends or is dropped.

use super::pipe::PipeReader;
use super::tracefs::{CaptureError, Tracefs};
use std::fs::File;
use std::path::{Path, PathBuf};

pub struct InstanceSession {
    dir: PathBuf,
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
        let dir = tracefs.path(&format!("instances/iosleuth-{}", super::unique_name()));
        std::fs::create_dir(&dir)
            .map_err(|e| CaptureError(format!("cannot create {}: {e}", dir.display())))?;
        let mut s = InstanceSession {
            dir,
            reader: None,
            _tracefs: tracefs,
        };
        let w = |rel: &str, v: &str| -> Result<(), CaptureError> {
            std::fs::write(s.dir.join(rel), v)
                .map_err(|e| CaptureError(format!("cannot write {v:?} to {rel}: {e}")))
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
        let out = File::create(output)
            .map_err(|e| CaptureError(format!("cannot create {}: {e}", output.display())))?;
        s.reader = Some(PipeReader::spawn(&s.dir.join("trace_pipe"), out)?);
        w("tracing_on", "1")?;
        Ok(s)
    }

    pub fn stop(mut self) -> Result<u64, CaptureError> {
        self.finish()
    }

    fn finish(&mut self) -> Result<u64, CaptureError> {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        let n = match self.reader.as_mut() {
            Some(r) => r
                .finish()
                .map_err(|e| CaptureError(format!("reading trace_pipe: {e}")))?,
            None => 0,
        };
        super::journal::remove_instance(&self.dir)
            .map_err(|e| CaptureError(format!("cannot remove {}: {e}", self.dir.display())))?;
        Ok(n)
    }
}

impl Drop for InstanceSession {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

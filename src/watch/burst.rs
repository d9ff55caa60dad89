//! `watch --burst S`: when a trigger keeps a capture, the full recorder
//! (`iosleuth record --duration S`, tracefs: every event set) runs beside
//! it as a child process, into a staging directory under `--dir`; once
//! the light capture is written, the full one moves into it as `full/`
//! and is diagnosed there (`full/report.json`, `full/report.html`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Staging directories begin with this (hidden: not a kept capture).
const STAGING: &str = ".burst-";

/// A full recording running beside a triggered capture.
pub struct Burst {
    child: Child,
    /// Where `record` writes, and its log (stdout and stderr).
    dir: PathBuf,
    log: PathBuf,
    seconds: u64,
}

impl Burst {
    /// Starts `iosleuth record -o ROOT/.burst-<unix> --duration S`.
    pub fn start(root: &Path, unix_s: i64, seconds: u64) -> Result<Burst, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find iosleuth: {e}"))?;
        let dir = root.join(format!("{STAGING}{unix_s}"));
        let log = root.join(format!("{STAGING}{unix_s}.log"));
        let out = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let child = Command::new(exe)
            .args(["record", "-o"])
            .arg(&dir)
            .args(["--duration", &seconds.to_string()])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start the full recorder: {e}"))?;
        Ok(Burst {
            child,
            dir,
            log,
            seconds,
        })
    }

    /// Asks the recorder to stop now (as Ctrl-C does: it stops cleanly
    /// and keeps what it recorded).
    pub fn interrupt(&self) {
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
    }

    /// Waits for the recorder (its seconds and a minute to write and
    /// restore; then it is killed), moves its capture and log into
    /// `capture/full` and `capture/full.log`, and diagnoses it. Returns
    /// what the log line says of it.
    pub fn finish(mut self, capture: &Path) -> String {
        let until = Instant::now() + Duration::from_secs(self.seconds + 60);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        let full = capture.join("full");
        let _ = std::fs::rename(&self.log, capture.join("full.log"));
        let moved = self.dir.exists() && std::fs::rename(&self.dir, &full).is_ok();
        if !moved {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        match status {
            Some(s) if s.success() && moved => match super::keep::diagnose(&full) {
                Ok(found) => format!(
                    "full capture {}: {}",
                    full.display(),
                    found.first().map_or_else(
                        || "no finding".to_string(),
                        |f| format!("{} {}", f.severity.name().to_uppercase(), f.id)
                    )
                ),
                Err(e) => format!("full capture {} not diagnosed: {}", full.display(), e),
            },
            Some(s) => format!(
                "full record burst failed ({s}; see {}/full.log)",
                capture.display()
            ),
            None => format!(
                "full record burst killed after {} s (see {}/full.log)",
                self.seconds + 60,
                capture.display()
            ),
        }
    }
}

/// Removes staging directories an earlier run left (killed mid-burst):
/// only those `record` made (they hold its manifest), and their logs.
pub fn remove_leftovers(root: &Path) {
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(STAGING) {
            continue;
        }
        let p = e.path();
        if name.ends_with(".log") && p.is_file() {
            let _ = std::fs::remove_file(&p);
        } else if p.join(crate::model::capture_layout::MANIFEST).is_file() {
            let _ = std::fs::remove_dir_all(&p);
        }
    }
}

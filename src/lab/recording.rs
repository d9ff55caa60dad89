//! How a scenario records: the `Lab` (where it writes, `iosleuth record`
//! of each run, `watch` beside the bad run and `try` after it) and the
//! processes that stand beside a bad run (`Standing`).

use super::tried::Sides;
use crate::capture::tracefs::CaptureError;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where a scenario writes, and how it runs iosleuth.
pub struct Lab {
    pub exe: PathBuf,
    pub dir: PathBuf,
    /// True once the user asked to stop (Ctrl-C): no new recording starts.
    pub stop: fn() -> bool,
    /// `lab run --keep`: the captures stay, with their flame graphs.
    pub keep: bool,
    /// `lab run --light`: every run is recorded with `record --light`,
    /// whatever events and options the scenario asks of the full recorder.
    pub light: bool,
    /// `lab run --watch`: `iosleuth watch` runs beside the bad run.
    pub watch: bool,
    /// `lab run --try`: `iosleuth try` measures the expected finding's
    /// remedy on the bad run's workload, the bad setup still standing.
    pub try_remedy: bool,
    /// The scenario's expected finding (the remedy `--try` takes).
    pub expect: Option<&'static str>,
    /// `loopdev::attached_count()` when the scenario began: the devices
    /// attached since are its own, the ones watch's triggers judge.
    pub first_device: usize,
    /// What the scenario saw of its own making (how many writes a slow
    /// disk held), printed with its verdict.
    pub notes: std::cell::RefCell<Vec<String>>,
    /// The processes the scenario keeps beside its bad run (a real-time
    /// burner, busy loops): a finding about them is about the scenario,
    /// though they are outside its recorded command.
    pub standing: std::cell::RefCell<Vec<u32>>,
}

impl Lab {
    pub fn good(&self) -> PathBuf {
        self.dir.join("good.cap")
    }
    pub fn bad(&self) -> PathBuf {
        self.dir.join("bad.cap")
    }
    /// Where `watch` keeps what its triggers catch during the bad run.
    pub fn watch_dir(&self) -> PathBuf {
        self.dir.join("watch")
    }
    pub fn watch_log(&self) -> PathBuf {
        self.dir.join("watch.log")
    }
    pub fn watch_stderr(&self) -> PathBuf {
        self.dir.join("watch.stderr")
    }

    /// `iosleuth watch` on an ephemeral port, keeping captures in
    /// `watch_dir` (one per trigger, each with its diagnosis); stopped when
    /// dropped. Started once it serves.
    fn start_watch(&self) -> Result<Watching, CaptureError> {
        let _ = std::fs::remove_dir_all(self.watch_dir());
        let _ = std::fs::remove_file(self.watch_log());
        let child = Command::new(&self.exe)
            .args(["watch", "--listen", "127.0.0.1:0", "--dir"])
            .arg(self.watch_dir())
            .args(["--before", "30", "--after", "2", "--min-interval", "0"])
            // The real-time burner holds its CPU 150 ms at a time: a wait
            // behind it ends anywhere from 0 to 150 ms, and a short run
            // may have none of 100 ms (the default) when the machine is busy.
            .args(["--trigger-runqueue", "50"])
            // What the lab checks is that a stall is seen, whatever the
            // hooks would cost on a busy machine (`auto` may leave them off).
            .args(["--runqueue", "on"])
            // The scenarios' own threads (the probes), not the machine's
            // other work waiting behind each other.
            .args(["--runqueue-comm", "iosleuth"])
            // The scenario's disks, not the machine's (whose own stalls,
            // beside other work, are not the scenario's).
            .args(
                super::loopdev::attached_since(self.first_device)
                    .into_iter()
                    .flat_map(|(name, _)| ["--device".to_string(), name]),
            )
            .arg("--log")
            .arg(self.watch_log())
            .stdout(std::process::Stdio::null())
            .stderr(
                std::fs::File::create(self.watch_stderr())
                    .map(std::process::Stdio::from)
                    .unwrap_or_else(|_| std::process::Stdio::null()),
            )
            .spawn()
            .map_err(|e| CaptureError::Unusable(format!("cannot start watch: {e}")))?;
        let mut w = Watching(child);
        let until = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let log = std::fs::read_to_string(self.watch_log()).unwrap_or_default();
            if log.contains("serving http://") {
                return Ok(w);
            }
            if let Ok(Some(status)) = w.0.try_wait() {
                return Err(CaptureError::Unusable(format!(
                    "watch ended at once ({status}): {}",
                    log.trim()
                )));
            }
            if std::time::Instant::now() > until {
                return Err(CaptureError::Unusable(
                    "watch did not start serving within 20 s".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `iosleuth record -o OUT --events EVENTS -- sh -c SCRIPT`, where the
    /// script can say `$IOSLEUTH` for this binary.
    pub(super) fn record(
        &self,
        out: &Path,
        events: &str,
        script: &str,
    ) -> Result<(), CaptureError> {
        self.record_with(out, events, &[], script)
    }

    /// [`Lab::record`] with more options for `record` (`--stacks`).
    pub(super) fn record_with(
        &self,
        out: &Path,
        events: &str,
        options: &[&str],
        script: &str,
    ) -> Result<(), CaptureError> {
        self.record_tried(out, events, options, script, None)
    }

    /// [`Lab::record_with`] whose `--try` runs `sides` instead.
    pub(super) fn record_with_sides(
        &self,
        out: &Path,
        events: &str,
        options: &[&str],
        script: &str,
        sides: &Sides,
    ) -> Result<(), CaptureError> {
        self.record_tried(out, events, options, script, Some(sides))
    }

    fn record_tried(
        &self,
        out: &Path,
        events: &str,
        options: &[&str],
        script: &str,
        sides: Option<&Sides>,
    ) -> Result<(), CaptureError> {
        if (self.stop)() {
            return Err(CaptureError::Unusable("interrupted".into()));
        }
        let _ = std::fs::remove_dir_all(out);
        let watching = if self.watch && out == self.bad() {
            Some(self.start_watch()?)
        } else {
            None
        };
        let mut record = Command::new(&self.exe);
        record.arg("record").arg("-o").arg(out);
        if self.light {
            record.arg("--light");
        } else {
            record.args(["--events", events]).args(options);
        }
        let o = record
            .args(["--", "sh", "-c", script])
            .env("IOSLEUTH", &self.exe)
            .output()
            .map_err(|e| {
                CaptureError::Unusable(format!("cannot run {}: {e}", self.exe.display()))
            })?;
        // Stopped and its last capture diagnosed before the run is judged.
        drop(watching);
        if self.try_remedy && out == self.bad() && o.status.success() && !(self.stop)() {
            match sides {
                Some(s) => self.try_remedy(events, s.script, Some(s)),
                None => self.try_remedy(events, script, None),
            }
        }
        // The recorder stops on the same Ctrl-C and exits 130.
        if o.status.code() == Some(130) || (self.stop)() {
            return Err(CaptureError::Unusable("interrupted".into()));
        }
        if !o.status.success() {
            return Err(CaptureError::Unusable(format!(
                "recording {} failed: {}",
                out.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        Ok(())
    }
}

/// A running `iosleuth watch`: SIGTERM and a wait when dropped (it
/// finishes the capture it is keeping), SIGKILL if it does not end.
struct Watching(std::process::Child);

impl Drop for Watching {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < until {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process that stands beside a scenario's bad run (and `--try`'s
/// rounds): killed when dropped, and with the lab if the lab is killed.
pub(super) struct Standing(std::process::Child);

impl Standing {
    /// iosleuth itself with `args`.
    pub(super) fn start(lab: &Lab, args: &[&str]) -> Result<Standing, CaptureError> {
        Standing::program(lab, &lab.exe, args)
    }

    /// `program` with `args` (the programs it execs die with the lab too).
    pub(super) fn program(
        lab: &Lab,
        program: impl AsRef<std::ffi::OsStr>,
        args: &[&str],
    ) -> Result<Standing, CaptureError> {
        use std::os::unix::process::CommandExt;
        let program = program.as_ref();
        let mut c = Command::new(program);
        c.args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: prctl is async-signal-safe; it runs between fork and exec.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = c.spawn().map_err(|e| {
            CaptureError::Unusable(format!("cannot start {}: {e}", program.to_string_lossy()))
        })?;
        lab.standing.borrow_mut().push(child.id());
        Ok(Standing(child))
    }
}

impl Drop for Standing {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

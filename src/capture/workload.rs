//! Running the workload a recording is about, and stopping cleanly: SIGINT,
//! SIGTERM and SIGHUP only set a flag, which the recorder, the lab and the
//! workload runner check, so that every guard restores what iosleuth
//! changed before the process ends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// From now on, a terminal's Ctrl-C (or a SIGTERM, SIGHUP) asks for a
/// clean stop instead of killing iosleuth.
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Whether the user asked to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Exit status of an interrupted workload (128 + SIGINT).
const INTERRUPTED_STATUS: i32 = 130;
/// Exit status when the workload cannot be started (as a shell says).
const CANNOT_RUN_STATUS: i32 = 127;

/// What runs while recording: a command, or nothing for a while.
pub struct Workload<'a> {
    /// The command and its arguments; empty to wait for `duration` or Ctrl-C.
    pub command: &'a [String],
    pub duration: Option<f64>,
    /// Extra environment for the command.
    pub envs: &'a [(&'a str, PathBuf)],
    /// Where the command's standard output goes (`try`: each round's
    /// beside its capture, out of try's own output); `None`: inherited.
    pub stdout: Option<&'a std::path::Path>,
    /// Called with the command's pid at each look at it (every 10 ms)
    /// while it runs: for what must be read of it before it moves on (a
    /// command may move itself into a cgroup and end within half a second).
    pub poll: Option<&'a dyn Fn(u32)>,
}

/// Runs the workload in its own process group (killed on Ctrl-C), or waits
/// for its duration or Ctrl-C; `on_start` gets the command's pid, and
/// `progress` a line to show on a terminal every half second. Returns the
/// exit status to report.
pub fn run(w: &Workload, on_start: &mut dyn FnMut(u32), progress: &dyn Fn(f64) -> String) -> i32 {
    let started = Instant::now();
    let bar = crate::progress::Progress::new(&progress(0.0));
    let mut last_progress = started;
    let mut tick = || {
        if last_progress.elapsed() >= Duration::from_millis(500) {
            last_progress = Instant::now();
            bar.set(progress(started.elapsed().as_secs_f64()));
        }
    };
    let status = if interrupted() {
        INTERRUPTED_STATUS
    } else if w.command.is_empty() {
        let end = w
            .duration
            .map(|d| Instant::now() + Duration::from_secs_f64(d));
        while !interrupted() && end.is_none_or(|e| Instant::now() < e) {
            tick();
            std::thread::sleep(Duration::from_millis(20));
        }
        0
    } else {
        run_command(w, on_start, &mut tick)
    };
    drop(bar);
    status
}

fn run_command(w: &Workload, on_start: &mut dyn FnMut(u32), tick: &mut dyn FnMut()) -> i32 {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(&w.command[0]);
    cmd.args(&w.command[1..]).process_group(0);
    for (k, v) in w.envs {
        cmd.env(k, v);
    }
    if let Some(path) = w.stdout {
        match std::fs::File::create(path) {
            Ok(f) => {
                cmd.stdout(f);
            }
            Err(e) => {
                eprintln!("iosleuth: cannot create {}: {e}", path.display());
                return CANNOT_RUN_STATUS;
            }
        }
    }
    // SAFETY: prctl is async-signal-safe; it runs in the child between
    // fork and exec. The workload dies with iosleuth even on SIGKILL.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("iosleuth: cannot run {:?}: {e}", w.command[0]);
            return CANNOT_RUN_STATUS;
        }
    };
    on_start(child.id());
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return s.code().unwrap_or(1),
            Ok(None) => {}
            Err(_) => return 0,
        }
        if interrupted() {
            // SAFETY: a plain kill(2) of the workload's process group.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGTERM);
            }
            let _ = child.wait();
            return INTERRUPTED_STATUS;
        }
        if let Some(poll) = w.poll {
            poll(child.id());
        }
        tick();
        std::thread::sleep(Duration::from_millis(10));
    }
}

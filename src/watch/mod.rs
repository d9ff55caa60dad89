//! `iosleuth watch`: the light programs left on. Once a second it reads
//! what they counted, publishes it as Prometheus metrics, and judges the
//! triggers; when one fires, the last seconds of slow requests and
//! flight-recorder records (kept in a ring in memory) and the next ones
//! become a light capture, diagnosed in the background, under a disk
//! quota. SIGTERM and SIGINT stop it (the programs go with their file
//! descriptors), SIGHUP reopens its log.

pub mod burst;
pub mod cgroups;
pub mod http;
pub mod keep;
mod not_watched;
mod pending;
pub mod process;
pub mod runqueue;
pub mod trigger;
mod watcher;
mod web_config;
use not_watched::{session_missing, NotWatched};
use pending::{finish, Diagnosed, Pending};
use watcher::Watcher;

use crate::capture::light::ring::RecordRing;
use crate::capture::light::{DiskstatsReading, LightOptions, LightSession, WAIT_MIN_NS};
use crate::capture::snapshot;
use crate::error::{Error, ExitStatus, Result};
use crate::model::light::{
    devices_since, keep_largest, DiskstatsDelta, LightCgroup, LightCpu, LightDevice, LightUring,
    WaitRecord, REC_WAIT,
};
use crate::report::prometheus::{self, ActiveFinding, RingFigures, Scrape};
use std::collections::VecDeque;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use trigger::TriggerOptions;

#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub listen: SocketAddr,
    /// `--web-config`: TLS and users for the HTTP side.
    pub web_config: Option<PathBuf>,
    /// Where triggered captures are kept; `None`: metrics only.
    pub dir: Option<PathBuf>,
    pub slow_ns: Option<u64>,
    pub cap_per_s: u32,
    /// The request triggers judge only these devices (`maj,min` or the
    /// kernel's name); empty: every device.
    pub devices: Vec<String>,
    pub trigger: TriggerOptions,
    /// The p99 trigger's window (s).
    pub window_s: u64,
    /// A kept capture spans this long before the trigger and after it (s).
    pub before_s: u64,
    pub after_s: u64,
    /// Captures are kept at most this often (s).
    pub min_interval_s: u64,
    pub quota_bytes: u64,
    pub log: Option<PathBuf>,
    /// Stop after this long (s); `None`: until SIGTERM or SIGINT.
    pub duration_s: Option<f64>,
    pub accounting: crate::capture::light::Accounting,
    /// Whether the scheduler's hooks run (else runqueue waits are not
    /// watched): always, never, or while they cost under a point.
    pub runqueue: runqueue::Policy,
    /// Whether the interrupts' hooks run (hard and soft interrupt time per
    /// CPU).
    pub irq: bool,
    /// Cgroups served under their own labels at most.
    pub cgroups: usize,
    /// Whether each cgroup's latency histogram is served (11 times the
    /// series of its counters).
    pub cgroup_histograms: bool,
    /// Run the full recorder this many seconds beside each kept capture.
    pub burst_s: Option<u64>,
}

/// The default address: localhost only; port 19690 lies outside the
/// ranges Prometheus' default port allocation list hands out (9100 up,
/// sequentially), so no registered exporter takes it.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:19690";

static STOP: AtomicBool = AtomicBool::new(false);
static REOPEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_hup(_: libc::c_int) {
    REOPEN.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() {
    // SAFETY: the handlers only store to atomics.
    unsafe {
        libc::signal(libc::SIGINT, on_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, on_hup as *const () as libc::sighandler_t);
    }
}

/// The log: a file reopened on SIGHUP (after logrotate moved it), or
/// standard error.
struct Log {
    path: Option<PathBuf>,
    file: Option<std::fs::File>,
}

impl Log {
    fn open(path: Option<PathBuf>) -> Result<Log> {
        let mut log = Log { path, file: None };
        log.reopen()?;
        Ok(log)
    }

    fn reopen(&mut self) -> Result<()> {
        if let Some(p) = &self.path {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| {
                    Error::bad_input(format!("cannot open the log {}: {e}", p.display()))
                })?;
            self.file = Some(f);
        }
        Ok(())
    }

    fn line(&mut self, text: &str) {
        let line = format!(
            "{} iosleuth watch: {}\n",
            keep::utc_stamp(unix_now()),
            crate::report::escape(text)
        );
        match &mut self.file {
            Some(f) => {
                let _ = f.write_all(line.as_bytes());
            }
            None => eprint!("{line}"),
        }
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// One reading of the maps.
#[derive(Clone)]
struct Reading {
    at_ns: u64,
    devices: Vec<LightDevice>,
    cpus: Vec<LightCpu>,
    /// The largest (cgroup, device, operation) entries, at most
    /// CGROUPS_READ: what a kept capture's table is the difference of.
    cgroups: Vec<LightCgroup>,
    io_uring: Vec<LightUring>,
}

/// The cgroup entries each reading keeps (the kernel's map holds up to
/// 4096; a second's readings are kept for the capture's before-seconds).
const CGROUPS_READ: usize = 256;

/// The newest reading at or before `at_ns` (the oldest there is if none).
fn reading_at(readings: &VecDeque<Reading>, at_ns: u64) -> Option<&Reading> {
    readings
        .iter()
        .rev()
        .find(|r| r.at_ns <= at_ns)
        .or_else(|| readings.front())
}

/// What the HTTP side serves, rebuilt once a second.
#[derive(Default)]
struct Published {
    metrics: String,
    index: String,
    /// Lines from the HTTP side for the log.
    notes: Vec<String>,
}

struct Pages(Arc<Mutex<Published>>);

impl http::Pages for Pages {
    fn metrics(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .metrics
            .clone()
    }
    fn index(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .index
            .clone()
    }
    fn note(&self, line: &str) {
        let mut p = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Bounded: the loop takes them once a second.
        if p.notes.len() < 100 {
            p.notes.push(line.to_string());
        }
    }
}

/// Triggers by reason: acted on, not acted on.
#[derive(Default)]
struct TriggerCounts(Vec<(String, u64, u64)>);

impl TriggerCounts {
    fn add(&mut self, reason: &str, acted: bool) {
        let i = match self.0.iter().position(|t| t.0 == reason) {
            Some(i) => i,
            None => {
                self.0.push((reason.to_string(), 0, 0));
                self.0.len() - 1
            }
        };
        if acted {
            self.0[i].1 += 1;
        } else {
            self.0[i].2 += 1;
        }
    }
}

const SECOND: u64 = 1_000_000_000;
/// The baseline of the p99 trigger: readings a minute apart, the last 15.
const BASELINE_EVERY_NS: u64 = 60 * SECOND;
const BASELINE_READINGS: usize = 15;
/// The captures `/` lists, newest first.
const KEPT_LISTED: usize = 50;
/// The ring's memory bound.
const RING_BYTES: usize = 64 << 20;

pub fn run(opts: WatchOptions) -> Result<ExitStatus> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::bad_input(
            "watch needs root (BPF is root-only here: kernel.unprivileged_bpf_disabled): run it with sudo",
        ));
    }
    // Before the programs load: a port in use, or a directory not ours,
    // stops here.
    let mut server = http::Server::bind(opts.listen)
        .map_err(|e| Error::bad_input(format!("cannot listen on {}: {e}", opts.listen)))?;
    if let Some(path) = &opts.web_config {
        server = server
            .with_web_config(path.clone())
            .map_err(Error::bad_input)?;
    }
    let scheme = server.scheme();
    let (formats, _scratch) = match &opts.dir {
        Some(dir) => {
            keep::claim(dir).map_err(Error::bad_input)?;
            burst::remove_leftovers(dir);
            let f = dir.join(keep::FORMATS_DIR);
            let _ = std::fs::remove_dir_all(&f);
            (f, None)
        }
        None => {
            let t = tempdir()?;
            (t.0.clone(), Some(t))
        }
    };
    std::fs::create_dir_all(&formats)
        .map_err(|e| Error::failed(format!("cannot create {}: {e}", formats.display())))?;
    let mut log = Log::open(opts.log.clone())?;
    install_signal_handlers();
    let keep_ns = (opts.before_s + opts.after_s + opts.window_s + 5) * SECOND;
    let ring = Arc::new(Mutex::new(RecordRing::new(keep_ns, RING_BYTES)));
    let light = LightOptions {
        slow_ns: opts.slow_ns,
        cap_per_s: opts.cap_per_s,
        accounting: opts.accounting,
        runqueue: opts.runqueue != runqueue::Policy::Off,
        irq: opts.irq,
        ..LightOptions::default()
    };
    let mut session =
        LightSession::start(&light, &formats, Some(Arc::clone(&ring))).map_err(Error::from)?;
    let published = Arc::new(Mutex::new(Published::default()));
    let stop_http = Arc::new(AtomicBool::new(false));
    let addr = server.local_addr().unwrap_or(opts.listen);
    let http = {
        let pages = Pages(Arc::clone(&published));
        let stop = Arc::clone(&stop_http);
        std::thread::Builder::new()
            .name("iosleuth-http".into())
            .spawn(move || server.serve(&pages, &stop))
            .map_err(|e| Error::failed(format!("cannot start the HTTP thread: {e}")))?
    };
    log.line(&format!(
        "serving {scheme}://{addr}/metrics; {}",
        match &opts.dir {
            Some(d) => format!("captures kept in {}", d.display()),
            None => "no --dir: triggers are counted, no capture is kept".into(),
        }
    ));
    let outcome = Watcher::new(&opts, &mut session, &ring, &published, &mut log).run();
    stop_http.store(true, Ordering::SeqCst);
    let _ = http.join();
    let stopped = session.stop().map_err(|e| Error::failed(e.message()));
    log.line("stopped; the programs are detached");
    outcome?;
    stopped?;
    Ok(ExitStatus::SUCCESS)
}

/// A scratch directory of this process, removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> Result<TempDir> {
    crate::capture::journal::scratch_dir("watch")
        .map(TempDir)
        .map_err(|e| Error::failed(format!("cannot create a scratch directory: {e}")))
}

fn sleep_until_next_second(started: &std::time::Instant) {
    let e = started.elapsed();
    let next = Duration::from_secs(e.as_secs() + 1);
    // Short naps: a signal is seen within 100 ms.
    while started.elapsed() < next && !STOP.load(Ordering::SeqCst) {
        std::thread::sleep((next - started.elapsed()).min(Duration::from_millis(100)));
    }
}

/// `/`: what is served and the captures kept, newest first.
fn index_page(opts: &WatchOptions, kept: &[String]) -> String {
    let esc = crate::report::html::esc;
    let mut out = String::from(
        "<!doctype html><meta charset=utf-8><title>iosleuth watch</title>\n<h1>iosleuth watch</h1>\n<p><a href=\"/metrics\">/metrics</a>: Prometheus text format.</p>\n",
    );
    match &opts.dir {
        None => out.push_str("<p>No --dir: triggers are counted, no capture is kept.</p>\n"),
        Some(d) => {
            out.push_str(&format!(
                "<p>Captures are kept in {} (each with report.html and report.json).</p>\n<ul>\n",
                esc(&d.display().to_string())
            ));
            for k in kept.iter().rev().take(KEPT_LISTED) {
                out.push_str(&format!("<li>{}</li>\n", esc(k)));
            }
            out.push_str("</ul>\n");
        }
    }
    out
}

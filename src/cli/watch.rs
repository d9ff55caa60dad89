//! `iosleuth watch`: the options of the always-on daemon.

use crate::error::{Error, ExitStatus, Result};
use crate::watch::runqueue::Policy;
use crate::watch::trigger::TriggerOptions;
use crate::watch::{WatchOptions, DEFAULT_LISTEN};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

/// `watch --runqueue`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunqueueArg {
    Auto,
    On,
    Off,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Serve the metrics on this address and port (`GET /metrics`;
    /// localhost unless told otherwise).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// TLS and basic authentication for --listen, from a web configuration
    /// file in the format Prometheus' exporters read (tls_server_config:
    /// cert_file, key_file; basic_auth_users: user: bcrypt hash); read
    /// again when it or its certificate changes. Without it: plain HTTP,
    /// no authentication.
    #[arg(long, value_name = "FILE")]
    web_config: Option<PathBuf>,
    /// Keep a capture here each time a trigger fires, with its diagnosis
    /// (report.json, report.html); without it, triggers are only counted.
    /// A new or empty directory, or one `watch` used before.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// A request is slow (kept whole in memory for the next capture) from
    /// this many milliseconds; by default from the running p99 of its
    /// device and operation.
    #[arg(long, value_name = "MS")]
    slow: Option<f64>,
    /// Judge the request triggers on this device only (loop0, /dev/loop0
    /// or 7,0; again for more); the metrics still cover every device.
    #[arg(long, value_parser = super::args::parse_device, value_name = "DEV")]
    device: Vec<super::args::DeviceArg>,
    /// Slow requests kept per second at most; the others are counted.
    #[arg(long, default_value = "1000", value_name = "N")]
    slow_cap: u32,
    /// Fire when a device's p99 over the last --window is this many times
    /// its baseline (the 15 minutes before); 0: never.
    #[arg(long, default_value = "4", value_name = "FACTOR")]
    trigger_p99: f64,
    /// ... and at least this many milliseconds.
    #[arg(long, default_value = "5", value_name = "MS")]
    trigger_p99_floor: f64,
    /// Fire on any request at least this many milliseconds long; 0: never.
    #[arg(long, default_value = "100", value_name = "MS")]
    trigger_slow: f64,
    /// Fire when a thread waits runnable at least this many milliseconds;
    /// 0: never.
    #[arg(long, default_value = "100", value_name = "MS")]
    trigger_runqueue: f64,
    /// Judge the runqueue trigger on threads of this name only (as
    /// /proc/PID/comm says it; again for more); by default every thread.
    #[arg(long, value_name = "NAME")]
    runqueue_comm: Vec<String>,
    /// The p99 trigger's window, in seconds.
    #[arg(long, default_value = "10", value_name = "S")]
    window: u64,
    /// A kept capture starts this many seconds before the trigger.
    #[arg(long, default_value = "30", value_name = "S")]
    before: u64,
    /// ... and ends this many seconds after it.
    #[arg(long, default_value = "10", value_name = "S")]
    after: u64,
    /// Keep a capture at most this often (seconds); triggers in between
    /// are counted as skipped.
    #[arg(long, default_value = "300", value_name = "S")]
    min_interval: u64,
    /// The kept captures take at most this many MiB; the oldest go first.
    #[arg(long, default_value = "1024", value_name = "MIB")]
    quota: u64,
    /// Log to this file (reopened on SIGHUP) rather than standard error.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Stop after this many seconds (default: at SIGTERM or SIGINT).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// How a request's stages are measured: from the request's own
    /// timestamps (`stamps`, the cheaper) or from per-request state.
    #[arg(long, value_enum, default_value = "stamps")]
    accounting: super::args::AccountingArg,
    /// Watch runqueue waits (the scheduler's hooks, which run at every
    /// context switch): `auto` while they cost under a point of the CPUs
    /// (estimated from the kernel's switch count), `on`, or `off`. While
    /// they are off the runqueue trigger cannot fire.
    #[arg(long, value_enum, default_value = "auto")]
    runqueue: RunqueueArg,
    /// Serve hard and soft interrupt time per CPU (the interrupts' hooks:
    /// two clock reads per interrupt, about 45 ns per I/O here); `off`
    /// (the default) leaves them unknown: iosleuth_not_watched says so.
    #[arg(long, value_enum, default_value = "off")]
    irq: super::args::OnOff,
    /// Serve per-cgroup series for this many cgroups (the first seen, the
    /// busiest first); the rest are summed under cgroup="other". 0: only
    /// "other".
    #[arg(long, default_value = "20", value_name = "N")]
    cgroups: usize,
    /// Also serve each cgroup's latency histogram
    /// (iosleuth_cgroup_request_seconds, by cgroup, device and operation):
    /// 22 series per (cgroup, device, operation), where the request and
    /// byte counters, always served, take 2 (docs/WATCH.md, "How many
    /// series").
    #[arg(long)]
    cgroup_histograms: bool,
    /// Also run the full recorder (`iosleuth record`, every event set)
    /// for this many seconds from each trigger that keeps a capture; it
    /// lands in the capture as `full/`, diagnosed. Costs what `record`
    /// costs while it runs, and its disk space counts in --quota.
    #[arg(long, value_name = "S", requires = "dir", value_parser = clap::value_parser!(u64).range(1..=3600))]
    burst: Option<u64>,
}

fn ms_ns(ms: f64, what: &str) -> Result<Option<u64>> {
    if !ms.is_finite() || ms < 0.0 {
        return Err(Error::bad_input(format!(
            "{what}: {ms} is not a number of milliseconds"
        )));
    }
    Ok((ms > 0.0).then_some((ms * 1e6) as u64))
}

pub fn run(a: WatchArgs) -> Result<ExitStatus> {
    if !a.trigger_p99.is_finite() || a.trigger_p99 < 0.0 {
        return Err(Error::bad_input(format!(
            "--trigger-p99: {} is not a factor",
            a.trigger_p99
        )));
    }
    if a.window == 0 {
        return Err(Error::bad_input("--window: at least 1 second"));
    }
    let opts = WatchOptions {
        listen: a.listen,
        web_config: a.web_config,
        dir: a.dir,
        slow_ns: match a.slow {
            Some(ms) => Some(ms_ns(ms, "--slow")?.unwrap_or(0)),
            None => None,
        },
        cap_per_s: a.slow_cap,
        devices: a
            .device
            .iter()
            .map(|d| match d {
                super::args::DeviceArg::Dev(dev) => dev.to_string(),
                super::args::DeviceArg::Name(name) => name.clone(),
            })
            .collect(),
        trigger: TriggerOptions {
            p99_factor: (a.trigger_p99 > 0.0).then_some(a.trigger_p99),
            p99_floor_ns: ms_ns(a.trigger_p99_floor, "--trigger-p99-floor")?.unwrap_or(0),
            slow_ns: ms_ns(a.trigger_slow, "--trigger-slow")?,
            runqueue_ns: match a.runqueue {
                RunqueueArg::Off => None,
                _ => ms_ns(a.trigger_runqueue, "--trigger-runqueue")?,
            },
            runqueue_comms: a.runqueue_comm.clone(),
            ..TriggerOptions::default()
        },
        window_s: a.window,
        before_s: a.before,
        after_s: a.after,
        min_interval_s: a.min_interval,
        quota_bytes: a.quota.saturating_mul(1 << 20),
        log: a.log,
        duration_s: a.duration,
        accounting: a.accounting.into(),
        cgroups: a.cgroups,
        cgroup_histograms: a.cgroup_histograms,
        burst_s: a.burst,
        runqueue: match a.runqueue {
            RunqueueArg::Auto => Policy::Auto,
            RunqueueArg::On => Policy::On,
            RunqueueArg::Off => Policy::Off,
        },
        irq: a.irq == super::args::OnOff::On,
    };
    crate::watch::run(opts)
}

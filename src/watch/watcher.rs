//! The daemon's loop: once a second it reads the maps and the disks'
//! diskstats, judges the triggers, keeps what a trigger asked for,
//! remembers the reading and serves the scrape.

use super::*;

/// The identifier of interrupt time not watched (`--irq off`).
const IRQ_OFF: &str = "irq_off";

/// The daemon's loop and what it remembers between seconds. Each second
/// reads the maps, judges the triggers on them, keeps what a trigger
/// asked for, remembers the reading and serves the scrape.
pub(super) struct Watcher<'a> {
    opts: &'a WatchOptions,
    session: &'a mut LightSession,
    ring: &'a Arc<Mutex<RecordRing>>,
    published: &'a Arc<Mutex<Published>>,
    log: &'a mut Log,
    started: std::time::Instant,
    /// Every second for the window and the before-seconds.
    readings: VecDeque<Reading>,
    /// Every minute, for the p99 trigger's baseline.
    baselines: VecDeque<Reading>,
    /// A capture collecting its after-seconds.
    pending: Option<Pending>,
    last_capture_ns: Option<u64>,
    counts: TriggerCounts,
    findings: Vec<ActiveFinding>,
    kept: Kept,
    done_tx: mpsc::Sender<std::result::Result<Diagnosed, String>>,
    done_rx: mpsc::Receiver<std::result::Result<Diagnosed, String>>,
    /// The diagnosis running in the background.
    busy: Option<std::thread::JoinHandle<()>>,
    tick: u64,
    /// The ring's records up to this number were judged.
    judged_seq: u64,
    /// What the session cannot see, whatever the second.
    missing: Vec<NotWatched>,
    rq: runqueue::Runqueue,
    /// Since when runqueue waits are watched without a break (none: not now).
    rq_since: Option<u64>,
    series: cgroups::CgroupSeries,
    /// The kernel's own request counts, since each disk's counting began.
    kernel: KernelCounts,
    /// For the last log line: what the runqueue hooks sent, the longest.
    waits_seen: u64,
    longest_wait: Option<WaitRecord>,
}

/// The captures kept: the lines `/` lists, and their number and bytes
/// on disk under the quota.
struct Kept {
    lines: Vec<String>,
    n: u64,
    bytes: u64,
}

/// This second's reading and what goes with it but is not remembered.
struct Second {
    reading: Reading,
    /// `maj,min` → the kernel's name.
    names: Vec<(String, String)>,
    programs: Vec<crate::model::light::ProgramStats>,
    not_watched: Vec<NotWatched>,
}

impl<'a> Watcher<'a> {
    pub(super) fn new(
        opts: &'a WatchOptions,
        session: &'a mut LightSession,
        ring: &'a Arc<Mutex<RecordRing>>,
        published: &'a Arc<Mutex<Published>>,
        log: &'a mut Log,
    ) -> Watcher<'a> {
        // The captures of earlier runs in the same directory are listed too.
        let lines = opts.dir.as_deref().map_or_else(Vec::new, |d| {
            keep::kept(d)
                .into_iter()
                .map(|(p, _)| format!("{} (kept by an earlier run)", p.display()))
                .rev()
                .take(KEPT_LISTED)
                .rev()
                .collect()
        });
        let (n, bytes) = opts
            .dir
            .as_deref()
            .map_or((0, 0), |d| keep::enforce_quota(d, opts.quota_bytes));
        let (done_tx, done_rx) = mpsc::channel();
        let mut missing = session_missing(session);
        if !opts.irq {
            // For the whole session: the kept captures say it too.
            missing.push(NotWatched::new(
                IRQ_OFF,
                "hard and soft interrupt time (--irq off)",
            ));
        }
        let rq = runqueue::Runqueue::new(opts.runqueue, aya::util::nr_cpus().unwrap_or(1));
        let rq_since = rq.on.then(snapshot::mono_ns);
        let kernel = KernelCounts::from(session.diskstats_at_start());
        Watcher {
            opts,
            session,
            ring,
            published,
            log,
            started: std::time::Instant::now(),
            readings: VecDeque::new(),
            baselines: VecDeque::new(),
            pending: None,
            last_capture_ns: None,
            counts: TriggerCounts::default(),
            findings: Vec::new(),
            kept: Kept { lines, n, bytes },
            done_tx,
            done_rx,
            busy: None,
            tick: 0,
            judged_seq: 0,
            missing,
            rq,
            rq_since,
            series: cgroups::CgroupSeries::new(opts.cgroups),
            kernel,
            waits_seen: 0,
            longest_wait: None,
        }
    }

    pub(super) fn run(mut self) -> Result<()> {
        // A stop ends the loop after one more pass: what arrived since the
        // last second is still judged (a short run may end before the
        // second reading, the first the triggers can compare with).
        let mut stopping = false;
        loop {
            if self.stop_asked() {
                if stopping {
                    break;
                }
                stopping = true;
                // The slow-request reader drains the kernel's ring every 100 ms.
                std::thread::sleep(Duration::from_millis(250));
            }
            self.housekeeping()?;
            let now = snapshot::mono_ns();
            let second = self.read(now)?;
            self.judge(&second, now);
            self.keep(&second, now)?;
            self.remember(second.reading, now);
            self.serve(&second.names, &second.programs, &second.not_watched);
            if !stopping {
                sleep_until_next_second(&self.started);
            }
        }
        self.finish();
        Ok(())
    }

    fn stop_asked(&self) -> bool {
        STOP.load(Ordering::SeqCst)
            || self
                .opts
                .duration_s
                .is_some_and(|d| self.started.elapsed().as_secs_f64() >= d)
    }

    /// The log reopened on SIGHUP; new disks and blk-throttle's work looked
    /// for every 10 s; the runqueue hooks on or off by their policy.
    fn housekeeping(&mut self) -> Result<()> {
        if REOPEN.swap(false, Ordering::SeqCst) {
            self.log.reopen()?;
            self.log.line("log reopened");
        }
        if self.tick.is_multiple_of(10) {
            if let Ok(n) = self.session.refresh_devices() {
                if n > 0 && self.tick > 0 {
                    self.log.line(&format!("{n} new disk(s) counted apart"));
                }
            }
            if let Err(e) = self.session.refresh_throttle() {
                self.log.line(&format!("throttled bios: {}", e.message()));
            }
        }
        self.tick += 1;
        if let Some(change) = self.rq.second(runqueue::context_switches()) {
            match self.session.set_runqueue(change.on) {
                Ok(()) => {
                    self.rq_since = change.on.then(snapshot::mono_ns);
                    self.log.line(&format!(
                        "runqueue waits {}: {}",
                        if change.on {
                            "watched again"
                        } else {
                            "no longer watched"
                        },
                        change.why
                    ));
                }
                Err(e) => {
                    self.rq.on = !change.on;
                    self.log.line(&format!("runqueue waits: {}", e.message()));
                }
            }
        }
        Ok(())
    }

    /// What the maps counted so far, and what cannot be seen this second.
    fn read(&mut self, now: u64) -> Result<Second> {
        let failed = |e: crate::capture::tracefs::CaptureError| Error::failed(e.message());
        let mut not_watched = self.missing.clone();
        if !self.rq.on {
            not_watched.push(match self.opts.runqueue {
                runqueue::Policy::Auto => NotWatched::new(
                    "runqueue_auto",
                    "runqueue waits (--runqueue auto: over a point of CPU)",
                ),
                _ => NotWatched::new("runqueue_off", "runqueue waits (--runqueue off)"),
            });
        }
        let programs = self.session.program_stats();
        if programs.iter().all(|p| p.run_count.is_none()) {
            not_watched.push(NotWatched::new(
                "bpf_run_time",
                "the BPF programs' run time (kernel.bpf_stats_enabled is 0)",
            ));
        }
        // The kernel's counts first: a request that completes between the
        // two readings is then in the programs' and not yet in the
        // kernel's, so what the programs did not see is never overstated.
        let stats = self.session.diskstats();
        self.kernel.add_new(&stats);
        let mut devices = self.session.devices().map_err(failed)?;
        self.kernel.apply(&stats, &mut devices);
        let cpus = self.session.cpus().map_err(failed)?;
        let io_uring = self.session.io_uring().map_err(failed)?;
        let cgroup_entries = self.session.cgroups().map_err(failed)?;
        self.series.update(&cgroup_entries);
        let cgroups = keep_largest(cgroup_entries, CGROUPS_READ).0;
        let names = self
            .session
            .disks()
            .iter()
            .map(|d| (d.dev.clone(), d.name.clone()))
            .collect();
        Ok(Second {
            reading: Reading {
                at_ns: now,
                devices,
                cpus,
                cgroups,
                io_uring,
            },
            names,
            programs,
            not_watched,
        })
    }

    /// The triggers, on what the maps counted since the last second, over
    /// the window and against the baseline, and on the runqueue waits the
    /// ring received; a trigger acted on starts a pending capture.
    fn judge(&mut self, second: &Second, now: u64) {
        let Some(prev) = self.readings.back() else {
            return;
        };
        let opts = self.opts;
        let names = &second.names;
        let devices = &second.reading.devices;
        let window_from = reading_at(&self.readings, now.saturating_sub(opts.window_s * SECOND))
            .expect("a reading");
        let judged = |mut ds: Vec<LightDevice>| {
            if !opts.devices.is_empty() {
                ds.retain(|d| {
                    opts.devices.iter().any(|want| {
                        *want == d.dev || names.iter().any(|(dev, n)| *dev == d.dev && n == want)
                    })
                });
            }
            ds
        };
        let window = judged(devices_since(devices, &window_from.devices));
        let last = judged(devices_since(devices, &prev.devices));
        let baseline = self
            .baselines
            .front()
            .map(|b| judged(devices_since(&window_from.devices, &b.devices)))
            .unwrap_or_default();
        let waits = self.waits_arrived();
        let seen = trigger::Seen {
            window: &window,
            last: &last,
            baseline: &baseline,
            names,
            waits: &waits,
        };
        let Some(reason) = trigger::check(&opts.trigger, &seen) else {
            return;
        };
        let limited = self
            .last_capture_ns
            .is_some_and(|t| now.saturating_sub(t) < opts.min_interval_s * SECOND);
        let act = opts.dir.is_some() && self.pending.is_none() && self.busy.is_none() && !limited;
        self.counts.add(reason.name(), act);
        if !act {
            return;
        }
        self.log.line(&format!("trigger: {}", reason.describe()));
        let from = reading_at(&self.readings, now.saturating_sub(opts.before_s * SECOND))
            .expect("a reading")
            .clone();
        let fired_unix = unix_now();
        let burst = match (opts.burst_s, &opts.dir) {
            (Some(s), Some(root)) => burst::Burst::start(root, fired_unix, s)
                .map_err(|e| self.log.line(&format!("full record burst: {e}")))
                .ok(),
            _ => None,
        };
        self.pending = Some(Pending {
            reason,
            fired_ns: now,
            fired_unix,
            from,
            snapshot: snapshot::document(snapshot::take(), serde_json::Value::Null),
            burst,
        });
        self.last_capture_ns = Some(now);
    }

    /// The runqueue waits the ring received since the last second.
    fn waits_arrived(&mut self) -> Vec<WaitRecord> {
        let waits: Vec<WaitRecord> = {
            let r = self.ring.lock().unwrap_or_else(|p| p.into_inner());
            let (recent, next) = r.arrived_since(self.judged_seq);
            self.judged_seq = next;
            recent
                .into_iter()
                .filter(|b| u16::from_le_bytes([b[0], b[1]]) == REC_WAIT)
                .filter_map(WaitRecord::parse)
                .collect()
        };
        self.waits_seen += waits.len() as u64;
        if let Some(w) = waits.iter().max_by_key(|w| w.wait_ns) {
            if self
                .longest_wait
                .as_ref()
                .is_none_or(|l| w.wait_ns > l.wait_ns)
            {
                self.longest_wait = Some(w.clone());
            }
        }
        waits
    }

    /// A capture whose after-seconds are over is written and diagnosed in
    /// the background; the diagnoses that ended are logged and listed.
    fn keep(&mut self, second: &Second, now: u64) -> Result<()> {
        if self
            .pending
            .as_ref()
            .is_some_and(|p| now >= p.fired_ns + self.opts.after_s * SECOND)
        {
            let p = self.pending.take().expect("pending");
            let tx = self.done_tx.clone();
            let opts = self.opts.clone();
            let missing = capture_missing(&second.not_watched);
            let watched = self.rq_since.is_some_and(|s| s <= p.from.at_ns);
            let depth_sampled = self.session.depth_sampled();
            let latest = second.reading.clone();
            let ring = Arc::clone(self.ring);
            self.busy = Some(
                std::thread::Builder::new()
                    .name("iosleuth-keep".into())
                    .spawn(move || {
                        let done =
                            finish(&opts, &missing, watched, depth_sampled, p, &latest, &ring);
                        let _ = tx.send(done);
                    })
                    .map_err(|e| Error::failed(format!("cannot start a diagnosis: {e}")))?,
            );
        }
        while let Ok(done) = self.done_rx.try_recv() {
            if let Some(b) = self.busy.take() {
                let _ = b.join();
            }
            match done {
                Ok(d) => {
                    self.log.line(&format!("kept {}", d.line()));
                    self.kept.lines.push(d.line());
                    // The page shows the last 50: keep no more than that.
                    let over = self.kept.lines.len().saturating_sub(KEPT_LISTED);
                    self.kept.lines.drain(..over);
                    self.findings = d.findings;
                    if let Some(dir) = &self.opts.dir {
                        (self.kept.n, self.kept.bytes) =
                            keep::enforce_quota(dir, self.opts.quota_bytes);
                    }
                }
                Err(e) => self
                    .log
                    .line(&format!("a kept capture could not be diagnosed: {e}")),
            }
        }
        Ok(())
    }

    /// Readings: every second for the window and the before-seconds,
    /// every minute for the baseline.
    fn remember(&mut self, reading: Reading, now: u64) {
        if self
            .baselines
            .back()
            .is_none_or(|b| now.saturating_sub(b.at_ns) >= BASELINE_EVERY_NS)
        {
            self.baselines.push_back(Reading {
                at_ns: now,
                devices: reading.devices.clone(),
                cpus: Vec::new(),
                cgroups: Vec::new(),
                io_uring: Vec::new(),
            });
            if self.baselines.len() > BASELINE_READINGS {
                self.baselines.pop_front();
            }
        }
        self.readings.push_back(reading);
        let retained_ns = (self.opts.before_s.max(self.opts.window_s) + 2) * SECOND;
        while self
            .readings
            .front()
            .is_some_and(|r| now.saturating_sub(r.at_ns) > retained_ns)
        {
            self.readings.pop_front();
        }
    }

    /// The scrape and the index page, published for the HTTP side; its
    /// notes logged.
    fn serve(
        &mut self,
        names: &[(String, String)],
        programs: &[crate::model::light::ProgramStats],
        not_watched: &[NotWatched],
    ) {
        let latest = self.readings.back().expect("just remembered");
        let ring = {
            let r = self.ring.lock().unwrap_or_else(|p| p.into_inner());
            RingFigures {
                records: r.count() as u64,
                bytes: r.bytes() as u64,
                evicted_early: r.evicted_early,
            }
        };
        let not_watched_ids: Vec<String> = not_watched.iter().map(|n| n.id.clone()).collect();
        let metrics = prometheus::render(&Scrape {
            devices: &latest.devices,
            names,
            cpus: &latest.cpus,
            cgroups: &self.series.series(),
            cgroup_histograms: self.opts.cgroup_histograms,
            throttle: self.session.throttle(),
            irq: self.opts.irq,
            wait_min_ns: WAIT_MIN_NS,
            ring,
            process: process::figures(),
            findings: &self.findings,
            triggers: &self.counts.0,
            captures_kept: self.kept.n,
            captures_bytes: self.kept.bytes,
            not_watched: &not_watched_ids,
            programs,
            io_uring: &latest.io_uring,
        });
        let index = index_page(self.opts, &self.kept.lines);
        let notes = {
            let mut p = self.published.lock().unwrap_or_else(|p| p.into_inner());
            p.metrics = metrics;
            p.index = index;
            std::mem::take(&mut p.notes)
        };
        for n in notes {
            self.log.line(&n);
        }
    }

    /// After a stop: the diagnosis in flight finishes, a capture still
    /// collecting its after-seconds ends now (shorter), and the last log
    /// line says what was seen.
    fn finish(mut self) {
        if let Some(b) = self.busy.take() {
            // Its capture is complete on disk.
            let _ = b.join();
        }
        if let (Some(p), Some(last)) = (self.pending.take(), self.readings.back()) {
            if let Some(b) = &p.burst {
                b.interrupt();
            }
            let watched = self.rq_since.is_some_and(|s| s <= p.from.at_ns);
            let missing = capture_missing(&self.missing);
            let depth_sampled = self.session.depth_sampled();
            let _ = self.done_tx.send(finish(
                self.opts,
                &missing,
                watched,
                depth_sampled,
                p,
                last,
                self.ring,
            ));
        }
        while let Ok(done) = self.done_rx.try_recv() {
            match done {
                Ok(d) => self.log.line(&format!("kept {}", d.line())),
                Err(e) => self
                    .log
                    .line(&format!("a kept capture could not be diagnosed: {e}")),
            }
        }
        let triggers: Vec<String> = self
            .counts
            .0
            .iter()
            .map(|(reason, acted, skipped)| format!("{reason} {acted} captured, {skipped} skipped"))
            .collect();
        self.log.line(&format!(
            "stopping after {:.0} s: {} runqueue waits of {} ms or more seen{}; triggers: {}",
            self.started.elapsed().as_secs_f64(),
            self.waits_seen,
            WAIT_MIN_NS / 1_000_000,
            self.longest_wait
                .as_ref()
                .map_or_else(String::new, |w| format!(
                    " (the longest {:.1} ms, {} tid {} on CPU {})",
                    w.wait_ns as f64 / 1e6,
                    crate::model::light::comm_string(&w.comm),
                    w.tid,
                    w.cpu
                )),
            if triggers.is_empty() {
                "none fired".to_string()
            } else {
                triggers.join(", ")
            }
        ));
    }
}

/// What a kept capture says it did not record, in words: all that is not
/// watched but the interrupt time, which its `irq` says itself.
fn capture_missing(not_watched: &[NotWatched]) -> Vec<String> {
    not_watched
        .iter()
        .filter(|n| n.id != IRQ_OFF)
        .map(|n| n.prose.clone())
        .collect()
}

/// Each counted disk's diskstats when its counting began (`maj,min`,
/// when, fields): the kernel's counts are served as the difference from
/// then on.
struct KernelCounts {
    base: Vec<(String, u64, Vec<u64>)>,
}

impl KernelCounts {
    /// The disks counted since the programs were attached begin at that
    /// reading.
    fn from(at_start: &DiskstatsReading) -> KernelCounts {
        let mut k = KernelCounts { base: Vec::new() };
        k.add_new(at_start);
        k
    }

    /// A disk given a slot since begins at its first reading.
    fn add_new(&mut self, now: &DiskstatsReading) {
        for (dev, fields) in &now.1 {
            if !self.base.iter().any(|(d, _, _)| d == dev) {
                self.base.push((dev.clone(), now.0, fields.clone()));
            }
        }
    }

    /// Each device's diskstats since its counting began.
    fn apply(&self, now: &DiskstatsReading, devices: &mut [LightDevice]) {
        for d in devices {
            let fields = now.1.iter().find(|(dev, _)| *dev == d.dev);
            let base = self.base.iter().find(|(dev, _, _)| *dev == d.dev);
            if let (Some((_, fields)), Some((_, at, base))) = (fields, base) {
                let seconds = now.0.saturating_sub(*at) as f64 / 1e9;
                d.diskstats = DiskstatsDelta::between(base, fields, seconds);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The disks there when the programs were attached count from that
    /// reading; one given a slot later, from its first reading, whether
    /// or not the programs have seen a request of it yet.
    #[test]
    fn the_kernels_counts_begin_with_each_disks_counting() {
        let stat = |reads: u64| {
            let mut f = vec![0u64; 17];
            f[0] = reads;
            f
        };
        let at_start: DiskstatsReading = (1_000_000_000, vec![("7,0".into(), stat(100))]);
        let mut k = KernelCounts::from(&at_start);
        let first: DiskstatsReading = (
            2_000_000_000,
            vec![("7,0".into(), stat(130)), ("7,1".into(), stat(50))],
        );
        k.add_new(&first);
        let later: DiskstatsReading = (
            4_000_000_000,
            vec![("7,0".into(), stat(160)), ("7,1".into(), stat(58))],
        );
        k.add_new(&later);
        let mut devices = vec![
            LightDevice {
                dev: "7,0".into(),
                ..Default::default()
            },
            LightDevice {
                dev: "7,1".into(),
                ..Default::default()
            },
            LightDevice {
                dev: "other".into(),
                ..Default::default()
            },
        ];
        k.apply(&later, &mut devices);
        let k0 = devices[0].diskstats.as_ref().unwrap();
        assert_eq!((k0.completed()[0], k0.seconds), (60, 3.0));
        let k1 = devices[1].diskstats.as_ref().unwrap();
        assert_eq!((k1.completed()[0], k1.seconds), (8, 2.0));
        assert!(devices[2].diskstats.is_none(), "no stat file: unknown");
    }
}

//! `record --light`: BPF programs keep each request's state in the kernel
//! and aggregate every stage into histograms by device and operation; only
//! slow requests reach user space, through a ring buffer drained by a
//! thread here. The programs are BTF-typed raw tracepoints (tp_btf), the
//! cheapest hooks this kernel offers. Everything is owned by file
//! descriptors: programs, links and maps go away with the process, also on
//! SIGKILL (nothing is pinned).
//!
//! Around the slow requests, a flight recorder: runqueue waits of at least
//! `WAIT_MIN_NS` with who held the CPU (sched_wakeup/sched_switch), each
//! CPU's hard and soft interrupt time (`--irq on`), and low-rate events
//! kept whole: the journal's commits and checkpoints, the dirty limit's
//! pauses, writeback throttling's steps (classic tracepoints, whose raw records the
//! capture decodes with the format files it keeps, as a full capture does).

#[cfg(test)]
mod abi_check;
mod attach;
mod disks;
mod files;
mod inflight;
pub mod maps;
mod poller;
mod prog_info;
mod programs;
mod read;
pub mod ring;

use super::tracefs::CaptureError;
use super::tracefs::Tracefs;
use crate::model::light::{
    LightCgroup, LightCounters, LightCpu, LightDevice, LightDoc, LightUring, ProgramStats,
    SlowPolicy, CGROUPS_KEPT, CONTEXT, CONTEXT_EVENTS, EVERY_EVENT_MISSING,
};
use attach::{attach_btf, attach_events, load_btf, set_attached, Links};
use aya::maps::{Array, MapData, PerCpuArray, PerCpuHashMap, RingBuf};
use aya::programs::{BtfTracePoint, TracePoint};
use aya::{Btf, Ebpf, EbpfLoader};
use disks::{add_new_disks, device_slots, name_devices};
pub use disks::{DiskSlot, DiskstatsReading};
use files::{context_header, keep_formats, output, slow_header};
use maps::{CgKey, CgStats, Counters, CpuStats, DepthHist, Hist, SizeHist, UringStats, NOP, NSLOT};
use poller::{Out, Poller};
#[cfg(test)]
use programs::{all_programs, FAULT_FLOOR_PROGRAMS, FLOOR_PROGRAMS};
use programs::{event_program, programs, FLOOR_EVENT_PROGRAM, SCHEDULER, THROTTLE};
use read::device;
use ring::RecordRing;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The compiled programs (bpf/light.bpf.c, built by bpf/build.sh and
/// committed so that building iosleuth needs no clang).
static OBJECT: &[u8] = include_bytes!("../../../bpf/light.bpf.o");

/// How a request's stages are measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Accounting {
    /// From the request's own timestamps at completion where its queue
    /// keeps them (per-request state where it does not).
    #[default]
    Stamps,
    /// Per-request state from issue to completion, and the depth at
    /// issue from a shared in-flight count (the first light accounting).
    State,
}

impl Accounting {
    pub fn name(self) -> &'static str {
        match self {
            Accounting::Stamps => "stamps",
            Accounting::State => "state",
        }
    }
}
/// Runqueue waits sent to user space from this long: half of rt_starvation's
/// 10 ms, far above a healthy wait (the lab's runs: under 2 ms).
pub const WAIT_MIN_NS: u64 = 5_000_000;

/// 10 ms: slower than any healthy SSD or loop-device request, faster than
/// the 100-270 ms stalls iosleuth hunts.
pub const INITIAL_SLOW_NS: u64 = 10_000_000;

#[derive(Clone, Debug)]
pub struct LightOptions {
    /// Every request at least this long is slow; otherwise the running p99.
    pub slow_ns: Option<u64>,
    /// Slow requests sent per second at most.
    pub cap_per_s: u32,
    /// Measure the programs' own run time (two clock reads per run).
    pub bpf_stats: bool,
    /// Only the empty programs of the benchmark's floor.
    pub floor: bool,
    /// Also empty programs on the hooks timing page faults would need
    /// (the benchmark's measure of their floor).
    pub fault_floor: bool,
    pub accounting: Accounting,
    /// Attach the scheduler's hooks (runqueue waits and who held the CPU).
    pub runqueue: bool,
    /// Attach the interrupts' hooks (hard and soft interrupt time per
    /// CPU): two clock reads per interrupt, for figures no rule reads.
    pub irq: bool,
    /// Count bios held back by blk-throttle (off where the kernel has no
    /// dispatch work to recognise them by: `start` says so).
    pub throttle: bool,
}

impl Default for LightOptions {
    fn default() -> Self {
        LightOptions {
            slow_ns: None,
            cap_per_s: 1000,
            bpf_stats: false,
            floor: false,
            fault_floor: false,
            accounting: Accounting::default(),
            runqueue: true,
            irq: false,
            throttle: true,
        }
    }
}

/// blk-throttle's dispatch work, which submits the bios a limit held.
const THROTTLE_DISPATCH_FN: &str = "blk_throtl_dispatch_work_fn";

/// The address of a kernel function from /proc/kallsyms (None: absent,
/// or hidden: kptr_restrict shows 0 to those without CAP_SYSLOG).
fn kernel_symbol(name: &str) -> Option<u64> {
    use std::io::BufRead;
    let f = std::fs::File::open("/proc/kallsyms").ok()?;
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            let mut w = l.split_whitespace();
            let (addr, _, sym) = (w.next()?, w.next()?, w.next()?);
            (sym == name && w.next().is_none())
                .then(|| u64::from_str_radix(addr, 16).ok())
                .flatten()
                .filter(|&a| a != 0)
        })
}

pub struct LightSession {
    ebpf: Ebpf,
    stats: Option<OwnedFd>,
    stop: Arc<AtomicBool>,
    poller: Option<JoinHandle<Result<Poller, CaptureError>>>,
    /// The latency histograms, read while the programs run (the poller
    /// holds its own handle to keep the thresholds).
    latency: PerCpuArray<MapData, Hist>,
    slots: Vec<DiskSlot>,
    /// The disks whose in-flight counts the poller keeps true.
    anchored: inflight::Disks,
    /// The scheduler's hooks while attached.
    sched_links: Links,
    /// The kernel refused the scheduler's program: never attached.
    sched_refused: bool,
    /// The throttle counters' hooks while attached (while some cgroup has
    /// an I/O limit: without one no bio is held).
    throttle_links: Links,
    opts: LightOptions,
    started_ns: u64,
    /// Each disk's diskstats when the programs were attached.
    stats_at_start: DiskstatsReading,
    missing_events: Vec<String>,
    /// One request in this many has its depth at issue read.
    depth_sampled: u32,
    /// Held while the classic tracepoints are attached (they are found
    /// through tracefs); unmounted after if iosleuth mounted it.
    _tracefs: Option<Tracefs>,
}

fn err(what: &str) -> impl Fn(String) -> CaptureError + '_ {
    move |e| CaptureError::Unusable(format!("{what}: {e}"))
}

/// Why BPF cannot be used here, as the user should read it.
fn load_error(e: impl std::fmt::Display) -> CaptureError {
    let e = e.to_string();
    let hint = if e.contains("EPERM") || e.contains("Operation not permitted") {
        " (BPF needs root or CAP_BPF with CAP_PERFMON)"
    } else {
        ""
    };
    CaptureError::Unusable(format!(
        "cannot load the BPF programs of --light: {e}{hint}; the full recorder (`iosleuth record` without --light) needs only tracefs"
    ))
}

impl LightSession {
    /// Loads the programs, names the devices, attaches, and starts draining
    /// slow requests into `DIR/slow.bin` and the context into
    /// `DIR/context.bin`, or, given a ring, into the ring (`watch`; DIR
    /// then holds only the event formats a capture written later needs).
    pub fn start(
        opts: &LightOptions,
        dir: &Path,
        ring: Option<Arc<Mutex<RecordRing>>>,
    ) -> Result<LightSession, CaptureError> {
        let btf = Btf::from_sys_fs().map_err(|e| {
            CaptureError::Unusable(format!(
                "--light needs the kernel's BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF): {e}; use the full recorder (`iosleuth record` without --light)"
            ))
        })?;
        // Without tracefs the kept events cannot be attached: the
        // capture says so, the rest works.
        let tracefs = Tracefs::open();
        let cpus =
            aya::util::nr_cpus().map_err(|(_, e)| err("cannot count CPUs")(e.to_string()))?;
        let cap_per_cpu: u32 = opts.cap_per_s.div_ceil(cpus as u32);
        // Throttled bios are counted where blk-throttle's dispatch work
        // can be recognised (the session then says they were).
        let mut opts = opts.clone();
        let throtl_fn =
            kernel_symbol(THROTTLE_DISPATCH_FN).filter(|_| opts.throttle && !opts.floor);
        opts.throttle = throtl_fn.is_some();
        let opts = &opts;
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .override_global("cap_per_cpu", &cap_per_cpu, true)
            .override_global("wait_min_ns", &WAIT_MIN_NS, true)
            .override_global("nr_cpus", &(cpus as u32), true)
            .override_global("depth_mask", &depth_mask(cpus as u32), true)
            .override_global("throtl_dispatch_fn", &throtl_fn.unwrap_or(0), true)
            .load(OBJECT)
            .map_err(load_error)?;
        let stats = if opts.bpf_stats {
            Some(
                aya::sys::enable_stats(aya::sys::Stats::RunTime)
                    .map_err(|e| err("cannot enable BPF run-time statistics")(e.to_string()))?,
            )
        } else {
            None
        };
        let slots = device_slots();
        name_devices(&mut ebpf, &slots)?;
        let initial = opts.slow_ns.unwrap_or(INITIAL_SLOW_NS);
        {
            let mut th: Array<_, u64> =
                Array::try_from(ebpf.map_mut(maps::MAP_THRESHOLD).expect("threshold map"))
                    .map_err(|e| err("threshold map")(e.to_string()))?;
            for k in 0..NSLOT * NOP {
                th.set(k, initial, 0)
                    .map_err(|e| err("threshold map")(e.to_string()))?;
            }
        }
        let attached = programs(opts);
        attach_btf(&mut ebpf, &btf, &attached)?;
        // Loaded now (verified once), attached while runqueue waits are
        // watched.
        // A kernel without the scheduler's sched_info stamps refuses the
        // switch program: the capture goes on without runqueue waits and
        // says so.
        let mut sched_refused = None;
        if !opts.floor {
            if let Err(e) = load_btf(&mut ebpf, &btf, &SCHEDULER) {
                sched_refused = Some(format!(
                    "{}the kernel refused the scheduler's program (it reads the scheduler's sched_info stamps and the runqueue's clock: CONFIG_SCHED_INFO, CONFIG_FAIR_GROUP_SCHED): {}",
                    crate::model::light::RUNQUEUE_MISSING,
                    e.message()
                ));
            }
            if opts.throttle {
                load_btf(&mut ebpf, &btf, &THROTTLE)?;
            }
        }
        let missing_events = match &tracefs {
            Ok(t) => {
                if !opts.floor {
                    keep_formats(t, dir)?;
                }
                attach_events(&mut ebpf, opts.floor)?
            }
            Err(e) => vec![format!(
                "{EVERY_EVENT_MISSING}kept event: the journal's, balance_dirty_pages, wbt ({})",
                e.message()
            )],
        };
        let mut missing_events = missing_events;
        missing_events.extend(sched_refused.clone());
        let started_ns = super::snapshot::mono_ns();
        let stats_at_start = disks::read_stats(&slots);
        let latency_map = ebpf.take_map(maps::MAP_LATENCY).expect("latency map");
        let latency_copy = inflight::map_copy(&latency_map, "latency map")?;
        let anchored: inflight::Disks = Arc::new(Mutex::new(anchored_disks(&slots)));
        let anchor = if opts.floor {
            None
        } else {
            let copy = |name: &str| {
                inflight::map_copy(ebpf.map(name).expect("a map of the programs"), name)
            };
            let shared = match opts.accounting {
                Accounting::State => Some(copy(maps::MAP_INFLIGHT)?),
                Accounting::Stamps => None,
            };
            Some(inflight::InflightAnchor::new(
                copy(maps::MAP_COUNTERS)?,
                shared,
                copy(maps::MAP_INFLIGHT_BIAS)?,
                Arc::clone(&anchored),
                cpus.min(crate::model::light::MAX_DEPTH_CPUS),
            )?)
        };
        let out = match ring {
            Some(ring) => Out::Ring(ring),
            None => Out::Files {
                slow: output(dir, crate::model::light::SLOW, &slow_header())?,
                context: output(dir, CONTEXT, &context_header())?,
            },
        };
        let poller = Poller {
            records: RingBuf::try_from(ebpf.take_map(maps::MAP_RECORDS).expect("records map"))
                .map_err(|e| err("records map")(e.to_string()))?,
            latency: PerCpuArray::try_from(latency_copy)
                .map_err(|e| err("latency map")(e.to_string()))?,
            threshold: Array::try_from(ebpf.take_map(maps::MAP_THRESHOLD).expect("threshold map"))
                .map_err(|e| err("threshold map")(e.to_string()))?,
            out,
            adaptive: opts.slow_ns.is_none(),
            anchor,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let poller = std::thread::Builder::new()
            .name("iosleuth-light".into())
            .spawn(move || poller.run(&flag))
            .map_err(|e| err("cannot start the slow-request reader")(e.to_string()))?;
        let mut session = LightSession {
            ebpf,
            stats,
            stop,
            poller: Some(poller),
            latency: PerCpuArray::try_from(latency_map)
                .map_err(|e| err("latency map")(e.to_string()))?,
            slots,
            anchored,
            sched_links: Vec::new(),
            sched_refused: sched_refused.is_some(),
            throttle_links: Vec::new(),
            opts: opts.clone(),
            started_ns,
            stats_at_start,
            missing_events,
            depth_sampled: depth_sampled(opts.accounting, cpus as u32),
            _tracefs: tracefs.ok(),
        };
        session.set_runqueue(opts.runqueue)?;
        session.refresh_throttle()?;
        Ok(session)
    }

    /// Attaches or detaches the scheduler's hooks (runqueue waits and who
    /// held the CPU); nothing when they already are as asked.
    pub fn set_runqueue(&mut self, on: bool) -> Result<(), CaptureError> {
        if self.opts.floor || self.sched_refused {
            return Ok(());
        }
        if on && self.sched_links.is_empty() {
            // A new attachment: each CPU drops what it knew from before.
            let mut gen: Array<_, u32> = Array::try_from(
                self.ebpf
                    .map_mut(maps::MAP_SCHED_GEN)
                    .expect("sched_gen map"),
            )
            .map_err(|e| err("sched_gen map")(e.to_string()))?;
            let next = gen.get(&0, 0).unwrap_or(0).wrapping_add(1);
            gen.set(0, next, 0)
                .map_err(|e| err("sched_gen map")(e.to_string()))?;
        }
        set_attached(&mut self.ebpf, &mut self.sched_links, &SCHEDULER, on)
    }

    /// Attaches the throttle counters' hooks while some cgroup has an I/O
    /// limit, detaches them while none has (then no bio can be held, and
    /// the hooks would cost a bio hook per bio for nothing). Called at the
    /// start and every few seconds; returns whether they are attached.
    pub fn refresh_throttle(&mut self) -> Result<bool, CaptureError> {
        if !self.opts.throttle {
            return Ok(false);
        }
        let on = crate::capture::cgroups::io_limits_set();
        set_attached(&mut self.ebpf, &mut self.throttle_links, &THROTTLE, on)?;
        Ok(on)
    }

    /// One request in how many has its depth at issue read.
    pub fn depth_sampled(&self) -> u32 {
        self.depth_sampled
    }

    /// Whether the scheduler's hooks are attached.
    pub fn runqueue(&self) -> bool {
        !self.sched_links.is_empty() || (self.opts.floor && self.opts.runqueue)
    }

    /// Detaches the programs, drains what is left, and sums the maps.
    pub fn stop(mut self) -> Result<LightDoc, CaptureError> {
        let stats = self.program_stats();
        let runqueue = self.runqueue();
        // Detach first: nothing new arrives while the maps are read.
        for (name, _) in programs(&self.opts)
            .iter()
            .chain(&SCHEDULER)
            .chain(&THROTTLE)
        {
            let p: Option<&mut BtfTracePoint> =
                self.ebpf.program_mut(name).and_then(|p| p.try_into().ok());
            if let Some(p) = p {
                let _ = p.unload();
            }
        }
        let events = CONTEXT_EVENTS.iter().map(|(_, e)| event_program(e));
        for name in events.chain([FLOOR_EVENT_PROGRAM.to_string()]) {
            let p: Option<&mut TracePoint> =
                self.ebpf.program_mut(&name).and_then(|p| p.try_into().ok());
            if let Some(p) = p {
                let _ = p.unload();
            }
        }
        let stopped_ns = super::snapshot::mono_ns();
        let (stats_end_ns, stats_at_end) = disks::read_stats(&self.slots);
        self.stop.store(true, Ordering::SeqCst);
        let poller = self
            .poller
            .take()
            .expect("started")
            .join()
            .map_err(|_| CaptureError::Failed("the slow-request reader panicked".into()))??;
        drop(poller);
        let mut devices = self.devices()?;
        let (stats_start_ns, stats_at_start) = &self.stats_at_start;
        let seconds = stats_end_ns.saturating_sub(*stats_start_ns) as f64 / 1e9;
        for d in &mut devices {
            let before = stats_at_start.iter().find(|(dev, _)| *dev == d.dev);
            let after = stats_at_end.iter().find(|(dev, _)| *dev == d.dev);
            if let (Some((_, b)), Some((_, a))) = (before, after) {
                d.diskstats = crate::model::light::DiskstatsDelta::between(b, a, seconds);
            }
        }
        let io_uring = self.io_uring()?;
        let cpus = self.cpus()?;
        let cgroups = crate::capture::cgroups::table(self.cgroups()?, CGROUPS_KEPT);
        drop(self.stats.take());
        Ok(LightDoc {
            attach: "tp_btf".into(),
            started_ns: self.started_ns,
            stopped_ns,
            slow: SlowPolicy {
                fixed_ns: self.opts.slow_ns,
                initial_ns: self.opts.slow_ns.unwrap_or(INITIAL_SLOW_NS),
                cap_per_s: u64::from(self.opts.cap_per_s),
            },
            devices,
            programs: stats,
            cpus,
            wait_min_ns: WAIT_MIN_NS,
            missing_events: std::mem::take(&mut self.missing_events),
            throttle: self.opts.throttle,
            accounting: self.opts.accounting.name().into(),
            runqueue,
            irq: self.opts.irq,
            depth_sampled: self.depth_sampled,
            cgroups,
            io_uring: Some(io_uring),
        })
    }

    /// Each named device (and "other") with what the kernel counted so
    /// far; read while the programs run, the figures of different maps
    /// may be a few requests apart.
    pub fn devices(&self) -> Result<Vec<LightDevice>, CaptureError> {
        let counters: PerCpuArray<_, Counters> =
            PerCpuArray::try_from(self.ebpf.map(maps::MAP_COUNTERS).expect("counters map"))
                .map_err(|e| err("counters map")(e.to_string()))?;
        let depths: PerCpuArray<_, DepthHist> =
            PerCpuArray::try_from(self.ebpf.map(maps::MAP_DEPTHS).expect("depths map"))
                .map_err(|e| err("depths map")(e.to_string()))?;
        let sizes: PerCpuArray<_, SizeHist> =
            PerCpuArray::try_from(self.ebpf.map(maps::MAP_SIZES).expect("sizes map"))
                .map_err(|e| err("sizes map")(e.to_string()))?;
        let mut devices = Vec::new();
        let mut named: Vec<(String, u32)> = vec![("other".into(), 0)];
        named.extend(self.slots.iter().map(|s| (s.dev.clone(), s.slot)));
        for (dev, slot) in named {
            let d = device(slot, dev, &self.latency, &counters, &depths, &sizes)?;
            if d.ops.values().any(|o| o.ios > 0) || d.counters != LightCounters::default() {
                devices.push(d);
            }
        }
        Ok(devices)
    }

    /// Each group of io_uring requests counted so far.
    pub fn io_uring(&self) -> Result<Vec<LightUring>, CaptureError> {
        let stats: PerCpuArray<_, UringStats> =
            PerCpuArray::try_from(self.ebpf.map(maps::MAP_URING).expect("uring map"))
                .map_err(|e| err("uring map")(e.to_string()))?;
        let latency: PerCpuArray<_, Hist> = PerCpuArray::try_from(
            self.ebpf
                .map(maps::MAP_URING_LATENCY)
                .expect("uring_latency map"),
        )
        .map_err(|e| err("uring_latency map")(e.to_string()))?;
        read::uring(&stats, &latency)
    }

    /// What each (cgroup, device, operation) counted so far, paths not
    /// resolved.
    pub fn cgroups(&self) -> Result<Vec<LightCgroup>, CaptureError> {
        let map: PerCpuHashMap<_, CgKey, CgStats> =
            PerCpuHashMap::try_from(self.ebpf.map(maps::MAP_CGROUPS).expect("cgroups map"))
                .map_err(|e| err("cgroups map")(e.to_string()))?;
        let cache: PerCpuArray<_, CgStats> =
            PerCpuArray::try_from(self.ebpf.map(maps::MAP_CG_CACHE).expect("cg_cache map"))
                .map_err(|e| err("cg_cache map")(e.to_string()))?;
        read::cgroups(&map, &cache, |slot| {
            self.slots
                .iter()
                .find(|s| s.slot == slot)
                .map_or_else(|| "other".to_string(), |s| s.dev.clone())
        })
    }

    /// Whether bios held back by blk-throttle are counted (`throttled`).
    pub fn throttle(&self) -> bool {
        self.opts.throttle
    }

    /// The context events this kernel could not attach to.
    pub fn missing_events(&self) -> &[String] {
        &self.missing_events
    }

    /// Each slot's disk's diskstats fields now (`maj,min`, fields), with
    /// when they were read (CLOCK_MONOTONIC ns).
    pub fn diskstats(&self) -> DiskstatsReading {
        disks::read_stats(&self.slots)
    }

    /// The same as they were when the programs were attached.
    pub fn diskstats_at_start(&self) -> &DiskstatsReading {
        &self.stats_at_start
    }

    /// The disks counted apart, by slot.
    pub fn disks(&self) -> &[DiskSlot] {
        &self.slots
    }

    /// Gives disks that appeared since the start (a loop device set up
    /// later) their own slots while there are free ones; returns how many.
    pub fn refresh_devices(&mut self) -> Result<usize, CaptureError> {
        let added = add_new_disks(&mut self.slots);
        if added > 0 {
            name_devices(&mut self.ebpf, &self.slots)?;
            if let Ok(mut a) = self.anchored.lock() {
                *a = anchored_disks(&self.slots);
            }
        }
        Ok(added)
    }

    /// The scheduler's and the interrupts' figures of each CPU so far.
    pub fn cpus(&self) -> Result<Vec<LightCpu>, CaptureError> {
        let stats: PerCpuArray<_, CpuStats> =
            PerCpuArray::try_from(self.ebpf.map(maps::MAP_CPU_STATS).expect("cpu_stats map"))
                .map_err(|e| err("cpu_stats map")(e.to_string()))?;
        let per_cpu = stats
            .get(&0, 0)
            .map_err(|e| err("cannot read the light maps")(e.to_string()))?;
        Ok(per_cpu
            .iter()
            .enumerate()
            .map(|(cpu, c)| LightCpu {
                cpu: cpu as u32,
                counts: c.counts,
                softirqs: c.softirqs.to_vec(),
                softirq_ns: c.softirq_ns.to_vec(),
            })
            .collect())
    }

    /// Every attached program with what the kernel kept of it: the runs
    /// it skipped always, its runs and run time while the kernel keeps
    /// them (`--bpf-stats`, or `kernel.bpf_stats_enabled` set by someone).
    pub fn program_stats(&self) -> Vec<ProgramStats> {
        let mut names = programs(&self.opts);
        if !self.sched_links.is_empty() {
            names.extend(SCHEDULER);
        }
        if !self.throttle_links.is_empty() {
            names.extend(THROTTLE);
        }
        let events: Vec<String> = if self.opts.floor {
            vec![FLOOR_EVENT_PROGRAM.into()]
        } else {
            CONTEXT_EVENTS
                .iter()
                .map(|(_, e)| event_program(e))
                .collect()
        };
        let timed = self.stats.is_some() || kernel_keeps_run_time();
        names
            .iter()
            .map(|(name, _)| name.to_string())
            .chain(events)
            .filter_map(|name| {
                let fd = self.ebpf.program(&name)?.fd().ok()?;
                let f = prog_info::run_figures(fd)?;
                Some(ProgramStats {
                    name: name.to_string(),
                    run_count: timed.then_some(f.runs),
                    run_time_ns: timed.then_some(f.run_time_ns),
                    missed: Some(f.missed),
                })
            })
            .collect()
    }
}

/// Whether the kernel counts every program's runs and run time now.
fn kernel_keeps_run_time() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() != "0")
}

/// Each slot's disk by its kernel name, for the in-flight anchor.
fn anchored_disks(slots: &[DiskSlot]) -> Vec<(u32, String)> {
    slots.iter().map(|s| (s.slot, s.name.clone())).collect()
}

/// The stamps accounting sums every CPU's counters for a request's depth,
/// lines the other CPUs write (on 2 CPUs, 40 ns of its 65 ns at issue):
/// it does for one request in 2^k, so that an issue reads about half
/// another CPU's counters on average (1 in 4 on 2 CPUs, 1 in 32 on 16);
/// on one CPU, with no other CPU's lines to read, for every request.
fn depth_mask(cpus: u32) -> u32 {
    match cpus {
        0 | 1 => 0,
        n => (2 * n).next_power_of_two() - 1,
    }
}

/// One request in how many has its depth at issue read.
fn depth_sampled(accounting: Accounting, cpus: u32) -> u32 {
    match accounting {
        Accounting::Stamps => depth_mask(cpus) + 1,
        // A shared count: every issue reads it.
        Accounting::State => 1,
    }
}

impl Drop for LightSession {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(p) = self.poller.take() {
            let _ = p.join();
        }
    }
}

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
//! CPU's hard and soft interrupt time, and the journal's commits and
//! checkpoints kept whole (classic tracepoints, whose raw records the
//! capture decodes with the format files it keeps, as a full capture does).

#[cfg(test)]
mod abi_check;
pub mod maps;
pub mod ring;

use super::tracefs::CaptureError;
use super::tracefs::Tracefs;
use crate::model::capture_layout::{EVENT_FORMATS, HEADER_PAGE};
use crate::model::light::{
    LightCounters, LightCpu, LightDevice, LightDoc, LightOp, ProgramStats, SlowPolicy, StageHist,
    CONTEXT, CONTEXT_EVENTS, CONTEXT_HEADER, CONTEXT_MAGIC, OPS, REC_EVENT, REC_SLOW, REC_WAIT,
    SLOW_HEADER, SLOW_MAGIC, SLOW_RECORD,
};
use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use aya::programs::{BtfTracePoint, TracePoint};
use aya::{Btf, Ebpf, EbpfLoader};
use maps::{Counters, CpuStats, DepthHist, Hist, SizeHist, NOP, NSLOT};
use ring::RecordRing;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The compiled programs (bpf/light.bpf.c, built by bpf/build.sh and
/// committed so that building iosleuth needs no clang).
static OBJECT: &[u8] = include_bytes!("../../../bpf/light.bpf.o");

/// The programs of a light capture, and the tracepoint each is attached
/// to as a BTF-typed raw tracepoint.
const PROGRAMS: [(&str, &str); 14] = [
    ("iosl_issue", "block_rq_issue"),
    ("iosl_complete", "block_rq_complete"),
    ("iosl_requeue", "block_rq_requeue"),
    ("iosl_backmerge", "block_bio_backmerge"),
    ("iosl_frontmerge", "block_bio_frontmerge"),
    ("iosl_rqmerge", "block_rq_merge"),
    ("iosl_split", "block_split"),
    ("iosl_wakeup", "sched_wakeup"),
    ("iosl_wakeup_new", "sched_wakeup_new"),
    ("iosl_switch", "sched_switch"),
    ("iosl_irq_entry", "irq_handler_entry"),
    ("iosl_irq_exit", "irq_handler_exit"),
    ("iosl_softirq_entry", "softirq_entry"),
    ("iosl_softirq_exit", "softirq_exit"),
];
/// The classic tracepoint program of each context event
/// (`iosl_ev_<event>` in bpf/light.bpf.c).
fn event_program(event: &str) -> String {
    format!("iosl_ev_{event}")
}

/// The floor of the overhead benchmark: the same hooks with programs that
/// return at once.
const FLOOR_PROGRAMS: [(&str, &str); 14] = [
    ("iosl_nop_issue", "block_rq_issue"),
    ("iosl_nop_compl", "block_rq_complete"),
    ("iosl_nop_requeue", "block_rq_requeue"),
    ("iosl_nop_bmerge", "block_bio_backmerge"),
    ("iosl_nop_fmerge", "block_bio_frontmerge"),
    ("iosl_nop_rqmerge", "block_rq_merge"),
    ("iosl_nop_split", "block_split"),
    ("iosl_nop_wakeup", "sched_wakeup"),
    ("iosl_nop_wnew", "sched_wakeup_new"),
    ("iosl_nop_switch", "sched_switch"),
    ("iosl_nop_irq_in", "irq_handler_entry"),
    ("iosl_nop_irq_out", "irq_handler_exit"),
    ("iosl_nop_sirq_in", "softirq_entry"),
    ("iosl_nop_sirq_out", "softirq_exit"),
];
const FLOOR_EVENT_PROGRAM: &str = "iosl_nop_event";

/// Runqueue waits sent to user space from this long: half of rt_starvation's
/// 10 ms, far above a healthy wait (the lab's runs: under 2 ms).
pub const WAIT_MIN_NS: u64 = 5_000_000;

/// Before a device and operation has this many requests, its slow
/// threshold is `INITIAL_SLOW_NS`; after, its running p99.
const MIN_FOR_P99: u64 = 100;
/// 10 ms: slower than any healthy SSD or loop-device request, faster than
/// the 100-270 ms stalls iosleuth hunts.
pub const INITIAL_SLOW_NS: u64 = 10_000_000;
/// The adaptive threshold never goes below 1 ms: the p99 of a fast device
/// would send thousands of requests a second that explain nothing.
const MIN_SLOW_NS: u64 = 1_000_000;
/// How often the ring buffer is drained.
const POLL: Duration = Duration::from_millis(100);

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
    opts: LightOptions,
    started_ns: u64,
    missing_events: Vec<String>,
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
        // Without tracefs the journal's events cannot be attached: the
        // capture says so, the rest works.
        let tracefs = Tracefs::open();
        let cpus =
            aya::util::nr_cpus().map_err(|(_, e)| err("cannot count CPUs")(e.to_string()))?;
        let cap_per_cpu: u32 = opts.cap_per_s.div_ceil(cpus as u32);
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .override_global("cap_per_cpu", &cap_per_cpu, true)
            .override_global("wait_min_ns", &WAIT_MIN_NS, true)
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
        let programs = if opts.floor {
            &FLOOR_PROGRAMS
        } else {
            &PROGRAMS
        };
        attach_btf(&mut ebpf, &btf, programs)?;
        let missing_events = match &tracefs {
            Ok(t) => {
                if !opts.floor {
                    keep_formats(t, dir)?;
                }
                attach_events(&mut ebpf, opts.floor)?
            }
            Err(e) => vec![format!("every journal event ({})", e.message())],
        };
        let started_ns = super::snapshot::mono_ns();
        let latency_map = ebpf.take_map(maps::MAP_LATENCY).expect("latency map");
        let latency_copy = same_map(&latency_map)?;
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
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let poller = std::thread::Builder::new()
            .name("iosleuth-light".into())
            .spawn(move || poller.run(&flag))
            .map_err(|e| err("cannot start the slow-request reader")(e.to_string()))?;
        Ok(LightSession {
            ebpf,
            stats,
            stop,
            poller: Some(poller),
            latency: PerCpuArray::try_from(latency_map)
                .map_err(|e| err("latency map")(e.to_string()))?,
            slots,
            opts: opts.clone(),
            started_ns,
            missing_events,
            _tracefs: tracefs.ok(),
        })
    }

    /// Detaches the programs, drains what is left, and sums the maps.
    pub fn stop(mut self) -> Result<LightDoc, CaptureError> {
        let programs = self.program_stats();
        // Detach first: nothing new arrives while the maps are read.
        for (name, _) in PROGRAMS.iter().chain(&FLOOR_PROGRAMS) {
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
        self.stop.store(true, Ordering::SeqCst);
        let poller = self
            .poller
            .take()
            .expect("started")
            .join()
            .map_err(|_| CaptureError::Failed("the slow-request reader panicked".into()))??;
        drop(poller);
        let devices = self.devices()?;
        let cpus = self.cpus()?;
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
            programs,
            cpus,
            wait_min_ns: WAIT_MIN_NS,
            missing_events: std::mem::take(&mut self.missing_events),
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

    /// The context events this kernel could not attach to.
    pub fn missing_events(&self) -> &[String] {
        &self.missing_events
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
                switches: c.switches,
                wakeups: c.wakeups,
                long_waits: c.long_waits,
                waits_lost: c.waits_lost,
                events: c.events,
                events_lost: c.events_lost,
                hardirqs: c.hardirqs,
                hardirq_ns: c.hardirq_ns,
                softirqs: c.softirqs.to_vec(),
                softirq_ns: c.softirq_ns.to_vec(),
            })
            .collect())
    }

    fn program_stats(&self) -> Vec<ProgramStats> {
        if self.stats.is_none() {
            return Vec::new();
        }
        let (names, events): (_, Vec<String>) = if self.opts.floor {
            (&FLOOR_PROGRAMS, vec![FLOOR_EVENT_PROGRAM.into()])
        } else {
            (
                &PROGRAMS,
                CONTEXT_EVENTS
                    .iter()
                    .map(|(_, e)| event_program(e))
                    .collect(),
            )
        };
        names
            .iter()
            .map(|(name, _)| name.to_string())
            .chain(events)
            .filter_map(|name| {
                let info = self.ebpf.program(&name)?.info().ok()?;
                Some(ProgramStats {
                    name: name.to_string(),
                    run_count: info.run_count(),
                    run_time_ns: info.run_time().as_nanos() as u64,
                })
            })
            .collect()
    }
}

/// Writes each device's slot into `dev_slot`, where the programs look it
/// up (again for every slot: entries already there are rewritten as they were).
fn name_devices(ebpf: &mut Ebpf, slots: &[DiskSlot]) -> Result<(), CaptureError> {
    let mut dev_slot: Array<_, u64> =
        Array::try_from(ebpf.map_mut(maps::MAP_DEV_SLOT).expect("dev_slot map"))
            .map_err(|e| err("dev_slot map")(e.to_string()))?;
    let mut taken = std::collections::HashSet::new();
    for (dev, slot) in slots
        .iter()
        .flat_map(|s| s.devts.iter().map(move |d| (*d, s.slot)))
    {
        // Two devices on one entry: the second counts as "other".
        if taken.insert(dev_index(dev)) {
            dev_slot
                .set(dev_index(dev), (u64::from(slot) << 32) | u64::from(dev), 0)
                .map_err(|e| err("dev_slot map")(e.to_string()))?;
        }
    }
    Ok(())
}

/// The same map through a second file descriptor.
fn same_map(map: &aya::maps::Map) -> Result<aya::maps::Map, CaptureError> {
    use std::os::fd::AsFd;
    let aya::maps::Map::PerCpuArray(data) = map else {
        return Err(err("latency map")("not a per-CPU array".into()));
    };
    let fd = data
        .fd()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| err("latency map")(e.to_string()))?;
    Ok(aya::maps::Map::PerCpuArray(
        MapData::from_fd(fd).map_err(|e| err("latency map")(e.to_string()))?,
    ))
}

/// Loads and attaches the BTF-typed raw tracepoint programs.
fn attach_btf(ebpf: &mut Ebpf, btf: &Btf, programs: &[(&str, &str)]) -> Result<(), CaptureError> {
    for (name, tp) in programs {
        let p: &mut BtfTracePoint = ebpf
            .program_mut(name)
            .expect("program in the object")
            .try_into()
            .map_err(load_error)?;
        p.load(tp, btf)
            .map_err(|e| load_error(format!("{name}: {e}")))?;
        p.attach()
            .map_err(|e| load_error(format!("attaching {name} to {tp}: {e}")))?;
    }
    Ok(())
}

/// Attaches each context event's program (or, for the floor, one empty
/// program to all of them); returns the events this kernel lacks.
fn attach_events(ebpf: &mut Ebpf, floor: bool) -> Result<Vec<String>, CaptureError> {
    let mut missing = Vec::new();
    if floor {
        let p = tracepoint_program(ebpf, FLOOR_EVENT_PROGRAM)?;
        for (system, event) in CONTEXT_EVENTS {
            let _ = p.attach(system, event);
        }
        return Ok(missing);
    }
    for (system, event) in CONTEXT_EVENTS {
        let p = tracepoint_program(ebpf, &event_program(event))?;
        if p.attach(system, event).is_err() {
            missing.push(format!("{system}:{event}"));
        }
    }
    Ok(missing)
}

/// A classic tracepoint program of the object, loaded.
fn tracepoint_program<'a>(
    ebpf: &'a mut Ebpf,
    name: &str,
) -> Result<&'a mut TracePoint, CaptureError> {
    let p: &mut TracePoint = ebpf
        .program_mut(name)
        .expect("program in the object")
        .try_into()
        .map_err(load_error)?;
    p.load().map_err(|e| load_error(format!("{name}: {e}")))?;
    Ok(p)
}

/// Copies the context events' format files (and the page header, which
/// the decoder reads with them) into the capture.
fn keep_formats(tracefs: &Tracefs, dir: &Path) -> Result<(), CaptureError> {
    let copy = |from: std::path::PathBuf, to: std::path::PathBuf| -> Result<(), CaptureError> {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(&from, &to)
            .map(|_| ())
            .map_err(|e| CaptureError::Unusable(format!("cannot copy {}: {e}", from.display())))
    };
    copy(tracefs.path("events/header_page"), dir.join(HEADER_PAGE))?;
    for (system, event) in CONTEXT_EVENTS {
        let from = tracefs.path(&format!("events/{system}/{event}/format"));
        if from.exists() {
            let to = dir
                .join(EVENT_FORMATS)
                .join(system)
                .join(event)
                .join("format");
            copy(from, to)?;
        }
    }
    Ok(())
}

fn slow_header() -> Vec<u8> {
    let mut header = SLOW_MAGIC.to_vec();
    header.extend((SLOW_RECORD as u32).to_le_bytes());
    header.extend(0u32.to_le_bytes());
    debug_assert_eq!(header.len(), SLOW_HEADER);
    header
}

fn context_header() -> Vec<u8> {
    let mut header = CONTEXT_MAGIC.to_vec();
    header.extend(0u64.to_le_bytes());
    debug_assert_eq!(header.len(), CONTEXT_HEADER);
    header
}

/// A capture file, created with its header.
fn output(
    dir: &Path,
    name: &str,
    header: &[u8],
) -> Result<std::io::BufWriter<std::fs::File>, CaptureError> {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path)
        .map_err(|e| err("cannot create")(format!("{}: {e}", path.display())))?;
    f.write_all(header)
        .map_err(|e| err("cannot write")(format!("{}: {e}", path.display())))?;
    Ok(std::io::BufWriter::new(f))
}

impl Drop for LightSession {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(p) = self.poller.take() {
            let _ = p.join();
        }
    }
}

/// Drains the ring buffer into slow.bin and context.bin (or a ring in
/// memory), and keeps each device and operation's threshold at its
/// running p99.
struct Poller {
    records: RingBuf<MapData>,
    latency: PerCpuArray<MapData, Hist>,
    threshold: Array<MapData, u64>,
    out: Out,
    adaptive: bool,
}

/// Where the records go.
enum Out {
    Files {
        slow: std::io::BufWriter<std::fs::File>,
        context: std::io::BufWriter<std::fs::File>,
    },
    Ring(Arc<Mutex<RecordRing>>),
}

impl Poller {
    fn run(mut self, stop: &AtomicBool) -> Result<Poller, CaptureError> {
        let mut ticks = 0u32;
        loop {
            let last = stop.load(Ordering::SeqCst);
            self.drain()?;
            if last {
                if let Out::Files { slow, context } = &mut self.out {
                    slow.flush()
                        .and_then(|_| context.flush())
                        .map_err(|e| err("cannot write the capture")(e.to_string()))?;
                }
                return Ok(self);
            }
            ticks += 1;
            if self.adaptive && ticks.is_multiple_of(10) {
                self.update_thresholds();
            }
            std::thread::sleep(POLL);
        }
    }

    fn drain(&mut self) -> Result<(), CaptureError> {
        while let Some(item) = self.records.next() {
            if item.len() < 4 {
                continue;
            }
            let kind = u16::from_le_bytes([item[0], item[1]]);
            let known = matches!(kind, REC_EVENT | REC_WAIT)
                || (kind == REC_SLOW && item.len() == SLOW_RECORD);
            if !known {
                continue;
            }
            match &mut self.out {
                Out::Files { slow, context } => {
                    let out = if kind == REC_SLOW { slow } else { context };
                    out.write_all(&item)
                        .map_err(|e| err("cannot write the capture")(e.to_string()))?;
                }
                Out::Ring(ring) => ring.lock().unwrap_or_else(|p| p.into_inner()).push(&item),
            }
        }
        Ok(())
    }

    fn update_thresholds(&mut self) {
        for slot in 0..NSLOT {
            for op in 0..NOP {
                let key = maps::latency_key(slot, op, maps::STAGE_TOTAL);
                let Ok(per_cpu) = self.latency.get(&key, 0) else {
                    continue;
                };
                let h = sum_hist(&per_cpu);
                if h.n < MIN_FOR_P99 {
                    continue;
                }
                let th = percentile_high(&h, 0.99).max(MIN_SLOW_NS);
                let _ = self.threshold.set(slot * NOP + op, th, 0);
            }
        }
    }
}

/// The per-CPU histograms of one key, summed.
fn sum_hist(per_cpu: &[Hist]) -> StageHist {
    let mut counts = vec![0u64; crate::model::light::NBUCKET];
    let (mut n, mut sum) = (0u64, 0u64);
    for h in per_cpu {
        n += h.n;
        sum = sum.wrapping_add(h.sum);
        for (c, b) in counts.iter_mut().zip(h.b.iter()) {
            *c += u64::from(*b);
        }
    }
    StageHist {
        n,
        sum_ns: sum,
        buckets: counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i as u32, c))
            .collect(),
    }
}

/// The upper bound of the bucket holding quantile `q`.
fn percentile_high(h: &StageHist, q: f64) -> u64 {
    let total: u64 = h.buckets.iter().map(|b| b.1).sum();
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (lo_hi, c) in h.rows().map(|(lo, hi, c)| ((lo, hi), c)) {
        seen += c;
        if seen >= rank {
            return lo_hi.1;
        }
    }
    0
}

fn device(
    slot: u32,
    dev: String,
    latency: &PerCpuArray<MapData, Hist>,
    counters: &PerCpuArray<&MapData, Counters>,
    depths: &PerCpuArray<&MapData, DepthHist>,
    sizes: &PerCpuArray<&MapData, SizeHist>,
) -> Result<LightDevice, CaptureError> {
    let read = |e: aya::maps::MapError| err("cannot read the light maps")(e.to_string());
    let mut total = Counters::default();
    for c in counters.get(&slot, 0).map_err(read)?.iter() {
        for i in 0..4 {
            total.ios[i] += c.ios[i];
            total.bytes[i] += c.bytes[i];
        }
        total.back_merges += c.back_merges;
        total.front_merges += c.front_merges;
        total.rq_merges += c.rq_merges;
        total.splits += c.splits;
        total.requeues += c.requeues;
        total.errors += c.errors;
        total.partial += c.partial;
        total.no_state += c.no_state;
        total.state_full += c.state_full;
        total.slow_sent += c.slow_sent;
        total.slow_capped += c.slow_capped;
        total.ring_full += c.ring_full;
        total.seq_requests += c.seq_requests;
    }
    let mut ops = std::collections::BTreeMap::new();
    for (op, name) in OPS.iter().enumerate() {
        let op32 = op as u32;
        let stage = |s: u32| -> Result<StageHist, CaptureError> {
            Ok(sum_hist(
                &latency
                    .get(&maps::latency_key(slot, op32, s), 0)
                    .map_err(read)?,
            ))
        };
        let mut size_log2 = vec![0u64; maps::NSIZE];
        for s in sizes.get(&(slot * NOP + op32), 0).map_err(read)?.iter() {
            for (t, b) in size_log2.iter_mut().zip(s.b.iter()) {
                *t += u64::from(*b);
            }
        }
        while size_log2.last() == Some(&0) {
            size_log2.pop();
        }
        let o = LightOp {
            ios: total.ios[op],
            bytes: total.bytes[op],
            queued: stage(maps::STAGE_QUEUED)?,
            device: stage(maps::STAGE_DEVICE)?,
            total: stage(maps::STAGE_TOTAL)?,
            size_log2,
        };
        if o.ios > 0 || o.total.n > 0 {
            ops.insert(name.to_string(), o);
        }
    }
    let mut depth = vec![0u64; maps::NDEPTH];
    for d in depths.get(&slot, 0).map_err(read)?.iter() {
        for (t, b) in depth.iter_mut().zip(d.b.iter()) {
            *t += u64::from(*b);
        }
    }
    while depth.last() == Some(&0) {
        depth.pop();
    }
    Ok(LightDevice {
        dev,
        ops,
        depth,
        counters: LightCounters {
            back_merges: total.back_merges,
            front_merges: total.front_merges,
            rq_merges: total.rq_merges,
            splits: total.splits,
            requeues: total.requeues,
            errors: total.errors,
            partial: total.partial,
            no_state: total.no_state,
            state_full: total.state_full,
            slow_sent: total.slow_sent,
            slow_capped: total.slow_capped,
            ring_full: total.ring_full,
            seq_requests: total.seq_requests,
        },
    })
}

/// A disk the programs count apart: its kernel name, `maj,min`, its slot
/// and the dev_t of the disk and its partitions (as the kernel encodes
/// them: major << 20 | minor).
#[derive(Clone, Debug, PartialEq)]
pub struct DiskSlot {
    pub name: String,
    pub dev: String,
    pub slot: u32,
    devts: Vec<u32>,
}

/// The machine's disks, sorted by name, each with its dev_ts.
fn disks() -> Vec<(String, String, Vec<u32>)> {
    let mut disks = Vec::new();
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return disks;
    };
    let mut paths: Vec<_> = dir.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let Some(dev) = read_dev(&path.join("dev")) else {
            continue;
        };
        let mut devs = vec![dev.0];
        if let Ok(parts) = std::fs::read_dir(&path) {
            for p in parts.flatten() {
                if p.path().join("partition").exists() {
                    devs.extend(read_dev(&p.path().join("dev")).map(|d| d.0));
                }
            }
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        disks.push((name, dev.1, devs));
    }
    disks
}

/// Slots for the machine's disks (slot 0 is every other device).
fn device_slots() -> Vec<DiskSlot> {
    let mut slots = Vec::new();
    add_new_disks(&mut slots);
    slots
}

/// Gives the disks not in `slots` the next free slots, while there are;
/// returns how many it added. A disk removed keeps its slot (its counts
/// stay what they were).
fn add_new_disks(slots: &mut Vec<DiskSlot>) -> usize {
    let before = slots.len();
    for (name, dev, devts) in disks() {
        if slots.len() + 1 >= NSLOT as usize {
            break;
        }
        if slots.iter().any(|s| s.dev == dev && s.name == name) {
            continue;
        }
        let slot = slots.len() as u32 + 1;
        slots.push(DiskSlot {
            name,
            dev,
            slot,
            devts,
        });
    }
    slots.len() - before
}

/// The entry of `dev_slot` for a dev_t (bpf/light.bpf.c's `slot_of`).
fn dev_index(dev: u32) -> u32 {
    dev.wrapping_mul(0x9E37_79B1) >> 20
}

/// A `MAJ:MIN` file as the kernel's dev_t and `maj,min`.
fn read_dev(path: &Path) -> Option<(u32, String)> {
    let s = std::fs::read_to_string(path).ok()?;
    let (maj, min) = s.trim().split_once(':')?;
    let (maj, min): (u32, u32) = (maj.parse().ok()?, min.parse().ok()?);
    Some(((maj << 20) | min, format!("{maj},{min}")))
}

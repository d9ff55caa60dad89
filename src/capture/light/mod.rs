//! `record --light`: BPF programs keep each request's state in the kernel
//! and aggregate every stage into histograms by device and operation; only
//! slow requests reach user space, through a ring buffer drained by a
//! thread here. The programs are BTF-typed raw tracepoints (tp_btf), the
//! cheapest hooks this kernel offers. Everything is owned by file
//! descriptors: programs, links and maps go away with the process, also on
//! SIGKILL (nothing is pinned).

pub mod maps;

use super::tracefs::CaptureError;
use crate::model::light::{
    LightCounters, LightDevice, LightDoc, LightOp, ProgramStats, SlowPolicy, StageHist, OPS,
    SLOW_HEADER, SLOW_MAGIC, SLOW_RECORD,
};
use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf, EbpfLoader};
use maps::{Counters, DepthHist, Hist, SizeHist, NOP, NSLOT};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The compiled programs (bpf/light.bpf.c, built by bpf/build.sh and
/// committed so that building iosleuth needs no clang).
static OBJECT: &[u8] = include_bytes!("../../../bpf/light.bpf.o");

/// The programs of a light capture, and the tracepoint each is attached to.
const PROGRAMS: [(&str, &str); 7] = [
    ("iosl_issue", "block_rq_issue"),
    ("iosl_complete", "block_rq_complete"),
    ("iosl_requeue", "block_rq_requeue"),
    ("iosl_backmerge", "block_bio_backmerge"),
    ("iosl_frontmerge", "block_bio_frontmerge"),
    ("iosl_rqmerge", "block_rq_merge"),
    ("iosl_split", "block_split"),
];

/// The floor of the overhead benchmark: the issue and complete hooks with
/// programs that return at once.
const FLOOR_PROGRAMS: [(&str, &str); 2] = [
    ("iosl_nop_issue", "block_rq_issue"),
    ("iosl_nop_compl", "block_rq_complete"),
];

/// Before a device and operation has this many requests, its slow
/// threshold is `INITIAL_SLOW_NS`; after, its running p99.
const MIN_FOR_P99: u64 = 100;
/// 10 ms: slower than any healthy SSD or loop-device request, faster than
/// the stalls the seed cases hunt.
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
    slots: Vec<(String, u32)>,
    opts: LightOptions,
    started_ns: u64,
    cpus: usize,
}

fn err(what: &str) -> impl Fn(String) -> CaptureError + '_ {
    move |e| CaptureError(format!("{what}: {e}"))
}

/// Why BPF cannot be used here, as the user should read it.
fn load_error(e: impl std::fmt::Display) -> CaptureError {
    let e = e.to_string();
    let hint = if e.contains("EPERM") || e.contains("Operation not permitted") {
        " (BPF needs root or CAP_BPF with CAP_PERFMON)"
    } else {
        ""
    };
    CaptureError(format!(
        "cannot load the BPF programs of --light: {e}{hint}; the full recorder (`iosleuth record` without --light) needs only tracefs"
    ))
}

impl LightSession {
    /// Loads the programs, names the devices, attaches, and starts draining
    /// slow requests into `DIR/slow.bin`.
    pub fn start(opts: &LightOptions, dir: &Path) -> Result<LightSession, CaptureError> {
        let btf = Btf::from_sys_fs().map_err(|e| {
            CaptureError(format!(
                "--light needs the kernel's BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF): {e}; use the full recorder (`iosleuth record` without --light)"
            ))
        })?;
        let cpus =
            aya::util::nr_cpus().map_err(|(_, e)| err("cannot count CPUs")(e.to_string()))?;
        let cap_per_cpu: u32 = opts.cap_per_s.div_ceil(cpus as u32);
        let mut ebpf = EbpfLoader::new()
            .btf(Some(&btf))
            .override_global("cap_per_cpu", &cap_per_cpu, true)
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
        {
            let mut dev_slot: Array<_, u64> =
                Array::try_from(ebpf.map_mut("dev_slot").expect("dev_slot map"))
                    .map_err(|e| err("dev_slot map")(e.to_string()))?;
            let mut taken = std::collections::HashSet::new();
            for (dev, slot) in slots
                .iter()
                .flat_map(|(_, s, devs)| devs.iter().map(move |d| (*d, *s)))
            {
                // Two devices on one entry: the second counts as "other".
                if taken.insert(dev_index(dev)) {
                    dev_slot
                        .set(dev_index(dev), (u64::from(slot) << 32) | u64::from(dev), 0)
                        .map_err(|e| err("dev_slot map")(e.to_string()))?;
                }
            }
        }
        let initial = opts.slow_ns.unwrap_or(INITIAL_SLOW_NS);
        {
            let mut th: Array<_, u64> =
                Array::try_from(ebpf.map_mut("threshold").expect("threshold map"))
                    .map_err(|e| err("threshold map")(e.to_string()))?;
            for k in 0..NSLOT * NOP {
                th.set(k, initial, 0)
                    .map_err(|e| err("threshold map")(e.to_string()))?;
            }
        }
        let programs: &[(&str, &str)] = if opts.floor {
            &FLOOR_PROGRAMS
        } else {
            &PROGRAMS
        };
        for (name, tp) in programs {
            let p: &mut BtfTracePoint = ebpf
                .program_mut(name)
                .expect("program in the object")
                .try_into()
                .map_err(load_error)?;
            p.load(tp, &btf)
                .map_err(|e| load_error(format!("{name}: {e}")))?;
            p.attach()
                .map_err(|e| load_error(format!("attaching {name} to {tp}: {e}")))?;
        }
        let started_ns = super::snapshot::mono_ns();
        let mut slow = std::fs::File::create(dir.join(crate::model::light::SLOW))
            .map_err(|e| err("cannot create slow.bin")(e.to_string()))?;
        let mut header = SLOW_MAGIC.to_vec();
        header.extend((SLOW_RECORD as u32).to_le_bytes());
        header.extend(0u32.to_le_bytes());
        debug_assert_eq!(header.len(), SLOW_HEADER);
        slow.write_all(&header)
            .map_err(|e| err("cannot write slow.bin")(e.to_string()))?;
        let poller = Poller {
            records: RingBuf::try_from(ebpf.take_map("records").expect("records map"))
                .map_err(|e| err("records map")(e.to_string()))?,
            latency: PerCpuArray::try_from(ebpf.take_map("latency").expect("latency map"))
                .map_err(|e| err("latency map")(e.to_string()))?,
            threshold: Array::try_from(ebpf.take_map("threshold").expect("threshold map"))
                .map_err(|e| err("threshold map")(e.to_string()))?,
            slow: std::io::BufWriter::new(slow),
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
            slots: slots.into_iter().map(|(name, s, _)| (name, s)).collect(),
            opts: opts.clone(),
            started_ns,
            cpus,
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
        let stopped_ns = super::snapshot::mono_ns();
        self.stop.store(true, Ordering::SeqCst);
        let poller = self
            .poller
            .take()
            .expect("started")
            .join()
            .map_err(|_| CaptureError("the slow-request reader panicked".into()))??;
        let counters: PerCpuArray<_, Counters> =
            PerCpuArray::try_from(self.ebpf.map("counters").expect("counters map"))
                .map_err(|e| err("counters map")(e.to_string()))?;
        let depths: PerCpuArray<_, DepthHist> =
            PerCpuArray::try_from(self.ebpf.map("depths").expect("depths map"))
                .map_err(|e| err("depths map")(e.to_string()))?;
        let sizes: PerCpuArray<_, SizeHist> =
            PerCpuArray::try_from(self.ebpf.map("sizes").expect("sizes map"))
                .map_err(|e| err("sizes map")(e.to_string()))?;
        let mut devices = Vec::new();
        let mut named: Vec<(String, u32)> = vec![("other".into(), 0)];
        named.extend(self.slots.iter().cloned());
        for (dev, slot) in named {
            let d = device(slot, dev, &poller.latency, &counters, &depths, &sizes)?;
            if d.ops.values().any(|o| o.ios > 0) || d.counters != LightCounters::default() {
                devices.push(d);
            }
        }
        drop(self.stats.take());
        let _ = self.cpus;
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
        })
    }

    fn program_stats(&self) -> Vec<ProgramStats> {
        if self.stats.is_none() {
            return Vec::new();
        }
        let names: &[(&str, &str)] = if self.opts.floor {
            &FLOOR_PROGRAMS
        } else {
            &PROGRAMS
        };
        names
            .iter()
            .filter_map(|(name, _)| {
                let info = self.ebpf.program(name)?.info().ok()?;
                Some(ProgramStats {
                    name: name.to_string(),
                    run_count: info.run_count(),
                    run_time_ns: info.run_time().as_nanos() as u64,
                })
            })
            .collect()
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

/// Drains the ring buffer into slow.bin, and keeps each device and
/// operation's threshold at its running p99.
struct Poller {
    records: RingBuf<MapData>,
    latency: PerCpuArray<MapData, Hist>,
    threshold: Array<MapData, u64>,
    slow: std::io::BufWriter<std::fs::File>,
    adaptive: bool,
}

impl Poller {
    fn run(mut self, stop: &AtomicBool) -> Result<Poller, CaptureError> {
        let mut ticks = 0u32;
        loop {
            let last = stop.load(Ordering::SeqCst);
            self.drain()?;
            if last {
                self.slow
                    .flush()
                    .map_err(|e| err("cannot write slow.bin")(e.to_string()))?;
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
            if item.len() == SLOW_RECORD {
                self.slow
                    .write_all(&item)
                    .map_err(|e| err("cannot write slow.bin")(e.to_string()))?;
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
        },
    })
}

/// Slots for the machine's disks (sorted by name; slot 0 is every other
/// device): `(major,minor, slot, [the disk's dev_t and its partitions'])`,
/// dev_t as the kernel encodes it (major << 20 | minor).
fn device_slots() -> Vec<(String, u32, Vec<u32>)> {
    let mut disks: Vec<(String, Vec<u32>)> = Vec::new();
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut names: Vec<_> = dir.flatten().map(|e| e.path()).collect();
    names.sort();
    for path in names {
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
        disks.push((dev.1, devs));
    }
    disks
        .into_iter()
        .take(NSLOT as usize - 1)
        .enumerate()
        .map(|(i, (name, devs))| (name, i as u32 + 1, devs))
        .collect()
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

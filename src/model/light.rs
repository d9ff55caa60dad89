//! A light capture (`record --light`): what the BPF programs aggregated in
//! the kernel, and the slow requests they sent. Written by
//! `capture::light`, read by `ingest::light`:
//!
//! ```text
//! CAPTURE/
//!   iosleuth-capture.json   manifest, with "mode": "light" and the attach type
//!   snapshot.json           the system before and after, the workload's threads
//!   light.json              per device and operation: counts, bytes, each stage's
//!                           histogram; queue depths, merges, splits, losses;
//!                           the programs' own run time
//!   slow.bin                the slow requests, as the kernel wrote them
//!   context.bin             the flight recorder: long runqueue waits and the
//!                           journal's, dirty limit's and wbt's events, as
//!                           the kernel wrote them
//!   formats/                the tracefs format files of those events
//! ```

use super::block::Dev;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod counters;
mod records;
pub use counters::*;
pub use records::*;

pub const LIGHT: &str = "light.json";
pub const SLOW: &str = "slow.bin";
pub const CONTEXT: &str = "context.bin";
/// `context.bin` starts with these 8 bytes and a reserved u64; records
/// follow, each starting with its kind (u16) and its length (u16).
pub const CONTEXT_MAGIC: &[u8; 8] = b"IOSLCTX1";
pub const CONTEXT_HEADER: usize = 16;
/// Record kinds (bpf/light.h's REC_*).
pub const REC_SLOW: u16 = 1;
pub const REC_EVENT: u16 = 2;
pub const REC_WAIT: u16 = 3;
/// `struct event_rec`: kind, len, cpu, ts, tid, event, comm, then the raw
/// record.
pub const EVENT_DATA_AT: usize = 40;
pub const EVENT_RECORD: usize = EVENT_DATA_AT + 160;
/// The record of captures made before the raw record grew to 160 bytes
/// (balance_dirty_pages' is 144): read as well.
pub const EVENT_RECORD_BEFORE: usize = EVENT_DATA_AT + 128;
/// `struct wait_rec`.
pub const WAIT_RECORD: usize = 112;
/// The events a light capture keeps whole, a few per second each: the
/// journal's commits (unlike `jbd2_handle_start` and its kin, one per file
/// system operation), the dirty limit's pauses and writeback throttling's
/// steps. Their index is bpf/light.bpf.c's CONTEXT_EVENT number.
pub const CONTEXT_EVENTS: [(&str, &str); 13] = [
    ("jbd2", "jbd2_start_commit"),
    ("jbd2", "jbd2_commit_locking"),
    ("jbd2", "jbd2_commit_flushing"),
    ("jbd2", "jbd2_commit_logging"),
    ("jbd2", "jbd2_end_commit"),
    ("jbd2", "jbd2_run_stats"),
    ("jbd2", "jbd2_checkpoint"),
    ("jbd2", "jbd2_checkpoint_stats"),
    ("jbd2", "jbd2_update_log_tail"),
    ("jbd2", "jbd2_lock_buffer_stall"),
    ("writeback", "balance_dirty_pages"),
    ("wbt", "wbt_step"),
    ("wbt", "wbt_lat"),
];
/// How a light capture's `missing_events` entry begins when none of the
/// kept events could be attached (no tracefs): "every kept event: …", in
/// captures made before the dirty limit's and wbt's events "every journal
/// event (…)".
pub const EVERY_EVENT_MISSING: &str = "every ";
/// How a light capture's `missing_events` entry begins when the kernel
/// could not run the scheduler's program (it reads the scheduler's own
/// `sched_info` stamps, which a kernel without CONFIG_SCHED_INFO lacks):
/// runqueue waits are then not recorded, whatever `--runqueue` said.
pub const RUNQUEUE_MISSING: &str = "runqueue waits: ";
/// The CPUs whose counts the queue depth sampled at issue adds up
/// (bpf/light.h): a machine with more has its depth undercounted.
pub const MAX_DEPTH_CPUS: usize = 256;
/// The manifest's `mode` of a light capture.
pub const MODE: &str = "light";

/// `slow.bin` starts with these 8 bytes, then the record size (u32 LE)
/// and a reserved u32; records follow, each `SLOW_RECORD` bytes.
pub const SLOW_MAGIC: &[u8; 8] = b"IOSLSLOW";
pub const SLOW_HEADER: usize = 16;
/// `struct slow_rec` of bpf/light.h.
pub const SLOW_RECORD: usize = 96;

/// Histogram buckets (bpf/light.h): values below 64 ns exact, then 32
/// per octave.
pub const SUB_BITS: u32 = 5;
pub const NBUCKET: usize = 1184;

/// The inclusive range of values (ns) of bucket `i`.
pub fn bucket_range(i: usize) -> (u64, u64) {
    super::log_linear::bucket_range::<SUB_BITS>(i)
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LightDoc {
    /// How the programs were attached (`tp_btf`).
    pub attach: String,
    /// CLOCK_MONOTONIC when the programs were attached and detached.
    pub started_ns: u64,
    pub stopped_ns: u64,
    pub slow: SlowPolicy,
    pub devices: Vec<LightDevice>,
    /// The programs' own run time (`--bpf-stats`).
    pub programs: Vec<ProgramStats>,
    /// The flight recorder's figures by CPU (absent in captures made
    /// before it existed).
    #[serde(default)]
    pub cpus: Vec<LightCpu>,
    /// Runqueue waits from this long were sent (ns).
    #[serde(default)]
    pub wait_min_ns: u64,
    /// Context events the kernel could not attach to (not in this kernel).
    #[serde(default)]
    pub missing_events: Vec<String>,
    /// How the stages were measured: "stamps" (from each request's own
    /// timestamps where its queue keeps them, else per-request state) or
    /// "state" (per-request state; every capture made before the choice).
    #[serde(default = "state_accounting")]
    pub accounting: String,
    /// Whether the scheduler's hooks ran: without them runqueue waits were
    /// not watched (captures made before the choice always watched them).
    #[serde(default = "watched")]
    pub runqueue: bool,
    /// Whether the interrupts' hooks ran: without them each CPU's hard
    /// and soft interrupt counts and times are unknown (captures made
    /// before the choice always recorded them).
    #[serde(default = "watched")]
    pub irq: bool,
    /// The queue depth at issue was read for one request in this many (by
    /// a hash of its sector and allocation stamp): the depth histograms
    /// are a sample (1: every request, as in captures made before).
    #[serde(default = "every_request")]
    pub depth_sampled: u32,
    /// Requests by the cgroup they were charged to (absent in captures
    /// made before it was counted).
    #[serde(default)]
    pub cgroups: LightCgroups,
    /// Whether bios held back by blk-throttle were counted (`throttled`
    /// per device); false: unknown (no dispatch work to recognise them by,
    /// or a capture made before they were counted).
    #[serde(default)]
    pub throttle: bool,
    /// io_uring requests by group, those with any count (None: a capture
    /// made before they were counted, unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_uring: Option<Vec<LightUring>>,
}

impl Default for LightDoc {
    /// What a manifest that says nothing means (the fields' serde defaults).
    fn default() -> Self {
        LightDoc {
            attach: String::new(),
            started_ns: 0,
            stopped_ns: 0,
            slow: SlowPolicy::default(),
            devices: Vec::new(),
            programs: Vec::new(),
            cpus: Vec::new(),
            wait_min_ns: 0,
            missing_events: Vec::new(),
            accounting: state_accounting(),
            runqueue: watched(),
            irq: watched(),
            depth_sampled: 1,
            cgroups: LightCgroups::default(),
            throttle: false,
            io_uring: None,
        }
    }
}

fn state_accounting() -> String {
    "state".into()
}

fn watched() -> bool {
    true
}

fn every_request() -> u32 {
    1
}

/// Entries (cgroup, device, operation) a capture keeps, the largest by
/// requests; the rest are summed.
pub const CGROUPS_KEPT: usize = 64;

/// What each cgroup's requests did on each device, by operation: the
/// cgroup the request's first bio was charged to (the block layer's
/// blkcg: where the kernel has cgroup writeback, a writeback bio is
/// charged to the cgroup that dirtied the pages, not to the flusher).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LightCgroups {
    /// Whether requests were counted by cgroup (false in captures made
    /// before it was: then nothing is known of them).
    pub counted: bool,
    /// The hierarchy the ids were resolved in (`/sys/fs/cgroup/blkio`);
    /// empty when the machine mounts none.
    pub hierarchy: String,
    /// Whether writeback is charged to the cgroup that dirtied the pages
    /// (cgroup v2 with the io and memory controllers); if not, the
    /// flusher's writes are charged to the root cgroup.
    pub writeback_charged: bool,
    /// The largest entries by requests, at most `CGROUPS_KEPT`.
    pub top: Vec<LightCgroup>,
    /// The entries not kept, summed.
    pub rest: CgroupRest,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LightCgroup {
    /// The kernel's cgroup id (the inode of its directory in the
    /// hierarchy); 0 for requests without a bio (flushes).
    pub id: u64,
    /// Its path from the hierarchy's root (`/` is the root); None when it
    /// was not found (removed before the capture ended).
    pub path: Option<String>,
    /// `major,minor`, or `other` for devices without a slot.
    pub dev: String,
    pub op: String,
    pub ios: u64,
    pub bytes: u64,
    /// The requests timed (issued after the programs were attached) and
    /// the sum of their total times (allocation to completion).
    pub timed: u64,
    pub time_ns: u64,
    /// Timed requests by total time: index i counts those over the
    /// previous bound and at most `LE_NS[i]`; the last, over them all.
    pub le: Vec<u64>,
}

/// The bounds (ns) of the per-cgroup histogram: Prometheus' `le` bounds
/// of every latency histogram iosleuth serves (bpf/light.bpf.c le_bucket).
pub const LE_NS: [u64; 19] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

impl LightCgroup {
    /// The path, or why there is none.
    pub fn name(&self) -> String {
        cgroup_name(self.id, self.path.as_deref())
    }

    /// The bound at or under which a share `q` of the timed requests
    /// completed (None: none timed, or over the last bound).
    pub fn quantile_bound_ns(&self, q: f64) -> Option<u64> {
        let want = (self.timed as f64 * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.le.iter().enumerate() {
            seen += c;
            if seen >= want {
                return LE_NS.get(i).copied();
            }
        }
        None
    }
}

impl LightCgroup {
    /// The same entry's counts since an earlier reading of it.
    pub fn since(&self, b: &LightCgroup) -> LightCgroup {
        LightCgroup {
            ios: self.ios.saturating_sub(b.ios),
            bytes: self.bytes.saturating_sub(b.bytes),
            timed: self.timed.saturating_sub(b.timed),
            time_ns: self.time_ns.saturating_sub(b.time_ns),
            le: minus(&self.le, &b.le),
            ..self.clone()
        }
    }

    /// Whether two entries count the same (cgroup, device, operation).
    pub fn same_key(&self, b: &LightCgroup) -> bool {
        self.id == b.id && self.dev == b.dev && self.op == b.op
    }
}

/// What each entry counted between two readings (the later first); an
/// entry absent from `before` counted everything after. Entries that
/// counted nothing are left out.
pub fn cgroups_since(after: &[LightCgroup], before: &[LightCgroup]) -> Vec<LightCgroup> {
    after
        .iter()
        .map(|a| match before.iter().find(|b| b.same_key(a)) {
            Some(b) => a.since(b),
            None => a.clone(),
        })
        .filter(|c| c.ios > 0 || c.bytes > 0)
        .collect()
}

/// The `n` largest entries by requests (then bytes), and the rest summed.
pub fn keep_largest(mut all: Vec<LightCgroup>, n: usize) -> (Vec<LightCgroup>, CgroupRest) {
    all.sort_by(|a, b| (b.ios, b.bytes, a.id).cmp(&(a.ios, a.bytes, b.id)));
    let rest = all.split_off(n.min(all.len()));
    let mut sum = CgroupRest::default();
    for r in &rest {
        sum.entries += 1;
        sum.ios += r.ios;
        sum.bytes += r.bytes;
    }
    (all, sum)
}

/// How a cgroup id reads to a user: its path, or why there is none.
pub fn cgroup_name(id: u64, path: Option<&str>) -> String {
    match (id, path) {
        (_, Some(p)) => p.to_string(),
        (0, None) => "(none: requests without a bio, such as flushes)".into(),
        (id, None) => format!("(cgroup id {id}: removed, or not in the I/O hierarchy)"),
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CgroupRest {
    pub entries: u64,
    pub ios: u64,
    pub bytes: u64,
}

/// What one CPU's scheduler and interrupts did while the programs ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LightCpu {
    pub cpu: u32,
    #[serde(flatten)]
    pub counts: CpuCounters,
    /// By softirq vector (HI, TIMER, NET_TX, NET_RX, BLOCK, IRQ_POLL,
    /// TASKLET, SCHED, HRTIMER, RCU).
    pub softirqs: Vec<u64>,
    pub softirq_ns: Vec<u64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SlowPolicy {
    /// `--slow`: every request at least this long (allocation to
    /// completion); otherwise the running p99 of its device and operation.
    pub fixed_ns: Option<u64>,
    /// The threshold before a device and operation has enough requests
    /// for a p99.
    pub initial_ns: u64,
    /// Slow requests sent per second at most (over all CPUs).
    pub cap_per_s: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LightDevice {
    /// `major,minor`, or `other` for devices without a slot.
    pub dev: String,
    /// By operation: read, write, flush, other.
    pub ops: BTreeMap<String, LightOp>,
    /// Requests by queue depth at issue (index = depth, the last also
    /// takes deeper ones).
    pub depth: Vec<u64>,
    pub counters: LightCounters,
    /// What the kernel's diskstats (`/sys/block/NAME/stat`) counted over
    /// the capture: read when the programs were attached and when they
    /// were detached; in `watch`'s readings, since its first one (None: a
    /// capture made before it was read, a disk without the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diskstats: Option<DiskstatsDelta>,
}

impl LightDevice {
    /// The requests the kernel counted (diskstats) that the programs did
    /// not see; None without the kernel's counts (unknown).
    pub fn unseen(&self) -> Option<u64> {
        let kernel: u64 = self.diskstats.as_ref()?.completed().iter().sum();
        let programs: u64 = self.ops.values().map(|o| o.ios).sum();
        Some(kernel.saturating_sub(programs))
    }
}

/// The difference of two readings of a disk's `stat` file, and the time
/// between them: iostat's figures over the capture, the kernel's own.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DiskstatsDelta {
    pub seconds: f64,
    /// The file's fields, later minus earlier (in-flight, field 9, is the
    /// later reading's): reads, merges, sectors, ms; writes ...; in
    /// flight, io_ticks ms, time_in_queue ms; discards ...; flushes, ms.
    pub fields: Vec<u64>,
}

impl DiskstatsDelta {
    /// `stat`'s fields between two readings taken `seconds` apart; None
    /// unless both have the 17 fields of kernels since 5.5.
    pub fn between(before: &[u64], after: &[u64], seconds: f64) -> Option<DiskstatsDelta> {
        if before.len() < 17 || after.len() < 17 || seconds.is_nan() || seconds <= 0.0 {
            return None;
        }
        let fields = (0..17)
            .map(|i| match i {
                8 => after[i],
                _ => after[i].wrapping_sub(before[i]),
            })
            .collect();
        Some(DiskstatsDelta { seconds, fields })
    }

    /// What was added since `before`, an earlier delta from the same
    /// first reading (in flight: this one's).
    pub fn since(&self, before: &DiskstatsDelta) -> Option<DiskstatsDelta> {
        if self.fields.len() < 17 || before.fields.len() < 17 {
            return None;
        }
        let seconds = self.seconds - before.seconds;
        let fields = (0..17)
            .map(|i| match i {
                8 => self.fields[i],
                _ => self.fields[i].saturating_sub(before.fields[i]),
            })
            .collect();
        Some(DiskstatsDelta { seconds, fields })
    }

    /// Requests completed by operation, in OPS' order (read, write,
    /// flush, discard): the kernel's own count.
    pub fn completed(&self) -> [u64; 4] {
        let f = |i: usize| self.fields.get(i).copied().unwrap_or(0);
        [f(0), f(4), f(15), f(11)]
    }

    /// Bytes completed by operation, in OPS' order (a flush moves none).
    pub fn bytes(&self) -> [u64; 4] {
        let f = |i: usize| self.fields.get(i).copied().unwrap_or(0).saturating_mul(512);
        [f(2), f(6), 0, f(13)]
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LightOp {
    pub ios: u64,
    pub bytes: u64,
    /// Allocation → issue.
    pub queued: StageHist,
    /// Issue → completion (D2C).
    pub device: StageHist,
    /// Allocation → completion.
    pub total: StageHist,
    /// Requests by log2 of their bytes (index k: 2^k ..).
    pub size_log2: Vec<u64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StageHist {
    pub n: u64,
    pub sum_ns: u64,
    /// `(bucket, count)` of the non-empty buckets.
    pub buckets: Vec<(u32, u64)>,
}

impl StageHist {
    /// `(low, high, count)` of each non-empty bucket, in ns.
    pub fn rows(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.buckets.iter().map(|&(i, c)| {
            let (lo, hi) = bucket_range(i as usize);
            (lo, hi, c)
        })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProgramStats {
    pub name: String,
    /// Runs and their time, kept by the kernel only while
    /// `kernel.bpf_stats_enabled` (`--bpf-stats`): absent otherwise, unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_time_ns: Option<u64>,
    /// Events the kernel did not run the program for: it was already
    /// running on that CPU when an interrupt raised the event again
    /// (`recursion_misses`). Absent in captures older than the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<u64>,
}

/// The operation names of bpf/light.h's slots, in slot order (OP_READ,
/// OP_WRITE, OP_FLUSH, OP_DISCARD): the groups diskstats counts.
pub const OPS: [&str; 4] = ["read", "write", "flush", "discard"];

/// io_uring requests by what they ask, in the order of light.bpf.c's
/// `uring_group`: reads and writes (plain, vectored, fixed buffers,
/// multishot reads), fsync and sync_file_range, passthrough commands,
/// network operations, waits (polls, timeouts, futexes, waitid: their
/// time is the wait for an event), file operations (open, close, statx,
/// fallocate, ...), and the rest.
pub const URING_OPS: [&str; 8] = [
    "read",
    "write",
    "fsync",
    "uring_cmd",
    "net",
    "wait",
    "file",
    "other",
];

/// What the programs counted of one group of io_uring requests.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LightUring {
    /// A name of URING_OPS.
    pub op: String,
    #[serde(flatten)]
    pub counts: UringCounters,
    /// Submission to completion of each timed request (ns).
    pub latency: StageHist,
}

impl LightUring {
    /// Whether the group counted anything (groups that did not are left
    /// out of captures and scrapes).
    pub fn counted(&self) -> bool {
        !self.counts.is_zero() || self.latency.n > 0
    }
}

/// The slot of a request's operation (`cmd_flags`), as light.bpf.c's
/// `op_of` groups it and diskstats does (op_stat_group): discards and
/// secure erases are discards, flushes flushes, every other operation a
/// read or a write by its lowest bit (write zeroes and zone appends are
/// writes).
pub fn op_group(cmd_flags: u32) -> usize {
    match cmd_flags & 0xff {
        2 => 2,
        3 | 5 => 3,
        op => (op & 1) as usize,
    }
}

impl StageHist {
    /// What was added to the histogram since `before` (an earlier reading
    /// of the same one); a bucket that shrank (the reading raced an
    /// update) counts 0.
    pub fn since(&self, before: &StageHist) -> StageHist {
        let mut buckets = Vec::new();
        let mut old = before.buckets.iter().peekable();
        for &(i, c) in &self.buckets {
            while old.peek().is_some_and(|b| b.0 < i) {
                old.next();
            }
            let prev = old.peek().filter(|b| b.0 == i).map_or(0, |b| b.1);
            if c > prev {
                buckets.push((i, c - prev));
            }
        }
        StageHist {
            n: self.n.saturating_sub(before.n),
            sum_ns: self.sum_ns.saturating_sub(before.sum_ns),
            buckets,
        }
    }

    /// The upper bound (ns) of the bucket holding quantile `q` (0..1) of
    /// the counted values; `None` when empty.
    pub fn quantile_high(&self, q: f64) -> Option<u64> {
        let total: u64 = self.buckets.iter().map(|b| b.1).sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (_, hi, c) in self.rows() {
            seen += c;
            if seen >= rank {
                return Some(hi);
            }
        }
        None
    }

    /// How many counted values are at least `ns` (a bucket counts when its
    /// lowest value is).
    pub fn at_least(&self, ns: u64) -> u64 {
        self.rows().filter(|r| r.0 >= ns).map(|r| r.2).sum()
    }
}

impl LightOp {
    pub fn since(&self, before: Option<&LightOp>) -> LightOp {
        let Some(b) = before else {
            return self.clone();
        };
        LightOp {
            ios: self.ios.saturating_sub(b.ios),
            bytes: self.bytes.saturating_sub(b.bytes),
            queued: self.queued.since(&b.queued),
            device: self.device.since(&b.device),
            total: self.total.since(&b.total),
            size_log2: minus(&self.size_log2, &b.size_log2),
        }
    }
}

fn minus(after: &[u64], before: &[u64]) -> Vec<u64> {
    after
        .iter()
        .enumerate()
        .map(|(i, a)| a.saturating_sub(before.get(i).copied().unwrap_or(0)))
        .collect()
}

/// What the devices counted between two readings of the light maps (the
/// later first); a device absent from `before` counted everything after.
pub fn devices_since(after: &[LightDevice], before: &[LightDevice]) -> Vec<LightDevice> {
    after
        .iter()
        .map(|d| {
            let b = before.iter().find(|b| b.dev == d.dev);
            LightDevice {
                dev: d.dev.clone(),
                ops: d
                    .ops
                    .iter()
                    .map(|(name, op)| (name.clone(), op.since(b.and_then(|b| b.ops.get(name)))))
                    .filter(|(_, op)| op.ios > 0 || op.total.n > 0)
                    .collect(),
                depth: minus(&d.depth, b.map_or(&[][..], |b| &b.depth)),
                counters: b.map_or(d.counters, |b| d.counters.since(&b.counters)),
                // Kept where both readings have the kernel's (watch's).
                diskstats: match (&d.diskstats, b.and_then(|b| b.diskstats.as_ref())) {
                    (Some(a), Some(b)) => a.since(b),
                    _ => None,
                },
            }
        })
        .filter(|d| !d.ops.is_empty() || d.counters != LightCounters::default())
        .collect()
}

/// The same for the io_uring groups' figures.
pub fn uring_since(after: &[LightUring], before: &[LightUring]) -> Vec<LightUring> {
    after
        .iter()
        .map(|a| {
            let Some(b) = before.iter().find(|b| b.op == a.op) else {
                return a.clone();
            };
            LightUring {
                op: a.op.clone(),
                counts: a.counts.since(&b.counts),
                latency: a.latency.since(&b.latency),
            }
        })
        .filter(LightUring::counted)
        .collect()
}

/// The same for the CPUs' figures.
pub fn cpus_since(after: &[LightCpu], before: &[LightCpu]) -> Vec<LightCpu> {
    after
        .iter()
        .map(|c| {
            let Some(b) = before.iter().find(|b| b.cpu == c.cpu) else {
                return c.clone();
            };
            LightCpu {
                cpu: c.cpu,
                counts: c.counts.since(&b.counts),
                softirqs: minus(&c.softirqs, &b.softirqs),
                softirq_ns: minus(&c.softirq_ns, &b.softirq_ns),
            }
        })
        .collect()
}

#[cfg(test)]
mod since_tests {
    use super::*;

    #[test]
    fn a_window_is_the_later_reading_less_the_earlier_bucket_by_bucket() {
        let before = StageHist {
            n: 3,
            sum_ns: 300,
            buckets: vec![(10, 2), (40, 1)],
        };
        let after = StageHist {
            n: 7,
            sum_ns: 1000,
            buckets: vec![(5, 1), (10, 2), (40, 3), (50, 1)],
        };
        let d = after.since(&before);
        assert_eq!(d.n, 4);
        assert_eq!(d.sum_ns, 700);
        assert_eq!(d.buckets, vec![(5, 1), (40, 2), (50, 1)]);
        // Bucket 50 holds the highest of the four: p99 is its bound.
        assert_eq!(d.quantile_high(0.99), Some(bucket_range(50).1));
        assert_eq!(d.quantile_high(0.25), Some(5));
        assert_eq!(d.at_least(41), 1);
        assert_eq!(StageHist::default().quantile_high(0.99), None);
    }
}

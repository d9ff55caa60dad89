//! What the rules share: verdict shorthands, how numbers are shown, lookups
//! in the analyses, and every read of the system snapshot.
//!
//! The snapshot (`Analysis::snapshot`, the typed `model::snapshot`) is
//! read only through the functions of the last section: the rules ask
//! questions (a device's name, a queue setting, a sysctl), never walk it.

use crate::analyze::block::DeviceSummary;
use crate::analyze::outliers::{self, Holder, Outlier};
use crate::analyze::Analysis;
use crate::diagnose::Verdict;
use crate::model::snapshot::SystemState;

/// A rule that did not fire, and why.
pub(super) fn not(why: impl Into<String>) -> Verdict {
    Verdict::NotFired(why.into())
}

/// Why no device or journal qualified, or `nothing` when there was none
/// to judge.
pub(super) fn not_any(why: Vec<String>, nothing: impl Into<String>) -> Verdict {
    if why.is_empty() {
        not(nothing)
    } else {
        not(why.join("; "))
    }
}

pub(super) use crate::model::units::ms_2dp;

/// The time between the trace's first and last analyzed event, ns.
pub(super) fn span_ns(a: &Analysis) -> u64 {
    a.span.last_ns.saturating_sub(a.span.first_ns)
}

/// What a light capture lacks to judge a rule from `system:event` (`what`
/// it records), which its flight recorder keeps whole: None when it kept
/// it (or the input is not a light capture).
pub(super) fn light_lacks_event(
    a: &Analysis,
    (system, event): (&str, &str),
    what: &str,
) -> Option<String> {
    let light = a.light.as_ref()?;
    (!light.kept(system, event)).then(|| {
        format!("a light capture lacks {what} when made before it kept {system}:{event}, or on a kernel without the event")
    })
}

/// The block analysis of a device (`MAJ,MIN`).
pub(super) fn block_device<'a>(a: &'a Analysis, dev: &str) -> Option<&'a DeviceSummary> {
    a.block.devices.iter().find(|d| d.device == dev)
}

/// The median latency of a kind of operation, from the syscall tables.
pub(in crate::diagnose) fn median_of(a: &Analysis, kind: &str) -> Option<u64> {
    let s = &a.syscalls;
    let stats = if let Some(n) = kind.strip_prefix("syscall ") {
        s.by_name.get(n)
    } else if let Some(n) = kind.strip_prefix("probe ") {
        s.operations.get(n)
    } else if kind == "ext4_sync_file" {
        Some(&a.fs.fsync)
    } else if let Some(op) = kind.strip_prefix("io_uring ") {
        a.outliers.io_uring.by_op.get(op)
    } else if let Some(k) = kind.strip_prefix("fault ") {
        a.outliers.faults.by_kind.get(k)
    } else {
        None
    };
    stats.and_then(|c| c.latency.as_ref()).map(|p| p.p50)
}

/// A device's queue settings directory: by name when the snapshot knows
/// it, else /sys/dev/block/MAJ:MIN (the device's sysfs directory).
pub(super) fn queue_dir(name: Option<&str>, dev: &str) -> String {
    match name {
        Some(n) => format!("/sys/block/{n}/queue"),
        None => format!("/sys/dev/block/{}/queue", dev.replace(',', ":")),
    }
}

/// The remedy that sets a queue setting (`{queue}/{key}`) to `value`, as
/// the snapshot had it (`now`); none when it already was `value`.
pub(super) fn queue_remedy(
    queue: &str,
    key: &str,
    now: Option<String>,
    value: &str,
) -> Option<crate::diagnose::Remedy> {
    (now.as_deref() != Some(value))
        .then(|| crate::diagnose::Remedy::set(format!("{queue}/{key}"), now, value))
}

// The system snapshot. Each function below answers one question the rules
// ask of it; `None` (or empty) when the input carries no snapshot or the
// snapshot lacks the answer.

/// The state before the workload ran, where the rules look.
fn before(a: &Analysis) -> Option<&SystemState> {
    a.snapshot.as_ref().map(|s| &s.before)
}

/// The name of a block device (`MAJ,MIN` → `loop0`).
pub(super) fn device_name(a: &Analysis, dev: &str) -> Option<String> {
    Some(a.snapshot.as_ref()?.device(dev)?.0.to_string())
}

/// A queue setting of a device (`/sys/block/DEV/queue/KEY`), as text
/// ("[bfq]" → "bfq").
pub(super) fn queue_setting(a: &Analysis, dev: &str, key: &str) -> Option<String> {
    a.snapshot.as_ref()?.device(dev)?.1.setting(key)
}

/// A numeric queue setting of a device (`max_sectors_kb`, …).
pub(super) fn queue_number(a: &Analysis, dev: &str, key: &str) -> Option<u64> {
    queue_setting(a, dev, key).and_then(|v| v.parse::<u64>().ok())
}

/// The first line of a journal's `/proc/fs/jbd2/NAME-*/info` (its
/// transactions and their size), for the journal on device `dev`.
pub(super) fn journal_info(a: &Analysis, dev: &str) -> Option<String> {
    let prefix = format!("{}-", device_name(a, dev)?);
    before(a)?
        .jbd2
        .iter()
        .find(|(k, _)| k.starts_with(&prefix))
        .map(|(_, v)| v.lines().next().unwrap_or("").to_string())
}

/// A dirty page sysctl (`/proc/sys/vm/KEY`: `dirty_bytes`, `dirty_ratio`).
pub(super) fn vm_setting(a: &Analysis, key: &str) -> Option<String> {
    before(a)?
        .vm
        .get(key)?
        .as_deref()
        .map(|x| x.trim().to_string())
}

/// `kernel.sched_rt_runtime_us` as the snapshot holds it, or `None`
/// without a snapshot or when it could not be read.
pub(super) fn sched_rt_runtime_us(a: &Analysis) -> Option<String> {
    before(a)?
        .sched
        .get("sched_rt_runtime_us")
        .cloned()
        .flatten()
}

/// Whether a thread a trace names is a kernel thread: by its name, or
/// listed as one in the snapshot. A remedy never changes one (`try`
/// refuses kernel threads).
pub(super) fn kernel_thread(a: &Analysis, comm: &str, pid: u32) -> bool {
    // The idle task (pid 0) is one too.
    crate::analyze::sched::thread_kind(comm, pid) != "task"
        || a.snapshot.as_ref().is_some_and(|s| s.is_kernel_thread(pid))
}

/// A cgroup's I/O limit on one device: the cgroup's directory, the file
/// (`io.max`, `blkio.throttle.read_bps_device`, …) and its line.
pub(super) struct CgroupLimit {
    pub cgroup: String,
    pub file: String,
    pub line: String,
}

/// The cgroup limits on a device (`MAJ,MIN`), by cgroup.
pub(super) fn cgroup_limits(a: &Analysis, dev: &str) -> Vec<CgroupLimit> {
    let colon = dev.replace(',', ":");
    let Some(b) = before(a) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (cg, files) in &b.cgroup_io_limits {
        for (file, text) in files {
            for line in text.lines() {
                if line.split_whitespace().next() == Some(colon.as_str()) {
                    out.push(CgroupLimit {
                        cgroup: cg.clone(),
                        file: file.clone(),
                        line: line.to_string(),
                    });
                }
            }
        }
    }
    out
}

// The workload's operations, as the outlier analysis kept them.

/// A wait that adds up to less than this share of the trace's span, in
/// percent, is too little time to name as a problem, however large a part
/// of very short operations it is (2000 writes of 24 µs behind a compiler
/// for 14 ms of a 0.5 s run).
pub(in crate::diagnose) const MIN_SPAN_PERCENT: f64 = 5.0;

/// Whether `ns` of waiting is worth naming in a trace of this span.
pub(in crate::diagnose) fn worth_naming(a: &Analysis, ns: u64) -> bool {
    ns as f64 * 100.0 >= MIN_SPAN_PERCENT * span_ns(a).max(1) as f64
}

/// Slow operations: at least this many times their kind's median…
pub(in crate::diagnose) const SLOW_TIMES_MEDIAN: u64 = 10;
/// …and at least this long (shorter ones are scheduling noise to a user).
pub(in crate::diagnose) const SLOW_MIN_NS: u64 = 5_000_000;

/// A slow operation of the workload, with its kind's median.
pub(in crate::diagnose) struct Slow<'a> {
    pub kind: &'a str,
    pub op: &'a Outlier,
    pub median: u64,
}

/// The workload's kept operations that took at least
/// [`SLOW_TIMES_MEDIAN`] times their kind's median and [`SLOW_MIN_NS`].
pub(in crate::diagnose) fn slow_operations(a: &Analysis) -> Vec<Slow<'_>> {
    let mut slow = Vec::new();
    for kind in outliers::workload_kinds(&a.outliers) {
        let Some(median) = median_of(a, kind) else {
            continue;
        };
        for op in a.outliers.by_kind.get(kind).into_iter().flatten() {
            if op.latency_ns >= SLOW_MIN_NS && op.latency_ns >= SLOW_TIMES_MEDIAN * median.max(1) {
                slow.push(Slow { kind, op, median });
            }
        }
    }
    slow
}

/// Every kept operation of the workload's kinds.
pub(in crate::diagnose) fn workload_ops(a: &Analysis) -> impl Iterator<Item = &Outlier> {
    outliers::workload_kinds(&a.outliers)
        .into_iter()
        .filter_map(|k| a.outliers.by_kind.get(k))
        .flatten()
}

/// Who held the CPU while operations waited runnable, summed over them,
/// longest first.
pub(in crate::diagnose) fn cpu_holders<'a>(ops: impl Iterator<Item = &'a Outlier>) -> Vec<Holder> {
    let mut by: Vec<Holder> = Vec::new();
    for h in ops.flat_map(|o| &o.held_by) {
        match by.iter_mut().find(|x| x.pid == h.pid) {
            Some(x) => x.ns += h.ns,
            None => by.push(h.clone()),
        }
    }
    by.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.pid.cmp(&b.pid)));
    by
}

/// A task's scheduling class as `sched_switch`'s kernel priority tells
/// it: below 100 real-time, else its nice value (SCHED_BATCH and
/// SCHED_IDLE look the same as SCHED_OTHER there).
pub(in crate::diagnose) fn policy_of(prio: i64) -> String {
    if prio < 100 {
        format!("real-time, prio {prio}")
    } else {
        format!("nice {}", prio - 120)
    }
}

/// `yes 812 (nice -10) 71%, sh 90 (nice 0) 12%`: the holders of `total`
/// ns of waiting, the first few.
pub(in crate::diagnose) fn holders_text(holders: &[Holder], total: u64) -> String {
    holders
        .iter()
        .take(3)
        .map(|h| {
            format!(
                "{} {} ({}) {:.0}%",
                h.comm,
                h.pid,
                policy_of(h.prio),
                h.ns as f64 * 100.0 / total.max(1) as f64
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

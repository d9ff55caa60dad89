//! What the rules share: verdict shorthands, how numbers are shown, lookups
//! in the analyses, and every read of the system snapshot.
//!
//! The snapshot (`Analysis::snapshot`, the typed `model::snapshot`) is
//! read only through the functions of the last section: the rules ask
//! questions (a device's name, a queue setting, a sysctl), never walk it.

use crate::analyze::block::DeviceSummary;
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

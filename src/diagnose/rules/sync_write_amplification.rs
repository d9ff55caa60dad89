//! Small synchronous writes that cost the device several times their size
//! in journal writes and cache flushes.
//!
//! Every fsync that changes metadata commits a jbd2 transaction (a
//! descriptor, the changed metadata blocks, a commit block) plus one or
//! two cache flushes. The fs analysis splits the bytes each device was
//! asked to write into file data and jbd2's own writes, and counts the
//! flushes; the syscall analysis (or ext4_sync_file) counts the syncs. A
//! property of the application, so never more than a warning. Not one of the
//! four measured slow-downs of DESIGN.md (the writers of the measured small-journal stall are such a load); recorded in the lab as
//! fsync-4k.cap against fsync-bulk.cap.

use super::helpers::{device_name, not, not_any};
use crate::analyze::Analysis;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "sync_write_amplification",
    looks_for:
        "small synced writes costing the device several times their size in journal and flushes",
    fires_when: "≥ 32 fsync/fdatasync and ≥ 3 bytes written to the device (data + journal) per byte of data; flushes per sync in the evidence (warning: a property of the application)",
    stays_silent: "one fsync after 16 MiB",
    needs: &["block", "syscalls"],
    light_lacks: Some("the system calls (fsync, write: hooks on every system call's entry and exit, whose empty floor alone cost 9–15 % of a system-call-bound load: docs/BENCHMARKS.md)"),
    light_lacks_when: None,
    remedy: None,
    check,
};

/// Syncs needed to judge what each costs: one sync's journal commit and
/// flush say nothing of the next (fsync-bulk.cap: 1); fsync-4k.cap has 100.
const MIN_SYNCS: u64 = 32;
/// Bytes written per byte of data; chosen (no source named): fsync-4k.cap
/// 6.9x, the healthy runs' appends 2.3x, slowdev-fsync.cap 1.1x.
const MIN_AMPLIFICATION: f64 = 3.0;

fn check(a: &Analysis) -> Verdict {
    let by_name = &a.syscalls.by_name;
    let syscalls: u64 = ["fsync", "fdatasync"]
        .iter()
        .filter_map(|n| by_name.get(*n))
        .map(|c| c.count)
        .sum();
    let syncs = if syscalls > 0 {
        syscalls
    } else {
        a.fs.fsync.count
    };
    if syncs < MIN_SYNCS {
        return not(format!(
            "{syncs} fsync/fdatasync calls (at least {MIN_SYNCS} are needed to judge what each costs)"
        ));
    }
    let mut why = Vec::new();
    for (dev, m) in &a.fs.device_writes {
        if m.data_bytes == 0 {
            continue;
        }
        let total = m.data_bytes + m.journal_bytes;
        let amp = total as f64 / m.data_bytes as f64;
        if amp < MIN_AMPLIFICATION {
            why.push(format!(
                "{dev}: {:.1} bytes written per byte of data ({} KiB data, {} KiB journal)",
                amp,
                m.data_bytes / 1024,
                m.journal_bytes / 1024
            ));
            continue;
        }
        let per = |v: u64| v as f64 / syncs as f64;
        let name = device_name(a, dev);
        return Verdict::Fired(Finding {
            remedy: None,
            id: RULE.id,
            severity: Severity::Warning,
            title: format!(
                "{}: each of {syncs} syncs wrote {:.1} KiB of data but {:.1} KiB to the device and {:.1} cache flushes ({amp:.1}x)",
                name.as_deref().unwrap_or(dev),
                per(m.data_bytes) / 1024.0,
                per(total) / 1024.0,
                per(m.flushes)
            ),
            evidence: json!({
                "device": dev,
                "syncs": syncs,
                "data_bytes": m.data_bytes,
                "journal_bytes": m.journal_bytes,
                "flushes": m.flushes,
                "bytes_per_sync": per(total),
                "data_bytes_per_sync": per(m.data_bytes),
                "flushes_per_sync": per(m.flushes),
                "amplification": amp,
            }),
            explanation: "Every fsync that changes metadata (a file that grows, new blocks) commits a journal transaction: a descriptor, the changed metadata blocks and a commit block, plus one or two cache flushes. For small writes this costs the device several times the data and a flush each, and the flush is often the slowest part.".into(),
            workaround: "batch writes between syncs (group commit), preallocate the file (fallocate) and use fdatasync so overwrites commit no metadata, or write with O_DIRECT|O_DSYNC into preallocated space".into(),
        });
    }
    not_any(why, format!("{syncs} syncs, but no data writes in the trace (record the `block` and `fs` event sets)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, line, silent, with_snapshot,
    };
    use serde_json::json;

    /// `syncs` rounds of: app (pid 700) writes `data_kib` to 7,0 and calls
    /// fsync, which commits 12 KiB of journal and one cache flush.
    fn synced_writes(syncs: u64, data_kib: u64) -> String {
        let mut text = String::new();
        for i in 0..syncs {
            let t = 1_000_000 + i * 1_000;
            let data = format!("7,0 WS {} + {} [app]", 100_000 + i * 256, data_kib * 2);
            text += &line(t, "app-700", 0, "block_bio_queue", &data);
            text += &line(t + 10, "app-700", 0, "sys_enter_fsync", "fd: 0x00000003");
            let journal = format!("7,0 WS {} + 24 [jbd2/loop0-8]", 8_000 + i * 24);
            text += &line(t + 20, "jbd2/loop0-8-300", 1, "block_bio_queue", &journal);
            text += &line(
                t + 30,
                "jbd2/loop0-8-300",
                1,
                "block_bio_queue",
                "7,0 FF 0 + 0 [jbd2/loop0-8]",
            );
            text += &line(t + 500, "app-700", 0, "sys_exit_fsync", "0x0");
        }
        text
    }

    #[test]
    fn fires_for_small_synced_writes() {
        let a = with_snapshot(
            analysis(&synced_writes(32, 4)),
            json!({ "block_devices": block_devices("loop0", "7,0", &[]) }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "sync_write_amplification");
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(
            f.title,
            "loop0: each of 32 syncs wrote 4.0 KiB of data but 16.0 KiB to the device and 1.0 cache flushes (4.0x)"
        );
        assert_eq!(f.evidence["data_bytes"], 32 * 4096);
        assert_eq!(f.evidence["journal_bytes"], 32 * 12_288);
        assert_eq!(f.evidence["flushes"], 32);
        assert_eq!(f.evidence["amplification"], 4.0);
    }

    #[test]
    fn silent_for_large_writes_between_syncs() {
        assert_eq!(
            silent(check(&analysis(&synced_writes(32, 64)))),
            "7,0: 1.2 bytes written per byte of data (2048 KiB data, 384 KiB journal)"
        );
    }

    #[test]
    fn silent_with_too_few_syncs() {
        assert_eq!(
            silent(check(&analysis(&synced_writes(31, 4)))),
            "31 fsync/fdatasync calls (at least 32 are needed to judge what each costs)"
        );
    }
}

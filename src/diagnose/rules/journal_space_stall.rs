//! Writers wait for journal space while they
//! checkpoint it.
//!
//! When a jbd2 journal has no room for a new transaction, the task that
//! needs it writes back (checkpoints) older transactions itself
//! (`__jbd2_log_wait_for_space`), and every other writer waits. The
//! `jbd2_checkpoint` events of a thread other than the journal's own
//! (`jbd2/DEV-8`) show it; with scheduler and block events the outliers
//! analysis adds the share of the writers' time it cost. The snapshot's
//! `/proc/fs/jbd2/*/info` gives the journal's size.

use super::helpers::{device_name, journal_info, not_any};
use crate::analyze::Analysis;
use crate::diagnose::Remedy;
use crate::diagnose::{Finding, Rule, Severity, Verdict};
use serde_json::json;

pub const RULE: Rule = Rule {
    id: "journal_space_stall",
    looks_for: "writers checkpointing the journal themselves: waiting for journal space",
    fires_when: "writer threads (not jbd2) run journal checkpoints costing ≥ 1 % of their write/fsync time (critical ≥ 5 %); without scheduler events ≥ 10 checkpoints, at least one per 100 commits (critical)",
    stays_silent: "the same writers with a 1 GiB journal; 2 checkpoints costing 0.2 % (journal-few-checkpoints.cap)",
    needs: &["fs"],
    light_lacks: None,
    light_lacks_when: None,
    remedy: Some("a larger journal (four times the snapshot's, from 256 MiB to 1 GiB): not live (the file system unmounted, `tune2fs -J size=`), so `try` never makes it; `try --workload-applies` measures it with a workload whose candidate side runs on a file system made with it (as `lab run journal --try` does), judged by `workload.ms_per_op` (the full recorder's rounds, `--full`; light rounds fall back to the workload's time)"),
    check,
};

/// The journal's own thread (`jbd2/loop0-8`): its checkpoints are no stall.
const JOURNAL_THREAD_PREFIX: &str = "jbd2/";
/// Where a writer waits for journal space (fs/jbd2/transaction.c:
/// add_transaction_credits, and wait_transaction_locked under it;
/// fs/jbd2/checkpoint.c: __jbd2_log_wait_for_space), by this kernel's
/// names: the measured stall had 93 % of fsync's time under the first.
const JOURNAL_SPACE_WAIT_FUNCTIONS: [&str; 3] = [
    "add_transaction_credits",
    "wait_transaction_locked",
    "__jbd2_log_wait_for_space",
];
/// The operations whose time the journal-space share is taken of.
const WRITE_AND_SYNC_KINDS: [&str; 4] = [
    "syscall fsync",
    "syscall pwrite64",
    "syscall write",
    "syscall fdatasync",
];
/// Checkpoints run by writers themselves: a 1 GiB journal has none
/// (journal-1024m.cap), journal-4m.cap 17, the lab's 128 writers over
/// 3000 (64 writers: over 1000).
const CRITICAL_WRITER_CHECKPOINTS: u64 = 10;
/// And, when the cost cannot be told, this share of the commits:
/// journal-4m.cap checkpoints by writers 17 times in 294 commits (5.8 %);
/// the lab's wbt scenario on an 8 MiB journal, 12 times in 3783–4350
/// (0.3 %), under 1 % of the writers' time where that is measured.
const CRITICAL_WRITER_CHECKPOINTS_PER_COMMIT: f64 = 0.01;
/// Below this share of the writers' write and fsync time, checkpoints by
/// writers are not a cause worth a finding (they stay in --explain): the
/// lab's rt-starvation runs checkpoint 2 times for 0.1 % of that time.
const MIN_JOURNAL_SPACE_PERCENT: f64 = 1.0;
/// Critical from this share: the lab's 4 MiB journal runs show 85–92 %
/// with 128 writers (11–32 % with 64), the measured stall 93 %.
const CRITICAL_JOURNAL_SPACE_PERCENT: f64 = 5.0;

fn check(a: &Analysis) -> Verdict {
    let mut why = Vec::new();
    for (dev, j) in &a.fs.journals {
        let c = &j.checkpoints;
        let by_writers: u64 = c
            .by_process
            .iter()
            .filter(|(who, _)| !who.starts_with(JOURNAL_THREAD_PREFIX))
            .map(|(_, n)| n)
            .sum();
        if by_writers == 0 {
            why.push(format!(
                "journal {dev}: {} commits, no checkpoint by a writer thread",
                j.commits
            ));
            continue;
        }
        // How much of the writers' syscall time it cost, when the capture
        // can tell (scheduler and block events present).
        let share = WRITE_AND_SYNC_KINDS
            .iter()
            .filter_map(|k| a.outliers.totals.get(*k))
            .map(|t| (t.breakdown.journal_space_ns, t.latency_ns))
            .fold((0u64, 0u64), |x, y| (x.0 + y.0, x.1 + y.1));
        let pct = (share.1 > 0).then(|| share.0 as f64 * 100.0 / share.1 as f64);
        // Severity follows the cost to the writers when the capture can
        // tell it; otherwise only many checkpoints are evidence enough.
        let severity = match pct {
            Some(p) if p >= CRITICAL_JOURNAL_SPACE_PERCENT => Severity::Critical,
            Some(p) if p >= MIN_JOURNAL_SPACE_PERCENT => Severity::Warning,
            Some(p) => {
                why.push(format!(
                    "journal {dev}: writer threads checkpointed it {by_writers} times, {p:.1}% of their write and fsync time (below {MIN_JOURNAL_SPACE_PERCENT}%: not what slows them)"
                ));
                continue;
            }
            None if by_writers >= CRITICAL_WRITER_CHECKPOINTS
                && by_writers as f64
                    >= CRITICAL_WRITER_CHECKPOINTS_PER_COMMIT * j.commits as f64 =>
            {
                Severity::Critical
            }
            None => {
                why.push(format!(
                    "journal {dev}: writer threads checkpointed it {by_writers} times in {} commits, and the capture cannot tell what it cost them (record the sched and block event sets)",
                    j.commits
                ));
                continue;
            }
        };
        let journal = journal_info(a, dev);
        let blocked = a.stacks.task_share_under(&JOURNAL_SPACE_WAIT_FUNCTIONS);
        return Verdict::Fired(Finding {
            remedy: Some(larger_journal(a, dev)),
            id: RULE.id,
            severity,
            title: format!(
                "journal {dev} ran out of space: writer threads checkpointed it {by_writers} times{}{}",
                pct.map(|p| format!(", {p:.1}% of their write and fsync time"))
                    .unwrap_or_default(),
                blocked
                    .map(|p| format!("; {p:.0}% of their blocked time was under add_transaction_credits or __jbd2_log_wait_for_space"))
                    .unwrap_or_default()
            ),
            evidence: json!({
                "journal": dev,
                "commits": j.commits,
                "commits_per_s": j.commits_per_s,
                "checkpoint_passes_by_writers": by_writers,
                "checkpointed_transactions": c.transactions,
                "checkpoint_by_process": c.by_process,
                "journal_space_percent_of_write_and_fsync_time": pct,
                // With kernel stacks (record --stacks): the writers'
                // blocked time under the journal-space waits.
                "blocked_under_journal_space_wait_percent": blocked.map(|p| (p * 10.0).round() / 10.0),
                "jbd2_info": journal,
            }),
            explanation: "When the journal has no room for a new transaction, the task that needs it must first write back (checkpoint) older transactions' blocks, and every other writer waits (measured on a 4 MiB journal: 93% of the writers' time under add_transaction_credits, D-state in __jbd2_log_wait_for_space). A small journal, or more and smaller transactions (dioread_nolock), make it happen often.".into(),
            workaround: format!(
                "give the file system a larger journal (unmounted: tune2fs -O ^has_journal DEV && tune2fs -J size=1024 DEV){}; journal {dev} now: {}",
                dioread_lock_advice(a, dev),
                journal.unwrap_or_else(|| "size unknown (no snapshot)".into())
            ),
        });
    }
    not_any(
        why,
        "no jbd2 events in the trace (record the `fs` event set)",
    )
}

/// The other workaround, where it applies: remounting with dioread_lock
/// (fewer, larger transactions) removed the stall where it was measured;
/// on the lab's 128 writers it did not (p99 -5 %, 95 % CI -26..+14 %, the
/// stall in every round), so it is advice to prove with `try`, not the
/// remedy. Said with the mount point when the snapshot has it.
fn dioread_lock_advice(a: &Analysis, dev: &str) -> String {
    let general = ", or remount with -o dioread_lock (which removed the stall where it was measured: prove it on your workload with `iosleuth try --set mount:MOUNTPOINT=dioread_lock -- WORKLOAD`)".to_string();
    let Some(name) = device_name(a, dev) else {
        return general;
    };
    let Some(m) = a.snapshot.as_ref().and_then(|s| {
        s.before
            .mounts
            .iter()
            .find(|m| m.device == format!("/dev/{name}") && m.fstype == "ext4")
    }) else {
        return general;
    };
    if m.options.split(',').any(|o| o == "nodioread_nolock") {
        return format!(" ({} is mounted with dioread_lock already)", m.mountpoint);
    }
    format!(
        ", or remount with -o dioread_lock (which removed the stall where it was measured: prove it on your workload with `iosleuth try --set mount:{}=dioread_lock -- WORKLOAD`)",
        m.mountpoint
    )
}

/// The journal sizes the remedy tries: four times today's, at least
/// 256 MiB (what mke2fs gives a file system of 64 GiB) and at most 1 GiB
/// (its default from 128 GiB). Measured in the lab (128 writers, 16 KiB
/// writes and fsync): 4 MiB → 64 MiB took 12 % off their time per
/// operation, 1 GiB half of it.
const TRIED_JOURNAL_MIN_KIB: u64 = 256 * 1024;
const TRIED_JOURNAL_MAX_KIB: u64 = 1024 * 1024;

/// A larger journal: never applied live (the file system unmounted,
/// `tune2fs -J size=`), tried by a workload that sets up its candidate
/// side itself (`try --workload-applies`, as the lab does on its own
/// device). Its size from the snapshot's journal when it holds it.
fn larger_journal(a: &Analysis, dev: &str) -> Remedy {
    // Judged by the time each operation took: a workload that writes
    // for a fixed time does more operations, not a shorter run.
    let r = Remedy::not_live(
        "a larger journal is made with the file system unmounted (tune2fs -J size=), which iosleuth never does to a user's file system; `try --workload-applies` measures it when the workload's candidate side runs on a file system made with it, as `lab run journal --try` does on the lab's own device",
    )
    .judged_by("workload.ms_per_op");
    let name = device_name(a, dev);
    let kib = a.snapshot.as_ref().and_then(|s| {
        s.before
            .ext4_journals
            .get(name.as_deref()?)?
            .get("journal_kib")?
            .as_u64()
    });
    match kib {
        Some(k) if k < TRIED_JOURNAL_MAX_KIB => r.and(
            format!("ext4 journal of {}", name.as_deref().unwrap_or(dev)),
            Some(format!("{k} KiB")),
            format!("{} KiB", tried_journal_kib(k)),
        ),
        _ => r,
    }
}

/// The journal size (KiB) the remedy tries for a journal of `now` KiB.
pub(crate) fn tried_journal_kib(now: u64) -> u64 {
    (now * 4).clamp(TRIED_JOURNAL_MIN_KIB, TRIED_JOURNAL_MAX_KIB)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testkit::{
        analysis, block_devices, fired, knobs, line, silent, with_snapshot,
    };
    use serde_json::json;

    /// Two commits of journal 7,0, `by_writer` checkpoint passes by a
    /// writer (fio, pid 200) and two by the journal thread itself.
    fn journal(by_writer: u64) -> String {
        journal_of(2, by_writer)
    }

    /// `commits` commits by jbd2, then `by_writer` checkpoints by fio.
    fn journal_of(commits: u64, by_writer: u64) -> String {
        let mut text = String::new();
        for tid in 1..=commits {
            let t = tid * 10_000;
            let commit = format!("dev 7,0 transaction {tid} sync 0");
            text += &line(t, "jbd2/loop0-8-300", 1, "jbd2_start_commit", &commit);
            text += &line(t + 900, "jbd2/loop0-8-300", 1, "jbd2_end_commit", &commit);
            text += &line(
                t + 950,
                "jbd2/loop0-8-300",
                1,
                "jbd2_checkpoint",
                "dev 7,0 result 0",
            );
        }
        for i in 0..by_writer {
            let t = (commits + 2) * 10_000 + i * 100;
            text += &line(t, "fio-200", 0, "jbd2_checkpoint", "dev 7,0 result 0");
        }
        text
    }

    #[test]
    fn fires_when_writers_checkpoint_the_journal() {
        let info = "1346 transactions (1346 requested), each up to 341 blocks\naverage: \n  0ms waiting for transaction";
        let a = with_snapshot(
            analysis(&journal(12)),
            json!({
                "block_devices": block_devices("loop0", "7,0", &[]),
                "jbd2": { "loop0-8": info },
            }),
        );
        let f = fired(check(&a));
        assert_eq!(f.id, "journal_space_stall");
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(
            f.title,
            "journal 7,0 ran out of space: writer threads checkpointed it 12 times"
        );
        assert_eq!(f.evidence["commits"], 2);
        assert_eq!(f.evidence["checkpoint_passes_by_writers"], 12);
        assert_eq!(f.evidence["checkpoint_by_process"]["fio (200)"], 12);
        assert_eq!(
            f.evidence["jbd2_info"],
            "1346 transactions (1346 requested), each up to 341 blocks"
        );
        assert!(f.workaround.ends_with(
            "journal 7,0 now: 1346 transactions (1346 requested), each up to 341 blocks"
        ));
        // No size in the snapshot: the remedy says only why it is not live.
        let r = f.remedy.unwrap();
        assert!(!r.live && r.settings.is_empty());
        assert_eq!(r.metric.as_deref(), Some("workload.ms_per_op"));
    }

    #[test]
    fn the_remedy_tries_four_times_the_journal_from_256_mib_to_1_gib() {
        let sized = |kib: u64| {
            let a = with_snapshot(
                analysis(&journal(12)),
                json!({
                    "block_devices": block_devices("loop0", "7,0", &[]),
                    "ext4_journals": { "loop0": { "journal_kib": kib, "block_size": 4096 } },
                }),
            );
            fired(check(&a)).remedy.unwrap()
        };
        let r = sized(4096);
        assert!(!r.live);
        assert_eq!(
            knobs(&r),
            [("ext4 journal of loop0", Some("4096 KiB"), "262144 KiB")]
        );
        assert_eq!(knobs(&sized(131_072))[0].2, "524288 KiB");
        assert_eq!(knobs(&sized(524_288))[0].2, "1048576 KiB");
        // Already at mke2fs's largest: nothing bigger to try.
        assert!(sized(1_048_576).settings.is_empty());
    }

    #[test]
    fn the_workaround_names_the_mount_to_remount_with_dioread_lock() {
        let mounted = |options: &str| {
            let a = with_snapshot(
                analysis(&journal(12)),
                json!({
                    "block_devices": block_devices("loop0", "7,0", &[]),
                    "mounts": [
                        { "device": "/dev/loop0", "mountpoint": "/data", "fstype": "ext4", "options": options },
                    ],
                }),
            );
            fired(check(&a)).workaround
        };
        let w = mounted("rw,relatime");
        assert!(
            w.contains("iosleuth try --set mount:/data=dioread_lock -- WORKLOAD"),
            "{w}"
        );
        let w = mounted("rw,relatime,nodioread_nolock");
        assert!(
            w.contains("(/data is mounted with dioread_lock already)") && !w.contains("try --set"),
            "{w}"
        );
        // Without the mount: the advice in general.
        let w = fired(check(&analysis(&journal(12)))).workaround;
        assert!(w.contains("mount:MOUNTPOINT=dioread_lock"), "{w}");
    }

    #[test]
    fn silent_for_a_few_checkpoints_of_unknown_cost() {
        assert_eq!(
            silent(check(&analysis(&journal(3)))),
            "journal 7,0: writer threads checkpointed it 3 times in 2 commits, and the capture cannot tell what it cost them (record the sched and block event sets)"
        );
    }

    /// Writers' checkpoints of unknown cost, many but few per commit (a
    /// busy journal's ordinary pace): no finding.
    #[test]
    fn silent_for_checkpoints_of_unknown_cost_rare_among_commits() {
        assert_eq!(
            silent(check(&analysis(&journal_of(2000, 12)))),
            "journal 7,0: writer threads checkpointed it 12 times in 2000 commits, and the capture cannot tell what it cost them (record the sched and block event sets)"
        );
        assert!(matches!(
            check(&analysis(&journal_of(1000, 12))),
            Verdict::Fired(_)
        ));
    }

    #[test]
    fn many_checkpoints_of_unknown_cost_without_a_snapshot() {
        let f = fired(check(&analysis(&journal(12))));
        assert_eq!(f.severity, Severity::Critical);
        assert_eq!(f.evidence["checkpoint_passes_by_writers"], 12);
        assert_eq!(f.evidence["jbd2_info"], serde_json::Value::Null);
        assert!(f
            .workaround
            .ends_with("journal 7,0 now: size unknown (no snapshot)"));
    }

    #[test]
    fn silent_when_only_the_journal_thread_checkpoints() {
        assert_eq!(
            silent(check(&analysis(&journal(0)))),
            "journal 7,0: 2 commits, no checkpoint by a writer thread"
        );
    }
}

//! `check` and `diff` judge by one rule: on every committed pair of a
//! healthy and a pathological capture, in both orders, `check`'s exit
//! status and line are what `diff` says `check` concludes; and each
//! pathology reads as a regression, its healthy run as no worse.

use crate::common::*;

/// (baseline, candidate) captures of one workload: the healthy run and
/// the run with the pathology, as the lab recorded them.
const PAIRS: [(&str, &str); 16] = [
    ("readahead-128.cap", "readahead-16.cap"),
    ("journal-1024m.cap", "journal-4m.cap"),
    ("fuse-wait-good.cap", "fuse-wait-bad.cap"),
    ("light-merges-good.cap", "light-merges-bad.cap"),
    ("cgroup-none.cap", "cgroup-throttled.cap"),
    ("cpu-contention-alone.cap", "cpu-contention-nice.cap"),
    ("dirty-none.cap", "dirty-throttle.cap"),
    ("wbt-default.cap", "wbt-target10us.cap"),
    ("sched-mq-deadline.cap", "sched-bfq.cap"),
    ("queue-depth1.cap", "queue-saturated.cap"),
    ("stacks-journal-1024m.cap", "stacks-journal-4m.cap"),
    ("loop-seqread-nomerges0.blk", "loop-seqread-nomerges2.blk"),
    ("uring-slowdev-good.cap", "uring-slowdev-bad.cap"),
    ("mmap-slowdev-good.cap", "mmap-slowdev-bad.cap"),
    ("cache-refault-good.cap", "cache-refault-bad.cap"),
    ("uring-punted-good.cap", "uring-punted-bad.cap"),
];

#[test]
fn check_and_diff_give_one_verdict_on_every_pair() {
    let f = |n: &str| format!("tests/fixtures/{n}");
    let mut pairs: Vec<(String, String, Option<&str>)> = Vec::new();
    for (good, bad) in PAIRS {
        pairs.push((f(good), f(bad), Some("regressed")));
        pairs.push((f(bad), f(good), None));
    }
    pairs.push((f("healthy-run1.cap"), f("healthy-run2.cap"), Some("good")));
    pairs.push((f("healthy-run2.cap"), f("healthy-run1.cap"), Some("good")));
    for (base, cand, want) in &pairs {
        let (word, line) = check_agrees_with_diff(base, cand);
        if let Some(w) = want {
            assert_eq!(word, *w, "{base} -> {cand}: {line}");
        }
        // The pathology undone is never a regression.
        if want.is_none() {
            assert_ne!(word, "regressed", "{base} -> {cand}: {line}");
        }
    }
}

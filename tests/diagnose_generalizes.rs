//! Issue 13's failure classes on real captures: each of these made an
//! earlier iosleuth name a cause confidently where there was none.

mod common;

use common::*;

fn findings(path: &str) -> Vec<serde_json::Value> {
    json_report(&[path], &[])["findings"]
        .as_array()
        .unwrap()
        .clone()
}

fn explain(path: &str, id: &str) -> String {
    run(iosleuth().arg("report").arg(path).args(["--explain", id]))
}

/// `dd if=/dev/zero of=F bs=1M count=256 conv=fsync` on ext4 over a loop
/// device (tests/fixtures/dd-seqwrite.cap, recorded with every event set):
/// writeback sends bios of 1 MiB and more; the loop device cuts them at its
/// max_sectors_kb (1280, the hardware's own limit) and the VM disk under the
/// loop file gets ~1 MiB requests that need no merging. The earlier rules
/// said "CRITICAL merges_disabled: vda … each became its own 2167-sector
/// request" (with `echo 0 > …/nomerges`, already 0) and "WARNING
/// request_splitting" for the normal cut of large bios.
#[test]
fn a_healthy_buffered_sequential_writer_is_not_a_merging_or_splitting_problem() {
    let cap = "tests/fixtures/dd-seqwrite.cap";
    let f = findings(cap);
    assert!(
        f.iter().all(|x| x["severity"] != "critical"),
        "a healthy dd got a critical finding: {f:#?}"
    );
    for id in ["merges_disabled", "request_splitting"] {
        assert!(f.iter().all(|x| x["id"] != id), "{id} fired: {f:#?}");
    }
    let why = explain(cap, "merges_disabled");
    assert!(
        why.contains("254,0: bios were not merged, but requests average 1083 KiB: already large"),
        "{why}"
    );
    let why = explain(cap, "request_splitting");
    assert!(
        why.contains("7,0: 49 bios were split 192 times into requests of 1130 KiB on average, at the limit the hardware sets"),
        "{why}"
    );
}

/// A write+fsync loop on ext4 with a 4 MiB journal, mostly full before the
/// recording (tests/fixtures/journal-few-checkpoints.cap, events fs, sched
/// and syscalls): the writer checkpointed the journal twice, 0.2 % of its
/// write and fsync time. The earlier rule warned "journal … ran out of
/// space"; below 1 % it belongs in --explain.
#[test]
fn two_cheap_checkpoints_are_no_journal_space_finding() {
    let cap = "tests/fixtures/journal-few-checkpoints.cap";
    let f = findings(cap);
    assert!(f.iter().all(|x| x["id"] != "journal_space_stall"), "{f:#?}");
    let why = explain(cap, "journal_space_stall");
    assert!(
        why.contains("journal 7,0: writer threads checkpointed it 2 times, 0.2% of their write and fsync time (below 1%: not what slows them)"),
        "{why}"
    );
}

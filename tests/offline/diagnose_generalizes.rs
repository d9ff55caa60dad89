//! Issue 13's failure classes on real captures: each of these made an
//! earlier iosleuth name a cause confidently where there was none.

use crate::common;

use common::*;
use serde_json::Value;

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
    assert_explains(
        cap,
        "merges_disabled",
        "254,0: bios were not merged, but requests average 1083 KiB: already large",
    );
    assert_explains(
        cap,
        "request_splitting",
        "7,0: 49 bios were split 192 times at the hardware's limit (pieces of up to 1280 KiB), max_sectors_kb = max_hw_sectors_kb = 1280: how large I/O travels, not a cause",
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
    assert_explains(cap, "journal_space_stall", "journal 7,0: writer threads checkpointed it 2 times, 0.2% of their write and fsync time (below 1%: not what slows them)");
}

/// `dd bs=4k count=600 iflag=direct` in a cgroup with
/// blkio.throttle.read_iops_device 200 (tests/fixtures/cgroup-iops-limit.cap,
/// events block, syscalls, workqueue, sched): blk-throttle let most bios
/// pass and held 29, yet the reads spent 99.5 % of their time waiting with
/// nothing at the device. The earlier rule judged by the held bios alone:
/// "WARNING … 29 of 600 bios (5%) … released at 0.0 MiB/s".
#[test]
fn a_cgroup_limit_that_stalls_the_workload_is_critical_whatever_share_of_bios_it_held() {
    let f = findings("tests/fixtures/cgroup-iops-limit.cap");
    assert_eq!(f[0]["id"], "cgroup_io_throttle", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    assert_eq!(f[0]["evidence"]["throttled_bios"], 29);
    assert_eq!(f[0]["evidence"]["all_bios"], 600);
    let waiting = f[0]["evidence"]["workload_waiting_percent"]
        .as_f64()
        .unwrap();
    assert!(waiting > 99.0, "{waiting}");
    let title = f[0]["title"].as_str().unwrap();
    assert!(
        title.ends_with("released at 41 KiB/s; the workload spent 99% of its time waiting with nothing at the device"),
        "{title}"
    );
    // The share of the workload's time it explains travels with it.
    assert!(
        f[0]["evidence"]["share_of_workload_time_percent"]
            .as_f64()
            .unwrap()
            > 99.0
    );
}

/// tests/fixtures/busy-device.synthetic.txt: one 60.6 ms pwrite behind 30
/// back-to-back 2 ms writes. device_latency_spike rightly stays silent (no
/// one request held it), and the report used to end at "findings: none";
/// now it says what no rule explains and where the time went.
#[test]
fn slow_operations_no_rule_explains_are_named_with_where_their_time_went() {
    let f = findings("tests/fixtures/busy-device.synthetic.txt");
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0]["id"], "unexplained");
    assert_eq!(f[0]["severity"], "info");
    assert_eq!(
        f[0]["title"],
        "1 slow operation that no rule explains (slowest: syscall pwrite64 60.6 ms, 1210x its median): 99% of their time at the device, longest behind a data write of 4 KiB on 7,0 issued by kworker/1:1"
    );
    assert_eq!(f[0]["evidence"]["percent_of_slow_time"]["device"], 99.0);
    // A healthy run has none.
    let healthy = findings("tests/fixtures/healthy-run1.cap");
    assert!(
        healthy.iter().all(|x| x["id"] != "unexplained"),
        "{healthy:#?}"
    );
}

/// Findings of one severity come in the order of the share of the
/// workload's time their cause explains, not in the catalog's order.
#[test]
fn findings_are_ranked_by_the_share_of_the_workloads_time_they_explain() {
    for cap in [
        "tests/fixtures/rt-burner.cap",
        "tests/fixtures/slowdev-fsync.cap",
        "tests/fixtures/cgroup-iops-limit.cap",
    ] {
        let f = findings(cap);
        let key = |x: &serde_json::Value| {
            let sev = match x["severity"].as_str().unwrap() {
                "critical" => 0,
                "warning" => 1,
                _ => 2,
            };
            (
                sev,
                -(x["evidence"]["share_of_workload_time_percent"]
                    .as_f64()
                    .unwrap_or(-1.0)
                    * 10.0) as i64,
            )
        };
        let keys: Vec<_> = f.iter().map(key).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted, "{cap}: {f:#?}");
        assert!(
            f[0]["evidence"]["share_of_workload_time_percent"].is_number(),
            "{cap}"
        );
    }
}

/// `cat` of a 4 MiB file with read_ahead_kb 0 (tests/fixtures/cat-readahead0.cap,
/// events block, readahead, syscalls): cat asks for 128 KiB at a time, but
/// with readahead off the kernel reads the one page that missed
/// (page_cache_sync_ra forces req_count to 1), so the misses come at pages
/// 0, 1, 2, … while the tracepoint's req_count says 32, 31, … The earlier
/// analysis expected the next miss at index + req_count and judged 97 % of
/// these reads random: no finding.
#[test]
fn a_sequential_reader_without_readahead_is_named_whatever_it_asked_for() {
    let f = findings("tests/fixtures/cat-readahead0.cap");
    assert_eq!(f[0]["id"], "readahead_small", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    assert_eq!(
        f[0]["title"],
        "loop0: 1023 of 1024 page-cache misses were sequential, read 0 KiB ahead (read_ahead_kb 0)"
    );
}

/// loop1 over a file on ext4 on loop0, loop1's max_sectors_kb lowered to 4,
/// `dd bs=1M oflag=direct` to loop1 (tests/fixtures/stacked-loop-maxsectors4.cap):
/// loop1 splits each 1 MiB bio into 256 pieces, and its worker writes them
/// to the file as 4 KiB direct I/Os, so loop0 sees unmerged 8-sector
/// requests and a long queue. The earlier ranking put "CRITICAL
/// merges_disabled: loop0" first, a rival cause; the cause is loop1's limit,
/// and loop0's symptoms are its consequences, with the chain.
#[test]
fn a_lower_devices_symptoms_are_consequences_of_the_cause_above_it() {
    let f = findings("tests/fixtures/stacked-loop-maxsectors4.cap");
    assert_eq!(f[0]["id"], "request_splitting", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    assert_eq!(f[0]["evidence"]["device"], "7,1");
    for x in &f[1..] {
        assert_eq!(x["severity"], "info", "{x:#}");
        assert_eq!(x["evidence"]["device"], "7,0");
        assert_eq!(
            x["evidence"]["consequence_of"]["finding"],
            "request_splitting"
        );
        assert_eq!(
            x["evidence"]["consequence_of"]["chain"],
            "loop1's file /var/tmp/iosl-m13/mnt/upper.img is on loop0"
        );
    }
    assert!(f.iter().any(|x| x["id"] == "merges_disabled"), "{f:#?}");
}

/// tests/fixtures/cpu-contention-nice.cap (`lab run cpu-contention`, bad
/// run): the fsync probe pinned to CPU 1 beside two busy shell loops at
/// nice -10, recorded while a compiler also ran. The rule names the shell
/// loops, ordinary tasks, as holders inside the recorded command; the
/// same fsyncs alone (cpu-contention-alone.cap, 5 % runnable) and behind a
/// real-time burner (rt-burner.cap, rt_starvation's) leave it silent.
#[test]
fn cpu_contention_names_ordinary_holders_and_leaves_real_time_to_rt_starvation() {
    let f = findings("tests/fixtures/cpu-contention-nice.cap");
    assert_eq!(f[0]["id"], "cpu_contention", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    let e = &f[0]["evidence"];
    assert_eq!(e["runnable_percent_of_workload_time"], 87.1);
    assert_eq!(e["real_time_percent_of_held_time"], 0.0);
    let loops: Vec<&Value> = e["held_by"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["comm"] == "sh")
        .collect();
    assert_eq!(loops.len(), 2, "{e:#}");
    for h in loops {
        assert_eq!(h["policy"], "nice -10");
        assert_eq!(h["of_the_recorded_command"], true);
    }
    assert!(
        f[0]["workaround"]
            .as_str()
            .unwrap()
            .contains("renice -n 10 -p"),
        "{:#}",
        f[0]
    );
    assert!(
        f.iter().all(|x| x["id"] != "device_latency_spike"),
        "{f:#?}"
    );
    for (cap, why) in [
        (
            "tests/fixtures/cpu-contention-alone.cap",
            "the workload's operations waited runnable 5.2% of their time (fires at 20 %)",
        ),
        (
            "tests/fixtures/rt-burner.cap",
            "but real-time tasks held the CPU for 100% of it: rt_starvation judges that",
        ),
    ] {
        let out = explain(cap, "cpu_contention");
        assert!(out.contains(why), "{cap}: {out}");
    }
}

/// tests/fixtures/fuse-wait-{good,bad}.cap (`lab run fuse-wait`): dd's
/// 4 KiB writes straight to a file on a FUSE file system, recorded with
/// --stacks; in the bad run the server holds every 100th write 30 ms. No
/// rule knows that wait; `unexplained` names the kernel function from the
/// stacks, as a warning, and the good run has no finding. The shell that
/// waited for dd (asleep in do_wait) is not a slow operation.
#[test]
fn a_wait_no_rule_knows_is_named_by_its_kernel_function() {
    let f = findings("tests/fixtures/fuse-wait-bad.cap");
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0]["id"], "unexplained");
    assert_eq!(f[0]["severity"], "warning");
    assert_eq!(f[0]["evidence"]["part"], "asleep");
    assert_eq!(f[0]["evidence"]["slow_operations"], 5);
    assert_eq!(
        f[0]["evidence"]["held_by"]["kernel_stack"],
        "request_wait_answer ← __fuse_simple_request ← fuse_direct_io"
    );
    assert_eq!(f[0]["evidence"]["slowest"]["comm"], "dd");
    assert_eq!(
        findings("tests/fixtures/fuse-wait-good.cap"),
        Vec::<Value>::new()
    );
}

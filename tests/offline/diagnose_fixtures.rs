//! Each rule on the committed real captures: it fires on its case, and it
//! stays silent (saying why) where a related symptom is present but not
//! its cause.

use crate::common;

use common::*;

const NOMERGES2: &str = "tests/fixtures/loop-seqread-nomerges2.blk";
const NOMERGES0: &str = "tests/fixtures/loop-seqread-nomerges0.blk";
const SLOWDEV: &str = "tests/fixtures/slowdev-fsync.cap";
const RT: &str = "tests/fixtures/rt-burner.cap";
const JOURNAL_SMALL: &str = "tests/fixtures/journal-4m.cap";
const JOURNAL_LARGE: &str = "tests/fixtures/journal-1024m.cap";

#[test]
fn merges_disabled_on_case1_capture_not_when_bios_merge() {
    let f = findings(NOMERGES2);
    assert_eq!(f[0]["id"], "merges_disabled", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    let e = &f[0]["evidence"];
    assert_eq!(e["bios_queued"], 512);
    assert_eq!(e["requests_issued"], 512);
    assert_eq!(e["avg_request_sectors"], 8);
    assert_eq!(e["sequential_bios"], 511);
    assert_eq!(
        f[0]["workaround"],
        "echo 0 > /sys/dev/block/7:0/queue/nomerges"
    );
    // The same reads with merging on: 64 bios per request.
    assert!(findings(NOMERGES0)
        .iter()
        .all(|x| x["id"] != "merges_disabled"));
    assert_explains(
        NOMERGES0,
        "merges_disabled",
        "sequential bios do merge (64.0 bios per request)",
    );
    // Random I/O (the slow-device fsyncs) has nothing to merge.
    assert_explains(
        SLOWDEV,
        "merges_disabled",
        "% of bios are sequential: little to merge",
    );
}

#[test]
fn merges_disabled_on_the_article_excerpt_says_what_is_missing() {
    assert_explains(
        "tests/fixtures/seeds/case1-perf-script.txt",
        "merges_disabled",
        "259,1: the trace holds no queued bios (Q), only 3 completions",
    );
    assert_explains(
        "tests/fixtures/seeds/case1-btrace-snapshot.txt",
        "merges_disabled",
        "259,0: only 2 bios queued (at least 64 are needed",
    );
    assert_explains(
        "tests/fixtures/seeds/case1-btrace-standard.txt",
        "merges_disabled",
        "259,0: only 1 bio queued (at least 64 are needed",
    );
}

#[test]
fn device_latency_spike_on_case4_lab_capture_not_on_cpu_starvation() {
    let f = findings(SLOWDEV);
    assert_eq!(f[0]["id"], "device_latency_spike", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    let e = &f[0]["evidence"];
    assert!(e["latency_ns"].as_u64().unwrap() > 140_000_000);
    assert!(e["median_ns"].as_u64().unwrap() < 1_000_000);
    assert_eq!(e["request"]["class"], "journal write");
    assert!(e["cpu_idle_percent"].as_f64().unwrap() > 90.0);
    // The RT burner's victims were slow too, but runnable, not at a device.
    assert!(findings(RT)
        .iter()
        .all(|x| x["id"] != "device_latency_spike"));
    assert_explains(RT, "device_latency_spike", "was 0% device time");
    // In case 4 one journal write held the fsync.
    assert!(
        e["request"]["overlap_ns"].as_u64().unwrap() * 2 > e["latency_ns"].as_u64().unwrap(),
        "{e:#}"
    );
}

#[test]
fn device_latency_spike_not_for_a_busy_device_of_short_requests() {
    let cap = "tests/fixtures/busy-device.synthetic.txt";
    // No cause named: only what no rule explains (diagnose_generalizes.rs).
    let f = findings(cap);
    assert!(f.iter().all(|x| x["id"] == "unexplained"), "{f:#?}");
    assert_explains(cap, "device_latency_spike", "slowest syscall pwrite64 (60.6 ms) was 99% device time, but no one request held it: the longest it waited for covers 2 ms (3%)");
}

#[test]
fn rt_starvation_on_case3_lab_capture_not_on_a_slow_device() {
    let f = findings(RT);
    assert_eq!(f[0]["id"], "rt_starvation", "{f:#?}");
    let e = &f[0]["evidence"];
    assert!(e["waits_over_10ms"].as_u64().unwrap() >= 2);
    assert_eq!(e["held_by"][0]["policy"], "RT");
    assert_eq!(e["held_by"][0]["prio"], 49);
    assert_eq!(e["sched_rt_runtime_us"], "950000");
    // The slow device's fsyncs waited, but blocked, not runnable.
    assert!(findings(SLOWDEV).iter().all(|x| x["id"] != "rt_starvation"));
    assert_explains(SLOWDEV, "rt_starvation", "(normal, prio 120)");
}

#[test]
fn journal_space_stall_on_case2_small_journal_not_on_the_large_one() {
    let f = findings(JOURNAL_SMALL);
    assert_eq!(f[0]["id"], "journal_space_stall", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    assert_eq!(f[0]["evidence"]["checkpoint_passes_by_writers"], 17);
    assert!(f[0]["evidence"]["jbd2_info"]
        .as_str()
        .unwrap()
        .contains("transactions"));
    // The same writers with a 1 GiB journal commit as often, never stall.
    assert!(findings(JOURNAL_LARGE).is_empty());
    assert_explains(
        JOURNAL_LARGE,
        "journal_space_stall",
        "no checkpoint by a writer thread",
    );
}

#[test]
fn explain_names_unknown_rules_and_exits_2() {
    let o = iosleuth()
        .arg("report")
        .arg(NOMERGES2)
        .args(["--explain", "no_such_rule"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("no rule \"no_such_rule\"; the rules are: merges_disabled"),
        "{e}"
    );
}

#[test]
fn check_exits_0_1_or_125_for_bisect() {
    let code = |a: &str, b: &str, extra: &[&str]| {
        iosleuth()
            .args(["check", a, b])
            .args(extra)
            .output()
            .unwrap()
            .status
            .code()
    };
    // Case 1: without merging the device gets 64x the requests.
    assert_eq!(
        code(NOMERGES0, NOMERGES2, &["--metric", "7,0 requests"]),
        Some(1)
    );
    assert_eq!(
        code(NOMERGES2, NOMERGES0, &["--metric", "7,0 requests"]),
        Some(0)
    );
    assert_eq!(
        code(NOMERGES0, NOMERGES2, &["--metric", "7,0 bios per request"]),
        Some(1)
    );
    // The same capture against itself is no regression.
    assert_eq!(code(SLOWDEV, SLOWDEV, &[]), Some(0));
    // A metric the runs lack, or an unreadable input: cannot tell.
    assert_eq!(
        code(NOMERGES0, NOMERGES2, &["--metric", "probe.fsync.p99_ms"]),
        Some(125)
    );
    // No metric at all: `check` called wrongly, which aborts a bisect.
    assert_eq!(
        code(NOMERGES0, NOMERGES2, &["--metric", "no such figure"]),
        Some(128)
    );
    assert_eq!(code(NOMERGES0, "Cargo.toml", &[]), Some(125));
}

#[test]
fn check_with_several_runs_a_side_counts_only_ranges_that_do_not_overlap() {
    let check = |base: &[&str], cand: &[&str]| {
        let out = iosleuth()
            .args(["check", "--metric", "dev.7,0.d2c.p99_ms"])
            .args(base)
            .arg("--")
            .args(cand)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (one, sat) = (
        "tests/fixtures/queue-depth1.cap",
        "tests/fixtures/queue-saturated.cap",
    );
    // D2C p99 0.117 ms at depth 1, 0.366 ms saturated.
    let (code, text) = check(&[one, one], &[sat, sat]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("0.117 -> 0.366"), "{text}");
    assert!(text.contains("over 2 runs"), "{text}");
    // The candidate's mean is worse, but one of its runs is as good as
    // the baseline: the ranges overlap, no regression.
    let (code, text) = check(&[one, one], &[one, sat]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("the ranges overlap, not a significant change"),
        "{text}"
    );
    // One path without `--` cannot be split into two sides: a usage
    // error, which aborts a bisect (128) instead of skipping the commit.
    let out = iosleuth().args(["check", one]).output().unwrap();
    assert_eq!(out.status.code(), Some(128));
}

/// tests/fixtures/split-maxsectors16.cap: `iosleuth record --events block`
/// around 16 direct reads of 256 KiB from a loop device whose
/// max_sectors_kb was lowered to 16 (max_hw_sectors_kb 1280).
#[test]
fn request_splitting_on_a_lowered_max_sectors_kb_not_on_small_io() {
    let cap = "tests/fixtures/split-maxsectors16.cap";
    let f = findings(cap);
    assert_eq!(f[0]["id"], "request_splitting", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    let e = &f[0]["evidence"];
    assert_eq!(e["bios_queued"], 16);
    assert_eq!(e["splits"], 240);
    assert_eq!(e["requests_per_bio"], 16.0);
    assert_eq!(e["max_sectors_kb"], 16);
    assert_eq!(e["max_hw_sectors_kb"], 1280);
    assert!(f[0]["workaround"]
        .as_str()
        .unwrap()
        .starts_with("echo 1280 > /sys/block/loop"));
    // 4 KiB reads never exceed the limit: no splits, nothing said.
    assert_explains(
        NOMERGES2,
        "request_splitting",
        "7,0: 0 splits of 512 queued bios",
    );
}

/// tests/fixtures/dd-seqwrite.cap: buffered `dd bs=1M` to ext4 on a loop
/// device whose max_sectors_kb is its max_hw_sectors_kb (1280): writeback's
/// large bios are cut at that limit, 192 times for 49 bios. Nothing can be
/// raised and the pieces were issued sooner than the other requests: how
/// large I/O travels, no finding, and the reason says so.
#[test]
fn request_splitting_silent_for_bios_cut_at_the_hardwares_limit() {
    let cap = "tests/fixtures/dd-seqwrite.cap";
    assert!(finding(&findings(cap), "request_splitting").is_none());
    assert_explains(
        cap,
        "request_splitting",
        "7,0: 49 bios were split 192 times at the hardware's limit (pieces of up to 1280 KiB), max_sectors_kb = max_hw_sectors_kb = 1280: how large I/O travels, not a cause: the split requests waited 0.51 ms on average from queue to issue, the others 15.16 ms (the device's queue: no larger request is possible)",
    );
}

/// tests/fixtures/dirty-{throttle,none}.cap: `iosleuth record --events
/// writeback` around `dd bs=1M count=48` (buffered) to ext4 on a loop
/// device, with vm.dirty_bytes = 4 MiB, and with the default dirty_ratio.
#[test]
fn dirty_throttling_with_a_low_dirty_limit_not_with_the_default() {
    let f = findings("tests/fixtures/dirty-throttle.cap");
    assert_eq!(f[0]["id"], "dirty_throttling", "{f:#?}");
    let e = &f[0]["evidence"];
    assert_eq!(e["pauses"], 11);
    assert_eq!(e["pause_ms_total"], 48);
    assert_eq!(e["limit_pages"], 1024);
    assert_eq!(e["vm_dirty_bytes"], "4194304");
    assert!(e["by_process"]
        .as_object()
        .unwrap()
        .keys()
        .any(|k| k.starts_with("dd (")));
    assert_explains(
        "tests/fixtures/dirty-none.cap",
        "dirty_throttling",
        "writers were paused 0 ms in all",
    );
    assert_explains(
        NOMERGES2,
        "dirty_throttling",
        "no writeback events in the trace",
    );
}

/// tests/fixtures/rt-short-bursts.cap: `iosleuth record --events sched`
/// around a SCHED_FIFO 50 task on CPU 0 (3 ms on, 40 ms off) and a thread
/// pinned to CPU 1 (0.2 ms of work every 2 ms): a real-time task runs, but
/// it never keeps anyone off a CPU for long.
#[test]
fn rt_starvation_silent_when_rt_tasks_starve_nobody() {
    let cap = "tests/fixtures/rt-short-bursts.cap";
    let rep = json_report(&[cap], &[]);
    let rt = rep["sched"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["prio"] == 49);
    assert!(rt, "the RT task is in the capture");
    assert!(rep["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] != "rt_starvation"));
    let why = explain(cap, "rt_starvation");
    assert!(why.contains("the longest runqueue wait, "), "{why}");
    assert!(why.contains("(normal, prio 120)"), "{why}");
}

#[test]
fn diff_names_case1_and_judges_several_runs_by_their_ranges() {
    // One run a side.
    let out = run(iosleuth().args(["diff", NOMERGES0, NOMERGES2]));
    assert!(
        out.contains("findings only in the candidate: merges_disabled"),
        "{out}"
    );
    assert!(
        out.contains("biggest change: 7,0 requests 8 -> 512 (64.00x)"),
        "{out}"
    );
    // Two recordings a side (the blk tracer's and the tracepoints' of the
    // same runs): ranges that do not overlap are significant.
    let t0 = "tests/fixtures/loop-seqread-nomerges0.tracepoints.txt";
    let t2 = "tests/fixtures/loop-seqread-nomerges2.tracepoints.txt";
    let j: serde_json::Value = serde_json::from_str(&run(iosleuth().args([
        "diff", "--format", "json", NOMERGES0, t0, "--", NOMERGES2, t2,
    ])))
    .unwrap();
    let fig = |name: &str| {
        j["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{j:#}"))
            .clone()
    };
    let r = fig("7,0 requests");
    assert_eq!(r["baseline"], 8.0);
    assert_eq!(r["candidate"], 512.0);
    assert_eq!(r["significant"], true);
    // A run against itself: nothing significant, no verdict beyond that.
    let same = run(iosleuth().args(["diff", NOMERGES0, t0, "--", NOMERGES0, t0]));
    assert!(
        same.contains("verdict: no difference that matters"),
        "{same}"
    );
    // Three paths without `--` is a usage error.
    let o = iosleuth()
        .args(["diff", NOMERGES0, NOMERGES2, t0])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

fn finding<'a>(f: &'a [serde_json::Value], id: &str) -> Option<&'a serde_json::Value> {
    f.iter().find(|x| x["id"] == id)
}

/// The six rules below were recorded by scripts/make-fixtures-diagnose on
/// a loop device over a file, ext4 on it.
#[test]
fn wbt_throttling_with_a_target_below_read_latency_not_with_the_default() {
    // wbt_lat_usec 10 while reads take ~50 µs: wbt steps down to depth 1.
    let f = findings("tests/fixtures/wbt-target10us.cap");
    let w = finding(&f, "wbt_throttling").unwrap_or_else(|| panic!("{f:#?}"));
    let e = &w["evidence"];
    assert_eq!(e["device"], "7,0");
    assert_eq!(e["highest_step"], 4);
    assert_eq!(e["smallest_write_depth"], 1);
    assert_eq!(e["wbt_lat_usec"], "10");
    assert_eq!(e["windows_over_target"], 15);
    assert!(e["max_read_latency_us"].as_u64().unwrap() > 10, "{e}");
    assert!(e["stepped_down_ms"].as_f64().unwrap() > 1000.0, "{e}");
    assert_eq!(w["severity"], "critical");
    assert!(w["workaround"]
        .as_str()
        .unwrap()
        .starts_with("if the reads' latency is normal for this device, the target is too low: echo 0 > /sys/block/loop0/queue/wbt_lat_usec"));
    // The same workload with the default target: wbt is active (it steps)
    // but never below its default depth.
    let d = "tests/fixtures/wbt-default.cap";
    assert!(finding(&findings(d), "wbt_throttling").is_none());
    assert_explains(
        d,
        "wbt_throttling",
        "7,0: wbt stepped down 0 ms (0% of the trace; highest step 0",
    );
}

#[test]
fn cgroup_io_throttle_under_a_read_limit_not_without_it() {
    let f = findings("tests/fixtures/cgroup-throttled.cap");
    let c = finding(&f, "cgroup_io_throttle").unwrap_or_else(|| panic!("{f:#?}"));
    let e = &c["evidence"];
    // 8 reads of 256 KiB under 4 MiB/s: the first 3 pass, 5 are held and
    // released by kthrotld at about the limit.
    assert_eq!(e["all_bios"], 8);
    assert_eq!(e["throttled_bios"], 5);
    assert_eq!(e["throttled_bytes"], 5 * 256 * 1024);
    let rate = e["released_mib_per_s"].as_f64().unwrap();
    assert!((2.5..=4.0).contains(&rate), "{rate}");
    assert_eq!(e["limits"][0]["line"], "7:0 4194304");
    assert!(c["workaround"]
        .as_str()
        .unwrap()
        .contains("blkio.throttle.read_bps_device"));
    let none = "tests/fixtures/cgroup-none.cap";
    assert!(finding(&findings(none), "cgroup_io_throttle").is_none());
    assert!(explain(none, "cgroup_io_throttle").contains("blk-throttle's dispatch work never ran"));
    // Without the workqueue set it says what is missing.
    assert!(explain(NOMERGES2, "cgroup_io_throttle").contains("record the `workqueue` event set"));
}

#[test]
fn queue_saturation_at_depth_32_not_one_at_a_time() {
    let f = findings("tests/fixtures/queue-saturated.cap");
    let q = finding(&f, "queue_saturation").unwrap_or_else(|| panic!("{f:#?}"));
    let e = &q["evidence"];
    assert_eq!(e["nr_requests"], "4");
    // Critical: the 4 requests were all taken, bios waited for a tag.
    assert_eq!(q["severity"], "critical");
    assert!(
        e["waiting_for_a_tag_percent"].as_f64().unwrap() > 10.0,
        "{e}"
    );
    assert!(e["util_percent"].as_f64().unwrap() > 90.0, "{e}");
    assert!(e["waiting_percent"].as_f64().unwrap() > 70.0, "{e}");
    assert!(e["aqu_sz"].as_f64().unwrap() > 3.0, "{e}");
    // Service time is iostat's: busy time per request.
    let svc = e["util_percent"].as_f64().unwrap() / 100.0 / e["iops"].as_f64().unwrap() * 1e6;
    assert!((svc - e["service_us"].as_f64().unwrap()).abs() < 0.01);
    // The same lowered queue, one read at a time: busy, not queued.
    let one = "tests/fixtures/queue-depth1.cap";
    assert!(finding(&findings(one), "queue_saturation").is_none());
    let why = explain(one, "queue_saturation");
    assert!(why.contains("7,0: %util 8"), "{why}");
    assert!(why.contains("aqu-sz 0.9"), "{why}");
}

#[test]
fn scheduler_overhead_under_bfq_not_under_mq_deadline() {
    let f = findings("tests/fixtures/sched-bfq.cap");
    let s = finding(&f, "scheduler_overhead").unwrap_or_else(|| panic!("{f:#?}"));
    let e = &s["evidence"];
    assert_eq!(e["scheduler"], "bfq");
    assert!(e["percent_in_scheduler"].as_f64().unwrap() > 25.0, "{e}");
    assert!(e["i2d_max_ms"].as_f64().unwrap() > 10.0, "{e}");
    assert!(s["workaround"]
        .as_str()
        .unwrap()
        .contains("echo 0 > /sys/block/loop0/queue/iosched/slice_idle"));
    let dl = "tests/fixtures/sched-mq-deadline.cap";
    assert!(finding(&findings(dl), "scheduler_overhead").is_none());
    assert_explains(
        dl,
        "scheduler_overhead",
        "7,0: 1.5% of the bios' queue-to-completion time (btt Q2C) was spent in the scheduler (mq-deadline)",
    );
    // btt's Device Overhead, G2I+I2D of Q2C: the 203 requests healthy-run1
    // inserted averaged 1.55x the life of its 1213 bios, which is 26 % of
    // their total time (and no I/O scheduler held them).
    assert_explains(
        "tests/fixtures/healthy-run1.cap",
        "scheduler_overhead",
        "7,0: 26% of the bios' queue-to-completion time (btt Q2C) was between request allocation and issue, but there is no I/O scheduler (the driver was busy)",
    );
}

#[test]
fn readahead_small_with_read_ahead_kb_0_not_for_random_reads_or_the_default() {
    let f = findings("tests/fixtures/readahead-0.cap");
    let r = finding(&f, "readahead_small").unwrap_or_else(|| panic!("{f:#?}"));
    let e = &r["evidence"];
    assert_eq!(e["sync_misses"], 512);
    assert_eq!(e["sequential_sync_misses"], 511);
    assert_eq!(e["read_ahead_kb"], "0");
    assert_eq!(e["read_request_kb_avg"], 4.0);
    assert_eq!(r["severity"], "critical");
    // Sequential 4 KiB readahead bios, one page each, are not a merging
    // problem; below the loop device, its worker's reads come one at a time.
    assert!(finding(&f, "merges_disabled").is_none(), "{f:#?}");
    let why = explain("tests/fixtures/readahead-0.cap", "merges_disabled");
    assert!(why.contains("7,0: 512 of 512 bios are the kernel's readahead (RA), 4 KiB on average: with the readahead window at 0 KiB (511 of 511 windows, read_ahead_kb 0) each reads the one page that missed: readahead made them small, not missing merges (see readahead_small)"), "{why}");
    assert!(why.contains("254,0: 100% of bios are sequential but only 0% were queued before the previous one completed: one bio at a time, nothing to merge"), "{why}");
    let random = "tests/fixtures/readahead-0-random.cap";
    assert!(finding(&findings(random), "readahead_small").is_none());
    assert!(explain(random, "readahead_small").contains("readahead would not help random reads"));
    let default = "tests/fixtures/readahead-128.cap";
    assert!(findings(default).is_empty());
    assert_explains(
        default,
        "readahead_small",
        "7,0: 22 readaheads (1 synchronous page-cache miss, 21 ran ahead of the reader): too few to judge",
    );
}

/// A fixture `scripts/make-fixtures-readahead` records (root). The tests
/// that read one are ignored until it is committed, saying how to record
/// it; `scripts/test` (CI) runs ignored tests, where a missing one fails.
fn recorded(path: &'static str) -> &'static str {
    assert!(
        std::path::Path::new(path).exists(),
        "test cannot run: {path} is missing: record it with `sudo scripts/make-fixtures-readahead` and commit it"
    );
    path
}

/// read_ahead_kb 16 (a 4-page limit): `dd bs=4k` of 8 MiB gets 16 KiB
/// windows, one 16 KiB readahead bio each, which merging could not join;
/// `dd bs=1M` under the same setting gets windows as large as its reads.
#[test]
fn readahead_small_at_a_16_kib_window_not_merges_disabled_nor_for_1_mib_reads() {
    let cap = recorded("tests/fixtures/readahead-16.cap");
    let f = findings(cap);
    assert_eq!(f[0]["id"], "readahead_small", "{f:#?}");
    assert_eq!(f[0]["severity"], "critical");
    let e = &f[0]["evidence"];
    assert_eq!(e["read_ahead_kb"], "16");
    assert_eq!(e["window_kib"], 16, "{e}");
    assert_eq!(e["reader"]["comm"], "dd", "{e}");
    // 8 MiB in 16 KiB windows: 512 readaheads, all but the first windows
    // at 16 KiB, and requests of about that size.
    let readaheads = e["readaheads"].as_u64().unwrap();
    assert!((500..=520).contains(&readaheads), "{e}");
    assert!(e["windows_kib"]["16"].as_u64().unwrap() >= 500, "{e}");
    let file = e["file_kib_read"].as_u64().unwrap();
    assert!((8 * 1024 - 32..=8 * 1024).contains(&file), "{e}");
    let rareq = e["read_request_kb_avg"].as_f64().unwrap();
    assert!((12.0..=16.5).contains(&rareq), "{e}");
    assert!(
        f[0]["title"]
            .as_str()
            .unwrap()
            .ends_with("read 16 KiB ahead at a time (read_ahead_kb 16)"),
        "{f:#?}"
    );
    let w = f[0]["workaround"].as_str().unwrap();
    assert!(w.starts_with("echo 128 > /sys/block/loop"), "{w}");
    assert!(w.contains("doubles its file's limit (to 32 KiB)"), "{w}");
    // The small sequential bios are readahead's: no merges_disabled about
    // the device.
    let dev = e["device"].as_str().unwrap();
    assert!(
        f.iter()
            .all(|x| x["id"] != "merges_disabled" || x["evidence"]["device"] != dev),
        "{f:#?}"
    );
    let why = run(iosleuth()
        .args(["report", cap, "--device", dev])
        .args(["--explain", "merges_disabled"]));
    assert!(
        why.contains("bios are the kernel's readahead (RA), 16 KiB on average, the size of the readahead windows (16 KiB: "),
        "{why}"
    );

    let big = recorded("tests/fixtures/readahead-16-bs1m.cap");
    assert!(finding(&findings(big), "readahead_small").is_none());
    assert_explains(
        big,
        "readahead_small",
        "readahead windows were held at a limit below the kernel's default 128 KiB; the windows grew to 1024 KiB",
    );
}

#[test]
fn sync_write_amplification_for_4k_fsyncs_not_for_one_bulk_fsync() {
    let f = findings("tests/fixtures/fsync-4k.cap");
    let s = finding(&f, "sync_write_amplification").unwrap_or_else(|| panic!("{f:#?}"));
    let e = &s["evidence"];
    assert_eq!(e["syncs"], 100);
    assert_eq!(e["data_bytes"], 100 * 4096);
    let amp = e["amplification"].as_f64().unwrap();
    assert!(amp > 4.0, "{e}");
    let per = (e["data_bytes"].as_f64().unwrap() + e["journal_bytes"].as_f64().unwrap()) / 100.0;
    // Evidence keeps four significant digits.
    assert!((per - e["bytes_per_sync"].as_f64().unwrap()).abs() <= per * 5e-4);
    // Each fsync flushed the cache once (the commit's preflush/FUA).
    assert!(
        (e["flushes_per_sync"].as_f64().unwrap() - 1.0).abs() < 0.1,
        "{e}"
    );
    let bulk = "tests/fixtures/fsync-bulk.cap";
    assert!(findings(bulk).is_empty());
    assert!(explain(bulk, "sync_write_amplification").contains("1 fsync/fdatasync calls"));
}

#[test]
fn every_rule_of_the_catalog_exists() {
    let all = explain(NOMERGES2, "all");
    for id in [
        "merges_disabled",
        "request_splitting",
        "journal_space_stall",
        "device_latency_spike",
        "rt_starvation",
        "dirty_throttling",
        "wbt_throttling",
        "cgroup_io_throttle",
        "queue_saturation",
        "scheduler_overhead",
        "readahead_small",
        "sync_write_amplification",
    ] {
        assert!(all.contains(&format!("{id}:")), "{id} missing from {all}");
    }
}

#[test]
fn diff_of_two_identical_healthy_runs_names_no_change() {
    // scripts/make-fixtures-healthy: the same 200 appending writes + fsync
    // twice, a pair whose fsync maxima differ by milliseconds.
    let (r1, r2) = (
        "tests/fixtures/healthy-run1.cap",
        "tests/fixtures/healthy-run2.cap",
    );
    let j: serde_json::Value =
        serde_json::from_str(&run(iosleuth().args(["diff", "--format", "json", r1, r2]))).unwrap();
    let figures = j["figures"].as_array().unwrap();
    let max = figures
        .iter()
        .find(|f| f["name"] == "probe fsync max ms")
        .unwrap_or_else(|| panic!("{j:#}"));
    let (a, b) = (
        max["baseline"].as_f64().unwrap(),
        max["candidate"].as_f64().unwrap(),
    );
    assert!(
        (a - b).abs() >= 1.0 && (a - b).abs() >= 0.1 * a.min(b),
        "the fixture's maxima differ as identical runs' do: {a} {b}"
    );
    let named: Vec<&serde_json::Value> = figures
        .iter()
        .filter(|f| f["significant"] == true)
        .map(|f| &f["name"])
        .collect();
    assert!(named.is_empty(), "{named:?}");
    assert_eq!(j["settings"].as_array().unwrap().len(), 0, "{j:#}");
    assert!(
        j["verdict"]
            .as_str()
            .unwrap()
            .starts_with("no difference that matters"),
        "{j:#}"
    );
}

#[test]
fn diff_says_when_nothing_explains_a_change() {
    // A time that moved 15x with no finding or setting to explain it:
    // loop0's average Q2C (the VM's own disk, 254,0, moved as much by
    // other load).
    let out = run(iosleuth().args([
        "diff",
        "tests/fixtures/cgroup-none.cap",
        "tests/fixtures/fsync-bulk.cap",
    ]));
    assert!(
        out.contains("verdict: biggest change: 7,0 Q2C avg ms 0.292 -> 4.604 (15.78x), which no finding or setting explains: with one run a side a time may move by run-to-run noise alone"),
        "{out}"
    );
    // A size is not a time: named as unexplained, without the noise remark.
    let out = run(iosleuth().args([
        "diff",
        "tests/fixtures/healthy-run1.cap",
        "tests/fixtures/fsync-bulk.cap",
    ]));
    let verdict = out.lines().find(|l| l.starts_with("verdict:")).unwrap();
    assert!(
        verdict.ends_with("which no finding or setting explains"),
        "{verdict}"
    );
}

#[test]
fn diff_says_where_the_added_time_went_when_no_rule_explains_it() {
    // The fsync probe alone, then sharing both CPUs with two ordinary CPU
    // burners (scripts/make-fixtures-diff): the loop device's worker waits
    // for a CPU, which the probe sees as time at the device. No rule
    // claims it; `unexplained` is no cause for the verdict.
    let (alone, hogs) = (
        "tests/fixtures/cpu-contention-alone.cap",
        "tests/fixtures/cpu-contention-hogs.cap",
    );
    let j: serde_json::Value = serde_json::from_str(&run(
        iosleuth().args(["diff", "--format", "json", alone, hogs])
    ))
    .unwrap();
    let t = &j["time_shift"];
    assert_eq!(t["kinds"], serde_json::json!(["probe fsync"]), "{t:#}");
    assert_eq!(t["baseline_ms_per_op"], 0.039);
    assert_eq!(t["candidate_ms_per_op"], 0.93);
    assert_eq!(t["parts"][0]["part"], "device", "{t:#}");
    assert_eq!(t["parts"][0]["percent_of_added"], 84.6);
    assert_eq!(t["parts"][1]["part"], "journal");
    let verdict = j["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("biggest change: 7,0 D2C p99 ms 0.041 -> 3.924 (94.91x), which no finding or setting explains")
            && verdict.ends_with("; the 0.891 ms per operation the candidate added was spent mostly at the device (+0.754 ms, 85%)"),
        "{verdict}"
    );
    let text = run(iosleuth().args(["diff", alone, hogs]));
    assert!(
        text.contains("where the time per operation went (probe fsync):"),
        "{text}"
    );
    assert!(
        text.lines().any(
            |l| l.split_whitespace().collect::<Vec<_>>() == ["device", "0.030", "0.784", "85%"]
        ),
        "{text}"
    );
}

//! A light capture recorded on this VM (`record --light --slow 0` around
//! dd reads and writes on a loop device): report gives the kernel's counts
//! and the slow requests, diff compares two, and damaged files are named.

use crate::common;

use common::*;
use iosleuth::testing::{LightDoc, SlowRequest, SLOW_HEADER, SLOW_RECORD};

const CAP: &str = "tests/fixtures/light-dd.cap";

fn doc() -> LightDoc {
    serde_json::from_str(&std::fs::read_to_string(format!("{CAP}/light.json")).unwrap()).unwrap()
}

fn device<'a>(rep: &'a serde_json::Value, dev: &str) -> &'a serde_json::Value {
    rep["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == dev)
        .unwrap()
}

#[test]
fn report_gives_the_kernel_counts_and_the_slow_requests() {
    let rep = json_report(&[CAP], &[]);
    let d = doc();
    let loop0 = d.devices.iter().find(|x| x.dev == "7,0").unwrap();
    assert_eq!(loop0.ops["read"].ios, 500);
    assert_eq!(loop0.ops["write"].ios, 100);
    let dev = device(&rep, "7,0");
    assert_eq!(dev["completed"]["read"], 500);
    assert_eq!(dev["completed"]["write"], 100);
    assert_eq!(dev["bytes_completed"]["read"], 500 * 4096);
    assert_eq!(dev["bytes_completed"]["write"], 100 * 16384);
    assert_eq!(dev["d2c"]["count"], 600);
    // The mean D2C is exact (the kernel sums the nanoseconds).
    let sum: u64 = loop0.ops.values().map(|o| o.device.sum_ns).sum();
    let avg = dev["d2c"]["avg"].as_f64().unwrap();
    assert!((avg - sum as f64 / 600.0).abs() < 1e-6, "{avg}");
    // Percentiles from the histograms: p50 within the 1/32 bucket of the
    // slow requests' own median (all were sent: --slow 0).
    let bytes = std::fs::read(format!("{CAP}/slow.bin")).unwrap();
    let slow: Vec<SlowRequest> = bytes[SLOW_HEADER..]
        .chunks(SLOW_RECORD)
        .filter_map(SlowRequest::parse)
        .collect();
    let mut d2c: Vec<u64> = slow
        .iter()
        .filter(|r| r.dev.to_string() == "7,0")
        .map(|r| r.device_ns())
        .collect();
    d2c.sort();
    assert_eq!(d2c.len(), 600);
    let median = d2c[299] as f64;
    let p50 = dev["d2c"]["p50"].as_f64().unwrap();
    assert!(
        (p50 - median).abs() <= median / 32.0 + 1.0,
        "{p50} vs {median}"
    );
    // Every slow request is queued, issued and completed.
    assert_eq!(rep["events"].as_u64().unwrap(), 3 * slow.len() as u64);
    assert_eq!(rep["light"]["attach"], "tp_btf");
    assert!(rep["all_devices"]["btt"]["d2c"]["n"].as_u64().unwrap_or(0) == 0);
    let text = outcome(&["report", CAP]);
    assert_eq!(text.code, 0);
    assert!(text.stdout.contains("read device (D2C)"), "{}", text.stdout);
    assert!(text.stderr.contains("need the full recorder"));
}

#[test]
fn diff_of_light_captures() {
    let out = outcome(&["diff", CAP, CAP]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("dev.7,0.requests "), "{}", out.stdout);
}

#[test]
fn damaged_light_captures_are_named() {
    let dir = tempdir();
    let cap = dir.path().join("cap");
    copy_dir(std::path::Path::new(CAP), &cap);
    let slow = cap.join("slow.bin");
    let bytes = std::fs::read(&slow).unwrap();
    // Cut inside a record: analyzed, with a warning.
    std::fs::write(&slow, &bytes[..bytes.len() - 40]).unwrap();
    let out = outcome(&["report", cap.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("cut short"), "{}", out.stderr);
    // Not slow requests at all.
    std::fs::write(&slow, b"garbage that is no header").unwrap();
    let out = outcome(&["report", cap.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("slow.bin") && out.stderr.contains("IOSLSLOW"),
        "{}",
        out.stderr
    );
    std::fs::write(&slow, &bytes).unwrap();
    // Histograms that do not parse: exit 2, the file named.
    std::fs::write(cap.join("light.json"), b"{\"attach\": 3").unwrap();
    let out = outcome(&["report", cap.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("light.json"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"));
}

/// The records of a light capture's flight recorder (`context.bin`).
fn context_records(cap: &str) -> Vec<Vec<u8>> {
    let b = std::fs::read(format!("{cap}/context.bin")).unwrap();
    let mut out = Vec::new();
    let mut at = iosleuth::testing::CONTEXT_HEADER;
    while at < b.len() {
        let len = u16::from_le_bytes([b[at + 2], b[at + 3]]) as usize;
        out.push(b[at..at + len].to_vec());
        at += len;
    }
    out
}

fn top_finding(rep: &serde_json::Value) -> (&str, &str) {
    let f = &rep["findings"][0];
    (f["id"].as_str().unwrap(), f["severity"].as_str().unwrap())
}

/// Case 1 recorded with --light by the lab: the kernel's counters alone
/// (no bios) name merging off, and the good run stays silent.
#[test]
fn light_merges_captures_name_nomerges() {
    let bad = json_report(&["tests/fixtures/light-merges-bad.cap"], &[]);
    assert_eq!(top_finding(&bad), ("merges_disabled", "critical"));
    let ev = &bad["findings"][0]["evidence"];
    assert_eq!(ev["nomerges"], "2");
    assert_eq!(ev["merges"], 0);
    assert_eq!(ev["avg_request_sectors"], 8);
    // Every request of the 16 MiB read began where the previous ended.
    assert_eq!(ev["requests"], 4096);
    assert_eq!(ev["sequential_requests"], 4096);
    let good = json_report(&["tests/fixtures/light-merges-good.cap"], &[]);
    assert_eq!(good["findings"].as_array().unwrap().len(), 0);
    let loop0 = device(&good, "7,0");
    assert_eq!(loop0["completed"]["read"], 128);
    let diff = outcome(&[
        "diff",
        "tests/fixtures/light-merges-good.cap",
        "tests/fixtures/light-merges-bad.cap",
    ]);
    assert!(
        diff.stdout.contains("nomerges: 0 -> 2") && diff.stdout.contains("7,0 requests"),
        "{}",
        diff.stdout
    );
}

/// Case 3, shorter, recorded with --light: the flight recorder's long
/// runqueue waits name the real-time task, and the journal's events are
/// decoded from their raw records by the capture's format files.
#[test]
fn light_rt_capture_names_the_real_time_task_and_keeps_the_journal() {
    let cap = "tests/fixtures/light-rt.cap";
    let rep = json_report(&[cap], &[]);
    assert_eq!(top_finding(&rep), ("rt_starvation", "critical"));
    let waits = rep["sched"]["long_waits"].as_array().unwrap();
    let w = &waits[0];
    assert!(w["wait_ns"].as_u64().unwrap() >= 140_000_000, "{w}");
    assert_eq!(w["held_by"][0]["policy"], "RT");
    assert_eq!(w["held_by"][0]["prio"], 49);
    // As many waits as the kernel counted, every one at least 5 ms.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{cap}/light.json")).unwrap())
            .unwrap();
    let counted: u64 = doc["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["long_waits"].as_u64().unwrap())
        .sum();
    assert_eq!(waits.len() as u64, counted);
    assert!(waits
        .iter()
        .all(|w| w["wait_ns"].as_u64().unwrap() >= 5_000_000));
    // jbd2_end_commit is the 5th context event: one commit each.
    let ends = context_records(cap)
        .iter()
        .filter(|r| r[0] == 2 && u16::from_le_bytes([r[20], r[21]]) == 4)
        .count() as u64;
    assert!(ends >= 300, "{ends} commits for 400 fsyncs");
    assert_eq!(rep["fs"]["journals"]["7,0"]["commits"], ends);
    assert!(rep["sched"]["switches"].as_u64().unwrap() > 0);
    // The text says what the flight recorder kept: every event record,
    // every wait; a light capture's gaps between events mean nothing.
    let events = context_records(cap).iter().filter(|r| r[0] == 2).count();
    let text = outcome(&["report", cap]).stdout;
    assert!(
        text.contains(&format!(
            "flight recorder: {counted} runqueue waits of 5 ms or more (0 lost), {events} events kept whole (journal, dirty limit, wbt; 0 lost)"
        )),
        "{text}"
    );
    assert!(!text.contains("Gaps: the longest stretches"), "{text}");
    // No device spike: the slow requests waited for a starved CPU.
    assert!(rep["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] != "device_latency_spike"));
}

/// Case 4 recorded with --light by the lab: the stalled journal writes
/// are the slowest requests the kernel sent, at the device.
#[test]
fn light_slowdev_capture_names_the_stalled_requests() {
    let cap = "tests/fixtures/light-slowdev.cap";
    let rep = json_report(&[cap], &[]);
    assert_eq!(top_finding(&rep), ("device_latency_spike", "critical"));
    let bytes = std::fs::read(format!("{cap}/slow.bin")).unwrap();
    let longest = bytes[SLOW_HEADER..]
        .chunks(SLOW_RECORD)
        .filter_map(SlowRequest::parse)
        .max_by_key(|r| r.total_ns())
        .unwrap();
    let ev = &rep["findings"][0]["evidence"];
    assert_eq!(ev["latency_ns"], longest.total_ns());
    assert!(longest.total_ns() >= 150_000_000);
    assert_eq!(ev["request"]["comm"], "jbd2/loop0-8");
    assert!(ev["spikes"].as_u64().unwrap() >= 2);
}

/// Exactly the rules whose evidence only the full recorder writes say
/// what a light capture lacks (and those whose evidence this capture was
/// made before light counted: blk-throttle's held bios, iostat's columns,
/// the dirty limit's pauses, wbt's steps); the others judge it.
#[test]
fn explain_all_says_which_rules_a_light_capture_cannot_judge() {
    let out = outcome(&["report", "--explain", "all", "tests/fixtures/light-rt.cap"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut lacking: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains(": a light capture lacks "))
        .filter_map(|l| l.split(':').next())
        .collect();
    lacking.sort_unstable();
    assert_eq!(
        lacking,
        [
            "cgroup_io_throttle",
            "cpu_contention",
            "dirty_throttling",
            "io_uring_punted",
            "page_cache_thrashing",
            "queue_saturation",
            "readahead_small",
            "scheduler_overhead",
            "sync_write_amplification",
            "wbt_throttling",
        ],
        "{}",
        out.stdout
    );
}

/// A rule a light capture cannot judge says what it lacks.
#[test]
fn explain_says_what_a_light_capture_lacks() {
    let out = outcome(&[
        "report",
        "--explain",
        "sync_write_amplification",
        "tests/fixtures/light-rt.cap",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(
            "a light capture lacks the system calls (fsync, write: hooks on every system call's entry and exit, whose empty floor alone cost 9–15 % of a system-call-bound load"
        ),
        "{}",
        out.stdout
    );
}

/// A damaged flight recorder: cut short, analyzed with a warning; not one
/// at all, exit 2 naming the file.
#[test]
fn damaged_flight_recorders_are_named() {
    let dir = tempdir();
    let cap = dir.path().join("cap");
    copy_dir(std::path::Path::new("tests/fixtures/light-rt.cap"), &cap);
    let ctx = cap.join("context.bin");
    let bytes = std::fs::read(&ctx).unwrap();
    std::fs::write(&ctx, &bytes[..bytes.len() - 50]).unwrap();
    let out = outcome(&["report", cap.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("cut short or damaged"),
        "{}",
        out.stderr
    );
    std::fs::write(&ctx, b"not a flight recorder").unwrap();
    let out = outcome(&["report", cap.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("context.bin") && out.stderr.contains("IOSLCTX1"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 40, ..Default::default() })]

    /// Random damage to a light capture's kernel records: a report (exit
    /// 0, with warnings) or exit 2 naming a file, never a panic.
    #[test]
    fn damaged_light_records_never_panic(
        which in 0..2usize,
        cut in proptest::prelude::any::<usize>(),
        flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 1u8..=255), 0..16),
    ) {
        let dir = tempdir();
        let cap = dir.path().join("cap");
        copy_dir(std::path::Path::new("tests/fixtures/light-rt.cap"), &cap);
        let file = cap.join(["context.bin", "slow.bin"][which]);
        let mut b = std::fs::read(&file).unwrap();
        for &(at, x) in &flips {
            let i = at % b.len();
            b[i] ^= x;
        }
        b.truncate(cut % (b.len() + 1));
        std::fs::write(&file, &b).unwrap();
        let out = outcome(&["report", "--format", "json", cap.to_str().unwrap()]);
        proptest::prop_assert!(out.code == 0 || out.code == 2, "{}", out.stderr);
        proptest::prop_assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
        if out.code == 2 {
            proptest::prop_assert!(out.stderr.contains(".bin"), "{}", out.stderr);
        }
    }
}

/// The cgroup scenario recorded with --light by the lab: the bios the
/// programs saw blk-throttle's dispatch work queue name the limit, whose
/// pace the device kept (600 reads under 200 read IOPS), and the run
/// without a limit stays silent.
#[test]
fn light_cgroup_capture_names_the_limit_that_held_bios() {
    let bad = json_report(&["tests/fixtures/light-cgroup-throttled.cap"], &[]);
    assert_eq!(top_finding(&bad), ("cgroup_io_throttle", "critical"));
    let ev = &bad["findings"][0]["evidence"];
    assert_eq!(ev["device"], "7,0");
    assert_eq!(ev["throttled_bios"], 29);
    assert_eq!(ev["throttled_bytes"], 29 * 4096);
    assert_eq!(ev["all_bios"], 600);
    assert_eq!(ev["pace"]["limit"], "riops");
    assert_eq!(ev["pace"]["limit_per_s"], 200.0);
    let pct = ev["pace"]["percent_of_limit"].as_f64().unwrap();
    assert!((81.0..83.0).contains(&pct), "{pct}");
    assert_eq!(ev["limits"][0]["file"], "blkio.throttle.read_iops_device");
    assert!(bad["findings"][0]["workaround"]
        .as_str()
        .unwrap()
        .contains("blkio.throttle.read_iops_device"));
    let good = json_report(&["tests/fixtures/light-cgroup-none.cap"], &[]);
    assert!(
        good["findings"].as_array().unwrap().is_empty(),
        "{}",
        good["findings"]
    );
    assert_eq!(device(&good, "7,0")["completed"]["read"], 600);
}

/// The queue scenario recorded with --light by the lab: iostat's columns
/// from the kernel's diskstats at the capture's ends (equal to the
/// difference of the two readings), 32 reads in flight on 4 tags named as
/// a saturated queue, one read at a time silent.
#[test]
fn light_queue_capture_judges_the_queue_from_diskstats() {
    let cap = "tests/fixtures/light-queue-saturated.cap";
    let bad = json_report(&[cap], &[]);
    assert_eq!(top_finding(&bad), ("queue_saturation", "warning"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{cap}/light.json")).unwrap())
            .unwrap();
    let stats = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dev"] == "7,0")
        .unwrap()["diskstats"]
        .clone();
    let f = |i: usize| stats["fields"][i].as_f64().unwrap();
    let secs = stats["seconds"].as_f64().unwrap();
    let ev = &bad["findings"][0]["evidence"];
    // iostat -x over the capture: %util = io_ticks / span, aqu-sz =
    // time_in_queue / span.
    // (the JSON rounds to four significant digits)
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-3 * b.abs().max(1.0);
    assert!(
        close(ev["util_percent"].as_f64().unwrap(), f(9) / 10.0 / secs),
        "{ev}"
    );
    assert!(
        close(ev["aqu_sz"].as_f64().unwrap(), f(10) / 1000.0 / secs),
        "{ev}"
    );
    assert!(close(ev["iops"].as_f64().unwrap(), f(0) / secs), "{ev}");
    assert!(ev["queued_while_busy"].as_f64().unwrap() >= 3.0, "{ev}");
    assert!(ev["waiting_percent"].as_f64().unwrap() >= 60.0, "{ev}");
    assert!(ev["waiting_for_a_tag_percent"].is_null(), "{ev}");
    assert_eq!(ev["nr_requests"], "4");
    // The same figures in the device's iostat columns.
    let loop0 = device(&bad, "7,0");
    assert!(close(
        loop0["iostat_total"]["%util"].as_f64().unwrap(),
        f(9) / 10.0 / secs
    ));
    let good = json_report(&["tests/fixtures/light-queue-depth1.cap"], &[]);
    assert!(
        good["findings"].as_array().unwrap().is_empty(),
        "{}",
        good["findings"]
    );
}

/// The dirty scenario recorded with --light by the lab: the flight
/// recorder keeps each balance_dirty_pages pause whole, so the rule judges
/// the light capture as the full one: 160 MiB of buffered writes under
/// vm.dirty_bytes 4 MiB paused, under the machine's own limit not.
#[test]
fn light_dirty_capture_names_the_dirty_limit_from_its_kept_pauses() {
    let bad = findings("tests/fixtures/light-dirty-throttled.cap");
    let f = bad
        .iter()
        .find(|f| f["id"] == "dirty_throttling")
        .unwrap_or_else(|| panic!("no dirty_throttling: {bad:?}"));
    let ev = &f["evidence"];
    assert!(ev["pauses"].as_u64().unwrap() > 0, "{ev}");
    assert!(ev["pause_ms_total"].as_u64().unwrap() >= 20, "{ev}");
    assert_eq!(ev["vm_dirty_bytes"], "4194304");
    assert!(ev["by_process"]
        .as_object()
        .unwrap()
        .keys()
        .any(|k| k.starts_with("dd")));
    let judged = |r: &serde_json::Value, id: &str| {
        r["rules"]["judged"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j == id)
    };
    let good = json_report(&["tests/fixtures/light-dirty-none.cap"], &[]);
    assert!(judged(&good, "dirty_throttling"), "{}", good["rules"]);
    let silent = good["findings"].as_array().unwrap();
    assert!(
        silent.iter().all(|f| f["id"] != "dirty_throttling"),
        "{silent:?}"
    );
    // A light capture made before the flight recorder kept the pauses
    // cannot judge it, and says so.
    let old = json_report(&["tests/fixtures/light-cgroup-none.cap"], &[]);
    assert!(!judged(&old, "dirty_throttling"));
    let lacks = old["rules"]["not_judged"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "dirty_throttling")
        .unwrap()["lacks"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        lacks.contains("a light capture lacks the writers' pauses in balance_dirty_pages"),
        "{lacks}"
    );
}

/// The wbt scenario recorded with --light: wbt's steps kept whole, so the
/// rule names the write depth wbt held the device to under a 1 µs target,
/// and stays silent with the default target; the bios' waits, which only
/// the full recorder sees, are null, not 0.
#[test]
fn light_wbt_capture_names_writeback_throttling_from_its_kept_steps() {
    let bad = json_report(&["tests/fixtures/light-wbt-throttled.cap"], &[]);
    assert_eq!(top_finding(&bad), ("wbt_throttling", "critical"));
    let ev = &bad["findings"][0]["evidence"];
    assert_eq!(ev["device"], "7,0");
    assert!(ev["highest_step"].as_i64().unwrap() > 0, "{ev}");
    assert_eq!(ev["smallest_write_depth"], 1);
    assert_eq!(ev["wbt_lat_usec"], "1");
    assert!(ev["write_bios"].is_null(), "{ev}");
    assert!(ev["write_wait_ms"].is_null(), "{ev}");
    let good = findings("tests/fixtures/light-wbt-default.cap");
    assert!(good.iter().all(|f| f["id"] != "wbt_throttling"), "{good:?}");
}

/// On a machine with more CPUs than the kernel adds up for the queue
/// depth at issue (bpf/light.h's MAX_DEPTH_CPUS), the report says the
/// depth undercounts; with this VM's 2 it says nothing.
#[test]
fn a_capture_from_more_cpus_than_the_depth_adds_up_says_so() {
    let said = |cap: &str| {
        outcome(&["report", cap])
            .stdout
            .lines()
            .any(|l| l.contains("the queue depth at issue adds up"))
    };
    let from = "tests/fixtures/light-queue-saturated.cap";
    assert!(!said(from));
    let dir = tempdir();
    let cap = dir.path().join("many-cpus.cap");
    copy_dir(std::path::Path::new(from), &cap);
    let path = cap.join("light.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cpu = doc["cpus"][0].clone();
    assert!(cpu.is_object(), "{}", doc["cpus"]);
    doc["cpus"] = serde_json::Value::Array(vec![cpu; 300]);
    std::fs::write(&path, doc.to_string()).unwrap();
    let text = outcome(&["report", cap.to_str().unwrap()]).stdout;
    assert!(
        text.contains(
            "the queue depth at issue adds up the requests in flight of the first 256 of 300 CPUs"
        ),
        "{text}"
    );
}

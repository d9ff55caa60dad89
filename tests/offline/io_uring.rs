//! io_uring requests as operations, on a capture of fio's io_uring engine
//! (3 jobs of 256 random 4 KiB O_DIRECT reads of a loop device: one
//! issuing inline at depth 8, one with every request forced to io-wq
//! (`force_async=1`), one through an SQPOLL thread; fio's JSON counted
//! 256 reads per job).

use crate::common;
use crate::perfetto_export::export as perfetto;

use common::*;

const CAP: &str = "tests/fixtures/uring-randread.cap";

#[test]
fn each_request_is_an_operation_tied_to_its_block_request() {
    let r = json_report(&[CAP], &[]);
    let u = &r["outliers"]["io_uring"];
    assert_eq!(u["recorded"], true);
    // fio: 3 jobs × 256 reads.
    assert_eq!(
        (u["submitted"].as_u64(), u["completed"].as_u64()),
        (Some(768), Some(768))
    );
    assert_eq!(u["sq_thread"], 256, "the SQPOLL job's");
    assert_eq!(u["punted"], 256, "force_async=1: every request of that job");
    assert_eq!(u["completed_unseen_submit"], 0);
    // io-wq workers do not say which request they run: with 4 punted at
    // once, their bios are tied to the oldest, and said to be ambiguous.
    assert!(u["ambiguous_ties"].as_u64().unwrap() > 0);
    let read = &u["by_op"]["read"];
    assert_eq!(read["count"], 768);
    let total = &r["outliers"]["totals"]["io_uring read"];
    assert_eq!(total["count"], 768);
    // Every read reached the device: one block read each.
    let loop0 = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == "7,0")
        .unwrap();
    assert_eq!(loop0["completed"]["read"], 768);
    // The slowest keep their block request, 4 KiB reads of the loop device.
    let slowest = r["outliers"]["by_kind"]["io_uring read"]
        .as_array()
        .unwrap();
    assert!(!slowest.is_empty());
    for o in slowest {
        let m = &o["main_request"];
        assert_eq!(
            (m["dev"].as_str(), m["bytes"].as_u64()),
            (Some("7,0"), Some(4096)),
            "{o}"
        );
        let summary = o["summary"].as_str().unwrap();
        // How it was issued, and by whom; the file where the kernel named
        // it (SQPOLL's registered files are not looked up).
        assert!(
            summary.contains("issued inline by fio (")
                || summary.contains("submitted by the SQPOLL thread iou-sqp-")
                || summary.contains(", punted to io-wq ("),
            "{summary}"
        );
        assert!(summary.contains(" io_uring read"), "{summary}");
        let parts: f64 = o["percent"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((parts - 100.0).abs() < 0.5, "{o}: parts add to {parts}");
    }
    // The first screen names them.
    let text = run(iosleuth().args(["report", CAP]));
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("io_uring read") && l.contains(" 768 ")),
        "{text}"
    );
}

/// In Perfetto each request is a slice on its thread, in lanes (they
/// overlap), with a flow to the block request it caused: 768 flows.
#[test]
fn perfetto_draws_each_request_with_a_flow_to_its_block_request() {
    let t = perfetto(CAP);
    t.assert_nested();
    let (slices, flows) = t.slices_and_flows("io_uring read");
    assert_eq!(slices, 768);
    assert_eq!(flows, 768, "one flow per request to its block request");
}

/// fio's io_uring engine reading a loop device on the lab's FUSE disk,
/// which held every 150th read 150 ms in the bad run (5 of 768) and none
/// in the good one (`lab run uring-slow-device`).
#[test]
fn a_device_stall_under_io_uring_names_the_request_and_its_block_request() {
    let bad = json_report(&["tests/fixtures/uring-slowdev-bad.cap"], &[]);
    let top = &bad["findings"][0];
    assert_eq!(
        (top["id"].as_str(), top["severity"].as_str()),
        (Some("device_latency_spike"), Some("critical")),
        "{top}"
    );
    assert!(
        top["title"]
            .as_str()
            .unwrap()
            .starts_with("io_uring read: 150."),
        "{top}"
    );
    let e = &top["evidence"];
    assert_eq!(e["operation"], "io_uring read");
    assert_eq!(e["spikes_in_top"], 5, "the 5 reads the disk held");
    assert_eq!(e["request"]["dev"], "7,0");
    assert_eq!(e["request"]["bytes"], 4096);
    let d2c = e["request"]["d2c_ns"].as_u64().unwrap();
    assert!((150_000_000..160_000_000).contains(&d2c), "{d2c}");
    // Not a thread's wait: no CPU-idle figure is claimed.
    assert!(e["cpu_idle_percent"].is_null(), "{e}");
    assert!(
        e["summary"]
            .as_str()
            .unwrap()
            .contains("issued inline by fio ("),
        "{e}"
    );
    let slowest = bad["outliers"]["by_kind"]["io_uring read"]
        .as_array()
        .unwrap();
    assert!(slowest
        .iter()
        .take(5)
        .all(|o| o["latency_ns"].as_u64() > Some(150_000_000)));
    let good = json_report(&["tests/fixtures/uring-slowdev-good.cap"], &[]);
    assert!(
        good["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["id"] != "device_latency_spike" && f["severity"] != "critical"),
        "{}",
        good["findings"]
    );
    for r in [&good, &bad] {
        assert_eq!(r["outliers"]["io_uring"]["completed"], 768);
        assert_eq!(r["outliers"]["totals"]["io_uring read"]["count"], 768);
    }
}

/// The thread filters hold for io_uring requests as for the other
/// operations; the SQPOLL thread, created without a fork event, counts as
/// the recorded command's by its name (`iou-sqp-PID`).
#[test]
fn io_uring_requests_follow_the_thread_filters_and_the_command() {
    let none = json_report(&[CAP], &["--pid", "1"]);
    assert!(none["outliers"]["totals"]["io_uring read"].is_null());
    // The 256 SQPOLL requests are the command's.
    let all = json_report(&[CAP], &[]);
    assert_eq!(all["outliers"]["totals"]["io_uring read"]["count"], 768);
    let sqp = json_report(&[CAP], &["--comm", "iou-sqp-6689"]);
    assert_eq!(sqp["outliers"]["totals"]["io_uring read"]["count"], 256);
}

/// fio's io_uring engine writing 16 MiB at random, 4 KiB buffered writes
/// at depth 16 to one file (`lab run uring-punted`): on XFS io_uring
/// issues them inline; on ext4 it punts every one to io-wq, where writes
/// to one file run one at a time.
#[test]
fn buffered_writes_punted_to_io_wq_are_named_with_their_wait() {
    let bad = json_report(&["tests/fixtures/uring-punted-bad.cap"], &[]);
    let u = &bad["outliers"]["io_uring"];
    // fio: 16 MiB of 4 KiB writes.
    assert_eq!(
        (u["submitted"].as_u64(), u["punted"].as_u64()),
        (Some(4096), Some(4096))
    );
    let top = &bad["findings"][0];
    assert_eq!(
        (top["id"].as_str(), top["severity"].as_str()),
        (Some("io_uring_punted"), Some("critical")),
        "{top}"
    );
    assert!(
        top["title"].as_str().unwrap().starts_with(
            "io_uring write: 4096 of 4096 requests punted to io-wq workers, 100% of their time"
        ),
        "{top}"
    );
    let e = &top["evidence"];
    assert!(e["wait_percent"].as_f64().unwrap() > 99.0, "{e}");
    // Each waited tens of µs where an inline write takes a few.
    assert!(e["p50_ns"].as_u64().unwrap() > 50_000, "{e}");
    let good = json_report(&["tests/fixtures/uring-punted-good.cap"], &[]);
    let g = &good["outliers"]["io_uring"];
    assert_eq!(g["submitted"], 4096);
    assert!(g["punted"].as_u64().unwrap() < 100, "{g}");
    assert!(
        good["outliers"]["io_uring"]["by_op"]["write"]["latency"]["p50"]
            .as_u64()
            .unwrap()
            < 10_000
    );
    assert!(
        good["findings"].as_array().unwrap().is_empty(),
        "{}",
        good["findings"]
    );
    assert_explains(
        "tests/fixtures/uring-punted-good.cap",
        "io_uring_punted",
        "36 of 4096 io_uring requests punted to io-wq (1%)",
    );
}

/// A completion that finds the completion queue full is traced as
/// `io_uring_cqe_overflow`, not `io_uring_complete`
/// (`scripts/make-fixtures-uring-overflow`: 2000 O_DIRECT reads 16 deep on
/// a ring whose queue holds 4 completions, reaped late): each overflow
/// ends its request, found by ring and `user_data`, so every request the
/// reader submitted and reaped completes, once.
#[test]
fn completions_that_overflow_the_queue_end_their_requests() {
    let cap = "tests/fixtures/uring-cq-overflow.cap";
    let out = std::fs::read_to_string(format!("{cap}/reader.out")).unwrap();
    let figure = |k: &str| -> u64 {
        let mut w = out.split_whitespace();
        w.position(|x| x == k).unwrap();
        w.next().unwrap().parse().unwrap()
    };
    let (submitted, reaped) = (figure("submitted"), figure("reaped"));
    assert_eq!((submitted, reaped), (2000, 2000));
    let r = json_report(&[cap], &[]);
    let u = &r["outliers"]["io_uring"];
    assert_eq!(u["submitted"].as_u64(), Some(submitted));
    assert_eq!(u["completed"].as_u64(), Some(reaped), "{u}");
    assert_eq!(u["completed_unseen_submit"], 0);
    let overflows = u["cq_overflows"].as_u64().unwrap();
    assert!(overflows > 500 && overflows < reaped, "{overflows}");
    assert_eq!(u["by_op"]["read"]["count"].as_u64(), Some(reaped));
    assert_eq!(
        r["outliers"]["totals"]["io_uring read"]["count"].as_u64(),
        Some(reaped)
    );
    // The device completed every read: one block request each.
    let reads: u64 = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["completed"]["read"].as_u64().unwrap())
        .sum();
    assert_eq!(reads, reaped);
}

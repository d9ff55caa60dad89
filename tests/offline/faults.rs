//! Reads through mapped files: page faults as operations, on captures of
//! fio's mmap engine (`lab run mmap-slow-device`: 512 random 4 KiB reads
//! of a 32 MiB file on ext4 on the lab's FUSE disk, which held every 100th
//! read 150 ms in the bad run and none in the good one; `lab run
//! healthy-mmap`: 1024 such reads on a tmpfs-backed loop device). fio
//! advises random access, so each read that misses is one fault reading
//! one page.

use crate::common;
use crate::perfetto_export::export as perfetto;

use common::*;

const BAD: &str = "tests/fixtures/mmap-slowdev-bad.cap";
const GOOD: &str = "tests/fixtures/mmap-slowdev-good.cap";
const HEALTHY: &str = "tests/fixtures/mmap-randread.cap";

fn reads_of(r: &serde_json::Value, dev: &str) -> u64 {
    r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == dev)
        .map(|d| d["completed"]["read"].as_u64().unwrap())
        .unwrap_or(0)
}

/// Each read of the file on the slow disk is one major fault: as many as
/// the device's reads, each timed to its last mark in the kernel.
#[test]
fn each_read_through_the_mapping_is_a_major_fault() {
    for cap in [GOOD, BAD] {
        let r = json_report(&[cap], &[]);
        let f = &r["outliers"]["faults"];
        assert_eq!(f["recorded"], true);
        assert_eq!(reads_of(&r, "7,0"), 512, "{cap}");
        assert_eq!(f["major"], 512, "{cap}: one major fault per device read");
        assert_eq!(f["cut_short"], 0);
        // Recorded before the faults the kernel takes in a call were:
        // their number is not known, not 0.
        assert_eq!(f["in_kernel"], serde_json::Value::Null, "{cap}");
        let file = f["file"].as_u64().unwrap();
        let untimed = f["untimed"].as_u64().unwrap();
        let faults = f["faults"].as_u64().unwrap();
        // The file faults, and fio's own (its buffers: anonymous memory,
        // never looked up in a file), untimed unless they slept.
        let anon = f["by_kind"]["anon"]["count"].as_u64().unwrap_or(0);
        assert_eq!(faults, file + untimed + anon, "{cap}: {f}");
        assert_eq!(f["by_kind"]["file"]["count"], file);
        assert_eq!(r["outliers"]["totals"]["fault file"]["count"], file);
        // The first screen names them.
        let text = run(iosleuth().args(["report", cap]));
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with("fault file")
                    && l.contains(&format!(" {file} "))),
            "{text}"
        );
        assert!(
            text.contains("those the kernel took in a call not recorded"),
            "{text}"
        );
    }
}

/// A device stall under mmap reads is `device_latency_spike` naming the
/// fault: its file and offset, and the block read it waited for.
#[test]
fn a_device_stall_under_mmap_names_the_fault_and_its_read() {
    let bad = json_report(&[BAD], &[]);
    let top = &bad["findings"][0];
    assert_eq!(
        (top["id"].as_str(), top["severity"].as_str()),
        (Some("device_latency_spike"), Some("critical")),
        "{top}"
    );
    let title = top["title"].as_str().unwrap();
    assert!(
        title.starts_with("fault file in inode 12 on 7,0 at offset ") && title.contains(": 150."),
        "{title}"
    );
    let e = &top["evidence"];
    assert_eq!(e["operation"], "fault file");
    assert_eq!(
        (e["file"]["dev"].as_str(), e["file"]["inode"].as_u64()),
        (Some("7,0"), Some(12))
    );
    let offset = e["file"]["offset"].as_u64().unwrap();
    assert!(offset % 4096 == 0 && offset < 32 << 20, "{offset}");
    assert_eq!(e["request"]["dev"], "7,0");
    assert_eq!(e["request"]["bytes"], 4096);
    assert_eq!(e["request"]["class"], "read");
    let d2c = e["request"]["d2c_ns"].as_u64().unwrap();
    assert!((150_000_000..160_000_000).contains(&d2c), "{d2c}");
    // A thread's wait, on an idle CPU.
    assert!(e["cpu_idle_percent"].as_f64().unwrap() > 90.0, "{e}");
    assert_eq!(e["spikes_in_top"], 5);
    // The fault lasted as long as its read, not until the thread's next
    // fault or syscall: within 1 ms of the read's D2C.
    let latency = e["latency_ns"].as_u64().unwrap();
    assert!(
        latency >= d2c && latency - d2c < 1_000_000,
        "{latency} {d2c}"
    );
    let slowest = bad["outliers"]["by_kind"]["fault file"].as_array().unwrap();
    assert!(slowest
        .iter()
        .take(5)
        .all(|o| o["latency_ns"].as_u64() > Some(150_000_000)));
    let good = json_report(&[GOOD], &[]);
    assert!(
        good["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] != "critical"),
        "{}",
        good["findings"]
    );
    let good_max = good["outliers"]["faults"]["by_kind"]["file"]["latency"]["max"]
        .as_u64()
        .unwrap();
    assert!(good_max < 50_000_000, "{good_max}");
}

/// A healthy mmap reader: every read a major fault, no finding; in
/// Perfetto each timed fault is a slice on its thread, with a flow to the
/// block read it waited for.
#[test]
fn healthy_mmap_reads_are_faults_with_flows_to_their_reads() {
    let r = json_report(&[HEALTHY], &[]);
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] == "info"),
        "{}",
        r["findings"]
    );
    let f = &r["outliers"]["faults"];
    // fio's 1024 reads of the file, and one of fio's own pages read from
    // the VM's disk as it ran.
    assert_eq!(reads_of(&r, "7,0"), 1024);
    assert_eq!(f["major"], 1025);
    let file = f["file"].as_u64().unwrap();
    let t = perfetto(HEALTHY);
    t.assert_nested();
    let (slices, flows) = t.slices_and_flows("fault file");
    assert_eq!(slices as u64, file);
    // Each major fault waited for its read (the one of fio's own pages on
    // the VM's disk too).
    assert_eq!(flows, 1025, "one flow per major fault to its block read");
}

/// Faults the kernel takes inside a call are the thread's, as the kernel
/// counts them (`scripts/make-fixtures-faults`: a reader touches 32 pages
/// of a mapped file not in the page cache and hands 32 others to `write`,
/// then writes down its own majflt): the major faults are its majflt, and
/// more than the 32 it touched.
#[test]
fn faults_taken_in_a_call_count_as_the_kernel_counts_them() {
    let cap = "tests/fixtures/mmap-write-faults.cap";
    let reader =
        std::fs::read_to_string("tests/fixtures/mmap-write-faults.cap/reader.out").unwrap();
    let (pid, majflt) = reader.trim().split_once(' ').unwrap();
    let majflt: u64 = majflt.parse().unwrap();
    let r = json_report(&[cap], &["--pid", pid, "--top", "100000"]);
    let f = &r["outliers"]["faults"];
    assert_eq!(f["major"].as_u64(), Some(majflt), "{f}");
    assert!(
        majflt > 32 + 16,
        "the writes' faults are in majflt: {majflt}"
    );
    assert!(f["in_kernel"].as_u64().unwrap() >= 32, "{f}");
    // The writes' faults happened in the calls: each write that faulted
    // lasted at least as long as its slowest fault.
    let writes = r["outliers"]["by_kind"]["syscall write"]
        .as_array()
        .unwrap();
    let faults = r["outliers"]["by_kind"]["fault file"].as_array().unwrap();
    let inside = faults
        .iter()
        .filter(|o| {
            let (s, l) = (
                o["start_ns"].as_u64().unwrap(),
                o["latency_ns"].as_u64().unwrap(),
            );
            writes.iter().any(|w| {
                let (ws, wl) = (
                    w["start_ns"].as_u64().unwrap(),
                    w["latency_ns"].as_u64().unwrap(),
                );
                ws <= s && s + l <= ws + wl
            })
        })
        .count();
    assert!(inside >= 32, "{inside} file faults inside a write");
}

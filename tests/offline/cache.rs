//! The page cache, on captures of `lab run cache-refault`: fio reads a
//! 16 MiB file on ext4 twice at random, 16 KiB at a time through the page
//! cache (4096 pages, 1024 reads a pass), in a memory cgroup without a
//! limit (good: the second pass hits) and with a 12 MiB one (bad: reclaim
//! evicts what the second pass reads). The captures' snapshots hold the
//! kernel's `/proc/vmstat` before and after.

use crate::common;

use common::*;

const GOOD: &str = "tests/fixtures/cache-refault-good.cap";
const BAD: &str = "tests/fixtures/cache-refault-bad.cap";

/// Without a limit the second pass hits: half the lookups, the other
/// half each a miss the device served, and nothing evicted.
#[test]
fn a_second_pass_over_a_cached_file_hits() {
    let r = json_report(&[GOOD], &[]);
    let c = &r["cache"];
    assert_eq!(c["recorded"], true);
    assert_eq!(c["not_recorded"], serde_json::json!([]));
    let d = &c["devices"]["7,1"];
    // 16 MiB of 4 KiB pages missed once each.
    assert_eq!(d["misses"], 4096);
    assert_eq!(
        (d["evicted"].as_u64(), d["refaults"].as_u64()),
        (Some(0), Some(0))
    );
    // Two passes of 1024 reads of 4 pages, less the reads whose lookup
    // the kernel split.
    let lookups = d["lookups"].as_u64().unwrap();
    assert!((8180..=8192).contains(&lookups), "{lookups}");
    assert_eq!(d["hits"].as_u64().unwrap(), lookups - 4096);
    let ratio = d["hit_ratio"].as_f64().unwrap();
    assert!((ratio - 0.5).abs() < 0.002, "{ratio}");
    // Each miss is a page the device read: 16 MiB at the loop device.
    let loop1 = r["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["device"] == "7,1")
        .unwrap();
    assert_eq!(loop1["completed"]["read"], 1024);
    assert!(r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] != "page_cache_thrashing"));
    assert_explains(
        GOOD,
        "page_cache_thrashing",
        "0 pages refaulted (under 256)",
    );
}

/// Under the limit the second pass re-reads every page: 4096 refaults,
/// the kernel's own workingset_refault_file over the recording, evicted by
/// the memory cgroup's reclaim; the finding names them and their cost.
#[test]
fn reads_of_pages_reclaim_evicted_are_refaults_as_the_kernel_counts_them() {
    let r = json_report(&[BAD], &[]);
    let c = &r["cache"];
    let d = &c["devices"]["7,1"];
    assert_eq!(d["misses"], 8192);
    assert_eq!(d["refaults"], 4096);
    assert_eq!(
        c["kernel"]["workingset_refault_file"], 4096,
        "the kernel's count over the recording (the whole machine): {}",
        c["kernel"]
    );
    let evicted = d["evicted"].as_u64().unwrap();
    assert_eq!(c["evicted_by"]["memcg limit"].as_u64(), Some(evicted));
    assert!(c["reclaimers"][0][0].as_str().unwrap().starts_with("fio ("));
    let ops = &c["operations_refaulting"];
    assert_eq!(
        (ops["count"].as_u64(), ops["pages"].as_u64()),
        (Some(1024), Some(4096))
    );
    let top = &r["findings"][0];
    assert_eq!(
        (top["id"].as_str(), top["severity"].as_str()),
        (Some("page_cache_thrashing"), Some("critical")),
        "{top}"
    );
    let title = top["title"].as_str().unwrap();
    assert!(
        title.starts_with("loop1: 4096 pages read again after reclaim evicted them (4096 of 8192 misses), in 1024 operations")
            && title.contains("evicted by the memory cgroup limit, reclaim run by fio ("),
        "{title}"
    );
    assert_eq!(top["evidence"]["kernel_workingset_refault_file"], 4096);
    assert!(top["workaround"]
        .as_str()
        .unwrap()
        .contains("memory.limit_in_bytes"));
    // The remedy: the limit the capture read over the workload's memory
    // cgroup while it ran (cgroup v1 here), lifted.
    let remedy = &top["remedy"];
    assert_eq!(remedy["live"], true, "{remedy}");
    let set = &remedy["settings"][0];
    let knob = set["knob"].as_str().unwrap();
    assert!(
        knob.starts_with("/sys/fs/cgroup/memory/iosleuth-lab-")
            && knob.ends_with("/memory.limit_in_bytes"),
        "{remedy}"
    );
    assert_eq!(
        (set["now"].as_str(), set["value"].as_str()),
        (Some("12582912"), Some("-1"))
    );
    assert_eq!(remedy["settings"].as_array().unwrap().len(), 1, "{remedy}");
    // The slowest reads say what they missed.
    let slowest = &r["outliers"]["by_kind"]["syscall pread64"][0];
    assert_eq!(slowest["cache"]["missed"], 4, "{slowest}");
    // The good run has nothing of it; check calls the bad one regressed.
    let good = json_report(&[GOOD], &[]);
    assert_eq!(good["cache"]["operations_refaulting"]["count"], 0);
    let out = outcome(&["check", GOOD, BAD]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("page_cache_thrashing"),
        "{}",
        out.stdout
    );
}

/// A capture without the page cache's events says so: the section's
/// figures are null, and the kernel's counters, which the snapshot holds,
/// are still given.
#[test]
fn without_the_cache_events_the_section_is_unknown_but_the_kernels_counts_stay() {
    let r = json_report(&["tests/fixtures/mmap-slowdev-bad.cap"], &[]);
    let c = &r["cache"];
    assert_eq!(c["not_recorded"], serde_json::json!(["cache"]));
    assert!(c["devices"].is_null() && c["recorded"].is_null(), "{c}");
    assert!(
        c["kernel"].is_null(),
        "captured before the snapshot read vmstat"
    );
    let f = json_report(&[BAD], &[]);
    assert!(f["cache"]["kernel"]["pgpgin"].as_u64().unwrap() > 0);
}

//! Live: io_uring requests against fio's own figures. fio's io_uring
//! engine reads a loop device on the lab's FUSE disk, which holds every
//! read 1 ms (a device of known latency, far above the few microseconds
//! between the kernel's completion and fio's reaping): iosleuth counts
//! the requests fio counted, and their latency from submission to
//! completion is fio's completion latency (its `--write_lat_log`) within
//! 10 % at the median and p99.

use crate::common;

use common::*;
use iosleuth::testing::{LoopDevice, Stall};
use std::time::Duration;

/// fio's latency log: one line per request, `time, latency, direction,
/// size, offset[, priority]`; latency in ns.
fn fio_latencies(log: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(log)
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()))
        .lines()
        .filter_map(|l| l.split(',').nth(1)?.trim().parse().ok())
        .collect()
}

#[test]
#[ignore = "live: needs root, tracefs, loop devices and fio; scripts/test runs it"]
fn io_uring_requests_are_fios_in_count_and_latency() {
    let _live = live();
    need_programs(&["fio"]);
    let stall = Stall {
        reads: true,
        ..Stall::writes(1, Duration::from_millis(1))
    };
    let disk = LoopDevice::create_slow(64, stall).expect("slow disk");
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let lat = dir.path().join("u");
    let json = dir.path().join("fio.json");
    // One request at a time: fio reaps each as it completes.
    let fio = format!(
        "fio --output-format=json --output={} --name=u --filename={} --ioengine=io_uring --direct=1 --rw=randread --bs=4k --iodepth=1 --size=32M --io_size=1200k --write_lat_log={} --log_avg_msec=0",
        json.display(),
        disk.path.display(),
        lat.display()
    );
    run(iosleuth()
        .arg("record")
        .arg("-o")
        .arg(&cap)
        .args([
            "--events",
            "block,sched,syscalls,io_uring",
            "--",
            "sh",
            "-c",
        ])
        .arg(&fio));
    let fio_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ios = fio_json["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    assert_eq!(ios, 300);
    let rep = json_report(&[&cap], &[]);
    let u = &rep["outliers"]["io_uring"];
    assert_eq!(u["submitted"].as_u64(), Some(ios), "{u}");
    assert_eq!(u["completed"].as_u64(), Some(ios), "{u}");
    let ours = &u["by_op"]["read"]["latency"];
    let mut theirs = fio_latencies(&dir.path().join("u_lat.1.log"));
    assert_eq!(
        theirs.len() as u64,
        ios,
        "a latency per request in fio's log"
    );
    assert_p50_p99_within_10_percent("fio's completion latency", &mut theirs, |p| {
        ours[format!("p{p}")].as_f64().unwrap()
    });
}

/// A reaper that lags behind a small completion queue
/// (tests/tools/cq_overflow.c: 4000 O_DIRECT reads 16 deep, a 4-entry
/// queue reaped after each batch): most completions overflow, which the
/// kernel traces as `io_uring_cqe_overflow`, not `io_uring_complete`.
/// The full recorder and `record --light` each count every request the
/// reader submitted and reaped, and the light capture times each one (the
/// reader's user_data are unique, so each overflow finds its request).
#[test]
#[ignore = "live: needs root, BTF, loop devices, clang-14 and liburing; scripts/test runs it"]
fn overflowed_completions_are_counted_once_by_both_recorders() {
    let _live = live();
    need_programs(&["clang-14"]);
    let dir = tempdir();
    let tool = dir.path().join("cq_overflow");
    run(std::process::Command::new("clang-14")
        .args(["-O2", "-Wall", "-o"])
        .arg(&tool)
        .arg("tests/tools/cq_overflow.c")
        .arg("-luring"));
    let disk = LoopDevice::create(32, true).expect("loop device");
    run(std::process::Command::new("dd")
        .arg(format!("of={}", disk.path.display()))
        .args([
            "if=/dev/urandom",
            "bs=1M",
            "count=32",
            "oflag=direct",
            "status=none",
        ]));
    let reads = 4000u64;
    let reader = |recorder: &[&str], cap: &std::path::Path| -> u64 {
        let out = run(iosleuth()
            .arg("record")
            .args(recorder)
            .arg("-o")
            .arg(cap)
            .arg("--")
            .arg(&tool)
            .arg(&disk.path)
            .args(["4", "16", "0", &reads.to_string()]));
        let line = out
            .lines()
            .find(|l| l.starts_with("submitted"))
            .expect(&out);
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            (w[1], w[3]),
            (&*reads.to_string(), &*reads.to_string()),
            "{line}"
        );
        reads
    };
    // The full recorder.
    let full = dir.path().join("full");
    reader(&["--events", "block,io_uring,syscalls"], &full);
    let rep = json_report(&[&full], &[]);
    let u = &rep["outliers"]["io_uring"];
    assert_eq!(u["completed"].as_u64(), Some(reads), "{u}");
    assert_eq!(u["by_op"]["read"]["count"].as_u64(), Some(reads), "{u}");
    let overflows = u["cq_overflows"].as_u64().unwrap();
    eprintln!("full recorder: {overflows} of {reads} completions overflowed");
    assert!(overflows > reads / 10, "{u}");
    // The light capture.
    let light = dir.path().join("light");
    reader(&["--light"], &light);
    let doc: iosleuth::testing::LightDoc =
        serde_json::from_str(&std::fs::read_to_string(light.join("light.json")).unwrap()).unwrap();
    let groups = doc.io_uring.expect("io_uring counted");
    let read = groups.iter().find(|g| g.op == "read").expect("reads");
    assert_eq!(read.counts.requests, reads, "{groups:?}");
    assert_eq!(
        (
            read.counts.untimed,
            read.counts.errors,
            read.counts.state_full
        ),
        (0, 0, 0),
        "{groups:?}"
    );
    assert_eq!(read.latency.n, reads);
    let others: u64 = groups
        .iter()
        .filter(|g| g.op != "read")
        .map(|g| g.counts.requests)
        .sum();
    assert_eq!(others, 0, "{groups:?}");
}

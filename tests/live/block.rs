//! Live: a real workload on a loop device, recorded at once with the `blk`
//! tracer (binary) and with block tracepoints in a private instance.
//! - iosleuth's btt numbers equal btt's on the exported blktrace files;
//! - the tracepoint capture gives the same requests and D2C within 2 %.

use crate::common;

use crate::common::instance::InstanceSession;
use common::*;
use iosleuth::testing::LoopDevice;
use iosleuth::testing::{BlkTracerOptions, BlkTracerSession};
use std::path::Path;
use std::process::Command;

struct Recorded {
    _dir: tempfile::TempDir,
    blk: std::path::PathBuf,
    tracepoints: std::path::PathBuf,
    exported: std::path::PathBuf,
    dev: String,
    name: String,
}

fn record(nomerges: &str) -> Recorded {
    let dir = tempdir();
    let mut disk = LoopDevice::create(256, true).expect("loop device");
    disk.set_queue("scheduler", "mq-deadline").unwrap();
    disk.set_queue("nomerges", nomerges).unwrap();
    // Data to read (sparse holes read as zeros without touching the disk).
    run(Command::new("dd")
        .arg("if=/dev/urandom")
        .arg(format!("of={}", disk.path.display()))
        .args(["bs=1M", "count=32", "oflag=direct", "status=none"]));
    let blk = dir.path().join("blk.bin");
    let tracepoints = dir.path().join("tracepoints.txt");
    let opts = BlkTracerOptions {
        devices: vec![disk.name.clone()],
        ..Default::default()
    };
    let tp = InstanceSession::start(block_events(), 8192, "mono", &tracepoints).expect("instance");
    let session = BlkTracerSession::start(&opts, &blk).expect("blk tracer");
    run(&mut fio_batched_reads(&disk.path, 32));
    session.stop().unwrap();
    let (_, lost) = tp.stop().unwrap();
    // Lost events would show as requests missing from the text.
    assert!(
        lost.is_empty(),
        "the tracepoint instance lost events (CPU, count): {lost:?}"
    );
    let exported = dir.path().join("export");
    run(iosleuth()
        .arg("export")
        .arg("--blktrace")
        .arg(&exported)
        .arg(&blk));
    Recorded {
        dev: disk.dev().unwrap().to_string(),
        name: disk.name.clone(),
        _dir: dir,
        blk,
        tracepoints,
        exported,
    }
}

fn assert_matches_btt(r: &Recorded) {
    assert_btt_agrees(&r.exported, &r.name, &r.dev);
}

fn assert_tracepoints_agree(r: &Recorded) {
    let blk = json_report(&[&r.blk], &[]);
    let tp = json_report(&[&r.tracepoints], &["--device", &r.dev]);
    let b = &blk["devices"][0];
    let t = &tp["devices"][0];
    assert_eq!(t["device"], b["device"]);
    for key in ["issued", "completed", "queued"] {
        assert_eq!(
            t["actions"][key], b["actions"][key],
            "{key} count, tracepoints vs blk tracer"
        );
    }
    let d2c_b = b["d2c"]["avg"].as_f64().unwrap();
    let d2c_t = t["d2c"]["avg"].as_f64().unwrap();
    assert!(d2c_b > 0.0);
    assert!(
        (d2c_t - d2c_b).abs() / d2c_b < 0.02,
        "D2C avg {d2c_t} (tracepoints) vs {d2c_b} (blk tracer)"
    );
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn btt_agreement_with_merges() {
    let _live = live();
    let r = record("0");
    assert_matches_btt(&r);
    let rep = json_report(&[&r.exported], &[]);
    let ratio = rep["devices"][0]["btt_merge"]["ratio"].as_f64().unwrap();
    assert!(
        ratio > 8.0,
        "batched 4 KiB reads should merge (ratio {ratio})"
    );
    assert_tracepoints_agree(&r);
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn btt_agreement_without_merges() {
    let _live = live();
    let r = record("2");
    assert_matches_btt(&r);
    let rep = json_report(&[&r.exported], &[]);
    let dev = &rep["devices"][0];
    assert_eq!(
        dev["btt_merge"]["ratio"].as_f64().unwrap(),
        1.0,
        "nomerges=2 must not merge"
    );
    assert_eq!(dev["btt_merge"]["blk_max"], 8);
    assert_eq!(dev["actions"]["back_merged"], 0);
    assert_tracepoints_agree(&r);
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn blk_tracer_binary_reads_directly() {
    let _live = live();
    let r = record("0");
    // The raw tracer output and its blktrace export give the same numbers.
    let raw = json_report(&[&r.blk], &[]);
    let exp = json_report(&[&r.exported], &[]);
    assert_eq!(raw["devices"][0]["btt"], exp["devices"][0]["btt"]);
    assert_eq!(
        raw["devices"][0]["iostat_total"],
        exp["devices"][0]["iostat_total"]
    );
    let _ = Path::new(&r.blk);
}

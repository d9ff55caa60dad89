//! Live: a real workload on a loop device, recorded at once with the `blk`
//! tracer (binary) and with block tracepoints in a private instance.
//! - iosleuth's btt numbers equal btt's on the exported blktrace files;
//! - the tracepoint capture gives the same requests and D2C within 2 %.

mod common;

use common::*;
use iosleuth::capture::blk_tracer::{BlkTracerOptions, BlkTracerSession};
use iosleuth::capture::instance::InstanceSession;
use iosleuth::lab::loopdev::LoopDevice;
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
    let tp = InstanceSession::start(&["block"], 8192, "mono", &tracepoints).expect("instance");
    let session = BlkTracerSession::start(&opts, &blk).expect("blk tracer");
    run(&mut fio_batched_reads(&disk.path, 32));
    session.stop().unwrap();
    tp.stop().unwrap();
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

fn btt_of(r: &Recorded) -> String {
    let dump = r.exported.join("dump.bin");
    run(Command::new("blkparse")
        .arg("-D")
        .arg(&r.exported)
        .arg("-i")
        .arg(&r.name)
        .arg("-d")
        .arg(&dump)
        .arg("-O"));
    let out = r.exported.join("btt");
    run(Command::new("btt").arg("-i").arg(&dump).arg("-o").arg(&out));
    std::fs::read_to_string(out.with_extension("avg")).unwrap()
}

fn assert_matches_btt(r: &Recorded) {
    let (btt, merges) = parse_btt(&btt_of(r));
    let rep = json_report(&[r.exported.clone()], &[]);
    let dev = &rep["devices"][0];
    assert_eq!(dev["device"], r.dev.as_str());
    let mut compared = 0;
    for (name, key) in [
        ("Q2Q", "q2q"),
        ("Q2G", "q2g"),
        ("G2I", "g2i"),
        ("Q2M", "q2m"),
        ("I2D", "i2d"),
        ("M2D", "m2d"),
        ("D2C", "d2c"),
        ("Q2C", "q2c"),
    ] {
        let ours = &rep["all_devices"]["btt"][key];
        let n = ours["n"].as_u64().unwrap();
        match btt.get(name) {
            None => assert_eq!(n, 0, "{name}: btt printed no row but iosleuth counted {n}"),
            Some(row) => {
                let total = ours["total_ns"].as_u64().unwrap();
                let avg = ((total / 1_000_000_000) as f64 + (total % 1_000_000_000) as f64 / 1e9)
                    / n as f64;
                assert_eq!(n, row.n, "{name} N");
                assert_eq!(
                    secs(ours["min_ns"].as_u64().unwrap()),
                    row.min,
                    "{name} MIN"
                );
                assert_eq!(format!("{avg:.9}"), row.avg, "{name} AVG");
                assert_eq!(
                    secs(ours["max_ns"].as_u64().unwrap()),
                    row.max,
                    "{name} MAX"
                );
                compared += 1;
            }
        }
    }
    assert!(
        compared >= 6,
        "btt printed only {compared} of the intervals"
    );
    for must in ["Q2C", "D2C", "I2D", "Q2G", "G2I"] {
        assert!(btt.contains_key(must), "btt has no {must} row");
    }
    // Merge table: #Q #D Ratio BLKmin BLKavg BLKmax Total
    assert_eq!(
        merges.len(),
        1,
        "one device in btt's merge table: {merges:?}"
    );
    let m = &dev["btt_merge"];
    let ours = [
        m["queued"].to_string(),
        m["issued"].to_string(),
        format!("{:.1}", m["ratio"].as_f64().unwrap()),
        m["blk_min"].to_string(),
        m["blk_avg"].to_string(),
        m["blk_max"].to_string(),
        m["blk_total"].to_string(),
    ];
    assert_eq!(merges[0], ours, "merge table");
}

fn assert_tracepoints_agree(r: &Recorded) {
    let blk = json_report(&[r.blk.clone()], &[]);
    let tp = json_report(&[r.tracepoints.clone()], &["--device", &r.dev]);
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
fn btt_agreement_with_merges() {
    if !live() {
        return;
    }
    let r = record("0");
    assert_matches_btt(&r);
    let rep = json_report(&[r.exported.clone()], &[]);
    let ratio = rep["devices"][0]["btt_merge"]["ratio"].as_f64().unwrap();
    assert!(
        ratio > 8.0,
        "batched 4 KiB reads should merge (ratio {ratio})"
    );
    assert_tracepoints_agree(&r);
}

#[test]
fn btt_agreement_without_merges() {
    if !live() {
        return;
    }
    let r = record("2");
    assert_matches_btt(&r);
    let rep = json_report(&[r.exported.clone()], &[]);
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
fn blk_tracer_binary_reads_directly() {
    if !live() {
        return;
    }
    let r = record("0");
    // The raw tracer output and its blktrace export give the same numbers.
    let raw = json_report(&[r.blk.clone()], &[]);
    let exp = json_report(&[r.exported.clone()], &[]);
    assert_eq!(raw["devices"][0]["btt"], exp["devices"][0]["btt"]);
    assert_eq!(
        raw["devices"][0]["iostat_total"],
        exp["devices"][0]["iostat_total"]
    );
    let _ = Path::new(&r.blk);
}

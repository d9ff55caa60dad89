//! Memory that must not grow with a count read from the input (files,
//! mappings, records, devices), and values read from it that must be
//! checked before they are believed.

mod common;

use common::*;
use std::path::Path;

const TEXT: &str = "tests/fixtures/loop-seqread-nomerges0.tracepoints.txt";

fn report_json(inputs: &[&Path]) -> (Outcome, serde_json::Value) {
    let o = outcome_bounded(
        iosleuth().args(["report", "--format", "json"]).args(inputs),
        None,
    );
    let json = serde_json::from_str(&o.stdout).unwrap_or_default();
    (o, json)
}

/// The blktrace records (each with its payload) of every per-CPU file
/// exported from the text fixture, in the order of their times.
fn blktrace_records(dir: &Path) -> Vec<Vec<u8>> {
    let bt = dir.join("exported");
    let o = iosleuth()
        .args(["export", "--blktrace"])
        .arg(&bt)
        .arg(TEXT)
        .output()
        .unwrap();
    assert!(o.status.success());
    let mut recs = Vec::new();
    for cpu in 0..2 {
        let b = std::fs::read(bt.join(format!("loop0.blktrace.{cpu}"))).unwrap();
        let mut pos = 0;
        while pos < b.len() {
            let pdu = u16::from_le_bytes([b[pos + 46], b[pos + 47]]) as usize;
            recs.push(b[pos..pos + 48 + pdu].to_vec());
            pos += 48 + pdu;
        }
    }
    recs.sort_by_key(|r| u64::from_le_bytes(r[8..16].try_into().unwrap()));
    recs
}

/// 600 per-CPU files of a few records each: each used to get a 4 MiB
/// read window (2.4 GiB in all); now a window sized to its file.
#[test]
fn six_hundred_small_blktrace_files_are_read_in_bounded_memory() {
    let dir = tempdir();
    let recs = blktrace_records(dir.path());
    assert_eq!(recs.len(), 1050);
    let split = dir.path().join("split");
    std::fs::create_dir(&split).unwrap();
    const FILES: usize = 600;
    for n in 0..FILES {
        let bytes: Vec<u8> = recs
            .iter()
            .skip(n)
            .step_by(FILES)
            .flatten()
            .copied()
            .collect();
        std::fs::write(split.join(format!("dev.blktrace.{n}")), bytes).unwrap();
    }
    let (o, json) = report_json(&[&split]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(json["inputs"].as_array().map(Vec::len), Some(FILES));
    let dev = &json["devices"][0];
    assert_eq!(dev["actions"]["queued"], 512);
    assert_eq!(dev["actions"]["completed"], 8);
    assert_eq!(dev["btt"]["d2c"]["n"], 512);
    assert_eq!(dev["btt"]["d2c"]["total_ns"], 320256000);
}

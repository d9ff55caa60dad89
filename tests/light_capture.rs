//! A light capture recorded on this VM (`record --light --slow 0` around
//! dd reads and writes on a loop device): report gives the kernel's counts
//! and the slow requests, diff compares two, and damaged files are named.

mod common;

use common::*;
use iosleuth::model::light::{LightDoc, SlowRequest, SLOW_HEADER, SLOW_RECORD};

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
    assert!(out.stdout.contains("7,0 requests"), "{}", out.stdout);
}

#[test]
fn damaged_light_captures_are_named() {
    let dir = tempdir();
    let cap = dir.path().join("cap");
    copy_dir(std::path::Path::new(CAP), &cap);
    let slow = cap.join("slow.bin");
    let bytes = std::fs::read(&slow).unwrap();
    // Cut inside a record: analysed, with a warning.
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

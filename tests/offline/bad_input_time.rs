//! Time going backwards inside one stream, or far ahead of the events
//! around it: the events are skipped with a warning that names the file,
//! how many and the first one; the figures stay those of the good events.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

struct Outcome {
    code: i32,
    json: serde_json::Value,
    stderr: String,
}

fn report(path: &Path) -> Outcome {
    let o = outcome_bounded(
        iosleuth().args(["report", "--format", "json"]).arg(path),
        None,
    );
    Outcome {
        code: o.code,
        json: serde_json::from_str(&o.stdout).unwrap_or_default(),
        stderr: o.stderr,
    }
}

const TEXT: &str = "tests/fixtures/loop-seqread-nomerges0.tracepoints.txt";

/// Per-CPU blktrace files exported from the text fixture into `dir/bt`;
/// returns the larger one's path and the offset and time of each record.
fn blktrace_files(dir: &Path) -> (PathBuf, Vec<(usize, u64)>) {
    let bt = dir.join("bt");
    let o = iosleuth()
        .args(["export", "--blktrace"])
        .arg(&bt)
        .arg(TEXT)
        .output()
        .unwrap();
    assert!(o.status.success());
    let file = bt.join("loop0.blktrace.0");
    let b = std::fs::read(&file).unwrap();
    let mut recs = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let time = u64::from_le_bytes(b[pos + 8..pos + 16].try_into().unwrap());
        let pdu = u16::from_le_bytes([b[pos + 46], b[pos + 47]]) as usize;
        recs.push((pos, time));
        pos += 48 + pdu;
    }
    assert!(recs.len() > 900);
    (file, recs)
}

fn set_time(file: &Path, at: usize, time: u64) {
    let mut b = std::fs::read(file).unwrap();
    b[at + 8..at + 16].copy_from_slice(&time.to_le_bytes());
    std::fs::write(file, b).unwrap();
}

fn btt_max(j: &serde_json::Value, interval: &str) -> u64 {
    j["devices"][0]["btt"][interval]["max_ns"].as_u64().unwrap()
}

/// One record 1 s earlier than its predecessors in a per-CPU file made
/// btt's G2I maximum 1 s.
#[test]
fn a_blktrace_record_a_second_early_is_skipped() {
    let d = tempdir();
    let (file, recs) = blktrace_files(d.path());
    let good = report(file.parent().unwrap());
    let (at, t) = recs[500];
    set_time(&file, at, t - 1_000_000_000);
    let o = report(file.parent().unwrap());
    assert_eq!(o.code, 0, "{}", o.stderr);
    let w = format!(
        "loop0.blktrace.0: skipped 1 event whose time went backwards, earlier than events before them (first: record at byte {at} at {}.{:06} s, 0.999",
        (t - 1_000_000_000) / 1_000_000_000,
        (t - 1_000_000_000) % 1_000_000_000 / 1000
    );
    assert!(o.stderr.contains(&w), "{w}\n{}", o.stderr);
    assert!(o.stderr.contains(" before an earlier event of CPU 0)"));
    assert!(o.json["warnings"].to_string().contains("went backwards"));
    assert_eq!(o.json["events"], good.json["events"].as_u64().unwrap() - 1);
    for i in ["g2i", "q2c", "d2c", "q2g"] {
        assert!(btt_max(&o.json, i) <= btt_max(&good.json, i), "{i}");
    }
    assert_eq!(o.json["span"], good.json["span"]);
}

/// One record far in the future made the span 4.6e9 s and the iostat
/// rows zeros.
#[test]
fn a_blktrace_record_far_ahead_is_skipped() {
    let d = tempdir();
    let (file, recs) = blktrace_files(d.path());
    let good = report(file.parent().unwrap());
    let far = 4_600_000_000 * 1_000_000_000u64;
    let (at, t) = recs[500];
    set_time(&file, at, t + far);
    let o = report(file.parent().unwrap());
    assert_eq!(o.code, 0, "{}", o.stderr);
    let w = format!(
        "loop0.blktrace.0: skipped 1 event far out of time with the events around them (first: record at byte {at} at {}.{:06} s, 4600000000.",
        (t + far) / 1_000_000_000,
        (t + far) % 1_000_000_000 / 1000
    );
    assert!(o.stderr.contains(&w), "{w}\n{}", o.stderr);
    assert!(o
        .stderr
        .contains(" s after the event before it): a damaged timestamp"));
    assert_eq!(o.json["span"], good.json["span"]);
    assert_eq!(o.json["events"], good.json["events"].as_u64().unwrap() - 1);
    // The same as the file's last record: nothing after it to confirm it.
    let (file, recs) = blktrace_files(&d.path().join("last"));
    let (at, t) = *recs.last().unwrap();
    set_time(&file, at, t + far);
    let o = report(file.parent().unwrap());
    assert_says(
        &o.stderr,
        &format!(
            "loop0.blktrace.0: skipped 1 event far out of time with the events around them (first: record at byte {at}"
        ),
    );
    assert!(o.json["span"]["seconds"].as_f64().unwrap() < 1.0);
}

/// `dir/name`: the fixture text with each line (numbered from 1) as `f`
/// makes it.
fn text_with(dir: &Path, name: &str, f: impl Fn(usize, &str) -> String) -> PathBuf {
    let text = std::fs::read_to_string(TEXT).unwrap();
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        out.push_str(&f(i + 1, l));
        out.push('\n');
    }
    let p = dir.join(name);
    std::fs::write(&p, out).unwrap();
    p
}

#[test]
fn ftrace_lines_out_of_time_are_skipped() {
    let d = tempdir();
    let good = report(Path::new(TEXT));
    let p = text_with(d.path(), "back.txt", |n, l| match n {
        300 => l.replacen(" 4780.3", " 4779.3", 1),
        _ => l.to_string(),
    });
    let o = report(&p);
    assert!(
        o.stderr.contains("back.txt: skipped 1 event whose time went backwards, earlier than events before them (first: line 300 at 4779.300534 s, 0.999996 s before an earlier event of CPU 0): damaged timestamps or a file out of order"),
        "{}",
        o.stderr
    );
    assert_eq!(o.json["events"], good.json["events"].as_u64().unwrap() - 1);
    let p = text_with(d.path(), "far.txt", |n, l| match n {
        300 => l.replacen(" 4780.3", " 99999999.3", 1),
        _ => l.to_string(),
    });
    let o = report(&p);
    assert!(
        o.stderr.contains("far.txt: skipped 1 event far out of time with the events around them (first: line 300 at 99999999.300534 s, 99995219.000004 s after the event before it): a damaged timestamp"),
        "{}",
        o.stderr
    );
    assert_eq!(o.json["span"], good.json["span"]);
}

/// A real pause (200 s without events) is not damage: nothing skipped.
#[test]
fn a_pause_is_kept() {
    let d = tempdir();
    let p = text_with(d.path(), "pause.txt", |n, l| match n {
        300.. => l.replacen(" 4780.", " 4980.", 1),
        _ => l.to_string(),
    });
    let good = report(Path::new(TEXT));
    let o = report(&p);
    assert_eq!(o.code, 0);
    assert!(!o.stderr.contains("skipped"), "{}", o.stderr);
    assert_eq!(o.json["events"], good.json["events"]);
    assert!(o.json["span"]["seconds"].as_f64().unwrap() > 200.0);
}

/// A ring-buffer page whose base time is damaged: its events are skipped.
#[test]
fn a_capture_page_out_of_time_is_skipped() {
    let d = tempdir();
    let cap = d.path().join("fsync-4k.cap");
    copy_dir(Path::new("tests/fixtures/fsync-4k.cap"), &cap);
    let good = report(Path::new("tests/fixtures/fsync-4k.cap"));
    let raw = cap.join("cpu1.raw");
    let mut b = std::fs::read(&raw).unwrap();
    let page = 40 * 4096;
    let base = u64::from_le_bytes(b[page..page + 8].try_into().unwrap());
    b[page..page + 8].copy_from_slice(&(base + (1 << 52)).to_le_bytes());
    std::fs::write(&raw, &b).unwrap();
    let o = report(&cap);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "fsync-4k.cap/cpu1.raw: skipped 65 events far out of time with the events around them (first: an event of the page at byte 163840 at "
        ),
        "{}",
        o.stderr
    );
    assert_eq!(o.json["span"], good.json["span"]);
    // And 2 s early: time went backwards.
    let base_early = base - 2_000_000_000;
    b[page..page + 8].copy_from_slice(&base_early.to_le_bytes());
    std::fs::write(&raw, &b).unwrap();
    let o = report(&cap);
    assert!(
        o.stderr.contains(
            "fsync-4k.cap/cpu1.raw: skipped 65 events whose time went backwards, earlier than events before them (first: an event of the page at byte 163840 at "
        ),
        "{}",
        o.stderr
    );
}

/// Every committed fixture is in time order: none gets a new warning.
#[test]
fn committed_fixtures_skip_nothing() {
    let mut paths: Vec<PathBuf> = Vec::new();
    for dir in ["tests/fixtures", "tests/fixtures/seeds"] {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            // seeds/ is read below; fuzz/ holds fuzzers' damaged inputs;
            // a .kallsyms file is a recording's symbols, not a trace.
            if !["seeds", "fuzz"].contains(&p.file_name().unwrap().to_str().unwrap())
                && p.extension().is_none_or(|x| x != "kallsyms")
            {
                paths.push(p);
            }
        }
    }
    assert!(paths.len() > 30);
    for p in paths {
        let o = iosleuth().arg("report").arg(&p).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{}: {err}", p.display());
        for bad in ["went backwards", "far out of time", "missing", "unreadable"] {
            assert!(!err.contains(bad), "{}: {err}", p.display());
        }
    }
}

//! Bad input gets a clear message naming the file and the problem, exit code
//! 2 where nothing is usable, warnings where part is; never a panic.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

fn report(paths: &[&Path], json: bool) -> Outcome {
    let mut c = iosleuth();
    c.arg("report");
    if json {
        c.args(["--format", "json"]);
    }
    for p in paths {
        c.arg(p);
    }
    outcome_bounded(&mut c, None)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new("tests/fixtures").join(name)).unwrap()
}

#[test]
fn empty_file() {
    let d = tempdir();
    let p = write(d.path(), "empty.trace", b"");
    let o = report(&[&p], false);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("empty.trace: the file is empty"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"));
}

#[test]
fn missing_file_and_empty_directory() {
    let d = tempdir();
    let o = report(&[&d.path().join("nope.dat")], false);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("nope.dat: cannot open"), "{}", o.stderr);
    let o = report(&[d.path()], false);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("no blktrace files"), "{}", o.stderr);
}

#[test]
fn binary_garbage() {
    let d = tempdir();
    let bytes: Vec<u8> = (0..10_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let p = write(d.path(), "garbage.bin", &bytes);
    let o = report(&[&p], false);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("garbage.bin: binary data that is not a blktrace"),
        "{}",
        o.stderr
    );
}

#[test]
fn text_of_another_kind() {
    let o = report(&[Path::new("Cargo.toml")], false);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("Cargo.toml: text that is not a trace"),
        "{}",
        o.stderr
    );
}

#[test]
fn blktrace_with_wrong_magic() {
    let d = tempdir();
    let mut b = fixture("loop-seqread-nomerges0.blk");
    // A blktrace file whose first record has a damaged magic.
    let mut plain = b.split_off(16);
    plain[0] = 0x99;
    let p = write(d.path(), "dev.blktrace.0", &plain);
    let o = report(&[&p], false);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("dev.blktrace.0"), "{}", o.stderr);
}

#[test]
fn bad_magic_in_the_middle_keeps_what_came_before() {
    let d = tempdir();
    let mut b = fixture("loop-seqread-nomerges2.blk");
    // Walk 200 records (16-byte header + 48-byte record + payload).
    let mut pos = 0;
    for _ in 0..200 {
        let pdu = u16::from_le_bytes([b[pos + 16 + 46], b[pos + 16 + 47]]) as usize;
        pos += 64 + pdu;
    }
    b[pos + 16] ^= 0xff;
    let p = write(d.path(), "mid.blk", &b);
    let o = report(&[&p], true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("bad magic"), "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["events"], 200);
    assert!(j["warnings"]
        .to_string()
        .contains("the rest of the file was skipped"));
}

#[test]
fn truncated_binary_is_analysed_with_a_warning() {
    let d = tempdir();
    let b = fixture("loop-seqread-nomerges2.blk");
    // Cut 30 bytes into the 301st record.
    let mut pos = 0;
    for _ in 0..300 {
        let pdu = u16::from_le_bytes([b[pos + 16 + 46], b[pos + 16 + 47]]) as usize;
        pos += 64 + pdu;
    }
    let p = write(d.path(), "cut.blk", &b[..pos + 30]);
    let o = report(&[&p], true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("cut.blk: truncated"), "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["events"], 300);
}

#[test]
fn truncated_text_completions_without_start_and_clipped_requests() {
    let d = tempdir();
    let text = String::from_utf8(fixture("loop-seqread-nomerges2.tracepoints.txt")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Start in the middle (completions of requests issued before) and stop
    // in the middle (requests never completed), cutting the last line short.
    let mut cut = lines[300..lines.len() - 300].join("\n");
    cut.push_str("\n             fio-9718    [001] .....  1058.6");
    let p = write(d.path(), "cut.txt", cut.as_bytes());
    let o = report(&[&p], true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let w = j["warnings"].to_string();
    assert!(w.contains("completions had no matching start"), "{w}");
    assert!(w.contains("still in flight when the trace ended"), "{w}");
    assert!(w.contains("skipped 1 entry"), "{w}");
    assert!(
        j["devices"][0]["completions_without_start"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn unknown_and_lost_events_are_reported() {
    let d = tempdir();
    let mut text = String::from("# tracer: nop\n");
    text.push_str("  fio-1 [000] ..... 10.000001: block_bio_queue: 7,0 R 0 + 8 [fio]\n");
    text.push_str("  fio-1 [000] ..... 10.000002: ext4_da_write_begin: dev 7,0 ino 12 pos 0 len 4096 flags 0\n");
    text.push_str("CPU:1 [LOST 1234 EVENTS]\n");
    text.push_str("  fio-1 [000] ..... 10.000003: block_getrq: 7,0 R 0 + 8 [fio]\n");
    let p = write(d.path(), "lost.txt", text.as_bytes());
    let o = report(&[&p], true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["unknown_events"]["ext4_da_write_begin"], 1);
    assert_eq!(j["inputs"][0]["lost_events"], 1234);
    let w = j["warnings"].to_string();
    assert!(w.contains("lost 1234 events"), "{w}");
    assert!(w.contains("10.000002"), "the warning says when: {w}");
}

#[test]
fn lost_marker_inside_binary_tracer_output() {
    let d = tempdir();
    let b = fixture("loop-seqread-nomerges0.blk");
    let at = 64 * 10;
    let mut v = b[..at].to_vec();
    v.extend_from_slice(b"CPU:0 [LOST 77 EVENTS]\n");
    v.extend_from_slice(&b[at..]);
    let p = write(d.path(), "lostbin.blk", &v);
    let o = report(&[&p], true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["inputs"][0]["lost_events"], 77);
    let full = json_report(
        &[Path::new("tests/fixtures/loop-seqread-nomerges0.blk")],
        &[],
    );
    assert_eq!(j["events"], full["events"]);
}

#[test]
fn lost_marker_before_the_first_binary_record() {
    let d = tempdir();
    let mut v = b"CPU:1 [LOST 5 EVENTS]\n".to_vec();
    v.extend_from_slice(&fixture("loop-seqread-nomerges0.blk"));
    let p = write(d.path(), "lostfirst.blk", &v);
    let o = report(&[&p], true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["inputs"][0]["lost_events"], 5);
    assert_eq!(j["inputs"][0]["format"], "blk tracer (binary)");
}

#[test]
fn pid_that_looks_like_a_comment() {
    // A blk-tracer record from pid 0x0a23 starts with the bytes "#\n".
    let d = tempdir();
    let mut v = fixture("loop-seqread-nomerges0.blk");
    v[0] = b'#';
    v[1] = b'\n';
    let p = write(d.path(), "pid.blk", &v);
    let o = report(&[&p], true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let full = json_report(
        &[Path::new("tests/fixtures/loop-seqread-nomerges0.blk")],
        &[],
    );
    assert_eq!(j["events"], full["events"]);
    // And with the `trace` file's text header in front.
    let mut h = b"# tracer: blk\n#\n".to_vec();
    h.extend_from_slice(&v);
    let p = write(d.path(), "hdr.blk", &h);
    let o = report(&[&p], true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["events"], full["events"]);
}

#[test]
fn bad_arguments() {
    let o = iosleuth()
        .args(["report", "--time", "abc", "Cargo.toml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("FROM..TO"));
    let o = iosleuth()
        .args([
            "report",
            "--interval",
            "0",
            "tests/fixtures/loop-seqread-nomerges0.blk",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn filters_that_match_nothing() {
    let o = iosleuth()
        .args([
            "report",
            "--device",
            "8,16",
            "tests/fixtures/loop-seqread-nomerges0.blk",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no usable events matching the filters"));
}

/// `iosleuth report … | head`: the reader goes away; iosleuth ends quietly
/// with 0 instead of a panic message.
#[test]
fn a_reader_that_goes_away_ends_quietly() {
    read_one_line_then_go_away(&["report", "tests/fixtures/journal-4m.cap"]);
}

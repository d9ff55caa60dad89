//! Strings from a trace (a process names itself; marks, field values and
//! a capture's snapshot come from others) reach the reader's terminal only
//! escaped: no ESC to clear the screen, no newline to forge a report line.
//! JSON keeps them as they are (serde escapes them).

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

/// The comm the damaged captures carry: clear the screen, then a new line
/// that pretends to be a finding.
const EVIL: &[u8] = b"i\x1b[2J\nC!\x00";
const SHOWN: &str = "i\\x1b[2J\\nC!";

/// rt-burner.cap with every `iosleuth` comm (the victim and the RT burner)
/// replaced by `EVIL` (same length, NUL-terminated in its char[16]).
fn evil_capture(dir: &Path) -> PathBuf {
    let cap = dir.join("evil.cap");
    copy_dir(Path::new("tests/fixtures/rt-burner.cap"), &cap);
    let needle = b"iosleuth\x00";
    assert_eq!(needle.len(), EVIL.len());
    for cpu in ["cpu0.raw", "cpu1.raw"] {
        let p = cap.join(cpu);
        let mut b = std::fs::read(&p).unwrap();
        let mut i = 0;
        while let Some(at) = b[i..].windows(needle.len()).position(|w| w == needle) {
            b[i + at..i + at + needle.len()].copy_from_slice(EVIL);
            i += at + needle.len();
        }
        std::fs::write(&p, b).unwrap();
    }
    cap
}

fn out(args: &[&str], paths: &[&Path]) -> (String, String) {
    let o = iosleuth().args(args).args(paths).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains('\x1b'), "{what}: raw ESC in\n{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("C!")),
        "{what}: a forged line in\n{text}"
    );
}

#[test]
fn comms_are_escaped_in_text_reports_and_dump() {
    let d = tempdir();
    let cap = evil_capture(d.path());
    let (report, err) = out(&["report"], &[&cap]);
    assert_clean("report", &report);
    assert_clean("report stderr", &err);
    // In the finding's title, the process table and the scheduler table.
    assert!(
        report.contains(&format!("CRITICAL rt_starvation: {SHOWN} (28257) waited")),
        "{report}"
    );
    assert!(report.contains(&format!("   28257 {SHOWN}")), "{report}");
    let (explain, _) = out(&["report", "--explain", "all"], &[&cap]);
    assert_clean("explain", &explain);
    assert!(explain.contains(&format!("while real-time {SHOWN} (28256, prio 49)")));
    let (dump, _) = out(&["dump"], &[&cap]);
    assert_clean("dump", &dump);
    assert!(
        dump.contains(&format!("prev_comm={SHOWN} ")),
        "no escaped sched_switch field"
    );
    let (diff, _) = out(
        &["diff"],
        &[Path::new("tests/fixtures/rt-burner.cap"), &cap],
    );
    assert_clean("diff", &diff);
    // JSON keeps the name as the kernel had it.
    let (json, _) = out(&["report", "--format", "json"], &[&cap]);
    assert!(json.contains("i\\u001b[2J\\nC!"), "JSON escapes it itself");
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let raw = std::str::from_utf8(&EVIL[..EVIL.len() - 1]).unwrap();
    assert!(j["findings"][0]["title"].as_str().unwrap().contains(raw));
}

#[test]
fn ftrace_comms_and_file_names_are_escaped() {
    let d = tempdir();
    let text = std::fs::read_to_string("tests/fixtures/loop-seqread-nomerges0.tracepoints.txt")
        .unwrap()
        .replace("fio-", "f\x1b[31mio-")
        .replace("[fio]", "[f\x1b[31mio]");
    let p = d.path().join("red\x1b[2J.txt");
    std::fs::write(&p, text).unwrap();
    let (report, err) = out(&["report"], &[&p]);
    assert_clean("report", &report);
    assert_clean("stderr", &err);
    assert!(report.contains("f\\x1b[31mio"), "{report}");
    assert!(report.contains("red\\x1b[2J.txt (ftrace"), "{report}");
    let (dump, _) = out(&["dump", "--limit", "5"], &[&p]);
    assert_clean("dump", &dump);
    // An error naming the file, escaped too.
    let empty = d.path().join("e\x1b[2J.txt");
    std::fs::write(&empty, b"").unwrap();
    let o = iosleuth().arg("report").arg(&empty).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("e\\x1b[2J.txt: the file is empty"), "{err}");
    assert_clean("error", &err);
}

#[test]
fn snapshot_strings_are_escaped() {
    let d = tempdir();
    let cap = d.path().join("snap.cap");
    copy_dir(Path::new("tests/fixtures/fsync-4k.cap"), &cap);
    let p = cap.join("snapshot.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    s["before"]["kernel"]["release"] = "6.1\x1b[2J".into();
    let devs = s["before"]["block_devices"].as_object_mut().unwrap();
    let loop0 = devs.get_mut("loop0").unwrap();
    loop0["queue"]["scheduler"] = "[none\nCRITICAL fake] mq-deadline".into();
    std::fs::write(&p, serde_json::to_string(&s).unwrap()).unwrap();
    let (report, _) = out(&["report"], &[&cap]);
    assert_clean("report", &report);
    assert!(report.contains("kernel 6.1\\x1b[2J, CPUs"), "{report}");
    assert!(
        report.contains("scheduler none\\nCRITICAL fake,"),
        "{report}"
    );
    assert!(!report.lines().any(|l| l.starts_with("CRITICAL fake")));
    let (diff, _) = out(&["diff"], &[Path::new("tests/fixtures/fsync-4k.cap"), &cap]);
    assert_clean("diff", &diff);
    assert!(diff.contains("none\\nCRITICAL fake"), "{diff}");
}

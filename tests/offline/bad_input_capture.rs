//! Damaged capture directories: each problem is a warning naming the file
//! and what is missing, or exit 2 naming the file when nothing can be
//! trusted; never a hang, a panic or a silently smaller report.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

/// `iosleuth report [--format json] DIR`, failing the test after 60 s.
fn report(dir: &Path, json: bool) -> Outcome {
    let mut c = iosleuth();
    c.arg("report");
    if json {
        c.args(["--format", "json"]);
    }
    outcome_bounded(c.arg(dir), None)
}

/// A copy of a committed capture in a temporary directory.
fn copy_capture(name: &str, into: &Path) -> PathBuf {
    let to = into.join(name);
    copy_dir(&Path::new("tests/fixtures").join(name), &to);
    to
}

fn edit_manifest(cap: &Path, f: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let p = cap.join("iosleuth-capture.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(m.as_object_mut().unwrap());
    std::fs::write(&p, serde_json::to_string_pretty(&m).unwrap()).unwrap();
}

fn events(o: &Outcome) -> u64 {
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    j["events"].as_u64().unwrap()
}

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn a_listed_cpu_whose_file_is_missing_is_a_warning() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    let whole = report(&cap, true);
    std::fs::remove_file(cap.join("cpu1.raw")).unwrap();
    let o = report(&cap, true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "fsync-4k.cap/cpu1.raw: missing, although the manifest lists CPU 1: that CPU's events are not in this report"
        ),
        "{}",
        o.stderr
    );
    assert!(events(&o) < events(&whole));
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert!(j["warnings"].to_string().contains("cpu1.raw: missing"));
}

#[test]
fn a_cpu_file_that_is_a_device_is_skipped_with_a_warning() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    std::fs::remove_file(cap.join("cpu1.raw")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", cap.join("cpu1.raw")).unwrap();
    let o = report(&cap, true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "fsync-4k.cap/cpu1.raw: is a character device, not a regular file; CPU 1's events were skipped"
        ),
        "{}",
        o.stderr
    );
    // A FIFO the same.
    std::fs::remove_file(cap.join("cpu1.raw")).unwrap();
    mkfifo(&cap.join("cpu1.raw"));
    let o = report(&cap, false);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "cpu1.raw: is a FIFO (named pipe), not a regular file; CPU 1's events were skipped"
        ),
        "{}",
        o.stderr
    );
}

#[test]
fn an_empty_cpu_file_is_a_warning_only_when_the_kernel_counted_events() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    std::fs::write(cap.join("cpu1.raw"), b"").unwrap();
    let o = report(&cap, false);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "fsync-4k.cap/cpu1.raw: empty, although the kernel handed 6560 events of CPU 1 to the recorder: they are not in this report"
        ),
        "{}",
        o.stderr
    );
    // queue-saturated.cap's CPU 0 recorded nothing ("read events": 0): no warning.
    let o = report(Path::new("tests/fixtures/queue-saturated.cap"), false);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("cpu0.raw"), "{}", o.stderr);
}

#[test]
fn no_readable_cpu_file_is_exit_2() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    std::fs::remove_file(cap.join("cpu0.raw")).unwrap();
    std::fs::remove_file(cap.join("cpu1.raw")).unwrap();
    std::os::unix::fs::symlink("/dev/null", cap.join("cpu1.raw")).unwrap();
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("fsync-4k.cap: capture has no readable cpuN.raw file:"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("cpu0.raw: missing"), "{}", o.stderr);
    assert!(
        o.stderr.contains("cpu1.raw: is a character device"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_corrupt_snapshot_is_a_warning() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    std::fs::write(cap.join("snapshot.json"), b"{\"before\": [1, 2").unwrap();
    let o = report(&cap, true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let w = "fsync-4k.cap/snapshot.json: unreadable snapshot, ignored (not JSON: EOF while parsing a list at line 1 column 16); the report goes without the system's settings";
    assert!(o.stderr.contains(w), "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert!(j["warnings"].to_string().contains("unreadable snapshot"));
    assert!(j["snapshot"].is_null());
    // JSON of the wrong shape, and a FIFO (read, it would block).
    std::fs::write(cap.join("snapshot.json"), b"[1, 2]").unwrap();
    let o = report(&cap, false);
    assert!(
        o.stderr
            .contains("snapshot.json: unreadable snapshot, ignored (not shaped like a snapshot"),
        "{}",
        o.stderr
    );
    std::fs::remove_file(cap.join("snapshot.json")).unwrap();
    mkfifo(&cap.join("snapshot.json"));
    let o = report(&cap, false);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "snapshot.json: unreadable snapshot, ignored (is a FIFO (named pipe), not a regular file)"
        ),
        "{}",
        o.stderr
    );
}

#[test]
fn an_unknown_manifest_version_or_format_is_exit_2() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    edit_manifest(&cap, |m| {
        m.insert("version".into(), 2.into());
    });
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "iosleuth-capture.json: capture format version 2 is not supported (this iosleuth reads \"iosleuth-capture\" version 1)"
        ),
        "{}",
        o.stderr
    );
    edit_manifest(&cap, |m| {
        m.insert("version".into(), 1.into());
        m.insert("format".into(), "perf-data".into());
    });
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "iosleuth-capture.json: format \"perf-data\" is not an iosleuth capture's (this iosleuth reads \"iosleuth-capture\" version 1)"
        ),
        "{}",
        o.stderr
    );
    // Without `format` and `version` it is version 1, read as before.
    edit_manifest(&cap, |m| {
        m.remove("version");
        m.remove("format");
    });
    let o = report(&cap, true);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let orig = report(Path::new("tests/fixtures/fsync-4k.cap"), true);
    assert_eq!(events(&o), events(&orig));
}

#[test]
fn an_insane_page_size_is_exit_2() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    for bad in [
        serde_json::json!(4294967296u64),
        serde_json::json!(3000),
        serde_json::json!(0),
        serde_json::json!(2048),
        serde_json::json!(2097152),
        serde_json::json!("4096"),
    ] {
        edit_manifest(&cap, |m| {
            m.insert("page_size".into(), bad.clone());
        });
        let o = report(&cap, false);
        assert_eq!(o.code, 2, "{bad}: {}", o.stderr);
        assert_says(
            &o.stderr,
            &format!(
                "iosleuth-capture.json: page_size {bad} is not a ring-buffer page size (a power of two from 4096 to 1048576)"
            ),
        );
    }
}

#[test]
fn an_impossible_header_page_is_exit_2() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    let p = cap.join("formats/header_page");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("offset:16;", "offset:8192;")).unwrap();
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("formats/header_page: describes an impossible page: commit word at byte 8 (8 bytes), data at byte 8192, in pages of 4096 bytes"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_format_file_with_an_absurd_field_is_exit_2() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    let p = cap.join("formats/events/block/block_rq_issue/format");
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains("offset:8;"));
    std::fs::write(
        &p,
        text.replacen("offset:8;", "offset:18446744073709551615;", 1),
    )
    .unwrap();
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("block_rq_issue/format: cannot parse this format file"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_capture_without_its_manifest_says_so() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    std::fs::remove_file(cap.join("iosleuth-capture.json")).unwrap();
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "fsync-4k.cap: looks like an iosleuth capture (it has 2 cpuN.raw files and formats/) but its manifest iosleuth-capture.json is missing: without it the raw pages cannot be decoded"
        ),
        "{}",
        o.stderr
    );
    // A manifest that is a FIFO is refused, not waited on.
    mkfifo(&cap.join("iosleuth-capture.json"));
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("iosleuth-capture.json: is a FIFO (named pipe), not a regular file"),
        "{}",
        o.stderr
    );
}

#[test]
fn format_files_that_are_not_regular_are_refused_not_waited_on() {
    let d = tempdir();
    let cap = copy_capture("fsync-4k.cap", d.path());
    let hp = cap.join("formats/header_page");
    std::fs::remove_file(&hp).unwrap();
    mkfifo(&hp);
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("formats/header_page: is a FIFO (named pipe), not a regular file"),
        "{}",
        o.stderr
    );
    let cap = copy_capture("fsync-4k.cap", &d.path().join("2"));
    let f = cap.join("formats/events/block/block_rq_issue/format");
    std::fs::remove_file(&f).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &f).unwrap();
    let o = report(&cap, false);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("block_rq_issue/format: is a character device, not a regular file"),
        "{}",
        o.stderr
    );
    // symbols.json is optional: unreadable, it is a warning.
    let cap = copy_capture("fsync-4k.cap", &d.path().join("3"));
    std::fs::write(cap.join("symbols.json"), b"{\"0xffff\": ").unwrap();
    let o = report(&cap, false);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("symbols.json: unreadable (EOF while parsing"),
        "{}",
        o.stderr
    );
}

//! Inputs that are not regular files are refused instead of hanging; `-`
//! reads standard input; a line without end cannot grow memory without end.

use crate::common;

use common::*;
use std::path::Path;
use std::process::Stdio;

fn report(args: &[&str], path: &Path) -> Outcome {
    outcome_bounded(iosleuth().arg("report").args(args).arg(path), None)
}

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn a_fifo_is_refused_not_waited_on() {
    let d = tempdir();
    let p = d.path().join("trace.fifo");
    mkfifo(&p);
    let o = report(&[], &p);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("trace.fifo: is a FIFO (named pipe), not a regular file: iosleuth reads trace files and directories of them (to read a pipe, redirect it to standard input and give `-`)"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_device_behind_a_symlink_is_refused() {
    let d = tempdir();
    let p = d.path().join("zero.txt");
    std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
    let o = report(&[], &p);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("zero.txt: is a character device, not a regular file"),
        "{}",
        o.stderr
    );
    // A per-CPU blktrace file found in a directory is opened the same way.
    let b = d.path().join("sda.blktrace.0");
    std::os::unix::fs::symlink("/dev/zero", &b).unwrap();
    let o = report(&[], d.path());
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("sda.blktrace.0: is a character device, not a regular file"),
        "{}",
        o.stderr
    );
}

/// `cat trace | iosleuth report -` reads the pipe, detected like a file.
#[test]
fn dash_reads_standard_input_from_a_pipe() {
    for name in [
        "loop-seqread-nomerges0.tracepoints.txt",
        "loop-seqread-nomerges0.blk",
    ] {
        let path = Path::new("tests/fixtures").join(name);
        let o = outcome_bounded(
            iosleuth().args(["report", "--format", "json", "-"]),
            Some(std::fs::read(&path).unwrap()),
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let piped: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        let file = json_report(&[&path], &[]);
        assert_eq!(piped["inputs"][0]["path"], "<stdin>");
        assert_eq!(piped["inputs"][0]["format"], file["inputs"][0]["format"]);
        assert_eq!(piped["events"], file["events"]);
        assert_eq!(piped["devices"], file["devices"]);
    }
    // And from a redirected file.
    let f = std::fs::File::open("tests/fixtures/loop-seqread-nomerges2.tracepoints.txt").unwrap();
    let o = iosleuth()
        .args(["report", "-"])
        .stdin(Stdio::from(f))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("<stdin> (ftrace or trace-cmd text"));
}

#[test]
fn export_refuses_standard_input() {
    let d = tempdir();
    let o = outcome_bounded(
        iosleuth()
            .args(["export", "--blktrace"])
            .arg(d.path().join("out"))
            .arg("-"),
        Some(b"x".to_vec()),
    );
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("cannot read standard input (`-`)"),
        "{}",
        o.stderr
    );
}

/// A line of 5 MiB in the middle of a text trace is skipped whole with a
/// warning; the window over the file does not grow to hold it.
#[test]
fn a_line_longer_than_4_mib_is_skipped_with_a_warning() {
    let d = tempdir();
    let text =
        std::fs::read_to_string("tests/fixtures/loop-seqread-nomerges0.tracepoints.txt").unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines.insert(20, "x".repeat(5 << 20));
    let p = d.path().join("long.txt");
    std::fs::write(&p, lines.join("\n")).unwrap();
    let o = report(&["--format", "json"], &p);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "long.txt: skipped 1 entry that iosleuth could not decode as ftrace or trace-cmd text (first: line 21: longer than 4 MiB, skipped whole (it starts \"xxxx"
        ),
        "{}",
        &o.stderr[..o.stderr.len().min(2000)]
    );
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let full = json_report(
        &[Path::new(
            "tests/fixtures/loop-seqread-nomerges0.tracepoints.txt",
        )],
        &[],
    );
    assert_eq!(j["events"], full["events"]);
}

//! The HTML report in a real browser (headless Chromium, which the test
//! command installs): pages made from real captures load with no console
//! message, their plots are drawn, a screenshot is taken, and a process
//! name that is HTML (`<svg onload=p>`, recorded into a real capture)
//! shows as text and runs nothing. Without chromium the tests skip,
//! saying so; under CI=true that is a failure.

use crate::common;

use common::browser::{chromium, load, Loaded};
use common::*;
use std::path::{Path, PathBuf};

fn html(args: &[&str], out: &Path) {
    run(iosleuth()
        .args(args)
        .args(["--format", "html", "-o"])
        .arg(out));
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
#[ignore = "needs chromium: scripts/test installs it and runs it"]
fn reports_of_real_captures_load_and_draw() {
    let browser = chromium();
    let dir = tempdir();
    // Case 4 in the lab: one journal write held 150 ms by the device.
    let page = dir.path().join("slow.html");
    html(&["report", "tests/fixtures/slowdev-fsync.cap"], &page);
    let l = load(browser, &page, &dir.path().join("slow.png"));
    assert!(l.console.is_empty(), "{:?}", l.console);
    assert!(l.dom.contains("device_latency_spike"));
    // 378 requests, each a point of the Q2C plot; the 266 that reached the
    // driver of the D2C plot too. The other 112 are fsyncs' empty writes,
    // which the kernel ends without issuing them (their 112 flush requests
    // are among the 266): diskstats counts both, as writes and flushes.
    let scatter: String = l
        .dom
        .split("<svg class=\"chart\"")
        .filter(|c| c.contains(", every request</text>"))
        .collect();
    assert_eq!(
        count(&scatter, "<circle class=\"write\"")
            + count(&scatter, "<circle class=\"read\"")
            + count(&scatter, "<circle class=\"flush\""),
        378 + 266
    );
    assert!(l.dom.contains("btt's intervals"));
    // The slowest operation as a timeline across the layers: the probe's
    // fsync, the system call and ext4_sync_file in it, and the journal
    // write it waited for (red) at the device.
    let timeline = l
        .dom
        .split_once("probe fsync: iosleuth (")
        .and_then(|(_, t)| t.split("</svg>").next())
        .expect("a timeline of the slowest fsync");
    for row in [">syscall fsync<", ">ext4_sync_file<", ">device 7,0<"] {
        assert!(timeline.contains(row), "{row}: {timeline}");
    }
    // One bar (the key under the timeline has its swatch too).
    let bars = timeline.split("<g class=\"key\">").next().unwrap();
    assert_eq!(count(bars, "<rect class=\"main\""), 1);
    assert!(timeline.contains(">the request waited for</text>"));

    // 5,873 requests: a heatmap, the slowest drawn over it.
    let page = dir.path().join("wbt.html");
    html(&["report", "tests/fixtures/wbt-default.cap"], &page);
    let l = load(browser, &page, &dir.path().join("wbt.png"));
    assert!(l.console.is_empty(), "{:?}", l.console);
    assert!(count(&l.dom, "class=\"cell\"") > 500);
    // 300 per plot (Q2C and D2C of each busy device).
    let slow = count(&l.dom, "<circle class=\"slow\"");
    assert!(slow >= 600 && slow.is_multiple_of(300), "{slow}");
    // 2.3 s: iostat's columns per 50 ms, not three one-second points.
    assert!(l.dom.contains("requests per second, per 50 ms (iostat -x)"));
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size < 5 << 20, "{size} bytes");

    // Stacks: the off-CPU flame graph in its sandboxed frame.
    let page = dir.path().join("stacks.html");
    html(&["report", "tests/fixtures/stacks-journal-4m.cap"], &page);
    let l = load(browser, &page, &dir.path().join("stacks.png"));
    assert!(l.console.is_empty(), "{:?}", l.console);
    assert_eq!(count(&l.dom, "<iframe class=\"flame\""), 1);
    // A slow writer's timeline shows when it blocked, and in what; the
    // stack it blocked in most is text under it.
    assert!(l.dom.contains("<p class=\"stack\">Blocked "));
    assert!(l.dom.contains(">thread blocked (stacks)<"));
    assert!(l
        .dom
        .contains("ms in jbd2_log_wait_commit ← jbd2_log_do_checkpoint ← __jbd2_log_wait_for_space ← add_transaction_credits"));
    assert!(l.dom.contains("run-queue latency"));
}

#[test]
#[ignore = "needs chromium: scripts/test installs it and runs it"]
fn diff_page_shows_the_verdict_and_the_setting() {
    let browser = chromium();
    let dir = tempdir();
    let diff = |good: &str, bad: &str, name: &str| -> Loaded {
        let page = dir.path().join(format!("{name}.html"));
        run(iosleuth()
            .args(["diff", good, bad, "--format", "html", "-o"])
            .arg(&page));
        let l = load(browser, &page, &dir.path().join(format!("{name}.png")));
        assert!(l.console.is_empty(), "{:?}", l.console);
        l
    };
    // Case 2 with --stacks: the setting that differs.
    let l = diff(
        "tests/fixtures/stacks-journal-1024m.cap",
        "tests/fixtures/stacks-journal-4m.cap",
        "settings",
    );
    assert!(l.dom.contains("journal_kib is 4096 against 1048576"));
    assert!(l
        .dom
        .contains("<td>ext4 loop0 journal_kib</td><td>1048576</td><td>4096</td>"));
    // A cgroup limit: the finding only the candidate has, and both
    // sides' request latency on one axis per device.
    let l = diff(
        "tests/fixtures/cgroup-none.cap",
        "tests/fixtures/cgroup-throttled.cap",
        "cgroup",
    );
    assert!(l.dom.contains("the candidate has cgroup_io_throttle"));
    let charts = count(&l.dom, "requests by Q2C latency, share of each side</text>");
    assert!(charts >= 1);
    let operations = count(&l.dom, "operations by latency, share of each side</text>");
    assert_eq!(
        count(&l.dom, "<path class=\"line "),
        2 * (charts + operations)
    );
    assert_eq!(
        count(
            &l.dom,
            "every request's Q2C, both sides on the same axes</text>"
        ),
        charts
    );
    assert!(l.dom.contains("<title>baseline: ") && l.dom.contains("<title>candidate: "));
}

/// rt-burner.cap with its `iosleuth` threads renamed `<svg onload=p>`
/// (15 bytes with the NUL, inside the 16 of every comm field).
fn hostile_capture(dir: &Path) -> PathBuf {
    let cap = dir.join("hostile.cap");
    copy_dir(Path::new("tests/fixtures/rt-burner.cap"), &cap);
    let (needle, name) = (b"iosleuth\x00", b"<svg onload=p>\x00");
    for cpu in ["cpu0.raw", "cpu1.raw"] {
        let p = cap.join(cpu);
        let mut b = std::fs::read(&p).unwrap();
        let mut i = 0;
        while let Some(at) = b[i..].windows(needle.len()).position(|w| w == needle) {
            b[i + at..i + at + name.len()].copy_from_slice(name);
            i += at + name.len();
        }
        std::fs::write(&p, b).unwrap();
    }
    cap
}

#[test]
#[ignore = "needs chromium: scripts/test installs it and runs it"]
fn a_process_named_in_html_shows_as_text() {
    let browser = chromium();
    let dir = tempdir();
    let cap = hostile_capture(dir.path());
    let page = dir.path().join("hostile.html");
    html(&["report", cap.to_str().unwrap()], &page);
    let l = load(browser, &page, &dir.path().join("hostile.png"));
    // Unescaped, `onload=p` would throw "p is not defined".
    assert!(l.console.is_empty(), "{:?}", l.console);
    assert!(l.dom.contains("&lt;svg onload=p&gt;"), "the name is shown");
    assert!(!l.dom.contains("<svg onload"));
    assert!(l.dom.contains("rt_starvation"));
}

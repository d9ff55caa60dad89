//! The text report's first screen: on every committed fixture the summary
//! (span, operations, devices, findings, what was not recorded) fits in 40
//! lines and holds the figures the sections below hold; repeated
//! per-thread lines collapse unless `--all`.

use crate::common::*;
use crate::golden::fixtures;

const SCREEN: usize = 40;

fn report(path: &str, extra: &[&str]) -> String {
    run(iosleuth()
        .arg("report")
        .arg(path)
        .args(extra)
        .stderr(std::process::Stdio::null()))
}

/// The summary: the lines before the first section's banner.
fn first_screen(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|l| !l.starts_with("===================="))
        .collect()
}

#[test]
fn every_fixture_opens_with_a_summary_that_fits_one_screen() {
    for f in fixtures() {
        let path = f.to_str().unwrap();
        let text = report(path, &[]);
        let head = first_screen(&text);
        assert!(
            head.len() <= SCREEN,
            "{path}: the summary is {} lines:\n{}",
            head.len(),
            head.join("\n")
        );
        let has = |p: &str| head.iter().any(|l| l.starts_with(p));
        assert!(has("iosleuth report: "), "{path}: no span line");
        assert!(
            has("operations") && has("devices") && has("findings"),
            "{path}: the summary lacks operations, devices or findings:\n{}",
            head.join("\n")
        );
    }
}

#[test]
fn the_summary_holds_the_figures_of_the_sections_below() {
    let rep = json_report(&["tests/fixtures/slowdev-fsync.cap"], &[]);
    let text = report("tests/fixtures/slowdev-fsync.cap", &[]);
    let head = first_screen(&text).join("\n");
    let fsync = &rep["syscalls"]["operations"]["fsync"]["latency"];
    let line = head
        .lines()
        .find(|l| l.trim_start().starts_with("probe fsync"))
        .unwrap_or_else(|| panic!("no probe fsync row:\n{head}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[2], "120", "{line}");
    let ms = |k: &str| format!("{:.3}", fsync[k].as_f64().unwrap() / 1e6);
    assert_eq!(&cols[3..6], &[ms("p50"), ms("p99"), ms("max")], "{line}");
    let dev = &rep["devices"][0];
    let line = head
        .lines()
        .find(|l| l.trim_start().starts_with("loop0 (7,0)"))
        .unwrap_or_else(|| panic!("no loop0 row:\n{head}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    let p99 = |k: &str| format!("{:.3}", dev[k]["p99"].as_f64().unwrap() / 1e6);
    assert_eq!(
        (cols[4], cols[5]),
        (p99("q2c").as_str(), p99("d2c").as_str()),
        "{line}"
    );
    // Rates and %util over the trace's span: the iostat "all" row's.
    let total = &dev["iostat_total"];
    assert_eq!(
        cols[6],
        format!("{:.1}", total["%util"].as_f64().unwrap()),
        "{line}"
    );
    let iops = total["r/s"].as_f64().unwrap()
        + total["w/s"].as_f64().unwrap()
        + total["d/s"].as_f64().unwrap_or(0.0);
    assert_eq!(cols[2], format!("{iops:.1}"), "{line}");
    let text_all = text
        .lines()
        .find(|l| l.trim_start().starts_with("all "))
        .expect("the iostat all row");
    let all: Vec<&str> = text_all.split_whitespace().collect();
    assert_eq!(
        all[12],
        format!("{:.2}", total["%util"].as_f64().unwrap()),
        "{text_all}"
    );
    // The finding's title and its advice, and the rules that could not judge.
    let f = &rep["findings"][0];
    assert!(head.contains(&format!(
        "CRITICAL device_latency_spike: {}",
        f["title"].as_str().unwrap()
    )));
    assert!(head.contains(&format!("    try: {}", f["workaround"].as_str().unwrap())));
    assert!(head.contains("not judged, 6 of 15 rules: dirty_throttling, wbt_throttling, cgroup_io_throttle, readahead_small, page_cache_thrashing, io_uring_punted"), "{head}");
    assert!(head.contains(
        "not recorded: the writeback, readahead, irq, workqueue, io_uring, faults, cache events"
    ));
}

#[test]
fn sixty_five_writers_are_a_few_lines_and_all_of_them_with_all() {
    let path = "tests/fixtures/journal-4m.cap";
    let text = report(path, &[]);
    assert!(
        text.lines().count() <= 300,
        "{} lines",
        text.lines().count()
    );
    // No line twice but blank ones, banners and histograms.
    let mut seen = std::collections::HashSet::new();
    for l in text.lines().filter(|l| {
        !l.trim().is_empty()
            && !l.starts_with("====")
            && !l.contains(" -> ")
            && !l.contains("distribution")
    }) {
        assert!(seen.insert(l), "{path}: printed twice: {l}");
    }
    assert!(
        text.contains("workload threads iosleuth, 65 of them (6146-6210): SCHED_OTHER rt_priority 0, nice 0, CPUs 0-1"),
        "{}",
        text.lines().filter(|l| l.contains("workload thread")).collect::<Vec<_>>().join("\n")
    );
    let rest = text
        .lines()
        .find(|l| l.starts_with("… and "))
        .expect("a line for the threads not shown");
    assert!(rest.starts_with("… and 62 more with p50 "), "{rest}");
    let all = report(path, &["--all"]);
    let rows = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("iosleuth (") && l.contains("  "))
            .count()
    };
    assert_eq!(rows(&text), 5);
    // 64 writers (the probe's 65th thread, 6146, starts them and does not
    // fsync) and three kworkers: one row each.
    assert_eq!(rows(&all), 64);
    assert_eq!(
        all.lines()
            .filter(|l| l.starts_with("kworker/") && !l.ends_with(':'))
            .count(),
        3
    );
    assert!(!all.contains("… and 62 more"));
}

#[test]
fn times_are_seconds_from_the_trace_start() {
    let rep = json_report(&["tests/fixtures/slowdev-fsync.cap"], &[]);
    let first = rep["span"]["first_ns"].as_u64().unwrap();
    let slowest = &rep["outliers"]["by_kind"]["probe fsync"][0];
    let rel = slowest["start_ns"].as_u64().unwrap() - first;
    let text = report("tests/fixtures/slowdev-fsync.cap", &[]);
    assert!(
        text.contains(&format!("at {}  151.3 ms probe fsync", secs(rel))),
        "{}",
        text.lines()
            .filter(|l| l.contains("151.3 ms probe fsync"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(text.starts_with(&format!(
        "iosleuth report: 0.336 s of trace, 12168 events from 2 inputs; times are seconds from the trace's start ({} on the trace clock)",
        secs(first)
    )));
}

#[test]
fn each_event_set_not_recorded_is_named_once_with_what_it_would_show() {
    let text = report("tests/fixtures/slowdev-fsync.cap", &[]);
    let section = text
        .split("==================== Not recorded ====================")
        .nth(1)
        .expect("a Not recorded section")
        .split("\n\n")
        .nth(1)
        .unwrap();
    let sets: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        sets,
        [
            "writeback",
            "readahead",
            "irq",
            "workqueue",
            "io_uring",
            "faults",
            "cache"
        ],
        "{section}"
    );
    assert!(section.contains(
        "(record them: iosleuth record --events writeback,readahead,irq,workqueue,io_uring,faults,cache)"
    ));
    // A capture with every set has no such section.
    let rep = json_report(&["tests/fixtures/cgroup-throttled.cap"], &[]);
    let missing = rep["not_recorded"].as_array().map_or(0, |a| a.len());
    let text = report("tests/fixtures/cgroup-throttled.cap", &[]);
    assert_eq!(text.contains("==== Not recorded ===="), missing > 0);
}

#[test]
fn a_time_window_keeps_the_trace_start_as_the_origin() {
    let text = report("tests/fixtures/slowdev-fsync.cap", &["--time", "0.1..0.2"]);
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("iosleuth report: 0.0")
            && first.contains(" s of trace (0.10")
            && first.contains("(14277.843213642 on the trace clock)"),
        "{first}"
    );
    // Every time printed lies in the window, counted from the trace's start.
    let mut seen = 0;
    for l in text.lines() {
        for at in l.split(" at ").skip(1) {
            let t: String = at
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let Ok(t) = t.parse::<f64>() else { continue };
            assert!((0.1..=0.2).contains(&t), "{l}");
            seen += 1;
        }
    }
    assert!(seen > 10, "{text}");
}

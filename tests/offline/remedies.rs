//! Findings' remedies as data, from committed captures, and what `iosleuth
//! try` refuses before changing anything (no root needed for either).

use crate::common::{json_report, outcome};

/// The finding `id` in `cap`'s JSON report.
fn finding(cap: &str, id: &str) -> serde_json::Value {
    let rep = json_report(&[cap], &[]);
    rep["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("{cap}: no {id}"))
        .clone()
}

/// Its remedy.
fn remedy(cap: &str, id: &str) -> serde_json::Value {
    finding(cap, id)["remedy"].clone()
}

#[test]
fn each_setting_cause_carries_its_knob_its_value_then_and_the_value_to_try() {
    for (cap, id, knob, now, value) in [
        (
            "tests/fixtures/light-merges-bad.cap",
            "merges_disabled",
            "/sys/block/loop0/queue/nomerges",
            "2",
            "0",
        ),
        (
            "tests/fixtures/split-maxsectors16.cap",
            "request_splitting",
            "/sys/block/loop0/queue/max_sectors_kb",
            "16",
            "1280",
        ),
        (
            "tests/fixtures/wbt-target10us.cap",
            "wbt_throttling",
            "/sys/block/loop0/queue/wbt_lat_usec",
            "10",
            "0",
        ),
        (
            "tests/fixtures/sched-bfq.cap",
            "scheduler_overhead",
            "/sys/block/loop0/queue/scheduler",
            "bfq",
            "none",
        ),
        // vm.dirty_bytes refuses 0: the ratio is set, which clears it.
        (
            "tests/fixtures/dirty-throttle.cap",
            "dirty_throttling",
            "vm.dirty_ratio",
            "0",
            "20",
        ),
    ] {
        let r = remedy(cap, id);
        assert_eq!(r["live"], true, "{cap}: {r}");
        let s = &r["settings"][0];
        assert_eq!(s["knob"], knob, "{cap}: {r}");
        assert_eq!(s["now"], now, "{cap}: {r}");
        assert_eq!(s["value"], value, "{cap}: {r}");
        assert_eq!(r["settings"].as_array().unwrap().len(), 1, "{cap}: {r}");
        // The figure the finding is about, which `try` judges by: the
        // requests where merging or splitting changes their number, the
        // average queue-to-completion time where a scheduler holds
        // requests back (its p99 of a few hundred swings round to round);
        // wbt's by the workload's time (it trades the writers' time for
        // the reads' latency).
        let judged = match id {
            "merges_disabled" | "request_splitting" => Some("dev.7,0.requests"),
            "scheduler_overhead" => Some("dev.7,0.q2c.avg_ms"),
            _ => None,
        };
        assert_eq!(r["metric"].as_str(), judged, "{cap}: {r}");
    }
    // A cgroup v1 limit: the device's line, lifted.
    let r = remedy("tests/fixtures/cgroup-throttled.cap", "cgroup_io_throttle");
    let s = &r["settings"][0];
    assert!(
        s["knob"]
            .as_str()
            .unwrap()
            .ends_with("/blkio.throttle.read_bps_device"),
        "{r}"
    );
    assert_eq!(s["now"], "7:0 4194304");
    assert_eq!(s["value"], "7:0 0");
    // A real-time thread that held the CPU: made an ordinary one. Its
    // policy then (FIFO or RR) is not in the trace: unknown, not a value.
    for cap in [
        "tests/fixtures/rt-burner.cap",
        "tests/fixtures/light-rt.cap",
    ] {
        let f = finding(cap, "rt_starvation");
        let r = &f["remedy"];
        let holder = f["evidence"]["held_by"][0]["pid"].as_u64().unwrap();
        assert_eq!(
            r["settings"],
            serde_json::json!([{"knob": format!("task/{holder}/policy"), "now": null, "value": "other"}]),
            "{cap}: {r}"
        );
        assert_eq!(r["live"], true);
    }
    // Ordinary threads beside the workload that held its CPU: reniced to
    // 10, each from the nice value its kernel priority says (120 + nice).
    let r = remedy("tests/fixtures/cpu-contention-nice.cap", "cpu_contention");
    let knobs: Vec<_> = r["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["knob"].as_str().unwrap(),
                s["now"].as_str().unwrap(),
                s["value"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        knobs,
        [
            ("task/15613/nice", "0", "10"),
            ("task/15899/nice", "-10", "10"),
            ("task/15900/nice", "-10", "10")
        ],
        "{r}"
    );
}

#[test]
fn a_workaround_that_is_no_setting_has_no_remedy_and_a_journal_none_live() {
    assert!(remedy("tests/fixtures/slowdev-fsync.cap", "device_latency_spike").is_null());
    let j = remedy("tests/fixtures/journal-4m.cap", "journal_space_stall");
    assert_eq!(j["live"], false);
    assert!(j["not_live"].as_str().unwrap().contains("unmounted"), "{j}");
    // A capture from before snapshots read journals: no size to try (the
    // lab's live test reads it from a capture that has it).
    assert_eq!(j["settings"].as_array().unwrap().len(), 0);
    assert_eq!(j["metric"], "workload.ms_per_op");
}

/// `try ARGS -- true` exits 2, saying `said`, and prints nothing else.
fn refused(args: &[&str], said: &str) {
    let mut argv = vec!["try"];
    argv.extend(args);
    argv.extend(["--", "true"]);
    let o = outcome(&argv);
    assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
    assert!(o.stderr.contains(said), "{args:?}: {}", o.stderr);
    assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
}

#[test]
fn try_says_why_a_finding_cannot_be_tried_and_exits_2() {
    for (args, said) in [
        (
            vec!["tests/fixtures/slowdev-fsync.cap"],
            "no finding has a remedy try can apply live (device_latency_spike: no setting to try)",
        ),
        (
            vec![
                "tests/fixtures/slowdev-fsync.cap",
                "--finding",
                "device_latency_spike",
            ],
            "device_latency_spike has no setting to try",
        ),
        (
            vec![
                "tests/fixtures/journal-4m.cap",
                "--finding",
                "journal_space_stall",
            ],
            "journal_space_stall's remedy cannot be applied to a running system",
        ),
        (
            vec!["tests/fixtures/journal-4m.cap", "--finding", "no_such_rule"],
            "no finding no_such_rule",
        ),
    ] {
        refused(&args, said);
    }
}

#[test]
fn try_reads_a_json_report_as_it_reads_the_capture() {
    let dir = tempfile::tempdir().unwrap();
    let rep = dir.path().join("report.json");
    std::fs::write(
        &rep,
        serde_json::to_string(&json_report(&["tests/fixtures/journal-4m.cap"], &[])).unwrap(),
    )
    .unwrap();
    for src in [rep.to_str().unwrap(), "tests/fixtures/journal-4m.cap"] {
        let o = outcome(&["try", src, "--", "true"]);
        assert_eq!(o.code, 2, "{src}: {}", o.stderr);
        assert!(
            o.stderr.contains(
                "no finding has a remedy try can apply live (journal_space_stall: its remedy cannot be applied to a running system)"
            ),
            "{src}: {}",
            o.stderr
        );
    }
}

#[test]
fn try_refuses_what_is_no_setting_and_a_round_count_too_small_to_judge() {
    for (args, said) in [
        (vec!["--set", "/etc/hostname=x"], "not a setting"),
        (vec!["--set", "vm.no_such_sysctl_here=1"], "no such setting"),
        (vec!["--set", "noequals"], "expected KNOB=VALUE"),
        (
            vec!["--set", "task/x/policy=other"],
            "\"x\" is not a thread id",
        ),
        (
            vec!["--set", "task/1/weight=0"],
            "a thread's setting is task/TID/policy, task/TID/affinity or task/TID/nice",
        ),
        (
            vec!["--set", "task/1/policy=fifo"],
            "fifo needs a priority (1 to 99)",
        ),
        (vec!["--set", "task/1/affinity=0-"], "not a CPU list"),
        (vec!["--set", "task/1/nice=20"], "a nice value is -20 to 19"),
    ] {
        refused(&args, said);
    }
    let o = outcome(&[
        "try",
        "--rounds",
        "1",
        "--set",
        "vm.dirty_ratio=20",
        "--",
        "true",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
}

/// The plan of a sysctl every Linux machine has: printed, nothing changed.
#[test]
fn a_dry_run_prints_the_plan_and_changes_nothing() {
    let before = std::fs::read_to_string("/proc/sys/vm/dirty_ratio").unwrap();
    let o = outcome(&["try", "--set", "vm.dirty_ratio=37", "--", "true"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains(&format!("vm.dirty_ratio: {} -> 37", before.trim())),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("dry run, nothing changed"),
        "{}",
        o.stdout
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/dirty_ratio").unwrap(),
        before
    );
    let o = outcome(&[
        "try",
        "--format",
        "json",
        "--set",
        "vm.dirty_ratio=37",
        "--",
        "true",
    ]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["applied"], false);
    assert_eq!(v["plan"]["changes"][0]["file"], "/proc/sys/vm/dirty_ratio");
    assert_eq!(v["plan"]["changes"][0]["tried"], "37");
}

/// A remedy that cannot be applied live is measured by a workload that
/// sets up its candidate side itself: the plan says what it makes and
/// that try changes nothing.
#[test]
fn a_journal_remedy_is_planned_for_a_workload_that_sets_up_its_sides() {
    let o = outcome(&[
        "try",
        "tests/fixtures/journal-4m.cap",
        "--workload-applies",
        "--",
        "true",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("iosleuth try: the remedy of journal_space_stall in tests/fixtures/journal-4m.cap — dry run")
            && o.stdout.contains("the workload sets up each side itself (IOSLEUTH_TRY_SIDE=baseline or candidate)"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("judged by: the workload's time and workload.ms_per_op"),
        "{}",
        o.stdout
    );
    let o = outcome(&[
        "try",
        "tests/fixtures/journal-4m.cap",
        "--workload-applies",
        "--format",
        "json",
        "--",
        "true",
    ]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["plan"]["changes"], serde_json::json!([]));
    assert_eq!(v["plan"]["by_workload"], serde_json::json!([]));
    assert_eq!(v["plan"]["finding"], "journal_space_stall");
    // Without it, the remedy is refused, saying how it can be measured.
    let o = outcome(&[
        "try",
        "tests/fixtures/journal-4m.cap",
        "--finding",
        "journal_space_stall",
        "--",
        "true",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--workload-applies"), "{}", o.stderr);
    // An A/B of the user's own: no finding, no setting.
    let o = outcome(&["try", "--workload-applies", "--", "true"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains(
            "the workload sets up each side itself (IOSLEUTH_TRY_SIDE=baseline or candidate)"
        ),
        "{}",
        o.stdout
    );
}

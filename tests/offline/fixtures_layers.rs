//! Analyses across layers on real captures: tests/fixtures/slowdev-fsync.cap
//! was recorded (scripts/make-fixtures) with `iosleuth record --events
//! block,fs,sched,syscalls` around `iosleuth probe fsync --count 120` on
//! ext4 over a loop device whose FUSE-served file held every 10th journal
//! write for 150 ms (tests/live/slow_device.rs).

use crate::common;

use common::*;
use std::collections::HashMap;

fn slowdev() -> std::path::PathBuf {
    std::path::PathBuf::from("tests/fixtures/slowdev-fsync.cap")
}

#[test]
fn case4_spikes_are_device_time_of_a_journal_write_with_the_cpu_idle() {
    let rep = json_report(&[&slowdev()], &[]);
    assert_eq!(rep["syscalls"]["operations"]["fsync"]["count"], 120);
    let slow = assert_slow_fsyncs_are_journal_device_time(&rep, 90.0, Idle::Each);
    assert!(slow >= 2, "{:#}", rep["outliers"]);
    // --top bounds every kind's list.
    let rep2 = json_report(&[&slowdev()], &["--top", "2"]);
    for (kind, list) in rep2["outliers"]["by_kind"].as_object().unwrap() {
        assert!(list.as_array().unwrap().len() <= 2, "{kind}");
    }
    // The text report says it in one line.
    let text = run(iosleuth().arg("report").arg(slowdev()));
    let line = text
        .lines()
        .find(|l| l.contains("ms probe fsync: 99."))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("device (journal write 7,0"), "{line}");
    assert!(line.contains("by jbd2/loop0-8"), "{line}");
}

#[test]
fn journal_commits_phases_and_requests() {
    let rep = json_report(&[&slowdev()], &[]);
    let j = &rep["fs"]["journals"]["7,0"];
    let commits = j["commits"].as_u64().unwrap();
    assert!(commits >= 5, "{j:#}");
    // Each commit wrote its descriptor, blocks and commit record, with a
    // flush, and its logging phase holds the device time.
    assert!(
        j["journal_writes_per_commit"].as_f64().unwrap() >= 2.0,
        "{j:#}"
    );
    assert!(j["flushes_per_commit"].as_f64().unwrap() >= 1.0, "{j:#}");
    let slowest = &j["slowest_commits"][0];
    let total = slowest["total_ns"].as_u64().unwrap();
    assert!(total > 140_000_000, "{slowest}");
    assert!(
        slowest["logging_ns"].as_u64().unwrap() as f64 > 0.9 * total as f64,
        "{slowest}"
    );
    let phases = &j["phases"];
    assert_eq!(phases["total"]["count"], commits);
    assert!(j["handle_starts"]["inode"].as_u64().unwrap() > 0, "{j:#}");
    // The slowest fsync in the filesystem is one of the held commits.
    let f = &rep["fs"]["slowest_fsyncs"][0];
    assert!(f["latency_ns"].as_u64().unwrap() > 140_000_000, "{f}");
    assert_eq!(f["dev"], "7,0");
}

/// bcc-style counting, done here independently: each sys_exit_fsync pairs
/// with the same thread's sys_enter_fsync; the µs latency goes to slot
/// floor(log2(us)) + 1 (0 into the first).
#[test]
fn fsync_histogram_equals_bcc_style_counting_of_the_same_events() {
    let out = run(iosleuth().arg("dump").arg(slowdev()).args([
        "--events",
        "sys_enter_fsync,sys_exit_fsync",
        "--format",
        "json",
    ]));
    let mut start: HashMap<u64, u64> = HashMap::new();
    let mut slots: HashMap<u64, u64> = HashMap::new();
    for l in out.lines() {
        let e: serde_json::Value = serde_json::from_str(l).unwrap();
        let (pid, ts) = (e["pid"].as_u64().unwrap(), e["ts"].as_u64().unwrap());
        if e["event"] == "syscalls:sys_enter_fsync" {
            start.insert(pid, ts);
        } else if let Some(s) = start.remove(&pid) {
            let us = (ts - s) / 1000;
            let low = if us <= 1 {
                0
            } else {
                1u64 << (63 - us.leading_zeros())
            };
            *slots.entry(low).or_default() += 1;
        }
    }
    let rep = json_report(&[&slowdev()], &[]);
    let hist = rep["syscalls"]["by_name"]["fsync"]["hist_us"]
        .as_array()
        .unwrap();
    let ours: HashMap<u64, u64> = hist
        .iter()
        .filter(|r| r["count"].as_u64().unwrap() > 0)
        .map(|r| (r["low"].as_u64().unwrap(), r["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(ours, slots);
    assert_eq!(slots.values().sum::<u64>(), 120);
}

#[test]
fn pid_and_comm_filters_keep_only_those_threads() {
    let all = json_report(&[&slowdev()], &[]);
    let pid = all["outliers"]["by_kind"]["probe fsync"][0]["pid"]
        .as_u64()
        .unwrap();
    let only = json_report(&[&slowdev()], &["--pid", &pid.to_string()]);
    for (kind, list) in only["outliers"]["by_kind"].as_object().unwrap() {
        for o in list.as_array().unwrap() {
            assert_eq!(o["pid"], pid, "{kind}");
        }
    }
    for t in only["sched"]["threads"].as_array().unwrap() {
        assert_eq!(t["pid"], pid);
    }
    let procs: Vec<&String> = only["syscalls"]["by_process"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(procs, [&format!("iosleuth ({pid})")]);
    // By name: the journal thread's fsync-free life has no outliers of the
    // probe, but its scheduler row is there.
    let jbd2 = json_report(&[&slowdev()], &["--comm", "jbd2/loop0-8"]);
    assert!(jbd2["outliers"]["by_kind"].as_object().unwrap().is_empty());
    let rows = jbd2["sched"]["threads"].as_array().unwrap();
    assert!(!rows.is_empty() && rows.iter().all(|t| t["comm"] == "jbd2/loop0-8"));
}

#[test]
fn gaps_find_case4_spike_in_its_excerpt_and_in_the_lab() {
    // The excerpt of case 4: CPU 0 was silent for 184 ms after mmcqd slept.
    let rep = json_report(&["tests/fixtures/seeds/case4-ftrace-sched.txt"], &[]);
    let g = &rep["gaps"]["cpus"]["0"][0];
    assert_eq!(g["gap_ns"], 184_151_000u64, "{g}");
    assert_eq!(g["start_ns"], 1_384_282_432_000u64);
    assert_eq!(g["before"], "sched_switch");
    assert_eq!(g["after"], "workqueue_queue_work");
    // The lab: the probe's thread was silent for the 150 ms of a held write.
    let rep = json_report(&[&slowdev()], &[]);
    let probe = rep["syscalls"]["operations"]["fsync"]["count"]
        .as_u64()
        .unwrap();
    assert_eq!(probe, 120);
    let t = rep["gaps"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["comm"] == "iosleuth" && t["gap"]["gap_ns"].as_u64().unwrap() > 140_000_000)
        .unwrap_or_else(|| panic!("{:#}", rep["gaps"]));
    assert_eq!(t["gap"]["before"], "sched:sched_switch", "{t}");
}

/// tests/fixtures/rt-burner.cap: `iosleuth record --events sched` around a
/// SCHED_FIFO 50 burner on CPU 1 (150 ms on, 250 ms off) and a thread
/// pinned to CPU 1 that works 0.2 ms every 2 ms (tests/live/sched.rs).
#[test]
fn case3_rt_burner_holds_the_victims_cpu() {
    let rep = json_report(&["tests/fixtures/rt-burner.cap"], &[]);
    assert_rt_burner_starves_the_victim(&rep);
    // The burner's own row: RT priority, and it ran for its bursts.
    let threads = rep["sched"]["threads"].as_array().unwrap();
    let burner = threads
        .iter()
        .find(|t| t["prio"] == 49)
        .unwrap_or_else(|| panic!("{threads:#?}"));
    assert!(
        burner["runtime_ns"].as_u64().unwrap() > 400_000_000,
        "{burner}"
    );
    // The probe's operations were slowed by it: the slowest burst is
    // mostly runnable time with the CPU held by the burner.
    let worst = &rep["outliers"]["by_kind"]["probe burst"][0];
    assert!(
        worst["percent"]["runnable"].as_f64().unwrap() > 90.0,
        "{worst:#}"
    );
    assert_eq!(worst["held_by"][0]["prio"], 49, "{worst:#}");
    assert!(
        worst["summary"].as_str().unwrap().contains(", RT)"),
        "{worst:#}"
    );
}

/// tests/fixtures/journal-{4,1024}m.cap: the journal's and fsync's events
/// (jbd2 commits, run stats, checkpoints; ext4_sync_file) for 0.4 s of 64
/// threads of random buffered 16 KiB writes with fsync, on ext4 with a
/// 4 MiB and with a 1 GiB journal (tests/live/journal.rs).
#[test]
fn case2_small_journal_is_checkpointed_by_the_writers() {
    let small = json_report(&["tests/fixtures/journal-4m.cap"], &[]);
    let large = json_report(&["tests/fixtures/journal-1024m.cap"], &[]);
    // Counted here from the events themselves, too.
    let count = |cap: &str, event: &str| {
        run(iosleuth().arg("dump").arg(cap).args(["--events", event]))
            .lines()
            .count() as u64
    };
    let js = &small["fs"]["journals"]["7,0"];
    let jl = &large["fs"]["journals"]["7,0"];
    assert_eq!(
        js["commits"].as_u64().unwrap(),
        count("tests/fixtures/journal-4m.cap", "jbd2_end_commit")
    );
    let passes = js["checkpoints"]["passes"].as_u64().unwrap();
    assert_eq!(
        passes,
        count("tests/fixtures/journal-4m.cap", "jbd2_checkpoint")
    );
    assert!(passes >= 10, "{js:#}");
    // Every pass ran in a writer thread (named from the snapshot: this
    // capture has no scheduler events): writers waited for journal space.
    let by = js["checkpoints"]["by_process"].as_object().unwrap();
    let by_writers: u64 = by
        .iter()
        .filter(|(k, _)| k.starts_with("iosleuth ("))
        .map(|(_, v)| v.as_u64().unwrap())
        .sum();
    assert_eq!(by_writers, passes, "{by:?}");
    assert_eq!(jl["checkpoints"]["passes"], 0, "{jl:#}");
    // The writers' fsyncs: slower at the tail with the small journal.
    let p99 = |r: &serde_json::Value| r["fs"]["fsync"]["latency"]["p99"].as_u64().unwrap();
    assert!(
        p99(&small) as f64 > 1.5 * p99(&large) as f64,
        "{} vs {}",
        p99(&small),
        p99(&large)
    );
    // The text says who checkpointed.
    let text = run(iosleuth()
        .arg("report")
        .arg("tests/fixtures/journal-4m.cap"));
    assert!(text.contains("checkpointed by iosleuth ("), "{text}");
}

#[test]
fn case4_excerpt_workqueue_items_and_their_wait() {
    let rep = json_report(&["tests/fixtures/seeds/case4-ftrace-sched.txt"], &[]);
    let f = rep["workqueue"]["functions"].as_array().unwrap();
    let get = |name: &str| {
        f.iter()
            .find(|x| x["function"] == name)
            .unwrap_or_else(|| panic!("{f:#?}"))
    };
    // Queued by the idle CPU's timer softirq, run by kworker/0:1.
    let cursor = get("fb_flashcursor");
    assert_eq!(cursor["runs"], 1);
    assert_eq!(cursor["run_time_ns"], 5_000);
    assert_eq!(cursor["wait"]["max"], 33_000);
    assert_eq!(cursor["workers"][0], "kworker/0:1 (1572)");
    assert_eq!(get("phy_state_machine")["wait"]["max"], 29_000);
}

/// Flushes all sit at sector 0: a writer that waited through a short flush
/// and then a long one waited for the long one, with its own D2C (the two
/// were once taken for one request, whose completion was then lost).
#[test]
fn a_flush_after_a_flush_is_another_request() {
    let rep = json_report(&["tests/fixtures/flush-after-flush.synthetic.txt"], &[]);
    let o = &rep["outliers"]["by_kind"]["syscall pwrite64"][0];
    let r = &o["main_request"];
    assert_eq!(r["class"], "flush", "{o:#}");
    assert_eq!(r["comm"], "kworker/0:1H", "{o:#}");
    assert_eq!(r["d2c_ns"], 60_000_000, "{o:#}");
    assert_eq!(r["overlap_ns"], 60_000_000, "{o:#}");
    // Both flushes were device time.
    assert_eq!(o["breakdown"]["device_ns"]["flush"], 60_250_000, "{o:#}");
}

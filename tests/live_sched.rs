//! Live: a thread pinned to a CPU that a SCHED_FIFO burner (on 150 ms,
//! off 250 ms) shares. iosleuth's capture and `perf sched record` run at
//! the same time; iosleuth finds the victim's runnable waits of about the
//! burner's on-time, names the burner with its policy and priority, and
//! its per-thread maximum delays equal `perf sched timehist`'s.

mod common;

use common::*;
use std::collections::HashMap;
use std::process::Command;

/// Per thread id: the largest "sch delay" of `perf sched timehist` (ms).
fn timehist_max_delays(perf_data: &std::path::Path) -> HashMap<u32, f64> {
    let out = run(Command::new("perf")
        .args(["sched", "timehist", "-i"])
        .arg(perf_data));
    let mut max: HashMap<u32, f64> = HashMap::new();
    for l in out.lines().skip(3) {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 6 {
            continue;
        }
        // `name[tid]` or `name[tid/pid]`
        let Some(tid) = w[2]
            .rsplit_once('[')
            .and_then(|(_, t)| t.trim_end_matches(']').split('/').next()?.parse().ok())
        else {
            continue;
        };
        let Ok(delay) = w[4].parse::<f64>() else {
            continue;
        };
        let m = max.entry(tid).or_default();
        *m = m.max(delay);
    }
    max
}

#[test]
fn rt_burner_starves_a_pinned_thread_and_agrees_with_perf() {
    if !live() {
        return;
    }
    if Command::new("perf").arg("version").output().is_err() {
        assert!(
            std::env::var("CI").is_err(),
            "perf is missing (apt-get install linux-perf)"
        );
        eprintln!("skipped: perf is not installed");
        return;
    }
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let perf_data = dir.path().join("perf.data");
    let bin = env!("CARGO_BIN_EXE_iosleuth");
    // The victim sleeps 2 ms at a time on CPU 1, the burner holds CPU 1.
    let script = format!(
        "{bin} probe burn --cpu 1 --fifo 50 --on-ms 150 --off-ms 250 --duration 1.3 >/dev/null & \
         taskset -c 1 {bin} probe burn --on-ms 0.2 --off-ms 2 --duration 1.5 >/dev/null; wait"
    );
    let tracefs_mounts = || -> Vec<String> {
        std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.get(2) == Some(&"tracefs")).then(|| f[1].to_string())
            })
            .collect()
    };
    let tracefs_before = tracefs_mounts();
    run(Command::new("perf")
        .args(["sched", "record", "-q", "-o"])
        .arg(&perf_data)
        .args(["--", bin, "record", "-o"])
        .arg(&cap)
        .args(["--events", "sched", "--", "sh", "-c", &script]));
    // perf mounts tracefs and leaves it: put it back as found.
    for m in tracefs_mounts() {
        if !tracefs_before.contains(&m) {
            let _ = Command::new("umount").arg(&m).status();
        }
    }
    let rep = json_report(&[&cap], &[]);
    let s = &rep["sched"];
    let ops = &rep["syscalls"]["operations"]["burst"];
    assert!(ops["count"].as_u64().unwrap() > 100, "{ops}");

    // The victim's longest waits are the burner's bursts, and the burner
    // is named as RT with kernel priority 49 (SCHED_FIFO 50).
    let waits = s["long_waits"].as_array().unwrap();
    let victim_waits: Vec<&serde_json::Value> = waits
        .iter()
        .filter(|w| {
            w["comm"] == "iosleuth" && w["cpu"] == 1 && w["wait_ns"].as_u64().unwrap() > 50_000_000
        })
        .collect();
    assert!(victim_waits.len() >= 2, "{waits:#?}");
    for w in &victim_waits {
        let wait = w["wait_ns"].as_u64().unwrap();
        assert!(wait < 160_000_000, "about the burner's 150 ms on-time: {w}");
        let top = &w["held_by"][0];
        assert_eq!(top["policy"], "RT", "{w}");
        assert_eq!(top["prio"], 49, "{w}");
        assert!(
            top["ns"].as_u64().unwrap() as f64 > 0.95 * wait as f64,
            "{w}"
        );
    }

    // Agreement with perf sched timehist on the same run: each thread's
    // maximum delay, for every thread that waited at least 1 ms.
    let perf = timehist_max_delays(&perf_data);
    let mut compared = 0;
    for t in s["threads"].as_array().unwrap() {
        let ours = t["max_delay_ns"].as_u64().unwrap() as f64 / 1e6;
        // The workload's threads. (Kernel threads can differ under the
        // parallel test load: open work, see the README.)
        if ours < 1.0 || t["comm"] != "iosleuth" {
            continue;
        }
        let pid = t["pid"].as_u64().unwrap() as u32;
        let Some(&theirs) = perf.get(&pid) else {
            continue;
        };
        assert!(
            (ours - theirs).abs() <= 0.02 * theirs.max(ours),
            "{} ({pid}): max delay {ours} ms vs perf sched timehist {theirs} ms",
            t["comm"]
        );
        compared += 1;
    }
    assert!(compared >= 1, "threads compared with perf: {compared}");
}

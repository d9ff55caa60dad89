//! Live: a thread pinned to a CPU that a SCHED_FIFO burner (on 150 ms,
//! off 250 ms) shares. iosleuth's capture and `perf sched record` run at
//! the same time; iosleuth finds the victim's runnable waits of about the
//! burner's on-time, names the burner with its policy and priority, and
//! its per-thread maximum delays equal `perf sched timehist`'s.

use crate::common;

use common::*;
use std::collections::HashMap;
use std::process::Command;

/// A `sched_switch`'s CPU, prev and next pid, and time (s), from a line of
/// `perf script` or `iosleuth dump`.
fn switch_of(line: &str) -> Option<(String, u32, u32, f64)> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let pid = |key: &str| {
        w.iter()
            .find_map(|x| x.strip_prefix(key))
            .and_then(|v| v.parse().ok())
    };
    let cpu = w.iter().find(|x| x.starts_with('['))?.to_string();
    let ts = w.iter().find_map(|x| {
        x.trim_end_matches(':')
            .parse::<f64>()
            .ok()
            .filter(|t| *t > 1.0)
    })?;
    Some((cpu, pid("prev_pid=")?, pid("next_pid=")?, ts))
}

/// perf's clock minus ours: perf stamps with the scheduler clock, the
/// capture with `mono`. The most common difference of matching switches.
fn perf_clock_offset(perf_data: &std::path::Path, cap: &std::path::Path) -> f64 {
    let perf = run(perf()
        .args(["script", "-F", "cpu,time,event,trace", "-i"])
        .arg(perf_data));
    let ours = run(Command::new(env!("CARGO_BIN_EXE_iosleuth"))
        .arg("dump")
        .arg(cap)
        .args(["--events", "sched_switch", "--absolute"]));
    let mut at: HashMap<(String, u32, u32), Vec<f64>> = HashMap::new();
    for (cpu, a, b, ts) in perf
        .lines()
        .filter(|l| l.contains("sched_switch"))
        .filter_map(switch_of)
    {
        at.entry((cpu, a, b)).or_default().push(ts);
    }
    let mut diffs = Vec::new();
    for (cpu, a, b, ts) in ours.lines().filter_map(switch_of) {
        diffs.extend(at.get(&(cpu, a, b)).into_iter().flatten().map(|t| t - ts));
    }
    // The most common difference to 0.1 ms, then the median of those
    // near it (perf prints microseconds).
    let mut votes: HashMap<i64, usize> = HashMap::new();
    for d in &diffs {
        *votes.entry((d * 1e4).round() as i64).or_default() += 1;
    }
    let (best, n) = votes.into_iter().max_by_key(|&(_, n)| n).unwrap();
    assert!(n > 100, "switches matched between perf and iosleuth: {n}");
    let mut near: Vec<f64> = diffs
        .into_iter()
        .filter(|d| (d - best as f64 / 1e4).abs() <= 1e-4)
        .collect();
    near.sort_by(f64::total_cmp);
    near[near.len() / 2]
}

/// Per thread id: the largest runqueue delay of `perf sched timehist` among
/// the waits that lie inside [from, to] (perf's clock, s). timehist's "sch
/// delay" starts at a wakeup only; after a preemption (the thread left in
/// state R) the wait is its "wait time" column, as perf sched latency and
/// runqlat count it.
fn timehist_delays(
    perf_data: &std::path::Path,
    from: f64,
    to: f64,
) -> (HashMap<u32, f64>, Vec<f64>) {
    let out = run(perf()
        .args(["sched", "timehist", "--state", "-i"])
        .arg(perf_data));
    let mut max: HashMap<u32, f64> = HashMap::new();
    let mut all = Vec::new();
    let mut left_in: HashMap<u32, String> = HashMap::new();
    for l in out.lines().skip(3) {
        let w: Vec<&str> = l.split_whitespace().collect();
        // `name[tid]` or `name[tid/pid]`, where the name may hold spaces
        // ("LLVM worker 0", "kworker/u8:1-events unbound"): the task is
        // the first word after the CPU that ends in `[tid]`, and the
        // columns after it are counted from there.
        let tid_of = |word: &str| -> Option<u32> {
            let (_, t) = word.strip_suffix(']')?.rsplit_once('[')?;
            t.split('/').next()?.parse().ok()
        };
        let Some((k, tid)) = w
            .iter()
            .enumerate()
            .skip(2)
            .find_map(|(i, word)| Some((i, tid_of(word)?)))
        else {
            continue;
        };
        if w.len() < k + 5 {
            continue;
        }
        let num = |i: usize| w[i].parse::<f64>().ok();
        let (Some(out_at), Some(wait), Some(sch), Some(ran)) =
            (num(0), num(k + 1), num(k + 2), num(k + 3))
        else {
            continue;
        };
        let preempted = matches!(left_in.get(&tid).map(String::as_str), Some("R" | "W"));
        left_in.insert(tid, w[k + 4].to_string());
        let delay = if preempted { wait } else { sch };
        let came_in = out_at - ran / 1e3;
        if came_in - delay / 1e3 >= from && came_in <= to {
            let m = max.entry(tid).or_default();
            *m = m.max(delay);
            all.push(delay);
        }
    }
    (max, all)
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn rt_burner_starves_a_pinned_thread_and_agrees_with_perf() {
    let _live = live();
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
    run(perf()
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
    save_fixture(&cap, "rt-burner.cap");
    let rep = json_report(&[&cap], &[]);
    assert_rt_burner_starves_the_victim(&rep);
    let s = &rep["sched"];

    // Agreement with perf sched timehist on the same run: each thread of
    // the workload and of the recorder (kernel threads: open work, see
    // docs/report.md), by its maximum delay, over the time both recorded.
    let offset = perf_clock_offset(&perf_data, &cap);
    let first = rep["span"]["first_ns"].as_u64().unwrap() as f64 / 1e9;
    let last = rep["span"]["last_ns"].as_u64().unwrap() as f64 / 1e9;
    let (perf, perf_delays) =
        timehist_delays(&perf_data, first + offset - 2e-6, last + offset + 2e-6);
    // The recorder's own threads are left out: on a busy CPU the ring
    // buffer of the CPU a reader thread runs on has been seen to lack a
    // switch around that reader's wake-up (1.2-3.1 ms of delay where perf
    // saw under 0.1 ms, about one run in five, no loss counted): an open
    // question about the recorder's footprint, not the workload's waits.
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cap.join("iosleuth-capture.json")).unwrap())
            .unwrap();
    let recorder: Vec<u64> = manifest["recorder_tids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect();
    let mut compared = 0;
    for t in s["threads"].as_array().unwrap() {
        let ours = t["max_delay_ns"].as_u64().unwrap() as f64 / 1e6;
        let pid = t["pid"].as_u64().unwrap() as u32;
        let theirs = perf.get(&pid).copied().unwrap_or(0.0);
        if ours.max(theirs) < 1.0
            || recorder.contains(&(pid as u64))
            || !["iosleuth", "sh", "taskset"].contains(&t["comm"].as_str().unwrap())
        {
            continue;
        }
        if (ours - theirs).abs() > 0.02 * theirs.max(ours) {
            // What each tool saw of that thread, for the next person: its
            // scheduler events in the capture and perf's rows.
            let ours_lines = run(iosleuth().arg("dump").arg(&cap));
            let theirs_lines = run(common::perf()
                .args(["sched", "timehist", "--state", "-w", "-i"])
                .arg(&perf_data));
            let about = |text: &str, key: &str| -> String {
                let v: Vec<&str> = text.lines().filter(|l| l.contains(key)).collect();
                v[v.len().saturating_sub(60)..].join("\n")
            };
            panic!(
                "{} ({pid}): max delay {ours} ms vs perf sched timehist {theirs} ms\n-- iosleuth dump (last 60 lines naming {pid}):\n{}\n-- perf sched timehist -w (last 60 lines of [{pid}]):\n{}",
                t["comm"],
                about(&ours_lines, &pid.to_string()),
                about(&theirs_lines, &format!("[{pid}]"))
            );
        }
        compared += 1;
    }
    assert!(compared >= 1, "threads compared with perf: {compared}");

    // The runqueue latency histogram against perf's delays of the same
    // window: the waits of at least 64 µs, 256 µs, … 64 ms, counted on
    // both sides, within 2 % of all waits. (Each tool stamps its own copy
    // of an event, microseconds apart, and timehist prints microseconds:
    // shorter waits move between neighbouring buckets.)
    let ours: Vec<(u64, u64)> = s["runqlat_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["low"].as_u64().unwrap(), r["count"].as_u64().unwrap()))
        .collect();
    let total: u64 = ours.iter().map(|r| r.1).sum();
    for us in [64u64, 256, 1024, 4096, 16384, 65536] {
        let a = ours.iter().filter(|r| r.0 >= us).map(|r| r.1).sum::<u64>();
        let b = perf_delays
            .iter()
            .filter(|&&d| (d * 1000.0).round() as u64 >= us)
            .count() as u64;
        // A wait is two stamps, each a few µs apart between the tools (an
        // interrupt between the two probes, more under load): waits within
        // 10 µs of the boundary may fall on either side.
        let near = perf_delays
            .iter()
            .filter(|&&d| ((d * 1000.0) - us as f64).abs() <= 10.0)
            .count() as u64;
        if a.abs_diff(b) as f64 > 0.02 * total as f64 + 1.0 + near as f64 {
            // For the next person: the threads whose longest wait the two
            // tools put on either side of the bound.
            let split: Vec<String> = s["threads"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| {
                    let pid = t["pid"].as_u64()? as u32;
                    let ours_us = t["max_delay_ns"].as_u64()? / 1000;
                    let theirs_us = (perf.get(&pid).copied().unwrap_or(0.0) * 1000.0) as u64;
                    ((ours_us >= us) != (theirs_us >= us)).then(|| {
                        format!(
                            "{}[{pid}] iosleuth {ours_us} µs, perf {theirs_us} µs{}",
                            t["comm"].as_str().unwrap_or("?"),
                            if recorder.contains(&(pid as u64)) {
                                " (recorder)"
                            } else {
                                ""
                            }
                        )
                    })
                })
                .take(20)
                .collect();
            panic!(
                "waits ≥ {us} µs: iosleuth {a}, perf sched timehist {b} (of {total}; {near} within 10 µs of {us} µs); longest waits on either side of {us} µs:\n{}",
                split.join("\n")
            );
        }
    }
}

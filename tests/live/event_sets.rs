//! Live: each event set of `iosleuth record` on a real workload (write +
//! fsync, buffered writes and sync on ext4 over a loop device). Each set's
//! events appear with their decoded fields, and the block numbers of the
//! capture equal those of tracepoint text recorded during the same run.

use crate::common;

use crate::common::instance::InstanceSession;
use common::*;
use iosleuth::testing::Ext4;
use serde_json::Value;
use std::collections::HashMap;

/// `iosleuth dump --format json` of a capture: events grouped by short name.
fn dump(cap: &std::path::Path) -> HashMap<String, Vec<Value>> {
    let out = run(iosleuth().args(["dump", "--format", "json"]).arg(cap));
    let mut by: HashMap<String, Vec<Value>> = HashMap::new();
    for l in out.lines() {
        let v: Value = serde_json::from_str(l).expect("one JSON object per line");
        let name = v["event"].as_str().unwrap();
        let short = name.rsplit(':').next().unwrap().to_string();
        by.entry(short).or_default().push(v);
    }
    by
}

fn field<'a>(ev: &'a Value, name: &str) -> &'a Value {
    &ev["fields"][name]
}

fn count_where(evs: Option<&Vec<Value>>, f: impl Fn(&Value) -> bool) -> usize {
    evs.map(|v| v.iter().filter(|e| f(e)).count()).unwrap_or(0)
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn every_event_set_decodes_its_fields() {
    let _live = live();
    let dir = tempdir();
    let fs = Ext4::create(256, 8, true).expect("ext4 on a loop device");
    let dev = fs.disk.dev().unwrap();
    // The kernel's dev_t (MAJOR << 20 | MINOR), as `dump` decodes it.
    let kdev = format!("{},{}", dev.major(), dev.minor());
    let kdev = kdev.as_str();
    let bdi = format!("{}:{}", dev.major(), dev.minor());
    let script = format!(
        "{bin} probe fsync --size 8k --count 20 --path {m}/probe.dat && \
         dd if=/dev/zero of={m}/big bs=1M count=16 status=none && sync",
        bin = env!("CARGO_BIN_EXE_iosleuth"),
        m = fs.mnt.display()
    );
    for set in ["fs", "syscalls", "sched", "irq", "workqueue", "writeback"] {
        let cap = dir.path().join(format!("cap-{set}"));
        let text = dir.path().join(format!("text-{set}.txt"));
        let _ = std::fs::remove_file(fs.mnt.join("big"));
        // The delete's journal and discard I/O is done before recording.
        run(&mut std::process::Command::new("sync"));
        let tp =
            InstanceSession::start(block_events(), 16384, "mono", &text).expect("text instance");
        let out = run(iosleuth().arg("record").arg("-o").arg(&cap).args([
            "--events",
            &format!("block,{set}"),
            "--",
            "sh",
            "-c",
            &script,
        ]));
        let (_, lost) = tp.stop().unwrap();
        // Lost events would show as requests missing from the text.
        assert!(
            lost.is_empty(),
            "the tracepoint instance lost events (CPU, count): {lost:?}"
        );
        assert!(out.contains("write+fsync: 20 operations"), "{out}");

        // The same block events as the text of the same run: every one the
        // capture holds is in the text (same action, request, task); the
        // text instance runs a little longer, so its extra events lie at
        // the edges. (Each ring buffer stamps its own copy of an event, a
        // few microseconds apart: events are matched, not times.)
        let d = dev.to_string();
        let a = json_report(&[&cap], &["--device", &d]);
        let block_of = |p: &std::path::Path| -> Vec<(String, u64, Value)> {
            run(iosleuth().arg("dump").arg(p).args(["--format", "json"]))
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .filter(|e| {
                    e["event"].as_str().unwrap().starts_with("block:")
                        && e["fields"]["dev"] == d.as_str()
                })
                .map(|e| {
                    let key = format!(
                        "{} {} {} {} {}",
                        e["event"],
                        e["pid"],
                        e["fields"]["sector"],
                        e["fields"]["bytes"],
                        e["fields"]["rwbs"]
                    );
                    (key, e["ts"].as_u64().unwrap(), e)
                })
                .collect()
        };
        let ours = block_of(&cap);
        let mut theirs: HashMap<String, Vec<u64>> = HashMap::new();
        for (k, ts, _) in block_of(&text) {
            theirs.entry(k).or_default().push(ts);
        }
        let (first, last) = (ours[0].1, ours[ours.len() - 1].1);
        for (k, ts, e) in &ours {
            let list = theirs
                .get_mut(k)
                .unwrap_or_else(|| panic!("{set}: not in the text: {e}"));
            let i = list
                .iter()
                .enumerate()
                .min_by_key(|(_, t)| t.abs_diff(*ts))
                .map(|(i, _)| i)
                .unwrap();
            assert!(
                list[i].abs_diff(*ts) < 1_000_000,
                "{set}: {e} vs text at {}",
                list[i]
            );
            list.swap_remove(i);
        }
        for (k, list) in &theirs {
            for t in list {
                assert!(
                    *t < first + 100_000 || *t > last.saturating_sub(100_000),
                    "{set}: the text has {k} at {t}, inside the capture's {first}..{last}"
                );
            }
        }
        assert!(a["devices"][0]["actions"]["completed"].as_u64().unwrap() > 20);
        assert!(a["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["lost_events"] == 0));

        let ev = dump(&cap);
        let probe_pid = ev["print"][0]["pid"].clone();
        match set {
            "fs" => {
                let enters = count_where(ev.get("ext4_sync_file_enter"), |e| {
                    field(e, "dev") == kdev
                        && field(e, "datasync") == 0
                        && field(e, "ino").as_u64() > Some(0)
                });
                assert_eq!(
                    enters, 20,
                    "{set}: one ext4_sync_file_enter per fsync on this fs"
                );
                assert_eq!(
                    count_where(ev.get("ext4_sync_file_exit"), |e| field(e, "ret") == 0
                        && field(e, "dev") == kdev),
                    20
                );
                // Commits of this journal (an overwrite within the same
                // timestamp tick needs none): the stats name the transaction.
                let commits = count_where(ev.get("jbd2_run_stats"), |e| {
                    field(e, "dev") == kdev
                        && field(e, "tid").as_u64() > Some(0)
                        && field(e, "blocks").as_u64() > Some(0)
                        && field(e, "handle_count").as_u64() > Some(0)
                });
                assert!(
                    commits >= 1,
                    "{set}: {commits} jbd2_run_stats of this journal"
                );
                assert!(
                    count_where(ev.get("jbd2_start_commit"), |e| field(e, "dev") == kdev)
                        >= commits
                );
            }
            "syscalls" => {
                let fsyncs = count_where(ev.get("sys_enter_fsync"), |e| {
                    e["pid"] == probe_pid && field(e, "fd").as_i64() > Some(2)
                });
                assert_eq!(fsyncs, 20, "{set}: the probe's fsync calls with their fd");
                assert_eq!(
                    count_where(ev.get("sys_exit_fsync"), |e| e["pid"] == probe_pid
                        && field(e, "ret") == 0),
                    20
                );
                let writes = count_where(ev.get("sys_enter_pwrite64"), |e| {
                    e["pid"] == probe_pid && field(e, "count") == 8192 && field(e, "pos") == 0
                });
                assert_eq!(writes, 20, "{set}: 8 KiB at offset 0 each time");
                assert!(
                    count_where(ev.get("sys_enter_openat"), |e| field(e, "filename")
                        .is_i64()
                        || field(e, "filename").is_u64())
                        > 0
                );
            }
            "sched" => {
                assert!(
                    count_where(ev.get("sched_switch"), |e| *field(e, "prev_pid")
                        == probe_pid
                        && field(e, "prev_comm") == "iosleuth"
                        && field(e, "prev_state").as_i64().is_some()
                        && field(e, "next_pid").as_i64().is_some())
                        >= 20,
                    "{set}: the probe sleeps in each fsync"
                );
                assert!(
                    count_where(ev.get("sched_wakeup"), |e| *field(e, "pid") == probe_pid
                        && field(e, "target_cpu").as_i64().is_some())
                        >= 20
                );
                assert!(
                    count_where(ev.get("sched_process_fork"), |e| *field(e, "child_pid")
                        == probe_pid)
                        == 1
                );
                assert!(
                    count_where(ev.get("sched_process_exit"), |e| *field(e, "pid")
                        == probe_pid)
                        == 1
                );
                // A kernel thread of the I/O path: the journal's, or the
                // loop device's worker (jbd2 ran in all but one of the
                // runs seen; the loop worker serves every request).
                assert!(
                    count_where(ev.get("sched_switch"), |e| {
                        field(e, "next_comm")
                            .as_str()
                            .is_some_and(|c| c.starts_with("jbd2/") || c.starts_with("kworker/"))
                    }) > 0
                );
            }
            "irq" => {
                assert!(
                    count_where(ev.get("irq_handler_entry"), |e| field(e, "irq")
                        .as_i64()
                        .is_some()
                        && field(e, "name").as_str().is_some_and(|n| !n.is_empty()))
                        > 0
                );
                assert!(
                    count_where(ev.get("irq_handler_exit"), |e| field(e, "ret")
                        .as_i64()
                        .is_some())
                        > 0
                );
                // vec 4 is BLOCK: completions of the disk under the loop device.
                assert!(
                    count_where(ev.get("softirq_entry"), |e| field(e, "vec") == 4) > 0,
                    "{set}: BLOCK softirqs"
                );
                assert!(
                    count_where(ev.get("softirq_raise"), |e| field(e, "vec")
                        .as_i64()
                        .is_some())
                        > 0
                );
            }
            "workqueue" => {
                // Work functions are named from this machine's kallsyms,
                // stored in the capture.
                let started = count_where(ev.get("workqueue_execute_start"), |e| {
                    field(e, "function")
                        .as_str()
                        .is_some_and(|f| f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                        // A pointer, in hex as trace-cmd prints it.
                        && field(e, "work")
                            .as_str()
                            .is_some_and(|w| w.starts_with("0x") && w.len() > 2)
                });
                assert!(started > 0, "{set}: work items with their function");
                let wq = &json_report(&[&cap], &[])["workqueue"]["functions"];
                assert!(
                    wq.as_array()
                        .unwrap()
                        .iter()
                        .any(|f| f["function"] == "blk_mq_run_work_fn"
                            || f["function"] == "wb_workfn"),
                    "{set}: the block layer's or writeback's work: {wq:#}"
                );
                assert!(
                    count_where(ev.get("workqueue_queue_work"), |e| field(e, "workqueue")
                        .as_str()
                        .is_some()
                        || field(e, "workqueue").as_i64().is_some())
                        > 0
                );
            }
            "writeback" => {
                assert!(
                    count_where(ev.get("writeback_written"), |e| field(e, "name")
                        == bdi.as_str())
                        + count_where(ev.get("writeback_queue"), |e| field(e, "name")
                            == bdi.as_str())
                        > 0,
                    "{set}: writeback of this device ({bdi}): {:?}",
                    ev.keys().collect::<Vec<_>>()
                );
            }
            _ => unreachable!(),
        }
    }
}

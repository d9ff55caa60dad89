//! Live: `iosleuth record` (private instance, per-CPU trace_pipe_raw)
//! captures what the text interface shows for the same run, and leaves no
//! instance or enabled event behind.

use crate::common;

use crate::common::instance::InstanceSession;
use common::*;
use iosleuth::testing::LoopDevice;
use std::process::Command;

/// `iosleuth-PID-N` instances whose process is gone: what a recording left
/// behind. (Tests run in parallel: live recorders of other tests are fine.)
fn leftover_instances() -> Vec<String> {
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    let pid = n
                        .strip_prefix("iosleuth-")
                        .and_then(|r| r.split('-').next()?.parse::<i32>().ok());
                    pid.is_some_and(|p| unsafe { libc::kill(p, 0) } != 0)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn capture_matches_text_of_the_same_run() {
    let _live = live();
    let dir = tempdir();
    let mut disk = LoopDevice::create(128, true).expect("loop device");
    disk.set_queue("scheduler", "mq-deadline").unwrap();
    run(Command::new("dd")
        .arg("if=/dev/urandom")
        .arg(format!("of={}", disk.path.display()))
        .args(["bs=1M", "count=8", "oflag=direct", "status=none"]));
    let text = dir.path().join("text.txt");
    let cap = dir.path().join("cap");
    let tp = InstanceSession::start(block_events(), 16384, "mono", &text).expect("text instance");
    let mut rec = iosleuth();
    rec.arg("record")
        .arg("-o")
        .arg(&cap)
        .args(["--events", "block,sched", "--"]);
    let fio = fio_batched_reads(&disk.path, 8);
    rec.arg(fio.get_program()).args(fio.get_args());
    run(&mut rec);
    let (_, lost) = tp.stop().unwrap();
    // Lost events would show as requests missing from the text.
    assert!(
        lost.is_empty(),
        "the tracepoint instance lost events (CPU, count): {lost:?}"
    );
    assert!(
        leftover_instances().is_empty(),
        "instances left: {:?}",
        leftover_instances()
    );

    let dev = disk.dev().unwrap().to_string();
    let a = json_report(&[&cap], &["--device", &dev]);
    let b = json_report(&[&text], &["--device", &dev]);
    assert_eq!(
        a["inputs"][0]["format"],
        "iosleuth capture (ring-buffer pages)"
    );
    let (da, db) = (&a["devices"][0], &b["devices"][0]);
    assert_eq!(da["actions"], db["actions"], "same block events");
    assert_eq!(da["actions"]["queued"], 2048, "8 MiB of 4 KiB reads");
    assert_eq!(da["btt_merge"], db["btt_merge"]);
    for k in ["q2c", "d2c", "g2i", "i2d"] {
        assert_eq!(da["btt"][k]["n"], db["btt"][k]["n"], "{k} N");
    }
    let (x, y) = (
        da["d2c"]["avg"].as_f64().unwrap(),
        db["d2c"]["avg"].as_f64().unwrap(),
    );
    assert!((x - y).abs() / y < 0.01, "D2C {x} vs {y}");
    // The raw capture keeps nanoseconds; the text has microseconds.
    let first = da["btt"]["q2c"]["min_ns"].as_u64().unwrap();
    assert!(first % 1000 != 0 || da["btt"]["d2c"]["min_ns"].as_u64().unwrap() % 1000 != 0);
    // The sched set was recorded too, and analyzed.
    assert!(
        a["sched"]["switches"].as_u64().unwrap_or(0) > 0,
        "{}",
        a["sched"]
    );
    assert!(a["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["lost_events"] == 0));
    // The snapshot saw this device's settings and the workload's threads.
    let snap = &a["snapshot"];
    let q = &snap["before"]["block_devices"][disk.name.as_str()]["queue"];
    assert!(
        q["scheduler"].as_str().unwrap().contains("[mq-deadline]"),
        "{q}"
    );
    assert_eq!(q["nomerges"], "0");
    assert_eq!(
        snap["before"]["block_devices"][disk.name.as_str()]["dev"],
        dev.as_str()
    );
    let threads = snap["workload"]["threads"].as_array().unwrap();
    assert!(
        threads
            .iter()
            .any(|t| t["comm"] == "fio" && t["policy"] == "SCHED_OTHER"),
        "{threads:?}"
    );
    assert!(snap["after"]["proc"]["diskstats"]
        .as_str()
        .unwrap()
        .contains(&disk.name));
    let text = run(iosleuth().arg("report").arg(&cap).args(["--device", &dev]));
    assert!(
        text.contains(&format!(
            "{} ({dev}): scheduler mq-deadline, nomerges 0",
            disk.name
        )),
        "{text}"
    );
}

#[test]
fn unknown_event_set_is_refused() {
    let o = iosleuth()
        .args([
            "record",
            "-o",
            "/tmp/iosleuth-never",
            "--events",
            "nosuch",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown event set \"nosuch\"") || err.contains("needs root"),
        "{err}"
    );
    assert!(!std::path::Path::new("/tmp/iosleuth-never").exists());
}

#[test]
fn list_events() {
    let out = run(iosleuth().args(["record", "--list-events"]));
    for set in [
        "block:",
        "fs:",
        "writeback:",
        "sched:",
        "irq:",
        "workqueue:",
        "syscalls:",
    ] {
        assert!(out.contains(set), "{out}");
    }
    assert!(out.contains("block/block_rq_issue"));
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn lost_events_are_counted_and_reported() {
    let _live = live();
    let dir = tempdir();
    let disk = LoopDevice::create(64, true).expect("loop device");
    let cap = dir.path().join("cap");
    // An 8 KiB ring buffer per CPU cannot hold 50 ms of every event set.
    let mut rec = iosleuth();
    rec.arg("record")
        .arg("-o")
        .arg(&cap)
        .args(["--events", "all", "--buffer-kb", "8", "--"]);
    rec.args([
        "dd",
        &format!("if={}", disk.path.display()),
        "of=/dev/null",
        "bs=4k",
        "count=5000",
        "iflag=direct",
        "status=none",
    ]);
    run(&mut rec);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cap.join("iosleuth-capture.json")).unwrap())
            .unwrap();
    let kernel_lost: f64 = manifest["ring_buffer_stats"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["overrun"].as_f64().unwrap_or(0.0) + c["dropped events"].as_f64().unwrap_or(0.0))
        .sum();
    assert!(kernel_lost > 0.0, "the tiny buffer overflowed: {manifest}");
    let rep = json_report(&[&cap], &[]);
    let ours: u64 = rep["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["lost_events"].as_u64().unwrap())
        .sum();
    assert_eq!(
        ours as f64, kernel_lost,
        "the report counts what the kernel counted"
    );
    assert!(
        rep["warnings"].to_string().contains("the kernel lost"),
        "{}",
        rep["warnings"]
    );
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn without_root_one_clear_sentence_and_exit_2() {
    let _live = live();
    // Run iosleuth as `nobody`; the binary must be reachable by that user.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_iosleuth"));
    let copy = std::env::temp_dir().join(format!("iosleuth-nobody-{}", std::process::id()));
    std::fs::copy(bin, &copy).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The tracefs recorders and the BPF ones (`record --light`, `watch`)
    // say it the same way.
    let never = ["record", "-o", "/tmp/iosleuth-never"];
    for args in [
        [&never[..], &["--events", "block", "--", "true"]].concat(),
        [&never[..], &["--blk", "loop0", "--", "true"]].concat(),
        [&never[..], &["--light", "--", "true"]].concat(),
        vec!["watch", "--listen", "127.0.0.1:0"],
    ] {
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&copy)
            .args(&args)
            .output()
            .expect("setpriv (util-linux)");
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("needs root") && err.contains("sudo"), "{err}");
        assert_eq!(err.lines().count(), 1, "one sentence: {err}");
    }
    let _ = std::fs::remove_file(copy);
}

/// The file system type holding `path`, from /proc/mounts (longest prefix).
fn fstype_of(path: &std::path::Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && path.starts_with(f[1])).then(|| (f[1].len(), f[2].to_string()))
        })
        .max()
        .map(|(_, t)| t)
        .unwrap_or_default()
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn fsync_probe_marks_every_operation() {
    let _live = live();
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let file = dir.path().join("probe.dat");
    let out = run(iosleuth()
        .arg("record")
        .arg("-o")
        .arg(&cap)
        .args(["--events", "block,fs", "--"])
        .arg(env!("CARGO_BIN_EXE_iosleuth"))
        .args(["probe", "fsync", "--size", "8k", "--count", "40", "--path"])
        .arg(&file));
    assert!(out.contains("write+fsync: 40 operations"), "{out}");
    assert!(
        out.contains("usecs               : count     distribution"),
        "{out}"
    );
    let rep = json_report(&[&cap], &[]);
    assert_eq!(
        rep["syscalls"]["operations"]["fsync"]["count"], 40,
        "a begin and an end mark per operation"
    );
    if fstype_of(dir.path()) == "ext4" {
        // ext4_sync_file spans of the probe, one per operation.
        let by_process = rep["fs"]["fsync_by_process"].as_object().unwrap();
        let probe: Vec<u64> = by_process
            .iter()
            .filter(|(k, _)| k.starts_with("iosleuth ("))
            .map(|(_, v)| v["count"].as_u64().unwrap())
            .collect();
        assert_eq!(probe, [40], "{by_process:?}");
    }
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 8192);
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn seqread_probe_shows_case1_with_and_without_merges() {
    let _live = live();
    let dir = tempdir();
    let mut disk = LoopDevice::create(64, true).expect("loop device");
    let dev = disk.dev().unwrap().to_string();
    let mut ratios = Vec::new();
    for nomerges in ["0", "2"] {
        disk.set_queue("nomerges", nomerges).unwrap();
        let cap = dir.path().join(format!("cap{nomerges}"));
        let out = run(iosleuth()
            .arg("record")
            .arg("-o")
            .arg(&cap)
            .args(["--events", "block", "--"])
            .arg(env!("CARGO_BIN_EXE_iosleuth"))
            .args([
                "probe", "seqread", "--size", "4m", "--depth", "32", "--path",
            ])
            .arg(&disk.path));
        assert!(
            out.contains("sequential direct read: 1024 operations"),
            "{out}"
        );
        let rep = json_report(&[&cap], &["--device", &dev]);
        let m = &rep["devices"][0]["btt_merge"];
        assert_eq!(m["queued"], 1024);
        assert_eq!(rep["syscalls"]["operations"]["seqread"]["count"], 1024);
        ratios.push((m["ratio"].as_f64().unwrap(), m["blk_max"].as_u64().unwrap()));
    }
    // Merged: 32 bios of 8 sectors per request; unmerged: 8-sector requests.
    assert_eq!(ratios[0], (32.0, 256), "nomerges=0");
    assert_eq!(ratios[1], (1.0, 8), "nomerges=2");
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn blk_tracer_recording_keeps_the_settings_beside_it() {
    let _live = live();
    let dir = tempdir();
    let mut disk = LoopDevice::create(64, true).expect("loop device");
    disk.set_queue("nomerges", "2").unwrap();
    let blk = dir.path().join("blk.bin");
    run(iosleuth()
        .arg("record")
        .arg("-o")
        .arg(&blk)
        .args([
            "--blk",
            &disk.name,
            "--",
            "dd",
            "bs=4k",
            "count=64",
            "iflag=direct",
            "status=none",
        ])
        .arg(format!("if={}", disk.path.display()))
        .arg("of=/dev/null"));
    let rep = json_report(&[&blk], &[]);
    assert_eq!(rep["devices"][0]["actions"]["queued"], 64);
    let snap = &rep["snapshot"];
    assert_eq!(
        snap["before"]["block_devices"][disk.name.as_str()]["queue"]["nomerges"],
        "2"
    );
    assert!(
        snap["workload"]["threads"][0]["comm"] == "dd",
        "{}",
        snap["workload"]
    );
    let text = run(iosleuth().arg("report").arg(&blk));
    assert!(
        text.contains(disk.name.as_str()) && text.contains("nomerges 2"),
        "{text}"
    );
}

/// `record --stacks` around a writer that waits for its fsyncs: its
/// blocked time comes out folded by kernel stack, the frames named from
/// the capture's own symbols.json (only the addresses it holds), and the
/// trigger goes with the private instance: the top-level sched_switch
/// keeps its triggers as they were.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn record_stacks_folds_blocked_time_and_leaves_no_trigger() {
    let _live = live();
    // Held open (mounted if it was not) for the whole test, so that the
    // top-level trigger can be read before and after.
    let tracefs = iosleuth::testing::Tracefs::open().unwrap();
    let trigger_file = tracefs.root.join("events/sched/sched_switch/trigger");
    let top_trigger = || std::fs::read_to_string(&trigger_file).unwrap();
    let before = top_trigger();
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let file = dir.path().join("f");
    let mut rec = iosleuth();
    rec.arg("record")
        .arg("-o")
        .arg(&cap)
        .args(["--events", "syscalls", "--stacks", "--"]);
    rec.arg("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", file.display()))
        .args(["bs=4k", "count=100", "oflag=dsync", "status=none"]);
    run(&mut rec);
    assert_eq!(top_trigger(), before);
    assert!(
        leftover_instances().is_empty(),
        "{:?}",
        leftover_instances()
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cap.join("iosleuth-capture.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["triggers"][0],
        "sched/sched_switch: stacktrace if prev_state & 3"
    );
    let symbols: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(cap.join("symbols.json")).unwrap()).unwrap();
    assert!(
        symbols.len() > 10 && symbols.len() < 5000,
        "{} symbols",
        symbols.len()
    );
    let folded = run(iosleuth()
        .args(["report", "--format", "folded", "--off-cpu"])
        .arg(&cap));
    let dd: Vec<&str> = folded.lines().filter(|l| l.starts_with("dd;")).collect();
    assert!(
        dd.iter()
            .any(|l| l.contains(";ext4_sync_file;") || l.contains(";vfs_write;")),
        "{folded}"
    );
    let unknown = folded.lines().filter(|l| l.contains("[unknown]")).count();
    assert_eq!(unknown, 0, "{folded}");
    // And on-CPU samples of the same run, with their lost count (none).
    assert_eq!(manifest["samples"]["freq_hz"], 99);
    assert_eq!(manifest["samples"]["lost"], 0);
    assert!(cap.join("samples-cpu0.perf").is_file());
}

/// `record --stacks` names user-space frames: a Python loop that reads
/// the clock shows the interpreter's functions (from the python3
/// binary's symbols, through the mappings the capture recorded) and the
/// vDSO's clock_gettime (from the vDSO image kept in the capture), as
/// `perf record -g` and perf script name them.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn record_stacks_names_user_space_frames() {
    let _live = live();
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let mut rec = iosleuth();
    rec.arg("record")
        .arg("-o")
        .arg(&cap)
        .args(["--events", "sched", "--stacks", "--", "python3", "-c"])
        // 1.5 s of its own CPU time (beside other work, 1.5 s of wall
        // time gave it 32 samples), mostly in the vDSO's clock_gettime.
        .arg(
            "import time\nn = 0\nwhile True:\n    time.time()\n    n += 1\n    \
             if n % 10000 == 0 and time.process_time() >= 1.5: break",
        );
    run(&mut rec);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cap.join("iosleuth-capture.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["samples"]["user_frames"], true);
    let folded = run(iosleuth().args(["report", "--format", "folded"]).arg(&cap));
    let python: Vec<(&str, u64)> = folded
        .lines()
        .filter(|l| l.starts_with("python3;"))
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((stack, n.parse().ok()?))
        })
        .collect();
    let total: u64 = python.iter().map(|(_, n)| n).sum();
    // 1.5 s on a CPU at 99 Hz.
    assert!(total >= 100, "{total} samples\n{folded}");
    let with = |f: &str| -> u64 {
        python
            .iter()
            .filter(|(s, _)| s.split(';').any(|x| x == f))
            .map(|(_, n)| n)
            .sum()
    };
    assert!(with("_PyEval_EvalFrameDefault") > 0, "{folded}");
    assert!(with("__vdso_clock_gettime") > 0, "{folded}");
    // Leaves are named, not [unknown] (a frame-pointer-less caller may be).
    let unnamed: u64 = python
        .iter()
        .filter(|(s, _)| s.ends_with(";[unknown]") || s.ends_with(";[user]"))
        .map(|(_, n)| n)
        .sum();
    assert!(unnamed * 10 < total, "{unnamed} of {total}\n{folded}");
}

/// `record --func`: ext4_sync_file timed call by call through its own
/// tracepoints (one per fsync of the probe), file_write_and_wait_range where
/// the probe blocked in it; an unknown name stops before the workload.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn record_func_times_each_call_or_each_blocked_stretch() {
    let _live = live();
    let dir = tempdir();
    let (cap, file) = (dir.path().join("cap"), dir.path().join("probe.dat"));
    let mut rec = iosleuth();
    rec.arg("record").arg("-o").arg(&cap).args([
        "--events",
        "syscalls",
        "--func",
        "ext4_sync_file,file_write_and_wait_range",
        "--",
    ]);
    // The probe under a name of its own: an `iosleuth` run by other work
    // on the machine may fsync on ext4 meanwhile.
    let probe = dir.path().join("iosl-fsyncprobe");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_iosleuth"), &probe).unwrap();
    rec.arg(&probe)
        .args(["probe", "fsync", "--size", "8k", "--count", "40", "--path"])
        .arg(&file);
    let out = run(&mut rec);
    assert!(out.contains("write+fsync: 40 operations"), "{out}");
    assert!(leftover_instances().is_empty());
    let rep = json_report(&[&cap], &["--comm", "iosl-fsyncprobe"]);
    let functions = rep["functions"].as_array().unwrap();
    let names: Vec<&str> = functions
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ext4_sync_file", "file_write_and_wait_range"]);
    let fsync_ns = rep["syscalls"]["operations"]["fsync"]["total_ns"]
        .as_u64()
        .unwrap_or_else(|| panic!("{}", rep["syscalls"]));
    if fstype_of(dir.path()) == "ext4" {
        let sync = &functions[0];
        assert_eq!(sync["method"], "calls");
        assert_eq!(sync["count"], 40, "{sync}");
        let hist: u64 = sync["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["count"].as_u64().unwrap())
            .sum();
        assert_eq!(hist, 40);
        // Inside each operation's fsync.
        assert!(sync["total_ns"].as_u64().unwrap() <= fsync_ns, "{sync}");
        let wait = &functions[1];
        assert_eq!(wait["method"], "blocked");
        let n = wait["count"].as_u64().unwrap();
        assert!((1..=80).contains(&n), "{wait}");
        assert!(wait["total_ns"].as_u64().unwrap() <= fsync_ns, "{wait}");
    } else {
        eprintln!("the temporary directory is not on ext4: ext4_sync_file not checked");
    }
    let text = run(iosleuth().arg("report").arg(&cap).arg("--by-process"));
    assert!(
        text.contains("ext4_sync_file (calls, entry to return): count ")
            && text.contains("usecs               : count     distribution"),
        "{text}"
    );

    // Unknown: exit 2 naming it, nothing recorded or run.
    let (never, marker) = (dir.path().join("never"), dir.path().join("ran"));
    let o = iosleuth()
        .arg("record")
        .arg("-o")
        .arg(&never)
        .args([
            "--func",
            "ext4_sync_file,no_such_function_anywhere",
            "--",
            "touch",
        ])
        .arg(&marker)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no kernel function \"no_such_function_anywhere\" in /proc/kallsyms"),
        "{err}"
    );
    assert!(!never.exists() && !marker.exists());
}

/// A tracepoint instance whose ring buffer overruns before its text is
/// read says how many events each CPU lost, and iosleuth's report of that
/// text says it too (the `[LOST N EVENTS]` lines `trace_pipe` writes):
/// events missing from a text are never taken as events that did not
/// happen.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn an_instance_that_falls_behind_says_what_it_lost() {
    let _live = live();
    let dir = tempdir();
    let text = dir.path().join("text.txt");
    // One page of ring buffer per CPU, and 100,000s of context switches a
    // second: more than the text reader formats.
    let tp = InstanceSession::start(
        &["sched/sched_switch", "sched/sched_wakeup"],
        4,
        "mono",
        &text,
    )
    .expect("text instance");
    run(Command::new("stress-ng").args(["--switch", "2", "--timeout", "2", "--quiet"]));
    let (_, lost) = tp.stop().unwrap();
    let total: u64 = lost.iter().map(|(_, n)| n).sum();
    assert!(total > 1000, "lost {lost:?}");
    let o = outcome(&["report", "--format", "json", text.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rep: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let said = rep["inputs"][0]["lost_events"].as_u64().unwrap_or(0);
    eprintln!("the instance lost {total} events; the text's LOST lines say {said}");
    assert!(
        said > 0 && said <= total,
        "text says {said}, stats {total}\n{}",
        o.stderr
    );
    assert!(
        o.stderr.contains(&format!(
            "{}: the kernel lost {said} events",
            text.display()
        )),
        "{}",
        o.stderr
    );
}

//! Live: a perf.data file that `perf record -g -a` wrote on this machine
//! folds, read directly, to what `perf script | inferno-collapse-perf`
//! makes of it, stack by stack and count by count (kernel and user
//! frames, demangled names, PLT stubs, threads that exec).

use crate::common;

use common::*;

/// Folded lines sorted, for comparing.
fn sorted(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(String::from).collect();
    v.sort();
    v
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn perf_data_folds_as_perf_script_and_inferno_collapse_perf() {
    let _live = live();
    let dir = tempdir();
    let data = dir.path().join("perf.data");
    // perf keeps copies of the binaries it saw in $HOME/.debug: a home
    // of the test's own leaves the machine's cache as it was, and both
    // readers see the same copies.
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut rec = perf();
    rec.env("HOME", &home)
        .args(["record", "-q", "-g", "-a", "-F", "999", "-o"])
        .arg(&data)
        .args([
            "--",
            "sh",
            "-c",
            "dd if=/dev/urandom of=/dev/null bs=64k count=2000 status=none; \
             ls -R /usr/lib >/dev/null; gzip -c /usr/bin/perf >/dev/null; \
             perl -e 'my %h; $h{$_} = $_ for 1..100000'; \
             python3 -c 'import json; [json.dumps(list(range(500))) for _ in range(500)]'",
        ]);
    run(&mut rec);
    let script = run(perf().env("HOME", &home).args(["script", "-i"]).arg(&data));
    let mut collapsed = Vec::new();
    {
        use inferno::collapse::Collapse;
        inferno::collapse::perf::Folder::default()
            .collapse(script.as_bytes(), &mut collapsed)
            .unwrap();
    }
    // The workload's own processes: a system-wide recording also samples
    // whatever else runs beside the test (compilers, other tests), whose
    // C++ names are a known deviation of their own (see docs/recording.md).
    let workload = |l: &&str| {
        let comm = l.split(';').next().unwrap_or_default();
        ["sh", "dd", "ls", "gzip", "perl", "python3", "perf"].contains(&comm)
    };
    let collapsed = String::from_utf8(collapsed).unwrap();
    let theirs = sorted(
        &collapsed
            .lines()
            .filter(workload)
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let folded = run(iosleuth()
        .env("HOME", &home)
        .args(["report", "--format", "folded"])
        .arg(&data));
    let ours = sorted(
        &folded
            .lines()
            .filter(workload)
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert!(theirs.len() > 20, "{theirs:?}");
    let differ: Vec<String> = ours
        .iter()
        .filter(|l| !theirs.contains(l))
        .chain(theirs.iter().filter(|l| !ours.contains(l)))
        .cloned()
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} stacks differ:\n{}",
        differ.len(),
        theirs.len(),
        differ.join("\n")
    );
    // Both sides of the stacks are there: user frames, then the kernel's
    // from the system call in.
    assert!(
        ours.iter().any(|l| l.starts_with("dd;")
            && l.contains(";entry_SYSCALL_64")
            && !l.starts_with("dd;entry_SYSCALL_64")),
        "{ours:?}"
    );
}

/// Tracepoints recorded with `perf record -e`: the perf.data file, read
/// directly through the format files perf stores in it, gives the report
/// that `perf script --ns` text of the same file gives (every event, the
/// same requests and latencies). The text of a task named `dd` (all hex
/// digits) was once taken for a call chain's frames and dropped.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn perf_data_tracepoints_read_as_perf_script_text_of_them() {
    let _live = live();
    // perf mounts tracefs for -e tracepoints and leaves it mounted: held
    // open here, it is unmounted after the test if it was not mounted.
    let _tracefs = iosleuth::testing::Tracefs::open().unwrap();
    let dir = tempdir();
    let (data, text, out) = (
        dir.path().join("perf.data"),
        dir.path().join("perf.txt"),
        dir.path().join("written"),
    );
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    run(perf()
        .env("HOME", &home)
        .args([
            "record",
            "-q",
            "-e",
            "block:*",
            "-e",
            "sched:sched_switch",
            "-a",
            "-o",
        ])
        .arg(&data)
        .args([
            "--",
            "dd",
            "if=/dev/zero",
            "bs=4k",
            "count=200",
            "oflag=direct,dsync",
            "status=none",
        ])
        .arg(format!("of={}", out.display())));
    let script = run(perf()
        .env("HOME", &home)
        .args(["script", "--ns", "-i"])
        .arg(&data));
    std::fs::write(&text, script).unwrap();
    let (a, b) = (json_report(&[&data], &[]), json_report(&[&text], &[]));
    assert_eq!(a["inputs"][0]["format"], "perf.data");
    assert_eq!(a["events"], b["events"]);
    assert!(a["events"].as_u64().unwrap() > 1000, "{}", a["events"]);
    assert_eq!(a["devices"], b["devices"]);
    assert_eq!(a["unknown_events"], b["unknown_events"]);
    assert_eq!(a["sched"]["threads"], b["sched"]["threads"]);
    let writes: u64 = a["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["completed"]["write"].as_u64().unwrap())
        .sum();
    assert!(writes >= 200, "{}", a["devices"]);
}

/// `perf record -e sched:sched_switch -g -a`, the usual way to see
/// blocked time with perf: each switch's call chain is where the thread
/// blocked, as the stacktrace trigger of `record --stacks`. Read from the
/// perf.data file and from `perf script` text of it, the off-CPU stacks
/// are the same, and hold dd waiting for its synchronous writes; other
/// tracepoints' call chains are said to be left out, not folded.
#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn perf_sched_switch_call_chains_fold_as_blocked_time() {
    let _live = live();
    let _tracefs = iosleuth::testing::Tracefs::open().unwrap();
    let dir = tempdir();
    let (data, text, out) = (
        dir.path().join("perf.data"),
        dir.path().join("perf.txt"),
        dir.path().join("written"),
    );
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let started = std::time::Instant::now();
    run(perf()
        .env("HOME", &home)
        .args(["record", "-q", "-g", "-a", "-e", "sched:sched_switch"])
        .args(["-e", "block:block_rq_issue", "-o"])
        .arg(&data)
        .args(["--", "dd", "if=/dev/zero", "bs=4k", "count=200"])
        .args(["oflag=dsync", "status=none"])
        .arg(format!("of={}", out.display())));
    let elapsed_us = started.elapsed().as_micros() as u64;
    let script = run(perf()
        .env("HOME", &home)
        .args(["script", "--ns", "-i"])
        .arg(&data));
    std::fs::write(&text, script).unwrap();
    let folded = |input: &std::path::Path| -> (Vec<String>, String) {
        let o = iosleuth()
            .env("HOME", &home)
            .args(["report", "--format", "folded", "--off-cpu"])
            .arg(input)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let mut lines: Vec<String> = String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        lines.sort();
        (lines, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (from_data, warned_data) = folded(&data);
    let (from_text, warned_text) = folded(&text);
    // Where perf named one address of a binary two ways in one run (seen:
    // a BOLT-built library of a compiler running beside the test, one
    // sample `[unknown]`, the next its function), perf is no anchor.
    let unsure = named_two_ways(&std::fs::read_to_string(&text).unwrap());
    let sure = |lines: Vec<String>| -> Vec<String> {
        let n = lines.len();
        let kept: Vec<String> = lines
            .into_iter()
            .filter(|l| !unsure.iter().any(|u| l.contains(u.as_str())))
            .collect();
        if kept.len() < n {
            eprintln!(
                "{} stacks through frames perf named two ways: {unsure:?}",
                n - kept.len()
            );
        }
        kept
    };
    let (from_data, from_text) = (sure(from_data), sure(from_text));
    assert_eq!(from_data, from_text);
    let dd: Vec<(&str, u64)> = from_data
        .iter()
        .filter(|l| l.starts_with("dd;"))
        .filter_map(|l| {
            let (s, n) = l.rsplit_once(' ')?;
            Some((s, n.parse().ok()?))
        })
        .collect();
    let blocked_us: u64 = dd.iter().map(|(_, n)| n).sum();
    let in_write: u64 = dd
        .iter()
        .filter(|(s, _)| s.contains(";vfs_write;"))
        .map(|(_, n)| n)
        .sum();
    assert!(blocked_us > 0 && blocked_us < elapsed_us, "{dd:?}");
    eprintln!(
        "margin: dd blocked in vfs_write {:.0} % of its blocked time (the test needs > 50 %)",
        100.0 * in_write as f64 / blocked_us as f64
    );
    assert!(in_write * 2 > blocked_us, "{dd:?}");
    for warned in [warned_data, warned_text] {
        assert!(
            warned.contains("tracepoint samples were not folded (only sched_switch's"),
            "{warned}"
        );
    }
}

/// The frames `perf script` named differently at one address of one
/// binary: each name it gave, and the binary's `[NAME]` that folding
/// gives an unnamed frame.
fn named_two_ways(script: &str) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut names: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for l in script.lines() {
        // `\t    5202ce3 NAME (DSO)`
        let Some((ip, rest)) = l.trim_start().split_once(' ') else {
            continue;
        };
        let Some((sym, dso)) = rest.rsplit_once(" (") else {
            continue;
        };
        if l.starts_with('\t') && u64::from_str_radix(ip, 16).is_ok() {
            names.entry((ip, dso)).or_default().insert(sym);
        }
    }
    let mut out = BTreeSet::new();
    for ((_, dso), syms) in names.into_iter().filter(|(_, s)| s.len() > 1) {
        let dso = dso.trim_end_matches(')');
        let base = dso.rsplit('/').next().unwrap_or(dso);
        out.insert(format!("[{base}]"));
        // `NAME+0x145`: folded frames carry no offset.
        let name = |s: &str| match s.rsplit_once("+0x") {
            Some((n, off)) if u64::from_str_radix(off, 16).is_ok() => n.to_string(),
            _ => s.to_string(),
        };
        out.extend(syms.into_iter().filter(|s| *s != "[unknown]").map(name));
    }
    out.into_iter().collect()
}

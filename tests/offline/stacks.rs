//! Off-CPU stacks on real captures (scripts/make-fixtures-stacks): 64
//! random writers with fsync on ext4 under a 1 GiB journal and under a
//! 4 MiB one (case 2), recorded with `record --stacks`. Case 2's proof
//! was the writers' time under add_transaction_credits; these tests ask
//! the folded output, the flame graphs and `diff` for it.

use crate::common;

use common::*;

const GOOD: &str = "tests/fixtures/stacks-journal-1024m.cap";
const BAD: &str = "tests/fixtures/stacks-journal-4m.cap";

/// `report --format folded [--off-cpu]` as (stack, count) lines.
fn folded_by(args: &[&str]) -> Vec<(String, u64)> {
    run(iosleuth().args(["report", "--format", "folded"]).args(args))
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').expect("STACK COUNT");
            (stack.to_string(), n.parse().expect("a count"))
        })
        .collect()
}

fn folded(cap: &str) -> Vec<(String, u64)> {
    folded_by(&["--off-cpu", cap])
}

fn folded_on_cpu(cap: &str) -> Vec<(String, u64)> {
    folded_by(&[cap])
}

/// Percent of the probe threads' blocked time in stacks through `function`.
fn share_under(lines: &[(String, u64)], function: &str) -> f64 {
    let writers: Vec<&(String, u64)> = lines
        .iter()
        .filter(|(s, _)| s.starts_with("iosleuth;"))
        .collect();
    let all: u64 = writers.iter().map(|(_, n)| n).sum();
    let under: u64 = writers
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == function))
        .map(|(_, n)| n)
        .sum();
    under as f64 * 100.0 / all as f64
}

#[test]
fn folded_off_cpu_stacks_put_the_writers_under_add_transaction_credits_with_a_small_journal() {
    let (good, bad) = (folded(GOOD), folded(BAD));
    // Stacks read outermost first, comm first, scheduler last, offsets
    // and the tracer's own frames gone.
    let top = &bad[0].0;
    assert!(
        top.starts_with("iosleuth;entry_SYSCALL_64_after_hwframe;do_syscall_64;"),
        "{top}"
    );
    assert!(top.ends_with(";schedule;__schedule"), "{top}");
    assert!(bad
        .iter()
        .all(|(s, _)| !s.contains('+') && !s.contains("trace_event_raw")));
    let (g, b) = (
        share_under(&good, "add_transaction_credits"),
        share_under(&bad, "add_transaction_credits"),
    );
    assert!(b > 30.0 && g < 2.0, "4 MiB journal {b:.1}%, 1 GiB {g:.1}%");
    // The counts are the report's off-CPU time, in µs.
    let j: serde_json::Value =
        serde_json::from_str(&run(iosleuth().args(["report", "--format", "json", BAD]))).unwrap();
    let total_us = j["off_cpu"]["total_ns"].as_u64().unwrap() / 1000;
    // Every blocked stack ends in the scheduler; the journal wait is in a
    // third of them (kernel threads' stacks count too).
    let functions = j["off_cpu"]["functions"].as_array().unwrap();
    assert_eq!(functions[0]["function"], "__schedule");
    assert_eq!(functions[0]["percent"], 100.0);
    let atc = functions
        .iter()
        .find(|f| f["function"] == "add_transaction_credits")
        .unwrap_or_else(|| panic!("{functions:#?}"));
    assert!(atc["percent"].as_f64().unwrap() > 30.0, "{atc}");
    let sum: u64 = bad.iter().map(|(_, n)| n).sum();
    assert!(
        total_us.abs_diff(sum) <= bad.len() as u64,
        "{total_us} vs {sum}"
    );
}

#[test]
fn a_flame_graph_of_the_blocked_time_is_an_svg_with_the_functions() {
    let d = tempdir();
    let svg = d.path().join("off.svg");
    run(iosleuth()
        .args(["flamegraph", "--off-cpu", BAD, "-o"])
        .arg(&svg));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml"), "{}", &text[..100]);
    assert!(text.contains("Off-CPU Time Flame Graph"));
    assert!(
        text.contains("<title>add_transaction_credits ("),
        "no frame for it"
    );
}

#[test]
fn diff_ranks_the_journal_space_wait_first_and_draws_it_red() {
    let j: serde_json::Value = serde_json::from_str(&run(
        iosleuth().args(["diff", "--format", "json", GOOD, BAD])
    ))
    .unwrap();
    let top = &j["off_cpu_functions"][0];
    assert_eq!(
        top["function"], "add_transaction_credits",
        "{:#}",
        j["off_cpu_functions"]
    );
    assert!(top["delta_points"].as_f64().unwrap() > 30.0, "{top:#}");
    assert_eq!(top["significant"], true);
    let d = tempdir();
    let svg = d.path().join("diff.svg");
    let text = run(iosleuth()
        .args(["diff", GOOD, BAD, "--flamegraph"])
        .arg(&svg));
    let row = text
        .lines()
        .find(|l| l.contains("add_transaction_credits"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.trim_start().starts_with("0.19%") && row.ends_with("*"),
        "{row}"
    );
    // Red (grew): the frame that waited ends its stacks, with a + delta.
    let svg = std::fs::read_to_string(&svg).unwrap();
    let title = svg
        .split("<title>")
        .find(|t| t.starts_with("add_transaction_credits ("))
        .unwrap();
    assert!(title.contains("; +"), "{}", &title[..80]);
}

#[test]
fn without_stacks_folded_and_flame_graphs_say_what_to_record() {
    let plain = "tests/fixtures/fsync-4k.cap";
    // Not /dev/null: a device node is refused as an output.
    let d = tempdir();
    let svg = d.path().join("never.svg");
    let svg = svg.to_str().unwrap();
    for args in [
        vec!["report", "--format", "folded", "--off-cpu", plain],
        vec!["flamegraph", "--off-cpu", plain, "-o", svg],
        vec!["diff", plain, BAD, "--flamegraph", svg],
    ] {
        let o = outcome(&args);
        let err = &o.stderr;
        assert_eq!(o.code, 2, "{args:?}: {err}");
        assert!(
            err.contains(plain) && err.contains("record --stacks"),
            "{args:?}: {err}"
        );
        assert!(!std::path::Path::new(svg).exists(), "{args:?}");
    }
    // A capture with off-CPU stacks but no samples (recorded before
    // sampling existed): said, not an empty output.
    let o = outcome(&["report", "--format", "folded", BAD]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--off-cpu"));
}

/// Each folded line's root is the blocked thread's own comm, as the
/// kernel wrote it in `sched_switch`'s prev_comm (inferno-collapse-perf's
/// default: the comm alone, no pid or tid), and threads of one comm fold
/// together. The capture's 64 writers are `iosleuth probe randwrite`'s
/// threads, unnamed, so the kernel calls every one of them `iosleuth`: one
/// root for the 64, beside each kernel thread's own.
#[test]
fn folded_roots_are_the_blocked_threads_own_comms() {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    let dumped = run(iosleuth().args(["dump", "--format", "json", BAD]));
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{BAD}/iosleuth-capture.json")).unwrap(),
    )
    .unwrap();
    let recorder: BTreeSet<i64> = meta["recorder_tids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap())
        .collect();
    // A stretch: a switch away while blocked (S or D), the stack the
    // trigger wrote right after it on that CPU, the switch back in.
    let (mut blocked, mut awaiting, mut stacked) = (HashMap::new(), HashMap::new(), HashMap::new());
    let mut threads: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    for line in dumped.lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        let cpu = e["cpu"].as_i64().unwrap();
        match e["event"].as_str().unwrap() {
            "sched:sched_switch" => {
                let f = &e["fields"];
                let next = f["next_pid"].as_i64().unwrap();
                if let Some(comm) = stacked.remove(&next) {
                    threads.entry(comm).or_default().insert(next);
                }
                awaiting.remove(&cpu);
                let prev = f["prev_pid"].as_i64().unwrap();
                if prev != 0 && f["prev_state"].as_i64().unwrap() & 3 != 0 {
                    blocked.insert(prev, f["prev_comm"].as_str().unwrap().to_string());
                    awaiting.insert(cpu, prev);
                    stacked.remove(&prev);
                }
            }
            "ftrace:kernel_stack" => {
                let pid = e["pid"].as_i64().unwrap();
                if awaiting.get(&cpu) == Some(&pid) {
                    awaiting.remove(&cpu);
                    stacked.insert(pid, blocked[&pid].clone());
                }
            }
            _ => {}
        }
    }
    for tids in threads.values_mut() {
        tids.retain(|t| !recorder.contains(t));
    }
    threads.retain(|_, tids| !tids.is_empty());
    let roots: BTreeSet<String> = folded(BAD)
        .iter()
        .map(|(s, _)| s.split(';').next().unwrap().to_string())
        .collect();
    let comms: BTreeSet<String> = threads.keys().cloned().collect();
    assert_eq!(roots, comms);
    assert!(roots.contains("jbd2/loop0-8"), "{roots:?}");
    assert!(roots.iter().any(|r| r.starts_with("kworker/")), "{roots:?}");
    assert_eq!(threads["iosleuth"].len(), 64, "{threads:?}");
}

/// ftrace's own text (`cat trace` of an instance with the same trigger,
/// around `dd oflag=dsync`): each `<stack trace>` and its `=> function`
/// lines are one stack, read like the capture's.
#[test]
fn ftrace_text_stacks_read_like_the_capture() {
    let text = "tests/fixtures/ftrace-stacks.txt";
    let raw = std::fs::read_to_string(text).unwrap();
    let dumped = run(iosleuth().args(["dump", "--format", "json", text]));
    let stacks: Vec<serde_json::Value> = dumped
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| e["event"] == "ftrace:kernel_stack")
        .collect();
    assert_eq!(stacks.len(), raw.matches("<stack trace>").count());
    assert_eq!(stacks.len(), 155);
    assert_eq!(
        stacks[0]["fields"]["frames"][0],
        "trace_event_raw_event_sched_switch"
    );
    let folded = folded(text);
    assert!(
        folded
            .iter()
            .any(|(s, _)| s.starts_with("dd;") && s.contains(";ext4_sync_file;")),
        "{folded:?}"
    );
}

/// A slow operation's breakdown names the stack it spent most blocked
/// time in: under a 4 MiB journal every one of the five slowest writes
/// waited most in add_transaction_credits (case 2's D-state stacks), under
/// a 1 GiB journal in jbd2_log_wait_commit (an fsync waiting for its
/// commit, as it should).
#[test]
fn a_slow_operation_shows_the_stack_it_blocked_in() {
    for (cap, waited_in) in [
        (BAD, "add_transaction_credits"),
        (GOOD, "jbd2_log_wait_commit"),
    ] {
        let j: serde_json::Value =
            serde_json::from_str(&run(iosleuth().args(["report", "--format", "json", cap])))
                .unwrap();
        let slowest = j["outliers"]["by_kind"]["probe randwrite"]
            .as_array()
            .unwrap();
        assert_eq!(slowest.len(), 5);
        for op in slowest {
            let b = &op["blocked_in"];
            assert_eq!(b["frames"][0], waited_in, "{cap}: {b:#}");
            let share = b["ns"].as_f64().unwrap() / op["latency_ns"].as_f64().unwrap();
            assert!(share > 0.5, "{cap}: {share}");
        }
    }
    let text = run(iosleuth().args(["report", BAD]));
    assert!(
        text.contains(
            " in add_transaction_credits <- start_this_handle <- jbd2__journal_start <- "
        ),
        "{text}"
    );
}

/// On-CPU samples (perf_event_open at 99 Hz, kernel call chains, the
/// trace's clock): `dd if=/dev/urandom` runs in the kernel's ChaCha
/// generator (tests/fixtures/oncpu-urandom.cap).
#[test]
fn on_cpu_samples_fold_and_draw_where_the_cpu_ran() {
    let cap = "tests/fixtures/oncpu-urandom.cap";
    let lines = folded_on_cpu(cap);
    let dd: u64 = lines
        .iter()
        .filter(|(s, _)| s.starts_with("dd;"))
        .map(|(_, n)| n)
        .sum();
    let in_rng: u64 = lines
        .iter()
        .filter(|(s, _)| s.starts_with("dd;") && s.contains(";get_random_bytes_user"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        dd >= 20 && in_rng * 10 >= dd * 9,
        "{in_rng} of {dd}: {lines:?}"
    );
    let top = &lines.iter().find(|(s, _)| s.starts_with("dd;")).unwrap().0;
    assert_eq!(
        top,
        "dd;entry_SYSCALL_64_after_hwframe;do_syscall_64;ksys_read;vfs_read;get_random_bytes_user;chacha_block_generic;chacha_permute"
    );
    let j: serde_json::Value =
        serde_json::from_str(&run(iosleuth().args(["report", "--format", "json", cap]))).unwrap();
    let all: u64 = lines.iter().map(|(_, n)| n).sum();
    assert_eq!(j["on_cpu"]["samples"], all);
    // The samples lie inside the recording: same clock as the trace.
    let dumped = run(iosleuth().args(["dump", "--format", "json", cap]));
    let (first, last) = (
        j["span"]["first_ns"].as_u64().unwrap(),
        j["span"]["last_ns"].as_u64().unwrap(),
    );
    let sample_ts: Vec<u64> = dumped
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "perf:cpu-clock")
        .map(|e| e["ts"].as_u64().unwrap())
        .collect();
    assert!(!sample_ts.is_empty());
    assert!(sample_ts.iter().all(|t| (first..=last).contains(t)));
    assert!(last - first < 10_000_000_000, "{first}..{last}");
    let d = tempdir();
    let svg = d.path().join("on.svg");
    run(iosleuth().args(["flamegraph", cap, "-o"]).arg(&svg));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains(">Flame Graph<") && text.contains("<title>chacha_permute ("));
}

/// `diff` compares on-CPU samples by function too, when both sides have
/// them: a run against itself moves nothing; captures without samples get
/// no table.
#[test]
fn diff_compares_on_cpu_samples_when_both_sides_have_them() {
    let cap = "tests/fixtures/oncpu-urandom.cap";
    let j: serde_json::Value =
        serde_json::from_str(&run(iosleuth().args(["diff", "--format", "json", cap, cap])))
            .unwrap();
    let rows = j["on_cpu_functions"].as_array().unwrap();
    assert!(rows
        .iter()
        .any(|r| r["function"] == "get_random_bytes_user"));
    assert!(rows
        .iter()
        .all(|r| r["delta_points"] == 0.0 && r["significant"] == false));
    let j: serde_json::Value = serde_json::from_str(&run(
        iosleuth().args(["diff", "--format", "json", GOOD, BAD])
    ))
    .unwrap();
    assert!(j["on_cpu_functions"].is_null());
}

/// `perf record -g -a -F 499` around `dd oflag=dsync` (and whatever else
/// ran: the VM's fuzzer), printed by `perf script`
/// (tests/fixtures/perf-record-g.perf-script.txt): iosleuth's folded
/// stacks equal inferno-collapse-perf's on the same text, stack by stack
/// and count by count (its `collapse::perf` is the binary's code).
#[test]
fn perf_script_samples_fold_as_inferno_collapse_perf_does() {
    use inferno::collapse::Collapse;
    let text = "tests/fixtures/perf-record-g.perf-script.txt";
    let mut expected = Vec::new();
    inferno::collapse::perf::Folder::default()
        .collapse(
            std::io::BufReader::new(std::fs::File::open(text).unwrap()),
            &mut expected,
        )
        .unwrap();
    let parse = |folded: &str| -> std::collections::BTreeMap<String, u64> {
        folded
            .lines()
            .map(|l| {
                let (s, n) = l.rsplit_once(' ').unwrap();
                (s.to_string(), n.parse().unwrap())
            })
            .collect()
    };
    let expected = parse(&String::from_utf8(expected).unwrap());
    let ours = parse(&run(iosleuth().args(["report", "--format", "folded", text])));
    assert!(expected.len() > 20, "{expected:?}");
    assert_eq!(ours, expected);
}

/// A capture with stacks whose symbols.json is gone still reads, with a
/// warning naming the capture; the frames fold as [unknown].
#[test]
fn stacks_without_symbols_are_unknown_frames_with_a_warning() {
    let d = tempdir();
    let cap = d.path().join("oncpu.cap");
    copy_dir(
        std::path::Path::new("tests/fixtures/oncpu-urandom.cap"),
        &cap,
    );
    std::fs::remove_file(cap.join("symbols.json")).unwrap();
    let o = iosleuth()
        .args(["report", "--format", "folded"])
        .arg(&cap)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("oncpu.cap") && err.contains("no symbols.json"),
        "{err}"
    );
    assert!(out.lines().any(|l| l.starts_with("dd;[unknown]")), "{out}");
}

/// `--func` on the same captures: the blocked time inside
/// add_transaction_credits equals the off-CPU time of the folded stacks
/// through it (the same stretches, counted once each), and grows with
/// the small journal; ext4_sync_file, which has entry and return
/// tracepoints, is timed per call and agrees with the fsync spans.
#[test]
fn func_latency_is_the_blocked_time_inside_the_function_or_every_call() {
    let func = |cap: &str, f: &str| {
        let rep = json_report(&[cap], &["--func", f]);
        rep["functions"][0].clone()
    };
    let (good, bad) = (
        func(GOOD, "add_transaction_credits"),
        func(BAD, "add_transaction_credits"),
    );
    assert_eq!(bad["method"], "blocked");
    let total = |v: &serde_json::Value| v["total_ns"].as_u64().unwrap();
    assert!(total(&bad) > 50 * total(&good), "{good} {bad}");
    // The folded stacks are in µs, rounded per stack.
    let folded_us: u64 = folded(BAD)
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == "add_transaction_credits"))
        .map(|(_, n)| n)
        .sum();
    let us = total(&bad) / 1000;
    assert!(
        us.abs_diff(folded_us) <= us / 100 + 1,
        "{us} vs {folded_us}"
    );
    let text = run(iosleuth().args(["report", "--func", "add_transaction_credits", BAD]));
    assert!(
        text.contains("add_transaction_credits (time blocked inside it, per blocked stretch (off-CPU stacks)): count "),
        "{text}"
    );

    let calls = func("tests/fixtures/fsync-4k.cap", "ext4_sync_file");
    let rep = json_report(&["tests/fixtures/fsync-4k.cap"], &[]);
    assert_eq!(calls["method"], "calls");
    assert_eq!(calls["count"], rep["fs"]["fsync"]["count"]);
    assert_eq!(calls["total_ns"], rep["fs"]["fsync"]["total_ns"]);

    // diff compares them; a capture recorded without --func has none.
    let d = run(iosleuth().args(["diff", "--func", "add_transaction_credits", GOOD, BAD]));
    assert!(
        d.lines().any(
            |l| l.starts_with("function.add_transaction_credits.blocked_total_ms ")
                && l.ends_with('*')
        ),
        "{d}"
    );
    assert!(json_report(&[GOOD], &[])["functions"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// A perf.data file `perf record -g -a -F 299` wrote (dd and ls, 116
/// samples of 3.34 ms): read directly, its samples and their periods are
/// all there whatever this machine's symbols name them; damaged copies
/// are refused with the file named, never a panic.
#[test]
fn perf_data_is_read_directly_and_damage_is_named() {
    const DATA: &str = "tests/fixtures/perf-record-g.data";
    let rep = json_report(&[DATA], &[]);
    assert_eq!(rep["inputs"][0]["format"], "perf.data");
    assert_eq!(rep["on_cpu"]["samples"], 116);
    // Every sample's period, as `perf script -F period` adds them up.
    let total: u64 = run(iosleuth().args(["report", "--format", "folded", DATA]))
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 387_959_796);
    let dir = tempdir();
    let svg = dir.path().join("p.svg");
    run(iosleuth().args(["flamegraph", DATA, "-o"]).arg(&svg));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));

    let bytes = std::fs::read(DATA).unwrap();
    let damaged = |name: &str, f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = bytes.clone();
        f(&mut b);
        let p = dir.path().join(name);
        std::fs::write(&p, b).unwrap();
        let o = outcome_of(iosleuth().args(["report", "--format", "folded"]).arg(&p));
        assert_eq!(o.code, 2, "{name}: {}", o.stderr);
        assert!(
            o.stderr.contains(name) && !o.stderr.contains("panicked"),
            "{}",
            o.stderr
        );
        o.stderr
    };
    let e = damaged("cut.data", &|b| b.truncate(30_000));
    assert!(
        e.contains("runs past the end") && e.contains("truncated?"),
        "{e}"
    );
    let e = damaged("zeroed-header.data", &|b| b[8..104].fill(0));
    assert!(e.contains("not a usable perf.data file"), "{e}");
    // No sample comes before the damage: nothing to report.
    let e = damaged("bad-records.data", &|b| b[5000..5100].fill(0xff));
    assert!(
        e.contains("a 65535-byte record past the end of the file at byte 5040"),
        "{e}"
    );
}

/// The text report names where the blocked writers waited (the last frame
/// before the scheduler's) and where the CPU was, largest share first.
#[test]
fn text_report_names_where_threads_waited_and_where_the_cpu_was() {
    let text = run(iosleuth().args(["report", BAD]));
    let section = text
        .split("where the threads waited\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let first: Vec<&str> = section.lines().take(2).collect();
    assert!(
        first
            .iter()
            .any(|l| l.ends_with(" add_transaction_credits")),
        "{first:?}"
    );
    let pct = |l: &str| l.trim().split('%').next().unwrap().parse::<f64>().unwrap();
    assert!(pct(first[0]) >= pct(first[1]));
    let text = run(iosleuth().args(["report", "--kallsyms", URANDOM_KALLSYMS, URANDOM_DATA]));
    let cpu = text.split("where the CPU was\n").nth(1).unwrap();
    // dd from /dev/urandom: the CPU was in the ChaCha generator.
    assert!(
        cpu.lines().take(3).any(|l| l.ends_with(" chacha_permute")),
        "{cpu}"
    );
}

/// `perf record -g` of dd reading /dev/urandom, its `perf script` text
/// and its kernel's symbols, from one machine (scripts/make-fixtures-perf-data).
const URANDOM_DATA: &str = "tests/fixtures/perf-urandom.data";
const URANDOM_KALLSYMS: &str = "tests/fixtures/perf-urandom.kallsyms";

/// Each stack from the kernel's entry on, with its weight summed: the
/// frames above it are user-space ones, which this machine's binaries
/// may name differently from the recording machine's.
fn kernel_parts(folded: &str) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for l in folded.lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        if let Some(at) = stack.find("entry_SYSCALL_64") {
            *out.entry(stack[at..].to_string()).or_default() += n.parse::<u64>().unwrap();
        }
    }
    out
}

/// With `--kallsyms`, a perf.data file's kernel frames are named as perf
/// named them on the recording machine, on any machine: every kernel
/// stack and its weight equal inferno-collapse-perf's of `perf script`'s
/// text there. Without it, on another kernel (build ids differ) the
/// frames go unnamed with a warning that says why, as perf leaves them.
#[test]
fn perf_data_kernel_frames_are_named_from_the_recording_kernels_symbols() {
    use inferno::collapse::Collapse;
    let mut expected = Vec::new();
    inferno::collapse::perf::Folder::default()
        .collapse(
            std::io::BufReader::new(
                std::fs::File::open("tests/fixtures/perf-urandom.perf-script.txt").unwrap(),
            ),
            &mut expected,
        )
        .unwrap();
    let expected = kernel_parts(&String::from_utf8(expected).unwrap());
    assert!(expected.len() >= 3, "{expected:?}");
    let given = run(iosleuth().args([
        "report",
        "--format",
        "folded",
        "--kallsyms",
        URANDOM_KALLSYMS,
        URANDOM_DATA,
    ]));
    assert_eq!(kernel_parts(&given), expected);

    // Without it, on another kernel (one taken for the running one,
    // whichever this machine runs), the frames go unnamed with a warning.
    let home = tempdir();
    let plain = outcome_of(
        iosleuth()
            .env("HOME", home.path())
            .env(
                "IOSLEUTH_RUNNING_BUILD_ID",
                "0123456789abcdef0123456789abcdef01234567",
            )
            .args(["report", "--format", "folded", URANDOM_DATA]),
    );
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(
        plain.stderr.contains(URANDOM_DATA)
            && plain.stderr.contains("recorded on another kernel")
            && plain.stderr.contains("--kallsyms"),
        "{}",
        plain.stderr
    );
    assert!(!plain.stdout.contains("chacha"), "{}", plain.stdout);
    let bad = outcome(&["report", "--kallsyms", "Cargo.toml", URANDOM_DATA]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("Cargo.toml") && bad.stderr.contains("no function symbols"),
        "{}",
        bad.stderr
    );
}

/// User-space frames of `record --stacks` (a Python loop reading the
/// clock, recorded on this machine): the vDSO's are named from the image
/// the capture keeps, on any machine; a binary whose build id is not the
/// one that ran names nothing and shows as its module, as perf does.
#[test]
fn user_frames_are_named_from_the_binaries_that_ran() {
    let cap = std::path::Path::new("tests/fixtures/stacks-user-python.cap");
    let stacks = |cap: &std::path::Path| -> Vec<(String, u64)> {
        folded_by(&[cap.to_str().unwrap()])
            .into_iter()
            .filter(|(s, _)| s.starts_with("python3;"))
            .collect()
    };
    let with = |lines: &[(String, u64)], f: &str| -> u64 {
        lines
            .iter()
            .filter(|(s, _)| s.split(';').any(|x| x == f))
            .map(|(_, n)| n)
            .sum()
    };
    let lines = stacks(cap);
    let total: u64 = lines.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 102, "{lines:?}");
    assert_eq!(with(&lines, "__vdso_clock_gettime"), 25, "{lines:?}");

    // libc by the build id the recording saw.
    let ids: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(cap.join("build-ids.json")).unwrap())
            .unwrap();
    let (libc, id) = ids
        .iter()
        .find(|(p, _)| p.ends_with("/libc.so.6"))
        .expect("libc in build-ids.json");
    let here: Option<String> = iosleuth::testing::build_id(libc.as_ref())
        .map(|b| b.iter().map(|b| format!("{b:02x}")).collect());
    let glibc = "clock_gettime@@GLIBC_2.17";
    if here.as_ref() == Some(id) {
        assert_eq!(with(&lines, glibc), 26, "{lines:?}");
    }
    let dir = tempdir();
    let copy = dir.path().join("cap");
    copy_dir(cap, &copy);
    let tampered = serde_json::to_string(&ids)
        .unwrap()
        .replace(id.as_str(), "00112233");
    std::fs::write(copy.join("build-ids.json"), tampered).unwrap();
    std::fs::remove_file(copy.join("vdso.so")).unwrap();
    let lines = stacks(&copy);
    assert_eq!(with(&lines, glibc), 0, "{lines:?}");
    assert_eq!(with(&lines, "[libc.so.6]"), 26, "{lines:?}");
    assert_eq!(with(&lines, "__vdso_clock_gettime"), 0, "{lines:?}");
    assert_eq!(with(&lines, "[[vdso]]"), 25, "{lines:?}");
}

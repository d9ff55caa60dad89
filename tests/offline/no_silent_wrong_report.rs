//! Issue 13, "no silent wrong report": arguments and inputs that are not
//! what the user thinks get an exit code and a message that say so.

use crate::common;

use common::*;
use std::path::Path;

const QD1: &str = "tests/fixtures/queue-depth1.cap";
const QSAT: &str = "tests/fixtures/queue-saturated.cap";

#[test]
fn check_refuses_thresholds_that_are_not_percentages() {
    // D2C p99 0.117 -> 0.366 ms: +212 %, which NaN called "no worse".
    for bad in ["NaN", "inf", "-inf", "-5"] {
        let arg = format!("--threshold={bad}");
        let o = outcome(&["check", &arg, QD1, QSAT]);
        assert_eq!(o.code, 128, "{bad}: {}{}", o.stdout, o.stderr);
        assert!(o.stdout.is_empty(), "{bad}: no verdict: {}", o.stdout);
        assert!(
            o.stderr.contains("--threshold")
                && o.stderr.contains("expected a percentage of 0 or more"),
            "{bad}: {}",
            o.stderr
        );
    }
    let o = outcome(&["check", "--threshold", "10", QD1, QSAT]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let o = outcome(&["check", "--threshold", "0", QD1, QD1]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

/// git bisect run: 1-127 but 125 mark the commit bad, 125 skips it, 128
/// and above abort. A broken `check` command line must abort.
#[test]
fn check_usage_errors_abort_a_bisect() {
    let o = outcome(&["check", QD1]);
    assert_eq!(o.code, 128, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("check takes GOOD BAD, or GOOD... -- BAD... (got 1 paths and no --)"),
        "{}",
        o.stderr
    );
    let o = outcome(&["check", QD1, QSAT, QSAT]);
    assert_eq!(o.code, 128, "{}", o.stderr);
    let o = outcome(&["check", "--bogus", QD1, QSAT]);
    assert_eq!(o.code, 128, "{}", o.stderr);
    assert!(
        o.stderr.contains("unexpected argument '--bogus'"),
        "{}",
        o.stderr
    );
    let o = outcome(&["check"]);
    assert_eq!(o.code, 128, "{}", o.stderr);
    // Unreadable input is still "cannot tell" (skip this commit).
    let o = outcome(&["check", QD1, "tests/fixtures/no-such.cap"]);
    assert_eq!(o.code, 125, "{}", o.stderr);
    // Other commands' usage errors keep exit 2; help is a success.
    assert_eq!(outcome(&["diff", "--bogus", QD1, QSAT]).code, 2);
    assert_eq!(outcome(&["report", "--bogus", QD1]).code, 2);
    assert_eq!(outcome(&["check", "--help"]).code, 0);
    let help = outcome(&["check", "--help"]).stdout;
    assert!(help.contains("128"), "{help}");
    assert!(Path::new(QD1).exists());
}

const NOMERGES0_BLK: &str = "tests/fixtures/loop-seqread-nomerges0.blk";
const NOMERGES2_BLK: &str = "tests/fixtures/loop-seqread-nomerges2.blk";

fn export(dir: &Path, extra: &[&str], inputs: &[&str]) -> Outcome {
    let d = dir.to_str().unwrap();
    let mut args = vec!["export", "--blktrace", d];
    args.extend_from_slice(extra);
    args.extend_from_slice(inputs);
    outcome(&args)
}

/// Exporting into a directory that held another export overwrote the
/// same names and left the others, which `report DIR` then merged in.
#[test]
fn export_refuses_a_directory_with_files_unless_forced() {
    let tmp = tempdir();
    let dir = tmp.path().join("bt");
    let o = export(&dir, &[], &[NOMERGES0_BLK]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let first = names_in(&dir);
    // A stale file of another export (another device, another CPU).
    std::fs::write(dir.join("sdz.blktrace.3"), b"").unwrap();
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    let before: Vec<Vec<u8>> = first
        .iter()
        .map(|n| std::fs::read(dir.join(n)).unwrap())
        .collect();
    let o = export(&dir, &[], &[NOMERGES2_BLK]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("the directory is not empty (4 entries: ")
            && o.stderr
                .contains("give --force to replace its blktrace files"),
        "{}",
        o.stderr
    );
    // Untouched: nothing overwritten, nothing added.
    let after: Vec<Vec<u8>> = first
        .iter()
        .map(|n| std::fs::read(dir.join(n)).unwrap())
        .collect();
    assert_eq!(before, after);
    assert_eq!(names_in(&dir).len(), 4);
    // --force: the stale blktrace file goes, other files stay, and the
    // directory reports the second run alone.
    let o = export(&dir, &["--force"], &[NOMERGES2_BLK]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "warning: --force: removed 1 blktrace file that this export did not replace from"
        ) && o.stderr.contains("(sdz.blktrace.3)"),
        "{}",
        o.stderr
    );
    assert!(dir.join("notes.txt").exists());
    assert!(!dir.join("sdz.blktrace.3").exists());
    let exported = json_report(&[&dir], &[]);
    let direct = json_report(&[NOMERGES2_BLK], &[]);
    assert_eq!(exported["devices"][0]["btt"], direct["devices"][0]["btt"]);
    assert_eq!(
        exported["devices"][0]["actions"],
        direct["devices"][0]["actions"]
    );
}

/// Nothing is left behind on error: not a half-written file, not the
/// directory export created.
#[test]
fn export_leaves_nothing_behind_on_error() {
    let tmp = tempdir();
    let dir = tmp.path().join("new/bt");
    // No block events (a scheduler-only capture).
    let o = export(&dir, &[], &["tests/fixtures/rt-burner.cap"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("nothing written"), "{}", o.stderr);
    assert!(
        !tmp.path().join("new").exists(),
        "{:?}",
        names_in(tmp.path())
    );
    // An input that is not a trace.
    let o = export(&dir, &[], &["Cargo.toml"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(!tmp.path().join("new").exists());
    // An existing empty directory stays, empty.
    std::fs::create_dir_all(&dir).unwrap();
    let o = export(&dir, &[], &["Cargo.toml"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
    // A file is not a directory.
    let o = export(Path::new(NOMERGES0_BLK), &[], &[NOMERGES0_BLK]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("exists and is not a directory"),
        "{}",
        o.stderr
    );
}

/// One record with a corrupt CPU number made export create a file for
/// every CPU up to it (757,774 files). CPUs of 8192 or more (the kernel's
/// largest NR_CPUS) are left out and counted.
#[test]
fn export_skips_records_with_an_impossible_cpu_number() {
    let tmp = tempdir();
    let good = tmp.path().join("good");
    let o = export(&good, &[], &[NOMERGES2_BLK]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The per-CPU file with records; corrupt the CPU of its first record
    // that is not a process note.
    let name = names_in(&good)
        .into_iter()
        .max_by_key(|n| std::fs::metadata(good.join(n)).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(good.join(&name)).unwrap();
    let mut at = 0;
    loop {
        let action = u32::from_le_bytes(bytes[at + 28..at + 32].try_into().unwrap());
        let pdu = u16::from_le_bytes([bytes[at + 46], bytes[at + 47]]) as usize;
        if action & (1 << 26) == 0 {
            bytes[at + 40..at + 44].copy_from_slice(&757_773u32.to_le_bytes());
            break;
        }
        at += 48 + pdu;
    }
    let bad_dir = tmp.path().join("bad");
    std::fs::create_dir(&bad_dir).unwrap();
    std::fs::write(bad_dir.join(&name), &bytes).unwrap();
    let out = tmp.path().join("out");
    let o = export(&out, &[], &[bad_dir.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "warning: 1 block events have a CPU number of 8192 or more, more than any kernel's NR_CPUS allows (corrupt records), and were left out"
        ),
        "{}",
        o.stderr
    );
    assert_eq!(names_in(&out), names_in(&good));
}

const TRACEPOINTS: &str = "tests/fixtures/loop-seqread-nomerges0.tracepoints.txt";
const PERF_SCRIPT: &str = "tests/fixtures/loop-seqread-nomerges0.perf-script.txt";
const BLKPARSE: &str = "tests/fixtures/loop-seqread-nomerges0.blkparse.txt";
const RUN1: &str = "tests/fixtures/healthy-run1.cap";
const RUN2: &str = "tests/fixtures/healthy-run2.cap";
const RT: &str = "tests/fixtures/rt-burner.cap";

/// The tracepoint text and the perf script of one recording: every
/// request was counted twice.
#[test]
fn one_run_in_two_formats_is_refused() {
    let o = outcome(&["report", TRACEPOINTS, PERF_SCRIPT]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stdout.is_empty(), "{}", o.stdout);
    assert!(
        o.stderr.contains(&format!(
            "iosleuth: {TRACEPOINTS} and {PERF_SCRIPT} are one run recorded twice (the same block events: "
        )) && o.stderr.contains("with the clocks 5.631 ms apart")
            && o.stderr.contains(
                "merged, every request would count twice; give only one of them"
            ),
        "{}",
        o.stderr
    );
    // blkparse text starts its clock at 0; the blk tracer's binary file.
    let o = outcome(&["report", "--format", "json", NOMERGES0_BLK, BLKPARSE]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("are one run recorded twice"),
        "{}",
        o.stderr
    );
    // export too, before writing anything.
    let tmp = tempdir();
    let dir = tmp.path().join("bt");
    let o = export(&dir, &[], &[TRACEPOINTS, PERF_SCRIPT]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("are one run recorded twice"),
        "{}",
        o.stderr
    );
    assert!(!dir.exists());
}

/// One file named twice is read once (as the same path always was).
#[test]
fn one_file_named_twice_is_read_once() {
    let once = json_report(&[TRACEPOINTS], &[]);
    let dotted = format!("./{TRACEPOINTS}");
    let o = outcome(&["report", "--format", "json", TRACEPOINTS, &dotted]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let twice: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(twice["events"], once["events"]);
    assert_eq!(twice["devices"], once["devices"]);
}

/// Two parts of one recording (its CPUs in two files) are one trace: no
/// refusal, no warning.
#[test]
fn parts_of_one_recording_merge_quietly() {
    let tmp = tempdir();
    let text = std::fs::read_to_string(TRACEPOINTS).unwrap();
    let (cpu0, cpu1): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.contains("[000]"));
    let (a, b) = (tmp.path().join("cpu0.txt"), tmp.path().join("cpu1.txt"));
    std::fs::write(&a, cpu0.join("\n") + "\n").unwrap();
    std::fs::write(&b, cpu1.join("\n") + "\n").unwrap();
    let o = outcome(&[
        "report",
        "--format",
        "json",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("warning"), "{}", o.stderr);
    let merged: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let whole = json_report(&[TRACEPOINTS], &[]);
    assert_eq!(merged["devices"], whole["devices"]);
}

/// Two captures given to one report were merged without a word.
#[test]
fn different_recordings_in_one_report_are_named() {
    let o = outcome(&["report", RUN1, RUN2]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want = format!(
        "iosleuth: warning: the inputs are 2 different recordings (made at times that do not overlap), merged as one trace: {RUN1} (26857.728..26858.151 s by its snapshot), {RUN2} (26858.179..26858.623 s by its snapshot); every figure mixes them (to compare runs: iosleuth diff)"
    );
    assert!(o.stderr.contains(&want), "{}", o.stderr);
    // In JSON too, first among the warnings.
    let j = json_report(&[RUN1, RUN2], &[]);
    assert!(
        j["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("the inputs are 2 different recordings"),
        "{:#}",
        j["warnings"]
    );
    // Text traces without a snapshot: by their events' times.
    let o = outcome(&[
        "report",
        TRACEPOINTS,
        "tests/fixtures/loop-seqread-nomerges2.tracepoints.txt",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("the inputs are 2 different recordings (made at times that do not overlap)"),
        "{}",
        o.stderr
    );
    // One capture alone: nothing to say.
    let o = outcome(&["report", RUN1]);
    assert!(!o.stderr.contains("different recordings"), "{}", o.stderr);
}

#[test]
fn diff_and_check_of_one_run_with_itself_say_so() {
    let o = outcome(&["diff", RUN1, RUN1]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "iosleuth: warning: baseline {RUN1} and candidate {RUN1} are the same run (the same file): no difference between them is a change of the system"
        )),
        "{}",
        o.stderr
    );
    let o = outcome(&["check", RUN1, RUN1]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("are the same run (the same file)"),
        "{}",
        o.stderr
    );
    // A copy: identical content.
    let tmp = tempdir();
    let copy = tmp.path().join("copy.cap");
    copy_dir(Path::new(RT), &copy);
    let o = outcome(&["diff", RT, copy.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains("are the same run (identical content: "),
        "{}",
        o.stderr
    );
    // The same recording in two formats.
    let o = outcome(&["check", TRACEPOINTS, PERF_SCRIPT]);
    assert!(
        o.stderr.contains(&format!(
            "baseline {TRACEPOINTS} and candidate {PERF_SCRIPT} are the same run (the same block events: "
        )),
        "{}",
        o.stderr
    );
    // Two runs of one setup are not one run.
    let o = outcome(&["diff", RUN1, RUN2]);
    assert!(!o.stderr.contains("same run"), "{}", o.stderr);
}

#[test]
fn diff_of_unrelated_inputs_says_there_is_nothing_to_compare() {
    let o = outcome(&["diff", RT, NOMERGES0_BLK]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "iosleuth: warning: nothing to compare: the baseline and the candidate have no device, probe operation or journal in common (baseline: probe burst; candidate: device 7,0)"
        ),
        "{}",
        o.stderr
    );
    assert!(
        o.stdout.contains(
            "verdict: nothing to compare: the two sides have no figure in common (no device, probe operation or journal in both)"
        ),
        "{}",
        o.stdout
    );
    // Related runs: no such warning.
    let o = outcome(&["diff", QD1, QSAT]);
    assert!(!o.stderr.contains("nothing to compare"), "{}", o.stderr);
}

/// A finding of one side that the other side's capture could not judge
/// (it did not record the rule's events) is unknown there, not "only in"
/// one side: the diff says so, and its verdict does not rest on it.
#[test]
fn diff_says_a_rule_the_other_side_could_not_judge_is_unknown_there() {
    let (journal, rt) = (
        "tests/fixtures/journal-4m.cap",
        "tests/fixtures/rt-burner.cap",
    );
    let o = outcome(&["diff", "--format", "json", journal, rt]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let d: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(d["only_in_candidate"], serde_json::json!([]), "{d:#}");
    assert_eq!(d["only_in_baseline"], serde_json::json!([]), "{d:#}");
    assert_eq!(d["not_judged_in_baseline"][0]["id"], "rt_starvation");
    assert_eq!(
        d["not_judged_in_baseline"][0]["lacks"],
        "the `sched` events were not recorded"
    );
    assert_eq!(d["not_judged_in_candidate"][0]["id"], "journal_space_stall");
    assert!(!d["verdict"].as_str().unwrap().contains("rt_starvation"));
    let text = outcome(&["diff", journal, rt]).stdout;
    assert!(
        text.contains("rt_starvation: in the candidate; the baseline could not judge it (the `sched` events were not recorded): unknown there, not absent"),
        "{text}"
    );
}

/// Unknown is never 0: on every fixture, a process row whose Q2C or D2C
/// has no sample, a softirq vector that never ran or whose longest run the
/// capture did not keep (a light capture), and a Perfetto export's count
/// of what the capture did not record, all say so instead of printing 0.
#[test]
fn what_was_not_measured_never_reads_as_zero() {
    let dir = tempdir();
    for input in crate::golden::fixtures() {
        let name = input.to_str().unwrap();
        let r = json_report(&[&input], &[]);
        let text = run(iosleuth().arg("report").arg(&input));
        for p in r["processes"].as_array().into_iter().flatten() {
            let pid = p["pid"].as_u64().unwrap();
            let row = text.lines().find(|l| {
                l.split_whitespace().next() == Some(&pid.to_string())
                    && l.contains(p["comm"].as_str().unwrap_or("?"))
            });
            let Some(row) = row else { continue };
            let cols: Vec<&str> = row.split_whitespace().collect();
            let (q2c, d2c) = (cols[cols.len() - 2], cols[cols.len() - 1]);
            for (col, field) in [(q2c, "q2c"), (d2c, "d2c")] {
                let n = p[field]["n"].as_u64().unwrap_or(0);
                assert_eq!(
                    n == 0,
                    col == "—",
                    "{name}: pid {pid}'s {field} (n {n}) printed {col:?}: {row}"
                );
            }
        }
        for (v, s) in r["irq"]["softirq_total"].as_object().into_iter().flatten() {
            let row = text
                .lines()
                .find(|l| {
                    l.split_whitespace().next() == Some(v.as_str())
                        && l.split_whitespace().count() == 5
                })
                .unwrap_or_else(|| panic!("{name}: no {v} row"));
            let cols: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(s["count"] == 0, cols[3] == "—", "{name}: {row}");
            assert_eq!(s["max_ns"].is_null(), cols[4] == "—", "{name}: {row}");
            if s["count"] == 0 {
                assert!(
                    s["max_ns"].is_null(),
                    "{name}: {v} never ran, max {}",
                    s["max_ns"]
                );
            }
        }
        let out = dir.path().join("x.pftrace");
        let o = outcome(&["export", name, "--perfetto", out.to_str().unwrap()]);
        if o.code != 0 {
            continue;
        }
        let irq_recorded = r["irq"]["softirq"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
            && r["light"].is_null();
        if !irq_recorded && r["not_recorded"].to_string().contains("irq") {
            assert!(
                o.stderr.contains("irqs not recorded"),
                "{name}: {}",
                o.stderr
            );
            assert!(!o.stderr.contains(" 0 irqs"), "{name}: {}", o.stderr);
        }
    }
}

/// The figures of a distribution or an interval without a sample.
const FIGURES: &[&str] = &[
    "min", "max", "avg", "mean", "p50", "p90", "p99", "p999", "min_ns", "max_ns", "avg_ns",
    "mean_ns",
];

/// Every object with `count` or `n` 0 whose figures read 0: `path` names it.
fn zeros_without_samples(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            let n = m.get("count").or_else(|| m.get("n"));
            if n.and_then(|n| n.as_u64()) == Some(0) {
                for k in FIGURES {
                    if m.get(*k).and_then(|x| x.as_f64()) == Some(0.0) {
                        out.push(format!("{path}.{k}"));
                    }
                }
            }
            for (k, x) in m {
                zeros_without_samples(x, &format!("{path}.{k}"), out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                zeros_without_samples(x, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// No figure of an empty distribution reads 0, anywhere in the JSON of
/// any fixture: a device without a D2C sample, a btt interval that never
/// occurred, a process whose requests were never issued.
#[test]
fn no_figure_of_an_empty_distribution_is_zero() {
    let mut empty_seen = 0;
    for input in crate::golden::fixtures() {
        let r = json_report(&[&input], &[]);
        let mut bad = Vec::new();
        zeros_without_samples(&r, "", &mut bad);
        assert!(
            bad.is_empty(),
            "{}: 0 for what had no sample: {}",
            input.display(),
            bad.join(", ")
        );
        // The test sees empty distributions: the check is not vacuous.
        empty_seen += r.to_string().matches("\"n\":0").count();
    }
    assert!(empty_seen > 100, "{empty_seen} empty intervals seen");
}

//! Golden outputs of every committed fixture: the JSON report's keys (the
//! schema scripts and dashboards read) and what the first lines say (the
//! span read and each finding's headline). A change to either shows as a
//! diff of tests/golden/; when it is meant, `scripts/update-golden`
//! rewrites the files and the diff goes into the commit.

use crate::common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const GOLDEN: &str = "tests/golden";

/// Every report input among the fixtures (not the fuzz findings, the seed
/// excerpts or a kallsyms beside its perf.data).
pub(crate) fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("tests/fixtures")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            !matches!(name, "fuzz" | "seeds") && !name.ends_with(".kallsyms")
        })
        .collect();
    v.sort();
    v
}

/// A key path for each leaf: `.devices[].btt.d2c.max`. Keys that are not
/// identifiers (process names, devices) are `*`; the system snapshot is
/// the machine's own sysfs and procfs, not iosleuth's schema.
fn key_paths(v: &Value, path: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if path.is_empty() && k == "snapshot" {
                    out.insert(".snapshot".into());
                    continue;
                }
                let ident = k.starts_with(|c: char| c.is_ascii_lowercase())
                    && k.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                let k = if ident { k.as_str() } else { "*" };
                key_paths(x, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(a) if a.is_empty() => {
            out.insert(format!("{path}[]"));
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| key_paths(x, &format!("{path}[]"), out)),
        _ => {
            out.insert(path.to_string());
        }
    }
}

/// What a report of `input` says first: the span it read, its warnings,
/// and each finding's headline, as the text report prints them.
fn summary(input: &Path, r: &Value) -> String {
    let name = input.file_name().unwrap().to_str().unwrap();
    let mut s = format!("== {name}\n");
    let span = &r["span"];
    s += &format!(
        "events {}, {} .. {} ns\n",
        r["events"], span["first_ns"], span["last_ns"]
    );
    for w in r["warnings"].as_array().into_iter().flatten() {
        s += &format!("warning: {}\n", w.as_str().unwrap_or_default());
    }
    let findings = r["findings"].as_array().cloned().unwrap_or_default();
    if findings.is_empty() {
        s += "findings: none\n";
    }
    let not_judged: Vec<&str> = r["rules"]["not_judged"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str())
        .collect();
    if !not_judged.is_empty() {
        s += &format!("not judged: {}\n", not_judged.join(", "));
    }
    for f in findings {
        s += &format!(
            "{} {}: {}\n",
            f["severity"].as_str().unwrap_or("?").to_uppercase(),
            f["id"].as_str().unwrap_or("?"),
            f["title"].as_str().unwrap_or("?")
        );
    }
    s
}

/// Compares `got` with the golden file `name`, or writes it when
/// IOSLEUTH_UPDATE_GOLDEN is set.
fn check_golden(name: &str, got: &str) {
    let path = Path::new(GOLDEN).join(name);
    if std::env::var_os("IOSLEUTH_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(GOLDEN).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/update-golden writes it)", path.display()));
    if want != got {
        let want: BTreeSet<&str> = want.lines().collect();
        let got_lines: BTreeSet<&str> = got.lines().collect();
        let gone: Vec<_> = want.difference(&got_lines).take(20).collect();
        let new: Vec<_> = got_lines.difference(&want).take(20).collect();
        panic!(
            "{} differs from this build's output (if meant: scripts/update-golden)\n  no longer printed: {gone:#?}\n  newly printed: {new:#?}",
            path.display()
        );
    }
}

/// The kernel the golden outputs take for the running one: a perf.data
/// file's report says whether it was recorded on the running kernel and,
/// if so, names its frames from /proc/kallsyms. Neither may depend on the
/// kernel the tests run on.
const FAKE_RUNNING_BUILD_ID: &str = "0123456789abcdef0123456789abcdef01234567";
/// The build id of the kernel perf-urandom.data was recorded on.
const PERF_URANDOM_KERNEL: &str = "4a5a9b0affb66c437abcd455d2738af879985fa9";

/// `report --format json` as on any machine: a fake running kernel, and a
/// HOME without perf's build-id cache.
fn machine_free_report(input: &Path, home: &Path) -> Value {
    let out = iosleuth()
        .args(["report", "--format", "json"])
        .arg(input)
        .env("IOSLEUTH_RUNNING_BUILD_ID", FAKE_RUNNING_BUILD_ID)
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        input.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("report JSON")
}

#[test]
fn every_fixtures_json_keys_and_first_lines_are_the_golden_ones() {
    let inputs = fixtures();
    assert!(inputs.len() >= 60, "{} fixtures", inputs.len());
    let home = tempdir();
    // Two at a time: each report is its own process.
    let run = |part: &[PathBuf]| {
        part.iter()
            .map(|p| (p.clone(), machine_free_report(p, home.path())))
            .collect::<Vec<_>>()
    };
    let (first, second) = inputs.split_at(inputs.len() / 2);
    let reports: BTreeMap<PathBuf, Value> = std::thread::scope(|s| {
        let a = s.spawn(|| run(first));
        let b = s.spawn(|| run(second));
        let mut all = a.join().unwrap();
        all.extend(b.join().unwrap());
        all.into_iter().collect()
    });
    let mut keys = BTreeSet::new();
    let mut first_lines = String::new();
    for (input, r) in &reports {
        key_paths(r, "", &mut keys);
        first_lines += &summary(input, r);
    }
    let keys: String = keys.into_iter().map(|k| k + "\n").collect();
    check_golden("json-keys.txt", &keys);
    check_golden("first-lines.txt", &without_build_ids(&first_lines));
}

/// The running kernel's build id, and any other, as the golden files
/// write them: a build id is the machine's (or a capture's), never part of
/// what a fresh machine of another build must reproduce.
const RUNNING_ID: &str = "<running kernel's build id>";
const OTHER_ID: &str = "<build id>";

/// `text` with every build id (40 hex digits) replaced by a placeholder.
fn without_build_ids(text: &str) -> String {
    let text = text.replace(FAKE_RUNNING_BUILD_ID, RUNNING_ID);
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    for c in text.chars().chain(std::iter::once('\n')) {
        if hex(c) {
            run.push(c);
            continue;
        }
        out.push_str(if run.len() == 40 { OTHER_ID } else { &run });
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// The golden outputs hold no build id at all (the running kernel's and
/// the captures' are placeholders), and a perf.data file recorded on
/// another kernel says so, naming both kernels (checked here, not in the
/// golden file): nothing in them comes from this machine's kernel.
#[test]
fn golden_outputs_hold_nothing_of_the_running_kernel() {
    let golden: String = ["json-keys.txt", "first-lines.txt"]
        .iter()
        .map(|n| std::fs::read_to_string(Path::new(GOLDEN).join(n)).unwrap())
        .collect();
    assert!(golden.contains(&format!("the running one is {RUNNING_ID}")));
    assert_eq!(
        without_build_ids(&golden),
        golden,
        "a build id in the golden files"
    );
    let home = tempdir();
    let r = machine_free_report(Path::new("tests/fixtures/perf-urandom.data"), home.path());
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "recorded on another kernel (build id {PERF_URANDOM_KERNEL}, the running one is {FAKE_RUNNING_BUILD_ID})"
        )),
        "{warnings}"
    );
    // Taken to run the very kernel perf-urandom.data was recorded on, the
    // report does not read this machine's symbols for it: no warning, and
    // its kernel frames unnamed, never named by another kernel's table.
    let home = tempdir();
    let out = iosleuth()
        .args([
            "report",
            "--format",
            "json",
            "tests/fixtures/perf-urandom.data",
        ])
        .env("IOSLEUTH_RUNNING_BUILD_ID", PERF_URANDOM_KERNEL)
        .env("HOME", home.path())
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = r["warnings"].to_string();
    assert!(
        !warnings.contains("recorded on another kernel"),
        "{warnings}"
    );
}

/// Every report says which rules its input let judge: the twelve are
/// judged or not, never both; without scheduler events no breakdown says
/// "on CPU"; a capture that did not record the scheduler
/// events never has rt_starvation judged; "findings: none" in the text
/// names how many rules judged, and a line names the others and what
/// each lacked.
#[test]
fn every_report_says_which_rules_could_not_judge() {
    for input in fixtures() {
        let r = json_report(&[&input], &[]);
        let rules = &r["rules"];
        let ids = |k: &str| -> Vec<String> {
            rules[k]
                .as_array()
                .unwrap_or_else(|| panic!("{}: rules.{k}", input.display()))
                .iter()
                .map(|x| x.as_str().or(x["id"].as_str()).unwrap().to_string())
                .collect()
        };
        let (judged, not_judged) = (ids("judged"), ids("not_judged"));
        assert_eq!(judged.len() + not_judged.len(), 15, "{}", input.display());
        assert!(judged.iter().all(|j| !not_judged.contains(j)));
        let manifest = input.join("iosleuth-capture.json");
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            let m: Value = serde_json::from_str(&text).unwrap();
            let light = input.join("light.json").exists();
            let sched = m["events"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e.as_str().unwrap_or("").starts_with("sched/"));
            if !sched && !light {
                assert!(
                    not_judged.iter().any(|n| n == "rt_starvation"),
                    "{}: no sched events recorded, yet rt_starvation judged",
                    input.display()
                );
            }
        }
        let text = run(iosleuth().arg("report").arg(&input));
        // Unknown is not zero: without scheduler events no operation was
        // seen running, so none says "on CPU".
        if r["sched"]["switches"] == 0 {
            let outliers = r["outliers"]["by_kind"].as_object().into_iter().flatten();
            for o in outliers.flat_map(|(_, v)| v.as_array().into_iter().flatten()) {
                assert_eq!(o["breakdown"]["on_cpu_ns"], 0, "{}: {o:#}", input.display());
            }
            assert!(!text.contains("% on CPU"), "{}", input.display());
        }
        // Nor do the journal's writes, flushes and phases read 0 when
        // their events were not recorded.
        let block_lacked = r["rules"]["not_judged"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| {
                n["id"] == "merges_disabled" && n["lacks"].as_str().unwrap().contains("`block`")
            });
        if block_lacked {
            assert!(!text.contains("0.0 journal writes"), "{}", input.display());
        }
        // A light capture counts no bio one by one.
        if input.join("light.json").exists() && text.contains("bios queued") {
            assert!(!text.contains("bios queued 0"), "{}", input.display());
            assert!(
                text.contains("bios queued not recorded"),
                "{}",
                input.display()
            );
        }
        // A capture without wakeups does not say "0 wakeups".
        let wakeups = r["sched"]["wakeups"].as_u64().unwrap_or(0);
        if r["sched"]["switches"].as_u64().unwrap_or(0) > 0 && wakeups == 0 {
            assert!(
                text.contains("wakeups not recorded") && !text.contains(", 0 wakeups)"),
                "{}",
                input.display()
            );
        }
        assert!(
            !text.contains("locking 0.000, flushing 0.000, logging 0.000"),
            "{}",
            input.display()
        );
        if let Some(line) = text.lines().find(|l| l.starts_with("findings: none")) {
            assert!(
                line.contains(&format!("among the {} rule", judged.len()))
                    || (judged.is_empty() && line.contains("no rule could judge")),
                "{}: {line}",
                input.display()
            );
        }
        if !not_judged.is_empty() {
            let said = format!("not judged, {} of 15 rules: ", not_judged.len());
            let line = text.lines().find(|l| l.starts_with(&said));
            let line = line.unwrap_or_else(|| panic!("{}: no {said:?}", input.display()));
            for id in &not_judged {
                assert!(line.contains(&format!("{id} (")), "{line}");
            }
        }
    }
    // The page says it too, beside the findings.
    let page = run(iosleuth().args([
        "report",
        "--format",
        "html",
        "tests/fixtures/healthy-run1.cap",
    ]));
    assert!(
        page.contains("7 of 15 rules judged this input; 8 could not:")
            && page.contains("<b>rt_starvation</b>: the `sched` events were not recorded")
            && page.contains("<p>No rule that judged fired.</p>"),
        "no coverage box"
    );
    // Where no rule could judge, the page does not say that none fired.
    let page = run(iosleuth().args([
        "report",
        "--format",
        "html",
        "tests/fixtures/perf-urandom.data",
    ]));
    assert!(
        page.contains("<p>No rule could judge this input.</p>")
            && page.contains("0 of 15 rules judged this input; 15 could not:")
            && !page.contains("No rule that judged fired"),
        "perf-urandom.data's page"
    );
}

/// The percentages in `text` (a number right before `%`) above 100.
fn percentages_above_100(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices('%') {
        let digits = text[..i]
            .trim_end_matches(' ')
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect::<String>();
        let number: String = digits.chars().rev().collect();
        if let Ok(x) = number.trim_start_matches('.').parse::<f64>() {
            if x > 100.0 {
                let from = text[..i].len().saturating_sub(60);
                let from = (0..=from)
                    .rev()
                    .find(|&k| text.is_char_boundary(k))
                    .unwrap_or(0);
                out.push(text[from..=i].to_string());
            }
        }
    }
    out
}

#[test]
fn percentages_above_100_are_found() {
    assert_eq!(
        percentages_above_100("a 7,0: 155% between, 100% of it, 99.5 %, %util 12"),
        ["a 7,0: 155%"]
    );
    assert!(percentages_above_100("100.0% of 200 ms, 1.55x the trace").is_empty());
}

/// Every percentage a finding or a rule's reason says is a share of a
/// named whole, so never above 100 % (a ratio is said as one, "1.55x"):
/// the findings' title, explanation, evidence and workaround in the JSON
/// report, and every rule's reason in `--explain all`.
#[test]
fn no_finding_or_reason_says_a_percentage_above_100() {
    let inputs = fixtures();
    let check = |part: &[PathBuf]| {
        let mut bad = Vec::new();
        for input in part {
            let r = json_report(&[input], &[]);
            for f in r["findings"].as_array().into_iter().flatten() {
                let mut texts = vec![f["evidence"].to_string()];
                for k in ["title", "explanation", "workaround"] {
                    texts.push(f[k].as_str().unwrap_or_default().to_string());
                }
                for t in texts {
                    for p in percentages_above_100(&t) {
                        bad.push(format!("{}: {} {p}", input.display(), f["id"]));
                    }
                }
            }
            let explain = run(iosleuth().args(["report", "--explain", "all"]).arg(input));
            for p in percentages_above_100(&explain) {
                bad.push(format!("{} (--explain all): {p}", input.display()));
            }
        }
        bad
    };
    let (first, second) = inputs.split_at(inputs.len() / 2);
    let bad: Vec<String> = std::thread::scope(|s| {
        let a = s.spawn(|| check(first));
        let b = s.spawn(|| check(second));
        let mut all = a.join().unwrap();
        all.extend(b.join().unwrap());
        all
    });
    assert!(bad.is_empty(), "percentages above 100:\n{}", bad.join("\n"));
}

/// The event set of a recorded event (`sched/sched_switch` → `sched`), as
/// `record --events` names them.
fn event_set(event: &str) -> &'static str {
    match event.split('/').next().unwrap_or("") {
        "block" => "block",
        "ext4" | "jbd2" | "xfs" => "fs",
        "writeback" | "wbt" => "writeback",
        "readahead" => "readahead",
        "sched" => "sched",
        "irq" => "irq",
        "workqueue" => "workqueue",
        "syscalls" => "syscalls",
        "io_uring" => "io_uring",
        "exceptions" => "faults",
        "filemap" if event.ends_with("_fault") || event.ends_with("_map_pages") => "faults",
        "filemap" | "vmscan" => "cache",
        _ => "other",
    }
}

/// Unknown is not zero, as a table: every committed fixture × the report's
/// sections. For each event set the capture's manifest says was not
/// recorded (for other inputs, the sets the report says they lack), the
/// JSON section's figures are null and its `not_recorded` names the set,
/// and the text prints no counter of it: the section is left out, or its
/// figures say "not recorded", and the first lines name the set.
#[test]
fn every_section_of_a_set_not_recorded_is_null_not_zero() {
    const SETS: [&str; 11] = [
        "block",
        "fs",
        "writeback",
        "readahead",
        "sched",
        "irq",
        "workqueue",
        "syscalls",
        "io_uring",
        "faults",
        "cache",
    ];
    // Section, its set, the text's header of it.
    let sections = [
        ("sched", "sched", "==================== Scheduler ("),
        ("irq", "irq", "==================== Interrupts"),
        ("workqueue", "workqueue", "==================== Workqueues"),
        ("wbt", "writeback", "wbt"),
        ("readahead", "readahead", "readahead"),
    ];
    let mut judged = BTreeMap::<&str, usize>::new();
    for input in fixtures() {
        let name = input.display().to_string();
        let r = json_report(&[&input], &[]);
        let text = run(iosleuth().arg("report").arg(&input));
        let light = input.join("light.json").exists();
        let said: Vec<&str> = r["not_recorded"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let manifest = std::fs::read_to_string(input.join("iosleuth-capture.json")).ok();
        let missing: Vec<&str> = match manifest {
            Some(m) if !light => {
                let m: Value = serde_json::from_str(&m).unwrap();
                let recorded: BTreeSet<&str> = m["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| event_set(e.as_str().unwrap()))
                    .collect();
                let missing: Vec<&str> =
                    SETS.into_iter().filter(|s| !recorded.contains(s)).collect();
                let mut said_sorted = said.clone();
                said_sorted.sort();
                let mut want = missing.clone();
                want.sort();
                assert_eq!(
                    said_sorted, want,
                    "{name}: not_recorded against the manifest"
                );
                missing
            }
            // A light capture's sets are what its programs delivered; other
            // inputs, what they hold.
            _ => sections
                .iter()
                .filter(|(sec, set, _)| r[sec]["not_recorded"] == serde_json::json!([set]))
                .map(|(_, set, _)| *set)
                .chain(said.iter().copied())
                .collect(),
        };
        if !missing.is_empty() && !light {
            let line = text.lines().find(|l| l.starts_with("not recorded: the "));
            let line = line.unwrap_or_else(|| panic!("{name}: no 'not recorded' line"));
            for set in &missing {
                assert!(line.contains(set), "{name}: {line} lacks {set}");
            }
        }
        for (sec, set, header) in sections {
            let v = &r[sec];
            let lacks = v["not_recorded"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: {sec}"));
            if !missing.contains(&set) {
                assert!(!lacks.iter().any(|x| x == set), "{name}: {sec} {v}");
                continue;
            }
            *judged.entry(sec).or_default() += 1;
            assert_eq!(lacks, &vec![Value::from(set)], "{name}: {sec}");
            for (k, x) in v.as_object().unwrap() {
                assert!(
                    k == "not_recorded" || x.is_null(),
                    "{name}: {sec}.{k} = {x}"
                );
            }
            if header.starts_with("====") {
                assert!(
                    !text.contains(header),
                    "{name}: a {sec} section in the text"
                );
            }
        }
        // io_uring's and the faults' figures, where their events are not
        // in the input.
        for (key, set) in [("io_uring", "io_uring"), ("faults", "faults")] {
            let v = &r["outliers"][key];
            if v["recorded"] == false {
                *judged.entry(key).or_default() += 1;
                for (k, x) in v.as_object().unwrap() {
                    assert!(
                        k == "recorded" || x.is_null(),
                        "{name}: outliers.{key}.{k} = {x}"
                    );
                }
            } else if !light {
                assert!(!missing.contains(&set), "{name}: {key} recorded");
            }
        }
        // Sched recorded without wakeups: no wakeup count, no blocked time.
        if !missing.contains(&"sched")
            && r["sched"]["not_recorded"] == serde_json::json!(["sched/sched_wakeup"])
        {
            *judged.entry("sched wakeups").or_default() += 1;
            assert!(r["sched"]["wakeups"].is_null(), "{name}");
            assert!(!text.contains(" 0 wakeups"), "{name}");
        }
        // The filesystem and its journals.
        let fs = &r["fs"];
        for set in ["fs", "writeback", "block"] {
            let said = fs["not_recorded"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == set);
            if !light {
                assert_eq!(
                    said,
                    missing.contains(&set),
                    "{name}: fs.not_recorded {set}"
                );
            }
        }
        if missing.contains(&"fs") && !light {
            *judged.entry("fs").or_default() += 1;
            assert!(fs["fsync"].is_null() && fs["journals"].is_null(), "{name}");
        }
        for (dev, j) in fs["journals"].as_object().into_iter().flatten() {
            let lacks_block = j["not_recorded"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == "block");
            if !light {
                assert_eq!(
                    lacks_block,
                    missing.contains(&"block"),
                    "{name}: journal {dev}"
                );
            }
            if lacks_block {
                *judged.entry("journal").or_default() += 1;
                assert!(j["journal_writes_per_commit"].is_null(), "{name}");
                assert!(j["flushes_per_commit"].is_null(), "{name}");
                for c in j["slowest_commits"].as_array().unwrap() {
                    assert!(
                        c["journal_writes"].is_null() && c["flushes"].is_null(),
                        "{name}: {c}"
                    );
                }
                assert!(
                    text.contains("journal writes and flushes not recorded"),
                    "{name}"
                );
                assert!(!text.contains("0.0 journal writes"), "{name}");
            }
        }
        // A light capture's devices: no bio counted one by one; iostat's
        // columns only where it read the kernel's diskstats at its ends.
        if light {
            let doc: serde_json::Value = std::fs::read_to_string(input.join("light.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            let read_diskstats = |dev: &serde_json::Value| {
                doc["devices"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|d| d["dev"] == *dev && d["diskstats"].is_object())
            };
            for d in r["devices"].as_array().unwrap() {
                *judged.entry("light devices").or_default() += 1;
                assert!(d["actions"].is_null(), "{name}: {d}");
                assert_eq!(
                    d["iostat_total"].is_null(),
                    !read_diskstats(&d["device"]),
                    "{name}: {d}"
                );
                assert!(d["not_recorded"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == "btt"));
            }
            assert!(!text.contains("bios queued 0"), "{name}");
        } else {
            for d in r["devices"].as_array().unwrap() {
                assert!(d["actions"]["queued"].is_u64(), "{name}");
                assert_eq!(d["not_recorded"], serde_json::json!([]), "{name}");
            }
        }
    }
    // Each kind of section was judged on some fixture.
    for k in [
        "sched",
        "irq",
        "workqueue",
        "wbt",
        "readahead",
        "fs",
        "journal",
        "light devices",
        "io_uring",
        "faults",
    ] {
        assert!(
            judged.get(k).copied().unwrap_or(0) > 0,
            "no fixture lacks {k}: {judged:?}"
        );
    }
}

//! What a user of iostat, btt, perf and trace-cmd expects of the command
//! line: devices by name, `-o -`, no page on a terminal, outputs checked
//! before the work, `check`'s usage errors abort a bisect, metric ids
//! without spaces, tracepoint names in `dump --events`, addresses in hex,
//! counts as integers, `--time` from the trace's start.

use crate::common;

use common::*;
use std::path::Path;

const CAP: &str = "tests/fixtures/healthy-run1.cap";
const JOURNAL: &str = "tests/fixtures/journal-4m.cap";
const STACKS: &str = "tests/fixtures/stacks-journal-4m.cap";
const NOMERGES0: &str = "tests/fixtures/loop-seqread-nomerges0.blk";
const NOMERGES2: &str = "tests/fixtures/loop-seqread-nomerges2.blk";

/// `iosleuth ARGS` on a terminal (`script` gives it one): exit code and
/// what the terminal showed.
fn on_a_terminal(args: &str) -> (Option<i32>, String) {
    let bin = env!("CARGO_BIN_EXE_iosleuth");
    let o = std::process::Command::new("script")
        .args(["-qec", &format!("{bin} {args}"), "/dev/null"])
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn a_device_is_a_name_a_dev_path_or_maj_min() {
    // The capture's settings name 7,0 loop0 (recorded on another machine:
    // its names, not this machine's, decide).
    let by = |dev: &str| {
        let mut j = json_report(&[CAP], &["--device", dev]);
        j["inputs"] = serde_json::Value::Null;
        j
    };
    let want = by("7,0");
    assert_eq!(want["devices"].as_array().unwrap().len(), 1, "{want:#}");
    assert_eq!(by("loop0"), want);
    assert_eq!(by("/dev/loop0"), want);
    assert_eq!(by("7:0"), want);
    // A name the settings do not have: exit 2, naming the trace's devices.
    let o = outcome(&["report", CAP, "--device", "sdz"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("--device sdz: no such device in the settings the trace was recorded with; the trace's devices: 7,0 (loop0), 254,0 (vda)"),
        "{}",
        o.stderr
    );
    // A blktrace file names no device: this machine's /sys decides, and
    // an unknown name lists the trace's devices by number.
    let o = outcome(&["report", NOMERGES0, "--device", "no-such-disk0"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("--device no-such-disk0: no such device on this machine")
            && o.stderr.contains("the trace's devices: 7,0"),
        "{}",
        o.stderr
    );
    // A number the trace does not have keeps nothing, and says what it has.
    let o = outcome(&["report", NOMERGES0, "--device", "8,0"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("the trace's devices: 7,0"),
        "{}",
        o.stderr
    );
    // flamegraph offers no --device: its stacks are threads', not a
    // device's (only block events would be filtered).
    let o = outcome(&[
        "flamegraph",
        STACKS,
        "--off-cpu",
        "--device",
        "loop0",
        "-o",
        "x.svg",
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
}

#[test]
fn dash_is_standard_output_for_every_one_file_output() {
    let d = tempdir();
    let cwd = d.path();
    let abs = |p: &str| Path::new(env!("CARGO_MANIFEST_DIR")).join(p);
    let in_dir = |args: &[&str]| {
        let mut c = iosleuth();
        c.current_dir(cwd).args(args);
        outcome_of(&mut c)
    };
    let stacks = abs(STACKS);
    let stacks = stacks.to_str().unwrap();
    let o = in_dir(&["flamegraph", stacks, "--off-cpu", "-o", "-"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("<?xml"), "{}", o.stdout);
    let cap = abs(CAP);
    let cap = cap.to_str().unwrap();
    let o = in_dir(&["report", cap, "--format", "html", "-o", "-"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("<html"));
    let o = in_dir(&["diff", cap, cap, "--format", "json", "-o", "-"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("\"figures\""));
    let mut c = iosleuth();
    let p = c.current_dir(cwd).args(["export", "--perfetto", "-", cap]);
    let out = p.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.len() > 100_000, "{}", out.stdout.len());
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrote standard output"));
    // As long as to a file (track ids differ from run to run).
    let o = in_dir(&["export", "--perfetto", "t.pftrace", cap]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let file = std::fs::read(cwd.join("t.pftrace")).unwrap();
    assert_eq!(file.len(), out.stdout.len());
    std::fs::remove_file(cwd.join("t.pftrace")).unwrap();
    // A directory of files cannot be standard output: refused, not a
    // directory named `-`.
    for to in ["--parquet", "--blktrace"] {
        let o = in_dir(&["export", to, "-", cap]);
        assert_eq!(o.code, 2, "{to}: {}", o.stderr);
        assert!(
            o.stderr.contains("cannot go to standard output"),
            "{}",
            o.stderr
        );
    }
    // Standard output twice is one too many.
    let o = in_dir(&["diff", stacks, stacks, "--flamegraph", "-"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    // Nothing named `-` was left anywhere.
    let left: Vec<_> = std::fs::read_dir(cwd).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn pages_and_binary_files_are_not_printed_on_a_terminal() {
    for (args, said) in [
        (
            format!("flamegraph {STACKS} --off-cpu -o -"),
            "flamegraph would print SVG to the terminal: add -o flame.svg, or pipe it",
        ),
        (
            format!("report --format html {CAP}"),
            "report would print HTML to the terminal: add -o report.html, or pipe it",
        ),
        (
            format!("diff --format html {CAP} {CAP}"),
            "diff would print HTML to the terminal: add -o diff.html, or pipe it",
        ),
        (
            format!("export --perfetto - {CAP}"),
            "export --perfetto would print a Perfetto trace (protobuf) to the terminal: add --perfetto trace.pftrace, or pipe it",
        ),
    ] {
        let (code, tty) = on_a_terminal(&args);
        assert_eq!(code, Some(2), "{args}: {tty}");
        assert!(tty.contains(said), "{args}: {tty}");
        assert!(!tty.contains("<svg") && !tty.contains("<html"), "{tty}");
    }
    // Text and JSON are for a terminal.
    let (code, tty) = on_a_terminal(&format!("report --format json -o - {CAP}"));
    assert_eq!(code, Some(0), "{tty}");
}

#[test]
fn a_bad_output_path_is_exit_2_before_the_work_and_names_it() {
    let d = tempdir();
    let missing = d.path().join("no/such/dir/out.txt");
    let missing = missing.to_str().unwrap();
    let dir = d.path().to_str().unwrap();
    for (args, named) in [
        (vec!["report", CAP, "-o", missing], missing),
        (vec!["report", CAP, "-o", dir], dir),
        // /proc takes no new file: found by creating one, not after the work.
        (
            vec!["report", CAP, "-o", "/proc/iosleuth-out.txt"],
            "/proc/iosleuth-out.txt",
        ),
        (
            vec!["flamegraph", STACKS, "--off-cpu", "-o", missing],
            missing,
        ),
        (vec!["diff", CAP, CAP, "-o", missing], missing),
        (vec!["export", "--perfetto", missing, CAP], missing),
        (
            vec!["export", "--parquet", "/proc/version", CAP],
            "/proc/version",
        ),
    ] {
        let started = std::time::Instant::now();
        let o = outcome(&args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(
            o.stderr.starts_with(&format!("iosleuth: {named}: ")),
            "{args:?}: {}",
            o.stderr
        );
        // Before the analysis: no warning of it was printed.
        assert!(!o.stderr.contains("warning"), "{args:?}: {}", o.stderr);
        assert!(started.elapsed().as_secs() < 5, "{args:?}");
    }
    // A file iosleuth did not write stays as it was when the work fails.
    let kept = d.path().join("kept.txt");
    std::fs::write(&kept, "mine").unwrap();
    let o = outcome(&["report", "Cargo.toml", "-o", kept.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "mine");
    let names: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["kept.txt"], "no probe or temporary file left");
}

#[test]
fn check_called_wrongly_aborts_a_bisect_and_lists_the_metrics() {
    for bad in [
        &["--metric", "p99 of fsync"][..],
        &["--metric", "dev.sda.d2c.p99_ms"],
        &["--threshold", "ten"],
        &["--threshold", "NaN"],
    ] {
        let o = outcome(&[&["check", NOMERGES0, NOMERGES2][..], bad].concat());
        assert!(o.code >= 128, "{bad:?}: {} {}", o.code, o.stderr);
        assert_ne!(o.code, 130, "{bad:?}");
        if bad[0] == "--metric" {
            assert!(
                o.stderr.contains(
                    "the metrics are: workload.ms_per_op, probe.OP.p50_ms, probe.OP.p99_ms"
                ) && o.stderr.contains("dev.MAJ,MIN.d2c.p99_ms"),
                "{}",
                o.stderr
            );
        }
    }
}

#[test]
fn metrics_have_ids_without_spaces_and_old_names_still_work() {
    let o = outcome(&[
        "check",
        "--metric",
        "dev.7,0.requests",
        NOMERGES0,
        NOMERGES2,
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with("regressed: dev.7,0.requests: 8 -> 512 (+6300.0%"),
        "{}",
        o.stdout
    );
    assert!(o.stderr.is_empty(), "{}", o.stderr);
    let o = outcome(&["check", "--metric", "7,0 requests", NOMERGES0, NOMERGES2]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(
            "warning: --metric: a figure's old name with spaces; its id is dev.7,0.requests"
        ),
        "{}",
        o.stderr
    );
    // diff shows the ids, each one `check --metric` takes, and beside
    // each its title for people; counts whole.
    let text = run(iosleuth().args(["diff", NOMERGES0, NOMERGES2]));
    let table: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    let header: Vec<&str> = table[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["METRIC", "FIGURE", "baseline", "candidate", "change"],
        "{text}"
    );
    let requests = table
        .iter()
        .find(|l| l.starts_with("dev.7,0.requests "))
        .unwrap_or_else(|| panic!("{text}"));
    let cols: Vec<&str> = requests.split_whitespace().collect();
    assert_eq!(
        &cols[..5],
        ["dev.7,0.requests", "7,0", "requests", "8", "512"],
        "{requests}"
    );
    // The columns line up under their headers.
    let at = |l: &str, word: &str| l.find(word).unwrap_or_else(|| panic!("{word} in {l}"));
    assert_eq!(at(requests, "7,0 requests"), at(table[0], "FIGURE"));
    let end = |l: &str, word: &str| at(l, word) + word.len();
    assert_eq!(end(requests, " 512"), end(table[0], "candidate"));
    let d2c = table
        .iter()
        .find(|l| l.starts_with("dev.7,0.d2c.p99_ms "))
        .unwrap();
    let cols: Vec<&str> = d2c.split_whitespace().collect();
    assert_eq!(&cols[1..4], ["7,0", "D2C", "p99"], "{d2c}");
    assert_eq!(cols[4], "(ms)", "{d2c}");
    assert!(cols[5].contains('.'), "{d2c}");
    for row in &table[1..] {
        let id = row.split_whitespace().next().unwrap();
        let o = outcome(&["check", "--metric", id, NOMERGES0, NOMERGES2]);
        assert!(o.code == 0 || o.code == 1, "{id}: {} {}", o.code, o.stderr);
    }
    let j: serde_json::Value = serde_json::from_str(&run(
        iosleuth().args(["diff", "--format", "json", NOMERGES0, NOMERGES2])
    ))
    .unwrap();
    let f = &j["figures"][0];
    assert_eq!(f["id"], "dev.7,0.requests", "{j:#}");
    assert_eq!(f["name"], "7,0 requests");
    assert_eq!(f["unit"], "count");
    // The JSON keeps its keys: the title is the text table's.
    let keys: Vec<&String> = f.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "baseline",
            "baseline_range",
            "candidate",
            "candidate_range",
            "change_pct",
            "id",
            "name",
            "significant",
            "unit"
        ],
        "{f}"
    );
}

/// diff's titles name a device as the snapshot does (`loop0`, `vda`),
/// a probe operation and a function by their names, the unit in
/// parentheses; the id before each stays what `check --metric` takes.
#[test]
fn diff_titles_each_metric_beside_its_id() {
    let text = run(iosleuth().args([
        "diff",
        "tests/fixtures/cpu-contention-alone.cap",
        "tests/fixtures/cpu-contention-hogs.cap",
    ]));
    let title = |id: &str| -> String {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("{id}\n{text}"));
        // After the id, the title runs to the first value.
        let words: Vec<&str> = row.split_whitespace().skip(1).collect();
        let first_value = words
            .iter()
            .position(|w| w.parse::<f64>().is_ok())
            .unwrap_or_else(|| panic!("{row}"));
        words[..first_value].join(" ")
    };
    assert_eq!(title("probe.fsync.p99_ms"), "fsync p99 (ms)");
    assert_eq!(title("probe.fsync.count"), "fsync count");
    assert_eq!(title("dev.7,0.d2c.p99_ms"), "loop0 D2C p99 (ms)");
    assert_eq!(title("dev.7,0.avg_request_kib"), "loop0 avg request (KiB)");
    assert_eq!(title("dev.254,0.requests"), "vda requests");
    assert_eq!(title("journal.7,0.commits"), "loop0 journal commits");
    let stacks = run(iosleuth().args([
        "diff",
        "--func",
        "add_transaction_credits",
        "tests/fixtures/stacks-journal-1024m.cap",
        "tests/fixtures/stacks-journal-4m.cap",
    ]));
    assert!(
        stacks.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() > 5
                && w[..5]
                    == [
                        "function.add_transaction_credits.blocked_total_ms",
                        "add_transaction_credits",
                        "blocked",
                        "total",
                        "(ms)",
                    ]
        }),
        "{stacks}"
    );
}

#[test]
fn dump_events_take_tracepoint_names_and_refuse_unknown_ones() {
    let dump = |events: &str| run(iosleuth().args(["dump", NOMERGES2, "--events", events]));
    let by_letter = dump("D");
    assert!(by_letter.lines().count() > 100);
    assert_eq!(dump("block_rq_issue"), by_letter);
    assert_eq!(dump("block:block_rq_issue"), by_letter);
    assert_eq!(dump("block:D"), by_letter);
    assert_eq!(dump("D,C"), dump("block_rq_issue,block_rq_complete"));
    let o = outcome(&["dump", NOMERGES0, "--events", "block_rq_isue"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("--events: no event \"block_rq_isue\"; give blkparse's letters (Q, M, F")
            && o.stderr.contains("block_rq_issue, block_rq_complete"),
        "{}",
        o.stderr
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn dump_prints_addresses_in_hex_and_devices_as_maj_min() {
    // ftrace_print's ip, workqueue's work struct, ext4's and jbd2's dev_t,
    // as `trace-cmd report` prints them.
    let text = run(iosleuth().args(["dump", "tests/fixtures/cgroup-throttled.cap"]));
    let field = |name: &str| -> Vec<&str> {
        text.split_whitespace()
            .filter_map(|w| w.strip_prefix(name))
            .collect()
    };
    let work = field("work=");
    assert!(!work.is_empty());
    assert!(work.iter().all(|w| w.starts_with("0xffff")), "{work:?}");
    let devs = field("dev=");
    assert!(devs.iter().all(|d| d.contains(',')), "{devs:?}");
    let text = run(iosleuth().args(["dump", CAP, "--events", "print"]));
    assert!(text.contains(" ip=0xffffffff"), "{text}");
    assert!(!text.contains("ip=-"), "{text}");
    let j = run(iosleuth().args([
        "dump", CAP, "--events", "print", "--format", "json", "--limit", "1",
    ]));
    let j: serde_json::Value = serde_json::from_str(j.lines().next().unwrap()).unwrap();
    assert!(
        j["fields"]["ip"]
            .as_str()
            .unwrap()
            .starts_with("0xffffffff"),
        "{j}"
    );
}

#[test]
fn time_counts_from_the_trace_start_or_abs_for_the_trace_clock() {
    let whole = json_report(&[JOURNAL], &[]);
    let first = whole["span"]["first_ns"].as_u64().unwrap();
    let part = json_report(&[JOURNAL], &["--time", "0..0.2"]);
    let (f, l) = (
        part["span"]["first_ns"].as_u64().unwrap(),
        part["span"]["last_ns"].as_u64().unwrap(),
    );
    assert!(
        f >= first && l <= first + 200_000_000 && l > f,
        "{f} {l} {first}"
    );
    assert_eq!(json_report(&[JOURNAL], &["--time", "+0..+0.2"]), part);
    let abs = format!("abs:{}..{}", secs(first), secs(first + 200_000_000));
    assert_eq!(json_report(&[JOURNAL], &["--time", &abs]), part);
    // A window past the end says where the trace is, both ways.
    let o = outcome(&["report", JOURNAL, "--time", "1000..1001"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("; the trace spans --time 0..0.406396 (seconds after its start), abs:16435.585521354..16435.991917581 in its clock"),
        "{}",
        o.stderr
    );
    for bad in ["2..1", "1..abs:2", "abs:+1..2"] {
        let o = outcome(&["report", JOURNAL, "--time", bad]);
        assert_eq!(o.code, 2, "{bad}: {}", o.stderr);
    }
}

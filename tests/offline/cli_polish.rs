//! What a CLI is expected to come with: shell completions and a manual
//! page made from the same definitions as `--help`.

use crate::common;

use common::*;

const SUBCOMMANDS: [&str; 9] = [
    "report",
    "dump",
    "export",
    "flamegraph",
    "probe",
    "diff",
    "check",
    "lab",
    "record",
];

#[test]
fn completions_load_in_bash_and_know_every_subcommand() {
    let script = run(iosleuth().args(["completions", "bash"]));
    for s in SUBCOMMANDS {
        assert!(script.contains(s), "{s}");
    }
    // bash loads it and registers the completion.
    let dir = tempdir();
    let path = dir.path().join("iosleuth.bash");
    std::fs::write(&path, &script).unwrap();
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p iosleuth", path.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("_iosleuth"));
    let zsh = run(iosleuth().args(["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef iosleuth"));
}

#[test]
fn the_manual_page_is_roff_naming_every_subcommand() {
    let man = run(iosleuth().arg("man"));
    assert!(man.contains(".TH iosleuth 1"), "{man}");
    assert!(man.contains("Find out why Linux I/O got slow"));
    for s in SUBCOMMANDS {
        assert!(man.contains(&format!("iosleuth\\-{s}")), "{s}");
    }
}

/// `--help` offers each command what it uses and says what it reads:
/// report that it diagnoses, and every input kind.
#[test]
fn help_offers_each_command_its_own_options_and_names_its_inputs() {
    let help = |args: &[&str]| run(iosleuth().args(args).arg("--help"));
    let flamegraph = help(&["flamegraph"]);
    for irrelevant in ["--interval", "--device", "--top", "--func", "--explain"] {
        assert!(
            !flamegraph.contains(irrelevant),
            "{irrelevant}: {flamegraph}"
        );
    }
    for used in [
        "--off-cpu",
        "--time",
        "--pid",
        "--comm",
        "--kallsyms",
        "--max-input",
    ] {
        assert!(flamegraph.contains(used), "{used}: {flamegraph}");
    }
    let dump = help(&["dump"]);
    for irrelevant in ["--interval", "--device", "--top", "--time", "--kallsyms"] {
        assert!(!dump.contains(irrelevant), "{irrelevant}: {dump}");
    }
    let report = help(&["report"]);
    assert!(report.starts_with("Diagnose slow I/O"), "{report}");
    assert!(report.contains("root cause with its evidence"), "{report}");
    for command in ["report", "dump", "export", "flamegraph", "diff", "check"] {
        let h = help(&[command]);
        for kind in [
            "`iosleuth record`",
            "blktrace",
            "blkparse",
            "ftrace",
            "trace.dat",
            "perf.data",
            "`perf script`",
            "gzip or zstd",
        ] {
            assert!(h.contains(kind), "{command} --help lacks {kind}: {h}");
        }
    }
    // The one-line summary (-h, the command list, the manual's NAME)
    // names every format export writes.
    let export = run(iosleuth().args(["export", "-h"]));
    let summary = export.lines().next().unwrap();
    for format in [
        "blkparse",
        "btt",
        "iowatcher",
        "seekwatcher",
        "Parquet",
        "Perfetto",
    ] {
        assert!(summary.contains(format), "{format}: {summary}");
    }
}

const SECTIONS: [&str; 6] = [
    ".SH NAME",
    ".SH SYNOPSIS",
    ".SH DESCRIPTION",
    ".SH OPTIONS",
    ".SH \"EXIT STATUS\"",
    ".SH EXAMPLES",
];

/// The pages a page names (`\fBiosleuth\-report\fR(1)`) in its SEE ALSO
/// and SUBCOMMANDS sections, as file names.
fn named_pages(page: &str) -> Vec<String> {
    let named = |section: &str| -> Vec<String> {
        let Some((_, rest)) = page.split_once(section) else {
            return Vec::new();
        };
        let body = rest.split("\n.SH ").next().unwrap();
        body.replace("\\fB", "")
            .replace("\\fR", "")
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| w.starts_with("iosleuth") && w.ends_with("(1)"))
            .map(|w| w.replace("\\-", "-").replace("(1)", ".1"))
            .collect()
    };
    let mut all = named(".SH \"SEE ALSO\"");
    all.extend(named(".SH SUBCOMMANDS"));
    all
}

/// `man --dir` writes a page for every command; every page another names
/// exists, each has the sections a manual page has, and groff formats
/// them without a warning (without groff: a skip line, a failure under
/// CI=true).
#[test]
fn the_manual_has_a_page_for_every_command_and_each_renders_cleanly() {
    let dir = tempdir();
    let o = iosleuth()
        .args(["man", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let top = std::fs::read_to_string(dir.path().join("iosleuth.1")).unwrap();
    assert_eq!(top, run(iosleuth().arg("man")), "`man` prints iosleuth.1");
    // SYNOPSIS names each option's value: `--format` alone reads as a flag.
    let report = std::fs::read_to_string(dir.path().join("iosleuth-report.1")).unwrap();
    let synopsis = report
        .split(".SH SYNOPSIS")
        .nth(1)
        .unwrap()
        .split(".SH")
        .next()
        .unwrap();
    for want in [
        r"[\fB\-\-format\fR \fIFORMAT\fR]",
        r"[\fB\-o|\-\-output\fR \fIFILE\fR]",
        r"[\fB\-\-off\-cpu\fR]",
        "<PATHS>...",
    ] {
        assert!(synopsis.contains(want), "{want}: {synopsis}");
    }
    let see_also = named_pages(&top);
    for s in SUBCOMMANDS {
        assert!(
            see_also.contains(&format!("iosleuth-{s}.1")),
            "{s}: {see_also:?}"
        );
    }
    let mut pages: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pages.sort();
    assert!(pages.len() > SUBCOMMANDS.len(), "{pages:?}");
    for path in &pages {
        let page = std::fs::read_to_string(path).unwrap();
        for section in SECTIONS {
            assert!(page.contains(section), "{}: no {section}", path.display());
        }
        for named in named_pages(&page) {
            assert!(
                dir.path().join(&named).exists(),
                "{} names {named}",
                path.display()
            );
        }
    }
    let report = run(iosleuth().args(["man", "report"]));
    assert_eq!(
        report,
        std::fs::read_to_string(dir.path().join("iosleuth-report.1")).unwrap()
    );
    let check = std::fs::read_to_string(dir.path().join("iosleuth-check.1")).unwrap();
    for code in ["0", "1", "125", "128 or more"] {
        assert!(
            check.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "{code}: {check}"
        );
    }

    let groff = std::process::Command::new("groff")
        .arg("--version")
        .output();
    if !groff.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "test cannot run: missing the `groff` program (apt-get install groff-base)"
        );
        eprintln!("skipped: rendering the manual pages needs groff, which is missing");
        return;
    }
    for path in &pages {
        let o = std::process::Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(path)
            .output()
            .unwrap();
        let warnings = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && warnings.is_empty(),
            "{}: {warnings}",
            path.display()
        );
    }
}

/// Progress shows on a terminal only: `script` gives the command one;
/// through a pipe stderr holds no spinner.
#[test]
fn progress_is_shown_on_a_terminal_only() {
    let bin = env!("CARGO_BIN_EXE_iosleuth");
    let cap = "tests/fixtures/wbt-default.cap";
    let o = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{bin} report {cap} >/dev/null"),
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(tty.contains("reading"), "{tty:?}");
    let o = iosleuth().arg("report").arg(cap).output().unwrap();
    let piped = String::from_utf8_lossy(&o.stderr);
    assert!(
        !piped.contains("reading") && !piped.contains('\r'),
        "{piped:?}"
    );
}

/// `--format html` on a terminal is refused before any work (exit 2,
/// saying to give -o); through a pipe the page is written; `--format`
/// offers each command only what it writes.
#[test]
fn a_page_is_not_printed_on_a_terminal_and_each_command_offers_its_formats() {
    let bin = env!("CARGO_BIN_EXE_iosleuth");
    let cap = "tests/fixtures/wbt-default.cap";
    let o = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{bin} report --format html {cap}"),
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(
        tty.contains("report would print HTML to the terminal: add -o report.html, or pipe it"),
        "{tty:?}"
    );
    assert!(!tty.contains("<html"), "{tty:?}");
    let piped = iosleuth()
        .args(["report", "--format", "html", cap])
        .output()
        .unwrap();
    assert!(piped.status.success(), "{piped:?}");
    assert!(String::from_utf8_lossy(&piped.stdout).contains("<html"));
    for (command, refused) in [("diff", "folded"), ("dump", "html"), ("dump", "folded")] {
        let o = iosleuth()
            .args([command, "--format", refused, cap, cap])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{command} --format {refused}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("possible values"), "{err}");
    }
}

/// `-q` keeps only errors: the warnings and notes a run prints otherwise
/// are gone, the output and the exit status are the same, and an error
/// still says what is wrong.
#[test]
fn quiet_prints_only_errors() {
    // Another kernel than the capture's runs, and perf's build-id cache
    // (~/.debug) is empty: its symbols are warned of, whatever kernel this
    // machine runs and whatever perf cached here.
    let home = tempdir();
    let run = |args: &[&str]| {
        outcome_of(
            iosleuth()
                .args(args)
                .env(
                    "IOSLEUTH_RUNNING_BUILD_ID",
                    "0123456789abcdef0123456789abcdef01234567",
                )
                .env("HOME", home.path()),
        )
    };
    let loud = run(&["report", "tests/fixtures/perf-urandom.data"]);
    assert!(loud.stderr.contains("warning:"), "{}", loud.stderr);
    let quiet = run(&["-q", "report", "tests/fixtures/perf-urandom.data"]);
    assert_eq!((quiet.code, quiet.stderr.as_str()), (0, ""));
    assert_eq!(quiet.stdout, loud.stdout);
    let dump = outcome(&[
        "dump",
        "-q",
        "tests/fixtures/slowdev-fsync.cap",
        "--limit",
        "1",
    ]);
    assert_eq!((dump.code, dump.stderr.as_str()), (0, ""));
    let bad = outcome(&["report", "-q", "Cargo.toml"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("Cargo.toml"), "{}", bad.stderr);
}

/// `-v` says what was read and how: each input with its format and
/// events, the events analyzed, the time zero, the event sets recorded and
/// the events no analysis used; the report itself is the same. `-q -v`
/// is a usage error.
#[test]
fn verbose_says_what_was_read() {
    let cap = "tests/fixtures/slowdev-fsync.cap";
    let plain = outcome(&["report", cap]);
    let v = outcome(&["-v", "report", cap]);
    assert_eq!((v.code, &v.stdout), (0, &plain.stdout));
    let json = json_report(&[cap], &[]);
    for i in json["inputs"].as_array().unwrap() {
        let line = format!(
            "iosleuth: read {} ({}): {} events,",
            i["path"].as_str().unwrap(),
            i["format"].as_str().unwrap(),
            i["events"]
        );
        assert!(v.stderr.contains(&line), "{line} in\n{}", v.stderr);
    }
    assert!(
        v.stderr
            .contains(&format!("iosleuth: analyzed {} events in ", json["events"])),
        "{}",
        v.stderr
    );
    assert!(
        v.stderr
            .contains("time zero 14277.843213642 on the trace clock"),
        "{}",
        v.stderr
    );
    assert!(
        v.stderr.contains(
            "event sets recorded: block, fs, sched, syscalls; not recorded: writeback, readahead, irq, workqueue"
        ),
        "{}",
        v.stderr
    );
    assert!(
        v.stderr
            .contains("events not analyzed: ext4:ext4_da_write_begin (377)"),
        "{}",
        v.stderr
    );
    assert!(
        !plain.stderr.contains("iosleuth: read "),
        "{}",
        plain.stderr
    );
    let both = outcome(&["-q", "-v", "report", cap]);
    assert_eq!(both.code, 2, "{}", both.stderr);
}

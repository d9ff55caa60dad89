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

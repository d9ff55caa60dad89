//! Every example command in the README and docs/ does what its page says:
//! each `iosleuth …` line of a code block is run on the committed fixtures
//! (the file names the page makes up stand for one of them) and exits as
//! documented; the commands that need root and a workload (`record`,
//! `watch`, `lab`, `probe`, `try`) are not run here, but every option they
//! show must be one their `--help` lists.

use crate::common;

use common::*;
use std::path::Path;

/// The names pages use for a user's files, and the fixture each stands for.
const STAND_INS: &[(&str, &str)] = &[
    (
        "sda.blktrace.0",
        "tests/fixtures/loop-seqread-nomerges0.blk",
    ),
    ("cap.blk", "tests/fixtures/loop-seqread-nomerges0.blk"),
    ("trace.dat", "tests/fixtures/tracedat-readahead.v7-zstd.dat"),
    ("perf.data", "tests/fixtures/perf-urandom.data"),
    ("good.cap", "tests/fixtures/healthy-run1.cap"),
    ("good1.cap", "tests/fixtures/healthy-run1.cap"),
    ("good2.cap", "tests/fixtures/healthy-run2.cap"),
    ("bad.cap", "tests/fixtures/slowdev-fsync.cap"),
    ("bad1.cap", "tests/fixtures/slowdev-fsync.cap"),
    ("bad2.cap", "tests/fixtures/fsync-bulk.cap"),
    (
        "/var/lib/iosleuth-watch/20261127T101500Z-nvme0n1",
        "tests/fixtures/light-slowdev.cap",
    ),
];

/// Commands that need root, tracefs and a workload.
const LIVE: &[&str] = &["record", "watch", "lab", "probe", "try"];

/// (page, line number, the command's words) of every example.
fn examples() -> Vec<(String, usize, Vec<String>)> {
    let mut pages = vec![std::path::PathBuf::from("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir("docs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut out = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut in_code = false;
        for (i, line) in text.lines().enumerate() {
            if line.starts_with("```") {
                in_code = !in_code;
                continue;
            }
            let line = line.trim_start();
            let line = line.strip_prefix("sudo ").unwrap_or(line);
            let line = line
                .strip_prefix("cargo run --release -q -- ")
                .map(|l| format!("iosleuth {l}"))
                .unwrap_or_else(|| line.to_string());
            // `iosleuth report: …` is output, not a command.
            if !in_code || !line.starts_with("iosleuth ") || line.starts_with("iosleuth report:") {
                continue;
            }
            let command = line.split(" # ").next().unwrap().trim_end();
            let words = command
                .split_whitespace()
                .skip(1)
                .map(str::to_string)
                .collect();
            out.push((page.display().to_string(), i + 1, words));
        }
    }
    out
}

#[test]
fn every_documented_example_runs_as_its_page_says() {
    let all = examples();
    assert!(all.len() >= 15, "{} examples", all.len());
    let (mut ran, mut checked) = (0, 0);
    for (page, line, words) in all {
        let at = format!("{page}:{line}: iosleuth {}", words.join(" "));
        let command = words[0].as_str();
        if LIVE.contains(&command) {
            // Every option before the workload is one --help lists.
            let sub: Vec<&str> = words
                .iter()
                .take_while(|w| !w.starts_with('-'))
                .map(String::as_str)
                .collect();
            let help = run(iosleuth().args(&sub).arg("--help"));
            for w in words.iter().take_while(|w| *w != "--") {
                if let Some(flag) = w.strip_prefix("--").or_else(|| w.strip_prefix('-')) {
                    let shown = if w.starts_with("--") {
                        format!("--{flag}")
                    } else {
                        format!("-{flag},")
                    };
                    assert!(help.contains(&shown), "{at}: {w} is not in its --help");
                }
            }
            checked += 1;
            continue;
        }
        let dir = tempdir();
        let mut args: Vec<String> = Vec::new();
        let mut stdout_to = None;
        let mut it = words.iter().peekable();
        while let Some(w) = it.next() {
            if w == ">" {
                stdout_to = it.next().cloned();
                continue;
            }
            let stand_in = STAND_INS.iter().find(|(name, _)| name == w);
            let word = match stand_in {
                Some((_, fixture)) => fixture.to_string(),
                // Where the page writes, the test writes in its own
                // directory.
                None if w.starts_with('/') || w == "out" => {
                    let p = dir.path().join(Path::new(w).file_name().unwrap());
                    p.to_str().unwrap().to_string()
                }
                None => w.clone(),
            };
            args.push(word);
        }
        let o = outcome(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let documented: &[i32] = match command {
            // "exit 0/1/125", for git bisect run.
            "check" => &[0, 1, 125],
            _ => &[0],
        };
        assert!(
            documented.contains(&o.code),
            "{at}: exit {} ({})",
            o.code,
            o.stderr
        );
        if stdout_to.is_some() {
            assert!(!o.stdout.is_empty(), "{at}: nothing to write");
        }
        if command == "man" {
            let to = args.last().unwrap();
            let pages = std::fs::read_dir(to).unwrap().count();
            assert!(pages > 5, "{at}: {pages} man pages");
        }
        ran += 1;
    }
    assert!(ran >= 10 && checked >= 5, "ran {ran}, checked {checked}");
}

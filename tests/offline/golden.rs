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
fn fixtures() -> Vec<PathBuf> {
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

#[test]
fn every_fixtures_json_keys_and_first_lines_are_the_golden_ones() {
    let inputs = fixtures();
    assert!(inputs.len() >= 60, "{} fixtures", inputs.len());
    // Two at a time: each report is its own process.
    let run = |part: &[PathBuf]| {
        part.iter()
            .map(|p| (p.clone(), json_report(&[p], &[])))
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
    check_golden("first-lines.txt", &first_lines);
}

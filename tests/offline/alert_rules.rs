//! contrib/iosleuth-alerts.yml, the Prometheus alerting rules shipped for
//! `watch`: promtool accepts them and their unit tests pass, they query
//! only families a scrape holds, and every alert is tested both firing and
//! quiet (promtool passes a quiet test of an alert that does not exist).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const RULES: &str = "contrib/iosleuth-alerts.yml";
const RULE_TESTS: &str = "contrib/iosleuth-alerts.test.yml";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `promtool ARGS` in contrib/ (the test file names the rules relative to
/// itself), which must succeed.
fn promtool(args: &[&str]) {
    let dir: PathBuf = root().join("contrib");
    let o = Command::new("promtool")
        .args(args)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "promtool {} failed ({}):\n{}\n{}",
        args.join(" "),
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
#[ignore = "needs promtool (scripts/test installs it)"]
fn promtool_accepts_the_alert_rules_and_their_tests_pass() {
    common::need_programs(&["promtool"]);
    promtool(&["check", "rules", "iosleuth-alerts.yml"]);
    promtool(&["test", "rules", "iosleuth-alerts.test.yml"]);
}

/// The families of docs/WATCH.md's metrics tables, with their types: a
/// unit test keeps those rows equal to what `render` emits (the exporter
/// is not public to test binaries).
fn documented_families() -> BTreeMap<String, String> {
    read("docs/WATCH.md")
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| {
            let (name, rest) = l.split_once('`')?;
            let kind = rest.trim_start_matches(" |").split('|').next()?.trim();
            Some((name.to_string(), kind.to_string()))
        })
        .collect()
}

/// Every `expr` of a rule file: on its line, or a block scalar (`|`) of
/// the lines indented past its key.
fn exprs(yaml: &str) -> Vec<String> {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let rest = rest.trim();
        if !rest.starts_with('|') && !rest.starts_with('>') {
            out.push(rest.to_string());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let block: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
            .copied()
            .collect();
        out.push(block.join("\n"));
    }
    out
}

/// The metric names of an expression: label values (quoted) are not, and
/// recording rules' names (with a `:`) are the file's own.
fn metric_names(expr: &str) -> Vec<String> {
    let mut unquoted = String::new();
    let mut quoted = false;
    for c in expr.chars() {
        if c == '"' {
            quoted = !quoted;
        } else if !quoted {
            unquoted.push(c);
        }
    }
    unquoted
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.starts_with("iosleuth_") || w.starts_with("process_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_alert_rules_query_only_families_a_scrape_holds() {
    let families = documented_families();
    assert!(families.len() >= 30, "{families:?}");
    let exprs = exprs(&read(RULES));
    assert!(exprs.len() >= 10, "{} expressions in {RULES}", exprs.len());
    let mut seen = BTreeSet::new();
    for expr in &exprs {
        for name in metric_names(expr) {
            // A histogram's series carry a suffix its family does not.
            let family = ["_bucket", "_count", "_sum"]
                .iter()
                .filter_map(|s| name.strip_suffix(s))
                .find(|f| families.get(*f).is_some_and(|k| k == "histogram"))
                .unwrap_or(&name);
            assert!(
                families.contains_key(family),
                "{RULES} queries {name}, which no scrape holds (docs/WATCH.md's metrics table), in:\n{expr}"
            );
            seen.insert(family.to_string());
        }
    }
    assert!(seen.len() >= 8, "{seen:?}");
}

#[test]
fn every_alert_is_tested_firing_and_quiet() {
    let alerts: BTreeSet<String> = read(RULES)
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- alert:"))
        .map(|a| a.trim().to_string())
        .collect();
    assert!(alerts.len() >= 9, "{alerts:?}");
    // alertname → (tested firing, tested quiet)
    let mut tested: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in read(RULE_TESTS).lines().map(str::trim) {
        if let Some(a) = line.strip_prefix("alertname:") {
            let a = a.trim().to_string();
            assert!(
                alerts.contains(&a),
                "{RULE_TESTS} tests {a}: no such alert in {RULES}"
            );
            current = Some(a);
        } else if let Some(rest) = line.strip_prefix("exp_alerts:") {
            let a = current.take().expect("exp_alerts before its alertname");
            let t = tested.entry(a).or_default();
            if rest.trim() == "[]" {
                t.1 = true;
            } else {
                t.0 = true;
            }
        }
    }
    for a in &alerts {
        let (firing, quiet) = tested.get(a).copied().unwrap_or_default();
        assert!(firing, "{RULE_TESTS} never tests {a} firing");
        assert!(quiet, "{RULE_TESTS} never tests {a} quiet");
    }
}

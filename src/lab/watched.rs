//! `lab run --watch`: how `iosleuth watch`, run beside a scenario's bad
//! run, did: the capture its trigger kept names the scenario's cause, and
//! nothing fires beside a healthy run.

use super::recording::Lab;
use super::scenarios::Scenario;
use std::path::Path;

/// The scenarios whose cause `watch`'s default triggers must catch: a
/// request of 100 ms or more, a thread runnable 100 ms or more. The other
/// causes make neither in the lab's short runs (and no baseline exists
/// for the p99 trigger), so a silent trigger there is not judged.
const WATCH_MUST_FIRE: [&str; 2] = ["slow-device", "rt-starvation"];

/// How `watch` did beside the bad run: `Some(true)` as expected,
/// `Some(false)` not, `None` not judged; and what to say.
pub fn verdict(s: &Scenario, lab: &Lab) -> (Option<bool>, String) {
    let log = std::fs::read_to_string(lab.watch_log())
        .unwrap_or_else(|e| format!("(cannot read {}: {e})", lab.watch_log().display()));
    let triggers: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split_once("trigger: ").map(|t| t.1))
        .collect();
    let mut kept: Vec<std::path::PathBuf> = std::fs::read_dir(lab.watch_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("report.json").is_file())
        .collect();
    kept.sort();
    let top = |dir: &Path| -> Option<String> {
        let text = std::fs::read_to_string(dir.join("report.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        v["findings"][0]["id"].as_str().map(str::to_string)
    };
    let Some(id) = s.expect else {
        return match triggers.first() {
            None => (Some(true), "no trigger fired, as expected".into()),
            Some(t) => (
                Some(false),
                format!("fired on a healthy run ({} time(s)): {t}", triggers.len()),
            ),
        };
    };
    if let Some(lacks) = crate::diagnose::catalog()
        .iter()
        .find(|r| r.id == id)
        .and_then(|r| r.light_lacks)
    {
        return (None, format!("not judged: a light capture lacks {lacks}"));
    }
    let Some(first) = kept.first() else {
        let must = WATCH_MUST_FIRE.contains(&s.name);
        let said = match triggers.first() {
            Some(t) => format!("fired ({t}) but kept no diagnosed capture"),
            // What watch said is what tells why (hooks detached, a wait
            // shorter than the trigger's bound, ...).
            None if must => format!(
                "no trigger fired during the bad run; watch's log:\n{}{}",
                log.trim_end(),
                std::fs::read_to_string(lab.watch_stderr())
                    .ok()
                    .filter(|e| !e.trim().is_empty())
                    .map_or_else(String::new, |e| format!("\nwatch's standard error:\n{}", e.trim_end()))
            ),
            None => "not judged: no trigger fired (this cause makes no 100 ms request nor a 100 ms runnable wait here)".into(),
        };
        return ((must || !triggers.is_empty()).then_some(false), said);
    };
    let found = top(first).unwrap_or_else(|| "no finding".into());
    let ok = found == id;
    (
        Some(ok),
        format!(
            "trigger {}; kept {}: top finding {found}{}",
            triggers.first().unwrap_or(&"?"),
            first.display(),
            if ok { ", as expected" } else { "" }
        ),
    )
}

//! Diagnosis: rules over the analyses and the system snapshot that name a
//! root cause with this capture's numbers, why it causes the symptom, and
//! what to do (DESIGN.md's findings). Each rule is judged by evidence in
//! the trace; the snapshot confirms or weakens it. A rule that does not
//! fire says why (`report --explain ID`).
//!
//! Layout: this module holds the types ([`Finding`], [`Severity`],
//! [`Verdict`], [`Rule`]) and runs the catalog. `rules/mod.rs` is the
//! catalog itself, in DESIGN.md's order; each rule lives in
//! `rules/<id>.rs` with its `RULE`, its check, its thresholds as named
//! constants (each saying where its number comes from) and its unit tests
//! (at least one where it fires, one where it stays silent).
//! `rules/helpers.rs` holds what rules share, and is the only place that
//! reads the system snapshot. `rules/testkit.rs` (tests only) builds the
//! tests' analyses from a few lines of ftrace text, with a snapshot when
//! a test needs one.
//!
//! To add a rule: write `rules/<id>.rs` with `pub const RULE: Rule`, its
//! check and its tests, then add `mod <id>;` and `<id>::RULE` (where it
//! belongs in the order) to `rules/mod.rs`. A question for the snapshot
//! becomes a function in `rules/helpers.rs`.

mod impact;
pub mod remedy;
mod rules;
pub(crate) use rules::tried_journal_kib;
pub mod rules_doc;
mod stack;
mod unclaimed;

pub use remedy::Remedy;
pub use unclaimed::UNEXPLAINED;

/// Small ftrace texts for unit tests outside the rules too.
#[cfg(test)]
pub(crate) use rules::testkit;

use crate::analyze::Analysis;
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Serialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

impl Severity {
    /// As JSON writes it: `critical`, `warning`, `info`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

#[derive(Debug, Serialize, Clone)]
pub struct Finding {
    pub id: &'static str,
    pub severity: Severity,
    pub title: String,
    pub evidence: Value,
    pub explanation: String,
    pub workaround: String,
    /// The workaround as settings `iosleuth try` can apply, where it is
    /// one (`null` in JSON: it is not a setting).
    pub remedy: Option<Remedy>,
}

/// A rule's answer: a finding, or why there is none.
#[derive(Debug, Clone)]
pub enum Verdict {
    Fired(Finding),
    NotFired(String),
}

pub struct Rule {
    pub id: &'static str,
    /// One line: what the rule looks for.
    pub looks_for: &'static str,
    /// Its thresholds in words, as docs/RULES.md and `report --explain`
    /// print them (beside the constants, a change of one shows here).
    pub fires_when: &'static str,
    /// Where it stays silent although a related symptom is there: the
    /// committed captures its tests diagnose, in words (docs/RULES.md).
    pub stays_silent: &'static str,
    /// The event sets (`record --events`) without which it cannot judge.
    pub needs: &'static [&'static str],
    /// What a light capture (`record --light`) lacks to judge this rule
    /// (only the full recorder writes those events); `None`: it can.
    pub light_lacks: Option<&'static str>,
    /// For a rule a light capture can judge: what this light capture
    /// lacks, if anything (one made before it counted the evidence).
    pub light_lacks_when: Option<fn(&Analysis) -> Option<String>>,
    /// The settings its finding's `remedy` changes, in words
    /// (docs/RULES.md); `None`: its workaround is not a setting.
    pub remedy: Option<&'static str>,
    pub check: fn(&Analysis) -> Verdict,
}

/// The catalog, in DESIGN.md's order.
pub fn catalog() -> &'static [Rule] {
    rules::CATALOG
}

/// Every rule's verdict.
pub fn verdicts(a: &Analysis) -> Vec<(&'static str, Verdict)> {
    catalog().iter().map(|r| (r.id, verdict(a, r))).collect()
}

/// One rule's verdict, with what a light capture lacked when it is one.
pub fn verdict(a: &Analysis, r: &Rule) -> Verdict {
    light_lacks(a, r, (r.check)(a))
}

/// Which rules the input let judge, and why the others could not.
#[derive(Debug, Default, Serialize)]
pub struct Coverage {
    pub judged: Vec<&'static str>,
    pub not_judged: Vec<NotJudged>,
    /// The command that would record what they lacked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct NotJudged {
    pub id: &'static str,
    pub lacks: String,
}

/// What each rule could judge. A rule that fired judged; one whose event
/// sets the input lacks (or, on a light capture, whose evidence only the
/// full recorder writes) could not, and its silence is no verdict.
pub fn coverage(a: &Analysis, findings: &[Finding]) -> Coverage {
    let mut c = Coverage::default();
    let mut sets: Vec<&str> = Vec::new();
    for r in catalog() {
        let lacks = match (&a.light, r.light_lacks) {
            _ if findings.iter().any(|f| f.id == r.id) => None,
            (Some(_), Some(what)) => Some(format!("a light capture lacks {what}")),
            (Some(_), None) => r.light_lacks_when.and_then(|f| f(a)),
            (None, _) => {
                let missing: Vec<(&str, String)> = r
                    .needs
                    .iter()
                    .filter_map(|s| a.recorded.has_set(s).err().map(|why| (*s, why)))
                    .collect();
                for (s, _) in &missing {
                    if !sets.contains(s) {
                        sets.push(s);
                    }
                }
                missing.into_iter().next().map(|(_, why)| why)
            }
        };
        match lacks {
            Some(lacks) => c.not_judged.push(NotJudged { id: r.id, lacks }),
            None => c.judged.push(r.id),
        }
    }
    c.record = match (&a.light, sets.is_empty(), c.not_judged.is_empty()) {
        (_, _, true) => None,
        (Some(_), _, _) => Some("iosleuth record (without --light)".into()),
        (None, false, _) => Some(format!("iosleuth record --events {}", sets.join(","))),
        (None, true, _) => None,
    };
    c
}

/// A rule that did not fire on a light capture says what the capture
/// lacked, and how to record it.
fn light_lacks(a: &Analysis, r: &Rule, v: Verdict) -> Verdict {
    match (v, &a.light, r.light_lacks) {
        (Verdict::NotFired(why), Some(_), Some(what)) => Verdict::NotFired(format!(
            "a light capture lacks {what}: record without --light to judge it ({why})"
        )),
        (Verdict::NotFired(why), Some(_), None) => match r.light_lacks_when.and_then(|f| f(a)) {
            Some(lacks) => Verdict::NotFired(format!("{lacks}: record again to judge it ({why})")),
            None => Verdict::NotFired(why),
        },
        (v, _, _) => v,
    }
}

/// The findings, most important first: by severity, then by the share of
/// the workload's time the cause explains (in each finding's evidence when
/// the capture can tell it; the severity follows it too), then in catalog
/// order. When a large part of the workload's time is one no finding's
/// cause accounts for, an `unexplained` finding names it and what held it
/// there.
pub fn diagnose(a: &Analysis) -> Vec<Finding> {
    let mut out: Vec<Finding> = verdicts(a)
        .into_iter()
        .filter_map(|(_, v)| match v {
            Verdict::Fired(f) => Some(f),
            Verdict::NotFired(_) => None,
        })
        .collect();
    stack::mark_consequences(a, &mut out);
    let shares = impact::attach_shares(a, &mut out);
    impact::calibrate_severity(&mut out, &shares);
    let mut ranked: Vec<(Finding, Option<f64>)> = out.into_iter().zip(shares).collect();
    // Stable: equal severity and share keep the catalog's order.
    ranked.sort_by(|(x, sx), (y, sy)| {
        x.severity.cmp(&y.severity).then(
            sy.unwrap_or(-1.0)
                .partial_cmp(&sx.unwrap_or(-1.0))
                .unwrap_or(std::cmp::Ordering::Equal),
        )
    });
    let mut out: Vec<Finding> = ranked.into_iter().map(|(f, _)| f).collect();
    if let Some(u) = unclaimed::unexplained(a, &out) {
        out.push(u);
        // Stable: after the findings of its severity, whose causes are named.
        out.sort_by_key(|f| f.severity);
    }
    for f in &mut out {
        round_evidence(&mut f.evidence);
    }
    out
}

/// Evidence numbers to four significant digits (`aqu_sz=50.27`, not
/// `50.265411741380774`): what the measurement means, not float noise.
/// Integers stay as they are.
pub fn round_evidence(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap_or(0.0);
            if x != 0.0 && x.is_finite() {
                let decimals = (3 - x.abs().log10().floor() as i32).clamp(0, 9);
                let p = 10f64.powi(decimals);
                if let Some(r) = serde_json::Number::from_f64((x * p).round() / p) {
                    *n = r;
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(round_evidence),
        Value::Object(o) => o.values_mut().for_each(round_evidence),
        _ => {}
    }
}

#[cfg(test)]
mod rounding_tests {
    use super::*;

    #[test]
    fn evidence_keeps_four_significant_digits() {
        let mut v = serde_json::json!({"aqu_sz": 50.265411741380774, "s": [0.000123456, 12345.678, 7, 0.0]});
        round_evidence(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"aqu_sz": 50.27, "s": [0.0001235, 12346.0, 7, 0.0]})
        );
    }
}

//! `iosleuth try`'s output: the plan (a dry run), and the rounds with the
//! verdict, as text or JSON.

use super::verdict::{Change, Outcome};
use super::{Plan, Side, Trial, WORKLOAD_SECONDS};
use crate::report::escape;
use std::fmt::Write;

/// The plan: each knob now → tried, how it is put back, the rounds.
pub fn plan_text(p: &Plan, rounds: usize, full: bool, dir: &std::path::Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "iosleuth try: {} — dry run, nothing changed",
        escape(&p.from)
    );
    plan_lines(&mut out, p);
    let _ = writeln!(
        out,
        "rounds: {rounds} baseline and {rounds} candidate, interleaved (A B A B ...), each recorded ({}) under {}",
        if full { "the full recorder" } else { "a light capture" },
        dir.display()
    );
    let _ = writeln!(
        out,
        "judged by: the workload's time{}",
        p.metric
            .as_deref()
            .map(|m| format!(" and {m}"))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "run it with --apply to measure (root)");
    out
}

fn plan_lines(out: &mut String, p: &Plan) {
    for c in &p.changes {
        let _ = writeln!(
            out,
            "  {}{}: {} -> {}   (put back to {} after each candidate round)",
            escape(&c.knob),
            c.thread
                .as_deref()
                .map(|t| format!(" (thread {})", escape(t)))
                .unwrap_or_default(),
            shown(&c.now),
            escape(&c.tried),
            shown(&c.restore)
        );
    }
    match p.by_workload.as_deref() {
        Some([]) => {
            let _ = writeln!(
                out,
                "  the workload sets up each side itself ({}=baseline or candidate)",
                crate::trial::SIDE_ENV
            );
        }
        Some(described) => {
            for c in described {
                let _ = writeln!(
                    out,
                    "  {}: {} -> {}   (set up by the workload for its candidate rounds, from {}; try changes nothing)",
                    escape(&c.knob),
                    c.now.as_deref().map(escape).unwrap_or("unknown".into()),
                    escape(&c.tried),
                    crate::trial::SIDE_ENV
                );
            }
        }
        None => {}
    }
}

fn shown(v: &str) -> String {
    if v.is_empty() {
        "(no line)".into()
    } else {
        escape(v).into_owned()
    }
}

/// The verdict first, then each figure, the finding, the rounds.
pub fn trial_text(t: &Trial) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "iosleuth try: {}", escape(&t.plan.from));
    plan_lines(&mut out, &t.plan);
    let judged = t.changes.iter().find(|c| c.metric == t.judged_by);
    let _ = writeln!(
        out,
        "verdict: {}{}",
        t.verdict.word(),
        match (t.verdict, judged) {
            (Outcome::Inconclusive, Some(c)) => format!(
                " — the rounds vary more than the change ({}, 95 % CI {})",
                percent(c.change_percent),
                interval(c)
            ),
            (_, Some(c)) => format!(" ({})", escape(&c.metric)),
            (_, None) => String::new(),
        }
    );
    for c in &t.changes {
        let _ = writeln!(out, "  {}", change_line(c));
    }
    if let Some(f) = &t.finding {
        let _ = writeln!(
            out,
            "  {} in {}/{} baseline rounds, {}/{} candidate rounds",
            f.id, f.baseline, f.rounds, f.candidate, f.rounds
        );
    }
    for u in &t.unknown {
        let _ = writeln!(out, "  unknown: {}", escape(u));
    }
    if let Some(s) = &t.stopped {
        let _ = writeln!(out, "  {}", escape(s));
    }
    let _ = writeln!(out, "rounds:");
    for r in &t.rounds {
        let _ = writeln!(
            out,
            "  {:<9} {:>2}  {:>9.3} s  {}",
            r.side.name(),
            r.index,
            r.seconds,
            if r.findings.is_empty() {
                "no finding".to_string()
            } else {
                r.findings.join(", ")
            }
        );
    }
    let restored = t
        .rounds
        .iter()
        .filter(|r| r.side == Side::Candidate)
        .flat_map(|r| &r.restored)
        .filter(|x| x.ok)
        .count();
    let _ = writeln!(
        out,
        "every setting put back after each candidate round and read back ({restored} restores)"
    );
    out
}

/// `workload.seconds 1.52 → 0.41 (−73 %, 95 % CI −75…−70 %, 5 of 5 rounds)`
fn change_line(c: &Change) -> String {
    let unit = if c.metric == WORKLOAD_SECONDS {
        " s"
    } else {
        ""
    };
    format!(
        "{} {}{unit} -> {}{unit} ({}, 95 % CI {}, {} of {} rounds {}): {}",
        escape(&c.metric),
        num(c.baseline_median),
        num(c.candidate_median),
        percent(c.change_percent),
        interval(c),
        c.rounds_better,
        c.pairs,
        if c.lower_is_better { "lower" } else { "higher" },
        c.outcome.word()
    )
}

/// `workload.seconds -73.0 % (95 % CI -75.1..-70.2 %, 5 of 5 rounds)`:
/// a change in a line (the lab's summary of each scenario).
pub fn effect(c: &Change) -> String {
    format!(
        "{} {:+.1} % (95 % CI {:+.1}..{:+.1} %, {} of {} rounds)",
        escape(&c.metric),
        c.change_percent,
        c.ci95_percent[0],
        c.ci95_percent[1],
        c.rounds_better,
        c.pairs
    )
}

fn interval(c: &Change) -> String {
    format!(
        "{}..{}",
        percent(c.ci95_percent[0]),
        percent(c.ci95_percent[1])
    )
}

fn percent(p: f64) -> String {
    format!("{:+.1} %", p)
}

/// A figure as text and HTML print it.
pub(super) fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reads_back_from_json_into_the_labs_line() {
        let c = Change {
            metric: "workload.seconds".into(),
            baseline_median: 1.52,
            candidate_median: 0.41,
            change_percent: -73.03,
            ci95_percent: [-75.08, -70.2],
            rounds_better: 5,
            pairs: 5,
            lower_is_better: true,
            outcome: Outcome::Better,
        };
        let back: Change = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert_eq!(
            effect(&back),
            "workload.seconds -73.0 % (95 % CI -75.1..-70.2 %, 5 of 5 rounds)"
        );
    }
}

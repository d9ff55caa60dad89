//! `iosleuth try --format html`: one self-contained page, each figure's
//! rounds of both sides on one plot (a dot per round, a line at each
//! median), beside the verdict and the plan.

use super::report::num;
use super::verdict::{Change, Outcome};
use super::{Side, Trial, WORKLOAD_SECONDS};
use crate::report::html::esc;
use std::fmt::Write;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 130.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;

pub fn page(t: &Trial) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>iosleuth try</title>\n\
         <style>body{font:14px system-ui,sans-serif;margin:2em;max-width:60em}\
         table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}\
         .better{color:#17752f}.worse{color:#b3261e}.no_change,.inconclusive{color:#8a6d00}\
         svg text{font:12px system-ui,sans-serif}</style></head><body>\n",
    );
    let _ = writeln!(s, "<h1>iosleuth try</h1>\n<p>{}</p>", esc(&t.plan.from));
    let _ = writeln!(
        s,
        "<p class=\"{}\"><b>verdict: {}</b> (judged by {})</p>",
        class(t.verdict),
        esc(t.verdict.word()),
        esc(&t.judged_by)
    );
    s.push_str("<table><tr><th>setting</th><th>now</th><th>tried</th><th>put back to</th></tr>\n");
    for c in &t.plan.changes {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.knob),
            esc(&c.now),
            esc(&c.tried),
            esc(&c.restore)
        );
    }
    s.push_str("</table>\n");
    if let Some(f) = &t.finding {
        let _ = writeln!(
            s,
            "<p>{} in {}/{} baseline rounds, {}/{} candidate rounds</p>",
            esc(&f.id),
            f.baseline,
            f.rounds,
            f.candidate,
            f.rounds
        );
    }
    for u in &t.unknown {
        let _ = writeln!(s, "<p>unknown: {}</p>", esc(u));
    }
    for c in &t.changes {
        let values = |side: Side| -> Vec<f64> {
            t.rounds
                .iter()
                .filter(|r| r.side == side)
                .filter_map(|r| {
                    if c.metric == WORKLOAD_SECONDS {
                        Some(r.seconds)
                    } else {
                        r.metrics.get(&c.metric).copied()
                    }
                })
                .collect()
        };
        plot(&mut s, c, &values(Side::Baseline), &values(Side::Candidate));
    }
    s.push_str("</body></html>\n");
    s
}

/// One figure: the two sides' rounds on a shared axis.
fn plot(s: &mut String, c: &Change, base: &[f64], cand: &[f64]) {
    let all = base.iter().chain(cand).copied();
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return;
    }
    // Zero in view when the values are near it: a drop reads as a drop.
    let lo = if lo > 0.0 && lo < hi / 2.0 { 0.0 } else { lo };
    let span = if hi > lo { hi - lo } else { 1.0 };
    let x = |v: f64| LEFT + (v - lo) / span * (WIDTH - LEFT - RIGHT);
    let _ = writeln!(
        s,
        "<h2>{}</h2>\n<p>{} → {} ({:+.1} %, 95 % CI {:+.1}..{:+.1} %, {} of {} rounds {}): <span class=\"{}\">{}</span></p>",
        esc(&c.metric),
        num(c.baseline_median),
        num(c.candidate_median),
        c.change_percent,
        c.ci95_percent[0],
        c.ci95_percent[1],
        c.rounds_better,
        c.pairs,
        if c.lower_is_better { "lower" } else { "higher" },
        class(c.outcome),
        esc(c.outcome.word())
    );
    let _ = writeln!(
        s,
        "<svg width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"{} by round\">",
        esc(&c.metric)
    );
    for (i, (name, vs, med, color)) in [
        ("baseline", base, c.baseline_median, "#666"),
        ("candidate", cand, c.candidate_median, "#1a73e8"),
    ]
    .into_iter()
    .enumerate()
    {
        let y = 30.0 + i as f64 * 45.0;
        let _ = writeln!(s, "<text x=\"4\" y=\"{}\">{name}</text>", y + 4.0);
        let _ = writeln!(
            s,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"{color}\" stroke-width=\"2\"/>",
            x(med),
            y - 14.0,
            y + 14.0
        );
        for v in vs {
            let _ = writeln!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{color}\" fill-opacity=\"0.6\"><title>{}</title></circle>",
                x(*v),
                num(*v)
            );
        }
    }
    let axis = HEIGHT - 18.0;
    let _ = writeln!(
        s,
        "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{axis}\" y2=\"{axis}\" stroke=\"#999\"/>\
         <text x=\"{LEFT}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text></svg>",
        WIDTH - RIGHT,
        axis + 14.0,
        num(lo),
        WIDTH - RIGHT,
        axis + 14.0,
        num(hi)
    );
}

fn class(o: Outcome) -> &'static str {
    match o {
        Outcome::Better => "better",
        Outcome::Worse => "worse",
        Outcome::NoChange => "no_change",
        Outcome::Inconclusive => "inconclusive",
    }
}

#[cfg(test)]
mod tests {
    use super::super::{judge, Plan, Round};
    use super::*;
    use std::collections::BTreeMap;

    /// Both sides' rounds on one plot: a dot per round, a line per median,
    /// the verdict's class; text from the rounds escaped.
    #[test]
    fn each_figure_puts_both_sides_rounds_on_one_plot() {
        let round = |side, index, seconds: f64| Round {
            side,
            index,
            seconds,
            findings: vec!["merges_disabled".into()],
            metrics: BTreeMap::new(),
            capture: Default::default(),
            restored: Vec::new(),
        };
        let mut rounds = Vec::new();
        for i in 1..=4 {
            rounds.push(round(Side::Baseline, i, 2.0 + i as f64 / 10.0));
            rounds.push(round(Side::Candidate, i, 1.0 + i as f64 / 10.0));
        }
        let plan = Plan {
            from: "the remedy of <x>".into(),
            finding: Some("merges_disabled".into()),
            metric: None,
            changes: Vec::new(),
            by_workload: None,
        };
        let t = judge(plan, rounds, None, false, None).unwrap();
        let p = page(&t);
        assert_eq!(p.matches("<svg ").count(), 1);
        assert_eq!(p.matches("<circle ").count(), 8);
        assert_eq!(
            p.matches("stroke-width=\"2\"").count(),
            2,
            "one line per median"
        );
        assert!(
            p.contains("<p class=\"better\"><b>verdict: better</b>"),
            "{p}"
        );
        assert!(p.contains("the remedy of &lt;x&gt;"));
        assert!(p.contains("merges_disabled in 4/4 baseline rounds, 4/4 candidate rounds"));
    }
}

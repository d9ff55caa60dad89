//! The diff of two sides of runs, as a person reads it: the figures with
//! their change (`*` where it counts), where each side's time per
//! operation went, the settings that differ, the findings of one side
//! only, and the verdict.

use crate::compare::metrics::shown;
use crate::compare::{Diff, FunctionShift, TimeShift};
use crate::report::escape::{join_escaped, Esc};

pub fn render(d: &Diff) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    // The id first (what `check --metric` takes, pasted as it is), then
    // its title for people; each as wide as its longest (function names
    // are long).
    let width = |s: &str| Esc(s).to_string().chars().count();
    let w = d
        .figures
        .iter()
        .map(|f| width(&f.id))
        .max()
        .unwrap_or(0)
        .max(24);
    let tw = d
        .figures
        .iter()
        .map(|f| width(&f.title))
        .max()
        .unwrap_or(0)
        .max(16);
    let _ = writeln!(
        out,
        "{:<w$}  {:<tw$} {:>14} {:>14} {:>9}",
        "METRIC", "FIGURE", "baseline", "candidate", "change"
    );
    for f in &d.figures {
        // Counts whole, times with decimals; ranges likewise.
        let v = |x: f64| shown(f.unit, x);
        let _ = writeln!(
            out,
            "{:<w$}  {:<tw$} {:>14} {:>14} {:>9}{}",
            Esc(&f.id),
            Esc(&f.title),
            v(f.baseline),
            v(f.candidate),
            f.change_pct
                .map(crate::model::units::change)
                .unwrap_or_else(|| "-".into()),
            if f.baseline_range.0 != f.baseline_range.1
                || f.candidate_range.0 != f.candidate_range.1
            {
                format!(
                    "  [{}..{}] vs [{}..{}]{}",
                    v(f.baseline_range.0),
                    v(f.baseline_range.1),
                    v(f.candidate_range.0),
                    v(f.candidate_range.1),
                    if f.significant { " *" } else { "" }
                )
            } else if f.significant {
                "  *".to_string()
            } else {
                String::new()
            }
        );
    }
    // Only when the candidate's operations take longer: then it says
    // where to look.
    if let Some(t) = d.time_shift.as_ref().filter(|t| t.sentence().is_some()) {
        render_time_shift(&mut out, t);
    }
    if let Some(rows) = &d.on_cpu_functions {
        render_functions(
            &mut out,
            "on-CPU samples by function, percent of each side's samples",
            rows,
        );
    }
    if let Some(rows) = &d.off_cpu_functions {
        render_functions(
            &mut out,
            "blocked (off-CPU) time by kernel function, percent of each side's blocked time",
            rows,
        );
    }
    if !d.settings.is_empty() {
        let _ = writeln!(out, "\nsettings that differ:");
        for s in &d.settings {
            let _ = writeln!(
                out,
                "  {}: {} -> {}",
                Esc(&s.name),
                Esc(&s.baseline),
                Esc(&s.candidate)
            );
        }
    }
    if !d.only_in_candidate.is_empty() {
        let _ = writeln!(
            out,
            "\nfindings only in the candidate: {}",
            join_escaped(&d.only_in_candidate, ", ")
        );
    }
    if !d.only_in_baseline.is_empty() {
        let _ = writeln!(
            out,
            "findings only in the baseline: {}",
            join_escaped(&d.only_in_baseline, ", ")
        );
    }
    for (side, other, list) in [
        ("candidate", "baseline", &d.not_judged_in_baseline),
        ("baseline", "candidate", &d.not_judged_in_candidate),
    ] {
        for n in list {
            let _ = writeln!(
                out,
                "{}: in the {side}; the {other} could not judge it ({}): unknown there, not absent",
                Esc(&n.id),
                Esc(&n.lacks)
            );
        }
    }
    let _ = writeln!(out, "\nverdict: {}", Esc(&d.verdict));
    let _ = writeln!(
        out,
        "check: {}: {} (what `iosleuth check` concludes of these sides)",
        d.check.verdict.replace('_', " "),
        Esc(&d.check.why)
    );
    out
}

/// The workload's time per operation by part, largest growth first; parts
/// that are zero on both sides are left out.
fn render_time_shift(out: &mut String, t: &TimeShift) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "\nwhere the time per operation went ({}):",
        join_escaped(&t.kinds, ", ")
    );
    let _ = writeln!(
        out,
        "  {:<38} {:>14} {:>14} {:>9}",
        "PART (ms per operation)", "baseline", "candidate", "of added"
    );
    let _ = writeln!(
        out,
        "  {:<38} {:>14.3} {:>14.3}",
        "all", t.baseline_ms_per_op, t.candidate_ms_per_op
    );
    for p in &t.parts {
        if p.baseline_ms_per_op == 0.0 && p.candidate_ms_per_op == 0.0 {
            continue;
        }
        let _ = writeln!(
            out,
            "  {:<38} {:>14.3} {:>14.3} {:>9}",
            p.part,
            p.baseline_ms_per_op,
            p.candidate_ms_per_op,
            // Past 100 % (other parts shrank) a ratio of the time added.
            p.percent_of_added
                .map(|x| if x > 100.0 {
                    format!("{:.2}x", x / 100.0)
                } else {
                    format!("{x:.0}%")
                })
                .unwrap_or_else(|| "-".into())
        );
    }
}

/// Samples or blocked time by kernel function, as `perf diff` prints a
/// profile: Baseline and Delta (`*` where it counts).
fn render_functions(out: &mut String, title: &str, rows: &[FunctionShift]) {
    use std::fmt::Write;
    let _ = writeln!(out, "\n{title}:");
    let _ = writeln!(out, "  {:>9} {:>9}  FUNCTION", "baseline", "delta");
    for r in rows {
        let _ = writeln!(
            out,
            "  {:>8.2}% {:>+8.2}%  {}{}",
            r.baseline_percent,
            r.delta_points,
            Esc(&r.function),
            if r.significant { "  *" } else { "" }
        );
    }
}

//! Which kernel functions' share of the blocked (off-CPU) time, and of the
//! on-CPU samples, changed between the two sides, as `perf diff` shows a
//! profile's Baseline and Delta: a function's share is the time (samples)
//! of the stacks it is in over all of it, each side's runs averaged.

use crate::analyze::Analysis;
use serde::Serialize;

#[derive(Debug, Serialize, Clone)]
pub struct FunctionShift {
    pub function: String,
    /// Percent of the side's blocked time, mean over its runs.
    pub baseline_percent: f64,
    pub candidate_percent: f64,
    /// Candidate minus baseline, in percentage points.
    pub delta_points: f64,
    pub baseline_range: (f64, f64),
    pub candidate_range: (f64, f64),
    /// With several runs a side: the ranges do not overlap (as for the
    /// other figures); with one: it moved by at least
    /// `MIN_DELTA_POINTS`.
    pub significant: bool,
}

/// With one run a side, a function whose share moved less than this many
/// percentage points is not called a change: the stacks of two runs of one
/// workload differ by a few points (stacks-journal fixtures: the writers'
/// top stacks move by 1–3 points between runs).
const MIN_DELTA_POINTS: f64 = 5.0;
/// Rows in the table.
const TOP: usize = 20;

/// The functions whose share of the blocked time changed most, largest
/// change first; `None` when a side has no off-CPU stacks. The
/// scheduler's own frames are left out: they end every blocked stack and
/// say how a thread slept, not where (a lab run put
/// `schedule_preempt_disabled`, under the journal's checkpoint mutex,
/// above `__jbd2_log_wait_for_space` itself).
pub fn off_cpu_functions(base: &[&Analysis], cand: &[&Analysis]) -> Option<Vec<FunctionShift>> {
    use crate::analyze::stacks::SCHEDULER_FRAMES;
    shifts(base, cand, |a| {
        (a.stacks.off_cpu_ns > 0).then(|| {
            let mut v = a.stacks.off_cpu_functions();
            v.retain(|(f, _)| !SCHEDULER_FRAMES.contains(&f.as_str()));
            v
        })
    })
}

/// The same of the on-CPU samples; `None` when a side has none.
pub fn on_cpu_functions(base: &[&Analysis], cand: &[&Analysis]) -> Option<Vec<FunctionShift>> {
    shifts(base, cand, |a| {
        (a.stacks.samples > 0).then(|| a.stacks.on_cpu_functions())
    })
}

fn shifts(
    base: &[&Analysis],
    cand: &[&Analysis],
    of: impl Fn(&Analysis) -> Option<Vec<(String, f64)>>,
) -> Option<Vec<FunctionShift>> {
    let shares = |side: &[&Analysis]| -> Option<Vec<std::collections::HashMap<String, f64>>> {
        side.iter()
            .map(|a| of(a).map(|v| v.into_iter().collect()))
            .collect()
    };
    if base.is_empty() || cand.is_empty() {
        return None;
    }
    let (sb, sc) = (shares(base)?, shares(cand)?);
    let mut names: Vec<&String> = sb.iter().chain(&sc).flat_map(|m| m.keys()).collect();
    names.sort();
    names.dedup();
    // A run whose stacks never pass through a function has 0 % of it.
    let stats = |side: &[std::collections::HashMap<String, f64>], f: &str| {
        let v: Vec<f64> = side
            .iter()
            .map(|m| m.get(f).copied().unwrap_or(0.0))
            .collect();
        super::mean_and_range(&v)
    };
    let several = base.len() > 1 && cand.len() > 1;
    let round = |x: f64| (x * 100.0).round() / 100.0;
    let mut rows: Vec<FunctionShift> = names
        .into_iter()
        .map(|f| {
            let (x, xl, xh) = stats(&sb, f);
            let (y, yl, yh) = stats(&sc, f);
            FunctionShift {
                function: f.clone(),
                baseline_percent: round(x),
                candidate_percent: round(y),
                delta_points: round(y - x),
                baseline_range: (round(xl), round(xh)),
                candidate_range: (round(yl), round(yh)),
                significant: if several {
                    super::ranges_apart((xl, xh), (yl, yh))
                } else {
                    (y - x).abs() >= MIN_DELTA_POINTS
                },
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.delta_points
            .abs()
            .total_cmp(&a.delta_points.abs())
            .then_with(|| a.function.cmp(&b.function))
    });
    rows.truncate(TOP);
    Some(rows)
}

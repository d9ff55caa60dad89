//! Where a regression's time went: the workload's time per operation on
//! each side, split into the outlier analysis' parts (on CPU, runnable, at
//! the device, queued, journal, other waits), and which parts grew. It
//! says where to look when no finding or setting explains a change.

use crate::analyze::outliers::{self, describe_part, WorkloadTime};
use crate::analyze::Analysis;
use serde::Serialize;

#[derive(Debug, Serialize, Clone)]
pub struct TimeShift {
    /// The operation kinds compared (those both sides have).
    pub kinds: Vec<String>,
    pub baseline_ms_per_op: f64,
    pub candidate_ms_per_op: f64,
    /// Every part, largest growth first.
    pub parts: Vec<PartShift>,
}

#[derive(Debug, Serialize, Clone)]
pub struct PartShift {
    pub part: &'static str,
    pub baseline_ms_per_op: f64,
    pub candidate_ms_per_op: f64,
    /// Of the time per operation the candidate added, in percent (it can
    /// pass 100 when other parts shrank).
    pub percent_of_added: Option<f64>,
}

/// Below this the two sides take the same time per operation: a few
/// microseconds per operation are noise between runs.
const MIN_ADDED_MS_PER_OP: f64 = 0.005;

/// The kinds of operations that make up the workload on both sides (the
/// first run's of each): a kind one side alone has (a CPU burner's marks
/// beside the workload's) is not the workload's.
pub fn common_kinds(base: &[&Analysis], cand: &[&Analysis]) -> Vec<String> {
    let kinds_of = |a: Option<&&Analysis>| -> Vec<String> {
        a.map(|a| outliers::workload_kinds(&a.outliers))
            .unwrap_or_default()
            .into_iter()
            .map(String::from)
            .collect()
    };
    let c0 = kinds_of(cand.first());
    kinds_of(base.first())
        .into_iter()
        .filter(|k| c0.contains(k))
        .collect()
}

/// One run's time per operation over `kinds` (ms), if it has any.
pub fn ms_per_op(a: &Analysis, kinds: &[&str]) -> Option<f64> {
    let w = outliers::workload_time(&a.outliers, Some(kinds));
    (w.count > 0).then(|| w.latency_ns as f64 / 1e6 / w.count as f64)
}

/// The workload's time per operation on both sides, when both traces
/// followed operations of the same kinds with scheduler events (without
/// them the parts cannot be told apart).
pub fn time_shift(base: &[&Analysis], cand: &[&Analysis]) -> Option<TimeShift> {
    let measured = |side: &[&Analysis]| side.iter().all(|a| a.sched.switches > 0);
    if !measured(base) || !measured(cand) {
        return None;
    }
    let common = common_kinds(base, cand);
    let kinds: Vec<&str> = common.iter().map(String::as_str).collect();
    if kinds.is_empty() {
        return None;
    }
    let sum = |side: &[&Analysis]| {
        let mut total = WorkloadTime::default();
        for a in side {
            let w = outliers::workload_time(&a.outliers, Some(&kinds));
            total.count += w.count;
            total.latency_ns += w.latency_ns;
            outliers::add_breakdown(&mut total.breakdown, &w.breakdown);
        }
        total
    };
    let (wb, wc) = (sum(base), sum(cand));
    if wb.count == 0 || wc.count == 0 {
        return None;
    }
    let per_op = |ns: u64, w: &WorkloadTime| ns as f64 / 1e6 / w.count as f64;
    let added = per_op(wc.latency_ns, &wc) - per_op(wb.latency_ns, &wb);
    let mut parts: Vec<PartShift> = wb
        .breakdown
        .parts()
        .into_iter()
        .zip(wc.breakdown.parts())
        .map(|((part, nb), (_, nc))| {
            let (b, c) = (per_op(nb, &wb), per_op(nc, &wc));
            PartShift {
                part,
                baseline_ms_per_op: round3(b),
                candidate_ms_per_op: round3(c),
                percent_of_added: (added >= MIN_ADDED_MS_PER_OP)
                    .then(|| ((c - b) * 1000.0 / added).round() / 10.0),
            }
        })
        .collect();
    parts.sort_by(|x, y| {
        let grow = |p: &PartShift| p.candidate_ms_per_op - p.baseline_ms_per_op;
        grow(y).total_cmp(&grow(x))
    });
    Some(TimeShift {
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        baseline_ms_per_op: round3(per_op(wb.latency_ns, &wb)),
        candidate_ms_per_op: round3(per_op(wc.latency_ns, &wc)),
        parts,
    })
}

impl TimeShift {
    /// "the 1.2 ms per operation the candidate added was spent mostly
    /// runnable, waiting for a CPU (+1.0 ms, 83%)", or None when the
    /// candidate added no time.
    pub fn sentence(&self) -> Option<String> {
        let added = self.candidate_ms_per_op - self.baseline_ms_per_op;
        let top = self.parts.first()?;
        let pct = top.percent_of_added?;
        Some(format!(
            "the {added:.3} ms per operation the candidate added was spent mostly {} (+{:.3} ms, {})",
            describe_part(top.part),
            top.candidate_ms_per_op - top.baseline_ms_per_op,
            if pct > 100.0 {
                format!("{:.2}x the time added: other parts shrank", pct / 100.0)
            } else {
                format!("{pct:.0}%")
            },
        ))
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

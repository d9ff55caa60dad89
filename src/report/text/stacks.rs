//! Where the CPU time and the blocked time went by kernel function, from
//! the stacks of `record --stacks` or a perf.data / perf script input: the
//! functions the stacks end in with the largest share (perf report's
//! "Self"; for blocked time the last frame before the scheduler's, where
//! the thread waited), and how to see all of them.

use crate::analyze::stacks::{StacksSummary, SCHEDULER_FRAMES};
use crate::report::escape::Esc;
use rustc_hash::FxHashMap;
use std::fmt::Write;

/// Functions listed per kind.
const TOP: usize = 10;

pub(super) fn stacks(out: &mut String, s: &StacksSummary) {
    if s.samples == 0 && s.off_cpu_ns == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Stacks: where the time went ====================\n"
    );
    if s.samples > 0 {
        let _ = writeln!(out, "on CPU ({} samples): where the CPU was", s.samples);
        table(out, &ends(&s.on_cpu, &[]));
    }
    if s.off_cpu_ns > 0 {
        let _ = writeln!(
            out,
            "blocked ({:.3} s off CPU): where the threads waited",
            s.off_cpu_ns as f64 / 1e9
        );
        table(out, &ends(&s.off_cpu, SCHEDULER_FRAMES));
    }
    let _ = writeln!(
        out,
        "(all stacks: `report --format folded [--off-cpu]`, or `iosleuth flamegraph INPUT -o out.svg [--off-cpu]`)\n"
    );
}

/// Each innermost function's share of the folded stacks' counts (the
/// frames in `skip` passed over), largest first.
fn ends(folded: &[(String, u64)], skip: &[&str]) -> Vec<(String, f64)> {
    let mut by: FxHashMap<&str, u64> = FxHashMap::default();
    for (line, n) in folded {
        let mut frames = line.split(';').skip(1).collect::<Vec<_>>();
        while frames.len() > 1 && frames.last().is_some_and(|f| skip.contains(f)) {
            frames.pop();
        }
        *by.entry(frames.last().copied().unwrap_or("")).or_default() += n;
    }
    let total = folded.iter().map(|(_, n)| n).sum::<u64>().max(1) as f64;
    let mut v: Vec<(String, f64)> = by
        .into_iter()
        .map(|(f, n)| (f.to_string(), n as f64 * 100.0 / total))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

fn table(out: &mut String, rows: &[(String, f64)]) {
    for (f, pct) in rows.iter().take(TOP) {
        let _ = writeln!(out, "  {pct:>6.2}%  {}", Esc(f));
    }
    out.push('\n');
}

//! Where the CPU time and the blocked time went by function, from
//! the stacks of `record --stacks` or a perf.data / perf script input: the
//! functions the stacks end in with the largest share (perf report's
//! "Self"; for blocked time the last frame before the scheduler's, where
//! the thread waited), and how to see all of them.

use crate::analyze::stacks::StacksSummary;
use crate::report::escape::Esc;
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
        table(out, &s.on_cpu_ends());
    }
    if s.off_cpu_ns > 0 {
        let _ = writeln!(
            out,
            "blocked ({:.3} s off CPU): where the threads waited",
            s.off_cpu_ns as f64 / 1e9
        );
        table(out, &s.off_cpu_ends());
    }
    let _ = writeln!(
        out,
        "(all stacks: `report --format folded [--off-cpu]`, or `iosleuth flamegraph INPUT -o out.svg [--off-cpu]`)\n"
    );
}

fn table(out: &mut String, rows: &[(String, f64)]) {
    for (f, pct) in rows.iter().take(TOP) {
        let _ = writeln!(out, "  {pct:>6.2}%  {}", Esc(f));
    }
    out.push('\n');
}

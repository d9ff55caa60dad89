//! Folded stacks, as Brendan Gregg's FlameGraph tools read them: one line
//! per distinct stack, `comm;outermost;…;innermost COUNT`. Off-CPU time
//! is in microseconds, as bcc's `offcputime -f` prints it; on-CPU counts
//! are samples (or their periods), as `perf script | stackcollapse-perf.pl`
//! counts them. The flame graphs draw the same lines.

use crate::analyze::Analysis;
use std::fmt::Write;

/// Off-CPU time by stack in µs, largest first; stacks under a microsecond
/// are left out (flamegraph.pl drops zero counts anyway).
pub fn off_cpu_lines(a: &Analysis) -> impl Iterator<Item = (&str, u64)> {
    a.stacks
        .off_cpu
        .iter()
        .map(|(stack, ns)| (stack.as_str(), ns / 1000))
        .filter(|(_, us)| *us > 0)
}

/// On-CPU samples by stack, most first.
pub fn on_cpu_lines(a: &Analysis) -> impl Iterator<Item = (&str, u64)> {
    a.stacks
        .on_cpu
        .iter()
        .map(|(stack, n)| (stack.as_str(), *n))
}

/// Folded lines as text for a terminal (control characters escaped).
pub fn text<'a>(lines: impl Iterator<Item = (&'a str, u64)>) -> String {
    let mut out = String::new();
    for (stack, n) in lines {
        let _ = writeln!(out, "{} {n}", crate::report::escape(stack));
    }
    out
}

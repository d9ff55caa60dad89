//! Folded stacks, as Brendan Gregg's FlameGraph tools read them: one line
//! per distinct stack, `comm;outermost;…;innermost COUNT`. Off-CPU time
//! is in microseconds, as bcc's `offcputime -f` prints it; on-CPU counts
//! are samples, as `perf script | stackcollapse-perf.pl` counts them.

use crate::analyze::Analysis;
use std::fmt::Write;

/// Off-CPU time by stack, largest first; stacks under a microsecond are
/// left out (flamegraph.pl drops zero counts anyway).
pub fn off_cpu(a: &Analysis) -> String {
    let mut out = String::new();
    for (stack, ns) in &a.stacks.off_cpu {
        let us = ns / 1000;
        if us > 0 {
            let _ = writeln!(out, "{} {us}", crate::report::escape(stack));
        }
    }
    out
}

/// On-CPU samples by stack, most first.
pub fn on_cpu(a: &Analysis) -> String {
    let mut out = String::new();
    for (stack, n) in &a.stacks.on_cpu {
        let _ = writeln!(out, "{} {n}", crate::report::escape(stack));
    }
    out
}

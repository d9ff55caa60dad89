//! Folded stacks, as Brendan Gregg's FlameGraph tools read them: one line
//! per distinct stack, `comm;outermost;…;innermost COUNT`. Off-CPU time
//! is in microseconds, as bcc's `offcputime -f` prints it.

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

//! Function latency (`--func`), as bcc's funclatency prints it.

use crate::analyze::functions::FunctionLatency;
use crate::report::escape::Esc;
use std::fmt::Write;

pub(super) fn functions(out: &mut String, fs: &[FunctionLatency]) {
    if fs.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "==================== Function latency ====================\n"
    );
    for f in fs {
        let how = match f.method {
            "calls" => "calls, entry to return",
            _ => "time blocked inside it, per blocked stretch (off-CPU stacks)",
        };
        let a = &f.all;
        let _ = writeln!(
            out,
            "{} ({how}): count {}, avg {:.1} µs, max {:.1} µs, total {:.3} ms",
            Esc(&f.name),
            a.count,
            a.avg_ns() as f64 / 1e3,
            a.max_ns as f64 / 1e3,
            a.total_ns as f64 / 1e6
        );
        out.push_str(&a.histogram_us.render("usecs"));
        for p in &f.by_process {
            let t = &p.tally;
            let _ = writeln!(
                out,
                "\n  {} {}: count {}, avg {:.1} µs, max {:.1} µs",
                Esc(&f.name),
                Esc(&p.process),
                t.count,
                t.avg_ns() as f64 / 1e3,
                t.max_ns as f64 / 1e3
            );
            out.push_str(&t.histogram_us.render("usecs"));
        }
        out.push('\n');
    }
}

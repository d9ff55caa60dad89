//! What the commands that print or draw stacks share (`report --format
//! folded`, `flamegraph`, `diff --flamegraph`): the check that the trace
//! has what they need, and writing the SVG.

use crate::analyze::Analysis;
use crate::error::{Error, Result};
use crate::report::output_file::{Destination, NotForTerminal};
use std::path::PathBuf;

/// Refuses (exit 2) a trace without the stacks asked for: kernel stacks
/// for blocked time (`off_cpu`), else on-CPU samples.
pub fn require(a: &Analysis, paths: &[PathBuf], off_cpu: bool) -> Result<()> {
    let missing = match off_cpu {
        true => (a.stacks.stacks == 0).then_some("no kernel stacks in the trace (record with `iosleuth record --stacks`)"),
        false => (a.stacks.samples == 0).then_some("no on-CPU samples in the trace (record with `iosleuth record --stacks`; --off-cpu for blocked time)"),
    };
    match missing {
        Some(why) => Err(Error::bad_input(format!(
            "{}: {why}",
            super::args::named(paths)
        ))),
        None => Ok(()),
    }
}

/// Writes a drawn flame graph to `out` (a file is said on stderr).
pub fn write_svg(out: &Destination, drawn: std::io::Result<Vec<u8>>) -> Result<()> {
    let svg = drawn.map_err(|e| Error::failed(format!("drawing the flame graph: {e}")))?;
    out.write(&svg)
}

/// What a flame graph is, for a terminal that must not get one.
pub const SVG: NotForTerminal = NotForTerminal {
    what: "SVG",
    instead: "-o flame.svg",
};

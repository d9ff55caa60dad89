//! Kernel symbols for the addresses a capture holds as numbers (the work
//! functions of workqueue events, the frames of kernel stacks): only
//! those, not the whole 5 MB table, resolved with /proc/kallsyms when
//! recording stops and stored in the capture (`symbols.json`), so that the
//! capture stays self-describing on another machine.

use crate::ingest::capture_dir::open_capture;
use crate::model::capture_layout::{is_address, SYMBOLS};
use crate::model::{Event, Value};
use crate::symbolize::kallsyms::KernelSymbols;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Reads the capture in `dir`, resolves every address field it holds and
/// writes `symbols.json`. Returns how many were resolved.
pub fn write_for_capture(dir: &Path) -> std::io::Result<usize> {
    let mut addrs = BTreeSet::new();
    if let Ok(sources) = open_capture(dir) {
        for mut s in sources {
            while let Some(e) = s.next_event() {
                match e {
                    Event::Trace(o) => {
                        for (k, v) in &o.fields.0 {
                            if let (true, Value::Int(a)) = (is_address(k), v) {
                                addrs.insert(*a as u64);
                            }
                        }
                    }
                    // Unresolved frames come as hex (no symbols.json yet).
                    Event::Stack(k) => addrs.extend(
                        k.frames
                            .iter()
                            .filter_map(|f| u64::from_str_radix(f.strip_prefix("0x")?, 16).ok()),
                    ),
                    _ => {}
                }
            }
        }
    }
    if addrs.is_empty() {
        return Ok(0);
    }
    let table = KernelSymbols::of_this_machine();
    if table.is_empty() {
        // kptr_restrict shows every address as 0 (or the file is not
        // readable): nothing to name; the reader then says so.
        return Ok(0);
    }
    let names: BTreeMap<String, String> = addrs
        .into_iter()
        .filter_map(|a| Some((format!("{a:#x}"), table.resolve(a)?)))
        .collect();
    std::fs::write(
        dir.join(SYMBOLS),
        serde_json::to_string_pretty(&names).unwrap_or_default(),
    )?;
    Ok(names.len())
}

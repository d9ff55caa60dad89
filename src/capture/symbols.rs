//! Kernel symbols for the addresses a capture holds as numbers (the work
//! functions of workqueue events, the frames of kernel stacks): only
//! those, not the whole 5 MB table, resolved with /proc/kallsyms when
//! recording stops and stored in the capture (`symbols.json`), so that the
//! capture stays self-describing on another machine.

use crate::ingest::capture_dir::open_capture;
use crate::model::capture_layout::{ADDRESS_FIELDS, SYMBOLS};
use crate::model::{Event, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Text symbols of /proc/kallsyms, sorted by address.
fn kallsyms() -> Vec<(u64, String)> {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    let mut v: Vec<(u64, String)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let addr = u64::from_str_radix(w.next()?, 16).ok()?;
            let kind = w.next()?;
            let name = w.next()?;
            (addr != 0 && matches!(kind, "t" | "T")).then(|| (addr, name.to_string()))
        })
        .collect();
    v.sort();
    v
}

/// `name` for a symbol's start, `name+0x10` inside it.
fn resolve(table: &[(u64, String)], addr: u64) -> Option<String> {
    let i = table.partition_point(|(a, _)| *a <= addr).checked_sub(1)?;
    let (start, name) = &table[i];
    Some(if *start == addr {
        name.clone()
    } else {
        format!("{name}+{:#x}", addr - start)
    })
}

/// Reads the capture in `dir`, resolves every address field it holds and
/// writes `symbols.json`. Returns how many were resolved.
pub fn write_for_capture(dir: &Path) -> std::io::Result<usize> {
    let mut addrs = BTreeSet::new();
    if let Ok(sources) = open_capture(dir) {
        for mut s in sources {
            while let Some(e) = s.next_event() {
                match e {
                    Event::Other(o) => {
                        for (k, v) in &o.fields.0 {
                            if let (true, Value::Int(a)) = (ADDRESS_FIELDS.contains(&&**k), v) {
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
    let table = kallsyms();
    if table.is_empty() {
        // kptr_restrict shows every address as 0 (or the file is not
        // readable): nothing to name; the reader then says so.
        return Ok(0);
    }
    let names: BTreeMap<String, String> = addrs
        .into_iter()
        .filter_map(|a| Some((format!("{a:#x}"), resolve(&table, a)?)))
        .collect();
    std::fs::write(
        dir.join(SYMBOLS),
        serde_json::to_string_pretty(&names).unwrap_or_default(),
    )?;
    Ok(names.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_inside() {
        let t = vec![(0x100, "a".to_string()), (0x200, "b".to_string())];
        assert_eq!(resolve(&t, 0x100).as_deref(), Some("a"));
        assert_eq!(resolve(&t, 0x210).as_deref(), Some("b+0x10"));
        assert_eq!(resolve(&t, 0x50), None);
    }
}

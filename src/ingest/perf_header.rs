//! perf.data's header, sections and attribute tables checked before the
//! linux-perf-data crate reads them: the crate allocates what a count or a
//! size there claims, so damage is refused here, saying what is wrong.

use super::source::InputError;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The feature bit of HEADER_EVENT_DESC (perf's `enum perf_header_feat`).
const FEATURE_EVENT_DESC: usize = 12;
/// Attribute tables larger than this are damage, not a recording.
const MAX_TABLE: u64 = 64 << 20;

/// The file's header, sections and event tables are consistent: the
/// crate allocates what a count or a size in them claims before reading
/// it, so damage is refused here with what is wrong.
pub(super) fn check_sections(path: &Path, f: &mut std::fs::File) -> Result<(), InputError> {
    let bad = |what: String| InputError::new(path, format!("not a usable perf.data file: {what}"));
    let len = f
        .metadata()
        .map_err(|e| InputError::new(path, format!("cannot read: {e}")))?
        .len();
    let mut h = [0u8; 104];
    f.read_exact(&mut h)
        .map_err(|_| bad(format!("{len} bytes, shorter than perf's 104-byte header")))?;
    let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().unwrap());
    if u64_at(8) != 104 {
        return Err(bad(format!(
            "its header claims {} bytes, not 104",
            u64_at(8)
        )));
    }
    let inside = |off: u64, size: u64| off.checked_add(size).is_some_and(|end| end <= len);
    for (name, at) in [("attributes", 24), ("data", 40), ("event types", 56)] {
        let (off, size) = (u64_at(at), u64_at(at + 8));
        if !inside(off, size) {
            return Err(bad(format!(
                "its {name} section ({size} bytes at {off}) runs past the end of the {len}-byte file (truncated?)"
            )));
        }
    }
    let mut read = |off: u64, size: u64, what: &str| -> Result<Vec<u8>, InputError> {
        if size > MAX_TABLE {
            return Err(bad(format!("its {what} is {size} bytes")));
        }
        let mut v = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(off))
            .and_then(|_| f.read_exact(&mut v))
            .map_err(|_| bad(format!("its {what} is cut off (truncated?)")))?;
        Ok(v)
    };
    check_attributes(
        &read(u64_at(24), u64_at(32), "attributes section")?,
        u64_at(16),
        &inside,
    )
    .map_err(bad)?;
    // The feature sections' table follows the data, one entry per bit set.
    let bits: Vec<usize> = (0..256)
        .filter(|b| h[72 + b / 8] & (1 << (b % 8)) != 0)
        .collect();
    let table = read(
        u64_at(40) + u64_at(48),
        bits.len() as u64 * 16,
        "feature sections' table",
    )?;
    for (bit, c) in bits.iter().zip(table.chunks(16)) {
        let off = u64::from_le_bytes(c[..8].try_into().unwrap());
        let size = u64::from_le_bytes(c[8..].try_into().unwrap());
        if !inside(off, size) {
            return Err(bad(format!(
                "a feature section ({size} bytes at {off}) runs past the end of the {len}-byte file (truncated?)"
            )));
        }
        if *bit == FEATURE_EVENT_DESC {
            check_event_desc(&read(off, size, "event description")?).map_err(bad)?;
        }
    }
    f.seek(SeekFrom::Start(0))
        .map_err(|e| InputError::new(path, format!("cannot read: {e}")))?;
    Ok(())
}

/// The attributes section: entries of `attr_size` bytes (a perf_event_attr
/// and the offset and size of its ids), each ids' section in the file.
fn check_attributes(
    attrs: &[u8],
    attr_size: u64,
    inside: &dyn Fn(u64, u64) -> bool,
) -> Result<(), String> {
    if !(64 + 16..=4096).contains(&attr_size) || !(attrs.len() as u64).is_multiple_of(attr_size) {
        return Err(format!(
            "its attributes are {} bytes of {attr_size}-byte entries",
            attrs.len()
        ));
    }
    for e in attrs.chunks(attr_size as usize) {
        let ids = &e[e.len() - 16..];
        let off = u64::from_le_bytes(ids[..8].try_into().unwrap());
        let size = u64::from_le_bytes(ids[8..].try_into().unwrap());
        if !inside(off, size) {
            return Err(format!(
                "an event's ids ({size} bytes at {off}) lie outside the file"
            ));
        }
    }
    Ok(())
}

/// HEADER_EVENT_DESC: `nr`, `attr_size`, then per event the attribute,
/// `nr_ids`, a string (`len`, bytes) and the ids, all inside the section.
fn check_event_desc(d: &[u8]) -> Result<(), String> {
    let u32_at = |at: usize| -> Result<u64, String> {
        d.get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as u64)
            .ok_or_else(|| "its event description is cut short".to_string())
    };
    let (nr, attr_size) = (u32_at(0)?, u32_at(4)?);
    if !(64..=4096).contains(&attr_size) {
        return Err(format!(
            "its event description has {attr_size}-byte attributes"
        ));
    }
    let mut at = 8u64;
    for _ in 0..nr {
        at += attr_size;
        let nr_ids = u32_at(at as usize)?;
        let string = u32_at(at as usize + 4)?;
        at += 8 + string + nr_ids * 8;
        if at > d.len() as u64 {
            return Err(format!(
                "its event description claims {nr} events that do not fit in its {} bytes",
                d.len()
            ));
        }
    }
    Ok(())
}

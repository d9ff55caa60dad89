//! Which binary each process had mapped where, and when: the timeline of
//! executable mappings that names the user frames of a capture's samples.
//! It is built from the side-band records the sampling events wrote
//! beside their samples (PERF_RECORD_MMAP of each new executable mapping,
//! PERF_RECORD_FORK of each new process) and from the mappings of the
//! processes that ran before sampling started, which the recorder wrote
//! in the same record format. The records of all CPUs are applied in
//! time order before any sample is named, since a sample on one CPU may
//! need a mapping made on another.
//!
//! Mappings follow perf's rules: a new mapping replaces the part of older
//! ones it overlaps; a forked process starts with its parent's; exec
//! keeps the old mappings until new ones overlap them.

use super::user_frames::{Mapping, UserFrames};
use crate::ingest::reader::Chunked;
use crate::model::perf_record::{self, HEADER_LEN, RECORD_FORK, RECORD_MMAP, SAMPLE_ID_LEN};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// How many mappings copies of shared ones may add up to in all.
const MAX_COPIED: usize = 4 << 20;

/// A forked process shares its parent's mappings until either changes
/// its own (copy on write): a file of thousands of mappings then
/// thousands of forks made a copy per fork (8,000 x 8,000: 2.4 GiB).
/// The copies made are bounded too, for files that fork and map in turn.
#[derive(Default)]
pub struct SharedMappings {
    copied: usize,
    /// Processes that started without their parent's mappings, the
    /// bound reached.
    refused: u64,
}

impl SharedMappings {
    /// `v` made the process's own to change: copied when shared, or a
    /// new empty one once the copies reach their bound (counted).
    pub fn own<'a, T: Clone>(&mut self, v: &'a mut Arc<Vec<T>>) -> &'a mut Vec<T> {
        if Arc::get_mut(v).is_none() {
            if self.copied.saturating_add(v.len()) <= MAX_COPIED {
                self.copied += v.len();
            } else {
                self.refused += 1;
                *v = Arc::default();
            }
        }
        Arc::make_mut(v)
    }

    /// What the user should know when the bound was reached: `file`
    /// names the input.
    pub fn warning(&self, file: &std::path::Path) -> Option<String> {
        (self.refused > 0).then(|| {
            format!(
                "{}: {} processes were left without the mappings they inherited (more than {MAX_COPIED} copied already): their frames in inherited binaries are [unknown]",
                file.display(),
                self.refused
            )
        })
    }
}

/// A mapping and the time span it held.
#[derive(Clone)]
struct Timed {
    from: u64,
    until: u64,
    mapping: Mapping,
}

/// A process's mappings over time.
#[derive(Default)]
struct Timeline {
    /// When it forked, if its mappings are (or were) its parent's: it
    /// had none before.
    since: u64,
    maps: Arc<Vec<Timed>>,
}

/// What a side-band record says, at its time.
enum Change {
    Map { pid: u32, mapping: Mapping },
    Fork { pid: u32, parent: u32 },
}

#[derive(Default)]
pub struct ProcessMaps {
    /// A forked process shares its parent's until either maps anew.
    by_pid: FxHashMap<u32, Timeline>,
    changes: Vec<(u64, Change)>,
    shared: SharedMappings,
}

impl ProcessMaps {
    /// Collects the side-band records of one file of perf records; its
    /// samples and anything else are passed over. Stops quietly at a
    /// damaged record (the sample reader says where).
    pub fn scan(&mut self, mut input: Chunked, names: &mut UserFrames) {
        loop {
            if input.ensure(HEADER_LEN) < HEADER_LEN {
                return;
            }
            let Some((kind, size)) = perf_record::header(input.avail()) else {
                return;
            };
            if size < HEADER_LEN || input.ensure(size) < size {
                return;
            }
            let body = &input.avail()[HEADER_LEN..size];
            if let Some(change) = change(kind, body, names) {
                self.changes.push(change);
            }
            input.consume(size);
        }
    }

    /// Applies the collected records in time order; call once, after
    /// every file was scanned.
    pub fn settle(&mut self) {
        let mut changes = std::mem::take(&mut self.changes);
        changes.sort_by_key(|(t, _)| *t);
        for (t, c) in changes {
            match c {
                Change::Map { pid, mapping } => {
                    let v = self
                        .shared
                        .own(&mut self.by_pid.entry(pid).or_default().maps);
                    for m in v.iter_mut().filter(|m| m.until == u64::MAX) {
                        if m.mapping.start < mapping.end && mapping.start < m.mapping.end {
                            m.until = t;
                        }
                    }
                    v.push(Timed {
                        from: t,
                        until: u64::MAX,
                        mapping,
                    });
                }
                Change::Fork { pid, parent } => {
                    let Some(inherited) = self.by_pid.get(&parent).map(|p| p.maps.clone()) else {
                        continue;
                    };
                    match self.by_pid.get_mut(&pid) {
                        // The parent's timeline, shared, from `t` on.
                        None => {
                            let maps = inherited;
                            self.by_pid.insert(pid, Timeline { since: t, maps });
                        }
                        // A pid used again: its old mappings stay behind.
                        Some(v) => {
                            let live: Vec<Timed> = inherited
                                .iter()
                                .filter(|m| m.from <= t && t < m.until)
                                .map(|m| Timed {
                                    from: t,
                                    until: u64::MAX,
                                    mapping: m.mapping.clone(),
                                })
                                .collect();
                            self.shared.own(&mut v.maps).extend(live);
                        }
                    }
                }
            }
        }
    }

    /// The mapping of process `pid` that held `addr` at time `ts`.
    pub fn at(&self, pid: u32, addr: u64, ts: u64) -> Option<&Mapping> {
        let timeline = self.by_pid.get(&pid).filter(|p| ts >= p.since)?;
        timeline.maps.iter().rev().find_map(|m| {
            (m.from <= ts && ts < m.until && addr >= m.mapping.start && addr < m.mapping.end)
                .then_some(&m.mapping)
        })
    }

    /// What the user should know of the mappings (see [`SharedMappings`]).
    pub fn warning(&self, file: &std::path::Path) -> Option<String> {
        self.shared.warning(file)
    }
}

/// The change a record's body makes, with its time.
fn change(kind: u32, body: &[u8], names: &mut UserFrames) -> Option<(u64, Change)> {
    let u32_at = |at: usize| Some(u32::from_ne_bytes(body.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_ne_bytes(body.get(at..at + 8)?.try_into().ok()?));
    match kind {
        RECORD_MMAP => {
            let pid = u32_at(0)?;
            let (start, len, pgoff) = (u64_at(8)?, u64_at(16)?, u64_at(24)?);
            let name = body.get(32..body.len().checked_sub(SAMPLE_ID_LEN)?)?;
            let name = &name[..memchr::memchr(0, name).unwrap_or(name.len())];
            let path = names.mapped_path(pid as i32, name);
            let mapping = Mapping {
                start,
                end: start.saturating_add(len),
                pgoff,
                path,
            };
            Some((
                perf_record::sample_id_time(body)?,
                Change::Map { pid, mapping },
            ))
        }
        RECORD_FORK => {
            let (pid, parent) = (u32_at(0)?, u32_at(4)?);
            (pid != parent).then_some((u64_at(16)?, Change::Fork { pid, parent }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fork(pid: u32, parent: u32, time: u64) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend(RECORD_FORK.to_ne_bytes());
        r.extend(0u16.to_ne_bytes());
        r.extend(((HEADER_LEN + 24 + SAMPLE_ID_LEN) as u16).to_ne_bytes());
        for v in [pid, parent, pid, parent] {
            r.extend(v.to_ne_bytes());
        }
        r.extend(time.to_ne_bytes());
        r.extend([0u8; SAMPLE_ID_LEN]);
        r
    }

    #[test]
    fn new_mappings_replace_overlapped_ones_and_children_inherit() {
        let mut file = perf_record::mmap_record(10, 0x1000, 0x1000, 0, b"/bin/old", 5);
        // Another CPU's records come in their own file, out of order here.
        let mut other = fork(11, 10, 20);
        other.extend(perf_record::mmap_record(
            10,
            0x1800,
            0x1000,
            0x2000,
            b"/bin/new",
            30,
        ));
        file.extend(perf_record::mmap_record(
            12, 0x1000, 0x1000, 0, b"/bin/x", 1,
        ));
        let mut names = UserFrames::default();
        let mut maps = ProcessMaps::default();
        maps.scan(Chunked::from_vec(file), &mut names);
        maps.scan(Chunked::from_vec(other), &mut names);
        maps.settle();
        let path = |pid, addr, ts| maps.at(pid, addr, ts).map(|m| m.path.to_string());
        assert_eq!(path(10, 0x1100, 4), None);
        assert_eq!(path(10, 0x1100, 29).as_deref(), Some("/bin/old"));
        // The new mapping ended the old one it overlaps.
        assert_eq!(path(10, 0x1100, 30), None);
        assert_eq!(path(10, 0x1900, 30).as_deref(), Some("/bin/new"));
        assert_eq!(maps.at(10, 0x1900, 30).unwrap().pgoff, 0x2000);
        // The child forked at 20 has the parent's mapping of then, kept
        // after the parent replaced its own.
        assert_eq!(path(11, 0x1100, 19), None);
        assert_eq!(path(11, 0x1100, 40).as_deref(), Some("/bin/old"));
        assert_eq!(path(12, 0x1fff, 2).as_deref(), Some("/bin/x"));
        assert_eq!(path(12, 0x2000, 2), None);
    }
}

//! Writes events as blktrace's per-CPU files (`NAME.blktrace.CPU`), so that
//! blkparse, btt, iowatcher and seekwatcher can read captures made with the
//! `blk` tracer or with tracepoints.
//!
//! All or nothing: a [`Target`] writes the files under a hidden staging
//! directory inside the target and moves them into place only when every
//! one is complete ([`Target::commit`]). Dropped without a commit (an
//! error, an interrupt, a panic), it removes what it made, the target
//! directory too when it created it. A directory that already holds files
//! is refused unless the caller forces it: old `NAME.blktrace.N` files of
//! another export would be merged by a later `report DIR`.
//!
//! Bounded by the input: a record costs at most one file and its bytes
//! in memory until they are written, and the empty files blkparse needs
//! below a record's CPU are bounded too (see [`numbered_by_cpu`]).

use crate::model::blktrace_record::{encode, process_note};
use crate::model::{Action, Dev, Event};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// CPU numbers a record may have: 0 to 8191. The kernel's NR_CPUS is at
/// most 8192 (CONFIG_NR_CPUS ends at 8192 on x86-64 with MAXSMP and on
/// powerpc, 4096 on arm64), so a larger number is a corrupt record.
/// One corrupt CPU number (757,773) made 757,774 files (see
/// [`numbered_by_cpu`]). Records above the bound are left out and counted
/// ([`ExportSummary::bad_cpu`]).
pub const MAX_CPUS: u32 = 8192;

/// A file's records stay in memory up to this many bytes, then are
/// appended to it (opened for that write only, so the number of files is
/// not limited by the open-file limit).
const FLUSH_BYTES: usize = 1 << 20;
/// All files' pending records together: past this, every buffer is written.
const PENDING_BYTES: usize = 32 << 20;

#[derive(Debug, Default)]
pub struct ExportSummary {
    /// Where the files will be once committed, sorted.
    pub files: Vec<PathBuf>,
    pub records: u64,
    /// Events without a blktrace equivalent.
    pub skipped: u64,
    /// Records with a CPU number of [`MAX_CPUS`] or more, left out.
    pub bad_cpu: u64,
    /// Devices whose files are numbered in CPU order, not by CPU (see
    /// [`numbered_by_cpu`]), by name.
    pub renumbered: Vec<Renumbered>,
}

/// A device whose files are `NAME.blktrace.0` to `.cpus - 1` in the order
/// of the CPUs its records came from, the highest being `highest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renumbered {
    pub device: String,
    pub cpus: usize,
    pub highest: u32,
}

/// Up to this many files a device's files are numbered by CPU whatever
/// the gaps: every machine up to 1024 CPUs.
pub const FILES_BY_CPU: u32 = 1024;

/// Whether a device with records on `cpus` CPUs, the highest `highest`,
/// has its files numbered by CPU (empty ones filling the gaps, which
/// blkparse needs: it reads `NAME.blktrace.0`, `.1`, … until one is
/// missing). Past [`FILES_BY_CPU`] files, only when at least half of them
/// hold records: 9 records on CPU 8191 of 3 devices made 24,576 files, all
/// but 3 of them empty. Otherwise the files are numbered in CPU order;
/// each record keeps its CPU number, which blkparse prints, and only
/// blkparse's per-CPU totals go by file.
pub fn numbered_by_cpu(highest: u32, cpus: usize) -> bool {
    let files = u64::from(highest) + 1;
    files <= u64::from(FILES_BY_CPU) || files <= 2 * cpus as u64
}

/// Why a directory cannot be exported into.
#[derive(Debug)]
pub enum TargetError {
    /// It holds files (how many, and the first few names) and the caller
    /// did not force it.
    NotEmpty(usize, Vec<String>),
    NotADirectory,
    Io(io::Error),
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetError::NotEmpty(n, first) => write!(
                f,
                "the directory is not empty ({n} {}: {}{})",
                if *n == 1 { "entry" } else { "entries" },
                first.join(", "),
                if *n > first.len() { ", ..." } else { "" }
            ),
            TargetError::NotADirectory => f.write_str("exists and is not a directory"),
            TargetError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for TargetError {
    fn from(e: io::Error) -> TargetError {
        TargetError::Io(e)
    }
}

/// The directory an export writes into; see the module's documentation.
#[derive(Debug)]
pub struct Target {
    dir: PathBuf,
    staging: PathBuf,
    /// Directories this export created, outermost first.
    created: Vec<PathBuf>,
    /// With `force`: the blktrace files `dir` held (replaced, or removed at
    /// commit when this export has no file of that name).
    old: Vec<PathBuf>,
    committed: bool,
}

/// `NAME.blktrace.N`, the files `report DIR` reads.
fn is_blktrace_file(name: &str) -> bool {
    name.rsplit_once(".blktrace.")
        .is_some_and(|(_, cpu)| cpu.parse::<u32>().is_ok())
}

impl Target {
    /// Creates `dir` (and missing parents) or checks that it is empty;
    /// with `force` an existing directory may hold files.
    pub fn prepare(dir: &Path, force: bool) -> Result<Target, TargetError> {
        let mut old = Vec::new();
        let mut created = Vec::new();
        match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => return Err(TargetError::NotADirectory),
            Ok(_) => {
                let mut names: Vec<String> = std::fs::read_dir(dir)?
                    .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect::<io::Result<_>>()?;
                if !names.is_empty() && !force {
                    names.sort();
                    let n = names.len();
                    names.truncate(3);
                    return Err(TargetError::NotEmpty(n, names));
                }
                old = names
                    .iter()
                    .filter(|n| is_blktrace_file(n))
                    .map(|n| dir.join(n))
                    .collect();
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Remember every level that did not exist, to remove it again.
                let mut p = dir;
                while !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err() {
                    created.push(p.to_path_buf());
                    match p.parent() {
                        Some(up) => p = up,
                        None => break,
                    }
                }
                created.reverse();
                std::fs::create_dir_all(dir)?;
            }
            Err(e) => return Err(e.into()),
        }
        let mut t = Target {
            dir: dir.to_path_buf(),
            staging: PathBuf::new(),
            created,
            old,
            committed: false,
        };
        // From here on, dropping `t` undoes what was made.
        for n in 0.. {
            let s = dir.join(format!(".iosleuth-export-{}-{n}", std::process::id()));
            match std::fs::create_dir(&s) {
                Ok(()) => {
                    t.staging = s;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(t)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves the written files into place and, with `force`, removes the
    /// blktrace files of an earlier export that this one did not replace
    /// (a later `report DIR` would merge them in). Returns those removed.
    pub fn commit(mut self, sum: &ExportSummary) -> io::Result<Vec<PathBuf>> {
        for f in &sum.files {
            let name = f.file_name().expect("a file name");
            std::fs::rename(self.staging.join(name), f)?;
        }
        let written: HashSet<&PathBuf> = sum.files.iter().collect();
        let mut removed = Vec::new();
        for f in &self.old {
            if !written.contains(f) {
                std::fs::remove_file(f)?;
                removed.push(f.clone());
            }
        }
        std::fs::remove_dir(&self.staging)?;
        self.committed = true;
        Ok(removed)
    }

    fn staged(&self, name: &str) -> PathBuf {
        self.staging.join(name)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        if !self.staging.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
        // Innermost first; remove_dir leaves a directory someone else
        // filled meanwhile.
        for d in self.created.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// One output file: its records not yet written, and its sequence number.
struct Writer {
    name: String,
    pending: Vec<u8>,
    seq: u32,
}

/// Appends a file's pending records (creating it on the first write).
fn flush(target: &Target, w: &mut Writer) -> io::Result<()> {
    if w.pending.is_empty() {
        return Ok(());
    }
    let mut f = File::options()
        .create(true)
        .append(true)
        .open(target.staged(&w.name))?;
    f.write_all(&w.pending)?;
    // Its memory goes too: an idle file keeps nothing.
    w.pending = Vec::new();
    Ok(())
}

/// Writes the block events of `events` into `target`'s staging directory,
/// one file per device and CPU; [`Target::commit`] moves them into place.
/// `known_names` (pid → name) names processes whose names the stream only
/// gives later, or never.
pub fn export(
    events: impl Iterator<Item = Event>,
    target: &Target,
    known_names: HashMap<u32, String>,
) -> io::Result<ExportSummary> {
    let mut writers: HashMap<(Dev, u32), Writer> = HashMap::new();
    let mut names: HashMap<Dev, String> = HashMap::new();
    let mut comms: HashMap<u32, String> = known_names;
    let mut noted: HashSet<(Dev, u32)> = HashSet::new();
    let mut sum = ExportSummary::default();
    let mut pending = 0usize;
    for ev in events {
        let e = match ev {
            Event::Block(b) => b,
            Event::ProcessName { pid, comm } => {
                comms.insert(pid, comm.to_string());
                continue;
            }
            Event::Trace(_) | Event::Stack(_) | Event::ThreadGroup { .. } => continue,
        };
        if !e.comm.is_empty() && e.action == Action::Queue {
            comms.entry(e.pid).or_insert_with(|| e.comm.to_string());
        }
        if e.action.blktrace_code().is_none() || e.dev == Dev(0) {
            sum.skipped += 1;
            continue;
        }
        if e.cpu >= MAX_CPUS {
            sum.bad_cpu += 1;
            continue;
        }
        let key = (e.dev, e.cpu);
        let w = writers.entry(key).or_insert_with(|| {
            let name = names.entry(e.dev).or_insert_with(|| {
                crate::model::blktrace_record::device_name(e.dev)
                    .unwrap_or_else(|| format!("dev{}_{}", e.dev.major(), e.dev.minor()))
            });
            Writer {
                name: format!("{name}.blktrace.{}", e.cpu),
                pending: Vec::new(),
                seq: 0,
            }
        });
        let before = w.pending.len();
        if noted.insert((e.dev, e.pid)) {
            let comm = comms.get(&e.pid).cloned().unwrap_or_else(|| {
                if e.comm.is_empty() {
                    format!("pid{}", e.pid)
                } else {
                    e.comm.to_string()
                }
            });
            w.seq += 1;
            w.pending
                .extend_from_slice(&process_note(e.pid, &comm, e.ts, e.dev, e.cpu, w.seq));
        }
        w.seq += 1;
        if let Some(rec) = encode(&e, w.seq) {
            w.pending.extend_from_slice(&rec);
            sum.records += 1;
        }
        pending += w.pending.len() - before;
        if w.pending.len() >= FLUSH_BYTES {
            pending -= w.pending.len();
            flush(target, w)?;
        }
        if pending >= PENDING_BYTES {
            for w in writers.values_mut() {
                flush(target, w)?;
            }
            pending = 0;
        }
    }
    for w in writers.values_mut() {
        flush(target, w)?;
    }
    // blkparse reads CPUs 0..N until a file is missing: a device's files
    // are numbered by CPU with empty ones in the gaps, or in CPU order
    // when the gaps would cost more files than the records need.
    let mut cpus: HashMap<Dev, Vec<u32>> = HashMap::new();
    for (dev, cpu) in writers.keys() {
        cpus.entry(*dev).or_default().push(*cpu);
    }
    for (dev, mut list) in cpus {
        list.sort_unstable();
        let name = &names[&dev];
        let highest = *list.last().expect("a device has a file");
        if numbered_by_cpu(highest, list.len()) {
            for cpu in 0..=highest {
                let file = format!("{name}.blktrace.{cpu}");
                if !writers.contains_key(&(dev, cpu)) {
                    File::create(target.staged(&file))?;
                }
                sum.files.push(target.dir.join(file));
            }
        } else {
            // In CPU order, so that file k never is one not yet renamed.
            for (k, cpu) in list.iter().enumerate() {
                let file = format!("{name}.blktrace.{k}");
                std::fs::rename(
                    target.staged(&writers[&(dev, *cpu)].name),
                    target.staged(&file),
                )?;
                sum.files.push(target.dir.join(file));
            }
            sum.renumbered.push(Renumbered {
                device: name.clone(),
                cpus: list.len(),
                highest,
            });
        }
    }
    sum.files.sort();
    sum.renumbered.sort_by(|a, b| a.device.cmp(&b.device));
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BlockEvent;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "iosleuth-blktrace-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn queue(ts: u64, cpu: u32) -> Event {
        let mut b = BlockEvent::for_test(ts, Action::Queue, ts, 8, crate::model::Rwbs::READ);
        b.dev = Dev::new(7, 0);
        b.cpu = cpu;
        Event::Block(b)
    }

    #[test]
    fn a_corrupt_cpu_number_costs_no_files() {
        let root = tmp("cpu");
        let dir = root.join("a/b");
        let t = Target::prepare(&dir, false).unwrap();
        let events = vec![
            queue(1, 1),
            queue(2, 757_773),
            queue(3, MAX_CPUS),
            queue(4, 0),
        ];
        let sum = export(events.into_iter(), &t, HashMap::new()).unwrap();
        assert_eq!((sum.records, sum.bad_cpu), (2, 2));
        assert_eq!(sum.files.len(), 2);
        t.commit(&sum).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.iter().all(|n| is_blktrace_file(n)), "{names:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn files_far_above_the_records_cpus_are_numbered_in_cpu_order() {
        let root = tmp("renumber");
        let t = Target::prepare(&root, false).unwrap();
        let events = vec![queue(1, 8191), queue(2, 5000), queue(3, 8191)];
        let sum = export(events.into_iter(), &t, HashMap::new()).unwrap();
        let name = crate::model::blktrace_record::device_name(Dev::new(7, 0))
            .unwrap_or_else(|| "dev7_0".into());
        assert_eq!(
            sum.renumbered,
            [Renumbered {
                device: name.clone(),
                cpus: 2,
                highest: 8191
            }]
        );
        t.commit(&sum).unwrap();
        let len = |cpu: u32| {
            std::fs::metadata(root.join(format!("{name}.blktrace.{cpu}")))
                .unwrap()
                .len()
        };
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 2);
        // CPU 5000: one record; CPU 8191: two and the process note.
        assert!(len(0) > 0 && len(1) > len(0));
        // A few gaps below 1024 CPUs are filled, as blkparse needs.
        let t = Target::prepare(&root.join("dense"), false).unwrap();
        let sum = export(vec![queue(1, 3)].into_iter(), &t, HashMap::new()).unwrap();
        assert!(sum.renumbered.is_empty());
        assert_eq!(sum.files.len(), 4);
        assert!(numbered_by_cpu(1023, 1) && !numbered_by_cpu(1024, 1));
        assert!(numbered_by_cpu(2047, 1024) && !numbered_by_cpu(2047, 1023));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn dropped_without_commit_leaves_nothing() {
        let root = tmp("drop");
        let dir = root.join("x/y");
        let t = Target::prepare(&dir, false).unwrap();
        export(vec![queue(1, 3)].into_iter(), &t, HashMap::new()).unwrap();
        drop(t);
        assert!(!root.exists(), "{root:?} is left behind");
        // An existing directory stays, empty again.
        std::fs::create_dir_all(&dir).unwrap();
        let t = Target::prepare(&dir, false).unwrap();
        export(vec![queue(1, 3)].into_iter(), &t, HashMap::new()).unwrap();
        drop(t);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_directory_with_files_needs_force_which_removes_old_blktrace_files() {
        let root = tmp("force");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("old.blktrace.0"), b"x").unwrap();
        std::fs::write(root.join("notes.txt"), b"keep").unwrap();
        match Target::prepare(&root, false) {
            Err(TargetError::NotEmpty(2, names)) => {
                assert_eq!(names, ["notes.txt", "old.blktrace.0"])
            }
            other => panic!("{other:?}"),
        }
        let t = Target::prepare(&root, true).unwrap();
        let sum = export(vec![queue(1, 0)].into_iter(), &t, HashMap::new()).unwrap();
        let removed = t.commit(&sum).unwrap();
        assert_eq!(removed, [root.join("old.blktrace.0")]);
        assert!(root.join("notes.txt").exists());
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 2);
        std::fs::write(root.join("f"), b"").unwrap();
        assert!(matches!(
            Target::prepare(&root.join("f"), true),
            Err(TargetError::NotADirectory)
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }
}

//! Writes events as blktrace's per-CPU files (`NAME.blktrace.CPU`), so that
//! blkparse, btt, iowatcher and seekwatcher can read captures made with the
//! `blk` tracer or with tracepoints.

use crate::model::blktrace_record::{encode, process_note};
use crate::model::{Action, Dev, Event};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
pub struct ExportSummary {
    pub files: Vec<PathBuf>,
    pub records: u64,
    pub skipped: u64,
}

struct Writer {
    file: BufWriter<File>,
    seq: u32,
}

/// Writes the block events of `events` into `dir`, one file per device and
/// CPU. `known_names` (pid → name) names processes whose names the stream
/// only gives later, or never.
pub fn export(
    events: impl Iterator<Item = Event>,
    dir: &Path,
    known_names: HashMap<u32, String>,
) -> std::io::Result<ExportSummary> {
    std::fs::create_dir_all(dir)?;
    let mut writers: HashMap<(Dev, u32), Writer> = HashMap::new();
    let mut names: HashMap<Dev, String> = HashMap::new();
    let mut comms: HashMap<u32, String> = known_names;
    let mut noted: HashSet<(Dev, u32)> = HashSet::new();
    let mut sum = ExportSummary::default();
    for ev in events {
        let e = match ev {
            Event::Block(b) => b,
            Event::ProcessName { pid, comm } => {
                comms.insert(pid, comm.to_string());
                continue;
            }
            Event::Other(_) => continue,
        };
        if !e.comm.is_empty() && e.action == Action::Queue {
            comms.entry(e.pid).or_insert_with(|| e.comm.to_string());
        }
        if e.action.blktrace_code().is_none() || e.dev == Dev(0) {
            sum.skipped += 1;
            continue;
        }
        let key = (e.dev, e.cpu);
        let w = match writers.entry(key) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let name = names.entry(e.dev).or_insert_with(|| {
                    crate::model::blktrace_record::device_name(e.dev)
                        .unwrap_or_else(|| format!("dev{}_{}", e.dev.major(), e.dev.minor()))
                });
                let path = dir.join(format!("{name}.blktrace.{}", e.cpu));
                let file = BufWriter::with_capacity(1 << 20, File::create(&path)?);
                sum.files.push(path);
                v.insert(Writer { file, seq: 0 })
            }
        };
        if noted.insert((e.dev, e.pid)) {
            let comm = comms.get(&e.pid).cloned().unwrap_or_else(|| {
                if e.comm.is_empty() {
                    format!("pid{}", e.pid)
                } else {
                    e.comm.to_string()
                }
            });
            w.seq += 1;
            w.file
                .write_all(&process_note(e.pid, &comm, e.ts, e.dev, e.cpu, w.seq))?;
        }
        w.seq += 1;
        if let Some(rec) = encode(&e, w.seq) {
            w.file.write_all(&rec)?;
            sum.records += 1;
        }
    }
    // blkparse reads CPUs 0..N until a file is missing: fill the gaps.
    let mut max_cpu: HashMap<Dev, u32> = HashMap::new();
    for (dev, cpu) in writers.keys() {
        let m = max_cpu.entry(*dev).or_default();
        *m = (*m).max(*cpu);
    }
    for (dev, max) in max_cpu {
        for cpu in 0..max {
            if !writers.contains_key(&(dev, cpu)) {
                let p = dir.join(format!("{}.blktrace.{cpu}", names[&dev]));
                File::create(&p)?;
                sum.files.push(p);
            }
        }
    }
    for (_, mut w) in writers {
        w.file.flush()?;
    }
    sum.files.sort();
    Ok(sum)
}

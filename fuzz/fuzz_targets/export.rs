//! `iosleuth export --blktrace DIR` on any input that detection accepts
//! (blktrace binary, the blk tracer's binary or text, the text formats):
//! names first, then the per-CPU files, then those files read back.
//!
//! Bounded so that a fuzzed input cannot fill the disk: files are limited
//! to 64 MiB each (SIGXFSZ past it: a finding), and an input that would
//! make export create more than MAX_FILES files is itself reported as a
//! finding (a panic) before export runs, not quietly skipped.
#![no_main]

use iosleuth::testing::{open_bytes, open_inputs};
use iosleuth::testing::{Dev, Event};
use libfuzzer_sys::fuzz_target;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Far more than a machine's CPUs (NR_CPUS is at most 8192) times the
/// devices a fuzzed input of a few KB names.
const MAX_FILES: u64 = 10_000;

fuzz_target!(
    init: {
        iosleuth_fuzz::limit_file_size(64 << 20);
    },
    |data: &[u8]| {
    let Ok(src) = open_bytes(Path::new("fuzz.blk"), data.to_vec()) else {
        return;
    };
    let (events, _) = iosleuth_fuzz::drain(src);
    let names: HashMap<u32, String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ProcessName { pid, comm } => Some((*pid, comm.to_string())),
            _ => None,
        })
        .collect();

    // The files export will create: one per device and CPU seen, and the
    // empty ones it adds for every lower CPU of a device.
    let mut writers: HashSet<(Dev, u32)> = HashSet::new();
    for e in &events {
        if let Event::Block(b) = e {
            // Export leaves out CPUs past any kernel's NR_CPUS (corrupt
            // records), with a warning: they make no file.
            if b.action.blktrace_code().is_some()
                && b.dev != Dev(0)
                && b.cpu < iosleuth::testing::MAX_CPUS
            {
                writers.insert((b.dev, b.cpu));
            }
        }
    }
    let mut max_cpu: HashMap<Dev, u32> = HashMap::new();
    for (dev, cpu) in &writers {
        let m = max_cpu.entry(*dev).or_default();
        *m = (*m).max(*cpu);
    }
    let files: u64 = max_cpu.values().map(|&m| m as u64 + 1).sum();
    if files > MAX_FILES {
        panic!(
            "export would create {files} files ({} devices, highest CPU {:?}) from a {}-byte input",
            max_cpu.len(),
            max_cpu.values().max(),
            data.len()
        );
    }

    let dir = iosleuth_fuzz::scratch("export").join("out");
    let _ = std::fs::remove_dir_all(&dir);
    let Ok(target) = iosleuth::testing::Target::prepare(&dir, false) else {
        return;
    };
    let sum = match iosleuth::testing::export_blktrace(events.into_iter(), &target, names) {
        Ok(s) => s,
        Err(_) => return,
    };
    if target.commit(&sum).is_err() {
        return;
    }
    let on_disk = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(on_disk, sum.files.len(), "files reported vs. files written");
    if sum.records == 0 {
        return;
    }
    // What export wrote, iosleuth reads back: every record a block event.
    let sources = open_inputs(std::slice::from_ref(&dir)).expect("iosleuth reads the files it exported");
    let mut block = 0u64;
    for src in sources {
        let (evs, warnings) = iosleuth_fuzz::drain(src);
        assert!(warnings.is_empty(), "reading the export back: {warnings:?}");
        block += evs.iter().filter(|e| matches!(e, Event::Block(_))).count() as u64;
    }
    assert_eq!(block, sum.records, "block events read back vs. records written");
});

//! The files of a capture directory, named once for the recorder that
//! writes them (`capture`) and the importer that reads them (`ingest`):
//!
//! ```text
//! CAPTURE/
//!   iosleuth-capture.json      manifest: page size, CPUs, ring-buffer loss counters, recorder tids
//!   snapshot.json              the system before and after the run, the workload's threads
//!   symbols.json               kernel addresses the events hold, resolved: {"0xffff…": name}
//!   formats/header_page        the kernel's ring-buffer page header layout
//!   formats/header_event
//!   formats/events/SYS/EVENT/format   each recorded event's field layout
//!   cpuN.raw                   CPU N's ring-buffer pages, as trace_pipe_raw gave them
//! ```

use super::tracepoint::Field;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = "iosleuth-capture.json";
/// The manifest's `format`, and the `version` of the layout described here
/// (a manifest without them is version 1, the first layout).
pub const FORMAT: &str = "iosleuth-capture";
pub const VERSION: u64 = 1;
/// The sizes of a ring-buffer page that a manifest may give (`page_size`):
/// the kernel's page size, a power of two.
pub const PAGE_SIZES: std::ops::RangeInclusive<u64> = 4096..=(1 << 20);
/// The system snapshot of a capture: `{before, workload, after}`.
pub const SNAPSHOT: &str = "snapshot.json";
/// Kernel symbols of the addresses the capture holds: `{"0xffff…": name}`.
pub const SYMBOLS: &str = "symbols.json";
pub const HEADER_PAGE: &str = "formats/header_page";
pub const HEADER_EVENT: &str = "formats/header_event";
/// `formats/events/SYS/EVENT/format`.
pub const EVENT_FORMATS: &str = "formats/events";

/// Event fields that hold a kernel function's address (workqueue work
/// functions), resolved into `symbols.json` when recording stops.
pub const ADDRESS_FIELDS: [Field; 1] = [Field::Function];

/// A field that holds a kernel function's address.
pub fn is_address(name: &super::FieldName) -> bool {
    name.known().is_some_and(|f| ADDRESS_FIELDS.contains(&f))
}

/// `samples-cpuN.perf`: CPU N's on-CPU samples, the kernel's perf records
/// as its ring buffer held them (`record --stacks`).
pub fn samples_file(cpu: u32) -> String {
    format!("samples-cpu{cpu}.perf")
}

/// The executable mappings of the processes that ran when sampling
/// started, as PERF_RECORD_MMAP records (the kernel reports later ones
/// beside the samples).
pub const START_MAPS: &str = "samples-start-maps.perf";

/// The recording machine's vDSO image (`[vdso]` in the mappings).
pub const VDSO: &str = "vdso.so";

/// The build id of each binary the sampled processes had mapped, by
/// path, as the recorder read them: a binary changed since is not used
/// to name frames.
pub const BUILD_IDS: &str = "build-ids.json";

/// The CPU of a `samples-cpuN.perf` file name.
pub fn cpu_of_samples_file(name: &str) -> Option<u32> {
    name.strip_prefix("samples-cpu")?
        .strip_suffix(".perf")?
        .parse()
        .ok()
}

/// `cpuN.raw`: CPU N's ring-buffer pages.
pub fn cpu_file(cpu: u32) -> String {
    format!("cpu{cpu}.raw")
}

/// The CPU of a `cpuN.raw` file name.
pub fn cpu_of_file(name: &str) -> Option<u32> {
    name.strip_prefix("cpu")?.strip_suffix(".raw")?.parse().ok()
}

/// Where a single-file recording (`record --blk`) keeps its snapshot:
/// `FILE.snapshot.json`.
pub fn snapshot_beside(trace: &Path) -> PathBuf {
    let mut s = trace.as_os_str().to_owned();
    s.push(".snapshot.json");
    PathBuf::from(s)
}

/// A directory is a capture when it has a manifest.
pub fn is_capture(dir: &Path) -> bool {
    dir.join(MANIFEST).exists()
}

/// What makes a directory without a manifest look like a capture (its
/// `cpuN.raw` files or its `formats/`), if anything does.
pub fn looks_like_capture(dir: &Path) -> Option<String> {
    let raw = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| cpu_of_file(&e.file_name().to_string_lossy()).is_some())
        .count();
    let formats = dir.join(HEADER_PAGE).exists() || dir.join(EVENT_FORMATS).is_dir();
    match (raw, formats) {
        (0, false) => None,
        (0, true) => Some("it has formats/".into()),
        (n, false) => Some(format!("it has {n} cpuN.raw files")),
        (n, true) => Some(format!("it has {n} cpuN.raw files and formats/")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_files_round_trip() {
        assert_eq!(cpu_file(3), "cpu3.raw");
        assert_eq!(cpu_of_file("cpu12.raw"), Some(12));
        assert_eq!(cpu_of_file("cpu.raw"), None);
        assert_eq!(cpu_of_file("cpu1.raw.bak"), None);
        assert_eq!(
            snapshot_beside(Path::new("/x/loop0.blk")),
            PathBuf::from("/x/loop0.blk.snapshot.json")
        );
    }
}

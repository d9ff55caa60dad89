//! What the fuzz targets share: splitting one input into parts, a scratch
//! directory per process, draining a source, and the analysis + diagnosis +
//! rendering that runs on whatever a parser produced.

use iosleuth::ingest::{warnings_for, Source};
use iosleuth::model::Event;
use std::path::{Path, PathBuf};

/// The committed capture whose format files, header page and manifest a
/// capture target uses where the fuzzer's part is empty.
pub const FIXTURE_CAPTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/fsync-4k.cap"
);

/// Splits `data` into `n` parts: each but the last is a 4-byte
/// little-endian length and that many bytes (clamped to what is left); the
/// last part is the rest. Parts past the end of the input are empty.
/// `scripts/fuzz` writes the seeds of such targets in the same shape.
pub fn split(mut data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if i + 1 == n {
            out.push(data);
            break;
        }
        if data.len() < 4 {
            out.push(&data[..0]);
            continue;
        }
        let len = u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
        let rest = &data[4..];
        let len = len.min(rest.len());
        out.push(&rest[..len]);
        data = &rest[len..];
    }
    out
}

/// A scratch directory of this process, emptied on every call.
pub fn scratch(name: &str) -> PathBuf {
    let base = std::env::temp_dir().join(format!("iosleuth-fuzz-{}", std::process::id()));
    let dir = base.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Reads a source to its end; returns its events and warnings.
pub fn drain(mut src: Box<dyn Source>) -> (Vec<Event>, Vec<String>) {
    let mut events = Vec::new();
    while let Some(ev) = src.next_event() {
        events.push(ev);
    }
    let warnings = warnings_for(src.as_ref());
    (events, warnings)
}

/// Diagnosis and the text rendering of an analysis, and the JSON one when
/// `json` is set.
pub fn render(a: &iosleuth::analyze::Analysis, json: bool) {
    use iosleuth::report::Format;
    let findings = iosleuth::diagnose::diagnose(a);
    let _ = Format::Text.report(a, &findings);
    if json {
        let _ = Format::Json.report(a, &findings);
    }
}

/// The full pipeline on files (open, merge, analyse, diagnose, render), as
/// `iosleuth report` runs it. An input error is a fine outcome.
pub fn pipeline(paths: &[PathBuf], json: bool) {
    let opts = iosleuth::pipeline::Options::default();
    if let Ok(a) = iosleuth::pipeline::analyse(paths, &opts) {
        render(&a, json);
    }
}

/// Writes `bytes` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&p, bytes).expect("write scratch file");
    p
}

/// Limits the size of any file the process writes (a target that writes
/// files must not fill the disk): past it the kernel sends SIGXFSZ, which
/// libFuzzer reports as a finding.
pub fn limit_file_size(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: setrlimit with a valid pointer to an initialised rlimit.
    unsafe {
        libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
    }
}

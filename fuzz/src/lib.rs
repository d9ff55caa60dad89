//! What the fuzz targets share: splitting one input into parts, a scratch
//! directory per process, draining a source, and the analysis + diagnosis +
//! rendering that runs on whatever a parser produced.

use iosleuth::testing::{warnings_for, Source};
use iosleuth::testing::Event;
use std::path::{Path, PathBuf};

/// The committed capture whose format files, header page and manifest a
/// capture target uses where the fuzzer's part is empty.
pub const FIXTURE_CAPTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/fsync-4k.cap"
);

/// The committed fixtures.
pub const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");

/// The light capture whose manifest and format files the light_capture
/// target uses (its flight recorder holds the journal's events).
pub const FIXTURE_LIGHT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/light-rt.cap"
);

/// The perf.data whose header, attributes and features the
/// perf_compressed target puts its compressed records in.
pub const FIXTURE_PERF_DATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/perf-urandom.data"
);

pub use iosleuth::fuzz_input::{split, SEPARATOR};

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
pub fn render(a: &iosleuth::testing::Analysis, json: bool) {
    use iosleuth::testing::Format;
    let findings = iosleuth::testing::diagnose(a);
    let _ = Format::Text.report(a, &findings);
    if json {
        let _ = Format::Json.report(a, &findings);
    }
}

/// The full pipeline on files (open, merge, analyze, diagnose, render), as
/// `iosleuth report` runs it. An input error is a fine outcome.
pub fn pipeline(paths: &[PathBuf], json: bool) {
    let opts = iosleuth::testing::Options::default();
    if let Ok(a) = iosleuth::testing::analyze_paths(paths, &opts) {
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

/// One text format's target: detection runs, then the bytes are read as
/// `format` (given, not detected) and drained.
pub fn text_target(data: &[u8], format: iosleuth::testing::TextFormat) {
    let _ = iosleuth::testing::detect(data);
    let src = iosleuth::testing::TextSource::new(
        std::path::Path::new("fuzz.txt"),
        iosleuth::testing::Chunked::from_vec(data.to_vec()),
        format,
    );
    let _ = drain(Box::new(src));
}

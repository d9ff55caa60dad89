//! A capture directory of `iosleuth record` built from the input, then the
//! whole of `iosleuth report` on it (open, decode, merge, analyse with the
//! snapshot, diagnose, render text and JSON).
//!
//! Input: parts split by `iosleuth_fuzz::split` —
//! [manifest, snapshot.json, formats/header_page, one format file (its
//!  first byte picks the system), symbols.json, cpu0.raw, cpu1.raw].
//! An empty manifest or header_page is the committed fixture's
//! (tests/fixtures/fsync-4k.cap), whose format files are always there (the
//! fuzzed one is added beside them), so that decoding gets deep; an empty
//! snapshot, symbols or cpu1.raw is left out.
#![no_main]

use iosleuth::model::capture_layout::{
    cpu_file, EVENT_FORMATS, HEADER_EVENT, HEADER_PAGE, MANIFEST, SNAPSHOT, SYMBOLS,
};
use iosleuth_fuzz::{write, FIXTURE_CAPTURE};
use libfuzzer_sys::fuzz_target;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// An event system of the fixture: its name, directory, and events (name,
/// directory).
type System = (String, PathBuf, Vec<(String, PathBuf)>);

struct Fixture {
    manifest: Vec<u8>,
    header_page: Vec<u8>,
    header_event: Vec<u8>,
    systems: Vec<System>,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let root = Path::new(FIXTURE_CAPTURE)
        .canonicalize()
        .expect("fixture capture");
    let mut systems = Vec::new();
    for sys in std::fs::read_dir(root.join(EVENT_FORMATS))
        .unwrap()
        .flatten()
    {
        let mut events: Vec<(String, PathBuf)> = std::fs::read_dir(sys.path())
            .unwrap()
            .flatten()
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        events.sort();
        systems.push((
            sys.file_name().to_string_lossy().into_owned(),
            sys.path(),
            events,
        ));
    }
    systems.sort();
    Fixture {
        manifest: std::fs::read(root.join(MANIFEST)).unwrap(),
        header_page: std::fs::read(root.join(HEADER_PAGE)).unwrap(),
        header_event: std::fs::read(root.join(HEADER_EVENT)).unwrap_or_default(),
        systems,
    }
});

fn or<'a>(part: &'a [u8], real: &'a [u8]) -> &'a [u8] {
    if part.is_empty() {
        real
    } else {
        part
    }
}

fuzz_target!(|data: &[u8]| {
    let fx = &*FIXTURE;
    let p = iosleuth_fuzz::split(data, 7);
    let (manifest, snapshot, header_page, format, symbols, cpu0, cpu1) =
        (p[0], p[1], p[2], p[3], p[4], p[5], p[6]);

    let dir = iosleuth_fuzz::scratch("capture").join("run.cap");
    write(&dir, MANIFEST, or(manifest, &fx.manifest));
    if !snapshot.is_empty() {
        write(&dir, SNAPSHOT, snapshot);
    }
    if !symbols.is_empty() {
        write(&dir, SYMBOLS, symbols);
    }
    write(&dir, HEADER_PAGE, or(header_page, &fx.header_page));
    write(&dir, HEADER_EVENT, &fx.header_event);
    let events = dir.join(EVENT_FORMATS);
    std::fs::create_dir_all(&events).unwrap();
    // The fuzzed format file goes into one of the fixture's systems, or
    // into one of its own.
    let (fuzzed_sys, fuzzed_text) = match format.split_first() {
        Some((&pick, text)) => (Some(pick as usize % (fx.systems.len() + 1)), text),
        None => (None, &[][..]),
    };
    for (i, (name, path, evs)) in fx.systems.iter().enumerate() {
        if fuzzed_sys == Some(i) {
            let d = events.join(name);
            std::fs::create_dir_all(&d).unwrap();
            for (ev, ev_path) in evs {
                symlink(ev_path, d.join(ev)).unwrap();
            }
        } else {
            symlink(path, events.join(name)).unwrap();
        }
    }
    if let Some(i) = fuzzed_sys {
        let sys = fx.systems.get(i).map(|s| s.0.as_str()).unwrap_or("fuzz");
        write(&events, &format!("{sys}/fuzzed/format"), fuzzed_text);
    }
    write(&dir, &cpu_file(0), cpu0);
    if !cpu1.is_empty() {
        write(&dir, &cpu_file(1), cpu1);
    }
    iosleuth_fuzz::pipeline(&[dir], true);
});

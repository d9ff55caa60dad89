//! How the fuzz targets (fuzz/) turn one byte string into what iosleuth
//! reads, kept in the library so that tests/offline/fuzz_regressions.rs replays a
//! finding through the very same files and calls: several files travel as
//! parts of one input, and a capture directory is built from seven parts
//! over a committed fixture; a light capture, a perf.data of compressed
//! records and a trace.dat's options are spliced into committed fixtures
//! the same way (the submodules). Not part of iosleuth's interface.

use crate::model::capture_layout::{
    cpu_file, EVENT_FORMATS, HEADER_EVENT, HEADER_PAGE, MANIFEST, SNAPSHOT, SYMBOLS,
};
use std::io;
use std::path::{Path, PathBuf};

pub mod light_capture;
pub mod perf_compressed;
pub mod trace_dat_options;

/// What separates the parts of an input that holds several files.
pub const SEPARATOR: &[u8] = b"\n--part--\n";

/// Splits `data` into `n` parts at `SEPARATOR`: the last part is the rest
/// (separators and all: it is binary), parts past the end are empty. A
/// separator rather than length prefixes, so that inserting or deleting
/// bytes in one part (a manifest's number, a format file's line) leaves
/// the others whole. `scripts/fuzz` writes the seeds of such targets in the
/// same shape, and fuzz/dicts/ offer the separator to the mutator.
pub fn split(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n);
    let mut rest = data;
    while out.len() + 1 < n {
        match memchr::memmem::find(rest, SEPARATOR) {
            Some(at) => {
                out.push(&rest[..at]);
                rest = &rest[at + SEPARATOR.len()..];
            }
            None => break,
        }
    }
    out.push(rest);
    out.resize(n, &[]);
    out
}

/// The kernel's self-description on its own: parts [system, format text,
/// header_page text (empty: the 64-bit default), one record, one
/// ring-buffer page]; parses them, reads every field of the record,
/// decodes it, then every record of the page.
pub fn tracefs_format(data: &[u8]) {
    use crate::ingest::format_decoder::Decoder;
    use crate::ingest::ring_buffer::{page_info, PageRecords};
    use crate::ingest::tracefs_format::{
        parse_format, parse_header_page, read_int, read_str, PageHeader,
    };
    let parts = split(data, 5);
    let system = String::from_utf8_lossy(parts[0]);
    let format = String::from_utf8_lossy(parts[1]);
    let header = String::from_utf8_lossy(parts[2]);
    let (record, page) = (parts[3], parts[4]);
    let hdr = if header.is_empty() {
        PageHeader::default()
    } else {
        match parse_header_page(&header) {
            Some(h) => h,
            None => return,
        }
    };
    let formats: Vec<_> = parse_format(&system, &format).into_iter().collect();
    for f in &formats {
        for field in &f.fields {
            let _ = read_int(record, field);
            let _ = read_str(record, field);
        }
    }
    let decoder = Decoder::new(&formats, hdr);
    let _ = decoder.decode(1, 0, record);
    if let Some(info) = page_info(page, hdr) {
        for (ts, rec) in PageRecords::new(page, hdr, &info) {
            let _ = decoder.decode(ts, 0, rec);
        }
    }
}

/// Builds `dir/run.cap` from parts [manifest, snapshot.json,
/// formats/header_page, one format file (its first byte picks the
/// system), symbols.json, cpu0.raw, cpu1.raw, samples-cpu0.perf] over the
/// capture `fixture`: an empty manifest or header_page is the fixture's,
/// whose format files are always there (linked; the fuzzed one is added
/// beside them), so that decoding gets deep; an empty snapshot, symbols,
/// cpu1.raw or samples file is left out. With samples and the fixture's
/// manifest, the manifest says they are in the layout iosleuth reads,
/// with user frames (their side-band records are read too).
pub fn write_capture(data: &[u8], dir: &Path, fixture: &Path) -> io::Result<PathBuf> {
    let p = split(data, 8);
    let (manifest, snapshot, header_page, format, symbols, cpu0, cpu1, samples) =
        (p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
    let fixture = fixture.canonicalize()?;
    let cap = dir.join("run.cap");
    let write = |name: &str, bytes: &[u8]| -> io::Result<()> {
        let path = cap.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)
    };
    let or = |part: &[u8], name: &str| -> io::Result<Vec<u8>> {
        match part.is_empty() {
            true => std::fs::read(fixture.join(name)),
            false => Ok(part.to_vec()),
        }
    };
    let mut manifest = or(manifest, MANIFEST)?;
    if p[0].is_empty() && !samples.is_empty() {
        if let Ok(mut m) = serde_json::from_slice::<serde_json::Value>(&manifest) {
            m["samples"] = serde_json::json!({"sample_type": crate::model::perf_record::SAMPLE_TYPE, "user_frames": true});
            manifest = serde_json::to_vec(&m).unwrap_or(manifest);
        }
    }
    write(MANIFEST, &manifest)?;
    if !snapshot.is_empty() {
        write(SNAPSHOT, snapshot)?;
    }
    if !symbols.is_empty() {
        write(SYMBOLS, symbols)?;
    }
    write(HEADER_PAGE, &or(header_page, HEADER_PAGE)?)?;
    write(
        HEADER_EVENT,
        &std::fs::read(fixture.join(HEADER_EVENT)).unwrap_or_default(),
    )?;
    let mut systems: Vec<(String, PathBuf)> = std::fs::read_dir(fixture.join(EVENT_FORMATS))?
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    systems.sort();
    let events = cap.join(EVENT_FORMATS);
    std::fs::create_dir_all(&events)?;
    // The fuzzed format file goes into one of the fixture's systems, or
    // into one of its own.
    let fuzzed = format
        .split_first()
        .map(|(&pick, text)| (pick as usize % (systems.len() + 1), text));
    for (i, (name, path)) in systems.iter().enumerate() {
        if fuzzed.is_some_and(|(f, _)| f == i) {
            let d = events.join(name);
            std::fs::create_dir_all(&d)?;
            for e in std::fs::read_dir(path)?.flatten() {
                std::os::unix::fs::symlink(e.path(), d.join(e.file_name()))?;
            }
        } else {
            std::os::unix::fs::symlink(path, events.join(name))?;
        }
    }
    if let Some((i, text)) = fuzzed {
        let sys = systems.get(i).map(|s| s.0.as_str()).unwrap_or("fuzz");
        write(&format!("{EVENT_FORMATS}/{sys}/fuzzed/format"), text)?;
    }
    write(&cpu_file(0), cpu0)?;
    if !cpu1.is_empty() {
        write(&cpu_file(1), cpu1)?;
    }
    if !samples.is_empty() {
        write(&crate::model::capture_layout::samples_file(0), samples)?;
    }
    Ok(cap)
}

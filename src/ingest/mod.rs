//! Importers: turn files that other tools wrote into the event stream.
//! Parsers never compute statistics; they only decode.

pub mod blktrace_bin;
pub mod block_text;
pub mod capture_dir;
pub mod compressed;
pub mod files;
pub mod format_decoder;
pub mod light;
pub mod light_values;
pub mod merge;
pub mod perf_compressed;
pub mod perf_damage;
pub mod perf_data;
mod perf_header;
pub mod perf_samples;
pub mod perf_script_stack;
pub mod perf_tracing_data;
pub mod reader;
pub mod resort;
pub mod ring_buffer;
pub mod source;
pub mod text_fields;
pub mod text_line;
pub mod text_source;
pub mod time_order;
pub mod trace_dat;
pub mod tracefs_format;
mod zstd_frames;

pub use merge::Merger;
pub use source::{warnings_for, InputError, Source};

use reader::Chunked;
use std::path::{Path, PathBuf};

/// `NAME.blktrace.N` → (`NAME`, N)
fn blktrace_cpu_file(path: &Path) -> Option<(String, u32)> {
    let name = path.file_name()?.to_str()?;
    let (stem, cpu) = name.rsplit_once(".blktrace.")?;
    Some((stem.to_string(), cpu.parse().ok()?))
}

/// Expands a directory or one per-CPU file into every per-CPU blktrace file
/// of the same device, ordered by device name then CPU, as blkparse reads them.
fn expand(path: &Path) -> Result<Vec<PathBuf>, InputError> {
    let meta =
        std::fs::metadata(path).map_err(|e| InputError::new(path, format!("cannot open: {e}")))?;
    let (dir, only_stem) = if meta.is_dir() {
        (path.to_path_buf(), None)
    } else if !meta.is_file() {
        return Err(InputError::new(
            path,
            format!("{}: {}", files::not_regular(&meta), files::READ_INSTEAD),
        ));
    } else if let Some((stem, _)) = blktrace_cpu_file(path) {
        // A bare file name's parent is "": the current directory, its
        // files named as bare as the one given.
        (
            path.parent().map(Path::to_path_buf).unwrap_or_default(),
            Some(stem),
        )
    } else {
        return Ok(vec![path.to_path_buf()]);
    };
    let listed = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &dir
    };
    let rd = std::fs::read_dir(listed)
        .map_err(|e| InputError::new(path, format!("cannot list: {e}")))?;
    let mut found: Vec<(String, u32, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = dir.join(e.file_name());
            let (stem, cpu) = blktrace_cpu_file(&p)?;
            if only_stem.as_ref().is_some_and(|s| *s != stem) {
                return None;
            }
            Some((stem, cpu, p))
        })
        .collect();
    if found.is_empty() {
        if let Some(what) = crate::model::capture_layout::looks_like_capture(listed) {
            return Err(InputError::new(
                path,
                format!(
                    "looks like an iosleuth capture ({what}) but its manifest {} is missing: without it the raw pages cannot be decoded",
                    crate::model::capture_layout::MANIFEST
                ),
            ));
        }
        return Err(InputError::new(
            path,
            "no blktrace files (NAME.blktrace.CPU) in this directory",
        ));
    }
    found.sort();
    Ok(found.into_iter().map(|(_, _, p)| p).collect())
}

/// Opens one file, detecting its format from its content. The file is
/// then read as a stream. Anything but a regular file is refused: a FIFO
/// or a device would block or never end.
pub fn open_file(path: &Path) -> Result<Box<dyn Source>, InputError> {
    open_file_windowed(path, reader::window_share(1))
}

/// [`open_file`] for one of several files read together, reading ahead
/// by at most `window` bytes (its [`reader::window_share`]).
pub fn open_file_windowed(path: &Path, window: usize) -> Result<Box<dyn Source>, InputError> {
    let (f, meta) = files::open_checked(path).map_err(|e| InputError::new(path, e))?;
    if meta.is_dir() {
        return Err(InputError::new(
            path,
            "is a directory without blktrace files",
        ));
    }
    if !meta.is_file() {
        return Err(InputError::new(
            path,
            format!("{}: {}", files::not_regular(&meta), files::READ_INSTEAD),
        ));
    }
    open_input(path, Chunked::from_file_windowed(f, window))
}

/// Standard input (`-`), detected like any file: a pipe or a redirected file.
pub fn open_stdin() -> Result<Box<dyn Source>, InputError> {
    let name = files::stdin_path();
    let f = files::open_stdin().map_err(|e| InputError::new(&name, e))?;
    open_input(&name, Chunked::from_file(f))
}

/// Like `open_file`, for bytes already in memory (`path` names them in
/// messages).
pub fn open_bytes(path: &Path, data: Vec<u8>) -> Result<Box<dyn Source>, InputError> {
    open_input(path, Chunked::from_vec(data))
}

/// How much of the start of an input format detection looks at, at most.
const DETECT_BYTES: usize = 256 * 1024;

/// How much of the start a compression or a binary format's magic is
/// found in: only text needs more (`DETECT_BYTES`), so that each of many
/// binary inputs holds no more than its window.
const MAGIC_BYTES: usize = 4096;

/// A file format iosleuth reads: how to recognise it from its first bytes
/// (`sniff`), and how to open it as a source. Detection tries them in
/// order, as Perfetto's trace processor does; a new format is one entry
/// here and one importer module. (Capture directories are recognised by
/// their manifest in `open_inputs`.)
struct InputFormat {
    name: &'static str,
    sniff: fn(&[u8]) -> bool,
    open: fn(&Path, Chunked) -> Opened,
    /// How much of the start `sniff` looks at.
    looks_at: usize,
    /// Read by path with seeks, so not from inside a compressed stream.
    seeks: bool,
}

type Opened = Result<Box<dyn Source>, InputError>;

static FORMATS: &[InputFormat] = &[
    InputFormat {
        name: "perf.data (perf record)",
        sniff: perf_data::detect,
        // Read by path: the crate seeks.
        open: |path, _| Ok(Box::new(perf_data::PerfDataSource::open(path)?)),
        looks_at: MAGIC_BYTES,
        seeks: true,
    },
    InputFormat {
        name: "trace-cmd trace.dat (versions 6 and 7)",
        sniff: trace_dat::detect,
        // Read by path where it is the file (sections are found by their
        // offsets); from memory when decompressed or from standard input.
        open: trace_dat::open,
        looks_at: MAGIC_BYTES,
        seeks: false,
    },
    InputFormat {
        name: "blktrace binary (blktrace files, blkparse -d, the blk tracer's binary output)",
        sniff: |head| blktrace_bin::detect(head).is_some(),
        open: |path, input| {
            let container = blktrace_bin::detect(input.avail()).expect("sniffed");
            Ok(Box::new(blktrace_bin::BlktraceSource::open(
                path, input, container,
            )?))
        },
        // The blk tracer's text header comes first (`text_header_len`).
        looks_at: 64 * 1024,
        seeks: false,
    },
    InputFormat {
        name: "text (ftrace, trace-cmd report, perf script, blkparse, the blk tracer's text)",
        sniff: |head| text_source::detect(head).is_some(),
        open: |path, input| {
            let fmt = text_source::detect(input.avail()).expect("sniffed");
            Ok(Box::new(text_source::TextSource::new(path, input, fmt)))
        },
        looks_at: DETECT_BYTES,
        seeks: false,
    },
];

fn open_input(path: &Path, input: Chunked) -> Opened {
    open_maybe_compressed(path, input, None)
}

/// Detects the format, first undoing a gzip or zstd compression (once: a
/// compressed file inside a compressed file is not a trace).
fn open_maybe_compressed(
    path: &Path,
    mut input: Chunked,
    within: Option<compressed::Codec>,
) -> Opened {
    input.ensure(MAGIC_BYTES);
    read_error(path, &mut input, within)?;
    let head = input.avail();
    if head.is_empty() {
        return Err(InputError::new(
            path,
            match within {
                Some(c) => format!("the file is {} data that decompresses to nothing", c.name()),
                None => "the file is empty".to_string(),
            },
        ));
    }
    if let (Some(outer), Some(inner)) = (within, compressed::detect(head)) {
        return Err(InputError::new(
            path,
            format!(
                "is {} data compressed a second time with {}: decompress it first",
                inner.name(),
                outer.name()
            ),
        ));
    }
    if let (None, Some(codec)) = (within, compressed::detect(head)) {
        let window = input.window();
        let meter = std::sync::Arc::new(compressed::Meter::new(format!("{} data", codec.name())));
        let inner =
            compressed::decoder(codec, input.into_reader(), meter.clone()).map_err(|e| {
                InputError::new(path, format!("is not valid {} data: {e}", codec.name()))
            })?;
        let inner = Chunked::from_reader(inner).windowed(window);
        let inner = open_maybe_compressed(path, inner, Some(codec))?;
        return Ok(Box::new(compressed::Decompressed { inner, meter }));
    }
    // Each format in turn, reading as much of the start as it looks at.
    let format = FORMATS.iter().find(|f| {
        input.ensure(f.looks_at);
        (f.sniff)(input.avail())
    });
    read_error(path, &mut input, within)?;
    let head = input.avail();
    if let Some(f) = format {
        if let (true, Some(c)) = (f.seeks, within) {
            return Err(InputError::new(
                path,
                format!(
                    "is {} compressed with {}: iosleuth reads that format only uncompressed (decompress it first)",
                    f.name,
                    c.name()
                ),
            ));
        }
        return (f.open)(path, input);
    }
    let what = if head.iter().take(4096).any(|&b| b == 0) {
        let first: Vec<String> = head.iter().take(24).map(|b| format!("{b:02x}")).collect();
        format!(
            "binary data that is not a blktrace or blk-tracer file (no 0x656174NN magic; it starts with {})",
            first.join(" ")
        )
    } else {
        "text that is not a trace iosleuth reads (no line looks like ftrace, trace-cmd, perf script or blkparse output)".to_string()
    };
    Err(InputError::new(path, what))
}

/// A read error before the format is known: fatal, unless a compressed
/// stream cut short after some data, which is read up to the cut with a
/// warning from the source.
fn read_error(
    path: &Path,
    input: &mut Chunked,
    within: Option<compressed::Codec>,
) -> Result<(), InputError> {
    if within.is_none() || input.avail().is_empty() {
        if let Some(e) = input.take_error() {
            let inside = within.map_or(String::new(), |c| format!(" {} data", c.name()));
            return Err(InputError::new(path, format!("cannot read{inside}: {e}")));
        }
    }
    Ok(())
}

/// Opens every input; per-CPU blktrace files of one device become one
/// source each so that they can be merged the way blkparse merges them.
pub fn open_inputs(paths: &[PathBuf]) -> Result<Vec<Box<dyn Source>>, InputError> {
    let mut sources = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // The files read together share one budget of read windows.
    let files: usize = paths.iter().map(|p| expand(p).map_or(1, |f| f.len())).sum();
    let window = reader::window_share(files);
    for p in paths {
        if files::is_stdin(p) {
            sources.push(open_stdin()?);
            continue;
        }
        // A capture directory of `iosleuth record`.
        if crate::model::capture_layout::is_capture(p) {
            sources.extend(capture_dir::open_capture(p)?);
            continue;
        }
        for f in expand(p)? {
            if seen.insert(f.clone()) {
                let meta = std::fs::metadata(&f)
                    .map_err(|e| InputError::new(&f, format!("cannot open: {e}")))?;
                // blkparse skips empty per-CPU files (a CPU that saw nothing).
                if meta.is_file() && meta.len() == 0 && blktrace_cpu_file(&f).is_some() {
                    continue;
                }
                sources.push(open_file_windowed(&f, window)?);
            }
        }
    }
    Ok(sources)
}

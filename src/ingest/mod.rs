//! Importers: turn files that other tools wrote into the event stream.
//! Parsers never compute statistics; they only decode.

pub mod blktrace_bin;
pub mod block_text;
pub mod merge;
pub mod source;
pub mod text_line;
pub mod text_source;

pub use merge::Merger;
pub use source::{warnings_for, InputError, Source, SourceStats};

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// File contents, mapped when possible.
pub enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

fn read_bytes(path: &Path) -> Result<Bytes, InputError> {
    let f = File::open(path).map_err(|e| InputError::new(path, format!("cannot open: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| InputError::new(path, format!("cannot stat: {e}")))?;
    if meta.is_file() && meta.len() > 0 {
        // SAFETY: the map is read-only; a file truncated underneath us would
        // fault, which is the same risk every mmap-based tool (btt) takes.
        if let Ok(m) = unsafe { memmap2::Mmap::map(&f) } {
            return Ok(Bytes::Mapped(m));
        }
    }
    let mut v = Vec::new();
    use std::io::Read;
    (&f).read_to_end(&mut v)
        .map_err(|e| InputError::new(path, format!("cannot read: {e}")))?;
    Ok(Bytes::Owned(v))
}

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
    } else if let Some((stem, _)) = blktrace_cpu_file(path) {
        (
            path.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(".")),
            Some(stem),
        )
    } else {
        return Ok(vec![path.to_path_buf()]);
    };
    let rd =
        std::fs::read_dir(&dir).map_err(|e| InputError::new(path, format!("cannot list: {e}")))?;
    let mut found: Vec<(String, u32, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            let (stem, cpu) = blktrace_cpu_file(&p)?;
            if only_stem.as_ref().is_some_and(|s| *s != stem) {
                return None;
            }
            Some((stem, cpu, p))
        })
        .collect();
    if found.is_empty() {
        return Err(InputError::new(
            path,
            "no blktrace files (NAME.blktrace.CPU) in this directory",
        ));
    }
    found.sort();
    Ok(found.into_iter().map(|(_, _, p)| p).collect())
}

/// Opens one file, detecting its format from its content.
pub fn open_file(path: &Path) -> Result<Box<dyn Source>, InputError> {
    open_bytes(path, read_bytes(path)?)
}

/// Detects the format of `data` (read from `path`, which names it in
/// messages) and returns a source over it.
pub fn open_bytes(path: &Path, data: Bytes) -> Result<Box<dyn Source>, InputError> {
    if data.is_empty() {
        return Err(InputError::new(path, "the file is empty"));
    }
    if let Some(container) = blktrace_bin::detect(&data) {
        return Ok(Box::new(blktrace_bin::BlktraceSource::open(
            path, data, container,
        )?));
    }
    if let Some(fmt) = text_source::detect(&data) {
        return Ok(Box::new(text_source::TextSource::new(path, data, fmt)));
    }
    let what = if data.iter().take(4096).any(|&b| b == 0) {
        "binary data that is not a blktrace or blk-tracer file (no 0x656174NN magic)"
    } else {
        "text that is not a trace iosleuth reads (no line looks like ftrace, trace-cmd, perf script or blkparse output)"
    };
    Err(InputError::new(path, what))
}

/// Opens every input; per-CPU blktrace files of one device become one
/// source each so that they can be merged the way blkparse merges them.
pub fn open_inputs(paths: &[PathBuf]) -> Result<Vec<Box<dyn Source>>, InputError> {
    let mut sources = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in paths {
        for f in expand(p)? {
            if seen.insert(f.clone()) {
                let meta = std::fs::metadata(&f)
                    .map_err(|e| InputError::new(&f, format!("cannot open: {e}")))?;
                // blkparse skips empty per-CPU files (a CPU that saw nothing).
                if meta.len() == 0 && blktrace_cpu_file(&f).is_some() {
                    continue;
                }
                sources.push(open_file(&f)?);
            }
        }
    }
    Ok(sources)
}

//! `iosleuth export --parquet DIR CAPTURE...`: tables for DuckDB, Spark
//! and Trino, one set per capture, laid out the way Hive lays out a
//! partitioned table so that many machines' and many runs' captures sit
//! side by side:
//!
//! ```text
//! DIR/requests/host=web-1/capture=run-42/part-0.parquet
//! DIR/operations/host=web-1/capture=run-42/part-0.parquet
//! ...
//! ```
//!
//! Each table is its own dataset root (`spark.read.parquet("DIR/requests")`,
//! DuckDB `read_parquet('DIR/requests/*/*/*.parquet', hive_partitioning =
//! true)`); `host` and `capture` come from the directory names (a column
//! of the same name inside the files would clash with them in Spark), the
//! kernel release and the capture's wall-clock time are columns of every
//! row. A capture is written to a scratch directory and moved into place
//! when complete: a reader never sees half a capture, and exporting it again
//! replaces it.

mod rows;
pub mod table;

use crate::analyze::rows::{RowCounts, RowWriters};
use crate::analyze::Analysis;
use crate::error::{Error, Result};
use crate::model::snapshot::Snapshot;
use std::path::{Path, PathBuf};
use table::TableWriter;

/// Where a capture's rows go: the partition values and the columns every
/// row carries. Unknown is `None` (NULL), never a stand-in.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// `None`: the partition `host=__HIVE_DEFAULT_PARTITION__`, which
    /// Hive, Spark and DuckDB read as NULL.
    pub host: Option<String>,
    pub capture: String,
    pub kernel: Option<String>,
    /// Microseconds since the epoch.
    pub capture_time_us: Option<i64>,
    pub capture_time_source: Option<TimeSource>,
    /// Thread → process (thread group), as the snapshot lists them.
    pub processes: std::collections::HashMap<u32, u32>,
}

/// Where a capture's wall-clock time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSource {
    Snapshot,
    FileMtime,
}

impl TimeSource {
    pub fn name(self) -> &'static str {
        match self {
            TimeSource::Snapshot => "snapshot",
            TimeSource::FileMtime => "file mtime",
        }
    }
}

impl Partition {
    /// The process (thread group id) of thread `tid`, when known: as the
    /// trace told it (`traced`: ftrace's tgid, perf's pid), else as the
    /// snapshot lists it. Never the thread id made up as one.
    pub fn process_of(&self, tid: u32, traced: Option<u32>) -> Option<u32> {
        traced.or_else(|| self.processes.get(&tid).copied())
    }
}

/// Hive's name for a NULL partition value.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// What one capture's export wrote: rows per table.
#[derive(Debug, Default, Clone)]
pub struct Written {
    pub partition: Option<Partition>,
    pub rows: Vec<(&'static str, u64)>,
}

/// The tables, in the order they are written.
pub const TABLES: &[&str] = &[
    "requests",
    "operations",
    "waited_for",
    "sched_waits",
    "iostat",
    "findings",
    "device_settings",
    "system_settings",
    "settings",
    "captures",
];

/// Hive's escaping of a partition value: what is not a letter, a digit,
/// `_`, `-` or `.` becomes `%XX` (Spark and DuckDB undo it).
pub fn escape_partition_value(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"_-.".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() || out == "." || out == ".." {
        out = "unknown".into();
    }
    out
}

/// Runs the analysis of one input while the writers write its rows
/// (the pipeline's `analyze_writing`): the analysis, and the rows written
/// or the first write error.
pub type Analyze<'a> =
    dyn Fn(&Path, RowWriters<'_>) -> (Result<Analysis>, std::io::Result<RowCounts>) + 'a;

/// Exports each input as its own capture into `dir`; `snapshot_of` finds
/// an input's system snapshot (host, kernel, when it was taken).
pub fn export(
    dir: &Path,
    inputs: &[PathBuf],
    host: Option<&str>,
    snapshot_of: &dyn Fn(&Path) -> Option<Snapshot>,
    analyze: &Analyze<'_>,
) -> Result<Vec<Written>> {
    // `-` or a file: refused before anything is made.
    crate::report::output_file::refuse_inputs_in(dir, &[])?;
    // A capture exported again replaces its directories in each table.
    for table in TABLES {
        crate::report::output_file::refuse_inputs_in(&dir.join(table), inputs)?;
    }
    // Before the analysis: a path that cannot be made is the user's to fix.
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::bad_input(format!("{}: cannot create: {e}", dir.display())))?;
    let mut used: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for input in inputs {
        let mut part = partition_of(input, host, snapshot_of(input));
        // Two inputs of the same name (a/run, b/run) must not overwrite
        // each other within one export.
        let stem = part.capture.clone();
        let mut n = 1;
        while used.contains(&part.capture) {
            n += 1;
            part.capture = format!("{stem}-{n}");
        }
        used.push(part.capture.clone());
        out.push(export_one(dir, input, part, analyze)?);
    }
    Ok(out)
}

/// The partition of one input: host and kernel from its snapshot (`--host`
/// wins), its name, and when it was taken (the snapshot's wall-clock time,
/// else the file's modification time, said so in `capture_time_source`).
fn partition_of(input: &Path, host: Option<&str>, snap: Option<Snapshot>) -> Partition {
    let before = snap.as_ref().map(|s| &s.before);
    let name = std::fs::canonicalize(input)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| input.display().to_string());
    let mtime_us = std::fs::metadata(input)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_micros() as i64);
    let (capture_time_us, capture_time_source) =
        match before.and_then(|b| b.taken_at_unix_ns).filter(|&ns| ns > 0) {
            Some(ns) => (Some((ns / 1000) as i64), Some(TimeSource::Snapshot)),
            None => (mtime_us, mtime_us.map(|_| TimeSource::FileMtime)),
        };
    // An empty value is no value; any other is kept as the snapshot has it.
    let known = |v: &Option<String>| {
        v.as_deref()
            .filter(|v| !v.trim().is_empty())
            .map(str::to_string)
    };
    Partition {
        host: host
            .map(str::to_string)
            .or_else(|| before.and_then(|b| known(&b.hostname))),
        capture: name,
        kernel: before.and_then(|b| known(&b.kernel.release)),
        capture_time_us,
        capture_time_source,
        processes: snap.as_ref().map(|s| s.thread_groups()).unwrap_or_default(),
    }
}

fn export_one(dir: &Path, input: &Path, part: Partition, analyze: &Analyze<'_>) -> Result<Written> {
    let scratch = scratch_dir(dir)?;
    let result = write_tables(&scratch, input, &part, analyze)
        .and_then(|rows| move_into_place(dir, &scratch, &part).map(|_| rows));
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(Written {
        rows: result?,
        partition: Some(part),
    })
}

/// A scratch directory of this export's own in `dir`: a new name, never
/// one that exists (what is there is not this export's to remove).
fn scratch_dir(dir: &Path) -> Result<PathBuf> {
    for n in 0.. {
        let s = dir.join(format!(".iosleuth-export-{}-{n}", std::process::id()));
        match std::fs::create_dir(&s) {
            Ok(()) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => continue,
            Err(e) => return Err(failed(&s, e)),
        }
    }
    unreachable!("the loop returns")
}

/// The file of `table` for `part` under `root`.
pub fn part_file(root: &Path, table: &str, part: &Partition) -> PathBuf {
    let host = part
        .host
        .as_deref()
        .map_or_else(|| NULL_PARTITION.to_string(), escape_partition_value);
    root.join(table)
        .join(format!("host={host}"))
        .join(format!("capture={}", escape_partition_value(&part.capture)))
        .join("part-0.parquet")
}

fn failed(what: &Path, e: impl std::fmt::Display) -> Error {
    Error::failed(format!("{}: {e}", what.display()))
}

fn create(scratch: &Path, table: &'static str, part: &Partition) -> Result<TableWriter> {
    let path = part_file(scratch, table, part);
    std::fs::create_dir_all(path.parent().expect("has a parent")).map_err(|e| failed(&path, e))?;
    TableWriter::create(&path, table, rows::columns(table)).map_err(|e| failed(&path, e))
}

/// Runs the analysis with the row tables written as rows come (each on a
/// thread of its own, see `analyze::rows::drive`); then the tables made
/// from the whole analysis.
fn write_tables(
    scratch: &Path,
    input: &Path,
    part: &Partition,
    analyze: &Analyze<'_>,
) -> Result<Vec<(&'static str, u64)>> {
    let mut requests = create(scratch, "requests", part)?;
    let mut operations = create(scratch, "operations", part)?;
    let mut waited_for = create(scratch, "waited_for", part)?;
    let mut waits = create(scratch, "sched_waits", part)?;
    // A failed row names its table's file.
    let named = |table: &str| {
        let path = part_file(scratch, table, part);
        move |e: table::Error| std::io::Error::other(format!("{}: {e}", path.display()))
    };
    let (req_err, op_err, waited_err, wait_err) = (
        named("requests"),
        named("operations"),
        named("waited_for"),
        named("sched_waits"),
    );
    let writers = RowWriters {
        requests: Some(Box::new(|r| {
            rows::request(&mut requests, part, &r).map_err(&req_err)
        })),
        operations: Some(Box::new(|o| {
            rows::operation(&mut operations, part, &o).map_err(&op_err)?;
            rows::waited_for(&mut waited_for, part, &o).map_err(&waited_err)
        })),
        thread_states: Some(Box::new(|t| {
            rows::sched_wait(&mut waits, part, &t).map_err(&wait_err)
        })),
        spans: None,
    };
    let (analyzed, written) = analyze(input, writers);
    written.map_err(|e| Error::failed(e.to_string()))?;
    let analysis = analyzed?;
    let mut written = Vec::new();
    for (name, w) in [
        ("requests", requests),
        ("operations", operations),
        ("waited_for", waited_for),
        ("sched_waits", waits),
    ] {
        let n = w
            .finish()
            .map_err(|e| failed(&part_file(scratch, name, part), e))?;
        written.push((name, n));
    }
    let findings = crate::diagnose::diagnose(&analysis);
    let snap = analysis.snapshot.as_ref();
    for table in [
        "iostat",
        "findings",
        "device_settings",
        "system_settings",
        "settings",
        "captures",
    ] {
        let mut w = create(scratch, table, part)?;
        let path = part_file(scratch, table, part);
        match table {
            "iostat" => rows::iostat(&mut w, part, &analysis),
            "findings" => rows::findings(&mut w, part, &findings),
            "device_settings" => rows::device_settings(&mut w, part, snap),
            "system_settings" => rows::system_settings(&mut w, part, snap),
            "captures" => rows::capture(&mut w, part, &analysis),
            _ => rows::settings(&mut w, part, snap),
        }
        .map_err(|e| failed(&path, e))?;
        written.push((table, w.finish().map_err(|e| failed(&path, e))?));
    }
    Ok(written)
}

/// Moves each table's capture directory from the scratch directory into
/// place, replacing an earlier export of the same capture.
fn move_into_place(dir: &Path, scratch: &Path, part: &Partition) -> Result<()> {
    for table in TABLES {
        let from = part_file(scratch, table, part);
        let to = part_file(dir, table, part);
        let (from_dir, to_dir) = (from.parent().unwrap(), to.parent().unwrap());
        std::fs::create_dir_all(to_dir.parent().unwrap()).map_err(|e| failed(to_dir, e))?;
        if to_dir.exists() {
            std::fs::remove_dir_all(to_dir).map_err(|e| failed(to_dir, e))?;
        }
        std::fs::rename(from_dir, to_dir).map_err(|e| failed(to_dir, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_escaped_as_hive_does() {
        assert_eq!(escape_partition_value("web-1.example"), "web-1.example");
        assert_eq!(escape_partition_value("a b/c=d"), "a%20b%2Fc%3Dd");
        assert_eq!(escape_partition_value(""), "unknown");
        assert_eq!(escape_partition_value(".."), "unknown");
    }
}

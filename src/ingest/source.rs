//! What every importer provides: a stream of events plus an honest account of
//! what it could not read.

use crate::model::Event;
use std::fmt;
use std::path::{Path, PathBuf};

/// A problem that makes a whole input unusable. Its message names the file.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    pub path: PathBuf,
    pub problem: String,
}

impl InputError {
    pub fn new(path: &Path, problem: impl Into<String>) -> InputError {
        InputError {
            path: path.to_path_buf(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for InputError {}

/// Counts kept by a source while it reads, turned into warnings at the end.
#[derive(Debug, Clone, Default)]
pub struct SourceStats {
    pub events: u64,
    /// Lines or records that could not be decoded.
    pub skipped: u64,
    /// Where the first undecodable line or record was, and what it looked like.
    pub first_skipped: Option<String>,
    /// Something that cut the input short (a truncated record, a bad magic).
    pub cut_short: Option<String>,
    /// Events the kernel dropped before they were written (ring-buffer
    /// overruns reported in the trace), with the time they were reported at.
    pub lost_events: u64,
    pub lost_reports: Vec<(Option<u64>, u64)>,
    /// Other problems, each a whole message that names its file.
    pub notes: Vec<String>,
}

impl SourceStats {
    pub fn skip(&mut self, at: impl FnOnce() -> String) {
        if self.first_skipped.is_none() {
            self.first_skipped = Some(at());
        }
        self.skipped += 1;
    }
}

/// Where in its file an event was read, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// A text line, counted from 1.
    Line(u64),
    /// A binary record starting at this byte.
    Record(u64),
    /// A ring-buffer page starting at this byte.
    Page(u64),
    /// The n-th event of the source, counted from 1.
    Event(u64),
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Line(n) => write!(f, "line {n}"),
            Position::Record(b) => write!(f, "record at byte {b}"),
            Position::Page(b) => write!(f, "an event of the page at byte {b}"),
            Position::Event(n) => write!(f, "event {n}"),
        }
    }
}

/// A stream of events from one input (one file, or one per-CPU file).
/// Events come out in the source's own order, which is time order for every
/// format iosleuth reads.
pub trait Source {
    fn next_event(&mut self) -> Option<Event>;
    /// Reads the next event into `slot` (`None` at the end), which the
    /// caller keeps: copying a large event right after it was written,
    /// field by field, stalls the CPU (a tenth of reading blktrace files
    /// went to that copy). The default moves `next_event`'s; the busiest
    /// readers write theirs in place.
    fn next_into(&mut self, slot: &mut Option<Event>) {
        *slot = self.next_event();
    }
    /// Whether this input can hold nothing but block events (and process
    /// names): a blktrace file.
    fn block_only(&self) -> bool {
        false
    }
    /// The file this source reads, for messages.
    fn path(&self) -> &Path;
    /// A short name of the format, e.g. `blktrace` or `ftrace text`.
    fn format(&self) -> &'static str;
    fn stats(&self) -> &SourceStats;
    /// Where the event `next_event` returned last was read.
    fn position(&self) -> Position {
        Position::Event(self.stats().events)
    }
    /// What the user should know about the input beneath the format (its
    /// decompression), each a whole message that names the file.
    fn input_notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Turns a source's counters into the warnings a user should see.
pub fn warnings_for(source: &dyn Source) -> Vec<String> {
    let s = source.stats();
    let mut out = Vec::new();
    if s.skipped > 0 {
        out.push(format!(
            "{}: skipped {} {} that iosleuth could not decode as {} (first: {})",
            source.path().display(),
            s.skipped,
            if s.skipped == 1 { "entry" } else { "entries" },
            source.format(),
            s.first_skipped.as_deref().unwrap_or("?")
        ));
    }
    if s.lost_events > 0 {
        let when: Vec<String> = s
            .lost_reports
            .iter()
            .take(5)
            .map(|(ts, n)| match ts {
                Some(t) => format!(
                    "{n} near {}.{:06}",
                    t / 1_000_000_000,
                    t % 1_000_000_000 / 1000
                ),
                None => format!("{n}"),
            })
            .collect();
        out.push(format!(
            "{}: the kernel lost {} events before they were recorded ({}{}); counts and latencies around those times are incomplete",
            source.path().display(),
            s.lost_events,
            when.join(", "),
            if s.lost_reports.len() > 5 { ", ..." } else { "" }
        ));
    }
    if let Some(cut) = &s.cut_short {
        out.push(format!("{}: {}", source.path().display(), cut));
    }
    out.extend(s.notes.iter().cloned());
    out.extend(source.input_notes());
    out
}

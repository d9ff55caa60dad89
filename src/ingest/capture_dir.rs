//! Reads a capture written by `iosleuth record`: a directory with the
//! kernel's format files, a manifest, and one file of raw ring-buffer pages
//! per CPU. Self-describing: it decodes on any machine, without root.

use super::format_decoder::Decoder;
use super::reader::Chunked;
use super::ring_buffer::{page_info, PageRecords};
use super::source::{InputError, Position, Source, SourceStats};
use super::tracefs_format::{parse_format, parse_header_page, EventFormat, PageHeader};
use crate::model::Event;
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::capture_layout::{self as layout, MANIFEST, SYMBOLS};
use crate::model::manifest::Manifest;

/// The largest manifest, format file, header_page or symbols file read.
const SMALL_FILE: u64 = 16 << 20;

fn read_capture_file(path: &Path) -> Result<String, InputError> {
    super::files::read_small(path, SMALL_FILE).map_err(|e| InputError::new(path, e))
}

/// Reads every `format` file under `dir/formats/events`.
pub(super) fn load_formats(dir: &Path) -> Result<(Vec<EventFormat>, PageHeader), InputError> {
    let header_page = dir.join(layout::HEADER_PAGE);
    let page = match super::files::read_small(&header_page, SMALL_FILE) {
        Ok(t) => parse_header_page(&t)
            .ok_or_else(|| InputError::new(&header_page, "cannot parse header_page"))?,
        Err(e) if !header_page.exists() => {
            return Err(InputError::new(&header_page, format!("missing: {e}")))
        }
        Err(e) => return Err(InputError::new(&header_page, e)),
    };
    let mut formats = Vec::new();
    let events = dir.join(layout::EVENT_FORMATS);
    let systems = std::fs::read_dir(&events)
        .map_err(|e| InputError::new(&events, format!("cannot list: {e}")))?;
    for sys in systems.flatten() {
        let sys_name = sys.file_name().to_string_lossy().into_owned();
        for ev in std::fs::read_dir(sys.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = ev.path().join("format");
            if !p.exists() {
                continue;
            }
            let text = read_capture_file(&p)?;
            match parse_format(&sys_name, &text) {
                Some(f) => formats.push(f),
                None => return Err(InputError::new(&p, "cannot parse this format file")),
            }
        }
    }
    Ok((formats, page))
}

/// The header page must fit in a page: the commit word (4 or 8 bytes)
/// before the data, the data starting inside the page.
fn check_page_header(dir: &Path, page: PageHeader, page_size: usize) -> Result<(), InputError> {
    let ok = matches!(page.commit_size, 4 | 8)
        && page
            .commit_offset
            .checked_add(page.commit_size)
            .is_some_and(|end| end <= page.data_offset)
        && page.data_offset < page_size;
    if ok {
        return Ok(());
    }
    Err(InputError::new(
        &dir.join(layout::HEADER_PAGE),
        format!(
            "describes an impossible page: commit word at byte {} ({} bytes), data at byte {}, in pages of {page_size} bytes",
            page.commit_offset, page.commit_size, page.data_offset
        ),
    ))
}

/// `symbols.json`: names of the kernel addresses the capture holds; an
/// unreadable one is said in `notes` (work functions stay addresses).
fn load_symbols(dir: &Path, notes: &mut Vec<String>) -> FxHashMap<u64, Arc<str>> {
    let symbols_path = dir.join(SYMBOLS);
    if !symbols_path.exists() {
        return FxHashMap::default();
    }
    let map: Result<HashMap<String, String>, String> = read_capture_file(&symbols_path)
        .map_err(|e| e.problem)
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()));
    match map {
        Ok(map) => map
            .into_iter()
            .filter_map(|(k, v)| {
                Some((
                    u64::from_str_radix(k.trim_start_matches("0x"), 16).ok()?,
                    v.into(),
                ))
            })
            .collect(),
        Err(e) => {
            notes.push(format!(
                "{}: unreadable ({e}); work functions are shown as addresses",
                symbols_path.display()
            ));
            FxHashMap::default()
        }
    }
}

/// The capture's `cpuN.raw` files by CPU; the CPUs the manifest lists
/// whose file is not there at all are said in `notes`.
/// The files of `dir` whose name `cpu_of` reads a CPU number from, by CPU.
fn per_cpu_files(
    dir: &Path,
    cpu_of: fn(&str) -> Option<u32>,
) -> std::io::Result<Vec<(u32, PathBuf)>> {
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| Some((cpu_of(&e.file_name().to_string_lossy())?, e.path())))
        .collect();
    files.sort();
    Ok(files)
}

fn cpu_files(
    dir: &Path,
    manifest: &Manifest,
    notes: &mut Vec<String>,
) -> Result<Vec<(u32, PathBuf)>, InputError> {
    let cpus = per_cpu_files(dir, layout::cpu_of_file)
        .map_err(|e| InputError::new(dir, format!("cannot list: {e}")))?;
    // CPUs the manifest lists whose file is not there at all.
    for &cpu in &manifest.cpus {
        if !cpus.iter().any(|(c, _)| *c == cpu) {
            notes.push(format!(
                "{}: missing, although the manifest lists CPU {cpu}: that CPU's events are not in this report",
                dir.join(layout::cpu_file(cpu)).display()
            ));
        }
    }
    Ok(cpus)
}

/// Opens every per-CPU file of a capture directory as a source. A CPU the
/// manifest lists whose file is missing, not a regular file, or empty
/// although the kernel handed out its events, is a warning (its events are
/// missing); no readable file at all is an error.
pub fn open_capture(dir: &Path) -> Result<Vec<Box<dyn Source>>, InputError> {
    let manifest_path = dir.join(MANIFEST);
    let manifest = Manifest::parse(&read_capture_file(&manifest_path)?)
        .map_err(|e| InputError::new(&manifest_path, e))?;
    if manifest.mode.as_deref() == Some(crate::model::light::MODE) {
        return super::light::open(dir);
    }
    let page_size = manifest.page_size();
    let (formats, page) = load_formats(dir)?;
    check_page_header(dir, page, page_size)?;
    let mut notes = Vec::new();
    let mut decoder = Decoder::new(&formats, page);
    decoder.skip_tids = manifest.recorder_tids.iter().copied().collect();
    decoder.symbols = load_symbols(dir, &mut notes);
    notes.extend(stacks_without_symbols(dir, &manifest, &decoder));
    let decoder = Arc::new(decoder);
    let cpus = cpu_files(dir, &manifest, &mut notes)?;
    if cpus.is_empty() && notes.is_empty() {
        return Err(InputError::new(dir, "capture has no cpuN.raw files"));
    }
    // Every CPU's pages and samples are read together: one budget of windows.
    let sample_files = per_cpu_files(dir, layout::cpu_of_samples_file).map_or(0, |f| f.len());
    let window = super::reader::window_share(cpus.len() + sample_files);
    let mut out: Vec<RawCpuSource> = Vec::new();
    for (cpu, path) in cpus {
        let (f, meta) = match super::files::open_regular(&path) {
            Ok(x) => x,
            Err(e) => {
                notes.push(format!(
                    "{}: {e}; CPU {cpu}'s events were skipped",
                    path.display()
                ));
                continue;
            }
        };
        // The kernel's own per-CPU counters, read when recording stopped:
        // the authoritative count of events lost on this CPU.
        let count = |k: &str| manifest.cpu_stat(cpu, k);
        let lost = count("overrun").saturating_add(count("dropped events"));
        let handed_out = count("read events");
        if meta.len() == 0 && handed_out > 0 {
            notes.push(format!(
                "{}: empty, although the kernel handed {handed_out} events of CPU {cpu} to the recorder: they are not in this report",
                path.display()
            ));
        }
        let mut stats = SourceStats::default();
        if lost > 0 {
            stats.lost_events = lost;
            stats.lost_reports.push((None, lost));
        }
        out.push(RawCpuSource {
            counted_by_kernel: lost > 0,
            path,
            cpu,
            input: Chunked::from_file_windowed(f, window),
            page_size,
            decoder: decoder.clone(),
            pending: std::collections::VecDeque::new(),
            stats,
            last_ts: None,
            page_at: 0,
        });
    }
    let samples = sample_sources(dir, &manifest, &decoder, window, &mut notes);
    match out.first_mut() {
        // The capture's problems are said once, with its first CPU's.
        Some(first) => first.stats.notes = notes,
        None => {
            return Err(InputError::new(
                dir,
                format!(
                    "capture has no readable cpuN.raw file: {}",
                    notes.join("; ")
                ),
            ))
        }
    }
    Ok(out
        .into_iter()
        .map(|s| Box::new(s) as Box<dyn Source>)
        .chain(samples)
        .collect())
}

/// Stacks are addresses in the ring buffer and the samples: without the
/// capture's symbols every frame is [unknown]; say so.
fn stacks_without_symbols(dir: &Path, manifest: &Manifest, decoder: &Decoder) -> Option<String> {
    let has_stacks = !manifest.triggers.is_empty() || manifest.samples.is_some();
    (has_stacks && decoder.symbols.is_empty() && !dir.join(SYMBOLS).exists()).then(|| {
        format!(
            "{}: the capture holds kernel stacks but no {SYMBOLS}: their frames are shown as [unknown] (the recorder could not read /proc/kallsyms, or the file was removed)",
            dir.display()
        )
    })
}

/// The on-CPU samples of `record --stacks` (`samples-cpuN.perf`), when the
/// manifest says they hold what the decoder reads.
fn sample_sources(
    dir: &Path,
    manifest: &Manifest,
    decoder: &Arc<Decoder>,
    window: usize,
    notes: &mut Vec<String>,
) -> Vec<Box<dyn Source>> {
    use super::perf_samples::SampleSource;
    use crate::model::perf_record::SAMPLE_TYPE;
    let files = per_cpu_files(dir, layout::cpu_of_samples_file).unwrap_or_default();
    if files.is_empty() {
        return Vec::new();
    }
    let sample_type = manifest.samples.as_ref().map(|s| s.sample_type);
    if sample_type != Some(SAMPLE_TYPE) {
        notes.push(format!(
            "{}: on-CPU samples of an unknown layout (sample_type {sample_type:?}, this iosleuth reads {SAMPLE_TYPE}) were skipped",
            dir.display()
        ));
        return Vec::new();
    }
    let user_space = (manifest.samples.as_ref().is_some_and(|s| s.user_frames))
        .then(|| Arc::new(user_space(dir, &files, notes)));
    if let Some(u) = &user_space {
        notes.extend(u.maps.warning(dir));
    }
    let mut out: Vec<Box<dyn Source>> = Vec::new();
    for (_, path) in files {
        match super::files::open_regular(&path) {
            Ok((f, _)) => out.push(Box::new(SampleSource::new(
                path,
                Chunked::from_file_windowed(f, window),
                decoder.clone(),
                user_space.clone(),
            ))),
            Err(e) => notes.push(format!("{}: {e}; its samples were skipped", path.display())),
        }
    }
    out
}

/// The processes' mappings over the capture, from the mappings of those
/// that ran when sampling started and the side-band records of every
/// CPU's samples; a file that cannot be read leaves its frames
/// `[unknown]` (the sample reader says why). Binaries are checked
/// against the build ids the recorder saw (`build-ids.json`).
fn user_space(
    dir: &Path,
    files: &[(u32, PathBuf)],
    notes: &mut Vec<String>,
) -> super::perf_samples::UserSpace {
    let build_ids = read_build_ids(&dir.join(layout::BUILD_IDS)).unwrap_or_else(|why| {
        notes.push(why);
        Default::default()
    });
    let build_ids = build_ids
        .into_iter()
        .filter_map(|(path, hex)| Some((path.into_bytes(), from_hex(&hex)?)))
        .collect();
    let names = crate::symbolize::user_frames::UserFrames::with_build_ids(build_ids);
    let (maps, names) = scan_mappings(dir, files, names.with_vdso(dir.join(layout::VDSO)));
    super::perf_samples::UserSpace {
        maps,
        frames: std::sync::Mutex::new(names),
    }
}

/// The build ids the recorder saw, by path (none in a capture without
/// user frames' file); `Err` says why the file there was not read.
fn read_build_ids(path: &Path) -> Result<std::collections::HashMap<String, String>, String> {
    use super::files::{read_named, Limit, Links};
    /// A path and 40 hex digits for each binary mapped: thousands of them
    /// are well under a MiB.
    const LIMIT: Limit = Limit {
        bytes: 16 << 20,
        what: "a build-ids.json can have",
    };
    let not_read = |why: String| {
        format!("{}: {why}: not read, user frames are named from the binaries found now, whichever build they are", path.display())
    };
    match read_named(path, LIMIT, Links::Follow).map_err(not_read)? {
        None => Ok(Default::default()),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| not_read(format!("not a map of paths to build ids ({e})"))),
    }
}

fn from_hex(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The path of every file that a process had mapped executable while
/// the capture in `dir` sampled (what the recorder takes build ids of).
pub fn mapped_files(dir: &Path) -> Vec<String> {
    let files = per_cpu_files(dir, layout::cpu_of_samples_file).unwrap_or_default();
    let (_, names) = scan_mappings(dir, &files, Default::default());
    names.paths().map(str::to_string).collect()
}

fn scan_mappings(
    dir: &Path,
    files: &[(u32, PathBuf)],
    mut names: crate::symbolize::user_frames::UserFrames,
) -> (
    crate::symbolize::process_maps::ProcessMaps,
    crate::symbolize::user_frames::UserFrames,
) {
    let mut maps = crate::symbolize::process_maps::ProcessMaps::default();
    let start = dir.join(layout::START_MAPS);
    for path in std::iter::once(&start).chain(files.iter().map(|(_, p)| p)) {
        if let Ok((f, _)) = super::files::open_regular(path) {
            maps.scan(Chunked::from_file(f), &mut names);
        }
    }
    maps.settle();
    (maps, names)
}

/// The raw ring-buffer pages of one CPU.
pub struct RawCpuSource {
    /// The manifest already counted this CPU's losses.
    counted_by_kernel: bool,
    path: PathBuf,
    cpu: u32,
    input: Chunked,
    page_size: usize,
    decoder: Arc<Decoder>,
    pending: std::collections::VecDeque<Event>,
    stats: SourceStats,
    last_ts: Option<u64>,
    /// File offset of the page the pending events come from.
    page_at: u64,
}

impl RawCpuSource {
    /// Decodes the next page into `pending`; false at the end.
    fn next_page(&mut self) -> bool {
        let have = self.input.ensure(self.page_size);
        if have == 0 {
            return false;
        }
        let at = self.input.offset();
        if have < self.page_size {
            self.stats.cut_short = Some(format!(
                "truncated: the last page at byte {at} has {have} of {} bytes",
                self.page_size
            ));
            self.input.consume(have);
            return false;
        }
        let page = &self.input.avail()[..self.page_size];
        let Some(info) = page_info(page, self.decoder.page) else {
            self.stats
                .skip(|| format!("page at byte {at} with an impossible length"));
            self.input.consume(self.page_size);
            return true;
        };
        if info.missed {
            let n = info.missed_count.unwrap_or(0);
            if self.counted_by_kernel {
                // Already counted: keep only when it happened.
                self.stats.lost_reports.push((Some(info.base_ts), n));
            } else {
                self.stats.lost_events = self.stats.lost_events.saturating_add(n.max(1));
                self.stats.lost_reports.push((Some(info.base_ts), n.max(1)));
            }
        }
        self.page_at = at;
        let mut recs = PageRecords::new(page, self.decoder.page, &info);
        for (ts, rec) in recs.by_ref() {
            match self.decoder.decode(ts, self.cpu, rec) {
                Some(ev) => self.pending.push_back(ev),
                None => self
                    .stats
                    .skip(|| format!("record of an unknown event id in the page at byte {at}")),
            }
        }
        if recs.damaged {
            self.stats
                .skip(|| format!("damaged page at byte {at}: the rest of it was skipped"));
        }
        self.input.consume(self.page_size);
        true
    }
}

impl Source for RawCpuSource {
    fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                self.stats.events += 1;
                self.last_ts = ev.ts().or(self.last_ts);
                return Some(ev);
            }
            if !self.next_page() {
                return None;
            }
        }
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn format(&self) -> &'static str {
        "iosleuth capture (ring-buffer pages)"
    }
    fn stats(&self) -> &SourceStats {
        &self.stats
    }
    fn position(&self) -> Position {
        Position::Page(self.page_at)
    }
}

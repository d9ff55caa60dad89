//! On-CPU samples of a capture (`samples-cpuN.perf`, written by
//! `capture::sampler`): the kernel's perf records as the ring buffer held
//! them, `perf_event_header` then the fields of `sample_type`. Samples
//! (PERF_RECORD_SAMPLE) become stacks, their kernel frames named from the
//! capture's symbols, their user frames through the processes' mappings
//! (`process_maps`) and this machine's binaries; lost-record counts are
//! said.

use super::format_decoder::Decoder;
use super::reader::Chunked;
use super::source::{Source, SourceStats};
use crate::model::perf_record::{
    self, CONTEXT_KERNEL, CONTEXT_MAX, CONTEXT_USER, HEADER_LEN, KERNEL_START, RECORD_LOST,
    RECORD_SAMPLE,
};
use crate::model::{Event, StackEvent};
use crate::symbolize::process_maps::ProcessMaps;
use crate::symbolize::user_frames::UserFrames;
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What names user frames, shared by the capture's CPU files: the
/// mappings of every process over time, and the binaries' names.
pub struct UserSpace {
    pub maps: ProcessMaps,
    pub frames: Mutex<UserFrames>,
}

/// Longer chains are damaged (the kernel's perf_event_max_stack is 127 by
/// default, at most 65535 frames by its sysctl's range).
const MAX_FRAMES: u64 = 65_535;

pub struct SampleSource {
    path: PathBuf,
    input: Chunked,
    decoder: Arc<Decoder>,
    /// None for captures recorded without user call chains: a sample
    /// taken in user space is then `[user]`.
    user_space: Option<Arc<UserSpace>>,
    user: Arc<str>,
    stats: SourceStats,
    /// Each thread's process, as its samples' pid says.
    processes: FxHashMap<u32, u32>,
    /// The sample whose thread's process went before it, next.
    pending: Option<Event>,
}

impl SampleSource {
    pub fn new(
        path: PathBuf,
        input: Chunked,
        decoder: Arc<Decoder>,
        user_space: Option<Arc<UserSpace>>,
    ) -> SampleSource {
        SampleSource {
            path,
            input,
            decoder,
            user_space,
            user: Arc::from("[user]"),
            stats: SourceStats::default(),
            processes: FxHashMap::default(),
            pending: None,
        }
    }

    /// One PERF_RECORD_SAMPLE's body as a stack: frames innermost first,
    /// kernel or user as the call chain's context markers say; and the
    /// process (pid) of its thread.
    fn sample(&self, body: &[u8]) -> Option<(StackEvent, u32)> {
        let u64_at = |at: usize| Some(u64::from_ne_bytes(body.get(at..at + 8)?.try_into().ok()?));
        let u32_at = |at: usize| Some(u32::from_ne_bytes(body.get(at..at + 4)?.try_into().ok()?));
        let ip = u64_at(0)?;
        let pid = u32_at(8)?;
        let tid = u32_at(12)?;
        let ts = u64_at(16)?;
        let cpu = u32_at(24)?;
        let nr = u64_at(32)?;
        if nr > MAX_FRAMES || 40 + nr as usize * 8 > body.len() {
            return None;
        }
        let mut user_frames = self
            .user_space
            .as_ref()
            .map(|u| (u, u.frames.lock().unwrap_or_else(|e| e.into_inner())));
        let mut user_frame = |addr: u64| match &mut user_frames {
            Some((u, names)) => names.name(u.maps.at(pid, addr, ts), addr),
            None => None,
        };
        let mut frames: Vec<Arc<str>> = Vec::with_capacity(nr as usize);
        let mut kernel = ip >= KERNEL_START;
        for a in (0..nr as usize).filter_map(|i| u64_at(40 + i * 8)) {
            match a {
                CONTEXT_KERNEL => kernel = true,
                CONTEXT_USER => kernel = false,
                a if a >= CONTEXT_MAX => {}
                a if kernel => frames.push(self.decoder.frame_name(a)),
                a => frames.extend(user_frame(a)),
            }
        }
        if frames.is_empty() {
            if ip >= KERNEL_START {
                frames.push(self.decoder.frame_name(ip));
            } else {
                frames.extend(user_frame(ip));
            }
        }
        if frames.is_empty() {
            frames.push(self.user.clone());
        }
        let k = StackEvent {
            ts,
            cpu,
            pid: tid,
            frames: frames.into(),
            sampled: true,
            weight: 1,
            comm: Default::default(),
        };
        Some((k, pid))
    }
}

impl Source for SampleSource {
    fn next_event(&mut self) -> Option<Event> {
        if let Some(e) = self.pending.take() {
            return Some(e);
        }
        let e = self.next_sample();
        if e.is_none() {
            self.note_refused();
        }
        e
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn format(&self) -> &'static str {
        "iosleuth capture (perf samples)"
    }
    fn stats(&self) -> &SourceStats {
        &self.stats
    }
}

impl SampleSource {
    /// The files the names of user frames were not read from, said by
    /// whichever CPU's source ends first after they were refused.
    fn note_refused(&mut self) {
        let Some(u) = &self.user_space else {
            return;
        };
        let refused = u
            .frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_refused();
        let path = self.path.display();
        for why in refused {
            self.stats.notes.push(format!("{path}: {why}"));
        }
    }

    fn next_sample(&mut self) -> Option<Event> {
        loop {
            if self.input.ensure(HEADER_LEN) < HEADER_LEN {
                if self.input.ensure(1) > 0 {
                    self.stats.cut_short = Some(format!(
                        "truncated record header at byte {}",
                        self.input.offset()
                    ));
                }
                return None;
            }
            let (kind, size) = perf_record::header(self.input.avail())?;
            let at = self.input.offset();
            if size < HEADER_LEN {
                self.stats.cut_short = Some(format!("record at byte {at} claims {size} bytes"));
                return None;
            }
            if self.input.ensure(size) < size {
                self.stats.cut_short = Some(format!("truncated record at byte {at}"));
                return None;
            }
            let rec = self.input.avail()[HEADER_LEN..size].to_vec();
            self.input.consume(size);
            match kind {
                RECORD_SAMPLE => match self.sample(&rec) {
                    // The recorder's own threads: its footprint, as in
                    // the trace.
                    Some((k, _)) if self.decoder.is_recorder(k.pid) => {}
                    Some((k, pid)) => {
                        self.stats.events += 1;
                        // The thread's process first, when it is news
                        // (not the idle task's 0, nor -1: a task the
                        // recorder's pid namespace does not see).
                        let tid = k.pid;
                        let known = |id: u32| id != 0 && id != u32::MAX;
                        if known(tid) && known(pid) && self.processes.insert(tid, pid) != Some(pid)
                        {
                            self.pending = Some(Event::Stack(k));
                            return Some(Event::ThreadGroup { tid, tgid: pid });
                        }
                        return Some(Event::Stack(k));
                    }
                    None => self.stats.skip(|| format!("sample record at byte {at}")),
                },
                RECORD_LOST => {
                    let n = perf_record::lost(&rec).unwrap_or(0);
                    self.stats.lost_events = self.stats.lost_events.saturating_add(n);
                    self.stats.lost_reports.push((None, n));
                }
                // Throttle, unthrottle and the like: nothing to analyze.
                _ => {}
            }
        }
    }
}

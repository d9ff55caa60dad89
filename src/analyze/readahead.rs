//! Readahead per device (`page_cache_sync_ra` / `page_cache_async_ra`):
//! page-cache misses that read synchronously, readaheads that ran ahead of
//! the reader, how many continued where the file's previous read ended
//! (sequential), and the windows the kernel read ahead.
//!
//! What the events say (mm/readahead.c, kernels with these tracepoints):
//! each carries the file's readahead state as it was when the event fired,
//! before the kernel moved it on. `ra_pages` is the file's limit, taken from
//! the device's `read_ahead_kb` when the file was opened (doubled by
//! `POSIX_FADV_SEQUENTIAL`); `size` is the last window the kernel opened for
//! the file. So every event after the first of its file shows a window the
//! kernel read ahead. On a sequential stream the kernel grows the window
//! (4x while small, then 2x) up to the limit, or up to the reader's own
//! request when that is larger (bounded by the device's largest I/O); with
//! the limit at 0 each miss reads the one page that missed and the window
//! stays 0.

use crate::analyze::names::ThreadNames;
use crate::model::tracepoint::Field;
use crate::model::{TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize, Default, Clone)]
pub struct ReadaheadDevice {
    /// Synchronous misses (the reader waits) and asynchronous readahead.
    pub sync_misses: u64,
    pub async_readaheads: u64,
    /// Synchronous misses at the page after the file's previous one.
    pub sequential_sync_misses: u64,
    /// Pages asked for by the misses, and pages read ahead of them.
    pub pages_requested: u64,
    pub pages_read_ahead: u64,
    /// The file's readahead limit (`ra_pages`), smallest and largest seen.
    pub ra_pages_min: u64,
    pub ra_pages_max: u64,
    /// The windows the kernel read ahead, in pages: how many of each size
    /// (every event after the first of its file shows one).
    pub windows: BTreeMap<u64, u64>,
    /// Of those, the windows that had grown to the file's limit
    /// (`size` ≥ `ra_pages`; 0 with readahead off): where the kernel
    /// stopped growing them.
    pub windows_at_limit: BTreeMap<u64, u64>,
    /// The file with the most readaheads on the device, and who read it.
    pub top_stream: Option<ReadaheadStream>,
}

/// One file's readahead, as one reader drove it.
#[derive(Debug, Serialize, Default, Clone, PartialEq)]
pub struct ReadaheadStream {
    pub inode: u64,
    /// The thread whose reads caused the file's first readahead.
    pub pid: u32,
    pub comm: String,
    pub readaheads: u64,
    /// The first page a readahead began at, and the page after the last
    /// one it reached (window or missed page).
    pub first_page: u64,
    pub end_page: u64,
}

#[derive(Debug, Serialize, Default)]
pub struct ReadaheadSummary {
    /// By device `MAJ,MIN` of the file system.
    pub devices: BTreeMap<String, ReadaheadDevice>,
}

#[derive(Default)]
pub struct ReadaheadAnalysis {
    out: ReadaheadSummary,
    /// (device, inode) → the page after the last one asked for.
    next_index: FxHashMap<(String, u64), i64>,
    /// (device, inode) → its readahead so far.
    streams: FxHashMap<(String, u64), ReadaheadStream>,
}

/// The kernel's dev_t inside the event (`MAJ << 20 | MIN`), or `MAJ:MIN`
/// as text.
fn device(e: &TraceEvent) -> Option<String> {
    if let Some(d) = e.fields.int(Field::SDev) {
        return Some(format!("{},{}", d >> 20, d & 0xf_ffff));
    }
    e.fields.str(Field::Dev).map(|d| d.replace(':', ","))
}

/// The file's inode: `i_ino` of a recorded event, or text's `ino=`, which
/// the kernel prints in hexadecimal (`%lx`: `ino=d` is inode 13).
fn inode(e: &TraceEvent) -> u64 {
    if let Some(i) = e.fields.int(Field::IIno) {
        return i as u64;
    }
    let text = match (e.fields.int(Field::Ino), e.fields.str(Field::Ino)) {
        (Some(i), _) => i.to_string(),
        (None, Some(s)) => s.to_string(),
        (None, None) => return 0,
    };
    u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap_or(0)
}

impl ReadaheadAnalysis {
    pub fn new() -> ReadaheadAnalysis {
        ReadaheadAnalysis::default()
    }

    /// Inlined: most events are not readahead's, and a call to say so
    /// cost more than the question.
    #[inline]
    pub fn add(&mut self, e: &TraceEvent) -> bool {
        match e.kind {
            Tracepoint::PageCacheSyncRa => self.readahead(e, true),
            Tracepoint::PageCacheAsyncRa => self.readahead(e, false),
            _ => false,
        }
    }

    #[inline(never)]
    fn readahead(&mut self, e: &TraceEvent, sync: bool) -> bool {
        let Some(dev) = device(e) else { return true };
        let f = &e.fields;
        let (index, count) = (
            f.int(Field::Index).unwrap_or(0),
            f.int(Field::ReqCount).unwrap_or(1),
        );
        let ra_pages = f.int(Field::RaPages).unwrap_or(0).max(0) as u64;
        let window = f.int(Field::Size).unwrap_or(0).max(0) as u64;
        let inode = inode(e);
        let d = self.out.devices.entry(dev.clone()).or_default();
        if d.sync_misses + d.async_readaheads == 0 {
            d.ra_pages_min = ra_pages;
        }
        d.ra_pages_min = d.ra_pages_min.min(ra_pages);
        d.ra_pages_max = d.ra_pages_max.max(ra_pages);
        d.pages_read_ahead += window;
        // With readahead off (ra_pages 0) a synchronous miss reads the one
        // page it missed, whatever the reader asked for: the kernel's
        // page_cache_sync_ra sets req_count to 1 and forces that read. The
        // next miss of a sequential reader is then the next page.
        let read = if sync && ra_pages == 0 {
            1
        } else {
            count.max(1)
        };
        let key = (dev, inode);
        let next = self.next_index.insert(key.clone(), index + read);
        if next.is_some() {
            // The state the event carries is the window the file's previous
            // readahead opened.
            *d.windows.entry(window).or_default() += 1;
            if window >= ra_pages {
                *d.windows_at_limit.entry(window).or_default() += 1;
            }
        }
        if sync {
            d.sync_misses += 1;
            d.pages_requested += count.max(0) as u64;
            if next == Some(index) {
                d.sequential_sync_misses += 1;
            }
        } else {
            d.async_readaheads += 1;
        }
        let page = index.max(0) as u64;
        let reached = page
            + if sync {
                read.max(0) as u64
            } else {
                window.max(1)
            };
        let s = self.streams.entry(key).or_insert_with(|| ReadaheadStream {
            inode,
            pid: e.pid,
            first_page: page,
            end_page: reached,
            ..Default::default()
        });
        s.readaheads += 1;
        s.first_page = s.first_page.min(page);
        s.end_page = s.end_page.max(reached);
        if s.comm.is_empty() && !e.comm.is_empty() {
            s.comm = e.comm.as_str().to_string();
        }
        true
    }

    /// The summary, each device with its busiest file and its reader named
    /// (`names`: thread names the trace told).
    pub fn finish(mut self, names: &ThreadNames) -> ReadaheadSummary {
        for ((dev, _), mut s) in self.streams {
            let Some(d) = self.out.devices.get_mut(&dev) else {
                continue;
            };
            if s.comm.is_empty() {
                s.comm = names.get(s.pid);
            }
            let busier = d.top_stream.as_ref().is_none_or(|t| {
                (s.readaheads, std::cmp::Reverse(s.inode))
                    > (t.readaheads, std::cmp::Reverse(t.inode))
            });
            if busier {
                d.top_stream = Some(s);
            }
        }
        self.out
    }
}

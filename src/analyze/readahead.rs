//! Readahead per device (`page_cache_sync_ra` / `page_cache_async_ra`):
//! page-cache misses that read synchronously, how many of them continued
//! where the file's previous read ended (sequential), and the readahead
//! window the kernel had (`ra_pages`).

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
    /// The readahead window (`ra_pages`), smallest and largest seen.
    pub ra_pages_min: u64,
    pub ra_pages_max: u64,
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
    next_index: FxHashMap<(String, i64), i64>,
}

/// The kernel's dev_t inside the event (`MAJ << 20 | MIN`), or `MAJ:MIN`
/// as text.
fn device(e: &TraceEvent) -> Option<String> {
    if let Some(d) = e.fields.int(Field::SDev) {
        return Some(format!("{},{}", d >> 20, d & 0xf_ffff));
    }
    e.fields.str(Field::Dev).map(|d| d.replace(':', ","))
}

impl ReadaheadAnalysis {
    pub fn new() -> ReadaheadAnalysis {
        ReadaheadAnalysis::default()
    }

    pub fn add(&mut self, e: &TraceEvent) -> bool {
        let sync = match e.kind {
            Tracepoint::PageCacheSyncRa => true,
            Tracepoint::PageCacheAsyncRa => false,
            _ => return false,
        };
        let Some(dev) = device(e) else { return true };
        let f = &e.fields;
        let (index, count) = (
            f.int(Field::Index).unwrap_or(0),
            f.int(Field::ReqCount).unwrap_or(1),
        );
        let ra_pages = f.int(Field::RaPages).unwrap_or(0).max(0) as u64;
        let inode = f
            .int(Field::IIno)
            .or_else(|| f.int(Field::Ino))
            .unwrap_or(0);
        let d = self.out.devices.entry(dev.clone()).or_default();
        if d.sync_misses + d.async_readaheads == 0 {
            d.ra_pages_min = ra_pages;
        }
        d.ra_pages_min = d.ra_pages_min.min(ra_pages);
        d.ra_pages_max = d.ra_pages_max.max(ra_pages);
        d.pages_read_ahead += f.int(Field::Size).unwrap_or(0).max(0) as u64;
        // With readahead off (ra_pages 0) a synchronous miss reads the one
        // page it missed, whatever the reader asked for: the kernel's
        // page_cache_sync_ra sets req_count to 1 and forces that read. The
        // next miss of a sequential reader is then the next page.
        let read = if sync && ra_pages == 0 {
            1
        } else {
            count.max(1)
        };
        let next = self.next_index.insert((dev, inode), index + read);
        if sync {
            d.sync_misses += 1;
            d.pages_requested += count.max(0) as u64;
            if next == Some(index) {
                d.sequential_sync_misses += 1;
            }
        } else {
            d.async_readaheads += 1;
        }
        true
    }

    pub fn finish(self) -> ReadaheadSummary {
        self.out
    }
}

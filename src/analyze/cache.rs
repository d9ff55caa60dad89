//! The page cache, per device: the pages reads and file faults looked up,
//! the pages it had to add (misses, and the pages readahead and writes
//! brought), the pages reclaim evicted and by what, and the pages added
//! again after reclaim had evicted them in the trace (refaults), as bcc's
//! cachestat and the kernel's workingset counters see them in aggregate.
//!
//! A lookup is a page the read path asked for (`mm_filemap_get_pages`, its
//! range) or a file fault's page (`mm_filemap_fault`). A miss is a page
//! added (`mm_filemap_add_to_page_cache`, `1 << order` pages) by a thread
//! not in a write syscall: the reader's own misses and the readahead it
//! started. Hits are the lookups that did not miss (cachestat's
//! arithmetic: accesses minus misses, never below 0). An eviction is a page
//! deleted (`mm_filemap_delete_from_page_cache`) by reclaim: a thread
//! between `mm_vmscan_{direct,memcg}_reclaim_begin` and its end, kswapd,
//! or DAMON's proactive reclaim (kdamond); other deletions (truncate,
//! invalidate, drop_caches) are not evictions. A refault is the addition
//! of a page evicted earlier in the trace; the kernel also counts pages
//! evicted before it began (its shadow entries), which the trace cannot
//! see: the snapshot's `workingset_refault_file` difference says the
//! kernel's figure for the whole machine.

use super::names::ThreadNames;
use crate::model::tracepoint::syscall_of;
use crate::model::{Dev, TraceEvent, Tracepoint};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::collections::BTreeMap;

/// Evicted pages remembered to see them come back: beyond this many the
/// oldest are not, and the count of those forgotten says so.
const EVICTED_MAX: usize = 1 << 20;

/// What the page cache did for one device's files.
#[derive(Debug, Default, Clone, Serialize)]
pub struct CacheDevice {
    /// Pages reads and file faults looked up.
    pub lookups: u64,
    /// Pages added to the cache by threads not writing.
    pub misses: u64,
    /// Lookups that did not miss (cachestat: lookups minus misses).
    pub hits: u64,
    /// hits / lookups; null without lookups.
    pub hit_ratio: Option<f64>,
    /// Pages added by threads in a write syscall (new pages written).
    pub added_by_writes: u64,
    /// Pages reclaim evicted.
    pub evicted: u64,
    /// Pages removed otherwise (truncate, invalidate, drop_caches).
    pub removed: u64,
    /// Pages added again after reclaim evicted them in the trace.
    pub refaults: u64,
}

/// The page cache over the trace.
#[derive(Debug, Default, Serialize)]
pub struct CacheSummary {
    /// Whether the trace holds the page cache's events: `false`, nothing
    /// below is known.
    pub recorded: bool,
    /// By the files' device (`MAJ,MIN`).
    pub devices: BTreeMap<String, CacheDevice>,
    /// Pages evicted, by what evicted them: `memcg limit`, `direct
    /// reclaim` (the machine's memory), `kswapd`, `DAMON`.
    pub evicted_by: BTreeMap<String, u64>,
    /// The threads whose reclaim evicted most (`fio (1738)`), most first.
    pub reclaimers: Vec<(String, u64)>,
    /// Evicted pages not remembered (more than the analysis keeps): their
    /// refaults are not counted.
    pub evictions_forgotten: u64,
    /// The kernel's counters (`/proc/vmstat`, the whole machine) over the
    /// recording, from the snapshot; null where it did not read them.
    pub kernel: Option<BTreeMap<String, u64>>,
    /// The operations that re-read a page reclaim had evicted.
    pub operations_refaulting: Refaulting,
}

/// Operations that refaulted: how many, and their time.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Refaulting {
    pub count: u64,
    pub latency_ns: u64,
    /// Of it, blocked with a request at the device.
    pub device_ns: u64,
    /// The pages they re-read.
    pub pages: u64,
}

/// A page added: whether it was a refault.
pub struct Added {
    pub pid: u32,
    pub pages: u64,
    pub refault: bool,
}

#[derive(Default)]
pub struct CacheAnalysis {
    out: CacheSummary,
    devices: FxHashMap<Dev, CacheDevice>,
    /// Evicted pages: (device, inode, index).
    evicted: FxHashSet<(Dev, u64, u64)>,
    /// Threads in reclaim, and which kind.
    reclaiming: FxHashMap<u32, &'static str>,
    /// Threads in a write syscall.
    writing: FxHashSet<u32>,
    reclaimers: FxHashMap<u32, u64>,
}

impl CacheAnalysis {
    pub fn new() -> CacheAnalysis {
        CacheAnalysis::default()
    }

    /// One event; a page added is returned (for the operation that added
    /// it). Whether the event is the page cache's is `used`.
    pub fn add(&mut self, e: &TraceEvent, names: &ThreadNames) -> (bool, Option<Added>) {
        let page = || super::outliers::file_page(e, true);
        match e.kind {
            Tracepoint::MmFilemapGetPages => {
                self.out.recorded = true;
                if let Some(p) = page() {
                    let f = &e.fields;
                    let from = f.int(crate::model::tracepoint::Field::Index).unwrap_or(0);
                    let to = f
                        .int(crate::model::tracepoint::Field::LastIndex)
                        .unwrap_or(from);
                    let n = (to.saturating_sub(from) as u64).saturating_add(1);
                    self.device(p.dev).lookups += n;
                }
            }
            // A file fault's page; the fault analysis uses the event too.
            Tracepoint::MmFilemapFault => {
                if let Some(p) = page() {
                    self.device(p.dev).lookups += 1;
                }
                return (false, None);
            }
            Tracepoint::MmFilemapAddToPageCache => {
                self.out.recorded = true;
                let Some(p) = page() else { return (true, None) };
                let pages = 1u64 << order(e).min(20);
                let index = p.offset.unwrap_or(0) >> 12;
                let refault = self.evicted.remove(&(p.dev, p.inode, index));
                let writing = self.writing.contains(&e.pid);
                let d = self.device(p.dev);
                if writing {
                    d.added_by_writes += pages;
                } else {
                    d.misses += pages;
                }
                d.refaults += refault as u64 * pages;
                return (
                    true,
                    Some(Added {
                        pid: e.pid,
                        pages,
                        refault,
                    }),
                );
            }
            Tracepoint::MmFilemapDeleteFromPageCache => {
                self.out.recorded = true;
                let Some(p) = page() else { return (true, None) };
                let pages = 1u64 << order(e).min(20);
                match self.evictor(e.pid, names) {
                    Some(by) => {
                        self.device(p.dev).evicted += pages;
                        *self.out.evicted_by.entry(by.to_string()).or_default() += pages;
                        *self.reclaimers.entry(e.pid).or_default() += pages;
                        if self.evicted.len() < EVICTED_MAX {
                            self.evicted
                                .insert((p.dev, p.inode, p.offset.unwrap_or(0) >> 12));
                        } else {
                            self.out.evictions_forgotten += 1;
                        }
                    }
                    None => self.device(p.dev).removed += pages,
                }
            }
            Tracepoint::MmVmscanDirectReclaimBegin => {
                self.reclaiming.insert(e.pid, "direct reclaim");
            }
            Tracepoint::MmVmscanMemcgReclaimBegin => {
                self.reclaiming.insert(e.pid, "memcg limit");
            }
            Tracepoint::MmVmscanDirectReclaimEnd | Tracepoint::MmVmscanMemcgReclaimEnd => {
                self.reclaiming.remove(&e.pid);
            }
            Tracepoint::MmVmscanKswapdWake | Tracepoint::MmVmscanKswapdSleep => {}
            Tracepoint::SysEnter | Tracepoint::SysExit => {
                let call = syscall_of(e.short_name()).unwrap_or_default();
                if matches!(
                    call,
                    "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2"
                ) {
                    if e.kind == Tracepoint::SysEnter {
                        self.writing.insert(e.pid);
                    } else {
                        self.writing.remove(&e.pid);
                    }
                }
                return (false, None);
            }
            _ => return (false, None),
        }
        (true, None)
    }

    /// What evicts when thread `pid` deletes a page: its reclaim, or a
    /// reclaim thread; `None`: not reclaim.
    fn evictor(&self, pid: u32, names: &ThreadNames) -> Option<&'static str> {
        if let Some(by) = self.reclaiming.get(&pid) {
            return Some(by);
        }
        let comm = names.get(pid);
        if comm.starts_with("kswapd") {
            Some("kswapd")
        } else if comm.starts_with("kdamond") {
            Some("DAMON")
        } else {
            None
        }
    }

    fn device(&mut self, d: Dev) -> &mut CacheDevice {
        self.devices.entry(d).or_default()
    }

    pub fn finish(mut self, names: &ThreadNames) -> CacheSummary {
        for (d, mut c) in self.devices.drain() {
            c.hits = c.lookups.saturating_sub(c.misses);
            c.hit_ratio = (c.lookups > 0).then(|| c.hits as f64 / c.lookups as f64);
            self.out
                .devices
                .insert(format!("{},{}", d.major(), d.minor()), c);
        }
        let mut r: Vec<(String, u64)> = self
            .reclaimers
            .iter()
            .map(|(&pid, &n)| (format!("{} ({pid})", names.get(pid)), n))
            .collect();
        r.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        r.truncate(5);
        self.out.reclaimers = r;
        self.out
    }
}

/// The kernel's counters over a recording: the snapshot's `/proc/vmstat`
/// after minus before (a counter that went down is left out).
pub fn kernel_counts(s: &crate::model::snapshot::Snapshot) -> Option<BTreeMap<String, u64>> {
    let (a, b) = (&s.before.vmstat, &s.after.vmstat);
    (!a.is_empty() && !b.is_empty()).then(|| {
        b.iter()
            .filter_map(|(k, v)| Some((k.clone(), v.checked_sub(*a.get(k)?)?)))
            .collect()
    })
}

fn order(e: &TraceEvent) -> u32 {
    e.fields
        .int(crate::model::tracepoint::Field::Order)
        .unwrap_or(0)
        .clamp(0, 20) as u32
}

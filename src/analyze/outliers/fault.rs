//! User page faults as operations: a read through a mapped file is a fault,
//! not a syscall, and its stall is the fault's time.
//!
//! `page_fault_user` says when a fault begins; no event says when it ends.
//! The thread is in the fault, in the kernel, at each event that can only
//! happen there: `filemap_fault` and fault-around (`filemap_map_pages`,
//! which also runs when the fault retries after waiting for its page), the
//! bios it queues, and its return to the CPU after an uninterruptible
//! sleep. The last such mark before the thread enters the kernel again (a
//! recorded syscall, its next fault, its exit) is the fault's end: the few
//! µs after it, mapping the page and returning, are not seen, and the
//! thread's time in user space after it is not counted. A sleep in a
//! syscall iosleuth does not record would count as the fault's: the
//! `syscalls` set records the calls that sleep around mapped files.
//!
//! The kernel also faults on the thread's memory inside a call
//! (`page_fault_kernel` on a user address, as `write` from a mapped page
//! does) and counts those in the thread's `majflt`: such a fault is an
//! operation inside the call's, ended by the call's return at the latest.

use super::op::OpenOp;
use super::OutlierAnalysis;
use crate::analyze::names::ThreadNames;
use crate::analyze::sched::ThreadView;
use crate::analyze::syscalls::CallStats;
use crate::model::tracepoint::Field;
use crate::model::{Dev, TraceEvent};
use serde::Serialize;
use std::collections::BTreeMap;

/// A fault on a file's page: which file, and where in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FilePage {
    /// The filesystem's device (`MAJ,MIN`).
    #[serde(serialize_with = "dev_text")]
    pub dev: Dev,
    pub inode: u64,
    /// Bytes into the file; `None` when only fault-around named the file.
    pub offset: Option<u64>,
    /// Its path, from the workload's mappings the capture read (`None`:
    /// not known, as in captures made before they were read).
    pub path: Option<String>,
}

fn dev_text<S: serde::Serializer>(d: &Dev, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{},{}", d.major(), d.minor()))
}

impl FilePage {
    pub fn describe(&self) -> String {
        let at = match self.offset {
            Some(o) => format!(" at offset {o}"),
            None => String::new(),
        };
        let inode = format!(
            "inode {} on {},{}",
            self.inode,
            self.dev.major(),
            self.dev.minor()
        );
        match &self.path {
            Some(p) => format!("{p} ({inode}){at}"),
            None => format!("{inode}{at}"),
        }
    }
}

impl super::OutliersSummary {
    /// Names each fault's file by its path where the workload's mappings
    /// (the capture's snapshot) hold its device and inode.
    pub fn name_files(&mut self, files: &[crate::model::snapshot::MappedFile]) {
        if files.is_empty() {
            return;
        }
        for o in self.by_kind.values_mut().flatten() {
            if let Some(page) = o.file.as_mut() {
                let dev = format!("{},{}", page.dev.major(), page.dev.minor());
                let unnamed = page.describe();
                page.path = files
                    .iter()
                    .find(|f| f.inode == page.inode && f.dev == dev)
                    .map(|f| f.path.clone());
                // The one-line summary was written with the inode only.
                o.summary = o.summary.replace(&unnamed, &page.describe());
            }
        }
    }
}

/// What the faults of a trace came to.
#[derive(Debug, Default, Serialize)]
pub struct FaultSummary {
    /// Whether the trace holds user page faults: `false`, the figures
    /// below are not known (not 0).
    pub recorded: bool,
    /// The faults of the threads followed (the recorded command's).
    pub faults: u64,
    /// Faults on a file's page (`filemap_fault` or fault-around ran).
    pub file: u64,
    /// File faults that read their page from the device, as the kernel
    /// counts major faults: the fault queued the read, or waited for the
    /// page and retried.
    pub major: u64,
    /// Faults the kernel took on the workload's memory while in a syscall
    /// (a `write` from a mapped page not yet read; x86's
    /// `page_fault_kernel` on a user address): counted above, as the kernel
    /// counts them. `None`: the trace did not record such faults, and the
    /// counts above may miss some.
    pub in_kernel: Option<u64>,
    /// Faults whose thread was still blocked when the trace ended: their
    /// end is not known and they are not counted above.
    pub cut_short: u64,
    /// Faults no event showed the thread in after their start (no sleep,
    /// no file's page looked up): shorter than the gap to the thread's next
    /// event, but not timed; counted above, not operations.
    pub untimed: u64,
    /// Latency by kind (`file`, `anon`: no file's page was read, as for
    /// anonymous memory or copy-on-write), to the fault's last mark.
    pub by_kind: BTreeMap<String, CallStats>,
}

impl super::summary::MaybeRecorded for FaultSummary {
    fn recorded(&self) -> bool {
        self.recorded
    }
}

/// The figures of an open fault that can grow once the thread is back in
/// user space (on CPU, runnable, asleep in an unrecorded call), as of its
/// last mark: its end, unless a later mark comes.
#[derive(Clone, Default)]
pub(super) struct Fault {
    mark: u64,
    on_cpu_ns: u64,
    runnable_ns: u64,
    not_recorded_ns: u64,
    asleep_ns: u64,
    cpu_idle_ns: u64,
    held: Option<super::op::Held>,
    /// Blocked (`D`) since the last mark.
    slept: bool,
    /// Slept at least once: a filemap event after it is the fault retried.
    ever_slept: bool,
    /// Slept interruptibly: a fault does not, the thread was in a syscall
    /// not recorded, and the fault had ended. No later mark is its.
    over: bool,
    /// Waited for its page and looked again: the kernel's retry.
    major: bool,
    /// The page `filemap_fault` looked for (device, inode, index): a
    /// lookup of it after is the fault retried.
    looked_up: Option<(Dev, u64, u64)>,
    /// Queued a bio: its page's read, or, in a minor fault on a page
    /// marked for readahead, the next pages' (it does not wait then).
    queued: bool,
    /// Taken by the kernel inside a call, on the thread's user memory.
    in_kernel: bool,
    pub(super) file: Option<FilePage>,
}

impl Fault {
    pub(super) fn new(ts: u64) -> Fault {
        Fault {
            mark: ts,
            ..Default::default()
        }
    }
}

impl OpenOp {
    /// The thread is in its fault at `ts` (to which the operation has been
    /// integrated): the fault lasts at least until here.
    fn mark_fault(&mut self, ts: u64) {
        let b = &self.b;
        let held = (!self.held.is_empty()).then(|| self.held.clone());
        if let Some(f) = self.fault.as_mut().filter(|f| !f.over) {
            f.mark = ts;
            f.on_cpu_ns = b.on_cpu_ns;
            f.runnable_ns = b.runnable_ns;
            f.not_recorded_ns = b.not_recorded_ns;
            f.asleep_ns = b.asleep_ns;
            f.cpu_idle_ns = b.cpu_idle_ns;
            f.held = held;
            f.slept = false;
        }
    }

    /// After the thread's state changed at `ts`: a return to the CPU after
    /// an uninterruptible sleep is in the fault.
    pub(super) fn fault_state_changed(&mut self, ts: u64) {
        let Some(f) = &mut self.fault else { return };
        match self.view {
            ThreadView::Off('D') => {
                f.slept = true;
                f.ever_slept = true;
            }
            ThreadView::Off(_) => f.over = true,
            ThreadView::Running if f.slept => self.mark_fault(ts),
            _ => {}
        }
    }

    /// Ends the fault at its last mark: the time after it is the
    /// thread's, back in user space. Returns the fault's latency.
    fn end_at_mark(&mut self) -> u64 {
        let Some(f) = &mut self.fault else { return 0 };
        let b = &mut self.b;
        if b.runnable_ns != f.runnable_ns {
            // Runnable after the mark: back in user space, not the fault's.
            self.held = f.held.take().unwrap_or_default();
        }
        b.on_cpu_ns = f.on_cpu_ns;
        b.runnable_ns = f.runnable_ns;
        b.not_recorded_ns = f.not_recorded_ns;
        b.asleep_ns = f.asleep_ns;
        b.cpu_idle_ns = f.cpu_idle_ns;
        self.last = f.mark;
        f.mark.saturating_sub(self.start)
    }
}

/// The file page of a `filemap` event: binary captures carry `s_dev`,
/// `i_ino` and `index`; text prints `dev=7:0 ino=c ofs=4096`.
pub(crate) fn file_page(e: &TraceEvent, with_offset: bool) -> Option<FilePage> {
    let f = &e.fields;
    let dev = match f.int(Field::SDev) {
        Some(d) => Dev::new((d >> 20) as u32, (d & 0xf_ffff) as u32),
        None => {
            let (maj, min) = f.str(Field::Dev)?.split_once(':')?;
            Dev::new(maj.trim().parse().ok()?, min.trim().parse().ok()?)
        }
    };
    let inode = match (f.int(Field::IIno), f.str(Field::Ino)) {
        (Some(i), _) => i as u64,
        (None, Some(s)) => u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()?,
        (None, None) => f.int(Field::Ino)? as u64,
    };
    let offset = if !with_offset {
        None
    } else if let Some(i) = f.int(Field::Index) {
        Some((i as u64) << 12)
    } else {
        f.int(Field::Ofs).map(|o| o as u64)
    };
    Some(FilePage {
        dev,
        inode,
        offset,
        path: None,
    })
}

/// The pages of a file a `filemap` event looks up.
#[derive(Clone, Copy)]
struct PageSpan {
    dev: Dev,
    inode: u64,
    first: u64,
    last: u64,
}

impl PageSpan {
    fn holds(&self, (dev, inode, index): (Dev, u64, u64)) -> bool {
        self.dev == dev && self.inode == inode && (self.first..=self.last).contains(&index)
    }

    /// Its file, at its first page when the event named one page.
    fn page(&self, with_offset: bool) -> FilePage {
        FilePage {
            dev: self.dev,
            inode: self.inode,
            offset: with_offset.then_some(self.first << 12),
            path: None,
        }
    }
}

/// The pages a `filemap_fault` (one) or fault-around (`index` to
/// `last_index`) event looks up; text prints them as bytes (`ofs=4096`,
/// `ofs=0-61440`).
fn page_span(e: &TraceEvent) -> Option<PageSpan> {
    let page = file_page(e, false)?;
    let f = &e.fields;
    let (first, last) = match f.int(Field::Index) {
        Some(i) => (
            i as u64,
            f.int(Field::LastIndex).map_or(i as u64, |l| l as u64),
        ),
        None => match (f.int(Field::Ofs), f.str(Field::Ofs)) {
            (Some(o), _) => (o as u64 >> 12, o as u64 >> 12),
            (None, Some(ofs)) => {
                let (a, b) = ofs.split_once('-')?;
                (
                    a.trim().parse::<u64>().ok()? >> 12,
                    b.trim().parse::<u64>().ok()? >> 12,
                )
            }
            (None, None) => return None,
        },
    };
    Some(PageSpan {
        dev: page.dev,
        inode: page.inode,
        first,
        last,
    })
}

impl OutlierAnalysis {
    /// The thread's open fault, if it has one.
    fn fault_of(&self, pid: u32) -> Option<usize> {
        // Among the thread's own: asked at every syscall's enter and exit
        // and every bio queued, a scan of every open operation was a
        // fiftieth of the analysis with 16 threads in calls.
        self.open.last_of(pid, |o| o.fault.is_some())
    }

    /// A page fault on user memory begins, in user space or (`in_kernel`)
    /// in the kernel, inside a call: the thread's last one ended before it.
    pub(super) fn fault_begins(
        &mut self,
        e: &TraceEvent,
        in_kernel: bool,
        names: &ThreadNames,
        sched: &crate::analyze::sched::SchedAnalysis,
    ) {
        self.faults.recorded = true;
        self.end_fault(e.pid, names);
        if !self.workload.holds(e.pid) {
            return;
        }
        let before = self.open.len();
        let anon = self.kinds.id("fault ", "anon");
        self.begin(anon, e, None, names, sched);
        if self.open.len() > before {
            if let Some(op) = self.open.last_mut() {
                op.fault = Some(Fault {
                    in_kernel,
                    ..Fault::new(e.ts)
                });
            }
        }
    }

    /// `filemap_fault` or fault-around by a thread in a fault: the fault is
    /// on a file's page, and still going on.
    pub(super) fn fault_in_file(&mut self, e: &TraceEvent, page_known: bool) {
        let Some(i) = self.fault_of(e.pid) else {
            return;
        };
        let file_kind = self.kinds.id("fault ", "file");
        self.advance_one(i, e.ts);
        let op = self.open.get_mut(i);
        if let Some(f) = &mut op.fault {
            let pages = page_span(e);
            let again = matches!((f.looked_up, pages), (Some(p), Some(s)) if s.holds(p));
            if f.ever_slept || again {
                // Looks again after waiting for its page, or looks for the
                // page `filemap_fault` (an attempt's last lookup) was after:
                // it asked to retry once the page's read ended (which may
                // end before the thread would sleep). The kernel's retry,
                // counted major.
                f.major = true;
            }
            if page_known {
                f.looked_up = pages.map(|s| (s.dev, s.inode, s.first));
            }
            if f.file
                .as_ref()
                .is_none_or(|p| p.offset.is_none() && page_known)
            {
                // The span's page, read once; the event's own when it
                // names no page index.
                f.file = match pages {
                    Some(s) => Some(s.page(page_known)),
                    None => file_page(e, page_known),
                };
            }
        }
        op.kind = file_kind;
        op.mark_fault(e.ts);
    }

    /// A bio queued by a thread in a fault: the fault reads its page.
    pub(super) fn fault_queued(&mut self, pid: u32, ts: u64) {
        let Some(i) = self.fault_of(pid) else { return };
        self.advance_one(i, ts);
        let op = self.open.get_mut(i);
        if let Some(f) = &mut op.fault {
            f.queued = true;
        }
        op.mark_fault(ts);
    }

    /// The thread enters the kernel again (or exits): its fault, if one is
    /// open, ended at its last mark.
    pub(super) fn end_fault(&mut self, pid: u32, names: &ThreadNames) {
        let Some(i) = self.fault_of(pid) else { return };
        let mut op = self.open.swap_remove(i);
        let latency = op.end_at_mark();
        op.settle();
        let f = op.fault.take().unwrap_or_default();
        if f.in_kernel {
            *self.faults.in_kernel.get_or_insert(0) += 1;
        }
        if f.mark == op.start {
            self.faults.faults += 1;
            self.faults.untimed += 1;
            return;
        }
        let kind = self.kinds.name(op.kind).to_string();
        self.count_fault(&kind, latency, &f);
        self.close(op, latency, f.file, names);
    }

    /// At the trace's end: faults whose thread went back to user space end
    /// at their mark; those still blocked are cut short.
    pub(super) fn end_faults(&mut self, names: &ThreadNames) {
        let pids: Vec<(u32, bool)> = self
            .open
            .iter()
            .filter(|o| o.fault.is_some())
            .map(|o| (o.pid, o.view == ThreadView::Off('D')))
            .collect();
        for (pid, blocked) in pids {
            if blocked {
                if let Some(i) = self.fault_of(pid) {
                    self.open.swap_remove(i);
                    self.faults.cut_short += 1;
                }
            } else {
                self.end_fault(pid, names);
            }
        }
    }

    fn count_fault(&mut self, kind: &str, latency: u64, f: &Fault) {
        let s = &mut self.faults;
        s.faults += 1;
        let file = f.file.is_some();
        s.file += file as u64;
        // Major: it read its own page, so waited for it (a minor fault
        // that started readahead of the next pages does not).
        s.major += (file && (f.major || (f.queued && f.ever_slept))) as u64;
        let k = kind.strip_prefix("fault ").unwrap_or(kind);
        if !s.by_kind.contains_key(k) {
            s.by_kind.insert(k.to_string(), CallStats::default());
        }
        if let Some(c) = s.by_kind.get_mut(k) {
            c.add(latency);
        }
    }

    pub(super) fn fault_summary(&mut self) -> FaultSummary {
        let mut s = std::mem::take(&mut self.faults);
        for c in s.by_kind.values_mut() {
            c.summarize();
        }
        s
    }
}

//! Follows each request through its life (bio queued → request allocated →
//! merged → inserted → issued → completed) and accounts it the way the
//! kernel's disk statistics do, so that per-interval figures match iostat.
//!
//! Kernel semantics mirrored here (block/blk-mq.c, block/genhd.c):
//! - a request's accounting starts when it is allocated (G), its service time
//!   (`nsecs`, iostat's await) runs from then to completion;
//! - `ios` and `nsecs` are added when the request completes, `sectors` as
//!   they complete, `merges` when a bio merges into a request;
//! - `io_ticks` (%util) is time with at least one request in flight;
//! - `time_in_queue` (aqu-sz) is the sum of the service times.

use super::iostat::{IostatAccumulator, OpKind};
use super::sector_map::SectorMap;
use crate::analyze::histogram::{LatencyDist, Log2Hist};
use crate::model::{Action, BlockEvent, Comm, Dev, Extra, Rwbs};
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Copy, Debug)]
struct PendingBio {
    ts: u64,
    sectors: u64,
    rwbs: Rwbs,
    /// Who queued it: the request's process.
    pid: u32,
    comm: Comm,
    /// A piece of a bio cut by a split (X).
    split: bool,
}

#[derive(Clone, Copy, Debug)]
struct Request {
    /// The capture-wide number of the request (`RequestRow::id`).
    id: u64,
    /// Accounting start (allocation), iostat's start.
    start: u64,
    /// First bio queued, for Q2C.
    first_q: u64,
    issued: Option<u64>,
    sectors: u64,
    op: OpKind,
    /// What only the exported rows need (see `RequestRow`).
    sector: u64,
    allocated: Option<u64>,
    inserted: Option<u64>,
    bios: u32,
    rwbs: Rwbs,
    pid: u32,
    comm: Comm,
    /// Holds a piece of a split bio.
    split: bool,
}

/// The requests with data that were issued and completed, of one kind
/// (pieces of split bios, or the others): what `request_splitting` sets
/// against each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCost {
    pub requests: u64,
    /// Waits from the first bio queued to issue (Q→D), summed, ns.
    pub wait_ns: u64,
    /// Device times (D→C), summed, ns.
    pub d2c_ns: u64,
    pub sectors: u64,
}

impl RequestCost {
    /// The average wait before issue, ns.
    pub fn avg_wait_ns(&self) -> Option<u64> {
        (self.requests > 0).then(|| self.wait_ns / self.requests)
    }
}

/// What splits made of a device's bios.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitCosts {
    /// Requests holding a piece of a split bio.
    pub split: RequestCost,
    /// The other requests.
    pub unsplit: RequestCost,
    /// The largest piece a split cut off (the limit it was cut at), sectors.
    pub largest_piece_sectors: u64,
}

/// One completed request with every stage's time, for tables (Parquet)
/// and timelines (Perfetto). Times are ns in the trace's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestRow {
    /// Numbered as the requests start, over every device of the capture:
    /// what the operations that waited for it name (`OperationRow`).
    pub id: u64,
    pub dev: Dev,
    pub sector: u64,
    pub sectors: u64,
    pub op: OpKind,
    pub rwbs: Rwbs,
    /// First bio queued (Q); the first event seen of it when the trace
    /// did not show its Q.
    pub queued_ns: u64,
    pub allocated_ns: Option<u64>,
    pub inserted_ns: Option<u64>,
    /// Issued to the driver (D); None for bios of a bio-based device.
    pub issued_ns: Option<u64>,
    pub completed_ns: u64,
    /// Bios in the request: 1 + those merged into it.
    pub bios: u32,
    /// The thread that queued it (its id, as the kernel's `pid`).
    pub pid: u32,
    /// Its process (thread group id), as the trace told it
    /// (`analyze::rows::Processes`); `None` when the trace did not.
    pub process: Option<u32>,
    pub comm: Comm,
    pub error: i32,
}

/// What the per-request tracking measured on one device.
#[derive(Debug, Default)]
pub struct DeviceRequests {
    pub iostat: IostatAccumulator,
    /// Device time per request (D→C), ns.
    pub d2c: LatencyDist,
    /// Whole life per request (first Q → C), ns.
    pub q2c: LatencyDist,
    /// D→C and Q→C of the requests with data, without the flushes (btt
    /// counts queued bios, and a flush is none): from the first flush on,
    /// until then `d2c` and `q2c` (a device without flushes, most of a
    /// machine's many, keeps no second copy).
    data: Option<Box<(LatencyDist, LatencyDist)>>,
    pub d2c_log2_us: Log2Hist,
    pub q2c_log2_us: Log2Hist,
    /// Sizes of issued requests, KiB, log2.
    pub size_log2_kib: Log2Hist,
    pub completed: OpCounts,
    pub bytes_completed: OpCounts,
    pub merges: OpCounts,
    pub splits: u64,
    pub split_costs: SplitCosts,
    pub requeues: u64,
    pub fua: u64,
    pub completions_without_start: u64,
    pub errors: u64,
    pub timeline: super::timeline::RequestTimeline,
    pending: HashMap<u64, PendingBio>,
    requests: SectorMap<Request>,
    /// Requests at a sector where a newer one was allocated while they
    /// were in flight (random reads of one block, many deep), oldest
    /// first: issued and completed in their turn, not overwritten.
    older: HashMap<u64, VecDeque<Request>>,
    /// Requests completed at C whose accounting end (`block_io_done`) may
    /// still follow: sector → (C time, op).
    awaiting_done: HashMap<u64, (u64, OpKind)>,
    /// Requests without data (flushes) cannot be told apart by sector.
    empty: VecDeque<Request>,
    dev: Dev,
    rows: Option<std::sync::mpsc::SyncSender<RequestRow>>,
    /// The threads' processes, for the rows.
    processes: crate::analyze::rows::Processes,
    keep_timeline: bool,
    /// The next request's id, shared by the capture's devices.
    ids: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OpCounts {
    pub read: u64,
    pub write: u64,
    pub discard: u64,
    pub flush: u64,
}

impl OpCounts {
    pub fn add(&mut self, op: OpKind, n: u64) {
        match op {
            OpKind::Read => self.read += n,
            OpKind::Write => self.write += n,
            OpKind::Discard => self.discard += n,
            OpKind::Flush => self.flush += n,
        }
    }
    pub fn total(&self) -> u64 {
        self.read + self.write + self.discard + self.flush
    }
}

pub fn op_of(rwbs: Rwbs, bytes: u32) -> OpKind {
    if rwbs.is_discard() {
        OpKind::Discard
    } else if rwbs.is_write() {
        OpKind::Write
    } else if rwbs.is_read() {
        OpKind::Read
    } else if bytes == 0 || rwbs.is_flush() {
        OpKind::Flush
    } else if rwbs.has(Rwbs::NONE) {
        // The kernel's rwbs names only reads, writes, discards and
        // flushes: `N` with data is a write zeroes or a zone append, which
        // diskstats counts as writes (op_is_write).
        OpKind::Write
    } else {
        OpKind::Read
    }
}

impl DeviceRequests {
    pub fn new(origin: u64, interval: u64) -> Self {
        DeviceRequests {
            iostat: IostatAccumulator::new(origin, interval),
            ..Default::default()
        }
    }

    /// Keeps every completed request in `timeline` (the HTML plots).
    pub fn with_timeline(mut self, keep: bool) -> Self {
        self.keep_timeline = keep;
        self
    }

    /// Sends a row per completed request of `dev` to `sink`, with the
    /// process of its thread as `processes` knows it then.
    pub fn with_rows(
        mut self,
        dev: Dev,
        sink: Option<std::sync::mpsc::SyncSender<RequestRow>>,
        processes: crate::analyze::rows::Processes,
    ) -> Self {
        self.dev = dev;
        self.rows = sink;
        self.processes = processes;
        self
    }

    /// Numbers requests from the counter every device of a capture shares.
    pub fn with_ids(mut self, ids: std::sync::Arc<std::sync::atomic::AtomicU64>) -> Self {
        self.ids = ids;
        self
    }

    /// D→C and Q→C of the requests with data (without flushes).
    pub fn without_flushes(&self) -> (&LatencyDist, &LatencyDist) {
        match &self.data {
            Some(x) => (&x.0, &x.1),
            None => (&self.d2c, &self.q2c),
        }
    }

    /// Requests in flight plus bios queued and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.requests.len() + self.empty.len()
    }
    pub fn pending_bios(&self) -> usize {
        self.pending.len()
    }

    fn start_request(&mut self, e: &BlockEvent, bio: Option<PendingBio>) -> Request {
        self.start_request_at(e, e.ts, bio)
    }

    /// A request allocated at `start` for `e`, from the bio queued for it
    /// when the trace showed one.
    fn start_request_at(&mut self, e: &BlockEvent, start: u64, bio: Option<PendingBio>) -> Request {
        self.iostat.io_started(start);
        Request {
            id: self.ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            start,
            first_q: bio.map_or(e.ts, |b| b.ts),
            issued: None,
            sectors: e.sectors(),
            op: op_of(e.rwbs, e.bytes),
            sector: e.sector,
            allocated: (e.action == Action::GetRq).then_some(e.ts),
            inserted: None,
            bios: 1,
            rwbs: e.rwbs,
            pid: bio.map_or(e.pid, |b| b.pid),
            comm: bio.map_or(e.comm, |b| b.comm),
            split: bio.is_some_and(|b| b.split),
        }
    }

    /// Takes the request at `sector`, creating it (from a pending bio, or from
    /// this event) when the trace did not show its allocation.
    fn take_or_start(&mut self, e: &BlockEvent) -> Request {
        if e.bytes == 0 {
            // An fsync's empty write never reaches the driver: the flush
            // machinery sends a flush request of its own (REQ_OP_FLUSH, with
            // no G), which must not take the write's place.
            let op = op_of(e.rwbs, e.bytes);
            if let Some(pos) = self
                .empty
                .iter()
                .position(|r| r.issued.is_none() && r.op == op)
            {
                return self.empty.remove(pos).unwrap();
            }
            return self.start_request(e, None);
        }
        if let Some(r) = self.requests.remove(e.sector) {
            return r;
        }
        let bio = self.pending.remove(&e.sector);
        self.start_request(e, bio)
    }

    fn put(&mut self, sector: u64, r: Request) {
        if r.sectors == 0 {
            self.empty.push_back(r);
        } else {
            if let Some(prev) = self.requests.remove(sector) {
                self.older.entry(sector).or_default().push_back(prev);
            }
            self.requests.insert(sector, r);
        }
    }

    /// The oldest request at `sector` behind a newer one that has not yet
    /// reached the stage of `e` (I or D): its turn comes first.
    fn older_unstaged<'a>(
        older: &'a mut HashMap<u64, VecDeque<Request>>,
        e: &BlockEvent,
    ) -> Option<&'a mut Request> {
        if older.is_empty() {
            return None;
        }
        older
            .get_mut(&e.sector)?
            .iter_mut()
            .find(|r| r.issued.is_none() && (e.action == Action::Issue || r.inserted.is_none()))
    }

    /// The oldest issued request at `sector` behind a newer one: the one
    /// a completion there ends.
    fn older_issued(&mut self, sector: u64) -> Option<Request> {
        if self.older.is_empty() {
            return None;
        }
        let queue = self.older.get_mut(&sector)?;
        let r = queue.pop_front_if(|r| r.issued.is_some())?;
        if queue.is_empty() {
            self.older.remove(&sector);
        }
        Some(r)
    }

    /// Feeds one event. `start` is when the kernel's accounting of a request
    /// allocated by this G began: the G itself, or the plug's cached clock
    /// when the request was allocated under a plug (see `BlockAnalysis`).
    /// Returns the id of the request an issue (D) sent to the driver.
    pub fn add(&mut self, e: &BlockEvent, start: Option<u64>) -> Option<u64> {
        match e.action {
            Action::Queue => {
                self.pending.insert(
                    e.sector,
                    PendingBio {
                        ts: e.ts,
                        sectors: e.sectors(),
                        rwbs: e.rwbs,
                        pid: e.pid,
                        comm: e.comm,
                        split: false,
                    },
                );
            }
            Action::GetRq => {
                let bio = self.pending.remove(&e.sector);
                let r = self.start_request_at(e, start.unwrap_or(e.ts).min(e.ts), bio);
                self.put(e.sector, r);
            }
            Action::IoDone => {
                // The kernel takes its completion time after ending every bio
                // of the request: later than C when many bios were merged.
                if let Some((c_ts, op)) = self.awaiting_done.remove(&e.sector) {
                    if e.ts > c_ts {
                        self.iostat.extend_service(c_ts, op, e.ts - c_ts);
                    }
                }
            }
            Action::BackMerge | Action::FrontMerge | Action::RqMerge => self.merge(e),
            Action::Insert | Action::Issue => {
                // A request already at its sector is updated where it is
                // (taking it out and putting it back moves it twice in the
                // tree); one without data, or not yet seen, is taken and put.
                let at = if e.bytes == 0 {
                    None
                } else if let Some(r) = Self::older_unstaged(&mut self.older, e) {
                    Some(r)
                } else {
                    self.requests.get_mut(e.sector)
                };
                let id = match at {
                    Some(r) => {
                        Self::staged(r, e, &mut self.fua, &mut self.size_log2_kib);
                        r.id
                    }
                    None => {
                        let mut r = self.take_or_start(e);
                        Self::staged(&mut r, e, &mut self.fua, &mut self.size_log2_kib);
                        let id = r.id;
                        self.put(e.sector, r);
                        id
                    }
                };
                return (e.action == Action::Issue).then_some(id);
            }
            Action::Requeue => {
                let mut r = self.take_or_start(e);
                r.issued = None;
                self.requeues += 1;
                self.put(e.sector, r);
            }
            Action::Split => self.split(e),
            Action::Complete | Action::BioComplete => self.complete(e),
            _ => {}
        }
        None
    }

    /// I, D: the request reached the scheduler or the driver.
    #[inline]
    fn staged(r: &mut Request, e: &BlockEvent, fua: &mut u64, sizes: &mut Log2Hist) {
        if e.sectors() > 0 {
            r.sectors = e.sectors();
        }
        if e.action == Action::Insert {
            r.inserted = Some(e.ts);
        } else {
            r.issued = Some(e.ts);
            if e.rwbs.has(Rwbs::FUA) {
                *fua += 1;
            }
            if e.bytes > 0 {
                sizes.add((e.bytes as u64).div_ceil(1024));
            }
        }
    }

    /// M, F: a bio merged into a request (it grows; F moves its start);
    /// a request merged into another by the scheduler is gone.
    #[inline]
    fn merge(&mut self, e: &BlockEvent) {
        let op = op_of(e.rwbs, e.bytes);
        self.merges.add(op, 1);
        self.iostat.merged(e.ts, op);
        if e.action == Action::RqMerge {
            // The scheduler merged this request into another: it
            // will never complete, and the kernel ends its
            // accounting here (blk_account_io_merge_request).
            if self.requests.remove(e.sector).is_some() {
                self.iostat.io_ended(e.ts);
            }
            return;
        }
        let split = self.pending.remove(&e.sector).is_some_and(|b| b.split);
        let end = e.sector.saturating_add(e.sectors());
        if e.action == Action::BackMerge {
            // The bio joins the request that ends where it starts; one
            // that ends elsewhere is another request (the bio's own was
            // allocated before the trace or the time window began), which
            // must not grow: its completion would then leave a phantom
            // remainder in flight, and the device busy, until the end.
            if let Some((at, r)) = self.requests.last_in_mut(..e.sector) {
                if at.saturating_add(r.sectors) == e.sector {
                    r.sectors += e.sectors();
                    r.bios += 1;
                    r.split |= split;
                }
            }
        } else if let Some(mut r) = self.requests.remove(end) {
            r.sectors += e.sectors();
            r.bios += 1;
            r.split |= split;
            r.sector = e.sector;
            r.first_q = r.first_q.min(e.ts);
            self.requests.insert(e.sector, r);
        }
    }

    /// X: a pending bio split in two at `new_sector`.
    #[inline]
    fn split(&mut self, e: &BlockEvent) {
        if let (Extra::Split { new_sector }, Some(b)) = (e.extra, self.pending.get_mut(&e.sector)) {
            let end = e.sector.saturating_add(b.sectors);
            if new_sector > e.sector && new_sector < end {
                b.sectors = new_sector - e.sector;
                b.split = true;
                let piece = &mut self.split_costs.largest_piece_sectors;
                *piece = (*piece).max(b.sectors);
                let second = PendingBio {
                    sectors: end - new_sector,
                    ..*b
                };
                self.pending.insert(new_sector, second);
            }
        }
        self.splits += 1;
    }

    fn complete(&mut self, e: &BlockEvent) {
        if e.error != 0 {
            self.errors += 1;
        }
        let found = if e.bytes == 0 {
            // The issued one of its operation first; then one never issued:
            // the flush machinery ends an fsync's empty write when its own
            // flush request completes, and diskstats counts it as a write.
            let op = op_of(e.rwbs, e.bytes);
            self.empty
                .iter()
                .position(|r| r.issued.is_some() && r.op == op)
                .or_else(|| self.empty.iter().position(|r| r.op == op))
                .and_then(|p| self.empty.remove(p))
        } else {
            self.older_issued(e.sector)
                .or_else(|| self.requests.remove(e.sector))
        };
        let Some(mut r) = found else {
            // A bio-based device (dm, md) completes bios, not requests.
            if let Some(b) = self.pending.remove(&e.sector) {
                // A bio-based device accounts bios: busy from queue to completion.
                let mut r = self.start_request_at(e, b.ts, Some(b));
                r.op = op_of(b.rwbs, e.bytes);
                r.rwbs = b.rwbs;
                self.finish(e, &r, e.sectors().max(b.sectors));
            } else if e.bytes == 0 && e.rwbs.is_write() {
                // A write sent with a preflush ends its flush sequence with
                // a second, data-less completion: its data was counted at
                // the first one.
            } else {
                self.completions_without_start += 1;
            }
            return;
        };
        let done = e.sectors();
        if done > 0 && done < r.sectors {
            // Partial completion: the rest stays in flight.
            self.iostat.sectors_done(e.ts, r.op, done);
            self.bytes_completed.add(r.op, done * 512);
            r.sectors -= done;
            self.requests.insert(e.sector.saturating_add(done), r);
            return;
        }
        let sectors = if done > 0 { done } else { r.sectors };
        self.finish(e, &r, sectors);
        // Traces without block_io_done never claim these: keep the map small.
        if self.awaiting_done.len() >= 4096 {
            self.awaiting_done.clear();
        }
        self.awaiting_done.insert(e.sector, (e.ts, r.op));
    }

    /// `r` completed at `c` with its last `sectors`.
    fn finish(&mut self, c: &BlockEvent, r: &Request, sectors: u64) {
        let (ts, op, issued) = (c.ts, r.op, r.issued);
        self.iostat.io_ended(ts);
        self.completed.add(op, 1);
        self.bytes_completed.add(op, sectors * 512);
        self.iostat.sectors_done(ts, op, sectors);
        self.iostat.io_done(ts, op, ts.saturating_sub(r.start));
        let q2c = ts.saturating_sub(r.first_q);
        let data = op != OpKind::Flush;
        if !data && self.data.is_none() {
            // The first flush: until now every request had data.
            self.data = Some(Box::new((self.d2c.clone(), self.q2c.clone())));
        }
        self.q2c.add(q2c);
        self.q2c_log2_us.add(q2c / 1000);
        if let (true, Some(x)) = (data, self.data.as_mut()) {
            x.1.add(q2c);
        }
        if let Some(d) = issued {
            let d2c = ts.saturating_sub(d);
            self.d2c.add(d2c);
            self.d2c_log2_us.add(d2c / 1000);
            if let (true, Some(x)) = (data, self.data.as_mut()) {
                x.0.add(d2c);
            }
            if sectors > 0 {
                let c = &mut self.split_costs;
                let cost = if r.split {
                    &mut c.split
                } else {
                    &mut c.unsplit
                };
                cost.requests += 1;
                cost.wait_ns += d.saturating_sub(r.first_q);
                cost.d2c_ns += d2c;
                cost.sectors += r.sectors.max(sectors);
            }
        }
        if self.keep_timeline {
            self.timeline.add(super::timeline::RequestPoint {
                done_ns: ts,
                q2c_ns: q2c,
                d2c_ns: issued.map(|d| ts.saturating_sub(d)),
                sectors,
                op,
            });
        }
        let (dev, processes) = (self.dev, &self.processes);
        crate::analyze::rows::send(&mut self.rows, || RequestRow {
            id: r.id,
            dev,
            sector: r.sector,
            sectors: r.sectors.max(sectors),
            op,
            rwbs: r.rwbs,
            queued_ns: r.first_q,
            allocated_ns: r.allocated,
            inserted_ns: r.inserted,
            issued_ns: issued,
            completed_ns: ts,
            bios: r.bios,
            pid: r.pid,
            process: processes.of(r.pid),
            comm: r.comm,
            error: c.error,
        });
    }
}

/// Which devices feed which, learnt from remap events: `(upper, lower)`.
#[derive(Debug, Default)]
pub struct DeviceStack {
    pub edges: BTreeMap<(Dev, Dev), u64>,
}

impl DeviceStack {
    pub fn add(&mut self, e: &BlockEvent) {
        if let Extra::Remap { from_dev, .. } = e.extra {
            if from_dev != e.dev {
                *self.edges.entry((from_dev, e.dev)).or_default() += 1;
            }
        }
    }

    /// Each chain from a top device down to a device that feeds no other.
    pub fn chains(&self) -> Vec<Vec<Dev>> {
        let lowers: std::collections::BTreeSet<Dev> = self.edges.keys().map(|k| k.1).collect();
        let tops: std::collections::BTreeSet<Dev> = self
            .edges
            .keys()
            .map(|k| k.0)
            .filter(|d| !lowers.contains(d))
            .collect();
        let mut out = Vec::new();
        for top in tops {
            let mut stack = vec![vec![top]];
            while let Some(chain) = stack.pop() {
                let last = *chain.last().unwrap();
                let next: Vec<Dev> = self
                    .edges
                    .keys()
                    .filter(|k| k.0 == last)
                    .map(|k| k.1)
                    .collect();
                if next.is_empty() || chain.len() > 16 {
                    out.push(chain);
                } else {
                    for n in next {
                        if !chain.contains(&n) {
                            let mut c = chain.clone();
                            c.push(n);
                            stack.push(c);
                        } else {
                            out.push(chain.clone());
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;

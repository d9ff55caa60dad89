//! io_uring requests as operations, from `io_uring_submit_req` to
//! `io_uring_complete`, keyed as the kernel keys them (ring, request).
//! A completion that finds the completion queue full is traced as
//! `io_uring_cqe_overflow` instead (no request, only the ring and the
//! user's `user_data`): it ends the oldest open request of that ring with
//! that `user_data`.
//!
//! The submitting thread goes on while its requests are in flight, so a
//! request's time is not its thread's state: it is the block requests it
//! caused, at the device or queued for it, the wait for an io-wq worker
//! when it was punted, and the rest in the kernel. Bios carry no io_uring
//! id; they are tied as the syscall path ties them, by the thread that
//! queued them: the submitter between its `submit_req` and the end of its
//! `io_uring_enter` (inline, or the SQPOLL thread until its next
//! submission), or an io-wq worker (`iou-wrk-*`) for the oldest punted
//! request that is still open; a tie among several punted requests is
//! counted as ambiguous.

use super::inflight::request_class;
use super::summary::{percentages, Breakdown, Outlier, Request};
use super::OutlierAnalysis;
use crate::analyze::names::ThreadNames;
use crate::analyze::syscalls::CallStats;
use crate::analyze::top::{keep_largest, qualifies};
use crate::model::tracepoint::Field;
use crate::model::{Action, BlockEvent, Dev, TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// A request: its ring and its `io_kiocb`, as the kernel prints them.
type Key = (i64, i64);

/// At most this many requests open: a trace that never shows their
/// completions (cut short) must not grow without bound.
const OPEN_MAX: usize = 1 << 16;

/// One io_uring request in flight.
struct Open {
    id: u64,
    pid: u32,
    start: u64,
    op: Box<str>,
    user_data: i64,
    fd: Option<i64>,
    sq_thread: bool,
    punted: Option<u64>,
    bios: Vec<Bio>,
}

/// A bio the request queued, and what became of it.
struct Bio {
    dev: Dev,
    sector: u64,
    bytes: u32,
    class: &'static str,
    comm: String,
    queued: u64,
    issued: Option<u64>,
    completed: Option<u64>,
    /// The block request it went out in (`RequestRow::id`).
    request_id: Option<u64>,
}

/// What happened to the io_uring requests of a trace.
#[derive(Debug, Default, Serialize)]
pub struct UringSummary {
    /// Whether the trace holds io_uring's events: `false`, the figures
    /// below are not known (not 0).
    pub recorded: bool,
    pub submitted: u64,
    pub completed: u64,
    /// Submitted by an SQPOLL thread.
    pub sq_thread: u64,
    /// Punted to io-wq (`io_uring_queue_async_work`): could not be issued
    /// without blocking.
    pub punted: u64,
    /// Armed for poll: waited for the file to be ready.
    pub polled: u64,
    pub failed: u64,
    /// Completions that found the completion queue full (the application
    /// reaped later than requests completed): kept by the kernel until
    /// there is room, counted in `completed`.
    pub cq_overflows: u64,
    /// Bios tied to one of several punted requests (io-wq workers do not
    /// say which request they run).
    pub ambiguous_ties: u64,
    /// Completions of requests submitted before the trace began.
    pub completed_unseen_submit: u64,
    /// By opcode (`read`, `write`, `fsync`): latency from submission to
    /// completion.
    pub by_op: BTreeMap<String, CallStats>,
}

impl super::summary::MaybeRecorded for UringSummary {
    fn recorded(&self) -> bool {
        self.recorded
    }
}

#[derive(Default)]
pub(super) struct Uring {
    open: FxHashMap<Key, Open>,
    /// The request a thread is submitting: the bios it queues now are
    /// that request's.
    issuing: FxHashMap<u32, Key>,
    /// Punted requests still open, oldest first.
    punted: VecDeque<Key>,
    /// Open requests by ring and `user_data`, oldest first: an overflowed
    /// completion names only these.
    by_user_data: FxHashMap<(i64, i64), VecDeque<i64>>,
    /// The bios of open requests not yet completed, by device and sector.
    bios: BTreeMap<(Dev, u64), Key>,
    pub(super) summary: UringSummary,
}

impl Uring {
    /// A request that ended: out of every index of open requests.
    fn forget(&mut self, k: Key, o: &Open) {
        self.punted.retain(|p| *p != k);
        self.issuing.retain(|_, v| *v != k);
        if let Some(reqs) = self.by_user_data.get_mut(&(k.0, o.user_data)) {
            reqs.retain(|r| *r != k.1);
            if reqs.is_empty() {
                self.by_user_data.remove(&(k.0, o.user_data));
            }
        }
        for b in &o.bios {
            if b.completed.is_none() {
                self.bios.remove(&(b.dev, b.sector));
            }
        }
    }
}

impl OutlierAnalysis {
    /// io_uring's events; false for any other.
    pub(super) fn uring_event(&mut self, e: &TraceEvent, names: &ThreadNames) -> bool {
        let f = &e.fields;
        let key = || {
            (
                f.int(Field::Ctx).unwrap_or(0),
                f.int(Field::Req).unwrap_or(0),
            )
        };
        let u = &mut self.uring;
        match e.kind {
            Tracepoint::IoUringSubmitReq => {
                u.summary.recorded = true;
                u.summary.submitted += 1;
                let sq_thread = f.int(Field::SqThread).unwrap_or(0) != 0;
                u.summary.sq_thread += sq_thread as u64;
                // Only the threads asked for (`--pid`, `--comm`) and the
                // recorded command's, as for the other operations.
                let wanted =
                    names.keeps(e.pid) && self.workload.holds_io_thread(e.pid, || names.get(e.pid));
                if u.open.len() >= OPEN_MAX || !wanted {
                    return true;
                }
                let op = f
                    .str(Field::OpStr)
                    .map(str::to_ascii_lowercase)
                    .unwrap_or_else(|| format!("op {}", f.int(Field::Opcode).unwrap_or(-1)));
                let id = self.next_op_id;
                self.next_op_id += 1;
                let k = key();
                let user_data = f.int(Field::UserData).unwrap_or(0);
                // The kernel reuses a request that posted no completion
                // (IOSQE_CQE_SKIP_SUCCESS): the old one is over.
                if let Some(old) = self.uring.open.remove(&k) {
                    self.uring.forget(k, &old);
                }
                self.uring
                    .by_user_data
                    .entry((k.0, user_data))
                    .or_default()
                    .push_back(k.1);
                self.uring.open.insert(
                    k,
                    Open {
                        id,
                        pid: e.pid,
                        start: e.ts,
                        op: op.into(),
                        user_data,
                        fd: None,
                        sq_thread,
                        punted: None,
                        bios: Vec::new(),
                    },
                );
                self.uring.issuing.insert(e.pid, k);
            }
            Tracepoint::IoUringFileGet => {
                if let Some(o) = u.open.get_mut(&key()) {
                    o.fd = f.int(Field::Fd);
                }
            }
            Tracepoint::IoUringQueueAsyncWork => {
                u.summary.punted += 1;
                let k = key();
                if let Some(o) = u.open.get_mut(&k) {
                    o.punted.get_or_insert(e.ts);
                    u.punted.push_back(k);
                }
                if u.issuing.get(&e.pid) == Some(&k) {
                    u.issuing.remove(&e.pid);
                }
            }
            Tracepoint::IoUringPollArm => u.summary.polled += 1,
            Tracepoint::IoUringReqFailed => u.summary.failed += 1,
            Tracepoint::IoUringCreate | Tracepoint::IoUringCqringWait => u.summary.recorded = true,
            Tracepoint::IoUringComplete | Tracepoint::IoUringCqeOverflow => {
                u.summary.recorded = true;
                u.summary.completed += 1;
                let k = if e.kind == Tracepoint::IoUringComplete {
                    Some(key())
                } else {
                    u.summary.cq_overflows += 1;
                    let ctx = f.int(Field::Ctx).unwrap_or(0);
                    let user_data = f.int(Field::UserData).unwrap_or(0);
                    u.by_user_data
                        .get(&(ctx, user_data))
                        .and_then(|reqs| reqs.front())
                        .map(|req| (ctx, *req))
                };
                match k.and_then(|k| Some((k, u.open.remove(&k)?))) {
                    Some((k, o)) => {
                        u.forget(k, &o);
                        self.uring_ended(o, e.ts, names);
                    }
                    None => u.summary.completed_unseen_submit += 1,
                }
            }
            Tracepoint::SysExit if e.short_name().ends_with("io_uring_enter") => {
                u.issuing.remove(&e.pid);
            }
            _ => return false,
        }
        true
    }

    /// A block event: bios queued for a request, and their requests issued
    /// and completed.
    pub(super) fn uring_block(&mut self, b: &BlockEvent, issued: Option<u64>) {
        let u = &mut self.uring;
        if u.open.is_empty() {
            return;
        }
        match b.action {
            Action::Queue => {
                let worker = b.comm.as_str().starts_with("iou-wrk");
                let k = match u.issuing.get(&b.pid) {
                    Some(k) => *k,
                    None if worker => match u.punted.front() {
                        Some(k) => {
                            if u.punted.len() > 1 {
                                u.summary.ambiguous_ties += 1;
                            }
                            *k
                        }
                        None => return,
                    },
                    None => return,
                };
                let Some(o) = u.open.get_mut(&k) else { return };
                o.bios.push(Bio {
                    dev: b.dev,
                    sector: b.sector,
                    bytes: b.bytes,
                    class: request_class(b.comm.as_str(), b.rwbs, b.bytes),
                    comm: b.comm.as_str().to_string(),
                    queued: b.ts,
                    issued: None,
                    completed: None,
                    request_id: None,
                });
                u.bios.insert((b.dev, b.sector), k);
            }
            Action::Issue | Action::Complete => {
                let end = b.sector.saturating_add((b.sectors()).max(1));
                let hits: Vec<((Dev, u64), Key)> = u
                    .bios
                    .range((b.dev, b.sector)..(b.dev, end))
                    .map(|(s, k)| (*s, *k))
                    .collect();
                for (at, k) in hits {
                    let Some(o) = u.open.get_mut(&k) else {
                        continue;
                    };
                    for bio in o
                        .bios
                        .iter_mut()
                        .filter(|x| (x.dev, x.sector) == at && x.completed.is_none())
                    {
                        if b.action == Action::Issue {
                            bio.issued = Some(b.ts);
                            bio.request_id = issued.or(bio.request_id);
                        } else {
                            bio.issued.get_or_insert(b.ts);
                            bio.completed = Some(b.ts);
                        }
                    }
                    if b.action == Action::Complete {
                        u.bios.remove(&at);
                    }
                }
            }
            _ => {}
        }
    }

    /// A request completed: its time split, its row, its totals, and kept
    /// if among the slowest of its kind.
    fn uring_ended(&mut self, o: Open, end: u64, names: &ThreadNames) {
        let latency = end.saturating_sub(o.start);
        let clip = |a: u64, z: u64| (a.clamp(o.start, end), z.clamp(o.start, end));
        let at_device: Vec<(u64, u64)> = o
            .bios
            .iter()
            .filter_map(|b| b.issued.map(|i| clip(i, b.completed.unwrap_or(end))))
            .collect();
        let in_block: Vec<(u64, u64)> = o
            .bios
            .iter()
            .map(|b| clip(b.queued, b.completed.unwrap_or(end)))
            .collect();
        let device = union_ns(at_device);
        let queued = union_ns(in_block).saturating_sub(device);
        let first_bio = o.bios.iter().map(|b| b.queued).min().unwrap_or(end);
        let io_wq = o.punted.map_or(0, |p| first_bio.min(end).saturating_sub(p));
        let main = o
            .bios
            .iter()
            .filter_map(|b| {
                let (i, c) = clip(b.issued?, b.completed.unwrap_or(end));
                Some((c - i, b))
            })
            .max_by_key(|(ns, b)| (*ns, std::cmp::Reverse(b.queued)));
        // The wait for an io-wq worker is a wait in the kernel with no
        // request at the device; the rest (the submission before its bio,
        // the completion's way back to the ring) no event times: not
        // recorded, rather than a wait it may not have been.
        let io_wq = io_wq.min(latency.saturating_sub(device + queued));
        let mut b = Breakdown {
            queued_ns: queued,
            device_only_ns: device,
            other_wait_ns: io_wq,
            not_recorded_ns: latency.saturating_sub(device + queued + io_wq),
            ..Default::default()
        };
        if device > 0 {
            b.device_ns
                .insert(main.map_or("request", |(_, m)| m.class), device);
        }
        let id = self.kinds.id("io_uring ", &o.op);
        let kind = self.kinds.name(id).to_string();
        let stats = self
            .uring
            .summary
            .by_op
            .entry(o.op.to_string())
            .or_default();
        stats.add(latency);
        self.kinds.count(id, latency, &b);
        let dev = o.bios.first().map(|x| x.dev);
        let comm = names.get(o.pid);
        let processes = &self.processes;
        crate::analyze::rows::send(&mut self.rows, || crate::analyze::rows::OperationRow {
            id: o.id,
            parent: None,
            waited_for: {
                let mut w: Vec<(u64, u64)> = o
                    .bios
                    .iter()
                    .filter_map(|x| {
                        let (i, c) = clip(x.issued?, x.completed.unwrap_or(end));
                        Some((x.request_id?, c - i))
                    })
                    .collect();
                w.sort_unstable();
                w.dedup_by_key(|x| x.0);
                w
            },
            kind: kind.clone(),
            pid: o.pid,
            process: processes.of(o.pid),
            comm: comm.clone(),
            start_ns: o.start,
            latency_ns: latency,
            dev,
            breakdown: b.clone(),
        });
        if !qualifies(self.kinds.kept_mut(id), self.top, latency, |x| x.latency_ns) {
            return;
        }
        let main_request = main.map(|(ns, m)| Request {
            dev: format!("{},{}", m.dev.major(), m.dev.minor()),
            sector: m.sector,
            bytes: m.bytes,
            class: m.class,
            comm: m.comm.clone(),
            d2c_ns: m.issued.zip(m.completed).map(|(i, c)| c.saturating_sub(i)),
            overlap_ns: ns,
        });
        let how = if o.sq_thread {
            format!("submitted by the SQPOLL thread {comm} ({})", o.pid)
        } else if let Some(p) = o.punted {
            format!(
                "submitted by {comm} ({}), punted to io-wq ({} waiting for a worker)",
                o.pid,
                ms_3dp(first_bio.min(end).saturating_sub(p))
            )
        } else {
            format!("issued inline by {comm} ({})", o.pid)
        };
        let what = match o.fd {
            Some(fd) => format!("{kind} fd {fd}"),
            None => kind.clone(),
        };
        let pct = |ns: u64| ns as f64 * 100.0 / latency.max(1) as f64;
        let summary = match &main_request {
            Some(r) => format!(
                "{:.1} ms {what}: {:.1}% device ({} {} sector {}, {} KiB, D2C {:.1} ms), {:.1}% queued; {how}; user_data {:#x}",
                latency as f64 / 1e6,
                pct(device),
                r.class,
                r.dev,
                r.sector,
                r.bytes / 1024,
                r.d2c_ns.unwrap_or(0) as f64 / 1e6,
                pct(queued),
                o.user_data
            ),
            None => format!(
                "{:.1} ms {what}: no block request of its own ({:.1}% waiting for an io-wq worker); {how}; user_data {:#x}",
                latency as f64 / 1e6,
                pct(io_wq),
                o.user_data
            ),
        };
        let outlier = Outlier {
            kind,
            pid: o.pid,
            comm,
            start_ns: o.start,
            latency_ns: latency,
            percent: percentages(&b, latency),
            breakdown: b,
            // Its thread went on: no wait of its own whose CPU could idle.
            cpu_idle_percent: 0.0,
            held_by: Vec::new(),
            main_request,
            blocked_in: None,
            file: None,
            cache: None,
            summary,
        };
        let list = self.kinds.kept_mut(id);
        keep_largest(list, outlier, self.top, |x| x.latency_ns, |x| x.start_ns);
    }

    /// What the io_uring requests came to, with their latency per opcode.
    pub(super) fn uring_summary(&mut self) -> UringSummary {
        let mut s = std::mem::take(&mut self.uring.summary);
        for c in s.by_op.values_mut() {
            c.summarize();
        }
        s
    }
}

fn ms_3dp(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// The length of the union of `[from, to)` stretches.
fn union_ns(mut v: Vec<(u64, u64)>) -> u64 {
    v.sort_unstable();
    let (mut total, mut cur): (u64, Option<(u64, u64)>) = (0, None);
    for (a, z) in v {
        cur = match cur {
            Some((ca, cz)) if a <= cz => Some((ca, cz.max(z))),
            Some((ca, cz)) => {
                total += cz - ca;
                Some((a, z))
            }
            None => Some((a, z)),
        };
    }
    total + cur.map_or(0, |(a, z)| z - a)
}

#[cfg(test)]
mod tests {
    use super::union_ns;

    #[test]
    fn overlapping_stretches_count_once() {
        assert_eq!(union_ns(vec![]), 0);
        assert_eq!(union_ns(vec![(10, 20), (15, 30), (40, 45)]), 25);
        assert_eq!(union_ns(vec![(40, 45), (10, 20), (20, 25)]), 20);
    }
}

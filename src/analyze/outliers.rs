//! Outliers explained: for the slowest operations (probe operations,
//! syscalls, fsyncs inside the filesystem), where their time went, as parts
//! that add up to the whole: on CPU; runnable, waiting for a CPU (and who
//! held it); blocked while the device worked on a request (by what the
//! request was: journal write, data write, flush, read); blocked while
//! requests waited in the queue; blocked while the journal committed;
//! blocked on something else. And how long the CPU sat idle meanwhile.
//!
//! Streaming: the state of the world (thread states from the scheduler
//! analysis, requests in flight, commits in flight) is piecewise constant
//! between events, so each open operation integrates it lazily, at events
//! that change it. Memory: the operations open now and the requests in
//! flight; the N slowest per kind are kept with their breakdown.

use super::names::ThreadNames;
use super::sched::{SchedAnalysis, ThreadView};
use crate::model::{Action, BlockEvent, Dev, OtherEvent, Rwbs};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a request was, by who queued it and its flags.
fn request_class(comm: &str, rwbs: Rwbs, bytes: u32) -> &'static str {
    let flush = rwbs.has(Rwbs::FLUSH) || rwbs.has(Rwbs::PREFLUSH);
    if flush && (bytes == 0 || !rwbs.has(Rwbs::WRITE)) {
        "flush"
    } else if comm.starts_with("jbd2/") {
        "journal write"
    } else if rwbs.has(Rwbs::WRITE) {
        "data write"
    } else if rwbs.has(Rwbs::READ) {
        "read"
    } else {
        "other request"
    }
}

#[derive(Debug, Serialize, Clone, Default, PartialEq)]
pub struct Breakdown {
    pub on_cpu_ns: u64,
    pub runnable_ns: u64,
    /// Blocked while the device held a request, by the request's class.
    pub device_ns: BTreeMap<&'static str, u64>,
    /// Blocked while requests waited to be issued.
    pub queued_ns: u64,
    /// Blocked while a journal commit ran with no request at the device.
    pub journal_ns: u64,
    /// Blocked or asleep on anything else.
    pub other_wait_ns: u64,
    /// Off CPU while its CPU sat idle.
    pub cpu_idle_ns: u64,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Request {
    pub dev: String,
    pub sector: u64,
    pub bytes: u32,
    pub class: &'static str,
    /// Who queued it.
    pub comm: String,
    /// Issue → complete; absent when not seen.
    pub d2c_ns: Option<u64>,
    /// How long the operation waited while it was at the device.
    pub overlap_ns: u64,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Holder {
    pub pid: u32,
    pub comm: String,
    pub prio: i64,
    pub ns: u64,
}

#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Outlier {
    pub kind: String,
    pub pid: u32,
    pub comm: String,
    pub start_ns: u64,
    pub latency_ns: u64,
    pub breakdown: Breakdown,
    /// The same in percent of the latency (on_cpu, runnable, device,
    /// queued, journal, other_wait; add up to 100).
    pub percent: BTreeMap<&'static str, f64>,
    /// Percent of the off-CPU time during which the CPU was idle.
    pub cpu_idle_percent: f64,
    /// Who held the CPU while it was runnable, longest first.
    pub held_by: Vec<Holder>,
    /// The request it waited for longest.
    pub main_request: Option<Request>,
    /// One line for a person.
    pub summary: String,
}

#[derive(Debug, Serialize, Default)]
pub struct OutliersSummary {
    pub top: usize,
    /// Per kind (`probe fsync`, `syscall fsync`, `ext4_sync_file`, …): the
    /// slowest, slowest first.
    pub by_kind: BTreeMap<String, Vec<Outlier>>,
}

type ReqKey = (Dev, u64);

#[derive(Clone)]
struct InFlight {
    class: &'static str,
    comm: crate::model::Comm,
    bytes: u32,
    issued_at: Option<u64>,
}

struct OpenOp {
    kind: Box<str>,
    pid: u32,
    start: u64,
    last: u64,
    dev: Option<Dev>,
    b: Breakdown,
    held: FxHashMap<u32, (u64, crate::model::Comm, i64)>,
    waited_on: FxHashMap<ReqKey, (u64, u64)>, // key → (ns, issued_at)
}

#[derive(Default)]
pub struct OutlierAnalysis {
    top: usize,
    open: Vec<OpenOp>,
    queued: FxHashMap<ReqKey, InFlight>,
    /// Per device: requests queued (not issued) and issued.
    waiting: FxHashMap<Dev, (u32, u32)>,
    commits: FxHashMap<Dev, u32>,
    /// Classes of completed requests still referenced by open operations.
    done: FxHashMap<ReqKey, (InFlight, u64)>,
    by_kind: BTreeMap<String, Vec<Outlier>>,
}

impl OutlierAnalysis {
    pub fn new(top: usize) -> OutlierAnalysis {
        OutlierAnalysis {
            top,
            ..Default::default()
        }
    }

    /// Integrates every open operation up to `ts` with the world as it is
    /// (before the event at `ts` changes it).
    pub fn advance(&mut self, ts: u64, sched: &SchedAnalysis) {
        if self.open.is_empty() {
            return;
        }
        for op in &mut self.open {
            let dt = ts.saturating_sub(op.last);
            if dt == 0 {
                continue;
            }
            op.last = ts;
            let (view, cpu) = sched.view(op.pid);
            let cpu_now = cpu.and_then(|c| sched.on_cpu(c));
            let cpu_idle = cpu_now.is_some_and(|(p, _, _)| p == 0);
            match view {
                ThreadView::Running | ThreadView::Unknown => op.b.on_cpu_ns += dt,
                // A CPU does not idle while a task waits on its runqueue:
                // the switch-in went unseen (see the scheduler analysis).
                ThreadView::Runnable if cpu_idle => op.b.on_cpu_ns += dt,
                ThreadView::Runnable => {
                    op.b.runnable_ns += dt;
                    if let Some((p, comm, prio)) = cpu_now {
                        let h = op.held.entry(p).or_insert((0, comm, prio));
                        h.0 += dt;
                    }
                }
                // Asleep by choice (a pipe, a futex, poll): not I/O.
                ThreadView::Off(state) if state != 'D' => {
                    if cpu_idle {
                        op.b.cpu_idle_ns += dt;
                    }
                    op.b.other_wait_ns += dt;
                }
                ThreadView::Off(_) => {
                    if cpu_idle {
                        op.b.cpu_idle_ns += dt;
                    }
                    let (queued, issued) = match op.dev {
                        Some(d) => self.waiting.get(&d).copied().unwrap_or_default(),
                        None => self
                            .waiting
                            .values()
                            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)),
                    };
                    if issued > 0 {
                        // The oldest request at the device is the one waited for.
                        let oldest = self
                            .queued
                            .iter()
                            .filter(|(k, r)| {
                                r.issued_at.is_some() && op.dev.is_none_or(|d| d == k.0)
                            })
                            .min_by_key(|(k, r)| (r.issued_at, **k));
                        if let Some((k, r)) = oldest {
                            *op.b.device_ns.entry(r.class).or_default() += dt;
                            let w = op.waited_on.entry(*k).or_insert((0, r.issued_at.unwrap()));
                            w.0 += dt;
                        }
                    } else if queued > 0 {
                        op.b.queued_ns += dt;
                    } else if op.dev.map_or(self.commits.values().any(|&n| n > 0), |d| {
                        self.commits.get(&d).is_some_and(|&n| n > 0)
                    }) {
                        op.b.journal_ns += dt;
                    } else {
                        op.b.other_wait_ns += dt;
                    }
                }
            }
        }
    }

    pub fn block(&mut self, b: &BlockEvent) {
        let key = (b.dev, b.sector);
        match b.action {
            Action::Queue => {
                if self.queued.contains_key(&key) {
                    return;
                }
                self.queued.insert(
                    key,
                    InFlight {
                        class: request_class(b.comm.as_str(), b.rwbs, b.bytes),
                        comm: b.comm,
                        bytes: b.bytes,
                        issued_at: None,
                    },
                );
                self.waiting.entry(b.dev).or_default().0 += 1;
            }
            Action::Issue => {
                let r = self.queued.entry(key).or_insert_with(|| InFlight {
                    class: request_class(b.comm.as_str(), b.rwbs, b.bytes),
                    comm: b.comm,
                    bytes: b.bytes,
                    issued_at: None,
                });
                if r.issued_at.is_none() {
                    r.issued_at = Some(b.ts);
                    let w = self.waiting.entry(b.dev).or_default();
                    w.0 = w.0.saturating_sub(1);
                    w.1 += 1;
                }
            }
            Action::Complete => {
                if let Some(r) = self.queued.remove(&key) {
                    let w = self.waiting.entry(b.dev).or_default();
                    if r.issued_at.is_some() {
                        w.1 = w.1.saturating_sub(1);
                    } else {
                        w.0 = w.0.saturating_sub(1);
                    }
                    if self.open.iter().any(|o| o.waited_on.contains_key(&key)) {
                        self.done.insert(key, (r, b.ts));
                    }
                }
            }
            Action::BackMerge | Action::FrontMerge => {
                // Merged into a request already queued: not one of its own.
                if self.queued.remove(&key).is_some() {
                    let w = self.waiting.entry(b.dev).or_default();
                    w.0 = w.0.saturating_sub(1);
                }
                // The request now starts at this bio.
                if b.action == Action::FrontMerge {
                    let old = (b.dev, b.sector + (b.bytes as u64 >> 9));
                    if let Some(r) = self.queued.remove(&old) {
                        self.queued.insert(key, r);
                    }
                }
            }
            Action::Requeue => {
                if let Some(r) = self.queued.get_mut(&key) {
                    if r.issued_at.take().is_some() {
                        let w = self.waiting.entry(b.dev).or_default();
                        w.1 = w.1.saturating_sub(1);
                        w.0 += 1;
                    }
                }
            }
            _ => {}
        }
    }

    /// Operation boundaries and journal commits.
    pub fn add(&mut self, e: &OtherEvent, names: &ThreadNames) {
        let short = e.short_name();
        match short {
            "jbd2_start_commit" | "jbd2_end_commit" => {
                let d = Dev(e.fields.int("dev").unwrap_or(0) as u32);
                let n = self.commits.entry(d).or_default();
                *n = if short == "jbd2_start_commit" {
                    *n + 1
                } else {
                    n.saturating_sub(1)
                };
            }
            "ext4_sync_file_enter" => {
                let d = Dev(e.fields.int("dev").unwrap_or(0) as u32);
                self.begin("ext4_sync_file".into(), e, Some(d), names);
            }
            "ext4_sync_file_exit" => self.end("ext4_sync_file", e, names),
            "print" => {
                let Some(rest) = e
                    .fields
                    .str("buf")
                    .and_then(|b| b.trim_end().strip_prefix("iosleuth: "))
                else {
                    return;
                };
                let w: Vec<&str> = rest.split_whitespace().collect();
                if w.len() >= 3 {
                    let kind = format!("probe {}", w[0]);
                    match w[2] {
                        "begin" => self.begin(kind.into(), e, None, names),
                        "end" => self.end(&kind, e, names),
                        _ => {}
                    }
                }
            }
            _ => {
                if let Some(n) = short.strip_prefix("sys_enter_") {
                    self.begin(format!("syscall {n}").into(), e, None, names);
                } else if let Some(n) = short.strip_prefix("sys_exit_") {
                    self.end(&format!("syscall {n}"), e, names);
                }
            }
        }
    }

    fn begin(&mut self, kind: Box<str>, e: &OtherEvent, dev: Option<Dev>, names: &ThreadNames) {
        if self.top == 0 || !names.keeps(e.pid) {
            return;
        }
        // A thread in the same kind of operation twice: the first one's end
        // was lost.
        self.open.retain(|o| !(o.pid == e.pid && o.kind == kind));
        // Operations inside inherit the device their parent learnt.
        let dev = dev.or_else(|| {
            self.open
                .iter()
                .rev()
                .find(|o| o.pid == e.pid)
                .and_then(|o| o.dev)
        });
        self.open.push(OpenOp {
            kind,
            pid: e.pid,
            start: e.ts,
            last: e.ts,
            dev,
            b: Breakdown::default(),
            held: FxHashMap::default(),
            waited_on: FxHashMap::default(),
        });
        // An fsync tells its enclosing operations which device they wait on.
        if let Some(d) = dev {
            for o in self.open.iter_mut().filter(|o| o.pid == e.pid) {
                o.dev.get_or_insert(d);
            }
        }
    }

    fn end(&mut self, kind: &str, e: &OtherEvent, names: &ThreadNames) {
        let Some(i) = self
            .open
            .iter()
            .rposition(|o| o.pid == e.pid && &*o.kind == kind)
        else {
            return;
        };
        let op = self.open.swap_remove(i);
        let latency = e.ts.saturating_sub(op.start);
        let list = self.by_kind.entry(op.kind.to_string()).or_default();
        let qualifies =
            list.len() < self.top || list.last().is_some_and(|o| o.latency_ns < latency);
        if qualifies {
            let o = self.explain(op, latency, names);
            let list = self.by_kind.entry(o.kind.clone()).or_default();
            list.push(o);
            list.sort_by(|a, b| {
                b.latency_ns
                    .cmp(&a.latency_ns)
                    .then(a.start_ns.cmp(&b.start_ns))
            });
            list.truncate(self.top);
        }
        let open = &self.open;
        self.done
            .retain(|k, _| open.iter().any(|o| o.waited_on.contains_key(k)));
    }

    fn explain(&self, op: OpenOp, latency: u64, names: &ThreadNames) -> Outlier {
        let b = op.b;
        let device: u64 = b.device_ns.values().sum();
        let off = device + b.queued_ns + b.journal_ns + b.other_wait_ns;
        let pct = |x: u64| {
            if latency == 0 {
                0.0
            } else {
                (x as f64 * 1000.0 / latency as f64).round() / 10.0
            }
        };
        let mut percent = BTreeMap::new();
        percent.insert("on_cpu", pct(b.on_cpu_ns));
        percent.insert("runnable", pct(b.runnable_ns));
        percent.insert("device", pct(device));
        percent.insert("queued", pct(b.queued_ns));
        percent.insert("journal", pct(b.journal_ns));
        percent.insert("other_wait", pct(b.other_wait_ns));
        let cpu_idle_percent = if off == 0 {
            0.0
        } else {
            (b.cpu_idle_ns as f64 * 1000.0 / off as f64).round() / 10.0
        };
        let mut held_by: Vec<Holder> = op
            .held
            .iter()
            .map(|(&pid, &(ns, comm, prio))| Holder {
                pid,
                comm: comm.as_str().to_string(),
                prio,
                ns,
            })
            .collect();
        held_by.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.pid.cmp(&b.pid)));
        held_by.truncate(5);
        let main_request = op
            .waited_on
            .iter()
            .max_by_key(|(k, (ns, _))| (*ns, std::cmp::Reverse(**k)))
            .map(|(k, &(ns, issued))| {
                let done = self
                    .done
                    .get(k)
                    .filter(|(r, _)| r.issued_at == Some(issued));
                let (r, completed) = match (done, self.queued.get(k)) {
                    (Some((r, at)), _) => (r.clone(), Some(*at)),
                    (None, Some(r)) => (r.clone(), None),
                    (None, None) => (
                        InFlight {
                            class: "request",
                            comm: Default::default(),
                            bytes: 0,
                            issued_at: Some(issued),
                        },
                        None,
                    ),
                };
                Request {
                    dev: format!("{},{}", k.0.major(), k.0.minor()),
                    sector: k.1,
                    bytes: r.bytes,
                    class: r.class,
                    comm: r.comm.as_str().to_string(),
                    d2c_ns: completed.map(|c| c.saturating_sub(issued)),
                    overlap_ns: ns,
                }
            });
        let comm = names.get(op.pid);
        let summary = summarize(
            &op.kind,
            latency,
            &percent,
            cpu_idle_percent,
            &b,
            &held_by,
            &main_request,
        );
        Outlier {
            kind: op.kind.to_string(),
            pid: op.pid,
            comm,
            start_ns: op.start,
            latency_ns: latency,
            breakdown: b,
            percent,
            cpu_idle_percent,
            held_by,
            main_request,
            summary,
        }
    }

    pub fn finish(mut self, names: &ThreadNames) -> OutliersSummary {
        for o in self.by_kind.values_mut().flatten() {
            if o.comm.is_empty() {
                o.comm = names.get(o.pid);
            }
        }
        OutliersSummary {
            top: self.top,
            by_kind: self.by_kind,
        }
    }
}

/// `151.4 ms probe fsync: 99.6% device (journal write 7,0 +2048, 4 KiB by
/// jbd2/loop0-8, D2C 150.3 ms), CPU idle 99%`.
fn summarize(
    kind: &str,
    latency: u64,
    percent: &BTreeMap<&'static str, f64>,
    cpu_idle: f64,
    b: &Breakdown,
    held_by: &[Holder],
    req: &Option<Request>,
) -> String {
    let mut parts: Vec<(f64, String)> = Vec::new();
    for (&k, &p) in percent {
        if p < 1.0 {
            continue;
        }
        let what = match k {
            "device" => {
                let class = b
                    .device_ns
                    .iter()
                    .max_by_key(|(_, ns)| **ns)
                    .map(|(c, _)| *c)
                    .unwrap_or("request");
                match req {
                    Some(r) => format!(
                        "device ({} {} sector {}, {} KiB by {}{})",
                        class,
                        r.dev,
                        r.sector,
                        r.bytes / 1024,
                        if r.comm.is_empty() { "?" } else { &r.comm },
                        r.d2c_ns
                            .map(|d| format!(", D2C {:.1} ms", d as f64 / 1e6))
                            .unwrap_or_default()
                    ),
                    None => format!("device ({class})"),
                }
            }
            "runnable" => match held_by.first() {
                Some(h) => format!(
                    "runnable (CPU held by {} {} prio {}{})",
                    h.comm,
                    h.pid,
                    h.prio,
                    if h.prio < 100 { ", RT" } else { "" }
                ),
                None => "runnable".to_string(),
            },
            "on_cpu" => "on CPU".to_string(),
            "queued" => "queued before the device".to_string(),
            "journal" => "journal commit".to_string(),
            _ => "other wait".to_string(),
        };
        parts.push((p, format!("{p:.1}% {what}")));
    }
    parts.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut s = format!(
        "{:.1} ms {kind}: {}",
        latency as f64 / 1e6,
        parts
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let off = 100.0
        - percent.get("on_cpu").copied().unwrap_or(0.0)
        - percent.get("runnable").copied().unwrap_or(0.0);
    if off >= 1.0 {
        s.push_str(&format!("; CPU idle {cpu_idle:.0}% of the wait"));
    }
    s
}

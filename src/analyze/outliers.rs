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
use super::top::{keep_largest, qualifies};
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

/// Which open operations an event may change the situation of; between
/// such events each operation's situation is constant, so only these are
/// brought up to date (the rest integrate later, lazily).
#[derive(Clone, Copy, Debug)]
pub enum Touch {
    /// These threads' states, and whoever waits on or for this CPU.
    Threads { a: u32, b: u32, cpu: Option<u32> },
    /// Commits or checkpoints: every blocked thread.
    Blocked,
    /// A request on this device: threads blocked on it (or on any device),
    /// only if the event changes what their device looks like.
    Device(Dev),
}

pub fn touch_of(e: &OtherEvent) -> Option<Touch> {
    let f = &e.fields;
    let pid = |k: &str| f.int(k).map(|p| p as u32).unwrap_or(u32::MAX);
    Some(match e.short_name() {
        "sched_switch" => Touch::Threads {
            a: pid("prev_pid"),
            b: pid("next_pid"),
            cpu: Some(e.cpu),
        },
        "sched_waking" | "sched_wakeup" | "sched_wakeup_new" | "sched_migrate_task" => {
            Touch::Threads {
                a: pid("pid"),
                b: u32::MAX,
                cpu: None,
            }
        }
        "jbd2_start_commit" | "jbd2_end_commit" | "jbd2_checkpoint" => Touch::Blocked,
        _ => return None,
    })
}

pub fn touch_of_block(a: Action, dev: Dev) -> Option<Touch> {
    matches!(
        a,
        Action::Queue
            | Action::Issue
            | Action::Complete
            | Action::BackMerge
            | Action::FrontMerge
            | Action::Requeue
    )
    .then_some(Touch::Device(dev))
}

fn touched(op: &OpenOp, t: &Touch) -> bool {
    match *t {
        Touch::Threads { a, b, cpu } => {
            op.pid == a
                || op.pid == b
                || (cpu.is_some()
                    && op.cpu == cpu
                    && match op.view {
                        // Who holds the CPU it waits for.
                        ThreadView::Runnable => true,
                        // Asleep: only whether its CPU idles, which after
                        // a switch is whether `b` is the idle task.
                        ThreadView::Off(_) => op.cpu_now.is_some_and(|x| x.0 == 0) != (b == 0),
                        ThreadView::Running | ThreadView::Unknown => false,
                    })
        }
        Touch::Blocked => op.view == ThreadView::Off('D'),
        Touch::Device(d) => op.view == ThreadView::Off('D') && op.dev.is_none_or(|x| x == d),
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
    /// Blocked while a thread checkpointed the journal (waiting for
    /// journal space); includes the checkpoint's own device time.
    pub journal_space_ns: u64,
    /// The part of `device_ns` outside checkpoints.
    pub device_only_ns: u64,
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
    /// Per kind, every operation's time added up, with its breakdown.
    pub totals: BTreeMap<String, KindTotal>,
}

type ReqKey = (Dev, u64);

#[derive(Clone)]
struct InFlight {
    class: &'static str,
    comm: crate::model::Comm,
    bytes: u32,
    issued_at: Option<u64>,
}

impl InFlight {
    /// A request as its first event shows it, not yet issued.
    fn of(b: &BlockEvent) -> InFlight {
        InFlight {
            class: request_class(b.comm.as_str(), b.rwbs, b.bytes),
            comm: b.comm,
            bytes: b.bytes,
            issued_at: None,
        }
    }
}

struct OpenOp {
    kind: Box<str>,
    pid: u32,
    start: u64,
    last: u64,
    dev: Option<Dev>,
    b: Breakdown,
    held: FxHashMap<u32, (u64, crate::model::Comm, i64)>,
    /// Time waited per request, by key and issue time (a flush after a
    /// flush sits at the same sector 0: another request).
    waited_on: FxHashMap<(ReqKey, u64), u64>,
    /// The thread's state, CPU and who runs there, as of `last`.
    view: ThreadView,
    cpu: Option<u32>,
    cpu_now: Option<(u32, crate::model::Comm, i64)>,
    /// The request waited on lately, its issue time and the time so far
    /// (moved into `waited_on` when another one comes).
    cur_wait: Option<(ReqKey, u64, u64)>,
    /// Device time by class while open (the class names are static: found
    /// by address, which is cheap on this hot path).
    device: Vec<(&'static str, u64)>,
}

impl OpenOp {
    fn waited_for(&self, k: &ReqKey, issued: u64) -> bool {
        self.cur_wait.is_some_and(|c| c.0 == *k && c.1 == issued)
            || self.waited_on.contains_key(&(*k, issued))
    }

    fn refresh(&mut self, sched: &SchedAnalysis) {
        let (view, cpu) = sched.view(self.pid);
        self.view = view;
        self.cpu = cpu;
        self.cpu_now = cpu.and_then(|c| sched.on_cpu(c));
    }

    /// Moves the hot-path tallies into the breakdown.
    fn settle(&mut self) {
        if let Some((k, issued, ns)) = self.cur_wait.take() {
            *self.waited_on.entry((k, issued)).or_default() += ns;
        }
        for (class, ns) in self.device.drain(..) {
            *self.b.device_ns.entry(class).or_default() += ns;
        }
    }
}

#[derive(Default)]
struct DevState {
    queued: u32,
    issued: std::collections::BTreeSet<(u64, u64)>,
}

/// The world as one open operation's device sees it, for a stretch.
#[derive(Clone, Copy, PartialEq)]
struct DevView {
    queued: bool,
    /// The oldest request at the device, and its class.
    oldest: Option<(ReqKey, u64, &'static str)>,
    commit: bool,
    checkpoint: bool,
}

#[derive(Debug, Serialize, Clone, Default)]
pub struct KindTotal {
    pub count: u64,
    pub latency_ns: u64,
    pub breakdown: Breakdown,
    /// Of all the time these operations took, in percent.
    pub percent: BTreeMap<&'static str, f64>,
}

#[derive(Default)]
pub struct OutlierAnalysis {
    top: usize,
    open: Vec<OpenOp>,
    /// Before a block event: the views of the devices blocked operations
    /// wait on, to see afterwards whether the event changed them.
    pending_views: Vec<(Option<Dev>, DevView)>,
    queued: FxHashMap<ReqKey, InFlight>,
    /// Per device: requests queued (not issued), and the issued ones by
    /// issue time (the oldest is the one a waiter waits for).
    devs: FxHashMap<Dev, DevState>,
    commits: FxHashMap<Dev, u32>,
    /// Threads checkpointing a journal (from `jbd2_checkpoint` to the end
    /// of their syscall): others on that device wait for journal space.
    checkpointing: FxHashMap<u32, Dev>,
    totals: BTreeMap<String, KindTotal>,
    /// Completed requests still referenced by open operations, by key and
    /// issue time: flushes all sit at sector 0, one after another.
    done: FxHashMap<(ReqKey, u64), (InFlight, u64)>,
    by_kind: BTreeMap<String, Vec<Outlier>>,
}

impl OutlierAnalysis {
    pub fn new(top: usize) -> OutlierAnalysis {
        OutlierAnalysis {
            top,
            ..Default::default()
        }
    }

    /// What waiting on `dev` (None: any device) means right now.
    fn dev_view(&self, dev: Option<Dev>) -> DevView {
        let one = |d: &Dev, st: &DevState| {
            let oldest = st.issued.iter().next().map(|&(at, sector)| {
                let k = (*d, sector);
                let class = self.queued.get(&k).map(|r| r.class).unwrap_or("request");
                (k, at, class)
            });
            (st.queued > 0, oldest)
        };
        let (queued, oldest) = match dev {
            Some(d) => self.devs.get(&d).map(|st| one(&d, st)).unwrap_or_default(),
            None => self.devs.iter().map(|(d, st)| one(d, st)).fold(
                (false, None::<(ReqKey, u64, &'static str)>),
                |a, b| {
                    let oldest = match (a.1, b.1) {
                        (Some(x), Some(y)) => Some(if (y.1, y.0) < (x.1, x.0) { y } else { x }),
                        (x, y) => x.or(y),
                    };
                    (a.0 || b.0, oldest)
                },
            ),
        };
        let commit = match dev {
            Some(d) => self.commits.get(&d).is_some_and(|&n| n > 0),
            None => self.commits.values().any(|&n| n > 0),
        };
        let checkpoint = self
            .checkpointing
            .values()
            .any(|d| dev.is_none_or(|x| x == *d));
        DevView {
            queued,
            oldest,
            commit,
            checkpoint,
        }
    }

    /// Before an event that may change the situation of some operations:
    /// brings those up to `ts`, with the situation that held until now.
    pub fn before(&mut self, ts: u64, t: &Touch) {
        if self.open.is_empty() {
            return;
        }
        if let Touch::Device(_) = t {
            // Most block events leave the oldest request at the device as
            // it was: remember the views, integrate only if they change.
            self.pending_views.clear();
            for i in 0..self.open.len() {
                let dev = self.open[i].dev;
                if touched(&self.open[i], t) && !self.pending_views.iter().any(|(d, _)| *d == dev) {
                    let v = self.dev_view(dev);
                    self.pending_views.push((dev, v));
                }
            }
            return;
        }
        let mut views: Vec<(Option<Dev>, DevView)> = Vec::new();
        for i in 0..self.open.len() {
            if !touched(&self.open[i], t) {
                continue;
            }
            let dev = self.open[i].dev;
            let view = match views.iter().find(|(d, _)| *d == dev) {
                Some((_, v)) => *v,
                None => {
                    let v = self.dev_view(dev);
                    views.push((dev, v));
                    v
                }
            };
            integrate(&mut self.open[i], ts, &view);
        }
    }

    /// After a block event: the blocked operations whose device view it
    /// changed are integrated up to it, with the view that held until now.
    pub fn after_block(&mut self, ts: u64) {
        for i in 0..self.pending_views.len() {
            let (dev, old) = self.pending_views[i];
            if self.dev_view(dev) == old {
                continue;
            }
            for op in self
                .open
                .iter_mut()
                .filter(|o| o.dev == dev && o.view == ThreadView::Off('D'))
            {
                integrate(op, ts, &old);
            }
        }
        self.pending_views.clear();
    }

    /// After the event: the touched operations learn their thread's new
    /// state.
    pub fn after(&mut self, t: &Touch, sched: &SchedAnalysis) {
        if let Touch::Threads { .. } = t {
            for op in self.open.iter_mut().filter(|o| touched(o, t)) {
                op.refresh(sched);
            }
        }
    }

    /// Integrates one operation (at its end).
    fn advance_one(&mut self, i: usize, ts: u64) {
        let view = self.dev_view(self.open[i].dev);
        integrate(&mut self.open[i], ts, &view);
    }

    /// A request leaves: out of the queue, or off the device.
    fn forget(&mut self, key: ReqKey) -> Option<InFlight> {
        let r = self.queued.remove(&key)?;
        let d = self.devs.entry(key.0).or_default();
        match r.issued_at {
            Some(at) => {
                d.issued.remove(&(at, key.1));
            }
            None => d.queued = d.queued.saturating_sub(1),
        }
        Some(r)
    }

    pub fn block(&mut self, b: &BlockEvent) {
        let key = (b.dev, b.sector);
        match b.action {
            Action::Queue => {
                if self.queued.contains_key(&key) {
                    return;
                }
                self.queued.insert(key, InFlight::of(b));
                self.devs.entry(b.dev).or_default().queued += 1;
            }
            Action::Issue => {
                let r = self.queued.entry(key).or_insert_with(|| InFlight::of(b));
                if r.issued_at.is_none() {
                    r.issued_at = Some(b.ts);
                    let d = self.devs.entry(b.dev).or_default();
                    d.queued = d.queued.saturating_sub(1);
                    d.issued.insert((b.ts, b.sector));
                }
            }
            Action::Complete => {
                if let Some(r) = self.forget(key) {
                    if let Some(at) = r.issued_at {
                        // Waited for so far, or being waited for right now
                        // by operations integrated only after this event.
                        let now = self
                            .pending_views
                            .iter()
                            .any(|(_, v)| v.oldest.is_some_and(|(k, i, _)| k == key && i == at));
                        if now || self.open.iter().any(|o| o.waited_for(&key, at)) {
                            self.done.insert((key, at), (r, b.ts));
                        }
                    }
                }
            }
            Action::BackMerge | Action::FrontMerge => {
                // Merged into a request already queued: not one of its own.
                self.forget(key);
                // The request now starts at this bio.
                if b.action == Action::FrontMerge {
                    let old = (b.dev, b.sector + (b.bytes as u64 >> 9));
                    if let Some(r) = self.queued.remove(&old) {
                        if let Some(at) = r.issued_at {
                            let d = self.devs.entry(b.dev).or_default();
                            d.issued.remove(&(at, old.1));
                            d.issued.insert((at, b.sector));
                        }
                        self.queued.insert(key, r);
                    }
                }
            }
            Action::Requeue => {
                if let Some(r) = self.queued.get_mut(&key) {
                    if let Some(at) = r.issued_at.take() {
                        let d = self.devs.entry(b.dev).or_default();
                        d.issued.remove(&(at, b.sector));
                        d.queued += 1;
                    }
                }
            }
            _ => {}
        }
    }

    /// Operation boundaries and journal commits.
    pub fn add(&mut self, e: &OtherEvent, names: &ThreadNames, sched: &SchedAnalysis) {
        let short = e.short_name();
        match short {
            "jbd2_checkpoint" => {
                let d = Dev(e.fields.int("dev").unwrap_or(0) as u32);
                self.checkpointing.insert(e.pid, d);
            }
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
                self.begin("ext4_sync_file".into(), e, Some(d), names, sched);
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
                        "begin" => self.begin(kind.into(), e, None, names, sched),
                        "end" => self.end(&kind, e, names),
                        _ => {}
                    }
                }
            }
            _ => {
                if let Some(n) = short.strip_prefix("sys_enter_") {
                    self.begin(format!("syscall {n}").into(), e, None, names, sched);
                } else if let Some(n) = short.strip_prefix("sys_exit_") {
                    self.end(&format!("syscall {n}"), e, names);
                    // Its checkpoint, if it ran one, is over with the call.
                    if self.checkpointing.contains_key(&e.pid) {
                        self.before(e.ts, &Touch::Blocked);
                        self.checkpointing.remove(&e.pid);
                    }
                }
            }
        }
    }

    fn begin(
        &mut self,
        kind: Box<str>,
        e: &OtherEvent,
        dev: Option<Dev>,
        names: &ThreadNames,
        sched: &SchedAnalysis,
    ) {
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
            view: ThreadView::Unknown,
            cpu: None,
            cpu_now: None,
            cur_wait: None,
            device: Vec::new(),
        });
        if let Some(op) = self.open.last_mut() {
            op.refresh(sched);
        }
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
        self.advance_one(i, e.ts);
        let mut op = self.open.swap_remove(i);
        op.settle();
        let latency = e.ts.saturating_sub(op.start);
        if !self.totals.contains_key(&*op.kind) {
            self.totals
                .insert(op.kind.to_string(), KindTotal::default());
        }
        if let Some(t) = self.totals.get_mut(&*op.kind) {
            t.count += 1;
            t.latency_ns += latency;
            add_breakdown(&mut t.breakdown, &op.b);
        }
        // Completed requests only this operation still referred to: once
        // it is explained they can go. (Looking at its own waits, not at
        // every kept request, keeps this cheap with many threads.)
        let open = &self.open;
        let unreferenced: Vec<(ReqKey, u64)> = op
            .waited_on
            .keys()
            .filter(|k| self.done.contains_key(*k))
            .filter(|(k, at)| !open.iter().any(|o| o.waited_for(k, *at)))
            .copied()
            .collect();
        if !self.by_kind.contains_key(&*op.kind) {
            self.by_kind.insert(op.kind.to_string(), Vec::new());
        }
        let qualifies_now = self
            .by_kind
            .get(&*op.kind)
            .is_some_and(|list| qualifies(list, self.top, latency, |o| o.latency_ns));
        if qualifies_now {
            let o = self.explain(op, latency, names);
            let list = self.by_kind.entry(o.kind.clone()).or_default();
            keep_largest(list, o, self.top, |o| o.latency_ns, |o| o.start_ns);
        }
        for k in unreferenced {
            self.done.remove(&k);
        }
        if self.open.is_empty() {
            self.done.clear();
        }
    }

    fn explain(&self, op: OpenOp, latency: u64, names: &ThreadNames) -> Outlier {
        let b = op.b;
        let percent = percentages(&b, latency);
        let off =
            b.device_only_ns + b.journal_space_ns + b.queued_ns + b.journal_ns + b.other_wait_ns;
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
            .max_by_key(|(k, ns)| (**ns, std::cmp::Reverse(**k)))
            .map(|(&(k, issued), &ns)| {
                let done = self.done.get(&(k, issued));
                // Still at the device (the same request, not a later one
                // at that sector).
                let still = self.queued.get(&k).filter(|r| r.issued_at == Some(issued));
                let (r, completed) = match (done, still) {
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
        for t in self.totals.values_mut() {
            t.percent = percentages(&t.breakdown, t.latency_ns);
        }
        for o in self.by_kind.values_mut().flatten() {
            if o.comm.is_empty() {
                o.comm = names.get(o.pid);
            }
        }
        OutliersSummary {
            top: self.top,
            by_kind: self.by_kind,
            totals: self.totals,
        }
    }
}

fn add_breakdown(to: &mut Breakdown, b: &Breakdown) {
    to.on_cpu_ns += b.on_cpu_ns;
    to.runnable_ns += b.runnable_ns;
    for (k, v) in &b.device_ns {
        *to.device_ns.entry(k).or_default() += v;
    }
    to.queued_ns += b.queued_ns;
    to.journal_space_ns += b.journal_space_ns;
    to.device_only_ns += b.device_only_ns;
    to.journal_ns += b.journal_ns;
    to.other_wait_ns += b.other_wait_ns;
    to.cpu_idle_ns += b.cpu_idle_ns;
}

/// The parts of `latency` in percent, adding up to 100: on_cpu, runnable,
/// device (outside checkpoints), journal_space, queued, journal,
/// other_wait.
fn percentages(b: &Breakdown, latency: u64) -> BTreeMap<&'static str, f64> {
    let pct = |x: u64| {
        if latency == 0 {
            0.0
        } else {
            (x as f64 * 1000.0 / latency as f64).round() / 10.0
        }
    };
    BTreeMap::from([
        ("on_cpu", pct(b.on_cpu_ns)),
        ("runnable", pct(b.runnable_ns)),
        ("device", pct(b.device_only_ns)),
        ("journal_space", pct(b.journal_space_ns)),
        ("queued", pct(b.queued_ns)),
        ("journal", pct(b.journal_ns)),
        ("other_wait", pct(b.other_wait_ns)),
    ])
}

/// Adds the stretch since the operation's last update, classified by the
/// thread's state and, when it is blocked, by what its device is doing.
fn integrate(op: &mut OpenOp, ts: u64, dev: &DevView) {
    let dt = ts.saturating_sub(op.last);
    if dt == 0 {
        return;
    }
    op.last = ts;
    let (view, cpu_now) = (op.view, op.cpu_now);
    let cpu_idle = cpu_now.is_some_and(|(p, _, _)| p == 0);
    let b = &mut op.b;
    match view {
        ThreadView::Running | ThreadView::Unknown => b.on_cpu_ns += dt,
        // A CPU does not idle while a task waits on its runqueue: the
        // switch-in went unseen (see the scheduler analysis).
        ThreadView::Runnable if cpu_idle => b.on_cpu_ns += dt,
        ThreadView::Runnable => {
            b.runnable_ns += dt;
            if let Some((p, comm, prio)) = cpu_now {
                op.held.entry(p).or_insert((0, comm, prio)).0 += dt;
            }
        }
        // Asleep by choice (a pipe, a futex, poll): not I/O.
        ThreadView::Off(state) if state != 'D' => {
            if cpu_idle {
                b.cpu_idle_ns += dt;
            }
            b.other_wait_ns += dt;
        }
        ThreadView::Off(_) => {
            if cpu_idle {
                b.cpu_idle_ns += dt;
            }
            if let Some((k, issued, class)) = dev.oldest {
                match op.device.iter_mut().find(|(c, _)| std::ptr::eq(*c, class)) {
                    Some(x) => x.1 += dt,
                    None => op.device.push((class, dt)),
                }
                match &mut op.cur_wait {
                    Some((cur, at, ns)) if *cur == k && *at == issued => *ns += dt,
                    cur => {
                        if let Some((k0, i0, ns0)) = cur.replace((k, issued, dt)) {
                            *op.waited_on.entry((k0, i0)).or_default() += ns0;
                        }
                    }
                }
            }
            if dev.checkpoint {
                // Blocked while the journal is being checkpointed: its
                // writes, or the checkpoint lock, are what it waits for.
                b.journal_space_ns += dt;
            } else if dev.oldest.is_some() {
                b.device_only_ns += dt;
            } else if dev.queued {
                b.queued_ns += dt;
            } else if dev.commit {
                b.journal_ns += dt;
            } else {
                b.other_wait_ns += dt;
            }
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
            "journal_space" => "waiting for journal space (checkpoint)".to_string(),
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

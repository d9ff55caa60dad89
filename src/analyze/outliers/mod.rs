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
//!
//! The pieces:
//! - `touch`: which open operations an event may concern;
//! - `op`: one open operation's state, and `integrate`, which classifies a
//!   stretch of its time;
//! - `inflight`: requests in flight per device, and what waiting on a
//!   device means at a moment (`DevView`);
//! - `boundaries`: operations beginning and ending, journal commits and
//!   checkpoints;
//! - `explain`: an ended operation as an `Outlier` with its summary line;
//! - `summary`: the reported types and the arithmetic on breakdowns;
//! - `workload`: the workload's time, which findings take shares of;
//! - here: the analysis' state and the hooks around each event
//!   (`block_event`, `trace_event`: the only place their order is written)
//!   that integrate the operations it touches.

mod boundaries;
mod explain;
mod fault;
mod inflight;
mod issued;
mod kinds;
mod op;
mod open_ops;
mod summary;
mod touch;
mod uring;
mod workload;

pub(crate) use fault::file_page;
pub use fault::{FaultSummary, FilePage};
pub use summary::{add_breakdown, describe_part, Breakdown, Holder, Outlier, OutliersSummary};
use touch::{touch_of, touch_of_block, Touch};
pub use uring::UringSummary;
pub use workload::{workload_kinds, workload_time, WorkloadTime};

use super::names::ThreadNames;
use super::sched::{SchedAnalysis, ThreadView};
use crate::model::{Action, BlockEvent, Dev, TraceEvent};
use inflight::{DevState, DevView, InFlight, ReqKey};
use op::{integrate, IdleClocks, OpenOp, ThreadNow};
use rustc_hash::FxHashMap;
use summary::percentages;

/// The streaming state: open operations, requests and commits in flight,
/// and what has been kept of the operations that ended.
#[derive(Default)]
pub struct OutlierAnalysis {
    top: usize,
    open: open_ops::OpenOps,
    /// The operations the event at hand touches (scratch).
    touched_now: Vec<u32>,
    /// Before a block event: the views of the devices blocked operations
    /// wait on, to see afterwards whether the event changed them.
    pending_views: Vec<(Option<Dev>, DevView)>,
    /// The device views of the operations the event at hand touches
    /// (scratch: a vector made per event was an allocation per event).
    touched_views: Vec<(Option<Dev>, DevView)>,
    queued: FxHashMap<ReqKey, InFlight>,
    /// Per device: requests queued (not issued), and the issued ones by
    /// issue time (the oldest is the one a waiter waits for).
    devs: FxHashMap<Dev, DevState>,
    commits: FxHashMap<Dev, u32>,
    /// Threads checkpointing a journal (from `jbd2_checkpoint` to the end
    /// of their syscall): others on that device wait for journal space.
    checkpointing: FxHashMap<u32, Dev>,
    /// Operation kinds, their totals and their slowest.
    kinds: kinds::Kinds,
    /// Completed requests still referenced by open operations, by key and
    /// issue time: flushes all sit at sector 0, one after another.
    done: FxHashMap<(ReqKey, u64), (InFlight, u64)>,
    /// `done`'s size at which `forget_unreferenced` looks next.
    done_limit: usize,
    idle: IdleClocks,
    /// Ended operations whose allocations the next ones reuse.
    /// Boxed, as the open ones are (moved, not copied).
    #[allow(clippy::vec_box)]
    spare: Vec<Box<OpenOp>>,
    rows: Option<std::sync::mpsc::SyncSender<super::rows::OperationRow>>,
    /// The threads' processes, for the rows.
    processes: super::rows::Processes,
    /// The next operation's id (`OperationRow::id`), in the order they begin.
    next_op_id: u64,
    /// The workload's processes and threads, followed through their
    /// forks from the recorded command: only their syscalls are
    /// operations. `None`: every thread's are.
    workload: crate::analyze::command::RecordedCommand,
    /// io_uring requests in flight, and what became of them.
    uring: uring::Uring,
    /// What the page faults came to.
    faults: FaultSummary,
    /// The operations that re-read pages reclaim had evicted.
    refaulting: crate::analyze::cache::Refaulting,
}

impl OutlierAnalysis {
    pub fn new(top: usize) -> OutlierAnalysis {
        OutlierAnalysis {
            top,
            done_limit: inflight::DONE_LOOK_FROM,
            ..Default::default()
        }
    }

    /// Sends every operation that ends to `sink` (exports).
    pub fn with_rows(
        mut self,
        sink: Option<std::sync::mpsc::SyncSender<super::rows::OperationRow>>,
        processes: super::rows::Processes,
    ) -> Self {
        self.rows = sink;
        self.processes = processes;
        self
    }

    /// Follows the recorded command `root` and its descendants: only
    /// their syscalls are operations.
    pub fn with_workload(mut self, root: Option<u32>) -> Self {
        self.workload = crate::analyze::command::RecordedCommand::rooted_at(root);
        self
    }

    /// One block event, with the hooks around it in their order.
    /// `issued`: the id the block analysis gave the request an issue sent.
    pub fn block_event(&mut self, b: &BlockEvent, issued: Option<u64>) {
        if let Some(t) = touch_of_block(b.action, b.dev) {
            self.before(b.ts, &t);
            self.block(b, issued);
            self.after_block(b.ts);
            self.uring_block(b, issued);
        }
        // Only the submitter queues a bio (or takes a request for it): a
        // thread doing so is in the kernel, in its fault if it has one.
        if matches!(b.action, Action::Queue | Action::GetRq) {
            self.fault_queued(b.pid, b.ts);
        }
    }

    /// One trace event, with the hooks around it in the one order that
    /// is right: the operations it touches are brought up to it with the
    /// state that held until now; `feed` then gives it to the analyses
    /// whose state it changes (the scheduler's first); operations begin
    /// and end; and the touched ones learn their thread's new state.
    /// Whether an analysis used the event.
    pub fn trace_event(
        &mut self,
        o: &TraceEvent,
        names: &ThreadNames,
        sched: &mut SchedAnalysis,
        feed: impl FnOnce(&mut SchedAnalysis) -> bool,
    ) -> bool {
        let touch = touch_of(o);
        if let Some(t) = &touch {
            self.before(o.ts, t);
        }
        let fed = feed(sched);
        let fed = self.add(o, names, sched) | fed;
        if let Some(t) = &touch {
            self.after(o.ts, t, sched);
        }
        fed
    }

    /// Before an event that may change the situation of some operations:
    /// brings those up to `ts`, with the situation that held until now.
    fn before(&mut self, ts: u64, t: &Touch) {
        if self.open.is_empty() {
            self.touched_now.clear();
            return;
        }
        if let Touch::Device(d) = *t {
            // Most block events leave the oldest request at the device as
            // it was: remember the views, integrate only if they change.
            let mut views = std::mem::take(&mut self.pending_views);
            views.clear();
            views.extend(
                self.open
                    .blocked_devs(d)
                    .map(|dev| (dev, self.dev_view(dev))),
            );
            self.pending_views = views;
            return;
        }
        let mut hit = std::mem::take(&mut self.touched_now);
        self.open.touched_by(t, &mut hit);
        let mut views = std::mem::take(&mut self.touched_views);
        views.clear();
        for &i in &hit {
            let op = self.open.get(i as usize);
            let dev = op.dev;
            // Only an operation blocked in `D` reads its device's view.
            let view = if op.view != ThreadView::Off('D') {
                DevView::UNREAD
            } else if let Some((_, v)) = views.iter().find(|(d, _)| *d == dev) {
                *v
            } else {
                let v = self.dev_view(dev);
                views.push((dev, v));
                v
            };
            integrate(self.open.get_mut(i as usize), ts, &view, &self.idle);
        }
        self.touched_now = hit;
        self.touched_views = views;
    }

    /// After a block event: the blocked operations whose device view it
    /// changed are integrated up to it, with the view that held until now.
    fn after_block(&mut self, ts: u64) {
        for i in 0..self.pending_views.len() {
            let (dev, old) = self.pending_views[i];
            if self.dev_view(dev) == old {
                continue;
            }
            let mut k = 0;
            while let Some(i) = self.open.blocked_at(k) {
                k += 1;
                let op = self.open.get_mut(i);
                if op.dev == dev {
                    integrate(op, ts, &old, &self.idle);
                }
            }
        }
        self.pending_views.clear();
    }

    /// After the event at `ts`: the touched operations learn their
    /// thread's new state; after a switch, its CPU's idle clock.
    fn after(&mut self, ts: u64, t: &Touch, sched: &SchedAnalysis) {
        if let Touch::Threads { a, b, cpu } = *t {
            // Who runs on the CPU now: its idle clock runs while it is the
            // idle task, and it is all that changed for the operations of
            // other threads that wait for it (their thread's state and CPU
            // change only by events that touch their thread).
            let holder = cpu.map(|c| sched.on_cpu(c));
            if let (Some(c), Some(on)) = (cpu, holder) {
                let idle = on.is_some_and(|(pid, _, _)| pid == 0);
                self.idle.switch(c, ts, idle);
            }
            // The operations `before` found: nothing between changed
            // which are open, nor what `touched_by` reads of them.
            let hit = std::mem::take(&mut self.touched_now);
            #[cfg(debug_assertions)]
            {
                let mut again = Vec::new();
                self.open.touched_by(t, &mut again);
                debug_assert_eq!(hit, again, "the operations {t:?} touches");
            }
            // A thread's operations come together in `hit`, and share
            // what the scheduler says of their thread.
            let mut now: Option<(u32, ThreadNow)> = None;
            for &i in &hit {
                let pid = self.open.get(i as usize).pid;
                if let Some(holder) = holder.filter(|_| pid != a && pid != b) {
                    let op = self.open.get_mut(i as usize);
                    debug_assert!(op.view == ThreadView::Runnable && op.cpu == cpu);
                    debug_assert!(sched.view(pid) == (op.view, op.cpu));
                    op.cpu_now = holder;
                    op.fault_state_changed(ts);
                    continue;
                }
                let n = match now {
                    Some((p, n)) if p == pid => n,
                    _ => {
                        let n = ThreadNow::of(pid, sched);
                        now = Some((pid, n));
                        n
                    }
                };
                self.open.refresh(i as usize, n, &self.idle);
                self.open.get_mut(i as usize).fault_state_changed(ts);
            }
            self.touched_now = hit;
        }
    }

    /// A thread added pages to the page cache: its innermost operation
    /// missed them (and re-read them, for a refault).
    pub fn page_added(&mut self, pid: u32, pages: u64, refault: bool) {
        if let Some(i) = self.open.last_of(pid, |_| true) {
            let op = self.open.get_mut(i);
            op.pages_added += pages;
            op.pages_refaulted += refault as u64 * pages;
        }
    }

    /// Integrates one operation (at its end).
    fn advance_one(&mut self, i: usize, ts: u64) {
        let op = self.open.get(i);
        let view = match op.view {
            ThreadView::Off('D') => self.dev_view(op.dev),
            _ => DevView::UNREAD,
        };
        integrate(self.open.get_mut(i), ts, &view, &self.idle);
    }

    pub fn finish(mut self, names: &ThreadNames) -> OutliersSummary {
        self.end_faults(names);
        let faults = self.fault_summary();
        let io_uring = self.uring_summary();
        for o in self.kinds.kept() {
            if o.comm.is_empty() {
                o.comm = names.get(o.pid);
            }
        }
        let (by_kind, mut totals) = self.kinds.into_maps();
        for t in totals.values_mut() {
            t.percent = percentages(&t.breakdown, t.latency_ns);
        }
        let workload = self.workload.threads();
        OutliersSummary {
            top: self.top,
            by_kind,
            totals,
            workload,
            io_uring,
            faults,
            refaulting: self.refaulting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::inflight::DONE_LOOK_FROM;
    use super::*;
    use crate::diagnose::testkit::Trace;
    use crate::model::{Action, Event, Tracepoint};

    /// The `sched_wakeup` payload of probe-100 on CPU 0.
    const WAKE_PROBE: &str = "comm=probe pid=100 prio=120 target_cpu=000";

    /// A `sched_switch` payload from `comm-pid` to `comm-pid`.
    fn switch(from: &str, state: &str, to: &str) -> String {
        let (fc, fp) = from.rsplit_once('-').expect("comm-pid");
        let (tc, tp) = to.rsplit_once('-').expect("comm-pid");
        format!("prev_comm={fc} prev_pid={fp} prev_prio=120 prev_state={state} ==> next_comm={tc} next_pid={tp} next_prio=120")
    }

    /// probe-100 on CPU 0 in syscall `call` from `t`, asleep (S) for `us`.
    fn sleep_in(tr: &mut Trace, t: u64, call: &str, args: &str, us: u64) {
        tr.add(t, "probe-100", 0, &format!("sys_enter_{call}"), args);
        let asleep = switch("probe-100", "S", "swapper/0-0");
        tr.add(
            t + 1,
            "probe-100",
            0,
            Tracepoint::SchedSwitch.name(),
            &asleep,
        );
        tr.add(
            t + us,
            "<idle>-0",
            0,
            Tracepoint::SchedWakeup.name(),
            WAKE_PROBE,
        );
        let back = switch("swapper/0-0", "R", "probe-100");
        tr.add(
            t + us + 1,
            "<idle>-0",
            0,
            Tracepoint::SchedSwitch.name(),
            &back,
        );
        tr.add(
            t + us + 2,
            "probe-100",
            0,
            &format!("sys_exit_{call}"),
            "0x0",
        );
    }

    /// probe-100 on CPU 0, in an fsync, blocks (D) at `t` on a 4 KiB write
    /// at `sector` that the device completes `us` later; the fsync ends
    /// 4 µs after that.
    fn blocked_on_write(tr: &mut Trace, t: u64, sector: u64, us: u64) {
        let blocked = switch("probe-100", "D", "swapper/0-0");
        tr.add(t, "probe-100", 0, Tracepoint::SchedSwitch.name(), &blocked);
        let issue = format!("7,0 W 4096 () {sector} + 8 be,0,4 [kworker/0:1]");
        tr.add(
            t + 1,
            "kworker/0:1-60",
            0,
            Action::Issue.tracepoint().unwrap(),
            &issue,
        );
        let done = format!("7,0 W () {sector} + 8 be,0,4 [0]");
        tr.add(
            t + 1 + us,
            "<idle>-0",
            0,
            Action::Complete.tracepoint().unwrap(),
            &done,
        );
        tr.add(
            t + 2 + us,
            "<idle>-0",
            0,
            Tracepoint::SchedWakeup.name(),
            WAKE_PROBE,
        );
        let back = switch("swapper/0-0", "R", "probe-100");
        tr.add(
            t + 3 + us,
            "<idle>-0",
            0,
            Tracepoint::SchedSwitch.name(),
            &back,
        );
        tr.add(t + 4 + us, "probe-100", 0, "sys_exit_fsync", "0x0");
    }

    /// The outlier analysis alone, fed as `Analyzers` feeds it.
    fn run(text: &str) -> (OutlierAnalysis, ThreadNames) {
        let path = std::path::Path::new("outliers-test.txt");
        let mut src = crate::ingest::open_bytes(path, text.as_bytes().to_vec()).expect("readable");
        let (mut sched, mut names) = (SchedAnalysis::new(), ThreadNames::default());
        let mut out = OutlierAnalysis::new(5);
        while let Some(ev) = src.next_event() {
            match &ev {
                Event::Block(b) => out.block_event(b, None),
                Event::Trace(o) => {
                    names.learn(o);
                    out.trace_event(o, &names, &mut sched, |sched| sched.add(o));
                }
                _ => {}
            }
        }
        (out, names)
    }

    /// 1500 fsyncs, each blocked on one write (the 700th on a slow one),
    /// while another thread sits in a `read` the whole time: the completed
    /// requests the fsyncs waited for are not kept for the reader's sake,
    /// and the slowest fsync still names its request.
    #[test]
    fn completed_requests_go_once_no_open_operation_waited_for_them() {
        let mut tr = Trace::default();
        tr.add(
            10,
            "reader-200",
            1,
            "sys_enter_read",
            "fd: 0x3, buf: 0x0, count: 0x10",
        );
        tr.add(
            11,
            "reader-200",
            1,
            Tracepoint::SchedSwitch.name(),
            &switch("reader-200", "S", "swapper/1-0"),
        );
        let mut t = 100;
        for i in 0..1500u64 {
            let s = 1000 + i * 8;
            let slow = if i == 700 { 5_000 } else { 50 };
            tr.add(t, "probe-100", 0, "sys_enter_fsync", "fd: 0x3");
            blocked_on_write(&mut tr, t + 1, s, slow);
            t += 10 + slow;
        }
        let (out, names) = run(&tr.text());
        assert_eq!(out.open.len(), 1, "the reader's read is still open");
        assert!(
            out.done.len() <= DONE_LOOK_FROM,
            "{} completed requests kept for 1500 fsyncs that ended",
            out.done.len()
        );
        let summary = out.finish(&names);
        let slowest = &summary.by_kind["syscall fsync"][0];
        assert_eq!(slowest.latency_ns, 5_005_000);
        let req = slowest.main_request.as_ref().expect("the slow write");
        assert_eq!(
            (req.sector, req.class, req.d2c_ns),
            (1000 + 700 * 8, "data write", Some(5_000_000))
        );
    }

    /// A fault the kernel takes inside `write`, on the caller's mapped
    /// page: a fault of the thread's, in the call, ended by the call's
    /// return; one on the kernel's own memory is none.
    #[test]
    fn a_fault_the_kernel_takes_in_a_call_is_the_threads() {
        let mut tr = Trace::default();
        let write = "fd: 0x3, buf: 0x7f0000001000, count: 0x10";
        tr.add(100, "probe-100", 0, "sys_enter_write", write);
        let fault = "address=0x7f0000001000 ip=0xffffffff81000000 error_code=0x0";
        tr.add(
            101,
            "probe-100",
            0,
            Tracepoint::PageFaultKernel.name(),
            fault,
        );
        let page = "dev=7:0 ino=c ofs=4096";
        let filemap = Tracepoint::MmFilemapFault.name();
        tr.add(102, "probe-100", 0, filemap, page);
        let blocked = switch("probe-100", "D", "swapper/0-0");
        tr.add(
            103,
            "probe-100",
            0,
            Tracepoint::SchedSwitch.name(),
            &blocked,
        );
        tr.add(
            1100,
            "<idle>-0",
            0,
            Tracepoint::SchedWakeup.name(),
            WAKE_PROBE,
        );
        let back = switch("swapper/0-0", "R", "probe-100");
        tr.add(1101, "<idle>-0", 0, Tracepoint::SchedSwitch.name(), &back);
        // Retried after waiting for its page: major.
        tr.add(1102, "probe-100", 0, filemap, page);
        tr.add(1110, "probe-100", 0, "sys_exit_write", "0x10");
        // The kernel's own memory (a kernel address): no fault of its.
        tr.add(2000, "probe-100", 0, "sys_enter_write", write);
        let own = "address=0xffffc90000001000 ip=0xffffffff81000000 error_code=0x0";
        tr.add(
            2001,
            "probe-100",
            0,
            Tracepoint::PageFaultKernel.name(),
            own,
        );
        tr.add(2010, "probe-100", 0, "sys_exit_write", "0x10");
        let (out, names) = run(&tr.text());
        assert!(out.open.is_empty());
        let summary = out.finish(&names);
        let f = &summary.faults;
        assert_eq!((f.faults, f.file, f.major, f.in_kernel), (1, 1, 1, Some(1)));
        let fault = &summary.by_kind["fault file"][0];
        assert_eq!(fault.latency_ns, 1_001_000, "to the retry");
        let p = fault.file.as_ref().expect("its page");
        assert_eq!((p.inode, p.offset), (12, Some(4096)));
        // The call holds the fault's time.
        let writes = &summary.by_kind["syscall write"];
        assert_eq!(writes[0].latency_ns, 1_010_000);
        assert_eq!(summary.totals["syscall write"].count, 2);
    }

    /// A fault is major, as the kernel counts it, when it retried: it looked
    /// its page up again (fault-around over it) after `filemap_fault`, even
    /// without sleeping (the read ended first); two lookups of different
    /// pages are two faults the trace did not tell apart, not a retry.
    #[test]
    fn a_fault_that_looks_its_page_up_again_is_major() {
        let mut tr = Trace::default();
        let filemap = Tracepoint::MmFilemapFault.name();
        let around = Tracepoint::MmFilemapMapPages.name();
        let user = Tracepoint::PageFaultUser.name();
        let fault = "address=0x7f0000001000 ip=0x7f0000001000 error_code=0x4";
        tr.add(100, "probe-100", 0, user, fault);
        tr.add(101, "probe-100", 0, filemap, "dev=7:0 ino=c ofs=8192");
        tr.add(150, "probe-100", 0, around, "dev=7:0 ino=c ofs=0-65535");
        tr.add(200, "probe-100", 0, user, fault);
        tr.add(201, "probe-100", 0, filemap, "dev=7:0 ino=c ofs=8192");
        tr.add(202, "probe-100", 0, filemap, "dev=7:0 ino=d ofs=8192");
        tr.add(
            203,
            "probe-100",
            0,
            around,
            "dev=7:0 ino=c ofs=65536-131071",
        );
        tr.add(300, "probe-100", 0, "sys_enter_fsync", "fd: 0x3");
        let (out, names) = run(&tr.text());
        let f = &out.finish(&names).faults;
        assert_eq!((f.faults, f.file, f.major), (2, 2, 1));
    }

    /// An operation that begins in the allocations of one that ended
    /// unkept starts clean: the fsync before it was runnable behind a hog
    /// and waited for a write; the one after only slept, and a `read` in
    /// the same slot is named a read.
    #[test]
    fn an_operation_in_a_reused_slot_starts_clean() {
        let mut tr = Trace::default();
        // Five 10 ms sleeps fill the top 5.
        let mut t = 100;
        for _ in 0..5 {
            sleep_in(&mut tr, t, "fsync", "fd: 0x3", 10_000);
            t += 20_000;
        }
        // 1 ms, unkept: runnable behind hog-300, then blocked on a write.
        tr.add(t, "probe-100", 0, "sys_enter_fsync", "fd: 0x3");
        tr.add(
            t + 1,
            "probe-100",
            0,
            Tracepoint::SchedSwitch.name(),
            &switch("probe-100", "R", "hog-300"),
        );
        tr.add(
            t + 400,
            "hog-300",
            0,
            Tracepoint::SchedSwitch.name(),
            &switch("hog-300", "R", "probe-100"),
        );
        blocked_on_write(&mut tr, t + 401, 5000, 498);
        t += 2_000;
        // 30 ms asleep, the slowest fsync; then a 40 ms read.
        sleep_in(&mut tr, t, "fsync", "fd: 0x3", 30_000);
        let read_args = "fd: 0x3, buf: 0x0, count: 0x10";
        sleep_in(&mut tr, t + 50_000, "read", read_args, 40_000);
        let (out, names) = run(&tr.text());
        assert!(out.open.is_empty());
        let summary = out.finish(&names);
        let fsyncs = &summary.by_kind["syscall fsync"];
        assert_eq!(fsyncs.len(), 5);
        assert_eq!(fsyncs[0].latency_ns, 30_002_000);
        assert!(fsyncs[0].held_by.is_empty(), "{:?}", fsyncs[0].held_by);
        assert!(
            fsyncs[0].main_request.is_none(),
            "{:?}",
            fsyncs[0].main_request
        );
        assert_eq!(fsyncs[0].breakdown.runnable_ns, 0);
        assert!(fsyncs[0].breakdown.device_ns.is_empty());
        assert_eq!(summary.totals["syscall fsync"].count, 7);
        let read = &summary.by_kind["syscall read"][0];
        assert_eq!(
            (read.kind.as_str(), read.latency_ns),
            ("syscall read", 40_002_000)
        );
        assert!(read.held_by.is_empty() && read.main_request.is_none());
    }
}

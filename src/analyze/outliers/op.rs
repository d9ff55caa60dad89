//! One open operation: its state (thread view, device it waits on, the
//! tallies so far) and `integrate`, which adds a stretch of time to its
//! breakdown by what the thread and its device were doing.

use super::inflight::{DevView, ReqKey};
use super::summary::Breakdown;
use crate::analyze::sched::{SchedAnalysis, ThreadView};
use crate::model::Dev;
use rustc_hash::FxHashMap;

/// A thread's state, the CPU it last ran on or was woken onto, and who
/// runs there, as the scheduler analysis has it now: looked up once for
/// the operations a thread has open inside each other (a probe's, its
/// syscall's, the filesystem's).
#[derive(Clone, Copy)]
pub(super) struct ThreadNow {
    view: ThreadView,
    cpu: Option<u32>,
    cpu_now: Option<(u32, crate::model::Comm, i64)>,
}

impl ThreadNow {
    #[inline]
    pub(super) fn of(pid: u32, sched: &SchedAnalysis) -> ThreadNow {
        let (view, cpu) = sched.view(pid);
        ThreadNow {
            view,
            cpu,
            cpu_now: cpu.and_then(|c| sched.on_cpu(c)),
        }
    }
}

/// One operation in progress: its thread's situation as last seen, and
/// where its time went so far.
pub(super) struct OpenOp {
    /// Numbered as operations begin (`OperationRow::id`).
    pub(super) id: u64,
    pub(super) kind: super::kinds::KindId,
    pub(super) pid: u32,
    pub(super) start: u64,
    pub(super) last: u64,
    pub(super) dev: Option<Dev>,
    pub(super) b: Breakdown,
    pub(super) held: Held,
    /// Time waited per request, by key and issue time (a flush after a
    /// flush sits at the same sector 0: another request).
    pub(super) waited_on: FxHashMap<(ReqKey, u64), u64>,
    /// The thread's state, CPU and who runs there, as of `last`.
    pub(super) view: ThreadView,
    pub(super) cpu: Option<u32>,
    pub(super) cpu_now: Option<(u32, crate::model::Comm, i64)>,
    /// The request waited on lately, its issue time and the time so far
    /// (moved into `waited_on` when another one comes).
    pub(super) cur_wait: Option<(ReqKey, u64, u64)>,
    /// Device time by class while open (the class names are static: found
    /// by address, which is cheap on this hot path).
    pub(super) device: Vec<(&'static str, u64)>,
    /// Its CPU's idle clock as of `last`: asleep, the operation learns how
    /// long that CPU idled from the clock, not from every switch there.
    pub(super) idle_mark: u64,
    /// A page fault: where it was last seen in the kernel (its end).
    pub(super) fault: Option<super::fault::Fault>,
    /// Pages its thread added to the page cache (misses), and of them
    /// pages reclaim had evicted (refaults).
    pub(super) pages_added: u64,
    pub(super) pages_refaulted: u64,
}

impl OpenOp {
    /// Operation `id` of `kind` by thread `pid`, beginning at `ts`.
    pub(super) fn new(
        id: u64,
        kind: super::kinds::KindId,
        pid: u32,
        ts: u64,
        dev: Option<Dev>,
    ) -> OpenOp {
        OpenOp {
            id,
            kind,
            pid,
            start: ts,
            last: ts,
            dev,
            b: Breakdown::default(),
            held: Held::default(),
            waited_on: FxHashMap::default(),
            view: ThreadView::Unknown,
            cpu: None,
            cpu_now: None,
            cur_wait: None,
            device: Vec::new(),
            idle_mark: 0,
            fault: None,
            pages_added: 0,
            pages_refaulted: 0,
        }
    }

    /// Operation `id` as `new` makes it, in this one's maps (emptied).
    pub(super) fn reset(
        &mut self,
        id: u64,
        kind: super::kinds::KindId,
        pid: u32,
        ts: u64,
        dev: Option<Dev>,
    ) {
        // Field by field in place (a whole new one written over it was a
        // copy of the operation and a drop of the old one per operation);
        // the pattern names every field, so that a new one is not missed.
        let OpenOp {
            id: old_id,
            kind: old_kind,
            pid: old_pid,
            start,
            last,
            dev: old_dev,
            b,
            held,
            waited_on,
            view,
            cpu,
            cpu_now,
            cur_wait,
            device,
            idle_mark,
            fault,
            pages_added,
            pages_refaulted,
        } = self;
        (*old_id, *old_kind, *old_pid, *old_dev) = (id, kind, pid, dev);
        (*start, *last) = (ts, ts);
        *b = Breakdown::default();
        held.clear();
        waited_on.clear();
        device.clear();
        (*view, *cpu, *cpu_now, *cur_wait) = (ThreadView::Unknown, None, None, None);
        *idle_mark = 0;
        *fault = None;
        (*pages_added, *pages_refaulted) = (0, 0);
    }

    pub(super) fn waited_for(&self, k: &ReqKey, issued: u64) -> bool {
        self.cur_wait.is_some_and(|c| c.0 == *k && c.1 == issued)
            || self.waited_on.contains_key(&(*k, issued))
    }

    /// Learns the thread's state, CPU and who runs there (as of `last`,
    /// to which it has been integrated).
    pub(super) fn refresh(&mut self, now: ThreadNow, idle: &IdleClocks) {
        let ThreadNow { view, cpu, cpu_now } = now;
        self.view = view;
        self.cpu = cpu;
        self.cpu_now = cpu_now;
        // Read only while asleep (`integrate`), and an operation falls
        // asleep only here: its CPU's clock is read only then.
        if let ThreadView::Off(_) = view {
            self.idle_mark = idle.at(cpu, self.last);
        }
    }

    /// Whether its maps are small enough to keep for the next operation:
    /// one that waited for thousands of requests lets its memory go.
    pub(super) fn small(&self) -> bool {
        self.held.capacity() <= 64
            && self.waited_on.capacity() <= 64
            && self.device.capacity() <= 16
    }

    /// Moves the hot-path tallies into the breakdown.
    pub(super) fn settle(&mut self) {
        if let Some((k, issued, ns)) = self.cur_wait.take() {
            *self.waited_on.entry((k, issued)).or_default() += ns;
        }
        for (class, ns) in self.device.drain(..) {
            *self.b.device_ns.entry(class).or_default() += ns;
        }
    }
}

/// Who held the CPU a runnable operation waited for: thread, time, its
/// name and priority as first seen. Met at every stretch the operation is
/// runnable, often a thread not met just before (16 writers on 2 CPUs):
/// each thread's entry is found where its id's hint says, or by a scan
/// of the few met so far, or past [`SCANNED`] threads by an index. (A map's entry per
/// stretch was a fortieth of the analysis; a log of stretches folded by a
/// sort whenever it doubled, 7 %.)
#[derive(Clone, Default)]
pub(super) struct Held {
    /// Each thread once, in the order first met.
    list: Vec<(u32, (u64, crate::model::Comm, i64))>,
    /// Each thread's place in `list`, once it holds more than [`SCANNED`].
    index: FxHashMap<u32, u32>,
    /// A place in `list` by thread id modulo [`HINTS`]: where the last
    /// thread of those ids was (threads started together have ids in a
    /// row, each its own hint; a thread met twice in a row, its own).
    hint: [u32; HINTS],
}

/// Threads whose place is remembered without a scan.
const HINTS: usize = 16;

/// The most threads found by a scan of `Held::list`.
const SCANNED: usize = 32;

impl Held {
    pub(super) fn add(&mut self, pid: u32, comm: crate::model::Comm, prio: i64, ns: u64) {
        let hint = self.hint[pid as usize % HINTS] as usize;
        let at = if self.list.get(hint).is_some_and(|h| h.0 == pid) {
            Some(hint)
        } else if self.list.len() <= SCANNED {
            self.list.iter().position(|h| h.0 == pid)
        } else {
            self.index.get(&pid).map(|&i| i as usize)
        };
        let i = match at {
            Some(i) => {
                self.list[i].1 .0 += ns;
                i
            }
            None => {
                self.list.push((pid, (ns, comm, prio)));
                let i = self.list.len() - 1;
                if self.list.len() > SCANNED {
                    if self.index.is_empty() {
                        let all = self.list.iter().enumerate();
                        self.index.extend(all.map(|(i, h)| (h.0, i as u32)));
                    } else {
                        self.index.insert(pid, i as u32);
                    }
                }
                i
            }
        };
        self.hint[pid as usize % HINTS] = i as u32;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.list.clear();
        self.index.clear();
        self.hint = [0; HINTS];
    }

    pub(super) fn capacity(&self) -> usize {
        self.list.capacity().max(self.index.capacity())
    }

    /// Each holder once, in the order first met: thread, (time, name,
    /// priority).
    pub(super) fn holders(&self) -> impl Iterator<Item = &(u32, (u64, crate::model::Comm, i64))> {
        self.list.iter()
    }
}

/// Adds the stretch since the operation's last update, classified by the
/// thread's state and, when it is blocked, by what its device is doing.
pub(super) fn integrate(op: &mut OpenOp, ts: u64, dev: &DevView, idle: &IdleClocks) {
    let dt = ts.saturating_sub(op.last);
    if dt == 0 {
        return;
    }
    op.last = ts;
    let (view, cpu_now) = (op.view, op.cpu_now);
    let cpu_idle = cpu_now.is_some_and(|(p, _, _)| p == 0);
    if let ThreadView::Off(_) = view {
        let mark = idle.at(op.cpu, ts);
        op.b.cpu_idle_ns += mark.saturating_sub(op.idle_mark);
        op.idle_mark = mark;
    }
    let b = &mut op.b;
    match view {
        ThreadView::Running => b.on_cpu_ns += dt,
        // Unknown is not zero, nor running.
        ThreadView::Unknown => b.not_recorded_ns += dt,
        // A CPU does not idle while a task waits on its runqueue: the
        // switch-in went unseen (see the scheduler analysis).
        ThreadView::Runnable if cpu_idle => b.on_cpu_ns += dt,
        ThreadView::Runnable => {
            b.runnable_ns += dt;
            if let Some((p, comm, prio)) = cpu_now {
                op.held.add(p, comm, prio, dt);
            }
        }
        // Asleep by choice (a pipe, a futex, poll): not I/O.
        ThreadView::Off(state) if state != 'D' => b.asleep_ns += dt,
        ThreadView::Off(_) => {
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

/// Per CPU, how long it has idled (the idle task on it) since the trace
/// began, as far as the switches told: what an asleep operation's CPU did
/// over any stretch is the difference of two readings.
#[derive(Default)]
pub(super) struct IdleClocks {
    /// CPUs below `DENSE_CPUS` by index; any other number a trace gives
    /// (a damaged one can say 2,583,691,263) in a map, so that it costs
    /// one entry, not a vector that long.
    dense: Vec<IdleClock>,
    sparse: FxHashMap<u32, IdleClock>,
}

/// CPUs kept by index.
const DENSE_CPUS: u32 = 1024;

#[derive(Clone, Copy, Default)]
struct IdleClock {
    /// Idle time up to `since`, or to the last switch away from idle.
    total: u64,
    /// Idle since then.
    since: Option<u64>,
}

impl IdleClocks {
    /// The clock of `cpu` at `ts` (0 for no CPU).
    pub(super) fn at(&self, cpu: Option<u32>, ts: u64) -> u64 {
        let c = match cpu {
            Some(c) if c < DENSE_CPUS => self.dense.get(c as usize),
            Some(c) => self.sparse.get(&c),
            None => None,
        };
        let Some(c) = c else { return 0 };
        c.total + c.since.map_or(0, |s| ts.saturating_sub(s))
    }

    /// After a switch on `cpu` at `ts`: whether it idles from now on.
    pub(super) fn switch(&mut self, cpu: u32, ts: u64, idle: bool) {
        let c = if cpu < DENSE_CPUS {
            let i = cpu as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, IdleClock::default());
            }
            &mut self.dense[i]
        } else {
            self.sparse.entry(cpu).or_default()
        };
        match (c.since, idle) {
            (None, true) => c.since = Some(ts),
            (Some(s), false) => {
                c.total += ts.saturating_sub(s);
                c.since = None;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdleClocks;

    /// However the stretches come, each holder's add up, under the name
    /// and priority it was first seen with.
    #[test]
    fn holders_add_up_scanned_or_indexed() {
        let hog = crate::model::Comm::new(b"hog");
        // 20 threads are scanned for; 100 are found by the index, which
        // is made when the 33rd is met.
        for threads in [20u32, 100] {
            let mut h = super::Held::default();
            for round in 0..50u64 {
                for pid in 0..threads {
                    // Each thread's stretch comes twice, the second
                    // found by its hint.
                    let pid = (pid * 7) % threads;
                    h.add(pid, hog, round as i64, pid as u64 + round);
                    h.add(pid, hog, round as i64, 1);
                }
            }
            assert_eq!(h.holders().count(), threads as usize);
            let mut seen = std::collections::BTreeSet::new();
            for &(pid, (ns, _, prio)) in h.holders() {
                // 50 stretches of pid + round + 1 ns; first seen at priority 0.
                assert_eq!(
                    (ns, prio),
                    (50 * pid as u64 + 49 * 25 + 50, 0),
                    "thread {pid}"
                );
                assert!(seen.insert(pid), "thread {pid} twice");
            }
            assert!(h.capacity() <= 256, "{} kept", h.capacity());
            h.clear();
            assert!(h.is_empty());
            h.add(7, hog, 0, 5);
            h.add(8, hog, 0, 1);
            h.add(7, hog, 0, 5);
            let got: Vec<(u32, u64)> = h.holders().map(|x| (x.0, x.1 .0)).collect();
            assert_eq!(got, vec![(7, 10), (8, 1)]);
        }
    }

    #[test]
    fn an_idle_clock_runs_only_while_its_cpu_idles() {
        let mut c = IdleClocks::default();
        assert_eq!(c.at(Some(3), 100), 0, "no switch seen on CPU 3");
        c.switch(3, 100, true);
        assert_eq!(c.at(Some(3), 150), 50);
        c.switch(3, 160, false);
        c.switch(3, 170, false);
        assert_eq!(c.at(Some(3), 500), 60);
        c.switch(3, 500, true);
        c.switch(3, 510, true);
        assert_eq!(c.at(Some(3), 520), 80);
        assert_eq!((c.at(None, 520), c.at(Some(0), 520)), (0, 0));
    }

    /// A damaged trace's CPU number costs one entry: a vector grown to it
    /// asked the allocator for 62 GB and aborted a fuzz run.
    #[test]
    fn a_huge_cpu_number_is_one_entry() {
        let mut c = IdleClocks::default();
        let cpu = 2_583_691_263;
        c.switch(cpu, 100, true);
        c.switch(cpu, 130, false);
        assert_eq!(c.at(Some(cpu), 200), 30);
        assert!(c.dense.is_empty());
        assert_eq!(c.sparse.len(), 1);
    }
}

//! Scheduler analysis from `sched_switch`, `sched_waking`/`sched_wakeup`,
//! `sched_wakeup_new`: each thread's state over time, runqueue latency
//! (wakeup or preemption → switched in, the delay of `perf sched latency`
//! and bcc's runqlat), off-CPU time by state, and for the longest runnable
//! waits, what held that CPU meanwhile.
//!
//! Latency follows `perf sched latency`: a wakeup counts only for a thread
//! last seen sleeping; a thread switched out in state R waits from that
//! moment; when `sched_waking` is in the trace, `sched_wakeup` is ignored
//! (perf does the same). Memory grows with threads and CPUs, not with the
//! trace: each CPU keeps only the slices since the oldest wait still
//! going on (at most those of the last few seconds).

use super::histogram::{LatencyDist, Log2Hist, Percentiles};
use super::top::{keep_largest, qualifies};
use crate::model::tracepoint::Field;
use crate::model::{Comm, TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::VecDeque;

/// How long a CPU remembers who ran on it (for "who held the CPU").
const SLICE_MEMORY_NS: u64 = 10_000_000_000;
const SLICE_MEMORY_MAX: usize = 200_000;
/// Switches between two prunings of the slices no wait needs.
const PRUNE_EVERY: u64 = 4096;
/// Long waits kept for the report.
const LONG_WAITS_KEPT: usize = 20;

/// What a thread is doing.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Running {
        since: u64,
    },
    /// Waiting for a CPU since `since` (woken or preempted).
    Runnable {
        since: u64,
    },
    /// Off CPU: `S` (sleeping), `D` (blocked, usually I/O), others.
    Off {
        since: u64,
        state: char,
    },
}

#[derive(Clone, Debug, Default)]
struct Thread {
    comm: Comm,
    prio: i64,
    state: Option<State>,
    runtime_ns: u64,
    runnable_ns: u64,
    sleep_ns: u64,
    blocked_ns: u64,
    delays: u64,
    delay_total_ns: u64,
    max_delay_ns: u64,
    max_delay_at: u64,
    /// When perf's atom for this thread was last switched out (a wakeup
    /// before it is out of order and ignored).
    out_at: u64,
    /// The CPU it last ran on or was woken onto.
    cpu: Option<u32>,
}

/// A thread's state as other analyses see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThreadView {
    Running,
    /// On a runqueue, waiting for a CPU.
    Runnable,
    /// Off CPU in this state (`S`, `D`, …).
    Off(char),
    Unknown,
}

#[derive(Clone, Copy, Debug)]
struct Slice {
    start: u64,
    end: u64,
    pid: u32,
    prio: i64,
    comm: Comm,
}

#[derive(Clone, Debug, Default)]
struct Cpu {
    current: Option<(u32, u64, i64, Comm)>,
    slices: VecDeque<Slice>,
}

#[derive(Debug, Serialize, Clone)]
pub struct Holder {
    pub pid: u32,
    pub comm: String,
    pub prio: i64,
    /// `RT` when the kernel priority is below 100, else `normal`; `idle`
    /// for the idle task.
    pub policy: &'static str,
    pub ns: u64,
}

#[derive(Debug, Serialize, Clone)]
pub struct LongWait {
    pub pid: u32,
    pub comm: String,
    pub cpu: u32,
    /// When the wait began (wakeup or preemption), trace clock ns.
    pub start_ns: u64,
    pub wait_ns: u64,
    /// Who ran on that CPU during the wait, longest first.
    pub held_by: Vec<Holder>,
}

#[derive(Debug, Serialize, Clone)]
pub struct ThreadSummary {
    pub pid: u32,
    pub comm: String,
    pub kind: &'static str,
    pub prio: i64,
    pub runtime_ns: u64,
    /// Runqueue waits counted (perf's "Switches").
    pub switches: u64,
    pub avg_delay_ns: u64,
    pub max_delay_ns: u64,
    pub max_delay_at_ns: u64,
    pub runnable_ns: u64,
    pub sleep_ns: u64,
    pub blocked_ns: u64,
}

#[derive(Debug, Serialize, Default)]
pub struct SchedSummary {
    pub switches: u64,
    pub wakeups: u64,
    /// Runqueue latency of every thread (µs), as bcc's runqlat prints it.
    pub runqlat_us: Log2Hist,
    pub runqlat: Option<Percentiles>,
    /// Every thread with a counted wait, longest max delay first.
    pub threads: Vec<ThreadSummary>,
    pub long_waits: Vec<LongWait>,
}

#[derive(Default)]
pub struct SchedAnalysis {
    threads: FxHashMap<u32, Thread>,
    cpus: FxHashMap<u32, Cpu>,
    hist: Log2Hist,
    dist: LatencyDist,
    long_waits: Vec<LongWait>,
    switches: u64,
    wakeups: u64,
    /// `sched_waking` seen: `sched_wakeup` is then ignored.
    have_waking: bool,
    rows: Option<std::sync::mpsc::SyncSender<super::rows::ThreadStateRow>>,
    /// The threads' processes, for the rows.
    processes: super::rows::Processes,
}

/// The one-letter task state of `prev_state`: text (`S`, `D`, `R+`, `I`)
/// or the kernel's bit mask (0 = R, 1 = S, 2 = D, 0x80 = I, 0x100 =
/// preempted, reported as R).
pub fn task_state(v: Option<&crate::model::Value>) -> char {
    use crate::model::Value;
    match v {
        Some(Value::Str(s)) => s.chars().next().unwrap_or('?'),
        Some(Value::Int(n)) => {
            let n = *n as u64 & 0xff;
            if n == 0 {
                return 'R';
            }
            const LETTERS: &[u8] = b"SDTtXZPI";
            let bit = n.trailing_zeros() as usize;
            LETTERS.get(bit).map(|&c| c as char).unwrap_or('?')
        }
        None => '?',
    }
}

/// What kind of thread a name belongs to.
pub fn thread_kind(comm: &str, pid: u32) -> &'static str {
    if pid == 0 || comm.starts_with("swapper") {
        return "idle";
    }
    let prefixes: &[(&str, &str)] = &[
        ("kworker/", "kworker"),
        ("ksoftirqd/", "ksoftirqd"),
        ("jbd2/", "jbd2"),
        ("loop", "loop"),
        ("irq/", "irq thread"),
        ("kswapd", "kswapd"),
        ("migration/", "migration"),
        ("rcu_", "rcu"),
        ("kcompactd", "kcompactd"),
        ("writeback", "writeback"),
        ("kblockd", "kblockd"),
        ("cpuhp/", "cpuhp"),
        ("idle_inject/", "idle_inject"),
    ];
    prefixes
        .iter()
        .find(|(p, _)| comm.starts_with(p))
        .map(|(_, k)| *k)
        .unwrap_or("task")
}

fn policy_of(prio: i64, pid: u32) -> &'static str {
    if pid == 0 {
        "idle"
    } else if prio < 100 {
        "RT"
    } else {
        "normal"
    }
}

impl SchedAnalysis {
    pub fn new() -> SchedAnalysis {
        SchedAnalysis::default()
    }

    /// Feeds one event; returns false for events this analysis ignores.
    pub fn add(&mut self, e: &TraceEvent) -> bool {
        match e.kind {
            Tracepoint::SchedSwitch => self.switch(e),
            Tracepoint::SchedWaking => {
                self.have_waking = true;
                self.wakeup(e);
            }
            Tracepoint::SchedWakeup => {
                if !self.have_waking {
                    self.wakeup(e)
                }
            }
            Tracepoint::SchedWakeupNew => self.wakeup(e),
            Tracepoint::SchedMigrateTask => {
                if let (Some(pid), Some(to)) =
                    (e.fields.int(Field::Pid), e.fields.int(Field::DestCpu))
                {
                    if let Some(t) = self.threads.get_mut(&(pid as u32)) {
                        t.cpu = Some(to as u32);
                    }
                }
            }
            Tracepoint::SchedProcessExit | Tracepoint::SchedProcessFork => {}
            _ => return false,
        }
        true
    }

    /// What `pid` is doing now, and the CPU it last ran on or was woken onto.
    pub fn view(&self, pid: u32) -> (ThreadView, Option<u32>) {
        let Some(t) = self.threads.get(&pid) else {
            return (ThreadView::Unknown, None);
        };
        let v = match t.state {
            Some(State::Running { .. }) => ThreadView::Running,
            Some(State::Runnable { .. }) => ThreadView::Runnable,
            Some(State::Off { state, .. }) => ThreadView::Off(state),
            None => ThreadView::Unknown,
        };
        (v, t.cpu)
    }

    /// Who runs on `cpu` now (pid 0: idle), as far as the trace told.
    pub fn on_cpu(&self, cpu: u32) -> Option<(u32, Comm, i64)> {
        self.cpus
            .get(&cpu)?
            .current
            .map(|(pid, _, prio, comm)| (pid, comm, prio))
    }

    /// Sends each stretch of a thread's state as it ends (exports).
    pub fn with_rows(
        mut self,
        sink: Option<std::sync::mpsc::SyncSender<super::rows::ThreadStateRow>>,
        processes: super::rows::Processes,
    ) -> Self {
        self.rows = sink;
        self.processes = processes;
        self
    }

    /// `pid`'s state `state` lasted from `start` to `end`.
    fn stretch(&mut self, pid: u32, state: super::rows::ThreadState, start: u64, end: u64) {
        if self.rows.is_none() || end <= start || pid == 0 {
            return;
        }
        let (comm, cpu) = self
            .threads
            .get(&pid)
            .map_or((Comm::default(), None), |t| (t.comm, t.cpu));
        let processes = &self.processes;
        super::rows::send(&mut self.rows, || super::rows::ThreadStateRow {
            pid,
            process: processes.of(pid),
            comm,
            state,
            start_ns: start,
            end_ns: end,
            cpu,
        });
    }

    fn thread(&mut self, pid: u32) -> &mut Thread {
        self.threads.entry(pid).or_default()
    }

    fn wakeup(&mut self, e: &TraceEvent) {
        let Some(pid) = e.fields.int(Field::Pid) else {
            return;
        };
        let pid = pid as u32;
        self.wakeups += 1;
        let ts = e.ts;
        let target = e.fields.int(Field::TargetCpu).map(|c| c as u32);
        let t = self.thread(pid);
        if let Some(c) = e.fields.str(Field::Comm) {
            t.comm = Comm::new(c.as_bytes());
        }
        if target.is_some() {
            t.cpu = target;
        }
        match t.state {
            // First sight: perf starts the thread asleep at this moment.
            None => {
                t.state = Some(State::Runnable { since: ts });
                t.out_at = ts;
            }
            Some(State::Off { since, state }) => {
                if t.out_at > ts {
                    return;
                }
                let off = ts.saturating_sub(since);
                if state == 'D' {
                    t.blocked_ns += off;
                } else {
                    t.sleep_ns += off;
                }
                t.state = Some(State::Runnable { since: ts });
                self.stretch(pid, super::rows::ThreadState::Off(state), since, ts);
            }
            // Awake already (running, or on a runqueue): perf ignores it.
            _ => {}
        }
    }

    fn switch(&mut self, e: &TraceEvent) {
        let f = &e.fields;
        let (Some(prev), Some(next)) = (f.int(Field::PrevPid), f.int(Field::NextPid)) else {
            return;
        };
        let (prev, next, ts, cpu) = (prev as u32, next as u32, e.ts, e.cpu);
        self.switches += 1;
        let state = task_state(f.get(Field::PrevState));
        let prev_prio = f.int(Field::PrevPrio).unwrap_or(120);
        let next_prio = f.int(Field::NextPrio).unwrap_or(120);
        let prev_comm = Comm::new(f.str(Field::PrevComm).unwrap_or("").as_bytes());
        let next_comm = Comm::new(f.str(Field::NextComm).unwrap_or("").as_bytes());

        // The CPU's slice of `prev` ends here.
        let c = self.cpus.entry(cpu).or_default();
        // Since the CPU's previous switch: on this kernel, switches away
        // from the idle task on some CPUs emit no event at all (perf sees
        // the same), so `prev` may have come in unseen.
        let start = c.current.map(|(_, since, _, _)| since).unwrap_or(ts);
        let cpu_seen_before = c.current.is_some();
        if ts > start {
            c.slices.push_back(Slice {
                start,
                end: ts,
                pid: prev,
                prio: prev_prio,
                comm: prev_comm,
            });
        }
        while c.slices.len() > SLICE_MEMORY_MAX
            || c.slices
                .front()
                .is_some_and(|s| s.end + SLICE_MEMORY_NS < ts)
        {
            c.slices.pop_front();
        }
        c.current = Some((next, ts, next_prio, next_comm));
        if self.switches.is_multiple_of(PRUNE_EVERY) {
            self.forget_slices_before_waits(ts);
        }

        // prev leaves the CPU. Came in unseen (a runnable thread): it got
        // the CPU at the CPU's previous switch, as perf sched timehist infers.
        let t = self.thread(prev);
        t.comm = prev_comm;
        t.prio = prev_prio;
        t.cpu = Some(cpu);
        let mut inferred_wait = None;
        let ran_from = match t.state {
            Some(State::Running { since }) => Some(since),
            Some(State::Runnable { since }) if cpu_seen_before && start >= since => Some(start),
            _ => None,
        };
        match t.state {
            Some(State::Running { since }) => t.runtime_ns += ts.saturating_sub(since),
            // The first switch seen on a CPU: when prev came in is unknown.
            Some(State::Runnable { since }) if cpu_seen_before && start >= since => {
                t.runtime_ns += ts - start;
                inferred_wait = Some((start, start - since));
            }
            _ => {}
        }
        t.out_at = ts;
        t.state = Some(if state == 'R' {
            State::Runnable { since: ts }
        } else {
            State::Off { since: ts, state }
        });

        if let Some((at, d)) = inferred_wait {
            self.count_wait(prev, prev_comm, cpu, at, d);
            self.stretch(prev, super::rows::ThreadState::Runnable, at - d, at);
        }
        if let Some(from) = ran_from {
            self.stretch(prev, super::rows::ThreadState::Running, from, ts);
        }
        // next gets it: the end of a runqueue wait.
        let t = self.thread(next);
        t.comm = next_comm;
        t.prio = next_prio;
        t.cpu = Some(cpu);
        let waited = match t.state {
            // Never seen: perf counts a zero wait.
            None => Some(0),
            Some(State::Runnable { since }) if ts >= since => Some(ts - since),
            _ => None,
        };
        // Woken unseen (no wakeup event in the trace): off until now.
        let off = match t.state {
            Some(State::Off { since, state }) if ts > since => Some((since, state)),
            _ => None,
        };
        t.state = Some(State::Running { since: ts });
        if let Some(d) = waited {
            self.count_wait(next, next_comm, cpu, ts, d);
            self.stretch(next, super::rows::ThreadState::Runnable, ts - d, ts);
        }
        if let Some((since, state)) = off {
            self.stretch(next, super::rows::ThreadState::Off(state), since, ts);
        }
    }

    /// Drops the slices that no wait can ask about: every wait began when
    /// a thread now runnable became so, so slices that ended before the
    /// oldest such moment are history nobody needs (a busy machine's
    /// few seconds of slices were most of a report's memory).
    fn forget_slices_before_waits(&mut self, now: u64) {
        let oldest_wait = self
            .threads
            .values()
            .filter_map(|t| match t.state {
                Some(State::Runnable { since }) => Some(since),
                _ => None,
            })
            .min()
            .unwrap_or(now);
        for c in self.cpus.values_mut() {
            while c.slices.front().is_some_and(|s| s.end <= oldest_wait) {
                c.slices.pop_front();
            }
        }
    }

    /// One runqueue wait of `d` ns that ended at `at` on `cpu`.
    fn count_wait(&mut self, pid: u32, comm: Comm, cpu: u32, at: u64, d: u64) {
        let t = self.thread(pid);
        t.runnable_ns += d;
        t.delays += 1;
        t.delay_total_ns += d;
        if d > t.max_delay_ns {
            t.max_delay_ns = d;
            t.max_delay_at = at;
        }
        if pid != 0 {
            self.hist.add(d / 1000);
            self.dist.add(d);
            self.note_long_wait(pid, comm, cpu, at, d);
        }
    }

    fn note_long_wait(&mut self, pid: u32, comm: Comm, cpu: u32, now: u64, wait: u64) {
        if wait == 0 {
            return;
        }
        if !qualifies(&self.long_waits, LONG_WAITS_KEPT, wait, |w| w.wait_ns) {
            return;
        }
        let start = now - wait;
        let mut by: FxHashMap<u32, Holder> = FxHashMap::default();
        if let Some(c) = self.cpus.get(&cpu) {
            for s in c.slices.iter().rev() {
                if s.end <= start {
                    break;
                }
                let overlap = s.end.min(now).saturating_sub(s.start.max(start));
                if overlap == 0 {
                    continue;
                }
                by.entry(s.pid)
                    .or_insert_with(|| Holder {
                        pid: s.pid,
                        comm: s.comm.as_str().to_string(),
                        prio: s.prio,
                        policy: policy_of(s.prio, s.pid),
                        ns: 0,
                    })
                    .ns += overlap;
            }
        }
        // A CPU does not idle while a task waits on its runqueue: an idle
        // CPU here means the switch-in went unseen (see `switch`).
        if by.get(&0).is_some_and(|h| h.ns > wait / 2) {
            return;
        }
        let mut held_by: Vec<Holder> = by.into_values().collect();
        held_by.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.pid.cmp(&b.pid)));
        held_by.truncate(5);
        let w = LongWait {
            pid,
            comm: comm.as_str().to_string(),
            cpu,
            start_ns: start,
            wait_ns: wait,
            held_by,
        };
        keep_largest(
            &mut self.long_waits,
            w,
            LONG_WAITS_KEPT,
            |w| w.wait_ns,
            |w| w.start_ns,
        );
    }

    pub fn finish(self) -> SchedSummary {
        let mut threads: Vec<ThreadSummary> = self
            .threads
            .iter()
            .filter(|(pid, t)| **pid != 0 && t.delays > 0)
            .map(|(&pid, t)| ThreadSummary {
                pid,
                comm: t.comm.as_str().to_string(),
                kind: thread_kind(t.comm.as_str(), pid),
                prio: t.prio,
                runtime_ns: t.runtime_ns,
                switches: t.delays,
                avg_delay_ns: t.delay_total_ns / t.delays,
                max_delay_ns: t.max_delay_ns,
                max_delay_at_ns: t.max_delay_at,
                runnable_ns: t.runnable_ns,
                sleep_ns: t.sleep_ns,
                blocked_ns: t.blocked_ns,
            })
            .collect();
        threads.sort_by(|a, b| b.max_delay_ns.cmp(&a.max_delay_ns).then(a.pid.cmp(&b.pid)));
        SchedSummary {
            switches: self.switches,
            wakeups: self.wakeups,
            runqlat: (self.dist.count() > 0).then(|| self.dist.summary()),
            runqlat_us: self.hist,
            threads,
            long_waits: self.long_waits,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Fields, Value};

    /// `sched_switch` on CPU 0 from `prev` (left in `state`) to `next`.
    fn switch(ts: u64, prev: (u32, &str), state: &str, next: (u32, &str)) -> TraceEvent {
        let f = |k: &str, v: Value| (crate::model::FieldName::from(k), v);
        TraceEvent::new(
            ts,
            0,
            prev.0,
            "sched:sched_switch".into(),
            Comm::new(prev.1.as_bytes()),
            Fields(vec![
                f("prev_comm", Value::Str(prev.1.into())),
                f("prev_pid", Value::Int(prev.0 as i64)),
                f("prev_prio", Value::Int(120)),
                f("prev_state", Value::Str(state.into())),
                f("next_comm", Value::Str(next.1.into())),
                f("next_pid", Value::Int(next.0 as i64)),
                f("next_prio", Value::Int(120)),
            ]),
        )
    }

    /// A wait that outlasts many prunings still names everyone who held
    /// the CPU since it began; slices from before any wait are dropped.
    #[test]
    fn slices_are_kept_back_to_the_oldest_wait_only() {
        let mut s = SchedAnalysis::new();
        // Two busy threads take turns, nobody else waits: 3 prunings' worth.
        let mut ts = 1_000;
        for i in 0..3 * PRUNE_EVERY {
            let (a, b) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
            s.add(&switch(ts, (a, "a"), "S", (b, "b")));
            ts += 1_000;
        }
        let kept = s.cpus[&0].slices.len() as u64;
        assert!(kept <= PRUNE_EVERY, "{kept} slices kept with no wait");
        // Thread 9 is preempted (R) and waits while 1 and 2 take 3 more
        // prunings' worth of turns, then runs.
        s.add(&switch(ts, (1, "a"), "R", (2, "b")));
        ts += 1_000;
        s.add(&switch(ts, (2, "b"), "S", (9, "victim")));
        ts += 1_000;
        s.add(&switch(ts, (9, "victim"), "R", (1, "a")));
        let preempted_at = ts;
        for i in 0..3 * PRUNE_EVERY {
            ts += 1_000;
            let (a, b) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
            s.add(&switch(ts, (a, "a"), "S", (b, "b")));
        }
        ts += 1_000;
        // The loop's last switch (odd) gave the CPU to 1.
        s.add(&switch(ts, (1, "a"), "S", (9, "victim")));
        let sum = s.finish();
        let w = sum
            .long_waits
            .iter()
            .find(|w| w.pid == 9)
            .expect("the wait");
        assert_eq!((w.start_ns, w.wait_ns), (preempted_at, ts - preempted_at));
        let held: u64 = w.held_by.iter().map(|h| h.ns).sum();
        assert_eq!(held, ts - preempted_at, "{:?}", w.held_by);
    }
}

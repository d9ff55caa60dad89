//! Where threads blocked: off-CPU time by kernel stack, as bcc's
//! `offcputime` measures it. A thread that leaves its CPU while not
//! runnable (`sched_switch` with `prev_state` S or D) starts an off-CPU
//! stretch, which ends when `sched_switch` puts it back on a CPU; the
//! stack is the one the tracer wrote right after that switch on the same
//! CPU (the `stacktrace` trigger of `record --stacks`). Each stretch adds
//! its time to its stack, folded as FlameGraph reads it: `comm;outermost;
//! …;innermost`.

use super::sched::task_state;
use crate::model::tracepoint::Field;
use crate::model::{StackEvent, TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A stack's frames, innermost first.
pub type Frames = Arc<[Arc<str>]>;

/// A thread off its CPU since `since`, and the stack it blocked in once
/// the tracer has written it.
struct Blocked {
    since: u64,
    /// Inline: a switch away allocates nothing.
    comm: crate::model::Comm,
    stack: Option<Frames>,
}

/// Blocked stretches shorter than this are not kept for the outliers: a
/// slow operation is milliseconds, and the many shortest would cost
/// memory for little of its time.
const MIN_KEPT_STRETCH_NS: u64 = 50_000;
/// At most this many stretches are kept (about 100 MB).
const MAX_KEPT_STRETCHES: usize = 2_000_000;

/// One blocked stretch of a thread, with its stack.
#[derive(Debug, Clone)]
pub struct Stretch {
    pub from_ns: u64,
    pub to_ns: u64,
    pub frames: Frames,
}

#[derive(Default)]
pub struct StackAnalysis {
    /// By thread: blocked now.
    blocked: FxHashMap<u32, Blocked>,
    /// By CPU: the thread whose switch away the next stack belongs to.
    awaiting_stack: FxHashMap<u32, u32>,
    /// Off-CPU time by (comm, stack).
    off_cpu: FxHashMap<(crate::model::Comm, Frames), u64>,
    stacks: u64,
    without_stack_ns: u64,
    /// By thread: its long blocked stretches, in time order.
    stretches: FxHashMap<u32, Vec<Stretch>>,
    kept: usize,
    /// On-CPU samples by (thread, stack).
    /// On-CPU samples by (thread, its name when sampled, stack): a thread
    /// that execs changes name, and perf names each sample as it was.
    on_cpu: FxHashMap<(u32, Option<crate::model::Comm>, Frames), u64>,
    samples: u64,
}

#[derive(Debug, Default)]
pub struct StacksSummary {
    /// Kernel stacks in the trace.
    pub stacks: u64,
    /// Off-CPU time with a known stack, and the time of blocked stretches
    /// whose stack the trace did not hold.
    pub off_cpu_ns: u64,
    pub off_cpu_without_stack_ns: u64,
    /// Folded stacks (`comm;outermost;…;innermost`) with their off-CPU
    /// time, largest first.
    pub off_cpu: Vec<(String, u64)>,
    /// On-CPU samples (`record --stacks`), and their folded stacks
    /// (`comm;outermost;…;innermost`) with their counts, largest first.
    pub samples: u64,
    pub on_cpu: Vec<(String, u64)>,
    /// By thread: blocked stretches of 50 µs or more, in time order, for
    /// the outliers (`most_blocked_in`).
    pub stretches: FxHashMap<u32, Vec<Stretch>>,
}

/// Frames of the tracer itself at the inner end of a stack taken inside a
/// tracepoint: not where the thread blocked.
pub fn tracer_frame(name: &str) -> bool {
    // `trace_` covers trace_event_raw_event_*.
    name.starts_with("__traceiter_")
        || name.starts_with("perf_trace_")
        || name.starts_with("trace_")
        || name.starts_with("event_trigger")
        || name.starts_with("__trace_stack")
        || name.starts_with("stacktrace_trigger")
}

/// `name` without its `+0x1c` offset; an address no symbol covers is
/// `[unknown]`, as perf shows it.
pub fn function(frame: &str) -> &str {
    if frame.starts_with("0x") {
        return "[unknown]";
    }
    match frame.rfind("+0x") {
        Some(at) if frame[at + 3..].bytes().all(|c| c.is_ascii_hexdigit()) => &frame[..at],
        _ => frame,
    }
}

/// Which frames a folded line keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// By the tracer inside a tracepoint (the off-CPU trigger): its own
    /// frames at the inner end are dropped.
    ByTracer,
    /// By a sampling interrupt: every frame is where the CPU was,
    /// `perf_trace_*` included when the task was tracing.
    Sampled,
}

/// The folded line of a stack: `comm;outermost;…;innermost`, offsets
/// dropped (and the tracer's frames of a stack it took).
pub fn fold(comm: &str, frames: &[Arc<str>], taken: Taken) -> String {
    let inner = match taken {
        Taken::ByTracer => frames
            .iter()
            .position(|f| !tracer_frame(f))
            .unwrap_or(frames.len()),
        Taken::Sampled => 0,
    };
    // Spaces in a comm become `_`, as the collapsers write it.
    let mut s = comm.trim().replace(';', ":").replace(' ', "_");
    for f in frames[inner..].iter().rev() {
        s.push(';');
        s.push_str(function(f));
    }
    s
}

impl StackAnalysis {
    pub fn new() -> Self {
        Self::default()
    }

    /// A scheduler event: blocked stretches start and end here (of the
    /// threads `names` keeps). Returns the stretch that ended, when it has
    /// a stack: (thread, off-CPU ns, stack).
    pub fn add(
        &mut self,
        o: &TraceEvent,
        names: &super::names::ThreadNames,
    ) -> Option<(u32, u64, Frames)> {
        if o.kind != Tracepoint::SchedSwitch {
            return None;
        }
        let f = &o.fields;
        let (Some(prev), Some(next)) = (f.int(Field::PrevPid), f.int(Field::NextPid)) else {
            return None;
        };
        let mut ended = None;
        let (prev, next) = (prev as u32, next as u32);
        if let Some(b) = self.blocked.remove(&next) {
            let ns = o.ts.saturating_sub(b.since);
            match b.stack {
                Some(stack) => {
                    if ns >= MIN_KEPT_STRETCH_NS && self.kept < MAX_KEPT_STRETCHES {
                        self.kept += 1;
                        self.stretches.entry(next).or_default().push(Stretch {
                            from_ns: b.since,
                            to_ns: o.ts,
                            frames: stack.clone(),
                        });
                    }
                    ended = Some((next, ns, stack.clone()));
                    *self.off_cpu.entry((b.comm, stack)).or_default() += ns
                }
                None => self.without_stack_ns += ns,
            }
        }
        self.awaiting_stack.remove(&o.cpu);
        let comm = f.str(Field::PrevComm).unwrap_or("");
        if prev != 0
            && matches!(task_state(f.get(Field::PrevState)), 'S' | 'D')
            && names.keeps_named(prev, comm)
        {
            let comm = crate::model::Comm::new(comm.as_bytes());
            self.blocked.insert(
                prev,
                Blocked {
                    since: o.ts,
                    comm,
                    stack: None,
                },
            );
            self.awaiting_stack.insert(o.cpu, prev);
        }
        ended
    }

    pub fn stack(&mut self, k: &StackEvent, names: &super::names::ThreadNames) {
        if k.sampled {
            // A sample with no frame folds to nothing (as the collapsers).
            if names.keeps(k.pid) && !k.frames.is_empty() {
                self.samples += 1;
                let key = (k.pid, names.comm(k.pid), k.frames.clone());
                *self.on_cpu.entry(key).or_default() += k.weight;
            }
            return;
        }
        self.stacks += 1;
        if self.awaiting_stack.get(&k.cpu) == Some(&k.pid) {
            self.awaiting_stack.remove(&k.cpu);
            if let Some(b) = self.blocked.get_mut(&k.pid) {
                b.stack = Some(k.frames.clone());
            }
        }
    }

    pub fn finish(self, names: &super::names::ThreadNames) -> StacksSummary {
        let off_cpu = folded(
            self.off_cpu
                .into_iter()
                .map(|((comm, stack), ns)| (comm.as_str().to_string(), stack, ns)),
            Taken::ByTracer,
        );
        let on_cpu = folded(
            self.on_cpu.into_iter().map(|((pid, then, stack), n)| {
                // The idle task is pid 0 on every CPU: perf names it swapper.
                // A thread not named yet when sampled takes its last name.
                let comm = match (pid, then.map(|c| c.as_str().to_string())) {
                    (0, _) => "swapper".to_string(),
                    (_, Some(c)) => c,
                    (_, None) => match names.get(pid) {
                        c if c.is_empty() => format!("pid {pid}"),
                        c => c,
                    },
                };
                (comm, stack, n)
            }),
            Taken::Sampled,
        );
        StacksSummary {
            samples: self.samples,
            on_cpu,
            stacks: self.stacks,
            off_cpu_ns: off_cpu.iter().map(|(_, ns)| ns).sum(),
            off_cpu_without_stack_ns: self.without_stack_ns,
            off_cpu,
            stretches: self.stretches,
        }
    }
}

/// Stacks of (comm, frames) folded and added up by line, largest first.
fn folded(stacks: impl Iterator<Item = (String, Frames, u64)>, taken: Taken) -> Vec<(String, u64)> {
    let mut by: FxHashMap<String, u64> = FxHashMap::default();
    for (comm, frames, n) in stacks {
        *by.entry(fold(&comm, &frames, taken)).or_default() += n;
    }
    let mut v: Vec<(String, u64)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// The scheduler's own frames at the inner end of a blocked stack
/// (`…;io_schedule;schedule;__schedule`): every blocked stack ends in
/// them; where the thread waited is the frame before.
pub const SCHEDULER_FRAMES: &[&str] = &[
    "__schedule",
    "schedule",
    "schedule_timeout",
    "schedule_hrtimeout_range",
    "schedule_hrtimeout_range_clock",
    "schedule_preempt_disabled",
    "io_schedule",
    "io_schedule_timeout",
];

/// Where an operation spent most of its blocked time: that stack's time
/// within the operation (stretches of 50 µs or more) and the stack,
/// innermost first, without the tracer's and the scheduler's frames.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct BlockedIn {
    pub ns: u64,
    pub stretches: u32,
    pub frames: Vec<String>,
}

impl StacksSummary {
    /// The stack thread `pid` spent most blocked time in within
    /// `from..to` (the parts of its stretches inside it), when stacks were
    /// recorded.
    pub fn most_blocked_in(&self, pid: u32, from: u64, to: u64) -> Option<BlockedIn> {
        let list = self.stretches.get(&pid)?;
        let first = list.partition_point(|s| s.to_ns <= from);
        let mut by: Vec<(&Frames, u64, u32)> = Vec::new();
        for s in list[first..].iter().take_while(|s| s.from_ns < to) {
            let ns = s.to_ns.min(to) - s.from_ns.max(from);
            match by
                .iter_mut()
                .find(|(f, _, _)| Arc::ptr_eq(f, &s.frames) || **f == s.frames)
            {
                Some(e) => {
                    e.1 += ns;
                    e.2 += 1;
                }
                None => by.push((&s.frames, ns, 1)),
            }
        }
        let (frames, ns, stretches) = by.into_iter().max_by_key(|(_, ns, _)| *ns)?;
        let frames = frames
            .iter()
            .map(|f| function(f))
            .skip_while(|f| tracer_frame(f) || SCHEDULER_FRAMES.contains(f))
            .map(String::from)
            .collect();
        Some(BlockedIn {
            ns,
            stretches,
            frames,
        })
    }

    /// The percent of the blocked time of ordinary threads (not kernel
    /// threads: `thread_kind` "task") whose stacks pass through one of
    /// `functions`, or `None` when those threads blocked with no stack.
    pub fn task_share_under(&self, functions: &[&str]) -> Option<f64> {
        let (mut all, mut under) = (0u64, 0u64);
        for (line, ns) in &self.off_cpu {
            let mut frames = line.split(';');
            let comm = frames.next().unwrap_or("");
            if super::sched::thread_kind(comm, 1) != "task" {
                continue;
            }
            all += ns;
            if frames.any(|f| functions.contains(&f)) {
                under += ns;
            }
        }
        (all > 0).then(|| under as f64 * 100.0 / all as f64)
    }

    /// Each function's share of the off-CPU time, in percent: the time of
    /// the stacks it is in (once per stack, however deep), like a flame
    /// graph's frame width. Largest first.
    pub fn off_cpu_functions(&self) -> Vec<(String, f64)> {
        function_shares(&self.off_cpu)
    }

    /// The same of the on-CPU samples.
    pub fn on_cpu_functions(&self) -> Vec<(String, f64)> {
        function_shares(&self.on_cpu)
    }

    /// Where the CPU was: each function the samples end in, its share.
    pub fn on_cpu_ends(&self) -> Vec<(String, f64)> {
        end_shares(&self.on_cpu, &[])
    }

    /// Where blocked threads waited: the function before the scheduler's
    /// frames at the inner end of each stack, its share of the time.
    pub fn off_cpu_ends(&self) -> Vec<(String, f64)> {
        end_shares(&self.off_cpu, SCHEDULER_FRAMES)
    }
}

/// Each function's share of folded stacks' counts, in percent, largest
/// first.
fn function_shares(folded: &[(String, u64)]) -> Vec<(String, f64)> {
    let mut by: FxHashMap<&str, u64> = FxHashMap::default();
    for (line, n) in folded {
        let mut seen: Vec<&str> = Vec::new();
        for f in line.split(';').skip(1) {
            if !seen.contains(&f) {
                seen.push(f);
                *by.entry(f).or_default() += n;
            }
        }
    }
    percent_of(by, folded)
}

/// Each innermost function's share of folded stacks' counts (perf
/// report's "Self"), the frames in `skip` at the inner end passed over,
/// in percent, largest first.
fn end_shares(folded: &[(String, u64)], skip: &[&str]) -> Vec<(String, f64)> {
    let mut by: FxHashMap<&str, u64> = FxHashMap::default();
    for (line, n) in folded {
        let mut frames = line.split(';').skip(1).collect::<Vec<_>>();
        while frames.len() > 1 && frames.last().is_some_and(|f| skip.contains(f)) {
            frames.pop();
        }
        *by.entry(frames.last().copied().unwrap_or("")).or_default() += n;
    }
    percent_of(by, folded)
}

/// Counts by function as percent of all the folded stacks' counts,
/// largest first.
fn percent_of(by: FxHashMap<&str, u64>, folded: &[(String, u64)]) -> Vec<(String, f64)> {
    let total = folded.iter().map(|(_, n)| n).sum::<u64>().max(1) as f64;
    let mut v: Vec<(String, f64)> = by
        .into_iter()
        .map(|(f, n)| (f.to_string(), n as f64 * 100.0 / total))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(names: &[&str]) -> Vec<Arc<str>> {
        names.iter().map(|n| Arc::from(*n)).collect()
    }

    #[test]
    fn folds_outermost_first_without_the_tracer_offsets_or_addresses() {
        let f = frames(&[
            "trace_event_raw_event_sched_switch+0x145",
            "__traceiter_sched_switch+0x41",
            "__schedule+0x628",
            "schedule+0x23",
            "add_transaction_credits+0x2d1",
            "0xffffffffc0123456",
            "do_syscall_64+0x71",
        ]);
        assert_eq!(
            fold("kworker/u8:1;x", &f, Taken::ByTracer),
            "kworker/u8:1:x;do_syscall_64;[unknown];add_transaction_credits;schedule;__schedule"
        );
    }

    #[test]
    fn blocked_time_runs_from_switch_out_to_switch_in() {
        use crate::model::{Comm, Fields, TraceEvent, Value};
        let switch = |ts: u64, prev: i64, state: &str, next: i64| {
            let mut fields = Fields::default();
            fields.push("prev_comm".into(), Value::Str("w".into()));
            fields.push("prev_pid".into(), Value::Int(prev));
            fields.push("prev_state".into(), Value::Str(state.into()));
            fields.push("next_pid".into(), Value::Int(next));
            TraceEvent::new(
                ts,
                0,
                prev as u32,
                "sched:sched_switch".into(),
                Comm::default(),
                fields,
            )
        };
        let names = crate::analyze::names::ThreadNames::default();
        let mut s = StackAnalysis::new();
        s.add(&switch(1_000, 7, "D", 0), &names);
        s.stack(
            &StackEvent {
                ts: 1_001,
                cpu: 0,
                pid: 7,
                frames: frames(&["schedule+0x1", "io_schedule+0x2"]).into(),
                sampled: false,
                weight: 1,
                comm: Default::default(),
            },
            &names,
        );
        // Preempted (R): not blocked, no stretch.
        s.add(&switch(2_000, 8, "R", 0), &names);
        s.add(&switch(5_000, 0, "R", 7), &names);
        s.add(&switch(6_000, 0, "R", 8), &names);
        let sum = s.finish(&names);
        assert_eq!(
            sum.off_cpu,
            vec![("w;io_schedule;schedule".to_string(), 4_000)]
        );
        assert_eq!(sum.off_cpu_without_stack_ns, 0);
        assert_eq!(sum.task_share_under(&["io_schedule"]), Some(100.0));
        assert_eq!(
            sum.task_share_under(&["add_transaction_credits"]),
            Some(0.0)
        );
    }
}

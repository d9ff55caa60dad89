//! How long kernel functions took, as bcc's `funclatency` shows it, for
//! the functions a recording asked for (`record --func`, `report --func`).
//!
//! Two ways of seeing a function, whichever the trace has:
//!
//! - **calls**: the function's own tracepoints at its entry and return
//!   ([`BRACKETS`], e.g. `ext4_sync_file_enter`/`_exit`): every call from
//!   entry to return, exact.
//! - **blocked**: each time a thread blocked with the function on its
//!   kernel stack (the off-CPU stacks of `record --stacks`), how long it
//!   stayed off its CPU. A call that blocks twice counts twice and a call
//!   that never blocks does not count: what it measures is the waiting
//!   inside the function, which is where a slow call's time goes
//!   (`add_transaction_credits` waiting for journal space).
//!
//! Kprobes and BPF fentry would see every call of any function; kernels
//! without kprobe events, or that refuse function tracing, leave these two.

use super::histogram::Log2Hist;
use super::names::ThreadNames;
use crate::model::function_brackets::BRACKETS;
use crate::model::TraceEvent;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Count, time and log2 histogram of one function's latencies.
#[derive(Debug, Default, Clone, Serialize, PartialEq)]
pub struct Tally {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Nanoseconds, bcc's power-of-two slots.
    pub histogram: Log2Hist,
    /// The same in microseconds, for the text report.
    #[serde(skip)]
    pub histogram_us: Log2Hist,
}

impl Tally {
    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
        self.histogram.add(ns);
        self.histogram_us.add(ns / 1000);
    }

    pub fn avg_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// One function's latencies, all threads together and by thread.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FunctionLatency {
    pub name: String,
    /// `calls` (entry to return) or `blocked` (each blocked stretch with
    /// the function on the stack); see the module's comment.
    pub method: &'static str,
    #[serde(flatten)]
    pub all: Tally,
    /// By `comm (tid)`, largest total first.
    pub by_process: Vec<ProcessLatency>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessLatency {
    pub process: String,
    #[serde(flatten)]
    pub tally: Tally,
}

#[derive(Default)]
struct Seen {
    all: Tally,
    by_thread: FxHashMap<u32, Tally>,
}

impl Seen {
    fn add(&mut self, pid: u32, ns: u64) {
        self.all.add(ns);
        self.by_thread.entry(pid).or_default().add(ns);
    }
}

#[derive(Default)]
pub struct FunctionAnalysis {
    /// The functions asked for, in the order asked.
    wanted: Vec<String>,
    calls: FxHashMap<usize, Seen>,
    blocked: FxHashMap<usize, Seen>,
    /// Calls under way: (function, thread) → entry time.
    entered: FxHashMap<(usize, u32), u64>,
    /// By tracepoint name: (function, is the entry).
    events: FxHashMap<&'static str, (usize, bool)>,
}

impl FunctionAnalysis {
    pub fn new(wanted: &[String]) -> Self {
        let mut events = FxHashMap::default();
        for (i, name) in wanted.iter().enumerate() {
            if let Some((_, enter, exit)) = BRACKETS.iter().find(|(f, _, _)| f == name) {
                events.insert(*enter, (i, true));
                events.insert(*exit, (i, false));
            }
        }
        FunctionAnalysis {
            wanted: wanted.to_vec(),
            events,
            ..Default::default()
        }
    }

    /// An entry or return tracepoint of a wanted function.
    pub fn add(&mut self, o: &TraceEvent, names: &ThreadNames) {
        // Most reports ask for no function: no lookup per event then.
        if self.events.is_empty() {
            return;
        }
        let Some(&(i, is_entry)) = self.events.get(o.short_name()) else {
            return;
        };
        if is_entry {
            self.entered.insert((i, o.pid), o.ts);
        } else if let Some(t0) = self.entered.remove(&(i, o.pid)) {
            if names.keeps(o.pid) {
                self.calls
                    .entry(i)
                    .or_default()
                    .add(o.pid, o.ts.saturating_sub(t0));
            }
        }
    }

    /// A blocked stretch of thread `pid` that ended, with its stack's
    /// function names (any order).
    pub fn blocked<'a>(&mut self, pid: u32, ns: u64, functions: impl Iterator<Item = &'a str>) {
        if self.wanted.is_empty() {
            return;
        }
        let mut hit: Vec<usize> = Vec::new();
        for f in functions {
            if let Some(i) = self.wanted.iter().position(|w| w == f) {
                if !hit.contains(&i) {
                    hit.push(i);
                }
            }
        }
        for i in hit {
            self.blocked.entry(i).or_default().add(pid, ns);
        }
    }

    /// One entry per wanted function: its calls when its tracepoints were
    /// in the trace, else its blocked stretches.
    pub fn finish(mut self, names: &ThreadNames) -> Vec<FunctionLatency> {
        let mut out = Vec::new();
        for (i, name) in self.wanted.iter().enumerate() {
            let bracketed = BRACKETS.iter().any(|(f, _, _)| f == name);
            let (method, seen) = match (self.calls.remove(&i), self.blocked.remove(&i)) {
                (Some(c), _) => ("calls", c),
                (None, Some(b)) => ("blocked", b),
                (None, None) if bracketed => ("calls", Seen::default()),
                (None, None) => ("blocked", Seen::default()),
            };
            // `comm (tid)` names one thread: nothing to add up.
            let mut by_process: Vec<ProcessLatency> = seen
                .by_thread
                .into_iter()
                .map(|(pid, tally)| ProcessLatency {
                    process: names.process(pid),
                    tally,
                })
                .collect();
            by_process.sort_by(|a, b| {
                b.tally
                    .total_ns
                    .cmp(&a.tally.total_ns)
                    .then_with(|| a.process.cmp(&b.process))
            });
            out.push(FunctionLatency {
                name: name.clone(),
                method,
                all: seen.all,
                by_process,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Comm, Fields};

    fn ev(ts: u64, pid: u32, name: &str) -> TraceEvent {
        TraceEvent::new(ts, 0, pid, name.into(), Comm::default(), Fields::default())
    }

    #[test]
    fn calls_run_from_entry_to_return_per_thread() {
        let names = ThreadNames::default();
        let mut f = FunctionAnalysis::new(&["ext4_sync_file".to_string()]);
        f.add(&ev(1_000, 7, "ext4:ext4_sync_file_enter"), &names);
        f.add(&ev(2_000, 8, "ext4:ext4_sync_file_enter"), &names);
        f.add(&ev(3_000, 7, "ext4:ext4_sync_file_exit"), &names);
        f.add(&ev(9_000, 8, "ext4:ext4_sync_file_exit"), &names);
        // A return without its entry (the call began before the trace).
        f.add(&ev(9_500, 9, "ext4:ext4_sync_file_exit"), &names);
        let out = f.finish(&names);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].method, "calls");
        assert_eq!(
            (out[0].all.count, out[0].all.total_ns, out[0].all.max_ns),
            (2, 9_000, 7_000)
        );
        assert_eq!(out[0].all.avg_ns(), 4_500);
        assert_eq!(out[0].by_process[0].process, " (8)");
        assert_eq!(out[0].by_process[0].tally.total_ns, 7_000);
    }

    #[test]
    fn blocked_stretches_count_once_per_stack_however_deep() {
        let names = ThreadNames::default();
        let want = ["add_transaction_credits".to_string(), "nowhere".to_string()];
        let mut f = FunctionAnalysis::new(&want);
        let stack = [
            "schedule",
            "add_transaction_credits",
            "add_transaction_credits",
        ];
        f.blocked(5, 150_000_000, stack.iter().copied());
        f.blocked(5, 50_000_000, stack.iter().copied());
        f.blocked(5, 1_000, ["schedule", "io_schedule"].iter().copied());
        let out = f.finish(&names);
        assert_eq!(out[0].method, "blocked");
        assert_eq!((out[0].all.count, out[0].all.avg_ns()), (2, 100_000_000));
        assert_eq!(out[0].all.histogram.total(), 2);
        assert_eq!((out[1].name.as_str(), out[1].all.count), ("nowhere", 0));
    }
}

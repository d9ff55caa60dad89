//! Keeps each source's timeline honest before the merge: a damaged
//! timestamp must not become a latency of a second or a span of 146 years.
//!
//! What the producers guarantee: each CPU's events come in time order.
//! blktrace stamps a record on its CPU with interrupts off, after reserving
//! its place in that CPU's relay buffer; the ftrace ring buffer is per CPU
//! and its deltas cannot go back (the kernel checks this under
//! `CONFIG_RING_BUFFER_VALIDATE_TIME_DELTAS`); `trace_pipe` and
//! `perf script` interleave CPUs, keeping each CPU's order, with a little
//! jitter between CPUs (perf warns of "out of order events" across its
//! flush rounds). Every committed fixture is in order to the nanosecond
//! per CPU and per file. So:
//!
//! - an event more than [`TOLERANCE_NS`] earlier than an event before it on
//!   the same CPU, or half a [`JUMP_NS`] earlier than any before it in its
//!   source, is skipped (time went backwards);
//! - an event more than [`JUMP_NS`] after everything before it in its
//!   source is held, with the events after it, until the stream says
//!   whether it was a real pause or a damaged timestamp: two events in a
//!   row back near the old timeline drop the jumped events; [`CONFIRM`]
//!   events that follow the jump accept it. At the end of the input (or at
//!   its start, with nothing before), a jump of more than [`ABSURD_NS`] is
//!   dropped, a shorter one kept.
//!
//! Holding changes no order: the events come out as the source gave them.
//! The common case, an event in order, costs two comparisons.
//!
//! An event earlier than one before it on its CPU, but within the
//! tolerance, is kept, and from then on the source's events pass through a
//! window that puts them back in time order (as blkparse, `trace-cmd
//! report` and perf's ordered events do): each waits until an event
//! [`TOLERANCE_NS`] later arrives, at most [`WINDOW_EVENTS`] at a time.
//! Sources in order never enter it.

mod jumps;

use super::resort::Window;
pub use super::resort::WINDOW_EVENTS;
use super::source::{Position, Source};
use crate::model::Event;
use std::collections::{HashMap, VecDeque};
use std::path::Path;

/// How much earlier than an earlier event of its CPU an event may be.
pub const TOLERANCE_NS: u64 = 1_000_000;
/// A step forward that makes the events after it suspect.
pub const JUMP_NS: u64 = 1_000_000_000;
/// More than any pause in a trace: at either end of an input, where no
/// event after it can confirm a jump, a jump this long is damage.
pub const ABSURD_NS: u64 = 86_400 * 1_000_000_000;
/// Events after a jump that confirm it.
pub const CONFIRM: usize = 1024;
/// Events at the start of a source that confirm its first one.
const CONFIRM_START: usize = 3;
/// CPUs numbered below this are tracked in a vector.
const DENSE_CPUS: u32 = 1024;
/// Events skipped for one reason: how many, and the first one.
#[derive(Debug, Clone, Default)]
pub struct Skipped {
    pub count: u64,
    pub first: Option<String>,
}

impl Skipped {
    fn add(&mut self, first: impl FnOnce() -> String) {
        if self.first.is_none() {
            self.first = Some(first());
        }
        self.count += 1;
    }
}

/// A jump being judged.
#[derive(Debug, Clone, Copy)]
struct Jump {
    /// The latest time before it; `None` at the start of the source.
    from: Option<u64>,
    /// The time it jumped to (its first event's).
    to: u64,
    /// The latest time among the events held since.
    max: u64,
    /// How many timed events are held.
    timed: usize,
}

/// One source's guard; the merger keeps one per source.
#[derive(Default)]
pub struct TimeGuard {
    /// The latest accepted time of each CPU (0: none yet).
    cpu_last: Vec<u64>,
    cpu_last_sparse: HashMap<u32, u64>,
    /// The latest accepted time of the source.
    last: Option<u64>,
    jump: Option<Jump>,
    /// The events read since the jump, untimed ones included, in order.
    held: VecDeque<(Event, Position)>,
    /// An event back near the old timeline, waiting for a second.
    returner: Option<(Event, Position)>,
    /// The source's first event, when the second came more than
    /// [`ABSURD_NS`] after it: one of the two is damaged.
    island: Option<(Event, Position)>,
    /// Events read from the source and to be judged again, in order.
    replay: VecDeque<(Event, Position)>,
    source_done: bool,
    /// Something is held or to be judged again (`calm` is false).
    judging: bool,
    pub backwards: Skipped,
    pub far: Skipped,
    /// Events kept although earlier than an event before them on their
    /// CPU (within [`TOLERANCE_NS`]), and the most one was behind.
    pub behind: Skipped,
    behind_most: u64,
    /// Set at the first event behind its CPU.
    window: Option<Window>,
    /// Events the window passed on still out of order (it was full).
    pub unsorted: u64,
}

/// An event's time and CPU; `None` for events outside the timeline.
#[inline]
pub fn time_and_cpu(ev: &Event) -> Option<(u64, u32)> {
    match ev {
        Event::Block(b) => Some((b.ts, b.cpu)),
        Event::Trace(o) => Some((o.ts, o.cpu)),
        Event::Stack(k) => Some((k.ts, k.cpu)),
        Event::ProcessName { .. } | Event::ThreadGroup { .. } => None,
    }
}

fn secs(ns: u64) -> String {
    format!("{}.{:06} s", ns / 1_000_000_000, ns % 1_000_000_000 / 1000)
}

impl TimeGuard {
    pub fn new() -> TimeGuard {
        TimeGuard::default()
    }

    /// The next event of `src` that keeps to its timeline.
    #[cfg(test)]
    pub fn next(&mut self, src: &mut dyn Source) -> Option<Event> {
        let mut slot = None;
        self.next_into(src, &mut slot);
        slot
    }

    /// Reads the next event of `src` that keeps to its timeline into
    /// `slot`, in place (the merger's heads: no move of the event in the
    /// common case, an event in order on its CPU); false at the end.
    #[inline]
    pub fn next_into(&mut self, src: &mut dyn Source, slot: &mut Option<Event>) -> bool {
        if self.calm() {
            src.next_into(slot);
            let Some(ev) = slot.as_ref() else {
                return false;
            };
            let Some((ts, cpu)) = time_and_cpu(ev) else {
                return true;
            };
            if self.in_order(ts, cpu) {
                return true;
            }
            let ev = slot.take().expect("just read");
            let p = src.position();
            self.defer(ev, p);
        }
        *slot = self.next_judged(src);
        slot.is_some()
    }

    /// Nothing held and nothing to judge again: the next event comes
    /// straight from the source, to `in_order`.
    #[inline]
    fn calm(&self) -> bool {
        !self.judging
    }

    /// An event `in_order` did not take, just read at `p`: judged by
    /// `next_judged`.
    fn defer(&mut self, ev: Event, p: Position) {
        self.replay.push_front((ev, p));
        self.judging = true;
    }

    /// Takes an event that follows the timeline closely (the common case);
    /// false when it must be judged (`next_judged`), the timeline untouched.
    #[inline]
    fn in_order(&mut self, ts: u64, cpu: u32) -> bool {
        let Some(last) = self.last else {
            return false;
        };
        if ts > last.saturating_add(JUMP_NS) || ts.saturating_add(JUMP_NS / 2) < last {
            return false;
        }
        let Some(prev) = self.cpu_last.get_mut(cpu as usize) else {
            return false;
        };
        if ts.saturating_add(TOLERANCE_NS) < *prev {
            return false;
        }
        if ts < *prev {
            // Behind its CPU: counted; the first is judged, to say where.
            if self.behind.first.is_none() {
                return false;
            }
            self.behind.count += 1;
            self.behind_most = self.behind_most.max(*prev - ts);
        }
        if ts > *prev {
            *prev = ts;
        }
        if ts > last {
            self.last = Some(ts);
        }
        true
    }

    /// `next` when something is held or to be judged again; calm again
    /// once nothing is.
    #[cold]
    #[inline(never)]
    fn next_judged(&mut self, src: &mut dyn Source) -> Option<Event> {
        if self.window.is_some() {
            return self.next_sorted(src);
        }
        match (self.judge(src), self.window.as_mut()) {
            (Some(ev), Some(w)) => {
                // The first event behind its CPU opened the window: it
                // goes in, and all after it.
                w.push(ev);
                self.judging = true;
                self.next_sorted(src)
            }
            (ev, _) => {
                self.judging = self.jump.is_some() || !self.replay.is_empty();
                ev
            }
        }
    }

    /// The next event out of the re-sorting window: the earliest once one
    /// [`TOLERANCE_NS`] later has come in (or the window is full, or the
    /// source ended).
    fn next_sorted(&mut self, src: &mut dyn Source) -> Option<Event> {
        loop {
            let w = self.window.as_mut().expect("sorting");
            if let Some((ev, late)) = w.pop_ready() {
                self.unsorted += u64::from(late);
                return Some(ev);
            }
            if w.drained {
                return None;
            }
            match self.judge(src) {
                Some(ev) => self.window.as_mut().expect("sorting").push(ev),
                None => self.window.as_mut().expect("sorting").drained = true,
            }
        }
    }

    fn judge(&mut self, src: &mut dyn Source) -> Option<Event> {
        loop {
            let (ev, pos) = match self.replay.pop_front() {
                Some((ev, p)) => (ev, Some(p)),
                None => match self.read(src) {
                    Some(ev) => (ev, None),
                    None if self.jump.is_some() => {
                        self.end_of_input();
                        continue;
                    }
                    None => return None,
                },
            };
            let (Some(ts), Some(cpu)) = (ev.ts(), ev.cpu()) else {
                if self.jump.is_some() {
                    let p = pos.unwrap_or_else(|| src.position());
                    self.held.push_back((ev, p));
                    continue;
                }
                return Some(ev);
            };
            if self.jump.is_some() {
                let p = pos.unwrap_or_else(|| src.position());
                self.while_held(ev, ts, p);
                continue;
            }
            let prev = self.cpu_last(cpu);
            let last = self.last.unwrap_or(0);
            if ts.saturating_add(TOLERANCE_NS) < prev || ts.saturating_add(JUMP_NS / 2) < last {
                let p = pos.unwrap_or_else(|| src.position());
                self.backwards.add(|| {
                    let (before, of) = match ts.saturating_add(TOLERANCE_NS) < prev {
                        true => (prev, format!(" of CPU {cpu}")),
                        false => (last, String::new()),
                    };
                    format!(
                        "{p} at {}, {} before an earlier event{of}",
                        secs(ts),
                        secs(before - ts)
                    )
                });
                continue;
            }
            let jumped = match self.last {
                Some(last) => ts > last.saturating_add(JUMP_NS),
                None => true,
            };
            if jumped {
                let p = pos.unwrap_or_else(|| src.position());
                self.jump = Some(Jump {
                    from: self.last,
                    to: ts,
                    max: ts,
                    timed: 1,
                });
                self.held.push_back((ev, p));
                continue;
            }
            if ts > prev {
                self.set_cpu_last(cpu, ts);
            } else if ts < prev {
                let p = pos.unwrap_or_else(|| src.position());
                self.behind
                    .add(|| format!("{p} at {}, {} behind", secs(ts), secs(prev - ts)));
                self.behind_most = self.behind_most.max(prev - ts);
                // The source is out of order: re-sorted from here on.
                let newest = self.last.unwrap_or(ts);
                self.window.get_or_insert_with(|| Window::opened_at(newest));
            }
            if self.last.is_some_and(|l| ts > l) {
                self.last = Some(ts);
            }
            return Some(ev);
        }
    }

    fn read(&mut self, src: &mut dyn Source) -> Option<Event> {
        if self.source_done {
            return None;
        }
        let ev = src.next_event();
        self.source_done = ev.is_none();
        ev
    }

    #[inline]
    fn cpu_last(&self, cpu: u32) -> u64 {
        if cpu < DENSE_CPUS {
            self.cpu_last.get(cpu as usize).copied().unwrap_or(0)
        } else {
            self.cpu_last_sparse.get(&cpu).copied().unwrap_or(0)
        }
    }

    fn set_cpu_last(&mut self, cpu: u32, ts: u64) {
        if cpu < DENSE_CPUS {
            let i = cpu as usize;
            if self.cpu_last.len() <= i {
                self.cpu_last.resize(i + 1, 0);
            }
            self.cpu_last[i] = ts;
        } else {
            self.cpu_last_sparse.insert(cpu, ts);
        }
    }

    /// What was skipped, as warnings naming the source's file.
    pub fn warnings(&self, path: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let n = |c: u64| if c == 1 { "event" } else { "events" };
        if self.backwards.count > 0 {
            out.push(format!(
                "{}: skipped {} {} whose time went backwards, earlier than events before them (first: {}): damaged timestamps or a file out of order",
                path.display(),
                self.backwards.count,
                n(self.backwards.count),
                self.backwards.first.as_deref().unwrap_or("?")
            ));
        }
        if self.behind.count > 0 {
            out.push(format!(
                "{}: {} {} came earlier than an event before them on the same CPU, by up to {} (first: {}): from the first on, the file's events were put back in time order (within the {} ms tolerance){}, but intervals and rates around them are not to be trusted (a file out of order, or damaged timestamps)",
                path.display(),
                self.behind.count,
                n(self.behind.count),
                secs(self.behind_most),
                self.behind.first.as_deref().unwrap_or("?"),
                TOLERANCE_NS / 1_000_000,
                match self.unsorted {
                    0 => String::new(),
                    k => format!("; {k} could not be, more than {WINDOW_EVENTS} events coming within it"),
                }
            ));
        }
        if self.far.count > 0 {
            out.push(format!(
                "{}: skipped {} {} far out of time with the events around them (first: {}): a damaged timestamp",
                path.display(),
                self.far.count,
                n(self.far.count),
                self.far.first.as_deref().unwrap_or("?")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests;

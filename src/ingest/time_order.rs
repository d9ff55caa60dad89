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
        Event::ProcessName { .. } => None,
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

    /// An event read while a jump is judged.
    fn while_held(&mut self, ev: Event, ts: u64, p: Position) {
        let j = self.jump.expect("held");
        if j.from.is_none() && j.timed == 1 && ts > j.to.saturating_add(ABSURD_NS) {
            // The source's first event lies far before this one: judge
            // this one as a jump from it, the first set aside meanwhile.
            let i = self.held.iter().position(|(e, _)| e.ts().is_some());
            self.island = i.and_then(|i| self.held.remove(i));
            self.jump = Some(Jump {
                from: Some(j.to),
                to: ts,
                max: ts,
                timed: 1,
            });
            self.held.push_back((ev, p));
            return;
        }
        if ts >= j.to.saturating_sub(JUMP_NS / 2) {
            // Follows the jump: the one event back was the damaged one.
            if let Some((r, rp)) = self.returner.take() {
                let rts = r.ts().unwrap_or(0);
                self.backwards.add(|| {
                    format!(
                        "{rp} at {}, {} before the event before it",
                        secs(rts),
                        secs(j.max.saturating_sub(rts))
                    )
                });
            }
            self.held.push_back((ev, p));
            let j = self.jump.as_mut().expect("held");
            j.timed += 1;
            j.max = j.max.max(ts);
            let enough = match (j.from, &self.island) {
                (_, Some(_)) => 2,
                (Some(_), None) => CONFIRM,
                (None, None) => CONFIRM_START,
            };
            if j.timed >= enough {
                self.accept_held();
            }
            return;
        }
        // Back near the timeline before the jump.
        match self.returner.take() {
            None => self.returner = Some((ev, p)),
            Some(r) => {
                let back = r.0.ts().unwrap_or(0);
                self.replay.push_front((ev, p));
                self.replay.push_front(r);
                self.drop_jump(back);
            }
        }
    }

    /// The source ended while a jump was judged.
    fn end_of_input(&mut self) {
        let j = self.jump.expect("held");
        match self.returner.take() {
            Some(r) => {
                let back = r.0.ts().unwrap_or(0);
                if j.to.saturating_sub(back) > ABSURD_NS {
                    self.replay.push_front(r);
                    self.drop_jump(back);
                } else {
                    let (rp, rts) = (r.1, back);
                    self.backwards.add(|| {
                        format!(
                            "{rp} at {}, {} before the event before it",
                            secs(rts),
                            secs(j.max.saturating_sub(rts))
                        )
                    });
                    self.accept_held();
                }
            }
            None => match j.from {
                Some(from) if j.to.saturating_sub(from) > ABSURD_NS => self.drop_jump(from),
                _ => self.accept_held(),
            },
        }
    }

    /// The jump was damage: its events are skipped; `back` is the time the
    /// timeline went on at.
    fn drop_jump(&mut self, back: u64) {
        let j = self.jump.expect("held");
        let gap = j.to.saturating_sub(j.from.unwrap_or(back));
        let side = if j.from.is_some() {
            "after the event before it"
        } else {
            "after the events that follow it"
        };
        self.drop_held(|first| format!("{first}, {} {side}", secs(gap)));
        // The first event set aside was right: it starts the source again.
        if let Some(first) = self.island.take() {
            self.replay.push_front(first);
        }
    }

    /// Skips the held timed events (the first described by `say`) and
    /// puts the untimed ones back.
    fn drop_held(&mut self, say: impl FnOnce(String) -> String) {
        self.jump = None;
        let mut say = Some(say);
        let mut keep = Vec::new();
        for (ev, p) in std::mem::take(&mut self.held) {
            match ev.ts() {
                None => keep.push((ev, p)),
                Some(ts) => {
                    let say = say.take();
                    self.far
                        .add(|| (say.expect("first"))(format!("{p} at {}", secs(ts))));
                }
            }
        }
        for x in keep.into_iter().rev() {
            self.replay.push_front(x);
        }
    }

    /// The jump was real: the held events are judged again, from it on.
    fn accept_held(&mut self) {
        let j = self.jump.take().expect("held");
        if let Some((ev, p)) = self.island.take() {
            // The source's first event, far before all that follows.
            let ts = ev.ts().unwrap_or(0);
            self.far.add(|| {
                format!(
                    "{p} at {}, {} before the events after it",
                    secs(ts),
                    secs(j.to.saturating_sub(ts))
                )
            });
        }
        self.last = Some(j.to);
        for x in std::mem::take(&mut self.held).into_iter().rev() {
            self.replay.push_front(x);
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
mod tests {
    use super::*;
    use crate::ingest::source::SourceStats;
    use crate::model::{Comm, TraceEvent};

    /// Events given as (cpu, ts); `None` is a process name.
    struct Fake {
        events: std::vec::IntoIter<Option<(u32, u64)>>,
        n: u64,
        stats: SourceStats,
    }

    impl Source for Fake {
        fn next_event(&mut self) -> Option<Event> {
            let e = self.events.next()?;
            self.n += 1;
            Some(match e {
                Some((cpu, ts)) => Event::Trace(TraceEvent::new(
                    ts,
                    cpu,
                    self.n as u32,
                    "x".into(),
                    Comm::default(),
                    Default::default(),
                )),
                None => Event::ProcessName {
                    pid: self.n as u32,
                    comm: Comm::new(b"name"),
                },
            })
        }
        fn path(&self) -> &Path {
            Path::new("fake")
        }
        fn format(&self) -> &'static str {
            "fake"
        }
        fn stats(&self) -> &SourceStats {
            &self.stats
        }
        fn position(&self) -> Position {
            Position::Event(self.n)
        }
    }

    const S: u64 = 1_000_000_000;

    /// What comes out (cpu, ts, or None for a name), and the guard.
    fn run(events: Vec<Option<(u32, u64)>>) -> (Vec<Option<(u32, u64)>>, TimeGuard) {
        let mut src = Fake {
            events: events.into_iter(),
            n: 0,
            stats: SourceStats::default(),
        };
        let mut g = TimeGuard::new();
        let mut out = Vec::new();
        while let Some(ev) = g.next(&mut src) {
            out.push(ev.ts().map(|t| (ev.cpu().unwrap(), t)));
        }
        (out, g)
    }

    fn timed(ts: &[u64]) -> Vec<Option<(u32, u64)>> {
        ts.iter().map(|&t| Some((0, t))).collect()
    }

    #[test]
    fn in_order_passes_unchanged() {
        let mut v = timed(&[10 * S, 10 * S, 10 * S + 5, 11 * S]);
        v.insert(2, None);
        let (out, g) = run(v.clone());
        assert_eq!(out, v);
        assert_eq!((g.backwards.count, g.far.count), (0, 0));
    }

    #[test]
    fn one_event_a_second_early_is_skipped() {
        // Among the first events (judged with the events after them).
        let (out, g) = run(timed(&[10 * S, 10 * S + 1, 9 * S, 10 * S + 2]));
        assert_eq!(out, timed(&[10 * S, 10 * S + 1, 10 * S + 2]));
        assert_eq!(g.backwards.count, 1);
        assert_eq!(
            g.backwards.first.as_deref(),
            Some("event 3 at 9.000000 s, 1.000000 s before the event before it")
        );
        // Later on.
        let start = [Some((0, 10 * S)), Some((1, 10 * S)), Some((0, 10 * S + 1))];
        let with = |rest: &[Option<(u32, u64)>]| {
            let mut v = start.to_vec();
            v.extend_from_slice(rest);
            v
        };
        let (out, g) = run(with(&[Some((0, 9 * S)), Some((0, 10 * S + 4))]));
        assert_eq!(out, with(&[Some((0, 10 * S + 4))]));
        assert_eq!(
            g.backwards.first.as_deref(),
            Some("event 4 at 9.000000 s, 1.000000 s before an earlier event of CPU 0")
        );
        // Within the tolerance, or on another CPU a little behind: kept,
        // and in time order from the one behind its CPU on.
        let (out, g) = run(with(&[
            Some((0, 10 * S + 1 - 500_000)),
            Some((2, 10 * S - 100_000_000)),
        ]));
        let v = with(&[
            Some((2, 10 * S - 100_000_000)),
            Some((0, 10 * S + 1 - 500_000)),
        ]);
        assert_eq!((out, g.backwards.count), (v, 0));
        // Another CPU far behind the rest of the file: skipped.
        let (out, g) = run(with(&[Some((3, 8 * S)), Some((0, 10 * S + 2))]));
        assert_eq!(out, with(&[Some((0, 10 * S + 2))]));
        assert_eq!(
            g.backwards.first.as_deref(),
            Some("event 4 at 8.000000 s, 2.000000 s before an earlier event")
        );
    }

    #[test]
    fn one_event_far_ahead_is_skipped() {
        let far = 4_600_000_000 * S;
        let (out, g) = run(timed(&[10 * S, 10 * S + 1, far, 10 * S + 2, 10 * S + 3]));
        assert_eq!(out, timed(&[10 * S, 10 * S + 1, 10 * S + 2, 10 * S + 3]));
        assert_eq!((g.backwards.count, g.far.count), (0, 1));
        assert_eq!(
            g.far.first.as_deref(),
            Some("event 3 at 4600000000.000000 s, 4599999989.999999 s after the event before it")
        );
        // A few seconds ahead, the same.
        let (out, g) = run(timed(&[10 * S, 15 * S, 10 * S + 2, 10 * S + 3]));
        assert_eq!(out, timed(&[10 * S, 10 * S + 2, 10 * S + 3]));
        assert_eq!(g.far.count, 1);
        // Far ahead as the last event: skipped; a few seconds: a real pause.
        let (out, g) = run(timed(&[10 * S, 10 * S + 1, far]));
        assert_eq!((out.len(), g.far.count), (2, 1));
        let (out, g) = run(timed(&[10 * S, 10 * S + 1, 15 * S]));
        assert_eq!((out.len(), g.far.count), (3, 0));
    }

    #[test]
    fn a_pause_is_kept() {
        let mut ts: Vec<u64> = (0..10).map(|i| 10 * S + i).collect();
        ts.extend((0..2000).map(|i| 300 * S + i));
        let (out, g) = run(timed(&ts));
        assert_eq!(out, timed(&ts));
        assert_eq!((g.backwards.count, g.far.count), (0, 0));
        // A short burst after the pause, then the end; and names in between.
        let mut v = timed(&[10 * S, 10 * S + 1, 300 * S, 300 * S + 1]);
        v.insert(3, None);
        let (out, g) = run(v.clone());
        assert_eq!((out, g.far.count), (v, 0));
    }

    #[test]
    fn one_early_event_after_a_pause_is_skipped_not_the_pause() {
        let (out, g) = run(timed(&[
            10 * S,
            300 * S,
            300 * S + 1,
            10 * S + 1,
            300 * S + 2,
        ]));
        assert_eq!(out, timed(&[10 * S, 300 * S, 300 * S + 1, 300 * S + 2]));
        assert_eq!((g.backwards.count, g.far.count), (1, 0));
    }

    #[test]
    fn a_damaged_first_event_is_skipped() {
        let far = 4_600_000_000 * S;
        let (out, g) = run(timed(&[far, 10 * S, 10 * S + 1, 10 * S + 2]));
        assert_eq!(out, timed(&[10 * S, 10 * S + 1, 10 * S + 2]));
        assert_eq!(g.far.count, 1);
        let (out, g) = run(timed(&[5, 3 * 86_400 * S, 3 * 86_400 * S + 1]));
        assert_eq!(out, timed(&[3 * 86_400 * S, 3 * 86_400 * S + 1]));
        assert_eq!(g.far.count, 1);
        assert_eq!(
            g.far.first.as_deref(),
            Some("event 1 at 0.000000 s, 259199.999999 s before the events after it")
        );
    }

    #[test]
    fn names_keep_their_place_around_skipped_events() {
        let far = 4_600_000_000 * S;
        let v = vec![
            Some((0, 10 * S)),
            Some((0, far)),
            None,
            Some((0, 10 * S + 1)),
            Some((0, 10 * S + 2)),
        ];
        let (out, _) = run(v);
        assert_eq!(
            out,
            vec![
                Some((0, 10 * S)),
                None,
                Some((0, 10 * S + 1)),
                Some((0, 10 * S + 2))
            ]
        );
    }

    #[test]
    fn a_cpu_going_back_within_the_tolerance_is_resorted_from_there() {
        // Event 3 goes back on CPU 0: from it on, time order (event 2 was
        // passed on before); equal times keep the order read; the name
        // stays after the event read before it.
        let v = vec![
            Some((0, 10 * S)),
            Some((0, 10 * S + 500)),
            Some((0, 10 * S + 300)),
            Some((1, 10 * S + 400)),
            None,
            Some((0, 10 * S + 200)),
            Some((1, 10 * S + 200)),
            Some((0, 10 * S + 2_000_000)),
        ];
        let (out, g) = run(v);
        assert_eq!(
            out,
            vec![
                Some((0, 10 * S)),
                Some((0, 10 * S + 500)),
                Some((0, 10 * S + 200)),
                Some((1, 10 * S + 200)),
                Some((0, 10 * S + 300)),
                Some((1, 10 * S + 400)),
                None,
                Some((0, 10 * S + 2_000_000)),
            ]
        );
        assert_eq!((g.behind.count, g.unsorted, g.backwards.count), (3, 0, 0));
    }

    #[test]
    fn the_resorting_window_is_bounded() {
        // More events within the tolerance than the window holds, each
        // 1 ns before the one before it, after one that opens the window.
        let n = WINDOW_EVENTS as u64 + 10;
        let mut ts = vec![10 * S + n + 1, 10 * S + n];
        ts.extend((0..n).map(|i| 10 * S + n - 1 - i));
        let (out, g) = run(timed(&ts));
        assert_eq!(out.len(), ts.len());
        // Full, the window passes on its earliest: the 11 read after that,
        // each earlier still, came out of order, and are counted.
        assert_eq!(g.unsorted, 11);
        let w = g.warnings(Path::new("f"));
        assert!(
            w[0].contains("; 11 could not be, more than 65536 events coming within it"),
            "{w:?}"
        );
    }
}

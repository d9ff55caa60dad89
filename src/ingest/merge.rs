//! Merges several sources into one time-ordered stream.
//!
//! The order of events with equal timestamps follows blkparse's merge of
//! per-CPU files (`ms_sort`/`ms_resort`), so that iosleuth hands btt's
//! algorithm the very sequence btt sees after `blkparse -d`.

use super::source::Source;
use super::time_order::TimeGuard;
use crate::model::Event;
use std::collections::VecDeque;

pub struct Merger {
    sources: Vec<Box<dyn Source>>,
    /// Each source's timeline kept honest (ingest/time_order).
    guards: Vec<TimeGuard>,
    /// Each stream's next event (timed), read in place (`next_into`).
    heads: Vec<Option<Event>>,
    /// Streams with a head, ordered by head time (blkparse's `ms_head` list).
    order: Vec<usize>,
    /// Events without a timestamp (process names), passed on at once,
    /// with the stream they came from.
    untimed: VecDeque<(usize, Event)>,
}

impl Merger {
    pub fn new(sources: Vec<Box<dyn Source>>) -> Merger {
        let n = sources.len();
        let mut m = Merger {
            sources,
            guards: (0..n).map(|_| TimeGuard::new()).collect(),
            heads: (0..n).map(|_| None).collect(),
            order: Vec::with_capacity(n),
            untimed: VecDeque::new(),
        };
        for i in 0..n {
            if m.prime(i) {
                m.insert_sorted(i);
            }
        }
        m
    }

    pub fn sources(&self) -> &[Box<dyn Source>] {
        &self.sources
    }

    /// What the user should know about each source, in order: what it
    /// could not decode or lost (`warnings_for`), and the events skipped
    /// for being out of time.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (s, g) in self.sources.iter().zip(&self.guards) {
            out.extend(super::warnings_for(s.as_ref()));
            out.extend(g.warnings(s.path()));
        }
        out
    }

    /// Reads the next timed event of stream `i` into its head, through
    /// the stream's time guard (ingest/time_order); untimed events (process
    /// names) wait in `untimed`.
    fn prime(&mut self, i: usize) -> bool {
        let slot = &mut self.heads[i];
        while self.guards[i].next_into(self.sources[i].as_mut(), slot) {
            if slot.as_ref().is_some_and(|ev| ev.ts().is_some()) {
                return true;
            }
            let ev = slot.take().expect("just read");
            self.untimed.push_back((i, ev));
        }
        *slot = None;
        false
    }

    fn head_ts(&self, i: usize) -> u64 {
        self.heads[i]
            .as_ref()
            .and_then(Event::ts)
            .unwrap_or(u64::MAX)
    }

    /// blkparse's `ms_sort`: before the first stream only if strictly
    /// earlier, otherwise after every stream that is strictly earlier.
    fn insert_sorted(&mut self, i: usize) {
        let t = self.head_ts(i);
        if self.order.is_empty() || t < self.head_ts(self.order[0]) {
            self.order.insert(0, i);
            return;
        }
        let mut at = 0;
        while at + 1 < self.order.len() && self.head_ts(self.order[at + 1]) < t {
            at += 1;
        }
        self.order.insert(at + 1, i);
    }
}

impl Merger {
    /// Reads the next event of the first stream, whose head was just
    /// taken, and puts the stream back in order: blkparse's `ms_resort`
    /// moves on only if the next stream is strictly earlier; a stream
    /// that ended leaves the order.
    fn advance_first(&mut self) {
        let first = self.order[0];
        if self.prime(first) {
            if self.order.len() > 1 && self.head_ts(first) > self.head_ts(self.order[1]) {
                self.order.remove(0);
                self.insert_sorted(first);
            }
        } else {
            self.order.remove(0);
        }
    }

    /// The next event and the index of the source it came from (in
    /// [`Merger::sources`]' order).
    pub fn next_sourced(&mut self) -> Option<(usize, Event)> {
        if let Some(e) = self.untimed.pop_front() {
            return Some(e);
        }
        let first = *self.order.first()?;
        let ev = self.heads[first].take()?;
        self.advance_first();
        if !self.untimed.is_empty() {
            // Names read while priming belong before the event that follows.
            self.untimed.push_back((first, ev));
            return self.untimed.pop_front();
        }
        Some((first, ev))
    }
}

impl Merger {
    /// Moves the next events into `batch` until it holds `max`, showing
    /// each to `see` with the index of its source; it holds fewer only
    /// once every source is read. The order is [`Merger::next_sourced`]'s;
    /// each event is moved once, from its stream's head into the batch (a
    /// loop of `next_sourced` moved it three times, which was a fifth of
    /// the reading thread on blktrace files).
    pub fn fill(&mut self, batch: &mut Vec<Event>, max: usize, mut see: impl FnMut(usize, &Event)) {
        while batch.len() < max {
            if let Some((source, e)) = self.untimed.pop_front() {
                see(source, &e);
                batch.push(e);
                continue;
            }
            let Some(&first) = self.order.first() else {
                return;
            };
            let Some(ev) = self.heads[first].take() else {
                return;
            };
            batch.push(ev);
            self.advance_first();
            if !self.untimed.is_empty() {
                // Names read while priming go first (as in next_sourced).
                let ev = batch.pop().expect("just pushed");
                self.untimed.push_back((first, ev));
                continue;
            }
            see(first, batch.last().expect("just pushed"));
        }
    }
}

impl Iterator for Merger {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        self.next_sourced().map(|(_, e)| e)
    }
}

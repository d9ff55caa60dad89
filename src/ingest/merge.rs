//! Merges several sources into one time-ordered stream.
//!
//! The order of events with equal timestamps follows blkparse's merge of
//! per-CPU files (`ms_sort`/`ms_resort`), so that iosleuth hands btt's
//! algorithm the very sequence btt sees after `blkparse -d`.

use super::source::Source;
use crate::model::Event;
use std::collections::VecDeque;

pub struct Merger {
    sources: Vec<Box<dyn Source>>,
    heads: Vec<Option<(u64, Event)>>,
    /// Streams with a head, ordered by head time (blkparse's `ms_head` list).
    order: Vec<usize>,
    /// Events without a timestamp (process names), passed on at once.
    untimed: VecDeque<Event>,
}

impl Merger {
    pub fn new(sources: Vec<Box<dyn Source>>) -> Merger {
        let n = sources.len();
        let mut m = Merger {
            sources,
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

    /// Reads the next timed event of stream `i` into its head.
    fn prime(&mut self, i: usize) -> bool {
        while let Some(ev) = self.sources[i].next_event() {
            match ev.ts() {
                Some(ts) => {
                    self.heads[i] = Some((ts, ev));
                    return true;
                }
                None => self.untimed.push_back(ev),
            }
        }
        self.heads[i] = None;
        false
    }

    fn head_ts(&self, i: usize) -> u64 {
        self.heads[i].as_ref().map(|h| h.0).unwrap_or(u64::MAX)
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

impl Iterator for Merger {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        if let Some(e) = self.untimed.pop_front() {
            return Some(e);
        }
        let first = *self.order.first()?;
        let (_, ev) = self.heads[first].take()?;
        if self.prime(first) {
            // blkparse's `ms_resort`: move on only if the next stream is
            // strictly earlier.
            if self.order.len() > 1 && self.head_ts(first) > self.head_ts(self.order[1]) {
                self.order.remove(0);
                self.insert_sorted(first);
            }
        } else {
            self.order.remove(0);
        }
        if !self.untimed.is_empty() {
            // Names read while priming belong before the event that follows.
            self.untimed.push_back(ev);
            return self.untimed.pop_front();
        }
        Some(ev)
    }
}

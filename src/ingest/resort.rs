//! The re-sorting window of a source whose events came behind their CPU
//! (ingest/time_order opens it): each event waits until one
//! [`TOLERANCE_NS`] later has come in, at most [`WINDOW_EVENTS`] events,
//! and leaves earliest first; of equal times, first read first.

use super::time_order::TOLERANCE_NS;
use crate::model::Event;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The most events the re-sorting window holds (a few MB): more within
/// the tolerance than this are passed on as they come, and counted.
pub const WINDOW_EVENTS: usize = 1 << 16;

/// An event in the window, first out: the earliest, and of equal times
/// the first read.
struct Waiting {
    ts: u64,
    seq: u64,
    ev: Event,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        (self.ts, self.seq) == (other.ts, other.seq)
    }
}
impl Eq for Waiting {}
impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiting {
    /// Reversed: `BinaryHeap` is a max-heap.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ts, other.seq).cmp(&(self.ts, self.seq))
    }
}

#[derive(Default)]
pub(super) struct Window {
    waiting: BinaryHeap<Waiting>,
    /// The latest time that entered.
    newest: u64,
    seq: u64,
    /// The latest time passed on.
    out: u64,
    /// The source ended: what waits leaves without waiting longer.
    pub drained: bool,
}

impl Window {
    /// A window opened after events up to `newest` were passed on.
    pub fn opened_at(newest: u64) -> Window {
        Window {
            newest,
            ..Window::default()
        }
    }

    /// Takes `ev`; an untimed one (a name) keeps its place after the
    /// events read before it.
    pub fn push(&mut self, ev: Event) {
        let ts = ev.ts().unwrap_or(self.newest);
        self.newest = self.newest.max(ts);
        self.seq += 1;
        self.waiting.push(Waiting {
            ts,
            seq: self.seq,
            ev,
        });
    }

    /// The earliest event, once one [`TOLERANCE_NS`] later has come in (or
    /// the window is full, or the source ended), and whether it still
    /// leaves before one passed on already.
    pub fn pop_ready(&mut self) -> Option<(Event, bool)> {
        let first = self.waiting.peek()?;
        let ready = self.drained
            || self.waiting.len() >= WINDOW_EVENTS
            || first.ts.saturating_add(TOLERANCE_NS) < self.newest;
        if !ready {
            return None;
        }
        let Waiting { ts, ev, .. } = self.waiting.pop().expect("peeked");
        let mut late = false;
        if ev.ts().is_some() {
            late = ts < self.out;
            self.out = self.out.max(ts);
        }
        Some((ev, late))
    }
}

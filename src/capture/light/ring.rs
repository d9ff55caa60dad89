//! The last seconds of the light programs' records, kept in memory for
//! `watch`: when a trigger fires, what came before it is still there to be
//! written into a capture. Bounded by age and by bytes, whichever binds
//! first; what the bound pushed out is counted.

use crate::model::light::{REC_EVENT, REC_SLOW, REC_WAIT};
use std::collections::VecDeque;

pub struct RecordRing {
    records: VecDeque<Kept>,
    bytes: usize,
    keep_ns: u64,
    max_bytes: usize,
    /// Records pushed out by the byte bound before they were `keep_ns` old.
    pub evicted_early: u64,
    /// The number the next record kept gets: records are judged by
    /// arrival, since one can arrive after a later-ending one was judged.
    next_seq: u64,
}

struct Kept {
    at_ns: u64,
    seq: u64,
    bytes: Vec<u8>,
}

/// When a record happened (CLOCK_MONOTONIC ns): a slow request's
/// completion, a runqueue wait's end, an event's time.
pub fn record_time(rec: &[u8]) -> Option<u64> {
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(rec.get(at..at + 8)?.try_into().ok()?))
    };
    match u16::from_le_bytes([*rec.first()?, *rec.get(1)?]) {
        REC_SLOW => u64_at(24),
        REC_WAIT => Some(u64_at(8)?.saturating_add(u64_at(16)?)),
        REC_EVENT => u64_at(8),
        _ => None,
    }
}

impl RecordRing {
    pub fn new(keep_ns: u64, max_bytes: usize) -> RecordRing {
        RecordRing {
            records: VecDeque::new(),
            bytes: 0,
            keep_ns,
            max_bytes,
            evicted_early: 0,
            next_seq: 0,
        }
    }

    /// Keeps a record (one the programs sent: its kind says its time);
    /// others are ignored.
    pub fn push(&mut self, rec: &[u8]) {
        let Some(at_ns) = record_time(rec) else {
            return;
        };
        self.bytes += rec.len();
        self.records.push_back(Kept {
            at_ns,
            seq: self.next_seq,
            bytes: rec.to_vec(),
        });
        self.next_seq += 1;
        // Records arrive nearly in time order (per-CPU programs, one ring):
        // age is judged against the newest.
        let horizon = at_ns.saturating_sub(self.keep_ns);
        while let Some(front) = self.records.front() {
            let too_old = front.at_ns < horizon;
            if !too_old && self.bytes <= self.max_bytes {
                break;
            }
            if !too_old {
                self.evicted_early += 1;
            }
            self.bytes -= front.bytes.len();
            self.records.pop_front();
        }
    }

    /// The records from `from_ns` to `to_ns` (inclusive), in arrival order.
    pub fn between(&self, from_ns: u64, to_ns: u64) -> impl Iterator<Item = &[u8]> {
        self.records
            .iter()
            .filter(move |k| k.at_ns >= from_ns && k.at_ns <= to_ns)
            .map(|k| k.bytes.as_slice())
    }

    /// The records kept from number `seq` on (still in memory), and the
    /// number the next one will get.
    pub fn arrived_since(&self, seq: u64) -> (Vec<&[u8]>, u64) {
        let recs = self
            .records
            .iter()
            .filter(|k| k.seq >= seq)
            .map(|k| k.bytes.as_slice())
            .collect();
        (recs, self.next_seq)
    }

    pub fn count(&self) -> usize {
        self.records.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::light::SLOW_RECORD;

    fn slow(complete_ns: u64) -> Vec<u8> {
        let mut r = vec![0u8; SLOW_RECORD];
        r[0..2].copy_from_slice(&REC_SLOW.to_le_bytes());
        r[2..4].copy_from_slice(&(SLOW_RECORD as u16).to_le_bytes());
        r[24..32].copy_from_slice(&complete_ns.to_le_bytes());
        r
    }

    #[test]
    fn keeps_the_last_seconds_and_counts_what_the_byte_bound_pushed_out() {
        let mut ring = RecordRing::new(10, 3 * SLOW_RECORD);
        for t in [100, 105, 109] {
            ring.push(&slow(t));
        }
        assert_eq!(ring.count(), 3);
        // 112: 100 is older than 10 ns before it, gone by age.
        ring.push(&slow(112));
        assert_eq!(ring.count(), 3);
        assert_eq!(ring.evicted_early, 0);
        // 113: all are young, the byte bound pushes 105 out early.
        ring.push(&slow(113));
        assert_eq!(ring.count(), 3);
        assert_eq!(ring.evicted_early, 1);
        let times: Vec<u64> = ring.between(110, 113).filter_map(record_time).collect();
        assert_eq!(times, [112, 113]);
        // By arrival: the fifth record kept (113) on, then nothing new.
        let (recent, next) = ring.arrived_since(4);
        assert_eq!(recent.len(), 1);
        assert_eq!(record_time(recent[0]), Some(113));
        assert_eq!(next, 5);
        assert!(ring.arrived_since(next).0.is_empty());
        // A record of no known kind, or too short, is not kept.
        ring.push(&[9, 0, 0, 0]);
        ring.push(&[1]);
        assert_eq!(ring.count(), 3);
        assert_eq!(ring.bytes(), 3 * SLOW_RECORD);
    }
}

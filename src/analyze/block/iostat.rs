//! The counters of `/proc/diskstats`, rebuilt from the trace per time
//! interval, and the columns `iostat -x` (sysstat 12) derives from them.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Read,
    Write,
    Discard,
    Flush,
}

impl OpKind {
    fn idx(self) -> usize {
        self as usize
    }
}

/// diskstats deltas for one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RawCounters {
    pub ios: [u64; 4],
    pub merges: [u64; 4],
    pub sectors: [u64; 4],
    pub nsecs: [u64; 4],
    pub busy_ns: u64,
}

impl RawCounters {
    fn add(&mut self, o: &RawCounters) {
        for i in 0..4 {
            self.ios[i] += o.ios[i];
            self.merges[i] += o.merges[i];
            self.sectors[i] += o.sectors[i];
            self.nsecs[i] += o.nsecs[i];
        }
        self.busy_ns += o.busy_ns;
    }
}

/// One line of `iostat -x`, with sysstat 12's column names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct IostatRow {
    /// Start of the interval, seconds from the origin of the report.
    pub start_s: f64,
    pub seconds: f64,
    #[serde(rename = "r/s")]
    pub r_s: f64,
    #[serde(rename = "w/s")]
    pub w_s: f64,
    #[serde(rename = "d/s")]
    pub d_s: f64,
    #[serde(rename = "f/s")]
    pub f_s: f64,
    #[serde(rename = "rkB/s")]
    pub rkb_s: f64,
    #[serde(rename = "wkB/s")]
    pub wkb_s: f64,
    #[serde(rename = "dkB/s")]
    pub dkb_s: f64,
    #[serde(rename = "rrqm/s")]
    pub rrqm_s: f64,
    #[serde(rename = "wrqm/s")]
    pub wrqm_s: f64,
    #[serde(rename = "drqm/s")]
    pub drqm_s: f64,
    pub r_await: f64,
    pub w_await: f64,
    pub d_await: f64,
    pub f_await: f64,
    #[serde(rename = "aqu-sz")]
    pub aqu_sz: f64,
    #[serde(rename = "rareq-sz")]
    pub rareq_sz: f64,
    #[serde(rename = "wareq-sz")]
    pub wareq_sz: f64,
    #[serde(rename = "dareq-sz")]
    pub dareq_sz: f64,
    #[serde(rename = "%util")]
    pub util: f64,
}

impl IostatRow {
    pub fn from_counters(c: &RawCounters, start_s: f64, seconds: f64) -> IostatRow {
        let per_s = |v: u64| {
            if seconds > 0.0 {
                v as f64 / seconds
            } else {
                0.0
            }
        };
        let await_ms = |i: usize| {
            if c.ios[i] == 0 {
                0.0
            } else {
                c.nsecs[i] as f64 / 1e6 / c.ios[i] as f64
            }
        };
        let areq_kb = |i: usize| {
            if c.ios[i] == 0 {
                0.0
            } else {
                c.sectors[i] as f64 / 2.0 / c.ios[i] as f64
            }
        };
        let ms = seconds * 1000.0;
        let total_nsecs: u64 = c.nsecs.iter().sum();
        IostatRow {
            start_s,
            seconds,
            r_s: per_s(c.ios[0]),
            w_s: per_s(c.ios[1]),
            d_s: per_s(c.ios[2]),
            f_s: per_s(c.ios[3]),
            rkb_s: per_s(c.sectors[0]) / 2.0,
            wkb_s: per_s(c.sectors[1]) / 2.0,
            dkb_s: per_s(c.sectors[2]) / 2.0,
            rrqm_s: per_s(c.merges[0]),
            wrqm_s: per_s(c.merges[1]),
            drqm_s: per_s(c.merges[2]),
            r_await: await_ms(0),
            w_await: await_ms(1),
            d_await: await_ms(2),
            f_await: await_ms(3),
            aqu_sz: if ms > 0.0 {
                total_nsecs as f64 / 1e6 / ms
            } else {
                0.0
            },
            rareq_sz: areq_kb(0),
            wareq_sz: areq_kb(1),
            dareq_sz: areq_kb(2),
            util: if ms > 0.0 {
                (100.0 * c.busy_ns as f64 / 1e6 / ms).min(100.0)
            } else {
                0.0
            },
        }
    }
}

/// At most this many interval rows are listed; a longer span (or a damaged
/// timestamp far away) lists only the intervals with activity.
pub const MAX_DENSE_ROWS: u64 = 10_000;

/// Accumulates diskstats-like counters into fixed-length intervals, kept
/// sparse so that memory follows activity, not the span of the timestamps.
#[derive(Debug, Default)]
pub struct IostatAccumulator {
    origin: u64,
    interval: u64,
    rows: std::collections::BTreeMap<u64, RawCounters>,
    in_flight: u64,
    busy_since: u64,
    /// The device's active span: its first request's start and its last
    /// request's end.
    first_start: Option<u64>,
    last_end: u64,
}

impl IostatAccumulator {
    pub fn new(origin: u64, interval: u64) -> Self {
        IostatAccumulator {
            origin,
            interval: interval.max(1),
            ..Default::default()
        }
    }

    fn row(&mut self, ts: u64) -> &mut RawCounters {
        let i = ts.saturating_sub(self.origin) / self.interval;
        self.rows.entry(i).or_default()
    }

    fn add_busy(&mut self, from: u64, to: u64) {
        let mut t = from.max(self.origin);
        let mut steps = 0;
        while t < to && steps < MAX_DENSE_ROWS {
            let i = (t - self.origin) / self.interval;
            let end = self
                .origin
                .saturating_add((i + 1).saturating_mul(self.interval))
                .min(to);
            self.row(t).busy_ns += end - t;
            t = end;
            steps += 1;
        }
    }

    /// A request's accounting started. %util is the time with at least one
    /// request between its start and its completion, what the kernel's
    /// io_ticks approximates in whole jiffies.
    pub fn io_started(&mut self, ts: u64) {
        self.first_start.get_or_insert(ts);
        if self.in_flight == 0 {
            self.busy_since = ts;
        }
        self.in_flight += 1;
    }

    /// A request's accounting ended.
    pub fn io_ended(&mut self, ts: u64) {
        self.last_end = self.last_end.max(ts);
        if self.in_flight > 0 {
            self.in_flight -= 1;
            if self.in_flight == 0 {
                self.add_busy(self.busy_since, ts);
            }
        }
    }

    /// A request completed after `nsecs` of service (iostat's await).
    pub fn io_done(&mut self, ts: u64, op: OpKind, nsecs: u64) {
        let r = self.row(ts);
        r.ios[op.idx()] += 1;
        r.nsecs[op.idx()] += nsecs;
    }

    /// Adds service time to a request already counted as done at `done_ts`.
    pub fn extend_service(&mut self, done_ts: u64, op: OpKind, extra_ns: u64) {
        self.row(done_ts).nsecs[op.idx()] += extra_ns;
    }

    pub fn sectors_done(&mut self, ts: u64, op: OpKind, sectors: u64) {
        self.row(ts).sectors[op.idx()] += sectors;
    }

    pub fn merged(&mut self, ts: u64, op: OpKind) {
        self.row(ts).merges[op.idx()] += 1;
    }

    /// Closes an open busy period at the end of the trace.
    pub fn finish(&mut self, end: u64) {
        if self.in_flight > 0 {
            self.add_busy(self.busy_since, end);
            self.busy_since = end;
        }
    }

    /// One row per interval from the origin to `end`; the last one may be
    /// shorter than the interval.
    pub fn rows(&self, end: u64) -> Vec<IostatRow> {
        let secs = self.interval as f64 / 1e9;
        // `end` closes the last interval: an end on a boundary opens no new one.
        let last = end.saturating_sub(self.origin).saturating_sub(1) / self.interval;
        let row = |i: u64, c: &RawCounters| {
            let start = self.origin.saturating_add(i.saturating_mul(self.interval));
            let len = start.saturating_add(self.interval).min(end.max(start)) - start;
            let len_s = if len == 0 { secs } else { len as f64 / 1e9 };
            IostatRow::from_counters(c, i as f64 * secs, len_s)
        };
        if last < MAX_DENSE_ROWS {
            let empty = RawCounters::default();
            (0..=last)
                .map(|i| row(i, self.rows.get(&i).unwrap_or(&empty)))
                .collect()
        } else {
            self.rows.iter().map(|(&i, c)| row(i, c)).collect()
        }
    }

    /// The whole span from the origin to `end` as one row.
    pub fn total(&self, end: u64) -> IostatRow {
        IostatRow::from_counters(
            &self.sum(),
            0.0,
            end.saturating_sub(self.origin) as f64 / 1e9,
        )
    }

    /// All counters as one row over the device's active span, from its
    /// first request's start to its last one's end (or `end` while one is
    /// in flight): what `iostat` shows while the workload runs, without the
    /// idle time a trace has before the workload starts or after it ends.
    pub fn active(&self, end: u64) -> IostatRow {
        let Some(first) = self.first_start else {
            return IostatRow::default();
        };
        let last = if self.in_flight > 0 {
            end
        } else {
            self.last_end
        };
        IostatRow::from_counters(
            &self.sum(),
            first.saturating_sub(self.origin) as f64 / 1e9,
            last.saturating_sub(first) as f64 / 1e9,
        )
    }

    fn sum(&self) -> RawCounters {
        let mut sum = RawCounters::default();
        for r in self.rows.values() {
            sum.add(r);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_splits_across_intervals() {
        let s = 1_000_000_000;
        let mut a = IostatAccumulator::new(0, s);
        a.io_started(s / 2);
        a.io_started(s / 2 + 10);
        a.io_done(s + s / 4, OpKind::Read, s / 2 + s / 4);
        a.io_ended(s + s / 4);
        a.sectors_done(s + s / 4, OpKind::Read, 8);
        a.io_done(s + s / 2, OpKind::Read, s);
        a.io_ended(s + s / 2);
        a.sectors_done(s + s / 2, OpKind::Read, 8);
        a.finish(2 * s);
        let rows = a.rows(2 * s);
        assert_eq!(rows.len(), 2, "the end closes the second interval");
        assert!((rows[0].util - 50.0).abs() < 1e-9);
        assert!((rows[1].util - 50.0).abs() < 1e-9);
        assert_eq!(rows[1].r_s, 2.0);
        assert!((rows[1].r_await - 875.0).abs() < 1e-9);
        assert_eq!(rows[1].rareq_sz, 4.0);
        let t = a.total(2 * s);
        assert!((t.aqu_sz - 0.875).abs() < 1e-9);
        assert_eq!(t.rkb_s, 4.0);
        // Active from 0.5 s to 1.5 s, busy all of it.
        let active = a.active(2 * s);
        assert_eq!((active.start_s, active.seconds), (0.5, 1.0));
        assert!((active.util - 100.0).abs() < 1e-9);
        assert!((active.aqu_sz - 1.75).abs() < 1e-9);
        assert_eq!(IostatAccumulator::new(0, s).active(s), IostatRow::default());
    }
}

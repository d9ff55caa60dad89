//! Every completed request's time and latencies, for plots of latency
//! against time (iowatcher's and seekwatcher's view; the HTML report).
//! All requests are kept up to a bound; past it the plot keeps every slow
//! one (the outliers people look for) and an evenly thinned share of the
//! rest, so that a long trace costs bounded memory.

use super::iostat::OpKind;

/// One completed request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestPoint {
    /// Completion time, ns (the trace's clock).
    pub done_ns: u64,
    /// First bio queued → completion.
    pub q2c_ns: u64,
    /// Issue to the driver → completion; None for bios of a bio-based
    /// device (dm, md), which are not issued as requests.
    pub d2c_ns: Option<u64>,
    pub sectors: u64,
    pub op: OpKind,
}

/// Points kept before thinning starts (32 bytes each).
const MAX_POINTS: usize = 1 << 20;

#[derive(Debug, Default, Clone)]
pub struct RequestTimeline {
    pub points: Vec<RequestPoint>,
    /// Requests completed, kept or not.
    pub seen: u64,
    /// Past the bound: one ordinary request in `stride` is kept, and
    /// every one whose Q2C is at least `slow_ns`.
    stride: u64,
    slow_ns: u64,
}

impl RequestTimeline {
    pub fn add(&mut self, p: RequestPoint) {
        self.seen += 1;
        if self.stride <= 1 && self.points.len() < MAX_POINTS {
            self.points.push(p);
            return;
        }
        if self.stride <= 1 {
            self.thin();
        }
        if p.q2c_ns >= self.slow_ns || self.seen.is_multiple_of(self.stride) {
            self.points.push(p);
            if self.points.len() >= MAX_POINTS {
                self.thin();
            }
        }
    }

    /// Whether every completed request is in `points`.
    pub fn complete(&self) -> bool {
        self.seen == self.points.len() as u64
    }

    /// Keeps the slowest 1 % and every other of the rest, and doubles
    /// the stride of what comes.
    fn thin(&mut self) {
        let mut q2c: Vec<u64> = self.points.iter().map(|p| p.q2c_ns).collect();
        let at = (q2c.len() * 99 / 100).min(q2c.len().saturating_sub(1));
        let (_, p99, _) = q2c.select_nth_unstable(at);
        self.slow_ns = self.slow_ns.max(*p99);
        let slow = self.slow_ns;
        let mut i = 0u64;
        self.points.retain(|p| {
            i += 1;
            p.q2c_ns >= slow || i.is_multiple_of(2)
        });
        self.stride = (self.stride.max(1)) * 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(i: u64, q2c_ns: u64) -> RequestPoint {
        RequestPoint {
            done_ns: i,
            q2c_ns,
            d2c_ns: Some(q2c_ns / 2),
            sectors: 8,
            op: OpKind::Read,
        }
    }

    #[test]
    fn keeps_all_then_every_slow_one_and_a_thinned_rest() {
        let mut t = RequestTimeline::default();
        for i in 0..1000 {
            t.add(point(i, 100));
        }
        assert!(t.complete());
        assert_eq!(t.points.len(), 1000);
        let mut t = RequestTimeline::default();
        let n = 3 * MAX_POINTS as u64;
        for i in 0..n {
            // One request in 10,000 is slow.
            let slow = i % 10_000 == 7;
            t.add(point(i, if slow { 1_000_000 } else { 100 + i % 50 }));
        }
        assert_eq!(t.seen, n);
        assert!(!t.complete());
        assert!(t.points.len() <= MAX_POINTS, "{}", t.points.len());
        let slow = t.points.iter().filter(|p| p.q2c_ns == 1_000_000).count() as u64;
        assert_eq!(slow, n.div_ceil(10_000));
        // In time order, spread over the whole trace.
        assert!(t.points.windows(2).all(|w| w[0].done_ns < w[1].done_ns));
        assert!(t.points.last().unwrap().done_ns > n - 100);
    }
}

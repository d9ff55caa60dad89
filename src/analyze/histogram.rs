//! Fixed-size histograms: memory does not grow with the trace.

use crate::model::log_linear;
use serde::Serialize;

/// bcc's power-of-two histogram: slot `k` (k ≥ 1) holds values
/// `2^(k-1) .. 2^k - 1`; slot 1 also takes 0 so that nothing is lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Log2Hist {
    slots: Vec<u64>,
}

impl Log2Hist {
    pub fn add(&mut self, v: u64) {
        self.add_n(v, 1);
    }

    /// `n` values of `v`.
    pub fn add_n(&mut self, v: u64, n: u64) {
        let slot = (64 - v.leading_zeros()).max(1) as usize;
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, 0);
        }
        self.slots[slot] += n;
    }

    pub fn total(&self) -> u64 {
        self.slots.iter().sum()
    }

    pub fn merge(&mut self, o: &Log2Hist) {
        if self.slots.len() < o.slots.len() {
            self.slots.resize(o.slots.len(), 0);
        }
        for (a, b) in self.slots.iter_mut().zip(&o.slots) {
            *a += b;
        }
    }

    /// `(low, high, count)` rows from the first slot to the last non-empty one.
    pub fn rows(&self) -> Vec<(u64, u64, u64)> {
        let last = match self.slots.iter().rposition(|&c| c > 0) {
            Some(l) => l,
            None => return Vec::new(),
        };
        (1..=last)
            .map(|k| {
                let high = if k >= 64 { u64::MAX } else { (1u64 << k) - 1 };
                let low = if k == 1 { 0 } else { 1u64 << (k - 1) };
                (low, high, self.slots[k])
            })
            .collect()
    }

    /// Prints like bcc's `print_log2_hist`, with the unit named.
    pub fn render(&self, unit: &str) -> String {
        let rows = self.rows();
        if rows.is_empty() {
            return String::new();
        }
        let max = rows.iter().map(|r| r.2).max().unwrap_or(0).max(1);
        let mut out = format!("     {unit:<19} : count     distribution\n");
        for (low, high, count) in rows {
            let n = (count * 40 / max) as usize;
            let stars = if count > 0 && n == 0 {
                String::new()
            } else {
                "*".repeat(n)
            };
            out.push_str(&format!(
                "{low:>10} -> {high:<10} : {count:<8} |{stars:<40}|\n"
            ));
        }
        out
    }
}

impl Serialize for Log2Hist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let rows = self.rows();
        let mut seq = s.serialize_seq(Some(rows.len()))?;
        for (low, high, count) in rows {
            seq.serialize_element(&serde_json::json!({"low": low, "high": high, "count": count}))?;
        }
        seq.end()
    }
}

const SUB_BITS: u32 = 7;

/// Log-linear histogram for percentiles: values below 256 are exact, larger
/// ones fall in buckets 1/128 of their magnitude wide (error < 0.8 %).
#[derive(Clone, Debug)]
pub struct LatencyDist {
    buckets: Vec<u64>,
    n: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for LatencyDist {
    fn default() -> Self {
        LatencyDist {
            buckets: Vec::new(),
            n: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }
}

fn bucket_of(v: u64) -> usize {
    log_linear::bucket_of::<SUB_BITS>(v)
}

fn bucket_range(i: usize) -> (u64, u64) {
    log_linear::bucket_range::<SUB_BITS>(i)
}

/// A distribution's figures. Without a value (`count` 0) every figure but
/// the count is unknown, and serializes as null, never 0.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub min: u64,
    pub avg: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Serialize for Percentiles {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let known = self.count > 0;
        let mut st = s.serialize_struct("Percentiles", 8)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("min", &known.then_some(self.min))?;
        st.serialize_field("avg", &known.then_some(self.avg))?;
        st.serialize_field("p50", &known.then_some(self.p50))?;
        st.serialize_field("p90", &known.then_some(self.p90))?;
        st.serialize_field("p99", &known.then_some(self.p99))?;
        st.serialize_field("p999", &known.then_some(self.p999))?;
        st.serialize_field("max", &known.then_some(self.max))?;
        st.end()
    }
}

impl LatencyDist {
    pub fn add(&mut self, v: u64) {
        let b = bucket_of(v);
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.n += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += v as u128;
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    /// The exact sum of the values added.
    #[cfg(test)]
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// A distribution known only as coarser buckets (`(low, high, count)`,
    /// in order) and the exact sum: each bucket's values are taken at its
    /// middle, min and max at the outer bounds.
    pub fn from_ranges(rows: impl IntoIterator<Item = (u64, u64, u64)>, sum: u128) -> LatencyDist {
        let mut d = LatencyDist::default();
        for (lo, hi, count) in rows.into_iter().filter(|r| r.2 > 0) {
            let b = bucket_of(lo + (hi - lo) / 2);
            if d.buckets.len() <= b {
                d.buckets.resize(b + 1, 0);
            }
            d.buckets[b] += count;
            d.n += count;
            d.min = d.min.min(lo);
            d.max = d.max.max(hi);
        }
        d.sum = sum;
        d
    }

    pub fn merge(&mut self, o: &LatencyDist) {
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.n += o.n;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum += o.sum;
    }

    /// Nearest-rank percentile, reported as the middle of its bucket and
    /// clamped to the observed min and max.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * self.n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_range(i);
                return (lo + (hi - lo) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    pub fn summary(&self) -> Percentiles {
        if self.n == 0 {
            return Percentiles::default();
        }
        Percentiles {
            count: self.n,
            min: self.min,
            avg: self.sum as f64 / self.n as f64,
            p50: self.percentile(50.0),
            p90: self.percentile(90.0),
            p99: self.percentile(99.0),
            p999: self.percentile(99.9),
            max: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_slots_match_bcc() {
        let mut h = Log2Hist::default();
        for v in [0, 1, 2, 3, 4, 7, 8, 1000] {
            h.add(v);
        }
        let rows = h.rows();
        assert_eq!(rows[0], (0, 1, 2));
        assert_eq!(rows[1], (2, 3, 2));
        assert_eq!(rows[2], (4, 7, 2));
        assert_eq!(rows[3], (8, 15, 1));
        assert_eq!(*rows.last().unwrap(), (512, 1023, 1));
        let text = h.render("usecs");
        assert!(text.starts_with("     usecs               : count     distribution\n"));
        assert!(text.contains(
            "         0 -> 1          : 2        |****************************************|"
        ));
    }

    #[test]
    fn percentiles_within_a_bucket() {
        let mut d = LatencyDist::default();
        for v in 1..=100_000u64 {
            d.add(v * 10);
        }
        let s = d.summary();
        assert_eq!((s.count, s.min, s.max), (100_000, 10, 1_000_000));
        for (got, want) in [(s.p50, 500_000.0), (s.p90, 900_000.0), (s.p99, 990_000.0)] {
            assert!((got as f64 - want).abs() / want < 0.008, "{got} vs {want}");
        }
    }
}

//! The text exposition format itself (version 0.0.4): families, samples
//! with escaped labels, and histograms, classic `le` buckets made from the
//! kernel's log-linear ones or from counts already under each bound.

use super::LE_NS;
use crate::model::light::StageHist;
use std::fmt::Write;

/// A label value as the format escapes it: backslash, quote, newline.
fn label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A metric family: declared once (families.rs), its samples added
/// through the handle `Out::family` gives.
#[derive(Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

pub(super) struct Out(pub(super) String);

/// The samples of one family, written right after its HELP and TYPE.
pub(super) struct Samples<'a> {
    out: &'a mut Out,
    family: &'static Family,
}

impl Samples<'_> {
    pub(super) fn sample(&mut self, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.out.line(self.family.name, labels, value);
    }

    pub(super) fn histogram(&mut self, labels: &[(&str, &str)], h: &StageHist) {
        debug_assert_eq!(self.family.kind, Kind::Histogram);
        let total = h.buckets.iter().map(|b| b.1).sum::<u64>();
        self.out
            .cumulative(self.family.name, labels, &cumulative_le(h), total, h.sum_ns);
    }

    /// A histogram from counts already under each bound (`le`: one per
    /// bound, then the count over them all).
    pub(super) fn le_histogram(&mut self, labels: &[(&str, &str)], le: &[u64], sum_ns: u64) {
        debug_assert_eq!(self.family.kind, Kind::Histogram);
        let mut cumulative = [0u64; LE_NS.len()];
        let mut seen = 0;
        for (c, n) in cumulative.iter_mut().zip(le) {
            seen += n;
            *c = seen;
        }
        self.out.cumulative(
            self.family.name,
            labels,
            &cumulative,
            le.iter().sum(),
            sum_ns,
        );
    }
}

impl Out {
    /// Starts a family: its HELP and TYPE, then its samples by the handle.
    pub(super) fn family(&mut self, f: &'static Family) -> Samples<'_> {
        let _ = writeln!(self.0, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(self.0, "# TYPE {} {}", f.name, f.kind.name());
        Samples {
            out: self,
            family: f,
        }
    }

    fn line(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", label(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    fn cumulative(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        cumulative: &[u64; LE_NS.len()],
        total: u64,
        sum_ns: u64,
    ) {
        let bucket = format!("{name}_bucket");
        for (&le, count) in LE_NS.iter().zip(cumulative) {
            let le = format_le(le);
            let mut with_le: Vec<(&str, &str)> = labels.to_vec();
            with_le.push(("le", &le));
            self.line(&bucket, &with_le, count);
        }
        let mut with_le: Vec<(&str, &str)> = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.line(&bucket, &with_le, total);
        self.line(&format!("{name}_sum"), labels, seconds(sum_ns));
        self.line(&format!("{name}_count"), labels, total);
    }
}

fn format_le(le_ns: u64) -> String {
    let le = seconds(le_ns);
    // Rust prints 1.0 as "1"; Prometheus' own clients write "1.0" for
    // whole bounds, and queries match `le` as a string.
    if le.fract() == 0.0 {
        format!("{le:.1}")
    } else {
        format!("{le}")
    }
}

pub(super) fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The cumulative count under each of `LE_NS`: a log-linear bucket
/// counts under the first bound at or above its highest value.
pub fn cumulative_le(h: &StageHist) -> [u64; LE_NS.len()] {
    let mut out = [0u64; LE_NS.len()];
    for (_, hi, count) in h.rows() {
        for (&bound, slot) in LE_NS.iter().zip(out.iter_mut()) {
            if hi <= bound {
                *slot += count;
            }
        }
    }
    out
}

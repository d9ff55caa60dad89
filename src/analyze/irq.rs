//! Interrupts: softirqs per CPU and vector (the columns of `mpstat -I
//! SCPU`, which reads /proc/softirqs: one count per handler run, as
//! `softirq_entry` fires), the time each vector ran, hardirq handlers with
//! their counts and time, and softirq raises. Memory: one open handler per
//! CPU, fixed tables.

use crate::model::tracepoint::Field;
use crate::model::{TraceEvent, Tracepoint};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// Softirq vectors, in the kernel's order (`softirq_to_name`).
pub const VECTORS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

#[derive(Debug, Serialize, Clone, Default)]
pub struct HandlerStats {
    pub count: u64,
    pub time_ns: u64,
    /// The longest run; `None` when none ran or the capture kept no single
    /// run (a light capture counts runs and their time only): unknown, not 0.
    pub max_ns: Option<u64>,
}

impl HandlerStats {
    /// Average run, µs; `None` when none ran.
    pub fn avg_us(&self) -> Option<f64> {
        (self.count > 0).then(|| self.time_ns as f64 / self.count as f64 / 1e3)
    }

    fn add(&mut self, ns: u64) {
        self.count += 1;
        self.time_ns += ns;
        self.max_ns = Some(self.max_ns.map_or(ns, |m| m.max(ns)));
    }
}

#[derive(Debug, Serialize, Clone)]
pub struct SoftirqCpu {
    pub cpu: u32,
    /// Handler runs per vector (softirq_entry), like /proc/softirqs.
    pub counts: BTreeMap<&'static str, u64>,
    /// The same per second of trace, like `mpstat -I SCPU`.
    pub per_s: BTreeMap<&'static str, f64>,
    /// Time in each vector's handlers (entry → exit).
    pub time_ns: BTreeMap<&'static str, u64>,
}

#[derive(Debug, Serialize, Clone)]
pub struct Hardirq {
    pub irq: i64,
    pub name: String,
    pub stats: HandlerStats,
    /// Per CPU: how many.
    pub by_cpu: BTreeMap<u32, u64>,
}

#[derive(Debug, Serialize, Default)]
pub struct IrqSummary {
    /// Per CPU, CPU order.
    pub softirq: Vec<SoftirqCpu>,
    /// All CPUs, per vector.
    pub softirq_total: BTreeMap<&'static str, HandlerStats>,
    /// `softirq_raise` per vector.
    pub raised: BTreeMap<&'static str, u64>,
    /// Hardirq handlers, most time first.
    pub hardirq: Vec<Hardirq>,
    /// Time the softirq tables cover (first to last event), seconds.
    pub seconds: f64,
}

#[derive(Default)]
struct Cpu {
    counts: [u64; 10],
    time_ns: [u64; 10],
    /// The softirq running: vector, since.
    soft: Option<(usize, u64)>,
    /// The hardirq running: irq, since.
    hard: Option<(i64, u64)>,
}

#[derive(Default)]
pub struct IrqAnalysis {
    cpus: BTreeMap<u32, Cpu>,
    total: [HandlerStats; 10],
    raised: [u64; 10],
    hard: FxHashMap<i64, Hardirq>,
    first: Option<u64>,
    last: u64,
    rows: Option<std::sync::mpsc::SyncSender<super::rows::SpanRow>>,
}

impl IrqAnalysis {
    pub fn new() -> IrqAnalysis {
        IrqAnalysis::default()
    }

    /// Sends each handler run, entry to exit, to `sink` (exports).
    pub fn with_rows(
        mut self,
        sink: Option<std::sync::mpsc::SyncSender<super::rows::SpanRow>>,
    ) -> Self {
        self.rows = sink;
        self
    }

    /// Feeds one event; returns false for events this analysis ignores.
    /// Inlined: most events are not interrupts', and a call to say so
    /// cost more than the question.
    #[inline]
    pub fn add(&mut self, e: &TraceEvent) -> bool {
        e.kind.is_irq() && self.irq_event(e)
    }

    /// One of the kinds `add` lets through.
    #[inline(never)]
    fn irq_event(&mut self, e: &TraceEvent) -> bool {
        let vec = || {
            e.fields
                .int(Field::Vec)
                .and_then(|v| usize::try_from(v).ok())
                .filter(|&v| v < VECTORS.len())
        };
        match e.kind {
            Tracepoint::SoftirqEntry => {
                if let Some(v) = vec() {
                    let c = self.cpus.entry(e.cpu).or_default();
                    c.counts[v] += 1;
                    c.soft = Some((v, e.ts));
                }
            }
            Tracepoint::SoftirqExit => {
                let c = self.cpus.entry(e.cpu).or_default();
                match (c.soft.take(), vec()) {
                    (Some((v, since)), Some(x)) if v == x && e.ts >= since => {
                        let ns = e.ts - since;
                        c.time_ns[v] += ns;
                        self.total[v].add(ns);
                        super::rows::send(&mut self.rows, || super::rows::SpanRow::Softirq {
                            cpu: e.cpu,
                            vector: VECTORS[v],
                            start_ns: since,
                            end_ns: e.ts,
                        });
                    }
                    _ => {}
                }
            }
            Tracepoint::SoftirqRaise => {
                if let Some(v) = vec() {
                    self.raised[v] += 1;
                }
            }
            Tracepoint::IrqHandlerEntry => {
                let irq = e.fields.int(Field::Irq).unwrap_or(-1);
                let h = self.hard.entry(irq).or_insert_with(|| Hardirq {
                    irq,
                    name: String::new(),
                    stats: HandlerStats::default(),
                    by_cpu: BTreeMap::new(),
                });
                if h.name.is_empty() {
                    h.name = e.fields.str(Field::Name).unwrap_or("").to_string();
                }
                *h.by_cpu.entry(e.cpu).or_default() += 1;
                self.cpus.entry(e.cpu).or_default().hard = Some((irq, e.ts));
            }
            Tracepoint::IrqHandlerExit => {
                let c = self.cpus.entry(e.cpu).or_default();
                if let Some((irq, since)) = c.hard.take() {
                    if Some(irq) == e.fields.int(Field::Irq) && e.ts >= since {
                        if let Some(h) = self.hard.get_mut(&irq) {
                            h.stats.add(e.ts - since);
                            let name = &h.name;
                            super::rows::send(&mut self.rows, || super::rows::SpanRow::Irq {
                                cpu: e.cpu,
                                name: if name.is_empty() {
                                    format!("irq {irq}")
                                } else {
                                    name.clone()
                                },
                                start_ns: since,
                                end_ns: e.ts,
                            });
                        }
                    }
                }
            }
            _ => return false,
        }
        self.first.get_or_insert(e.ts);
        self.last = e.ts;
        true
    }

    /// `span_s`: the whole trace's length, for the per-second rates.
    pub fn finish(self, span_s: f64) -> IrqSummary {
        let per_s = |n: u64| if span_s > 0.0 { n as f64 / span_s } else { 0.0 };
        let mut out = IrqSummary {
            seconds: span_s,
            ..Default::default()
        };
        for (&cpu, c) in &self.cpus {
            let mut row = SoftirqCpu {
                cpu,
                counts: BTreeMap::new(),
                per_s: BTreeMap::new(),
                time_ns: BTreeMap::new(),
            };
            for (i, name) in VECTORS.iter().enumerate() {
                row.counts.insert(*name, c.counts[i]);
                row.per_s.insert(*name, per_s(c.counts[i]));
                row.time_ns.insert(*name, c.time_ns[i]);
            }
            out.softirq.push(row);
        }
        for (i, name) in VECTORS.iter().enumerate() {
            let mut t = self.total[i].clone();
            // Counted at entry, like /proc/softirqs (an exit may be missing).
            t.count = self.cpus.values().map(|c| c.counts[i]).sum();
            if t.count > 0 {
                out.softirq_total.insert(*name, t);
            }
            if self.raised[i] > 0 {
                out.raised.insert(*name, self.raised[i]);
            }
        }
        out.hardirq = self.hard.into_values().collect();
        // An entry without an exit still counts as a run.
        for h in &mut out.hardirq {
            h.stats.count = h.stats.count.max(h.by_cpu.values().sum());
        }
        out.hardirq.sort_by(|a, b| {
            b.stats
                .time_ns
                .cmp(&a.stats.time_ns)
                .then(a.irq.cmp(&b.irq))
        });
        out
    }
}

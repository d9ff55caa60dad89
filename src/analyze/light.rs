//! A light capture's histograms put where the block analysis keeps its
//! figures: each device's completions, bytes, merges and latencies come
//! from what the BPF programs counted in the kernel, not from the slow
//! requests that reached user space (those stay the outliers). What only
//! a full trace gives (btt's intervals, iostat's columns, per-process
//! figures) is left empty and said so.

use super::block::{requests::OpCounts, DeviceSummary};
use super::histogram::{LatencyDist, Log2Hist, Percentiles};
use super::Analysis;
use crate::model::light::{LightCounters, LightDoc, ProgramStats, SlowPolicy, StageHist};
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct LightSummary {
    /// How the programs were attached (`tp_btf`).
    pub attach: String,
    /// How long they were attached.
    pub seconds: f64,
    pub slow: SlowPolicy,
    pub devices: Vec<LightDeviceSummary>,
    /// The programs' own run time (`record --light --bpf-stats`).
    pub programs: Vec<ProgramSummary>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LightDeviceSummary {
    pub device: String,
    pub ops: Vec<LightOpSummary>,
    /// Requests in flight at issue (the request included).
    pub depth: Percentiles,
    pub counters: LightCounters,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct LightOpSummary {
    pub op: String,
    pub ios: u64,
    pub bytes: u64,
    /// Allocation → issue, issue → completion, allocation → completion (ns).
    pub queued: Percentiles,
    pub device: Percentiles,
    pub total: Percentiles,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ProgramSummary {
    pub name: String,
    pub runs: u64,
    pub ns_per_run: f64,
}

fn dist(h: &StageHist) -> LatencyDist {
    LatencyDist::from_ranges(h.rows(), u128::from(h.sum_ns))
}

fn add_op(c: &mut OpCounts, op: &str, n: u64) {
    match op {
        "read" => c.read += n,
        "write" => c.write += n,
        "flush" => c.flush += n,
        _ => c.discard += n,
    }
}

/// Puts `doc`'s figures into the analysis (`a.light`, and each device's
/// summary), with a warning for what the capture could not keep.
pub fn apply(a: &mut Analysis, doc: &LightDoc) {
    let mut summary = LightSummary {
        attach: doc.attach.clone(),
        seconds: doc.stopped_ns.saturating_sub(doc.started_ns) as f64 / 1e9,
        slow: doc.slow.clone(),
        devices: Vec::new(),
        programs: doc.programs.iter().map(program).collect(),
    };
    for d in &doc.devices {
        let idx = match a.block.devices.iter().position(|s| s.device == d.dev) {
            Some(i) => i,
            None => {
                a.block.devices.push(DeviceSummary {
                    device: d.dev.clone(),
                    ..Default::default()
                });
                a.block.devices.len() - 1
            }
        };
        let s = &mut a.block.devices[idx];
        let (mut device, mut total) = (LatencyDist::default(), LatencyDist::default());
        let mut ops = Vec::new();
        s.completed = OpCounts::default();
        s.bytes_completed = OpCounts::default();
        s.request_size_hist_kib = Log2Hist::default();
        for (name, o) in &d.ops {
            add_op(&mut s.completed, name, o.ios);
            add_op(&mut s.bytes_completed, name, o.bytes);
            let (q, dv, t) = (dist(&o.queued), dist(&o.device), dist(&o.total));
            device.merge(&dv);
            total.merge(&t);
            for (k, &n) in o.size_log2.iter().enumerate() {
                s.request_size_hist_kib.add_n((1u64 << k) >> 10, n);
            }
            ops.push(LightOpSummary {
                op: name.clone(),
                ios: o.ios,
                bytes: o.bytes,
                queued: q.summary(),
                device: dv.summary(),
                total: t.summary(),
            });
        }
        s.d2c = device.summary();
        s.q2c = total.summary();
        s.d2c_hist_us = log2_us(d.ops.values().map(|o| &o.device));
        s.q2c_hist_us = log2_us(d.ops.values().map(|o| &o.total));
        let c = &d.counters;
        let ios: u64 = d.ops.values().map(|o| o.ios).sum();
        s.actions.issued = ios;
        s.actions.completed = ios;
        s.actions.back_merged = c.back_merges;
        s.actions.front_merged = c.front_merges;
        s.actions.rq_merged = c.rq_merges;
        s.actions.split = c.splits;
        s.actions.requeued = c.requeues;
        s.actions.queued = 0;
        s.errors = c.errors;
        s.completions_without_start = c.no_state;
        // Only a full trace has these; the slow requests alone would
        // misstate them.
        s.btt = Default::default();
        s.btt_merge = None;
        s.btt_overhead = None;
        s.write_waits = Default::default();
        s.iostat = Vec::new();
        s.iostat_total = Default::default();
        s.in_flight_at_end = 0;
        let depth = LatencyDist::from_ranges(
            d.depth
                .iter()
                .enumerate()
                .map(|(k, &n)| (k as u64, k as u64, n)),
            d.depth
                .iter()
                .enumerate()
                .map(|(k, &n)| k as u128 * n as u128)
                .sum(),
        );
        summary.devices.push(LightDeviceSummary {
            device: d.dev.clone(),
            ops,
            depth: depth.summary(),
            counters: *c,
        });
        warn_losses(a, &d.dev, c);
    }
    a.block.all_devices = Default::default();
    a.block.processes.clear();
    a.warnings.push(
        "light capture: request counts and latencies come from the kernel's histograms (each value within 1/32); btt's intervals, iostat's columns and per-process figures need the full recorder (`iosleuth record` without --light)".into(),
    );
    a.light = Some(summary);
}

fn warn_losses(a: &mut Analysis, dev: &str, c: &LightCounters) {
    if c.slow_capped > 0 {
        a.warnings.push(format!(
            "device {dev}: {} slow requests over the per-second cap were counted but not recorded (record --light --slow-cap)",
            c.slow_capped
        ));
    }
    if c.ring_full > 0 {
        a.warnings.push(format!(
            "device {dev}: {} slow requests were lost: the ring buffer was full",
            c.ring_full
        ));
    }
    if c.state_full > 0 {
        a.warnings.push(format!(
            "device {dev}: {} requests are missing from the latencies: the kernel's request map was full",
            c.state_full
        ));
    }
}

/// Log2 histograms in µs, as bcc's biolatency prints, from the
/// stages' finer buckets (each counted at its middle).
fn log2_us<'a>(stages: impl Iterator<Item = &'a StageHist>) -> Log2Hist {
    let mut h = Log2Hist::default();
    for s in stages {
        for (lo, hi, n) in s.rows() {
            h.add_n((lo + (hi - lo) / 2) / 1000, n);
        }
    }
    h
}

fn program(p: &ProgramStats) -> ProgramSummary {
    ProgramSummary {
        name: p.name.clone(),
        runs: p.run_count,
        ns_per_run: if p.run_count == 0 {
            0.0
        } else {
            p.run_time_ns as f64 / p.run_count as f64
        },
    }
}

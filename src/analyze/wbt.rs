//! Writeback throttling (blk-wbt) per device: the limits wbt set
//! (`wbt_step`) and the read latencies it judged too slow (`wbt_lat`).
//! How long write bios then waited for a request is btt's (Q→G of
//! writes, `DeviceSummary::write_waits`).

use crate::model::tracepoint::Field;
use crate::model::{TraceEvent, Tracepoint};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize, Default, Clone)]
pub struct WbtDevice {
    /// `wbt_step` events, the highest scale step (above 0: throttled
    /// harder than the default), and the smallest limits set.
    pub steps: u64,
    pub max_step: i64,
    pub min_max_depth: Option<u64>,
    pub min_background_depth: Option<u64>,
    /// Time spent at a step above 0, ns.
    pub stepped_down_ns: u64,
    /// `wbt_lat`: windows whose read latency exceeded the target, and the
    /// largest latency reported (µs).
    pub latency_exceeded: u64,
    pub max_read_latency_us: u64,
}

#[derive(Debug, Serialize, Default)]
pub struct WbtSummary {
    /// wbt events seen (on any device).
    pub events: u64,
    /// By device `MAJ,MIN`: the devices with wbt events.
    pub devices: BTreeMap<String, WbtDevice>,
}

#[derive(Default)]
struct DevState {
    out: WbtDevice,
    step: i64,
    step_since: u64,
}

#[derive(Default)]
pub struct WbtAnalysis {
    devs: BTreeMap<String, DevState>,
    events: u64,
}

/// wbt names devices by their bdi name, `MAJ:MIN`.
fn dev_key(name: &str) -> String {
    name.replace(':', ",")
}

impl WbtAnalysis {
    pub fn new() -> WbtAnalysis {
        WbtAnalysis::default()
    }

    /// Inlined: most events are not wbt's, and a call to say so cost
    /// more than the question.
    #[inline]
    pub fn add(&mut self, e: &TraceEvent) -> bool {
        e.kind.is_wbt() && self.wbt_event(e)
    }

    #[inline(never)]
    fn wbt_event(&mut self, e: &TraceEvent) -> bool {
        self.events += 1;
        let Some(name) = e.fields.str(Field::Name) else {
            return true;
        };
        let d = self.devs.entry(dev_key(name)).or_default();
        match e.kind {
            Tracepoint::WbtStep => {
                let step = e.fields.int(Field::Step).unwrap_or(0);
                if d.step > 0 {
                    d.out.stepped_down_ns += e.ts.saturating_sub(d.step_since);
                }
                d.step = step;
                d.step_since = e.ts;
                d.out.steps += 1;
                d.out.max_step = d.out.max_step.max(step);
                let min = |cur: Option<u64>, v: Option<i64>| match (cur, v) {
                    (Some(c), Some(v)) => Some(c.min(v.max(0) as u64)),
                    (None, Some(v)) => Some(v.max(0) as u64),
                    (c, None) => c,
                };
                d.out.min_max_depth = min(d.out.min_max_depth, e.fields.int(Field::Max));
                d.out.min_background_depth =
                    min(d.out.min_background_depth, e.fields.int(Field::Bg));
            }
            Tracepoint::WbtLat => {
                d.out.latency_exceeded += 1;
                let lat = e.fields.int(Field::Lat).unwrap_or(0).max(0) as u64;
                d.out.max_read_latency_us = d.out.max_read_latency_us.max(lat);
            }
            _ => {}
        }
        true
    }

    pub fn finish(self, last_ns: u64) -> WbtSummary {
        let devices = self
            .devs
            .into_iter()
            .map(|(k, mut d)| {
                if d.step > 0 {
                    d.out.stepped_down_ns += last_ns.saturating_sub(d.step_since);
                }
                (k, d.out)
            })
            .collect();
        WbtSummary {
            events: self.events,
            devices,
        }
    }
}

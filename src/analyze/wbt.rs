//! Writeback throttling (blk-wbt) per device: the limits wbt set
//! (`wbt_step`), the read latencies it judged too slow (`wbt_lat`), and
//! how long write bios waited between being queued and getting a request
//! (Q→G), which is where wbt puts a writer to sleep — as does a full tag
//! set, told apart by the requests at the device when the wait began.

use crate::model::{Action, BlockEvent, OtherEvent};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// A Q→G wait this long counts as a throttled write.
const WAIT_NS: u64 = 1_000_000;

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
    pub write_bios: u64,
    /// Write bios that waited at least 1 ms for a request, their total and
    /// longest wait, and the most requests at the device when one began.
    pub throttled_writes: u64,
    pub write_wait_ns: u64,
    pub write_wait_max_ns: u64,
    pub max_in_flight_at_wait: u64,
    /// Write requests' time at the device (D→C), summed, for scale.
    pub write_d2c_ns: u64,
}

#[derive(Debug, Serialize, Default)]
pub struct WbtSummary {
    /// wbt events seen (on any device).
    pub events: u64,
    /// By device `MAJ,MIN`; only devices with wbt events or write bios.
    pub devices: BTreeMap<String, WbtDevice>,
}

#[derive(Default)]
struct DevState {
    out: WbtDevice,
    step: i64,
    step_since: u64,
    in_flight: u64,
    /// Write bio sector → (queued at, requests at the device then).
    queued: FxHashMap<u64, (u64, u64)>,
    issued: FxHashMap<u64, u64>,
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

    pub fn add(&mut self, e: &OtherEvent) -> bool {
        let short = e.short_name();
        if !short.starts_with("wbt_") {
            return false;
        }
        self.events += 1;
        let Some(name) = e.fields.str("name") else {
            return true;
        };
        let d = self.devs.entry(dev_key(name)).or_default();
        match short {
            "wbt_step" => {
                let step = e.fields.int("step").unwrap_or(0);
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
                d.out.min_max_depth = min(d.out.min_max_depth, e.fields.int("max"));
                d.out.min_background_depth = min(d.out.min_background_depth, e.fields.int("bg"));
            }
            "wbt_lat" => {
                d.out.latency_exceeded += 1;
                let lat = e.fields.int("lat").unwrap_or(0).max(0) as u64;
                d.out.max_read_latency_us = d.out.max_read_latency_us.max(lat);
            }
            _ => {}
        }
        true
    }

    pub fn block(&mut self, b: &BlockEvent) {
        let write = b.rwbs.is_write() && b.bytes > 0;
        let key = b.dev.to_string();
        match b.action {
            Action::Queue if write => {
                let d = self.devs.entry(key).or_default();
                d.out.write_bios += 1;
                d.queued.insert(b.sector, (b.ts, d.in_flight));
            }
            Action::GetRq if write => {
                let Some(d) = self.devs.get_mut(&key) else {
                    return;
                };
                if let Some((q, in_flight)) = d.queued.remove(&b.sector) {
                    let wait = b.ts.saturating_sub(q);
                    d.out.write_wait_ns += wait;
                    d.out.write_wait_max_ns = d.out.write_wait_max_ns.max(wait);
                    if wait >= WAIT_NS {
                        d.out.throttled_writes += 1;
                        d.out.max_in_flight_at_wait = d.out.max_in_flight_at_wait.max(in_flight);
                    }
                }
            }
            Action::Issue => {
                let d = self.devs.entry(key).or_default();
                d.in_flight += 1;
                if write {
                    d.issued.insert(b.sector, b.ts);
                }
            }
            Action::Complete => {
                let Some(d) = self.devs.get_mut(&key) else {
                    return;
                };
                // A preflushed write completes twice; the second has no data.
                if b.bytes > 0 || b.rwbs.is_flush() || !b.rwbs.is_write() {
                    d.in_flight = d.in_flight.saturating_sub(1);
                }
                if let Some(t) = write.then(|| d.issued.remove(&b.sector)).flatten() {
                    d.out.write_d2c_ns += b.ts.saturating_sub(t);
                }
            }
            _ => {}
        }
    }

    pub fn finish(self, last_ns: u64) -> WbtSummary {
        let devices = self
            .devs
            .into_iter()
            .filter(|(_, d)| d.out.steps > 0 || d.out.write_bios > 0)
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
